/* The PyTorch names a qconfig's object_type keys may use besides ONNX op types, and how
 * each is recognised in an ONNX graph. PyTorch keys its QConfigMapping by module class
 * or function (nn.Linear, nn.Conv2d, torch.cat); after export those become ONNX
 * patterns whose shape tells them apart (a Linear is a Gemm, or a MatMul with a
 * constant 2-D weight whose bias is a separate Add; Conv1d/2d/3d are all Conv, told
 * apart by the weight's rank). docs/qconfig.md carries this table for users; keep the
 * two in step. */
#include "quant/qconfig-private.h"

#include <string.h>

typedef gboolean (*MatchFn)(const QhGraph *g, const QhNode *n, int arg);

typedef struct {
  const char *name;    /* the PyTorch name */
  const char *op_type; /* the ONNX op it becomes */
  MatchFn match;       /* NULL: every node of op_type */
  int arg;
} Alias;

static const QhValue *input_value(const QhGraph *g, const QhNode *n, int slot) {
  int id = qh_node_input(n, slot);
  if (id < 0 || id >= qh_graph_n_values(g))
    return NULL;
  return qh_graph_value(g, id);
}

/* The constant data behind a value: an initializer or a Constant node's `value`. */
static const QhTensor *constant_of(const QhGraph *g, const QhValue *v) {
  if (v == NULL)
    return NULL;
  if (v->initializer != NULL)
    return v->initializer;
  if (v->producer < 0 || v->producer >= qh_graph_n_nodes(g))
    return NULL;
  const QhNode *p = qh_graph_node(g, v->producer);
  if (p->is_removed || strcmp(p->op_type, "Constant") != 0)
    return NULL;
  const QhAttr *a = qh_node_attr(p, "value");
  return a != NULL && a->type == QH_ATTR_TENSOR ? a->t : NULL;
}

/* Rank of input `slot`, or -1 when unknown. */
static int input_rank(const QhGraph *g, const QhNode *n, int slot) {
  const QhValue *v = input_value(g, n, slot);
  if (v == NULL)
    return -1;
  const QhTensor *t = constant_of(g, v);
  return t != NULL ? t->shape.rank : v->shape.rank;
}

/* The spatial rank of a windowed op: kernel_shape's length, else the weight's or the
 * input's rank minus two; -1 when nothing says. */
static int spatial_rank(const QhGraph *g, const QhNode *n, int ranked_slot) {
  const QhAttr *k = qh_node_attr(n, "kernel_shape");
  if (k != NULL && k->type == QH_ATTR_INTS)
    return (int)k->n;
  int r = input_rank(g, n, ranked_slot);
  return r >= 2 ? r - 2 : -1;
}

/* An unknown rank matches every variant rather than none: the user named the op. */
static gboolean weight_spatial(const QhGraph *g, const QhNode *n, int dims) {
  int r = spatial_rank(g, n, 1);
  return r < 0 || r == dims;
}

static gboolean input_spatial(const QhGraph *g, const QhNode *n, int dims) {
  int r = spatial_rank(g, n, 0);
  return r < 0 || r == dims;
}

/* Global pooling and instance norm have no kernel_shape: only the input's rank tells. */
static gboolean global_spatial(const QhGraph *g, const QhNode *n, int dims) {
  int r = input_rank(g, n, 0);
  return r < 0 || r - 2 == dims;
}

/* BatchNorm1d takes [N, C] and [N, C, L]. */
static gboolean batchnorm_dims(const QhGraph *g, const QhNode *n, int dims) {
  int r = input_rank(g, n, 0);
  if (r < 0)
    return TRUE;
  return dims == 1 ? (r == 2 || r == 3) : r - 2 == dims;
}

static gboolean matmul_is_linear(const QhGraph *g, const QhNode *n, int arg) {
  (void)arg;
  const QhTensor *w = constant_of(g, input_value(g, n, 1));
  return w != NULL && w->shape.rank == 2;
}

/* The Add of a Linear's bias: one operand a Linear MatMul's output, the other a
 * constant 1-D bias. */
