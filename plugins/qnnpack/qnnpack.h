/* Shared declarations of the qnnpack plugin's lowering: the instance (its pthreadpool and
 * whether XNNPACK initialized on this CPU), the unit analysis that accept and create share,
 * and the XNNPACK-backed kernel ops. */
#ifndef QH_QNNPACK_H
#define QH_QNNPACK_H

#include <pthreadpool.h>
#include <qhost/qhost-plugin.h>
#include <xnnpack.h>

#include "../common/unit-query.h"

typedef struct {
  uint32_t n_threads;
  pthreadpool_t pool;      /* NULL with one thread: XNNPACK then runs on the caller */
  /* spin=off: XNN_FLAG_YIELD_WORKERS on every operator and PTHREADPOOL_FLAG_YIELD_WORKERS
   * on the plugin's own parallel loops, so the pool's workers sleep after each unit
   * instead of spinning for the next (docs/qnnpack.md, "Threads"); 0 with spin=on */
  uint32_t xnn_flags, pool_flags;
  enum xnn_status xnn_init; /* xnn_initialize's answer, once per process */
} QnInstance;

enum { QN_CONV, QN_LINEAR };

/* Everything accept and create learn about a unit. */
typedef struct {
  int kind;
  uint8_t lo, hi;   /* the output's byte range (a fused Relu or Clip narrows it), set by qn_analyze */
  int w_kn;         /* linear: weight stored [K, N] (MatMul, Gemm transB=0) */
  int64_t n, k;     /* linear: output channels, reduction */
  int64_t co, ci, kh, kw, group, stride[2], pad[4], dil[2]; /* conv: ci per group */
  uint32_t w_value, b_value;
  const QhQParams *xq, *wq, *bq, *yq;
} QnInfo;

/* A uint8 tensor view with sane dims, and its element count (xnn-kernels.c). */
int qn_u8_view_ok(const QhTensorView *t);
size_t qn_numel(const QhTensorView *t);

/* The output's byte range [*lo, *hi] after post, a Relu or Clip node whose output is on
 * y's grid (QH_INVALID_ID: none): y's quant range, narrowed to [zo, 255] by a Relu and to
 * the host's QuantizeLinear of a Clip's constant bounds by a Clip. Quantization is
 * monotonic, so Q(clip(v, a, b)) = clamp(Q(v), Q(a), Q(b)): those bounds reproduce the
 * reference run's bytes. NULL, or why not (static storage); lowering.c. */
const char *qn_output_range(const QhHostApi *host, const QhGraphView *g, uint32_t post, const QhQParams *y,
                            uint8_t *lo, uint8_t *hi);

QhStatus *qn_analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, int kind,
                     QnInfo *in);

/* Creates the unit's XNNPACK operator (packing its weights) into *out; accept calls it too,
 * since only XNNPACK's create knows every scale ratio it refuses. */
QhStatus *qn_create_operator(const QnInstance *inst, const QhHostApi *host, const QhGraphView *g,
                             const QnInfo *in, xnn_operator_t *out);

extern const QhKernelOps qn_conv_kernel, qn_linear_kernel;
/* Add, Mul (+Relu), Relu, Clip, MaxPool, GlobalAveragePool, AveragePool, Sigmoid, Tanh,
 * LeakyRelu on XNNPACK's qu8/u8 operators (xnn-u8ops.c). */
extern const QhKernelOps qn_add_kernel, qn_mul_kernel, qn_clamp_kernel, qn_maxpool_kernel, qn_gap_kernel,
    qn_avgpool_kernel, qn_sigmoid_kernel, qn_tanh_kernel, qn_leaky_relu_kernel;
QhStatus *qn_accept_u8op(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u);
/* Concat along the channels of inputs sharing the output's grid: strided copies (xnn-concat.c). */
extern const QhKernelOps qn_concat_kernel;
QhStatus *qn_accept_concat(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u);
/* HardSwish and HardSigmoid (lookup tables), Flatten and Reshape (byte moves on a shared grid): the
 * plugin's own kernels where XNNPACK (2022) has no operator (own-u8ops.c). */
extern const QhKernelOps qn_hardswish_kernel, qn_hardsigmoid_kernel, qn_flatten_kernel, qn_reshape_kernel;
QhStatus *qn_accept_own(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u);
extern const QhLoweringOps qn_lowering;

#endif
