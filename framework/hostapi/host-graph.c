/* The graph half of the QhHostApi table: queries, rewrites, annotation, qconfig and
 * qparams functions, as adapters from the SDK's ids and statuses to the graph IR.
 * Everything a plugin passes is untrusted: each function checks the view's magic,
 * the permission of the current callback, ids, pointers and sizes before touching
 * the graph, and leaves out-parameters untouched on error. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "hostapi/graph-view.h"
#include "hostapi/host-api-private.h"
#include "hostapi/host-private.h"
#include "hostapi/status-private.h"

/* Bounds on plugin-given counts, far above anything real, far below overflow. */
#define MAX_ATTR_ELEMENTS (1u << 24)

/* ---- Checks shared by every function ---- */

static gboolean view_ok(const QhGraphView *v) { return qh_graph_view_is_valid(v); }

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
static QhStatus *enter(const QhGraphView *v, uint32_t perm, const char *fn) {
  if (!view_ok(v))
    return bad_view(fn);
  if ((v->permissions & perm) != perm)
    return qh_status_new(QH_ERR_INVALID_STATE, "%s may only be called from %s", fn,
                         permission_place(perm));
  return NULL;
}

static QhStatus *check_node(const QhGraphView *v, uint32_t node, const char *fn,
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

static QhStatus *check_value(const QhGraphView *v, uint32_t value, const char *fn,
                             const char *what, QhValue **out) {
  if (value >= (uint32_t)qh_graph_n_values(v->graph))
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "%s: %s %u is not a value id (the graph has %d)", fn, what, value,
                         qh_graph_n_values(v->graph));
  *out = qh_graph_value(v->graph, (int)value);
  return NULL;
}

static QhStatus *null_arg(const char *fn, const char *what) {
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
static QhStatus *from_error(const QhNode *node, const char *fn, GError *error) {
  QhStatus *st = qh_status_new_for_node(node, code_from_error(error), "%s: %s", fn, error->message);
  g_error_free(error);
  return st;
}

/* ---- Graph queries ---- */

static uint32_t graph_node_count(const QhGraphView *g) {
  return view_ok(g) ? (uint32_t)qh_graph_n_nodes(g->graph) : 0;
}

static uint32_t graph_value_count(const QhGraphView *g) {
  return view_ok(g) ? (uint32_t)qh_graph_n_values(g->graph) : 0;
}

static uint32_t graph_input_count(const QhGraphView *g) {
  return view_ok(g) ? g->graph->inputs->len : 0;
}

static uint32_t id_at(const GArray *ids, uint32_t index) {
  return index < ids->len ? (uint32_t)g_array_index(ids, int, index) : QH_INVALID_ID;
}

static uint32_t graph_input(const QhGraphView *g, uint32_t index) {
  return view_ok(g) ? id_at(g->graph->inputs, index) : QH_INVALID_ID;
}

static uint32_t graph_output_count(const QhGraphView *g) {
  return view_ok(g) ? g->graph->outputs->len : 0;
}

static uint32_t graph_output(const QhGraphView *g, uint32_t index) {
  return view_ok(g) ? id_at(g->graph->outputs, index) : QH_INVALID_ID;
}

static int64_t graph_opset(const QhGraphView *g, const char *domain) {
  if (!view_ok(g) || domain == NULL)
    return -1;
  return qh_graph_opset(g->graph, domain);
}

static int32_t node_is_live(const QhGraphView *g, uint32_t node) {
  return qh_graph_view_node(g, node) != NULL;
}

#define NODE_STRING(field)                                         \
  static const char *node_##field(const QhGraphView *g, uint32_t node) { \
    const QhNode *n = qh_graph_view_node(g, node);                 \
    return n ? n->field : NULL;                                    \
  }
NODE_STRING(op_type)
NODE_STRING(domain)
NODE_STRING(name)

