/* The gateway's lifecycle and its quantization-side calls (backend.h): the instance
 * made and destroyed, the callback groups read within the descriptor's size, and
 * transform, annotate, validate, refine, reference numerics and deploy called with
 * the plugin tagged, the stage's view permissions and one error format. The
 * observer and lowering calls are in backend-observer.c and backend-lowering.c. */
#include "backend/backend-private.h"

#include <string.h>

#include "hostapi/host-api-private.h"
#include "hostapi/status-private.h"

/* ---- lifecycle ---- */

static gboolean create_instance(QhBackend *b, char *const *key_values, int n_threads, GError **error) {
  const QhPluginInfo *info = qh_plugin_info(b->plugin);
  char **values = qh_plugin_resolve_options(b->plugin, key_values, error);
  if (values == NULL)
    return FALSE;
  const QhPluginDesc *d = b->desc;
  gboolean ok = TRUE;
  if (QH_HAS_FIELD(d, QhPluginDesc, instance_destroy) && d->instance_create) {
    guint n = info->options->len;
    QhOption *opts = g_new0(QhOption, n ? n : 1);
    for (guint k = 0; k < n; k++) {
      opts[k].key = ((const QhPluginOptionInfo *)info->options->pdata[k])->name;
      opts[k].value = values[k];
    }
    QhInstanceInfo ii = {QH_STRUCT_HEADER(QhInstanceInfo), (uint32_t)MAX(n_threads, 1), 0, info->path};
    void *instance = NULL;
    const char *prev = qh_plugin_set_current(b->name);
    QhStatus *st = d->instance_create(qh_host_api_get(), &ii, opts, n, &instance);
    qh_plugin_set_current(prev);
    g_free(opts);
    if (st) {
      ok = qh_backend_fail(b, st, "instance_create", error);
    } else {
      b->instance = instance;
      b->has_instance = TRUE;
    }
  }
  g_strfreev(values);
  return ok;
}

QhBackend *qh_backend_new(QhPlugin *plugin, char *const *options, int n_threads, GError **error) {
  if (plugin == NULL)
    return NULL;
  QhBackend *b = g_new0(QhBackend, 1);
  b->plugin = plugin;
  b->desc = qh_plugin_desc(plugin);
  b->name = qh_plugin_info(plugin)->name;
  if (!create_instance(b, options, n_threads, error)) {
    qh_backend_free(b);
    return NULL;
  }
  return b;
}

QhBackend *qh_backend_open(const QhPluginSearch *search, const char *name_or_path,
                           char *const *options, int n_threads, GError **error) {
  return qh_backend_new(qh_plugin_find_and_load(search, name_or_path, error), options, n_threads, error);
}

QhBackend *qh_backend_load(const char *path, const char *expected_name, char *const *options,
                           int n_threads, GError **error) {
  return qh_backend_new(qh_plugin_load(path, expected_name, error), options, n_threads, error);
}

void qh_backend_free(QhBackend *b) {
  if (b == NULL)
    return;
  if (b->has_instance && b->desc->instance_destroy) {
    const char *prev = qh_plugin_set_current(b->name);
    b->desc->instance_destroy(b->instance);
    qh_plugin_set_current(prev);
  }
  qh_plugin_free(b->plugin);
  g_free(b);
}

const char *qh_backend_name(const QhBackend *b) { return b->name; }
const QhPluginInfo *qh_backend_info(const QhBackend *b) { return qh_plugin_info(b->plugin); }
const QhPluginDesc *qh_backend_desc(const QhBackend *b) { return b->desc; }
void *qh_backend_instance(const QhBackend *b) { return b->instance; }

/* ---- callback groups ---- */

#define GROUP(b, field) (QH_HAS_FIELD((b)->desc, QhPluginDesc, field) ? (b)->desc->field : NULL)

const QhBackendConfig *qh_backend_config(const QhBackend *b) { return GROUP(b, backend_config); }
const QhTransformOps *qh_backend_transform_ops(const QhBackend *b) { return GROUP(b, transform); }
const QhAnnotateOps *qh_backend_annotate_ops(const QhBackend *b) { return GROUP(b, annotate); }
const QhRefineOps *qh_backend_refine_ops(const QhBackend *b) { return GROUP(b, refine); }
const QhReferenceNumericsOps *qh_backend_reference_numerics(const QhBackend *b) {
  return GROUP(b, reference_numerics);
}
const QhLoweringOps *qh_backend_lowering(const QhBackend *b) {
  const QhLoweringOps *lo = GROUP(b, lowering);
  return b->restricted && lo ? &b->one_pattern : lo;
}

