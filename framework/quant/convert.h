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
 * Weights are quantized with PyTorch's arithmetic (quant/quantize.h). */
#ifndef QH_QUANT_CONVERT_H
#define QH_QUANT_CONVERT_H

#include "quant/points.h"

G_BEGIN_DECLS

gboolean qh_quant_convert(QhGraph *graph, const QhQuantPoints *points, GError **error);

G_END_DECLS

#endif