static uint32_t node_find(const QhGraphView *g, const char *name) {
  if (!view_ok(g) || name == NULL)
    return QH_INVALID_ID;
  int id = qh_graph_view_find_node(g->graph, name);
  return id < 0 ? QH_INVALID_ID : (uint32_t)id;
}

static uint32_t node_input_count(const QhGraphView *g, uint32_t node) {
  const QhNode *n = qh_graph_view_node(g, node);
  return n ? (uint32_t)n->n_inputs : 0;
}

static uint32_t node_input(const QhGraphView *g, uint32_t node, uint32_t slot) {
  const QhNode *n = qh_graph_view_node(g, node);
  if (n == NULL || slot >= (uint32_t)n->n_inputs || n->inputs[slot] < 0)
    return QH_INVALID_ID;
  return (uint32_t)n->inputs[slot];
}

static uint32_t node_output_count(const QhGraphView *g, uint32_t node) {
  const QhNode *n = qh_graph_view_node(g, node);
  return n ? (uint32_t)n->n_outputs : 0;
}

static uint32_t node_output(const QhGraphView *g, uint32_t node, uint32_t slot) {
  const QhNode *n = qh_graph_view_node(g, node);
  if (n == NULL || slot >= (uint32_t)n->n_outputs || n->outputs[slot] < 0)
    return QH_INVALID_ID;
  return (uint32_t)n->outputs[slot];
}

static int32_t node_attr_type(const QhGraphView *g, uint32_t node, const char *name) {
  const QhNode *n = qh_graph_view_node(g, node);
  if (n == NULL || name == NULL)
    return QH_ATTR_NONE;
  const QhAttr *a = qh_node_attr(n, name);
  return a ? (int32_t)a->type : QH_ATTR_NONE;
}

static const char *attr_type_name(int type) {
  switch (type) {
  case QH_ATTR_FLOAT: return "a float";
  case QH_ATTR_INT: return "an int";
  case QH_ATTR_STRING: return "a string";
  case QH_ATTR_TENSOR: return "a tensor";
  case QH_ATTR_FLOATS: return "a list of floats";
  case QH_ATTR_INTS: return "a list of ints";
  case QH_ATTR_STRINGS: return "a list of strings";
  default: return "of an unknown type";
  }
}

/* The attribute `name` of `type`, after checking view, node, name and out pointers. */
static QhStatus *get_attr(const QhGraphView *g, uint32_t node, const char *name, int type,
                          const void *out1, const void *out2, const char *fn, const QhAttr **out) {
  const QhNode *n = NULL;
  QhStatus *st = enter(g, QH_VIEW_READ, fn);
  if (st == NULL)
    st = check_node(g, node, fn, &n);
  if (st != NULL)
    return st;
  if (name == NULL)
    return null_arg(fn, "name");
  if (out1 == NULL || out2 == NULL)
    return null_arg(fn, "an out-parameter");
  const QhAttr *a = qh_node_attr(n, name);
  if (a == NULL)
    return qh_status_new_for_node(n, QH_ERR_NOT_FOUND, "%s: no attribute '%s'", fn, name);
  if ((int)a->type != type)
    return qh_status_new_for_node(n, QH_ERR_INVALID_ARGUMENT, "%s: attribute '%s' is %s, not %s",
                                  fn, name, attr_type_name(a->type), attr_type_name(type));
  *out = a;
  return NULL;
}

static QhStatus *node_attr_int(const QhGraphView *g, uint32_t node, const char *name,
                               int64_t *out_value) {
  const QhAttr *a = NULL;
  QhStatus *st = get_attr(g, node, name, QH_ATTR_INT, out_value, out_value, "node_attr_int", &a);
  if (st == NULL)
    *out_value = a->i;
  return st;
}

static QhStatus *node_attr_float(const QhGraphView *g, uint32_t node, const char *name,
                                 float *out_value) {
  const QhAttr *a = NULL;
  QhStatus *st =
      get_attr(g, node, name, QH_ATTR_FLOAT, out_value, out_value, "node_attr_float", &a);
  if (st == NULL)
    *out_value = a->f;
  return st;
}

