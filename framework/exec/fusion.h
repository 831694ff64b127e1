/* The executor's fusion: which element-wise nodes after a Conv on the oneDNN engine run
 * as that convolution's post-op (the float path's channels-last region), and which
 * host-kernel chains (GELU's and LayerNorm's decompositions, attention's Transposes
 * around a float MatMul) run as one fused kernel (kernels/fused-host.c). Pure function
 * of the planned graph and its layout plan; no threads. The plan applies either only when no value hook watches and the naive kernels
 * are off, so calibration and the report still see every value. */
#ifndef QH_EXEC_FUSION_H
#define QH_EXEC_FUSION_H

#include "core/graph.h"
#include "core/tensor.h"
#include "exec/kernels/fused-host.h"
#include "exec/op.h"

G_BEGIN_DECLS

typedef struct {
  QhPostOpKind kind; /* QH_POST_NONE: this step is not the head of a fused group */
  float alpha, beta; /* QH_POST_CLIP: the bounds */
  int out_value;     /* the group's result, which the Conv writes */
  gboolean absorbed; /* this step's node runs inside an earlier step's Conv or host group */
  QhHostGroup host;  /* kind QH_HOST_GROUP_NONE unless this step heads a host group, whose
                        result is out_value */
} QhFusedStep;

/* A new array of run_order->len steps (caller g_free()s). A Conv at step i is a head
 * when its output y is channels-last (nhwc[y], exec/layout.c: the conv then runs on
 * oneDNN or fails) and all y's readers form one of
 *   Relu(y); Clip(y, lo, hi) with constant scalar bounds lo <= hi; HardSwish(y);
 *   Mul(y, Sigmoid(y)) (SiLU); Mul(y, HardSigmoid(y)) with alpha 1/6, beta 1/2 (hardswish)
 * on host kernels, with no graph output among y and the values inside the group; the
 * readers' steps are marked absorbed. defs and is_external: per node id, as for
 * qh_layout_plan_nhwc; nhwc: its result.
 * Host groups, on host kernels only, with float32 data, none of whose values but the
 * input x and the result is read outside the group or is a graph output, and whose
 * result has x's shape
 * (head: the group's earliest step; the others are absorbed):
 *   GELU: Div(x, c) or Mul(x, c) -> Erf -> Add(., a) -> Mul(x, .) -> Mul(., h), or with
 *     Mul(x, h) -> Mul(., Add's result) instead of the last two (HF's x * 0.5 * (...));
 *     c, a, h scalar constants (operands in either order);
 *   LayerNorm: ReduceMean(x) over the last axis (keepdims) -> Sub(x, .) -> Pow(., 2) ->
 *     ReduceMean over the last axis -> Add(., eps) -> Sqrt -> Div(Sub's result, .) ->
 *     Mul(., scale) -> Add(., bias), eps a scalar constant, scale and bias constants of
 *     the last dim's size along it;
 *   Q/DQ around data movement: DequantizeLinear -> Transpose | Reshape | Slice (->
 *     Reshape) -> QuantizeLinear, both per-tensor with constant scale and 8-bit zero
 *     point, the movement's other inputs constant;
 *   masked Softmax (head: the Softmax's step, which reads x and the mask): Softmax over
 *     the last axis of Add(Mul(x, k) | Div(x, k), mask), k a scalar constant, the mask a
 *     float value broadcast into x's shape with x's last dim;
 *   MatMul through Transposes (head: the MatMul's step, which reads the Transposes'
 *     inputs): a float MatMul of equal-rank operands with equal batch dims, one or both
 *     of whose operands is Transpose(s) or Transpose(s) * | / a scalar constant, and/or
 *     whose result is read by a Transpose only; each Transpose keeps a unit-stride axis
 *     among the last two (perm[r-1] or perm[r-2] is r-1; the result's keeps the last
 *     axis last), and each value it replaces has no other reader and is no graph output
 *     (an operand whose Transpose has another reader is read as it is). */
QhFusedStep *qh_fusion_plan(const QhGraph *graph, const GArray *run_order, const QhTensor *infos,
                            const QhOpDef *const *defs, const gboolean *is_external,
                            const gboolean *nhwc, int n_values);

/* The values a host group reads at its head step, which must live until then although
 * their last reader in the graph may run earlier (the MatMul group reads its Transposes'
 * inputs at the MatMul's step): stored in out (room for 2); their count. */
int qh_fusion_group_reads(const QhFusedStep *step, int *out);

G_END_DECLS

#endif
