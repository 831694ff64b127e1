/* The x86 plugin's imperative annotate. The host always runs its declarative pass over
 * the plugin's static FX BackendConfig first (and folds BatchNorm), so this callback
 * adjusts what that pass left:
 *  - quantizer=inductor: every spec the FX pass set is overwritten with QH_SPEC_FLOAT
 *    (the ABI has no way to remove one; convert treats a float edge like an
 *    unannotated one) and PyTorch's X86InductorQuantizer recipe (upstream
 *    x86_inductor_quantizer.py, ../../shared reference pytorch.md §c.5, PTQ) is applied:
 *    conv2d + add(+relu) / + unary / plain, conv1d(+relu), linear + add(+relu) / + unary
 *    / plain, with input activation and weight specs and no output spec; then
 *    MaxPool/Concat/AveragePool/GlobalAveragePool/Flatten when all their inputs come
 *    from a quantized pattern (Concat's other inputs share its first), whose outputs
 *    share their input edge.
 *  - quantizer=fx with reduce_range (explicit, or auto on a CPU without VNNI): the FX
 *    pass's default HistogramObserver activations get PyTorch's reduce_range, as 1.13's
 *    get_default_qconfig("x86"/"fbgemm") has it, so oneDNN's vpmaddubsw path cannot
 *    saturate. The ABI gives no read access to an edge's spec and no instance-time
 *    default qconfig, so the default is recognised through qconfig_for_node.
 * Nodes the user maps to null in --config are left float in both modes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inductor.h"

#define EPS_2_M12 (1.0f / 4096.0f)

static QhEdgeRef in_edge(uint32_t n, uint32_t slot) { return (QhEdgeRef){n, slot, QH_EDGE_INPUT, 0}; }
static QhEdgeRef out_edge(uint32_t n, uint32_t slot) { return (QhEdgeRef){n, slot, QH_EDGE_OUTPUT, 0}; }

static int is_op(const QhHostApi *h, const QhGraphView *g, uint32_t n, const char *op) {
  const char *t = n == QH_INVALID_ID ? NULL : h->node_op_type(g, n);
  const char *d = n == QH_INVALID_ID ? NULL : h->node_domain(g, n);
  return t && strcmp(t, op) == 0 && (!d || d[0] == '\0' || strcmp(d, "ai.onnx") == 0);
}

static int is_const(const QhHostApi *h, const QhGraphView *g, uint32_t v) {
  return v != QH_INVALID_ID && (h->value_flags(g, v) & QH_VALUE_CONSTANT);
}

static int rank_of(const QhHostApi *h, const QhGraphView *g, uint32_t v) {
  int64_t dims[8];
  int32_t rank = -1;
  QhStatus *st = h->value_shape(g, v, dims, 8, &rank);
  h->status_free(st);
  return st ? -1 : rank;
}

/* The only consumer of output 0 of n, or QH_INVALID_ID (none, several, a graph output). */
static uint32_t sole_user(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  uint32_t v = h->node_output(g, n, 0), user = QH_INVALID_ID, slot;
  if (v == QH_INVALID_ID || h->value_consumer_count(g, v) != 1 || (h->value_flags(g, v) & QH_VALUE_GRAPH_OUTPUT))
    return QH_INVALID_ID;
  QhStatus *st = h->value_consumer(g, v, 0, &user, &slot);
  h->status_free(st);
  return st ? QH_INVALID_ID : user;
}

static uint32_t producer_of_input(const QhHostApi *h, const QhGraphView *g, uint32_t n, uint32_t slot) {
  uint32_t v = h->node_input(g, n, slot);
  return v == QH_INVALID_ID ? QH_INVALID_ID : h->value_producer(g, v);
}

/* ---- inductor ---- */

typedef struct {
  const QhHostApi *h;
  QhGraphView *g;
  uint32_t n_nodes;
  unsigned char *qout; /* PT2E's _is_output_of_quantized_pattern, per node */
  QhQuantSpec act, weight;
  int n_patterns;
} Ind;

static int annotated(const Ind *c, uint32_t n) {
  return (c->h->annotation_node_flags(c->g, n) & QH_ANNOTATION_ANNOTATED) != 0;
}

