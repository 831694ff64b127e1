/* The graph views handed to plugins: creation, permissions, the hooks the
 * quantization stages install, the value -> consumers index the consumer queries
 * need (the graph itself keeps only producers), and the checked mutations and
 * qparams checks behind the host table's rewrite and qparams_set functions. */
#include "hostapi/graph-view.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

QhGraphView *qh_graph_view_new(QhGraph *graph, uint32_t permissions) {
  g_return_val_if_fail(graph != NULL, NULL);
  QhGraphView *view = g_new0(QhGraphView, 1);
  view->magic = QH_GRAPH_VIEW_MAGIC;
  view->graph = graph;
  view->permissions = (permissions & QH_VIEW_ALL) | QH_VIEW_READ;
  return view;
}

void qh_graph_view_free(QhGraphView *view) {
  if (!qh_graph_view_is_valid(view))
    return;
  qh_graph_view_invalidate(view);
  view->magic = 0;
  g_free(view->refusal);
  g_free(view);
}

gboolean qh_graph_view_is_valid(const QhGraphView *view) {
  return view != NULL && view->magic == QH_GRAPH_VIEW_MAGIC && view->graph != NULL;
}

void qh_graph_view_set_permissions(QhGraphView *view, uint32_t permissions) {
  view->permissions = (permissions & QH_VIEW_ALL) | QH_VIEW_READ;
}

void qh_graph_view_set_annotations(QhGraphView *view, QhAnnotationSet *annotations) {
  view->annotations = annotations;
}

void qh_graph_view_set_qconfig_hook(QhGraphView *view, QhGraphViewQConfigFn fn,
                                    gpointer user_data) {
  view->qconfig_fn = fn;
  view->qconfig_data = user_data;
}

void qh_graph_view_set_qparams_hooks(QhGraphView *view, QhGraphViewQParamsGetFn get_fn,
                                     QhGraphViewQParamsSetFn set_fn, gpointer user_data) {
  view->qparams_get_fn = get_fn;
  view->qparams_set_fn = set_fn;
  view->qparams_data = user_data;
}

void qh_graph_view_set_constant_hook(QhGraphView *view, QhGraphViewConstantSetFn fn,
                                     gpointer user_data) {
  view->constant_set_fn = fn;
  view->constant_data = user_data;
}

void qh_graph_view_keep_refusals(QhGraphView *view) { view->keep_refusals = TRUE; }
const char *qh_graph_view_refusal(const QhGraphView *view) { return view->refusal; }

const QhNode *qh_graph_view_node(const QhGraphView *view, uint32_t node) {
  if (!qh_graph_view_is_valid(view) || node >= (uint32_t)qh_graph_n_nodes(view->graph))
    return NULL;
  const QhNode *n = qh_graph_node(view->graph, (int)node);
  return n->is_removed ? NULL : n;
}

void qh_graph_view_invalidate(QhGraphView *view) {
  if (view->uses != NULL)
    g_ptr_array_free(view->uses, TRUE);
  view->uses = NULL;
}

static void array_unref0(gpointer p) {
  if (p != NULL)
    g_array_unref(p);
}

static void build_uses(QhGraphView *view) {
  const QhGraph *g = view->graph;
  int n_values = qh_graph_n_values(g);
  view->uses = g_ptr_array_new_full((guint)n_values, array_unref0);
  g_ptr_array_set_size(view->uses, n_values);
  for (int id = 0; id < qh_graph_n_nodes(g); id++) {
    const QhNode *n = qh_graph_node(g, id);
    if (n->is_removed)
      continue;
    for (int i = 0; i < n->n_inputs; i++) {
      int vid = n->inputs[i];
      if (vid < 0 || vid >= n_values)
        continue;
      GArray *a = g_ptr_array_index(view->uses, vid);
      if (a == NULL) {
        a = g_array_new(FALSE, FALSE, sizeof(QhGraphViewUse));
        g_ptr_array_index(view->uses, vid) = a;
      }
      QhGraphViewUse use = {(uint32_t)id, (uint32_t)i};
      g_array_append_val(a, use);
    }
  }
}

const GArray *qh_graph_view_uses(QhGraphView *view, uint32_t value) {
  /* Values added since the index was built have no uses in it: rebuild. */
  if (view->uses != NULL && view->uses->len != (guint)qh_graph_n_values(view->graph))
    qh_graph_view_invalidate(view);
  if (view->uses == NULL)
    build_uses(view);
  if (value >= view->uses->len)
    return NULL;
  return g_ptr_array_index(view->uses, value);
}

/* ---- Rewrites: checked graph mutations that keep the consumer index honest ---- */