static QhStatus *node_attr_string(const QhGraphView *g, uint32_t node, const char *name,
                                  const char **out_value) {
  const QhAttr *a = NULL;
  QhStatus *st =
      get_attr(g, node, name, QH_ATTR_STRING, out_value, out_value, "node_attr_string", &a);
  if (st != NULL)
    return st;
  /* ONNX strings are bytes; the SDK promises UTF-8. */
  if (a->s == NULL || !g_utf8_validate(a->s, -1, NULL))
    return qh_status_new_for_node(qh_graph_view_node(g, node), QH_ERR_UNSUPPORTED,
                                  "node_attr_string: attribute '%s' is not valid UTF-8", name);
  *out_value = a->s;
  return NULL;
}

static const int64_t no_ints[1];
static const float no_floats[1];

static QhStatus *node_attr_ints(const QhGraphView *g, uint32_t node, const char *name,
                                const int64_t **out_values, size_t *out_count) {
  const QhAttr *a = NULL;
  QhStatus *st =
      get_attr(g, node, name, QH_ATTR_INTS, out_values, out_count, "node_attr_ints", &a);
  if (st == NULL) {
    *out_values = a->ints ? a->ints : no_ints;
    *out_count = (size_t)a->n;
  }
  return st;
}

static QhStatus *node_attr_floats(const QhGraphView *g, uint32_t node, const char *name,
                                  const float **out_values, size_t *out_count) {
  const QhAttr *a = NULL;
  QhStatus *st =
      get_attr(g, node, name, QH_ATTR_FLOATS, out_values, out_count, "node_attr_floats", &a);
  if (st == NULL) {
    *out_values = a->floats ? a->floats : no_floats;
    *out_count = (size_t)a->n;
  }
  return st;
}

static uint32_t value_find(const QhGraphView *g, const char *name) {
  if (!view_ok(g) || name == NULL)
    return QH_INVALID_ID;
  int id = qh_graph_find_value(g->graph, name);
  return id < 0 ? QH_INVALID_ID : (uint32_t)id;
}

static const QhValue *view_value(const QhGraphView *g, uint32_t value) {
  if (!view_ok(g) || value >= (uint32_t)qh_graph_n_values(g->graph))
    return NULL;
  return qh_graph_value(g->graph, (int)value);
}

static const char *value_name(const QhGraphView *g, uint32_t value) {
  const QhValue *v = view_value(g, value);
  return v ? v->name : NULL;
}

static int32_t value_dtype(const QhGraphView *g, uint32_t value) {
  const QhValue *v = view_value(g, value);
  return v ? (int32_t)v->dtype : QH_DTYPE_UNDEFINED;
}

static QhStatus *value_shape(const QhGraphView *g, uint32_t value, int64_t *out_dims,
                             size_t capacity, int32_t *out_rank) {
  QhValue *v = NULL;
  QhStatus *st = enter(g, QH_VIEW_READ, "value_shape");
  if (st == NULL)
    st = check_value(g, value, "value_shape", "value", &v);
  if (st != NULL)
    return st;
  if (out_rank == NULL)
    return null_arg("value_shape", "out_rank");
  if (out_dims == NULL && capacity > 0)
    return null_arg("value_shape", "out_dims (with a capacity > 0)");
  int rank = v->shape.rank;
  if (rank > 0)
    for (size_t i = 0; i < (size_t)rank && i < capacity; i++)
      out_dims[i] = v->shape.dims[i] < 0 ? -1 : v->shape.dims[i];
  *out_rank = rank < 0 ? -1 : rank;
  return NULL;
}

static uint32_t value_flags(const QhGraphView *g, uint32_t value) {
  const QhValue *v = view_value(g, value);
  if (v == NULL)
    return 0;
  return (v->is_input ? QH_VALUE_GRAPH_INPUT : 0u) | (v->is_output ? QH_VALUE_GRAPH_OUTPUT : 0u) |
         (v->initializer ? QH_VALUE_CONSTANT : 0u);
}

