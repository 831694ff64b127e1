/* The fbgemm plugin's lowering patterns and the unit analysis accept and create share:
 * Conv (2-D, groups = 1, or depthwise 3x3 / 5x5 with one output channel per input
 * channel) and Gemm / MatMul with a constant weight, each with an optional fused Relu (Conv and Gemm: or Clip), on
 * uint8 per-tensor activations and int8 symmetric weights (per tensor or per output
 * channel) with a float or int32 bias. Everything else is declined with the reason and
 * runs on the host: depthwise kernels other than 3x3 and 5x5 (not claimed yet,
 * docs/fbgemm.md). Grouped convolutions and depthwise ones with a channel multiplier
 * (any kernel size) go to conv-grouped-kernel.c through the gconv patterns, placed
 * after the dense ones they leave them to. The Add, Mul, MaxPool, AveragePool,
 * GlobalAveragePool, Flatten, Reshape (to 2-D) and activation (Sigmoid, Tanh, HardSigmoid, HardSwish) patterns run on
 * u8ops.c's kernels, Concat on concat.c's. Full-range [0, 255] inputs need no
 * decline: the AVX2 path switches to an exact variant for any block holding a byte
 * above 127 (gemm-avx2.c). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../common/unit-query.h"
#include "fbgemm.h"

/* FBGEMM's weights here are symmetric (PyTorch's per-channel symmetric observer): the
 * row offsets, which multiply the weight zero point, are then zero and not computed. */
static const char *weight_problem(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                  int32_t axis, int64_t channels) {
  const QhQParams *q = u->input_qparams[1];
  if (!(host->value_flags(g, u->inputs[1]) & QH_VALUE_CONSTANT))
    return "non-constant weights are not supported";
  if (host->value_dtype(g, u->inputs[1]) != QH_DTYPE_INT8)
    return "weights other than int8 are not supported";
  if (!q)
    return "float weights are not supported";
  if (!uq_qparams_sane(q) || q->dtype != QH_DTYPE_INT8)
    return "weight without valid int8 quantization parameters";
  for (size_t i = 0; i < q->count; i++)
    if (q->zero_point[i] != 0)
      return "asymmetric weights (non-zero weight zero point) are not supported";
  if (q->count != 1 && (q->ch_axis != axis || (int64_t)q->count != channels))
    return "per-channel weights on an axis other than the output channel";
  return NULL;
}

static const char *analyze_linear(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                  FbInfo *in) {
  uint32_t node = u->nodes[0];
  int matmul = uq_op_is(host, g, node, "MatMul");
  if (!matmul && !uq_op_is(host, g, node, "Gemm"))
    return "linear pattern on an op other than Gemm or MatMul";
  /* the unit's inputs are the op's, then a fused Clip's bounds */
  size_t own = host->node_input(g, node, 2) != QH_INVALID_ID ? 3 : 2;
  if (u->n_inputs < own || u->input_roles[1] != QH_ROLE_WEIGHT)
    return "expected an activation, a weight and an optional bias";
  if (matmul && own != 2)
    return "MatMul with extra inputs";
  in->w_kn = matmul;
  if (!matmul) {
    if (uq_attr_int(host, g, node, "transA", 0) != 0)
      return "Gemm with transA=1 is not supported";
    in->w_kn = uq_attr_int(host, g, node, "transB", 0) == 0;
    if (uq_attr_float(host, g, node, "alpha", 1.0f) != 1.0f || uq_attr_float(host, g, node, "beta", 1.0f) != 1.0f)
      return "Gemm with alpha or beta other than 1 is not supported";
  }
  int64_t d[QH_MAX_RANK];
  if (uq_known_shape(host, g, u->inputs[1], d) != 2 || d[0] < 1 || d[1] < 1)
    return "weight must be a 2-D constant";
  in->n = in->w_kn ? d[1] : d[0];
  in->k = in->w_kn ? d[0] : d[1];
  int64_t xd[QH_MAX_RANK];
  int32_t xr = uq_known_shape(host, g, u->inputs[0], xd);
  if (xr >= 0 && (xr < 2 || (!matmul && xr != 2) || xd[xr - 1] != in->k))
    return "input must be 2-D (MatMul: at least 2-D) and end in the weight's K";
  const char *p = weight_problem(host, g, u, in->w_kn ? 1 : 0, in->n);
  if (p)
    return p;
  in->w_value = u->inputs[1];
  in->wq = u->input_qparams[1];
  return own == 3 ? uq_bias_problem(host, g, u, 2, in->n, &in->b_value, &in->bq) : NULL;
}

