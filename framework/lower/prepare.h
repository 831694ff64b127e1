/* Making a QDQ graph from any producer matchable: PyTorch's exporter writes scales and
 * zero points as Constant nodes, computes the int32 bias zero point with
 * ConstantOfShape -> Cast, and puts a no-op Cast between QuantizeLinear and
 * DequantizeLinear. ONNX Runtime's quantizer can keep weights float behind
 * QuantizeLinear -> DequantizeLinear. qh_lower_prepare drops the no-op Casts and turns
 * every node the planner folds into initializers, so that every quantization parameter
 * is a plain constant, except DequantizeLinear (whose integer input the matcher must
 * still see) and a QuantizeLinear read by anything but DequantizeLinear: a constant
 * QuantizeLinear feeding DequantizeLinear becomes the integer initializer it computes
 * (with ONNX's rounding), so such a weight is as constant as an int8 initializer.
 *
 * The graph is planned once (shapes only, constants folded), before the rewrite, and
 * that plan is returned: the types, shapes, folded flags and MACs it gives for the
 * values and nodes the prepared graph still has are the prepared graph's; its order
 * still lists the nodes prepare removed (qh_graph_topo_order gives the prepared
 * graph's own).
 *
 * Ownership: rewrites graph in place; the plan is the caller's (qh_plan_free) and
 * borrows graph. input_shapes as qh_plan_new (NULL: declared). Errors (NULL): as
 * qh_plan_new (shapes-only) and qh_lower_drop_noop_casts. */
#ifndef QH_LOWER_PREPARE_H
#define QH_LOWER_PREPARE_H

#include <glib.h>

#include "core/graph.h"
#include "exec/plan.h"

G_BEGIN_DECLS

QhPlan *qh_lower_prepare(QhGraph *graph, const QhShape *input_shapes, GError **error);

G_END_DECLS

#endif
