/* Reference kernels of the cast family: Cast (opset 13 semantics, among every element
 * type qhost knows) and ConstantOfShape. Exporters put both in QDQ graphs: PyTorch
 * writes QuantizeLinear -> Cast(to=uint8) -> DequantizeLinear and builds bias zero
 * points with ConstantOfShape -> Cast. ONNX leaves out-of-range float -> integer
 * conversion implementation-defined (C's cast is undefined behaviour there), so this
 * file pins it down: NaN becomes 0, other values are truncated toward zero and then
 * clamped to the target type's range (-inf and anything below the minimum give the
 * minimum, +inf and anything above the maximum give the maximum). Integer -> integer
 * conversions wrap modulo 2^bits as C and NumPy do; anything -> bool is "!= 0" (NaN
 * is true); bool -> anything is 0 or 1; float16 goes through float32, which is exact
 * for every integer float16 can represent. Each conversion is one obviously-correct
 * per-element loop, so there is no naive twin. */
#include <math.h>
#include <string.h>

#include "exec/kernels/common.h"

/* ---- element conversions ---- */

static gboolean is_float_type(QhDType dt) { return dt == QH_DTYPE_F32 || dt == QH_DTYPE_F16; }

static float load_float(const QhTensor *t, int64_t i) {
  if (t->dtype == QH_DTYPE_F16)
    return qh_f16_to_f32(((const guint16 *)t->data)[i]);
  return ((const float *)t->data)[i];
}

static int64_t load_int(const QhTensor *t, int64_t i) {
  switch (t->dtype) {
  case QH_DTYPE_U8: return ((const guint8 *)t->data)[i];
  case QH_DTYPE_S8: return ((const gint8 *)t->data)[i];
  case QH_DTYPE_U16: return ((const guint16 *)t->data)[i];
  case QH_DTYPE_S16: return ((const gint16 *)t->data)[i];
  case QH_DTYPE_S32: return ((const gint32 *)t->data)[i];
  case QH_DTYPE_BOOL: return ((const guint8 *)t->data)[i] != 0;
  default: return ((const int64_t *)t->data)[i];
  }
}

/* Two's-complement wrap of v to `bits` bits, computed in unsigned arithmetic so that
 * no out-of-range signed conversion (implementation-defined in C) happens. */
static int64_t wrap_signed(int64_t v, int bits) {
  uint64_t mask = (UINT64_C(1) << bits) - 1, u = (uint64_t)v & mask;
  uint64_t sign = UINT64_C(1) << (bits - 1);
  return u >= sign ? -(int64_t)(((~u) & mask) + 1) : (int64_t)u;
}

static void store_int(QhTensor *t, int64_t i, int64_t v) {
  switch (t->dtype) {
  case QH_DTYPE_F32: ((float *)t->data)[i] = (float)v; break;
  case QH_DTYPE_F16: ((guint16 *)t->data)[i] = qh_f32_to_f16((float)v); break;
  case QH_DTYPE_BOOL: ((guint8 *)t->data)[i] = v != 0; break;
  case QH_DTYPE_U8: ((guint8 *)t->data)[i] = (guint8)((uint64_t)v & 0xFF); break;
  case QH_DTYPE_S8: ((gint8 *)t->data)[i] = (gint8)wrap_signed(v, 8); break;
  case QH_DTYPE_U16: ((guint16 *)t->data)[i] = (guint16)((uint64_t)v & 0xFFFF); break;
  case QH_DTYPE_S16: ((gint16 *)t->data)[i] = (gint16)wrap_signed(v, 16); break;
  case QH_DTYPE_S32: ((gint32 *)t->data)[i] = (gint32)wrap_signed(v, 32); break;
  default: ((int64_t *)t->data)[i] = v; break;
  }
}

/* Truncate toward zero and clamp to [lo, hi]; NaN is 0 (see the file comment). The
 * comparisons are in double, where every bound except INT64_MAX is exact and
 * INT64_MAX rounds up to 2^63, so a value that passes both tests fits. */
static int64_t float_to_int(float x, int64_t lo, int64_t hi) {
  double d = (double)x;
  if (isnan(d))
    return 0;
  if (d >= (double)hi)
    return hi;
  if (d <= (double)lo)
    return lo;
  return (int64_t)d;
}

static void store_float(QhTensor *t, int64_t i, float x) {
  switch (t->dtype) {
  case QH_DTYPE_F32: ((float *)t->data)[i] = x; break;
  case QH_DTYPE_F16: ((guint16 *)t->data)[i] = qh_f32_to_f16(x); break;
  case QH_DTYPE_BOOL: ((guint8 *)t->data)[i] = x != 0.0f; break;
  case QH_DTYPE_U8: ((guint8 *)t->data)[i] = (guint8)float_to_int(x, 0, 255); break;
  case QH_DTYPE_S8: ((gint8 *)t->data)[i] = (gint8)float_to_int(x, -128, 127); break;
  case QH_DTYPE_U16: ((guint16 *)t->data)[i] = (guint16)float_to_int(x, 0, 65535); break;
  case QH_DTYPE_S16: ((gint16 *)t->data)[i] = (gint16)float_to_int(x, -32768, 32767); break;
  case QH_DTYPE_S32:
    ((gint32 *)t->data)[i] = (gint32)float_to_int(x, G_MININT32, G_MAXINT32);
    break;
  default: ((int64_t *)t->data)[i] = float_to_int(x, G_MININT64, G_MAXINT64); break;
  }
}

