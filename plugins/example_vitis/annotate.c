/* The imperative annotate, PT2E's way (Quantizer.annotate): walk the graph and put a
 * spec on every edge the DPU quantizes. Every spec is the same type: int8, per tensor,
 * zero point 0, observed by DpuPosObserver, which only ever picks scales 2^-pos; the
 * observer's "role" argument says how the tensor rounds and how many positions to try.
 *
 * Units, as the DPU executes them (a unit's output gets one Q/DQ, nothing inside):
 *  - Conv (1-D, 2-D, grouped/depthwise), Gemm, MatMul with a constant weight: input,
 *    weight and bias quantized (bias int8 with its own position, not int32), followed
 *    by a fused Relu / LeakyRelu / Clip (ReLU6) when it is the only consumer;
 *  - Add (+ fused Relu), Mul, Concat, MaxPool, Relu, LeakyRelu, Clip, HardSigmoid
 *    with the DPU's constants: activation inputs and own output;
 *  - AveragePool / GlobalAveragePool followed by transform.c's factor Mul: one unit,
 *    the output Q/DQ after the Mul, the factor a float scalar (a pool whose window is
 *    unknown, or whose factor could not be inserted, stays float);
 *  - Flatten / Reshape of a quantized tensor: the DPU moves bytes, so the output shares
 *    the input's qparams.
 * A value gets one quantization point: its producer's output, or, for a graph input or
 * a float producer, the first consumer edge that needs it (the others share it).
 * Everything else stays float. A user's --config may exclude nodes (null), but cannot
 * change the DPU's number format: per-channel, uint8 and reduce_range are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vitis-graph.h"
#include "vitis.h"

static const QhOption role_activation[] = {{"role", "activation"}};
static const QhOption role_input[] = {{"role", "input"}};
static const QhOption role_weight[] = {{"role", "weight"}};
static const QhOption role_bias[] = {{"role", "bias"}};

static QhQuantSpec dpu_spec(const QhOption *role) {
  return (QhQuantSpec){QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE, .dtype = QH_DTYPE_INT8,
                       .qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC, .quant_min = VITIS_QMIN,
                       .quant_max = VITIS_QMAX, .ch_axis = -1, .flags = QH_SPEC_HAS_RANGE,
                       .observer = VITIS_OBSERVER_NAME, .observer_args = role, .n_observer_args = 1};
}

typedef struct {
  const QhHostApi *h;
  QhGraphView *g;
  uint32_t n_nodes, n_values;
  QhEdgeRef *point;        /* per value: the edge of its quantization point; node INVALID = none */
  unsigned char *excluded; /* per node: the user's --config maps it to null */
  unsigned char *done;     /* per node: annotated as part of an earlier unit */
  int units;
} Ann;

static int has_point(const Ann *a, uint32_t v) { return v < a->n_values && a->point[v].node != QH_INVALID_ID; }

static QhStatus *refused(Ann *a, uint32_t n, const char *what) {
  const char *name = a->h->node_name(a->g, n);
  return qh_status_newf(a->h, QH_ERR_UNSUPPORTED,
                        "--config asks for %s on node '%s' (%s); the DPU quantizes every tensor as int8, "
                        "per tensor, power-of-two scale, zero point 0",
                        what, name ? name : "?", a->h->node_op_type(a->g, n));
}

/* The user's qconfig, per node: exclusions are honoured, other number formats refused. */
static QhStatus *read_user_config(Ann *a) {
  for (uint32_t n = 0; n < a->n_nodes; n++) {
    if (!a->h->node_is_live(a->g, n))
      continue;
    for (int32_t role = QH_ROLE_ACTIVATION; role <= QH_ROLE_WEIGHT; role++) {
      QhQuantSpec s = {QH_STRUCT_HEADER(QhQuantSpec)};
      int32_t src = 0;
      QhStatus *st = a->h->qconfig_for_node(a->g, n, role, &s, &src);
      if (st) {
        if (a->h->status_code(st) != QH_ERR_NOT_FOUND) /* no mapping entry: the DPU's defaults */
          return st;
        a->h->status_free(st);
        continue;
      }
      if (src == QH_QCONFIG_EXCLUDED)
        a->excluded[n] = 1;
      if (src != QH_QCONFIG_USER || s.kind != QH_SPEC_QUANTIZE)
        continue;
      const char *r = role == QH_ROLE_WEIGHT ? "weights" : "activations";
      char what[64];
      if (s.qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE || s.qscheme == QH_QSCHEME_PER_CHANNEL_SYMMETRIC ||
          s.qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS)
        snprintf(what, sizeof what, "per-channel %s", r);
      else if (s.dtype == QH_DTYPE_UINT8)
        snprintf(what, sizeof what, "uint8 %s", r);
      else if (s.flags & QH_SPEC_REDUCE_RANGE)
        snprintf(what, sizeof what, "reduce_range %s", r);
      else if (s.dtype != QH_DTYPE_INT8)
        snprintf(what, sizeof what, "non-int8 %s", r);
      else
        continue;
      return refused(a, n, what);
    }
  }
  return NULL;
}

