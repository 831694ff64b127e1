/* The x86 plugin's uint8 units, part 1 (u8-ops.h): which units they take and why not the
 * others (accept), and create: each unit's parameters (pooling window, Clip bounds, Pad,
 * Slice and shuffle constants, BatchNormalization folded as the host folds it) and its
 * 256-entry table, built with the host's own formulas (dequantize f32((q - z) * s), the
 * float op, quantize rint(f32(v / so)) + zo saturated, by exact division as qdq.c does).
 * Monotonic unary work (Relu, Clip, a MaxPool or Flatten onto another grid) is that table,
 * flagged as a clamp or the identity where it is one. Intermediate shapes are often
 * unknown here, so a broadcasting Add or non-4-D GlobalAveragePool whose shapes are
 * unknown fails at reshape instead of being declined. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/u8-kernels.h"
#include "../common/unit-query.h"
#include "u8-ops.h"

const char *x86_u8op_name(int op) {
  static const char *const names[] = {"Add", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool",
                                      "Flatten", "Clip", "Mul", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
                                      "BatchNormalization", "Pad", "Reshape", "Slice"};
  return names[op];
}

static const char *window_problem(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k) {
  int64_t ks[2], s[2], d[2];
  const char *why = uq_window_2d(host, g, node, "only 2-D pooling is supported (kernel_shape, strides, pads, dilations of 2)", ks, s, k->pad, d);
  if (why)
    return why;
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
  if (!uq_const_int64s(host, g, u->nodes[0], 1, 5, k->shape0) || !uq_const_int64s(host, g, u->nodes[2], 1, 4, k->shape2))
    return "channel shuffle: the Reshapes' shapes must be int64 constants of 5 and 4 values";
  return NULL;
}

/* Slice (opset 10+) of one axis, the channels, step 1, with constant starts and ends: the
 * halves of ShuffleNet's torch.chunk. */
