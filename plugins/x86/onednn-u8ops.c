/* The x86 plugin's uint8 kernels for the units between its oneDNN convs: Add and Mul (+Relu; same
 * shapes, or per channel as in squeeze-excitation), Relu, Clip (ReLU6), Sigmoid, Tanh, HardSigmoid,
 * HardSwish, standalone BatchNormalization (+Relu), Pad (constant, H and W), ReduceMean over H and W, ShuffleNet's channel
 * shuffle and channel Slice, MaxPool, AveragePool (ceil_mode, any pads),
 * GlobalAveragePool and Flatten,
 * channels-last, so that a ResNet or a MobileNetV3 runs
 * conv -> add -> pool -> conv without leaving NHWC int8. They are plain C loops rather
 * than oneDNN primitives because they are memory-bound and because oneDNN 2.6 binary and
 * pooling cannot reproduce the host's QDQ numerics: each kernel computes exactly what the
 * host's DequantizeLinear -> float op -> QuantizeLinear does, so its output is identical
 * to the reference run's: dequantize f32((q - z) * s), the float op (Add in f32, pools
 * summing in double and dividing by the tap count, as framework/exec/kernels/pool.c), and
 * quantize rint(f32(v / so)) + zo saturated (exact division, as qdq.c, not the
 * reciprocal). Monotonic unary work (Relu, Clip, max, Flatten's requantization) goes through a
 * 256-entry table built with those same formulas (applied as a vector min/max when the table
 * is a clamp, as for Relu and Clip with shared qparams). Add's and Mul's scalar formula is compiled
 * once per instruction set (AVX-512, AVX2, SSE2) and picked from the host's CPU features;
 * MaxPool's inner loop is SSE2 intrinsics (baseline x86-64). Both do the scalar loop's exact
 * operations. Intermediate shapes are often unknown when units are
 * accepted, so a broadcasting Add or non-4-D GlobalAveragePool whose shapes are unknown
 * then fails at reshape instead of being declined. The per-channel Add / Mul and the
 * activation tables are plugins/common/u8-kernels.c's, shared with other plugins. */
#include <emmintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onednn.h"
#include "../common/u8-kernels.h"

enum { U_ADD, U_RELU, U_MAXPOOL, U_AVGPOOL, U_GAP, U_FLATTEN, U_CLIP, U_MUL,
       U_SIGMOID, U_TANH, U_HSIGMOID, U_HSWISH, /* U_SIGMOID.. in QhU8Act order */
       U_BN, U_PAD, U_SHUFFLE, U_SLICE, U_N_OPS };
#define IS_ACT(op) ((op) >= U_SIGMOID && (op) <= U_HSWISH)
#define IS_POINTWISE(op) ((op) == U_RELU || (op) == U_CLIP || IS_ACT(op))
#define IS_BINARY(op) ((op) == U_ADD || (op) == U_MUL)

#define VEC 16
#define CHUNK 65536             /* Add / Relu elements per parallel task */

typedef struct U8Op U8Op;
typedef void BinarySpanFn(const U8Op *k, const uint8_t *restrict a, const uint8_t *restrict b,
                       uint8_t *restrict y, size_t n);

struct U8Op {
  const X86Instance *inst; /* its team runs the loops */
  BinarySpanFn *binary; /* Add's or Mul's loop for this CPU */
  int op;
  int relu;        /* Add followed by Relu */
  int include_pad; /* AveragePool count_include_pad */
  int identity;    /* lut is the identity: MaxPool / Flatten with shared qparams */
  int clamp;       /* lut[q] == min(max(q, lut[0]), lut[255]): Relu / Clip with shared qparams */
  int64_t axis;    /* Flatten */
  int ceil_mode;   /* pools: ONNX's ceil_mode=1 output size */
  int squeeze;     /* ReduceMean with keepdims=0: the output is [N, C] */
  float alpha, beta; /* HardSigmoid */
  int bcast;       /* Add / Mul: 0 equal shapes, 1 b is per channel, 2 a is per channel */
  int isa;         /* QH_U8_ISA_* for the per-channel clones */
  size_t n_in;     /* the unit's inputs (Clip: x, then its constant min and max) */
  float clip_lo, clip_hi;
  int64_t kh, kw, sh, sw, pad[4];
  float sa, sb, so;
  int32_t za, zb, zo;
  float dq[256]; /* the first input's dequantized values */
  uint8_t *bn_lut; /* BatchNormalization: one table of 256 per channel, [C][256] */
  int64_t bn_c;
  uint8_t pad_code; /* Pad: the quantized constant_value */
  int64_t shape0[5], shape2[4]; /* channel shuffle: the two Reshapes' shape constants */
  int64_t s_start, s_end, s_c0, s_c1; /* Slice over channels: as given, then resolved */
  uint8_t lut[256];
  /* set by reshape */
  int reshaped, rank;
  int64_t dims[QH_MAX_RANK], bdims[QH_MAX_RANK]; /* bdims: the second input's (Add / Mul) */
  int64_t n, h, w, c, oh, ow, bn;                /* bn: the per-channel operand's batch */
  size_t in_bytes, out_bytes, bin_bytes; /* bin_bytes: the second input's (Add / Mul) */
};

static BinarySpanFn *binary_for_cpu(const QhHostApi *host, int op);


static const char *op_name(int op) {
  static const char *const names[] = {"Add", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool",
                                      "Flatten", "Clip", "Mul", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
                                      "BatchNormalization", "Pad", "Reshape", "Slice"};
  return names[op];
}

static const char *window_problem(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k) {
  const char *auto_pad = NULL;
  QhStatus *st = host->node_attr_string(g, node, "auto_pad", &auto_pad);
  if (st)
    host->status_free(st);
  else if (auto_pad && strcmp(auto_pad, "NOTSET") != 0 && strcmp(auto_pad, "VALID") != 0)
    return "auto_pad SAME is not supported";
  int64_t ks[2], s[2], d[2];
  if (!x86_attr_ints(host, g, node, "kernel_shape", 2, -1, ks) ||
      !x86_attr_ints(host, g, node, "strides", 2, 1, s) || !x86_attr_ints(host, g, node, "pads", 4, 0, k->pad) ||
      !x86_attr_ints(host, g, node, "dilations", 2, 1, d))
    return "only 2-D pooling is supported (kernel_shape, strides, pads, dilations of 2)";
  k->ceil_mode = x86_attr_int(host, g, node, "ceil_mode", 0) != 0;
  if (d[0] != 1 || d[1] != 1)
    return "dilated pooling is not supported";
  k->kh = ks[0], k->kw = ks[1], k->sh = s[0], k->sw = s[1];
  if (k->kh < 1 || k->kw < 1 || k->sh < 1 || k->sw < 1)
    return "invalid pooling window";
  /* Any padding: a window with no input tap gives what the host's reference gives
   * (MaxPool: the lowest value; AveragePool: zero), see pool_task. */
  for (int i = 0; i < 4; i++)
    if (k->pad[i] < 0)
      return "negative pads";
  return NULL;
}

