/* The fbgemm plugin's uint8 units between its convolutions, so that a ResNet or a
 * MobileNetV3 runs conv -> add -> pool -> conv without leaving NHWC uint8 or going through
 * the host: Add and Mul (+Relu) of two same-shape tensors or of a tensor and a per-channel
 * vector (squeeze-excitation's form), MaxPool with its output on its input's grid,
 * AveragePool (any pads, ceil_mode, count_include_pad), GlobalAveragePool, Flatten and
 * Reshape to 2-D, and the table units: the fixed-qparams activations (Sigmoid, Tanh,
 * HardSigmoid) and HardSwish. This file analyses the units and drives the kernels; the
 * kernels are plugins/common's (u8-kernels.c: Add, Mul, the activation tables;
 * u8-layout.c: pooling, NHWC to NCHW), shared with the x86 plugin, and give the bytes of
 * the host's reference run of the same QDQ unit (framework/exec/kernels/elementwise.c,
 * activation.c, pool.c, qdq.c); PyTorch's quantized add and mul do the same
 * dequantize-op-requantize in fp32 with round half to even, and a uint8 activation has 256
 * values, so its table is the op exactly. MaxPool, Flatten and Reshape to 2-D on a shared
 * grid move bytes only. The vector clones are chosen from the
 * instance's kernel path; the portable-C path (QHOST_CPU_DISABLE=avx512vnni,avxvnni,avx2)
 * runs the scalar twins, which do the same IEEE operations in the same order. Shapes still
 * unknown at accept are checked at reshape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/u8-kernels.h"
#include "../common/u8-layout.h"
#include "../common/unit-query.h"
#include "fbgemm.h"

enum { U_ADD, U_MUL, U_MAXPOOL, U_AVGPOOL, U_GAP, U_FLATTEN, U_RESHAPE,
       U_SIGMOID, U_TANH, U_HSIGMOID, U_HSWISH, /* U_SIGMOID.. in QhU8Act order */
       U_N_OPS };
static const char *const op_names[U_N_OPS] = {"Add", "Mul", "MaxPool", "AveragePool", "GlobalAveragePool",
                                              "Flatten", "Reshape", "Sigmoid", "Tanh", "HardSigmoid",
                                              "HardSwish"};
#define IS_BINARY(op) ((op) == U_ADD || (op) == U_MUL)
#define IS_ACT(op) ((op) >= U_SIGMOID && (op) <= U_HSWISH)
#define IS_POOL(op) ((op) == U_MAXPOOL || (op) == U_AVGPOOL)

#define CHUNK 65536 /* Add, Mul and table elements per parallel task */

typedef struct {
  const FbInstance *inst;
  int op, relu, plain; /* plain: the scalar twins (the portable-C kernel path) */
  int isa;             /* QH_U8_ISA_* of the Add and Mul clones */
  int vbmi;            /* table lookups with AVX-512 VBMI (not on the portable-C path) */
  int ceil_mode, include_pad; /* pools: ONNX's ceil_mode output size; AveragePool's count_include_pad */
  float alpha, beta;          /* HardSigmoid */
  uint8_t lut[256];           /* the activations: the whole unit */
  int64_t kh, kw, sh, sw, pad[4];
  int64_t shape[2]; /* Reshape's target */
  float sa, sb, so;
  int32_t za, zb, zo;
  float dq[256]; /* AveragePool, GlobalAveragePool: the input's dequantized values */
  /* set by reshape */
  int reshaped, rank, brank, bcast; /* bcast: 0 same shapes, 1 b per channel, 2 a per channel */
  int64_t dims[QH_MAX_RANK], bdims[QH_MAX_RANK];
  int64_t n, h, w, c, oh, ow, vn; /* vn: the per-channel operand's batch */
  size_t in_bytes, b_bytes, out_bytes;
} U8Op;

static int same_grid(const QhQParams *a, const QhQParams *b) {
  return a->scale[0] == b->scale[0] && a->zero_point[0] == b->zero_point[0];
}