static gboolean name_ok(const char *what, const char *name, GError **error) {
  if (*name == '\0' || !g_utf8_validate(name, -1, NULL)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s must be a non-empty UTF-8 string", what);
    return FALSE;
  }
  return TRUE;
}

static gboolean ids_left(const QhGraph *g, GError **error) {
  /* Ids are ints in the graph and uint32 in the SDK, QH_INVALID_ID excluded. */
  if (qh_graph_n_values(g) >= G_MAXINT32 - 1 || qh_graph_n_nodes(g) >= G_MAXINT32 - 1) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT, "the graph has no ids left");
    return FALSE;
  }
  return TRUE;
}

/* A value name no value has: "qh_value_N". */
static char *unique_value_name(const QhGraph *g) {
  for (guint64 k = (guint64)qh_graph_n_values(g);; k++) {
    char *name = g_strdup_printf("qh_value_%" G_GUINT64_FORMAT, k);
    if (qh_graph_find_value(g, name) < 0)
      return name;
    g_free(name);
  }
}

int qh_graph_view_find_node(const QhGraph *graph, const char *name) {
  for (int id = 0; id < qh_graph_n_nodes(graph); id++) {
    const QhNode *n = qh_graph_node(graph, id);
    if (!n->is_removed && strcmp(n->name, name) == 0)
      return id;
  }
  return -1;
}

static gboolean live_node_named(const QhGraph *g, const char *name) {
  return qh_graph_view_find_node(g, name) >= 0;
}

/* A node name no live node has: "OP_qhN". */
static char *unique_node_name(const QhGraph *g, const char *op_type) {
  for (guint64 k = (guint64)qh_graph_n_nodes(g);; k++) {
    char *name = g_strdup_printf("%s_qh%" G_GUINT64_FORMAT, op_type, k);
    if (!live_node_named(g, name))
      return name;
    g_free(name);
  }
}

static QhValue *add_value(QhGraphView *view, const char *name, GError **error) {
  if (!ids_left(view->graph, error))
    return NULL;
  if (name != NULL && !name_ok("name", name, error))
    return NULL;
  if (name != NULL && qh_graph_find_value(view->graph, name) >= 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "value '%s' already exists", name);
    return NULL;
  }
  char *generated = name ? NULL : unique_value_name(view->graph);
  QhValue *v = qh_graph_add_value(view->graph, name ? name : generated, error);
  g_free(generated);
  if (v != NULL)
    qh_graph_view_invalidate(view);
  return v;
}

QhValue *qh_graph_view_add_value(QhGraphView *view, const char *name, GError **error) {
  return add_value(view, name, error);
}

QhValue *qh_graph_view_add_constant(QhGraphView *view, const char *name, int32_t dtype,
                                    int32_t rank, const int64_t *dims, const void *data,
                                    size_t nbytes, GError **error) {
  if (!qh_dtype_is_supported(dtype)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "dtype %d is not a QH_DTYPE_* value", dtype);
    return NULL;
  }
  if (rank < 0 || rank > QH_MAX_RANK) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "rank %d is outside [0, %d]", rank,
                QH_MAX_RANK);
    return NULL;
  }
  if (rank > 0 && dims == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "dims is NULL with rank %d", rank);
    return NULL;
  }
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "dims[%d] is %" G_GINT64_FORMAT ", must be >= 0",
                  i, dims[i]);
      return NULL;
    }
  }
  QhShape shape = qh_shape_make(rank, dims);
  int64_t numel;
  if (!qh_shape_numel(&shape, &numel, error))
    return NULL;
  size_t esize = qh_dtype_size((QhDType)dtype);
  /* numel <= QH_MAX_ELEMENTS (2^34) and esize <= 8: the product fits. */
  guint64 expected = (guint64)numel * esize;
  if (nbytes != expected) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "nbytes %zu does not match %" G_GINT64_FORMAT " elements of %s (%" G_GUINT64_FORMAT
                " bytes)",
                nbytes, numel, qh_dtype_name((QhDType)dtype), expected);
    return NULL;
  }
  if (data == NULL && nbytes > 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "data is NULL with nbytes %zu", nbytes);
    return NULL;
  }
  if (name != NULL && (!name_ok("name", name, error) ||
                       qh_graph_find_value(view->graph, name) >= 0)) {
    if (error == NULL || *error == NULL)
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "value '%s' already exists", name);
    return NULL;
  }
  QhTensor *t = qh_tensor_new((QhDType)dtype, &shape, error);
  if (t == NULL)
    return NULL;
  if (nbytes > 0)
    memcpy(t->data, data, nbytes);
  QhValue *v = add_value(view, name, error);
  if (v == NULL) {
    qh_tensor_free(t);
    return NULL;
  }
  qh_value_set_initializer(v, t);
  return v;
}

