/* Float regions: the parts of a transformer export that PyTorch 1.13 leaves float and
 * that the declarative annotator must keep its patterns off. LayerNorm exported at opset
 * 13-16 (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, then the affine Mul and Add)
 * and GELU (the Erf form and the tanh form) are elementwise ops to ONNX, and their Mul
 * and Add would otherwise match the `mul`/`add` patterns and get Q/DQ inside the
 * normalisation; 1.13 sees one LayerNorm / GELU module there and its x86, fbgemm and
 * qnnpack configs have no pattern for either. Attention-mask arithmetic (the float
 * mask made from a boolean padding or causal mask, and the Add that puts it on the
 * scores) may hold -inf and must never reach an observer; a Softmax reading such a sum
 * keeps its fixed-qparams output but its input is not observed. Everything here only
 * reads the graph; the annotator turns the findings into report entries. */
#include <math.h>
#include <string.h>

#include "quant/backend-annotate-private.h"

typedef struct {
  const QhGraphFacts *f;
  const QhGraph *g;
  QhFloatRegions *r;
} Finder;

static gboolean is_op(const QhNode *n, const char *op) {
  return n && !n->is_removed && qh_pattern_op_matches(op, n);
}

static const QhNode *producer(const Finder *c, int v) {
  if (v < 0)
    return NULL;
  int p = qh_graph_value(c->g, v)->producer;
  return p >= 0 ? qh_graph_node(c->g, p) : NULL;
}

/* The only consumer of v (NULL unless v has exactly one use and is no graph output). */
static const QhNode *sole_user(const Finder *c, int v) {
  if (v < 0 || qh_graph_facts_n_uses(c->f, v) != 1)
    return NULL;
  const GArray *u = g_ptr_array_index(c->f->users, v);
  return u && u->len == 1 ? qh_graph_node(c->g, g_array_index(u, int, 0)) : NULL;
}

static gboolean is_const(const Finder *c, int v) {
  return qh_graph_facts_is_const(c->f, v);
}

/* For a binary node reading v: its other input (or -1 when the node does not read v). */
static int other_input(const QhNode *n, int v) {
  if (n == NULL || n->n_inputs != 2)
    return -1;
  if (n->inputs[0] == v)
    return n->inputs[1];
  return n->inputs[1] == v ? n->inputs[0] : -1;
}

/* A binary op reading v with a constant other operand. */
static gboolean const_binary(const Finder *c, const QhNode *n, const char *op, int v) {
  return is_op(n, op) && is_const(c, other_input(n, v));
}

static gboolean free_node(const Finder *c, const QhNode *n) {
  return n && c->r->reason[n->id] == NULL;
}

static void claim(Finder *c, const QhNode *const *nodes, int n, const char *reason) {
  for (int i = 0; i < n; i++)
    if (nodes[i])
      c->r->reason[nodes[i]->id] = g_strdup(reason);
}

/* ReduceMean(x) -> Sub(x, mean) -> {Pow(d, 2) | Mul(d, d)} -> ReduceMean -> Add(eps) ->
 * Sqrt -> Div(d, sqrt) [-> Mul(gamma) [-> Add(beta)]], rooted at the first ReduceMean. */
