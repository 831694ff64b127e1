/* The qnnpack plugin's lowering patterns and the unit analysis accept and create share:
 * Conv (2-D; grouped and depthwise too) and Gemm / MatMul with a constant weight, each with
 * an optional fused Relu, on uint8 per-tensor activations and int8 per-tensor weights with a
 * float or int32 bias: the shapes XNNPACK's qu8 convolution and fully-connected operators
 * take. Per-channel weights (qu8 operators have one weight scale) and scale ratios
 * XNNPACK's create refuses are declined with the reason, so they run on the host instead of
 * failing at kernel create: accept creates the operator itself and deletes it. The
 * patterns of Add, Mul (+Relu), Relu, Clip, MaxPool, AveragePool, GlobalAveragePool,
 * Sigmoid, Tanh and LeakyRelu are here too; their analysis and kernels are in
 * xnn-u8ops.c, Concat's in xnn-concat.c, and HardSwish's, HardSigmoid's, Flatten's and
 * Reshape's (the plugin's own, where XNNPACK has no operator) in own-u8ops.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../common/u8-kernels.h"
#include "qnnpack.h"

/* XNNPACK's qu8 operators take uint8 weights with one scale and one zero point: qnnpack's
 * int8 weights shifted by 128, as QNNPACK stores them, with the zero point shifted too. */
static const char *weight_problem(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  const QhQParams *q = u->input_qparams[1];
  if (!(host->value_flags(g, u->inputs[1]) & QH_VALUE_CONSTANT))
    return "non-constant weights are not supported";
  if (host->value_dtype(g, u->inputs[1]) != QH_DTYPE_INT8)
    return "weights other than int8 are not supported";
  if (!q)
    return "float weights are not supported";
  if (!uq_qparams_sane(q) || q->dtype != QH_DTYPE_INT8)
    return "weight without valid int8 quantization parameters";
  if (q->count != 1)
    return "per-channel weights are not supported (XNNPACK's qu8 operators take one weight scale)";
  if (q->zero_point[0] < -128 || q->zero_point[0] > 127)
    return "weight zero point outside int8";
  return NULL;
}

/* A float constant scalar input of node (Clip's min / max); def when the slot is empty. */
static const char *clip_bound(const QhHostApi *host, const QhGraphView *g, uint32_t node, uint32_t slot, float def,
                              float *out) {
  *out = def;
  uint32_t v = host->node_input(g, node, slot);
  if (v == QH_INVALID_ID)
    return NULL;
  const void *d = NULL;
  size_t n = 0;
  if (!(host->value_flags(g, v) & QH_VALUE_CONSTANT) || host->value_dtype(g, v) != QH_DTYPE_FLOAT)
    return "Clip bounds must be float constants";
  QhStatus *st = host->value_data(g, v, &d, &n);
  if (st || !d || n != sizeof(float)) {
    host->status_free(st);
    return "Clip bounds must be float scalars";
  }
  memcpy(out, d, sizeof *out);
  return isnan(*out) ? "Clip bound is NaN" : NULL;
}

const char *qn_output_range(const QhHostApi *host, const QhGraphView *g, uint32_t post, const QhQParams *y,
                            uint8_t *out_lo, uint8_t *out_hi) {
  int32_t zo = y->zero_point[0], lo = y->quant_min, hi = y->quant_max;
  if (post != QH_INVALID_ID && uq_op_is(host, g, post, "Relu")) {
    lo = zo > lo ? zo : lo;
  } else if (post != QH_INVALID_ID) {
    float a, b;
    const char *p;
    if ((p = clip_bound(host, g, post, 1, -INFINITY, &a)) || (p = clip_bound(host, g, post, 2, INFINITY, &b)))
      return p;
    if (a > b)
      return "Clip with min > max";
    float so = y->scale[0], qlo = (float)(0 - zo), qhi = (float)(255 - zo);
    int32_t ca = qh_u8_quant(a, so, qlo, qhi, zo), cb = qh_u8_quant(b, so, qlo, qhi, zo);
    lo = ca > lo ? ca : lo;
    hi = cb < hi ? cb : hi;
  }
  if (lo >= hi) /* XNNPACK refuses an empty range; the unit's output would be constant */
    return "the Relu or Clip leaves one output value (XNNPACK needs output_min < output_max)";
  *out_lo = (uint8_t)lo, *out_hi = (uint8_t)hi;
  return NULL;
}