static const char *analyze_conv(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                FbInfo *in) {
  uint32_t node = u->nodes[0];
  if (!uq_op_is(host, g, node, "Conv"))
    return "conv pattern on an op other than Conv";
  size_t own = host->node_input(g, node, 2) != QH_INVALID_ID ? 3 : 2;
  if (u->n_inputs < own || u->input_roles[1] != QH_ROLE_WEIGHT)
    return "expected an activation, a weight and an optional bias";
  int64_t d[QH_MAX_RANK];
  if (uq_known_shape(host, g, u->inputs[1], d) != 4)
    return "only 2-D convolution is supported";
  int64_t group = uq_attr_int(host, g, node, "group", 1);
  if (group != 1) {
    if (group < 1 || d[0] % group)
      return "output channels are not a multiple of group";
    if (group == d[0] && d[1] == 1) {
      /* plain depthwise: the weight is [C, 1, kh, kw] with group = C (multiplier 1) */
      if (!((d[2] == 3 && d[3] == 3) || (d[2] == 5 && d[3] == 5)))
        return "depthwise kernels other than 3x3 and 5x5 are not claimed yet (the host runs them)";
      in->dw = 1;
    } else {
      in->groups = group; /* grouped, or depthwise with a channel multiplier: conv-grouped.h */
    }
  }
  int64_t ks[2];
  const char *why = uq_window_2d(host, g, node, "malformed strides, pads, dilations or kernel_shape", ks, in->stride, in->pad, in->dil);
  if (why)
    return why;
  in->co = d[0], in->ci = in->dw ? group : d[1] * (in->groups ? in->groups : 1), in->kh = d[2], in->kw = d[3];
  if ((ks[0] >= 0 && ks[0] != in->kh) || (ks[1] >= 0 && ks[1] != in->kw))
    return "kernel_shape differs from the weight";
  if (in->stride[0] < 1 || in->stride[1] < 1 || in->dil[0] < 1 || in->dil[1] < 1 || in->pad[0] < 0 ||
      in->pad[1] < 0 || in->pad[2] < 0 || in->pad[3] < 0 || d[0] < 1 || d[1] < 1 || d[2] < 1 || d[3] < 1)
    return "invalid convolution geometry";
  int64_t xd[QH_MAX_RANK];
  int32_t xr = uq_known_shape(host, g, u->inputs[0], xd);
  if (xr >= 0 && (xr != 4 || xd[1] != in->ci))
    return "input channels differ from the weight's";
  const char *p = weight_problem(host, g, u, 0, in->co);
  if (p)
    return p;
  in->w_value = u->inputs[1];
  in->wq = u->input_qparams[1];
  return own == 3 ? uq_bias_problem(host, g, u, 2, in->co, &in->b_value, &in->bq) : NULL;
}

QhStatus *fb_analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, int kind,
                     FbInfo *in) {
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes < 1 || u->n_nodes > 2 || !u->nodes ||
      u->n_inputs < 1 || !u->inputs || !u->input_roles || !u->input_qparams || u->n_outputs != 1 ||
      !u->outputs || !u->output_qparams)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "malformed node unit");
  memset(in, 0, sizeof *in);
  in->kind = kind;
  in->b_value = QH_INVALID_ID;
  const char *p = NULL;
  if (u->n_nodes == 2) {
    if (uq_op_is(host, g, u->nodes[1], "Relu"))
      in->relu = 1;
    else if (uq_op_is(host, g, u->nodes[1], "Clip"))
      in->clip = 1, p = uq_clip_bounds(host, g, u->nodes[1], &in->clip_lo, &in->clip_hi);
    else
      p = "only Relu or Clip may follow the op";
  }
  if (!p && u->input_roles[0] != QH_ROLE_ACTIVATION)
    p = "first input is not an activation";
  if (!p && !(p = uq_act_problem(u->input_qparams[0], 0)) && !(p = uq_act_problem(u->output_qparams[0], 1))) {
    in->xq = u->input_qparams[0];
    in->yq = u->output_qparams[0];
    p = kind == FB_CONV ? analyze_conv(host, g, u, in) : analyze_linear(host, g, u, in);
  }
  /* 255 * 128 per product: beyond this reduction length int32 accumulation could wrap */
  int64_t k = kind == FB_CONV ? (in->dw ? 1 : in->groups ? in->ci / in->groups : in->ci) * in->kh * in->kw : in->k;
  if (!p && k > INT32_MAX / (255 * 128))
    p = "reduction too long for int32 accumulation";
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

