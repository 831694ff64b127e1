/* Pattern matching for the declarative annotator: the graph facts it needs (who
 * consumes each value, which values are constants, the element type of every value,
 * propagated where the model does not say) and the FX-style matcher that assigns each
 * node to at most one BackendConfig pattern, preferring longer patterns and visiting
 * nodes from the end of the graph, as PyTorch 1.13's _find_matches does. */
#include <string.h>

#include "quant/backend-annotate-private.h"

/* ---- graph facts ---- */

static int32_t attr_tensor_dtype(const QhNode *n, const char *name) {
  const QhAttr *a = qh_node_attr(n, name);
  return a && a->type == QH_ATTR_TENSOR && a->t ? (int32_t)a->t->dtype : QH_DTYPE_UNDEFINED;
}

/* The element type a node gives its first output when the model does not say. */
static int32_t propagate_dtype(const QhGraphFacts *f, const QhNode *n) {
  static const char *const int64_ops[] = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin", NULL};
  static const char *const bool_ops[] = {"Equal", "Less", "Greater", "LessOrEqual",
                                         "GreaterOrEqual", "Not", "And", "Or", "Xor",
                                         "IsNaN", "IsInf", NULL};
  if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
    return QH_DTYPE_UNDEFINED;
  for (int i = 0; int64_ops[i]; i++)
    if (strcmp(n->op_type, int64_ops[i]) == 0)
      return QH_DTYPE_INT64;
  for (int i = 0; bool_ops[i]; i++)
    if (strcmp(n->op_type, bool_ops[i]) == 0)
      return QH_DTYPE_BOOL;
  if (strcmp(n->op_type, "Cast") == 0) {
    const QhAttr *a = qh_node_attr(n, "to");
    return a && a->type == QH_ATTR_INT ? (int32_t)a->i : QH_DTYPE_UNDEFINED;
  }
  if (strcmp(n->op_type, "Constant") == 0) {
    if (qh_node_attr(n, "value"))
      return attr_tensor_dtype(n, "value");
    if (qh_node_attr(n, "value_int") || qh_node_attr(n, "value_ints"))
      return QH_DTYPE_INT64;
    return QH_DTYPE_FLOAT;
  }
  if (strcmp(n->op_type, "ConstantOfShape") == 0)
    return qh_node_attr(n, "value") ? attr_tensor_dtype(n, "value") : QH_DTYPE_FLOAT;
  if (strcmp(n->op_type, "DequantizeLinear") == 0)
    return QH_DTYPE_FLOAT;
  if (strcmp(n->op_type, "QuantizeLinear") == 0) {
    int zp = qh_node_input(n, 2);
    return zp >= 0 && f->dtype[zp] != QH_DTYPE_UNDEFINED ? f->dtype[zp] : QH_DTYPE_UINT8;
  }
  int first = strcmp(n->op_type, "Where") == 0 ? 1 : 0;
  for (int i = first; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0 && f->dtype[n->inputs[i]] != QH_DTYPE_UNDEFINED)
      return f->dtype[n->inputs[i]];
  return QH_DTYPE_UNDEFINED;
}

static void array_unref0(gpointer p) {
  if (p)
    g_array_unref(p);
}

void qh_graph_facts_init(QhGraphFacts *f, const QhGraph *g) {
  int n_values = qh_graph_n_values(g);
  f->graph = g;
  f->users = g_ptr_array_new_full(n_values, array_unref0);
  g_ptr_array_set_size(f->users, n_values);
  f->is_output = g_new0(gboolean, n_values > 0 ? n_values : 1);
  f->dtype = g_new0(int32_t, n_values > 0 ? n_values : 1);
  for (guint i = 0; i < g->outputs->len; i++)
    f->is_output[g_array_index(g->outputs, int, i)] = TRUE;
  for (int v = 0; v < n_values; v++)
    f->dtype[v] = qh_graph_value(g, v)->dtype;
  GArray *order = NULL;
  if (!qh_graph_topo_order(g, &order, NULL)) {
    /* Node id order: the annotator reports the broken graph itself. */
    order = g_array_new(FALSE, FALSE, sizeof(int));
    for (int i = 0; i < qh_graph_n_nodes(g); i++)
      if (!qh_graph_node(g, i)->is_removed)
        g_array_append_val(order, i);
  }
  for (guint k = 0; k < order->len; k++) {
    int id = g_array_index(order, int, k);
    const QhNode *n = qh_graph_node(g, id);
    for (int i = 0; i < n->n_inputs; i++) {
      int v = n->inputs[i];
      if (v < 0)
        continue;
      GArray *u = g_ptr_array_index(f->users, v);
      if (u == NULL)
        f->users->pdata[v] = u = g_array_new(FALSE, FALSE, sizeof(int));
      if (u->len == 0 || g_array_index(u, int, u->len - 1) != id)
        g_array_append_val(u, id);
    }
    if (n->n_outputs > 0 && n->outputs[0] >= 0 && f->dtype[n->outputs[0]] == QH_DTYPE_UNDEFINED)
      f->dtype[n->outputs[0]] = propagate_dtype(f, n);
  }
  g_array_unref(order);
}