static const char *analyze_linear(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                  QnInfo *in) {
  uint32_t node = u->nodes[0];
  int matmul = uq_op_is(host, g, node, "MatMul");
  if (!matmul && !uq_op_is(host, g, node, "Gemm"))
    return "linear pattern on an op other than Gemm or MatMul";
  if (u->n_inputs < 2 || u->n_inputs > 3 || u->input_roles[1] != QH_ROLE_WEIGHT)
    return "expected an activation, a weight and an optional bias";
  if (matmul && u->n_inputs != 2)
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
  const char *p = weight_problem(host, g, u);
  if (p)
    return p;
  in->w_value = u->inputs[1];
  in->wq = u->input_qparams[1];
  return u->n_inputs == 3 ? uq_bias_problem(host, g, u, 2, in->n, &in->b_value, &in->bq) : NULL;
}

static const char *analyze_conv(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                QnInfo *in) {
  uint32_t node = u->nodes[0];
  if (!uq_op_is(host, g, node, "Conv"))
    return "conv pattern on an op other than Conv";
  /* inputs come in op order: the Conv's, then a fused Clip's bounds */
  size_t n_conv = host->node_input(g, node, 2) != QH_INVALID_ID ? 3 : 2;
  if (u->n_inputs < n_conv || u->input_roles[1] != QH_ROLE_WEIGHT)
    return "expected an activation, a weight and an optional bias";
  int64_t d[QH_MAX_RANK];
  if (uq_known_shape(host, g, u->inputs[1], d) != 4)
    return "only 2-D convolution is supported";
  in->group = uq_attr_int(host, g, node, "group", 1);
  if (in->group < 1 || d[0] % in->group != 0)
    return "group must divide the output channels";
  int64_t ks[2];
  const char *why = uq_window_2d(host, g, node, "malformed strides, pads, dilations or kernel_shape", ks, in->stride, in->pad, in->dil);
  if (why)
    return why;
  in->co = d[0], in->ci = d[1], in->kh = d[2], in->kw = d[3];
  if ((ks[0] >= 0 && ks[0] != in->kh) || (ks[1] >= 0 && ks[1] != in->kw))
    return "kernel_shape differs from the weight";
  if (in->stride[0] < 1 || in->stride[1] < 1 || in->dil[0] < 1 || in->dil[1] < 1 || in->pad[0] < 0 ||
      in->pad[1] < 0 || in->pad[2] < 0 || in->pad[3] < 0 || d[0] < 1 || d[1] < 1 || d[2] < 1 || d[3] < 1)
    return "invalid convolution geometry";
  int64_t xd[QH_MAX_RANK];
  int32_t xr = uq_known_shape(host, g, u->inputs[0], xd);
  if (xr >= 0 && (xr != 4 || xd[1] != in->ci * in->group))
    return "input channels differ from the weight's";
  const char *p = weight_problem(host, g, u);
  if (p)
    return p;
  in->w_value = u->inputs[1];
  in->wq = u->input_qparams[1];
  return n_conv == 3 ? uq_bias_problem(host, g, u, 2, in->co, &in->b_value, &in->bq) : NULL;
}

