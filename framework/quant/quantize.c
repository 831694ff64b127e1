/* PyTorch 1.13's quantization arithmetic (docs/numerics.md §3, §4): the qparams of one
 * (min, max) pair and quantize / dequantize of float32 data. Every float32 operation is
 * written as its own rounded step so that results are bit-identical with ATen; the
 * file must not be compiled with FMA contraction (CMake builds it as ISO C11, where GCC
 * defaults to -ffp-contract=off; the pragma keeps that true under other flags). */
#pragma GCC optimize("fp-contract=off")

#include "quant/quantize.h"

#include <math.h>

#include "hostapi/sdk-private.h"

/* ATen converts float to int32 with cvttps2dq semantics: out of range (or NaN) gives
 * INT32_MIN. */
static int32_t f32_to_i32_x86(float v) {
  if (!(v >= -2147483648.0f && v < 2147483648.0f))
    return INT32_MIN;
  return (int32_t)v;
}

void qh_quant_calculate_qparams(float min, float max, int32_t qmin, int32_t qmax, int32_t qscheme,
                                int32_t dtype, gboolean has_range, float eps, float *out_scale,
                                int32_t *out_zero_point) {
  float mn = min < 0.0f ? min : 0.0f;
  float mx = max > 0.0f ? max : 0.0f;
  float scale;
  int32_t zp = 0;
  if (qscheme == QH_QSCHEME_PER_TENSOR_SYMMETRIC || qscheme == QH_QSCHEME_PER_CHANNEL_SYMMETRIC) {
    float neg = -mn;
    float a = neg > mx ? neg : mx;
    /* Python: float(quant_max - quant_min) / 2 in double, then float32. */
    float d = (float)((double)((int64_t)qmax - qmin) / 2.0);
    scale = a / d;
    if (!(scale >= eps))
      scale = eps;
    /* Later PyTorch's rule for uint16 (2^15, or the middle of a custom range) is the
     * uint8 one at 16 bits. */
    if (dtype == QH_DTYPE_UINT8 || dtype == QH_DTYPE_UINT16 || dtype == QH_DTYPE_UINT4)
      zp = has_range ? (int32_t)(((int64_t)qmin + qmax) >> 1)
           : dtype == QH_DTYPE_UINT8 ? 128 : dtype == QH_DTYPE_UINT16 ? 32768 : 8;
    else
      zp = 0;
  } else if (qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
    /* §3.4: raw min/max; the float zero point is rounded here, as observers refuse
     * this scheme (QhQuantParams holds integer zero points). */
    float span = max - min;
    scale = span / (float)((int64_t)qmax - qmin);
    if (!(scale > eps))
      scale = 1.0f;
    float fzp = -min / scale;
    zp = (int32_t)nearbyintf(fzp);
  } else {
    float span = mx - mn;
    scale = span / (float)((int64_t)qmax - qmin);
    if (!(scale >= eps))
      scale = eps;
    float q = mn / scale;
    int32_t r = f32_to_i32_x86(nearbyintf(q));
    /* quant_min - int32 tensor: int32 arithmetic, wrapping. */
    int32_t z = (int32_t)(uint32_t)((uint32_t)qmin - (uint32_t)r);
    if (z < qmin)
      z = qmin;
    if (z > qmax)
      z = qmax;
    zp = z;
  }
  *out_scale = scale;
  *out_zero_point = zp;
}

static void dtype_bounds(int32_t dtype, double *lo, double *hi) {
  switch (dtype) {
  case QH_DTYPE_UINT8:
    *lo = 0;
    *hi = 255;
    break;
  case QH_DTYPE_INT8:
    *lo = -128;
    *hi = 127;
    break;
  case QH_DTYPE_UINT16:
    *lo = 0;
    *hi = 65535;
    break;
  case QH_DTYPE_INT16:
    *lo = -32768;
    *hi = 32767;
    break;
  case QH_DTYPE_UINT4:
    *lo = 0;
    *hi = 15;
    break;
  case QH_DTYPE_INT4:
    *lo = -8;
    *hi = 7;
    break;
  default:
    *lo = (double)INT32_MIN;
    *hi = (double)INT32_MAX;
    break;
  }
}

