/* The gateway's lowering calls: a pattern's accept and a kernel's create, reshape,
 * run and destroy, each with the plugin tagged (per thread: kernels run on the pool's
 * workers) and errors naming plugin, kernel or pattern, node and callback.
 * lower/kernel-node.c checks what the kernels report on top of these. */
#include "backend/backend-private.h"

#include "hostapi/host-api-private.h"
#include "hostapi/status-private.h"

static gboolean kernel_checked(const QhBackend *b, const QhKernelOps *ops, const char *node_name,
                               QhStatus *st, const char *callback, GError **error) {
  if (st == NULL)
    return TRUE;
  char *what = g_strdup_printf("kernel '%s' (node '%s'): %s", ops->id, node_name, callback);
  qh_backend_fail(b, st, what, error);
  g_free(what);
  return FALSE;
}

QhStatus *qh_backend_call_accept(QhBackend *b, const QhLoweringPattern *pattern, const QhGraphView *view,
                                 const QhNodeUnit *unit) {
  if (pattern->accept == NULL)
    return NULL;
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = pattern->accept(b->instance, qh_host_api_get(), view, unit);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_kernel_create(QhBackend *b, const QhKernelOps *ops, const QhGraphView *view,
                                        const QhNodeUnit *unit, void **out_kernel) {
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->create(b->instance, qh_host_api_get(), view, unit, out_kernel);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_kernel_reshape(QhBackend *b, const QhKernelOps *ops, void *kernel,
                                         const QhTensorView *inputs, size_t n_inputs,
                                         QhTensorView *outputs, size_t n_outputs,
                                         size_t *out_workspace_bytes) {
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->reshape(kernel, qh_host_api_get(), inputs, n_inputs, outputs, n_outputs,
                              out_workspace_bytes);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_kernel_run(QhBackend *b, const QhKernelOps *ops, void *kernel,
                                     const QhRunContext *ctx, const QhTensorView *inputs,
                                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                                     void *workspace, size_t workspace_bytes) {
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->run(kernel, qh_host_api_get(), ctx, inputs, n_inputs, outputs, n_outputs,
                          workspace, workspace_bytes);
  qh_plugin_set_current(prev);
  return st;
}

void qh_backend_kernel_destroy(QhBackend *b, const QhKernelOps *ops, void *kernel) {
  if (kernel == NULL)
    return;
  const char *prev = qh_plugin_set_current(b->name);
  ops->destroy(kernel);
  qh_plugin_set_current(prev);
}

int qh_backend_accept(QhBackend *b, const QhLoweringPattern *pattern, const QhGraphView *view,
                      const QhNodeUnit *unit, const char *node_name, char **out_reason, GError **error) {
  QhStatus *st = qh_backend_call_accept(b, pattern, view, unit);
  if (st == NULL)
    return 1;
  if (qh_status_is_valid(st) && st->code == QH_ERR_UNSUPPORTED) {
    *out_reason = g_strdup(st->message);
    qh_status_free(st);
    return 0;
  }
  char *what = g_strdup_printf("pattern '%s' accept (node '%s')", pattern->id, node_name);
  qh_backend_fail(b, st, what, error);
  g_free(what);
  return -1;
}

gboolean qh_backend_kernel_create(QhBackend *b, const QhKernelOps *ops, const char *node_name,
                                  const QhGraphView *view, const QhNodeUnit *unit, void **out_kernel,
                                  GError **error) {
  return kernel_checked(b, ops, node_name, qh_backend_call_kernel_create(b, ops, view, unit, out_kernel),
                        "create", error);
}

gboolean qh_backend_kernel_reshape(QhBackend *b, const QhKernelOps *ops, const char *node_name,
                                   void *kernel, const QhTensorView *inputs, size_t n_inputs,
                                   QhTensorView *outputs, size_t n_outputs,
                                   size_t *out_workspace_bytes, GError **error) {
  return kernel_checked(b, ops, node_name,
                        qh_backend_call_kernel_reshape(b, ops, kernel, inputs, n_inputs, outputs,
                                                       n_outputs, out_workspace_bytes),
                        "reshape", error);
}

gboolean qh_backend_kernel_run(QhBackend *b, const QhKernelOps *ops, const char *node_name, void *kernel,
                               const QhRunContext *ctx, const QhTensorView *inputs, size_t n_inputs,
                               QhTensorView *outputs, size_t n_outputs, void *workspace,
                               size_t workspace_bytes, GError **error) {
  return kernel_checked(b, ops, node_name,
                        qh_backend_call_kernel_run(b, ops, kernel, ctx, inputs, n_inputs, outputs,
                                                   n_outputs, workspace, workspace_bytes),
                        "run", error);
}
