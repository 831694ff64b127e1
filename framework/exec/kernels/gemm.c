/* Gemm (alpha * A' B' + beta * C with optional transposes and C broadcast to [M, N])
 * and MatMul (NumPy matmul: 1-D operands promoted and their unit dimension dropped,
 * batch dimensions broadcast). Both run on qh_sgemm (oneDNN, or OpenBLAS when bit-compatible); a batched MatMul whose
 * right operand is a single matrix (PyTorch's Linear on an N-D input) is folded
 * into one tall sgemm. The naive twins are the triple loop in double precision. */
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/sgemm-private.h"

/* ---- Gemm ---- */

typedef struct {
  int64_t m, n, k;
  int64_t trans_a, trans_b;
  float alpha, beta;
  const QhTensor *c; /* NULL when omitted */
} GemmGeom;

static gboolean gemm_geom(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          GemmGeom *g, GError **error) {
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_F32, 0))
    return FALSE;
  g->c = n_inputs > 2 ? inputs[2] : NULL;
  if (g->c != NULL && !qh_kernel_check_dtype(node, inputs, n_inputs, 2, error, QH_DTYPE_F32, 0))
    return FALSE;
  if (!qh_node_attr_get_int(node, "transA", 0, &g->trans_a, error) ||
      !qh_node_attr_get_int(node, "transB", 0, &g->trans_b, error) ||
      !qh_node_attr_get_float(node, "alpha", 1.0f, &g->alpha, error) ||
      !qh_node_attr_get_float(node, "beta", 1.0f, &g->beta, error))
    return FALSE;
  const QhShape *as = &inputs[0]->shape, *bs = &inputs[1]->shape;
  if (as->rank != 2 || bs->rank != 2)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "A and B must be 2-D; got ranks %d and %d", as->rank, bs->rank);
  g->m = g->trans_a ? as->dims[1] : as->dims[0];
  g->k = g->trans_a ? as->dims[0] : as->dims[1];
  int64_t kb = g->trans_b ? bs->dims[1] : bs->dims[0];
  g->n = g->trans_b ? bs->dims[0] : bs->dims[1];
  if (g->m < 0 || g->n < 0 || g->k < 0 || kb < 0)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "A or B has an unknown dimension");
  if (g->k != kb)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "inner dimensions differ: A gives K = %" G_GINT64_FORMAT
                          ", B gives K = %" G_GINT64_FORMAT,
                          g->k, kb);
  if (g->c != NULL) {
    const QhShape *cs = &g->c->shape;
    gboolean ok = cs->rank <= 2;
    int64_t want[2] = {g->m, g->n};
    for (int i = 0; ok && i < cs->rank; i++) {
      int64_t d = cs->dims[i], t = want[2 - cs->rank + i];
      ok = d == 1 || d == t;
    }
    if (!ok) {
      char *s = qh_shape_to_string(cs);
      qh_kernel_fail(error, node, QH_ERROR_INVALID,
                     "C has shape %s, which does not broadcast to [%" G_GINT64_FORMAT
                     ", %" G_GINT64_FORMAT "]",
                     s, g->m, g->n);
      g_free(s);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean gemm_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                           QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  GemmGeom g;
  if (!gemm_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = qh_shape_make(2, (int64_t[]){g.m, g.n});
  return TRUE;
}

/* C's element for output (i, j) under unidirectional broadcasting. */
static float c_at(const QhTensor *c, int64_t i, int64_t j) {
  const float *v = qh_f32(c);
  const QhShape *s = &c->shape;
  if (s->rank == 0)
    return v[0];
  if (s->rank == 1)
    return v[s->dims[0] == 1 ? 0 : j];
  return v[(s->dims[0] == 1 ? 0 : i) * s->dims[1] + (s->dims[1] == 1 ? 0 : j)];
}

static gboolean gemm_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                         int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  GemmGeom g;
  if (!gemm_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  float *y = qh_f32(outputs[0]);
  if (g.m == 0 || g.n == 0)
    return TRUE;
  if (g.m > G_MAXINT || g.n > G_MAXINT || g.k > G_MAXINT)
    return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "the product is too large for sgemm");
  if (g.c != NULL) {
    for (int64_t i = 0; i < g.m; i++)
      for (int64_t j = 0; j < g.n; j++)
        y[i * g.n + j] = g.beta * c_at(g.c, i, j);
  } else {
    memset(y, 0, sizeof(float) * (size_t)(g.m * g.n));
  }
  if (g.k == 0)
    return TRUE;
  int lda = (int)(g.trans_a ? g.m : g.k), ldb = (int)(g.trans_b ? g.k : g.n);
  qh_sgemm(ctx, g.trans_a ? CblasTrans : CblasNoTrans,
           g.trans_b ? CblasTrans : CblasNoTrans, (int)g.m, (int)g.n, (int)g.k, g.alpha,
           qh_f32(inputs[0]), lda, qh_f32(inputs[1]), ldb, g.c != NULL ? 1.0f : 0.0f, y,
           (int)g.n);
  return TRUE;
}

static gboolean gemm_run_naive(QhExecContext *ctx, const QhNode *node,
                               const QhTensor *const *inputs, int n_inputs,
                               QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  (void)n_outputs;
  GemmGeom g;
  if (!gemm_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  const float *a = qh_f32(inputs[0]), *b = qh_f32(inputs[1]);
  float *y = qh_f32(outputs[0]);
  for (int64_t i = 0; i < g.m; i++)
    for (int64_t j = 0; j < g.n; j++) {
      double acc = 0.0;
      for (int64_t p = 0; p < g.k; p++) {
        float av = g.trans_a ? a[p * g.m + i] : a[i * g.k + p];
        float bv = g.trans_b ? b[j * g.k + p] : b[p * g.n + j];
        acc += (double)av * (double)bv;
      }
      double r = (double)g.alpha * acc;
      if (g.c != NULL)
        r += (double)g.beta * (double)c_at(g.c, i, j);
      y[i * g.n + j] = (float)r;
    }
  return TRUE;
}

static int64_t gemm_macs(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                         const QhTensor *outputs, int n_outputs) {
  if (n_inputs < 2 || inputs[0] == NULL || n_outputs < 1 || inputs[0]->shape.rank != 2 ||
      outputs[0].shape.rank != 2)
    return 0;
  int64_t trans_a = 0;
  if (!qh_node_attr_get_int(node, "transA", 0, &trans_a, NULL))
    return 0;
  int64_t k = inputs[0]->shape.dims[trans_a ? 0 : 1];
  return outputs[0].shape.dims[0] * outputs[0].shape.dims[1] * k;
}

/* ---- MatMul ---- */

typedef struct {
  int64_t m, n, k;
  QhShape batch;                /* broadcast batch dims */
  int64_t a_bstride[QH_MAX_RANK]; /* element stride of A's matrix per batch dim (0: broadcast) */
  int64_t b_bstride[QH_MAX_RANK];
  int64_t n_batch;
  gboolean a_vec, b_vec;        /* 1-D operands */
} MatMulGeom;

/* Matrix strides of a batch shape aligned to the right of batch. */
static void batch_strides(const QhShape *own, int own_rank, const QhShape *batch, int64_t mat,
                          int64_t *stride) {
  int64_t s = mat;
  for (int i = batch->rank - 1; i >= 0; i--) {
    int oi = i - (batch->rank - own_rank);
    int64_t d = oi >= 0 ? own->dims[oi] : 1;
    stride[i] = d == 1 ? 0 : s;
    s *= d;
  }
}

static gboolean matmul_geom(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            MatMulGeom *g, GError **error) {
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_F32, 0))
    return FALSE;
  const QhShape *as = &inputs[0]->shape, *bs = &inputs[1]->shape;
  if (as->rank < 1 || bs->rank < 1)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "MatMul operands must have rank >= 1");
  for (int i = 0; i < as->rank; i++)
    if (as->dims[i] < 0)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "A has an unknown dimension");
  for (int i = 0; i < bs->rank; i++)
    if (bs->dims[i] < 0)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "B has an unknown dimension");
  g->a_vec = as->rank == 1;
  g->b_vec = bs->rank == 1;
  g->m = g->a_vec ? 1 : as->dims[as->rank - 2];
  g->k = as->dims[as->rank - 1];
  int64_t kb = g->b_vec ? bs->dims[0] : bs->dims[bs->rank - 2];
  g->n = g->b_vec ? 1 : bs->dims[bs->rank - 1];
  if (g->k != kb) {
    char *sa = qh_shape_to_string(as), *sb = qh_shape_to_string(bs);
    qh_kernel_fail(error, node, QH_ERROR_INVALID,
                   "shapes %s and %s do not multiply: K = %" G_GINT64_FORMAT " vs %" G_GINT64_FORMAT,
                   sa, sb, g->k, kb);
    g_free(sa);
    g_free(sb);
    return FALSE;
  }
  QhShape ab = {.rank = MAX(as->rank - 2, 0)}, bb = {.rank = MAX(bs->rank - 2, 0)};
  memcpy(ab.dims, as->dims, sizeof(int64_t) * (size_t)ab.rank);
  memcpy(bb.dims, bs->dims, sizeof(int64_t) * (size_t)bb.rank);
  if (!qh_kernel_broadcast(node, &ab, &bb, &g->batch, error))
    return FALSE;
  batch_strides(&ab, ab.rank, &g->batch, g->m * g->k, g->a_bstride);
  batch_strides(&bb, bb.rank, &g->batch, g->k * g->n, g->b_bstride);
  g->n_batch = 1;
  for (int i = 0; i < g->batch.rank; i++)
    g->n_batch *= g->batch.dims[i];
  return TRUE;
}

