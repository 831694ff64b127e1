/* The kernels of the host-op groups the executor's fusion (exec/fusion.c) runs as one
 * node: GELU's Div/Mul, Erf, Add, Mul, Mul chain and LayerNorm's opset-13
 * ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add decomposition. Each gives the bits
 * of the nodes it replaces run one by one (the same float operations in the same order,
 * the same double sums), in one pass over memory instead of five or nine.
 * Threading: like any kernel's run (exec/op.h): uses ctx's pool, never concurrently on
 * one group. */
#ifndef QH_EXEC_FUSED_HOST_H
#define QH_EXEC_FUSED_HOST_H

#include <glib.h>

#include "core/tensor.h"
#include "exec/op.h"

G_BEGIN_DECLS

typedef enum {
  QH_HOST_GROUP_NONE,
  QH_HOST_GROUP_GELU,      /* y = (x * (erf(x OP k_in) + k_add)) * k_half, or (x * k_half) * (...) */
  QH_HOST_GROUP_LAYERNORM, /* y = ((x - mean) / sqrt(var + eps)) * scale + bias along the last axis */
} QhHostGroupKind;

typedef struct {
  QhHostGroupKind kind;
  int x;               /* value id of the group's input (float32) */
  int scale, bias;     /* LayerNorm: value ids of the constant scale and bias (last-dim elements) */
  gboolean in_divides; /* GELU: x / k_in (Div) rather than x * k_in (Mul) */
  gboolean half_first; /* GELU: (x * k_half) * (erf + k_add) rather than (x * (erf + k_add)) * k_half */
  float k_in, k_add, k_half;
  float eps;           /* LayerNorm: the Add's constant */
} QhHostGroup;

/* Run group g on x into y (x's shape, allocated by the caller; y must not overlap x);
 * scale and bias: LayerNorm's constants (NULL for GELU). The plan checked dtypes and
 * shapes; no errors arise here (the GError is for the plan's uniform call). */
gboolean qh_fused_host_run(QhExecContext *ctx, const QhHostGroup *g, const QhTensor *x, const QhTensor *scale,
                           const QhTensor *bias, QhTensor *y, GError **error);

G_END_DECLS

#endif
