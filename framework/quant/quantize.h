/* PyTorch's quantization arithmetic (docs/numerics.md §3, §4): qparams from min/max, and
 * quantize / dequantize of float32 data. quantize multiplies by the float32 reciprocal
 * of the scale, rounds half to even, adds the zero point, then clamps to the storage
 * dtype: PyTorch's rule, which differs from ONNX QuantizeLinear's division at rare
 * ties. Weights are quantized this way so that integer weights equal PyTorch's.
 * Threading: pure functions. */
#ifndef QH_QUANT_QUANTIZE_H
#define QH_QUANT_QUANTIZE_H

#include <glib.h>
#include <stdint.h>

#include "quant/observer.h"

G_BEGIN_DECLS

/* docs/numerics.md §3: scale and zero point for one (min, max) pair, with the range
 * (qmin, qmax), qscheme, dtype, whether the range was custom, and eps. */
void qh_quant_calculate_qparams(float min, float max, int32_t qmin, int32_t qmax, int32_t qscheme,
                                int32_t dtype, gboolean has_range, float eps, float *out_scale,
                                int32_t *out_zero_point);

/* Quantize n floats into out (uint8_t, int8_t or int32_t per dtype) with one scale and
 * zero point. */
void qh_quant_quantize(const float *x, size_t n, float scale, int32_t zero_point, int32_t dtype,
                       void *out);
/* Per-channel: x has shape dims (rank), channel axis ch_axis, q->scale[c] per channel. */
void qh_quant_quantize_per_channel(const float *x, int rank, const int64_t *dims,
                                   const QhQuantParams *q, void *out);
/* dequantize: f32((q - zp) * scale). */
void qh_quant_dequantize(const void *q, size_t n, int32_t dtype, float scale, int32_t zero_point,
                         float *out);

G_END_DECLS

#endif