static gboolean matmul_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  MatMulGeom g;
  if (!matmul_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  QhShape s = g.batch;
  if (!g.a_vec)
    s.dims[s.rank++] = g.m;
  if (!g.b_vec)
    s.dims[s.rank++] = g.n;
  int64_t numel;
  GError *local = NULL;
  if (!qh_shape_numel(&s, &numel, &local)) {
    qh_kernel_fail(error, node, QH_ERROR_LIMIT, "output: %s", local->message);
    g_error_free(local);
    return FALSE;
  }
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = s;
  return TRUE;
}

/* Offsets of batch entry b's A and B matrices. */
static void batch_offsets(const MatMulGeom *g, int64_t b, int64_t *oa, int64_t *ob) {
  *oa = *ob = 0;
  for (int i = g->batch.rank - 1; i >= 0; i--) {
    int64_t idx = b % g->batch.dims[i];
    b /= g->batch.dims[i];
    *oa += idx * g->a_bstride[i];
    *ob += idx * g->b_bstride[i];
  }
}

static gboolean matmul_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                           int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  MatMulGeom g;
  if (!matmul_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  const float *a = qh_f32(inputs[0]), *b = qh_f32(inputs[1]);
  float *y = qh_f32(outputs[0]);
  if (g.n_batch == 0 || g.m == 0 || g.n == 0)
    return TRUE;
  if (g.k == 0) {
    memset(y, 0, sizeof(float) * (size_t)(g.n_batch * g.m * g.n));
    return TRUE;
  }
  /* When B is one matrix and A's batches are contiguous, the batch folds into M. */
  gboolean b_single = TRUE, a_dense = TRUE;
  for (int i = 0; i < g.batch.rank; i++) {
    b_single = b_single && g.b_bstride[i] == 0;
    a_dense = a_dense && (g.a_bstride[i] != 0 || g.batch.dims[i] == 1);
  }
  int64_t rows = g.m, n_loop = g.n_batch;
  if (b_single && a_dense) {
    rows = g.m * g.n_batch;
    n_loop = 1;
  }
  if (rows > G_MAXINT || g.n > G_MAXINT || g.k > G_MAXINT)
    return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "the product is too large for sgemm");
  for (int64_t bi = 0; bi < n_loop; bi++) {
    int64_t oa, ob;
    batch_offsets(&g, bi, &oa, &ob);
    qh_sgemm(ctx, CblasNoTrans, CblasNoTrans, (int)rows, (int)g.n, (int)g.k, 1.0f,
             a + oa, (int)g.k, b + ob, (int)g.n, 0.0f, y + bi * g.m * g.n, (int)g.n);
  }
  return TRUE;
}

