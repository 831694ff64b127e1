/* Convert: inserts QuantizeLinear/DequantizeLinear pairs for activations and replaces
 * quantized weights by integer initializers behind a DequantizeLinear, following the
 * naming contract of convert.h. Each value gets at most one chain per quantization
 * point; consumers without a spec of their own read the chain of their producer's
 * output, as the dequantized tensor is what PyTorch's reference model hands on. */
#include <string.h>

#include "core/error.h"
#include "io/onnx.h"
#include "hostapi/annotation.h"
#include "quant/convert.h"
#include "quant/quantize.h"

typedef struct {
  QhGraph *g;
  const QhQuantPoints *pts;
  int n_nodes; /* nodes before conversion: the only ones whose inputs are rewired */
  GPtrArray *consumers; /* per value id: GArray of (node, slot) int pairs, or NULL */
  QhConstantRounding rounding;
  gpointer rounding_data;
} Ctx;

/* Value and node names share one namespace here, so a new Q/DQ node never takes the
 * name of a value or another node. */
static gboolean name_taken(const QhGraph *g, const char *name) {
  if (qh_graph_find_value(g, name) >= 0)
    return TRUE;
  for (int i = 0; i < qh_graph_n_nodes(g); i++)
    if (strcmp(qh_graph_node(g, i)->name, name) == 0)
      return TRUE;
  return FALSE;
}

static char *unique_name(const QhGraph *g, const char *base) {
  if (!name_taken(g, base))
    return g_strdup(base);
  for (int k = 1;; k++) {
    char *name = g_strdup_printf("%s_%d", base, k);
    if (!name_taken(g, name))
      return name;
    g_free(name);
  }
}

static QhValue *new_value(QhGraph *g, const char *base, GError **error) {
  char *name = unique_name(g, base);
  QhValue *v = qh_graph_add_value(g, name, error);
  g_free(name);
  return v;
}

static QhValue *new_constant(QhGraph *g, const char *base, QhDType dtype, int rank, const int64_t *dims,
                             const void *data, GError **error) {
  QhShape shape = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(dtype, &shape, error);
  if (t == NULL)
    return NULL;
  memcpy(t->data, data, t->nbytes);
  QhValue *v = new_value(g, base, error);
  if (v == NULL) {
    qh_tensor_free(t);
    return NULL;
  }
  qh_value_set_initializer(v, t);
  return v;
}

/* "<base>_scale" and "<base>_zero_point": scalars, or 1-D for per-channel. */
static gboolean qparam_inits(QhGraph *g, const char *base, const QhQuantParams *q, int *scale_id,
                             int *zp_id, GError **error) {
  int64_t n = q->n;
  int rank = q->n > 1 ? 1 : 0;
  char *sname = g_strdup_printf("%s_scale", base), *zname = g_strdup_printf("%s_zero_point", base);
  QhValue *s = new_constant(g, sname, QH_DTYPE_F32, rank, &n, q->scale, error);
  QhValue *z = NULL;
  if (s) {
    size_t esize = qh_dtype_size((QhDType)q->dtype);
    guint8 *zp = g_malloc0(esize * (size_t)q->n);
    for (int i = 0; i < q->n; i++) {
      if (q->dtype == QH_DTYPE_U8 || q->dtype == QH_DTYPE_U4) /* 4-bit: one per byte */
        zp[i] = (guint8)q->zero_point[i];
      else if (q->dtype == QH_DTYPE_S8 || q->dtype == QH_DTYPE_S4)
        ((gint8 *)zp)[i] = (gint8)q->zero_point[i];
      else if (q->dtype == QH_DTYPE_U16)
        ((guint16 *)zp)[i] = (guint16)q->zero_point[i];
      else if (q->dtype == QH_DTYPE_S16)
        ((gint16 *)zp)[i] = (gint16)q->zero_point[i];
      else
        ((gint32 *)zp)[i] = q->zero_point[i];
    }
    z = new_constant(g, zname, (QhDType)q->dtype, rank, &n, zp, error);
    g_free(zp);
  }
  g_free(sname);
  g_free(zname);
  if (z == NULL)
    return FALSE;
  *scale_id = s->id;
  *zp_id = z->id;
  return TRUE;
}

