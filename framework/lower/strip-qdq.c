/* Drops the Q/DQ pairs of a QDQ graph to recover its float model (see the header).
 * A DequantizeLinear reading a QuantizeLinear's output is bypassed: its readers read
 * the QuantizeLinear's float input instead; when its output is a graph output it
 * becomes an Identity so the output keeps its name. QuantizeLinear nodes left without
 * readers go too. */
#include "lower/strip-qdq.h"

#include <string.h>

#include "core/error.h"

static gboolean is_op(const QhNode *n, const char *op) {
  return !n->is_removed && (!*n->domain || strcmp(n->domain, "ai.onnx") == 0) &&
         strcmp(n->op_type, op) == 0;
}

int qh_qdq_count(const QhGraph *g) {
  int n = 0;
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *nd = qh_graph_node(g, i);
    n += is_op(nd, "QuantizeLinear") || is_op(nd, "DequantizeLinear");
  }
  return n;
}

static gboolean has_readers(const QhGraph *g, int v) {
  if (qh_graph_value(g, v)->is_output)
    return TRUE;
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *nd = qh_graph_node(g, i);
    for (int s = 0; !nd->is_removed && s < nd->n_inputs; s++)
      if (nd->inputs[s] == v)
        return TRUE;
  }
  return FALSE;
}

gboolean qh_qdq_strip(QhGraph *g, int *out_dropped, GError **error) {
  int dropped = 0;
  int n_nodes = qh_graph_n_nodes(g);
  for (int i = 0; i < n_nodes; i++) {
    QhNode *dq = qh_graph_node(g, i);
    if (!is_op(dq, "DequantizeLinear") || dq->n_inputs < 1 || dq->inputs[0] < 0 ||
        dq->n_outputs < 1 || dq->outputs[0] < 0)
      continue;
    int producer = qh_graph_value(g, dq->inputs[0])->producer;
    if (producer < 0 || !is_op(qh_graph_node(g, producer), "QuantizeLinear"))
      continue;
    const QhNode *q = qh_graph_node(g, producer);
    int x = q->inputs[0], y = dq->outputs[0];
    if (x < 0)
      continue;
    for (int k = 0; k < qh_graph_n_nodes(g); k++) {
      QhNode *nd = qh_graph_node(g, k);
      for (int s = 0; !nd->is_removed && s < nd->n_inputs; s++)
        if (nd->inputs[s] == y)
          nd->inputs[s] = x;
    }
    char *name = g_strdup(dq->name);
    qh_graph_remove_node(g, i);
    if (qh_graph_value(g, y)->is_output &&
        qh_graph_add_node(g, name, "Identity", "", 1, &x, 1, &y, error) == NULL) {
      g_free(name);
      return FALSE;
    }
    g_free(name);
    dropped++;
  }
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *q = qh_graph_node(g, i);
    if (is_op(q, "QuantizeLinear") && q->n_outputs >= 1 && q->outputs[0] >= 0 &&
        !has_readers(g, q->outputs[0]))
      qh_graph_remove_node(g, i);
  }
  GArray *order = NULL;
  if (!qh_graph_topo_order(g, &order, error))
    return FALSE;
  g_array_unref(order);
  if (out_dropped)
    *out_dropped = dropped;
  return TRUE;
}
