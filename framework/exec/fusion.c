/* Conv + activation fusion. In the channels-last region every Conv runs on oneDNN, whose
 * convolutions apply an element-wise post-op while the result is still in registers: a
 * Relu, Clip, SiLU or hardswish after a conv then costs no pass over memory (SiLU was two:
 * Sigmoid, then Mul). Only groups inside the layout plan's NHWC region are fused, and the
 * plan runs them only while that region is in use: with a value hook (calibration's
 * observers, the report's captures) or the naive kernels every node runs on its own, so
 * calibration sees the bits it always saw. Relu and Clip are exact as post-ops; oneDNN's
 * swish and hardswish round differently from the host's Sigmoid and HardSigmoid (within a
 * few ulp), which the float parity with ONNX Runtime absorbs.
 * Host groups (GELU's and LayerNorm's decompositions, and a QDQ file's DequantizeLinear ->
 * Transpose|Reshape|Slice -> QuantizeLinear) run as one kernel whenever no hook watches,
 * inside the region or not; that kernel reproduces the nodes' arithmetic (with AVX-512
 * within 1e-6 of each row's largest value, see kernels/fused-host.c), so fusing them
 * changes time, not results beyond that. Attention's Softmax((scores * | / k) + mask)
 * over the last axis is one group too, run at the Softmax's step (the mask may be
 * computed after the Mul). GELU and LayerNorm stop at anything else (a QuantizeLinear in
 * particular: QDQ files keep their Q/DQ pairs outside those groups), and no group is
 * formed when any value inside it is read elsewhere or is a graph output. A float MatMul
 * reads its operands through the Transposes (and a scalar Mul/Div) that made them and
 * writes through the Transpose that reads it (attention: 4 Transposes per layer): the
 * strided GEMMs are the unfused GEMMs' shapes on the same numbers, but oneDNN and OpenBLAS
 * pick kernels by the trans flags and some sum in another order, so this group alone may
 * change the last bits (within the MatMul tests' 1e-5, unit/test_fused_matmul). */
#include "exec/fusion.h"

#include <math.h>
#include <string.h>

static gboolean host_op(const QhNode *node, const char *op, const QhOpDef *const *defs,
                        const gboolean *is_external) {
  return node->domain[0] == '\0' && strcmp(node->op_type, op) == 0 && defs[node->id] != NULL &&
         !is_external[node->id] && node->n_outputs == 1 && node->outputs[0] >= 0;
}

/* Up to max readers of value v among the steps after `from`: (step, input slot). */
typedef struct {
  int step, slot;
} Read;

static int readers(const QhGraph *g, const GArray *run_order, guint from, int v, Read *out, int max) {
  int n = 0;
  for (guint i = from + 1; i < run_order->len; i++) {
    const QhNode *node = qh_graph_node(g, g_array_index(run_order, int, i));
    for (int k = 0; k < node->n_inputs; k++)
      if (node->inputs[k] == v) {
        if (n < max)
          out[n] = (Read){(int)i, k};
        n++;
      }
  }
  return n;
}

static gboolean scalar_constant(const QhTensor *infos, int v, float *out) {
  if (v < 0 || infos[v].data == NULL || infos[v].dtype != QH_DTYPE_F32 || qh_tensor_numel(&infos[v]) != 1)
    return FALSE;
  *out = *(const float *)infos[v].data;
  return !isnan(*out);
}

static gboolean attr_float(const QhNode *node, const char *name, float dflt, float *out) {
  const QhAttr *a = qh_node_attr(node, name);
  if (a == NULL) {
    *out = dflt;
    return TRUE;
  }
  if (a->type != QH_ATTR_FLOAT)
    return FALSE;
  *out = a->f;
  return TRUE;
}

