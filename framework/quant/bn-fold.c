/* BatchNorm folding before annotation: a BatchNormalization whose input is the only
 * use of a Conv / ConvTranspose / Gemm output is folded into that op's weight and
 * bias with PyTorch 1.13's arithmetic (fuse_conv_bn_weights, fuse_linear_bn_weights;
 * docs/numerics.md §9), wherever one of the backend's QH_FUSER_FOLD_BATCHNORM patterns
 * matches. The weighted node keeps its name and takes over BatchNormalization's output
 * value, so graph outputs and consumers keep their names.
 *
 * Every float operation below is one rounding, in PyTorch's order, one per statement
 * (so no compiler may contract a*b+c into an FMA within an expression). GCC contracts
 * across statements in its GNU modes but not under -std=c11 (ISO modes imply
 * -ffp-contract=off), which the check below insists on. */
#include <math.h>
#include <string.h>

#include "quant/backend-annotate-private.h"

#if defined(__GNUC__) && !defined(__clang__) && !defined(__STRICT_ANSI__)
#error "bn-fold.c must be built with -std=c11: GNU modes let GCC fuse multiply-adds"
#endif

enum { KIND_CONV, KIND_CONV_TRANSPOSE, KIND_GEMM };

static const float *const_f32(const QhGraph *g, int v, int64_t numel) {
  if (v < 0)
    return NULL;
  const QhTensor *t = qh_graph_value(g, v)->initializer;
  if (t == NULL || t->dtype != QH_DTYPE_F32 || (numel >= 0 && qh_tensor_numel(t) != numel))
    return NULL;
  return t->data;
}

/* Does a FOLD_BATCHNORM pattern of bc start with this weighted op, BN, and (for three
 * ops) the single consumer of BN's output? */
static gboolean fold_declared(const QhBackendConfig *bc, const QhGraphFacts *f, const QhNode *op,
                              const QhNode *bn) {
  for (size_t i = 0; i < bc->n_patterns; i++) {
    const QhBackendPatternConfig *p = bc->patterns[i];
    if (p->fuser != QH_FUSER_FOLD_BATCHNORM || p->n_ops < 2 ||
        !qh_pattern_op_matches(p->ops[0], op) || !qh_pattern_op_matches(p->ops[1], bn))
      continue;
    if (p->n_ops == 2)
      return TRUE;
    int out = qh_node_output(bn, 0);
    const GArray *users = g_ptr_array_index(f->users, out);
    if (qh_graph_facts_n_uses(f, out) == 1 && users && users->len == 1) {
      const QhNode *next = qh_graph_node(f->graph, g_array_index(users, int, 0));
      if (qh_pattern_op_matches(p->ops[2], next) && next->inputs[0] == out)
        return TRUE;
    }
  }
  return FALSE;
}

static char *unique_name(const QhGraph *g, const char *base) {
  char *name = g_strdup(base);
  for (int k = 1; qh_graph_find_value(g, name) >= 0; k++) {
    g_free(name);
    name = g_strdup_printf("%s_%d", base, k);
  }
  return name;
}

/* Put tensor t into input slot of node: in place when the node is the value's only
 * user, else as a new initializer (the old one stays for its other users). */
static gboolean set_input_tensor(QhGraph *g, const QhGraphFacts *f, QhNode *node, int slot,
                                 QhTensor *t, const char *suffix, GError **error) {
  int v = slot < node->n_inputs ? node->inputs[slot] : -1;
  if (v >= 0 && qh_graph_facts_n_uses(f, v) == 1) {
    qh_value_set_initializer(qh_graph_value(g, v), t);
    return TRUE;
  }
  char *base = v >= 0 ? g_strdup_printf("%s_%s", qh_graph_value(g, v)->name, suffix)
                      : g_strdup_printf("%s.%s", node->name, suffix);
  char *name = unique_name(g, base);
  QhValue *nv = qh_graph_add_value(g, name, error);
  g_free(name);
  g_free(base);
  if (nv == NULL) {
    qh_tensor_free(t);
    return FALSE;
  }
  qh_value_set_initializer(nv, t);
  if (slot >= node->n_inputs) {
    node->inputs = g_renew(int, node->inputs, slot + 1);
    for (int i = node->n_inputs; i <= slot; i++)
      node->inputs[i] = -1;
    node->n_inputs = slot + 1;
  }
  node->inputs[slot] = nv->id;
  return TRUE;
}