/* An activation input of a unit: quantized once per value (see the file comment). */
static QhStatus *act_input(Ann *a, uint32_t n, uint32_t slot) {
  const QhHostApi *h = a->h;
  uint32_t v = h->node_input(a->g, n, slot);
  if (v == QH_INVALID_ID || v >= a->n_values)
    return NULL;
  if (vg_is_const(h, a->g, v)) { /* e.g. the constant operand of an Add or Mul */
    QhQuantSpec w = dpu_spec(role_weight);
    return h->annotation_set_input_spec(a->g, n, slot, &w);
  }
  if (has_point(a, v)) {
    /* Sharing the point adds no Q/DQ (the edge reads the producer's or the first
     * consumer's chain); it makes the unit's quantized inputs explicit in the report. */
    QhQuantSpec shared = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_SHARED, .ch_axis = -1,
                          .shared_with = a->point[v]};
    return h->annotation_set_input_spec(a->g, n, slot, &shared);
  }
  int graph_input = h->value_producer(a->g, v) == QH_INVALID_ID;
  QhQuantSpec s = dpu_spec(graph_input ? role_input : role_activation);
  a->point[v] = (QhEdgeRef){n, slot, QH_EDGE_INPUT, 0};
  return h->annotation_set_input_spec(a->g, n, slot, &s);
}

static QhStatus *own_output(Ann *a, uint32_t n) {
  QhQuantSpec s = dpu_spec(role_activation);
  uint32_t v = a->h->node_output(a->g, n, 0);
  if (v < a->n_values)
    a->point[v] = (QhEdgeRef){n, 0, QH_EDGE_OUTPUT, 0};
  return a->h->annotation_set_output_spec(a->g, n, 0, &s);
}

static QhStatus *mark(Ann *a, uint32_t first, uint32_t last) {
  QhStatus *st = a->h->annotation_set_node_flags(a->g, first, QH_ANNOTATION_ANNOTATED);
  if (!st && last != first) {
    a->done[last] = 1;
    st = a->h->annotation_set_node_flags(a->g, last, QH_ANNOTATION_ANNOTATED);
  }
  a->units++;
  return st;
}

/* The unit ending node: n's fused follower unless the user excluded it. */
static uint32_t unit_last(Ann *a, uint32_t n) {
  uint32_t last = vg_unit_last(a->h, a->g, n);
  return a->excluded[last] || a->done[last] ? n : last;
}

static QhStatus *weighted(Ann *a, uint32_t n) {
  const QhHostApi *h = a->h;
  QhQuantSpec w = dpu_spec(role_weight), b = dpu_spec(role_bias);
  QhStatus *st = act_input(a, n, 0);
  if (!st)
    st = h->annotation_set_input_spec(a->g, n, 1, &w);
  uint32_t bias = h->node_input_count(a->g, n) > 2 ? h->node_input(a->g, n, 2) : QH_INVALID_ID;
  if (!st && vg_is_const(h, a->g, bias)) /* a computed bias stays float */
    st = h->annotation_set_input_spec(a->g, n, 2, &b);
  uint32_t last = unit_last(a, n);
  if (!st)
    st = own_output(a, last);
  return st ? st : mark(a, n, last);
}

/* Ops whose activation inputs and own output are quantized (Add, Mul, Concat, pools,
 * activations); the pools and Add take their fused follower along. */
static QhStatus *elementwise(Ann *a, uint32_t n, uint32_t n_inputs) {
  QhStatus *st = NULL;
  for (uint32_t s = 0; s < n_inputs && !st; s++)
    st = act_input(a, n, s);
  uint32_t last = unit_last(a, n);
  if (!st)
    st = own_output(a, last);
  return st ? st : mark(a, n, last);
}

/* Flatten / Reshape: the output shares the input's point; float input stays float. */
static QhStatus *reshape(Ann *a, uint32_t n) {
  uint32_t v = a->h->node_input(a->g, n, 0), out = a->h->node_output(a->g, n, 0);
  if (!has_point(a, v) || vg_is_const(a->h, a->g, v))
    return NULL;
  QhStatus *st = act_input(a, n, 0);
  QhQuantSpec shared = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_SHARED, .ch_axis = -1,
                        .shared_with = a->point[v]};
  if (!st)
    st = a->h->annotation_set_output_spec(a->g, n, 0, &shared);
  if (!st && out < a->n_values)
    a->point[out] = a->point[v];
  return st ? st : mark(a, n, n);
}

