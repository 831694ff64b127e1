/* Conv + activation fusion for the float path's channels-last region: which element-wise
 * nodes after a Conv on the oneDNN engine run as that convolution's post-op.
 * Pure function of the planned graph and its layout plan; no threads. */
#ifndef QH_EXEC_FUSION_H
#define QH_EXEC_FUSION_H

#include "core/graph.h"
#include "core/tensor.h"
#include "exec/op.h"

G_BEGIN_DECLS

typedef struct {
  QhPostOpKind kind; /* QH_POST_NONE: this step is not the head of a fused group */
  float alpha, beta; /* QH_POST_CLIP: the bounds */
  int out_value;     /* the group's result, which the Conv writes */
  gboolean absorbed; /* this step's node runs inside an earlier step's Conv */
} QhFusedStep;

/* A new array of run_order->len steps (caller g_free()s). A Conv at step i is a head
 * when its output y is channels-last (nhwc[y], exec/layout.c: the conv then runs on
 * oneDNN or fails) and all y's readers form one of
 *   Relu(y); Clip(y, lo, hi) with constant scalar bounds lo <= hi; HardSwish(y);
 *   Mul(y, Sigmoid(y)) (SiLU); Mul(y, HardSigmoid(y)) with alpha 1/6, beta 1/2 (hardswish)
 * on host kernels, with no graph output among y and the values inside the group; the
 * readers' steps are marked absorbed. defs and is_external: per node id, as for
 * qh_layout_plan_nhwc; nhwc: its result. */
QhFusedStep *qh_fusion_plan(const QhGraph *graph, const GArray *run_order, const QhTensor *infos,
                            const QhOpDef *const *defs, const gboolean *is_external,
                            const gboolean *nhwc, int n_values);

G_END_DECLS

#endif
