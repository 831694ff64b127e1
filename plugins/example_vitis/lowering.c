/* example_vitis's lowering: the node units of a QDQ graph its DPU-style kernels run, and
 * why it declines the others. A unit is accepted only when every tensor it touches is
 * int8, per-tensor, zero point 0, with a power-of-two scale 2^-pos (or an int32 bias of
 * the same kind), and the shifts between those positions are ones the DPU can do (conv
 * shift_cut in [0, 16], shift_bias in [min(0, shift_cut - 16), 16], add shift_read <= 15
 * and shift_write in [-15, 15]). accept() and create() share one analysis, so a unit is
 * never accepted and then refused. The arithmetic itself is in kernels.c; this file
 * turns a unit into kernel parameters (create), sizes the output (reshape) and splits
 * the work over the host's pool (run). Activations are NCHW. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "lowering.h"

enum { K_CONV, K_LINEAR, K_BINARY, K_POOL, K_CONCAT, K_UNARY };

typedef struct {
  int kind;
  const char *op; /* the root op type */
  int act, leaky_num;
  double clip[2]; /* a fused Clip's bounds (-inf, +inf when absent) */
  int acc_lshift; /* conv, linear: the sum's left shift to a finer bias */
  int shift;      /* the unit's requantization shift (conv, linear, unary) */
  VitisConv conv;
  VitisLinear lin;
  VitisBinary bin;
  VitisPool pool;
  int64_t axis;   /* concat, flatten */
  int *in_shift; /* concat: per input */
  size_t n_in;
  int8_t *w;      /* conv [co][ci/g][kh][kw], linear [n][k] */
  int64_t *bias;  /* aligned to the accumulator */
  int64_t w_rows, w_cols;
  int gemm_transb, matmul;
  /* from reshape */
  int64_t rows, outer, inner, *mid;
  int64_t *in_nbytes; /* per input, for run's checks */
  size_t out_n;
} Kernel;

typedef struct {
  const QhHostApi *host;
  const QhGraphView *g;
  const QhNodeUnit *u;
  char *why; /* the reason of a decline */
} Ctx;

#define WHY_SIZE 256
#define DECLINE(c, ...) (snprintf((c)->why, WHY_SIZE, __VA_ARGS__), 0)

int vitis_kernel_pos(float scale, int *pos) {
  int p;
  if (!vitis_scale_pos(scale, &p) || p < VITIS_KERNEL_POS_MIN || p > VITIS_KERNEL_POS_MAX)
    return 0;
  *pos = p;
  return 1;
}

/* The position of a quantized unit input or output; what: "input 0", "output". */
static int qpos(Ctx *c, const QhQParams *q, int32_t dtype, const char *what, int *pos) {
  if (!q || q->struct_size < sizeof *q || q->count < 1 || !q->scale || !q->zero_point)
    return DECLINE(c, "%s is not quantized (float tensors do not run on the DPU)", what);
  if (q->count != 1)
    return DECLINE(c, "%s is quantized per channel; the DPU has one position per tensor", what);
  if (q->dtype != dtype)
    return DECLINE(c, "%s is not %s", what, dtype == QH_DTYPE_INT8 ? "int8" : "int32");
  if (q->zero_point[0] != 0)
    return DECLINE(c, "%s has zero point %d; the DPU needs 0", what, (int)q->zero_point[0]);
  if (!vitis_kernel_pos(q->scale[0], pos))
    return DECLINE(c, "%s has scale %g, not a power of two 2^-pos with pos in [%d, %d]", what,
                   (double)q->scale[0], VITIS_KERNEL_POS_MIN, VITIS_KERNEL_POS_MAX);
  return 1;
}

static int shift_ok(Ctx *c, int shift, const char *what) {
  if (shift < VITIS_SHIFT_MIN || shift > VITIS_SHIFT_MAX)
    return DECLINE(c, "%s %d is outside the kernels' [%d, %d]", what, shift, VITIS_SHIFT_MIN,
                   VITIS_SHIFT_MAX);
  return 1;
}

static int op_is(Ctx *c, size_t i, const char *op) {
  const char *t = c->host->node_op_type(c->g, c->u->nodes[i]);
  return t && strcmp(t, op) == 0;
}

static int64_t attr_int(Ctx *c, uint32_t node, const char *name, int64_t def) {
  int64_t v = def;
  QhStatus *st = c->host->node_attr_int(c->g, node, name, &v);
  c->host->status_free(st);
  return st ? def : v;
}

static float attr_float(Ctx *c, uint32_t node, const char *name, float def) {
  float v = def;
  QhStatus *st = c->host->node_attr_float(c->g, node, name, &v);
  c->host->status_free(st);
  return st ? def : v;
}

/* n ints (def when absent); 0 when present with another count. */
static int attr_ints(Ctx *c, uint32_t node, const char *name, size_t n, int64_t def, int64_t *out) {
  const int64_t *v = NULL;
  size_t count = 0;
  for (size_t i = 0; i < n; i++)
    out[i] = def;
  QhStatus *st = c->host->node_attr_ints(c->g, node, name, &v, &count);
  if (st) {
    c->host->status_free(st);
    return 1;
  }
  if (count != n || !v)
    return 0;
  memcpy(out, v, n * sizeof *out);
  return 1;
}