/* conv2d: a Conv with a constant rank-4 weight; conv1d: rank 3. */
static int conv_rank(const Ind *c, uint32_t n) {
  if (!is_op(c->h, c->g, n, "Conv") || c->h->node_input_count(c->g, n) < 2)
    return 0;
  uint32_t w = c->h->node_input(c->g, n, 1);
  return is_const(c->h, c->g, w) ? rank_of(c->h, c->g, w) : 0;
}

/* linear: Gemm (transA = 0) or MatMul with a constant 2-D weight; *ch_axis is the
 * weight's output-channel axis ([N, K] for Gemm transB=1, else [K, N]). */
static int is_linear(const Ind *c, uint32_t n, int *ch_axis) {
  const QhHostApi *h = c->h;
  int gemm = is_op(h, c->g, n, "Gemm"), matmul = is_op(h, c->g, n, "MatMul");
  if ((!gemm && !matmul) || h->node_input_count(c->g, n) < 2)
    return 0;
  uint32_t w = h->node_input(c->g, n, 1);
  if (!is_const(h, c->g, w) || rank_of(h, c->g, w) != 2)
    return 0;
  int64_t ta = 0, tb = 0;
  if (gemm) {
    h->status_free(h->node_attr_int(c->g, n, "transA", &ta));
    h->status_free(h->node_attr_int(c->g, n, "transB", &tb));
  }
  if (ta)
    return 0;
  *ch_axis = tb ? 0 : 1;
  return 1;
}

static int is_conv_unary(const Ind *c, uint32_t n) {
  return is_op(c->h, c->g, n, "Relu") || is_op(c->h, c->g, n, "Clip") || is_op(c->h, c->g, n, "HardSwish");
}

static int is_linear_unary(const Ind *c, uint32_t n) {
  return is_op(c->h, c->g, n, "Relu") || is_op(c->h, c->g, n, "LeakyRelu") || is_op(c->h, c->g, n, "Tanh") ||
         is_op(c->h, c->g, n, "Gelu");
}

static QhStatus *mark(Ind *c, uint32_t n, int qout) {
  if (qout)
    c->qout[n] = 1;
  return c->h->annotation_set_node_flags(c->g, n, QH_ANNOTATION_ANNOTATED);
}

/* _annotate_conv_node_helper / the linear one: input activation and weight, float bias,
 * no output spec. */
static QhStatus *weighted_inputs(Ind *c, uint32_t n, int ch_axis) {
  QhQuantSpec w = c->weight;
  w.ch_axis = ch_axis;
  QhStatus *st = c->h->annotation_set_input_spec(c->g, n, 0, &c->act);
  return st ? st : c->h->annotation_set_input_spec(c->g, n, 1, &w);
}

static void note(Ind *c, const char *pattern, uint32_t first, uint32_t last) {
  char line[320];
  const char *a = c->h->node_name(c->g, first), *b = c->h->node_name(c->g, last);
  if (first == last)
    snprintf(line, sizeof line, "inductor: %s '%s'", pattern, a ? a : "?");
  else
    snprintf(line, sizeof line, "inductor: %s '%s' .. '%s'", pattern, a ? a : "?", b ? b : "?");
  c->h->report(QH_LOG_DEBUG, line);
  c->n_patterns++;
}

/* weighted (conv or linear) -> Add (-> unary): the extra Add input gets the activation
 * spec, the last node is the pattern's output. with_unary: 1 = only with a unary after
 * the Add, 0 = only without. */