static int dpu_hard_sigmoid(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  float alpha = 0, beta = 0;
  h->status_free(h->node_attr_float(g, n, "alpha", &alpha));
  h->status_free(h->node_attr_float(g, n, "beta", &beta));
  return alpha == 2731.0f / 16384.0f && beta == 3.0f * 2731.0f / 16384.0f; /* set by transform.c */
}

static QhStatus *annotate_node(Ann *a, uint32_t n) {
  const QhHostApi *h = a->h;
  QhGraphView *g = a->g;
  if (vg_weighted(h, g, n))
    return weighted(a, n);
  if ((vg_is_op(h, g, n, "Add") || vg_is_op(h, g, n, "Mul")) && h->node_input_count(g, n) == 2)
    return elementwise(a, n, 2);
  if (vg_is_op(h, g, n, "Concat"))
    return elementwise(a, n, h->node_input_count(g, n));
  if ((vg_is_op(h, g, n, "MaxPool") && h->node_output_count(g, n) == 1) || (vg_is_avgpool(h, g, n) && vg_avgpool_ready(h, g, n)) ||
      vg_is_op(h, g, n, "Relu") || vg_is_op(h, g, n, "LeakyRelu") || vg_fusable_act(h, g, n) ||
      (vg_is_op(h, g, n, "HardSigmoid") && dpu_hard_sigmoid(h, g, n)))
    return elementwise(a, n, 1);
  if (vg_is_op(h, g, n, "Flatten") || vg_is_op(h, g, n, "Reshape"))
    return reshape(a, n);
  return NULL;
}

/* Kahn's order over the live nodes: transform.c appends its Muls at the end of the id
 * space, so ids alone are not topological. */
static uint32_t *topo_order(const QhHostApi *h, const QhGraphView *g, uint32_t n_nodes, uint32_t *count) {
  uint32_t *indeg = calloc(n_nodes + 1, sizeof *indeg), *order = malloc((n_nodes + 1) * sizeof *order);
  uint32_t head = 0, tail = 0;
  if (!indeg || !order) {
    free(indeg);
    free(order);
    return NULL;
  }
  for (uint32_t n = 0; n < n_nodes; n++) {
    if (!h->node_is_live(g, n))
      continue;
    for (uint32_t s = 0; s < h->node_input_count(g, n); s++) {
      uint32_t v = h->node_input(g, n, s);
      if (v != QH_INVALID_ID && h->value_producer(g, v) != QH_INVALID_ID)
        indeg[n]++;
    }
    if (!indeg[n])
      order[tail++] = n;
  }
  while (head < tail) {
    uint32_t n = order[head++];
    for (uint32_t o = 0; o < h->node_output_count(g, n); o++) {
      uint32_t v = h->node_output(g, n, o);
      for (uint32_t k = 0; v != QH_INVALID_ID && k < h->value_consumer_count(g, v); k++) {
        uint32_t c, slot;
        QhStatus *st = h->value_consumer(g, v, k, &c, &slot);
        h->status_free(st);
        if (!st && c < n_nodes && indeg[c] && --indeg[c] == 0)
          order[tail++] = c;
      }
    }
  }
  free(indeg);
  *count = tail;
  return order;
}

static QhStatus *annotate(void *instance, const QhHostApi *h, QhGraphView *g) {
  (void)instance;
  if (!h || !g)
    return h ? h->status_new(QH_ERR_INVALID_ARGUMENT, "annotate: bad arguments") : NULL;
  Ann a = {.h = h, .g = g, .n_nodes = h->graph_node_count(g), .n_values = h->graph_value_count(g)};
  a.point = malloc((a.n_values + 1) * sizeof *a.point);
  a.excluded = calloc(a.n_nodes + 1, 1);
  a.done = calloc(a.n_nodes + 1, 1);
  uint32_t n_order = 0, *order = topo_order(h, g, a.n_nodes, &n_order);
  QhStatus *st = NULL;
  if (!a.point || !a.excluded || !a.done || !order)
    st = h->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  for (uint32_t v = 0; !st && v < a.n_values; v++)
    a.point[v] = (QhEdgeRef){QH_INVALID_ID, 0, 0, 0};
  if (!st)
    st = read_user_config(&a);
  for (uint32_t i = 0; !st && i < n_order; i++)
    if (!a.excluded[order[i]] && !a.done[order[i]])
      st = annotate_node(&a, order[i]);
  if (!st) {
    char line[200];
    snprintf(line, sizeof line,
             "dpu: %d unit(s) quantized: int8, per tensor, zero point 0, scale 2^-pos (" VITIS_OBSERVER_NAME ")",
             a.units);
    h->report(QH_LOG_INFO, line);
  }
  free(order);
  free(a.point);
  free(a.excluded);
  free(a.done);
  return st;
}

const QhAnnotateOps vitis_annotate = {QH_STRUCT_HEADER(QhAnnotateOps), .annotate = annotate, .validate = NULL};
