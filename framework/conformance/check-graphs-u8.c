/* The uint8 family of plugin-check's built-in lowering graphs, which every plugin's
 * kernels meet (check-lowering.c runs them after the plugin's own generated graphs):
 * Conv and Gemm with optional Relu, Conv -> Add (+ Relu) with no Q/DQ between, MatMul,
 * Add, Relu, pools, Concat and Sigmoid, as PyTorch's x86/fbgemm flow writes them: uint8
 * activations with zero points such as 128, int8 weights per channel, int32 bias and
 * scales that are not powers of two, so the reference's fp32 math rounds and ties occur.
 * check-builder.c builds their parts. */
#include "conformance/check-private.h"

typedef QhCheckBuilder Builder;

static int qdq(Builder *b, const char *base, int v, float scale, int zp) {
  return qh_check_builder_qdq(b, base, v, scale, FALSE, zp);
}

static int input(Builder *b, const char *name, int rank, const int64_t *dims, float scale, int zp) {
  return qdq(b, name, qh_check_builder_input(b, name, rank, dims), scale, zp);
}

static void output(Builder *b, int v, float scale, int zp) {
  qh_check_builder_output(b, v, qdq(b, "y", v, scale, zp), scale, FALSE, zp);
}

static int relu(Builder *b, int v) {
  int r = qh_check_builder_value(b, "relu_out");
  qh_check_builder_node(b, "relu", "Relu", 1, &v, r);
  return r;
}

static const int64_t image[4] = {1, 3, 8, 8}, fmap[4] = {1, 4, 8, 8}, rows[2] = {2, 16};

/* What follows the conv: nothing, a Relu, or a Q/DQ pair on the output's grid and a
 * Clip: Conv -> Q -> DQ -> Clip -> Q, how PyTorch's x86 and fbgemm configs quantize
 * Conv -> ReLU6 (hardtanh shares its input's observer). A pattern with
 * QH_PATTERN_THROUGH_SHARED_QDQ takes the last one as one unit. */
typedef enum { TAIL_NONE, TAIL_RELU, TAIL_QDQ_CLIP } ConvTail;

static void conv(Builder *b, ConvTail tail, int64_t stride) {
  float sx = 0.02f, sw[4];
  int x = input(b, "x", 4, image, sx, 128);
  static const int64_t wd[4] = {4, 3, 3, 3};
  int w = qh_check_builder_weight(b, "conv_weight", 4, wd, 0, sw);
  int bi = qh_check_builder_bias(b, "conv_bias", 4, sx, sw, TRUE);
  int c = qh_check_builder_value(b, "conv_out");
  QhNode *n = qh_check_builder_node(b, "conv", "Conv", 3, (int[]){x, w, bi}, c);
  static const int64_t pads[4] = {1, 1, 1, 1}, ks[2] = {3, 3};
  int64_t strides[2] = {stride, stride};
  qh_node_set_attr_ints(n, "pads", 4, pads);
  qh_node_set_attr_ints(n, "kernel_shape", 2, ks);
  qh_node_set_attr_ints(n, "strides", 2, strides);
  if (tail == TAIL_RELU) {
    output(b, relu(b, c), 0.08f, 5);
  } else if (tail == TAIL_QDQ_CLIP) {
    const float so = 0.04f, lo = 0.0f, hi = 2.5f;
    const int zo = 90;
    int cd = qdq(b, "conv_q", c, so, zo);
    int mn = qh_check_builder_constant(b, "clip_min", QH_DTYPE_F32, 0, NULL, &lo);
    int mx = qh_check_builder_constant(b, "clip_max", QH_DTYPE_F32, 0, NULL, &hi);
    int y = qh_check_builder_value(b, "clip_out");
    qh_check_builder_node(b, "clip", "Clip", 3, (int[]){cd, mn, mx}, y);
    output(b, y, so, zo);
  } else {
    output(b, c, 0.05f, 128);
  }
}
/* Conv -> Add (a second input) [-> Relu] -> Q, no Q/DQ after the Conv: how PyTorch's
 * X86InductorQuantizer quantizes a residual conv (x86's quantizer=inductor). */
static void conv_add(Builder *b, gboolean with_relu) {
  float sx = 0.02f, sw[4];
  int x = input(b, "x", 4, image, sx, 128);
  static const int64_t wd[4] = {4, 3, 3, 3};
  int w = qh_check_builder_weight(b, "conv_weight", 4, wd, 0, sw);
  int bi = qh_check_builder_bias(b, "conv_bias", 4, sx, sw, TRUE);
  int c = qh_check_builder_value(b, "conv_out");
  QhNode *n = qh_check_builder_node(b, "conv", "Conv", 3, (int[]){x, w, bi}, c);
  static const int64_t pads[4] = {1, 1, 1, 1}, ks[2] = {3, 3};
  qh_node_set_attr_ints(n, "pads", 4, pads);
  qh_node_set_attr_ints(n, "kernel_shape", 2, ks);
  int skip = input(b, "skip", 4, fmap, 0.03f, 120);
  int s = qh_check_builder_value(b, "add_out");
  qh_check_builder_node(b, "add", "Add", 2, (int[]){c, skip}, s);
  if (with_relu)
    output(b, relu(b, s), 0.06f, 4);
  else
    output(b, s, 0.07f, 125);
}
static void g_conv_add_relu(Builder *b) { conv_add(b, TRUE); }
static void g_conv_add(Builder *b) { conv_add(b, FALSE); }
static void g_conv_relu(Builder *b) { conv(b, TAIL_RELU, 1); }
static void g_conv_qdq_clip(Builder *b) { conv(b, TAIL_QDQ_CLIP, 1); }
static void g_conv(Builder *b) { conv(b, TAIL_NONE, 2); }