/* The shape of input i: the integer tensor's, else that of the float value the op reads
 * (its DequantizeLinear's output, which shape inference reaches more often). */
static int32_t shape_of(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, uint32_t i,
                        int64_t *dims) {
  int32_t r = x86_known_shape(host, g, u->inputs[i], dims);
  uint32_t v = host->node_input(g, u->nodes[0], i);
  return r >= 0 || v == QH_INVALID_ID ? r : x86_known_shape(host, g, v, dims);
}

/* Clip's min and max (inputs 1 and 2, opset 11+): constant float scalars, or absent. */
static const char *clip_bounds(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, U8Op *k) {
  k->clip_lo = -INFINITY, k->clip_hi = INFINITY;
  for (size_t i = 1; i < u->n_inputs; i++) {
    const void *data = NULL;
    size_t nbytes = 0;
    if (u->input_qparams[i] || host->value_dtype(g, u->inputs[i]) != QH_DTYPE_FLOAT)
      return "Clip bounds must be float constants";
    QhStatus *st = host->value_data(g, u->inputs[i], &data, &nbytes);
    if (st) {
      host->status_free(st);
      return "Clip bounds must be constants";
    }
    if (nbytes != sizeof(float) || !data)
      return "Clip bounds must be scalars";
    float v;
    memcpy(&v, data, sizeof v);
    if (v != v)
      return "Clip bound is NaN";
    *(i == 1 ? &k->clip_lo : &k->clip_hi) = v;
  }
  return NULL;
}

/* ONNX (NCHW) dims: is b the per-channel operand of a, [N or 1, C, 1, 1] against
 * [N, C, H, W]? (The squeeze-excitation Mul.) */
int x86_channel_operand(const int64_t *b, const int64_t *a) {
  return (b[0] == a[0] || b[0] == 1) && b[1] == a[1] && b[2] == 1 && b[3] == 1;
}

/* One float constant vector of n of BatchNormalization's node input slot. */
static const float *bn_vector(const QhHostApi *host, const QhGraphView *g, uint32_t node, uint32_t slot, int64_t n) {
  uint32_t v = host->node_input(g, node, slot);
  const void *d = NULL;
  size_t bytes = 0;
  if (v == QH_INVALID_ID || !(host->value_flags(g, v) & QH_VALUE_CONSTANT) ||
      host->value_dtype(g, v) != QH_DTYPE_FLOAT)
    return NULL;
  QhStatus *st = host->value_data(g, v, &d, &bytes);
  if (st) {
    host->status_free(st);
    return NULL;
  }
  return d && (n < 0 || bytes == (size_t)n * sizeof(float)) ? d : NULL;
}

/* BatchNormalization in inference form with constant float parameters; with lut, its
 * per-channel tables (the host's folding, framework/exec/kernels/norm.c: a = scale /
 * sqrt(var + eps), b = B - mean * a, y = x * a + b, then Relu and QuantizeLinear). */
static const char *bn_params(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k,
                             uint8_t *lut) {
  QhStatus *st = NULL;
  float eps = 1e-5f;
  if ((st = host->node_attr_float(g, node, "epsilon", &eps)))
    host->status_free(st), eps = 1e-5f;
  if (x86_attr_int(host, g, node, "training_mode", 0) != 0)
    return "BatchNormalization in training mode is not supported";
  if (x86_attr_int(host, g, node, "spatial", 1) != 1)
    return "BatchNormalization with spatial=0 is not supported";
  if (host->node_output(g, node, 1) != QH_INVALID_ID)
    return "BatchNormalization's statistics outputs are not supported";
  int64_t dims[QH_MAX_RANK];
  uint32_t sv = host->node_input(g, node, 1);
  if (sv == QH_INVALID_ID || x86_known_shape(host, g, sv, dims) != 1)
    return "BatchNormalization's scale must be a 1-D constant";
  int64_t c = dims[0];
  const float *scale = bn_vector(host, g, node, 1, c), *bias = bn_vector(host, g, node, 2, c),
              *mean = bn_vector(host, g, node, 3, c), *var = bn_vector(host, g, node, 4, c);
  if (!scale || !bias || !mean || !var)
    return "BatchNormalization's scale, B, mean and var must be float constants of one value per channel";
  for (int64_t i = 0; i < c; i++) {
    if (!(var[i] + eps > 0.0f))
      return "BatchNormalization with var + epsilon <= 0 (or NaN) in a channel: its output is not finite";
    if (!isfinite(scale[i]) || !isfinite(bias[i]) || !isfinite(mean[i]) || !isfinite(var[i]))
      return "BatchNormalization with a non-finite parameter";
  }
  k->bn_c = c;
  if (!lut)
    return NULL;
  const float lo = k->relu ? 0.0f : (float)(0 - k->zo), hi = (float)(255 - k->zo);
  for (int64_t i = 0; i < c; i++) {
    float invstd = 1.0f / sqrtf(var[i] + eps);
    float a = scale[i] * invstd;
    float b = bias[i] - mean[i] * a;
    for (int q = 0; q < 256; q++) /* Relu then quantize is quantize clamped below at zo */
      lut[i * 256 + q] = x86_quant_u8(k->dq[q] * a + b, k->so, lo, hi, k->zo);
  }
  return NULL;
}

/* n int64 values of a constant input of node. */
static int const_int64s(const QhHostApi *host, const QhGraphView *g, uint32_t node, uint32_t slot, size_t n,
                        int64_t *out) {
  uint32_t v = host->node_input(g, node, slot);
  const void *d = NULL;
  size_t bytes = 0;
  if (v == QH_INVALID_ID || !(host->value_flags(g, v) & QH_VALUE_CONSTANT) || host->value_dtype(g, v) != QH_DTYPE_INT64)
    return 0;
  QhStatus *st = host->value_data(g, v, &d, &bytes);
  if (st) {
    host->status_free(st);
    return 0;
  }
  if (!d || bytes != n * sizeof *out)
    return 0;
  memcpy(out, d, bytes);
  return 1;
}

/* ShuffleNet's channel shuffle, Reshape [N, g, C/g, H, W] -> Transpose [0, 2, 1, 3, 4] ->
 * Reshape [N, C, H, W] (the Q/DQ pairs between them on the output's grid): a channel
 * permutation, checked against the input's dims at reshape. */