static int no_auto_pad(Ctx *c, uint32_t node) {
  const char *s = NULL;
  QhStatus *st = c->host->node_attr_string(c->g, node, "auto_pad", &s);
  if (st) {
    c->host->status_free(st);
    return 1;
  }
  return !s || strcmp(s, "NOTSET") == 0 ? 1 : DECLINE(c, "auto_pad %s is not supported", s);
}

/* Bytes and shape of a constant unit input. */
static int constant(Ctx *c, uint32_t v, int32_t dtype, const void **data, int64_t *dims,
                    int32_t *rank, int64_t *numel) {
  size_t nbytes = 0;
  if (!(c->host->value_flags(c->g, v) & QH_VALUE_CONSTANT) || c->host->value_dtype(c->g, v) != dtype)
    return 0;
  QhStatus *st = c->host->value_data(c->g, v, data, &nbytes);
  if (!st)
    st = c->host->value_shape(c->g, v, dims, QH_MAX_RANK, rank);
  if (st) {
    c->host->status_free(st);
    return 0;
  }
  *numel = 1;
  for (int32_t i = 0; i < *rank; i++)
    *numel *= dims[i] < 0 ? 0 : dims[i];
  size_t esize = dtype == QH_DTYPE_INT8 ? 1 : 4;
  return *rank >= 0 && *data && nbytes == (size_t)*numel * esize;
}

/* A fused Clip's bounds in accumulator units (position acc): the clamp is exact only
 * when a bound lies on the accumulator's grid, as 0 and 6 do for every acc >= 0. */
static int clip_bounds(Ctx *c, Kernel *k, int acc) {
  int64_t b[2] = {INT64_MIN, INT64_MAX};
  for (int i = 0; i < 2; i++) {
    double v = ldexp(k->clip[i], acc);
    if (!isinf(v) && (v != floor(v) || fabs(v) > 0x1p62))
      return DECLINE(c, "Clip bound %g is not a multiple of the accumulator's step 2^-%d", k->clip[i], acc);
    b[i] = isinf(v) ? b[i] : (int64_t)v;
  }
  k->conv.clip_lo = k->lin.clip_lo = b[0], k->conv.clip_hi = k->lin.clip_hi = b[1];
  return 1;
}

/* Weight (and bias) of conv or linear: pack when k is being created. */
static int weighted(Ctx *c, Kernel *k, int pack, int64_t n_out, int ipos, int opos) {
  const QhNodeUnit *u = c->u;
  int wpos, bpos;
  const void *wd, *bd = NULL;
  int64_t dims[QH_MAX_RANK], numel;
  int32_t rank;
  if (u->n_inputs < 2 || u->input_roles[1] != QH_ROLE_WEIGHT)
    return DECLINE(c, "expected a weight as the second input");
  if (!qpos(c, u->input_qparams[1], QH_DTYPE_INT8, "the weight", &wpos))
    return 0;
  if (!constant(c, u->inputs[1], QH_DTYPE_INT8, &wd, dims, &rank, &numel))
    return DECLINE(c, "the weight is not an int8 constant");
  int acc = ipos + wpos, cut = acc - opos, lshift = 0;
  if (cut < 0 || cut > 16)
    return DECLINE(c, "shift_cut %d (ipos %d + wpos %d - opos %d) is outside the DPU's [0, 16]",
                   cut, ipos, wpos, opos);
  int32_t bdtype = 0;
  if (u->n_inputs > 2) {
    const QhQParams *bq = u->input_qparams[2];
    bdtype = bq && bq->dtype == QH_DTYPE_INT32 ? QH_DTYPE_INT32 : QH_DTYPE_INT8;
    int64_t bdims[QH_MAX_RANK], bnumel;
    int32_t brank;
    if (!qpos(c, bq, bdtype, "the bias", &bpos))
      return 0;
    if (!constant(c, u->inputs[2], bdtype, &bd, bdims, &brank, &bnumel) || bnumel != n_out)
      return DECLINE(c, "the bias is not a constant with one value per output channel");
    int sb = acc - bpos, lo = cut - 16 < 0 ? cut - 16 : 0;
    if (sb < lo || sb > 16)
      return DECLINE(c, "shift_bias %d (ipos %d + wpos %d - bpos %d) is outside the DPU's [%d, 16]",
                     sb, ipos, wpos, bpos, lo);
    /* a finer bias: the sum moves to the bias's position rather than the bias losing
     * bits, which the QDQ graph (and so any ONNX runtime) keeps */
    lshift = sb < 0 ? -sb : 0;
  }
  if (k->kind == K_CONV && (rank != 4 || dims[0] != n_out))
    return DECLINE(c, "the conv weight is not [co, ci/group, kh, kw]");
  if (k->kind == K_LINEAR && rank != 2)
    return DECLINE(c, "the weight is not 2-D");
  k->acc_lshift = lshift;
  acc += lshift;
  k->shift = cut + lshift + (k->act == VITIS_ACT_LEAKY ? VITIS_LEAKY_DEN_SHIFT : 0);
  if (k->act == VITIS_ACT_CLIP && !clip_bounds(c, k, acc))
    return 0;
  if (!pack)
    return 1;
  k->w = malloc((size_t)numel);
  k->bias = calloc((size_t)n_out, sizeof *k->bias);
  if (!k->w || !k->bias)
    return DECLINE(c, "out of memory");
  if (k->kind == K_LINEAR && !k->gemm_transb) { /* [K, N] -> [N][K] */
    for (int64_t i = 0; i < dims[0]; i++)
      for (int64_t j = 0; j < dims[1]; j++)
        k->w[j * dims[0] + i] = ((const int8_t *)wd)[i * dims[1] + j];
  } else {
    memcpy(k->w, wd, (size_t)numel);
  }
  for (int64_t j = 0; bd && j < n_out; j++) {
    int64_t b = bdtype == QH_DTYPE_INT32 ? ((const int32_t *)bd)[j] : ((const int8_t *)bd)[j];
    k->bias[j] = vitis_shift_round(b, bpos - acc);
  }
  return 1;
}

