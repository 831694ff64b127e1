/* The qnnpack plugin's kernel objects over XNNPACK's qu8 operators. create maps the unit's
 * qnnpack numerics onto xnn_create_convolution2d_nhwc_qu8 / xnn_create_fully_connected_nc_qu8
 * (weights shifted to uint8, the bias rounded to int32, docs/qnnpack.md) and XNNPACK packs
 * the weights there, once; reshape fixes the shapes; run calls xnn_setup_* whenever the
 * host's buffers moved since the last setup, then xnn_run_operator on the instance's
 * pthreadpool; destroy deletes the operator. Conv is NHWC; linear takes any layout (rows of K). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qnnpack.h"

typedef struct {
  const QnInstance *inst;
  QnInfo in;
  xnn_operator_t op;
  int reshaped, in_rank;
  int64_t in_dims[QH_MAX_RANK];
  int64_t batch, ih, iw; /* conv: N, H, W; linear: rows */
  size_t in_bytes, out_bytes;
  const void *set_x; /* the buffers of the last setup; NULL after reshape */
  void *set_y;
} Kernel;

static QhStatus *xnn_problem(const QhHostApi *host, enum xnn_status s, const QnInfo *in) {
  char msg[200];
  switch (s) {
  case xnn_status_success:
    return NULL;
  case xnn_status_out_of_memory:
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "XNNPACK: out of memory creating the operator");
  case xnn_status_unsupported_parameter:
    snprintf(msg, sizeof msg,
             "XNNPACK's qu8 operator refuses the requantization scale input*weight/output = %.7g "
             "(it must be below 256)",
             (double)(in->xq->scale[0] * in->wq->scale[0] / in->yq->scale[0]));
    return host->status_new(QH_ERR_UNSUPPORTED, msg);
  case xnn_status_invalid_parameter:
    return host->status_new(QH_ERR_UNSUPPORTED,
                            "XNNPACK's qu8 operator rejects the unit's parameters (scales not normal "
                            "floats, or an empty output range after the fused Relu)");
  case xnn_status_uninitialized:
  case xnn_status_unsupported_hardware:
    return host->status_new(QH_ERR_UNSUPPORTED, "XNNPACK did not initialize on this CPU");
  default:
    snprintf(msg, sizeof msg, "XNNPACK: operator create failed (status %d)", (int)s);
    return host->status_new(QH_ERR_UNSUPPORTED, msg);
  }
}

/* PyTorch's qnnpack engine (1.13) quantizes a float bias per run with
 * quantize_per_tensor(bias, sx * sw, 0, qint32): nearbyint(bias * (1 / scale)) in float.
 * An int32 QDQ bias already at sx * sw is taken as it is; at another scale it is made
 * float first. */
static int32_t bias_q(const QnInfo *in, const void *b, int64_t c) {
  float atws = in->xq->scale[0] * in->wq->scale[0];
  float bf;
  if (in->bq) {
    float bs = in->bq->scale[in->bq->count == 1 ? 0 : c];
    int32_t bi = ((const int32_t *)b)[c];
    if (bs == atws)
      return bi;
    bf = (float)bi * bs;
  } else {
    bf = ((const float *)b)[c];
  }
  float v = nearbyintf(bf * (1.0f / atws));
  if (!(v > -2147483648.0f)) /* also NaN */
    return INT32_MIN;
  return v >= 2147483647.0f ? INT32_MAX : (int32_t)v;
}

