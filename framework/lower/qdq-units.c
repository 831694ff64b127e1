/* Finds the node units of a QDQ graph that a plugin's lowering patterns describe:
 * for each op in topological order, the first pattern whose op chain starts there,
 * whose intermediate values are private to the chain, whose computed inputs come
 * through DequantizeLinear and whose output (usually) goes through one
 * QuantizeLinear. The quantization parameters are read from the Q/DQ constant inputs
 * and kept in the unit, so the unit can be handed to a plugin as a QhNodeUnit
 * without further copies. A pattern of the one pseudo-op QH_PATTERN_OP_REQUANTIZE
 * (ABI 1.2) matches no float op but a requantize step, DequantizeLinear -> QuantizeLinear:
 * its unit is the QuantizeLinear, its input the integer tensor before the
 * DequantizeLinear. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "hostapi/annotation.h"
#include "hostapi/qdq-qparams.h"
#include "lower/qdq-units.h"

/* Every (node, slot) reading each value, from live nodes. */
typedef struct {
  const QhGraph *g;
  GArray **uses; /* per value: GArray of int pairs (node, slot), or NULL */
  gboolean *claimed;
} Ctx;

enum { NO_MATCH = 0, MATCH = 1, FAILED = -1 };

static gboolean is_default_domain(const char *d) {
  return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

/* ops in a pattern are "Op" or "domain:Op". */
static gboolean op_is(const QhNode *n, const char *pat) {
  const char *colon = strchr(pat, ':');
  if (!colon)
    return is_default_domain(n->domain) && strcmp(n->op_type, pat) == 0;
  size_t dl = (size_t)(colon - pat);
  const char *d = n->domain ? n->domain : "";
  gboolean dom = (strlen(d) == dl && strncmp(d, pat, dl) == 0) ||
                 (is_default_domain(d) && dl == 7 && strncmp(pat, "ai.onnx", 7) == 0);
  return dom && strcmp(n->op_type, colon + 1) == 0;
}

static gboolean is_plain(const QhNode *n, const char *op) {
  return is_default_domain(n->domain) && strcmp(n->op_type, op) == 0;
}

static guint n_uses(const Ctx *c, int v) { return c->uses[v] ? c->uses[v]->len / 2 : 0; }
static int use_node(const Ctx *c, int v, guint i) { return g_array_index(c->uses[v], int, 2 * i); }
static int use_slot(const Ctx *c, int v, guint i) { return g_array_index(c->uses[v], int, 2 * i + 1); }

/* A value leaves the chain only through output 0: other outputs must be unused. */
static gboolean side_outputs_unused(const Ctx *c, const QhNode *n) {
  for (int i = 1; i < n->n_outputs; i++)
    if (n->outputs[i] >= 0 && (n_uses(c, n->outputs[i]) || qh_graph_value(c->g, n->outputs[i])->is_output))
      return FALSE;
  return TRUE;
}

static int add_input(const Ctx *c, QhQdqUnit *u, int node, int slot, int32_t role,
                     GError **error) {
  int v = qh_node_input(qh_graph_node(c->g, node), slot);
  if (v < 0)
    return MATCH;
  const QhValue *val = qh_graph_value(c->g, v);
  QhQdqUnitInput in = {.node = node, .slot = slot, .dq_node = -1, .value = v, .read_value = v,
                       .role = role};
  const QhNode *p = val->producer >= 0 ? qh_graph_node(c->g, val->producer) : NULL;
  if (p && is_plain(p, "DequantizeLinear") && qh_node_input(p, 0) >= 0) {
    int x = qh_node_input(p, 0);
    int r = qh_qdq_read_qparams(c->g, p, x, &in.qparams, error);
    if (r != MATCH)
      return r;
    in.dq_node = p->id;
    in.value = x;
    in.quantized = TRUE;
  } else if (!val->initializer && role != QH_ROLE_NOT_OBSERVED) {
    return NO_MATCH; /* a computed float input: not a QDQ unit */
  }
  g_array_append_val(u->inputs, in);
  return MATCH;
}

static void unit_clear_inputs(QhQdqUnit *u) {
  for (guint i = 0; i < u->inputs->len; i++)
    qh_qdq_qparams_clear(&g_array_index(u->inputs, QhQdqUnitInput, i).qparams);
  g_array_set_size(u->inputs, 0);
}

static gboolean qparams_equal(const QhQParams *a, const QhQParams *b) {
  return a->dtype == b->dtype && a->qscheme == b->qscheme && a->quant_min == b->quant_min &&
         a->quant_max == b->quant_max && a->ch_axis == b->ch_axis && a->count == b->count &&
         memcmp(a->scale, b->scale, a->count * sizeof *a->scale) == 0 &&
         memcmp(a->zero_point, b->zero_point, a->count * sizeof *a->zero_point) == 0;
}

/* The op reading v, or the op behind a Q -> DQ pair reading v when the pattern may
 * cross one (QH_PATTERN_THROUGH_SHARED_QDQ): each link read by that one node only.
 * *q and *dq are the pair's nodes, or -1. Returns -1 when v has no such single reader. */
static int next_op(const Ctx *c, const QhLoweringPattern *pat, int v, int *q, int *dq) {
  *q = *dq = -1;
  if (n_uses(c, v) != 1 || qh_graph_value(c->g, v)->is_output)
    return -1;
  int next = use_node(c, v, 0);
  const QhNode *qn = qh_graph_node(c->g, next);
  if (!(pat->flags & QH_PATTERN_THROUGH_SHARED_QDQ) || !is_plain(qn, "QuantizeLinear") ||
      use_slot(c, v, 0) != 0)
    return next;
  int qv = qh_node_output(qn, 0);
  if (qv < 0 || n_uses(c, qv) != 1 || qh_graph_value(c->g, qv)->is_output || !side_outputs_unused(c, qn))
    return -1;
  const QhNode *dqn = qh_graph_node(c->g, use_node(c, qv, 0));
  int dv = qh_node_output(dqn, 0);
  if (!is_plain(dqn, "DequantizeLinear") || use_slot(c, qv, 0) != 0 || dv < 0 || n_uses(c, dv) != 1 ||
      qh_graph_value(c->g, dv)->is_output || !side_outputs_unused(c, dqn))
    return -1;
  *q = qn->id;
  *dq = dqn->id;
  return use_node(c, dv, 0);
}

/* Every crossed pair must quantize on the unit's output grid: then dropping its
 * rounding is exact for the ops the flag is meant for. */
static int crossed_pairs_match(const Ctx *c, const QhQdqUnit *u, GError **error) {
  for (int i = 1; i < u->n_nodes; i++) {
    if (u->crossed_q[i] < 0)
      continue;
    if (u->float_output)
      return NO_MATCH;
    const QhNode *qn = qh_graph_node(c->g, u->crossed_q[i]);
    const QhNode *dqn = qh_graph_node(c->g, u->crossed_dq[i]);
    int x = qh_node_output(qn, 0);
    QhQParams a = {0}, b = {0};
    int r = qh_qdq_read_qparams(c->g, qn, x, &a, error);
    if (r == MATCH)
      r = qh_qdq_read_qparams(c->g, dqn, x, &b, error);
    if (r == MATCH && (!qparams_equal(&a, &b) || !qparams_equal(&a, &u->output_qparams)))
      r = NO_MATCH;
    qh_qdq_qparams_clear(&a);
    qh_qdq_qparams_clear(&b);
    if (r != MATCH)
      return r;
  }
  return MATCH;
}

static gboolean is_requantize_pattern(const QhLoweringPattern *pat) {
  return pat->n_ops >= 1 && pat->ops && pat->ops[0] && strcmp(pat->ops[0], QH_PATTERN_OP_REQUANTIZE) == 0;
}

/* A requantize unit at QuantizeLinear q: its float input made by a DequantizeLinear
 * (read by others too or not: that one stays for them), its output read or a graph
 * output. The unit is q alone, so rewriting it leaves the DequantizeLinear to the
 * dead-node sweep and the reference path keeps the exact pair it replaces. */
static int try_requantize(const Ctx *c, const QhLoweringPattern *pat, int start, QhQdqUnit *u,
                          GError **error) {
  const QhNode *q = qh_graph_node(c->g, start);
  if (pat->n_ops != 1 || !is_plain(q, "QuantizeLinear") || q->n_inputs < 2 || !side_outputs_unused(c, q))
    return NO_MATCH;
  int x = qh_node_input(q, 0), qo = qh_node_output(q, 0);
  if (x < 0 || qo < 0 || (n_uses(c, qo) == 0 && !qh_graph_value(c->g, qo)->is_output))
    return NO_MATCH;
  const QhValue *xv = qh_graph_value(c->g, x);
  if (xv->producer < 0 || !is_plain(qh_graph_node(c->g, xv->producer), "DequantizeLinear"))
    return NO_MATCH;
  u->nodes[0] = start;
  u->n_nodes = 1;
  for (size_t i = 0; i < QH_PATTERN_MAX_OPS; i++)
    u->crossed_q[i] = u->crossed_dq[i] = -1;
  unit_clear_inputs(u);
  int r = add_input(c, u, start, 0, QH_ROLE_ACTIVATION, error);
  if (r != MATCH)
    return r;
  if (u->inputs->len != 1 || !g_array_index(u->inputs, QhQdqUnitInput, 0).quantized)
    return NO_MATCH;
  r = qh_qdq_read_qparams(c->g, q, qo, &u->output_qparams, error);
  if (r != MATCH)
    return r;
  u->chain_output = x;
  u->output = qo;
  u->q_node = -1; /* q is the unit's node: the rewrite removes it as such */
  u->float_output = FALSE;
  return MATCH;
}

static int try_pattern(const Ctx *c, const QhLoweringPattern *pat, int start, QhQdqUnit *u,
                       GError **error) {
  if (pat->n_ops < 1 || pat->n_ops > QH_LOWERING_PATTERN_MAX_OPS || !pat->ops)
    return NO_MATCH;
  if (is_requantize_pattern(pat))
    return try_requantize(c, pat, start, u, error);
  const QhNode *n = qh_graph_node(c->g, start);
  if (is_plain(n, "QuantizeLinear") || is_plain(n, "DequantizeLinear"))
    return NO_MATCH; /* only a requantize pattern starts at a Q/DQ node */
  if (!pat->ops[0] || !op_is(n, pat->ops[0]))
    return NO_MATCH;
  int chain_slot[QH_LOWERING_PATTERN_MAX_OPS];
  u->nodes[0] = start;
  for (size_t i = 0; i < QH_LOWERING_PATTERN_MAX_OPS; i++)
    u->crossed_q[i] = u->crossed_dq[i] = chain_slot[i] = -1;
  for (size_t i = 1; i < pat->n_ops; i++) {
    const QhNode *prev = qh_graph_node(c->g, u->nodes[i - 1]);
    int v = qh_node_output(prev, 0);
    if (v < 0 || !side_outputs_unused(c, prev))
      return NO_MATCH;
    int next = next_op(c, pat, v, &u->crossed_q[i], &u->crossed_dq[i]);
    if (next < 0)
      return NO_MATCH;
    const QhNode *nn = qh_graph_node(c->g, next);
    if (c->claimed[next] || !pat->ops[i] || !op_is(nn, pat->ops[i]))
      return NO_MATCH;
    u->nodes[i] = next;
    /* The slot the chain enters: of the crossed DequantizeLinear's output if any. */
    int entering = u->crossed_dq[i] >= 0 ? qh_node_output(qh_graph_node(c->g, u->crossed_dq[i]), 0) : v;
    chain_slot[i] = use_slot(c, entering, 0);
  }
  u->n_nodes = (int)pat->n_ops;
  unit_clear_inputs(u);
  for (int s = 0; s < n->n_inputs; s++) {
    int32_t role = pat->input_roles && (size_t)s < pat->n_input_roles
                       ? pat->input_roles[s]
                       : qh_annotation_default_role(n->op_type, s);
    int r = add_input(c, u, start, s, role, error);
    if (r != MATCH)
      return r;
  }
  for (int i = 1; i < u->n_nodes; i++) {
    const QhNode *op = qh_graph_node(c->g, u->nodes[i]);
    for (int s = 0; s < op->n_inputs; s++) {
      if (s == chain_slot[i] || op->inputs[s] < 0)
        continue;
      if (!(pat->extra_inputs_mask & (1u << i)))
        return NO_MATCH;
      int32_t role = pat->flags & QH_PATTERN_FLOAT_EXTRA_INPUTS ? QH_ROLE_NOT_OBSERVED : QH_ROLE_ACTIVATION;
      int r = add_input(c, u, u->nodes[i], s, role, error);
      if (r != MATCH)
        return r;
    }
  }
  const QhNode *last = qh_graph_node(c->g, u->nodes[u->n_nodes - 1]);
  int out = qh_node_output(last, 0);
  if (out < 0 || !side_outputs_unused(c, last))
    return NO_MATCH;
  const QhValue *ov = qh_graph_value(c->g, out);
  if (n_uses(c, out) == 0 && !ov->is_output)
    return NO_MATCH;
  u->chain_output = u->output = out;
  u->q_node = -1;
  u->float_output = TRUE;
  if (n_uses(c, out) == 1 && !ov->is_output) {
    const QhNode *q = qh_graph_node(c->g, use_node(c, out, 0));
    int qo = qh_node_output(q, 0);
    if (is_plain(q, "QuantizeLinear") && use_slot(c, out, 0) == 0 && qo >= 0) {
      int r = qh_qdq_read_qparams(c->g, q, qo, &u->output_qparams, error);
      if (r != MATCH)
        return r;
      u->q_node = q->id;
      u->output = qo;
      u->float_output = FALSE;
    }
  }
  return crossed_pairs_match(c, u, error);
}

/* A tensor of the unit as far as the graph declares it (rank -1 when unknown); the
 * lowering overwrites it with the plan's shapes and the kernel's layouts. */
static void declared_tensor(const QhGraph *g, int value, const QhQParams *q, QhTensorView *t) {
  const QhValue *v = qh_graph_value(g, value);
  *t = (QhTensorView){QH_STRUCT_HEADER(QhTensorView)};
  t->dtype = (int32_t)v->dtype;
  t->rank = v->shape.rank >= 0 && v->shape.rank <= QH_MAX_RANK ? v->shape.rank : -1;
  if (t->rank >= 0)
    memcpy(t->dims, v->shape.dims, sizeof(int64_t) * (size_t)t->rank);
  t->layout = t->rank == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY;
  t->qparams = q;
}

static void build_abi(const QhGraph *g, QhQdqUnit *u) {
  guint k = u->inputs->len;
  for (int i = 0; i < u->n_nodes; i++)
    u->abi_nodes[i] = (uint32_t)u->nodes[i];
  u->abi_inputs = g_new0(uint32_t, k ? k : 1);
  u->abi_roles = g_new0(int32_t, k ? k : 1);
  u->abi_input_qparams = g_new0(const QhQParams *, k ? k : 1);
  u->abi_input_tensors = g_new0(QhTensorView, k ? k : 1);
  for (guint i = 0; i < k; i++) {
    QhQdqUnitInput *in = &g_array_index(u->inputs, QhQdqUnitInput, i);
    u->abi_inputs[i] = (uint32_t)in->value;
    u->abi_roles[i] = in->role;
    u->abi_input_qparams[i] = in->quantized ? &in->qparams : NULL;
    declared_tensor(g, in->value, u->abi_input_qparams[i], &u->abi_input_tensors[i]);
  }
  u->abi_output = (uint32_t)u->output;
  u->abi_output_qparams = u->float_output ? NULL : &u->output_qparams;
  u->abi_output_tensor = g_new0(QhTensorView, 1);
  declared_tensor(g, u->output, u->abi_output_qparams, u->abi_output_tensor);
}

static QhQdqUnit *unit_new(void) {
  QhQdqUnit *u = g_new0(QhQdqUnit, 1);
  u->inputs = g_array_new(FALSE, TRUE, sizeof(QhQdqUnitInput));
  u->q_node = -1;
  for (int i = 0; i < QH_LOWERING_PATTERN_MAX_OPS; i++)
    u->crossed_q[i] = u->crossed_dq[i] = -1;
  return u;
}

void qh_qdq_unit_free(QhQdqUnit *u) {
  if (!u)
    return;
  unit_clear_inputs(u);
  g_array_unref(u->inputs);
  qh_qdq_qparams_clear(&u->output_qparams);
  g_free(u->abi_inputs);
  g_free(u->abi_roles);
  g_free(u->abi_input_qparams);
  g_free(u->abi_input_tensors);
  g_free(u->abi_output_tensor);
  g_free(u);
}

void qh_qdq_unit_to_abi(const QhQdqUnit *u, QhNodeUnit *out) {
  *out = (QhNodeUnit){QH_STRUCT_HEADER(QhNodeUnit)};
  out->pattern_id = u->pattern ? u->pattern->id : NULL;
  out->nodes = u->abi_nodes;
  out->n_nodes = (size_t)u->n_nodes;
  out->inputs = u->abi_inputs;
  out->n_inputs = u->inputs->len;
  out->input_roles = u->abi_roles;
  out->input_qparams = u->abi_input_qparams;
  out->outputs = &u->abi_output;
  out->n_outputs = 1;
  out->output_qparams = &u->abi_output_qparams;
  out->input_tensors = u->abi_input_tensors;
  out->output_tensors = u->abi_output_tensor;
}

static void ctx_clear(Ctx *c) {
  for (int v = 0; c->uses && v < qh_graph_n_values(c->g); v++)
    if (c->uses[v])
      g_array_unref(c->uses[v]);
  g_free(c->uses);
  g_free(c->claimed);
}

static void unit_reset(QhQdqUnit *u) {
  unit_clear_inputs(u);
  qh_qdq_qparams_clear(&u->output_qparams);
  g_clear_pointer(&u->abi_inputs, g_free);
  g_clear_pointer(&u->abi_roles, g_free);
  g_clear_pointer(&u->abi_input_qparams, g_free);
  g_clear_pointer(&u->abi_input_tensors, g_free);
  g_clear_pointer(&u->abi_output_tensor, g_free);
}

GPtrArray *qh_qdq_match_units(const QhGraph *g, const QhLoweringPattern *const *patterns,
                              size_t n, GError **error) {
  return qh_qdq_match_units_with(g, patterns, n, NULL, NULL, error);
}

GPtrArray *qh_qdq_match_units_with(const QhGraph *g, const QhLoweringPattern *const *patterns,
                                   size_t n, QhQdqAcceptFn accept, gpointer user_data,
                                   GError **error) {
  GArray *order = NULL;
  if (!qh_graph_topo_order(g, &order, error))
    return NULL;
  Ctx c = {g, g_new0(GArray *, qh_graph_n_values(g) + 1), g_new0(gboolean, qh_graph_n_nodes(g) + 1)};
  for (guint i = 0; i < order->len; i++) {
    const QhNode *nd = qh_graph_node(g, g_array_index(order, int, i));
    for (int s = 0; s < nd->n_inputs; s++) {
      int v = nd->inputs[s];
      if (v < 0)
        continue;
      if (!c.uses[v])
        c.uses[v] = g_array_new(FALSE, FALSE, sizeof(int));
      int pair[2] = {nd->id, s};
      g_array_append_vals(c.uses[v], pair, 2);
    }
  }
  GPtrArray *units = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qdq_unit_free);
  QhQdqUnit *u = unit_new();
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < order->len; i++) {
    int id = g_array_index(order, int, i);
    const QhNode *nd = qh_graph_node(g, id);
    /* A QuantizeLinear starts only a requantize unit (try_pattern); a DequantizeLinear none. */
    if (c.claimed[id] || is_plain(nd, "DequantizeLinear"))
      continue;
    for (size_t p = 0; p < n; p++) {
      if (!patterns[p])
        continue;
      int r = try_pattern(&c, patterns[p], id, u, error);
      if (r == FAILED) {
        ok = FALSE;
        break;
      }
      if (r == NO_MATCH) {
        unit_reset(u);
        continue;
      }
      u->pattern = patterns[p];
      u->pattern_index = p;
      build_abi(c.g, u);
      if (accept) {
        r = accept(user_data, u, error);
        if (r < 0) {
          ok = FALSE;
          break;
        }
        if (r == 0) {
          unit_reset(u);
          continue;
        }
      }
      if (u->q_node >= 0)
        c.claimed[u->q_node] = TRUE; /* no requantize unit at a unit's own output Q */
      for (int k = 0; k < u->n_nodes; k++) {
        c.claimed[u->nodes[k]] = TRUE;
        if (u->crossed_q[k] >= 0)
          c.claimed[u->crossed_q[k]] = c.claimed[u->crossed_dq[k]] = TRUE;
      }
      g_ptr_array_add(units, u);
      u = unit_new();
      break;
    }
  }
  qh_qdq_unit_free(u);
  ctx_clear(&c);
  g_array_unref(order);
  if (!ok) {
    g_ptr_array_unref(units);
    return NULL;
  }
  return units;
}
