/* Reading a QDQ model's quantization parameters (qdq-qparams.h): the constant scale and
 * zero point of a QuantizeLinear or DequantizeLinear, checked, with the narrower range
 * qhost quantize records in the metadata; and the qparams_get hook that gives a plugin
 * the parameters of an edge of a QDQ graph. */
#include "hostapi/qdq-qparams.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

enum { NO_MATCH = 0, MATCH = 1, FAILED = -1 };

static int fail(const QhNode *n, GError **error, const char *what) {
  char *d = qh_node_describe(n);
  g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s", d, what);
  g_free(d);
  return FAILED;
}

void qh_qdq_qparams_clear(QhQParams *q) {
  g_free(q->scale);
  g_free(q->zero_point);
  memset(q, 0, sizeof *q);
}

static gboolean dtype_range(int32_t dtype, int32_t *lo, int32_t *hi) {
  switch (dtype) {
  case QH_DTYPE_UINT8: *lo = 0; *hi = 255; return TRUE;
  case QH_DTYPE_INT8: *lo = -128; *hi = 127; return TRUE;
  case QH_DTYPE_UINT16: *lo = 0; *hi = 65535; return TRUE;
  case QH_DTYPE_INT16: *lo = -32768; *hi = 32767; return TRUE;
  case QH_DTYPE_UINT4: *lo = 0; *hi = 15; return TRUE;
  case QH_DTYPE_INT4: *lo = -8; *hi = 7; return TRUE;
  case QH_DTYPE_INT32: *lo = G_MININT32; *hi = G_MAXINT32; return TRUE;
  default: return FALSE;
  }
}


/* The qparams of a QuantizeLinear or DequantizeLinear node, from its constant inputs.
 * x is the integer side (the DQ's input, the Q's output). Non-constant scales or zero
 * points, or a type no integer kernel knows, are no match; inconsistent ones fail. */
/* The range qhost quantize recorded for integer value xv when it is narrower than
 * its dtype's (graph.h, QH_QUANT_RANGE_KEY_PREFIX); a malformed or wider entry is
 * ignored: the dtype's range is always safe to assume. */
static void narrow_range(const QhGraph *g, const QhValue *xv, int32_t *lo, int32_t *hi) {
  if (xv == NULL || g->metadata->len == 0)
    return;
  char *key = g_strdup_printf("%s%s", QH_QUANT_RANGE_KEY_PREFIX, xv->name);
  const char *v = qh_graph_metadata(g, key);
  g_free(key);
  int qmin, qmax, used = 0;
  if (v && sscanf(v, "%d,%d%n", &qmin, &qmax, &used) == 2 && v[used] == '\0' && *lo <= qmin &&
      qmin < qmax && qmax <= *hi) {
    *lo = qmin;
    *hi = qmax;
  }
}

int qh_qdq_read_qparams(const QhGraph *g, const QhNode *n, int x, QhQParams *out, GError **error) {
  int s = qh_node_input(n, 1), z = qh_node_input(n, 2);
  if (s < 0)
    return NO_MATCH;
  const QhTensor *st = qh_graph_value(g, s)->initializer;
  const QhTensor *zt = z >= 0 ? qh_graph_value(g, z)->initializer : NULL;
  if (!st || st->dtype != QH_DTYPE_F32 || (z >= 0 && !zt))
    return NO_MATCH;
  int64_t count = qh_tensor_numel(st);
  if (count < 1)
    return fail(n, error, "empty scale");
  if (zt && qh_tensor_numel(zt) != count)
    return fail(n, error, "zero point and scale differ in size");
  const QhValue *xv = x >= 0 ? qh_graph_value(g, x) : NULL;
  int32_t dtype = zt ? (int32_t)zt->dtype
                     : (xv && xv->dtype != QH_DTYPE_UNDEFINED ? (int32_t)xv->dtype : QH_DTYPE_UINT8);
  int32_t lo, hi;
  if (!dtype_range(dtype, &lo, &hi))
    return NO_MATCH;
  int32_t axis = -1;
  if (count > 1 || st->shape.rank > 0) {
    int64_t a = 1;
    if (!qh_node_attr_get_int(n, "axis", 1, &a, error))
      return FAILED;
    int rank = xv ? xv->shape.rank : -1;
    if (a < 0 && rank >= 0)
      a += rank;
    if (a < 0 || (rank >= 0 && a >= rank))
      return fail(n, error, "axis out of range");
    if (rank >= 0 && xv->shape.dims[a] >= 0 && xv->shape.dims[a] != count)
      return fail(n, error, "scale count differs from the axis dimension");
    axis = count > 1 ? (int32_t)a : -1;
  }
  narrow_range(g, xv, &lo, &hi);
  *out = (QhQParams){QH_STRUCT_HEADER(QhQParams)};
  out->dtype = dtype;
  out->qscheme = axis >= 0 ? QH_QSCHEME_PER_CHANNEL_AFFINE : QH_QSCHEME_PER_TENSOR_AFFINE;
  out->quant_min = lo;
  out->quant_max = hi;
  out->ch_axis = axis;
  out->count = out->capacity = (size_t)count;
  out->scale = g_new(float, count);
  out->zero_point = g_new0(int32_t, count);
  memcpy(out->scale, st->data, (size_t)count * sizeof(float));
  for (int64_t i = 0; i < count; i++) {
    if (!(out->scale[i] > 0.0f) || !isfinite(out->scale[i])) {
      qh_qdq_qparams_clear(out);
      return fail(n, error, "scale must be positive and finite");
    }
    if (!zt)
      continue;
    /* 4-bit zero points are held one per byte, like 8-bit ones */
    int64_t zp = dtype == QH_DTYPE_UINT8 || dtype == QH_DTYPE_UINT4 ? ((const uint8_t *)zt->data)[i]
                 : dtype == QH_DTYPE_INT8 || dtype == QH_DTYPE_INT4 ? ((const int8_t *)zt->data)[i]
                 : dtype == QH_DTYPE_UINT16 ? ((const uint16_t *)zt->data)[i]
                 : dtype == QH_DTYPE_INT16  ? ((const int16_t *)zt->data)[i]
                                            : ((const int32_t *)zt->data)[i];
    out->zero_point[i] = (int32_t)zp;
  }
  return MATCH;
}


