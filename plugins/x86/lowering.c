/* The x86 plugin's lowering patterns and the unit analysis that accept and create share:
 * which QDQ node units the oneDNN kernels take (uint8 per-tensor activations, int8
 * symmetric weights per tensor or per output channel, int32 or float bias, uint8 output)
 * and, for the rest, the reason they stay on the host. Structure follows the scalar_int8
 * test plugin (tests/lower/plugins/scalar_int8.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/unit-query.h"
#include "onednn.h"

/* oneDNN has no weight zero points: int8 symmetric, per tensor or per output channel. */
static const char *weight_problem(const QhQParams *q, int32_t axis, int64_t channels) {
  if (!q)
    return "float weights are not supported";
  if (!uq_qparams_sane(q))
    return "weight without valid quantization parameters";
  if (q->dtype != QH_DTYPE_INT8)
    return "weights other than int8 are not supported";
  for (size_t i = 0; i < q->count; i++)
    if (q->zero_point[i] != 0)
      return "asymmetric weights (non-zero weight zero point) are not supported by oneDNN";
  if (q->count != 1 && (q->ch_axis != axis || (int64_t)q->count != channels))
    return "per-channel weights on an axis other than the output channel";
  return NULL;
}

/* The ops after the conv/linear: [Add] then [Relu | Clip]. */
static const char *tail_problem(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                X86Info *in) {
  size_t i = 1;
  in->add = 0;
  in->post = POST_NONE;
  if (i < u->n_nodes && uq_op_is(host, g, u->nodes[i], "Add")) {
    if (in->kind == K_LINEAR && uq_op_is(host, g, u->nodes[0], "MatMul"))
      in->bias_add = 1, i++; /* the exporter's nn.Linear on N-d inputs: MatMul, then Add(bias) */
    else if (in->kind != K_CONV)
      return "only conv fuses a residual Add";
    else
      in->add = 1, i++;
  }
  if (i < u->n_nodes) {
    uint32_t node = u->nodes[i++];
    if (uq_op_is(host, g, node, "Relu"))
      in->post = POST_RELU;
    else if (uq_op_is(host, g, node, "Clip")) {
      in->post = POST_CLIP;
      const char *p = uq_clip_bounds(host, g, node, &in->clip_lo, &in->clip_hi);
      if (p)
        return p;
    } else
      return "only Add, Relu or Clip may follow the op";
  }
  return i == u->n_nodes ? NULL : "unexpected ops in the unit";
}

/* Without VNNI, vpmaddubsw adds two u8*s8 products in int16 with saturation: safe when
 * the activation range stops at 127 or no two weights of a channel exceed 128 in |w|. */
static const char *saturation_problem(const QhHostApi *host, const QhGraphView *g, const X86Info *in,
                                      int64_t nc, int64_t per, int channel_major) {
  if (in->xq->quant_max <= 127)
    return NULL;
  const void *d = NULL;
  size_t n = 0;
  QhStatus *st = host->value_data(g, in->w_value, &d, &n);
  if (st || !d || n != (size_t)(nc * per)) {
    host->status_free(st);
    return "weight data size differs from its shape";
  }
  const int8_t *w = d;
  for (int64_t c = 0; c < nc; c++) {
    int a = 0, b = 0; /* the two largest |w| of channel c */
    for (int64_t j = 0; j < per; j++) {
      int v = abs(w[channel_major ? c * per + j : j * nc + c]);
      if (v > a)
        b = a, a = v;
      else if (v > b)
        b = v;
    }
    if (a + b > 128)
      return "without VNNI oneDNN's u8*s8 int16 pair sums may saturate for these weights "
             "(reduce_range; use --backend-opt reduce_range=off to force)";
  }
  return NULL;
}

/* MatMul -> Add: the Add's other input (the unit's third) is the float bias, one value
 * per output channel along the last axis ([N] or [1, ..., 1, N]). */
