/* The host's side of a plugin kernel: it calls create, reshape, run and destroy in
 * that order and no other, and checks what comes back. A kernel's reshape must
 * report exactly the dtype, layout and dimensions the QDQ graph implies for the
 * unit's output, so a plugin bug shows as one error naming kernel and node instead
 * of a wrong tensor further down. Before each run the 64 bytes of slack after every
 * output and after the workspace are filled with a pattern, and checked after it:
 * an overrun is reported rather than silently corrupting a neighbouring tensor. The
 * check costs a few hundred bytes per run, so it is always on. */
#include "lower/kernel-node.h"

#include <string.h>

#include "core/error.h"
#include "hostapi/host-private.h"

#define CANARY_BYTE 0xA5

static gboolean fail(const QhKernelNode *k, GError **error, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

static gboolean fail(const QhKernelNode *k, GError **error, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *cause = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "plugin '%s': kernel '%s' (node '%s'): %s",
              qh_backend_name(k->backend), k->ops->id, k->node_name, cause);
  g_free(cause);
  return FALSE;
}

QhKernelNode *qh_kernel_node_create(QhBackend *backend, const char *node_name,
                                    const QhKernelOps *ops, const QhQdqUnit *unit,
                                    const QhGraphView *view, GError **error) {
  QhKernelNode *k = g_new0(QhKernelNode, 1);
  k->backend = backend;
  k->node_name = node_name;
  k->ops = ops;
  k->unit = unit;
  k->input_layouts = g_new0(int32_t, unit->inputs->len + 1);
  QhNodeUnit abi;
  qh_qdq_unit_to_abi(unit, &abi);
  void *kernel = NULL;
  if (!qh_backend_kernel_create(backend, ops, node_name, view, &abi, &kernel, error)) {
    g_free(k->input_layouts);
    g_free(k);
    return NULL;
  }
  if (kernel == NULL) {
    fail(k, error, "create succeeded without returning a kernel");
    g_free(k->input_layouts);
    g_free(k);
    return NULL;
  }
  k->kernel = kernel;
  k->state = QH_KERNEL_CREATED;
  return k;
}

void qh_kernel_node_free(QhKernelNode *k) {
  if (k == NULL)
    return;
  qh_backend_kernel_destroy(k->backend, k->ops, k->kernel);
  g_free(k->input_layouts);
  g_free(k);
}

/* The view the kernel sees of input i (data NULL at reshape). */
static void input_view(const QhKernelNode *k, int i, const QhTensor *t, QhTensorView *v) {
  const QhQdqUnitInput *in = &g_array_index(k->unit->inputs, QhQdqUnitInput, i);
  *v = (QhTensorView){QH_STRUCT_HEADER(QhTensorView)};
  v->dtype = (int32_t)t->dtype;
  v->layout = t->shape.rank == 4 ? k->input_layouts[i] : QH_LAYOUT_ANY;
  v->rank = t->shape.rank;
  memcpy(v->dims, t->shape.dims, sizeof(int64_t) * (size_t)t->shape.rank);
  v->data = t->data;
  v->nbytes = t->nbytes;
  v->qparams = in->quantized ? &in->qparams : NULL;
}

static const char *layout_name(int32_t layout) {
  switch (layout) {
  case QH_LAYOUT_ANY: return "any";
  case QH_LAYOUT_NCHW: return "NCHW";
  case QH_LAYOUT_NHWC: return "NHWC";
  case QH_LAYOUT_OPAQUE: return "opaque";
  default: return "unknown";
  }
}