static QhNode *add_qdq_node(QhGraph *g, const char *op, const char *base_name, int in, int scale, int zp,
                            int out, const QhQuantParams *q, GError **error) {
  char *name = unique_name(g, base_name);
  int inputs[3] = {in, scale, zp};
  QhNode *n = qh_graph_add_node(g, name, op, "", 3, inputs, 1, &out, error);
  g_free(name);
  if (n && q->n > 1)
    qh_node_set_attr_int(n, "axis", q->ch_axis);
  return n;
}

/* 16- and 4-bit types need opset 21, which qh_quant_choose_opset sets once the graph is
 * done. 4-bit is for constants (weights): qhost's reference path has no 4-bit activation
 * tests, so it refuses them rather than write what nothing checked. */
static gboolean check_storable(const QhQuantParams *q, const char *what, gboolean activation, GError **error) {
  gboolean ok = q->dtype == QH_DTYPE_U8 || q->dtype == QH_DTYPE_S8 || q->dtype == QH_DTYPE_U16 ||
                q->dtype == QH_DTYPE_S16 ||
                (!activation && (q->dtype == QH_DTYPE_S32 || qh_dtype_is_4bit((QhDType)q->dtype)));
  if (!ok && activation && qh_dtype_is_4bit((QhDType)q->dtype))
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "'%s': an activation cannot be stored as %s (4-bit types are for weights)", what,
                qh_dtype_name((QhDType)q->dtype));
  else if (!ok)
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "'%s': %s cannot be stored as %s in a QDQ model", what,
                activation ? "an activation" : "a constant", qh_dtype_name((QhDType)q->dtype));
  return ok;
}

/* A weight: integer initializer + DequantizeLinear. reuse: the DQ output takes over
 * the float value itself (its name is kept). Returns the float value id consumers read. */
static int weight_chain(Ctx *c, QhValue *w, const QhTensor *t, const QhQuantParams *q, const char *base,
                        gboolean reuse, GError **error) {
  if (!check_storable(q, w->name, FALSE, error))
    return -1;
  QhTensor *qt = qh_tensor_new((QhDType)q->dtype, &t->shape, error);
  if (qt == NULL)
    return -1;
  /* The backend's rounding: its fake-quantized values are multiples of the scale, which
   * the quantization below maps back to exactly the integers it chose. */
  const float *src = t->data;
  float *fake = NULL;
  if (c->rounding && t->dtype == QH_DTYPE_F32) {
    fake = qh_aligned_alloc0(t->nbytes);
    if (fake && c->rounding(c->rounding_data, t, q, fake))
      src = fake;
  }
  if (q->n > 1) {
    if (q->ch_axis < 0 || q->ch_axis >= t->shape.rank || t->shape.dims[q->ch_axis] != q->n) {
      char *shape = qh_shape_to_string(&t->shape);
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "'%s': %d per-channel qparams do not fit axis %d of %s",
                  w->name, q->n, q->ch_axis, shape);
      g_free(shape);
      qh_tensor_free(qt);
      qh_aligned_free(fake);
      return -1;
    }
    qh_quant_quantize_per_channel(src, t->shape.rank, t->shape.dims, q, qt->data);
  } else {
    qh_quant_quantize(src, (size_t)qh_tensor_numel(t), q->scale[0], q->zero_point[0], q->dtype, qt->data);
  }
  qh_aligned_free(fake);
  char *qname = g_strdup_printf("%s_quantized", base);
  QhValue *qv = new_value(c->g, qname, error);
  g_free(qname);
  int scale = -1, zp = -1;
  if (qv == NULL || !qparam_inits(c->g, base, q, &scale, &zp, error)) {
    qh_tensor_free(qt);
    return -1;
  }
  qh_value_set_initializer(qv, qt);
  QhValue *out;
  if (reuse) {
    out = w; /* its float data was detached by convert_value */
  } else {
    char *dname = g_strdup_printf("%s_dequantized", base);
    out = new_value(c->g, dname, error);
    g_free(dname);
    if (out == NULL)
      return -1;
  }
  out->dtype = QH_DTYPE_F32;
  out->shape = qt->shape;
  char *dq = g_strdup_printf("%s_dequantize", base);
  QhNode *n = add_qdq_node(c->g, "DequantizeLinear", dq, qv->id, scale, zp, out->id, q, error);
  g_free(dq);
  return n ? out->id : -1;
}