static const char *matmul_bias_problem(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                       X86Info *in) {
  uint32_t v = u->inputs[2];
  if (!(host->value_flags(g, v) & QH_VALUE_CONSTANT))
    return "MatMul -> Add: the Add's other input is not a constant bias";
  if (u->input_qparams[2] || host->value_dtype(g, v) != QH_DTYPE_FLOAT)
    return "MatMul -> Add: the bias must be float";
  int64_t d[QH_MAX_RANK];
  int32_t rank = uq_known_shape(host, g, v, d);
  if (rank < 1 || d[rank - 1] != in->n)
    return "MatMul -> Add: the bias must have one value per output channel on the last axis";
  for (int32_t i = 0; i + 1 < rank; i++)
    if (d[i] != 1)
      return "MatMul -> Add: the bias must have one value per output channel on the last axis";
  in->b_value = v;
  in->bq = NULL;
  return NULL;
}

static const char *analyze_linear(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                  X86Info *in) {
  uint32_t node = u->nodes[0];
  in->matmul = uq_op_is(host, g, node, "MatMul");
  if (!in->matmul && !uq_op_is(host, g, node, "Gemm"))
    return "linear pattern on an op other than Gemm or MatMul";
  if (u->n_inputs < 2 || u->n_inputs > 3 || u->input_roles[0] != QH_ROLE_ACTIVATION ||
      u->input_roles[1] != QH_ROLE_WEIGHT)
    return "expected an activation, a weight and an optional bias";
  if (in->matmul && u->n_inputs != (in->bias_add ? 3u : 2u))
    return "MatMul with extra inputs";
  if (!in->matmul) {
    if (uq_attr_int(host, g, node, "transA", 0) != 0)
      return "Gemm with transA=1 is not supported";
    if (uq_attr_int(host, g, node, "transB", 0) != 1)
      return "Gemm with transB=0 is not supported (weight must be [N, K])";
    if (uq_attr_float(host, g, node, "alpha", 1.0f) != 1.0f || uq_attr_float(host, g, node, "beta", 1.0f) != 1.0f)
      return "Gemm with alpha or beta other than 1 is not supported";
  }
  uint32_t w = u->inputs[1];
  if (!(host->value_flags(g, w) & QH_VALUE_CONSTANT))
    return "non-constant weights are not supported";
  int64_t d[QH_MAX_RANK];
  if (uq_known_shape(host, g, w, d) != 2 || d[0] < 1 || d[1] < 1)
    return "weight must be a 2-D constant";
  if (host->value_dtype(g, w) != QH_DTYPE_INT8)
    return "weights other than int8 are not supported";
  in->n = in->matmul ? d[1] : d[0];
  in->k = in->matmul ? d[0] : d[1];
  const char *p = weight_problem(u->input_qparams[1], in->matmul ? 1 : 0, in->n);
  if (p)
    return p;
  in->w_value = w;
  in->wq = u->input_qparams[1];
  if (in->bias_add)
    return matmul_bias_problem(host, g, u, in);
  return u->n_inputs == 3 ? uq_bias_problem(host, g, u, 2, in->n, &in->b_value, &in->bq) : NULL;
}

