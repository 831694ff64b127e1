/* The graph half of the QhHostApi table: queries and rewrites, as adapters from the
 * SDK's ids and statuses to the graph IR. Everything a plugin passes is untrusted: each
 * function checks the view's magic, the permission of the current callback, ids,
 * pointers and sizes before touching the graph (host-graph-checks.c), and leaves
 * out-parameters untouched on error. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "hostapi/graph-view.h"
#include "hostapi/host-api-private.h"
#include "hostapi/host-graph-checks.h"
#include "hostapi/host-private.h"
#include "hostapi/status-private.h"

/* Bounds on plugin-given counts, far above anything real, far below overflow. */
#define MAX_ATTR_ELEMENTS (1u << 24)

/* ---- Graph queries ---- */

static uint32_t graph_node_count(const QhGraphView *g) {
  return qh_api_view_ok(g) ? (uint32_t)qh_graph_n_nodes(g->graph) : 0;
}

static uint32_t graph_value_count(const QhGraphView *g) {
  return qh_api_view_ok(g) ? (uint32_t)qh_graph_n_values(g->graph) : 0;
}

static uint32_t graph_input_count(const QhGraphView *g) {
  return qh_api_view_ok(g) ? g->graph->inputs->len : 0;
}

static uint32_t id_at(const GArray *ids, uint32_t index) {
  return index < ids->len ? (uint32_t)g_array_index(ids, int, index) : QH_INVALID_ID;
}

static uint32_t graph_input(const QhGraphView *g, uint32_t index) {
  return qh_api_view_ok(g) ? id_at(g->graph->inputs, index) : QH_INVALID_ID;
}

static uint32_t graph_output_count(const QhGraphView *g) {
  return qh_api_view_ok(g) ? g->graph->outputs->len : 0;
}

static uint32_t graph_output(const QhGraphView *g, uint32_t index) {
  return qh_api_view_ok(g) ? id_at(g->graph->outputs, index) : QH_INVALID_ID;
}

static int64_t graph_opset(const QhGraphView *g, const char *domain) {
  if (!qh_api_view_ok(g) || domain == NULL)
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
  if (!qh_api_view_ok(g) || name == NULL)
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
  QhStatus *st = qh_api_enter(g, QH_VIEW_READ, fn);
  if (st == NULL)
    st = qh_api_check_node(g, node, fn, &n);
  if (st != NULL)
    return st;
  if (name == NULL)
    return qh_api_null_arg(fn, "name");
  if (out1 == NULL || out2 == NULL)
    return qh_api_null_arg(fn, "an out-parameter");
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
  if (!qh_api_view_ok(g) || name == NULL)
    return QH_INVALID_ID;
  int id = qh_graph_find_value(g->graph, name);
  return id < 0 ? QH_INVALID_ID : (uint32_t)id;
}

static const QhValue *view_value(const QhGraphView *g, uint32_t value) {
  if (!qh_api_view_ok(g) || value >= (uint32_t)qh_graph_n_values(g->graph))
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
  QhStatus *st = qh_api_enter(g, QH_VIEW_READ, "value_shape");
  if (st == NULL)
    st = qh_api_check_value(g, value, "value_shape", "value", &v);
  if (st != NULL)
    return st;
  if (out_rank == NULL)
    return qh_api_null_arg("value_shape", "out_rank");
  if (out_dims == NULL && capacity > 0)
    return qh_api_null_arg("value_shape", "out_dims (with a capacity > 0)");
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
  QhStatus *st = qh_api_enter(g, QH_VIEW_READ, "value_consumer");
  if (st == NULL)
    st = qh_api_check_value(g, value, "value_consumer", "value", &v);
  if (st != NULL)
    return st;
  if (out_node == NULL || out_slot == NULL)
    return qh_api_null_arg("value_consumer", out_node ? "out_slot" : "out_node");
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
  QhStatus *st = qh_api_enter(g, QH_VIEW_READ, "value_data");
  if (st == NULL)
    st = qh_api_check_value(g, value, "value_data", "value", &v);
  if (st != NULL)
    return st;
  if (out_data == NULL || out_nbytes == NULL)
    return qh_api_null_arg("value_data", out_data ? "out_nbytes" : "out_data");
  if (v->initializer == NULL)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "value_data: value '%s' is not a constant",
                         v->name);
  *out_data = v->initializer->data;
  *out_nbytes = v->initializer->nbytes;
  return NULL;
}