static QhStatus *binary_patterns(Ind *c, int linear, int with_unary) {
  const QhHostApi *h = c->h;
  for (uint32_t add = 0; add < c->n_nodes; add++) {
    if (!h->node_is_live(c->g, add) || !is_op(h, c->g, add, "Add") || h->node_input_count(c->g, add) != 2)
      continue;
    uint32_t wn = QH_INVALID_ID, extra = 0;
    int axis = 0;
    for (uint32_t s = 0; s < 2 && wn == QH_INVALID_ID; s++) {
      uint32_t p = producer_of_input(h, c->g, add, s);
      if (p == QH_INVALID_ID || sole_user(h, c->g, p) != add)
        continue;
      if (linear ? is_linear(c, p, &axis) : conv_rank(c, p) == 4)
        wn = p, extra = 1 - s;
    }
    if (wn == QH_INVALID_ID || h->node_input(c->g, add, extra) == h->node_output(c->g, wn, 0))
      continue;
    uint32_t un = with_unary ? sole_user(h, c->g, add) : QH_INVALID_ID;
    if (with_unary && (un == QH_INVALID_ID || !is_op(h, c->g, un, "Relu")))
      continue;
    if (annotated(c, wn) || annotated(c, add) || (with_unary && annotated(c, un)))
      continue;
    QhStatus *st = weighted_inputs(c, wn, linear ? axis : 0);
    if (!st)
      st = h->annotation_set_input_spec(c->g, add, extra, &c->act);
    if (!st)
      st = mark(c, wn, 0);
    if (!st)
      st = mark(c, add, !with_unary);
    if (!st && with_unary)
      st = mark(c, un, 1);
    if (st)
      return st;
    note(c, linear ? (with_unary ? "linear_add_relu" : "linear_add") : (with_unary ? "conv_add_relu" : "conv_add"),
         wn, with_unary ? un : add);
  }
  return NULL;
}

/* weighted -> unary (with_unary) or the weighted op alone. */
static QhStatus *single_patterns(Ind *c, int linear, int with_unary) {
  const QhHostApi *h = c->h;
  for (uint32_t n = 0; n < c->n_nodes; n++) {
    int axis = 0, r = 0;
    if (!h->node_is_live(c->g, n) || annotated(c, n))
      continue;
    if (linear ? !is_linear(c, n, &axis) : ((r = conv_rank(c, n)) != 4 && r != 3))
      continue;
    uint32_t un = QH_INVALID_ID;
    if (with_unary) {
      un = sole_user(h, c->g, n);
      int fits = un != QH_INVALID_ID &&
                 (linear ? is_linear_unary(c, un) : r == 4 ? is_conv_unary(c, un) : is_op(h, c->g, un, "Relu"));
      if (!fits || annotated(c, un))
        continue;
    }
    QhStatus *st = weighted_inputs(c, n, axis);
    if (!st)
      st = mark(c, n, !with_unary);
    if (!st && with_unary)
      st = mark(c, un, 1);
    if (st)
      return st;
    note(c, linear ? (with_unary ? "linear_unary" : "linear") : (with_unary ? "conv_unary" : "conv"), n,
         with_unary ? un : n);
  }
  return NULL;
}

static int is_weighted(Ind *c, uint32_t n) {
  int axis, r = conv_rank(c, n);
  return r == 3 || r == 4 || is_linear(c, n, &axis);
}

static int is_propagation_op(const Ind *c, uint32_t n) {
  static const char *const ops[] = {"MaxPool", "Concat", "AveragePool", "GlobalAveragePool", "Flatten"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (is_op(c->h, c->g, n, ops[i]))
      return 1;
  return 0;
}

static int input_is_quantized(const Ind *c, uint32_t n, uint32_t slot) {
  uint32_t p = producer_of_input(c->h, c->g, n, slot);
  return p != QH_INVALID_ID && c->qout[p];
}

/* _annotate_propagation_quantizable_pattern over the graph in id order (the host's
 * node ids follow the model's topological order). */
static QhStatus *propagation(Ind *c) {
  const QhHostApi *h = c->h;
  for (uint32_t n = 0; n < c->n_nodes; n++) {
    if (!h->node_is_live(c->g, n) || annotated(c, n) || !is_propagation_op(c, n))
      continue;
    uint32_t n_in = is_op(h, c->g, n, "Concat") ? h->node_input_count(c->g, n) : 1;
    int all = n_in > 0;
    for (uint32_t s = 0; s < n_in && all; s++)
      all = input_is_quantized(c, n, s);
    if (!all)
      continue;
    if (is_op(h, c->g, n, "Flatten")) {
      /* only when a user of the flattened tensor is quantizable */
      uint32_t v = h->node_output(c->g, n, 0), k = h->value_consumer_count(c->g, v), any = 0;
      for (uint32_t i = 0; i < k && !any; i++) {
        uint32_t u, slot;
        QhStatus *st = h->value_consumer(c->g, v, i, &u, &slot);
        h->status_free(st);
        any = !st && (is_weighted(c, u) || is_propagation_op(c, u));
      }
      if (!any)
        continue;
    }
    QhStatus *st = h->annotation_set_input_spec(c->g, n, 0, &c->act);
    QhQuantSpec shared = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_SHARED, .ch_axis = -1,
                          .shared_with = in_edge(n, 0)};
    for (uint32_t s = 1; s < n_in && !st; s++)
      st = h->annotation_set_input_spec(c->g, n, s, &shared);
    /* _annotate_output_for_int8_in_int8_out_pattern: the output shares the input edge */
    if (!st)
      st = h->annotation_set_output_spec(c->g, n, 0, &shared);
    if (!st)
      st = mark(c, n, 1);
    if (st)
      return st;
    note(c, h->node_op_type(c->g, n), n, n);
  }
  return NULL;
}