void qh_graph_facts_clear(QhGraphFacts *f) {
  g_clear_pointer(&f->users, g_ptr_array_unref);
  g_clear_pointer(&f->is_output, g_free);
  g_clear_pointer(&f->dtype, g_free);
}

int qh_graph_facts_n_uses(const QhGraphFacts *f, int v) {
  const GArray *u = g_ptr_array_index(f->users, v);
  int n = 0;
  /* A node reading the value through two slots is one consumer but two uses. */
  for (guint i = 0; u && i < u->len; i++) {
    const QhNode *n_ = qh_graph_node(f->graph, g_array_index(u, int, i));
    for (int s = 0; s < n_->n_inputs; s++)
      n += n_->inputs[s] == v;
  }
  return n + (f->is_output[v] ? 1 : 0);
}

gboolean qh_graph_facts_is_const(const QhGraphFacts *f, int v) {
  if (v < 0)
    return FALSE;
  const QhValue *val = qh_graph_value(f->graph, v);
  if (val->initializer != NULL)
    return TRUE;
  /* The exporter writes Python scalars (x * 0.5, x + 1e-5) as Constant nodes, which the
   * constant folding keeps: they are constants to FX, not observed tensors. */
  const QhNode *p = val->producer >= 0 ? qh_graph_node(f->graph, val->producer) : NULL;
  return p && !p->is_removed && p->n_inputs == 0 && qh_pattern_op_matches("Constant", p);
}

const QhTensor *qh_graph_facts_const_tensor(const QhGraphFacts *f, int v) {
  if (!qh_graph_facts_is_const(f, v))
    return NULL;
  const QhValue *val = qh_graph_value(f->graph, v);
  if (val->initializer != NULL)
    return val->initializer;
  const QhAttr *a = qh_node_attr(qh_graph_node(f->graph, val->producer), "value");
  return a != NULL && a->type == QH_ATTR_TENSOR ? a->t : NULL;
}

gboolean qh_graph_facts_is_float(const QhGraphFacts *f, int v) {
  return v >= 0 && f->dtype[v] == QH_DTYPE_FLOAT;
}

/* ---- patterns ---- */

gboolean qh_pattern_op_matches(const char *op, const QhNode *node) {
  const char *colon = strrchr(op, ':');
  gboolean node_default = node->domain == NULL || *node->domain == '\0' ||
                          strcmp(node->domain, "ai.onnx") == 0;
  if (colon == NULL)
    return node_default && strcmp(op, node->op_type) == 0;
  size_t dlen = (size_t)(colon - op);
  if (strcmp(colon + 1, node->op_type) != 0)
    return FALSE;
  if ((dlen == 0 || (dlen == 7 && strncmp(op, "ai.onnx", 7) == 0)) && node_default)
    return TRUE;
  return node->domain && strlen(node->domain) == dlen && strncmp(op, node->domain, dlen) == 0;
}

char *qh_pattern_text(const QhBackendPatternConfig *p) {
  GString *s = g_string_new(NULL);
  for (size_t i = 0; i < p->n_ops; i++)
    g_string_append_printf(s, "%s%s", i ? " -> " : "", p->ops[i]);
  return g_string_free(s, FALSE);
}

static gboolean is_weighted_op(const QhNode *n) {
  static const char *const ops[] = {"Conv", "ConvTranspose", "Gemm", "MatMul", NULL};
  for (int i = 0; ops[i]; i++)
    if (qh_pattern_op_matches(ops[i], n))
      return TRUE;
  return FALSE;
}

int32_t qh_pattern_input_role(const QhBackendPatternConfig *p, const QhNode *root, int slot) {
  if (p->input_roles && slot >= 0 && (size_t)slot < p->n_input_roles)
    return p->input_roles[slot];
  if (p->input_roles)
    return QH_ROLE_ACTIVATION;
  if (slot == 0 || !is_weighted_op(root))
    return QH_ROLE_ACTIVATION;
  return slot == 1 ? QH_ROLE_WEIGHT : slot == 2 ? QH_ROLE_BIAS : QH_ROLE_ACTIVATION;
}

