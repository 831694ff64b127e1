/* Folding the float model's constant-only nodes into per-consumer initializers before
 * annotation (const-fold.h). The values are computed by a shapes-only plan, which
 * already folds every node whose inputs all carry data; this file only decides which
 * of those folds are safe to make permanent (nothing derived from a graph input, no
 * Q/DQ, no random op) and rewrites the graph: folded nodes out, their outputs
 * initializers, shared results split per reader, originals nobody reads dropped. */
#include "quant/const-fold.h"

#include <string.h>

#include "core/error.h"
#include "exec/op.h"
#include "exec/plan.h"

static gboolean is_plain(const QhNode *n, const char *op) {
  return (!*n->domain || strcmp(n->domain, "ai.onnx") == 0) && strcmp(n->op_type, op) == 0;
}

/* Ops whose result is not a function of their inputs, or which carry quantization
 * the annotation must see as written. */
static gboolean never_folded(const QhNode *n) {
  static const char *const ops[] = {"QuantizeLinear", "DequantizeLinear", "RandomNormal", "RandomUniform",
                                    "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli",
                                    "Constant"};
  if (*n->domain && strcmp(n->domain, "ai.onnx") != 0)
    return TRUE;
  for (size_t i = 0; i < G_N_ELEMENTS(ops); i++)
    if (strcmp(n->op_type, ops[i]) == 0)
      return TRUE;
  return qh_op_find(n->domain, n->op_type) == NULL;
}

/* Live (node, slot) pairs reading v, as consecutive ints. */
static GArray *readers_of(const QhGraph *g, int v) {
  GArray *r = g_array_new(FALSE, FALSE, sizeof(int));
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *n = qh_graph_node(g, i);
    for (int s = 0; !n->is_removed && s < n->n_inputs; s++)
      if (n->inputs[s] == v) {
        int pair[2] = {i, s};
        g_array_append_vals(r, pair, 2);
      }
  }
  return r;
}

/* Mark the nodes to fold: all present inputs constant, not never_folded, no graph
 * output. Constant nodes make their outputs constant without being folded. */
static gboolean choose(const QhGraph *g, const GArray *order, gboolean *fold) {
  int nv = qh_graph_n_values(g);
  gboolean *is_const = g_new0(gboolean, nv + 1), any = FALSE;
  for (int v = 0; v < nv; v++) {
    const QhValue *val = qh_graph_value(g, v);
    is_const[v] = val->initializer != NULL && !val->is_input; /* an input may override it */
  }
  for (guint i = 0; i < order->len; i++) {
    const QhNode *n = qh_graph_node(g, g_array_index(order, int, i));
    gboolean ok = !never_folded(n), any_input = FALSE;
    for (int s = 0; ok && s < n->n_inputs; s++) {
      if (n->inputs[s] < 0)
        continue;
      any_input = TRUE;
      ok = is_const[n->inputs[s]];
    }
    for (int o = 0; ok && o < n->n_outputs; o++)
      ok = n->outputs[o] < 0 || !qh_graph_value(g, n->outputs[o])->is_output;
    gboolean constant_node = is_plain(n, "Constant") && n->n_inputs == 0;
    if ((ok && any_input) || constant_node) {
      for (int o = 0; o < n->n_outputs; o++)
        if (n->outputs[o] >= 0)
          is_const[n->outputs[o]] = TRUE;
      fold[n->id] = !constant_node;
      any |= fold[n->id];
    }
  }
  g_free(is_const);
  return any;
}

static char *unique_name(const QhGraph *g, const char *base) {
  char *name = NULL;
  for (int i = 1;; i++) {
    g_free(name);
    name = g_strdup_printf("%s_%d", base, i);
    if (qh_graph_find_value(g, name) < 0)
      return name;
  }
}

/* Give every reader after the first its own copy of folded value v. */
static gboolean split_readers(QhGraph *g, int v, GError **error) {
  GArray *r = readers_of(g, v);
  gboolean ok = TRUE;
  for (guint k = 2; ok && k < r->len; k += 2) {
    QhNode *reader = qh_graph_node(g, g_array_index(r, int, k));
    int slot = g_array_index(r, int, k + 1);
    char *name = unique_name(g, qh_graph_value(g, v)->name);
    QhValue *copy = qh_graph_add_value(g, name, error);
    g_free(name);
    QhTensor *t = copy ? qh_tensor_copy(qh_graph_value(g, v)->initializer, error) : NULL;
    ok = t != NULL;
    if (ok) {
      qh_value_set_initializer(copy, t);
      reader->inputs[slot] = copy->id;
    }
  }
  g_array_unref(r);
  return ok;
}

