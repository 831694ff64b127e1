/* The fbgemm plugin's kernel object for grouped convolutions (1 < group, not the plain
 * depthwise kernel.c runs) and depthwise ones with a channel multiplier: create reads the
 * unit's weights, bias and qparams, derives the per-channel multiplier and bias as
 * PyTorch 1.13's fbgemm engine does (the same rule as kernel.c's, for the same bytes),
 * picks the path (conv-grouped.h: fb_group_pick) and packs once; reshape fixes the NHWC
 * geometry and the workspace; run splits the work over the host's parallel_for. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv-grouped.h"
#include "fbgemm.h"

typedef struct {
  const FbInstance *inst;
  FbInfo in;
  FbGroupPacked gp;
  FbConv geo;
  uint32_t slots; /* workers the workspace has room for */
  int reshaped;
  int64_t in_dims[4];
  size_t in_bytes, out_bytes;
} GroupKernel;

static void destroy(void *kernel) {
  GroupKernel *k = kernel;
  if (!k)
    return;
  fb_group_pack_free(&k->gp);
  free(k);
}

static QhStatus *prepare(GroupKernel *k, const QhHostApi *host, const QhGraphView *g) {
  const FbInfo *in = &k->in;
  int64_t nc = in->co, kk = in->ci / in->groups * in->kh * in->kw;
  const void *w = NULL, *b = NULL;
  QhStatus *st = fb_weight_data(host, g, in, nc, kk, &w, &b);
  if (st)
    return st;
  float *bias = malloc((size_t)nc * sizeof *bias), *mult = malloc((size_t)nc * sizeof *mult);
  if (!bias || !mult) {
    free(bias), free(mult);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory packing weights");
  }
  FbRequant rq = fb_requant_setup(k->inst, in, b, nc, bias, mult);
  FbIsa isa = k->inst->isa;
  FbGroupPath path = fb_group_pick(isa, in->ci, in->co, in->groups, in->kh, in->kw);
  int bad = fb_group_pack(&k->gp, isa, path, w, in->ci, in->co, in->groups, in->kh, in->kw, &rq);
  free(bias), free(mult);
  return bad ? host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory packing weights") : NULL;
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  if (!out || !instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  GroupKernel *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->inst = instance;
  QhStatus *st = fb_analyze(host, g, u, FB_CONV, &k->in);
  if (!st && k->in.groups < 2)
    st = host->status_new(QH_ERR_UNSUPPORTED, "not a grouped convolution");
  if (!st)
    st = prepare(k, host, g);
  if (st) {
    destroy(k);
    return st;
  }
  *out = k;
  return NULL;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  GroupKernel *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < 1 || !outputs || n_outputs != 1 || !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  const FbInfo *in = &k->in;
  if (x->struct_size < sizeof(QhTensorView) || x->dtype != QH_DTYPE_UINT8 || x->rank != 4 ||
      x->layout != QH_LAYOUT_NHWC || x->dims[3] != in->ci || x->dims[0] < 0 || x->dims[1] < 0 || x->dims[2] < 0)
    return host->status_new(QH_ERR_INVALID_ARGUMENT,
                            "reshape: grouped conv input must be uint8 NHWC with the weight's channels");
  if (y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: output view too small");
  k->reshaped = 0;
  int64_t eh = x->dims[1] + in->pad[0] + in->pad[2] - ((in->kh - 1) * in->dil[0] + 1);
  int64_t ew = x->dims[2] + in->pad[1] + in->pad[3] - ((in->kw - 1) * in->dil[1] + 1);
  if (eh < 0 || ew < 0)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: conv input smaller than the kernel");
  FbConv c = {.n = x->dims[0], .ih = x->dims[1], .iw = x->dims[2], .ic = in->ci, .oc = in->co, .kh = in->kh,
              .kw = in->kw, .sh = in->stride[0], .sw = in->stride[1], .dh = in->dil[0], .dw = in->dil[1],
              .pt = in->pad[0], .pl = in->pad[1], .oh = eh / in->stride[0] + 1, .ow = ew / in->stride[1] + 1};
  k->geo = c;
  y->dtype = QH_DTYPE_UINT8;
  y->rank = 4;
  y->layout = QH_LAYOUT_NHWC;
  y->dims[0] = c.n, y->dims[1] = c.oh, y->dims[2] = c.ow, y->dims[3] = c.oc;
  k->slots = k->inst->n_threads > 0 ? k->inst->n_threads : 1;
  memcpy(k->in_dims, x->dims, sizeof k->in_dims);
  k->in_bytes = (size_t)(c.n * c.ih * c.iw * c.ic);
  k->out_bytes = (size_t)(c.n * c.oh * c.ow * c.oc);
  k->reshaped = 1;
  *out_workspace = fb_group_workspace(&k->geo, &k->gp, k->slots);
  return NULL;
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  GroupKernel *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < 1 || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (x->struct_size < sizeof(QhTensorView) || x->dtype != QH_DTYPE_UINT8 || x->rank != 4 ||
      memcmp(x->dims, k->in_dims, sizeof k->in_dims) || x->nbytes != k->in_bytes || (k->in_bytes && !x->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  if (y->struct_size < sizeof(QhTensorView) || y->dtype != QH_DTYPE_UINT8 || y->nbytes != k->out_bytes ||
      (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  size_t need = fb_group_workspace(&k->geo, &k->gp, k->slots);
  if (workspace_bytes < need || (need && !workspace))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: workspace smaller than reshape asked for");
  if (k->out_bytes == 0)
    return NULL;
  FbRunner r = {host, ctx, NULL};
  uint32_t workers = ctx && host->run_thread_count ? host->run_thread_count(ctx) : 1;
  /* the workspace has one slice per worker reshape counted on */
  FbPool pool = {.run = fb_pool_run, .runner = &r, .n_workers = workers <= k->slots ? workers : 1};
  fb_group_run(&k->geo, &k->gp, x->data, y->data, workspace, &pool);
  return r.status;
}

const QhKernelOps fb_group_conv_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "fbgemm_group_conv2d_nhwc_qu8_qs8w", .input_layout = QH_LAYOUT_NHWC,
    .output_layout = QH_LAYOUT_NHWC, .create = create, .reshape = reshape, .run = run, .destroy = destroy};
