/* The table of the host's reference kernels: every op family's definitions, looked
 * up by op type (an op missing here is reported by the planner as unsupported,
 * naming the node, never skipped), and the execution context's scratch buffer. */
#include <string.h>

#include "exec/op.h"
#include "exec/kernels/conv-private.h"

static const QhOpDef *const families[] = {
    qh_ops_conv,       qh_ops_gemm, qh_ops_pool, qh_ops_elementwise, qh_ops_activation,
    qh_ops_norm,       qh_ops_reduce, qh_ops_qdq, qh_ops_shape,      qh_ops_index,
    qh_ops_resize,     qh_ops_cast, qh_ops_math, qh_ops_rnn, qh_ops_layernorm, qh_ops_index_build,
    qh_ops_tile_split, qh_ops_instancenorm, qh_ops_index_elements, qh_ops_topk, qh_ops_einsum,
    qh_ops_dynamic_quant,
};

static const QhOpDef **all_ops;

static gpointer build_table(gpointer unused) {
  (void)unused;
  GPtrArray *a = g_ptr_array_new();
  for (size_t f = 0; f < G_N_ELEMENTS(families); f++)
    for (const QhOpDef *d = families[f]; d->op_type != NULL; d++)
      g_ptr_array_add(a, (gpointer)d);
  g_ptr_array_add(a, NULL);
  all_ops = (const QhOpDef **)g_ptr_array_free(a, FALSE);
  return NULL;
}

const QhOpDef *const *qh_op_all(void) {
  static GOnce once = G_ONCE_INIT;
  g_once(&once, build_table, NULL);
  return all_ops;
}

const QhOpDef *qh_op_find(const char *domain, const char *op_type) {
  if (domain != NULL && *domain != '\0' && strcmp(domain, "ai.onnx") != 0)
    return NULL;
  for (const QhOpDef *const *d = qh_op_all(); *d != NULL; d++)
    if (strcmp((*d)->op_type, op_type) == 0)
      return *d;
  return NULL;
}

void *qh_exec_scratch(QhExecContext *ctx, size_t size) {
  if (size > ctx->scratch_size) {
    qh_aligned_free(ctx->scratch);
    ctx->scratch = qh_aligned_alloc0(size);
    ctx->scratch_size = ctx->scratch ? size : 0;
  }
  return ctx->scratch;
}

void qh_exec_context_clear(QhExecContext *ctx) {
  qh_conv_cache_free(ctx->conv_cache);
  ctx->conv_cache = NULL;
  qh_aligned_free(ctx->scratch);
  ctx->scratch = NULL;
  ctx->scratch_size = 0;
}
