/* Conv + activation fusion. In the channels-last region every Conv runs on oneDNN, whose
 * convolutions apply an element-wise post-op while the result is still in registers: a
 * Relu, Clip, SiLU or hardswish after a conv then costs no pass over memory (SiLU was two:
 * Sigmoid, then Mul). Only groups inside the layout plan's NHWC region are fused, and the
 * plan runs them only while that region is in use: with a value hook (calibration's
 * observers, the report's captures) or the naive kernels every node runs on its own, so
 * calibration sees the bits it always saw. Relu and Clip are exact as post-ops; oneDNN's
 * swish and hardswish round differently from the host's Sigmoid and HardSigmoid (within a
 * few ulp), which the float parity with ONNX Runtime absorbs. */
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
  return steps;
}