QhStatus *qn_analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, int kind,
                     QnInfo *in) {
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes < 1 || u->n_nodes > 2 || !u->nodes ||
      u->n_inputs < 1 || !u->inputs || !u->input_roles || !u->input_qparams || u->n_outputs != 1 ||
      !u->outputs || !u->output_qparams)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "malformed node unit");
  memset(in, 0, sizeof *in);
  in->kind = kind;
  in->b_value = QH_INVALID_ID;
  const char *p = NULL;
  if (u->n_nodes == 2) {
    /* its range is XNNPACK's output_min / output_max (qn_output_range below) */
    if (!uq_op_is(host, g, u->nodes[1], "Relu") && !(kind == QN_CONV && uq_op_is(host, g, u->nodes[1], "Clip")))
      p = "only Relu (after Conv: Relu or Clip) may follow the op";
  }
  if (!p && u->input_roles[0] != QH_ROLE_ACTIVATION)
    p = "first input is not an activation";
  if (!p && !(p = uq_act_problem(u->input_qparams[0], 0)) && !(p = uq_act_problem(u->output_qparams[0], 1))) {
    in->xq = u->input_qparams[0];
    in->yq = u->output_qparams[0];
    p = kind == QN_CONV ? analyze_conv(host, g, u, in) : analyze_linear(host, g, u, in);
    if (!p)
      p = qn_output_range(host, g, u->n_nodes == 2 ? u->nodes[1] : QH_INVALID_ID, in->yq, &in->lo, &in->hi);
  }
  /* 255 * 255 per centred product: beyond this reduction length int32 accumulation could wrap */
  int64_t k = kind == QN_CONV ? in->ci * in->kh * in->kw : in->k;
  if (!p && k > INT32_MAX / (255 * 255))
    p = "reduction too long for int32 accumulation";
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

static QhStatus *accept_kind(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                             int kind) {
  const QnInstance *inst = instance;
  if (!inst)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "accept: no instance");
  QnInfo in;
  QhStatus *st = qn_analyze(host, g, u, kind, &in);
  if (st)
    return st;
  xnn_operator_t op = NULL;
  st = qn_create_operator(inst, host, g, &in, &op);
  if (op)
    xnn_delete_operator(op);
  return st;
}

static QhStatus *accept_conv(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u) {
  return accept_kind(i, h, g, u, QN_CONV);
}

static QhStatus *accept_linear(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u) {
  return accept_kind(i, h, g, u, QN_LINEAR);
}

static const char *const conv_relu_ops[] = {"Conv", "Relu"}, *const conv_clip_ops[] = {"Conv", "Clip"},
                  *const conv_ops[] = {"Conv"},
                  *const gemm_relu_ops[] = {"Gemm", "Relu"}, *const gemm_ops[] = {"Gemm"},
                  *const matmul_relu_ops[] = {"MatMul", "Relu"}, *const matmul_ops[] = {"MatMul"};

/* Relu and Clip (ReLU6: PyTorch's qnnpack config gives hardtanh its input's qparams) may
 * sit behind a Q -> DQ pair on the unit's output grid; clamping before the one rounding
 * gives the same integers (round() is monotonic). */
#define PATTERN_M(name, list, kern, acc, fl, mask)                                                \
  static const QhLoweringPattern p_##name = {QH_STRUCT_HEADER(QhLoweringPattern), .id = #name,  \
                                             .ops = list, .n_ops = sizeof list / sizeof list[0], \
                                             .extra_inputs_mask = mask, .flags = fl, .kernel = &kern, \
                                             .accept = acc}
#define PATTERN(name, list, kern, acc, fl) PATTERN_M(name, list, kern, acc, fl, 0)
#define THROUGH QH_PATTERN_THROUGH_SHARED_QDQ
PATTERN(conv_relu, conv_relu_ops, qn_conv_kernel, accept_conv, THROUGH);
PATTERN_M(conv_clip, conv_clip_ops, qn_conv_kernel, accept_conv, THROUGH, 1u << 1); /* Clip's bounds */
PATTERN(conv, conv_ops, qn_conv_kernel, accept_conv, 0);
PATTERN(linear_relu, gemm_relu_ops, qn_linear_kernel, accept_linear, THROUGH);
PATTERN(linear, gemm_ops, qn_linear_kernel, accept_linear, 0);
PATTERN(matmul_relu, matmul_relu_ops, qn_linear_kernel, accept_linear, THROUGH);
PATTERN(matmul, matmul_ops, qn_linear_kernel, accept_linear, 0);