/* Clip's bound in input slot (1 min, 2 max): a float scalar constant (PyTorch's
 * Constant nodes are initializers by the time the host offers units), or def when the
 * slot is empty. */
static int clip_input(Ctx *c, uint32_t node, uint32_t slot, double def, double *out) {
  *out = def;
  uint32_t v = c->host->node_input(c->g, node, slot);
  if (v == QH_INVALID_ID)
    return 1;
  const void *d = NULL;
  int64_t dims[QH_MAX_RANK], numel;
  int32_t rank;
  float f;
  if (!constant(c, v, QH_DTYPE_FLOAT, &d, dims, &rank, &numel) || numel != 1)
    return DECLINE(c, "Clip's bounds must be float scalar constants");
  memcpy(&f, d, sizeof f);
  *out = f;
  return isnan(f) ? DECLINE(c, "Clip bound is NaN") : 1;
}

/* LeakyRelu's alpha as the DPU's n/256. */
static int leaky(Ctx *c, uint32_t node, Kernel *k) {
  float alpha = attr_float(c, node, "alpha", 0.01f);
  double num = (double)alpha * 256.0;
  if (num != floor(num) || num < 0 || num > 256)
    return DECLINE(c, "LeakyRelu alpha %g is not n/256 (the DPU computes x*26 >> 8)", (double)alpha);
  k->act = VITIS_ACT_LEAKY, k->leaky_num = (int)num;
  return 1;
}

static int fused_act(Ctx *c, Kernel *k) {
  k->act = VITIS_ACT_NONE;
  if (c->u->n_nodes < 2)
    return 1;
  if (op_is(c, 1, "Relu")) {
    k->act = VITIS_ACT_RELU;
    return 1;
  }
  if (op_is(c, 1, "Clip")) {
    k->act = VITIS_ACT_CLIP;
    if (!clip_input(c, c->u->nodes[1], 1, -INFINITY, &k->clip[0]) ||
        !clip_input(c, c->u->nodes[1], 2, INFINITY, &k->clip[1]))
      return 0;
    return k->clip[0] <= k->clip[1] ? 1 : DECLINE(c, "Clip with min > max");
  }
  if (!op_is(c, 1, "LeakyRelu"))
    return DECLINE(c, "only Relu, Clip or LeakyRelu may follow");
  return leaky(c, c->u->nodes[1], k);
}

static int analyze_conv(Ctx *c, Kernel *k, int pack, int ipos, int opos) {
  uint32_t node = c->u->nodes[0];
  int64_t dims[QH_MAX_RANK];
  int32_t rank = -1;
  QhStatus *st = c->host->value_shape(c->g, c->u->inputs[1], dims, QH_MAX_RANK, &rank);
  c->host->status_free(st);
  if (st || rank != 4)
    return DECLINE(c, "only 2-D convolution is supported");
  VitisConv *p = &k->conv;
  int64_t ks[2];
  if (!no_auto_pad(c, node))
    return 0;
  if (!attr_ints(c, node, "strides", 2, 1, p->stride) || !attr_ints(c, node, "pads", 4, 0, p->pad) ||
      !attr_ints(c, node, "dilations", 2, 1, p->dil) || !attr_ints(c, node, "kernel_shape", 2, -1, ks))
    return DECLINE(c, "malformed strides, pads, dilations or kernel_shape");
  p->group = attr_int(c, node, "group", 1);
  p->co = dims[0], p->kh = dims[2], p->kw = dims[3];
  p->ci = dims[1] * p->group;
  if ((ks[0] >= 0 && ks[0] != p->kh) || (ks[1] >= 0 && ks[1] != p->kw) || p->group < 1 ||
      p->co < 1 || dims[1] < 1 || p->co % p->group || p->stride[0] < 1 || p->stride[1] < 1 ||
      p->dil[0] < 1 || p->dil[1] < 1 || p->pad[0] < 0 || p->pad[1] < 0 || p->pad[2] < 0 || p->pad[3] < 0)
    return DECLINE(c, "invalid convolution geometry");
  if (!weighted(c, k, pack, p->co, ipos, opos))
    return 0;
  p->acc_lshift = k->acc_lshift, p->shift = k->shift, p->act = k->act, p->leaky_num = k->leaky_num;
  return 1;
}

