/* Private to the dense kernels (conv*.c, pool.c): the sliding-window geometry that
 * Conv, ConvTranspose and the pools share, the im2col/col2im helpers, the direct
 * depthwise kernel, and the ConvTranspose entry points that conv.c puts in its table.
 *
 * Geometry is always padded to three spatial dimensions (D, H, W): a 1-D op has
 * D = H = 1 and a 2-D op D = 1, with kernel 1, stride 1, dilation 1, no padding in
 * the padded dimensions, so every loop below handles 1-D, 2-D and 3-D alike. */
#ifndef QH_EXEC_KERNELS_CONV_PRIVATE_H
#define QH_EXEC_KERNELS_CONV_PRIVATE_H

#include <glib.h>
#include <stdint.h>

#include "exec/op.h"

G_BEGIN_DECLS

#define QH_WINDOW_DIMS 3

typedef struct {
  int nsp;                       /* spatial dimensions of the node (1..3) */
  int64_t in[QH_WINDOW_DIMS];    /* input spatial sizes */
  int64_t k[QH_WINDOW_DIMS];     /* kernel sizes */
  int64_t s[QH_WINDOW_DIMS];     /* strides */
  int64_t d[QH_WINDOW_DIMS];     /* dilations */
  int64_t pb[QH_WINDOW_DIMS];    /* padding before (top/left); may be negative only for ConvTranspose */
  int64_t pe[QH_WINDOW_DIMS];    /* padding after */
  int64_t out[QH_WINDOW_DIMS];   /* output spatial sizes */
} QhWindow;

static inline int64_t qh_window_in_size(const QhWindow *w) { return w->in[0] * w->in[1] * w->in[2]; }
static inline int64_t qh_window_out_size(const QhWindow *w) { return w->out[0] * w->out[1] * w->out[2]; }
static inline int64_t qh_window_k_size(const QhWindow *w) { return w->k[0] * w->k[1] * w->k[2]; }

/* Resolve the window of a Conv or pool node: nsp spatial dims with input sizes in[]
 * and kernel sizes k[], reading the attributes strides, dilations, pads, auto_pad
 * and (when with_ceil) ceil_mode. Fails naming the node on inconsistent attributes
 * or an empty output. */
gboolean qh_window_resolve(const QhNode *node, int nsp, const int64_t *in, const int64_t *k,
                           gboolean with_ceil, QhWindow *w, GError **error);

/* Read the optional ints attribute name into dst: absent leaves dst alone; present
 * it must have want values, each in [lo, 2^31). */
gboolean qh_window_attr_ints(const QhNode *node, const char *name, int64_t want, int64_t lo,
                             int64_t *dst, GError **error);

/* Read the optional kernel_shape attribute; when present it must have nsp entries
 * (and, when expect is not NULL, equal expect). *out_n is -1 when absent. */
gboolean qh_window_kernel_shape(const QhNode *node, int nsp, const int64_t *expect,
                                int64_t *out_k, int64_t *out_n, GError **error);

/* Check an inferred output shape's element count, failing with the node's name. */
typedef enum {
  QH_AUTO_PAD_NOTSET,
  QH_AUTO_PAD_SAME_UPPER,
  QH_AUTO_PAD_SAME_LOWER,
  QH_AUTO_PAD_VALID,
} QhAutoPad;

/* The node's auto_pad attribute ("" and absent mean NOTSET); unknown values fail. */
gboolean qh_window_auto_pad(const QhNode *node, QhAutoPad *out, GError **error);

/* Describe a float32 [n, m, spatial...] output, spatial taken from the window's
 * right-aligned dims (w->in or w->out), and check its element count. */
gboolean qh_conv_set_output(const QhNode *node, int64_t n, int64_t m, const QhWindow *w,
                            const int64_t *spatial, QhTensor *output, GError **error);

/* The operand checks Conv and ConvTranspose share: float32 X, W (and B when given),
 * equal ranks of 3 to 5, known dimensions. */