static const char *shuffle_params(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, U8Op *k) {
  const char *t1 = u->n_nodes == 3 ? host->node_op_type(g, u->nodes[1]) : NULL,
             *t2 = u->n_nodes == 3 ? host->node_op_type(g, u->nodes[2]) : NULL;
  if (!t1 || !t2 || strcmp(t1, "Transpose") != 0 || strcmp(t2, "Reshape") != 0)
    return "only the channel shuffle (Reshape -> Transpose -> Reshape) is supported";
  int64_t perm[5];
  static const int64_t want[5] = {0, 2, 1, 3, 4};
  if (!x86_attr_ints(host, g, u->nodes[1], "perm", 5, -1, perm) || memcmp(perm, want, sizeof perm) != 0)
    return "channel shuffle: the Transpose must be [0, 2, 1, 3, 4] of a 5-D tensor";
  if (x86_attr_int(host, g, u->nodes[0], "allowzero", 0) != 0 || x86_attr_int(host, g, u->nodes[2], "allowzero", 0) != 0)
    return "channel shuffle: Reshape with allowzero=1 is not supported";
  if (!const_int64s(host, g, u->nodes[0], 1, 5, k->shape0) || !const_int64s(host, g, u->nodes[2], 1, 4, k->shape2))
    return "channel shuffle: the Reshapes' shapes must be int64 constants of 5 and 4 values";
  return NULL;
}

/* Slice (opset 10+) of one axis, the channels, step 1, with constant starts and ends: the
 * halves of ShuffleNet's torch.chunk. */
static const char *slice_params(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k) {
  int64_t axis = 1, step = 1;
  if (!const_int64s(host, g, node, 1, 1, &k->s_start) || !const_int64s(host, g, node, 2, 1, &k->s_end))
    return "Slice: starts and ends must be int64 constants of one value";
  if (host->node_input(g, node, 3) != QH_INVALID_ID && !const_int64s(host, g, node, 3, 1, &axis))
    return "Slice: axes must be an int64 constant of one value";
  if (host->node_input(g, node, 4) != QH_INVALID_ID && !const_int64s(host, g, node, 4, 1, &step))
    return "Slice: steps must be an int64 constant of one value";
  if ((axis != 1 && axis != -3) || step != 1)
    return "only Slice along the channels of a 4-D tensor with step 1 is supported";
  return NULL;
}

/* ONNX Reshape's target (0: copy the input's dim, allowzero=0; one -1: inferred) against
 * the input dims in; 0 when it does not resolve. */
static int resolve_shape(const int64_t *in, int in_rank, const int64_t *shape, int rank, int64_t *out) {
  int64_t total = 1, known = 1;
  int infer = -1;
  for (int i = 0; i < in_rank; i++)
    total *= in[i];
  for (int i = 0; i < rank; i++) {
    out[i] = shape[i] == 0 ? (i < in_rank ? in[i] : -2) : shape[i];
    if (out[i] == -1 && infer < 0)
      infer = i;
    else if (out[i] < 0)
      return 0;
    else
      known *= out[i];
  }
  if (infer >= 0) {
    if (known == 0 || total % known)
      return 0;
    out[infer] = total / known;
  }
  return infer >= 0 || known == total;
}

/* Pad (opset 11+) in constant mode over H and W of a 4-D tensor: the pads a constant
 * int64 input, the value an optional float constant scalar (0 when absent). */
static const char *pad_params(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k) {
  const char *mode = NULL;
  QhStatus *st = host->node_attr_string(g, node, "mode", &mode);
  if (st)
    host->status_free(st);
  else if (mode && strcmp(mode, "constant") != 0)
    return "Pad modes other than constant are not supported";
  uint32_t pv = host->node_input(g, node, 1), cv = host->node_input(g, node, 2);
  const void *d = NULL;
  size_t bytes = 0;
  if (pv == QH_INVALID_ID || !(host->value_flags(g, pv) & QH_VALUE_CONSTANT) ||
      host->value_dtype(g, pv) != QH_DTYPE_INT64)
    return "Pad's pads must be an int64 constant";
  if ((st = host->value_data(g, pv, &d, &bytes))) {
    host->status_free(st);
    return "Pad's pads must be an int64 constant";
  }
  int64_t pads[8];
  if (!d || bytes != sizeof pads)
    return "only 4-D Pad is supported";
  memcpy(pads, d, sizeof pads);
  if (pads[0] || pads[1] || pads[4] || pads[5])
    return "Pad on the batch or channel axis is not supported";
  if (pads[2] < 0 || pads[3] < 0 || pads[6] < 0 || pads[7] < 0)
    return "negative pads (cropping) are not supported";
  k->pad[0] = pads[2], k->pad[1] = pads[3], k->pad[2] = pads[6], k->pad[3] = pads[7];
  float v = 0.0f;
  if (cv != QH_INVALID_ID) {
    if (!(host->value_flags(g, cv) & QH_VALUE_CONSTANT) || host->value_dtype(g, cv) != QH_DTYPE_FLOAT)
      return "Pad's constant_value must be a float constant";
    if ((st = host->value_data(g, cv, &d, &bytes))) {
      host->status_free(st);
      return "Pad's constant_value must be a float constant";
    }
    if (!d || bytes != sizeof v)
      return "Pad's constant_value must be a scalar";
    memcpy(&v, d, sizeof v);
    if (!isfinite(v))
      return "Pad's constant_value is not finite";
  }
  k->clip_lo = v; /* quantized at create, once the output qparams are known */
  return NULL;
}

