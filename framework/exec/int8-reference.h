/* Host reference int8 kernels: slow, obviously correct quantized linear, conv2d and
 * add, written straight from docs/numerics.md §4.1 and §7. Plugin kernel tests compare
 * their fast kernels against these, bit for bit under the rule the plugin claims.
 *
 * Requantization rules (sb[c] = f32(sx*sw[c]), acc = Σ (xq−zx)(wq−zw[c]) exact):
 *   QH_REQUANT_QNNPACK:   bq[c] = rint(f32(b[c] * f32(1/sb[c]))) (int32 bias, 0 without
 *                         bias), M[c] = f32(sb[c] * f32(1/so)) (PyTorch's
 *                         generate_requantization_scales; docs/numerics.md §7's f32(sb/so)
 *                         differs by an ulp on ~25% of channels and flips near-ties),
 *                         out = clamp(rint(f32(f32(acc + bq[c]) * M[c])) + zo, lo, hi)
 *   QH_REQUANT_ONEDNN:    y = f32(f32(f32(acc) * sb[c]) + b[c]) (b = 0 without bias),
 *                         out = clamp(rint(f32(y * f32(1/so))) + zo, lo, hi)
 *   QH_REQUANT_REFERENCE: PyTorch's reference model: xf = f32((xq−zx)*sx),
 *                         wf = f32((wq−zw[c])*sw[c]); y = float32 sum starting at 0.0f,
 *                         adding f32(xf*wf) one term at a time in the order
 *                         linear: k = 0..K−1; conv: ci (within the group), then kh, then
 *                         kw; then y = f32(y + b[c]); out = clamp(quantize(y, so, zo), lo, hi)
 *                         with §4.1 quantize (reciprocal, rint, + zo, saturate).
 * PyTorch's own reference path sums in its GEMM's order, so it can differ from
 * QH_REQUANT_REFERENCE by one step at near-ties; oneDNN likewise (spec §7).
 *
 * Accumulation: exact in int64, then saturated to int32 (acc + bq as well). Real int32
 * kernels can only overflow when K·255·255 ≥ 2^31, i.e. K > 33 025; below that the
 * saturation never triggers and the result equals an int32 kernel's.
 *
 * Ownership: every pointer is borrowed; outputs are caller-allocated. Threading: all
 * functions are reentrant (no shared state). Errors: QH_ERROR_INVALID for inconsistent
 * parameters (bad dtype, zero point outside the dtype, non-positive or non-finite scale,
 * lo > hi or outside the dtype, shapes that do not divide), QH_ERROR_LIMIT for sizes
 * whose element counts overflow; nothing is written then. */
#ifndef QH_EXEC_INT8_REFERENCE_H
#define QH_EXEC_INT8_REFERENCE_H

#include <glib.h>
#include <stdint.h>

#include "core/dtype.h"

G_BEGIN_DECLS

typedef enum {
  QH_REQUANT_QNNPACK = 0,
  QH_REQUANT_ONEDNN = 1,
  QH_REQUANT_REFERENCE = 2,
} QhRequantRule;

/* A per-tensor quantized operand: dtype is QH_DTYPE_U8 (quint8) or QH_DTYPE_S8 (qint8). */
typedef struct {
  QhDType dtype;
  float scale;
  int32_t zero_point;
} QhInt8Quant;

/* int8 weights' quantization: per_channel FALSE uses scales[0] / zero_points[0] for
 * every output channel, TRUE uses scales[c] / zero_points[c] (c < number of output
 * channels). zero_points may be NULL (all 0). */
typedef struct {
  const float *scales;
  const int32_t *zero_points;
  gboolean per_channel;
} QhInt8WeightQuant;

/* Everything a linear or conv needs besides data and shapes. lo/hi are the fused clamp
 * bounds in the quantized output domain (no activation: dtype min/max; relu: lo = zo). */
typedef struct {
  QhRequantRule rule;
  QhInt8Quant x;
  QhInt8WeightQuant w;
  QhInt8Quant y;
  int32_t lo, hi;
} QhInt8Params;

/* Fill p->lo / p->hi for the output dtype: the full range, or [zo, max] if relu. */
void qh_int8_params_set_clamp(QhInt8Params *p, gboolean relu);

/* y[m, n] = requant(Σ_k x[m, k] · w[n, k]) + bias: x is m×k (uint8_t or int8_t per
 * p->x.dtype), w is n×k int8, bias n floats or NULL, y m×n (per p->y.dtype). */
gboolean qh_int8_linear_ref(const void *x, const int8_t *w, const float *bias, int64_t m,
                            int64_t n, int64_t k, const QhInt8Params *p, void *y,
                            GError **error);

/* NCHW conv2d geometry; w is [c_out, c_in/groups, kh, kw]. pads = top, left, bottom,
 * right. Depthwise is groups = c_in (= c_out / multiplier). */
typedef struct {
  int64_t n, c_in, h, w;
  int64_t c_out, kh, kw;
  int64_t groups;
  int64_t stride[2], pad[4], dilation[2];
} QhConv2dGeom;

/* Output height and width of g; FALSE (with error) if the geometry is invalid
 * (non-positive sizes, stride or dilation, negative pads, channels not divisible by
 * groups, empty output). */
gboolean qh_conv2d_geom_out(const QhConv2dGeom *g, int64_t *oh, int64_t *ow, GError **error);

/* y [n, c_out, oh, ow] = requant(conv(x [n, c_in, h, w], w) + bias); padded positions
 * hold the input zero point (real value 0). */
gboolean qh_int8_conv2d_ref(const void *x, const int8_t *w, const float *bias,
                            const QhConv2dGeom *g, const QhInt8Params *p, void *y,
                            GError **error);

/* Quantized add (and add_relu), spec §7: a = f32((qa−za)*sa), b = f32((qb−zb)*sb),
 * y = f32(a + b), relu: max(y, 0), out = quantize(y, so, zo) (§4.1, saturating to the
 * output dtype). a, b and out hold n elements each (same shape, no broadcasting). */
gboolean qh_int8_add_ref(const void *a, const QhInt8Quant *qa, const void *b,
                         const QhInt8Quant *qb, size_t n, const QhInt8Quant *qy,
                         gboolean relu, void *out, GError **error);

/* §4.1 quantize of one float: clamp(rint(f32(x * f32(1/scale))) + zp, dtype range). */
int32_t qh_int8_quantize_one(float x, float scale, int32_t zero_point, QhDType dtype);

G_END_DECLS

#endif
