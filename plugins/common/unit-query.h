/* Unit-analysis helpers shared by the lowering plugins (unit-query.c). Each takes the
 * host API and graph view a lowering callback was given, borrows them for the call only,
 * and keeps nothing; none reports an error through a status: a missing attribute gives
 * the default, an unknown shape -1, an unusable activation a reason string (static
 * storage, never freed). Safe from any thread the callback runs on. */
#ifndef QH_PLUGINS_COMMON_UNIT_QUERY_H
#define QH_PLUGINS_COMMON_UNIT_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include <qhost/qhost-plugin.h>

/* 1 when q is a complete QhQParams with finite positive scales. */
int uq_qparams_sane(const QhQParams *q);
/* NULL when q is a usable uint8 per-tensor activation in [0, 255]; otherwise why not
 * (output: the unit's output, else an input). */
const char *uq_act_problem(const QhQParams *q, int output);
/* 1 when node's op type is op. */
int uq_op_is(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *op);
/* Attribute name of node, or def when absent (or of another type). */
int64_t uq_attr_int(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name, int64_t def);
float uq_attr_float(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name, float def);
/* n ints of attribute name into out (def when absent); 0 when present with another count. */
int uq_attr_ints(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name, size_t n,
                 int64_t def, int64_t *out);
/* The 2-D window attributes of a Conv or pool node: kernel_shape (-1 when absent),
 * strides and dilations (1), pads (0). NULL when they are read; "auto_pad SAME is not
 * supported" for SAME_UPPER/SAME_LOWER; `malformed` when one has another count. */
const char *uq_window_2d(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *malformed,
                         int64_t ks[2], int64_t strides[2], int64_t pads[4], int64_t dilations[2]);
/* NULL when input slot of u is a bias the conv/linear kernels take (constant, n
 * elements, float or int32 with zero points 0 and per-tensor or per-channel scales),
 * then *b_value and *bq (borrowed, NULL for a float bias) describe it; otherwise why not,
 * with *b_value = QH_INVALID_ID and *bq = NULL. */
const char *uq_bias_problem(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, size_t slot,
                            int64_t n, uint32_t *b_value, const QhQParams **bq);
/* NULL when Clip node's min and max (inputs 1 and 2, opset 11+; opset 6's attributes)
 * are float constant scalars or absent (-INFINITY / INFINITY), then *lo and *hi hold them; otherwise why not. */
const char *uq_clip_bounds(const QhHostApi *host, const QhGraphView *g, uint32_t node, float *lo, float *hi);
/* The rank of value v with every dimension in dims, or -1 when any is unknown. */
int32_t uq_known_shape(const QhHostApi *host, const QhGraphView *g, uint32_t v, int64_t *dims);
/* The known shape of input i of u: the integer tensor's, else that of the float value its
 * first op reads (the DequantizeLinear's output, which shape inference reaches more
 * often); -1 when neither is known. */
int32_t uq_input_shape(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, uint32_t i,
                       int64_t *dims);
/* 1 when input slot of node is an int64 constant of exactly n values, copied to out. */
int uq_const_int64s(const QhHostApi *host, const QhGraphView *g, uint32_t node, uint32_t slot, size_t n,
                    int64_t *out);
/* ONNX Reshape's target of rank values (0: the input's dim, allowzero=0; one -1:
 * inferred) against the input dims in; 1 with out filled when it resolves. */
int uq_resolve_shape(const int64_t *in, int in_rank, const int64_t *shape, int rank, int64_t *out);
/* ONNX (NCHW) dims: 1 when b is a per-channel operand of a, [N or 1, C, 1, 1] against
 * [N, C, H, W] (squeeze-excitation's Add / Mul). */
int uq_channel_operand(const int64_t *b, const int64_t *a);
/* 1 when t is a complete uint8 view of rank 0 .. QH_MAX_RANK with no negative dim. */
int uq_u8_view_ok(const QhTensorView *t);
/* The element count of t. */
size_t uq_numel(const QhTensorView *t);

#endif
