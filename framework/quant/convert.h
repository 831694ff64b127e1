/* Convert: rewrite a float graph, whose quantization points have qparams, into the
 * standard QDQ form (opset >= 13). Names (the contract tests and users rely on):
 *  - a quantized activation V: QuantizeLinear "V_quantize" (V, "V_scale",
 *    "V_zero_point") -> "V_quantized" -> DequantizeLinear "V_dequantize" ->
 *    "V_dequantized", which the consumers read. When V is a graph output, its producer
 *    writes "V_prequant" instead and the DequantizeLinear output is V.
 *  - a quantized weight W: integer initializer "W_quantized" with "W_scale" and
 *    "W_zero_point" (1-D, with the DequantizeLinear's axis, for per-channel) ->
 *    DequantizeLinear "W_dequantize", whose output keeps the name W.
 *  - an edge whose qparams differ from its producer's output gets its own chain named
 *    after the consumer ("V_for_CONSUMER_..."). Names already taken get "_1", "_2"....
 * Weights are quantized with PyTorch's arithmetic (quant/quantize.h), or rounded as the
 * backend's reference numerics say (qh_quant_convert_rounded). */
#ifndef QH_QUANT_CONVERT_H
#define QH_QUANT_CONVERT_H

#include "quant/points.h"

G_BEGIN_DECLS

gboolean qh_quant_convert(QhGraph *graph, const QhQuantPoints *points, GError **error);

/* How a backend rounds a constant: fill fake (t's element count) with t quantized then
 * dequantized by q, or return FALSE to keep PyTorch's rounding for this tensor. */
typedef gboolean (*QhConstantRounding)(gpointer data, const QhTensor *t, const QhQuantParams *q, float *fake);

/* As qh_quant_convert, but the integer weights and biases are those of `rounding`
 * (a backend's reference numerics, e.g. a DPU's round-half-away-from-zero): each
 * constant is fake-quantized by it, and the stored integers are the exact multiples of
 * the scale it returns. rounding NULL = qh_quant_convert. */
gboolean qh_quant_convert_rounded(QhGraph *graph, const QhQuantPoints *points, QhConstantRounding rounding,
                                  gpointer data, GError **error);

/* The default-domain opset of a converted graph: `requested` (quantize --opset; 0 for
 * none), else the model's, raised to 21 when a QuantizeLinear/DequantizeLinear is 16- or 4-bit
 * (qh_onnx_upgrade_opset rewrites what changed). A requested opset outside 13..21,
 * below the model's, or below 21 with 16-bit Q/DQ is QH_ERROR_UNSUPPORTED naming the
 * node that needs more. */
gboolean qh_quant_choose_opset(QhGraph *graph, int64_t requested, GError **error);

G_END_DECLS

#endif