void qh_backend_restrict_lowering(QhBackend *b, size_t index) {
  const QhLoweringOps *lo = GROUP(b, lowering);
  /* every restriction but the partitions-only one hides the partitions: a per-kernel
   * check must run the kernel, not a partition that took its nodes first */
  b->restricted = index != SIZE_MAX && index != QH_BACKEND_ALL_PATTERNS;
  b->hide_partitions = index != SIZE_MAX && index != QH_BACKEND_NO_PATTERNS;
  if (b->restricted && lo) {
    b->one_pattern = *lo;
    gboolean one = index < lo->n_patterns;
    b->one_pattern.patterns = one ? lo->patterns + index : NULL;
    b->one_pattern.n_patterns = one ? 1 : 0;
  }
}
const QhDeployOps *qh_backend_deploy_ops(const QhBackend *b) { return GROUP(b, deploy); }
const QhPassOps *qh_backend_passes(const QhBackend *b) { return GROUP(b, passes); }

size_t qh_backend_n_observers(const QhBackend *b) {
  return QH_HAS_FIELD(b->desc, QhPluginDesc, n_observers) && b->desc->observers ? b->desc->n_observers : 0;
}

const QhObserverOps *qh_backend_observer(const QhBackend *b, size_t i) {
  return i < qh_backend_n_observers(b) ? b->desc->observers[i] : NULL;
}

const QhObserverOps *qh_backend_find_observer(const QhBackend *b, const char *name) {
  for (size_t i = 0; i < qh_backend_n_observers(b); i++)
    if (strcmp(b->desc->observers[i]->name, name) == 0)
      return b->desc->observers[i];
  return NULL;
}

/* ---- errors ---- */

gboolean qh_backend_fail(const QhBackend *b, QhStatus *status, const char *callback, GError **error) {
  char *prefix = g_strdup_printf("plugin '%s': %s", b->name, callback);
  qh_status_to_gerror(status, prefix, error);
  g_free(prefix);
  return FALSE;
}

static gboolean checked(const QhBackend *b, QhStatus *st, const char *callback, GError **error) {
  return st == NULL || qh_backend_fail(b, st, callback, error);
}

/* ---- quantization-side calls ---- */