/* Convert n elements of in into out (both already typed and sized). */
static void convert(const QhTensor *in, QhTensor *out, int64_t n) {
  if (in->dtype == out->dtype) {
    if (in->data != out->data && out->nbytes > 0)
      memmove(out->data, in->data, MIN(in->nbytes, out->nbytes));
    return;
  }
  if (is_float_type(in->dtype))
    for (int64_t i = 0; i < n; i++)
      store_float(out, i, load_float(in, i));
  else
    for (int64_t i = 0; i < n; i++)
      store_int(out, i, load_int(in, i));
}

/* ---- Cast ---- */

static gboolean cast_target(const QhNode *node, QhDType *out, GError **error) {
  if (qh_node_attr(node, "to") == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "attribute 'to' is missing");
  int64_t to;
  if (!qh_node_attr_get_int(node, "to", 0, &to, error))
    return FALSE;
  /* 4-bit types hold weights behind DequantizeLinear only: Cast does not convert them */
  if (to < G_MININT32 || to > G_MAXINT32 || !qh_dtype_is_supported((int)to) || qh_dtype_is_4bit((QhDType)to))
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "target type %" G_GINT64_FORMAT " is not supported", to);
  *out = (QhDType)to;
  return TRUE;
}

static gboolean cast_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                           QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  QhDType to = QH_DTYPE_UNDEFINED;
  if (n_inputs < 1 || inputs[0] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input 0 is missing");
  if (!qh_dtype_is_supported(inputs[0]->dtype) || qh_dtype_is_4bit(inputs[0]->dtype))
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "input 0 has type %s",
                          qh_dtype_name(inputs[0]->dtype));
  if (!cast_target(node, &to, error))
    return FALSE;
  outputs[0].dtype = to;
  outputs[0].shape = inputs[0]->shape;
  return TRUE;
}

static gboolean cast_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                         int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)node, (void)n_inputs, (void)n_outputs, (void)error;
  convert(inputs[0], outputs[0], qh_tensor_numel(outputs[0]));
  return TRUE;
}

/* ---- ConstantOfShape ---- */

/* The fill value: the 'value' attribute's single element, or float32 0. */
static gboolean fill_value(const QhNode *node, const QhTensor **out, GError **error) {
  *out = NULL;
  const QhAttr *a = qh_node_attr(node, "value");
  if (a == NULL)
    return TRUE;
  if (a->type != QH_ATTR_TENSOR || a->t == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "attribute 'value' is not a tensor");
  if (!qh_dtype_is_supported(a->t->dtype))
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "attribute 'value' has type %s",
                          qh_dtype_name(a->t->dtype));
  int64_t n;
  GError *e = NULL;
  if (!qh_shape_numel(&a->t->shape, &n, &e) || n != 1 || a->t->data == NULL ||
      a->t->nbytes != qh_dtype_size(a->t->dtype)) {
    g_clear_error(&e);
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "attribute 'value' must hold exactly one element");
  }
  *out = a->t;
  return TRUE;
}

static gboolean cos_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  const QhTensor *value;
  int64_t *dims = NULL, n;
  if (!fill_value(node, &value, error) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_S64, 0) ||
      !qh_kernel_const_ints(node, inputs[0], "input", &dims, &n, error))
    return FALSE;
  gboolean ok = FALSE;
  QhShape s = {.rank = 0};
  if (inputs[0]->shape.rank != 1) {
    qh_kernel_fail(error, node, QH_ERROR_INVALID, "input must be 1-D, not rank %d",
                   inputs[0]->shape.rank);
    goto done;
  }
  if (n > QH_MAX_RANK) {
    qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                   "output rank %" G_GINT64_FORMAT " exceeds %d", n, QH_MAX_RANK);
    goto done;
  }
  s.rank = (int)n;
  for (int i = 0; i < s.rank; i++) {
    if (dims[i] < 0) {
      qh_kernel_fail(error, node, QH_ERROR_INVALID, "dimension %d is negative (%" G_GINT64_FORMAT
                     ")", i, dims[i]);
      goto done;
    }
    s.dims[i] = dims[i];
  }
  int64_t numel;
  GError *e = NULL;
  if (!qh_shape_numel(&s, &numel, &e)) {
    qh_kernel_fail(error, node, (QhErrorCode)e->code, "%s", e->message);
    g_error_free(e);
    goto done;
  }
  outputs[0].dtype = value ? value->dtype : QH_DTYPE_F32;
  outputs[0].shape = s;
  ok = TRUE;
done:
  g_free(dims);
  return ok;
}

static gboolean cos_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                        int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)inputs, (void)n_inputs, (void)n_outputs;
  const QhTensor *value;
  if (!fill_value(node, &value, error))
    return FALSE;
  QhTensor *o = outputs[0];
  size_t es = qh_dtype_size(o->dtype);
  if (value == NULL) {
    memset(o->data, 0, o->nbytes); /* float32 0 is all zero bits */
    return TRUE;
  }
  if (value->dtype != o->dtype)
    return qh_kernel_fail(error, node, QH_ERROR_FAILED, "output type differs from the planned one");
  for (size_t off = 0; off + es <= o->nbytes; off += es)
    memcpy((guint8 *)o->data + off, value->data, es);
  return TRUE;
}

const QhOpDef qh_ops_cast[] = {
    {"Cast", 1, 1, 1, 1, cast_infer, cast_run, NULL, NULL},
    {"ConstantOfShape", 1, 1, 1, 1, cos_infer, cos_run, NULL, NULL},
    {NULL},
};
