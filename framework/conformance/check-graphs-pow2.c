/* The int8 power-of-two family of plugin-check's lowering graphs, for DPU-like backends
 * (example_vitis) that decline the uint8 family: every activation, weight and bias is
 * symmetric int8 with zero point 0 and one scale 2^-pos per tensor, the bias int8 with its
 * own position, as such backends' quantizers write their QDQ files. The positions are
 * chosen so the DPU's rules hold (conv/linear shift_cut = ipos + wpos - opos in [0, 16]
 * and shift_bias in [min(0, shift_cut - 16), 16]; concat and pool inputs and output at
 * one position; add shift_read <= 15 and shift_write in [-15, 15]), so a backend that
 * enforces them still claims the graphs. Inputs mostly sit at position 6 (range [-2, 2))
 * while plugin-check feeds values in [-2.3, 2.9], so the input quantizers saturate too.
 * With these positions every product and sum of the reference's fp32 math is exact
 * (an average's division aside), so the reference and an honest integer kernel differ
 * only where the reference rounds a tie to even and the DPU rounds it up. */
#include <math.h>

#include "conformance/check-private.h"

#define IN_POS 6 /* scale 1/64 */

static float step_of(int pos) { return ldexpf(1.0f, -pos); }

/* QuantizeLinear then DequantizeLinear of v to int8 at pos; returns the DQ output. */
static int qdq(QhCheckBuilder *b, const char *base, int v, int pos) {
  return qh_check_builder_qdq(b, base, v, step_of(pos), TRUE, 0);
}

static int input(QhCheckBuilder *b, const char *name, int rank, const int64_t *dims, int pos) {
  return qdq(b, name, qh_check_builder_input(b, name, rank, dims), pos);
}

static void output(QhCheckBuilder *b, int v, int pos) {
  qh_check_builder_output(b, v, qdq(b, "y", v, pos), step_of(pos), TRUE, 0);
}

/* A DequantizeLinear of a random int8 constant [dims] at pos: a weight (lo -127) or an
 * int8 bias. */
static int constant(QhCheckBuilder *b, const char *base, int rank, const int64_t *dims, int pos) {
  int64_t numel = 1;
  for (int i = 0; i < rank; i++)
    numel *= dims[i];
  int8_t *w = g_new(int8_t, numel), z = 0;
  for (int64_t i = 0; i < numel; i++)
    w[i] = (int8_t)g_rand_int_range(b->rng, -127, 128);
  float scale = step_of(pos);
  char *n[4] = {g_strdup_printf("%s_quantized", base), g_strdup_printf("%s_scale", base),
                g_strdup_printf("%s_zero_point", base), g_strdup_printf("%s_dequantized", base)};
  int q = qh_check_builder_constant(b, n[0], QH_DTYPE_S8, rank, dims, w);
  int s = qh_check_builder_constant(b, n[1], QH_DTYPE_F32, 0, NULL, &scale);
  int zv = qh_check_builder_constant(b, n[2], QH_DTYPE_S8, 0, NULL, &z);
  int d = qh_check_builder_value(b, n[3]);
  qh_check_builder_node(b, n[3], "DequantizeLinear", 3, (int[]){q, s, zv}, d);
  for (int i = 0; i < 4; i++)
    g_free(n[i]);
  g_free(w);
  return d;
}

static int scalar(QhCheckBuilder *b, const char *name, float v) {
  return qh_check_builder_constant(b, name, QH_DTYPE_F32, 0, NULL, &v);
}

/* The activation a conv or linear unit may fuse; returns its output. */
enum { ACT_NONE, ACT_RELU, ACT_LEAKY, ACT_CLIP };
static int activation(QhCheckBuilder *b, int act, int v) {
  if (act == ACT_NONE)
    return v;
  int y = qh_check_builder_value(b, "act_out");
  if (act == ACT_CLIP) { /* ReLU6: bounds on every accumulator's grid */
    int lo = scalar(b, "clip_min", 0.0f), hi = scalar(b, "clip_max", 6.0f);
    qh_check_builder_node(b, "act", "Clip", 3, (int[]){v, lo, hi}, y);
  } else {
    QhNode *n = qh_check_builder_node(b, "act", act == ACT_RELU ? "Relu" : "LeakyRelu", 1, &v, y);
    if (act == ACT_LEAKY)
      qh_node_set_attr_float(n, "alpha", 26.0f / 256.0f); /* the DPU's slope */
  }
  return y;
}

/* Conv [1, 4, 8, 8] (depthwise: group 4) with ipos 6, wpos 7, bpos 8 (shift_bias 5),
 * opos 4 (shift_cut 9). */