static uint32_t value_producer(const QhGraphView *g, uint32_t value) {
  const QhValue *v = view_value(g, value);
  if (v == NULL || v->producer < 0 || qh_graph_node(g->graph, v->producer)->is_removed)
    return QH_INVALID_ID;
  return (uint32_t)v->producer;
}

/* The consumer index is a cache, so building it does not change what a const view
 * shows. */
static const GArray *uses_of(const QhGraphView *g, uint32_t value) {
  return qh_graph_view_uses((QhGraphView *)g, value);
}

static uint32_t value_consumer_count(const QhGraphView *g, uint32_t value) {
  if (view_value(g, value) == NULL)
    return 0;
  const GArray *uses = uses_of(g, value);
  return uses ? uses->len : 0;
}

static QhStatus *value_consumer(const QhGraphView *g, uint32_t value, uint32_t index,
                                uint32_t *out_node, uint32_t *out_slot) {
  QhValue *v = NULL;
  QhStatus *st = enter(g, QH_VIEW_READ, "value_consumer");
  if (st == NULL)
    st = check_value(g, value, "value_consumer", "value", &v);
  if (st != NULL)
    return st;
  if (out_node == NULL || out_slot == NULL)
    return null_arg("value_consumer", out_node ? "out_slot" : "out_node");
  const GArray *uses = uses_of(g, value);
  guint n = uses ? uses->len : 0;
  if (index >= n)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "value_consumer: index %u is out of range: value '%s' has %u consumers",
                         index, v->name, n);
  const QhGraphViewUse *u = &g_array_index(uses, QhGraphViewUse, index);
  *out_node = u->node;
  *out_slot = u->slot;
  return NULL;
}

static QhStatus *value_data(const QhGraphView *g, uint32_t value, const void **out_data,
                            size_t *out_nbytes) {
  QhValue *v = NULL;
  QhStatus *st = enter(g, QH_VIEW_READ, "value_data");
  if (st == NULL)
    st = check_value(g, value, "value_data", "value", &v);
  if (st != NULL)
    return st;
  if (out_data == NULL || out_nbytes == NULL)
    return null_arg("value_data", out_data ? "out_nbytes" : "out_data");
  if (v->initializer == NULL)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "value_data: value '%s' is not a constant",
                         v->name);
  *out_data = v->initializer->data;
  *out_nbytes = v->initializer->nbytes;
  return NULL;
}

/* ---- Graph rewrites ---- */

static QhStatus *graph_add_value(QhGraphView *g, const char *name, uint32_t *out_value) {
  QhStatus *st = enter(g, QH_VIEW_REWRITE, "graph_add_value");
  if (st != NULL)
    return st;
  if (out_value == NULL)
    return null_arg("graph_add_value", "out_value");
  GError *error = NULL;
  QhValue *v = qh_graph_view_add_value(g, name, &error);
  if (v == NULL)
    return from_error(NULL, "graph_add_value", error);
  *out_value = (uint32_t)v->id;
  return NULL;
}

static QhStatus *graph_add_constant(QhGraphView *g, const char *name, int32_t dtype, int32_t rank,
                                    const int64_t *dims, const void *data, size_t nbytes,
                                    uint32_t *out_value) {
  QhStatus *st = enter(g, QH_VIEW_REWRITE, "graph_add_constant");
  if (st != NULL)
    return st;
  if (out_value == NULL)
    return null_arg("graph_add_constant", "out_value");
  GError *error = NULL;
  QhValue *v = qh_graph_view_add_constant(g, name, dtype, rank, dims, data, nbytes, &error);
  if (v == NULL)
    return from_error(NULL, "graph_add_constant", error);
  *out_value = (uint32_t)v->id;
  return NULL;
}

