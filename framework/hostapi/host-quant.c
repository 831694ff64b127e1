/* The quantization half of the QhHostApi's graph functions: annotation specs and node
 * flags, qconfig lookup, qparams read and replace, weight rewrites in post_calibration and
 * the plugin's own metadata ("qhost.<plugin>.<key>"). Like host-graph.c, every function
 * checks what the plugin passes (host-graph-checks.c) and leaves out-parameters
 * untouched on error. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "hostapi/graph-view.h"
#include "hostapi/host-api-private.h"
#include "hostapi/host-graph-checks.h"
#include "hostapi/host-private.h"
#include "hostapi/status-private.h"

/* ---- Annotation ---- */

static QhStatus *annotate_enter(const QhGraphView *g, uint32_t node, const char *fn,
                                const QhNode **out) {
  QhStatus *st = qh_api_enter(g, QH_VIEW_ANNOTATE, fn);
  if (st == NULL && g->annotations == NULL)
    st = qh_status_new(QH_ERR_INVALID_STATE, "%s: no annotation is being collected", fn);
  if (st == NULL)
    st = qh_api_check_node(g, node, fn, out);
  return st;
}

static QhStatus *set_spec(QhGraphView *g, uint32_t node, uint32_t slot, int32_t kind,
                          const QhQuantSpec *spec, const char *fn) {
  const QhNode *n = NULL;
  QhStatus *st = annotate_enter(g, node, fn, &n);
  if (st != NULL)
    return st;
  QhEdgeRef edge = {node, slot, kind, 0};
  GError *error = NULL;
  if (!qh_annotation_set_spec(g->annotations, g->graph, &edge, spec, &error))
    return qh_api_from_error(n, fn, error);
  return NULL;
}

static QhStatus *annotation_set_input_spec(QhGraphView *g, uint32_t node, uint32_t slot,
                                           const QhQuantSpec *spec) {
  return set_spec(g, node, slot, QH_EDGE_INPUT, spec, "annotation_set_input_spec");
}

static QhStatus *annotation_set_output_spec(QhGraphView *g, uint32_t node, uint32_t slot,
                                            const QhQuantSpec *spec) {
  return set_spec(g, node, slot, QH_EDGE_OUTPUT, spec, "annotation_set_output_spec");
}

static QhStatus *annotation_set_node_flags(QhGraphView *g, uint32_t node, uint32_t flags) {
  const QhNode *n = NULL;
  QhStatus *st = annotate_enter(g, node, "annotation_set_node_flags", &n);
  if (st != NULL)
    return st;
  GError *error = NULL;
  if (!qh_annotation_set_node_flags(g->annotations, g->graph, node, flags, &error))
    return qh_api_from_error(n, "annotation_set_node_flags", error);
  return NULL;
}

/* Readers work whenever an annotation set is attached (annotate, and the plugin's
 * validate, which receives a read-only view). */
static uint32_t annotation_node_flags(const QhGraphView *g, uint32_t node) {
  if (qh_graph_view_node(g, node) == NULL || g->annotations == NULL)
    return 0;
  return qh_annotation_node_flags(g->annotations, node);
}

static int32_t annotation_spec_kind(const QhGraphView *g, const QhEdgeRef *edge) {
  if (!qh_api_view_ok(g) || g->annotations == NULL || edge == NULL ||
      !qh_annotation_check_edge(g->graph, edge, "edge", NULL))
    return 0;
  const QhQuantSpec *s = qh_annotation_set_lookup(g->annotations, edge);
  return s ? s->kind : 0;
}

/* The caller-written header of an out struct: same major, size within [v1.0, host]. */
static QhStatus *check_out_header(const char *fn, const char *what, uint32_t abi_version,
                                  uint32_t struct_size, size_t size_1_0, size_t host_size) {
  if (QH_ABI_VERSION_MAJOR(abi_version) != QH_ABI_MAJOR || struct_size < size_1_0 ||
      struct_size > host_size)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "%s: %s.abi_version 0x%x / struct_size %u are not an ABI %d struct "
                         "(use QH_STRUCT_HEADER)",
                         fn, what, abi_version, struct_size, QH_ABI_MAJOR);
  return NULL;
}

/* Copy the fields after the header that the caller's struct_size covers. */
static void copy_covered(void *dst, const void *src, size_t dst_size) {
  const size_t header = 2 * sizeof(uint32_t);
  memcpy((char *)dst + header, (const char *)src + header, dst_size - header);
}