/* The post-op for one reader group of conv output y, or QH_POST_NONE. */
static QhPostOpKind match(const QhGraph *g, const GArray *run_order, const QhTensor *infos,
                          const QhOpDef *const *defs, const gboolean *is_external, guint step, int y,
                          QhFusedStep *head, int *absorbed, int *n_absorbed) {
  Read r[3];
  int n = readers(g, run_order, step, y, r, 3);
  const QhNode *a = n >= 1 ? qh_graph_node(g, g_array_index(run_order, int, r[0].step)) : NULL;
  if (n == 1 && r[0].slot == 0) {
    head->out_value = a->outputs[0];
    absorbed[0] = r[0].step;
    *n_absorbed = 1;
    if (host_op(a, "Relu", defs, is_external))
      return QH_POST_RELU;
    if (host_op(a, "HardSwish", defs, is_external))
      return QH_POST_HARDSWISH;
    if (host_op(a, "Clip", defs, is_external) && a->n_inputs == 3 &&
        scalar_constant(infos, a->inputs[1], &head->alpha) &&
        scalar_constant(infos, a->inputs[2], &head->beta) && head->alpha <= head->beta)
      return QH_POST_CLIP;
    return QH_POST_NONE;
  }
  if (n != 2)
    return QH_POST_NONE;
  /* the gate reads y first (it runs before the Mul that reads both) */
  const QhNode *m = qh_graph_node(g, g_array_index(run_order, int, r[1].step));
  if (r[0].slot != 0 || !host_op(m, "Mul", defs, is_external) || m->n_inputs != 2)
    return QH_POST_NONE;
  const int s = a->outputs[0] >= 0 ? a->outputs[0] : -1;
  if (s < 0 || qh_graph_value(g, s)->is_output || m->inputs[1 - r[1].slot] != s)
    return QH_POST_NONE;
  Read rs[2];
  if (readers(g, run_order, (guint)r[0].step, s, rs, 2) != 1)
    return QH_POST_NONE;
  QhPostOpKind kind = QH_POST_NONE;
  float alpha, beta;
  if (host_op(a, "Sigmoid", defs, is_external))
    kind = QH_POST_SWISH;
  else if (host_op(a, "HardSigmoid", defs, is_external) && attr_float(a, "alpha", 0.2f, &alpha) &&
           attr_float(a, "beta", 0.5f, &beta) && fabsf(alpha - 1.0f / 6.0f) < 1e-6f && beta == 0.5f)
    kind = QH_POST_HARDSWISH;
  head->out_value = m->outputs[0];
  absorbed[0] = r[0].step;
  absorbed[1] = r[1].step;
  *n_absorbed = 2;
  return kind;
}

/* ---- host groups ------------------------------------------------------------- */

typedef struct {
  const QhGraph *g;
  const GArray *run_order;
  const QhTensor *infos;
  const QhOpDef *const *defs;
  const gboolean *is_external;
  int *step_of; /* per node id: its index in run_order, or -1 (folded or dead) */
  const gboolean *nhwc; /* per value: kept channels-last (exec/layout.c) */
} Ctx;

static const QhNode *ctx_host_op(const Ctx *c, const QhNode *node, const char *op) {
  return node != NULL && host_op(node, op, c->defs, c->is_external) && c->step_of[node->id] >= 0 ? node : NULL;
}

/* The node that computes v, or NULL (input, constant, folded). */
static const QhNode *producer(const Ctx *c, int v) {
  const int id = v >= 0 ? qh_graph_value(c->g, v)->producer : -1;
  return id >= 0 && c->step_of[id] >= 0 ? qh_graph_node(c->g, id) : NULL;
}

/* Up to max reads of v over the whole run order. */
static int all_readers(const Ctx *c, int v, Read *out, int max) {
  int n = 0;
  for (guint i = 0; i < c->run_order->len; i++) {
    const QhNode *node = qh_graph_node(c->g, g_array_index(c->run_order, int, i));
    for (int k = 0; k < node->n_inputs; k++)
      if (node->inputs[k] == v) {
        if (n < max)
          out[n] = (Read){(int)i, k};
        n++;
      }
  }
  return n;
}

/* The node that reads v, when v is no graph output and is read exactly once. */
static const QhNode *only_reader(const Ctx *c, int v) {
  Read r[2];
  if (v < 0 || qh_graph_value(c->g, v)->is_output || all_readers(c, v, r, 2) != 1)
    return NULL;
  return qh_graph_node(c->g, g_array_index(c->run_order, int, r[0].step));
}