/* ONNX's QuantizeLinear saturates to its dtype's full range, so a narrower range
 * (reduce_range's [0, 127], a custom quant_min/quant_max) is invisible in the QDQ
 * graph; kernels that need it (oneDNN without VNNI saturates u8 x s8 pairs above
 * 127) read it from this metadata entry: key QH_QUANT_RANGE_KEY_PREFIX + the
 * integer value's name, value "qmin,qmax". ONNX Runtime ignores it. */
static void record_narrow_range(QhGraph *g, const char *qname, const QhQuantParams *q) {
  int64_t lo, hi;
  const char *dtype_name;
  if (!qh_quant_dtype_range(q->dtype, &lo, &hi, &dtype_name) ||
      (q->quant_min == lo && q->quant_max == hi))
    return;
  QhMetadataEntry e = {g_strdup_printf("%s%s", QH_QUANT_RANGE_KEY_PREFIX, qname),
                       g_strdup_printf("%d,%d", q->quant_min, q->quant_max)};
  g_array_append_val(g->metadata, e);
}

/* An activation: QuantizeLinear + DequantizeLinear after value v. as_output: v is a
 * graph output, whose name moves to the DequantizeLinear's output. */
static int activation_chain(Ctx *c, int v, const QhQuantParams *q, const char *base, gboolean as_output,
                            GError **error) {
  QhGraph *g = c->g;
  if (!check_storable(q, qh_graph_value(g, v)->name, TRUE, error))
    return -1;
  int scale = -1, zp = -1;
  if (!qparam_inits(g, base, q, &scale, &zp, error))
    return -1;
  char *qn = g_strdup_printf("%s_quantized", base);
  QhValue *qv = new_value(g, qn, error);
  g_free(qn);
  if (qv == NULL)
    return -1;
  qv->dtype = (QhDType)q->dtype;
  qv->shape = qh_graph_value(g, v)->shape;
  record_narrow_range(g, qv->name, q);
  QhValue *out;
  char *final_name = g_strdup(qh_graph_value(g, v)->name);
  if (as_output) {
    char *pre = g_strdup_printf("%s_prequant", final_name);
    char *unique = unique_name(g, pre);
    gboolean ok = qh_graph_rename_value(g, v, unique, error);
    g_free(pre);
    g_free(unique);
    out = ok ? qh_graph_add_value(g, final_name, error) : NULL;
  } else {
    char *dn = g_strdup_printf("%s_dequantized", base);
    out = new_value(g, dn, error);
    g_free(dn);
  }
  g_free(final_name);
  if (out == NULL)
    return -1;
  out->dtype = QH_DTYPE_F32;
  out->shape = qh_graph_value(g, v)->shape;
  char *qname = g_strdup_printf("%s_quantize", base), *dname = g_strdup_printf("%s_dequantize", base);
  gboolean ok = add_qdq_node(g, "QuantizeLinear", qname, v, scale, zp, qv->id, q, error) &&
                add_qdq_node(g, "DequantizeLinear", dname, qv->id, scale, zp, out->id, q, error);
  g_free(qname);
  g_free(dname);
  if (!ok)
    return -1;
  if (as_output) {
    QhValue *old = qh_graph_value(g, v);
    old->is_output = FALSE;
    out->is_output = TRUE;
    for (guint i = 0; i < g->outputs->len; i++)
      if (g_array_index(g->outputs, int, i) == v)
        g_array_index(g->outputs, int, i) = out->id;
  }
  return out->id;
}

