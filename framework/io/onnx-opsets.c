/* Which ops qhost may read from a model that imports a default-domain opset newer
 * than 17: an op qualifies when ONNX did not publish a new version of it in any
 * opset from 18 up to the model's, so its opset-17 semantics still hold.
 *
 * Source: the per-opset schema lists of onnx/onnx, onnx/defs/operator_sets.h
 * (commit 9633c87772a7d7ee0ed1fe5887ce87797fe47696, which registers opsets up to
 * 23), cross-read with docs/Changelog.md. A new schema version counts as a change
 * even when only the accepted types grew (e.g. Conv-22 added bfloat16), because
 * the table cannot tell which changes are harmless. Ops that are not in the table
 * are refused above opset 17. The entries of the transformer and recurrent ops (Equal
 * to MatMulInteger) were read from the same file at commit
 * f7546912001bc31e92a238b17068a21b373d882e, which agrees with the first on every
 * older entry up to opset 23.
 *
 * Opset 18 changed ops whose new form the kernels already implement: the reductions take
 * their axes as an input (with noop_with_empty_axes), Split gained num_outputs, Pad an
 * axes input; Resize-18's antialias, axes and keep_aspect_ratio_policy and ScatterND-18's
 * max/min reductions are refused by their kernels with a line naming the attribute. Those
 * ops are listed in handled_at_18, and only their later changes count. */
#include "io/onnx.h"

#include <string.h>

#include "io/onnx-private.h"

typedef struct {
  const char *op;
  int changed[4]; /* opset versions > 17 with a new schema, ascending, 0-terminated */
} OpChanges;

static const OpChanges changes[] = {
    {"Abs", {0}},
    {"Add", {0}},
    {"And", {0}},
    {"ArgMax", {0}},
    {"AveragePool", {19, 22, 0}},
    {"BatchNormalization", {0}},
    {"Cast", {19, 21, 23, 0}},
    {"Clip", {0}},
    {"Concat", {0}},
    {"Constant", {19, 21, 23, 0}},
    {"ConstantOfShape", {20, 21, 23, 0}},
    {"Conv", {22, 0}},
    {"ConvTranspose", {22, 0}},
    {"CumSum", {0}},
    {"DequantizeLinear", {19, 21, 23, 0}},
    {"Div", {0}},
    {"Dropout", {22, 0}},
    {"DynamicQuantizeLinear", {0}},
    {"Einsum", {0}},
    {"Equal", {19, 0}},
    {"Erf", {0}},
    {"Exp", {0}},
    {"Expand", {0}},
    {"Flatten", {21, 23, 0}},
    {"GRU", {22, 0}},
    {"Gather", {0}},
    {"GatherElements", {0}},
    {"Gemm", {0}},
    {"GlobalAveragePool", {22, 0}},
    {"Greater", {0}},
    {"HardSigmoid", {22, 0}},
    {"HardSwish", {22, 0}},
    {"Identity", {19, 21, 23, 0}},
    {"InstanceNormalization", {22, 0}},
    {"LSTM", {22, 0}},
    {"LayerNormalization", {0}},
    {"LeakyRelu", {0}},
    {"Less", {0}},
    {"Log", {0}},
    {"MatMul", {0}},
    {"MatMulInteger", {0}},
    {"Max", {0}},
    {"MaxPool", {22, 0}},
    {"Min", {0}},
    {"Mod", {0}},
    {"Mul", {0}},
    {"Neg", {0}},
    {"Not", {0}},
    {"Pad", {18, 19, 21, 23}},
    {"Pow", {0}},
    {"QuantizeLinear", {19, 21, 23, 0}},
    {"Range", {0}},
    {"Reciprocal", {0}},
    {"ReduceL2", {18, 0}},
    {"ReduceMax", {18, 20, 0}},
    {"ReduceMean", {18, 0}},
    {"ReduceMin", {18, 20, 0}},
    {"ReduceProd", {18, 0}},
    {"ReduceSum", {0}},
    {"Relu", {0}},
    {"Reshape", {19, 21, 23, 0}},
    {"Resize", {18, 19, 0}},
    {"ScatterND", {18, 0}},
    {"Shape", {19, 21, 23, 0}},
    {"Sigmoid", {0}},
    {"Slice", {0}},
    {"Softmax", {0}},
    {"Split", {18, 0}},
    {"Sqrt", {0}},
    {"Squeeze", {21, 23, 0}},
    {"Sub", {0}},
    {"Tanh", {0}},
    {"Tile", {0}},
    {"TopK", {0}},
    {"Transpose", {21, 23, 0}},
    {"Trilu", {0}},
    {"Unsqueeze", {21, 23, 0}},
    {"Where", {0}},
};