/* A two-input node with a scalar constant on one side: the other input and the constant. */
static gboolean with_scalar(const Ctx *c, const QhNode *node, int *other, float *k) {
  if (node == NULL || node->n_inputs != 2)
    return FALSE;
  for (int s = 0; s < 2; s++)
    if (scalar_constant(c->infos, node->inputs[s], k)) {
      *other = node->inputs[1 - s];
      return TRUE;
    }
  return FALSE;
}

static gboolean is_f32(const Ctx *c, int v) { return v >= 0 && c->infos[v].dtype == QH_DTYPE_F32; }

static gboolean same_shape(const Ctx *c, int a, int b) {
  return qh_shape_equal(&c->infos[a].shape, &c->infos[b].shape);
}

/* GELU from its Erf: fills h and the member nodes (up to 5); the group's result. */
static int match_gelu(const Ctx *c, const QhNode *erf, QhHostGroup *h, const QhNode **members, int *n) {
  if (!ctx_host_op(c, erf, "Erf") || erf->n_inputs != 1)
    return -1;
  const QhNode *scale = producer(c, erf->inputs[0]);
  int x;
  if (only_reader(c, erf->inputs[0]) != erf)
    return -1;
  if (ctx_host_op(c, scale, "Div") && scale->n_inputs == 2 &&
      scalar_constant(c->infos, scale->inputs[1], &h->k_in)) {
    x = scale->inputs[0];
    h->in_divides = TRUE;
  } else if (ctx_host_op(c, scale, "Mul") && with_scalar(c, scale, &x, &h->k_in)) {
    h->in_divides = FALSE;
  } else {
    return -1;
  }
  const QhNode *add = ctx_host_op(c, only_reader(c, erf->outputs[0]), "Add");
  int e;
  if (add == NULL || !with_scalar(c, add, &e, &h->k_add) || e != erf->outputs[0])
    return -1;
  const QhNode *m1 = ctx_host_op(c, only_reader(c, add->outputs[0]), "Mul");
  if (m1 == NULL || m1->n_inputs != 2)
    return -1;
  const int other = m1->inputs[0] == add->outputs[0] ? m1->inputs[1] : m1->inputs[0];
  members[0] = scale, members[1] = erf, members[2] = add, members[3] = m1;
  *n = 5;
  int out, y;
  if (other == x) { /* (x * (erf + 1)) * 0.5 */
    const QhNode *m2 = ctx_host_op(c, only_reader(c, m1->outputs[0]), "Mul");
    if (m2 == NULL || !with_scalar(c, m2, &y, &h->k_half) || y != m1->outputs[0])
      return -1;
    members[4] = m2;
    h->half_first = FALSE;
    out = m2->outputs[0];
  } else { /* (x * 0.5) * (erf + 1) */
    const QhNode *m0 = ctx_host_op(c, producer(c, other), "Mul");
    if (m0 == NULL || !with_scalar(c, m0, &y, &h->k_half) || y != x || only_reader(c, other) != m1)
      return -1;
    members[4] = m0;
    h->half_first = TRUE;
    out = m1->outputs[0];
  }
  if (!is_f32(c, x) || !is_f32(c, out) || !same_shape(c, x, out))
    return -1;
  h->kind = QH_HOST_GROUP_GELU;
  h->x = x;
  h->scale = h->bias = -1;
  return out;
}

