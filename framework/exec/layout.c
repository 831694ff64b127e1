/* The float layout plan. oneDNN's fp32 convolutions are fastest on channels-last data
 * (brgconv; a 1x1 conv on NCHW falls back to its slower gemm path), and a graph kept in
 * NCHW pays two activation reorders per conv: together half of mobilenet_v3_large's and
 * a third of resnet50's conv time. So a value that flows only between Convs, element-wise
 * ops (Relu, Clip, HardSwish, residual Add, the squeeze-excitation Mul, ...) and the ops
 * with a channels-last loop (MaxPool, AveragePool, GlobalAveragePool, Pad,
 * BatchNormalization, Concat on the channel axis) stays NHWC; a value that any other op reads, or that the caller sees
 * (graph inputs and outputs, the plan's value hook), stays NCHW, and the Conv on the
 * boundary converts on its side. A 4-D value with one spatial position (a global pool's
 * output, a per-channel constant) has the same bytes in both layouts: it is never marked
 * and never forces its reader's other operands. Every op here computes the same numbers
 * in either layout as long as its other operands share it, which the fixpoint below
 * enforces. */
#include "exec/layout.h"

#include <string.h>

#include "exec/onednn.h"

static gboolean op_is(const QhNode *node, const char *const *names) {
  if (node->domain[0] != '\0')
    return FALSE;
  for (; *names; names++)
    if (strcmp(node->op_type, *names) == 0)
      return TRUE;
  return FALSE;
}

static gboolean activation_4d(const QhTensor *t, gboolean known) {
  if (!known || t->data != NULL || t->dtype != QH_DTYPE_F32 || t->shape.rank != 4)
    return FALSE;
  for (int i = 0; i < 4; i++)
    if (t->shape.dims[i] <= 0)
      return FALSE;
  return TRUE;
}

/* A Conv the oneDNN engine takes: 4-D float input, constant weights, nothing empty. */
static gboolean conv_on_engine(const QhNode *node, const QhTensor *infos, const gboolean *is_known) {
  static const char *const conv[] = {"Conv", NULL};
  if (!op_is(node, conv) || node->n_inputs < 2 || node->inputs[0] < 0 || node->inputs[1] < 0 ||
      node->outputs[0] < 0)
    return FALSE;
  const int x = node->inputs[0], w = node->inputs[1], y = node->outputs[0];
  if (!activation_4d(&infos[x], is_known[x]) || !is_known[w] || infos[w].data == NULL ||
      !activation_4d(&infos[y], is_known[y]))
    return FALSE;
  if (node->n_inputs > 2 && node->inputs[2] >= 0 && infos[node->inputs[2]].data == NULL)
    return FALSE;
  return TRUE;
}

/* A value whose bytes are the same in NCHW and NHWC: a known float tensor of rank <= 4
 * whose dims, right-aligned to rank 4, have H = W = 1 (scalars, [C,1,1] constants, a
 * global pool's [N,C,1,1] output). */
static gboolean one_position(const QhTensor *t, gboolean known) {
  if (!known || t->dtype != QH_DTYPE_F32 || t->shape.rank > 4)
    return FALSE;
  for (int i = 0; i < t->shape.rank; i++)
    if (t->shape.dims[i] < 0)
      return FALSE;
  for (int i = MAX(0, t->shape.rank - 2); i < t->shape.rank; i++)
    if (t->shape.dims[i] != 1)
      return FALSE;
  return TRUE;
}

/* An element-wise op whose output is a 4-D activation and whose operands each either
 * have its shape (activations) or one spatial position (broadcast per channel or as a
 * scalar: the squeeze-excitation Mul, a constant scale). */
static gboolean elementwise(const QhNode *node, const QhTensor *infos, const gboolean *is_known) {
  static const char *const unary[] = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish",
                                      "LeakyRelu", "Tanh", NULL};
  static const char *const binary[] = {"Add", "Mul", "Sub", "Div", NULL};
  gboolean is_unary = op_is(node, unary);
  if ((!is_unary && !op_is(node, binary)) || node->n_outputs != 1 || node->outputs[0] < 0)
    return FALSE;
  const QhTensor *y = &infos[node->outputs[0]];
  if (!activation_4d(y, is_known[node->outputs[0]]))
    return FALSE;
  for (int k = 0; k < node->n_inputs; k++) {
    int v = node->inputs[k];
    if (v < 0 || !is_known[v])
      continue;
    gboolean operand = is_unary ? k == 0 : TRUE; /* Clip's bounds are scalars */
    if (!operand)
      continue;
    gboolean same = activation_4d(&infos[v], TRUE) && qh_shape_equal(&infos[v].shape, &y->shape);
    if (!same && (is_unary || !one_position(&infos[v], TRUE)))
      return FALSE;
  }
  return TRUE;
}

/* An op with a channels-last loop of its own: MaxPool (without Indices), AveragePool,
 * GlobalAveragePool, Pad and BatchNormalization on 4-D activations, Concat of 4-D
 * activations along the channels. */
