/* `qhost run`: run a model on .npy/.npz inputs (a qhost session) and write the outputs;
 * with --labels, also print the top-1 predictions and the accuracy. */
#include <stdio.h>

#include "cli/cli.h"

/* The labels of --labels: a 1-D int64 or int32 array. */
static int64_t label_at(const QhostTensor *labels, int64_t i) {
  return labels->dtype == QHOST_DTYPE_INT64 ? ((const int64_t *)labels->data)[i]
                                             : ((const int32_t *)labels->data)[i];
}

/* Top-1 class per row of a [N, K] (or [N, 1, ..., K]) float output; the exit status. */
static int report_accuracy(const QhostTensor *logits, const char *labels_path) {
  QhostValues *values = NULL;
  QhostTensor labels;
  QhostStatus *st = qhost_values_read_file(labels_path, &values);
  if (st == NULL)
    st = qhost_values_get(values, 0, &labels);
  if (st) {
    qhost_values_free(values);
    return qh_cli_fail(st);
  }
  int status = QH_EXIT_FAILURE;
  int64_t n = labels.rank == 1 ? labels.shape[0] : -1;
  int64_t k = logits->rank >= 1 ? logits->shape[logits->rank - 1] : 0;
  int64_t total = (int64_t)(logits->nbytes / qhost_dtype_size(logits->dtype));
  if (logits->dtype != QHOST_DTYPE_FLOAT32) {
    fprintf(stderr, "qhost: --labels needs a float32 output, not %s\n", qhost_dtype_name(logits->dtype));
  } else if (n < 0 || (labels.dtype != QHOST_DTYPE_INT64 && labels.dtype != QHOST_DTYPE_INT32)) {
    fprintf(stderr, "qhost: %s: labels must be a 1-D int64 or int32 array\n", labels_path);
  } else if (k <= 0 || total != n * k) {
    GString *s = g_string_new("");
    for (int d = 0; d < logits->rank; d++)
      g_string_append_printf(s, "%s%" G_GINT64_FORMAT, d ? ", " : "", logits->shape[d]);
    fprintf(stderr, "qhost: %s: %" G_GINT64_FORMAT " labels do not match the model's output of shape [%s]\n",
            labels_path, n, s->str);
    g_string_free(s, TRUE);
  } else {
    int64_t correct = 0;
    const float *p = logits->data;
    printf("predictions:");
    for (int64_t i = 0; i < n; i++) {
      int64_t best = 0;
      for (int64_t j = 1; j < k; j++)
        if (p[i * k + j] > p[i * k + best])
          best = j;
      correct += best == label_at(&labels, i);
      if (i < 32)
        printf(" %" G_GINT64_FORMAT, best);
    }
    printf("%s\n", n > 32 ? " ..." : "");
    printf("accuracy: %.2f%% (%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT ")\n",
           n ? 100.0 * (double)correct / (double)n : 0.0, correct, n);
    status = QH_EXIT_OK;
  }
  qhost_values_free(values);
  return status;
}

/* Load, read the inputs, run; *outputs on success. */
static QhostStatus *run_model(const char *path, const char *input, const QhostOptions *options,
                              QhostValues **outputs) {
  QhostModel *model = NULL;
  QhostValues *inputs = NULL;
  QhostSession *session = NULL;
  QhostStatus *st = qhost_model_load(path, &model);
  if (st == NULL)
    st = qhost_model_read_inputs(model, input, &inputs);
  if (st == NULL)
    st = qhost_session_new(model, options, &session);
  if (st == NULL) {
    size_t n = qhost_values_count(inputs);
    QhostTensor *tensors = g_new0(QhostTensor, n + 1);
    for (size_t i = 0; i < n; i++)
      qhost_status_free(qhost_values_get(inputs, i, &tensors[i]));
    st = qhost_session_run(session, tensors, n, outputs);
    g_free(tensors);
  }
  qhost_session_free(session);
  qhost_values_free(inputs);
  qhost_model_free(model);
  return st;
}

int qh_cli_run(int argc, char **argv) {
  char *input = NULL, *output = NULL, *labels = NULL, *backend = NULL;
  QhCliCommon common = {.uses_plugins = TRUE};
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
  QhostValues *outputs = NULL;
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
  QhostOptions *options = qh_cli_options(&common, backend);
  QhostStatus *st = run_model(argv[1], input, options, &outputs);
  qhost_options_free(options);
  QhostTensor first;
  if (st == NULL && labels != NULL && (st = qhost_values_get(outputs, 0, &first)) == NULL &&
      (status = report_accuracy(&first, labels)) != QH_EXIT_OK)
    goto out;
  if (st == NULL && output != NULL)
    st = qhost_values_write_file(outputs, output);
  status = st ? qh_cli_fail(st) : QH_EXIT_OK;
out:
  qhost_values_free(outputs);
  g_free(backend);
  g_free(input);
  g_free(output);
  g_free(labels);
  return status;
}