/* A ReduceMean of x over its last axis only, keeping dims. */
static gboolean mean_last_axis(const Ctx *c, const QhNode *node, int x) {
  if (!ctx_host_op(c, node, "ReduceMean") || node->inputs[0] != x || c->infos[x].shape.rank < 1)
    return FALSE;
  const int rank = c->infos[x].shape.rank;
  const QhAttr *keep = qh_node_attr(node, "keepdims");
  if (keep != NULL && (keep->type != QH_ATTR_INT || keep->i != 1))
    return FALSE;
  const QhAttr *axes = qh_node_attr(node, "axes");
  int64_t axis;
  if (axes != NULL && axes->type == QH_ATTR_INTS && axes->n == 1 && node->n_inputs == 1) {
    axis = axes->ints[0];
  } else if (axes == NULL && node->n_inputs == 2 && node->inputs[1] >= 0 && c->infos[node->inputs[1]].data &&
             c->infos[node->inputs[1]].dtype == QH_DTYPE_S64 && qh_tensor_numel(&c->infos[node->inputs[1]]) == 1) {
    axis = *(const int64_t *)c->infos[node->inputs[1]].data;
  } else {
    return FALSE;
  }
  return axis == -1 || axis == rank - 1;
}

/* A float constant of n elements that lies along the last axis of a rank-`rank` value. */
static gboolean last_axis_constant(const Ctx *c, int v, int rank, int64_t n) {
  const QhTensor *t = v >= 0 ? &c->infos[v] : NULL;
  if (t == NULL || t->data == NULL || t->dtype != QH_DTYPE_F32 || qh_tensor_numel(t) != n ||
      t->shape.rank < 1 || t->shape.rank > rank)
    return FALSE;
  return t->shape.dims[t->shape.rank - 1] == n;
}

/* The operand of a two-input node other than v (-1 when v is not one of them). */
static int other_input(const QhNode *node, int v) {
  if (node == NULL || node->n_inputs != 2)
    return -1;
  return node->inputs[0] == v ? node->inputs[1] : node->inputs[1] == v ? node->inputs[0] : -1;
}

/* LayerNorm from its first ReduceMean: fills h and the members (9); the group's result. */
static int match_layernorm(const Ctx *c, const QhNode *mean, QhHostGroup *h, const QhNode **members, int *n) {
  if (mean == NULL || mean->n_inputs < 1)
    return -1;
  const int x = mean->inputs[0];
  if (!is_f32(c, x) || !mean_last_axis(c, mean, x))
    return -1;
  const int rank = c->infos[x].shape.rank;
  const int64_t width = c->infos[x].shape.dims[rank - 1];
  const QhNode *sub = ctx_host_op(c, only_reader(c, mean->outputs[0]), "Sub");
  if (sub == NULL || sub->n_inputs != 2 || sub->inputs[0] != x || sub->inputs[1] != mean->outputs[0])
    return -1;
  const int d = sub->outputs[0];
  Read r[3];
  if (qh_graph_value(c->g, d)->is_output || all_readers(c, d, r, 3) != 2)
    return -1;
  const QhNode *pow = NULL, *div = NULL;
  for (int k = 0; k < 2; k++) {
    const QhNode *node = qh_graph_node(c->g, g_array_index(c->run_order, int, r[k].step));
    if (ctx_host_op(c, node, "Pow") && r[k].slot == 0)
      pow = node;
    else if (ctx_host_op(c, node, "Div") && r[k].slot == 0)
      div = node;
  }
  float two, eps;
  if (pow == NULL || div == NULL || pow->n_inputs != 2 || !scalar_constant(c->infos, pow->inputs[1], &two) ||
      two != 2.0f)
    return -1;
  const QhNode *var = only_reader(c, pow->outputs[0]);
  if (!mean_last_axis(c, var, pow->outputs[0]))
    return -1;
  const QhNode *add = ctx_host_op(c, only_reader(c, var->outputs[0]), "Add");
  int v;
  if (add == NULL || !with_scalar(c, add, &v, &eps) || v != var->outputs[0])
    return -1;
  const QhNode *sqrt_ = ctx_host_op(c, only_reader(c, add->outputs[0]), "Sqrt");
  if (sqrt_ == NULL || only_reader(c, sqrt_->outputs[0]) != div || div->n_inputs != 2 ||
      div->inputs[1] != sqrt_->outputs[0])
    return -1;
  const QhNode *mul = ctx_host_op(c, only_reader(c, div->outputs[0]), "Mul");
  const int scale = other_input(mul, div->outputs[0]);
  if (mul == NULL || !last_axis_constant(c, scale, rank, width))
    return -1;
  const QhNode *bias_add = ctx_host_op(c, only_reader(c, mul->outputs[0]), "Add");
  const int bias = other_input(bias_add, mul->outputs[0]);
  if (bias_add == NULL || !last_axis_constant(c, bias, rank, width))
    return -1;
  const int out = bias_add->outputs[0];
  if (!is_f32(c, out) || !same_shape(c, x, out))
    return -1;
  const QhNode *all[] = {mean, sub, pow, var, add, sqrt_, div, mul, bias_add};
  for (int k = 0; k < 9; k++)
    members[k] = all[k];
  *n = 9;
  *h = (QhHostGroup){.kind = QH_HOST_GROUP_LAYERNORM, .x = x, .scale = scale, .bias = bias, .eps = eps};
  return out;
}