static int analyze_linear(Ctx *c, Kernel *k, int pack, int ipos, int opos) {
  uint32_t node = c->u->nodes[0];
  int64_t dims[QH_MAX_RANK];
  int32_t rank = -1;
  k->matmul = op_is(c, 0, "MatMul");
  k->gemm_transb = !k->matmul && attr_int(c, node, "transB", 0) == 1;
  if (!k->matmul && (attr_int(c, node, "transA", 0) != 0 || attr_float(c, node, "alpha", 1) != 1 ||
                     attr_float(c, node, "beta", 1) != 1))
    return DECLINE(c, "Gemm with transA=1 or alpha, beta other than 1 is not supported");
  QhStatus *st = c->host->value_shape(c->g, c->u->inputs[1], dims, QH_MAX_RANK, &rank);
  c->host->status_free(st);
  if (st || rank != 2 || dims[0] < 1 || dims[1] < 1)
    return DECLINE(c, "the weight is not a 2-D constant");
  if (k->matmul && c->u->n_inputs != 2)
    return DECLINE(c, "MatMul with extra inputs");
  k->lin.n = k->gemm_transb ? dims[0] : dims[1];
  k->lin.k = k->gemm_transb ? dims[1] : dims[0];
  if (!weighted(c, k, pack, k->lin.n, ipos, opos))
    return 0;
  k->lin.acc_lshift = k->acc_lshift, k->lin.shift = k->shift, k->lin.act = k->act,
  k->lin.leaky_num = k->leaky_num;
  return 1;
}

static int analyze_binary(Ctx *c, Kernel *k, int opos) {
  int apos, bpos;
  if (c->u->n_inputs != 2)
    return DECLINE(c, "expected two inputs");
  if (!qpos(c, c->u->input_qparams[0], QH_DTYPE_INT8, "input 0", &apos) ||
      !qpos(c, c->u->input_qparams[1], QH_DTYPE_INT8, "input 1", &bpos))
    return 0;
  VitisBinary *p = &k->bin;
  p->relu = k->act == VITIS_ACT_RELU;
  if (k->act == VITIS_ACT_LEAKY || k->act == VITIS_ACT_CLIP)
    return DECLINE(c, "%s after %s is not fused", k->act == VITIS_ACT_CLIP ? "Clip" : "LeakyRelu", k->op);
  if (strcmp(k->op, "Mul") == 0) {
    p->op = VITIS_BINARY_MUL;
    p->shift = apos + bpos - opos;
    return shift_ok(c, p->shift, "the Mul shift");
  }
  int hi = apos > bpos ? apos : bpos, lo = apos < bpos ? apos : bpos;
  if (hi - lo > 15)
    return DECLINE(c, "Add shift_read %d (inputs at positions %d and %d) is above the DPU's 15",
                   hi - lo, apos, bpos);
  if (lo - opos < -15 || lo - opos > 15)
    return DECLINE(c, "Add shift_write %d (min ipos %d - opos %d) is outside the DPU's [-15, 15]",
                   lo - opos, lo, opos);
  p->op = VITIS_BINARY_ADD;
  p->a_lshift = hi - apos, p->b_lshift = hi - bpos, p->shift = hi - opos;
  return 1;
}

/* The constant factor of AveragePool -> Mul(c): c = mult / 2^mult_shift exactly. */
static int pool_factor(Ctx *c, Kernel *k) {
  k->pool.mult = 1, k->pool.mult_shift = 0;
  if (c->u->n_nodes < 2)
    return 1;
  if (c->u->n_inputs != 2)
    return DECLINE(c, "the Mul after the pool needs one constant factor");
  const void *d;
  int64_t dims[QH_MAX_RANK], numel;
  int32_t rank;
  double f;
  int fpos;
  if (!c->u->input_qparams[1] && constant(c, c->u->inputs[1], QH_DTYPE_FLOAT, &d, dims, &rank, &numel) &&
      numel == 1)
    f = *(const float *)d;
  else if (c->u->input_qparams[1] && qpos(c, c->u->input_qparams[1], QH_DTYPE_INT8, "the factor", &fpos) &&
           constant(c, c->u->inputs[1], QH_DTYPE_INT8, &d, dims, &rank, &numel) && numel == 1)
    f = ldexp(*(const int8_t *)d, -fpos);
  else
    return DECLINE(c, "the Mul after the pool is not by one constant");
  for (int s = 0; s <= 24; s++) {
    double m = ldexp(f, s);
    if (m == floor(m) && m > 0 && m <= (double)(1 << 20)) {
      k->pool.mult = (int64_t)m, k->pool.mult_shift = s;
      return 1;
    }
  }
  return DECLINE(c, "the pool factor %g is not k/2^n with n <= 24 (the DPU's form)", f);
}

