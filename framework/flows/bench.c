/* Bench (qhost_bench, `qhost bench`): warm-up, then repeated timed runs of a model, on
 * the host's reference path or lowered to a plugin's int8 kernels; reports median, min
 * and max latency, the ratio to the model's fp32 twin timed in the same run (in
 * alternating blocks of runs), and with a backend the coverage table, as text or JSON. */
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flows/coverage.h"
#include "flows/flows.h"
#include "core/error.h"
#include "lower/strip-qdq.h"
#include "exec/blas.h"
#include "io/npy.h"
#include "io/onnx.h"

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
  qh_tensors_free(t, n);
  return NULL;
}

static double median_of_sorted(const double *v, int n) {
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
  const char *model;
  FILE *out;
  int threads;
  const char *backend;   /* NULL: host reference */
  int warmup, runs;
  int profiled_runs;     /* runs of the model while the plan profiled (for the coverage) */
  double *ms;            /* sorted */
  double *fp32_ms;       /* sorted, or NULL when there is no fp32 twin */
  int fp32_dropped;      /* Q/DQ pairs dropped to make the fp32 twin */
  QhRunner *runner;
  const QhGraph *graph;  /* the (lowered) graph the runner runs */
} Bench;

static void add_latency(JsonBuilder *b, const double *ms, int runs) {
  json_builder_set_member_name(b, "median_ms");
  json_builder_add_double_value(b, median_of_sorted(ms, runs));
  json_builder_set_member_name(b, "min_ms");
  json_builder_add_double_value(b, ms[0]);
  json_builder_set_member_name(b, "max_ms");
  json_builder_add_double_value(b, ms[runs - 1]);
}

/* How idle OpenMP workers wait, which decides what a second thread gains (the runner
 * chooses GOMP_SPINCOUNT unless the user did): NULL with one thread. Owned by the caller. */
static char *openmp_wait(int threads) {
  if (threads <= 1)
    return NULL;
  const char *policy = g_getenv("OMP_WAIT_POLICY"), *spin = g_getenv("GOMP_SPINCOUNT");
  const char *why = g_getenv("QHOST_SPIN_CHOICE");
  if (policy != NULL)
    return g_strdup_printf("OMP_WAIT_POLICY=%s", policy);
  if (spin == NULL)
    return g_strdup("libgomp's default");
  return why != NULL ? g_strdup_printf("GOMP_SPINCOUNT=%s (%s)", spin, why) : g_strdup_printf("GOMP_SPINCOUNT=%s", spin);
}

static void print_json(const Bench *x) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "schema_version");
  json_builder_add_int_value(b, 1);
  json_builder_set_member_name(b, "model");
  json_builder_add_string_value(b, x->model);
  json_builder_set_member_name(b, "path");
  char *path = x->backend ? g_strdup_printf("plugin:%s", x->backend) : g_strdup("host:reference");
  json_builder_add_string_value(b, path);
  g_free(path);
  json_builder_set_member_name(b, "blas");
  json_builder_add_string_value(b, qh_blas_describe());
  json_builder_set_member_name(b, "threads");
  json_builder_add_int_value(b, x->threads);
  char *wait = openmp_wait(x->threads);
  if (wait != NULL) {
    json_builder_set_member_name(b, "openmp_wait");
    json_builder_add_string_value(b, wait);
    g_free(wait);
  }
  json_builder_set_member_name(b, "warmup");
  json_builder_add_int_value(b, x->warmup);
  json_builder_set_member_name(b, "runs");
  json_builder_add_int_value(b, x->runs);
  add_latency(b, x->ms, x->runs);
  if (x->fp32_ms) {
    json_builder_set_member_name(b, "fp32");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "qdq_pairs_dropped");
    json_builder_add_int_value(b, x->fp32_dropped);
    add_latency(b, x->fp32_ms, x->runs);
    json_builder_end_object(b);
    /* a run below the clock's resolution times 0: no ratio (JSON has no infinity) */
    double fp32_median = median_of_sorted(x->fp32_ms, x->runs);
    json_builder_set_member_name(b, "int8_over_fp32");
    if (fp32_median > 0)
      json_builder_add_double_value(b, median_of_sorted(x->ms, x->runs) / fp32_median);
    else
      json_builder_add_null_value(b);
  }
  QhLowering *l = qh_runner_lowering(x->runner);
  if (l) {
    QhCoverage c;
    QhPlan *plan = qh_runner_plan(x->runner);
    qh_coverage_compute(l, x->graph, plan, x->profiled_runs, &c);
    json_builder_set_member_name(b, "coverage");
    qh_coverage_json(l, plan, &c, x->profiled_runs, TRUE, b);
  }
  json_builder_end_object(b);
  qh_json_print(x->out, b);
}

static void print_text(const Bench *x) {
  double median = median_of_sorted(x->ms, x->runs);
  fprintf(x->out, "model: %s\n", x->model);
  if (x->backend)
    fprintf(x->out, "path: plugin:%s (int8 kernels for the units it claims; the rest host:reference)\n",
           x->backend);
  else
    fprintf(x->out, "path: host:reference (fp32, %s)\n", qh_blas_describe());
  fprintf(x->out, "threads: %d\nruns: %d (after %d warm-up)\nlatency: median %.3f ms [min %.3f - max %.3f]\n",
         x->threads, x->runs, x->warmup, median, x->ms[0], x->ms[x->runs - 1]);
  char *wait = openmp_wait(x->threads);
  if (wait != NULL)
    fprintf(x->out, "openmp wait: %s\n", wait);
  g_free(wait);
  if (x->fp32_ms) {
    double fm = median_of_sorted(x->fp32_ms, x->runs);
    char *ratio = fm > 0 ? g_strdup_printf("%.2fx", median / fm) : g_strdup("n/a (below the clock's resolution)");
    fprintf(x->out, "fp32 (%s, host:reference, same run): median %.3f ms [min %.3f - max %.3f]; "
           "ratio to fp32 %s\n",
           x->fp32_dropped ? "the model with its Q/DQ dropped" : "the same model", fm, x->fp32_ms[0],
           x->fp32_ms[x->runs - 1], ratio);
    g_free(ratio);
  }
  QhLowering *l = qh_runner_lowering(x->runner);
  if (l) {
    QhCoverage c;
    QhPlan *plan = qh_runner_plan(x->runner);
    qh_coverage_compute(l, x->graph, plan, x->profiled_runs, &c);
    qh_coverage_print(x->out, l, plan, &c, x->profiled_runs, TRUE);
  }
}