/* A plan constant with one element, of dtype a or b. */
static gboolean scalar_of(const Ctx *c, int v, QhDType a, QhDType b) {
  const QhTensor *t = v >= 0 ? &c->infos[v] : NULL;
  return t != NULL && t->data != NULL && qh_tensor_numel(t) == 1 && (t->dtype == a || t->dtype == b);
}

/* Every input after the first is absent or a plan constant. */
static gboolean constant_operands(const Ctx *c, const QhNode *node) {
  for (int k = 1; k < node->n_inputs; k++)
    if (node->inputs[k] >= 0 && c->infos[node->inputs[k]].data == NULL)
      return FALSE;
  return TRUE;
}

/* Per-tensor DequantizeLinear or QuantizeLinear: scalar float scale, 8-bit zero point. */
static gboolean per_tensor_qdq(const Ctx *c, const QhNode *node, const char *op) {
  return ctx_host_op(c, node, op) && node->n_inputs >= 2 && node->n_inputs <= 3 &&
         scalar_of(c, node->inputs[1], QH_DTYPE_F32, QH_DTYPE_F32) &&
         (node->n_inputs == 2 || node->inputs[2] < 0 || scalar_of(c, node->inputs[2], QH_DTYPE_U8, QH_DTYPE_S8));
}

/* DequantizeLinear -> Transpose | Reshape | Slice (-> Reshape) -> QuantizeLinear from its
 * DequantizeLinear: fills h and the members (3 or 4); the group's result. */
static int match_qmove(const Ctx *c, const QhNode *dq, QhHostGroup *h, const QhNode **members, int *n) {
  if (!per_tensor_qdq(c, dq, "DequantizeLinear"))
    return -1;
  const int x = dq->inputs[0];
  if (x < 0 || (c->infos[x].dtype != QH_DTYPE_U8 && c->infos[x].dtype != QH_DTYPE_S8))
    return -1;
  const QhNode *move = only_reader(c, dq->outputs[0]);
  if (!(ctx_host_op(c, move, "Transpose") || ctx_host_op(c, move, "Reshape") || ctx_host_op(c, move, "Slice")) ||
      move->inputs[0] != dq->outputs[0] || !constant_operands(c, move))
    return -1;
  const QhNode *next = only_reader(c, move->outputs[0]);
  members[0] = dq, members[1] = move;
  *n = 2;
  if (ctx_host_op(c, next, "Reshape") && next->inputs[0] == move->outputs[0] && constant_operands(c, next)) {
    members[(*n)++] = next;
    next = only_reader(c, next->outputs[0]);
  }
  if (!per_tensor_qdq(c, next, "QuantizeLinear") || next->inputs[0] != members[*n - 1]->outputs[0])
    return -1;
  const int out = next->outputs[0];
  const QhDType ot = c->infos[out].dtype;
  if ((ot != QH_DTYPE_U8 && ot != QH_DTYPE_S8) ||
      qh_tensor_numel(&c->infos[out]) != qh_tensor_numel(&c->infos[move->outputs[0]]))
    return -1;
  members[(*n)++] = next;
  *h = (QhHostGroup){.kind = QH_HOST_GROUP_QMOVE, .x = x, .scale = -1, .bias = -1, .dq = dq, .move = move,
                     .q = next, .dq_def = c->defs[dq->id], .move_def = c->defs[move->id], .q_def = c->defs[next->id]};
  return out;
}