static int analyze_pool(Ctx *c, Kernel *k, int ipos, int opos) {
  uint32_t node = c->u->nodes[0];
  VitisPool *p = &k->pool;
  p->is_max = strcmp(k->op, "MaxPool") == 0;
  p->shift = ipos - opos;
  if (!shift_ok(c, p->shift, "the pool shift"))
    return 0;
  if (strcmp(k->op, "GlobalAveragePool") != 0) {
    int64_t ks[2], dil[2];
    if (!no_auto_pad(c, node))
      return 0;
    if (!attr_ints(c, node, "kernel_shape", 2, -1, ks) || !attr_ints(c, node, "strides", 2, 1, p->stride) ||
        !attr_ints(c, node, "pads", 4, 0, p->pad) || !attr_ints(c, node, "dilations", 2, 1, dil) ||
        ks[0] < 1 || ks[1] < 1 || p->stride[0] < 1 || p->stride[1] < 1)
      return DECLINE(c, "only 2-D pooling with kernel_shape, strides, pads is supported");
    if (dil[0] != 1 || dil[1] != 1 || attr_int(c, node, "ceil_mode", 0) != 0)
      return DECLINE(c, "dilated pooling and ceil_mode=1 are not supported");
    p->kh = ks[0], p->kw = ks[1];
    p->count_include_pad = (int)attr_int(c, node, "count_include_pad", 0);
  } else {
    p->stride[0] = p->stride[1] = 1;
  }
  if (p->is_max && c->u->n_nodes > 1)
    return DECLINE(c, "MaxPool followed by Mul is not fused");
  if (!pool_factor(c, k))
    return 0;
  if (p->mult_shift + (p->shift > 0 ? p->shift : 0) > 40)
    return DECLINE(c, "the pool's factor and shift need more than 40 bits");
  return 1;
}

static int analyze_concat(Ctx *c, Kernel *k, int opos) {
  k->axis = attr_int(c, c->u->nodes[0], "axis", 1);
  k->n_in = c->u->n_inputs;
  if (k->n_in < 1)
    return DECLINE(c, "Concat without inputs");
  for (size_t i = 0; i < c->u->n_inputs; i++) {
    char what[32];
    int pos;
    snprintf(what, sizeof what, "input %zu", i);
    if (!qpos(c, c->u->input_qparams[i], QH_DTYPE_INT8, what, &pos) ||
        !shift_ok(c, pos - opos, "a Concat input's shift"))
      return 0;
  }
  return 1;
}

/* The shared analysis; with pack, k gets its own copies of weights and shifts. */
static int analyze(Ctx *c, Kernel *k, int pack) {
  const QhNodeUnit *u = c->u;
  int ipos = 0, opos;
  if (!u || u->struct_size < sizeof *u || !u->nodes || u->n_nodes < 1 || u->n_outputs != 1 ||
      !u->output_qparams || (u->n_inputs && (!u->inputs || !u->input_roles || !u->input_qparams)))
    return DECLINE(c, "malformed node unit");
  k->op = c->host->node_op_type(c->g, u->nodes[0]);
  if (!k->op || u->n_inputs < 1)
    return DECLINE(c, "malformed node unit");
  if (!qpos(c, u->output_qparams[0], QH_DTYPE_INT8, "the output", &opos))
    return 0;
  if (strcmp(k->op, "Concat") != 0 && !qpos(c, u->input_qparams[0], QH_DTYPE_INT8, "input 0", &ipos))
    return 0;
  const char *op = k->op;
  if (strcmp(op, "Conv") == 0 || strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0 ||
      strcmp(op, "Add") == 0) {
    if (!fused_act(c, k))
      return 0;
  } else if (u->n_nodes > 1 && !((strcmp(op, "AveragePool") == 0 || strcmp(op, "GlobalAveragePool") == 0) &&
                                 op_is(c, 1, "Mul"))) {
    return DECLINE(c, "unexpected fused op");
  }
  if (strcmp(op, "Conv") == 0)
    return k->kind = K_CONV, analyze_conv(c, k, pack, ipos, opos);
  if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0)
    return k->kind = K_LINEAR, analyze_linear(c, k, pack, ipos, opos);
  if (strcmp(op, "Add") == 0 || strcmp(op, "Mul") == 0)
    return k->kind = K_BINARY, analyze_binary(c, k, opos);
  if (strstr(op, "Pool"))
    return k->kind = K_POOL, analyze_pool(c, k, ipos, opos);
  if (strcmp(op, "Concat") == 0) {
    k->kind = K_CONCAT;
    if (!analyze_concat(c, k, opos))
      return 0;
    if (pack) {
      if (!(k->in_shift = calloc(k->n_in, sizeof *k->in_shift)) ||
          !(k->mid = calloc(k->n_in, sizeof *k->mid)))
        return DECLINE(c, "out of memory");
      for (size_t i = 0; i < k->n_in; i++) {
        int pos = 0;
        qpos(c, u->input_qparams[i], QH_DTYPE_INT8, "input", &pos);
        k->in_shift[i] = pos - opos;
      }
    }
    return 1;
  }
  k->kind = K_UNARY;
  if (u->n_inputs != 1)
    return DECLINE(c, "expected one input");
  k->act = strcmp(op, "Relu") == 0 ? VITIS_ACT_RELU : VITIS_ACT_NONE;
  if (strcmp(op, "LeakyRelu") == 0 && !leaky(c, u->nodes[0], k))
    return 0;
  if (strcmp(op, "Flatten") == 0)
    k->axis = attr_int(c, u->nodes[0], "axis", 1);
  k->shift = ipos - opos + (k->act == VITIS_ACT_LEAKY ? VITIS_LEAKY_DEN_SHIFT : 0);
  return shift_ok(c, k->shift, "the requantization shift");
}

