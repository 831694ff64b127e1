/* `qhost run`: run a model on .npy/.npz inputs with the host's reference kernels
 * and write the outputs; with --labels, also print top-1 predictions and accuracy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "io/npy.h"

/* Top-1 class per row of a [N, K] (or [N, 1, ..., K]) float output. */
static gboolean report_accuracy(const QhTensor *logits, const char *labels_path, GError **error) {
  QhTensor *labels = qh_npy_read(labels_path, error);
  if (labels == NULL)
    return FALSE;
  gboolean ok = FALSE;
  int64_t n = labels->shape.rank == 1 ? labels->shape.dims[0] : -1;
  int64_t k = logits->shape.rank >= 1 ? logits->shape.dims[logits->shape.rank - 1] : 0;
  int64_t total = qh_tensor_numel(logits);
  if (logits->dtype != QH_DTYPE_F32) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "--labels needs a float32 output, not %s",
                qh_dtype_name(logits->dtype));
  } else if (n < 0 || (labels->dtype != QH_DTYPE_S64 && labels->dtype != QH_DTYPE_S32)) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: labels must be a 1-D int64 or int32 array",
                labels_path);
  } else if (k <= 0 || total != n * k) {
    char *s = qh_shape_to_string(&logits->shape);
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                "%s: %" G_GINT64_FORMAT " labels do not match the model's output of shape %s",
                labels_path, n, s);
    g_free(s);
  } else {
    int64_t correct = 0;
    const float *p = logits->data;
    printf("predictions:");
    for (int64_t i = 0; i < n; i++) {
      int64_t best = 0;
      for (int64_t j = 1; j < k; j++)
        if (p[i * k + j] > p[i * k + best])
          best = j;
      int64_t label = labels->dtype == QH_DTYPE_S64 ? ((const int64_t *)labels->data)[i]
                                                    : ((const int32_t *)labels->data)[i];
      correct += best == label;
      if (i < 32)
        printf(" %" G_GINT64_FORMAT, best);
    }
    printf("%s\n", n > 32 ? " ..." : "");
    printf("accuracy: %.2f%% (%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT ")\n",
           n ? 100.0 * (double)correct / (double)n : 0.0, correct, n);
    ok = TRUE;
  }
  qh_tensor_free(labels);
  return ok;
}

int qh_cli_run(int argc, char **argv) {
  char *input = NULL, *output = NULL, *labels = NULL, *backend = NULL;
  QhCliCommon common = {.uses_plugins = TRUE};
  QhBackend *plugin = NULL;
  const GOptionEntry entries[] = {
      {"input", 'i', 0, G_OPTION_ARG_FILENAME, &input,
       "Input data: .npy for a single-input model, .npz keyed by input name", "X.npy|X.npz"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
       "Where to write the outputs (.npy for one output; .npz keyed by output name)", "Y.npy|Y.npz"},
      {"labels", 0, 0, G_OPTION_ARG_FILENAME, &labels,
       "Integer class labels: print top-1 predictions and accuracy", "L.npy"},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend,
       "Run the node units this backend plugin claims on its int8 kernels (name or path)", "NAME"},
      G_OPTION_ENTRY_NULL};
  int status = QH_EXIT_USAGE;
  QhGraph *graph = NULL;
  QhTensor **inputs = NULL, **outputs = NULL;
  QhCliRunner *runner = NULL;
  GError *error = NULL;

  if (!qh_cli_parse("run", "MODEL.onnx",
                    "Run MODEL.onnx on the host's reference kernels, or with --backend on a "
                    "plugin's int8 kernels for the QDQ node units it claims. Data with one "
                    "sample per row of the first axis runs sample by sample when the model's "
                    "inputs are fixed at batch 1.",
                    entries, &common, &argc, &argv))
    goto out;
  if (argc != 2) {
    status = qh_cli_usage_error("run", argc < 2 ? "missing MODEL.onnx" : "more than one model given");
    goto out;
  }
  if (input == NULL) {
    status = qh_cli_usage_error("run", "missing --input");
    goto out;
  }
  if (output == NULL && labels == NULL) {
    status = qh_cli_usage_error("run", "missing -o (or --labels)");
    goto out;
  }
  status = QH_EXIT_FAILURE;
  const char *model = argv[1];
  if ((graph = qh_cli_load_model(model, &error)) == NULL ||
      (inputs = qh_cli_read_inputs(graph, input, &error)) == NULL)
    goto fail;
  if (backend && (plugin = qh_cli_load_backend(&common, backend, &error)) == NULL)
    goto fail;
  if ((runner = qh_cli_runner_new(graph, inputs, common.threads, plugin, &error)) == NULL ||
      !qh_cli_runner_run(runner, &outputs, &error)) {
    qh_error_prefix(&error, model);
    goto fail;
  }
  if (labels != NULL && !report_accuracy(outputs[0], labels, &error))
    goto fail;
  if (output != NULL && !qh_cli_write_outputs(graph, outputs, output, &error))
    goto fail;
  status = QH_EXIT_OK;
  goto out;
fail:
  status = qh_cli_report(error);
out:
  if (graph != NULL) {
    qh_cli_free_tensors(outputs, (int)graph->outputs->len);
    qh_cli_free_tensors(inputs, (int)graph->inputs->len);
  }
  qh_cli_runner_free(runner);
  qh_backend_free(plugin);
  qh_graph_free(graph);
  g_free(backend);
  g_free(input);
  g_free(output);
  g_free(labels);
  return status;
}