static const char *window_problem(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k) {
  int64_t ks[2], s[2], d[2];
  const char *why = uq_window_2d(host, g, node, "only 2-D pooling is supported (kernel_shape, strides, pads, dilations of 2)", ks, s, k->pad, d);
  if (why)
    return why;
  k->ceil_mode = uq_attr_int(host, g, node, "ceil_mode", 0) != 0;
  k->include_pad = uq_attr_int(host, g, node, "count_include_pad", 0) != 0;
  if (uq_attr_int(host, g, node, "storage_order", 0) != 0)
    return "MaxPool with storage_order=1 is not supported";
  if (d[0] != 1 || d[1] != 1)
    return "dilated pooling is not supported";
  k->kh = ks[0], k->kw = ks[1], k->sh = s[0], k->sw = s[1];
  if (k->kh < 1 || k->kw < 1 || k->sh < 1 || k->sw < 1)
    return "invalid pooling window";
  /* any padding: a window with no input tap gives the host's result (u8-layout.h) */
  for (int i = 0; i < 4; i++)
    if (k->pad[i] < 0)
      return "negative pads";
  return NULL;
}

static const char *analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, U8Op *k) {
  k->op = -1;
  for (int i = 0; i < U_N_OPS; i++)
    if (uq_op_is(host, g, u->nodes[0], op_names[i]))
      k->op = i;
  if (k->op < 0)
    return "op other than Add, Mul, MaxPool, AveragePool, GlobalAveragePool, Flatten, Reshape, Sigmoid, Tanh, "
           "HardSigmoid or HardSwish";
  if (u->n_nodes == 2) {
    if (!IS_BINARY(k->op) || !uq_op_is(host, g, u->nodes[1], "Relu"))
      return "only Add and Mul fuse a following Relu";
    k->relu = 1;
  } else if (u->n_nodes != 1) {
    return "unexpected ops in the unit";
  }
  size_t want = IS_BINARY(k->op) ? 2 : 1;
  if (k->op == U_RESHAPE) {
    /* the target shape is read here; the host may or may not pass it as a unit input */
    if (uq_attr_int(host, g, u->nodes[0], "allowzero", 0) != 0)
      return "Reshape with allowzero=1 is not supported";
    if (!uq_const_int64s(host, g, u->nodes[0], 1, 2, k->shape))
      return "only Reshape to 2-D with a constant int64 shape is supported";
  } else if (u->n_inputs != want) {
    return IS_BINARY(k->op) ? "Add and Mul need exactly two inputs" : "expected exactly one input";
  }
  const char *p;
  for (size_t i = 0; i < want; i++) {
    if (u->input_roles[i] != QH_ROLE_ACTIVATION || (host->value_flags(g, u->inputs[i]) & QH_VALUE_CONSTANT))
      return "constant inputs are not supported";
    if ((p = uq_act_problem(u->input_qparams[i], 0)))
      return p;
  }
  if ((p = uq_act_problem(u->output_qparams[0], 1)))
    return p;
  if (host->node_output(g, u->nodes[0], 1) != QH_INVALID_ID)
    return "a second output (MaxPool's Indices) is not supported";
  const QhQParams *a = u->input_qparams[0], *y = u->output_qparams[0];
  k->sa = a->scale[0], k->za = a->zero_point[0], k->so = y->scale[0], k->zo = y->zero_point[0];
  uint32_t node = u->nodes[0];
  int64_t d[QH_MAX_RANK], d2[QH_MAX_RANK];
  int32_t rank = uq_input_shape(host, g, u, 0, d);
  switch (k->op) {
  case U_ADD:
  case U_MUL: {
    k->sb = u->input_qparams[1]->scale[0], k->zb = u->input_qparams[1]->zero_point[0];
    int32_t r2 = uq_input_shape(host, g, u, 1, d2);
    if (rank >= 0 && r2 >= 0 && (rank != r2 || memcmp(d, d2, (size_t)rank * sizeof *d) != 0) &&
        !(rank == 4 && r2 == 4 && (uq_channel_operand(d2, d) || uq_channel_operand(d, d2))))
      return "broadcasting Add and Mul other than per channel ([N,C,H,W] with [N or 1,C,1,1]) are not supported";
    break;
  }
  case U_MAXPOOL:
  case U_AVGPOOL:
    /* PyTorch's quantized max_pool2d keeps the input's qparams; another grid would need
     * a requantization this kernel does not do (AveragePool quantizes its mean anyway) */
    if (k->op == U_MAXPOOL && !same_grid(a, y))
      return "MaxPool whose output qparams differ from its input's is not supported";
    if (rank >= 0 && rank != 4)
      return "only 2-D pooling is supported";
    return window_problem(host, g, node, k);
  case U_HSIGMOID:
    k->alpha = uq_attr_float(host, g, node, "alpha", 0.2f);
    k->beta = uq_attr_float(host, g, node, "beta", 0.5f);
    if (!isfinite(k->alpha) || !isfinite(k->beta))
      return "HardSigmoid with a non-finite alpha or beta";
    break;
  case U_GAP:
    if (rank >= 0 && rank != 4)
      return "only 2-D GlobalAveragePool is supported";
    break;
  case U_FLATTEN: {
    int64_t axis = uq_attr_int(host, g, node, "axis", 1);
    if (axis != 1)
      return "Flatten with an axis other than 1 is not supported";
    if (!same_grid(a, y))
      return "Flatten whose output qparams differ from its input's is not supported";
    break;
  }
  case U_RESHAPE:
    if (!same_grid(a, y))
      return "Reshape whose output qparams differ from its input's is not supported";
    break;
  }
  return NULL;
}

