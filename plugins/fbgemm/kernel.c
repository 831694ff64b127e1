/* The fbgemm plugin's kernel objects: create reads the unit's weights, bias and qparams,
 * derives the per-channel multiplier and bias the way PyTorch 1.13's fbgemm engine does,
 * and packs the weights once (kernels.h); reshape fixes the geometry and the workspace
 * (one im2col block per worker; for depthwise on VNNI, one row buffer per worker); run splits the work over the host's
 * pool with parallel_for. Conv (dense or depthwise) is NHWC; linear takes any layout
 * (rows of K). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fbgemm.h"

typedef struct {
  const FbInstance *inst;
  FbInfo in;
  FbIsa isa;
  FbPacked pk;
  FbDwPacked dw; /* depthwise units' weights instead of pk */
  FbConv geo;
  uint32_t slots; /* workers the workspace has room for */
  int reshaped, in_rank;
  int64_t in_dims[QH_MAX_RANK];
  size_t in_bytes, out_bytes;
} Kernel;

static void kernel_destroy(void *kernel) {
  Kernel *k = kernel;
  if (!k)
    return;
  fb_pack_free(&k->pk);
  fb_dw_pack_free(&k->dw);
  free(k);
}

static QhStatus *prepare(Kernel *k, const QhHostApi *host, const QhGraphView *g) {
  const FbInfo *in = &k->in;
  int64_t nc = in->kind == FB_CONV ? in->co : in->n;
  /* reduction per output channel; a depthwise channel sees its own input channel only */
  int64_t kk = in->kind == FB_CONV ? (in->dw ? 1 : in->ci) * in->kh * in->kw : in->k;
  const void *w = NULL, *b = NULL;
  QhStatus *st = fb_weight_data(host, g, in, nc, kk, &w, &b);
  if (st)
    return st;
  int8_t *wr = malloc((size_t)(nc * kk));
  float *bias = malloc((size_t)nc * sizeof *bias), *mult = malloc((size_t)nc * sizeof *mult);
  if (!wr || !bias || !mult) {
    free(wr), free(bias), free(mult);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory packing weights");
  }
  const int8_t *ws = w;
  /* into [channel][reduction], the reduction in im2col's (ky, kx, ci) order */
  for (int64_t c = 0; c < nc; c++)
    for (int64_t j = 0; j < kk; j++) {
      int64_t src;
      if (in->dw) {
        src = c * kk + j; /* [C][1][kh][kw] is already [channel][ky][kx] */
      } else if (in->kind == FB_CONV) {
        int64_t ci = j % in->ci, kx = (j / in->ci) % in->kw, ky = j / (in->ci * in->kw);
        src = ((c * in->ci + ci) * in->kh + ky) * in->kw + kx;
      } else {
        src = in->w_kn ? j * nc + c : c * kk + j;
      }
      wr[c * kk + j] = ws[src];
    }
  FbRequant rq = fb_requant_setup(k->inst, in, b, nc, bias, mult);
  /* AMX needs K >= FB_AMX_MIN_K, and on first layers (3 channels) its im2col costs more
   * than VNNI's kernel-row path saves: resnet18's 7x7 conv1 ran at 0.81 ms on AMX, about
   * 0.4 on that path (2026-11-27, bench/README.md "gemmk") */
  if (k->isa == FB_ISA_AMX &&
      (kk < FB_AMX_MIN_K || (in->kind == FB_CONV && !in->dw &&
                             fb_kernel_rows_pay(FB_ISA_AVX512VNNI, in->ci, in->kh, in->kw, in->dil[1]))))
    k->isa = FB_ISA_AVX512VNNI;
  int bad;
  if (in->dw)
    bad = fb_dw_pack(&k->dw, wr, nc, in->kh, in->kw, &rq);
  else if (in->kind == FB_CONV && fb_kernel_rows_pay(k->isa, in->ci, in->kh, in->kw, in->dil[1]))
    bad = fb_pack_kernel_rows(k->isa, &k->pk, wr, nc, in->kh, in->kw * in->ci, &rq); /* first layers */
  else
    bad = fb_pack_for(k->isa, &k->pk, wr, nc, kk, &rq);
  free(wr), free(bias), free(mult);
  return bad ? host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory packing weights") : NULL;
}