gboolean qh_conv_check_operands(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                GError **error);

gboolean qh_conv_check_numel(const QhNode *node, const QhShape *shape, GError **error);

/* Fill rows [row_begin, row_end) of the im2col matrix [C*kD*kH*kW, oD*oH*oW] for one
 * image x [C, D, H, W]; out-of-image taps are zero. col points at row 0. */
void qh_conv_im2col(const QhWindow *w, const float *x, int64_t row_begin, int64_t row_end,
                    float *col);

/* Accumulate channels [c_begin, c_end) of col [C*kD*kH*kW, iD*iH*iW] into y [C, oD, oH, oW]
 * (the transpose of im2col: w->in are the image sizes, w->out the column grid). */
void qh_conv_col2im(const QhWindow *w, const float *col, int64_t c_begin, int64_t c_end, float *y);

/* Depthwise conv (one filter per channel): x [planes, D, H, W] -> y [planes, oD, oH, oW],
 * where plane p uses filter wt[p % channels] and bias b[p % channels] (b may be NULL).
 * Parallel over planes on the pool. */
void qh_conv_depthwise(QhThreadPool *pool, const QhWindow *w, int64_t planes, int64_t channels,
                       const float *x, const float *wt, const float *b, float *y);

/* A Conv's operands and geometry, for the fp32 engine (conv-onednn.c). */
typedef struct {
  const QhNode *node;
  const QhWindow *w;
  int64_t n, c, m, group;
  const QhTensor *x, *wt;
  const float *b; /* NULL: no bias */
  float *y;
  gboolean weights_constant; /* wt is a plan constant (QhExecContext.constant_inputs) */
  gboolean src_nhwc, dst_nhwc; /* x / y channels-last (QhExecContext.nhwc_inputs/outputs) */
  QhPostOpKind post_op;        /* applied to y (QhExecContext.post_op; only with dst_nhwc) */
  float post_alpha, post_beta;
} QhConvGeometry;

typedef enum {
  QH_CONV_ENGINE_RAN,      /* y holds the result */
  QH_CONV_ENGINE_DECLINED, /* nothing done: run the OpenBLAS path */
  QH_CONV_ENGINE_FAILED,   /* error set */
} QhConvEngineResult;

/* Run g on oneDNN's fp32 convolution, or decline: when ctx->bit_compatible is set,
 * the weights are not constant, or oneDNN has only its reference loop for it. A conv
 * with a channels-last side never declines (the OpenBLAS path reads NCHW): it runs
 * whatever oneDNN offers, or fails when the engine is off. The
 * primitive and the reordered weights are built on a node's first run and kept in
 * ctx->conv_cache (keyed by node, input shape, thread count and the weights' address
 * and fingerprint). Threading: the calling thread's OpenMP team runs it, sized to
 * ctx's pool for the call. */
QhConvEngineResult qh_conv_onednn(QhExecContext *ctx, const QhConvGeometry *g, GError **error);

/* How many of the cache's Conv nodes run on oneDNN (not declined); for tests. */
int qh_conv_cache_engine_entries(const QhConvCache *cache);

/* Free a context's conv cache (NULL is fine). */
void qh_conv_cache_free(QhConvCache *cache);

/* ConvTranspose (conv-transpose.c). */
gboolean qh_conv_transpose_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                 QhTensor *outputs, int n_outputs, GError **error);
gboolean qh_conv_transpose_run(QhExecContext *ctx, const QhNode *node,
                               const QhTensor *const *inputs, int n_inputs,
                               QhTensor *const *outputs, int n_outputs, GError **error);
gboolean qh_conv_transpose_run_naive(QhExecContext *ctx, const QhNode *node,
                                     const QhTensor *const *inputs, int n_inputs,
                                     QhTensor *const *outputs, int n_outputs, GError **error);
int64_t qh_conv_transpose_macs(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                               const QhTensor *outputs, int n_outputs);

G_END_DECLS

#endif
