/* The kernels of the host-op groups the executor's fusion (exec/fusion.c) runs as one
 * node: GELU's Div/Mul, Erf, Add, Mul, Mul chain, LayerNorm's opset-13
 * ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add decomposition, attention's scaled
 * and masked Softmax (Mul|Div by a scalar, Add a mask, Softmax over the last axis), and a
 * DequantizeLinear -> Transpose|Reshape|Slice (-> Reshape) -> QuantizeLinear chain of a
 * QDQ file, in one pass over memory instead of three to nine. The Q/DQ chain gives the
 * nodes' bits (the same DequantizeLinear and QuantizeLinear kernels, applied to the 256
 * possible bytes); GELU, LayerNorm and Softmax give them without AVX-512 and, with it,
 * agree within 1e-6 of each row's largest value (vector sums and single-precision Erf
 * and exp: see fused-host.c). A float MatMul with its operands' and its result's
 * Transposes (attention's heads) is the fifth kind, run by kernels/fused-matmul.c, which
 * may change the last bits too (see there).
 * Threading: like any kernel's run (exec/op.h): uses ctx's pool, never concurrently on
 * one group. */
#ifndef QH_EXEC_FUSED_HOST_H
#define QH_EXEC_FUSED_HOST_H

#include <glib.h>

#include "core/tensor.h"
#include "exec/kernels/fused-matmul.h"
#include "exec/op.h"

G_BEGIN_DECLS

typedef enum {
  QH_HOST_GROUP_NONE,
  QH_HOST_GROUP_GELU,      /* y = (x * (erf(x OP k_in) + k_add)) * k_half, or (x * k_half) * (...) */
  QH_HOST_GROUP_LAYERNORM, /* y = ((x - mean) / sqrt(var + eps)) * scale + bias along the last axis */
  QH_HOST_GROUP_QMOVE,     /* y = Q(move(DQ(x))) computed as lut[move(x)] on the 8-bit data */
  QH_HOST_GROUP_TMATMUL,   /* y = [Transpose](MatMul([s](Transpose(a)), [s](Transpose(b)))) as strided
                              GEMMs (kernels/fused-matmul.h; x unused) */
  QH_HOST_GROUP_SOFTMAX,   /* y = Softmax((x OP k_in) + mask) along the last axis (attention scores) */
} QhHostGroupKind;

typedef struct {
  QhHostGroupKind kind;
  int x;               /* value id of the group's input (float32) */
  int scale, bias;     /* LayerNorm: value ids of the constant scale and bias (last-dim elements) */
  gboolean in_divides; /* GELU: x / k_in (Div) rather than x * k_in (Mul) */
  gboolean half_first; /* GELU: (x * k_half) * (erf + k_add) rather than (x * (erf + k_add)) * k_half */
  float k_in, k_add, k_half;
  float eps;           /* LayerNorm: the Add's constant */
  int mask;            /* SOFTMAX: value id of the added mask (float32, broadcast into x's shape,
                          its last dim x's) */
  /* QMOVE: the DequantizeLinear, the data-movement node and the QuantizeLinear (a Reshape
   * between the last two only reinterprets the moved bytes), with their definitions */
  const QhNode *dq, *move, *q;
  const QhOpDef *dq_def, *move_def, *q_def;
  QhTransposedMatMul tmm; /* TMATMUL: the operands and the output as read and written */
} QhHostGroup;

/* Run group g into y (the group's result, allocated by the caller; it must not overlap
 * the input). live: per value id, where the value's data is during this run (the input
 * x, LayerNorm's scale and bias, Softmax's mask, the Q/DQ chain's scales, zero points and index inputs).
 * The plan checked dtypes and shapes; only the QMOVE group's inner kernel calls and the
 * TMATMUL group (qh_fused_matmul_run) can fail (then error is set, naming their node, and
 * FALSE is returned). */
gboolean qh_fused_host_run(QhExecContext *ctx, const QhHostGroup *g, const QhTensor *const *live, QhTensor *y,
                           GError **error);

G_END_DECLS

#endif