static QhStatus *graph_add_node(QhGraphView *g, const char *op_type, const char *domain,
                                const char *name, const uint32_t *inputs, size_t n_inputs,
                                const uint32_t *outputs, size_t n_outputs, uint32_t *out_node) {
  QhStatus *st = enter(g, QH_VIEW_REWRITE, "graph_add_node");
  if (st != NULL)
    return st;
  if (out_node == NULL)
    return null_arg("graph_add_node", "out_node");
  GError *error = NULL;
  QhNode *n = qh_graph_view_add_node(g, op_type, domain, name, inputs, n_inputs, outputs,
                                     n_outputs, &error);
  if (n == NULL)
    return from_error(NULL, "graph_add_node", error);
  *out_node = (uint32_t)n->id;
  return NULL;
}

static QhStatus *node_remove(QhGraphView *g, uint32_t node) {
  const QhNode *n = NULL;
  QhStatus *st = enter(g, QH_VIEW_REWRITE, "node_remove");
  if (st == NULL)
    st = check_node(g, node, "node_remove", &n);
  if (st == NULL)
    qh_graph_view_remove_node(g, n);
  return st;
}

static QhStatus *node_set_input(QhGraphView *g, uint32_t node, uint32_t slot, uint32_t value) {
  const QhNode *n = NULL;
  QhStatus *st = enter(g, QH_VIEW_REWRITE, "node_set_input");
  if (st == NULL)
    st = check_node(g, node, "node_set_input", &n);
  if (st != NULL)
    return st;
  GError *error = NULL;
  if (!qh_graph_view_set_input(g, (QhNode *)n, slot, value, &error))
    return from_error(n, "node_set_input", error);
  return NULL;
}

static QhStatus *value_replace_uses(QhGraphView *g, uint32_t old_value, uint32_t new_value) {
  QhValue *old_v = NULL, *new_v = NULL;
  QhStatus *st = enter(g, QH_VIEW_REWRITE, "value_replace_uses");
  if (st == NULL)
    st = check_value(g, old_value, "value_replace_uses", "old_value", &old_v);
  if (st == NULL)
    st = check_value(g, new_value, "value_replace_uses", "new_value", &new_v);
  if (st == NULL)
    qh_graph_view_replace_uses(g, old_v, new_v);
  return st;
}

/* View, permission, live node and attribute name of a node_set_attr_* call. */
static QhStatus *set_attr_enter(QhGraphView *g, uint32_t node, const char *name, const char *fn,
                                QhNode **out) {
  const QhNode *n = NULL;
  QhStatus *st = enter(g, QH_VIEW_REWRITE, fn);
  if (st == NULL)
    st = check_node(g, node, fn, &n);
  if (st == NULL && (name == NULL || *name == '\0' || !g_utf8_validate(name, -1, NULL)))
    st = qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: name must be a non-empty UTF-8 string", fn);
  if (st == NULL)
    *out = (QhNode *)n;
  return st;
}

static QhStatus *check_array(const char *fn, const void *values, size_t count) {
  if (count > MAX_ATTR_ELEMENTS)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: count %zu is above %u", fn, count,
                         MAX_ATTR_ELEMENTS);
  if (values == NULL && count > 0)
    return null_arg(fn, "values (with count > 0)");
  return NULL;
}

static QhStatus *node_set_attr_int(QhGraphView *g, uint32_t node, const char *name,
                                   int64_t value) {
  QhNode *n;
  QhStatus *st = set_attr_enter(g, node, name, "node_set_attr_int", &n);
  if (st == NULL)
    qh_node_set_attr_int(n, name, value);
  return st;
}

static QhStatus *node_set_attr_float(QhGraphView *g, uint32_t node, const char *name,
                                     float value) {
  QhNode *n;
  QhStatus *st = set_attr_enter(g, node, name, "node_set_attr_float", &n);
  if (st == NULL)
    qh_node_set_attr_float(n, name, value);
  return st;
}

