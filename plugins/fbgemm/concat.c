/* The fbgemm plugin's uint8 Concat: plugins/common/u8-concat.c's kernel, shared with the
 * x86 plugin (the inputs joined along the ONNX axis in the tensors' layout, each
 * requantized onto the output's grid with the host's formulas, so the bytes equal the
 * host's QDQ run; an input on the output's grid is a copy), its copy split over the
 * host's parallel_for. PyTorch's fbgemm config quantizes cat with shared qparams, where
 * every input is a copy. */
#include <stdlib.h>

#include "../common/u8-concat.h"
#include "fbgemm.h"

QhStatus *fb_accept_concat(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  (void)instance;
  return qh_u8_concat_accept(host, g, u);
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  if (!instance || !out)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  QhU8Concat *k = NULL;
  QhStatus *st = qh_u8_concat_create(host, g, u, &k);
  if (st)
    return st;
  *out = k;
  return NULL;
}

static void destroy(void *kernel) { qh_u8_concat_destroy(kernel); }

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  return qh_u8_concat_reshape(kernel, host, inputs, n_inputs, outputs, n_outputs, out_workspace);
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  (void)workspace, (void)workspace_bytes;
  if (!host)
    return NULL;
  QhU8ConcatJob job;
  size_t tasks = 0;
  QhStatus *st = qh_u8_concat_prepare(kernel, host, inputs, n_inputs, outputs, n_outputs, &job, &tasks);
  if (st || tasks == 0)
    return st;
  return host->parallel_for(ctx, tasks, qh_u8_concat_task, &job);
}

const QhKernelOps fb_concat_kernel = {QH_STRUCT_HEADER(QhKernelOps), .id = "fbgemm_concat_nhwc_qu8",
                                      .input_layout = QH_LAYOUT_NHWC, .output_layout = QH_LAYOUT_NHWC,
                                      .create = create, .reshape = reshape, .run = run, .destroy = destroy};