static gboolean matmul_run_naive(QhExecContext *ctx, const QhNode *node,
                                 const QhTensor *const *inputs, int n_inputs,
                                 QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  (void)n_outputs;
  MatMulGeom g;
  if (!matmul_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  const float *a = qh_f32(inputs[0]), *b = qh_f32(inputs[1]);
  float *y = qh_f32(outputs[0]);
  for (int64_t bi = 0; bi < g.n_batch; bi++) {
    int64_t oa, ob;
    batch_offsets(&g, bi, &oa, &ob);
    for (int64_t i = 0; i < g.m; i++)
      for (int64_t j = 0; j < g.n; j++) {
        double acc = 0.0;
        for (int64_t p = 0; p < g.k; p++)
          acc += (double)a[oa + i * g.k + p] * (double)b[ob + p * g.n + j];
        y[(bi * g.m + i) * g.n + j] = (float)acc;
      }
  }
  return TRUE;
}

static int64_t matmul_macs(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                           const QhTensor *outputs, int n_outputs) {
  (void)node;
  if (n_inputs < 2 || inputs[0] == NULL || n_outputs < 1 || inputs[0]->shape.rank < 1)
    return 0;
  /* batch * M * N is the output's element count */
  int64_t macs = inputs[0]->shape.dims[inputs[0]->shape.rank - 1];
  for (int i = 0; i < outputs[0].shape.rank; i++)
    macs *= outputs[0].shape.dims[i];
  return macs;
}

const QhOpDef qh_ops_gemm[] = {
    {"Gemm", 2, 3, 1, 1, gemm_infer, gemm_run, gemm_run_naive, gemm_macs},
    {"MatMul", 2, 2, 1, 1, matmul_infer, matmul_run, matmul_run_naive, matmul_macs},
    {NULL},
};
