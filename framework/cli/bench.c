/* `qhost bench`: warm-up, then repeated timed runs of a model on the host's
 * reference path; prints median, min and max latency (text, or JSON with
 * --json). Later backends add their kernels and coverage to the same command. */
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "exec/blas.h"
#include "io/npy.h"

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Deterministic inputs in [-1, 1) for each graph input at its declared shape
 * (symbolic dimensions bound to 1). */
static QhTensor **synthetic_inputs(const QhGraph *graph, GError **error) {
  int n = (int)graph->inputs->len;
  QhTensor **t = g_new0(QhTensor *, (gsize)n + 1);
  GRand *rng = g_rand_new_with_seed(42);
  for (int i = 0; i < n; i++) {
    const QhValue *v = qh_graph_value(graph, g_array_index(graph->inputs, int, i));
    QhShape s = v->shape;
    if (s.rank < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                  "input '%s' declares no shape; give data with --input", v->name);
      goto fail;
    }
    for (int d = 0; d < s.rank; d++)
      if (s.dims[d] < 0)
        s.dims[d] = 1;
    if ((t[i] = qh_tensor_new(v->dtype, &s, error)) == NULL) {
      g_prefix_error(error, "input '%s': ", v->name);
      goto fail;
    }
    if (v->dtype == QH_DTYPE_F32) {
      float *p = t[i]->data;
      for (int64_t k = 0; k < qh_tensor_numel(t[i]); k++)
        p[k] = (float)g_rand_double_range(rng, -1.0, 1.0);
    }
  }
  g_rand_free(rng);
  return t;
fail:
  g_rand_free(rng);
  qh_cli_free_tensors(t, n);
  return NULL;
}

static double median_of_sorted(const double *v, int n) {
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void print_json(const char *model, const QhCliCommon *c, int warmup, int runs,
                       const double *ms) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "schema_version");
  json_builder_add_int_value(b, 1);
  json_builder_set_member_name(b, "model");
  json_builder_add_string_value(b, model);
  json_builder_set_member_name(b, "path");
  json_builder_add_string_value(b, "host:reference");
  json_builder_set_member_name(b, "blas");
  json_builder_add_string_value(b, qh_blas_describe());
  json_builder_set_member_name(b, "threads");
  json_builder_add_int_value(b, c->threads);
  json_builder_set_member_name(b, "warmup");
  json_builder_add_int_value(b, warmup);
  json_builder_set_member_name(b, "runs");
  json_builder_add_int_value(b, runs);
  json_builder_set_member_name(b, "median_ms");
  json_builder_add_double_value(b, median_of_sorted(ms, runs));
  json_builder_set_member_name(b, "min_ms");
  json_builder_add_double_value(b, ms[0]);
  json_builder_set_member_name(b, "max_ms");
  json_builder_add_double_value(b, ms[runs - 1]);
  json_builder_end_object(b);
  qh_cli_print_json(b);
}

int qh_cli_bench(int argc, char **argv) {
  char *input = NULL;
  int warmup = 3, runs = 20;
  gboolean as_json = FALSE;
  QhCliCommon common = {0};
  const GOptionEntry entries[] = {
      {"input", 'i', 0, G_OPTION_ARG_FILENAME, &input,
       "Input data (default: seeded random values at the declared shapes)", "X.npy|X.npz"},
      {"warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "Untimed runs first (default 3)", "N"},
      {"runs", 0, 0, G_OPTION_ARG_INT, &runs, "Timed runs (default 20)", "N"},
      {"json", 0, 0, G_OPTION_ARG_NONE, &as_json, "Print JSON (schema_version 1)", NULL},
      G_OPTION_ENTRY_NULL};
  int status = QH_EXIT_USAGE;
  QhGraph *graph = NULL;
  QhTensor **inputs = NULL;
  QhCliRunner *runner = NULL;
  double *ms = NULL;
  GError *error = NULL;

  if (!qh_cli_parse("bench", "MODEL.onnx", "Time MODEL.onnx on the host's reference kernels.",
                    entries, &common, &argc, &argv))
    goto out;
  if (argc != 2) {
    status = qh_cli_usage_error("bench", argc < 2 ? "missing MODEL.onnx" : "more than one model given");
    goto out;
  }
  if (warmup < 0 || runs < 1 || runs > 100000) {
    status = qh_cli_usage_error("bench", "--warmup must be >= 0 and --runs between 1 and 100000");
    goto out;
  }
  status = QH_EXIT_FAILURE;
  const char *model = argv[1];
  if ((graph = qh_cli_load_model(model, &error)) == NULL)
    goto fail;
  inputs = input ? qh_cli_read_inputs(graph, input, &error) : synthetic_inputs(graph, &error);
  if (inputs == NULL) {
    qh_error_prefix(&error, input ? input : model);
    goto fail;
  }
  if ((runner = qh_cli_runner_new(graph, inputs, common.threads, &error)) == NULL) {
    qh_error_prefix(&error, model);
    goto fail;
  }
  ms = g_new0(double, runs);
  gboolean tty = qh_cli_is_tty() && !as_json;
  for (int i = 0; i < warmup + runs; i++) {
    QhTensor **outs = NULL;
    gint64 t0 = g_get_monotonic_time();
    gboolean ok = qh_cli_runner_run(runner, &outs, &error);
    gint64 t1 = g_get_monotonic_time();
    qh_cli_free_tensors(outs, (int)graph->outputs->len);
    if (!ok) {
      qh_error_prefix(&error, model);
      goto fail;
    }
    if (i >= warmup)
      ms[i - warmup] = (double)(t1 - t0) / 1000.0;
    if (tty)
      fprintf(stderr, "\r%s %d/%d", i < warmup ? "warm-up" : "run", i < warmup ? i + 1 : i - warmup + 1,
              i < warmup ? warmup : runs);
  }
  if (tty)
    fprintf(stderr, "\r\033[K");
  qsort(ms, (size_t)runs, sizeof(double), compare_doubles);
  if (as_json) {
    print_json(model, &common, warmup, runs, ms);
  } else {
    double median = median_of_sorted(ms, runs);
    printf("model: %s\npath: host:reference (fp32, %s)\nthreads: %d\n"
           "runs: %d (after %d warm-up)\nlatency: median %.3f ms [min %.3f - max %.3f]\n",
           model, qh_blas_describe(), common.threads, runs, warmup, median, ms[0], ms[runs - 1]);
  }
  status = QH_EXIT_OK;
  goto out;
fail:
  status = qh_cli_report(error);
out:
  if (graph != NULL)
    qh_cli_free_tensors(inputs, (int)graph->inputs->len);
  qh_cli_runner_free(runner);
  qh_graph_free(graph);
  g_free(ms);
  g_free(input);
  return status;
}