static QhStatus *accept(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  (void)instance;
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes < 1 || !u->nodes || u->n_inputs < 1 ||
      !u->inputs || !u->input_roles || !u->input_qparams || u->n_outputs != 1 || !u->outputs ||
      !u->output_qparams)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "malformed node unit");
  U8Op k;
  memset(&k, 0, sizeof k);
  const char *p = analyze(host, g, u, &k);
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  if (!instance || !out)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  QhStatus *st = accept(instance, host, g, u);
  if (st)
    return st;
  U8Op *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  analyze(host, g, u, k);
  k->inst = instance;
  /* FB_ISA_AVX512VNNI and FB_ISA_AMX imply AVX-512 F/BW/VL (plugin.c's pick_isa) */
  k->plain = k->inst->isa <= FB_ISA_PACKED_C;
  k->isa = k->inst->isa >= FB_ISA_AVX512VNNI ? QH_U8_ISA_AVX512 : QH_U8_ISA_AVX2;
  const uint64_t vbmi = QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VBMI;
  k->vbmi = !k->plain && (host->cpu_features() & vbmi) == vbmi;
  for (int q = 0; q < 256; q++)
    k->dq[q] = (float)(q - k->za) * k->sa;
  /* Sigmoid, Tanh, HardSigmoid, HardSwish: the host's formula over the 256 inputs */
  if (IS_ACT(k->op))
    qh_u8_act_lut((QhU8Act)(k->op - U_SIGMOID), k->alpha, k->beta, k->sa, k->za, k->so, k->zo, k->lut);
  *out = k;
  return NULL;
}

static void destroy(void *kernel) { free(kernel); }

