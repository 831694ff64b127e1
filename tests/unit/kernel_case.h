/* A harness for unit tests of kernels: builds one node in a QhGraph and calls its
 * QhOpDef the way the planner does (infer sees constant inputs' data only, then run
 * writes outputs allocated from the inferred shapes), with checks for outputs and
 * error messages. Header-only so each test executable includes it. */
#ifndef QH_TESTS_KERNEL_CASE_H
#define QH_TESTS_KERNEL_CASE_H

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "exec/kernels/common.h"

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define NARGS(T, ...) ((int)(sizeof((T[]){__VA_ARGS__}) / sizeof(T)))
#define I64(...) \
  mk(QH_DTYPE_S64, 1, DIMS(NARGS(int64_t, __VA_ARGS__)), (const int64_t[]){__VA_ARGS__})
#define F32V(...) ((const float[]){__VA_ARGS__})

typedef struct {
  QhGraph *g;
  QhNode *node;
  const QhOpDef *def;
  int n_in, n_out;
  QhTensor *in[8];
  gboolean dynamic[8]; /* not constant: infer sees the shape only */
  QhTensor *out[4];
} Case;

static inline QhTensor *mk(QhDType dt, int rank, const int64_t *dims, const void *data) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(dt, &s, NULL);
  g_assert_nonnull(t);
  if (data != NULL && t->nbytes > 0)
    memcpy(t->data, data, t->nbytes);
  return t;
}

static inline QhTensor *iota(QhDType dt, int rank, const int64_t *dims) {
  QhTensor *t = mk(dt, rank, dims, NULL);
  int64_t n = qh_tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    switch (dt) {
    case QH_DTYPE_F32: qh_f32(t)[i] = (float)i; break;
    case QH_DTYPE_S64: ((int64_t *)t->data)[i] = i; break;
    case QH_DTYPE_S32: ((int32_t *)t->data)[i] = (int32_t)i; break;
    default: ((guint8 *)t->data)[i * (int64_t)qh_dtype_size(dt)] = (guint8)i; break;
    }
  return t;
}

static inline Case *case_new(const char *op, int n_in, int n_out) {
  Case *c = g_new0(Case, 1);
  c->g = qh_graph_new();
  c->def = qh_op_find("", op);
  g_assert_nonnull(c->def);
  int ins[8], outs[4];
  for (int i = 0; i < n_in; i++) {
    char *name = g_strdup_printf("in%d", i);
    ins[i] = qh_graph_add_value(c->g, name, NULL)->id;
    g_free(name);
  }
  for (int i = 0; i < n_out; i++) {
    char *name = g_strdup_printf("out%d", i);
    outs[i] = qh_graph_add_value(c->g, name, NULL)->id;
    g_free(name);
  }
  c->node = qh_graph_add_node(c->g, "n", op, "", n_in, ins, n_out, outs, NULL);
  g_assert_nonnull(c->node);
  c->n_in = n_in;
  c->n_out = n_out;
  return c;
}

static inline void case_clear_outputs(Case *c) {
  for (int i = 0; i < c->n_out; i++) {
    qh_tensor_free(c->out[i]);
    c->out[i] = NULL;
  }
}

static inline void case_free(Case *c) {
  for (int i = 0; i < c->n_in; i++)
    qh_tensor_free(c->in[i]);
  case_clear_outputs(c);
  qh_graph_free(c->g);
  g_free(c);
}

static inline gboolean case_run(Case *c, gboolean naive, int threads, GError **error) {
  case_clear_outputs(c);
  QhTensor views[8];
  const QhTensor *infer_in[8];
  for (int i = 0; i < c->n_in; i++) {
    infer_in[i] = c->in[i];
    if (c->in[i] != NULL && c->dynamic[i]) {
      views[i] = *c->in[i];
      views[i].data = NULL;
      infer_in[i] = &views[i];
    }
  }
  QhTensor info[4] = {{0}};
  if (!c->def->infer(c->node, infer_in, c->n_in, info, c->n_out, error))
    return FALSE;
  for (int i = 0; i < c->n_out; i++) {
    c->out[i] = qh_tensor_new(info[i].dtype, &info[i].shape, error);
    g_assert_nonnull(c->out[i]);
    memset(c->out[i]->data, 0xA5, c->out[i]->nbytes); /* contents are undefined */
  }
  QhExecContext ctx = {.pool = qh_thread_pool_new(threads)};
  QhOpRunFn fn = naive && c->def->run_naive ? c->def->run_naive : c->def->run;
  gboolean ok = fn(&ctx, c->node, (const QhTensor *const *)c->in, c->n_in, c->out, c->n_out, error);
  qh_exec_context_clear(&ctx);
  qh_thread_pool_free(ctx.pool);
  return ok;
}

static inline void run_ok(Case *c, gboolean naive) {
  GError *error = NULL;
  gboolean ok = case_run(c, naive, naive ? 1 : 2, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
}

static inline void expect_error(Case *c, QhErrorCode code, const char *fragment) {
  GError *error = NULL;
  g_assert_false(case_run(c, FALSE, 1, &error));
  g_assert_error(error, QH_ERROR, code);
  if (strstr(error->message, fragment) == NULL || strstr(error->message, "node 'n' (") == NULL)
    g_error("message '%s' lacks '%s'", error->message, fragment);
  g_error_free(error);
}

static inline void check_shape(const QhTensor *t, int rank, const int64_t *dims) {
  QhShape want = qh_shape_make(rank, dims);
  if (!qh_shape_equal(&t->shape, &want)) {
    char *a = qh_shape_to_string(&t->shape), *b = qh_shape_to_string(&want);
    g_error("shape %s, expected %s", a, b);
  }
}

static inline void check_f32(const QhTensor *t, int rank, const int64_t *dims, const float *want,
                      float tol) {
  g_assert_cmpint(t->dtype, ==, QH_DTYPE_F32);
  check_shape(t, rank, dims);
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    if (!(fabsf(qh_f32(t)[i] - want[i]) <= tol))
      g_error("element %" G_GINT64_FORMAT ": %g, expected %g", i, (double)qh_f32(t)[i],
              (double)want[i]);
}

static inline void check_i64(const QhTensor *t, int rank, const int64_t *dims,
                             const int64_t *want) {
  g_assert_cmpint(t->dtype, ==, QH_DTYPE_S64);
  check_shape(t, rank, dims);
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    g_assert_cmpint(((int64_t *)t->data)[i], ==, want[i]);
}

/* Run fast (2 threads) and naive, check both against the same expectation. */
static inline void check_both_f32(Case *c, int rank, const int64_t *dims, const float *want,
                                  float tol) {
  for (int naive = 0; naive < 2; naive++) {
    run_ok(c, naive);
    check_f32(c->out[0], rank, dims, want, tol);
  }
}

static inline void compare_fast_naive(Case *c) {
  run_ok(c, TRUE);
  QhTensor *slow = qh_tensor_copy(c->out[0], NULL);
  run_ok(c, FALSE);
  g_assert_true(qh_shape_equal(&slow->shape, &c->out[0]->shape));
  g_assert_cmpmem(slow->data, slow->nbytes, c->out[0]->data, c->out[0]->nbytes);
  qh_tensor_free(slow);
}

static inline void random_fill(QhTensor *t, GRand *rng) {
  for (size_t i = 0; i < t->nbytes; i++)
    ((guint8 *)t->data)[i] = (guint8)g_rand_int(rng);
}

#endif