static QhStatus *accept_kind(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                             int kind) {
  (void)instance;
  FbInfo in;
  QhStatus *st = fb_analyze(host, g, u, kind, &in);
  if (!st && in.groups)
    st = host->status_new(QH_ERR_UNSUPPORTED, "grouped (the gconv patterns take it)");
  return st;
}

/* The grouped patterns (conv-grouped-kernel.c) take what the dense ones leave: group > 1
 * other than plain depthwise. */
static QhStatus *accept_group_conv(void *instance, const QhHostApi *host, const QhGraphView *g,
                                   const QhNodeUnit *u) {
  (void)instance;
  /* group 1 first: the dense patterns' decline reason is then the only one listed */
  if (u && u->struct_size >= sizeof(QhNodeUnit) && u->n_nodes >= 1 && u->nodes &&
      uq_attr_int(host, g, u->nodes[0], "group", 1) == 1)
    return host->status_new(QH_ERR_UNSUPPORTED, "group 1 (the conv patterns take it)");
  FbInfo in;
  QhStatus *st = fb_analyze(host, g, u, FB_CONV, &in);
  if (!st && !in.groups)
    st = host->status_new(QH_ERR_UNSUPPORTED, "not grouped (the conv patterns take it)");
  return st;
}

static QhStatus *accept_conv(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u) {
  return accept_kind(i, h, g, u, FB_CONV);
}

static QhStatus *accept_linear(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u) {
  return accept_kind(i, h, g, u, FB_LINEAR);
}

static const char *const conv_relu_ops[] = {"Conv", "Relu"}, *const conv_clip_ops[] = {"Conv", "Clip"},
                  *const conv_ops[] = {"Conv"}, *const gemm_relu_ops[] = {"Gemm", "Relu"},
                  *const gemm_clip_ops[] = {"Gemm", "Clip"}, *const gemm_ops[] = {"Gemm"},
                  *const matmul_relu_ops[] = {"MatMul", "Relu"}, *const matmul_ops[] = {"MatMul"},
                  *const add_relu_ops[] = {"Add", "Relu"}, *const add_ops[] = {"Add"},
                  *const mul_relu_ops[] = {"Mul", "Relu"}, *const mul_ops[] = {"Mul"},
                  *const maxpool_ops[] = {"MaxPool"}, *const avgpool_ops[] = {"AveragePool"},
                  *const gap_ops[] = {"GlobalAveragePool"}, *const sigmoid_ops[] = {"Sigmoid"},
                  *const tanh_ops[] = {"Tanh"}, *const hardsigmoid_ops[] = {"HardSigmoid"},
                  *const hardswish_ops[] = {"HardSwish"}, *const concat_ops[] = {"Concat"},
                  *const flatten_ops[] = {"Flatten"}, *const reshape_ops[] = {"Reshape"};

/* Relu and Clip (ReLU6: PyTorch's fbgemm config gives hardtanh its input's qparams) may
 * sit behind a Q -> DQ pair on the unit's output grid. On a shared grid the host's
 * dequantize-clip-quantize of a byte q is min(max(q, Q(lo)), Q(hi)) (Q monotonic, Q(DQ(q))
 * = q), so the kernel clamps at those integers before its one rounding, as for Relu at the
 * zero point: the same integers. Clip's bounds are extra inputs of op 1. */