/* ---- Graph rewrites ---- */

static QhStatus *graph_add_value(QhGraphView *g, const char *name, uint32_t *out_value) {
  QhStatus *st = qh_api_enter(g, QH_VIEW_REWRITE, "graph_add_value");
  if (st != NULL)
    return st;
  if (out_value == NULL)
    return qh_api_null_arg("graph_add_value", "out_value");
  GError *error = NULL;
  QhValue *v = qh_graph_view_add_value(g, name, &error);
  if (v == NULL)
    return qh_api_from_error(NULL, "graph_add_value", error);
  *out_value = (uint32_t)v->id;
  return NULL;
}

static QhStatus *graph_add_constant(QhGraphView *g, const char *name, int32_t dtype, int32_t rank,
                                    const int64_t *dims, const void *data, size_t nbytes,
                                    uint32_t *out_value) {
  QhStatus *st = qh_api_enter(g, QH_VIEW_REWRITE, "graph_add_constant");
  if (st != NULL)
    return st;
  if (out_value == NULL)
    return qh_api_null_arg("graph_add_constant", "out_value");
  GError *error = NULL;
  QhValue *v = qh_graph_view_add_constant(g, name, dtype, rank, dims, data, nbytes, &error);
  if (v == NULL)
    return qh_api_from_error(NULL, "graph_add_constant", error);
  *out_value = (uint32_t)v->id;
  return NULL;
}

static QhStatus *graph_add_node(QhGraphView *g, const char *op_type, const char *domain,
                                const char *name, const uint32_t *inputs, size_t n_inputs,
                                const uint32_t *outputs, size_t n_outputs, uint32_t *out_node) {
  QhStatus *st = qh_api_enter(g, QH_VIEW_REWRITE, "graph_add_node");
  if (st != NULL)
    return st;
  if (out_node == NULL)
    return qh_api_null_arg("graph_add_node", "out_node");
  GError *error = NULL;
  QhNode *n = qh_graph_view_add_node(g, op_type, domain, name, inputs, n_inputs, outputs,
                                     n_outputs, &error);
  if (n == NULL)
    return qh_api_from_error(NULL, "graph_add_node", error);
  *out_node = (uint32_t)n->id;
  return NULL;
}

static QhStatus *node_remove(QhGraphView *g, uint32_t node) {
  const QhNode *n = NULL;
  QhStatus *st = qh_api_enter(g, QH_VIEW_REWRITE, "node_remove");
  if (st == NULL)
    st = qh_api_check_node(g, node, "node_remove", &n);
  if (st == NULL)
    qh_graph_view_remove_node(g, n);
  return st;
}

static QhStatus *node_set_input(QhGraphView *g, uint32_t node, uint32_t slot, uint32_t value) {
  const QhNode *n = NULL;
  QhStatus *st = qh_api_enter(g, QH_VIEW_REWRITE, "node_set_input");
  if (st == NULL)
    st = qh_api_check_node(g, node, "node_set_input", &n);
  if (st != NULL)
    return st;
  GError *error = NULL;
  if (!qh_graph_view_set_input(g, (QhNode *)n, slot, value, &error))
    return qh_api_from_error(n, "node_set_input", error);
  return NULL;
}

static QhStatus *value_replace_uses(QhGraphView *g, uint32_t old_value, uint32_t new_value) {
  QhValue *old_v = NULL, *new_v = NULL;
  QhStatus *st = qh_api_enter(g, QH_VIEW_REWRITE, "value_replace_uses");
  if (st == NULL)
    st = qh_api_check_value(g, old_value, "value_replace_uses", "old_value", &old_v);
  if (st == NULL)
    st = qh_api_check_value(g, new_value, "value_replace_uses", "new_value", &new_v);
  if (st == NULL)
    qh_graph_view_replace_uses(g, old_v, new_v);
  return st;
}

/* View, permission, live node and attribute name of a node_set_attr_* call. */
static QhStatus *set_attr_enter(QhGraphView *g, uint32_t node, const char *name, const char *fn,
                                QhNode **out) {
  const QhNode *n = NULL;
  QhStatus *st = qh_api_enter(g, QH_VIEW_REWRITE, fn);
  if (st == NULL)
    st = qh_api_check_node(g, node, fn, &n);
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
    return qh_api_null_arg(fn, "values (with count > 0)");
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
    st = qh_api_null_arg("node_set_attr_string", "value");
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
}