static const char *analyze_conv(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                X86Info *in) {
  uint32_t node = u->nodes[0];
  if (!uq_op_is(host, g, node, "Conv"))
    return "conv pattern on an op other than Conv";
  /* Inputs come in op order: the Conv's, then the residual, then Clip's bounds. */
  size_t n_conv = host->node_input(g, node, 2) != QH_INVALID_ID ? 3 : 2;
  if (u->n_inputs < n_conv + (size_t)in->add || u->input_roles[0] != QH_ROLE_ACTIVATION ||
      u->input_roles[1] != QH_ROLE_WEIGHT)
    return "expected an activation, a weight and an optional bias";
  uint32_t w = u->inputs[1];
  int64_t d[QH_MAX_RANK];
  if (!(host->value_flags(g, w) & QH_VALUE_CONSTANT))
    return "non-constant weights are not supported";
  if (uq_known_shape(host, g, w, d) != 4)
    return "only 2-D convolution is supported";
  if (host->value_dtype(g, w) != QH_DTYPE_INT8)
    return "weights other than int8 are not supported";
  int64_t ks[2];
  const char *why = uq_window_2d(host, g, node, "malformed strides, pads, dilations or kernel_shape", ks, in->stride, in->pad, in->dil);
  if (why)
    return why;
  in->co = d[0], in->kh = d[2], in->kw = d[3];
  in->grp = uq_attr_int(host, g, node, "group", 1);
  if ((ks[0] >= 0 && ks[0] != in->kh) || (ks[1] >= 0 && ks[1] != in->kw))
    return "kernel_shape differs from the weight";
  if (in->stride[0] < 1 || in->stride[1] < 1 || in->dil[0] < 1 || in->dil[1] < 1 || in->pad[0] < 0 ||
      in->pad[1] < 0 || in->pad[2] < 0 || in->pad[3] < 0 || in->grp < 1 || d[0] < 1 || d[1] < 1 ||
      d[2] < 1 || d[3] < 1 || in->co % in->grp != 0)
    return "invalid convolution geometry";
  in->ci = d[1] * in->grp;
  int64_t xd[QH_MAX_RANK];
  int32_t xr = uq_known_shape(host, g, u->inputs[0], xd);
  if (xr >= 0 && (xr != 4 || xd[1] != in->ci))
    return "input channels differ from the weight's";
  const char *p = weight_problem(u->input_qparams[1], 0, in->co);
  if (p)
    return p;
  in->w_value = w;
  in->wq = u->input_qparams[1];
  if (n_conv == 3 && (p = uq_bias_problem(host, g, u, 2, in->co, &in->b_value, &in->bq)))
    return p;
  if (in->add) {
    in->res_input = n_conv;
    if (u->input_roles[in->res_input] != QH_ROLE_ACTIVATION)
      return "the residual input is not an activation";
    if ((p = uq_act_problem(u->input_qparams[in->res_input], 0)))
      return p;
    in->rq = u->input_qparams[in->res_input];
    /* The sum post-op needs the residual exactly in the output's shape; with unknown
     * shapes reshape checks it. */
    int64_t rd[QH_MAX_RANK];
    int32_t rrank = uq_known_shape(host, g, u->inputs[in->res_input], rd);
    if (xr == 4 && rrank >= 0) {
      int64_t eh = xd[2] + in->pad[0] + in->pad[2] - ((in->kh - 1) * in->dil[0] + 1);
      int64_t ew = xd[3] + in->pad[1] + in->pad[3] - ((in->kw - 1) * in->dil[1] + 1);
      int64_t od[4] = {xd[0], in->co, eh / in->stride[0] + 1, ew / in->stride[1] + 1};
      if (eh < 0 || ew < 0 || rrank != 4 || memcmp(od, rd, sizeof od) != 0)
        return "residual Add with broadcasting is not supported";
    }
  }
  return NULL;
}

QhStatus *x86_analyze(void *instance, const QhHostApi *host, const QhGraphView *g,
                      const QhNodeUnit *u, int kind, X86Info *in) {
  const X86Instance *inst = instance;
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes < 1 || u->n_nodes > QH_PATTERN_MAX_OPS ||
      !u->nodes || (u->n_inputs > 0 && (!u->inputs || !u->input_roles || !u->input_qparams)) ||
      u->n_outputs != 1 || !u->outputs || !u->output_qparams)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "malformed node unit");
  memset(in, 0, sizeof *in);
  in->kind = kind;
  in->b_value = QH_INVALID_ID;
  const char *p = tail_problem(host, g, u, in);
  if (!p && u->n_inputs < 1)
    p = "unit without inputs";
  if (!p && !(p = uq_act_problem(u->input_qparams[0], 0)) && !(p = uq_act_problem(u->output_qparams[0], 1))) {
    in->xq = u->input_qparams[0];
    in->yq = u->output_qparams[0];
    p = kind == K_CONV ? analyze_conv(host, g, u, in) : analyze_linear(host, g, u, in);
  }
  if (!p && inst && inst->reduce_range) {
    int64_t nc = kind == K_CONV ? in->co : in->n;
    int64_t per = kind == K_CONV ? (in->ci / in->grp) * in->kh * in->kw : in->k;
    p = saturation_problem(host, g, in, nc, per, !(kind == K_LINEAR && in->matmul));
  }
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