static const char *analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, U8Op *k) {
  const char *t = host->node_op_type(g, u->nodes[0]);
  k->op = -1;
  for (int i = 0; t && i < U_N_OPS; i++)
    if (strcmp(t, op_name(i)) == 0)
      k->op = i;
  /* ReduceMean over H and W is GlobalAveragePool: the host sums each plane in double in
   * memory order (framework/exec/kernels/reduce.c), as GlobalAveragePool's loop does */
  k->squeeze = 0;
  if (k->op < 0 && t && strcmp(t, "ReduceMean") == 0) {
    int64_t axes[2];
    if (u->n_inputs != 1)
      return "ReduceMean with axes as an input (opset 18) is not supported";
    if (!x86_attr_ints(host, g, u->nodes[0], "axes", 2, 0, axes))
      return "ReduceMean over axes other than H and W is not supported";
    int h = 0, w = 0;
    for (int i = 0; i < 2; i++)
      h |= axes[i] == 2 || axes[i] == -2, w |= axes[i] == 3 || axes[i] == -1;
    if (!h || !w)
      return "ReduceMean over axes other than H and W is not supported";
    k->op = U_GAP;
    k->squeeze = x86_attr_int(host, g, u->nodes[0], "keepdims", 1) == 0;
  }
  if (k->op < 0)
    return "op other than Add, Mul, Relu, MaxPool, AveragePool, GlobalAveragePool, Flatten, Clip, Sigmoid, "
           "Tanh, HardSigmoid or HardSwish";
  if (k->op == U_SHUFFLE) {
    const char *why = shuffle_params(host, g, u, k);
    if (why)
      return why;
  } else if (u->n_nodes == 2) {
    const char *t2 = host->node_op_type(g, u->nodes[1]);
    if (!(IS_BINARY(k->op) || k->op == U_BN) || !t2 || strcmp(t2, "Relu") != 0)
      return "only Add, Mul and BatchNormalization fuse a following Relu";
    k->relu = 1;
  } else if (u->n_nodes != 1)
    return "unexpected ops in the unit";
  size_t want = IS_BINARY(k->op) ? 2 : 1;
  const char *p;
  k->n_in = u->n_inputs;
  if (k->op == U_CLIP) {
    if (u->n_inputs < 1 || u->n_inputs > 3)
      return "Clip needs one to three inputs";
    if ((p = clip_bounds(host, g, u, k)))
      return p;
  } else if (k->op == U_SHUFFLE) {
    /* the shape constants were read above */
  } else if (k->op == U_SLICE) {
    if ((p = slice_params(host, g, u->nodes[0], k)))
      return p;
  } else if (k->op == U_BN) {
    if ((p = bn_params(host, g, u->nodes[0], k, NULL)))
      return p;
  } else if (k->op == U_PAD) {
    if ((p = pad_params(host, g, u->nodes[0], k)))
      return p;
  } else if (u->n_inputs != want) {
    return IS_BINARY(k->op) ? "Add and Mul need exactly two inputs" : "expected exactly one input";
  }
  for (size_t i = 0; i < want; i++) {
    if (u->input_roles[i] != QH_ROLE_ACTIVATION || (host->value_flags(g, u->inputs[i]) & QH_VALUE_CONSTANT))
      return "constant inputs are not supported";
    if ((p = x86_act_problem(u->input_qparams[i], 0)))
      return p;
  }
  if ((p = x86_act_problem(u->output_qparams[0], 1)))
    return p;
  if (host->node_output(g, u->nodes[0], 1) != QH_INVALID_ID)
    return "a second output (MaxPool's Indices) is not supported";
  const QhQParams *a = u->input_qparams[0], *y = u->output_qparams[0];
  k->sa = a->scale[0], k->za = a->zero_point[0], k->so = y->scale[0], k->zo = y->zero_point[0];
  if (IS_BINARY(k->op))
    k->sb = u->input_qparams[1]->scale[0], k->zb = u->input_qparams[1]->zero_point[0];
  uint32_t node = u->nodes[0];
  int64_t d[QH_MAX_RANK], d2[QH_MAX_RANK];
  int32_t rank = shape_of(host, g, u, 0, d);
  /* Intermediate shapes are often unknown here: decline what is known not to fit and
   * leave the rest to reshape, which sees every shape. */
  switch (k->op) {
  case U_ADD:
  case U_MUL: {
    int32_t r2 = shape_of(host, g, u, 1, d2);
    if (rank >= 0 && r2 >= 0 && (rank != r2 || memcmp(d, d2, (size_t)rank * sizeof *d) != 0) &&
        !(rank == 4 && r2 == 4 && (x86_channel_operand(d2, d) || x86_channel_operand(d, d2))))
      return "broadcasting Add and Mul other than per channel ([N,C,H,W] with [N or 1,C,1,1]) are not "
             "supported";
    break;
  }
  case U_HSIGMOID: {
    QhStatus *st = host->node_attr_float(g, node, "alpha", &k->alpha);
    host->status_free(st);
    if (st)
      k->alpha = 0.2f;
    st = host->node_attr_float(g, node, "beta", &k->beta);
    host->status_free(st);
    if (st)
      k->beta = 0.5f;
    if (!isfinite(k->alpha) || !isfinite(k->beta))
      return "HardSigmoid with a non-finite alpha or beta";
    break;
  }
  case U_MAXPOOL:
  case U_AVGPOOL:
    if (rank >= 0 && rank != 4)
      return "only 2-D pooling is supported";
    if ((p = window_problem(host, g, node, k)))
      return p;
    k->include_pad = x86_attr_int(host, g, node, "count_include_pad", 0) != 0;
    break;
  case U_GAP:
    if (rank >= 0 && rank != 4)
      return "only 2-D GlobalAveragePool is supported";
    break;
  case U_FLATTEN:
    k->axis = x86_attr_int(host, g, node, "axis", 1);
    if (k->axis < 0 && rank < 0)
      return "Flatten with a negative axis needs a known input rank";
    if (k->axis < 0)
      k->axis += rank;
    if (k->axis < 0 || (rank >= 0 && k->axis > rank))
      return "Flatten axis out of range";
    break;
  }
  return NULL;
}

QhStatus *x86_accept_u8op(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  (void)instance;
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes < 1 || !u->nodes ||
      (u->n_inputs > 0 && (!u->inputs || !u->input_roles || !u->input_qparams)) || u->n_outputs != 1 ||
      !u->outputs || !u->output_qparams)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "malformed node unit");
  U8Op k;
  memset(&k, 0, sizeof k);
  const char *p = analyze(host, g, u, &k);
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  QhStatus *st = x86_accept_u8op(instance, host, g, u);
  if (st)
    return st;
  if (!out)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  U8Op *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  analyze(host, g, u, k);
  k->inst = instance;
  k->binary = binary_for_cpu(host, k->op);
  uint64_t cpu = host->cpu_features();
  k->isa = (cpu & QH_CPU_AVX512F) && (cpu & QH_CPU_AVX512BW) && (cpu & QH_CPU_AVX512VL) ? QH_U8_ISA_AVX512
           : (cpu & QH_CPU_AVX2)                                                       ? QH_U8_ISA_AVX2
                                                                                        : QH_U8_ISA_SSE2;
  float lo = (float)(0 - k->zo), hi = (float)(255 - k->zo);
  k->identity = 1;
  for (int q = 0; q < 256; q++) {
    k->dq[q] = (float)(q - k->za) * k->sa;
    float v = k->dq[q];
    if (k->op == U_RELU && !(v > 0.0f))
      v = 0.0f;
    if (k->op == U_CLIP) /* the host's Clip: min(max(x, lo), hi) */
      v = v < k->clip_lo ? k->clip_lo : (v > k->clip_hi ? k->clip_hi : v);
    k->lut[q] = x86_quant_u8(v, k->so, lo, hi, k->zo);
  }
  /* Sigmoid, Tanh, HardSigmoid, HardSwish: the host's formula over the 256 inputs */
  if (IS_ACT(k->op))
    qh_u8_act_lut((QhU8Act)(k->op - U_SIGMOID), k->alpha, k->beta, k->sa, k->za, k->so, k->zo, k->lut);
  for (int q = 0; q < 256; q++)
    k->identity &= k->lut[q] == q;
  if (k->op == U_PAD) /* the host pads the float tensor with the value, then quantizes */
    k->pad_code = x86_quant_u8(k->clip_lo, k->so, lo, hi, k->zo);
  if (k->op == U_BN) {
    k->identity = 0;
    k->bn_lut = malloc((size_t)k->bn_c * 256);
    if (!k->bn_lut) {
      free(k);
      return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    bn_params(host, g, u->nodes[0], k, k->bn_lut);
  }
  k->clamp = 1;
  for (int q = 0; q < 256; q++)
    k->clamp &= k->lut[q] == (q < k->lut[0] ? k->lut[0] : q > k->lut[255] ? k->lut[255] : q);
  *out = k;
  return NULL;
}

