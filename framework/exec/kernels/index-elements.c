/* Reference kernels of the element-wise index ops transformer exports write:
 * GatherElements (take_along_dim, relative-position lookups), Trilu (torch.triu/tril,
 * causal masks at opset 14+) and CumSum (position ids from attention masks). Each is
 * one loop over the output resolving every element on its own, its own reference.
 * GatherElements checks every index against its axis before reading. */
#include <string.h>

#include "exec/kernels/common.h"

/* ---- GatherElements ---- */

static gboolean ge_axis(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int *axis,
                        GError **error) {
  int64_t a;
  if (n_inputs < 1 || inputs[0] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input 0 is missing");
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_S64, QH_DTYPE_S32, 0) ||
      !qh_node_attr_get_int(node, "axis", 0, &a, error))
    return FALSE;
  const QhShape *d = &inputs[0]->shape, *ix = &inputs[1]->shape;
  if (d->rank == 0 || ix->rank != d->rank)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "data (rank %d) and indices (rank %d) must have the "
                          "same rank >= 1",
                          d->rank, ix->rank);
  return qh_kernel_axis(node, a, d->rank, axis, error);
}

static gboolean ge_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                         int n_outputs, GError **error) {
  (void)n_outputs;
  int axis;
  if (!ge_axis(node, inputs, n_inputs, &axis, error))
    return FALSE;
  const QhShape *d = &inputs[0]->shape, *ix = &inputs[1]->shape;
  for (int i = 0; i < d->rank; i++)
    if (i != axis && ix->dims[i] > d->dims[i])
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "indices dimension %d (%" G_GINT64_FORMAT ") exceeds data's (%" G_GINT64_FORMAT
                            ")",
                            i, ix->dims[i], d->dims[i]);
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = *ix;
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean ge_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                       QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  int axis;
  if (!ge_axis(node, inputs, n_inputs, &axis, error))
    return FALSE;
  const QhTensor *x = inputs[0], *ix = inputs[1];
  int rank = x->shape.rank;
  int64_t dim = x->shape.dims[axis], xs[QH_MAX_RANK], idx[QH_MAX_RANK] = {0};
  qh_shape_strides(&x->shape, xs);
  size_t es = qh_dtype_size(x->dtype);
  int64_t n = qh_tensor_numel(ix);
  for (int64_t e = 0; e < n; e++) {
    int64_t k = ix->dtype == QH_DTYPE_S64 ? ((const int64_t *)ix->data)[e] : ((const int32_t *)ix->data)[e];
    if (k < -dim || k >= dim)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "index %" G_GINT64_FORMAT " is out of range [-%" G_GINT64_FORMAT
                            ", %" G_GINT64_FORMAT ") on axis %d",
                            k, dim, dim, axis);
    if (k < 0)
      k += dim;
    int64_t off = 0;
    for (int d = 0; d < rank; d++)
      off += (d == axis ? k : idx[d]) * xs[d];
    memcpy((guint8 *)outputs[0]->data + (size_t)e * es, (const guint8 *)x->data + (size_t)off * es, es);
    for (int d = rank - 1; d >= 0; d--) {
      if (++idx[d] < ix->shape.dims[d])
        break;
      idx[d] = 0;
    }
  }
  return TRUE;
}

/* ---- Trilu ---- */

static gboolean trilu_k(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int64_t *k,
                        gboolean *upper, GError **error) {
  int64_t u;
  if (n_inputs < 1 || inputs[0] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input 0 is missing");
  if (!qh_node_attr_get_int(node, "upper", 1, &u, error))
    return FALSE;
  *upper = u != 0;
  *k = 0;
  if (inputs[0]->shape.rank < 2)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input must have rank >= 2, not %d",
                          inputs[0]->shape.rank);
  if (n_inputs >= 2 && inputs[1] != NULL) {
    int64_t *v = NULL, n = 0;
    if (!qh_kernel_const_ints(node, inputs[1], "k", &v, &n, error))
      return FALSE;
    if (n != 1 || inputs[1]->shape.rank != 0) {
      g_free(v);
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "k must be a scalar");
    }
    *k = v[0];
    g_free(v);
  }
  return TRUE;
}