/* The helpers the element-wise and pooling analysis (u8-ops-analyze.c) shares. */
const char *x86_act_problem(const QhQParams *q, int output) { return uq_act_problem(q, output); }
int64_t x86_attr_int(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name,
                     int64_t def) {
  return uq_attr_int(host, g, node, name, def);
}
int x86_attr_ints(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name, size_t n,
                  int64_t def, int64_t *out) {
  return uq_attr_ints(host, g, node, name, n, def, out);
}
int32_t x86_known_shape(const QhHostApi *host, const QhGraphView *g, uint32_t v, int64_t *dims) {
  return uq_known_shape(host, g, v, dims);
}

static QhStatus *accept_conv(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u) {
  X86Info in;
  return x86_analyze(i, h, g, u, K_CONV, &in);
}

static QhStatus *accept_linear(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u) {
  X86Info in;
  return x86_analyze(i, h, g, u, K_LINEAR, &in);
}

static const char *const conv_add_relu_ops[] = {"Conv", "Add", "Relu"},
                  *const conv_add_ops[] = {"Conv", "Add"}, *const conv_relu_ops[] = {"Conv", "Relu"},
                  *const conv_clip_ops[] = {"Conv", "Clip"}, *const conv_ops[] = {"Conv"},
                  *const gemm_relu_ops[] = {"Gemm", "Relu"}, *const gemm_ops[] = {"Gemm"},
                  *const matmul_relu_ops[] = {"MatMul", "Relu"}, *const matmul_ops[] = {"MatMul"},
                  *const matmul_add_ops[] = {"MatMul", "Add"},
                  *const add_relu_ops[] = {"Add", "Relu"}, *const add_ops[] = {"Add"},
                  *const mul_relu_ops[] = {"Mul", "Relu"}, *const mul_ops[] = {"Mul"},
                  *const concat_ops[] = {"Concat"},
                  *const relu_ops[] = {"Relu"}, *const clip_ops[] = {"Clip"},
                  *const maxpool_ops[] = {"MaxPool"},
                  *const avgpool_ops[] = {"AveragePool"}, *const gap_ops[] = {"GlobalAveragePool"},
                  *const flatten_ops[] = {"Flatten"}, *const sigmoid_ops[] = {"Sigmoid"},
                  *const tanh_ops[] = {"Tanh"}, *const hardsigmoid_ops[] = {"HardSigmoid"},
                  *const hardswish_ops[] = {"HardSwish"},
                  *const bn_relu_ops[] = {"BatchNormalization", "Relu"}, *const bn_ops[] = {"BatchNormalization"},
                  *const pad_ops[] = {"Pad"}, *const reducemean_ops[] = {"ReduceMean"},
                  *const shuffle_ops[] = {"Reshape", "Transpose", "Reshape"}, *const slice_ops[] = {"Slice"};

#define PATTERN_F(name, list, mask, kern, acc, fl)                                               \
  static const QhLoweringPattern name = {QH_STRUCT_HEADER(QhLoweringPattern), .id = #name,      \
                                         .ops = list, .n_ops = sizeof list / sizeof list[0],    \
                                         .extra_inputs_mask = mask, .flags = fl, .kernel = &kern, \
                                         .accept = acc}
#define PATTERN(name, list, mask, kern, acc) PATTERN_F(name, list, mask, kern, acc, 0)
/* Relu and Clip after a conv or linear may sit behind a Q -> DQ pair on the unit's
 * output grid (PyTorch's x86 config quantizes Conv -> ReLU6 so: hardtanh shares its
 * input's qparams). The kernel clamps in float and rounds once; round() is monotonic,
 * so that equals clamping the rounded value: the same integers, one pass fewer over
 * the activation (mobilenet_v2: 35 Clip units). Not for conv_add*: the Add's input
 * rounding matters. */