static void find_layer_norm(Finder *c, const QhNode *mean) {
  if (!is_op(mean, "ReduceMean") || mean->n_inputs < 1 || !free_node(c, mean))
    return;
  int x = mean->inputs[0];
  const QhNode *sub = sole_user(c, qh_node_output(mean, 0));
  if (!is_op(sub, "Sub") || sub->n_inputs != 2 || sub->inputs[0] != x)
    return;
  int d = qh_node_output(sub, 0);
  const GArray *du = d >= 0 ? g_ptr_array_index(c->f->users, d) : NULL;
  if (du == NULL || du->len != 2 || c->f->is_output[d])
    return;
  const QhNode *sq = NULL, *div = NULL;
  for (guint i = 0; i < 2; i++) {
    const QhNode *u = qh_graph_node(c->g, g_array_index(du, int, i));
    if (is_op(u, "Div") && u->inputs[0] == d)
      div = u;
    else if ((is_op(u, "Pow") && u->inputs[0] == d && is_const(c, u->inputs[1])) ||
             (is_op(u, "Mul") && u->inputs[0] == d && u->inputs[1] == d))
      sq = u;
  }
  if (sq == NULL || div == NULL)
    return;
  const QhNode *var = sole_user(c, qh_node_output(sq, 0));
  if (!is_op(var, "ReduceMean"))
    return;
  const QhNode *eps = sole_user(c, qh_node_output(var, 0));
  if (!const_binary(c, eps, "Add", qh_node_output(var, 0)))
    return;
  const QhNode *sqrt = sole_user(c, qh_node_output(eps, 0));
  if (!is_op(sqrt, "Sqrt") || sole_user(c, qh_node_output(sqrt, 0)) != div || div->inputs[1] != qh_node_output(sqrt, 0))
    return;
  const QhNode *gamma = sole_user(c, qh_node_output(div, 0));
  if (!const_binary(c, gamma, "Mul", qh_node_output(div, 0)))
    gamma = NULL;
  const QhNode *beta = gamma ? sole_user(c, qh_node_output(gamma, 0)) : NULL;
  if (!const_binary(c, beta, "Add", qh_node_output(gamma, 0)))
    beta = NULL;
  const QhNode *nodes[] = {mean, sub, sq, var, eps, sqrt, div, gamma, beta};
  char *why = g_strdup_printf("LayerNorm decomposition (ReduceMean '%s' .. %s '%s') stays float: "
                              "PyTorch 1.13's configs have no LayerNorm pattern",
                              mean->name, beta ? "Add" : gamma ? "Mul" : "Div",
                              (beta ? beta : gamma ? gamma : div)->name);
  claim(c, nodes, G_N_ELEMENTS(nodes), why);
  g_free(why);
}

#define GELU_MAX_INNER 6

/* The elementwise ops between GELU's input x and its Erf/Tanh: every intermediate value
 * read only inside; x is the one outside value they read. Returns x, or -1. */
static int gelu_inner(Finder *c, const QhNode *core, const QhNode **inner, int *n_inner) {
  static const char *const ops[] = {"Mul", "Div", "Add", "Pow", NULL};
  int x = -1;
  int stack[GELU_MAX_INNER * 2 + 1], top = 0;
  stack[top++] = core->inputs[0];
  *n_inner = 0;
  while (top > 0) {
    int v = stack[--top];
    if (is_const(c, v))
      continue;
    const QhNode *p = producer(c, v);
    gboolean inside = p && free_node(c, p) && qh_graph_facts_n_uses(c->f, v) == 1;
    gboolean known = FALSE;
    for (int i = 0; inside && ops[i]; i++)
      known = known || is_op(p, ops[i]);
    if (!inside || !known) {
      if (x >= 0 && x != v)
        return -1;
      x = v;
      continue;
    }
    for (int k = 0; k < *n_inner; k++)
      if (inner[k] == p)
        return -1;
    if (*n_inner == GELU_MAX_INNER)
      return -1;
    inner[(*n_inner)++] = p;
    for (int s = 0; s < p->n_inputs; s++) {
      if (top == (int)G_N_ELEMENTS(stack))
        return -1;
      stack[top++] = p->inputs[s];
    }
  }
  return x;
}

/* x -> {Div(sqrt 2) -> Erf | ... -> Tanh} -> Add(1) -> Mul(x, .) -> Mul(0.5), with the
 * 0.5 applied to x or to the product in either order, rooted at the Erf/Tanh. */