static const char *const handled_at_18[] = {"Pad",        "ReduceL2", "ReduceMax", "ReduceMean", "ReduceMin",
                                            "ReduceProd", "Resize",   "ScatterND", "Split"};

/* Ops whose every change from 18 to 21 was checked against docs/Changelog.md and keeps
 * the meaning of what qhost runs (the list is docs/qconfig.md's "opset 21" table):
 * added element types (Cast-21, Constant-19/21, ConstantOfShape-20/21, Equal-19,
 * Flatten-21, Identity-19/21, ReduceMax-20, ReduceMin-20, Reshape-19/21, Shape-19/21,
 * Squeeze-21, Transpose-21, Unsqueeze-21; the kernels check types), or new attributes
 * and modes whose defaults keep the old meaning and whose other values the kernels
 * implement or refuse by name (AveragePool-19 dilations, implemented; Cast-19 and
 * QuantizeLinear-19 saturate, float8 only; Pad-19 "wrap", refused; Resize-19
 * "half_pixel_symmetric", refused; Quantize/DequantizeLinear-21 block_size, refused,
 * and output_dtype, checked; their int16/uint16 types, implemented). */
static const char *const handled_at_21[] = {
    "AveragePool", "Cast",      "Constant",   "ConstantOfShape", "DequantizeLinear",
    "Equal",       "Flatten",   "Identity",   "Pad",             "QuantizeLinear",
    "ReduceMax",   "ReduceMin", "Reshape",    "Resize",          "Shape",
    "Squeeze",     "Transpose", "Unsqueeze"};

/* The newest opset whose form of op_type the kernels implement (17, 18 or 21). */
static int handled_up_to(const char *op_type) {
  for (gsize i = 0; i < G_N_ELEMENTS(handled_at_21); i++)
    if (strcmp(handled_at_21[i], op_type) == 0)
      return 21;
  for (gsize i = 0; i < G_N_ELEMENTS(handled_at_18); i++)
    if (strcmp(handled_at_18[i], op_type) == 0)
      return 18;
  return 17;
}

/* The first change of op_type in (after, opset], 0 for none, -1 when unknown. */
static int first_change_after(const char *op_type, int after, int64_t opset) {
  if (op_type == NULL || opset > QH_ONNX_NEWEST_KNOWN_OPSET)
    return -1;
  for (gsize i = 0; i < G_N_ELEMENTS(changes); i++) {
    if (strcmp(changes[i].op, op_type) != 0)
      continue;
    for (gsize k = 0; k < G_N_ELEMENTS(changes[i].changed) && changes[i].changed[k] != 0; k++)
      if (changes[i].changed[k] > after && changes[i].changed[k] <= opset)
        return changes[i].changed[k];
    return 0;
  }
  return -1;
}

int qh_onnx_op_first_change_after_17(const char *op_type, int64_t opset) {
  return first_change_after(op_type, 17, opset);
}

int qh_onnx_op_first_unimplemented_change(const char *op_type, int64_t opset) {
  return op_type ? first_change_after(op_type, handled_up_to(op_type), opset) : -1;
}

gboolean qh_onnx_op_unchanged_since_17(const char *op_type, int64_t opset) {
  if (opset <= QH_ONNX_MAX_OPSET)
    return opset >= QH_ONNX_MIN_OPSET && op_type != NULL;
  return qh_onnx_op_first_change_after_17(op_type, opset) == 0;
}
