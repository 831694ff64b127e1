/* The qnnpack plugin's own kernels for the units XNNPACK (2022) has no operator for, so
 * that a model's int8 chain stays on the plugin: HardSwish and HardSigmoid (no qu8
 * operators for them in the header) as 256-entry tables, and Flatten and Reshape (a byte move: no copy operator
 * reorders NHWC into ONNX's order). The tables are plugins/common's, built with the
 * host's float formula (DequantizeLinear -> op -> QuantizeLinear over the 256 inputs), so
 * their bytes equal the reference run's. Flatten and Reshape are claimed only on
 * a shared grid (PyTorch's qnnpack config gives them their input's qparams), where the
 * reference run's bytes are the input's in ONNX (NCHW) order: a plain copy unless the
 * input is NHWC with more than one pixel and channel, then one transpose per image
 * (Reshape to 4-D, which the next convolution would want channels-last, is declined). The
 * kernels take 4-D tensors channels-last, as XNNPACK's do, so no layout transpose sits
 * between them. Work is split over the instance's pthreadpool (on the caller when NULL). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/u8-kernels.h"
#include "qnnpack.h"

enum { O_HARDSWISH, O_HARDSIGMOID, O_FLATTEN, O_RESHAPE };
#define IS_TABLE(op) ((op) == O_HARDSWISH || (op) == O_HARDSIGMOID)
#define CHUNK 16384 /* bytes per HardSwish task */

typedef struct {
  const QnInstance *inst;
  int op;
  int64_t axis;                /* Flatten */
  int64_t shape[QH_MAX_RANK];  /* Reshape's constant target */
  int32_t shape_rank;
  uint8_t lut[256];            /* HardSwish, HardSigmoid */
  int vbmi;                    /* the table with AVX-512 VBMI (the host reports it) */
  /* set by reshape */
  int reshaped, rank;
  int64_t dims[QH_MAX_RANK];
  int64_t n, hw, c; /* Flatten / Reshape of an NHWC input: its images, pixels and channels */
  int transpose;
  size_t in_bytes, out_bytes;
} OwnOp;

typedef struct {
  const OwnOp *k;
  const uint8_t *x;
  uint8_t *y;
} Job;

/* Reshape's target shape, an int64 constant of 1..QH_MAX_RANK values. */
static const char *read_shape(const QhHostApi *host, const QhGraphView *g, uint32_t node, OwnOp *k) {
  uint32_t v = host->node_input(g, node, 1);
  const void *d = NULL;
  size_t bytes = 0;
  if (v == QH_INVALID_ID || !(host->value_flags(g, v) & QH_VALUE_CONSTANT) ||
      host->value_dtype(g, v) != QH_DTYPE_INT64)
    return "only Reshape with a constant int64 shape is supported";
  QhStatus *st = host->value_data(g, v, &d, &bytes);
  if (st || !d || bytes % sizeof(int64_t) || bytes / sizeof(int64_t) < 1 ||
      bytes / sizeof(int64_t) > QH_MAX_RANK) {
    host->status_free(st);
    return "Reshape's shape must have 1 to 8 values";
  }
  k->shape_rank = (int32_t)(bytes / sizeof(int64_t));
  memcpy(k->shape, d, bytes);
  /* a 4-D result would have to be written channels-last for the convolutions after it */
  return k->shape_rank == 4 ? "Reshape to 4-D is not supported" : NULL;
}

