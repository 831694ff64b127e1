/* Saving the graph IR as an ONNX model. The protobuf-c message tree is built over
 * the graph's own strings and tensor buffers (borrowed, never copied), packed into
 * one buffer, and written atomically: a temporary file beside the target, fsync,
 * then rename, so a failed save never leaves a partial model at the path. */
#include "io/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "onnx/onnx.pb-c.h"

#ifndef QHOST_VERSION
#define QHOST_VERSION "0"
#endif

#define DEFAULT_IR_VERSION 8
#define MAX_MODEL_BYTES (G_GUINT64_CONSTANT(2) << 30)

/* Everything the message tree allocates, freed together. */
typedef struct {
  GPtrArray *pool;
} Builder;

static gpointer alloc(Builder *b, gsize size) {
  gpointer p = g_malloc0(size);
  g_ptr_array_add(b->pool, p);
  return p;
}

#define NEW(b, T, init) ((T *)memcpy(alloc((b), sizeof(T)), &(T)init, sizeof(T)))
#define ARRAY(b, T, n) ((T *)alloc((b), sizeof(T) * ((n) > 0 ? (gsize)(n) : 1)))

static char *mutable_str(const char *s) { return (char *)(s ? s : ""); }

static Onnx__TensorProto *tensor_proto(Builder *b, const QhTensor *t, const char *name) {
  Onnx__TensorProto *tp = NEW(b, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
  tp->name = name ? mutable_str(name) : NULL;
  tp->has_data_type = TRUE;
  tp->data_type = (int32_t)t->dtype;
  tp->n_dims = (size_t)t->shape.rank;
  tp->dims = (int64_t *)t->shape.dims;
  tp->has_raw_data = TRUE;
  if (qh_dtype_is_4bit(t->dtype)) { /* two per byte in the file */
    size_t n = (size_t)qh_tensor_numel(t);
    tp->raw_data.len = (n + 1) / 2;
    tp->raw_data.data = alloc(b, tp->raw_data.len);
    qh_int4_pack(t->data, n, tp->raw_data.data);
    return tp;
  }
  tp->raw_data.len = t->nbytes;
  tp->raw_data.data = t->data;
  return tp;
}

static Onnx__ValueInfoProto *value_info(Builder *b, const QhValue *v) {
  Onnx__ValueInfoProto *vi = NEW(b, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
  vi->name = mutable_str(v->name);
  Onnx__TypeProto *type = NEW(b, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
  Onnx__TypeProto__Tensor *tt = NEW(b, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
  type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  type->tensor_type = tt;
  vi->type = type;
  if (v->dtype != QH_DTYPE_UNDEFINED) {
    tt->has_elem_type = TRUE;
    tt->elem_type = (int32_t)v->dtype;
  }
  if (v->shape.rank >= 0) {
    Onnx__TensorShapeProto *shape = NEW(b, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    shape->n_dim = (size_t)v->shape.rank;
    shape->dim = ARRAY(b, Onnx__TensorShapeProto__Dimension *, v->shape.rank);
    for (int i = 0; i < v->shape.rank; i++) {
      Onnx__TensorShapeProto__Dimension *d =
          NEW(b, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
      if (v->shape.dims[i] >= 0) {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = v->shape.dims[i];
      } else if (v->dim_params != NULL && v->dim_params[i] != NULL) {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = v->dim_params[i];
      }
      shape->dim[i] = d;
    }
    tt->shape = shape;
  }
  return vi;
}

static Onnx__AttributeProto *attr_proto(Builder *b, const QhAttr *a) {
  Onnx__AttributeProto *ap = NEW(b, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
  ap->name = mutable_str(a->name);
  ap->has_type = TRUE;
  ap->type = (Onnx__AttributeProto__AttributeType)a->type;
  switch (a->type) {
  case QH_ATTR_FLOAT:
    ap->has_f = TRUE;
    ap->f = a->f;
    break;
  case QH_ATTR_INT:
    ap->has_i = TRUE;
    ap->i = a->i;
    break;
  case QH_ATTR_STRING:
    ap->has_s = TRUE;
    ap->s.data = (uint8_t *)mutable_str(a->s);
    ap->s.len = strlen((const char *)ap->s.data);
    break;
  case QH_ATTR_TENSOR:
    ap->t = tensor_proto(b, a->t, NULL);
    break;
  case QH_ATTR_FLOATS:
    ap->n_floats = (size_t)a->n;
    ap->floats = a->floats;
    break;
  case QH_ATTR_INTS:
    ap->n_ints = (size_t)a->n;
    ap->ints = a->ints;
    break;
  case QH_ATTR_STRINGS:
    ap->n_strings = (size_t)a->n;
    ap->strings = ARRAY(b, ProtobufCBinaryData, a->n);
    for (int64_t i = 0; i < a->n; i++) {
      ap->strings[i].data = (uint8_t *)mutable_str(a->strings[i]);
      ap->strings[i].len = strlen((const char *)ap->strings[i].data);
    }
    break;
  }
  return ap;
}

static Onnx__NodeProto *node_proto(Builder *b, const QhGraph *g, const QhNode *n) {
  Onnx__NodeProto *np = NEW(b, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
  np->name = mutable_str(n->name);
  np->op_type = mutable_str(n->op_type);
  np->domain = (n->domain && *n->domain) ? n->domain : NULL;
  np->n_input = (size_t)n->n_inputs;
  np->input = ARRAY(b, char *, n->n_inputs);
  for (int i = 0; i < n->n_inputs; i++)
    np->input[i] = n->inputs[i] >= 0 ? qh_graph_value(g, n->inputs[i])->name : "";
  np->n_output = (size_t)n->n_outputs;
  np->output = ARRAY(b, char *, n->n_outputs);
  for (int i = 0; i < n->n_outputs; i++)
    np->output[i] = n->outputs[i] >= 0 ? qh_graph_value(g, n->outputs[i])->name : "";
  np->n_attribute = (size_t)n->n_attrs;
  np->attribute = ARRAY(b, Onnx__AttributeProto *, n->n_attrs);
  for (int i = 0; i < n->n_attrs; i++)
    np->attribute[i] = attr_proto(b, &n->attrs[i]);
  return np;
}

static Onnx__GraphProto *graph_proto(Builder *b, const QhGraph *g, GArray *order) {
  Onnx__GraphProto *gp = NEW(b, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
  /* ONNX's checker requires a graph name. */
  gp->name = (g->name && *g->name) ? g->name : "qhost_graph";
  gp->n_node = order->len;
  gp->node = ARRAY(b, Onnx__NodeProto *, order->len);
  for (guint i = 0; i < order->len; i++)
    gp->node[i] = node_proto(b, g, qh_graph_node(g, g_array_index(order, int, i)));

  int n_values = qh_graph_n_values(g);
  gp->initializer = ARRAY(b, Onnx__TensorProto *, n_values);
  gp->value_info = ARRAY(b, Onnx__ValueInfoProto *, n_values);
  for (int id = 0; id < n_values; id++) {
    const QhValue *v = qh_graph_value(g, id);
    if (v->initializer != NULL) {
      gp->initializer[gp->n_initializer++] = tensor_proto(b, v->initializer, v->name);
    } else if (v->producer >= 0 && !v->is_output && v->dtype != QH_DTYPE_UNDEFINED &&
               v->shape.rank >= 0 && !qh_graph_node(g, v->producer)->is_removed) {
      gp->value_info[gp->n_value_info++] = value_info(b, v);
    }
  }
  gp->n_input = g->inputs->len;
  gp->input = ARRAY(b, Onnx__ValueInfoProto *, g->inputs->len);
  for (guint i = 0; i < g->inputs->len; i++)
    gp->input[i] = value_info(b, qh_graph_value(g, g_array_index(g->inputs, int, i)));
  gp->n_output = g->outputs->len;
  gp->output = ARRAY(b, Onnx__ValueInfoProto *, g->outputs->len);
  for (guint i = 0; i < g->outputs->len; i++)
    gp->output[i] = value_info(b, qh_graph_value(g, g_array_index(g->outputs, int, i)));
  return gp;
}

static void model_proto(Builder *b, const QhGraph *g, GArray *order, Onnx__ModelProto *m) {
  m->has_ir_version = TRUE;
  m->ir_version = g->ir_version > 0 ? g->ir_version : DEFAULT_IR_VERSION;
  gboolean named = g->producer_name && *g->producer_name;
  m->producer_name = named ? g->producer_name : "qhost";
  m->producer_version = named ? g->producer_version : QHOST_VERSION;
  m->domain = g->model_domain;
  m->doc_string = g->doc_string;
  if (g->model_version != 0) {
    m->has_model_version = TRUE;
    m->model_version = g->model_version;
  }
  guint n_opsets = g->opsets->len;
  m->opset_import = ARRAY(b, Onnx__OperatorSetIdProto *, n_opsets + 1);
  for (guint i = 0; i < n_opsets; i++) {
    const QhOpsetImport *o = &g_array_index(g->opsets, QhOpsetImport, i);
    Onnx__OperatorSetIdProto *op = NEW(b, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
    op->domain = mutable_str(o->domain);
    op->has_version = TRUE;
    op->version = o->version;
    m->opset_import[m->n_opset_import++] = op;
  }
  if (qh_graph_opset(g, "") < 0) { /* a graph built in memory: the newest opset qhost implements */
    Onnx__OperatorSetIdProto *op = NEW(b, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
    op->domain = "";
    op->has_version = TRUE;
    op->version = QH_ONNX_MAX_OPSET;
    m->opset_import[m->n_opset_import++] = op;
  }
  m->n_metadata_props = g->metadata->len;
  m->metadata_props = ARRAY(b, Onnx__StringStringEntryProto *, g->metadata->len);
  for (guint i = 0; i < g->metadata->len; i++) {
    const QhMetadataEntry *e = &g_array_index(g->metadata, QhMetadataEntry, i);
    Onnx__StringStringEntryProto *p =
        NEW(b, Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
    p->key = mutable_str(e->key);
    p->value = mutable_str(e->value);
    m->metadata_props[i] = p;
  }
  m->graph = graph_proto(b, g, order);
}

static gboolean write_all(int fd, const guint8 *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return FALSE;
    p += w;
    n -= (size_t)w;
  }
  return TRUE;
}

static gboolean write_atomically(const char *path, const guint8 *data, size_t len,
                                 GError **error) {
  char *tmp = g_strdup_printf("%s.XXXXXX", path);
  /* 0666 minus the umask, like any file the user creates. */
  int fd = g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot create a temporary file: %s", path,
                g_strerror(errno));
    g_free(tmp);
    return FALSE;
  }
  gboolean ok = write_all(fd, data, len) && fsync(fd) == 0;
  int saved = errno;
  if (close(fd) != 0 && ok) {
    ok = FALSE;
    saved = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = FALSE;
    saved = errno;
  }
  if (!ok) {
    unlink(tmp);
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot write: %s", path, g_strerror(saved));
  }
  g_free(tmp);
  return ok;
}

gboolean qh_onnx_save(const QhGraph *graph, const char *path, GError **error) {
  GArray *order = NULL;
  if (!qh_graph_topo_order(graph, &order, error)) {
    g_prefix_error(error, "%s: cannot save: ", path);
    return FALSE;
  }
  Builder b = {g_ptr_array_new_with_free_func(g_free)};
  Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
  model_proto(&b, graph, order, &m);
  gboolean ok = FALSE;
  size_t size = onnx__model_proto__get_packed_size(&m);
  guint8 *buf = NULL;
  if ((guint64)size > MAX_MODEL_BYTES) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT,
                "%s: the model would be %zu bytes; ONNX files are limited to 2 GiB", path, size);
  } else if ((buf = g_try_malloc(size > 0 ? size : 1)) == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_NOMEM, "%s: out of memory packing %zu bytes", path, size);
  } else {
    onnx__model_proto__pack(&m, buf);
    ok = write_atomically(path, buf, size, error);
  }
  g_free(buf);
  g_ptr_array_free(b.pool, TRUE);
  g_array_unref(order);
  return ok;
}