static gboolean channels_last_op(const QhNode *node, const QhTensor *infos, const gboolean *is_known) {
  static const char *const pools[] = {"MaxPool", "AveragePool", "GlobalAveragePool", NULL};
  static const char *const concat[] = {"Concat", NULL};
  static const char *const pad[] = {"Pad", NULL};
  static const char *const bn[] = {"BatchNormalization", NULL};
  if (node->n_outputs < 1 || node->outputs[0] < 0 ||
      !activation_4d(&infos[node->outputs[0]], is_known[node->outputs[0]]))
    return FALSE;
  if (op_is(node, pools))
    return node->n_inputs == 1 && node->inputs[0] >= 0 &&
           activation_4d(&infos[node->inputs[0]], is_known[node->inputs[0]]) &&
           (node->n_outputs == 1 || node->outputs[1] < 0);
  if (op_is(node, bn)) /* the statistics outputs are refused by the kernel anyway */
    return node->n_inputs == 5 && node->inputs[0] >= 0 &&
           activation_4d(&infos[node->inputs[0]], is_known[node->inputs[0]]);
  if (op_is(node, pad)) /* pads, value and axes are constants the kernel reads */
    return node->inputs[0] >= 0 && activation_4d(&infos[node->inputs[0]], is_known[node->inputs[0]]);
  if (!op_is(node, concat) || node->n_inputs < 1)
    return FALSE;
  const QhAttr *axis = qh_node_attr(node, "axis");
  if (axis == NULL || axis->type != QH_ATTR_INT || (axis->i != 1 && axis->i != -3))
    return FALSE;
  for (int k = 0; k < node->n_inputs; k++)
    if (node->inputs[k] < 0 || !activation_4d(&infos[node->inputs[k]], is_known[node->inputs[k]]))
      return FALSE;
  return TRUE;
}

gboolean *qh_layout_plan_nhwc(const QhGraph *graph, const GArray *run_order, const QhTensor *infos,
                              const gboolean *is_known, const QhOpDef *const *defs,
                              const gboolean *is_external, int n_values) {
  gboolean *nhwc = g_new0(gboolean, (gsize)n_values + 1);
  if (!qh_onednn_enabled())
    return nhwc;
  const guint n = run_order->len;
  /* per step: 0 other, 1 engine Conv, 2 element-wise, 3 channels-last pool or Concat */
  guint8 *kind = g_new0(guint8, n + 1);
  for (guint i = 0; i < n; i++) {
    const QhNode *node = qh_graph_node(graph, g_array_index(run_order, int, i));
    if (is_external[node->id] || defs[node->id] == NULL)
      continue;
    kind[i] = conv_on_engine(node, infos, is_known)     ? 1
              : elementwise(node, infos, is_known)      ? 2
              : channels_last_op(node, infos, is_known) ? 3
                                                        : 0;
  }
  /* start from every value those ops make (but one spatial position: either layout) ... */
  for (guint i = 0; i < n; i++) {
    const QhNode *node = qh_graph_node(graph, g_array_index(run_order, int, i));
    int y = node->n_outputs > 0 ? node->outputs[0] : -1;
    if (kind[i] != 0 && y >= 0 && !qh_graph_value(graph, y)->is_output &&
        !one_position(&infos[y], is_known[y]))
      nhwc[y] = TRUE;
  }
  /* ... and take away what a reader cannot take, until nothing changes */
  for (gboolean changed = TRUE; changed;) {
    changed = FALSE;
    for (guint i = 0; i < n; i++) {
      const QhNode *node = qh_graph_node(graph, g_array_index(run_order, int, i));
      if (kind[i] == 1) {
        for (int k = 1; k < node->n_inputs; k++)
          if (node->inputs[k] >= 0 && nhwc[node->inputs[k]])
            nhwc[node->inputs[k]] = FALSE, changed = TRUE;
        continue;
      }
      /* the operands that have a layout must all share it */
      gboolean all = TRUE, any = FALSE;
      for (int k = 0; k < node->n_inputs; k++) {
        int v = node->inputs[k];
        if (v >= 0 && infos[v].data == NULL && !one_position(&infos[v], is_known[v])) {
          all = all && nhwc[v];
          any = any || nhwc[v];
        }
      }
      for (int o = 0; o < node->n_outputs; o++) {
        int v = node->outputs[o];
        if (v >= 0 && !one_position(&infos[v], is_known[v])) {
          all = all && nhwc[v];
          any = any || nhwc[v];
        }
      }
      if (any && (kind[i] == 0 || !all)) {
        for (int k = 0; k < node->n_inputs; k++)
          if (node->inputs[k] >= 0)
            nhwc[node->inputs[k]] = FALSE;
        for (int o = 0; o < node->n_outputs; o++)
          if (node->outputs[o] >= 0)
            nhwc[node->outputs[o]] = FALSE;
        changed = TRUE;
      }
    }
  }
  g_free(kind);
  return nhwc;
}