static gboolean trilu_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int64_t k;
  gboolean upper;
  if (!trilu_k(node, inputs, n_inputs, &k, &upper, error))
    return FALSE;
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = inputs[0]->shape;
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean trilu_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  int64_t k;
  gboolean upper;
  if (!trilu_k(node, inputs, n_inputs, &k, &upper, error))
    return FALSE;
  const QhShape *s = &inputs[0]->shape;
  int64_t rows = s->dims[s->rank - 2], cols = s->dims[s->rank - 1];
  int64_t n = qh_tensor_numel(inputs[0]);
  size_t es = qh_dtype_size(inputs[0]->dtype);
  const guint8 *x = inputs[0]->data;
  guint8 *y = outputs[0]->data;
  for (int64_t e = 0; e < n; e++) {
    int64_t j = e % cols, i = (e / cols) % rows;
    /* upper keeps j - i >= k, lower keeps j - i <= k */
    gboolean keep = upper ? j - i >= k : j - i <= k;
    if (keep)
      memcpy(y + (size_t)e * es, x + (size_t)e * es, es);
    else
      memset(y + (size_t)e * es, 0, es);
  }
  return TRUE;
}

/* ---- CumSum ---- */

static gboolean cumsum_params(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int *axis,
                              gboolean *exclusive, gboolean *reverse, GError **error) {
  int64_t ex, rev, *v = NULL, n = 0;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32, 0) ||
      !qh_node_attr_get_int(node, "exclusive", 0, &ex, error) ||
      !qh_node_attr_get_int(node, "reverse", 0, &rev, error) ||
      !qh_kernel_const_ints(node, n_inputs > 1 ? inputs[1] : NULL, "axis", &v, &n, error))
    return FALSE;
  *exclusive = ex != 0;
  *reverse = rev != 0;
  if (n != 1 || inputs[1]->shape.rank > 1) {
    g_free(v);
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "axis must hold one value");
  }
  int64_t a = v[0];
  g_free(v);
  if (inputs[0]->shape.rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input must have rank >= 1");
  return qh_kernel_axis(node, a, inputs[0]->shape.rank, axis, error);
}

static gboolean cumsum_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int axis;
  gboolean ex, rev;
  if (!cumsum_params(node, inputs, n_inputs, &axis, &ex, &rev, error))
    return FALSE;
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = inputs[0]->shape;
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean cumsum_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                           int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  int axis;
  gboolean ex, rev;
  if (!cumsum_params(node, inputs, n_inputs, &axis, &ex, &rev, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  int64_t outer = 1, inner = 1, dim = x->shape.dims[axis];
  for (int d = 0; d < axis; d++)
    outer *= x->shape.dims[d];
  for (int d = axis + 1; d < x->shape.rank; d++)
    inner *= x->shape.dims[d];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      /* float32 sums in float32, in order, as ONNX Runtime does; ints wrap */
      float accf = 0;
      int64_t acci = 0;
      for (int64_t t = 0; t < dim; t++) {
        int64_t k = rev ? dim - 1 - t : t, e = (o * dim + k) * inner + i;
        switch (x->dtype) {
        case QH_DTYPE_F32: {
          float v = ((const float *)x->data)[e];
          ((float *)outputs[0]->data)[e] = ex ? accf : accf + v;
          accf += v;
          break;
        }
        case QH_DTYPE_S64: {
          int64_t v = ((const int64_t *)x->data)[e];
          ((int64_t *)outputs[0]->data)[e] = ex ? acci : (int64_t)((uint64_t)acci + (uint64_t)v);
          acci = (int64_t)((uint64_t)acci + (uint64_t)v);
          break;
        }
        default: {
          int32_t v = ((const int32_t *)x->data)[e];
          ((int32_t *)outputs[0]->data)[e] = (int32_t)(ex ? (uint32_t)acci : (uint32_t)acci + (uint32_t)v);
          acci = (int32_t)((uint32_t)acci + (uint32_t)v);
          break;
        }
        }
      }
    }
  return TRUE;
}

const QhOpDef qh_ops_index_elements[] = {
    {"GatherElements", 2, 2, 1, 1, ge_infer, ge_run, NULL, NULL},
    {"Trilu", 1, 2, 1, 1, trilu_infer, trilu_run, NULL, NULL},
    {"CumSum", 2, 2, 1, 1, cumsum_infer, cumsum_run, NULL, NULL},
    {NULL},
};