static void destroy(void *kernel) {
  U8Op *k = kernel;
  if (k)
    free(k->bn_lut);
  free(k);
}

int x86_u8_view_ok(const QhTensorView *t) {
  if (t->struct_size < sizeof(QhTensorView) || t->rank < 0 || t->rank > QH_MAX_RANK || t->dtype != QH_DTYPE_UINT8)
    return 0;
  for (int32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0)
      return 0;
  return 1;
}

size_t x86_numel(const QhTensorView *t) {
  size_t n = 1;
  for (int32_t i = 0; i < t->rank; i++)
    n *= (size_t)t->dims[i];
  return n;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  U8Op *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != k->n_in || !outputs || n_outputs != 1 || !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!x86_u8_view_ok(x) || y->struct_size < sizeof(QhTensorView))
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: %s input must be a uint8 tensor",
                          op_name(k->op));
  k->reshaped = 0;
  y->dtype = QH_DTYPE_UINT8;
  y->rank = x->rank;
  y->layout = x->layout;
  memcpy(y->dims, x->dims, sizeof y->dims);
  k->bcast = 0;
  if (IS_BINARY(k->op)) {
    const QhTensorView *b = &inputs[1];
    if (!x86_u8_view_ok(b))
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: %s input must be a uint8 tensor",
                            op_name(k->op));
    memcpy(k->bdims, b->dims, sizeof k->bdims);
    if (b->rank != x->rank || b->layout != x->layout ||
        memcmp(b->dims, x->dims, (size_t)x->rank * sizeof *x->dims) != 0) {
      /* The per-channel form, channels last: [N, H, W, C] with [N or 1, 1, 1, C] either way round */
      int64_t xd[4], bd[4];
      int nhwc = x->rank == 4 && b->rank == 4 && x->layout == QH_LAYOUT_NHWC && b->layout == QH_LAYOUT_NHWC;
      if (nhwc) {
        int64_t t[4] = {x->dims[0], x->dims[3], x->dims[1], x->dims[2]}, u[4] = {b->dims[0], b->dims[3],
                                                                                   b->dims[1], b->dims[2]};
        memcpy(xd, t, sizeof xd), memcpy(bd, u, sizeof bd);
      }
      if (nhwc && x86_channel_operand(bd, xd))
        k->bcast = 1;
      else if (nhwc && x86_channel_operand(xd, bd))
        k->bcast = 2;
      else
        return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT,
                              "reshape: %s inputs differ in shape or layout other than per channel "
                              "([N,H,W,C] with [N or 1,1,1,C], channels last)",
                              op_name(k->op));
      const QhTensorView *full = k->bcast == 1 ? x : b, *vec = k->bcast == 1 ? b : x;
      y->layout = full->layout;
      memcpy(y->dims, full->dims, sizeof y->dims);
      k->n = full->dims[0], k->h = full->dims[1], k->w = full->dims[2], k->c = full->dims[3];
      k->bn = vec->dims[0];
    }
  } else if (k->op == U_SHUFFLE) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: channel shuffle input must be 4-D NHWC");
    int64_t nchw[4] = {x->dims[0], x->dims[3], x->dims[1], x->dims[2]}, r0[5], r2[4];
    if (!resolve_shape(nchw, 4, k->shape0, 5, r0) || r0[0] != nchw[0] || r0[3] != nchw[2] || r0[4] != nchw[3] ||
        r0[1] < 1 || r0[1] * r0[2] != nchw[1])
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: channel shuffle: the first Reshape is not [N, groups, C/groups, H, W]");
    int64_t t[5] = {r0[0], r0[2], r0[1], r0[3], r0[4]};
    if (!resolve_shape(t, 5, k->shape2, 4, r2) || memcmp(r2, nchw, sizeof r2) != 0)
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: channel shuffle: the second Reshape does not restore [N, C, H, W]");
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
    k->kh = r0[1]; /* groups */
  } else if (k->op == U_SLICE) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Slice input must be 4-D NHWC");
    /* ONNX's clamping: negative from the end, then into [0, C] */
    int64_t C = x->dims[3], a = k->s_start < 0 ? k->s_start + C : k->s_start, b = k->s_end < 0 ? k->s_end + C : k->s_end;
    a = a < 0 ? 0 : a > C ? C : a;
    b = b < 0 ? 0 : b > C ? C : b;
    k->s_c0 = a, k->s_c1 = b > a ? b : a;
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = C;
    y->dims[3] = k->s_c1 - k->s_c0;
  } else if (k->op == U_PAD) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Pad input must be 4-D NHWC");
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
    k->oh = k->h + k->pad[0] + k->pad[2], k->ow = k->w + k->pad[1] + k->pad[3];
    y->dims[1] = k->oh, y->dims[2] = k->ow;
  } else if (k->op == U_BN) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC || x->dims[3] != k->bn_c)
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: BatchNormalization input must be 4-D NHWC with one channel per parameter");
    k->c = x->dims[3];
  } else if (!IS_POINTWISE(k->op) && k->op != U_FLATTEN) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: %s input must be 4-D NHWC", op_name(k->op));
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
    if (k->op == U_GAP) {
      k->oh = k->ow = 1;
      if (k->squeeze) /* [N, 1, 1, C] and [N, C] have the same bytes */
        y->rank = 2, y->dims[1] = k->c;
    } else {
      int64_t eh = k->h + k->pad[0] + k->pad[2] - k->kh, ew = k->w + k->pad[1] + k->pad[3] - k->kw;
      if (eh < 0 || ew < 0)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: pooling input smaller than the window");
      if (k->ceil_mode) {
        /* ONNX's ceil_mode (the host's conv-window.c): one more window where the stride
         * does not divide, dropped when it would start in the end padding (ONNX and
         * PyTorch require the last window to start inside the input or the left padding) */
        k->oh = (eh + k->sh - 1) / k->sh + 1, k->ow = (ew + k->sw - 1) / k->sw + 1;
        if ((k->oh - 1) * k->sh >= k->h + k->pad[0])
          k->oh--;
        if ((k->ow - 1) * k->sw >= k->w + k->pad[1])
          k->ow--;
      } else {
        k->oh = eh / k->sh + 1, k->ow = ew / k->sw + 1;
      }
    }
    if (!k->squeeze)
      y->dims[1] = k->oh, y->dims[2] = k->ow;
  } else if (k->op == U_FLATTEN) {
    /* Flatten's bytes are the input's in NCHW order, whatever the axis */
    int64_t nchw[QH_MAX_RANK];
    memcpy(nchw, x->dims, sizeof nchw);
    k->n = 0; /* a plain copy */
    if (x->rank == 4 && x->layout == QH_LAYOUT_NHWC) {
      k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
      nchw[1] = k->c, nchw[2] = k->h, nchw[3] = k->w;
    }
    if (k->axis > x->rank)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Flatten axis out of range");
    int64_t outer = 1, inner = 1;
    for (int32_t i = 0; i < x->rank; i++)
      *(i < k->axis ? &outer : &inner) *= nchw[i];
    y->rank = 2, y->dims[0] = outer, y->dims[1] = inner;
  }
  if (y->rank != 4)
    y->layout = QH_LAYOUT_ANY;
  k->rank = x->rank;
  memcpy(k->dims, x->dims, sizeof k->dims);
  k->in_bytes = x86_numel(x);
  k->out_bytes = x86_numel(y);
  k->bin_bytes = IS_BINARY(k->op) ? x86_numel(&inputs[1]) : k->in_bytes;
  k->reshaped = 1;
  *out_workspace = 0;
  return NULL;
}

