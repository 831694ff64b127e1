/* The checks every graph function of the QhHostApi table runs before touching the
 * graph (host-graph.c for queries and rewrites, host-quant.c for annotation, qparams,
 * weights and metadata): the view handle, the callback's permission, node and value
 * ids, NULL pointers, and GError-to-status conversion. */
#include "hostapi/graph-view.h"
#include "hostapi/host-graph-checks.h"
#include "hostapi/status-private.h"

gboolean qh_api_view_ok(const QhGraphView *v) { return qh_graph_view_is_valid(v); }

static QhStatus *bad_view(const char *fn) {
  return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                       "%s: graph is not a graph handle the host passed to this callback", fn);
}

static const char *permission_place(uint32_t perm) {
  switch (perm) {
  case QH_VIEW_REWRITE: return "transform_for_annotation and post_convert";
  case QH_VIEW_ANNOTATE: return "annotate";
  case QH_VIEW_QPARAMS_READ: return "refine, post_calibration, post_convert, deploy and the lowering callbacks";
  case QH_VIEW_WEIGHTS_WRITE: return "post_calibration";
  case QH_VIEW_METADATA_WRITE: return "annotate, refine, post_calibration and post_convert";
  default: return "refine and post_calibration";
  }
}

/* View valid and permission granted. */
QhStatus *qh_api_enter(const QhGraphView *v, uint32_t perm, const char *fn) {
  if (!qh_api_view_ok(v))
    return bad_view(fn);
  if ((v->permissions & perm) != perm)
    return qh_status_new(QH_ERR_INVALID_STATE, "%s may only be called from %s", fn,
                         permission_place(perm));
  return NULL;
}

QhStatus *qh_api_check_node(const QhGraphView *v, uint32_t node, const char *fn,
                            const QhNode **out) {
  if (node >= (uint32_t)qh_graph_n_nodes(v->graph))
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: node %u is not a node id (the graph has %d)",
                         fn, node, qh_graph_n_nodes(v->graph));
  const QhNode *n = qh_graph_node(v->graph, (int)node);
  if (n->is_removed)
    return qh_status_new_for_node(n, QH_ERR_INVALID_ARGUMENT, "%s: node %u was removed", fn, node);
  *out = n;
  return NULL;
}

QhStatus *qh_api_check_value(const QhGraphView *v, uint32_t value, const char *fn,
                             const char *what, QhValue **out) {
  if (value >= (uint32_t)qh_graph_n_values(v->graph))
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "%s: %s %u is not a value id (the graph has %d)", fn, what, value,
                         qh_graph_n_values(v->graph));
  *out = qh_graph_value(v->graph, (int)value);
  return NULL;
}

QhStatus *qh_api_null_arg(const char *fn, const char *what) {
  return qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
}

static int32_t code_from_error(const GError *error) {
  if (error->domain != QH_ERROR)
    return QH_ERR_INTERNAL;
  switch (error->code) {
  case QH_ERROR_UNSUPPORTED: return QH_ERR_UNSUPPORTED;
  case QH_ERROR_NOMEM: return QH_ERR_OUT_OF_MEMORY;
  case QH_ERROR_IO: return QH_ERR_IO;
  case QH_ERROR_INVALID:
  case QH_ERROR_MISMATCH:
  case QH_ERROR_PARSE:
  case QH_ERROR_LIMIT: return QH_ERR_INVALID_ARGUMENT;
  default: return QH_ERR_INTERNAL;
  }
}

/* "fn: message", naming node when non-NULL; frees error. */
QhStatus *qh_api_from_error(const QhNode *node, const char *fn, GError *error) {
  QhStatus *st = qh_status_new_for_node(node, code_from_error(error), "%s: %s", fn, error->message);
  g_error_free(error);
  return st;
}