QhStatus *qn_create_operator(const QnInstance *inst, const QhHostApi *host, const QhGraphView *g,
                             const QnInfo *in, xnn_operator_t *out) {
  *out = NULL;
  if (inst->xnn_init != xnn_status_success)
    return xnn_problem(host, inst->xnn_init, in);
  int conv = in->kind == QN_CONV;
  int64_t nc = conv ? in->co : in->n;
  int64_t kk = conv ? in->ci * in->kh * in->kw : in->k;
  const void *w = NULL, *b = NULL;
  size_t wn = 0, bn = 0;
  QhStatus *st = host->value_data(g, in->w_value, &w, &wn);
  if (st)
    return st;
  if (!w || wn != (size_t)(nc * kk))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "weight data size differs from its shape");
  if (in->b_value != QH_INVALID_ID) {
    if ((st = host->value_data(g, in->b_value, &b, &bn)))
      return st;
    if (!b || bn != (size_t)nc * 4)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "bias data size differs from its shape");
  }
  uint8_t *wu = malloc((size_t)(nc * kk));
  int32_t *bias = calloc((size_t)nc, sizeof *bias);
  if (!wu || !bias) {
    free(wu), free(bias);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory preparing weights");
  }
  /* int8 -> uint8 by adding 128 (QNNPACK's storage); the zero point moves with it */
  const int8_t *ws = w;
  for (int64_t c = 0; c < nc; c++)
    for (int64_t j = 0; j < kk; j++) {
      int64_t src;
      if (conv) { /* ONNX [co][ci][kh][kw] into XNNPACK's [co][kh][kw][ci] */
        int64_t ci = j % in->ci, kx = (j / in->ci) % in->kw, ky = j / (in->ci * in->kw);
        src = ((c * in->ci + ci) * in->kh + ky) * in->kw + kx;
      } else { /* XNNPACK's [N][K] */
        src = in->w_kn ? j * nc + c : c * kk + j;
      }
      wu[c * kk + j] = (uint8_t)(ws[src] + 128);
    }
  if (b)
    for (int64_t c = 0; c < nc; c++)
      bias[c] = bias_q(in, b, c);
  const QhQParams *xq = in->xq, *yq = in->yq;
  int32_t zo = yq->zero_point[0];
  uint8_t lo = in->lo, hi = in->hi;
  uint8_t zx = (uint8_t)xq->zero_point[0], zw = (uint8_t)(in->wq->zero_point[0] + 128);
  enum xnn_status s;
  if (conv)
    s = xnn_create_convolution2d_nhwc_qu8(
        (uint32_t)in->pad[0], (uint32_t)in->pad[3], (uint32_t)in->pad[2], (uint32_t)in->pad[1], (uint32_t)in->kh,
        (uint32_t)in->kw, (uint32_t)in->stride[0], (uint32_t)in->stride[1], (uint32_t)in->dil[0],
        (uint32_t)in->dil[1], (uint32_t)in->group, (size_t)in->ci, (size_t)(in->co / in->group),
        (size_t)(in->ci * in->group), (size_t)in->co, zx, xq->scale[0], zw, in->wq->scale[0], wu, bias,
        (uint8_t)zo, yq->scale[0], lo, hi, inst->xnn_flags, out);
  else
    s = xnn_create_fully_connected_nc_qu8((size_t)in->k, (size_t)in->n, (size_t)in->k, (size_t)in->n, zx,
                                          xq->scale[0], zw, in->wq->scale[0], wu, bias, (uint8_t)zo,
                                          yq->scale[0], lo, hi, inst->xnn_flags, out);
  /* XNNPACK keeps its own packed copy */
  free(wu), free(bias);
  if (s != xnn_status_success)
    *out = NULL;
  return xnn_problem(host, s, in);
}

static void kernel_destroy(void *kernel) {
  Kernel *k = kernel;
  if (!k)
    return;
  if (k->op)
    xnn_delete_operator(k->op);
  free(k);
}

static QhStatus *create_kind(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                             void **out, int kind) {
  if (!out || !instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  Kernel *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->inst = instance;
  QhStatus *st = qn_analyze(host, g, u, kind, &k->in);
  if (!st)
    st = qn_create_operator(k->inst, host, g, &k->in, &k->op);
  if (st) {
    kernel_destroy(k);
    return st;
  }
  *out = k;
  return NULL;
}

static QhStatus *create_conv(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u,
                             void **out) {
  return create_kind(i, h, g, u, out, QN_CONV);
}

static QhStatus *create_linear(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u,
                               void **out) {
  return create_kind(i, h, g, u, out, QN_LINEAR);
}

int qn_u8_view_ok(const QhTensorView *t) {
  if (!t || t->struct_size < sizeof(QhTensorView) || t->dtype != QH_DTYPE_UINT8 || t->rank < 0 ||
      t->rank > QH_MAX_RANK)
    return 0;
  for (int32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0)
      return 0;
  return 1;
}

size_t qn_numel(const QhTensorView *t) {
  size_t n = 1;
  for (int32_t i = 0; i < t->rank; i++)
    n *= (size_t)t->dims[i];
  return n;
}

static QhStatus *reshape_conv(Kernel *k, const QhHostApi *host, const QhTensorView *x, QhTensorView *y) {
  const QnInfo *in = &k->in;
  if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC || x->dims[3] != in->ci * in->group)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: conv input must be NHWC with the weight's channels");
  int64_t eh = x->dims[1] + in->pad[0] + in->pad[2] - ((in->kh - 1) * in->dil[0] + 1);
  int64_t ew = x->dims[2] + in->pad[1] + in->pad[3] - ((in->kw - 1) * in->dil[1] + 1);
  if (eh < 0 || ew < 0)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: conv input smaller than the kernel");
  k->batch = x->dims[0], k->ih = x->dims[1], k->iw = x->dims[2];
  y->rank = 4;
  y->layout = QH_LAYOUT_NHWC;
  y->dims[0] = x->dims[0], y->dims[1] = eh / in->stride[0] + 1, y->dims[2] = ew / in->stride[1] + 1;
  y->dims[3] = in->co;
  return NULL;
}