static QhQuantPoint *output_point(const Ctx *c, const QhValue *v) {
  if (v->producer < 0)
    return NULL;
  const QhNode *p = qh_graph_node(c->g, v->producer);
  for (int o = 0; o < p->n_outputs; o++)
    if (p->outputs[o] == v->id) {
      QhEdgeRef e = {(uint32_t)p->id, (uint32_t)o, QH_EDGE_OUTPUT, 0};
      return qh_quant_points_for_edge(c->pts, &e);
    }
  return NULL;
}

typedef struct {
  QhQuantPoint *point;
  int dq; /* value id consumers read */
} Chain;

/* weights: the float data, detached from the value (whose name the first chain takes) */
static int chain_for(Ctx *c, GArray *chains, QhQuantPoint *pt, int v, const QhTensor *weights,
                     const char *consumer, GError **error) {
  for (guint i = 0; i < chains->len; i++)
    if (g_array_index(chains, Chain, i).point == pt)
      return g_array_index(chains, Chain, i).dq;
  QhValue *val = qh_graph_value(c->g, v);
  gboolean first = chains->len == 0;
  char *base = first ? g_strdup(val->name) : g_strdup_printf("%s_for_%s", val->name, consumer);
  int dq;
  if (pt->qparams == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "'%s' has no qparams", val->name);
    dq = -1;
  } else if (weights) {
    dq = weight_chain(c, val, weights, pt->qparams, base, first, error);
  } else {
    dq = activation_chain(c, v, pt->qparams, base, first && val->is_output, error);
  }
  g_free(base);
  if (dq >= 0) {
    Chain ch = {pt, dq};
    g_array_append_val(chains, ch);
  }
  return dq;
}

static gboolean convert_value(Ctx *c, int v, GError **error) {
  QhGraph *g = c->g;
  GArray *uses = v < (int)c->consumers->len ? c->consumers->pdata[v] : NULL;
  QhQuantPoint *out_pt = output_point(c, qh_graph_value(g, v));
  gboolean any = out_pt != NULL;
  for (guint i = 0; uses && i < uses->len / 2 && !any; i++) {
    QhEdgeRef e = {(uint32_t)g_array_index(uses, int, 2 * i), (uint32_t)g_array_index(uses, int, 2 * i + 1),
                   QH_EDGE_INPUT, 0};
    any = qh_quant_points_for_edge(c->pts, &e) != NULL;
  }
  if (!any)
    return TRUE;
  GArray *chains = g_array_new(FALSE, FALSE, sizeof(Chain));
  gboolean ok = TRUE;
  int out_dq = -1;
  QhValue *val = qh_graph_value(g, v);
  QhTensor *weights = val->initializer;
  val->initializer = NULL;
  if (out_pt)
    ok = (out_dq = chain_for(c, chains, out_pt, v, weights, "", error)) >= 0;
  int reuse_v = v; /* a weight's own value id becomes its DQ output */
  for (guint i = 0; ok && uses && i < uses->len / 2; i++) {
    int node = g_array_index(uses, int, 2 * i), slot = g_array_index(uses, int, 2 * i + 1);
    QhEdgeRef e = {(uint32_t)node, (uint32_t)slot, QH_EDGE_INPUT, 0};
    QhQuantPoint *pt = qh_quant_points_for_edge(c->pts, &e);
    int target = v;
    if (pt && pt != out_pt)
      ok = (target = chain_for(c, chains, pt, v, weights, qh_graph_node(g, node)->name, error)) >= 0;
    else if (out_dq >= 0)
      target = out_dq;
    if (ok && target != reuse_v)
      qh_graph_node(g, node)->inputs[slot] = target;
  }
  /* a weight no chain took over keeps its float data */
  if (weights && qh_graph_value(g, v)->producer < 0 && qh_graph_value(g, v)->initializer == NULL)
    qh_value_set_initializer(qh_graph_value(g, v), weights);
  else
    qh_tensor_free(weights);
  g_array_unref(chains);
  return ok;
}