static QhStatus *node_set_attr_string(QhGraphView *g, uint32_t node, const char *name,
                                      const char *value) {
  QhNode *n;
  QhStatus *st = set_attr_enter(g, node, name, "node_set_attr_string", &n);
  if (st == NULL && value == NULL)
    st = null_arg("node_set_attr_string", "value");
  if (st == NULL && !g_utf8_validate(value, -1, NULL))
    st = qh_status_new(QH_ERR_INVALID_ARGUMENT, "node_set_attr_string: value is not valid UTF-8");
  if (st == NULL)
    qh_node_set_attr_string(n, name, value);
  return st;
}

static QhStatus *node_set_attr_ints(QhGraphView *g, uint32_t node, const char *name,
                                    const int64_t *values, size_t count) {
  QhNode *n;
  QhStatus *st = set_attr_enter(g, node, name, "node_set_attr_ints", &n);
  if (st == NULL)
    st = check_array("node_set_attr_ints", values, count);
  if (st == NULL)
    qh_node_set_attr_ints(n, name, (int64_t)count, values);
  return st;
}

static QhStatus *node_set_attr_floats(QhGraphView *g, uint32_t node, const char *name,
                                      const float *values, size_t count) {
  QhNode *n;
  QhStatus *st = set_attr_enter(g, node, name, "node_set_attr_floats", &n);
  if (st == NULL)
    st = check_array("node_set_attr_floats", values, count);
  if (st == NULL)
    qh_node_set_attr_floats(n, name, (int64_t)count, values);
  return st;
}

/* ---- Annotation ---- */

static QhStatus *annotate_enter(const QhGraphView *g, uint32_t node, const char *fn,
                                const QhNode **out) {
  QhStatus *st = enter(g, QH_VIEW_ANNOTATE, fn);
  if (st == NULL && g->annotations == NULL)
    st = qh_status_new(QH_ERR_INVALID_STATE, "%s: no annotation is being collected", fn);
  if (st == NULL)
    st = check_node(g, node, fn, out);
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
    return from_error(n, fn, error);
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
    return from_error(n, "annotation_set_node_flags", error);
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
  if (!view_ok(g) || g->annotations == NULL || edge == NULL ||
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
  QhStatus *st = enter(g, QH_VIEW_ANNOTATE, fn);
  if (st == NULL)
    st = check_node(g, node, fn, &n);
  if (st != NULL)
    return st;
  if (role != QH_ROLE_ACTIVATION && role != QH_ROLE_WEIGHT)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "%s: role %d is neither QH_ROLE_ACTIVATION nor QH_ROLE_WEIGHT", fn, role);
  if (out_spec == NULL || out_source == NULL)
    return null_arg(fn, out_spec ? "out_source" : "out_spec");
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
    return from_error(n, fn, error);
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
  QhStatus *st = enter(g, perm, fn);
  if (st != NULL)
    return st;
  if (edge == NULL)
    return null_arg(fn, "edge");
  if (edge->node < (uint32_t)qh_graph_n_nodes(g->graph))
    *out_node = qh_graph_node(g->graph, (int)edge->node);
  GError *error = NULL;
  if (!qh_annotation_check_edge(g->graph, edge, "edge", &error))
    return from_error(NULL, fn, error);
  return NULL;
}

static QhStatus *qparams_get(const QhGraphView *g, const QhEdgeRef *edge, QhQParams *out) {
  static const char fn[] = "qparams_get";
  const QhNode *n = NULL;
  QhStatus *st = qparams_enter(g, QH_VIEW_QPARAMS_READ, edge, fn, &n);
  if (st != NULL)
    return st;
  if (out == NULL)
    return null_arg(fn, "out");
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
    st = from_error(n, fn, error);
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
  if (st != NULL && view_ok(g) && g->keep_refusals && g->refusal == NULL)
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
    return null_arg(fn, qparams ? "reason" : "qparams");
  if (!g_utf8_validate(reason, -1, NULL))
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "%s: reason is not valid UTF-8", fn);
  QhQParams q;
  GError *error = NULL;
  if (!qh_graph_view_check_qparams(g->graph, edge, qparams, &q, &error))
    return from_error(n, fn, error);
  if (g->qparams_set_fn == NULL)
    return qh_status_new(QH_ERR_INVALID_STATE, "%s: no quantization parameters are in use", fn);
  if (!g->qparams_set_fn(g->qparams_data, g->graph, edge, &q, reason, &error))
    return from_error(n, fn, error);
  return NULL;
}