gboolean qh_kernel_node_infer(gpointer data, const QhNode *node, const QhTensor *const *inputs,
                              int n_inputs, QhTensor *outputs, int n_outputs, GError **error) {
  QhKernelNode *k = data;
  if (n_inputs != (int)k->unit->inputs->len || n_outputs != 1)
    return fail(k, error, "node '%s' does not fit its unit", node->name);
  QhTensorView *ins = g_new0(QhTensorView, (gsize)n_inputs + 1);
  for (int i = 0; i < n_inputs; i++) {
    input_view(k, i, inputs[i], &ins[i]);
    ins[i].data = NULL;
  }
  QhTensorView out = {QH_STRUCT_HEADER(QhTensorView)};
  size_t workspace = 0;
  gboolean reshaped = qh_backend_kernel_reshape(k->backend, k->ops, k->node_name, k->kernel, ins,
                                                (size_t)n_inputs, &out, 1, &workspace, error);
  g_free(ins);
  if (!reshaped)
    return FALSE;
  const QhShape *want = &k->output_shape;
  gboolean layout_ok = out.layout == k->output_layout ||
                       (k->output_layout != QH_LAYOUT_NHWC &&
                        (out.layout == QH_LAYOUT_ANY || out.layout == QH_LAYOUT_NCHW));
  gboolean dims_ok = out.rank == want->rank;
  for (int d = 0; dims_ok && d < want->rank; d++)
    dims_ok = out.dims[d] == want->dims[d];
  if (out.dtype != (int32_t)k->output_dtype || !layout_ok || !dims_ok) {
    QhShape got = {.rank = out.rank >= 0 && out.rank <= QH_MAX_RANK ? out.rank : 0};
    memcpy(got.dims, out.dims, sizeof(int64_t) * (size_t)got.rank);
    char *gs = qh_shape_to_string(&got), *ws = qh_shape_to_string(want);
    fail(k, error, "reshape reported %s %s %s for the output; the graph needs %s %s %s",
         qh_dtype_name((QhDType)out.dtype), layout_name(out.layout), gs,
         qh_dtype_name(k->output_dtype), layout_name(k->output_layout), ws);
    g_free(gs);
    g_free(ws);
    return FALSE;
  }
  if (workspace > QH_KERNEL_MAX_WORKSPACE)
    return fail(k, error, "reshape asked for %zu bytes of workspace (the limit is %zu)", workspace,
                QH_KERNEL_MAX_WORKSPACE);
  outputs[0].dtype = k->output_dtype;
  outputs[0].shape = *want;
  k->workspace = workspace;
  k->state = QH_KERNEL_RESHAPED;
  return TRUE;
}

static gboolean canary_intact(const void *end) {
  const unsigned char *p = end;
  for (int i = 0; i < QH_TENSOR_ALIGN; i++)
    if (p[i] != CANARY_BYTE)
      return FALSE;
  return TRUE;
}

gboolean qh_kernel_node_run(gpointer data, QhExecContext *ctx, const QhNode *node,
                            const QhTensor *const *inputs, int n_inputs,
                            QhTensor *const *outputs, int n_outputs, GError **error) {
  QhKernelNode *k = data;
  (void)node;
  if (k->state != QH_KERNEL_RESHAPED)
    return fail(k, error, "run before a successful reshape");
  if (n_inputs != (int)k->unit->inputs->len || n_outputs != 1 || outputs[0] == NULL)
    return fail(k, error, "node does not fit its unit");
  void *workspace = NULL;
  if (k->workspace > 0) {
    workspace = qh_exec_scratch(ctx, k->workspace + QH_TENSOR_ALIGN);
    if (workspace == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_NOMEM, "node '%s': out of memory for %zu bytes of workspace",
                  k->node_name, k->workspace);
      return FALSE;
    }
    memset((char *)workspace + k->workspace, CANARY_BYTE, QH_TENSOR_ALIGN);
  }
  QhTensorView *ins = g_new0(QhTensorView, (gsize)n_inputs + 1);
  for (int i = 0; i < n_inputs; i++)
    input_view(k, i, inputs[i], &ins[i]);
  QhTensor *o = outputs[0];
  QhTensorView out = {QH_STRUCT_HEADER(QhTensorView)};
  out.dtype = (int32_t)o->dtype;
  out.layout = k->output_layout;
  out.rank = o->shape.rank;
  memcpy(out.dims, o->shape.dims, sizeof(int64_t) * (size_t)o->shape.rank);
  out.data = o->data;
  out.nbytes = o->nbytes;
  out.qparams = k->unit->float_output ? NULL : &k->unit->output_qparams;
  if (o->data)
    memset((char *)o->data + o->nbytes, CANARY_BYTE, QH_TENSOR_ALIGN);
  QhRunContext rc = {.magic = QH_RUNCTX_MAGIC, .pool = ctx->pool};
  gboolean ran = qh_backend_kernel_run(k->backend, k->ops, k->node_name, k->kernel, &rc, ins,
                                       (size_t)n_inputs, &out, 1, workspace, k->workspace, error);
  g_free(ins);
  if (!ran)
    return FALSE;
  if (o->data && !canary_intact((char *)o->data + o->nbytes))
    return fail(k, error, "run wrote past the end of its output (%zu bytes)", o->nbytes);
  if (workspace && !canary_intact((char *)workspace + k->workspace))
    return fail(k, error, "run wrote past the end of its workspace (%zu bytes)", k->workspace);
  return TRUE;
}