/* Overwrite every spec the declarative pass set, and its node flags. */
static QhStatus *clear_fx(Ind *c) {
  const QhHostApi *h = c->h;
  const QhQuantSpec fl = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_FLOAT, .ch_axis = -1};
  for (uint32_t n = 0; n < c->n_nodes; n++) {
    if (!h->node_is_live(c->g, n))
      continue;
    QhStatus *st = NULL;
    for (uint32_t s = 0; s < h->node_input_count(c->g, n) && !st; s++) {
      QhEdgeRef e = in_edge(n, s);
      if (h->annotation_spec_kind(c->g, &e) > 0 && h->annotation_spec_kind(c->g, &e) != QH_SPEC_FLOAT)
        st = h->annotation_set_input_spec(c->g, n, s, &fl);
    }
    for (uint32_t s = 0; s < h->node_output_count(c->g, n) && !st; s++) {
      QhEdgeRef e = out_edge(n, s);
      if (h->annotation_spec_kind(c->g, &e) > 0 && h->annotation_spec_kind(c->g, &e) != QH_SPEC_FLOAT)
        st = h->annotation_set_output_spec(c->g, n, s, &fl);
    }
    if (!st && h->annotation_node_flags(c->g, n))
      st = h->annotation_set_node_flags(c->g, n, 0);
    if (st)
      return st;
  }
  return NULL;
}

/* --config null entries: PT2E's _annotate_nodes_not_quantize, before any pattern. */
static QhStatus *exclusions(Ind *c) {
  for (uint32_t n = 0; n < c->n_nodes; n++) {
    if (!c->h->node_is_live(c->g, n))
      continue;
    QhQuantSpec s = {QH_STRUCT_HEADER(QhQuantSpec)};
    int32_t src = 0;
    QhStatus *st = c->h->qconfig_for_node(c->g, n, QH_ROLE_ACTIVATION, &s, &src);
    c->h->status_free(st);
    if (!st && src == QH_QCONFIG_EXCLUDED && (st = mark(c, n, 0)))
      return st;
  }
  return NULL;
}

static QhStatus *inductor_annotate(const X86PluginInstance *pi, const QhHostApi *h, QhGraphView *g) {
  Ind c = {.h = h, .g = g, .n_nodes = h->graph_node_count(g)};
  c.act = (QhQuantSpec){QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE, .dtype = QH_DTYPE_UINT8,
                        .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE, .quant_min = 0,
                        .quant_max = pi->base.reduce_range ? 127 : 255, .ch_axis = -1,
                        .flags = QH_SPEC_HAS_RANGE | QH_SPEC_HAS_EPS, .eps = EPS_2_M12,
                        .observer = "HistogramObserver"};
  c.weight = (QhQuantSpec){QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE, .dtype = QH_DTYPE_INT8,
                           .qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC, .quant_min = -128, .quant_max = 127,
                           .ch_axis = 0, .flags = QH_SPEC_HAS_RANGE | QH_SPEC_HAS_EPS, .eps = EPS_2_M12,
                           .observer = "PerChannelMinMaxObserver"};
  c.qout = calloc(c.n_nodes ? c.n_nodes : 1, 1);
  if (!c.qout)
    return h->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  QhStatus *st = clear_fx(&c);
  if (!st)
    st = exclusions(&c);
  /* the recipe's order: conv2d fusions most specific first, then linear, then propagation */
  for (int linear = 0; linear < 2 && !st; linear++) {
    if (!st)
      st = binary_patterns(&c, linear, 1);
    if (!st)
      st = binary_patterns(&c, linear, 0);
    if (!st)
      st = single_patterns(&c, linear, 1);
    if (!st)
      st = single_patterns(&c, linear, 0);
  }
  if (!st)
    st = propagation(&c);
  free(c.qout);
  if (!st) {
    char line[200];
    snprintf(line, sizeof line,
             "quantizer=inductor: X86InductorQuantizer recipe, %d pattern(s) annotated; activations uint8 "
             "[0, %d]%s; the node table names the FX pass's patterns",
             c.n_patterns, c.act.quant_max, pi->base.reduce_range ? " (reduce_range)" : "");
    h->report(QH_LOG_INFO, line);
  }
  return st;
}