static gboolean add_is_linear_bias(const QhGraph *g, const QhNode *n, int arg) {
  (void)arg;
  if (n->n_inputs != 2)
    return FALSE;
  for (int side = 0; side < 2; side++) {
    const QhValue *x = input_value(g, n, side);
    const QhTensor *b = constant_of(g, input_value(g, n, 1 - side));
    if (x == NULL || b == NULL || b->shape.rank != 1 || x->producer < 0 ||
        x->producer >= qh_graph_n_nodes(g))
      continue;
    const QhNode *p = qh_graph_node(g, x->producer);
    if (!p->is_removed && strcmp(p->op_type, "MatMul") == 0 && matmul_is_linear(g, p, 0))
      return TRUE;
  }
  return FALSE;
}

/* The float value of a one-element float constant. */
static gboolean scalar_value(const QhGraph *g, const QhValue *v, float *out) {
  const QhTensor *t = constant_of(g, v);
  if (t == NULL || t->dtype != QH_DTYPE_F32 || t->data == NULL || t->nbytes != sizeof(float))
    return FALSE;
  memcpy(out, t->data, sizeof *out);
  return TRUE;
}

/* ReLU6 exports as Clip(0, 6): inputs from opset 11, attributes before. */
static gboolean clip_is_relu6(const QhGraph *g, const QhNode *n, int arg) {
  (void)arg;
  float lo, hi;
  const QhAttr *amin = qh_node_attr(n, "min"), *amax = qh_node_attr(n, "max");
  if (amin != NULL && amax != NULL && amin->type == QH_ATTR_FLOAT && amax->type == QH_ATTR_FLOAT)
    return amin->f == 0.0f && amax->f == 6.0f;
  return scalar_value(g, input_value(g, n, 1), &lo) &&
         scalar_value(g, input_value(g, n, 2), &hi) && lo == 0.0f && hi == 6.0f;
}