static void gemm(Builder *b, gboolean with_relu) {
  float sx = 0.016f, sw[1];
  int x = input(b, "x", 2, rows, sx, 120);
  static const int64_t wd[2] = {8, 16};
  int w = qh_check_builder_weight(b, "fc_weight", 2, wd, -1, sw);
  int bi = qh_check_builder_bias(b, "fc_bias", 8, sx, sw, FALSE);
  int y = qh_check_builder_value(b, "fc_out");
  QhNode *n = qh_check_builder_node(b, "fc", "Gemm", 3, (int[]){x, w, bi}, y);
  qh_node_set_attr_int(n, "transB", 1);
  if (with_relu)
    output(b, relu(b, y), 0.04f, 3);
  else
    output(b, y, 0.03f, 128);
}
static void g_gemm_relu(Builder *b) { gemm(b, TRUE); }
static void g_gemm(Builder *b) { gemm(b, FALSE); }

static void g_matmul(Builder *b) {
  float sw[1];
  int x = input(b, "x", 2, rows, 0.016f, 128);
  static const int64_t wd[2] = {16, 8};
  int w = qh_check_builder_weight(b, "matmul_weight", 2, wd, -1, sw);
  int y = qh_check_builder_value(b, "matmul_out");
  qh_check_builder_node(b, "matmul", "MatMul", 2, (int[]){x, w}, y);
  output(b, y, 0.05f, 131);
}

static void add(Builder *b, gboolean with_relu) {
  static const int64_t d[4] = {1, 4, 4, 4};
  int x1 = input(b, "a", 4, d, 0.016f, 128), x2 = input(b, "b", 4, d, 0.02f, 100);
  int s = qh_check_builder_value(b, "add_out");
  qh_check_builder_node(b, "add", "Add", 2, (int[]){x1, x2}, s);
  if (with_relu)
    output(b, relu(b, s), 0.02f, 7);
  else
    output(b, s, 0.03f, 125);
}
static void g_add_relu(Builder *b) { add(b, TRUE); }
static void g_add(Builder *b) { add(b, FALSE); }

/* Ops whose quantizers share the input's qparams (same_params) or give their own. */
static void unary(Builder *b, const char *op, float out_scale, int out_zp) {
  const float sx = 0.016f;
  const int zx = 128;
  int x = input(b, "x", 4, fmap, sx, zx);
  int y = qh_check_builder_value(b, "op_out");
  QhNode *n = qh_check_builder_node(b, "op", op, 1, &x, y);
  static const int64_t k2[2] = {2, 2};
  if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0) {
    qh_node_set_attr_ints(n, "kernel_shape", 2, k2);
    qh_node_set_attr_ints(n, "strides", 2, k2);
  }
  output(b, y, out_scale > 0 ? out_scale : sx, out_scale > 0 ? out_zp : zx);
}
static void g_relu(Builder *b) { unary(b, "Relu", 0, 0); }
static void g_maxpool(Builder *b) { unary(b, "MaxPool", 0, 0); }
static void g_avgpool(Builder *b) { unary(b, "AveragePool", 0.012f, 130); }
static void g_gap(Builder *b) { unary(b, "GlobalAveragePool", 0.004f, 126); }
static void g_sigmoid(Builder *b) { unary(b, "Sigmoid", 1.0f / 256.0f, 0); }

static void g_concat(Builder *b) {
  static const int64_t d1[4] = {1, 2, 4, 4}, d2[4] = {1, 3, 4, 4};
  int x1 = input(b, "a", 4, d1, 0.016f, 128), x2 = input(b, "b", 4, d2, 0.02f, 110);
  int y = qh_check_builder_value(b, "concat_out");
  QhNode *n = qh_check_builder_node(b, "concat", "Concat", 2, (int[]){x1, x2}, y);
  qh_node_set_attr_int(n, "axis", 1);
  output(b, y, 0.022f, 118);
}

/* Non-power-of-two scales: the reference's fp32 math rounds, so none is exact. */
static const QhCheckGraph graphs[] = {
    {"conv_relu", g_conv_relu, FALSE},   {"conv", g_conv, FALSE},
    {"conv_qdq_clip", g_conv_qdq_clip, FALSE},
    {"gemm_relu", g_gemm_relu, FALSE},   {"gemm", g_gemm, FALSE},
    {"matmul", g_matmul, FALSE},         {"add_relu", g_add_relu, FALSE},
    {"add", g_add, FALSE},               {"relu", g_relu, FALSE},
    {"maxpool", g_maxpool, FALSE},       {"avgpool", g_avgpool, FALSE},
    {"global_avgpool", g_gap, FALSE},    {"concat", g_concat, FALSE},
    {"sigmoid", g_sigmoid, FALSE},
    {"conv_add", g_conv_add, FALSE},     {"conv_add_relu", g_conv_add_relu, FALSE},
};

const QhCheckGraph *qh_check_u8_graphs(size_t *n) {
  *n = G_N_ELEMENTS(graphs);
  return graphs;
}