/* ---- MatMul through Transposes ------------------------------------------------- */

/* A float value the host holds in its logical (not channels-last) layout. */
static gboolean plain_f32(const Ctx *c, int v) { return is_f32(c, v) && !c->nhwc[v]; }

/* t's perm over a rank-`rank` input, when t is a Transpose whose output's matrix keeps a
 * unit stride along its rows or columns: perm[rank - 1] or perm[rank - 2] is rank - 1. */
static gboolean matrix_perm(const QhNode *t, int rank, int *perm) {
  const QhAttr *a = qh_node_attr(t, "perm");
  if (a != NULL && (a->type != QH_ATTR_INTS || a->n != rank))
    return FALSE;
  gboolean seen[QH_MAX_RANK] = {FALSE};
  for (int i = 0; i < rank; i++) {
    const int64_t p = a != NULL ? a->ints[i] : rank - 1 - i;
    if (p < 0 || p >= rank || seen[p])
      return FALSE;
    seen[p] = TRUE;
    perm[i] = (int)p;
  }
  return rank >= 2 && (perm[rank - 1] == rank - 1 || perm[rank - 2] == rank - 1);
}

/* Operand `slot` of MatMul mm: read through its Transpose (and a scalar Mul or Div after
 * it) when those have no other reader; appends the nodes read through to members. */
static void tmm_operand(const Ctx *c, const QhNode *mm, int slot, QhTmmOperand *o, const QhNode **members, int *n) {
  const int v = mm->inputs[slot];
  *o = (QhTmmOperand){.src = v, .scaled = -1, .alpha = 1.0f};
  if (only_reader(c, v) != mm)
    return;
  const QhNode *p = producer(c, v), *scale = NULL;
  int t_in = v, other;
  float k;
  if ((ctx_host_op(c, p, "Mul") || ctx_host_op(c, p, "Div")) && with_scalar(c, p, &other, &k)) {
    scale = p;
    t_in = other;
    if (only_reader(c, t_in) != scale || !plain_f32(c, t_in))
      return;
    p = producer(c, t_in);
  }
  const int rank = c->infos[v].shape.rank;
  if (!ctx_host_op(c, p, "Transpose") || p->n_inputs != 1 || !plain_f32(c, p->inputs[0]) ||
      c->infos[p->inputs[0]].shape.rank != rank || !matrix_perm(p, rank, o->perm))
    return;
  o->src = p->inputs[0];
  o->transposed = TRUE;
  members[(*n)++] = p;
  if (scale == NULL)
    return;
  members[(*n)++] = scale;
  const int slot_t = scale->inputs[0] == t_in ? 0 : 1;
  const gboolean divides = strcmp(scale->op_type, "Div") == 0;
  int e;
  if (fabsf(frexpf(k, &e)) == 0.5f && e > -100 && e < 100 && (!divides || slot_t == 0)) {
    /* t * 2^e and t / 2^e are exact (barring subnormals and overflow), and so is the
     * GEMM's alpha scaling the sums: the same bits without a pass over t */
    o->alpha = divides ? 1.0f / k : k;
    return;
  }
  o->scale = scale;
  o->scale_def = c->defs[scale->id];
  o->scale_slot = slot_t;
  o->scaled = v;
}

/* A float MatMul whose operands or result go through Transposes, from the MatMul: fills h
 * and the members (the MatMul first, up to 6); the group's result. */