static QhStatus *create_kind(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                             void **out, int kind) {
  if (!out || !instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  Kernel *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->inst = instance;
  QhStatus *st = fb_analyze(host, g, u, kind, &k->in);
  k->isa = k->inst->isa;
  if (!st)
    st = prepare(k, host, g);
  if (st) {
    kernel_destroy(k);
    return st;
  }
  *out = k;
  return NULL;
}

static QhStatus *create_conv(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u,
                             void **out) {
  return create_kind(i, h, g, u, out, FB_CONV);
}

static QhStatus *create_linear(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u,
                               void **out) {
  return create_kind(i, h, g, u, out, FB_LINEAR);
}

static int u8_view_ok(const QhTensorView *t) {
  if (!t || t->struct_size < sizeof(QhTensorView) || t->dtype != QH_DTYPE_UINT8 || t->rank < 0 ||
      t->rank > QH_MAX_RANK)
    return 0;
  for (int32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0)
      return 0;
  return 1;
}

static size_t numel(const QhTensorView *t) {
  size_t n = 1;
  for (int32_t i = 0; i < t->rank; i++)
    n *= (size_t)t->dims[i];
  return n;
}

static QhStatus *reshape_conv(Kernel *k, const QhHostApi *host, const QhTensorView *x, QhTensorView *y) {
  const FbInfo *in = &k->in;
  if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC || x->dims[3] != in->ci)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: conv input must be NHWC with the weight's channels");
  int64_t eh = x->dims[1] + in->pad[0] + in->pad[2] - ((in->kh - 1) * in->dil[0] + 1);
  int64_t ew = x->dims[2] + in->pad[1] + in->pad[3] - ((in->kw - 1) * in->dil[1] + 1);
  if (eh < 0 || ew < 0)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: conv input smaller than the kernel");
  FbConv c = {.n = x->dims[0], .ih = x->dims[1], .iw = x->dims[2], .ic = in->ci, .oc = in->co, .kh = in->kh,
              .kw = in->kw, .sh = in->stride[0], .sw = in->stride[1], .dh = in->dil[0], .dw = in->dil[1],
              .pt = in->pad[0], .pl = in->pad[1], .oh = eh / in->stride[0] + 1, .ow = ew / in->stride[1] + 1};
  k->geo = c;
  y->rank = 4;
  y->layout = QH_LAYOUT_NHWC;
  y->dims[0] = c.n, y->dims[1] = c.oh, y->dims[2] = c.ow, y->dims[3] = c.oc;
  return NULL;
}

static QhStatus *reshape_linear(Kernel *k, const QhHostApi *host, const QhTensorView *x, QhTensorView *y) {
  const FbInfo *in = &k->in;
  if (x->rank < 2 || x->dims[x->rank - 1] != in->k)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: linear input must be at least 2-D and end in K");
  int64_t m = 1;
  for (int32_t i = 0; i + 1 < x->rank; i++)
    m *= x->dims[i];
  FbConv c = {.n = m, .ih = 1, .iw = 1, .ic = in->k, .oc = in->n, .kh = 1, .kw = 1, .sh = 1, .sw = 1,
              .dh = 1, .dw = 1, .oh = 1, .ow = 1};
  k->geo = c;
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
  if (!u8_view_ok(x))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: input must be a uint8 tensor");
  if (y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: output view too small");
  k->reshaped = 0;
  y->dtype = QH_DTYPE_UINT8;
  QhStatus *st = k->in.kind == FB_CONV ? reshape_conv(k, host, x, y) : reshape_linear(k, host, x, y);
  if (st)
    return st;
  k->slots = k->inst->n_threads > 0 ? k->inst->n_threads : 1;
  k->in_rank = x->rank;
  memcpy(k->in_dims, x->dims, sizeof k->in_dims);
  k->in_bytes = numel(x);
  k->out_bytes = numel(y);
  k->reshaped = 1;
  *out_workspace = k->in.dw ? fb_dw_workspace(k->isa, &k->geo, &k->dw, k->slots)
                            : fb_conv_workspace(&k->geo, &k->pk, k->slots);
  return NULL;
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  Kernel *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < 1 || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!u8_view_ok(x) || x->rank != k->in_rank || memcmp(x->dims, k->in_dims, (size_t)x->rank * sizeof *x->dims) ||
      x->nbytes != k->in_bytes || (k->in_bytes && !x->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  if (!u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  size_t need = k->in.dw ? fb_dw_workspace(k->isa, &k->geo, &k->dw, k->slots)
                        : fb_conv_workspace(&k->geo, &k->pk, k->slots);
  if (workspace_bytes < need || (need && !workspace))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: workspace smaller than reshape asked for");
  if (k->out_bytes == 0)
    return NULL;
  FbRunner r = {host, ctx, NULL};
  uint32_t workers = ctx && host->run_thread_count ? host->run_thread_count(ctx) : 1;
  /* the workspace has one im2col block per worker reshape counted on */
  FbPool pool = {.run = fb_pool_run, .runner = &r, .n_workers = workers <= k->slots ? workers : 1};
  if (k->in.dw)
    fb_dw_run(k->isa, &k->geo, &k->dw, x->data, y->data, workspace, &pool);
  else
    fb_conv_packed(k->isa, &k->geo, &k->pk, x->data, y->data, workspace, &pool);
  return r.status;
}

const QhKernelOps fb_conv_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "fbgemm_conv2d_nhwc_qu8_qs8w", .input_layout = QH_LAYOUT_NHWC,
    .output_layout = QH_LAYOUT_NHWC, .create = create_conv, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};
const QhKernelOps fb_linear_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "fbgemm_linear_qu8_qs8w", .input_layout = QH_LAYOUT_ANY,
    .output_layout = QH_LAYOUT_ANY, .create = create_linear, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};
