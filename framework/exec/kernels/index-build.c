/* Reference kernels of Range and ScatterND, the ops exporters use to build index and
 * mask tensors (torchvision's swin builds its shifted-window attention mask with them):
 * Range's length depends on its inputs' values, so they must be constants (as they are
 * once the planner folds the shape arithmetic before them); ScatterND copies its data
 * and writes each update slice at its index tuple (reduction none, add or mul, opset
 * 16), refusing an index outside the data by name. Plain loops, their own reference. */
#include <math.h>
#include <string.h>

#include "exec/kernels/common.h"

/* ---- Range -------------------------------------------------------------------- */

static gboolean scalar_value(const QhNode *node, const QhTensor *t, const char *what, double *out,
                             GError **error) {
  if (t->data == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "%s must be a constant", what);
  if (qh_tensor_numel(t) != 1)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "%s must be a scalar", what);
  switch (t->dtype) {
  case QH_DTYPE_F32: *out = ((const float *)t->data)[0]; return TRUE;
  case QH_DTYPE_S64: *out = (double)((const int64_t *)t->data)[0]; return TRUE;
  case QH_DTYPE_S32: *out = ((const int32_t *)t->data)[0]; return TRUE;
  default:
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "%s of type %s is not supported", what,
                          qh_dtype_name(t->dtype));
  }
}

static gboolean range_params(const QhNode *node, const QhTensor *const *inputs, double *start, double *delta,
                             int64_t *n, GError **error) {
  double limit;
  if (!scalar_value(node, inputs[0], "start", start, error) ||
      !scalar_value(node, inputs[1], "limit", &limit, error) ||
      !scalar_value(node, inputs[2], "delta", delta, error))
    return FALSE;
  if (inputs[0]->dtype != inputs[1]->dtype || inputs[0]->dtype != inputs[2]->dtype)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "start, limit and delta must share a type");
  if (*delta == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "delta is zero");
  double count = ceil((limit - *start) / *delta);
  if (count > (double)(1LL << 40))
    return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "Range of %.0f elements", count);
  *n = count > 0 ? (int64_t)count : 0;
  return TRUE;
}

static gboolean range_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                            int n_outputs, GError **error) {
  (void)n_inputs, (void)n_outputs;
  double start = 0.0, delta = 0.0; /* set by range_params; initialised for -Wmaybe-uninitialized at -O0 */
  int64_t n;
  if (!range_params(node, inputs, &start, &delta, &n, error))
    return FALSE;
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = qh_shape_make(1, &n);
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean range_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_inputs, (void)n_outputs;
  double start = 0.0, delta = 0.0; /* set by range_params; initialised for -Wmaybe-uninitialized at -O0 */
  int64_t n;
  if (!range_params(node, inputs, &start, &delta, &n, error))
    return FALSE;
  /* ONNX: out[i] = start + i * delta, in the inputs' type */
  for (int64_t i = 0; i < n; i++) {
    if (outputs[0]->dtype == QH_DTYPE_F32)
      ((float *)outputs[0]->data)[i] = (float)start + (float)i * (float)delta;
    else if (outputs[0]->dtype == QH_DTYPE_S64)
      ((int64_t *)outputs[0]->data)[i] = (int64_t)start + i * (int64_t)delta;
    else
      ((int32_t *)outputs[0]->data)[i] = (int32_t)((int64_t)start + i * (int64_t)delta);
  }
  return TRUE;
}

/* ---- ScatterND ---------------------------------------------------------------- */

typedef enum { RED_NONE, RED_ADD, RED_MUL } Reduction;

static gboolean scatter_reduction(const QhNode *node, Reduction *red, GError **error) {
  const char *r = NULL;
  if (!qh_node_attr_get_string(node, "reduction", "none", &r, error))
    return FALSE;
  if (strcmp(r, "none") == 0)
    *red = RED_NONE;
  else if (strcmp(r, "add") == 0)
    *red = RED_ADD;
  else if (strcmp(r, "mul") == 0)
    *red = RED_MUL;
  else
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "reduction '%s' is not supported", r);
  return TRUE;
}