/* ---- run ---- */

typedef struct {
  const U8Op *k;
  const uint8_t *a, *b;
  uint8_t *y;
  size_t n;
} Job;

/* One Add or Mul (+Relu) span, written as the scalar formula so that the compiler
 * vectorises it for each instruction set below: every lane does the same IEEE float
 * operations in the same order as the host's DequantizeLinear -> Add/Mul -> QuantizeLinear
 * (no -ffast-math, no contraction), so every clone gives the scalar loop's bytes. */
#define BINARY_SPAN(name, OP)                                                                                \
  static inline __attribute__((always_inline)) void name(const U8Op *k, const uint8_t *restrict a,          \
                                                         const uint8_t *restrict b, uint8_t *restrict y,    \
                                                         size_t n) {                                         \
    const float sa = k->sa, sb = k->sb, so = k->so, za = (float)k->za, zb = (float)k->zb;                   \
    /* Relu then quantize is quantize clamped below at zo: rint(max(v, 0) / so) >= 0 */                     \
    const float lo = k->relu ? 0.0f : (float)(0 - k->zo), hi = (float)(255 - k->zo);                        \
    const int32_t zo = k->zo;                                                                                \
    for (size_t i = 0; i < n; i++)                                                                           \
      y[i] = x86_quant_u8((((float)a[i] - za) * sa)OP(((float)b[i] - zb) * sb), so, lo, hi, zo);                   \
  }
BINARY_SPAN(add_span, +)
BINARY_SPAN(mul_span, *)

#define BINARY_CLONE(name, span, isa)                                                                       \
  __attribute__((target(isa), optimize("tree-vectorize", "fp-contract=off"))) static void name(            \
      const U8Op *k, const uint8_t *restrict a, const uint8_t *restrict b, uint8_t *restrict y, size_t n) { \
    span(k, a, b, y, n);                                                                                    \
  }
#define AVX512 "avx512f,avx512bw,avx512vl"
BINARY_CLONE(add_avx512, add_span, AVX512)
BINARY_CLONE(add_avx2, add_span, "avx2")
BINARY_CLONE(add_sse2, add_span, "sse2")
BINARY_CLONE(mul_avx512, mul_span, AVX512)
BINARY_CLONE(mul_avx2, mul_span, "avx2")
BINARY_CLONE(mul_sse2, mul_span, "sse2")

/* The widest clone the CPU has, as the host reports it (QHOST_CPU_DISABLE=avx512f,avx2
 * selects the narrower ones, which the tests use to compare every clone with the host). */
static BinarySpanFn *binary_for_cpu(const QhHostApi *host, int op) {
  uint64_t cpu = host->cpu_features();
  int isa = (cpu & QH_CPU_AVX512F) && (cpu & QH_CPU_AVX512BW) && (cpu & QH_CPU_AVX512VL) ? 2
            : (cpu & QH_CPU_AVX2)                                                       ? 1
                                                                                         : 0;
  static BinarySpanFn *const clones[2][3] = {{add_sse2, add_avx2, add_avx512}, {mul_sse2, mul_avx2, mul_avx512}};
  return clones[op == U_MUL][isa];
}

static void binary_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  size_t i0 = index * CHUNK, n = i0 + CHUNK < j->n ? CHUNK : j->n - i0;
  j->k->binary(j->k, j->a + i0, j->b + i0, j->y + i0, n);
}

/* Pixels [p0, p1) of image n of a per-channel Add or Mul (j->n: pixels per task). */
static void channels_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t hw = (size_t)(k->h * k->w), tasks = (hw + j->n - 1) / j->n, n = index / tasks;
  size_t p0 = index % tasks * j->n, p1 = p0 + j->n < hw ? p0 + j->n : hw, C = (size_t)k->c;
  const uint8_t *bv = j->b + (k->bn == 1 ? 0 : n * C);
  QhU8Binary p = {.mul = k->op == U_MUL, .relu = k->relu, .so = k->so, .zo = k->zo};
  /* the full operand's qparams first */
  p.sa = k->bcast == 1 ? k->sa : k->sb, p.za = k->bcast == 1 ? k->za : k->zb;
  p.sb = k->bcast == 1 ? k->sb : k->sa, p.zb = k->bcast == 1 ? k->zb : k->za;
  size_t off = (n * hw + p0) * C;
  qh_u8_binary_channels(&p, k->isa, j->a + off, bv, j->y + off, p1 - p0, C);
}

/* 1024 pixels of a channel Slice: channels [c0, c1) of each, requantized (a copy when
 * the qparams are shared). */
static void slice_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, c0 = (size_t)k->s_c0, nc = (size_t)(k->s_c1 - k->s_c0), p0 = index * 1024;
  size_t p1 = p0 + 1024 < j->n ? p0 + 1024 : j->n;
  for (size_t p = p0; p < p1; p++) {
    if (k->identity)
      memcpy(j->y + p * nc, j->a + p * C + c0, nc);
    else
      qh_u8_lut_apply(k->lut, j->a + p * C + c0, j->y + p * nc, nc);
  }
}

