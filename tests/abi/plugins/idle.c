/* A plugin whose annotate quantizes nothing and whose refine has nothing to refine: a
 * well-formed plugin that `qhost plugin-check` can only SKIP, never PASS, on those
 * groups (a check that looked at nothing checked nothing). No BackendConfig, so nothing
 * but its own annotate could have put a spec on the built-in graphs. */
#include <qhost/qhost-plugin.h>

static QhStatus *annotate(void *instance, const QhHostApi *host, QhGraphView *graph) {
  (void)instance, (void)host, (void)graph;
  return NULL;
}
static const QhAnnotateOps annotate_ops = {QH_STRUCT_HEADER(QhAnnotateOps), .annotate = annotate};

static QhStatus *refine(void *instance, const QhHostApi *host, QhGraphView *graph) {
  (void)instance, (void)host, (void)graph;
  return NULL;
}
static const QhRefineOps refine_ops = {QH_STRUCT_HEADER(QhRefineOps), .refine = refine};

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = PLUGIN_NAME,
    .version = "1.0.0",
    .description = "annotates nothing, refines nothing",
    .annotate = &annotate_ops,
    .refine = &refine_ops,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