static int match_tmm(const Ctx *c, const QhNode *mm, QhHostGroup *h, const QhNode **members, int *n) {
  if (!ctx_host_op(c, mm, "MatMul") || mm->n_inputs != 2 || !plain_f32(c, mm->inputs[0]) ||
      !plain_f32(c, mm->inputs[1]) || !plain_f32(c, mm->outputs[0]))
    return -1;
  /* equal batch dims: the MatMul kernel then runs one GEMM per batch entry, as the group */
  const QhShape *as = &c->infos[mm->inputs[0]].shape, *bs = &c->infos[mm->inputs[1]].shape;
  const int rank = as->rank;
  if (rank < 2 || bs->rank != rank)
    return -1;
  for (int i = 0; i < rank - 2; i++)
    if (as->dims[i] != bs->dims[i])
      return -1;
  QhTransposedMatMul t = {.matmul = mm, .mm_out = mm->outputs[0]};
  members[0] = mm;
  *n = 1;
  tmm_operand(c, mm, 0, &t.a, members, n);
  tmm_operand(c, mm, 1, &t.b, members, n);
  int out = mm->outputs[0];
  const QhNode *ot = ctx_host_op(c, only_reader(c, out), "Transpose");
  if (ot != NULL && plain_f32(c, ot->outputs[0]) && matrix_perm(ot, rank, t.out_perm) &&
      t.out_perm[rank - 1] == rank - 1) {
    t.out_transposed = TRUE;
    members[(*n)++] = ot;
    out = ot->outputs[0];
  }
  if (*n == 1)
    return -1;
  *h = (QhHostGroup){.kind = QH_HOST_GROUP_TMATMUL, .x = -1, .scale = -1, .bias = -1, .tmm = t};
  return out;
}

/* Attention's masked Softmax from its Softmax: Softmax over the last axis of
 * Add(Mul(x, k) | Div(x, k), mask), k a scalar constant, mask a float value broadcast into
 * x's shape whose last dim is x's, all of them laid out plainly (not channels-last); fills
 * h and the members (3); the group's result. */
static int match_masked_softmax(const Ctx *c, const QhNode *sm, QhHostGroup *h, const QhNode **members, int *n) {
  if (!ctx_host_op(c, sm, "Softmax") || sm->n_inputs != 1)
    return -1;
  const int s = sm->inputs[0];
  if (!plain_f32(c, s) || c->infos[s].shape.rank < 1)
    return -1;
  const QhShape *shape = &c->infos[s].shape;
  const QhAttr *axis = qh_node_attr(sm, "axis");
  if (axis != NULL && (axis->type != QH_ATTR_INT || (axis->i != -1 && axis->i != shape->rank - 1)))
    return -1;
  const QhNode *add = ctx_host_op(c, producer(c, s), "Add");
  if (add == NULL || add->n_inputs != 2 || only_reader(c, s) != sm)
    return -1;
  for (int side = 0; side < 2; side++) {
    const QhNode *scale = producer(c, add->inputs[side]);
    const int mask = add->inputs[1 - side];
    int x = -1;
    if (ctx_host_op(c, scale, "Div") && scale->n_inputs == 2 && scalar_constant(c->infos, scale->inputs[1], &h->k_in)) {
      x = scale->inputs[0];
      h->in_divides = TRUE;
    } else if (ctx_host_op(c, scale, "Mul") && with_scalar(c, scale, &x, &h->k_in)) {
      h->in_divides = FALSE;
    } else {
      continue;
    }
    if (only_reader(c, scale->outputs[0]) != add || !plain_f32(c, x) || !same_shape(c, x, s) || !plain_f32(c, mask))
      continue;
    const QhShape *ms = &c->infos[mask].shape;
    gboolean fits = ms->rank >= 1 && ms->rank <= shape->rank && ms->dims[ms->rank - 1] == shape->dims[shape->rank - 1];
    for (int d = 0; fits && d < ms->rank; d++) {
      const int64_t xd = shape->dims[shape->rank - ms->rank + d];
      fits = ms->dims[d] == xd || ms->dims[d] == 1;
    }
    if (!fits || !plain_f32(c, sm->outputs[0]) || !same_shape(c, sm->outputs[0], s))
      continue;
    members[0] = scale, members[1] = add, members[2] = sm;
    *n = 3;
    h->kind = QH_HOST_GROUP_SOFTMAX;
    h->x = x;
    h->mask = mask;
    h->scale = h->bias = -1;
    return sm->outputs[0];
  }
  return -1;
}