#define PATTERN_F(name, list, mask, kern, acc, fl)                                               \
  static const QhLoweringPattern name = {QH_STRUCT_HEADER(QhLoweringPattern), .id = #name,      \
                                         .ops = list, .n_ops = sizeof list / sizeof list[0],    \
                                         .extra_inputs_mask = mask, .flags = fl, .kernel = &kern, \
                                         .accept = acc}
#define PATTERN(name, list, kern, acc, fl) PATTERN_F(name, list, 0, kern, acc, fl)
#define THROUGH QH_PATTERN_THROUGH_SHARED_QDQ
PATTERN(conv_relu, conv_relu_ops, fb_conv_kernel, accept_conv, THROUGH);
PATTERN_F(conv_clip, conv_clip_ops, 1u << 1, fb_conv_kernel, accept_conv, THROUGH);
PATTERN(conv, conv_ops, fb_conv_kernel, accept_conv, 0);
PATTERN(gconv_relu, conv_relu_ops, fb_group_conv_kernel, accept_group_conv, THROUGH);
PATTERN_F(gconv_clip, conv_clip_ops, 1u << 1, fb_group_conv_kernel, accept_group_conv, THROUGH);
PATTERN(gconv, conv_ops, fb_group_conv_kernel, accept_group_conv, 0);
PATTERN(linear_relu, gemm_relu_ops, fb_linear_kernel, accept_linear, THROUGH);
PATTERN_F(linear_clip, gemm_clip_ops, 1u << 1, fb_linear_kernel, accept_linear, THROUGH);
PATTERN(linear, gemm_ops, fb_linear_kernel, accept_linear, 0);
PATTERN(matmul_relu, matmul_relu_ops, fb_linear_kernel, accept_linear, THROUGH);
PATTERN(matmul, matmul_ops, fb_linear_kernel, accept_linear, 0);
PATTERN(add_relu, add_relu_ops, fb_add_kernel, fb_accept_u8op, 0);
PATTERN(add, add_ops, fb_add_kernel, fb_accept_u8op, 0);
PATTERN(mul_relu, mul_relu_ops, fb_mul_kernel, fb_accept_u8op, 0);
PATTERN(mul, mul_ops, fb_mul_kernel, fb_accept_u8op, 0);
PATTERN(maxpool, maxpool_ops, fb_maxpool_kernel, fb_accept_u8op, 0);
PATTERN(avgpool, avgpool_ops, fb_avgpool_kernel, fb_accept_u8op, 0);
PATTERN(sigmoid, sigmoid_ops, fb_sigmoid_kernel, fb_accept_u8op, 0);
PATTERN(tanh_lut, tanh_ops, fb_tanh_kernel, fb_accept_u8op, 0);
PATTERN(hardsigmoid, hardsigmoid_ops, fb_hardsigmoid_kernel, fb_accept_u8op, 0);
PATTERN(hardswish, hardswish_ops, fb_hardswish_kernel, fb_accept_u8op, 0);
PATTERN(concat, concat_ops, fb_concat_kernel, fb_accept_concat, 0);
PATTERN(global_avgpool, gap_ops, fb_gap_kernel, fb_accept_u8op, 0);
PATTERN(flatten, flatten_ops, fb_flatten_kernel, fb_accept_u8op, 0);
PATTERN(reshape, reshape_ops, fb_reshape_kernel, fb_accept_u8op, 0);

/* Most fused first: the first pattern that matches and accepts wins. */
static const QhLoweringPattern *const patterns[] = {&conv_relu, &conv_clip, &gconv_relu, &gconv_clip, &conv,
                                                    &gconv, &linear_relu, &linear_clip, &linear, &matmul_relu, &matmul, &add_relu, &add, &mul_relu, &mul,
                                                    &maxpool, &avgpool, &global_avgpool, &flatten, &reshape,
                                                    &sigmoid, &tanh_lut, &hardsigmoid, &hardswish, &concat};
const QhLoweringOps fb_lowering = {QH_STRUCT_HEADER(QhLoweringOps), patterns,
                                   sizeof patterns / sizeof patterns[0]};