static QhStatus *qconfig_for_node(const QhGraphView *g, uint32_t node, int32_t role,
                                  QhQuantSpec *out_spec, int32_t *out_source) {
  static const char fn[] = "qconfig_for_node";
  const QhNode *n = NULL;
  QhStatus *st = qh_api_enter(g, QH_VIEW_ANNOTATE, fn);
  if (st == NULL)
    st = qh_api_check_node(g, node, fn, &n);
  if (st != NULL)
    return st;
  if (role != QH_ROLE_ACTIVATION && role != QH_ROLE_WEIGHT)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "%s: role %d is neither QH_ROLE_ACTIVATION nor QH_ROLE_WEIGHT", fn, role);
  if (out_spec == NULL || out_source == NULL)
    return qh_api_null_arg(fn, out_spec ? "out_source" : "out_spec");
  st = check_out_header(fn, "out_spec", out_spec->abi_version, out_spec->struct_size,
                        QH_QUANT_SPEC_SIZE_1_0, sizeof(QhQuantSpec));
  if (st != NULL)
    return st;
  const char *role_name = role == QH_ROLE_WEIGHT ? "weight" : "activation";
  if (g->qconfig_fn == NULL)
    return qh_status_new_for_node(n, QH_ERR_NOT_FOUND, "%s: no qconfig mapping is in use", fn);
  QhQuantSpec spec;
  memset(&spec, 0, sizeof spec);
  spec.abi_version = QH_ABI_VERSION;
  spec.struct_size = sizeof spec;
  int32_t source = 0;
  GError *error = NULL;
  if (!g->qconfig_fn(g->qconfig_data, g->graph, node, role, &spec, &source, &error))
    return qh_api_from_error(n, fn, error);
  if (source == 0)
    return qh_status_new_for_node(n, QH_ERR_NOT_FOUND, "%s: the qconfig has no %s entry for it",
                                  fn, role_name);
  if (source != QH_QCONFIG_BACKEND_DEFAULT && source != QH_QCONFIG_USER &&
      source != QH_QCONFIG_EXCLUDED)
    return qh_status_new_for_node(n, QH_ERR_INTERNAL, "%s: the qconfig gave source %d", fn,
                                  source);
  if (source != QH_QCONFIG_EXCLUDED)
    copy_covered(out_spec, &spec, out_spec->struct_size);
  *out_source = source;
  return NULL;
}

/* ---- Quantization parameters ---- */

static QhStatus *qparams_enter(const QhGraphView *g, uint32_t perm, const QhEdgeRef *edge,
                               const char *fn, const QhNode **out_node) {
  QhStatus *st = qh_api_enter(g, perm, fn);
  if (st != NULL)
    return st;
  if (edge == NULL)
    return qh_api_null_arg(fn, "edge");
  if (edge->node < (uint32_t)qh_graph_n_nodes(g->graph))
    *out_node = qh_graph_node(g->graph, (int)edge->node);
  GError *error = NULL;
  if (!qh_annotation_check_edge(g->graph, edge, "edge", &error))
    return qh_api_from_error(NULL, fn, error);
  return NULL;
}

static QhStatus *qparams_get(const QhGraphView *g, const QhEdgeRef *edge, QhQParams *out) {
  static const char fn[] = "qparams_get";
  const QhNode *n = NULL;
  QhStatus *st = qparams_enter(g, QH_VIEW_QPARAMS_READ, edge, fn, &n);
  if (st != NULL)
    return st;
  if (out == NULL)
    return qh_api_null_arg(fn, "out");
  st = check_out_header(fn, "out", out->abi_version, out->struct_size,
                        offsetof(QhQParams, zero_point) + sizeof(out->zero_point),
                        sizeof(QhQParams));
  if (st != NULL)
    return st;
  char *where = qh_annotation_describe_edge(g->graph, edge);
  QhQParams q;
  memset(&q, 0, sizeof q);
  q.abi_version = QH_ABI_VERSION;
  q.struct_size = sizeof q;
  gboolean found = FALSE;
  GError *error = NULL;
  if (g->qparams_get_fn == NULL)
    st = qh_status_new_for_node(n, QH_ERR_NOT_FOUND, "%s: %s is not quantized", fn, where);
  else if (!g->qparams_get_fn(g->qparams_data, g->graph, edge, &q, &found, &error))
    st = qh_api_from_error(n, fn, error);
  else if (!found)
    st = qh_status_new_for_node(n, QH_ERR_NOT_FOUND, "%s: %s is not quantized", fn, where);
  else
    copy_covered(out, &q, out->struct_size);
  g_free(where);
  return st;
}