static void plan_host_groups(const Ctx *c, QhFusedStep *steps) {
  for (guint i = 0; i < c->run_order->len; i++) {
    const QhNode *node = qh_graph_node(c->g, g_array_index(c->run_order, int, i));
    QhHostGroup h = {0};
    const QhNode *members[9];
    int n = 0, out = -1;
    /* a group runs at its earliest step, which reads the group's inputs; the MatMul group
     * at its MatMul's, the first step where both operands exist */
    gboolean head_first = TRUE;
    if (strcmp(node->op_type, "Erf") == 0)
      out = match_gelu(c, node, &h, members, &n);
    else if (strcmp(node->op_type, "ReduceMean") == 0)
      out = match_layernorm(c, node, &h, members, &n);
    else if (strcmp(node->op_type, "DequantizeLinear") == 0)
      out = match_qmove(c, node, &h, members, &n);
    else if (strcmp(node->op_type, "MatMul") == 0) {
      out = match_tmm(c, node, &h, members, &n);
      head_first = FALSE;
    } else if (strcmp(node->op_type, "Softmax") == 0) {
      out = match_masked_softmax(c, node, &h, members, &n);
      head_first = FALSE;
    }
    if (out < 0)
      continue;
    gboolean available = TRUE;
    int head = G_MAXINT;
    for (int k = 0; k < n; k++) {
      const int s = c->step_of[members[k]->id];
      available = available && !steps[s].absorbed && steps[s].kind == QH_POST_NONE && steps[s].host.kind == QH_HOST_GROUP_NONE;
      head = head_first ? MIN(head, s) : (int)i;
    }
    if (!available)
      continue;
    for (int k = 0; k < n; k++)
      steps[c->step_of[members[k]->id]].absorbed = TRUE;
    steps[head].absorbed = FALSE;
    steps[head].host = h;
    steps[head].out_value = out;
  }
}

QhFusedStep *qh_fusion_plan(const QhGraph *graph, const GArray *run_order, const QhTensor *infos,
                            const QhOpDef *const *defs, const gboolean *is_external,
                            const gboolean *nhwc, int n_values) {
  (void)n_values;
  QhFusedStep *steps = g_new0(QhFusedStep, run_order->len + 1);
  for (guint i = 0; i < run_order->len; i++) {
    const QhNode *node = qh_graph_node(graph, g_array_index(run_order, int, i));
    if (steps[i].absorbed || !host_op(node, "Conv", defs, is_external))
      continue;
    const int y = node->outputs[0];
    if (!nhwc[y] || qh_graph_value(graph, y)->is_output)
      continue;
    QhFusedStep head = {0};
    int absorbed[2], n_absorbed = 0;
    head.kind = match(graph, run_order, infos, defs, is_external, i, y, &head, absorbed, &n_absorbed);
    /* the result stays in the channels-last region and is no graph output */
    if (head.kind == QH_POST_NONE || head.out_value < 0 || !nhwc[head.out_value] ||
        qh_graph_value(graph, head.out_value)->is_output)
      continue;
    steps[i] = head;
    for (int k = 0; k < n_absorbed; k++)
      steps[absorbed[k]].absorbed = TRUE;
  }
  Ctx c = {graph, run_order, infos, defs, is_external, g_new(int, qh_graph_n_nodes(graph) + 1), nhwc};
  for (int id = 0; id < qh_graph_n_nodes(graph); id++)
    c.step_of[id] = -1;
  for (guint i = 0; i < run_order->len; i++)
    c.step_of[g_array_index(run_order, int, i)] = (int)i;
  plan_host_groups(&c, steps);
  g_free(c.step_of);
  return steps;
}

int qh_fusion_group_reads(const QhFusedStep *step, int *out) {
  const QhHostGroup *h = &step->host;
  int n = 0;
  if (h->kind == QH_HOST_GROUP_TMATMUL) {
    out[n++] = h->tmm.a.src;
    out[n++] = h->tmm.b.src;
  } else if (h->kind != QH_HOST_GROUP_NONE && h->x >= 0) {
    out[n++] = h->x;
    if (h->kind == QH_HOST_GROUP_SOFTMAX)
      out[n++] = h->mask;
  }
  return n;
}