/* Pixels [p0, p0 + j->n) of the channel shuffle: output channel i * g + j is input
 * channel j * (C / g) + i, requantized (a copy when the qparams are shared). */
static void shuffle_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, G = (size_t)k->kh, per = C / G, pixels = k->in_bytes / C, p0 = index * j->n;
  size_t p1 = p0 + j->n < pixels ? p0 + j->n : pixels;
  const uint8_t *restrict lut = k->lut;
  for (size_t p = p0; p < p1; p++) {
    const uint8_t *restrict x = j->a + p * C;
    uint8_t *restrict y = j->y + p * C;
    for (size_t i = 0; i < per; i++)
      for (size_t gi = 0; gi < G; gi++)
        y[i * G + gi] = lut[x[gi * per + i]];
  }
}

/* One output row (n, oh) of Pad: the value's code in the border, the input requantized
 * (a copy when the qparams are shared) inside. */
static void pad_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, n = index / (size_t)k->oh;
  int64_t oh = (int64_t)(index % (size_t)k->oh), ih = oh - k->pad[0];
  uint8_t *y = j->y + index * (size_t)k->ow * C;
  if (ih < 0 || ih >= k->h) {
    memset(y, k->pad_code, (size_t)k->ow * C);
    return;
  }
  const uint8_t *x = j->a + ((size_t)n * k->h + (size_t)ih) * (size_t)k->w * C;
  size_t left = (size_t)k->pad[1] * C, inner = (size_t)k->w * C, right = (size_t)k->pad[3] * C;
  memset(y, k->pad_code, left);
  if (k->identity)
    memcpy(y + left, x, inner);
  else
    qh_u8_lut_apply(k->lut, x, y + left, inner);
  memset(y + left + inner, k->pad_code, right);
}

/* Pixels [p0, p0 + j->n) of BatchNormalization: a table per channel. */
static void bn_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, pixels = k->in_bytes / C, p0 = index * j->n;
  size_t p1 = p0 + j->n < pixels ? p0 + j->n : pixels;
  const uint8_t *restrict lut = k->bn_lut;
  for (size_t p = p0; p < p1; p++) {
    const uint8_t *restrict x = j->a + p * C;
    uint8_t *restrict y = j->y + p * C;
    for (size_t c = 0; c < C; c++)
      y[c] = lut[c * 256 + x[c]];
  }
}

static void lut_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  size_t i0 = index * CHUNK, i1 = i0 + CHUNK < j->n ? i0 + CHUNK : j->n, i = i0;
  /* Locals, because a uint8_t store may alias the job and the table: without them
   * every byte reloads both (measured 1.5 GB/s on mobilenet_v2's ReLU6s). */
  const uint8_t *restrict a = j->a, *restrict lut = j->k->lut;
  uint8_t *restrict y = j->y;
  if (j->k->clamp) {
    /* The table is a clamp (Relu/Clip with shared qparams): 16 bytes per min/max */
    const __m128i lo = _mm_set1_epi8((char)lut[0]), hi = _mm_set1_epi8((char)lut[255]);
    for (; i + VEC <= i1; i += VEC)
      _mm_storeu_si128((__m128i *)(y + i),
                       _mm_min_epu8(_mm_max_epu8(_mm_loadu_si128((const __m128i *)(a + i)), lo), hi));
  }
  for (; i < i1; i++)
    y[i] = lut[a[i]];
}

/* The taps of output position o along one axis: [t0, t1) within the input. */
static void taps(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t size, int64_t *t0, int64_t *t1) {
  int64_t s = o * stride - pad;
  *t0 = s < 0 ? (-s < kernel ? -s : kernel) : 0;
  *t1 = s + kernel > size ? size - s : kernel;
  *t1 = *t1 < *t0 ? *t0 : *t1; /* a window wholly in the padding has no taps */
}

/* One output row (n, oh) of MaxPool, AveragePool or GlobalAveragePool. */
static void pool_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  int64_t n = (int64_t)index / k->oh, oh = (int64_t)index % k->oh, C = k->c;
  const uint8_t *x = j->a + (size_t)n * k->h * k->w * C;
  uint8_t *yrow = j->y + ((size_t)n * k->oh + oh) * k->ow * C;
  const float lo = (float)(0 - k->zo), hi = (float)(255 - k->zo);
  int64_t h0 = 0, h1 = k->h, sh = 0, ph = 0;
  if (k->op != U_GAP) {
    int64_t a, b; /* taps inside the explicitly padded input: count_include_pad's count */
    taps(oh, k->sh, k->pad[0], k->kh, k->h, &h0, &h1);
    taps(oh, k->sh, 0, k->kh, k->h + k->pad[0] + k->pad[2], &a, &b);
    sh = oh * k->sh - k->pad[0], ph = b - a;
  }
  for (int64_t ow = 0; ow < k->ow; ow++) {
    int64_t w0 = 0, w1 = k->w, sw = 0, pw = 0;
    if (k->op != U_GAP) {
      int64_t a, b;
      taps(ow, k->sw, k->pad[1], k->kw, k->w, &w0, &w1);
      taps(ow, k->sw, 0, k->kw, k->w + k->pad[1] + k->pad[3], &a, &b);
      sw = ow * k->sw - k->pad[1], pw = b - a;
    }
    uint8_t *restrict y = yrow + ow * C;
    if (k->op == U_MAXPOOL) {
      memset(y, 0, (size_t)C);
      for (int64_t kh = h0; kh < h1; kh++)
        for (int64_t kw = w0; kw < w1; kw++) {
          const uint8_t *restrict xp = x + ((sh + kh) * k->w + sw + kw) * C;
          int64_t c = 0;
          for (; c + VEC <= C; c += VEC)
            _mm_storeu_si128((__m128i *)(y + c), _mm_max_epu8(_mm_loadu_si128((const __m128i *)(y + c)),
                                                               _mm_loadu_si128((const __m128i *)(xp + c))));
          for (; c < C; c++)
            y[c] = xp[c] > y[c] ? xp[c] : y[c];
        }
      if (h0 == h1 || w0 == w1) /* no input tap: the host's max is -FLT_MAX, quantized to 0 */
        continue;
      if (!k->identity)
        for (int64_t c = 0; c < C; c++)
          y[c] = k->lut[y[c]];
      continue;
    }
    /* Averages sum the dequantized taps in double in the host's order (kh, then kw) */
    /* count_include_pad counts the taps inside the padded input (not those a ceil_mode
     * window hangs past it); no tap at all averages to 0, as the host's reference */
    double count = k->op == U_AVGPOOL && k->include_pad ? (double)(ph * pw) : (double)((h1 - h0) * (w1 - w0));
    for (int64_t c0 = 0; c0 < C; c0 += 64) {
      int64_t nc = C - c0 < 64 ? C - c0 : 64;
      double acc[64] = {0};
      for (int64_t kh = h0; kh < h1; kh++)
        for (int64_t kw = w0; kw < w1; kw++) {
          const uint8_t *xp = x + ((sh + kh) * k->w + sw + kw) * C + c0;
          for (int64_t c = 0; c < nc; c++)
            acc[c] += (double)k->dq[xp[c]];
        }
      for (int64_t c = 0; c < nc; c++)
        y[c0 + c] = x86_quant_u8(count > 0 ? (float)(acc[c] / count) : 0.0f, k->so, lo, hi, k->zo);
    }
  }
}

