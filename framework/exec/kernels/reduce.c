/* Reference kernel of ReduceMean: axes from the attribute (opset 13) or from a
 * constant second input (opset 18, with noop_with_empty_axes), keepdims default 1,
 * no axes meaning all. One walk over the input in memory order adds each element
 * into its output's double accumulator, so any set of axes costs the same and the
 * sum carries no float32 order effects. */
#include <math.h>

#include "exec/kernels/common.h"

/* Which axes of a rank-`rank` input are reduced (mask), and whether keepdims. */
static gboolean reduced_axes(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             int rank, gboolean *mask, gboolean *keepdims, GError **error) {
  int64_t keep, noop, n = -1;
  const int64_t *attr = NULL;
  int64_t *owned = NULL;
  if (!qh_node_attr_get_int(node, "keepdims", 1, &keep, error) ||
      !qh_node_attr_get_int(node, "noop_with_empty_axes", 0, &noop, error) ||
      !qh_node_attr_get_ints(node, "axes", &n, &attr, error))
    return FALSE;
  if (n_inputs >= 2 && inputs[1] != NULL) {
    if (attr != NULL)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "axes given both as attribute and as input");
    if (!qh_kernel_const_ints(node, inputs[1], "axes", &owned, &n, error))
      return FALSE;
    attr = owned;
  }
  *keepdims = keep != 0;
  for (int d = 0; d < rank; d++)
    mask[d] = n <= 0 && !noop;
  for (int64_t i = 0; i < MAX(n, 0); i++) {
    int a;
    if (!qh_kernel_axis(node, attr[i], rank, &a, error)) {
      g_free(owned);
      return FALSE;
    }
    if (mask[a]) {
      g_free(owned);
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "axis %d is listed twice", a);
    }
    mask[a] = TRUE;
  }
  g_free(owned);
  return TRUE;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                      QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0))
    return FALSE;
  const QhShape *s = &inputs[0]->shape;
  gboolean mask[QH_MAX_RANK], keep;
  if (!reduced_axes(node, inputs, n_inputs, s->rank, mask, &keep, error))
    return FALSE;
  QhShape out = {.rank = 0};
  for (int d = 0; d < s->rank; d++) {
    if (!mask[d])
      out.dims[out.rank++] = s->dims[d];
    else if (keep)
      out.dims[out.rank++] = 1;
  }
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = out;
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                    int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  (void)n_outputs;
  const QhShape *s = &inputs[0]->shape;
  const int rank = s->rank;
  gboolean mask[QH_MAX_RANK], keep;
  if (!reduced_axes(node, inputs, n_inputs, rank, mask, &keep, error))
    return FALSE;
  int64_t n_out = qh_tensor_numel(outputs[0]), n_in = qh_tensor_numel(inputs[0]);
  float *y = qh_f32(outputs[0]);
  int64_t count = 1;
  for (int d = 0; d < rank; d++)
    if (mask[d])
      count *= s->dims[d];
  if (count == 0) { /* the mean of nothing */
    for (int64_t i = 0; i < n_out; i++)
      y[i] = NAN;
    return TRUE;
  }
  double *acc = qh_aligned_alloc0(sizeof(double) * (size_t)MAX(n_out, 1));
  if (acc == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_NOMEM,
                          "out of memory for %" G_GINT64_FORMAT " accumulators", n_out);
  /* Output strides seen from the input: 0 along reduced axes. */
  int64_t ostr[QH_MAX_RANK], idx[QH_MAX_RANK] = {0}, st = 1;
  for (int d = rank - 1; d >= 0; d--) {
    ostr[d] = mask[d] ? 0 : st;
    st *= mask[d] ? 1 : s->dims[d];
  }
  const float *x = qh_f32(inputs[0]);
  int64_t off = 0;
  for (int64_t i = 0; i < n_in; i++) {
    acc[off] += x[i];
    for (int d = rank - 1; d >= 0; d--) {
      off += ostr[d];
      if (++idx[d] < s->dims[d])
        break;
      off -= ostr[d] * s->dims[d];
      idx[d] = 0;
    }
  }
  for (int64_t i = 0; i < n_out; i++)
    y[i] = (float)(acc[i] / (double)count);
  qh_aligned_free(acc);
  return TRUE;
}

const QhOpDef qh_ops_reduce[] = {
    {"ReduceMean", 1, 2, 1, 1, infer, run, NULL, NULL},
    {NULL},
};