QhNode *qh_graph_view_add_node(QhGraphView *view, const char *op_type, const char *domain,
                               const char *name, const uint32_t *inputs, size_t n_inputs,
                               const uint32_t *outputs, size_t n_outputs, GError **error) {
  QhGraph *g = view->graph;
  if (!ids_left(g, error))
    return NULL;
  if (op_type == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "op_type is NULL");
    return NULL;
  }
  if (!name_ok("op_type", op_type, error))
    return NULL;
  if (domain != NULL && !g_utf8_validate(domain, -1, NULL)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "domain is not valid UTF-8");
    return NULL;
  }
  if (name != NULL && !name_ok("name", name, error))
    return NULL;
  if (name != NULL && live_node_named(g, name)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "a node named '%s' already exists", name);
    return NULL;
  }
  if (n_inputs > QH_GRAPH_VIEW_MAX_SLOTS || n_outputs > QH_GRAPH_VIEW_MAX_SLOTS) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "n_inputs %zu or n_outputs %zu is above %d",
                n_inputs, n_outputs, QH_GRAPH_VIEW_MAX_SLOTS);
    return NULL;
  }
  if ((n_inputs > 0 && inputs == NULL) || (n_outputs > 0 && outputs == NULL)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s is NULL with a count > 0",
                inputs == NULL && n_inputs > 0 ? "inputs" : "outputs");
    return NULL;
  }
  if (n_outputs == 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "a node needs at least one output");
    return NULL;
  }
  uint32_t n_values = (uint32_t)qh_graph_n_values(g);
  int *in = g_new(int, n_inputs + 1), *out = g_new(int, n_outputs);
  gboolean ok = TRUE;
  for (size_t i = 0; ok && i < n_inputs; i++) {
    in[i] = inputs[i] == QH_INVALID_ID ? -1 : (int)inputs[i];
    if (inputs[i] != QH_INVALID_ID && inputs[i] >= n_values) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "inputs[%zu] %u is not a value id", i,
                  inputs[i]);
      ok = FALSE;
    }
  }
  for (size_t i = 0; ok && i < n_outputs; i++) {
    out[i] = (int)outputs[i];
    if (outputs[i] >= n_values) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "outputs[%zu] %u is not a value id", i,
                  outputs[i]);
      ok = FALSE;
      break;
    }
    const QhValue *v = qh_graph_value(g, out[i]);
    if (v->producer >= 0 || v->initializer != NULL || v->is_input) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "outputs[%zu] '%s' already has a producer, or is a constant or graph input", i,
                  v->name);
      ok = FALSE;
    }
    for (size_t j = 0; ok && j < i; j++) {
      if (outputs[j] == outputs[i]) {
        g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "outputs[%zu] '%s' is listed twice", i,
                    v->name);
        ok = FALSE;
      }
    }
  }
  QhNode *node = NULL;
  if (ok) {
    char *generated = name ? NULL : unique_node_name(g, op_type);
    node = qh_graph_add_node(g, name ? name : generated, op_type, domain ? domain : "",
                             (int)n_inputs, in, (int)n_outputs, out, error);
    g_free(generated);
  }
  g_free(in);
  g_free(out);
  if (node != NULL)
    qh_graph_view_invalidate(view);
  return node;
}

void qh_graph_view_remove_node(QhGraphView *view, const QhNode *node) {
  qh_graph_remove_node(view->graph, node->id);
  qh_graph_view_invalidate(view);
}

gboolean qh_graph_view_set_input(QhGraphView *view, QhNode *node, uint32_t slot, uint32_t value,
                                 GError **error) {
  if (slot >= (uint32_t)node->n_inputs) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "slot %u is out of range: the node has %d inputs",
                slot, node->n_inputs);
    return FALSE;
  }
  if (value != QH_INVALID_ID) {
    if (value >= (uint32_t)qh_graph_n_values(view->graph)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "value %u is not a value id", value);
      return FALSE;
    }
    const QhValue *v = qh_graph_value(view->graph, (int)value);
    if (v->producer == node->id) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "value '%s' is an output of the node itself (a cycle)", v->name);
      return FALSE;
    }
  }
  node->inputs[slot] = value == QH_INVALID_ID ? -1 : (int)value;
  qh_graph_view_invalidate(view);
  return TRUE;
}

