/* Shared declarations of the fbgemm plugin's host side: the instance (thread count and
 * the kernel path the CPU allows), the unit analysis that accept and create share, and
 * the kernel ops. The kernels themselves (kernels.h) know nothing of the host. */
#ifndef QH_FBGEMM_H
#define QH_FBGEMM_H

#include <qhost/qhost-plugin.h>

#include "kernels.h"

typedef struct {
  uint32_t n_threads;
  FbIsa isa;         /* the fastest path the host's CPU features allow */
  int clamp_to_dtype; /* output_clamp=dtype (default): saturate at 255 as FBGEMM does; range: at quant_max */
} FbInstance;

enum { FB_CONV, FB_LINEAR };

/* Everything accept and create learn about a unit. */
typedef struct {
  int kind, relu;
  int clip;                /* a fused Clip (ReLU6) with bounds clip_lo, clip_hi (+-INFINITY: none) */
  float clip_lo, clip_hi;
  int dw;           /* conv: depthwise (group = ci = co, one weight channel each) */
  int64_t groups;   /* conv: group for grouped convolutions and channel multipliers
                     * (conv-grouped-kernel.c); 0 for group 1 and plain depthwise */
  int w_kn;         /* linear: weight stored [K, N] (MatMul, Gemm transB=0) */
  int64_t n, k;     /* linear: output channels, reduction */
  int64_t co, ci, kh, kw, stride[2], pad[4], dil[2]; /* depthwise: ci = co = group */
  uint32_t w_value, b_value;
  const QhQParams *xq, *wq, *bq, *yq;
} FbInfo;

QhStatus *fb_analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, int kind,
                     FbInfo *in);

/* The requantization of a weighted unit with nc output channels (kernel-shared.c): fills
 * bias[nc] and mult[nc] (caller-owned) from the unit's qparams and its bias data b (int32
 * or float as in->bq says; NULL for none) as PyTorch 1.13's fbgemm engine does, and
 * returns the FbRequant pointing at them, clamped by the unit's range, Relu and Clip. */
FbRequant fb_requant_setup(const FbInstance *inst, const FbInfo *in, const void *b, int64_t nc, float *bias,
                           float *mult);
/* The unit's weight data (nc x kk int8) and bias data (nc elements, or *b NULL without a
 * bias), borrowed from the graph; an error status when a size differs from the shape. */
QhStatus *fb_weight_data(const QhHostApi *host, const QhGraphView *g, const FbInfo *in, int64_t nc, int64_t kk,
                         const void **w, const void **b);

/* An FbPool's runner for a kernel's run (kernel-shared.c): fb_pool_run hands the tasks to
 * host->parallel_for on ctx and keeps the first error status in status (the caller
 * returns or frees it); later ones are freed. Used on the run's thread only. */
typedef struct {
  const QhHostApi *host;
  const QhRunContext *ctx;
  QhStatus *status;
} FbRunner;
void fb_pool_run(void *runner, size_t n, FbTaskFn task, void *user);

extern const QhKernelOps fb_conv_kernel, fb_linear_kernel;
/* Grouped convolutions and depthwise ones with a channel multiplier (conv-grouped-kernel.c). */
extern const QhKernelOps fb_group_conv_kernel;
extern const QhLoweringOps fb_lowering;

/* The uint8 units between the convolutions (u8ops.c): Add and Mul (+Relu), MaxPool,
 * AveragePool, GlobalAveragePool, Flatten, Reshape to 2-D, Sigmoid, Tanh, HardSigmoid,
 * HardSwish. */
QhStatus *fb_accept_u8op(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u);
extern const QhKernelOps fb_add_kernel, fb_mul_kernel, fb_maxpool_kernel, fb_avgpool_kernel, fb_gap_kernel,
    fb_flatten_kernel, fb_reshape_kernel, fb_sigmoid_kernel, fb_tanh_kernel, fb_hardsigmoid_kernel,
    fb_hardswish_kernel;

/* Concat (concat.c: plugins/common/u8-concat.c's kernel). */
QhStatus *fb_accept_concat(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u);
extern const QhKernelOps fb_concat_kernel;

#endif