#define THROUGH QH_PATTERN_THROUGH_SHARED_QDQ
PATTERN(conv_add_relu, conv_add_relu_ops, 1u << 1, x86_conv_kernel, accept_conv);
PATTERN(conv_add, conv_add_ops, 1u << 1, x86_conv_kernel, accept_conv);
PATTERN_F(conv_relu, conv_relu_ops, 0, x86_conv_kernel, accept_conv, THROUGH);
PATTERN_F(conv_clip, conv_clip_ops, 1u << 1, x86_conv_kernel, accept_conv, THROUGH); /* bounds */
PATTERN(conv, conv_ops, 0, x86_conv_kernel, accept_conv);
PATTERN_F(linear_relu, gemm_relu_ops, 0, x86_linear_kernel, accept_linear, THROUGH);
PATTERN(linear, gemm_ops, 0, x86_linear_kernel, accept_linear);
PATTERN_F(matmul_relu, matmul_relu_ops, 0, x86_linear_kernel, accept_linear, THROUGH);
PATTERN(matmul, matmul_ops, 0, x86_linear_kernel, accept_linear);
/* nn.Linear on N-d inputs as the exporter writes it; the Add's bias enters as an extra input */
PATTERN(matmul_add, matmul_add_ops, 1u << 1, x86_linear_kernel, accept_linear);
/* MatMul between two activations (attention): both operands quantized, neither a weight */
static const int32_t act_matmul_roles[] = {QH_ROLE_ACTIVATION, QH_ROLE_ACTIVATION};
static const QhLoweringPattern act_matmul = {QH_STRUCT_HEADER(QhLoweringPattern), .id = "act_matmul",
                                             .ops = matmul_ops, .n_ops = 1, .input_roles = act_matmul_roles,
                                             .n_input_roles = 2, .kernel = &x86_act_matmul_kernel,
                                             .accept = x86_accept_act_matmul};
/* ONNX Runtime's dynamic format: MatMulInteger(x_q, W, x_zp, W_zp) -> Cast -> Mul(scale); x_q,
 * x_zp and the scale are computed by the host's DynamicQuantizeLinear and scale Mul */
static const char *const dynamic_linear_ops[] = {"MatMulInteger", "Cast", "Mul"};
static const int32_t dynamic_linear_roles[] = {QH_ROLE_NOT_OBSERVED, QH_ROLE_WEIGHT, QH_ROLE_NOT_OBSERVED,
                                               QH_ROLE_NOT_OBSERVED};
/* The same with its bias Add (a four-op pattern, ABI 1.2): the bias enters as a float
 * constant extra input of op 3 and is added in the kernel's epilogue */
static const char *const dynamic_linear_bias_ops[] = {"MatMulInteger", "Cast", "Mul", "Add"};
static const QhLoweringPattern dynamic_linear_bias = {
    QH_STRUCT_HEADER(QhLoweringPattern), .id = "dynamic_linear_bias", .ops = dynamic_linear_bias_ops, .n_ops = 4,
    .extra_inputs_mask = 1u << 2 | 1u << 3, .input_roles = dynamic_linear_roles, .n_input_roles = 4,
    .flags = QH_PATTERN_FLOAT_EXTRA_INPUTS, .kernel = &x86_dynamic_linear_kernel,
    .accept = x86_accept_dynamic_linear};
static const QhLoweringPattern dynamic_linear = {
    QH_STRUCT_HEADER(QhLoweringPattern), .id = "dynamic_linear", .ops = dynamic_linear_ops, .n_ops = 3,
    .extra_inputs_mask = 1u << 2, .input_roles = dynamic_linear_roles, .n_input_roles = 4,
    .flags = QH_PATTERN_FLOAT_EXTRA_INPUTS, .kernel = &x86_dynamic_linear_kernel,
    .accept = x86_accept_dynamic_linear};
