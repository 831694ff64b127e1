/* The graph IR's storage and its structural queries: value and node creation with
 * stable ids, attributes, opset imports, and the topological order every later stage
 * (shape inference, annotation, execution) walks. */
#include "core/graph.h"

#include <string.h>

#include "core/error.h"

static void value_free(gpointer p) {
  QhValue *v = p;
  if (v == NULL)
    return;
  g_free(v->name);
  if (v->dim_params) {
    for (int i = 0; i < v->shape.rank; i++)
      g_free(v->dim_params[i]);
    g_free(v->dim_params);
  }
  qh_tensor_free(v->initializer);
  g_free(v);
}

static void attr_clear(QhAttr *a) {
  g_free(a->name);
  g_free(a->s);
  qh_tensor_free(a->t);
  g_free(a->floats);
  g_free(a->ints);
  if (a->strings) {
    for (int64_t i = 0; i < a->n; i++)
      g_free(a->strings[i]);
    g_free(a->strings);
  }
  memset(a, 0, sizeof *a);
}

static void node_free(gpointer p) {
  QhNode *n = p;
  if (n == NULL)
    return;
  g_free(n->name);
  g_free(n->op_type);
  g_free(n->domain);
  g_free(n->inputs);
  g_free(n->outputs);
  for (int i = 0; i < n->n_attrs; i++)
    attr_clear(&n->attrs[i]);
  g_free(n->attrs);
  g_free(n);
}

static gint compare_ids(gconstpointer a, gconstpointer b, gpointer unused) {
  (void)unused;
  return GPOINTER_TO_INT(a) - GPOINTER_TO_INT(b);
}

static void array_unref0(gpointer p) {
  if (p != NULL)
    g_array_unref(p);
}

static void opset_clear(gpointer p) { g_free(((QhOpsetImport *)p)->domain); }

static void metadata_clear(gpointer p) {
  QhMetadataEntry *m = p;
  g_free(m->key);
  g_free(m->value);
}

QhGraph *qh_graph_new(void) {
  QhGraph *g = g_new0(QhGraph, 1);
  g->nodes = g_ptr_array_new_with_free_func(node_free);
  g->values = g_ptr_array_new_with_free_func(value_free);
  g->value_ids = g_hash_table_new(g_str_hash, g_str_equal);
  g->inputs = g_array_new(FALSE, FALSE, sizeof(int));
  g->outputs = g_array_new(FALSE, FALSE, sizeof(int));
  g->opsets = g_array_new(FALSE, TRUE, sizeof(QhOpsetImport));
  g_array_set_clear_func(g->opsets, opset_clear);
  g->metadata = g_array_new(FALSE, TRUE, sizeof(QhMetadataEntry));
  g_array_set_clear_func(g->metadata, metadata_clear);
  return g;
}

void qh_graph_free(QhGraph *g) {
  if (g == NULL)
    return;
  g_free(g->name);
  g_free(g->doc_string);
  g_free(g->producer_name);
  g_free(g->producer_version);
  g_free(g->model_domain);
  /* The hash table's keys are the values' names: drop it before the values. */
  g_hash_table_destroy(g->value_ids);
  g_ptr_array_free(g->nodes, TRUE);
  g_ptr_array_free(g->values, TRUE);
  g_array_free(g->inputs, TRUE);
  g_array_free(g->outputs, TRUE);
  g_array_free(g->opsets, TRUE);
  g_array_free(g->metadata, TRUE);
  g_free(g);
}

int qh_graph_find_value(const QhGraph *g, const char *name) {
  gpointer p = g_hash_table_lookup(g->value_ids, name);
  return p ? GPOINTER_TO_INT(p) - 1 : -1;
}

QhValue *qh_graph_add_value(QhGraph *g, const char *name, GError **error) {
  if (qh_graph_find_value(g, name) >= 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "value '%s' is defined twice", name);
    return NULL;
  }
  QhValue *v = g_new0(QhValue, 1);
  v->id = (int)g->values->len;
  v->name = g_strdup(name);
  v->dtype = QH_DTYPE_UNDEFINED;
  v->shape.rank = -1;
  v->producer = -1;
  g_ptr_array_add(g->values, v);
  g_hash_table_insert(g->value_ids, v->name, GINT_TO_POINTER(v->id + 1));
  return v;
}