static QhStatus *reshape_add(U8Op *k, const QhHostApi *host, const QhTensorView *x, const QhTensorView *b,
                             QhTensorView *y) {
  if (!uq_u8_view_ok(b))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, k->op == U_MUL ? "reshape: Mul input must be a uint8 tensor"
                                                                     : "reshape: Add input must be a uint8 tensor");
  if (b->rank == x->rank && b->layout == x->layout && memcmp(b->dims, x->dims, (size_t)x->rank * sizeof *x->dims) == 0)
    return NULL;
  /* the per-channel form, channels last: [N, H, W, C] with [N or 1, 1, 1, C] either way round */
  if (x->rank != 4 || b->rank != 4 || x->layout != QH_LAYOUT_NHWC || b->layout != QH_LAYOUT_NHWC)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, k->op == U_MUL ? "reshape: Mul inputs differ other than per channel"
                                                                     : "reshape: Add inputs differ other than per channel");
  int64_t xd[4] = {x->dims[0], x->dims[3], x->dims[1], x->dims[2]};
  int64_t bd[4] = {b->dims[0], b->dims[3], b->dims[1], b->dims[2]};
  if (uq_channel_operand(bd, xd))
    k->bcast = 1;
  else if (uq_channel_operand(xd, bd))
    k->bcast = 2;
  else
    return host->status_new(QH_ERR_INVALID_ARGUMENT,
                            k->op == U_MUL
                                ? "reshape: Mul inputs differ other than per channel ([N,H,W,C] with [N or 1,1,1,C])"
                                : "reshape: Add inputs differ other than per channel ([N,H,W,C] with [N or 1,1,1,C])");
  const QhTensorView *full = k->bcast == 1 ? x : b, *vec = k->bcast == 1 ? b : x;
  memcpy(y->dims, full->dims, sizeof y->dims);
  k->n = full->dims[0], k->h = full->dims[1], k->w = full->dims[2], k->c = full->dims[3];
  k->vn = vec->dims[0];
  return NULL;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  U8Op *k = kernel;
  if (!host)
    return NULL;
  size_t want = k && IS_BINARY(k->op) ? 2 : 1;
  if (!k || !inputs || n_inputs < want || (k->op != U_RESHAPE && n_inputs != want) || !outputs || n_outputs != 1 || !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(x) || y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: input must be a uint8 tensor");
  k->reshaped = 0;
  k->bcast = 0;
  y->dtype = QH_DTYPE_UINT8;
  y->rank = x->rank;
  y->layout = x->layout;
  memcpy(y->dims, x->dims, sizeof y->dims);
  QhStatus *st = NULL;
  if (IS_BINARY(k->op)) {
    st = reshape_add(k, host, x, &inputs[1], y);
  } else if (IS_ACT(k->op)) {
    /* elementwise: the output is the input's shape and layout */
  } else if (k->op == U_FLATTEN || k->op == U_RESHAPE) {
    /* the output's bytes are the input's in ONNX (NCHW) order: a plain copy unless NHWC
     * with more than one pixel */
    int64_t onnx[QH_MAX_RANK], inner = 1;
    memcpy(onnx, x->dims, sizeof onnx);
    k->n = 0;
    if (x->rank == 4 && x->layout == QH_LAYOUT_NHWC) {
      k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
      onnx[1] = k->c, onnx[2] = k->h, onnx[3] = k->w;
    }
    if (x->rank < 1)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Flatten or Reshape of a scalar");
    for (int32_t i = 1; i < x->rank; i++)
      inner *= onnx[i];
    y->rank = 2, y->dims[0] = onnx[0], y->dims[1] = inner;
    if (k->op == U_RESHAPE && !uq_resolve_shape(onnx, x->rank, k->shape, 2, y->dims))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Reshape's shape does not fit its input");
  } else {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: pooling input must be 4-D NHWC");
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
    if (k->op == U_GAP) {
      k->oh = k->ow = 1;
    } else {
      int64_t eh = k->h + k->pad[0] + k->pad[2] - k->kh, ew = k->w + k->pad[1] + k->pad[3] - k->kw;
      if (eh < 0 || ew < 0)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: pooling input smaller than the window");
      if (k->ceil_mode) {
        /* ONNX's ceil_mode (the host's conv-window.c): one more window where the stride
         * does not divide, dropped when it would start in the end padding */
        k->oh = (eh + k->sh - 1) / k->sh + 1, k->ow = (ew + k->sw - 1) / k->sw + 1;
        if ((k->oh - 1) * k->sh >= k->h + k->pad[0])
          k->oh--;
        if ((k->ow - 1) * k->sw >= k->w + k->pad[1])
          k->ow--;
      } else {
        k->oh = eh / k->sh + 1, k->ow = ew / k->sw + 1;
      }
    }
    y->dims[1] = k->oh, y->dims[2] = k->ow;
  }
  if (st)
    return st;
  if (y->rank != 4)
    y->layout = QH_LAYOUT_ANY;
  k->rank = x->rank;
  memcpy(k->dims, x->dims, sizeof k->dims);
  k->in_bytes = uq_numel(x);
  k->out_bytes = uq_numel(y);
  k->b_bytes = IS_BINARY(k->op) ? uq_numel(&inputs[1]) : 0;
  if (IS_BINARY(k->op)) {
    k->brank = inputs[1].rank;
    memcpy(k->bdims, inputs[1].dims, sizeof k->bdims);
  }
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

/* Same-shape Add or Mul (+Relu): plugins/common/u8-kernels.c's clone for the kernel path,
 * or its scalar twin on the portable-C path. */
static void add_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t i0 = index * CHUNK, n = i0 + CHUNK < j->n ? CHUNK : j->n - i0;
  QhU8Binary p = {.mul = k->op == U_MUL, .relu = k->relu, .sa = k->sa, .sb = k->sb, .so = k->so, .za = k->za, .zb = k->zb,
                  .zo = k->zo};
  if (k->plain)
    qh_u8_binary_same_ref(&p, j->a + i0, j->b + i0, j->y + i0, n);
  else
    qh_u8_binary_same(&p, k->isa, j->a + i0, j->b + i0, j->y + i0, n);
}

