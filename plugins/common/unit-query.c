/* Questions every lowering plugin asks about a QDQ node unit through the host API: is a
 * node of this op, what are its attributes (with defaults when absent), is a value's shape
 * fully known, are a tensor's quantization parameters usable, is an input a bias the
 * conv/linear kernels take, and is an activation the uint8 per-tensor kind they take (and
 * if not, the reason to decline with). The x86, fbgemm and qnnpack plugins each compile
 * this file in (SDK headers only). */
#include "unit-query.h"

#include <math.h>
#include <string.h>

int uq_qparams_sane(const QhQParams *q) {
  if (!q || q->struct_size < sizeof(QhQParams) || q->count < 1 || !q->scale || !q->zero_point)
    return 0;
  for (size_t i = 0; i < q->count; i++)
    if (!(q->scale[i] > 0.0f) || !isfinite(q->scale[i]))
      return 0;
  return 1;
}

const char *uq_act_problem(const QhQParams *q, int output) {
  if (!q)
    return output ? "float output is not supported" : "float input activation is not supported";
  if (!uq_qparams_sane(q))
    return "activation without valid quantization parameters";
  if (q->dtype != QH_DTYPE_UINT8)
    return output ? "output activation other than uint8 is not supported"
                  : "input activation other than uint8 is not supported";
  if (q->count != 1)
    return "per-channel activation is not supported";
  if (q->quant_min < 0 || q->quant_max > 255 || q->zero_point[0] < q->quant_min ||
      q->zero_point[0] > q->quant_max)
    return "activation range or zero point outside [0, 255]";
  return NULL;
}

int uq_op_is(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *op) {
  const char *t = host->node_op_type(g, node);
  return t && strcmp(t, op) == 0;
}

int64_t uq_attr_int(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name,
                        int64_t def) {
  int64_t v = def;
  QhStatus *st = host->node_attr_int(g, node, name, &v);
  host->status_free(st);
  return st ? def : v;
}

float uq_attr_float(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name,
                        float def) {
  float v = def;
  QhStatus *st = host->node_attr_float(g, node, name, &v);
  host->status_free(st);
  return st ? def : v;
}

/* n ints of attribute name into out (def when absent); 0 when present with another count. */
int uq_attr_ints(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name,
                     size_t n, int64_t def, int64_t *out) {
  const int64_t *v = NULL;
  size_t count = 0;
  QhStatus *st = host->node_attr_ints(g, node, name, &v, &count);
  for (size_t i = 0; i < n; i++)
    out[i] = def;
  if (st) {
    host->status_free(st);
    return 1;
  }
  if (count != n || !v)
    return 0;
  memcpy(out, v, n * sizeof *out);
  return 1;
}

const char *uq_window_2d(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *malformed,
                         int64_t ks[2], int64_t strides[2], int64_t pads[4], int64_t dilations[2]) {
  const char *auto_pad = NULL;
  QhStatus *st = host->node_attr_string(g, node, "auto_pad", &auto_pad);
  if (st)
    host->status_free(st);
  else if (auto_pad && strcmp(auto_pad, "NOTSET") != 0 && strcmp(auto_pad, "VALID") != 0)
    return "auto_pad SAME is not supported";
  if (!uq_attr_ints(host, g, node, "kernel_shape", 2, -1, ks) || !uq_attr_ints(host, g, node, "strides", 2, 1, strides) ||
      !uq_attr_ints(host, g, node, "pads", 4, 0, pads) || !uq_attr_ints(host, g, node, "dilations", 2, 1, dilations))
    return malformed;
  return NULL;
}

int32_t uq_known_shape(const QhHostApi *host, const QhGraphView *g, uint32_t v, int64_t *dims) {
  int32_t rank = -1;
  QhStatus *st = host->value_shape(g, v, dims, QH_MAX_RANK, &rank);
  if (st) {
    host->status_free(st);
    return -1;
  }
  if (rank < 0 || rank > QH_MAX_RANK)
    return -1;
  for (int32_t i = 0; i < rank; i++)
    if (dims[i] < 0)
      return -1;
  return rank;
}