/* ---- the qparams_get hook ---- */

struct QhQdqReader {
  GPtrArray *handed; /* QhQParams* whose arrays a plugin holds until the callback returns */
};

static void qparams_free(gpointer p) {
  qh_qdq_qparams_clear(p);
  g_free(p);
}

QhQdqReader *qh_qdq_reader_new(void) {
  QhQdqReader *r = g_new0(QhQdqReader, 1);
  r->handed = g_ptr_array_new_with_free_func(qparams_free);
  return r;
}

void qh_qdq_reader_free(QhQdqReader *r) {
  if (r == NULL)
    return;
  g_ptr_array_unref(r->handed);
  g_free(r);
}

static gboolean is_op(const QhNode *n, const char *op) {
  return !n->is_removed && (!n->domain || !*n->domain || strcmp(n->domain, "ai.onnx") == 0) &&
         strcmp(n->op_type, op) == 0;
}

/* The Q/DQ node behind an edge, and its integer side, or NULL. */
static const QhNode *qdq_of_edge(const QhGraph *g, const QhEdgeRef *e, int *x) {
  const QhNode *n = qh_graph_node(g, (int)e->node);
  if (e->kind == QH_EDGE_INPUT) {
    int v = e->slot < (uint32_t)n->n_inputs ? n->inputs[e->slot] : -1;
    int p = v >= 0 ? qh_graph_value(g, v)->producer : -1;
    const QhNode *dq = p >= 0 ? qh_graph_node(g, p) : NULL;
    if (dq == NULL || !is_op(dq, "DequantizeLinear"))
      return NULL;
    *x = qh_node_input(dq, 0);
    return dq;
  }
  int v = e->slot < (uint32_t)n->n_outputs ? n->outputs[e->slot] : -1;
  for (int i = 0; v >= 0 && i < qh_graph_n_nodes(g); i++) {
    const QhNode *q = qh_graph_node(g, i);
    if (is_op(q, "QuantizeLinear") && qh_node_input(q, 0) == v) {
      *x = q->n_outputs > 0 ? q->outputs[0] : -1;
      return q;
    }
  }
  return NULL;
}

static gboolean reader_get(gpointer user, const QhGraph *g, const QhEdgeRef *edge, QhQParams *out,
                           gboolean *found, GError **error) {
  QhQdqReader *r = user;
  int x = -1;
  const QhNode *qdq = qdq_of_edge(g, edge, &x);
  *found = FALSE;
  if (qdq == NULL)
    return TRUE;
  QhQParams *q = g_new0(QhQParams, 1);
  int m = qh_qdq_read_qparams(g, qdq, x, q, error);
  if (m != MATCH) {
    g_free(q);
    if (m == NO_MATCH)
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node '%s' (%s): its scale or zero point is not a "
                  "constant of an integer type qhost knows", qdq->name, qdq->op_type);
    return FALSE;
  }
  g_ptr_array_add(r->handed, q);
  out->dtype = q->dtype;
  out->qscheme = q->qscheme;
  out->quant_min = q->quant_min;
  out->quant_max = q->quant_max;
  out->ch_axis = q->ch_axis;
  out->count = out->capacity = q->count;
  out->scale = q->scale;
  out->zero_point = q->zero_point;
  *found = TRUE;
  return TRUE;
}

void qh_qdq_reader_attach(QhQdqReader *r, QhGraphView *view) {
  qh_graph_view_set_qparams_hooks(view, reader_get, NULL, r);
}