/* A refused change, kept on a view that records refusals (graph-view.h) so the stage
 * fails even when the plugin drops the status; returns st. */
static QhStatus *refused(QhGraphView *g, QhStatus *st) {
  if (st != NULL && qh_api_view_ok(g) && g->keep_refusals && g->refusal == NULL)
    g->refusal = st->node ? g_strdup_printf("%s: %s", st->node, st->message) : g_strdup(st->message);
  return st;
}

static QhStatus *qparams_set_checked(QhGraphView *g, const QhEdgeRef *edge, const QhQParams *qparams,
                                     const char *reason);

static QhStatus *qparams_set(QhGraphView *g, const QhEdgeRef *edge, const QhQParams *qparams,
                             const char *reason) {
  return refused(g, qparams_set_checked(g, edge, qparams, reason));
}

static QhStatus *qparams_set_checked(QhGraphView *g, const QhEdgeRef *edge, const QhQParams *qparams,
                                     const char *reason) {
  static const char fn[] = "qparams_set";
  const QhNode *n = NULL;
  QhStatus *st = qparams_enter(g, QH_VIEW_QPARAMS_WRITE, edge, fn, &n);
  if (st != NULL)
    return st;
  if (qparams == NULL || reason == NULL)
    return qh_api_null_arg(fn, qparams ? "reason" : "qparams");
  if (!g_utf8_validate(reason, -1, NULL))
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: reason is not valid UTF-8", fn);
  QhQParams q;
  GError *error = NULL;
  if (!qh_graph_view_check_qparams(g->graph, edge, qparams, &q, &error))
    return qh_api_from_error(n, fn, error);
  if (g->qparams_set_fn == NULL)
    return qh_status_new(QH_ERR_INVALID_STATE, "%s: no quantization parameters are in use", fn);
  if (!g->qparams_set_fn(g->qparams_data, g->graph, edge, &q, reason, &error))
    return qh_api_from_error(n, fn, error);
  return NULL;
}

/* ---- Weights (post_calibration) ---- */

static QhStatus *constant_set_checked(QhGraphView *g, uint32_t value, const void *data, size_t nbytes,
                                      const char *reason) {
  static const char fn[] = "constant_set";
  QhValue *v = NULL;
  QhStatus *st = qh_api_enter(g, QH_VIEW_WEIGHTS_WRITE, fn);
  if (st == NULL)
    st = qh_api_check_value(g, value, fn, "value", &v);
  if (st != NULL)
    return st;
  const GArray *uses = qh_graph_view_uses(g, value);
  const QhNode *reader =
      uses && uses->len ? qh_graph_node(g->graph, (int)g_array_index(uses, QhGraphViewUse, 0).node) : NULL;
  if (data == NULL || reason == NULL)
    return qh_api_null_arg(fn, data ? "reason" : "data");
  if (!g_utf8_validate(reason, -1, NULL) || !*reason || strchr(reason, '\n'))
    return qh_status_new_for_node(reader, QH_ERR_INVALID_ARGUMENT,
                                  "%s: reason must be one non-empty line of UTF-8", fn);
  if (v->initializer == NULL)
    return qh_status_new_for_node(reader, QH_ERR_INVALID_ARGUMENT, "%s: value '%s' is not a constant",
                                  fn, v->name);
  if (v->initializer->dtype != QH_DTYPE_F32)
    return qh_status_new_for_node(reader, QH_ERR_INVALID_ARGUMENT,
                                  "%s: value '%s' is %s, not float: only float weights and biases change "
                                  "before conversion", fn, v->name, qh_dtype_name(v->initializer->dtype));
  if (nbytes != v->initializer->nbytes)
    return qh_status_new_for_node(reader, QH_ERR_INVALID_ARGUMENT,
                                  "%s: value '%s': %zu bytes given, the constant has %zu", fn, v->name,
                                  nbytes, v->initializer->nbytes);
  const float *f = data;
  for (size_t i = 0; i < nbytes / sizeof(float); i++)
    if (!isfinite(f[i]))
      return qh_status_new_for_node(reader, QH_ERR_INVALID_ARGUMENT,
                                    "%s: value '%s': element %zu is %g, not finite", fn, v->name, i,
                                    (double)f[i]);
  if (g->constant_set_fn == NULL)
    return qh_status_new(QH_ERR_INVALID_STATE, "%s: no weights can change here", fn);
  GError *error = NULL;
  if (!g->constant_set_fn(g->constant_data, g->graph, value, f, nbytes, reason, &error))
    return qh_api_from_error(reader, fn, error);
  return NULL;
}