void qh_graph_view_replace_uses(QhGraphView *view, QhValue *old_value, QhValue *new_value) {
  QhGraph *g = view->graph;
  if (old_value == new_value)
    return;
  for (int id = 0; id < qh_graph_n_nodes(g); id++) {
    QhNode *n = qh_graph_node(g, id);
    if (n->is_removed)
      continue;
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] == old_value->id)
        n->inputs[i] = new_value->id;
  }
  for (guint i = 0; i < g->outputs->len; i++) {
    if (g_array_index(g->outputs, int, i) == old_value->id) {
      g_array_index(g->outputs, int, i) = new_value->id;
      old_value->is_output = FALSE;
      new_value->is_output = TRUE;
    }
  }
  qh_graph_view_invalidate(view);
}

/* ---- qparams a plugin hands to qparams_set ---- */

gboolean qh_graph_view_check_qparams(const QhGraph *graph, const QhEdgeRef *edge,
                                     const QhQParams *q, QhQParams *out, GError **error) {
  const size_t size_1_0 = offsetof(QhQParams, zero_point) + sizeof(q->zero_point);
  if (QH_ABI_VERSION_MAJOR(q->abi_version) != QH_ABI_MAJOR || q->struct_size < size_1_0 ||
      q->struct_size > sizeof(QhQParams)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "qparams.abi_version 0x%x / struct_size %u are not an ABI %d QhQParams (use "
                "QH_STRUCT_HEADER)",
                q->abi_version, q->struct_size, QH_ABI_MAJOR);
    return FALSE;
  }
  QhQParams c;
  memset(&c, 0, sizeof c);
  memcpy(&c, q, q->struct_size);
  c.abi_version = QH_ABI_VERSION;
  c.struct_size = sizeof c;
  int64_t lo, hi;
  const char *dname;
  if (c.flags != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "qparams.flags 0x%x has unknown bits", c.flags);
    return FALSE;
  }
  if (!qh_quant_dtype_range(c.dtype, &lo, &hi, &dname)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "qparams.dtype %d is not a quantized type",
                c.dtype);
    return FALSE;
  }
  if (c.quant_min < lo || c.quant_max > hi || c.quant_min > c.quant_max) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "qparams.quant_min %d / quant_max %d are not an ordered range inside %s [%" G_GINT64_FORMAT
                ", %" G_GINT64_FORMAT "]",
                c.quant_min, c.quant_max, dname, (gint64)lo, (gint64)hi);
    return FALSE;
  }
  if (c.qscheme < QH_QSCHEME_PER_TENSOR_AFFINE ||
      c.qscheme > QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "qparams.qscheme %d is not a QH_QSCHEME_* value",
                c.qscheme);
    return FALSE;
  }
  if (c.count == 0 || c.count > QH_GRAPH_VIEW_MAX_QPARAMS || c.scale == NULL || c.zero_point == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "qparams.count %zu must be in [1, %u] with non-NULL scale and zero_point", c.count,
                QH_GRAPH_VIEW_MAX_QPARAMS);
    return FALSE;
  }
  gboolean per_channel = qh_quant_qscheme_is_per_channel(c.qscheme);
  const QhNode *n = qh_graph_node(graph, (int)edge->node);
  const QhValue *v = qh_graph_value(
      graph, edge->kind == QH_EDGE_INPUT ? n->inputs[edge->slot] : n->outputs[edge->slot]);
  if (!per_channel && (c.count != 1 || c.ch_axis != -1)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "qparams.count %zu and ch_axis %d must be 1 and -1 for a per-tensor qscheme",
                c.count, c.ch_axis);
    return FALSE;
  }
  if (per_channel) {
    if (c.ch_axis < 0 || (v->shape.rank >= 0 && c.ch_axis >= v->shape.rank)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "qparams.ch_axis %d is outside the rank %d of value '%s'", c.ch_axis,
                  v->shape.rank, v->name);
      return FALSE;
    }
    if (v->shape.rank >= 0 && v->shape.dims[c.ch_axis] >= 0 &&
        (guint64)v->shape.dims[c.ch_axis] != (guint64)c.count) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "qparams.count %zu does not match dimension %d (%" G_GINT64_FORMAT
                  ") of value '%s'",
                  c.count, c.ch_axis, v->shape.dims[c.ch_axis], v->name);
      return FALSE;
    }
  }
  for (size_t i = 0; i < c.count; i++) {
    if (!(isfinite(c.scale[i]) && c.scale[i] > 0.0f)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "qparams.scale[%zu] %g must be > 0 and finite",
                  i, (double)c.scale[i]);
      return FALSE;
    }
    if (c.zero_point[i] < c.quant_min || c.zero_point[i] > c.quant_max) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "qparams.zero_point[%zu] %d is outside [%d, %d]", i, c.zero_point[i],
                  c.quant_min, c.quant_max);
      return FALSE;
    }
  }
  *out = c;
  return TRUE;
}