/* ATen's quantize_val: zero_point + Round(x * inv) is evaluated in float32 (the int64
 * zero point converts to float), then clamped to the storage type. */
static inline double quantize_one(float x, float inv, float fzp, double lo, double hi) {
  float r = nearbyintf(x * inv);
  float t = fzp + r;
  double v = t;
  if (v != v)
    v = fzp;
  if (v < lo)
    v = lo;
  if (v > hi)
    v = hi;
  return v;
}

static void quantize_run(const float *x, size_t n, float scale, int32_t zp, int32_t dtype,
                         void *out, size_t offset) {
  float inv = 1.0f / scale;
  float fzp = (float)zp;
  double lo, hi;
  dtype_bounds(dtype, &lo, &hi);
  if (dtype == QH_DTYPE_UINT8 || dtype == QH_DTYPE_UINT4) { /* 4-bit: one per byte */
    uint8_t *o = (uint8_t *)out + offset;
    for (size_t i = 0; i < n; i++)
      o[i] = (uint8_t)quantize_one(x[i], inv, fzp, lo, hi);
  } else if (dtype == QH_DTYPE_INT8 || dtype == QH_DTYPE_INT4) {
    int8_t *o = (int8_t *)out + offset;
    for (size_t i = 0; i < n; i++)
      o[i] = (int8_t)quantize_one(x[i], inv, fzp, lo, hi);
  } else if (dtype == QH_DTYPE_UINT16) {
    uint16_t *o = (uint16_t *)out + offset;
    for (size_t i = 0; i < n; i++)
      o[i] = (uint16_t)quantize_one(x[i], inv, fzp, lo, hi);
  } else if (dtype == QH_DTYPE_INT16) {
    int16_t *o = (int16_t *)out + offset;
    for (size_t i = 0; i < n; i++)
      o[i] = (int16_t)quantize_one(x[i], inv, fzp, lo, hi);
  } else {
    int32_t *o = (int32_t *)out + offset;
    for (size_t i = 0; i < n; i++)
      o[i] = (int32_t)quantize_one(x[i], inv, fzp, lo, hi);
  }
}

void qh_quant_quantize(const float *x, size_t n, float scale, int32_t zero_point, int32_t dtype,
                       void *out) {
  quantize_run(x, n, scale, zero_point, dtype, out, 0);
}

static void split_axis(int rank, const int64_t *dims, int axis, size_t *outer, size_t *ch,
                       size_t *inner) {
  size_t o = 1, in = 1;
  for (int i = 0; i < axis; i++)
    o *= (size_t)dims[i];
  for (int i = axis + 1; i < rank; i++)
    in *= (size_t)dims[i];
  *outer = o;
  *ch = (size_t)dims[axis];
  *inner = in;
}

void qh_quant_quantize_per_channel(const float *x, int rank, const int64_t *dims,
                                   const QhQuantParams *q, void *out) {
  size_t outer, nch, inner;
  split_axis(rank, dims, q->ch_axis, &outer, &nch, &inner);
  for (size_t o = 0; o < outer; o++)
    for (size_t c = 0; c < nch; c++) {
      size_t off = (o * nch + c) * inner;
      quantize_run(x + off, inner, q->scale[c], q->zero_point[c], q->dtype, out, off);
    }
}

void qh_quant_dequantize(const void *q, size_t n, int32_t dtype, float scale, int32_t zero_point,
                         float *out) {
  for (size_t i = 0; i < n; i++) {
    int64_t v;
    if (dtype == QH_DTYPE_UINT8 || dtype == QH_DTYPE_UINT4)
      v = ((const uint8_t *)q)[i];
    else if (dtype == QH_DTYPE_INT8 || dtype == QH_DTYPE_INT4)
      v = ((const int8_t *)q)[i];
    else if (dtype == QH_DTYPE_UINT16)
      v = ((const uint16_t *)q)[i];
    else if (dtype == QH_DTYPE_INT16)
      v = ((const int16_t *)q)[i];
    else
      v = ((const int32_t *)q)[i];
    /* ATen: scale * (q - zp) with the difference in int32, converted to float. */
    int32_t d = (int32_t)(uint32_t)((uint32_t)v - (uint32_t)zero_point);
    out[i] = scale * (float)d;
  }
}
