/* Constants the float model computes, folded before annotation. PyTorch's exporter
 * merges identical initializers (zero biases, untrained BatchNorm parameters) and
 * feeds the copies through Identity nodes; to annotation such a bias would look like a
 * computed activation, observed and quantized to uint8, which PyTorch never does. The
 * pass runs every node whose inputs are all constant (initializers, Constant nodes, or
 * outputs of nodes folded here) once and makes its outputs initializers under their
 * own names, so each consumer gets the weight or bias a model with distinct
 * initializers has.
 *
 * What is folded: default-domain ops with at least one input, every input constant,
 * no output a graph output, a reference kernel, and a result of at most the planner's
 * fold cap; never QuantizeLinear / DequantizeLinear, random ops, or anything reached
 * from a graph input (Shape of an input stays: it would freeze the batch size). A
 * folded value read by several nodes becomes one initializer per reader (the first
 * keeps the name, the others get "NAME_1", "NAME_2", ...). Initializers and Constant
 * nodes that only folded nodes read are dropped, so the written model has neither the
 * Identity nodes nor the shared original.
 *
 * Ownership: rewrites graph in place. Threading: one thread. Errors: GError from
 * ordering the graph, copying tensors or naming values; a model whose inputs declare
 * no shape cannot be planned before calibration binds them and is left as it is. */
#ifndef QH_QUANT_CONST_FOLD_H
#define QH_QUANT_CONST_FOLD_H

#include <glib.h>

#include "core/graph.h"

G_BEGIN_DECLS

/* Fold; *n_folded (may be NULL) gets the number of nodes folded. */
gboolean qh_quant_fold_constants(QhGraph *graph, int *n_folded, GError **error);

G_END_DECLS

#endif