/* Pixels [p0, p0 + j->n) of image n of a per-channel Add or Mul: plugins/common/u8-kernels.c. */
static void channels_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t hw = (size_t)(k->h * k->w), tasks = (hw + j->n - 1) / j->n, n = index / tasks;
  size_t p0 = index % tasks * j->n, p1 = p0 + j->n < hw ? p0 + j->n : hw, C = (size_t)k->c;
  const uint8_t *vec = j->b + (k->vn == 1 ? 0 : n * C);
  /* the full operand's qparams first */
  QhU8Binary p = {.mul = k->op == U_MUL, .relu = k->relu, .so = k->so, .zo = k->zo};
  p.sa = k->bcast == 1 ? k->sa : k->sb, p.za = k->bcast == 1 ? k->za : k->zb;
  p.sb = k->bcast == 1 ? k->sb : k->sa, p.zb = k->bcast == 1 ? k->zb : k->za;
  size_t off = (n * hw + p0) * C;
  if (k->plain)
    qh_u8_binary_channels_ref(&p, j->a + off, vec, j->y + off, p1 - p0, C);
  else
    qh_u8_binary_channels(&p, k->isa, j->a + off, vec, j->y + off, p1 - p0, C);
}

/* CHUNK elements of a table unit: plugins/common's AVX-512 VBMI lookup where the CPU has
 * it, else (and on the portable-C path) its scalar twin. */
static void lut_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  size_t i0 = index * CHUNK, n = i0 + CHUNK < j->n ? CHUNK : j->n - i0;
  if (j->k->vbmi)
    qh_u8_lut_apply_vbmi(j->k->lut, j->a + i0, j->y + i0, n);
  else
    qh_u8_lut_apply(j->k->lut, j->a + i0, j->y + i0, n);
}

/* One output row (n, oh) of MaxPool (on the shared grid: no requantization), AveragePool,
 * or one image of GlobalAveragePool: plugins/common/u8-layout.c, which gives the host's
 * bytes. */
static void pool_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  int kind = k->op == U_GAP ? QH_U8_POOL_GLOBAL : k->op == U_AVGPOOL ? QH_U8_POOL_AVG : QH_U8_POOL_MAX;
  QhU8Pool p = {.kind = kind, .include_pad = k->include_pad, .h = k->h, .w = k->w, .c = k->c,
                .oh = k->oh, .ow = k->ow, .kh = k->kh, .kw = k->kw, .sh = k->sh, .sw = k->sw,
                .plain = k->plain, .dq = k->dq, .so = k->so, .zo = k->zo};
  memcpy(p.pad, k->pad, sizeof p.pad);
  int64_t n = (int64_t)index / k->oh, oh = (int64_t)index % k->oh;
  qh_u8_pool_row(&p, j->a + (size_t)(n * k->h * k->w * k->c), oh, j->y + (size_t)((n * k->oh + oh) * k->ow * k->c));
}

