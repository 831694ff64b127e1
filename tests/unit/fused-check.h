/* What the fused-group unit tests share (test_fused_host.c, test_fused_matmul.c): a plan
 * run whose failure fails the test, a value hook that only counts (a watched run takes the
 * unfused nodes), the largest difference relative to the largest reference value, and
 * freeing a run's outputs. Header-only; every function aborts the test on error. */
#ifndef QH_TESTS_UNIT_FUSED_CHECK_H
#define QH_TESTS_UNIT_FUSED_CHECK_H

#include <math.h>

#include "exec/plan.h"

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

static inline void free_outs(QhTensor **outs, int n) {
  for (int i = 0; i < n; i++)
    qh_tensor_free(outs[i]);
  g_free(outs);
}

#endif