static void find_gelu(Finder *c, const QhNode *core) {
  gboolean erf = is_op(core, "Erf");
  if ((!erf && !is_op(core, "Tanh")) || core->n_inputs != 1 || !free_node(c, core))
    return;
  const QhNode *inner[GELU_MAX_INNER];
  int n_inner = 0;
  int x = gelu_inner(c, core, inner, &n_inner);
  if (x < 0 || n_inner == 0)
    return;
  const QhNode *one = sole_user(c, qh_node_output(core, 0));
  if (!const_binary(c, one, "Add", qh_node_output(core, 0)))
    return;
  int a = qh_node_output(one, 0);
  const QhNode *m1 = sole_user(c, a);
  int y = other_input(is_op(m1, "Mul") ? m1 : NULL, a);
  const QhNode *half_x = NULL, *half_out = NULL, *times_x = NULL;
  if (y < 0)
    return;
  if (y == x) {
    half_out = sole_user(c, qh_node_output(m1, 0));
    if (!const_binary(c, half_out, "Mul", qh_node_output(m1, 0)))
      half_out = NULL;
  } else if (is_const(c, y)) {
    times_x = sole_user(c, qh_node_output(m1, 0));
    if (!is_op(times_x, "Mul") || other_input(times_x, qh_node_output(m1, 0)) != x)
      return;
  } else {
    half_x = producer(c, y);
    if (!free_node(c, half_x) || !const_binary(c, half_x, "Mul", x) || qh_graph_facts_n_uses(c->f, y) != 1)
      return;
  }
  const QhNode *nodes[GELU_MAX_INNER + 6] = {core, one, m1, half_x, half_out, times_x};
  for (int i = 0; i < n_inner; i++)
    nodes[6 + i] = inner[i];
  char *why = g_strdup_printf("GELU decomposition (%s form, around '%s') stays float: PyTorch "
                              "1.13's configs have no GELU pattern", erf ? "Erf" : "tanh", core->name);
  claim(c, nodes, 6 + n_inner, why);
  g_free(why);
}

static gboolean has_nonfinite(const QhTensor *t) {
  if (t == NULL || t->dtype != QH_DTYPE_F32 || t->data == NULL)
    return FALSE;
  const float *d = t->data;
  for (int64_t i = 0, n = qh_tensor_numel(t); i < n; i++)
    if (!isfinite(d[i]))
      return TRUE;
  return FALSE;
}

static gboolean op_in(const QhNode *n, const char *const *ops) {
  for (int i = 0; ops[i]; i++)
    if (is_op(n, ops[i]))
      return TRUE;
  return FALSE;
}

/* Ops that make a float mask out of boolean or integer tensors, shapes and constants. */
static const char *const mask_source_ops[] = {"Where", "Cast", "ConstantOfShape", "Expand", "ScatterND", NULL};
/* Ops a mask passes through and stays a mask (or, mixed with data, a masked tensor). */
static const char *const mask_ops[] = {"Where", "Cast", "Expand", "ScatterND", "Reshape", "Unsqueeze",
                                       "Squeeze", "Transpose", "Flatten", "Slice", "Gather", "Concat",
                                       "Tile", "Identity", "Neg", "Add", "Sub", "Mul", "Div", NULL};
/* Ops that apply a mask to data. */
static const char *const mask_apply_ops[] = {"Add", "Sub", "Mul", "Where", NULL};

/* Masks: float values made from masks, shapes and constants only (or constants holding
 * -inf, initializers or Constant nodes: 1.13 folds a causal mask built without triu into
 * a Constant at opset 13); mask arithmetic: an Add/Sub/Mul/Where that applies a mask to data, whose output
 * may then hold -inf, and the shape ops that carry that output on. A Softmax ends it
 * (its output is finite). A mask-like value no mask arithmetic reads (an LSTM's zero
 * initial state) is no mask. */