static void kernel_destroy(void *kernel) {
  Kernel *k = kernel;
  if (!k)
    return;
  free(k->w), free(k->bias), free(k->in_shift), free(k->mid), free(k->in_nbytes);
  free(k);
}

static QhStatus *accept_unit(void *instance, const QhHostApi *host, const QhGraphView *graph,
                             const QhNodeUnit *unit) {
  (void)instance;
  char why[WHY_SIZE] = "";
  Ctx c = {host, graph, unit, why};
  Kernel k;
  memset(&k, 0, sizeof k);
  return analyze(&c, &k, 0) ? NULL : host->status_new(QH_ERR_UNSUPPORTED, why);
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *graph,
                        const QhNodeUnit *unit, void **out) {
  (void)instance;
  char why[WHY_SIZE] = "";
  Ctx c = {host, graph, unit, why};
  if (!out)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: NULL out_kernel");
  Kernel *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  if (!analyze(&c, k, 1)) {
    kernel_destroy(k);
    return host->status_new(QH_ERR_UNSUPPORTED, why);
  }
  k->n_in = unit->n_inputs;
  if (!(k->in_nbytes = calloc(k->n_in + 1, sizeof *k->in_nbytes))) {
    kernel_destroy(k);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  }
  *out = k;
  return NULL;
}

/* ---- reshape: the output shape from the input shapes ---- */

static int64_t numel_of(int32_t rank, const int64_t *dims) {
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++)
    n *= dims[i];
  return n;
}

static QhStatus *reshape_binary(Kernel *k, const QhHostApi *host, const QhTensorView *a,
                                const QhTensorView *b, QhTensorView *y) {
  VitisBinary *p = &k->bin;
  int32_t r = a->rank > b->rank ? a->rank : b->rank;
  int64_t as = 1, bs = 1;
  p->rank = r;
  for (int32_t d = r - 1; d >= 0; d--) { /* numpy broadcasting, right-aligned */
    int32_t da = d - (r - a->rank), db = d - (r - b->rank);
    int64_t na = da >= 0 ? a->dims[da] : 1, nb = db >= 0 ? b->dims[db] : 1;
    if (na != nb && na != 1 && nb != 1)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: inputs do not broadcast");
    p->dims[d] = na > nb ? na : nb;
    if (na == 0 || nb == 0)
      p->dims[d] = 0;
    p->a_stride[d] = na == 1 ? 0 : as;
    p->b_stride[d] = nb == 1 ? 0 : bs;
    as *= na, bs *= nb;
  }
  y->rank = r;
  memcpy(y->dims, p->dims, sizeof p->dims);
  return NULL;
}