static const char *analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, OwnOp *k) {
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes != 1 || !u->nodes || u->n_inputs < 1 || !u->inputs ||
      !u->input_roles || !u->input_qparams || u->n_outputs != 1 || !u->outputs || !u->output_qparams)
    return "malformed node unit";
  uint32_t node = u->nodes[0];
  if (uq_op_is(host, g, node, "HardSwish"))
    k->op = O_HARDSWISH;
  else if (uq_op_is(host, g, node, "HardSigmoid"))
    k->op = O_HARDSIGMOID;
  else if (uq_op_is(host, g, node, "Flatten"))
    k->op = O_FLATTEN;
  else if (uq_op_is(host, g, node, "Reshape"))
    k->op = O_RESHAPE;
  else
    return "op other than HardSwish, HardSigmoid, Flatten or Reshape";
  /* a Reshape unit may also carry its shape, read from the node */
  if (u->n_inputs != 1 && k->op != O_RESHAPE)
    return "expected exactly one input";
  if (u->input_roles[0] != QH_ROLE_ACTIVATION || (host->value_flags(g, u->inputs[0]) & QH_VALUE_CONSTANT))
    return "constant inputs are not supported";
  const char *p;
  if ((p = uq_act_problem(u->input_qparams[0], 0)) || (p = uq_act_problem(u->output_qparams[0], 1)))
    return p;
  const QhQParams *a = u->input_qparams[0], *y = u->output_qparams[0];
  if (k->op == O_HARDSWISH) {
    qh_u8_act_lut(QH_U8_HARDSWISH, 0.0f, 0.0f, a->scale[0], a->zero_point[0], y->scale[0], y->zero_point[0], k->lut);
    return NULL;
  }
  if (k->op == O_HARDSIGMOID) {
    float alpha = uq_attr_float(host, g, node, "alpha", 0.2f), beta = uq_attr_float(host, g, node, "beta", 0.5f);
    if (!isfinite(alpha) || !isfinite(beta))
      return "HardSigmoid with a non-finite alpha or beta";
    qh_u8_act_lut(QH_U8_HARDSIGMOID, alpha, beta, a->scale[0], a->zero_point[0], y->scale[0], y->zero_point[0],
                  k->lut);
    return NULL;
  }
  if (a->scale[0] != y->scale[0] || a->zero_point[0] != y->zero_point[0])
    return "Flatten or Reshape onto another grid than its input's (a byte move does not requantize)";
  if (k->op == O_FLATTEN) {
    k->axis = uq_attr_int(host, g, node, "axis", 1);
    return NULL;
  }
  if (uq_attr_int(host, g, node, "allowzero", 0) != 0)
    return "Reshape with allowzero=1 is not supported";
  return read_shape(host, g, node, k);
}