static void find_masks(Finder *c, const GArray *order) {
  int n_values = qh_graph_n_values(c->g), n_nodes = qh_graph_n_nodes(c->g);
  gboolean *applied = g_new0(gboolean, n_values > 0 ? n_values : 1);
  gboolean *is_mask_node = g_new0(gboolean, n_nodes > 0 ? n_nodes : 1);
  for (int v = 0; v < n_values; v++)
    if (qh_graph_facts_is_float(c->f, v) && has_nonfinite(qh_graph_facts_const_tensor(c->f, v)))
      c->r->mask[v] = TRUE;
  for (guint k = 0; k < order->len; k++) {
    const QhNode *n = qh_graph_node(c->g, g_array_index(order, int, k));
    int out = qh_node_output(n, 0);
    if (out < 0 || !qh_graph_facts_is_float(c->f, out) || !free_node(c, n))
      continue;
    gboolean reads_mask = FALSE, reads_data = FALSE, reads_tainted = FALSE;
    const char *mask_name = NULL;
    for (int s = 0; s < n->n_inputs; s++) {
      int v = n->inputs[s];
      if (v < 0 || !qh_graph_facts_is_float(c->f, v))
        continue;
      if (c->r->mask[v] || c->r->tainted[v]) {
        reads_mask = reads_mask || c->r->mask[v];
        reads_tainted = reads_tainted || c->r->tainted[v];
        if (mask_name == NULL)
          mask_name = qh_graph_value(c->g, v)->name;
      } else if (!is_const(c, v)) {
        reads_data = TRUE;
      }
    }
    if (!reads_mask && !reads_tainted) {
      if (!reads_data && op_in(n, mask_source_ops)) {
        c->r->mask[out] = TRUE;
        is_mask_node[n->id] = TRUE;
      }
      continue;
    }
    if (!op_in(n, mask_ops))
      continue; /* a Softmax, an LSTM reading a zero state, ...: annotated as usual */
    if (!reads_data && !reads_tainted) {
      c->r->mask[out] = TRUE;
      is_mask_node[n->id] = TRUE;
      continue;
    }
    if (!reads_tainted && !op_in(n, mask_apply_ops))
      continue;
    c->r->tainted[out] = TRUE;
    for (int s = 0; s < n->n_inputs; s++)
      if (n->inputs[s] >= 0)
        applied[n->inputs[s]] = TRUE;
    c->r->reason[n->id] = g_strdup_printf("attention mask arithmetic (reads the mask '%s') stays "
                                          "float: -inf must never reach an observer", mask_name);
  }
  /* Backwards: the mask nodes whose values mask arithmetic reads, directly or through
   * other mask nodes, are masks; the others are ordinary float values again. */
  for (guint k = order->len; k-- > 0;) {
    const QhNode *n = qh_graph_node(c->g, g_array_index(order, int, k));
    int out = qh_node_output(n, 0);
    if (!is_mask_node[n->id])
      continue;
    if (!applied[out]) {
      c->r->mask[out] = FALSE;
      continue;
    }
    for (int s = 0; s < n->n_inputs; s++)
      if (n->inputs[s] >= 0)
        applied[n->inputs[s]] = TRUE;
    c->r->reason[n->id] = g_strdup("attention mask (made from a boolean or integer mask, shapes and "
                                   "constants) stays float: it may hold -inf");
  }
  g_free(applied);
  g_free(is_mask_node);
}

void qh_float_regions_find(QhFloatRegions *r, const QhGraphFacts *facts, const GArray *order) {
  const QhGraph *g = facts->graph;
  int n_nodes = qh_graph_n_nodes(g), n_values = qh_graph_n_values(g);
  r->reason = g_new0(char *, n_nodes > 0 ? n_nodes : 1);
  r->n_nodes = n_nodes;
  r->mask = g_new0(gboolean, n_values > 0 ? n_values : 1);
  r->tainted = g_new0(gboolean, n_values > 0 ? n_values : 1);
  Finder c = {facts, g, r};
  for (guint k = 0; k < order->len; k++)
    find_layer_norm(&c, qh_graph_node(g, g_array_index(order, int, k)));
  for (guint k = 0; k < order->len; k++)
    find_gelu(&c, qh_graph_node(g, g_array_index(order, int, k)));
  for (guint k = 0; k < order->len; k++) {
    const QhNode *n = qh_graph_node(g, g_array_index(order, int, k));
    if (free_node(&c, n) && (is_op(n, "LayerNormalization") || is_op(n, "Gelu")))
      r->reason[n->id] = g_strdup_printf("%s stays float: PyTorch 1.13's x86, fbgemm and qnnpack "
                                         "configs have no pattern for it", n->op_type);
  }
  find_masks(&c, order);
}

void qh_float_regions_clear(QhFloatRegions *r) {
  for (int i = 0; r->reason && i < r->n_nodes; i++)
    g_free(r->reason[i]);
  g_clear_pointer(&r->reason, g_free);
  g_clear_pointer(&r->mask, g_free);
  g_clear_pointer(&r->tainted, g_free);
}