/* Fold bn into op when everything is constant float32 and the shapes agree; FALSE with
 * no error when it cannot be folded (the pair is then left as it is). */
static gboolean fold_one(QhGraph *g, const QhGraphFacts *f, QhNode *op, int kind, QhNode *bn,
                         gboolean *out_folded, GError **error) {
  *out_folded = FALSE;
  int wv = qh_node_input(op, 1);
  const float *w = const_f32(g, wv, -1);
  if (w == NULL)
    return TRUE;
  const QhTensor *wt = qh_graph_value(g, wv)->initializer;
  int64_t group = 1, trans_b = 0, training = 0;
  float alpha = 1.0f, beta = 1.0f, eps = 1e-5f;
  if (!qh_node_attr_get_int(op, "group", 1, &group, error) ||
      !qh_node_attr_get_int(op, "transB", 0, &trans_b, error) ||
      !qh_node_attr_get_float(op, "alpha", 1.0f, &alpha, error) ||
      !qh_node_attr_get_float(op, "beta", 1.0f, &beta, error) ||
      !qh_node_attr_get_float(bn, "epsilon", 1e-5f, &eps, error) ||
      !qh_node_attr_get_int(bn, "training_mode", 0, &training, error))
    return FALSE;
  if (training != 0 || group < 1 || wt->shape.rank < 2)
    return TRUE;
  for (int i = 1; i < bn->n_outputs; i++)
    if (bn->outputs[i] >= 0 && qh_graph_facts_n_uses(f, bn->outputs[i]) > 0)
      return TRUE;
  int64_t c_out, numel = qh_tensor_numel(wt);
  if (kind == KIND_CONV)
    c_out = wt->shape.dims[0];
  else if (kind == KIND_CONV_TRANSPOSE)
    c_out = wt->shape.dims[1] * group;
  else if (wt->shape.rank == 2)
    c_out = trans_b ? wt->shape.dims[0] : wt->shape.dims[1];
  else
    return TRUE;
  if (kind == KIND_CONV_TRANSPOSE && wt->shape.dims[0] % group != 0)
    return TRUE;
  const float *gamma = const_f32(g, qh_node_input(bn, 1), c_out);
  const float *bbeta = const_f32(g, qh_node_input(bn, 2), c_out);
  const float *mean = const_f32(g, qh_node_input(bn, 3), c_out);
  const float *var = const_f32(g, qh_node_input(bn, 4), c_out);
  int bv = qh_node_input(op, 2);
  const float *b = bv >= 0 ? const_f32(g, bv, c_out) : NULL;
  if (!gamma || !bbeta || !mean || !var || (bv >= 0 && !b) || (kind == KIND_GEMM && bv >= 0 && beta != 1.0f))
    return TRUE;

  float *r = g_new(float, c_out), *scale = g_new(float, c_out);
  for (int64_t c = 0; c < c_out; c++) {
    float sum = var[c] + eps;
    float root = sqrtf(sum);
    r[c] = 1.0f / root; /* torch.rsqrt: two roundings */
    scale[c] = gamma[c] * r[c];
  }
  QhTensor *nw = qh_tensor_new(QH_DTYPE_F32, &wt->shape, error);
  QhShape bshape = bv >= 0 ? qh_graph_value(g, bv)->initializer->shape : qh_shape_make(1, &c_out);
  QhTensor *nb = nw ? qh_tensor_new(QH_DTYPE_F32, &bshape, error) : NULL;
  if (nb == NULL) {
    qh_tensor_free(nw);
    g_free(r);
    g_free(scale);
    return FALSE;
  }
  float *ow = nw->data, *ob = nb->data;
  int64_t d0 = wt->shape.dims[0], d1 = wt->shape.dims[1], inner = numel / (d0 * d1);
  for (int64_t i = 0; i < d0; i++)
    for (int64_t j = 0; j < d1; j++) {
      int64_t c;
      if (kind == KIND_CONV || (kind == KIND_GEMM && trans_b))
        c = i;
      else if (kind == KIND_CONV_TRANSPOSE) /* weight [C_in, C_out/group, ...] */
        c = (i / (d0 / group)) * d1 + j;
      else
        c = j;
      for (int64_t k = 0; k < inner; k++) {
        int64_t at = (i * d1 + j) * inner + k;
        ow[at] = w[at] * scale[c];
      }
    }
  for (int64_t c = 0; c < c_out; c++) {
    float bc = b ? b[c] : 0.0f;
    float centered = bc - mean[c];
    if (kind == KIND_GEMM) {
      float scaled = centered * scale[c];
      ob[c] = scaled + bbeta[c];
    } else {
      float normed = centered * r[c];
      float scaled = normed * gamma[c];
      ob[c] = scaled + bbeta[c];
    }
  }
  g_free(r);
  g_free(scale);
  if (!set_input_tensor(g, f, op, 1, nw, "bnfold", error)) {
    qh_tensor_free(nb);
    return FALSE;
  }
  if (!set_input_tensor(g, f, op, 2, nb, "bnfold_bias", error))
    return FALSE;
  if (kind == KIND_GEMM)
    qh_node_set_attr_float(op, "beta", 1.0f);
  int bn_out = bn->outputs[0], old_out = op->outputs[0];
  qh_graph_remove_node(g, bn->id);
  op->outputs[0] = bn_out;
  qh_graph_value(g, bn_out)->producer = op->id;
  qh_graph_value(g, old_out)->producer = -1;
  *out_folded = TRUE;
  return TRUE;
}