/* One image of Flatten from NHWC with more than one pixel: ONNX's order is [n, c*h*w]. */
static void flatten_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, hw = (size_t)(k->h * k->w), per = hw * C;
  qh_u8_nhwc_to_nchw(j->a + index * per, j->y + index * per, hw, C, NULL);
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  (void)workspace, (void)workspace_bytes;
  U8Op *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || !outputs || n_outputs != 1 || n_inputs < (IS_BINARY(k->op) ? 2u : 1u) ||
      (k->op != U_RESHAPE && n_inputs != (IS_BINARY(k->op) ? 2u : 1u)))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (k->op == U_RESHAPE)
    n_inputs = 1; /* a shape input, if the host passes one, was read at create */
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  for (size_t i = 0; i < n_inputs; i++) {
    const QhTensorView *x = &inputs[i];
    int rank = i ? k->brank : k->rank;
    const int64_t *dims = i ? k->bdims : k->dims;
    size_t bytes = i ? k->b_bytes : k->in_bytes;
    if (!uq_u8_view_ok(x) || x->rank != rank || memcmp(x->dims, dims, (size_t)rank * sizeof *dims) ||
        x->nbytes != bytes || (bytes && !x->data))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  }
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  Job j = {k, inputs[0].data, n_inputs > 1 ? inputs[1].data : NULL, y->data, k->in_bytes};
  size_t tasks;
  FbTaskFn task;
  switch (k->op) {
  case U_ADD:
  case U_MUL:
    if (k->bcast) {
      if (k->bcast == 2) /* a is the per-channel one: swap (Add and Mul commute exactly in IEEE) */
        j.a = inputs[1].data, j.b = inputs[0].data;
      size_t hw = (size_t)(k->h * k->w), per = CHUNK / (size_t)(k->c > 0 ? k->c : 1);
      j.n = per ? per : 1; /* pixels per task */
      tasks = (size_t)k->n * ((hw + j.n - 1) / j.n), task = channels_task;
    } else {
      tasks = (j.n + CHUNK - 1) / CHUNK, task = add_task;
    }
    break;
  case U_FLATTEN:
  case U_RESHAPE:
    if (k->n > 0 && k->h * k->w > 1) {
      tasks = (size_t)k->n, task = flatten_task;
      break;
    }
    /* a pure view (one pixel, or not NHWC): the same bytes in the same order */
    if (y->data != inputs[0].data)
      memcpy(y->data, inputs[0].data, k->in_bytes);
    return NULL;
  case U_SIGMOID:
  case U_TANH:
  case U_HSIGMOID:
  case U_HSWISH:
    tasks = (j.n + CHUNK - 1) / CHUNK, task = lut_task;
    break;
  default: /* MaxPool, AveragePool, GlobalAveragePool (oh = 1) */
    tasks = (size_t)(k->n * k->oh), task = pool_task;
    break;
  }
  if (tasks == 0)
    return NULL;
  return host->parallel_for(ctx, tasks, task, &j);
}

#define U8KERNEL(name, kid)                                                                                    \
  const QhKernelOps name = {QH_STRUCT_HEADER(QhKernelOps), .id = kid, .input_layout = QH_LAYOUT_NHWC,         \
                            .output_layout = QH_LAYOUT_NHWC, .create = create, .reshape = reshape, .run = run, \
                            .destroy = destroy}
U8KERNEL(fb_add_kernel, "fbgemm_add_nhwc_qu8");
U8KERNEL(fb_mul_kernel, "fbgemm_mul_nhwc_qu8");
U8KERNEL(fb_maxpool_kernel, "fbgemm_maxpool2d_nhwc_qu8");
U8KERNEL(fb_avgpool_kernel, "fbgemm_avgpool2d_nhwc_qu8");
U8KERNEL(fb_sigmoid_kernel, "fbgemm_sigmoid_lut_qu8");
U8KERNEL(fb_tanh_kernel, "fbgemm_tanh_lut_qu8");
U8KERNEL(fb_hardsigmoid_kernel, "fbgemm_hardsigmoid_lut_qu8");
U8KERNEL(fb_hardswish_kernel, "fbgemm_hardswish_lut_qu8");
U8KERNEL(fb_gap_kernel, "fbgemm_global_avgpool_nhwc_qu8");
U8KERNEL(fb_flatten_kernel, "fbgemm_flatten_nhwc_qu8");
U8KERNEL(fb_reshape_kernel, "fbgemm_reshape_2d_nhwc_qu8");

QhStatus *fb_accept_u8op(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  return accept(instance, host, g, u);
}
