/* The x86 plugin's uint8 Concat: plugins/common/u8-concat.c's kernel (the inputs joined
 * along the ONNX axis, each requantized onto the output's grid with the host's formulas,
 * identical to the host's QDQ run), its copy run on the instance's team, so that a
 * network with concatenations (Inception, DenseNet, the inductor recipe's shared-qparams
 * cat) stays in int8 between oneDNN units. */
#include <stdlib.h>

#include "../common/u8-concat.h"
#include "onednn.h"

typedef struct {
  const X86Instance *inst; /* its team runs the copy */
  QhU8Concat *c;
} X86Concat;

QhStatus *x86_accept_concat(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  (void)instance;
  return qh_u8_concat_accept(host, g, u);
}

static void destroy(void *kernel) {
  X86Concat *k = kernel;
  if (k)
    qh_u8_concat_destroy(k->c);
  free(k);
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  QhStatus *st = qh_u8_concat_accept(host, g, u);
  if (st)
    return st;
  if (!out)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  X86Concat *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->inst = instance;
  if ((st = qh_u8_concat_create(host, g, u, &k->c))) {
    free(k);
    return st;
  }
  *out = k;
  return NULL;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  X86Concat *k = kernel;
  if (!host)
    return NULL;
  return qh_u8_concat_reshape(k ? k->c : NULL, host, inputs, n_inputs, outputs, n_outputs, out_workspace);
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  (void)ctx, (void)workspace, (void)workspace_bytes;
  X86Concat *k = kernel;
  if (!host)
    return NULL;
  QhU8ConcatJob job;
  size_t tasks = 0;
  QhStatus *st = qh_u8_concat_prepare(k ? k->c : NULL, host, inputs, n_inputs, outputs, n_outputs, &job, &tasks);
  if (st || tasks == 0)
    return st;
  x86_parallel_for(k->inst, tasks, qh_u8_concat_task, &job);
  return NULL;
}

const QhKernelOps x86_concat_kernel = {QH_STRUCT_HEADER(QhKernelOps), .id = "x86_concat_nhwc_qu8",
                                       .input_layout = QH_LAYOUT_NHWC, .output_layout = QH_LAYOUT_NHWC,
                                       .create = create, .reshape = reshape, .run = run, .destroy = destroy};