gboolean qh_graph_rename_value(QhGraph *g, int value_id, const char *name, GError **error) {
  QhValue *v = qh_graph_value(g, value_id);
  if (strcmp(v->name, name) == 0)
    return TRUE;
  if (qh_graph_find_value(g, name) >= 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "value '%s' is defined twice", name);
    return FALSE;
  }
  g_hash_table_remove(g->value_ids, v->name);
  g_free(v->name);
  v->name = g_strdup(name);
  g_hash_table_insert(g->value_ids, v->name, GINT_TO_POINTER(v->id + 1));
  return TRUE;
}

QhValue *qh_graph_ensure_value(QhGraph *g, const char *name, GError **error) {
  int id = qh_graph_find_value(g, name);
  return id >= 0 ? qh_graph_value(g, id) : qh_graph_add_value(g, name, error);
}

void qh_value_set_initializer(QhValue *v, QhTensor *t) {
  qh_tensor_free(v->initializer);
  v->initializer = t;
  v->dtype = t->dtype;
  if (v->dim_params) {
    for (int i = 0; i < v->shape.rank; i++)
      g_free(v->dim_params[i]);
    g_clear_pointer(&v->dim_params, g_free);
  }
  v->shape = t->shape;
}

QhNode *qh_graph_add_node(QhGraph *g, const char *name, const char *op_type, const char *domain,
                          int n_inputs, const int *inputs, int n_outputs, const int *outputs,
                          GError **error) {
  int n_values = qh_graph_n_values(g);
  int node_id = qh_graph_n_nodes(g);
  const char *shown = (name && *name) ? name : op_type;
  for (int i = 0; i < n_inputs; i++) {
    if (inputs[i] < -1 || inputs[i] >= n_values) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node '%s' (%s): input %d refers to no value",
                  shown, op_type, i);
      return NULL;
    }
  }
  for (int i = 0; i < n_outputs; i++) {
    if (outputs[i] < -1 || outputs[i] >= n_values) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node '%s' (%s): output %d refers to no value",
                  shown, op_type, i);
      return NULL;
    }
    if (outputs[i] < 0)
      continue;
    QhValue *v = qh_graph_value(g, outputs[i]);
    if (v->producer >= 0 || v->initializer != NULL || v->is_input) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "node '%s' (%s): output '%s' is already defined by another node, an "
                  "initializer or a graph input",
                  shown, op_type, v->name);
      return NULL;
    }
    for (int j = 0; j < i; j++) {
      if (outputs[j] == outputs[i]) {
        g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node '%s' (%s): output '%s' is listed twice",
                    shown, op_type, v->name);
        return NULL;
      }
    }
  }
  QhNode *n = g_new0(QhNode, 1);
  n->id = node_id;
  n->name = g_strdup(name ? name : "");
  n->op_type = g_strdup(op_type);
  n->domain = g_strdup(domain ? domain : "");
  n->n_inputs = n_inputs;
  n->inputs = g_memdup2(inputs, sizeof(int) * (gsize)n_inputs);
  n->n_outputs = n_outputs;
  n->outputs = g_memdup2(outputs, sizeof(int) * (gsize)n_outputs);
  for (int i = 0; i < n_outputs; i++)
    if (outputs[i] >= 0)
      qh_graph_value(g, outputs[i])->producer = node_id;
  g_ptr_array_add(g->nodes, n);
  return n;
}

void qh_graph_remove_node(QhGraph *g, int node_id) {
  QhNode *n = qh_graph_node(g, node_id);
  if (n->is_removed)
    return;
  n->is_removed = TRUE;
  for (int i = 0; i < n->n_outputs; i++)
    if (n->outputs[i] >= 0 && qh_graph_value(g, n->outputs[i])->producer == node_id)
      qh_graph_value(g, n->outputs[i])->producer = -1;
}

static QhAttr *attr_slot(QhNode *node, const char *name) {
  for (int i = 0; i < node->n_attrs; i++) {
    if (strcmp(node->attrs[i].name, name) == 0) {
      attr_clear(&node->attrs[i]);
      node->attrs[i].name = g_strdup(name);
      return &node->attrs[i];
    }
  }
  node->attrs = g_renew(QhAttr, node->attrs, node->n_attrs + 1);
  QhAttr *a = &node->attrs[node->n_attrs++];
  memset(a, 0, sizeof *a);
  a->name = g_strdup(name);
  return a;
}

void qh_node_set_attr_int(QhNode *node, const char *name, int64_t v) {
  QhAttr *a = attr_slot(node, name);
  a->type = QH_ATTR_INT;
  a->i = v;
}

void qh_node_set_attr_float(QhNode *node, const char *name, float v) {
  QhAttr *a = attr_slot(node, name);
  a->type = QH_ATTR_FLOAT;
  a->f = v;
}

