/* The deploy model of a QDQ graph: what a vendor's compiler takes (MQBench's Vitis
 * deploy writes the same). Every QuantizeLinear -> DequantizeLinear pair on an
 * activation is removed (strip-qdq.h), and every constant that reaches the graph
 * through DequantizeLinear (weights, biases; also a Q -> DQ chain on a float
 * constant) becomes a float initializer holding its dequantized values, computed by
 * the host's own QuantizeLinear / DequantizeLinear kernels: the integers are already
 * clipped to the quantized range and rounded, so the floats are exactly what the QDQ
 * model computes with. Initializers nothing reads any more are dropped.
 *
 * Backs the SDK's artifact_write_model (ABI 1.1). Ownership: borrows graph, which is
 * left unchanged (the rewrite happens on a copy). Errors: QH_ERROR_IO when a file
 * cannot be written, QH_ERROR_INVALID / QH_ERROR_UNSUPPORTED from ordering, folding
 * or serialising the graph; nothing is left at path on error. */
#ifndef QH_LOWER_DEPLOY_MODEL_H
#define QH_LOWER_DEPLOY_MODEL_H

#include <glib.h>

#include "core/graph.h"

G_BEGIN_DECLS

/* Rewrite graph (in place) into its deploy model. */
gboolean qh_deploy_model_make(QhGraph *graph, GError **error);

/* Write graph to path as ONNX, atomically: as it is, or (strip_qdq) as its deploy
 * model. *out_bytes gets the size of the file written. */
gboolean qh_deploy_model_save(const QhGraph *graph, const char *path, gboolean strip_qdq,
                              gsize *out_bytes, GError **error);

G_END_DECLS

#endif