static const char *const add_relu_ops[] = {"Add", "Relu"}, *const add_ops[] = {"Add"},
                  *const maxpool_ops[] = {"MaxPool"}, *const gap_ops[] = {"GlobalAveragePool"};
PATTERN(add_relu, add_relu_ops, qn_add_kernel, qn_accept_u8op, 0);
PATTERN(add, add_ops, qn_add_kernel, qn_accept_u8op, 0);
PATTERN(maxpool, maxpool_ops, qn_maxpool_kernel, qn_accept_u8op, 0);
PATTERN(global_avgpool, gap_ops, qn_gap_kernel, qn_accept_u8op, 0);
static const char *const reducemean_ops[] = {"ReduceMean"};
PATTERN(reducemean, reducemean_ops, qn_gap_kernel, qn_accept_u8op, 0); /* over H and W */
static const char *const avgpool_ops[] = {"AveragePool"};
PATTERN(avgpool, avgpool_ops, qn_avgpool_kernel, qn_accept_u8op, 0);
static const char *const sigmoid_ops[] = {"Sigmoid"}, *const tanh_ops[] = {"Tanh"},
                  *const leaky_relu_ops[] = {"LeakyRelu"};
PATTERN(sigmoid, sigmoid_ops, qn_sigmoid_kernel, qn_accept_u8op, 0);
PATTERN(tanh, tanh_ops, qn_tanh_kernel, qn_accept_u8op, 0);
PATTERN(leaky_relu, leaky_relu_ops, qn_leaky_relu_kernel, qn_accept_u8op, 0);
static const char *const concat_ops[] = {"Concat"};
PATTERN(concat, concat_ops, qn_concat_kernel, qn_accept_concat, 0);
static const char *const mul_relu_ops[] = {"Mul", "Relu"}, *const mul_ops[] = {"Mul"},
                  *const relu_ops[] = {"Relu"}, *const clip_ops[] = {"Clip"};
PATTERN(mul_relu, mul_relu_ops, qn_mul_kernel, qn_accept_u8op, 0);
PATTERN(mul, mul_ops, qn_mul_kernel, qn_accept_u8op, 0);
PATTERN(relu, relu_ops, qn_clamp_kernel, qn_accept_u8op, 0);
PATTERN_M(clip, clip_ops, qn_clamp_kernel, qn_accept_u8op, 0, 1u << 0); /* the bounds */
static const char *const hardswish_ops[] = {"HardSwish"}, *const hardsigmoid_ops[] = {"HardSigmoid"},
                  *const flatten_ops[] = {"Flatten"}, *const reshape_ops[] = {"Reshape"};
PATTERN(hardswish, hardswish_ops, qn_hardswish_kernel, qn_accept_own, 0);
PATTERN(hardsigmoid, hardsigmoid_ops, qn_hardsigmoid_kernel, qn_accept_own, 0);
PATTERN(flatten, flatten_ops, qn_flatten_kernel, qn_accept_own, 0);
PATTERN_M(reshape, reshape_ops, qn_reshape_kernel, qn_accept_own, 0, 1u << 0); /* the shape */

/* Most fused first: the first pattern that matches and accepts wins. */
static const QhLoweringPattern *const patterns[] = {
    &p_conv_relu, &p_conv_clip, &p_conv,    &p_linear_relu,    &p_linear,  &p_matmul_relu, &p_matmul,
    &p_add_relu,  &p_add,       &p_mul_relu, &p_mul,           &p_relu,    &p_clip,        &p_maxpool,
    &p_avgpool,   &p_global_avgpool, &p_reducemean, &p_sigmoid, &p_tanh,      &p_leaky_relu, &p_hardswish, &p_hardsigmoid, &p_concat,
    &p_flatten,   &p_reshape};
const QhLoweringOps qn_lowering = {QH_STRUCT_HEADER(QhLoweringOps), patterns,
                                   sizeof patterns / sizeof patterns[0]};
