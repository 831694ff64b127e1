/* Graph queries shared by annotate.c and constraints.c (graph-util.c). */
#ifndef EXAMPLE_VITIS_GRAPH_H
#define EXAMPLE_VITIS_GRAPH_H

#include <qhost/qhost-plugin.h>

int vg_is_op(const QhHostApi *h, const QhGraphView *g, uint32_t n, const char *op);
int vg_is_const(const QhHostApi *h, const QhGraphView *g, uint32_t v);
int vg_rank(const QhHostApi *h, const QhGraphView *g, uint32_t v);
/* The only consumer of output 0 of n, or QH_INVALID_ID (none, several, a graph output). */
uint32_t vg_sole_user(const QhHostApi *h, const QhGraphView *g, uint32_t n);
/* Conv (1-D/2-D, depthwise included), Gemm (transA 0) or MatMul with a constant weight. */
int vg_weighted(const QhHostApi *h, const QhGraphView *g, uint32_t n);
int vg_fusable_act(const QhHostApi *h, const QhGraphView *g, uint32_t n);
int vg_is_avgpool(const QhHostApi *h, const QhGraphView *g, uint32_t n);
int vg_pool_factor(const QhHostApi *h, const QhGraphView *g, uint32_t pool, uint32_t mul);
/* The window of an AveragePool, or a GlobalAveragePool's input size (followed back
 * through the graph when not recorded); 0 when unknown or not 2-D. */
int vg_pool_window(const QhHostApi *h, const QhGraphView *g, uint32_t n, int64_t *kh, int64_t *kw);
/* An average pool the DPU can run as ONNX computes it: window known, and factor 1 or
 * transform.c's Mul after it. */
int vg_avgpool_ready(const QhHostApi *h, const QhGraphView *g, uint32_t n);
/* The node whose output ends the DPU unit starting at n: the fused activation after a
 * weighted op or an Add, the factor Mul after an average pool, else n itself. */
uint32_t vg_unit_last(const QhHostApi *h, const QhGraphView *g, uint32_t n);

#endif