QhStatus *qn_accept_own(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  if (!instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "accept: no instance");
  OwnOp k = {.inst = instance};
  const char *p = analyze(host, g, u, &k);
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

static void destroy(void *kernel) { free(kernel); }

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  if (!out || !instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  OwnOp *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->inst = instance;
  const uint64_t vbmi = QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VBMI;
  k->vbmi = (host->cpu_features() & vbmi) == vbmi;
  const char *p = analyze(host, g, u, k);
  if (p) {
    free(k);
    return host->status_new(QH_ERR_UNSUPPORTED, p);
  }
  *out = k;
  return NULL;
}

/* ONNX Reshape's target (0: the input's dim, allowzero=0; one -1: inferred) against the
 * input's ONNX dims; 0 when it does not resolve. */
static int resolve_shape(const int64_t *in, int32_t in_rank, const OwnOp *k, int64_t *out) {
  int64_t total = 1, known = 1;
  int infer = -1;
  for (int32_t i = 0; i < in_rank; i++)
    total *= in[i];
  for (int32_t i = 0; i < k->shape_rank; i++) {
    out[i] = k->shape[i] == 0 ? (i < in_rank ? in[i] : -2) : k->shape[i];
    if (out[i] == -1 && infer < 0)
      infer = (int)i;
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

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  OwnOp *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < 1 || (n_inputs != 1 && k->op != O_RESHAPE) || !outputs || n_outputs != 1 ||
      !out_workspace || outputs[0].struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!qn_u8_view_ok(x))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: input must be a uint8 tensor");
  k->reshaped = 0;
  y->dtype = QH_DTYPE_UINT8;
  y->rank = x->rank;
  y->layout = x->layout;
  memcpy(y->dims, x->dims, sizeof y->dims);
  k->transpose = 0;
  if (!IS_TABLE(k->op)) {
    /* the output's bytes are the input's in ONNX's order */
    int64_t onnx[QH_MAX_RANK];
    memcpy(onnx, x->dims, sizeof onnx);
    if (x->rank == 4 && x->layout == QH_LAYOUT_NHWC) {
      k->n = x->dims[0], k->hw = x->dims[1] * x->dims[2], k->c = x->dims[3];
      onnx[1] = k->c, onnx[2] = x->dims[1], onnx[3] = x->dims[2];
      k->transpose = k->hw > 1 && k->c > 1;
    }
    if (k->op == O_FLATTEN) {
      int64_t axis = k->axis < 0 ? k->axis + x->rank : k->axis, outer = 1, inner = 1;
      if (axis < 0 || axis > x->rank)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Flatten axis out of range");
      for (int32_t i = 0; i < x->rank; i++)
        *(i < axis ? &outer : &inner) *= onnx[i];
      y->rank = 2, y->dims[0] = outer, y->dims[1] = inner;
    } else {
      if (!resolve_shape(onnx, x->rank, k, y->dims))
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Reshape's shape does not fit its input");
      y->rank = k->shape_rank;
    }
    y->layout = QH_LAYOUT_ANY; /* 1-D, 2-D or 3-D (Flatten: 2-D; Reshape to 4-D is declined) */
  }
  k->rank = x->rank;
  memcpy(k->dims, x->dims, sizeof k->dims);
  k->in_bytes = qn_numel(x);
  k->out_bytes = qn_numel(y);
  if (k->in_bytes != k->out_bytes)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: output size differs from the input's");
  k->reshaped = 1;
  *out_workspace = 0;
  return NULL;
}

static void hardswish_task(void *user, size_t start, size_t count) {
  const Job *j = user;
  (j->k->vbmi ? qh_u8_lut_apply_vbmi : qh_u8_lut_apply)(j->k->lut, j->x + start, j->y + start, count);
}

/* One image from NHWC to ONNX's [c][h*w] order. */
static void transpose_task(void *user, size_t image) {
  const Job *j = user;
  size_t hw = (size_t)j->k->hw, C = (size_t)j->k->c;
  const uint8_t *x = j->x + image * hw * C;
  uint8_t *y = j->y + image * hw * C;
  for (size_t p = 0; p < hw; p++)
    for (size_t c = 0; c < C; c++)
      y[c * hw + p] = x[p * C + c];
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  OwnOp *k = kernel;
  (void)ctx, (void)workspace, (void)workspace_bytes;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < 1 || (n_inputs != 1 && k->op != O_RESHAPE) || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!qn_u8_view_ok(x) || x->rank != k->rank || memcmp(x->dims, k->dims, (size_t)x->rank * sizeof *x->dims) ||
      x->nbytes != k->in_bytes || (k->in_bytes && !x->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  if (!qn_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  Job j = {k, x->data, y->data};
  if (IS_TABLE(k->op))
    pthreadpool_parallelize_1d_tile_1d(k->inst->pool, hardswish_task, &j, k->in_bytes, CHUNK, k->inst->pool_flags);
  else if (k->transpose)
    pthreadpool_parallelize_1d(k->inst->pool, transpose_task, &j, (size_t)k->n, k->inst->pool_flags);
  else if (y->data != x->data)
    memcpy(y->data, x->data, k->in_bytes);
  return NULL;
}

#define OWN_KERNEL(name, kid)                                                                                \
  const QhKernelOps name = {QH_STRUCT_HEADER(QhKernelOps), .id = kid, .input_layout = QH_LAYOUT_NHWC,      \
                            .output_layout = QH_LAYOUT_NHWC, .create = create, .reshape = reshape, .run = run, \
                            .destroy = destroy}
OWN_KERNEL(qn_hardswish_kernel, "qn_hardswish_lut_u8");
OWN_KERNEL(qn_hardsigmoid_kernel, "qn_hardsigmoid_lut_u8");
OWN_KERNEL(qn_flatten_kernel, "qn_flatten_u8");
OWN_KERNEL(qn_reshape_kernel, "qn_reshape_u8");