static const Alias aliases[] = {
    {"Linear", "Gemm", NULL, 0},
    {"Linear", "MatMul", matmul_is_linear, 0},
    {"Linear", "Add", add_is_linear_bias, 0},
    {"Conv1d", "Conv", weight_spatial, 1},
    {"Conv2d", "Conv", weight_spatial, 2},
    {"Conv3d", "Conv", weight_spatial, 3},
    {"ConvTranspose1d", "ConvTranspose", weight_spatial, 1},
    {"ConvTranspose2d", "ConvTranspose", weight_spatial, 2},
    {"ConvTranspose3d", "ConvTranspose", weight_spatial, 3},
    {"BatchNorm1d", "BatchNormalization", batchnorm_dims, 1},
    {"BatchNorm2d", "BatchNormalization", batchnorm_dims, 2},
    {"BatchNorm3d", "BatchNormalization", batchnorm_dims, 3},
    {"ReLU", "Relu", NULL, 0},
    {"relu", "Relu", NULL, 0},
    {"ReLU6", "Clip", clip_is_relu6, 0},
    {"relu6", "Clip", clip_is_relu6, 0},
    {"Hardtanh", "Clip", NULL, 0},
    {"hardtanh", "Clip", NULL, 0},
    {"clamp", "Clip", NULL, 0},
    {"MaxPool1d", "MaxPool", input_spatial, 1},
    {"MaxPool2d", "MaxPool", input_spatial, 2},
    {"MaxPool3d", "MaxPool", input_spatial, 3},
    {"max_pool1d", "MaxPool", input_spatial, 1},
    {"max_pool2d", "MaxPool", input_spatial, 2},
    {"max_pool3d", "MaxPool", input_spatial, 3},
    {"AvgPool1d", "AveragePool", input_spatial, 1},
    {"AvgPool2d", "AveragePool", input_spatial, 2},
    {"AvgPool3d", "AveragePool", input_spatial, 3},
    {"avg_pool1d", "AveragePool", input_spatial, 1},
    {"avg_pool2d", "AveragePool", input_spatial, 2},
    {"avg_pool3d", "AveragePool", input_spatial, 3},
    {"AdaptiveAvgPool1d", "GlobalAveragePool", global_spatial, 1},
    {"AdaptiveAvgPool2d", "GlobalAveragePool", global_spatial, 2},
    {"AdaptiveAvgPool3d", "GlobalAveragePool", global_spatial, 3},
    {"AdaptiveAvgPool1d", "AveragePool", input_spatial, 1},
    {"AdaptiveAvgPool2d", "AveragePool", input_spatial, 2},
    {"AdaptiveAvgPool3d", "AveragePool", input_spatial, 3},
    {"adaptive_avg_pool1d", "GlobalAveragePool", global_spatial, 1},
    {"adaptive_avg_pool2d", "GlobalAveragePool", global_spatial, 2},
    {"adaptive_avg_pool3d", "GlobalAveragePool", global_spatial, 3},
    {"adaptive_avg_pool1d", "AveragePool", input_spatial, 1},
    {"adaptive_avg_pool2d", "AveragePool", input_spatial, 2},
    {"adaptive_avg_pool3d", "AveragePool", input_spatial, 3},
    {"mean", "ReduceMean", NULL, 0},
    {"sigmoid", "Sigmoid", NULL, 0},
    {"tanh", "Tanh", NULL, 0},
    {"Hardsigmoid", "HardSigmoid", NULL, 0},
    {"hardsigmoid", "HardSigmoid", NULL, 0},
    {"softmax", "Softmax", NULL, 0},
    {"Hardswish", "HardSwish", NULL, 0},
    {"hardswish", "HardSwish", NULL, 0},
    {"LeakyReLU", "LeakyRelu", NULL, 0},
    {"leaky_relu", "LeakyRelu", NULL, 0},
    {"ELU", "Elu", NULL, 0},
    {"elu", "Elu", NULL, 0},
    {"PReLU", "PRelu", NULL, 0},
    {"LayerNorm", "LayerNormalization", NULL, 0},
    {"layer_norm", "LayerNormalization", NULL, 0},
    {"InstanceNorm1d", "InstanceNormalization", global_spatial, 1},
    {"InstanceNorm2d", "InstanceNormalization", global_spatial, 2},
    {"InstanceNorm3d", "InstanceNormalization", global_spatial, 3},
    {"dropout", "Dropout", NULL, 0},
    {"flatten", "Flatten", NULL, 0},
    {"cat", "Concat", NULL, 0},
    {"add", "Add", NULL, 0},
    {"sub", "Sub", NULL, 0},
    {"mul", "Mul", NULL, 0},
    {"div", "Div", NULL, 0},
    {"matmul", "MatMul", NULL, 0},
    {"reshape", "Reshape", NULL, 0},
    {"view", "Reshape", NULL, 0},
    {"transpose", "Transpose", NULL, 0},
    {"permute", "Transpose", NULL, 0},
    {"squeeze", "Squeeze", NULL, 0},
    {"unsqueeze", "Unsqueeze", NULL, 0},
    {"interpolate", "Resize", NULL, 0},
    {"Upsample", "Resize", NULL, 0},
};

gboolean qh_qconfig_alias_is_known(const char *name) {
  if (name == NULL)
    return FALSE;
  for (size_t i = 0; i < G_N_ELEMENTS(aliases); i++)
    if (strcmp(aliases[i].name, name) == 0)
      return TRUE;
  return FALSE;
}

gboolean qh_qconfig_alias_matches(const char *name, const QhGraph *graph, const QhNode *node) {
  if (name == NULL || graph == NULL || node == NULL || node->op_type == NULL)
    return FALSE;
  for (size_t i = 0; i < G_N_ELEMENTS(aliases); i++) {
    const Alias *a = &aliases[i];
    if (strcmp(a->name, name) != 0 || strcmp(a->op_type, node->op_type) != 0)
      continue;
    if (a->match == NULL || a->match(graph, node, a->arg))
      return TRUE;
  }
  return FALSE;
}

gboolean qh_qconfig_input_is_scalar(const QhGraph *graph, const QhNode *node, int slot) {
  if (graph == NULL || node == NULL)
    return FALSE;
  const QhTensor *t = constant_of(graph, input_value(graph, node, slot));
  if (t == NULL)
    return FALSE;
  for (int i = 0; i < t->shape.rank; i++)
    if (t->shape.dims[i] != 1)
      return FALSE;
  return TRUE;
}