static void conv(QhCheckBuilder *b, int act, gboolean depthwise, int64_t stride) {
  static const int64_t xd[4] = {1, 4, 8, 8}, wd[4] = {4, 4, 3, 3}, dwd[4] = {4, 1, 3, 3}, n = 4;
  int x = input(b, "x", 4, xd, IN_POS);
  int w = constant(b, "conv_weight", 4, depthwise ? dwd : wd, 7);
  int bi = constant(b, "conv_bias", 1, &n, 8);
  int c = qh_check_builder_value(b, "conv_out");
  QhNode *node = qh_check_builder_node(b, "conv", "Conv", 3, (int[]){x, w, bi}, c);
  static const int64_t pads[4] = {1, 1, 1, 1}, ks[2] = {3, 3};
  int64_t strides[2] = {stride, stride};
  qh_node_set_attr_ints(node, "pads", 4, pads);
  qh_node_set_attr_ints(node, "kernel_shape", 2, ks);
  qh_node_set_attr_ints(node, "strides", 2, strides);
  if (depthwise)
    qh_node_set_attr_int(node, "group", 4);
  output(b, activation(b, act, c), depthwise ? 5 : 4);
}
static void g_conv_relu(QhCheckBuilder *b) { conv(b, ACT_RELU, FALSE, 1); }
static void g_conv_leaky_relu(QhCheckBuilder *b) { conv(b, ACT_LEAKY, FALSE, 1); }
static void g_conv_clip(QhCheckBuilder *b) { conv(b, ACT_CLIP, FALSE, 1); }
static void g_conv(QhCheckBuilder *b) { conv(b, ACT_NONE, FALSE, 2); }
static void g_depthwise_conv(QhCheckBuilder *b) { conv(b, ACT_NONE, TRUE, 1); }
static void g_depthwise_conv_relu(QhCheckBuilder *b) { conv(b, ACT_RELU, TRUE, 2); }

/* Gemm transB=1 [2, 16] x [8, 16]^T with ipos 6, wpos 8, opos 5 (shift_cut 9); the bias
 * at bpos 16 is finer than the sum (shift_bias -2), the DPU's negative shift_bias. */
static void gemm(QhCheckBuilder *b, int act) {
  static const int64_t xd[2] = {2, 16}, wd[2] = {8, 16}, n = 8;
  int x = input(b, "x", 2, xd, IN_POS);
  int w = constant(b, "fc_weight", 2, wd, 8);
  int bi = constant(b, "fc_bias", 1, &n, act == ACT_NONE ? 16 : 9);
  int y = qh_check_builder_value(b, "fc_out");
  QhNode *node = qh_check_builder_node(b, "fc", "Gemm", 3, (int[]){x, w, bi}, y);
  qh_node_set_attr_int(node, "transB", 1);
  output(b, activation(b, act, y), 5);
}
static void g_gemm_relu(QhCheckBuilder *b) { gemm(b, ACT_RELU); }
static void g_gemm_clip(QhCheckBuilder *b) { gemm(b, ACT_CLIP); }
static void g_gemm(QhCheckBuilder *b) { gemm(b, ACT_NONE); }

/* MatMul [2, 16] x [16, 8], no bias: ipos 6, wpos 7, opos 6 (shift_cut 7). */
static void matmul(QhCheckBuilder *b, int act) {
  static const int64_t xd[2] = {2, 16}, wd[2] = {16, 8};
  int x = input(b, "x", 2, xd, IN_POS);
  int w = constant(b, "matmul_weight", 2, wd, 7);
  int y = qh_check_builder_value(b, "matmul_out");
  qh_check_builder_node(b, "matmul", "MatMul", 2, (int[]){x, w}, y);
  output(b, activation(b, act, y), 6);
}
static void g_matmul_relu(QhCheckBuilder *b) { matmul(b, ACT_RELU); }
static void g_matmul(QhCheckBuilder *b) { matmul(b, ACT_NONE); }

/* Add: inputs at positions 6 and 5 (shift_read 1), output 5 (shift_write 0); Mul: both at
 * 6, output 5 (shift 7). */
static void binary(QhCheckBuilder *b, const char *op, gboolean with_relu) {
  static const int64_t d[4] = {1, 4, 4, 4};
  gboolean mul = op[0] == 'M';
  int x1 = input(b, "a", 4, d, IN_POS), x2 = input(b, "b", 4, d, mul ? IN_POS : 5);
  int s = qh_check_builder_value(b, "op_out");
  qh_check_builder_node(b, "op", op, 2, (int[]){x1, x2}, s);
  output(b, activation(b, with_relu ? ACT_RELU : ACT_NONE, s), 5);
}
static void g_add_relu(QhCheckBuilder *b) { binary(b, "Add", TRUE); }
static void g_add(QhCheckBuilder *b) { binary(b, "Add", FALSE); }
static void g_mul(QhCheckBuilder *b) { binary(b, "Mul", FALSE); }

