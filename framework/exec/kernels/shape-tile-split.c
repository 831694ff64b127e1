/* Reference kernels of Tile and Split (opsets 13-17), which attention and recurrent
 * exports write to replicate masks and states and to cut fused projections (a
 * Linear producing q, k and v at once, an LSTM's gate blocks) into pieces. Both move
 * bytes without computing, so they take every element type. Tile copies whole input
 * rows, each output row from the input row its coordinates fold back to; Split copies
 * one contiguous block per outer index and output. Both are their own reference. */
#include <string.h>

#include "exec/kernels/common.h"

static gboolean set_output(const QhNode *node, QhTensor *out, QhDType dtype, const QhShape *shape,
                           GError **error) {
  int64_t n;
  GError *e = NULL;
  if (!qh_shape_numel(shape, &n, &e)) {
    qh_kernel_fail(error, node, (QhErrorCode)e->code, "%s", e->message);
    g_error_free(e);
    return FALSE;
  }
  out->dtype = dtype;
  out->shape = *shape;
  out->data = NULL;
  return TRUE;
}

/* ---- Tile ---- */

static gboolean tile_repeats(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             int64_t *repeats, GError **error) {
  if (n_inputs < 2 || inputs[0] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input 0 is missing");
  int64_t *v = NULL, n = 0;
  if (!qh_kernel_const_ints(node, inputs[1], "repeats", &v, &n, error))
    return FALSE;
  int rank = inputs[0]->shape.rank;
  gboolean ok = n == rank;
  if (!ok)
    qh_kernel_fail(error, node, QH_ERROR_INVALID,
                   "repeats has %" G_GINT64_FORMAT " entries for an input of rank %d", n, rank);
  for (int i = 0; ok && i < rank; i++) {
    if (v[i] < 0)
      ok = qh_kernel_fail(error, node, QH_ERROR_INVALID, "repeats[%d] is negative (%" G_GINT64_FORMAT ")", i,
                          v[i]);
    repeats[i] = v[i];
  }
  g_free(v);
  return ok;
}

static gboolean tile_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                           int n_outputs, GError **error) {
  (void)n_outputs;
  int64_t repeats[QH_MAX_RANK];
  if (!tile_repeats(node, inputs, n_inputs, repeats, error))
    return FALSE;
  QhShape out = inputs[0]->shape;
  for (int i = 0; i < out.rank; i++) {
    /* a product beyond the element limit would overflow before qh_shape_numel sees it */
    if (repeats[i] > 0 && out.dims[i] > QH_MAX_ELEMENTS / repeats[i])
      return qh_kernel_fail(error, node, QH_ERROR_LIMIT,
                            "dimension %d would be %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                            ", beyond the %" G_GINT64_FORMAT "-element limit",
                            i, out.dims[i], repeats[i], QH_MAX_ELEMENTS);
    out.dims[i] *= repeats[i];
  }
  return set_output(node, &outputs[0], inputs[0]->dtype, &out, error);
}