/* One timed run; FALSE with error set on failure. */
#define BENCH_BLOCK 10 /* timed runs of one path before the other's */

static gboolean timed_run(QhRunner *r, int n_outputs, double *ms, GError **error) {
  QhTensor **outs = NULL;
  gint64 t0 = g_get_monotonic_time();
  gboolean ok = qh_runner_run(r, &outs, error);
  gint64 t1 = g_get_monotonic_time();
  qh_tensors_free(outs, n_outputs);
  *ms = (double)(t1 - t0) / 1000.0;
  return ok;
}

gboolean qh_bench(const QhBenchOptions *o, FILE *out, GError **error) {
  int warmup = o->warmup, runs = o->runs;
  const char *model = o->model_path, *input = o->input_path;
  QhGraph *graph = NULL, *fp32_graph = NULL;
  QhTensor **inputs = NULL;
  QhRunner *runner = NULL, *fp32_runner = NULL;
  QhBackend *plugin = NULL;
  Bench x = {0};
  gboolean ok = FALSE;

  if ((graph = qh_load_model(model, error)) == NULL)
    goto out;
  inputs = input ? qh_read_inputs(graph, input, error) : synthetic_inputs(graph, error);
  if (inputs == NULL) {
    qh_error_prefix(error, input ? input : model);
    goto out;
  }
  if (!o->no_fp32 && (o->backend.name || qh_qdq_count(graph) > 0)) {
    if ((fp32_graph = qh_load_model(model, error)) == NULL ||
        !qh_qdq_strip(fp32_graph, &x.fp32_dropped, error) ||
        (fp32_runner = qh_runner_new(fp32_graph, inputs, o->backend.threads, NULL, error)) == NULL) {
      qh_error_prefix(error, model);
      goto out;
    }
  }
  if (o->backend.name && (plugin = qh_backend_choice_load(&o->backend, error)) == NULL)
    goto out;
  if ((runner = qh_runner_new(graph, inputs, o->backend.threads, plugin, error)) == NULL) {
    qh_error_prefix(error, model);
    goto out;
  }
  x = (Bench){.model = model, .out = out, .threads = o->backend.threads,
              .backend = plugin ? qh_backend_name(plugin) : NULL,
              .warmup = warmup, .runs = runs, .runner = runner, .graph = graph,
              .fp32_dropped = x.fp32_dropped};
  x.ms = g_new0(double, runs);
  if (fp32_runner)
    x.fp32_ms = g_new0(double, runs);
  gboolean tty = o->progress && !o->json;
  int n_out = (int)graph->outputs->len;
  /* The two paths alternate in blocks, so that both see the same machine state, and a
   * block starts with an untimed run of its path, so that its timed runs find that
   * model's weights in cache as a deployed model does: alternating run by run made
   * every int8 run of resnet18 follow its fp32 twin's 45 MB of weights (x86, 2
   * threads: 3.3 ms against 2.8 back to back). */
  double ms;
  for (int i = 0; i < warmup; i++) {
    if (!timed_run(runner, n_out, &ms, error) || (fp32_runner && !timed_run(fp32_runner, n_out, &ms, error)))
      goto run_failed;
    if (tty)
      fprintf(stderr, "\rwarm-up %d/%d", i + 1, warmup);
  }
  qh_plan_set_profiling(qh_runner_plan(runner), TRUE);
  for (int done = 0; done < runs;) {
    int n = MIN(BENCH_BLOCK, runs - done);
    for (int path = 0; path < (fp32_runner ? 2 : 1); path++) {
      QhRunner *r = path ? fp32_runner : runner;
      double *dst = path ? x.fp32_ms : x.ms;
      int rewarm = fp32_runner != NULL; /* the other path ran last (the warm-up too) */
      if (rewarm && !timed_run(r, n_out, &ms, error))
        goto run_failed;
      for (int k = 0; k < n; k++)
        if (!timed_run(r, n_out, &dst[done + k], error))
          goto run_failed;
      x.profiled_runs += path == 0 ? rewarm + n : 0;
    }
    done += n;
    if (tty)
      fprintf(stderr, "\rrun %d/%d", done, runs);
  }
  if (tty)
    fprintf(stderr, "\r\033[K");
  qsort(x.ms, (size_t)runs, sizeof(double), compare_doubles);
  if (x.fp32_ms)
    qsort(x.fp32_ms, (size_t)runs, sizeof(double), compare_doubles);
  if (o->json)
    print_json(&x);
  else
    print_text(&x);
  ok = TRUE;
  goto out;
run_failed:
  qh_error_prefix(error, model);
out:
  if (graph != NULL)
    qh_tensors_free(inputs, (int)graph->inputs->len);
  qh_runner_free(runner);
  qh_runner_free(fp32_runner);
  qh_backend_free(plugin);
  qh_graph_free(graph);
  qh_graph_free(fp32_graph);
  g_free(x.ms);
  g_free(x.fp32_ms);
  return ok;
}
