/* Bypasses Cast nodes whose input already has the target type (see the header), so
 * that the QDQ unit matcher sees the QuantizeLinear -> DequantizeLinear pairs PyTorch's
 * exporter separates with such Casts. Types come from the shape plan, not from the
 * values' declared dtypes, which an exporter may leave unset. */
#include "lower/noop-cast.h"

#include <string.h>

#include "core/error.h"

static gboolean is_cast(const QhNode *n) {
  return !n->is_removed && (!*n->domain || strcmp(n->domain, "ai.onnx") == 0) &&
         strcmp(n->op_type, "Cast") == 0;
}

static gboolean fail(GError **error, const QhNode *n, const char *cause) {
  char *d = qh_node_describe(n);
  g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s", d, cause);
  g_free(d);
  return FALSE;
}

/* The target type of a well-formed Cast; FALSE with error naming the node otherwise. */
static gboolean cast_to(const QhNode *cast, int64_t *to, GError **error) {
  if (cast->n_inputs != 1 || cast->n_outputs != 1 || cast->inputs[0] < 0 || cast->outputs[0] < 0)
    return fail(error, cast, "needs exactly one input and one output");
  if (qh_node_attr(cast, "to") == NULL)
    return fail(error, cast, "attribute 'to' is missing");
  return qh_node_attr_get_int(cast, "to", 0, to, error);
}

gboolean qh_lower_drop_noop_casts(QhGraph *g, const QhPlan *plan, int *out_dropped,
                                  GError **error) {
  int dropped = 0, n_nodes = qh_graph_n_nodes(g);
  int64_t to;
  if (out_dropped)
    *out_dropped = 0;
  /* validate first so that a malformed Cast leaves the graph untouched */
  for (int i = 0; i < n_nodes; i++)
    if (is_cast(qh_graph_node(g, i)) && !cast_to(qh_graph_node(g, i), &to, error))
      return FALSE;
  for (int i = 0; i < n_nodes; i++) {
    QhNode *cast = qh_graph_node(g, i);
    if (!is_cast(cast) || !cast_to(cast, &to, NULL))
      continue;
    int x = cast->inputs[0], y = cast->outputs[0];
    const QhTensor *info = qh_plan_value_info(plan, x);
    /* a shapes-only plan leaves values after an op it cannot infer unknown */
    if (info == NULL || (int64_t)info->dtype != to || qh_graph_value(g, y)->is_output)
      continue;
    for (int k = 0; k < n_nodes; k++) {
      QhNode *nd = qh_graph_node(g, k);
      for (int s = 0; !nd->is_removed && s < nd->n_inputs; s++)
        if (nd->inputs[s] == y)
          nd->inputs[s] = x;
    }
    qh_graph_remove_node(g, i);
    dropped++;
  }
  if (out_dropped)
    *out_dropped = dropped;
  return TRUE;
}
