/* The gateway's calls into a plugin's custom observers (QhObserverOps): create,
 * observe, compute_qparams, merge, save, load and destroy, each with the plugin
 * tagged, the optional members checked, and errors naming plugin, observer and
 * callback. quant/plugin-observer.c builds the host's observer on top of them. */
#include "backend/backend-private.h"

#include "hostapi/host-api-private.h"
#include "hostapi/status-private.h"

static gboolean observer_checked(const QhBackend *b, const QhObserverOps *ops, QhStatus *st,
                                 const char *callback, GError **error) {
  if (st == NULL)
    return TRUE;
  char *what = g_strdup_printf("observer '%s': %s", ops->name, callback);
  qh_backend_fail(b, st, what, error);
  g_free(what);
  return FALSE;
}

QhStatus *qh_backend_call_observer_create(QhBackend *b, const QhObserverOps *ops,
                                          const QhQuantSpec *spec, int32_t rank, const int64_t *dims,
                                          void **out_state) {
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->create(b->instance, qh_host_api_get(), spec, rank, dims, out_state);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_observer_observe(QhBackend *b, const QhObserverOps *ops, void *state,
                                           const QhTensorView *tensor) {
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->observe(state, qh_host_api_get(), tensor);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_observer_compute(QhBackend *b, const QhObserverOps *ops, void *state,
                                           QhQParams *out) {
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->compute_qparams(state, qh_host_api_get(), out);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_observer_merge(QhBackend *b, const QhObserverOps *ops, void *state,
                                         const void *other) {
  if (ops->merge == NULL)
    return qh_status_new(QH_ERR_UNSUPPORTED, "observer '%s' cannot merge shards", ops->name);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->merge(state, qh_host_api_get(), other);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_observer_save(QhBackend *b, const QhObserverOps *ops, const void *state,
                                        QhBuffer *out) {
  if (ops->save == NULL)
    return qh_status_new(QH_ERR_UNSUPPORTED, "observer '%s' cannot save its state", ops->name);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->save(state, qh_host_api_get(), out);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_observer_load(QhBackend *b, const QhObserverOps *ops,
                                        const QhQuantSpec *spec, int32_t rank, const int64_t *dims,
                                        const void *data, size_t size, void **out_state) {
  if (ops->load == NULL)
    return qh_status_new(QH_ERR_UNSUPPORTED, "observer '%s' cannot load a saved state", ops->name);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->load(b->instance, qh_host_api_get(), spec, rank, dims, data, size, out_state);
  qh_plugin_set_current(prev);
  return st;
}

void qh_backend_observer_destroy(QhBackend *b, const QhObserverOps *ops, void *state) {
  if (state == NULL)
    return;
  const char *prev = qh_plugin_set_current(b->name);
  ops->destroy(state);
  qh_plugin_set_current(prev);
}

gboolean qh_backend_observer_create(QhBackend *b, const QhObserverOps *ops, const QhQuantSpec *spec,
                                    int32_t rank, const int64_t *dims, void **out_state,
                                    GError **error) {
  return observer_checked(b, ops, qh_backend_call_observer_create(b, ops, spec, rank, dims, out_state),
                          "create", error);
}

gboolean qh_backend_observer_observe(QhBackend *b, const QhObserverOps *ops, void *state,
                                     const QhTensorView *tensor, GError **error) {
  return observer_checked(b, ops, qh_backend_call_observer_observe(b, ops, state, tensor), "observe",
                          error);
}

gboolean qh_backend_observer_compute(QhBackend *b, const QhObserverOps *ops, void *state,
                                     QhQParams *out, GError **error) {
  return observer_checked(b, ops, qh_backend_call_observer_compute(b, ops, state, out),
                          "compute_qparams", error);
}

gboolean qh_backend_observer_merge(QhBackend *b, const QhObserverOps *ops, void *state,
                                   const void *other, GError **error) {
  return observer_checked(b, ops, qh_backend_call_observer_merge(b, ops, state, other), "merge", error);
}

gboolean qh_backend_observer_save(QhBackend *b, const QhObserverOps *ops, const void *state,
                                  QhBuffer *out, GError **error) {
  return observer_checked(b, ops, qh_backend_call_observer_save(b, ops, state, out), "save", error);
}

gboolean qh_backend_observer_load(QhBackend *b, const QhObserverOps *ops, const QhQuantSpec *spec,
                                  int32_t rank, const int64_t *dims, const void *data, size_t size,
                                  void **out_state, GError **error) {
  return observer_checked(
      b, ops, qh_backend_call_observer_load(b, ops, spec, rank, dims, data, size, out_state), "load",
      error);
}