static gboolean scatter_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                              QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  Reduction red;
  if (!scatter_reduction(node, &red, error) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32, 0) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_S64, 0) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 2, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32, 0))
    return FALSE;
  const QhShape *d = &inputs[0]->shape, *ix = &inputs[1]->shape, *u = &inputs[2]->shape;
  if (inputs[2]->dtype != inputs[0]->dtype)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "updates must have the data's type");
  if (ix->rank < 1 || ix->dims[ix->rank - 1] < 1 || ix->dims[ix->rank - 1] > d->rank)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "indices' last dimension must be 1 to the data's rank");
  int64_t k = ix->dims[ix->rank - 1];
  /* updates: indices.shape[:-1] + data.shape[k:] */
  gboolean ok = u->rank == ix->rank - 1 + d->rank - (int)k;
  for (int i = 0; ok && i < ix->rank - 1; i++)
    ok = u->dims[i] == ix->dims[i];
  for (int i = 0; ok && i < d->rank - k; i++)
    ok = u->dims[ix->rank - 1 + i] == d->dims[k + i];
  if (!ok)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "updates' shape does not match indices and data");
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = *d;
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean scatter_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                            int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_inputs, (void)n_outputs;
  Reduction red;
  if (!scatter_reduction(node, &red, error))
    return FALSE;
  const QhTensor *data = inputs[0], *idx = inputs[1], *upd = inputs[2];
  QhTensor *out = outputs[0];
  memcpy(out->data, data->data, data->nbytes);
  int64_t k = idx->shape.dims[idx->shape.rank - 1], strides[QH_MAX_RANK];
  qh_shape_strides(&data->shape, strides);
  int64_t slice = k < data->shape.rank ? strides[k - 1] : 1;
  int64_t n_tuples = qh_tensor_numel(idx) / k;
  size_t es = qh_dtype_size(data->dtype);
  const int64_t *ix = idx->data;
  for (int64_t t = 0; t < n_tuples; t++) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; j++) {
      int64_t v = ix[t * k + j], dim = data->shape.dims[j];
      if (v < 0)
        v += dim;
      if (v < 0 || v >= dim)
        return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                              "index %" G_GINT64_FORMAT " is outside dimension %" G_GINT64_FORMAT " (size %"
                              G_GINT64_FORMAT ")", ix[t * k + j], j, dim);
      off += v * strides[j];
    }
    char *dst = (char *)out->data + (size_t)off * es;
    const char *src = (const char *)upd->data + (size_t)(t * slice) * es;
    if (red == RED_NONE) {
      memcpy(dst, src, (size_t)slice * es);
      continue;
    }
    for (int64_t i = 0; i < slice; i++) {
      if (data->dtype == QH_DTYPE_F32) {
        float *o = (float *)dst + i, v = ((const float *)src)[i];
        *o = red == RED_ADD ? *o + v : *o * v;
      } else if (data->dtype == QH_DTYPE_S64) {
        int64_t *o = (int64_t *)dst + i, v = ((const int64_t *)src)[i];
        *o = red == RED_ADD ? (int64_t)((uint64_t)*o + (uint64_t)v) : (int64_t)((uint64_t)*o * (uint64_t)v);
      } else {
        int32_t *o = (int32_t *)dst + i, v = ((const int32_t *)src)[i];
        *o = red == RED_ADD ? (int32_t)((uint32_t)*o + (uint32_t)v) : (int32_t)((uint32_t)*o * (uint32_t)v);
      }
    }
  }
  return TRUE;
}

const QhOpDef qh_ops_index_build[] = {
    {"Range", 3, 3, 1, 1, range_infer, range_run, NULL, NULL},
    {"ScatterND", 3, 3, 1, 1, scatter_infer, scatter_run, NULL, NULL},
    {NULL},
};