PATTERN(add_relu, add_relu_ops, 0, x86_add_kernel, x86_accept_u8op);
PATTERN(add, add_ops, 0, x86_add_kernel, x86_accept_u8op);
PATTERN(act_mul_relu, mul_relu_ops, 0, x86_act_mul_kernel, x86_accept_act_mul); /* x * act(x) */
PATTERN(act_mul, mul_ops, 0, x86_act_mul_kernel, x86_accept_act_mul);
PATTERN(mul_relu, mul_relu_ops, 0, x86_mul_kernel, x86_accept_u8op);
PATTERN(mul, mul_ops, 0, x86_mul_kernel, x86_accept_u8op);
PATTERN(concat, concat_ops, 0, x86_concat_kernel, x86_accept_concat);
PATTERN(relu, relu_ops, 0, x86_relu_kernel, x86_accept_u8op);
PATTERN(clip, clip_ops, 0, x86_clip_kernel, x86_accept_u8op);
PATTERN(maxpool, maxpool_ops, 0, x86_maxpool_kernel, x86_accept_u8op);
PATTERN(avgpool, avgpool_ops, 0, x86_avgpool_kernel, x86_accept_u8op);
PATTERN(global_avgpool, gap_ops, 0, x86_gap_kernel, x86_accept_u8op);
PATTERN(flatten, flatten_ops, 0, x86_flatten_kernel, x86_accept_u8op);
PATTERN(sigmoid, sigmoid_ops, 0, x86_sigmoid_kernel, x86_accept_u8op);
PATTERN(tanh_lut, tanh_ops, 0, x86_tanh_kernel, x86_accept_u8op);
PATTERN(hardsigmoid, hardsigmoid_ops, 0, x86_hardsigmoid_kernel, x86_accept_u8op);
PATTERN(hardswish, hardswish_ops, 0, x86_hardswish_kernel, x86_accept_u8op);
/* Standalone BatchNormalization (densenet): its scale, B, mean and var are constants */
PATTERN(batchnorm_relu, bn_relu_ops, 0, x86_batchnorm_kernel, x86_accept_u8op);
PATTERN(batchnorm, bn_ops, 0, x86_batchnorm_kernel, x86_accept_u8op);
/* Pad before AveragePool (count_include_pad as PyTorch exports it: inception_v3, densenet121) */
PATTERN(pad, pad_ops, 0, x86_pad_kernel, x86_accept_u8op);
PATTERN(reducemean, reducemean_ops, 0, x86_reducemean_kernel, x86_accept_u8op); /* over H, W (mnasnet) */
/* ShuffleNet's channel shuffle: Reshape and Transpose share their input's qparams, so the
 * Q/DQ pairs between the three ops are on the output's grid; the second Reshape's shape
 * is an extra input of op 2 */
PATTERN_F(channel_shuffle, shuffle_ops, 1u << 2, x86_shuffle_kernel, x86_accept_u8op, THROUGH);
PATTERN(slice_channels, slice_ops, 0, x86_slice_kernel, x86_accept_u8op); /* ShuffleNet's chunk */

/* Most fused first: the first pattern that matches and accepts wins. */
static const QhLoweringPattern *const patterns[] = {
    &conv_add_relu, &conv_add, &conv_relu, &conv_clip, &conv,
    &linear_relu, &linear, &matmul_add, &matmul_relu, &matmul, &act_matmul, &dynamic_linear_bias,
    &dynamic_linear,
    &add_relu, &add, &act_mul_relu, &act_mul, &mul_relu, &mul, &concat, &relu, &clip, &maxpool, &avgpool, &global_avgpool, &flatten,
    &sigmoid, &tanh_lut, &hardsigmoid, &hardswish, &batchnorm_relu, &batchnorm, &pad, &reducemean, &channel_shuffle, &slice_channels};
const QhLoweringOps x86_lowering = {QH_STRUCT_HEADER(QhLoweringOps), patterns,
                                    sizeof patterns / sizeof patterns[0]};