/* Drop the constant inputs of folded nodes that nothing reads any more: an
 * initializer loses its data, a Constant node is removed. */
static void drop_unread(QhGraph *g, const gboolean *fold, int n_nodes) {
  for (int id = 0; id < n_nodes; id++) {
    if (!fold[id])
      continue;
    const QhNode *n = qh_graph_node(g, id);
    for (int s = 0; s < n->n_inputs; s++) {
      int v = n->inputs[s];
      if (v < 0)
        continue;
      QhValue *val = qh_graph_value(g, v);
      if (val->is_output || val->is_input)
        continue;
      GArray *r = readers_of(g, v);
      gboolean unread = r->len == 0;
      g_array_unref(r);
      if (!unread)
        continue;
      if (val->producer >= 0 && is_plain(qh_graph_node(g, val->producer), "Constant")) {
        qh_graph_remove_node(g, val->producer);
      } else if (val->producer < 0 && val->initializer) {
        qh_tensor_free(val->initializer);
        val->initializer = NULL;
      }
    }
  }
}

gboolean qh_quant_fold_constants(QhGraph *g, int *n_folded, GError **error) {
  if (n_folded)
    *n_folded = 0;
  GArray *order = NULL;
  if (!qh_graph_topo_order(g, &order, error))
    return FALSE;
  int n_nodes = qh_graph_n_nodes(g);
  gboolean *fold = g_new0(gboolean, n_nodes + 1);
  if (!choose(g, order, fold)) {
    g_free(fold);
    g_array_unref(order);
    return TRUE;
  }
  GError *local = NULL;
  QhPlan *plan = qh_plan_new(g, NULL, TRUE, &local);
  if (plan == NULL) {
    /* Unplannable before calibration binds the inputs (no declared shape): the
     * stages that bind them report what is wrong; nothing is folded here. */
    g_clear_error(&local);
    g_free(fold);
    g_array_unref(order);
    return TRUE;
  }
  /* Copy every result before touching the graph: the plan borrows its initializers. */
  GPtrArray *copies = g_ptr_array_new(); /* per folded node in order: QhTensor*[n_outputs] */
  gboolean ok = TRUE;
  for (guint i = 0; i < order->len; i++) {
    int id = g_array_index(order, int, i);
    if (fold[id] && (!ok || !qh_plan_node_is_folded(plan, id)))
      fold[id] = FALSE; /* over the planner's cap: computed at run time as before */
    if (!fold[id])
      continue;
    const QhNode *n = qh_graph_node(g, id);
    QhTensor **outs = g_new0(QhTensor *, (gsize)n->n_outputs + 1);
    g_ptr_array_add(copies, outs);
    for (int o = 0; ok && o < n->n_outputs; o++) {
      if (n->outputs[o] < 0)
        continue;
      const QhTensor *t = qh_plan_value_info(plan, n->outputs[o]);
      if (t == NULL || t->data == NULL) {
        /* nothing to freeze (an empty result): the node stays, and so do its readers,
         * which the planner could not fold either */
        fold[id] = FALSE;
        break;
      }
      ok = (outs[o] = qh_tensor_copy(t, error)) != NULL;
    }
    if (!fold[id]) {
      for (int o = 0; o < n->n_outputs; o++)
        qh_tensor_free(outs[o]);
      g_free(g_ptr_array_remove_index(copies, copies->len - 1));
    }
  }
  qh_plan_free(plan);
  guint c = 0;
  int folded = 0;
  for (guint i = 0; i < order->len; i++) {
    int id = g_array_index(order, int, i);
    if (!fold[id])
      continue;
    QhNode *n = qh_graph_node(g, id);
    QhTensor **outs = g_ptr_array_index(copies, c++);
    if (ok) {
      qh_graph_remove_node(g, id);
      folded++;
    }
    for (int o = 0; o < n->n_outputs; o++) {
      if (ok && outs[o])
        qh_value_set_initializer(qh_graph_value(g, n->outputs[o]), outs[o]);
      else
        qh_tensor_free(outs[o]);
    }
    g_free(outs);
  }
  g_ptr_array_unref(copies);
  for (guint i = 0; ok && i < order->len; i++) {
    const QhNode *n = qh_graph_node(g, g_array_index(order, int, i));
    for (int o = 0; ok && fold[n->id] && o < n->n_outputs; o++)
      if (n->outputs[o] >= 0 && qh_graph_value(g, n->outputs[o])->initializer)
        ok = split_readers(g, n->outputs[o], error);
  }
  if (ok)
    drop_unread(g, fold, n_nodes);
  if (ok && n_folded)
    *n_folded = folded;
  g_free(fold);
  g_array_unref(order);
  return ok;
}