gboolean qh_backend_fold_batchnorm(const QhBackendConfig *bc, QhGraph *graph, GError **error) {
  g_return_val_if_fail(graph != NULL, FALSE);
  if (bc == NULL)
    return TRUE;
  gboolean any = FALSE;
  for (size_t i = 0; i < bc->n_patterns && !any; i++)
    any = bc->patterns[i]->fuser == QH_FUSER_FOLD_BATCHNORM;
  if (!any)
    return TRUE;
  for (gboolean again = TRUE; again;) {
    again = FALSE;
    QhGraphFacts f;
    qh_graph_facts_init(&f, graph);
    for (int id = 0; id < qh_graph_n_nodes(graph) && !again; id++) {
      QhNode *bn = qh_graph_node(graph, id);
      if (bn->is_removed || !qh_pattern_op_matches("BatchNormalization", bn) || bn->n_inputs < 5 ||
          bn->inputs[0] < 0 || bn->n_outputs < 1 || bn->outputs[0] < 0)
        continue;
      int prod = qh_graph_value(graph, bn->inputs[0])->producer;
      if (prod < 0 || qh_graph_facts_n_uses(&f, bn->inputs[0]) != 1)
        continue;
      QhNode *op = qh_graph_node(graph, prod);
      int kind = qh_pattern_op_matches("Conv", op)            ? KIND_CONV
                 : qh_pattern_op_matches("ConvTranspose", op) ? KIND_CONV_TRANSPOSE
                 : qh_pattern_op_matches("Gemm", op)          ? KIND_GEMM
                                                              : -1;
      if (kind < 0 || op->n_outputs < 1 || op->outputs[0] != bn->inputs[0] ||
          !fold_declared(bc, &f, op, bn))
        continue;
      gboolean folded = FALSE;
      if (!fold_one(graph, &f, op, kind, bn, &folded, error)) {
        char *what = qh_node_describe(op);
        qh_error_prefix(error, what);
        g_free(what);
        qh_graph_facts_clear(&f);
        return FALSE;
      }
      if (!folded)
        qh_log(QH_LOG_DEBUG, "bn-fold: %s stays: its parameters are not constant float32 of "
               "matching shapes", bn->name);
      /* Uses changed: recompute the facts before the next fold. */
      again = folded;
    }
    qh_graph_facts_clear(&f);
  }
  return TRUE;
}