typedef struct {
  const QhGraphFacts *facts;
  const gboolean *taken;
} MatchCtx;

/* Pattern op i sits on node id (already type-checked); find ops i-1 .. 0 upstream. */
static gboolean match_back(const MatchCtx *c, const QhBackendPatternConfig *p, int i, int id,
                           QhPatternMatch *m) {
  const QhGraph *g = c->facts->graph;
  const QhNode *n = qh_graph_node(g, id);
  m->nodes[i] = id;
  if (i == 0)
    return TRUE;
  for (int s = 0; s < n->n_inputs; s++) {
    int v = n->inputs[s];
    if (v < 0)
      continue;
    int prod = qh_graph_value(g, v)->producer;
    if (prod < 0 || c->taken[prod])
      continue;
    const QhNode *pn = qh_graph_node(g, prod);
    if (pn->is_removed || !qh_pattern_op_matches(p->ops[i - 1], pn))
      continue;
    if (qh_graph_facts_n_uses(c->facts, v) != 1)
      continue;
    gboolean others_ok = TRUE;
    if (!(p->extra_inputs_mask & (1u << i)))
      for (int o = 0; o < n->n_inputs && others_ok; o++)
        if (o != s && n->inputs[o] >= 0 && !qh_graph_facts_is_const(c->facts, n->inputs[o]))
          others_ok = FALSE;
    if (!others_ok)
      continue;
    m->chain_slot[i] = s;
    if (match_back(c, p, i - 1, prod, m))
      return TRUE;
  }
  return FALSE;
}

static gint longer_first(gconstpointer a, gconstpointer b, gpointer unused) {
  (void)unused;
  const QhBackendPatternConfig *pa = *(const QhBackendPatternConfig *const *)a;
  const QhBackendPatternConfig *pb = *(const QhBackendPatternConfig *const *)b;
  return (int)pb->n_ops - (int)pa->n_ops;
}

GArray *qh_pattern_match_all(const QhBackendConfig *bc, const QhGraphFacts *facts,
                             const GArray *order, const gboolean *excluded, int **out_node_match) {
  const QhGraph *g = facts->graph;
  int n_nodes = qh_graph_n_nodes(g);
  gboolean *taken = g_new0(gboolean, n_nodes > 0 ? n_nodes : 1);
  for (int i = 0; excluded && i < n_nodes; i++)
    taken[i] = excluded[i];
  /* g_qsort_with_data is stable, so table order decides among equal lengths. */
  GPtrArray *sorted = g_ptr_array_new();
  for (size_t i = 0; bc && i < bc->n_patterns; i++)
    g_ptr_array_add(sorted, (gpointer)bc->patterns[i]);
  g_qsort_with_data(sorted->pdata, (gint)sorted->len, sizeof(gpointer), longer_first, NULL);

  GArray *by_last = g_array_new(FALSE, TRUE, sizeof(QhPatternMatch));
  MatchCtx c = {facts, taken};
  for (guint k = order->len; k-- > 0;) {
    int id = g_array_index(order, int, k);
    if (taken[id])
      continue;
    const QhNode *n = qh_graph_node(g, id);
    for (guint j = 0; j < sorted->len; j++) {
      const QhBackendPatternConfig *p = g_ptr_array_index(sorted, j);
      if (!qh_pattern_op_matches(p->ops[p->n_ops - 1], n))
        continue;
      QhPatternMatch m = {.pattern = p, .n = (int)p->n_ops};
      if (!match_back(&c, p, (int)p->n_ops - 1, id, &m))
        continue;
      for (int i = 0; i < m.n; i++)
        taken[m.nodes[i]] = TRUE;
      g_array_append_val(by_last, m);
      break;
    }
  }
  g_ptr_array_unref(sorted);
  /* Found from the end backwards: reverse to graph order of the last nodes. */
  GArray *matches = g_array_sized_new(FALSE, TRUE, sizeof(QhPatternMatch), by_last->len);
  for (guint k = by_last->len; k-- > 0;)
    g_array_append_val(matches, g_array_index(by_last, QhPatternMatch, k));
  g_array_unref(by_last);
  int *node_match = g_new(int, n_nodes > 0 ? n_nodes : 1);
  for (int i = 0; i < n_nodes; i++)
    node_match[i] = -1;
  for (guint k = 0; k < matches->len; k++) {
    const QhPatternMatch *m = &g_array_index(matches, QhPatternMatch, k);
    for (int i = 0; i < m->n; i++)
      node_match[m->nodes[i]] = (int)k;
  }
  g_free(taken);
  *out_node_match = node_match;
  return matches;
}