QhStatus *qh_backend_call_transform(QhBackend *b, QhGraphView *view) {
  const QhTransformOps *t = qh_backend_transform_ops(b);
  if (t == NULL)
    return qh_status_new(QH_ERR_UNSUPPORTED, "the plugin supplies no transform_for_annotation");
  qh_graph_view_set_permissions(view, QH_VIEW_READ | QH_VIEW_REWRITE);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = t->transform_for_annotation(b->instance, qh_host_api_get(), view);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_annotate(QhBackend *b, QhGraphView *view) {
  const QhAnnotateOps *a = qh_backend_annotate_ops(b);
  if (a == NULL)
    return qh_status_new(QH_ERR_UNSUPPORTED, "the plugin supplies no annotate");
  qh_graph_view_set_permissions(view, QH_VIEW_READ | QH_VIEW_ANNOTATE | QH_VIEW_METADATA_WRITE);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = a->annotate(b->instance, qh_host_api_get(), view);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_validate(QhBackend *b, QhGraphView *view) {
  const QhAnnotateOps *a = qh_backend_annotate_ops(b);
  if (a == NULL || a->validate == NULL)
    return NULL;
  qh_graph_view_set_permissions(view, QH_VIEW_READ);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = a->validate(b->instance, qh_host_api_get(), view);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_refine(QhBackend *b, QhGraphView *view) {
  const QhRefineOps *r = qh_backend_refine_ops(b);
  if (r == NULL)
    return qh_status_new(QH_ERR_UNSUPPORTED, "the plugin supplies no refine");
  qh_graph_view_set_permissions(view, QH_VIEW_READ | QH_VIEW_QPARAMS_READ | QH_VIEW_QPARAMS_WRITE |
                                          QH_VIEW_METADATA_WRITE);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = r->refine(b->instance, qh_host_api_get(), view);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_fake_quantize(QhBackend *b, int32_t role, const QhQParams *qparams,
                                        const QhTensorView *in, QhTensorView *out) {
  const QhReferenceNumericsOps *rn = qh_backend_reference_numerics(b);
  if (rn == NULL)
    return qh_status_new(QH_ERR_UNSUPPORTED, "the plugin supplies no reference_numerics");
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = rn->fake_quantize(b->instance, qh_host_api_get(), role, qparams, in, out);
  qh_plugin_set_current(prev);
  return st;
}

QhStatus *qh_backend_call_deploy(QhBackend *b, const QhGraphView *view, QhArtifact *artifact) {
  const QhDeployOps *d = qh_backend_deploy_ops(b);
  if (d == NULL)
    return qh_status_new(QH_ERR_UNSUPPORTED, "the plugin supplies no deploy");
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = d->deploy(b->instance, qh_host_api_get(), view, artifact);
  qh_plugin_set_current(prev);
  return st;
}

gboolean qh_backend_transform_graph(QhBackend *b, QhGraphView *view, GError **error) {
  return checked(b, qh_backend_call_transform(b, view), "transform_for_annotation", error);
}

gboolean qh_backend_annotate_graph(QhBackend *b, QhGraphView *view, GError **error) {
  return checked(b, qh_backend_call_annotate(b, view), "annotate", error);
}

gboolean qh_backend_validate_graph(QhBackend *b, QhGraphView *view, GError **error) {
  return checked(b, qh_backend_call_validate(b, view), "validate", error);
}

gboolean qh_backend_refine_graph(QhBackend *b, QhGraphView *view, GError **error) {
  return checked(b, qh_backend_call_refine(b, view), "refine", error);
}

/* One 1.2 pass: the plugin tagged, refusals recorded, and a refused change failing
 * the pass even when the plugin swallowed its status. */
static gboolean run_pass(QhBackend *b, QhGraphView *view, uint32_t permissions, const char *name,
                         QhStatus *(*pass)(void *, const QhHostApi *, QhGraphView *), GError **error) {
  if (pass == NULL)
    return TRUE;
  qh_graph_view_set_permissions(view, permissions);
  qh_graph_view_keep_refusals(view);
  view->plugin = b->name;
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = pass(b->instance, qh_host_api_get(), view);
  qh_plugin_set_current(prev);
  qh_graph_view_set_permissions(view, QH_VIEW_READ);
  if (st == NULL && qh_graph_view_refusal(view) != NULL)
    st = qh_status_new(QH_ERR_INVALID_ARGUMENT, "refused: %s", qh_graph_view_refusal(view));
  return checked(b, st, name, error);
}

gboolean qh_backend_post_calibration(QhBackend *b, QhGraphView *view, GError **error) {
  const QhPassOps *p = qh_backend_passes(b);
  return run_pass(b, view,
                  QH_VIEW_READ | QH_VIEW_QPARAMS_READ | QH_VIEW_QPARAMS_WRITE | QH_VIEW_WEIGHTS_WRITE |
                      QH_VIEW_METADATA_WRITE,
                  "post_calibration", p ? p->post_calibration : NULL, error);
}

gboolean qh_backend_post_convert(QhBackend *b, QhGraphView *view, GError **error) {
  const QhPassOps *p = qh_backend_passes(b);
  return run_pass(b, view, QH_VIEW_READ | QH_VIEW_REWRITE | QH_VIEW_QPARAMS_READ | QH_VIEW_METADATA_WRITE,
                  "post_convert", p ? p->post_convert : NULL, error);
}

gboolean qh_backend_fake_quantize(QhBackend *b, int32_t role, const QhQParams *qparams,
                                  const QhTensorView *in, QhTensorView *out, GError **error) {
  return checked(b, qh_backend_call_fake_quantize(b, role, qparams, in, out), "reference_numerics",
                 error);
}

gboolean qh_backend_deploy_graph(QhBackend *b, const QhGraphView *view, QhArtifact *artifact, GError **error) {
  if (qh_backend_deploy_ops(b) == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "plugin '%s' has no deploy step", b->name);
    return FALSE;
  }
  return checked(b, qh_backend_call_deploy(b, view, artifact), "deploy", error);
}

QhStatus *qh_backend_call_derive(QhBackend *b, const QhQuantSpec *spec, const QhQParams *const *sources,
                                 size_t n_sources, QhQParams *out) {
  const char *prev = b ? qh_plugin_set_current(b->name) : NULL;
  QhStatus *st = spec->derive(spec->derive_user_data, qh_host_api_get(), sources, n_sources, out);
  if (b)
    qh_plugin_set_current(prev);
  return st;
}