/* NHWC [n, h, w, c] to ONNX's Flatten order [n, c*h*w]. */
static void flatten_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t per = (size_t)(k->h * k->w * k->c), hw = (size_t)(k->h * k->w);
  const uint8_t *x = j->a + index * per;
  uint8_t *y = j->y + index * per;
  for (size_t p = 0; p < hw; p++)
    for (size_t c = 0; c < (size_t)k->c; c++)
      y[c * hw + p] = k->lut[x[p * (size_t)k->c + c]];
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  (void)ctx, (void)workspace, (void)workspace_bytes;
  U8Op *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || !outputs || n_outputs != 1 || n_inputs != k->n_in)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  /* Clip's min and max inputs are scalars read at create */
  size_t n_data = k->op == U_CLIP || k->op == U_BN || k->op == U_PAD || k->op == U_SHUFFLE || k->op == U_SLICE
                      ? 1
                      : n_inputs;
  for (size_t i = 0; i < n_data; i++) {
    const QhTensorView *x = &inputs[i];
    const int64_t *dims = i ? k->bdims : k->dims;
    size_t bytes = i ? k->bin_bytes : k->in_bytes;
    if (!x86_u8_view_ok(x) || x->rank != k->rank || memcmp(x->dims, dims, (size_t)x->rank * sizeof *x->dims) ||
        x->nbytes != bytes || (bytes && !x->data))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  }
  QhTensorView *y = &outputs[0];
  if (!x86_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  Job j = {k, inputs[0].data, n_inputs > 1 ? inputs[1].data : NULL, y->data, k->in_bytes};
  size_t blocks = (j.n + CHUNK - 1) / (CHUNK);
  switch (k->op) {
  case U_ADD:
  case U_MUL:
    if (k->bcast) {
      if (k->bcast == 2) /* a is the per-channel one: swap (Add and Mul commute exactly) */
        j.a = inputs[1].data, j.b = inputs[0].data;
      size_t hw = (size_t)(k->h * k->w), per = CHUNK / (size_t)(k->c > 0 ? k->c : 1);
      j.n = per ? per : 1; /* pixels per task */
      x86_parallel_for(k->inst, (size_t)k->n * ((hw + j.n - 1) / j.n), channels_task, &j);
      return NULL;
    }
    x86_parallel_for(k->inst, blocks, binary_task, &j);
    return NULL;
  case U_FLATTEN:
    if (k->n > 0 && k->h * k->w > 1) {
      x86_parallel_for(k->inst, (size_t)k->n, flatten_task, &j);
      return NULL;
    }
    /* Otherwise the same bytes in the same order: */
    /* fall through */
  case U_RELU:
  case U_CLIP:
  case U_SIGMOID:
  case U_TANH:
  case U_HSIGMOID:
  case U_HSWISH:
    if (k->identity) {
      if (y->data != inputs[0].data)
        memcpy(y->data, inputs[0].data, j.n);
      return NULL;
    }
    x86_parallel_for(k->inst, blocks, lut_task, &j);
    return NULL;
  case U_PAD:
    x86_parallel_for(k->inst, (size_t)(k->n * k->oh), pad_task, &j);
    return NULL;
  case U_SLICE:
    j.n = (size_t)(k->n * k->h * k->w); /* pixels */
    x86_parallel_for(k->inst, (j.n + 1023) / 1024, slice_task, &j);
    return NULL;
  case U_SHUFFLE: {
    size_t pixels = j.n / (size_t)k->c;
    j.n = CHUNK / (size_t)k->c ? CHUNK / (size_t)k->c : 1; /* pixels per task */
    x86_parallel_for(k->inst, (pixels + j.n - 1) / j.n, shuffle_task, &j);
    return NULL;
  }
  case U_BN: {
    size_t pixels = j.n / (size_t)k->c;
    j.n = CHUNK / (size_t)k->c ? CHUNK / (size_t)k->c : 1; /* pixels per task */
    x86_parallel_for(k->inst, (pixels + j.n - 1) / j.n, bn_task, &j);
    return NULL;
  }
  default:
    x86_parallel_for(k->inst, (size_t)(k->n * k->oh), pool_task, &j);
    return NULL;
  }
}

#define U8KERNEL(name, kid)                                                                                 \
  const QhKernelOps name = {QH_STRUCT_HEADER(QhKernelOps), .id = kid, .input_layout = QH_LAYOUT_NHWC,      \
                            .output_layout = QH_LAYOUT_NHWC, .create = create, .reshape = reshape, .run = run, \
                            .destroy = destroy}
U8KERNEL(x86_add_kernel, "x86_add_nhwc_qu8");
U8KERNEL(x86_mul_kernel, "x86_mul_nhwc_qu8");
U8KERNEL(x86_relu_kernel, "x86_relu_nhwc_qu8");
U8KERNEL(x86_clip_kernel, "x86_clip_nhwc_qu8");
U8KERNEL(x86_maxpool_kernel, "x86_maxpool2d_nhwc_qu8");
U8KERNEL(x86_avgpool_kernel, "x86_avgpool2d_nhwc_qu8");
U8KERNEL(x86_gap_kernel, "x86_global_avgpool_nhwc_qu8");
U8KERNEL(x86_flatten_kernel, "x86_flatten_nhwc_qu8");
U8KERNEL(x86_sigmoid_kernel, "x86_sigmoid_lut_qu8");
U8KERNEL(x86_tanh_kernel, "x86_tanh_lut_qu8");
U8KERNEL(x86_hardsigmoid_kernel, "x86_hardsigmoid_lut_qu8");
U8KERNEL(x86_hardswish_kernel, "x86_hardswish_lut_qu8");
U8KERNEL(x86_batchnorm_kernel, "x86_batchnorm_nhwc_qu8");
U8KERNEL(x86_pad_kernel, "x86_pad_nhwc_qu8");
U8KERNEL(x86_reducemean_kernel, "x86_reducemean_hw_nhwc_qu8");
U8KERNEL(x86_shuffle_kernel, "x86_channel_shuffle_nhwc_qu8");
U8KERNEL(x86_slice_kernel, "x86_slice_channels_nhwc_qu8");