static void free_uses(gpointer p) {
  if (p)
    g_array_unref(p);
}

gboolean qh_quant_convert(QhGraph *g, const QhQuantPoints *pts, GError **error) {
  return qh_quant_convert_rounded(g, pts, NULL, NULL, error);
}

gboolean qh_quant_convert_rounded(QhGraph *g, const QhQuantPoints *pts, QhConstantRounding rounding,
                                  gpointer data, GError **error) {
  Ctx c = {g, pts, qh_graph_n_nodes(g), g_ptr_array_new_with_free_func(free_uses), rounding, data};
  int n_values = qh_graph_n_values(g);
  g_ptr_array_set_size(c.consumers, n_values);
  for (int i = 0; i < c.n_nodes; i++) {
    const QhNode *n = qh_graph_node(g, i);
    if (n->is_removed)
      continue;
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v < 0)
        continue;
      if (c.consumers->pdata[v] == NULL)
        c.consumers->pdata[v] = g_array_new(FALSE, FALSE, sizeof(int));
      g_array_append_val((GArray *)c.consumers->pdata[v], i);
      g_array_append_val((GArray *)c.consumers->pdata[v], k);
    }
  }
  gboolean ok = TRUE;
  for (int v = 0; v < n_values && ok; v++)
    ok = convert_value(&c, v, error);
  g_ptr_array_unref(c.consumers);
  if (ok && qh_graph_opset(g, "") < 13)
    qh_graph_set_opset(g, "", 13);
  return ok;
}

/* The first QuantizeLinear/DequantizeLinear whose integer type (*out_dtype) needs opset
 * 21 (16 or 4 bits), or NULL. */
static const QhNode *first_opset21_qdq(const QhGraph *g, QhDType *out_dtype) {
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *n = qh_graph_node(g, i);
    if (n->is_removed || (strcmp(n->op_type, "QuantizeLinear") != 0 && strcmp(n->op_type, "DequantizeLinear") != 0))
      continue;
    int integer = strcmp(n->op_type, "QuantizeLinear") == 0 ? n->outputs[0] : n->inputs[0];
    QhDType dt = integer >= 0 ? qh_graph_value(g, integer)->dtype : QH_DTYPE_UNDEFINED;
    if (dt == QH_DTYPE_UNDEFINED && n->n_inputs > 2 && n->inputs[2] >= 0)
      dt = qh_graph_value(g, n->inputs[2])->dtype; /* the zero point has the integer type */
    if (dt == QH_DTYPE_U16 || dt == QH_DTYPE_S16 || qh_dtype_is_4bit(dt)) {
      *out_dtype = dt;
      return n;
    }
  }
  return NULL;
}

gboolean qh_quant_choose_opset(QhGraph *g, int64_t requested, GError **error) {
  QhDType dt = QH_DTYPE_UNDEFINED;
  const QhNode *wide = first_opset21_qdq(g, &dt);
  int64_t needed = wide ? 21 : 13;
  if (requested > 0 && requested < needed) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "opset %" G_GINT64_FORMAT " cannot hold %s '%s' on %s: %d-bit QuantizeLinear and "
                "DequantizeLinear need opset 21",
                requested, wide->op_type, wide->name, qh_dtype_name(dt), qh_dtype_is_4bit(dt) ? 4 : 16);
    return FALSE;
  }
  if (requested > 0 && (requested < QH_ONNX_MIN_OPSET || requested > QH_ONNX_MAX_WRITE_OPSET)) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "opset %" G_GINT64_FORMAT " was asked for; qhost writes opsets %d to %d", requested,
                QH_ONNX_MIN_OPSET, QH_ONNX_MAX_WRITE_OPSET);
    return FALSE;
  }
  int64_t current = qh_graph_opset(g, "");
  int64_t target = requested > 0 ? requested : MAX(current, needed);
  if (current < 0 && target <= QH_ONNX_MAX_OPSET)
    return TRUE; /* saved at opset 17, which holds every 8-bit QDQ model */
  return qh_onnx_upgrade_opset(g, target, error);
}
