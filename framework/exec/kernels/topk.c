/* Reference kernel of TopK (opset 11 semantics: K as a constant input, axis,
 * largest, sorted): the K largest (or smallest) elements along one axis and their
 * int64 indices, which detection heads and beam-search style decoders export. Each
 * slice along the axis is copied into (value, index) pairs and sorted with qsort by
 * value, then index, so equal values come out in index order as ONNX Runtime gives
 * them; NaN ranks above every number (NumPy's order); int64 ranks through double,
 * exact below 2^53. Output is always sorted, which
 * sorted=0 permits. The sort is its own reference. */
#include <math.h>
#include <stdlib.h>

#include "exec/kernels/common.h"

typedef struct {
  double v;
  int64_t i;
} Pair;

static int rank_cmp(double a, double b) {
  if (isnan(a) || isnan(b))
    return isnan(a) - isnan(b);
  return (a > b) - (a < b);
}

static int cmp_largest(const void *pa, const void *pb) {
  const Pair *a = pa, *b = pb;
  int c = rank_cmp(b->v, a->v);
  return c != 0 ? c : (a->i > b->i) - (a->i < b->i);
}

static int cmp_smallest(const void *pa, const void *pb) {
  const Pair *a = pa, *b = pb;
  int c = rank_cmp(a->v, b->v);
  return c != 0 ? c : (a->i > b->i) - (a->i < b->i);
}

static gboolean params(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int *axis, int64_t *k,
                       gboolean *largest, GError **error) {
  int64_t a, l, s, *v = NULL, n = 0;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32, 0) ||
      !qh_node_attr_get_int(node, "axis", -1, &a, error) ||
      !qh_node_attr_get_int(node, "largest", 1, &l, error) ||
      !qh_node_attr_get_int(node, "sorted", 1, &s, error) ||
      !qh_kernel_const_ints(node, n_inputs > 1 ? inputs[1] : NULL, "K", &v, &n, error))
    return FALSE;
  *largest = l != 0;
  if (n != 1) {
    g_free(v);
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "K must hold one value");
  }
  *k = v[0];
  g_free(v);
  if (inputs[0]->shape.rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input must have rank >= 1");
  if (!qh_kernel_axis(node, a, inputs[0]->shape.rank, axis, error))
    return FALSE;
  if (*k < 0 || *k > inputs[0]->shape.dims[*axis])
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "K = %" G_GINT64_FORMAT " is outside [0, %" G_GINT64_FORMAT "] (axis %d)", *k,
                          inputs[0]->shape.dims[*axis], *axis);
  return TRUE;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                      int n_outputs, GError **error) {
  int axis;
  int64_t k;
  gboolean largest;
  if (!params(node, inputs, n_inputs, &axis, &k, &largest, error))
    return FALSE;
  QhShape s = inputs[0]->shape;
  s.dims[axis] = k;
  for (int o = 0; o < n_outputs; o++) {
    outputs[o].dtype = o == 0 ? inputs[0]->dtype : QH_DTYPE_S64;
    outputs[o].shape = s;
    outputs[o].data = NULL;
  }
  return TRUE;
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                    QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  int axis;
  int64_t k;
  gboolean largest;
  if (!params(node, inputs, n_inputs, &axis, &k, &largest, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  int64_t outer = 1, inner = 1, dim = x->shape.dims[axis];
  for (int d = 0; d < axis; d++)
    outer *= x->shape.dims[d];
  for (int d = axis + 1; d < x->shape.rank; d++)
    inner *= x->shape.dims[d];
  if (k == 0 || outer * inner == 0)
    return TRUE;
  Pair *pairs = g_try_new(Pair, dim);
  if (pairs == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_NOMEM, "out of memory for %" G_GINT64_FORMAT " elements",
                          dim);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t t = 0; t < dim; t++) {
        int64_t e = (o * dim + t) * inner + i;
        pairs[t].i = t;
        pairs[t].v = x->dtype == QH_DTYPE_F32   ? ((const float *)x->data)[e]
                     : x->dtype == QH_DTYPE_S32 ? ((const int32_t *)x->data)[e]
                                                : (double)((const int64_t *)x->data)[e];
      }
      qsort(pairs, (size_t)dim, sizeof(Pair), largest ? cmp_largest : cmp_smallest);
      for (int64_t t = 0; t < k; t++) {
        int64_t e = (o * k + t) * inner + i, src = (o * dim + pairs[t].i) * inner + i;
        if (x->dtype == QH_DTYPE_F32)
          ((float *)outputs[0]->data)[e] = ((const float *)x->data)[src];
        else if (x->dtype == QH_DTYPE_S32)
          ((int32_t *)outputs[0]->data)[e] = ((const int32_t *)x->data)[src];
        else
          ((int64_t *)outputs[0]->data)[e] = ((const int64_t *)x->data)[src];
        if (n_outputs > 1 && outputs[1] != NULL)
          ((int64_t *)outputs[1]->data)[e] = pairs[t].i;
      }
    }
  g_free(pairs);
  return TRUE;
}

const QhOpDef qh_ops_topk[] = {
    {"TopK", 2, 2, 1, 2, infer, run, NULL, NULL},
    {NULL},
};