static QhStatus *reshape_concat(Kernel *k, const QhHostApi *host, const QhTensorView *in,
                                QhTensorView *y) {
  int32_t r = in[0].rank;
  int64_t axis = k->axis < 0 ? k->axis + r : k->axis, total = 0;
  if (axis < 0 || axis >= r)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Concat axis out of range");
  for (size_t i = 0; i < k->n_in; i++) {
    if (in[i].rank != r)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Concat inputs differ in rank");
    for (int32_t d = 0; d < r; d++)
      if (d != axis && in[i].dims[d] != in[0].dims[d])
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Concat inputs differ in shape");
    k->mid[i] = in[i].dims[axis];
    total += k->mid[i];
  }
  k->outer = numel_of((int32_t)axis, in[0].dims);
  k->inner = numel_of(r - (int32_t)axis - 1, in[0].dims + axis + 1);
  y->rank = r;
  memcpy(y->dims, in[0].dims, sizeof y->dims);
  y->dims[axis] = total;
  return NULL;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs,
                         size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                         size_t *out_workspace) {
  Kernel *k = kernel;
  if (!k || !inputs || n_inputs != k->n_in || !outputs || n_outputs != 1 || !out_workspace ||
      outputs[0].struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  for (size_t i = 0; i < n_inputs; i++) {
    if (inputs[i].struct_size < sizeof(QhTensorView) || inputs[i].rank < 0 ||
        inputs[i].rank > QH_MAX_RANK)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: malformed input view");
    for (int32_t d = 0; d < inputs[i].rank; d++)
      if (inputs[i].dims[d] < 0)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: negative dimension");
  }
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  QhStatus *st = NULL;
  y->dtype = QH_DTYPE_INT8;
  y->rank = x->rank;
  memcpy(y->dims, x->dims, sizeof y->dims);
  if (k->kind == K_CONV || k->kind == K_POOL) {
    if (x->rank != 4 || (k->kind == K_CONV && x->dims[1] != k->conv.ci))
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: %s input must be NCHW%s", k->op,
                            k->kind == K_CONV ? " with the weight's channels" : "");
  }
  if (k->kind == K_CONV) {
    VitisConv *p = &k->conv;
    p->n = x->dims[0], p->h = x->dims[2], p->w = x->dims[3];
    p->oh = vitis_conv_out_size(p->h, p->kh, p->stride[0], p->pad[0], p->pad[2], p->dil[0]);
    p->ow = vitis_conv_out_size(p->w, p->kw, p->stride[1], p->pad[1], p->pad[3], p->dil[1]);
    y->dims[1] = p->co, y->dims[2] = p->oh, y->dims[3] = p->ow;
  } else if (k->kind == K_POOL) {
    VitisPool *p = &k->pool;
    p->n = x->dims[0], p->c = x->dims[1], p->h = x->dims[2], p->w = x->dims[3];
    if (strcmp(k->op, "GlobalAveragePool") == 0)
      p->kh = p->h, p->kw = p->w;
    p->oh = vitis_conv_out_size(p->h, p->kh, p->stride[0], p->pad[0], p->pad[2], 1);
    p->ow = vitis_conv_out_size(p->w, p->kw, p->stride[1], p->pad[1], p->pad[3], 1);
    if (p->kh * p->kw > (1 << 20))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: pooling window above 2^20 elements");
    y->dims[2] = p->oh, y->dims[3] = p->ow;
  } else if (k->kind == K_LINEAR) {
    if (x->rank < 1 || (!k->matmul && x->rank != 2) || x->dims[x->rank - 1] != k->lin.k)
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: %s input must end in K=%lld",
                            k->op, (long long)k->lin.k);
    k->rows = numel_of(x->rank - 1, x->dims);
    y->dims[x->rank - 1] = k->lin.n;
  } else if (k->kind == K_BINARY) {
    st = reshape_binary(k, host, &inputs[0], &inputs[1], y);
  } else if (k->kind == K_CONCAT) {
    st = reshape_concat(k, host, inputs, y);
  } else if (strcmp(k->op, "Flatten") == 0) {
    int64_t axis = k->axis < 0 ? k->axis + x->rank : k->axis;
    if (axis < 0 || axis > x->rank)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Flatten axis out of range");
    y->rank = 2;
    y->dims[0] = numel_of((int32_t)axis, x->dims);
    y->dims[1] = numel_of(x->rank - (int32_t)axis, x->dims + axis);
  }
  if (st)
    return st;
  y->layout = y->rank == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY;
  k->out_n = (size_t)numel_of(y->rank, y->dims);
  for (size_t i = 0; i < n_inputs; i++) /* constants too: an int32 bias is 4 bytes an element */
    k->in_nbytes[i] = numel_of(inputs[i].rank, inputs[i].dims) *
                      (inputs[i].dtype == QH_DTYPE_INT8 ? 1 : 4);
  *out_workspace = 0;
  return NULL;
}

/* ---- run: split over the host's pool ---- */

typedef struct {
  const Kernel *k;
  const QhTensorView *in;
  int8_t *y;
} Job;

#define BLOCK 4096

static void conv_task(void *user, size_t i, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const Kernel *k = j->k;
  vitis_conv_plane(&k->conv, j->in[0].data, k->w, k->bias, j->y, (int64_t)i / k->conv.co,
                   (int64_t)i % k->conv.co);
}

static void linear_task(void *user, size_t i, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  vitis_linear_row(&j->k->lin, j->in[0].data, j->k->w, j->k->bias, j->y, (int64_t)i);
}

static void pool_task(void *user, size_t i, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  vitis_pool_plane(&j->k->pool, j->in[0].data, j->y, (int64_t)i);
}