static gboolean tile_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                         QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  int64_t repeats[QH_MAX_RANK];
  if (!tile_repeats(node, inputs, n_inputs, repeats, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  QhTensor *y = outputs[0];
  if (qh_tensor_numel(y) == 0)
    return TRUE;
  size_t es = qh_dtype_size(x->dtype);
  if (x->shape.rank == 0) {
    memcpy(y->data, x->data, es);
    return TRUE;
  }
  int rank = x->shape.rank, last = rank - 1;
  int64_t in_str[QH_MAX_RANK], idx[QH_MAX_RANK] = {0};
  qh_shape_strides(&x->shape, in_str);
  size_t row = (size_t)x->shape.dims[last] * es;
  int64_t rows = qh_tensor_numel(y) / y->shape.dims[last];
  guint8 *dst = y->data;
  for (int64_t r = 0; r < rows; r++) {
    int64_t src = 0;
    for (int d = 0; d < last; d++)
      src += (idx[d] % x->shape.dims[d]) * in_str[d];
    for (int64_t k = 0; k < repeats[last]; k++, dst += row)
      memcpy(dst, (const guint8 *)x->data + (size_t)src * es, row);
    for (int d = last - 1; d >= 0; d--) {
      if (++idx[d] < y->shape.dims[d])
        break;
      idx[d] = 0;
    }
  }
  return TRUE;
}

/* ---- Split ---- */

/* The axis and each output's length along it: from the 'split' input (opset 13) or
 * attribute (opset 11), else equal parts, one per output (with opset 18's num_outputs,
 * ceil-sized parts and a smaller last one when the length does not divide). */
static gboolean split_sizes(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int n_outputs,
                            int *axis, int64_t *sizes, GError **error) {
  int64_t a, n = -1, num = 0;
  const int64_t *attr = NULL;
  if (n_inputs < 1 || inputs[0] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input 0 is missing");
  if (!qh_node_attr_get_int(node, "axis", 0, &a, error) ||
      !qh_node_attr_get_int(node, "num_outputs", 0, &num, error) ||
      !qh_node_attr_get_ints(node, "split", &n, &attr, error))
    return FALSE;
  if (inputs[0]->shape.rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input must have rank >= 1");
  if (!qh_kernel_axis(node, a, inputs[0]->shape.rank, axis, error))
    return FALSE;
  if (num != 0 && num != n_outputs)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "num_outputs is %" G_GINT64_FORMAT " but the node has %d outputs", num, n_outputs);
  int64_t dim = inputs[0]->shape.dims[*axis];
  int64_t *owned = NULL;
  if (n_inputs >= 2 && inputs[1] != NULL) {
    if (attr != NULL)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "split given both as attribute and as input");
    if (!qh_kernel_const_ints(node, inputs[1], "split", &owned, &n, error))
      return FALSE;
    attr = owned;
  }
  gboolean ok = TRUE;
  if (attr == NULL && num != 0 && dim % n_outputs != 0) {
    /* opset 18's num_outputs: ceil-sized chunks, the last one smaller */
    int64_t chunk = (dim + n_outputs - 1) / n_outputs;
    if (chunk * (n_outputs - 1) >= dim)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "axis %d of length %" G_GINT64_FORMAT " does not split into %d chunks of %" G_GINT64_FORMAT,
                            *axis, dim, n_outputs, chunk);
    for (int i = 0; i < n_outputs; i++)
      sizes[i] = i + 1 < n_outputs ? chunk : dim - chunk * (n_outputs - 1);
    return TRUE;
  }
  if (attr == NULL) {
    if (dim % n_outputs != 0)
      ok = qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "axis %d of length %" G_GINT64_FORMAT " does not split into %d equal parts", *axis,
                          dim, n_outputs);
    for (int i = 0; ok && i < n_outputs; i++)
      sizes[i] = dim / n_outputs;
    return ok;
  }
  int64_t total = 0;
  if (n != n_outputs)
    ok = qh_kernel_fail(error, node, QH_ERROR_INVALID,
                        "split has %" G_GINT64_FORMAT " entries for %d outputs", n, n_outputs);
  for (int i = 0; ok && i < n_outputs; i++) {
    if (attr[i] < 0 || attr[i] > dim)
      ok = qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "split[%d] = %" G_GINT64_FORMAT " is outside [0, %" G_GINT64_FORMAT "]", i, attr[i],
                          dim);
    else
      total += sizes[i] = attr[i];
  }
  if (ok && total != dim)
    ok = qh_kernel_fail(error, node, QH_ERROR_INVALID,
                        "split sums to %" G_GINT64_FORMAT ", not the axis length %" G_GINT64_FORMAT, total,
                        dim);
  g_free(owned);
  return ok;
}

#define MAX_SPLIT 4096

static gboolean split_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            QhTensor *outputs, int n_outputs, GError **error) {
  int axis;
  int64_t sizes[MAX_SPLIT];
  if (!split_sizes(node, inputs, n_inputs, n_outputs, &axis, sizes, error))
    return FALSE;
  for (int i = 0; i < n_outputs; i++) {
    QhShape s = inputs[0]->shape;
    s.dims[axis] = sizes[i];
    if (!set_output(node, &outputs[i], inputs[0]->dtype, &s, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean split_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  int axis;
  int64_t sizes[MAX_SPLIT];
  if (!split_sizes(node, inputs, n_inputs, n_outputs, &axis, sizes, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  size_t inner = qh_dtype_size(x->dtype);
  int64_t outer = 1;
  for (int d = 0; d < axis; d++)
    outer *= x->shape.dims[d];
  for (int d = axis + 1; d < x->shape.rank; d++)
    inner *= (size_t)x->shape.dims[d];
  const guint8 *src = x->data;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n_outputs; i++) {
      size_t block = (size_t)sizes[i] * inner;
      if (outputs[i] != NULL && block > 0)
        memcpy((guint8 *)outputs[i]->data + (size_t)o * block, src, block);
      src += block;
    }
  return TRUE;
}

const QhOpDef qh_ops_tile_split[] = {
    {"Tile", 2, 2, 1, 1, tile_infer, tile_run, NULL, NULL},
    {"Split", 1, 2, 1, MAX_SPLIT, split_infer, split_run, NULL, NULL},
    {NULL},
};