/* One-input ops on [1, 4, H, W]; pools keep the input's position (the DPU's rule), the
 * others may move it by out_shift. A factor other than 0 follows an average pool with
 * Mul(factor), the DPU's rescale written into the graph (63/64 for a 3x3 window). */
static void unary(QhCheckBuilder *b, const char *op, int64_t hw, int64_t k, int64_t stride, float factor,
                  int out_shift) {
  int64_t xd[4] = {1, 4, hw, hw};
  int x = input(b, "x", 4, xd, IN_POS);
  int y = qh_check_builder_value(b, "op_out");
  QhNode *n = qh_check_builder_node(b, "op", op, 1, &x, y);
  if (k > 0) {
    int64_t ks[2] = {k, k}, st[2] = {stride, stride};
    qh_node_set_attr_ints(n, "kernel_shape", 2, ks);
    qh_node_set_attr_ints(n, "strides", 2, st);
  }
  if (g_strcmp0(op, "LeakyRelu") == 0)
    qh_node_set_attr_float(n, "alpha", 26.0f / 256.0f);
  if (factor != 0) {
    int f = scalar(b, "dpu_factor", factor), m = qh_check_builder_value(b, "mul_out");
    qh_check_builder_node(b, "dpu_mul", "Mul", 2, (int[]){y, f}, m);
    y = m;
  }
  output(b, y, IN_POS + out_shift);
}
static void g_relu(QhCheckBuilder *b) { unary(b, "Relu", 8, 0, 0, 0, -1); }
static void g_leaky_relu(QhCheckBuilder *b) { unary(b, "LeakyRelu", 8, 0, 0, 0, 1); }
static void g_flatten(QhCheckBuilder *b) { unary(b, "Flatten", 4, 0, 0, 0, 0); }
static void g_maxpool(QhCheckBuilder *b) { unary(b, "MaxPool", 8, 2, 2, 0, 0); }
static void g_avgpool(QhCheckBuilder *b) { unary(b, "AveragePool", 8, 2, 2, 0, 0); }
static void g_avgpool_factor(QhCheckBuilder *b) { unary(b, "AveragePool", 8, 3, 1, 63.0f / 64.0f, 0); }
static void g_gap(QhCheckBuilder *b) { unary(b, "GlobalAveragePool", 8, 0, 0, 0, 0); }
static void g_gap_factor(QhCheckBuilder *b) { unary(b, "GlobalAveragePool", 3, 0, 0, 63.0f / 64.0f, 0); }

static void g_concat(QhCheckBuilder *b) {
  static const int64_t d1[4] = {1, 2, 4, 4}, d2[4] = {1, 3, 4, 4};
  int x1 = input(b, "a", 4, d1, IN_POS), x2 = input(b, "b", 4, d2, IN_POS);
  int y = qh_check_builder_value(b, "concat_out");
  QhNode *n = qh_check_builder_node(b, "concat", "Concat", 2, (int[]){x1, x2}, y);
  qh_node_set_attr_int(n, "axis", 1);
  output(b, y, IN_POS);
}

/* The two pools whose window is 3x3 divide by 9 in fp32: not exact. */
static const QhCheckGraph graphs[] = {
    {"conv_relu", g_conv_relu, TRUE},
    {"conv_leaky_relu", g_conv_leaky_relu, TRUE},
    {"conv_clip", g_conv_clip, TRUE},
    {"conv", g_conv, TRUE},
    {"depthwise_conv", g_depthwise_conv, TRUE},
    {"depthwise_conv_relu", g_depthwise_conv_relu, TRUE},
    {"gemm_relu", g_gemm_relu, TRUE},
    {"gemm_clip", g_gemm_clip, TRUE},
    {"gemm", g_gemm, TRUE},
    {"matmul_relu", g_matmul_relu, TRUE},
    {"matmul", g_matmul, TRUE},
    {"add_relu", g_add_relu, TRUE},
    {"add", g_add, TRUE},
    {"mul", g_mul, TRUE},
    {"maxpool", g_maxpool, TRUE},
    {"avgpool", g_avgpool, TRUE},
    {"avgpool_dpu_factor", g_avgpool_factor, FALSE},
    {"global_avgpool", g_gap, TRUE},
    {"global_avgpool_dpu_factor", g_gap_factor, FALSE},
    {"concat", g_concat, TRUE},
    {"relu", g_relu, TRUE},
    {"leaky_relu", g_leaky_relu, TRUE},
    {"flatten", g_flatten, TRUE},
};

const QhCheckGraph *qh_check_pow2_graphs(size_t *n) {
  *n = G_N_ELEMENTS(graphs);
  return graphs;
}
