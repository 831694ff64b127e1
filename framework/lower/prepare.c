/* Normalises a QDQ graph before unit matching (see the header): no-op Casts out,
 * constant subgraphs frozen into initializers. DequantizeLinear nodes are never frozen:
 * a folded DequantizeLinear of an int8 weight would become a float weight and the unit
 * would lose its quantized input. A QuantizeLinear of a constant that only
 * DequantizeLinear nodes read is frozen: that is ONNX Runtime's QDQ layout with float
 * weights (W -> QuantizeLinear -> DequantizeLinear), which then looks like the
 * int8-initializer layout every kernel takes. */
#include "lower/prepare.h"

#include <string.h>

#include "core/error.h"
#include "lower/noop-cast.h"

static gboolean is_qdq(const QhNode *n) {
  return (!*n->domain || strcmp(n->domain, "ai.onnx") == 0) &&
         (strcmp(n->op_type, "QuantizeLinear") == 0 || strcmp(n->op_type, "DequantizeLinear") == 0);
}

/* Whether n is a QuantizeLinear whose output only DequantizeLinear nodes read. */
static gboolean quantizes_for_dq_only(const QhGraph *g, const QhNode *n) {
  if (!is_qdq(n) || strcmp(n->op_type, "QuantizeLinear") != 0 || n->n_outputs < 1 || n->outputs[0] < 0)
    return FALSE;
  int v = n->outputs[0], readers = 0;
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *r = qh_graph_node(g, i);
    for (int s = 0; !r->is_removed && s < r->n_inputs; s++) {
      if (r->inputs[s] != v)
        continue;
      if (!is_qdq(r) || strcmp(r->op_type, "DequantizeLinear") != 0 || s != 0)
        return FALSE;
      readers++;
    }
  }
  return readers > 0;
}

/* Freeze the outputs of folded nodes (not Q/DQ, but QuantizeLinear feeding only
 * DequantizeLinear) into initializers and remove the nodes. A node with a graph output
 * stays (the output keeps its producer). */
static gboolean freeze_constants(QhGraph *g, const QhPlan *plan, GError **error) {
  const GArray *order = qh_plan_order(plan);
  for (guint i = 0; i < order->len; i++) {
    int id = g_array_index(order, int, i);
    QhNode *n = qh_graph_node(g, id);
    if (n->is_removed || !qh_plan_node_is_folded(plan, id) || (is_qdq(n) && !quantizes_for_dq_only(g, n)))
      continue;
    gboolean graph_output = FALSE;
    for (int o = 0; o < n->n_outputs; o++)
      graph_output |= n->outputs[o] >= 0 && qh_graph_value(g, n->outputs[o])->is_output;
    if (graph_output)
      continue;
    QhTensor **copies = g_new0(QhTensor *, (gsize)n->n_outputs + 1);
    gboolean ok = TRUE;
    for (int o = 0; o < n->n_outputs && ok; o++) {
      const QhTensor *t = n->outputs[o] >= 0 ? qh_plan_value_info(plan, n->outputs[o]) : NULL;
      if (t == NULL || t->data == NULL)
        continue;
      ok = (copies[o] = qh_tensor_copy(t, error)) != NULL;
    }
    if (ok) {
      qh_graph_remove_node(g, id);
      for (int o = 0; o < n->n_outputs; o++)
        if (copies[o])
          qh_value_set_initializer(qh_graph_value(g, n->outputs[o]), copies[o]);
    } else {
      for (int o = 0; o < n->n_outputs; o++)
        qh_tensor_free(copies[o]);
    }
    g_free(copies);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

/* One plan serves both steps and the lowering after them: a dropped Cast passes its
 * input through unchanged and a frozen node's outputs keep the values the plan
 * computed, so every value the prepared graph still has keeps its type, shape and
 * folded-ness; only the removed nodes are stale, and they are skipped. */
QhPlan *qh_lower_prepare(QhGraph *graph, const QhShape *input_shapes, GError **error) {
  QhPlan *plan = qh_plan_new(graph, input_shapes, TRUE, error);
  if (plan == NULL)
    return NULL;
  if (!qh_lower_drop_noop_casts(graph, plan, NULL, error) || !freeze_constants(graph, plan, error)) {
    qh_plan_free(plan);
    return NULL;
  }
  return plan;
}