/* ---- fx + reduce_range ---- */

static int is_weight_slot(const QhHostApi *h, const QhGraphView *g, uint32_t n, uint32_t slot) {
  return slot >= 1 && is_const(h, g, h->node_input(g, n, slot)) &&
         (is_op(h, g, n, "Conv") || is_op(h, g, n, "ConvTranspose") || is_op(h, g, n, "Gemm") ||
          is_op(h, g, n, "MatMul"));
}

static QhStatus *fx_reduce_range(const X86PluginInstance *pi, const QhHostApi *h, QhGraphView *g) {
  uint32_t n_nodes = h->graph_node_count(g), changed = 0;
  for (uint32_t n = 0; n < n_nodes; n++) {
    if (!h->node_is_live(g, n))
      continue;
    QhQuantSpec act = {QH_STRUCT_HEADER(QhQuantSpec)};
    int32_t src = 0;
    QhStatus *st = h->qconfig_for_node(g, n, QH_ROLE_ACTIVATION, &act, &src);
    if (st) {
      int32_t code = h->status_code(st);
      h->status_free(st);
      if (code == QH_ERR_NOT_FOUND)
        continue;
      return h->status_new(code, "qconfig_for_node failed");
    }
    /* only the backend's own HistogramObserver default: a user's choice stands */
    if (src != QH_QCONFIG_BACKEND_DEFAULT || act.kind != QH_SPEC_QUANTIZE || act.dtype != QH_DTYPE_UINT8 ||
        (act.flags & (QH_SPEC_HAS_RANGE | QH_SPEC_REDUCE_RANGE)) || !act.observer ||
        strcmp(act.observer, "HistogramObserver") != 0)
      continue;
    act.flags |= QH_SPEC_REDUCE_RANGE;
    for (uint32_t s = 0; s < h->node_input_count(g, n) && !st; s++) {
      QhEdgeRef e = in_edge(n, s);
      if (h->annotation_spec_kind(g, &e) == QH_SPEC_QUANTIZE && !is_weight_slot(h, g, n, s) && ++changed)
        st = h->annotation_set_input_spec(g, n, s, &act);
    }
    for (uint32_t s = 0; s < h->node_output_count(g, n) && !st; s++) {
      QhEdgeRef e = out_edge(n, s);
      if (h->annotation_spec_kind(g, &e) == QH_SPEC_QUANTIZE && ++changed)
        st = h->annotation_set_output_spec(g, n, s, &act);
    }
    if (st)
      return st;
  }
  char line[240];
  snprintf(line, sizeof line,
           "reduce_range %s: %u default activation spec(s) quantized to [0, 127] (PyTorch's reduce_range) so "
           "oneDNN's u8*s8 int16 pair sums cannot saturate; --backend-opt reduce_range=off keeps [0, 255]",
           pi->base.vnni ? "on (requested)" : "on (this CPU has no VNNI)", changed);
  /* an automatic choice changes results against PyTorch's onednn default: say it aloud */
  h->report(pi->base.vnni ? QH_LOG_INFO : QH_LOG_WARNING, line);
  return NULL;
}

static QhStatus *annotate(void *instance, const QhHostApi *host, QhGraphView *graph) {
  const X86PluginInstance *pi = instance;
  if (!pi || !host || !graph)
    return host ? host->status_new(QH_ERR_INVALID_ARGUMENT, "annotate: bad arguments") : NULL;
  if (pi->quantizer == X86_QUANTIZER_INDUCTOR)
    return inductor_annotate(pi, host, graph);
  return pi->base.reduce_range ? fx_reduce_range(pi, host, graph) : NULL;
}

const QhAnnotateOps x86_annotate = {QH_STRUCT_HEADER(QhAnnotateOps), .annotate = annotate, .validate = NULL};
