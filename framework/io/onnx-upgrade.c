/* Raising a graph's default-domain opset, so that a QDQ model with 16-bit
 * QuantizeLinear/DequantizeLinear (opset 21's types) can be written. A node is carried
 * over only when its op means the same at the new opset: the loader's rule
 * (qh_onnx_op_first_unimplemented_change), so qhost reads back every file it writes.
 * Opset 18 moved the axes of ReduceMean, ReduceMax, ReduceMin, ReduceProd and ReduceL2
 * from an attribute to an input, and gave Split num_outputs (which ONNX Runtime wants
 * when the split input is absent); those nodes are rewritten. Any other op that
 * changed, or that the change table does not know, is refused by name. */
#include "io/onnx.h"

#include <string.h>

#include "core/error.h"
#include "io/onnx-private.h"

static const char *const axes_moved_at_18[] = {"ReduceL2", "ReduceMax", "ReduceMean", "ReduceMin",
                                               "ReduceProd"};

static gboolean is_default_domain(const char *d) {
  return d == NULL || *d == '\0' || strcmp(d, "ai.onnx") == 0;
}

static gboolean axes_moved(const char *op) {
  for (gsize i = 0; i < G_N_ELEMENTS(axes_moved_at_18); i++)
    if (strcmp(axes_moved_at_18[i], op) == 0)
      return TRUE;
  return FALSE;
}

static void remove_attr(QhNode *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) {
      QhAttr *a = &n->attrs[i];
      g_free(a->name);
      g_free(a->s);
      qh_tensor_free(a->t);
      g_free(a->floats);
      g_free(a->ints);
      if (a->strings)
        for (int64_t k = 0; k < a->n; k++)
          g_free(a->strings[k]);
      g_free(a->strings);
      memmove(a, a + 1, sizeof *a * (gsize)(n->n_attrs - i - 1));
      n->n_attrs--;
      return;
    }
}

/* A fresh name: node and value names share one namespace in what qhost writes. */
static char *fresh_name(const QhGraph *g, const char *base) {
  char *name = g_strdup(base);
  for (int k = 1; qh_graph_find_value(g, name) >= 0; k++) {
    g_free(name);
    name = g_strdup_printf("%s_%d", base, k);
  }
  return name;
}

/* Reduce*(axes=[...]) -> Reduce*(x, axes) with an int64 initializer. No attribute:
 * all axes, which opset 18 also means by an absent input (noop_with_empty_axes = 0). */
static gboolean move_axes_to_input(QhGraph *g, QhNode *n, GError **error) {
  const QhAttr *a = qh_node_attr(n, "axes");
  if (a == NULL)
    return TRUE;
  if (a->type != QH_ATTR_INTS) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node '%s' (%s): attribute axes is not a list of ints",
                n->name, n->op_type);
    return FALSE;
  }
  int64_t len = a->n;
  QhShape shape = qh_shape_make(1, &len);
  QhTensor *t = qh_tensor_new(QH_DTYPE_S64, &shape, error);
  if (t == NULL)
    return FALSE;
  if (len > 0)
    memcpy(t->data, a->ints, sizeof(int64_t) * (gsize)len);
  char *base = g_strdup_printf("%s_axes", n->name && *n->name ? n->name : n->op_type);
  char *name = fresh_name(g, base);
  QhValue *v = qh_graph_add_value(g, name, error);
  g_free(base);
  g_free(name);
  if (v == NULL) {
    qh_tensor_free(t);
    return FALSE;
  }
  v->dtype = QH_DTYPE_S64;
  v->shape = shape;
  qh_value_set_initializer(v, t);
  if (n->n_inputs < 2) {
    n->inputs = g_renew(int, n->inputs, 2);
    n->n_inputs = 2;
  }
  n->inputs[1] = v->id;
  remove_attr(n, "axes");
  return TRUE;
}

gboolean qh_onnx_upgrade_opset(QhGraph *g, int64_t target, GError **error) {
  int64_t from = qh_graph_opset(g, "");
  if (from < 0)
    from = QH_ONNX_MAX_OPSET; /* a graph built in memory is saved at opset 17 */
  if (target < from) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "opset %" G_GINT64_FORMAT " was asked for but the model imports opset %" G_GINT64_FORMAT
                "; qhost does not lower opsets",
                target, from);
    return FALSE;
  }
  if (target > QH_ONNX_MAX_WRITE_OPSET) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "opset %" G_GINT64_FORMAT " was asked for; qhost writes opsets %d to %d", target,
                QH_ONNX_MIN_OPSET, QH_ONNX_MAX_WRITE_OPSET);
    return FALSE;
  }
  if (target == from)
    return TRUE;
  /* Check every node first, so that a refusal leaves the graph as it was. */
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *n = qh_graph_node(g, i);
    if (n->is_removed || !is_default_domain(n->domain) || target <= QH_ONNX_MAX_OPSET)
      continue;
    int change = qh_onnx_op_first_unimplemented_change(n->op_type, target);
    if (change > 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                  "node '%s' (%s): %s changed in opset %d, so it cannot be written at opset %" G_GINT64_FORMAT,
                  n->name, n->op_type, n->op_type, change, target);
      return FALSE;
    }
    if (change < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                  "node '%s' (%s): %s is not known to be unchanged from opset %" G_GINT64_FORMAT
                  " to %" G_GINT64_FORMAT ", so it cannot be written at opset %" G_GINT64_FORMAT,
                  n->name, n->op_type, n->op_type, from, target, target);
      return FALSE;
    }
  }
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    QhNode *n = qh_graph_node(g, i);
    if (n->is_removed || !is_default_domain(n->domain) || from >= 18 || target < 18)
      continue;
    if (axes_moved(n->op_type) && !move_axes_to_input(g, n, error))
      return FALSE;
    gboolean split_given = n->n_inputs > 1 && n->inputs[1] >= 0;
    if (strcmp(n->op_type, "Split") == 0 && !split_given && qh_node_attr(n, "split") == NULL)
      qh_node_set_attr_int(n, "num_outputs", n->n_outputs);
  }
  qh_graph_set_opset(g, "", target);
  return TRUE;
}