static QhStatus *constant_set(QhGraphView *g, uint32_t value, const void *data, size_t nbytes,
                              const char *reason) {
  return refused(g, constant_set_checked(g, value, data, nbytes, reason));
}

/* ---- Plugin data ("qhost.<plugin>.<key>" in metadata_props) ---- */

#define METADATA_KEY_MAX 128
#define METADATA_VALUE_MAX 65536

static QhStatus *metadata_key(const QhGraphView *g, const char *fn, const char *key, char **out) {
  if (key == NULL)
    return qh_api_null_arg(fn, "key");
  size_t n = strnlen(key, METADATA_KEY_MAX + 1);
  if (n == 0 || n > METADATA_KEY_MAX)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: key must have 1 to %d bytes", fn, METADATA_KEY_MAX);
  for (size_t i = 0; i < n; i++)
    if (!g_ascii_isalnum(key[i]) && key[i] != '_' && key[i] != '.' && key[i] != '-')
      return qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: key has a character outside [A-Za-z0-9_.-] at byte %zu",
                           fn, i);
  const char *plugin = g->plugin ? g->plugin : qh_plugin_current();
  if (plugin == NULL)
    return qh_status_new(QH_ERR_INVALID_STATE, "%s: no plugin is running", fn);
  *out = g_strdup_printf("qhost.%s.%s", plugin, key);
  return NULL;
}

static QhStatus *metadata_set(QhGraphView *g, const char *key, const char *value) {
  static const char fn[] = "metadata_set";
  char *full = NULL;
  QhStatus *st = qh_api_enter(g, QH_VIEW_METADATA_WRITE, fn);
  if (st == NULL)
    st = metadata_key(g, fn, key, &full);
  if (st != NULL)
    return st;
  if (value == NULL) {
    g_free(full);
    return qh_api_null_arg(fn, "value");
  }
  if (strnlen(value, METADATA_VALUE_MAX + 1) > METADATA_VALUE_MAX || !g_utf8_validate(value, -1, NULL)) {
    g_free(full);
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: value must be valid UTF-8 of at most %d bytes", fn,
                         METADATA_VALUE_MAX);
  }
  GArray *md = g->graph->metadata;
  for (guint i = 0; i < md->len; i++) {
    QhMetadataEntry *e = &g_array_index(md, QhMetadataEntry, i);
    if (strcmp(e->key, full) == 0) {
      g_free(full);
      g_free(e->value);
      e->value = g_strdup(value);
      return NULL;
    }
  }
  QhMetadataEntry e = {full, g_strdup(value)};
  g_array_append_val(md, e);
  return NULL;
}

static QhStatus *metadata_get(const QhGraphView *g, const char *key, const char **out_value) {
  static const char fn[] = "metadata_get";
  char *full = NULL;
  QhStatus *st = qh_api_enter(g, QH_VIEW_READ, fn);
  if (st == NULL)
    st = metadata_key(g, fn, key, &full);
  if (st != NULL)
    return st;
  const char *v = out_value ? qh_graph_metadata(g->graph, full) : NULL;
  if (out_value == NULL)
    st = qh_api_null_arg(fn, "out_value");
  else if (v == NULL)
    st = qh_status_new(QH_ERR_NOT_FOUND, "%s: the model has no entry '%s'", fn, full);
  else
    *out_value = v;
  g_free(full);
  return st;
}

void qh_host_api_fill_quant(QhHostApi *api) {
  api->annotation_set_input_spec = annotation_set_input_spec;
  api->annotation_set_output_spec = annotation_set_output_spec;
  api->annotation_set_node_flags = annotation_set_node_flags;
  api->annotation_node_flags = annotation_node_flags;
  api->annotation_spec_kind = annotation_spec_kind;
  api->qconfig_for_node = qconfig_for_node;
  api->qparams_get = qparams_get;
  api->qparams_set = qparams_set;
  api->constant_set = constant_set;
  api->metadata_set = metadata_set;
  api->metadata_get = metadata_get;
}