/* ---- Weights (post_calibration) ---- */

static QhStatus *constant_set_checked(QhGraphView *g, uint32_t value, const void *data, size_t nbytes,
                                      const char *reason) {
  static const char fn[] = "constant_set";
  QhValue *v = NULL;
  QhStatus *st = enter(g, QH_VIEW_WEIGHTS_WRITE, fn);
  if (st == NULL)
    st = check_value(g, value, fn, "value", &v);
  if (st != NULL)
    return st;
  const GArray *uses = qh_graph_view_uses(g, value);
  const QhNode *reader =
      uses && uses->len ? qh_graph_node(g->graph, (int)g_array_index(uses, QhGraphViewUse, 0).node) : NULL;
  if (data == NULL || reason == NULL)
    return null_arg(fn, data ? "reason" : "data");
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
    return from_error(reader, fn, error);
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
    return null_arg(fn, "key");
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
  QhStatus *st = enter(g, QH_VIEW_METADATA_WRITE, fn);
  if (st == NULL)
    st = metadata_key(g, fn, key, &full);
  if (st != NULL)
    return st;
  if (value == NULL) {
    g_free(full);
    return null_arg(fn, "value");
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
  QhStatus *st = enter(g, QH_VIEW_READ, fn);
  if (st == NULL)
    st = metadata_key(g, fn, key, &full);
  if (st != NULL)
    return st;
  const char *v = out_value ? qh_graph_metadata(g->graph, full) : NULL;
  if (out_value == NULL)
    st = null_arg(fn, "out_value");
  else if (v == NULL)
    st = qh_status_new(QH_ERR_NOT_FOUND, "%s: the model has no entry '%s'", fn, full);
  else
    *out_value = v;
  g_free(full);
  return st;
}

void qh_host_api_fill_graph(QhHostApi *api) {
  api->graph_node_count = graph_node_count;
  api->graph_value_count = graph_value_count;
  api->graph_input_count = graph_input_count;
  api->graph_input = graph_input;
  api->graph_output_count = graph_output_count;
  api->graph_output = graph_output;
  api->graph_opset = graph_opset;
  api->node_is_live = node_is_live;
  api->node_op_type = node_op_type;
  api->node_domain = node_domain;
  api->node_name = node_name;
  api->node_find = node_find;
  api->node_input_count = node_input_count;
  api->node_input = node_input;
  api->node_output_count = node_output_count;
  api->node_output = node_output;
  api->node_attr_type = node_attr_type;
  api->node_attr_int = node_attr_int;
  api->node_attr_float = node_attr_float;
  api->node_attr_string = node_attr_string;
  api->node_attr_ints = node_attr_ints;
  api->node_attr_floats = node_attr_floats;
  api->value_find = value_find;
  api->value_name = value_name;
  api->value_dtype = value_dtype;
  api->value_shape = value_shape;
  api->value_flags = value_flags;
  api->value_producer = value_producer;
  api->value_consumer_count = value_consumer_count;
  api->value_consumer = value_consumer;
  api->value_data = value_data;
  api->graph_add_value = graph_add_value;
  api->graph_add_constant = graph_add_constant;
  api->graph_add_node = graph_add_node;
  api->node_remove = node_remove;
  api->node_set_input = node_set_input;
  api->value_replace_uses = value_replace_uses;
  api->node_set_attr_int = node_set_attr_int;
  api->node_set_attr_float = node_set_attr_float;
  api->node_set_attr_string = node_set_attr_string;
  api->node_set_attr_ints = node_set_attr_ints;
  api->node_set_attr_floats = node_set_attr_floats;
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