void qh_node_set_attr_string(QhNode *node, const char *name, const char *v) {
  QhAttr *a = attr_slot(node, name);
  a->type = QH_ATTR_STRING;
  a->s = g_strdup(v);
}

void qh_node_set_attr_ints(QhNode *node, const char *name, int64_t n, const int64_t *v) {
  QhAttr *a = attr_slot(node, name);
  a->type = QH_ATTR_INTS;
  a->n = n;
  a->ints = g_memdup2(v, sizeof(int64_t) * (gsize)n);
}

void qh_node_set_attr_floats(QhNode *node, const char *name, int64_t n, const float *v) {
  QhAttr *a = attr_slot(node, name);
  a->type = QH_ATTR_FLOATS;
  a->n = n;
  a->floats = g_memdup2(v, sizeof(float) * (gsize)n);
}

void qh_node_set_attr_strings(QhNode *node, const char *name, int64_t n, const char *const *v) {
  QhAttr *a = attr_slot(node, name);
  a->type = QH_ATTR_STRINGS;
  a->n = n;
  a->strings = g_new0(char *, n + 1);
  for (int64_t i = 0; i < n; i++)
    a->strings[i] = g_strdup(v[i]);
}

void qh_node_set_attr_tensor(QhNode *node, const char *name, QhTensor *tensor) {
  QhAttr *a = attr_slot(node, name);
  a->type = QH_ATTR_TENSOR;
  a->t = tensor;
}

const QhAttr *qh_node_attr(const QhNode *node, const char *name) {
  for (int i = 0; i < node->n_attrs; i++)
    if (strcmp(node->attrs[i].name, name) == 0)
      return &node->attrs[i];
  return NULL;
}

char *qh_node_describe(const QhNode *node) {
  return g_strdup_printf("node '%s' (%s)", node->name, node->op_type);
}

static const QhAttr *typed_attr(const QhNode *node, const char *name, QhAttrType type,
                                const char *type_name, GError **error, gboolean *ok) {
  const QhAttr *a = qh_node_attr(node, name);
  *ok = TRUE;
  if (a != NULL && a->type != type) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node '%s' (%s): attribute '%s' must be %s",
                node->name, node->op_type, name, type_name);
    *ok = FALSE;
    return NULL;
  }
  return a;
}

gboolean qh_node_attr_get_int(const QhNode *node, const char *name, int64_t dflt, int64_t *out,
                              GError **error) {
  gboolean ok;
  const QhAttr *a = typed_attr(node, name, QH_ATTR_INT, "an int", error, &ok);
  *out = a ? a->i : dflt;
  return ok;
}

gboolean qh_node_attr_get_float(const QhNode *node, const char *name, float dflt, float *out,
                                GError **error) {
  gboolean ok;
  const QhAttr *a = typed_attr(node, name, QH_ATTR_FLOAT, "a float", error, &ok);
  *out = a ? a->f : dflt;
  return ok;
}

gboolean qh_node_attr_get_string(const QhNode *node, const char *name, const char *dflt,
                                 const char **out, GError **error) {
  gboolean ok;
  const QhAttr *a = typed_attr(node, name, QH_ATTR_STRING, "a string", error, &ok);
  *out = a ? a->s : dflt;
  return ok;
}

gboolean qh_node_attr_get_ints(const QhNode *node, const char *name, int64_t *out_n,
                               const int64_t **out_v, GError **error) {
  gboolean ok;
  const QhAttr *a = typed_attr(node, name, QH_ATTR_INTS, "a list of ints", error, &ok);
  *out_n = a ? a->n : -1;
  *out_v = a ? a->ints : NULL;
  return ok;
}

gboolean qh_node_attr_get_floats(const QhNode *node, const char *name, int64_t *out_n,
                                 const float **out_v, GError **error) {
  gboolean ok;
  const QhAttr *a = typed_attr(node, name, QH_ATTR_FLOATS, "a list of floats", error, &ok);
  *out_n = a ? a->n : -1;
  *out_v = a ? a->floats : NULL;
  return ok;
}

int qh_node_input(const QhNode *node, int i) {
  return (i >= 0 && i < node->n_inputs) ? node->inputs[i] : -1;
}

int qh_node_output(const QhNode *node, int i) {
  return (i >= 0 && i < node->n_outputs) ? node->outputs[i] : -1;
}

static gboolean is_default_domain(const char *d) {
  return d == NULL || *d == '\0' || strcmp(d, "ai.onnx") == 0;
}

