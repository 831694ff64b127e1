/* Dropping Cast nodes that change nothing. PyTorch's ONNX export writes
 * QuantizeLinear -> Cast(to=uint8) -> DequantizeLinear, where the Cast converts a
 * uint8 tensor to uint8; with it in the way the QDQ unit matcher sees no Q -> DQ
 * pair. This pass bypasses every live Cast whose input already has the `to` type:
 * its readers read the Cast's input instead and the node is removed. A Cast whose
 * output is a graph output stays, so the output keeps its name and producer, and so
 * does one whose input type the plan does not know (it follows an op the host cannot
 * infer).
 *
 * shape_plan must have been made on graph (qh_plan_new(graph, shapes, TRUE, ...))
 * before the call; the plan borrows the graph, so free it after the call and do not
 * run it: the graph changed under it. Ownership: rewrites graph in place.
 * Errors: QH_ERROR_INVALID naming the node when a Cast lacks its input, output or
 * int 'to' attribute (the graph is then unchanged). *out_dropped (may be NULL) is the
 * number of Casts removed. */
#ifndef QH_LOWER_NOOP_CAST_H
#define QH_LOWER_NOOP_CAST_H

#include <glib.h>

#include "core/graph.h"
#include "exec/plan.h"

G_BEGIN_DECLS

gboolean qh_lower_drop_noop_casts(QhGraph *graph, const QhPlan *shape_plan, int *out_dropped,
                                  GError **error);

G_END_DECLS

#endif