static void block_task(void *user, size_t blk, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const Kernel *k = j->k;
  size_t start = blk * BLOCK, end = start + BLOCK < k->out_n ? start + BLOCK : k->out_n;
  if (k->kind == K_BINARY)
    vitis_binary(&k->bin, j->in[0].data, j->in[1].data, j->y, start, end);
  else
    vitis_unary((const int8_t *)j->in[0].data + start, j->y + start, end - start, k->shift, k->act,
                k->leaky_num);
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx,
                     const QhTensorView *inputs, size_t n_inputs, QhTensorView *outputs,
                     size_t n_outputs, void *workspace, size_t workspace_bytes) {
  (void)workspace, (void)workspace_bytes;
  Kernel *k = kernel;
  if (!k || !inputs || n_inputs != k->n_in || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  /* the inputs run() reads as int8 activations: all of a Concat, both of an eltwise op, else
   * the first (weights and bias were packed by create) */
  size_t n_read = k->kind == K_CONCAT ? n_inputs : k->kind == K_BINARY ? 2 : 1;
  for (size_t i = 0; i < n_inputs; i++)
    if ((i < n_read && inputs[i].dtype != QH_DTYPE_INT8) || inputs[i].nbytes != (size_t)k->in_nbytes[i] ||
        (inputs[i].nbytes && !inputs[i].data))
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "run: input %zu differs from reshape's", i);
  if (outputs[0].dtype != QH_DTYPE_INT8 || outputs[0].nbytes != k->out_n || (k->out_n && !outputs[0].data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output differs from reshape's");
  if (k->out_n == 0)
    return NULL;
  Job job = {k, inputs, outputs[0].data};
  switch (k->kind) {
  case K_CONV:
    return host->parallel_for(ctx, (size_t)(k->conv.n * k->conv.co), conv_task, &job);
  case K_LINEAR:
    return host->parallel_for(ctx, (size_t)k->rows, linear_task, &job);
  case K_POOL:
    return host->parallel_for(ctx, (size_t)(k->pool.n * k->pool.c), pool_task, &job);
  case K_CONCAT: {
    const int8_t *ins[64];
    if (k->n_in > 64)
      return host->status_new(QH_ERR_UNSUPPORTED, "run: Concat of more than 64 inputs");
    for (size_t i = 0; i < k->n_in; i++)
      ins[i] = inputs[i].data;
    vitis_concat(k->n_in, ins, k->mid, k->in_shift, k->outer, k->inner, job.y);
    return NULL;
  }
  default:
    return host->parallel_for(ctx, (k->out_n + BLOCK - 1) / BLOCK, block_task, &job);
  }
}

/* ---- the lowering group ---- */

#define KERNEL(name, kid)                                                                         \
  static const QhKernelOps name = {QH_STRUCT_HEADER(QhKernelOps), .id = kid,                     \
                                   .input_layout = QH_LAYOUT_NCHW, .output_layout = QH_LAYOUT_NCHW, \
                                   .create = create, .reshape = reshape, .run = run,              \
                                   .destroy = kernel_destroy}
KERNEL(conv_kernel, "dpu_conv2d_nchw_qs8_shift");
KERNEL(linear_kernel, "dpu_linear_qs8_shift");
KERNEL(eltwise_kernel, "dpu_eltwise_qs8_shift");
KERNEL(pool_kernel, "dpu_pool_nchw_qs8_shift");
KERNEL(concat_kernel, "dpu_concat_qs8_shift");
KERNEL(unary_kernel, "dpu_unary_qs8_shift");


/* PATTERN(id, kernel, mask, ops...); mask bit 1 lets the second op (the DPU factor's Mul,
 * Clip's bounds) read constants from outside the unit */
#define PATTERN(name, kern, mask, ...)                                                       \
  static const char *const name##_ops[] = {__VA_ARGS__};                                    \
  static const QhLoweringPattern name = {QH_STRUCT_HEADER(QhLoweringPattern), .id = #name,  \
                                         .ops = name##_ops,                                 \
                                         .n_ops = sizeof name##_ops / sizeof name##_ops[0], \
                                         .extra_inputs_mask = mask, .kernel = &kern,        \
                                         .accept = accept_unit}
PATTERN(conv_relu, conv_kernel, 0, "Conv", "Relu");
PATTERN(conv_leaky_relu, conv_kernel, 0, "Conv", "LeakyRelu");
PATTERN(conv_clip, conv_kernel, 0x2u, "Conv", "Clip");
PATTERN(conv, conv_kernel, 0, "Conv");
PATTERN(gemm_clip, linear_kernel, 0x2u, "Gemm", "Clip");
PATTERN(gemm_relu, linear_kernel, 0, "Gemm", "Relu");
PATTERN(gemm, linear_kernel, 0, "Gemm");
PATTERN(matmul_relu, linear_kernel, 0, "MatMul", "Relu");
PATTERN(matmul, linear_kernel, 0, "MatMul");
PATTERN(add_relu, eltwise_kernel, 0, "Add", "Relu");
PATTERN(add, eltwise_kernel, 0, "Add");
PATTERN(mul, eltwise_kernel, 0, "Mul");
PATTERN(maxpool, pool_kernel, 0, "MaxPool");
PATTERN(avgpool_dpu_factor, pool_kernel, 0x2u, "AveragePool", "Mul");
PATTERN(avgpool, pool_kernel, 0, "AveragePool");
PATTERN(global_avgpool_dpu_factor, pool_kernel, 0x2u, "GlobalAveragePool", "Mul");
PATTERN(global_avgpool, pool_kernel, 0, "GlobalAveragePool");
PATTERN(concat, concat_kernel, 0, "Concat");
PATTERN(relu, unary_kernel, 0, "Relu");
PATTERN(leaky_relu, unary_kernel, 0, "LeakyRelu");
PATTERN(flatten, unary_kernel, 0, "Flatten");

/* Fused patterns first: the first pattern that matches and accepts a unit wins. */
static const QhLoweringPattern *const patterns[] = {
    &conv_relu, &conv_leaky_relu, &conv_clip, &conv, &gemm_relu, &gemm_clip, &gemm,
    &matmul_relu, &matmul, &add_relu, &add, &mul, &maxpool, &avgpool_dpu_factor, &avgpool,
    &global_avgpool_dpu_factor, &global_avgpool, &concat, &relu, &leaky_relu, &flatten};

const QhLoweringOps example_vitis_lowering = {QH_STRUCT_HEADER(QhLoweringOps), patterns,
                                              sizeof patterns / sizeof patterns[0]};