int64_t qh_graph_opset(const QhGraph *g, const char *domain) {
  for (guint i = 0; i < g->opsets->len; i++) {
    const QhOpsetImport *o = &g_array_index(g->opsets, QhOpsetImport, i);
    if (is_default_domain(domain) ? is_default_domain(o->domain) : g_strcmp0(o->domain, domain) == 0)
      return o->version;
  }
  return -1;
}

void qh_graph_set_opset(QhGraph *g, const char *domain, int64_t version) {
  for (guint i = 0; i < g->opsets->len; i++) {
    QhOpsetImport *o = &g_array_index(g->opsets, QhOpsetImport, i);
    if (is_default_domain(domain) ? is_default_domain(o->domain) : g_strcmp0(o->domain, domain) == 0) {
      o->version = version;
      return;
    }
  }
  QhOpsetImport o = {g_strdup(domain ? domain : ""), version};
  g_array_append_val(g->opsets, o);
}

int qh_graph_count_live_nodes(const QhGraph *g) {
  int n = 0;
  for (int i = 0; i < qh_graph_n_nodes(g); i++)
    n += !qh_graph_node(g, i)->is_removed;
  return n;
}

gboolean qh_graph_topo_order(const QhGraph *g, GArray **out_order, GError **error) {
  int n_nodes = qh_graph_n_nodes(g);
  int *pending = g_new0(int, n_nodes);       /* unresolved producer inputs per node */
  GPtrArray *consumers = g_ptr_array_new_with_free_func(array_unref0);
  for (int v = 0; v < qh_graph_n_values(g); v++)
    g_ptr_array_add(consumers, NULL);
  GArray *order = g_array_new(FALSE, FALSE, sizeof(int));
  gboolean ok = TRUE;

  for (int id = 0; id < n_nodes && ok; id++) {
    const QhNode *n = qh_graph_node(g, id);
    if (n->is_removed)
      continue;
    for (int i = 0; i < n->n_inputs; i++) {
      int vid = n->inputs[i];
      if (vid < 0)
        continue;
      const QhValue *v = qh_graph_value(g, vid);
      if (v->producer >= 0) {
        GArray *c = g_ptr_array_index(consumers, vid);
        if (c == NULL) {
          c = g_array_new(FALSE, FALSE, sizeof(int));
          g_ptr_array_index(consumers, vid) = c;
        }
        g_array_append_val(c, id);
        pending[id]++;
      } else if (!v->is_input && v->initializer == NULL) {
        g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                    "node '%s' (%s): input '%s' is not produced by any node, initializer or "
                    "graph input",
                    n->name, n->op_type, v->name);
        ok = FALSE;
        break;
      }
    }
  }

  if (ok) {
    /* Kahn's algorithm; the ready queue stays sorted by id so the order is
     * deterministic and close to the file's own order. */
    GQueue ready = G_QUEUE_INIT;
    for (int id = 0; id < n_nodes; id++)
      if (!qh_graph_node(g, id)->is_removed && pending[id] == 0)
        g_queue_push_tail(&ready, GINT_TO_POINTER(id));
    while (!g_queue_is_empty(&ready)) {
      int id = GPOINTER_TO_INT(g_queue_pop_head(&ready));
      g_array_append_val(order, id);
      const QhNode *n = qh_graph_node(g, id);
      for (int o = 0; o < n->n_outputs; o++) {
        if (n->outputs[o] < 0)
          continue;
        GArray *c = g_ptr_array_index(consumers, n->outputs[o]);
        for (guint k = 0; c && k < c->len; k++) {
          int cid = g_array_index(c, int, k);
          if (--pending[cid] == 0)
            g_queue_insert_sorted(&ready, GINT_TO_POINTER(cid), compare_ids, NULL);
        }
      }
    }
    if ((int)order->len != qh_graph_count_live_nodes(g)) {
      for (int id = 0; id < n_nodes; id++) {
        const QhNode *n = qh_graph_node(g, id);
        if (!n->is_removed && pending[id] > 0) {
          g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                      "node '%s' (%s) is part of a cycle: the graph is not acyclic", n->name,
                      n->op_type);
          break;
        }
      }
      ok = FALSE;
    }
  }

  g_free(pending);
  g_ptr_array_free(consumers, TRUE);
  if (!ok) {
    g_array_free(order, TRUE);
    return FALSE;
  }
  *out_order = order;
  return TRUE;
}

const char *qh_graph_metadata(const QhGraph *g, const char *key) {
  for (guint i = 0; i < g->metadata->len; i++) {
    const QhMetadataEntry *e = &g_array_index(g->metadata, QhMetadataEntry, i);
    if (e->key && strcmp(e->key, key) == 0)
      return e->value;
  }
  return NULL;
}
