/* A float MatMul that reads its operands through the Transposes that made them, and may
 * write its result through the Transpose that reads it: the attention heads' split
 * (Reshape -> Transpose), K's transpose and the heads' merge of exported transformers,
 * which run node by node as a full copy of the activation each. Here each batch's
 * matrix is one strided GEMM (leading dimension and trans flag) on the Transpose's
 * input, as ONNX Runtime's TransposeMatMul rewrite does. A scalar Mul or Div between a
 * Transpose and the MatMul (nn.MultiheadAttention's q / sqrt(d)) becomes the GEMM's
 * alpha when the scalar is a power of two (d = 64: / 8, exact either way), else runs
 * first on the untransposed input with its own kernel: element-wise, so each element
 * gets its bits.
 * Planned by exec/fusion.c (QH_HOST_GROUP_TMATMUL), run by kernels/fused-host.c's entry.
 * Threading: like any kernel's run (exec/op.h): uses ctx's pool. */
#ifndef QH_EXEC_FUSED_MATMUL_H
#define QH_EXEC_FUSED_MATMUL_H

#include <glib.h>

#include "core/tensor.h"
#include "exec/op.h"

G_BEGIN_DECLS

/* One MatMul operand as the group reads it. */
typedef struct {
  int src;                  /* value id read at the MatMul's step: the Transpose's input, or
                               the operand itself when transposed is FALSE */
  gboolean transposed;      /* src reaches the MatMul through a Transpose of perm */
  int perm[QH_MAX_RANK];    /* that Transpose's perm (rank: src's) */
  float alpha;              /* a Mul/Div by a power of two after the Transpose, as a factor
                               (exact: the GEMM's alpha gives the node's bits); else 1 */
  const QhNode *scale;      /* a Mul/Div by another scalar constant after the Transpose, or NULL */
  const QhOpDef *scale_def; /* its kernel */
  int scale_slot;           /* the scale node's input slot that holds the transposed value */
  int scaled;               /* the scale node's output value: its slot holds src scaled, in src's
                               layout, for the GEMM to read (-1 without a scale node) */
} QhTmmOperand;

typedef struct {
  const QhNode *matmul;
  QhTmmOperand a, b;
  gboolean out_transposed; /* the result goes through a Transpose of out_perm (last axis kept) */
  int out_perm[QH_MAX_RANK];
  int mm_out;              /* the MatMul's own output value (its shape: the GEMMs' result) */
} QhTransposedMatMul;

/* Run t into y, the group's result (the output Transpose's value when out_transposed,
 * else the MatMul's; allocated by the caller, not overlapping any src). live: per value
 * id, where its data is during this run (the srcs, the scale constants and the scaled
 * slots; every shape follows from the srcs' and the perms). The plan checked
 * dtypes (float32), ranks (equal, >= 2), batch dims (equal) and that each transposed
 * operand's matrix has a unit stride along rows or columns. Fails (error set, naming the
 * node) only when the scale kernel fails or a dimension exceeds sgemm's int. */
gboolean qh_fused_matmul_run(QhExecContext *ctx, const QhTransposedMatMul *t,
                             const QhTensor *const *live, QhTensor *y, GError **error);

G_END_DECLS

#endif