const char *uq_bias_problem(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, size_t slot,
                            int64_t n, uint32_t *b_value, const QhQParams **bq) {
  *b_value = QH_INVALID_ID;
  *bq = NULL;
  if (u->input_roles[slot] != QH_ROLE_BIAS)
    return "third input is not a bias";
  uint32_t v = u->inputs[slot];
  if (!(host->value_flags(g, v) & QH_VALUE_CONSTANT))
    return "non-constant bias is not supported";
  int64_t dims[QH_MAX_RANK], numel = 1;
  int32_t rank = uq_known_shape(host, g, v, dims);
  for (int32_t i = 0; i < rank; i++)
    numel *= dims[i];
  if (rank < 0 || numel != n)
    return "bias must have one element per output channel";
  const QhQParams *q = u->input_qparams[slot];
  if (!q) {
    if (host->value_dtype(g, v) != QH_DTYPE_FLOAT)
      return "unquantized bias must be float";
  } else {
    if (host->value_dtype(g, v) != QH_DTYPE_INT32 || !uq_qparams_sane(q) || q->dtype != QH_DTYPE_INT32)
      return "quantized bias must be int32";
    if (q->count != 1 && (int64_t)q->count != n)
      return "int32 bias scales must be per tensor or per output channel";
    for (size_t i = 0; i < q->count; i++)
      if (q->zero_point[i] != 0)
        return "int32 bias with a non-zero zero point is not supported";
  }
  *b_value = v;
  *bq = q;
  return NULL;
}

/* A float constant scalar input of node; def when the slot is empty. */
static const char *const_scalar(const QhHostApi *host, const QhGraphView *g, uint32_t node, uint32_t slot,
                                float def, float *out) {
  *out = def;
  uint32_t v = host->node_input(g, node, slot);
  if (v == QH_INVALID_ID)
    return NULL;
  const void *d = NULL;
  size_t n = 0;
  if (!(host->value_flags(g, v) & QH_VALUE_CONSTANT) || host->value_dtype(g, v) != QH_DTYPE_FLOAT)
    return "Clip bounds must be float constants";
  QhStatus *st = host->value_data(g, v, &d, &n);
  if (st || !d || n != sizeof(float)) {
    host->status_free(st);
    return "Clip bounds must be float scalars";
  }
  memcpy(out, d, sizeof *out);
  return isnan(*out) ? "Clip bound is NaN" : NULL;
}

const char *uq_clip_bounds(const QhHostApi *host, const QhGraphView *g, uint32_t node, float *lo, float *hi) {
  /* opset 6's Clip carries them as attributes */
  const char *p;
  float amin = uq_attr_float(host, g, node, "min", -INFINITY), amax = uq_attr_float(host, g, node, "max", INFINITY);
  if ((p = const_scalar(host, g, node, 1, amin, lo)) || (p = const_scalar(host, g, node, 2, amax, hi)))
    return p;
  return *lo > *hi ? "Clip with min > max" : NULL;
}

int32_t uq_input_shape(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, uint32_t i,
                       int64_t *dims) {
  int32_t r = uq_known_shape(host, g, u->inputs[i], dims);
  uint32_t v = host->node_input(g, u->nodes[0], i);
  return r >= 0 || v == QH_INVALID_ID ? r : uq_known_shape(host, g, v, dims);
}

int uq_const_int64s(const QhHostApi *host, const QhGraphView *g, uint32_t node, uint32_t slot, size_t n,
                    int64_t *out) {
  uint32_t v = host->node_input(g, node, slot);
  const void *d = NULL;
  size_t bytes = 0;
  if (v == QH_INVALID_ID || !(host->value_flags(g, v) & QH_VALUE_CONSTANT) || host->value_dtype(g, v) != QH_DTYPE_INT64)
    return 0;
  QhStatus *st = host->value_data(g, v, &d, &bytes);
  if (st) {
    host->status_free(st);
    return 0;
  }
  if (!d || bytes != n * sizeof *out)
    return 0;
  memcpy(out, d, bytes);
  return 1;
}

int uq_resolve_shape(const int64_t *in, int in_rank, const int64_t *shape, int rank, int64_t *out) {
  int64_t total = 1, known = 1;
  int infer = -1;
  for (int i = 0; i < in_rank; i++)
    total *= in[i];
  for (int i = 0; i < rank; i++) {
    out[i] = shape[i] == 0 ? (i < in_rank ? in[i] : -2) : shape[i];
    if (out[i] == -1 && infer < 0)
      infer = i;
    else if (out[i] < 0)
      return 0;
    else
      known *= out[i];
  }
  if (infer >= 0) {
    if (known == 0 || total % known)
      return 0;
    out[infer] = total / known;
  }
  return infer >= 0 || known == total;
}

int uq_channel_operand(const int64_t *b, const int64_t *a) {
  return (b[0] == a[0] || b[0] == 1) && b[1] == a[1] && b[2] == 1 && b[3] == 1;
}

int uq_u8_view_ok(const QhTensorView *t) {
  if (!t || t->struct_size < sizeof(QhTensorView) || t->dtype != QH_DTYPE_UINT8 || t->rank < 0 ||
      t->rank > QH_MAX_RANK)
    return 0;
  for (int32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0)
      return 0;
  return 1;
}

size_t uq_numel(const QhTensorView *t) {
  size_t n = 1;
  for (int32_t i = 0; i < t->rank; i++)
    n *= (size_t)t->dims[i];
  return n;
}