static const char *slice_params(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k) {
  int64_t axis = 1, step = 1;
  if (!uq_const_int64s(host, g, node, 1, 1, &k->s_start) || !uq_const_int64s(host, g, node, 2, 1, &k->s_end))
    return "Slice: starts and ends must be int64 constants of one value";
  if (host->node_input(g, node, 3) != QH_INVALID_ID && !uq_const_int64s(host, g, node, 3, 1, &axis))
    return "Slice: axes must be an int64 constant of one value";
  if (host->node_input(g, node, 4) != QH_INVALID_ID && !uq_const_int64s(host, g, node, 4, 1, &step))
    return "Slice: steps must be an int64 constant of one value";
  if ((axis != 1 && axis != -3) || step != 1)
    return "only Slice along the channels of a 4-D tensor with step 1 is supported";
  return NULL;
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
    if (strcmp(t, x86_u8op_name(i)) == 0)
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
    if ((p = uq_clip_bounds(host, g, u->nodes[0], &k->clip_lo, &k->clip_hi)))
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
  int32_t rank = uq_input_shape(host, g, u, 0, d);
  /* Intermediate shapes are often unknown here: decline what is known not to fit and
   * leave the rest to reshape, which sees every shape. */
  switch (k->op) {
  case U_ADD:
  case U_MUL: {
    int32_t r2 = uq_input_shape(host, g, u, 1, d2);
    if (rank >= 0 && r2 >= 0 && (rank != r2 || memcmp(d, d2, (size_t)rank * sizeof *d) != 0) &&
        !(rank == 4 && r2 == 4 && (uq_channel_operand(d2, d) || uq_channel_operand(d, d2))))
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

/* A QuantizeLinear's or DequantizeLinear's per-tensor uint8 qparams, read from its
 * constant inputs (a missing zero point is 0); 0 when they are not that. */
static int node_u8_qparams(const QhHostApi *host, const QhGraphView *g, uint32_t node, float *scale, int32_t *zp) {
  uint32_t sv = host->node_input(g, node, 1), zv = host->node_input(g, node, 2);
  const void *d = NULL;
  size_t bytes = 0;
  if (sv == QH_INVALID_ID || !(host->value_flags(g, sv) & QH_VALUE_CONSTANT) ||
      host->value_dtype(g, sv) != QH_DTYPE_FLOAT)
    return 0;
  QhStatus *st = host->value_data(g, sv, &d, &bytes);
  if (st || !d || bytes != sizeof(float)) {
    host->status_free(st);
    return 0;
  }
  memcpy(scale, d, sizeof *scale);
  *zp = 0;
  if (zv == QH_INVALID_ID)
    return 1;
  if (!(host->value_flags(g, zv) & QH_VALUE_CONSTANT) || host->value_dtype(g, zv) != QH_DTYPE_UINT8)
    return 0;
  st = host->value_data(g, zv, &d, &bytes);
  if (st || !d || bytes != 1) {
    host->status_free(st);
    return 0;
  }
  *zp = *(const uint8_t *)d;
  return 1;
}

/* A Mul of act(x) by x (SiLU's x * Sigmoid(x), opset-13 HardSwish's x * HardSigmoid(x)):
 * one of the unit's inputs is QuantizeLinear(act(DequantizeLinear(x))) with x the other
 * input. The product is then a function of x's byte alone, so the whole Mul is one
 * 256-entry table over x, built with the host's formulas (the activation's table, then
 * the Mul's own element formula): exactly what the reference computes, without reading
 * the activation's output. Returns x's slot and fills k->lut, or -1. */
static int gated_mul(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, U8Op *k) {
  for (int s = 0; s < 2; s++) {
    uint32_t q = host->value_producer(g, u->inputs[s]);
    if (q == QH_INVALID_ID || !uq_op_is(host, g, q, "QuantizeLinear"))
      continue;
    uint32_t act = host->value_producer(g, host->node_input(g, q, 0));
    int kind = act == QH_INVALID_ID ? -1 : qh_u8_act_from_name(host->node_op_type(g, act));
    if (kind < 0)
      continue;
    uint32_t dq = host->value_producer(g, host->node_input(g, act, 0));
    if (dq == QH_INVALID_ID || !uq_op_is(host, g, dq, "DequantizeLinear") ||
        host->node_input(g, dq, 0) != u->inputs[1 - s])
      continue;
    float s_in, s_act;
    int32_t z_in, z_act;
    if (!node_u8_qparams(host, g, dq, &s_in, &z_in) || !node_u8_qparams(host, g, q, &s_act, &z_act) ||
        !(s_in > 0.0f) || !(s_act > 0.0f) || !isfinite(s_in) || !isfinite(s_act))
      continue;
    float alpha = uq_attr_float(host, g, act, "alpha", 0.2f), beta = uq_attr_float(host, g, act, "beta", 0.5f);
    if (!isfinite(alpha) || !isfinite(beta))
      continue;
    uint8_t act_lut[256], x[256];
    qh_u8_act_lut((QhU8Act)kind, alpha, beta, s_in, z_in, s_act, z_act, act_lut);
    for (int i = 0; i < 256; i++)
      x[i] = (uint8_t)i;
    const QhQParams *xq = u->input_qparams[1 - s], *bq = u->input_qparams[s];
    QhU8Binary p = {.mul = 1, .relu = k->relu, .sa = xq->scale[0], .za = xq->zero_point[0], .sb = bq->scale[0],
                    .zb = bq->zero_point[0], .so = k->so, .zo = k->zo};
    qh_u8_binary_same_ref(&p, x, act_lut, k->lut, 256);
    return 1 - s;
  }
  return -1;
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

QhStatus *x86_accept_act_mul(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  QhStatus *st = x86_accept_u8op(instance, host, g, u);
  if (st)
    return st;
  U8Op k;
  memset(&k, 0, sizeof k);
  analyze(host, g, u, &k);
  if (k.op != U_MUL || gated_mul(host, g, u, &k) < 0)
    return host->status_new(QH_ERR_UNSUPPORTED, "not a Mul of an activation of its other input");
  return NULL;
}

static int is_act_mul(const QhNodeUnit *u) {
  return u->pattern_id && strncmp(u->pattern_id, "act_mul", 7) == 0;
}

QhStatus *x86_u8op_create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
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
  uint64_t cpu = host->cpu_features();
  k->isa = (cpu & QH_CPU_AVX512F) && (cpu & QH_CPU_AVX512BW) && (cpu & QH_CPU_AVX512VL) ? QH_U8_ISA_AVX512
           : (cpu & QH_CPU_AVX2)                                                       ? QH_U8_ISA_AVX2
                                                                                        : QH_U8_ISA_SSE2;
  const uint64_t vbmi = QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VBMI;
  k->vbmi = (cpu & vbmi) == vbmi;
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
  k->gate = k->op == U_MUL && is_act_mul(u) ? gated_mul(host, g, u, k) : -1;
  if (is_act_mul(u) && k->gate < 0) {
    free(k);
    return host->status_new(QH_ERR_UNSUPPORTED, "not a Mul of an activation of its other input");
  }
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

void x86_u8op_destroy(void *kernel) {
  U8Op *k = kernel;
  if (k)
    free(k->bn_lut);
  free(k);
}

