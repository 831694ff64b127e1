/* What the fused-group unit tests share (test_fused_host.c, test_fused_matmul.c): graph
 * builders (fresh names, scalar and int64 constants, outputs), a plan run whose failure
 * fails the test, the fused / node-by-node (a counting value hook) / naive runs, the
 * largest difference relative to the largest reference value (over the tensor, or row by
 * row), and freeing a run's outputs. Header-only; every function aborts the test on error. */
#ifndef QH_TESTS_UNIT_FUSED_CHECK_H
#define QH_TESTS_UNIT_FUSED_CHECK_H

#include <math.h>
#include <string.h>

#include "core/graph.h"
#include "exec/plan.h"

/* A name not used before in this test program: prefix_N (the buffer is reused). */
static inline const char *fresh(const char *prefix) {
  static char buf[64];
  static int n;
  g_snprintf(buf, sizeof buf, "%s_%d", prefix, n++);
  return buf;
}

static inline int scalar(QhGraph *g, float value) {
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &(QhShape){.rank = 0}, NULL);
  *(float *)t->data = value;
  QhValue *v = qh_graph_add_value(g, fresh("k"), NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

static inline int ints(QhGraph *g, int n, const int64_t *v) {
  QhTensor *t = qh_tensor_new(QH_DTYPE_S64, &(QhShape){.rank = 1, .dims = {n}}, NULL);
  memcpy(t->data, v, sizeof(int64_t) * (size_t)n);
  QhValue *val = qh_graph_add_value(g, fresh("ints"), NULL);
  qh_value_set_initializer(val, t);
  return val->id;
}

static inline void output(QhGraph *g, int v) {
  qh_graph_value(g, v)->is_output = TRUE;
  g_array_append_val(g->outputs, v);
}

static inline gboolean watch(gpointer data, int value_id, const QhTensor *v, GError **error) {
  (void)value_id, (void)v, (void)error;
  (*(int *)data)++;
  return TRUE;
}

/* The plan's outputs on inputs x (owned by the caller, freed with free_outs). */
static inline QhTensor **run(QhPlan *plan, QhExecContext *ctx, QhTensor *const *x) {
  QhTensor **outs = NULL;
  GError *error = NULL;
  g_assert_true(qh_plan_run(plan, ctx, (const QhTensor *const *)x, &outs, &error));
  g_assert_no_error(error);
  return outs;
}

static inline double rel_diff(const QhTensor *a, const QhTensor *b) {
  double diff = 0.0, mag = 1e-30;
  const float *x = a->data, *y = b->data;
  for (size_t i = 0; i < a->nbytes / sizeof(float); i++) {
    diff = MAX(diff, fabs((double)x[i] - (double)y[i]));
    mag = MAX(mag, fabs((double)y[i]));
  }
  return diff / mag;
}

/* The largest difference relative to the largest |reference| of its row (rows of the last
 * dim's n elements): the fused host groups' tolerance. Both tensors' NaNs must be at the
 * same places (a NaN elsewhere gives +inf). */
static inline double row_rel_diff(const QhTensor *a, const QhTensor *b) {
  const int64_t n = b->shape.rank > 0 ? MAX(b->shape.dims[b->shape.rank - 1], 1) : 1;
  const int64_t total = (int64_t)(b->nbytes / sizeof(float));
  const float *x = a->data, *y = b->data;
  double worst = 0.0;
  for (int64_t r = 0; r < total; r += n) {
    double diff = 0.0, mag = 1e-30;
    for (int64_t i = r; i < MIN(r + n, total); i++) {
      if (isnan(x[i]) || isnan(y[i])) {
        if (isnan(x[i]) != isnan(y[i]))
          return INFINITY;
        continue;
      }
      diff = MAX(diff, fabs((double)x[i] - (double)y[i]));
      mag = MAX(mag, fabs((double)y[i]));
    }
    worst = MAX(worst, diff / mag);
  }
  return worst;
}

/* The three runs every fused-group test compares: the plan as it runs (fused), with a
 * value hook that only counts (so each node runs on its own, and the hook must see values),
 * and on the naive kernels. The caller frees the three output arrays. */
static inline void run_three_ways(QhPlan *plan, QhExecContext *ctx, QhTensor *const *x, QhTensor ***fast,
                                  QhTensor ***each, QhTensor ***naive) {
  *fast = run(plan, ctx, x);
  int seen = 0;
  qh_plan_set_value_hook(plan, watch, &seen);
  *each = run(plan, ctx, x);
  g_assert_cmpint(seen, >, 0);
  qh_plan_set_value_hook(plan, NULL, NULL);
  qh_plan_use_naive_kernels(plan, TRUE);
  *naive = run(plan, ctx, x);
  qh_plan_use_naive_kernels(plan, FALSE);
}

static inline void free_outs(QhTensor **outs, int n) {
  for (int i = 0; i < n; i++)
    qh_tensor_free(outs[i]);
  g_free(outs);
}

#endif
