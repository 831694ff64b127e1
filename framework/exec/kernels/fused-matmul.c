/* The transposed-operand MatMul group (fused-matmul.h): per batch entry, one qh_sgemm
 * with the m, n, k of the MatMul kernel's own per-batch call (kernels/gemm.c: equal batch
 * dims never fold into M), whose A and B are read in place from the Transposes' inputs
 * (a leading dimension, and the trans flag when the Transpose swapped the unit-stride
 * axis into the rows) and whose C is written in place into the output Transpose's
 * result (a leading dimension). The unfused nodes are the slow twin: the Transposes copy,
 * then the same GEMM shapes run on contiguous copies (ctest unit/test_fused_matmul
 * compares the two, and the naive triple loop). Not bit for bit: both sgemms choose
 * their kernel by the trans flags, and some sum in another order for a stored-transposed
 * operand (oneDNN 2.6 for B when M < 16, OpenBLAS at 49x49x32); within 1e-5 of the
 * largest value, the MatMul tests' tolerance. */
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/kernels/fused-matmul.h"
#include "exec/sgemm-private.h"

/* One operand's matrices as strided views of its data. */
typedef struct {
  const float *data;
  int64_t rows, cols;              /* of the operand as the MatMul sees it */
  CBLAS_TRANSPOSE trans;           /* CblasTrans: stored column by column */
  int64_t ld;
  int64_t bstride[QH_MAX_RANK];    /* element stride per batch axis */
} Operand;

static void contiguous_strides(const QhShape *s, int64_t *stride) {
  int64_t acc = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    stride[i] = acc;
    acc *= s->dims[i];
  }
}

/* The operand's geometry; `data` is where its src (or the scaled copy) lies. */
static void operand_view(const QhTmmOperand *o, const QhTensor *src, const float *data, Operand *v) {
  const int r = src->shape.rank;
  int64_t sx[QH_MAX_RANK], st[QH_MAX_RANK], dims[QH_MAX_RANK];
  contiguous_strides(&src->shape, sx);
  for (int i = 0; i < r; i++) {
    const int p = o->transposed ? o->perm[i] : i;
    st[i] = sx[p];
    dims[i] = src->shape.dims[p];
  }
  v->data = data;
  v->rows = dims[r - 2];
  v->cols = dims[r - 1];
  if (st[r - 1] == 1) {
    v->trans = CblasNoTrans;
    v->ld = MAX(st[r - 2], MAX(v->cols, 1));
  } else { /* the plan checked perm[r - 2] == r - 1: the rows have unit stride */
    v->trans = CblasTrans;
    v->ld = MAX(st[r - 1], MAX(v->rows, 1));
  }
  for (int i = 0; i < r - 2; i++)
    v->bstride[i] = st[i];
}

/* Runs the scale node on the untransposed src into the scale node's own output slot
 * (shaped as src there: the same elements in the Transpose's input order). */
static gboolean scale_src(QhExecContext *ctx, const QhTmmOperand *o, const QhTensor *const *live,
                          const float **data, GError **error) {
  const QhTensor *src = live[o->src];
  *data = qh_f32(src);
  if (o->scale == NULL)
    return TRUE;
  QhTensor out = {QH_DTYPE_F32, src->shape, live[o->scaled]->data, src->nbytes};
  const QhTensor *in[2];
  in[o->scale_slot] = src;
  in[1 - o->scale_slot] = live[o->scale->inputs[1 - o->scale_slot]];
  QhTensor *outs[1] = {&out};
  ctx->constant_inputs = G_GUINT64_CONSTANT(1) << (1 - o->scale_slot);
  const gboolean ok = o->scale_def->run(ctx, o->scale, in, 2, outs, 1, error);
  ctx->constant_inputs = 0;
  *data = out.data;
  return ok;
}

gboolean qh_fused_matmul_run(QhExecContext *ctx, const QhTransposedMatMul *t,
                             const QhTensor *const *live, QhTensor *y, GError **error) {
  const float *da, *db;
  if (!scale_src(ctx, &t->a, live, &da, error) || !scale_src(ctx, &t->b, live, &db, error))
    return FALSE;
  const QhTensor *sa = live[t->a.src], *sb = live[t->b.src];
  Operand a, b;
  operand_view(&t->a, sa, da, &a);
  operand_view(&t->b, sb, db, &b);
  const int r = sa->shape.rank;
  /* the MatMul's result [batch..., m, n] inside y */
  QhShape mm = {.rank = r};
  for (int i = 0; i < r - 2; i++)
    mm.dims[i] = t->a.transposed ? sa->shape.dims[t->a.perm[i]] : sa->shape.dims[i];
  mm.dims[r - 2] = a.rows;
  mm.dims[r - 1] = b.cols;
  int64_t sy[QH_MAX_RANK];
  if (t->out_transposed) {
    int64_t so[QH_MAX_RANK];
    contiguous_strides(&y->shape, so);
    for (int j = 0; j < r; j++) /* out axis j is the MatMul's axis out_perm[j] */
      sy[t->out_perm[j]] = so[j];
  } else {
    contiguous_strides(&mm, sy);
  }
  const int64_t m = a.rows, n = b.cols, k = a.cols;
  int64_t n_batch = 1;
  for (int i = 0; i < r - 2; i++)
    n_batch *= mm.dims[i];
  float *c = qh_f32(y);
  if (n_batch == 0 || m == 0 || n == 0)
    return TRUE;
  if (k == 0) {
    memset(c, 0, y->nbytes);
    return TRUE;
  }
  const int64_t ldc = MAX(sy[r - 2], n);
  if (m > G_MAXINT || n > G_MAXINT || k > G_MAXINT || a.ld > G_MAXINT || b.ld > G_MAXINT || ldc > G_MAXINT)
    return qh_kernel_fail(error, t->matmul, QH_ERROR_LIMIT, "the product is too large for sgemm");
  for (int64_t bi = 0; bi < n_batch; bi++) {
    int64_t oa = 0, ob = 0, oc = 0, rest = bi;
    for (int i = r - 3; i >= 0; i--) {
      const int64_t idx = rest % mm.dims[i];
      rest /= mm.dims[i];
      oa += idx * a.bstride[i];
      ob += idx * b.bstride[i];
      oc += idx * sy[i];
    }
    qh_sgemm(ctx, a.trans, b.trans, (int)m, (int)n, (int)k, t->a.alpha * t->b.alpha, a.data + oa, (int)a.ld, b.data + ob,
             (int)b.ld, 0.0f, c + oc, (int)ldc);
  }
  return TRUE;
}