static QhStatus *reshape_linear(Kernel *k, const QhHostApi *host, const QhTensorView *x, QhTensorView *y) {
  const QnInfo *in = &k->in;
  if (x->rank < 2 || x->dims[x->rank - 1] != in->k)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: linear input must be at least 2-D and end in K");
  int64_t m = 1;
  for (int32_t i = 0; i + 1 < x->rank; i++)
    m *= x->dims[i];
  k->batch = m;
  y->rank = x->rank;
  memcpy(y->dims, x->dims, sizeof y->dims);
  y->dims[x->rank - 1] = in->n;
  y->layout = x->layout;
  return NULL;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  Kernel *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < 1 || !outputs || n_outputs != 1 || !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!qn_u8_view_ok(x))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: input must be a uint8 tensor");
  if (y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: output view too small");
  k->reshaped = 0;
  k->set_x = k->set_y = NULL;
  y->dtype = QH_DTYPE_UINT8;
  QhStatus *st = k->in.kind == QN_CONV ? reshape_conv(k, host, x, y) : reshape_linear(k, host, x, y);
  if (st)
    return st;
  k->in_rank = x->rank;
  memcpy(k->in_dims, x->dims, sizeof k->in_dims);
  k->in_bytes = qn_numel(x);
  k->out_bytes = qn_numel(y);
  k->reshaped = 1;
  *out_workspace = 0; /* XNNPACK keeps its indirection buffers in the operator */
  return NULL;
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  Kernel *k = kernel;
  (void)ctx, (void)workspace, (void)workspace_bytes;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < 1 || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!qn_u8_view_ok(x) || x->rank != k->in_rank ||
      memcmp(x->dims, k->in_dims, (size_t)x->rank * sizeof *x->dims) || x->nbytes != k->in_bytes ||
      (k->in_bytes && !x->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  if (!qn_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  pthreadpool_t pool = k->inst->pool;
  /* An operator stays set up between runs (XNNPACK keeps its state ready), so setup runs
   * only when the host's buffers moved: per-run setups were a visible share of the time
   * outside xnn_run_operator on small models. */
  enum xnn_status s = xnn_status_success;
  if (x->data != k->set_x || y->data != k->set_y) {
    k->set_x = k->set_y = NULL;
    s = k->in.kind == QN_CONV
            ? xnn_setup_convolution2d_nhwc_qu8(k->op, (size_t)k->batch, (size_t)k->ih, (size_t)k->iw, x->data,
                                               y->data, pool)
            : xnn_setup_fully_connected_nc_qu8(k->op, (size_t)k->batch, x->data, y->data, pool);
    if (s == xnn_status_success)
      k->set_x = x->data, k->set_y = y->data;
  }
  if (s == xnn_status_success)
    s = xnn_run_operator(k->op, pool);
  if (s != xnn_status_success) {
    char msg[96];
    snprintf(msg, sizeof msg, "XNNPACK: setup or run failed (status %d)", (int)s);
    return host->status_new(QH_ERR_INTERNAL, msg);
  }
  return NULL;
}

const QhKernelOps qn_conv_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "xnn_convolution2d_nhwc_qu8", .input_layout = QH_LAYOUT_NHWC,
    .output_layout = QH_LAYOUT_NHWC, .create = create_conv, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};
const QhKernelOps qn_linear_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "xnn_fully_connected_nc_qu8", .input_layout = QH_LAYOUT_ANY,
    .output_layout = QH_LAYOUT_ANY, .create = create_linear, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};
