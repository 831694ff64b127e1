/* Prepare: turns a validated annotation into quantization points (one per sharing
 * group), makes their observers, and computes their qparams after calibration. Shared
 * groups observe every distinct value on their edges with one observer, in execution
 * order, as PyTorch's shared observer instances do; weights and other constants are
 * observed once, here. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "plugin/host-api-private.h"
#include "plugin/status-private.h"
#include "quant/points.h"

static int edge_value(const QhGraph *g, const QhEdgeRef *e) {
  const QhNode *n = qh_graph_node(g, (int)e->node);
  return e->kind == QH_EDGE_INPUT ? qh_node_input(n, (int)e->slot) : qh_node_output(n, (int)e->slot);
}

static void point_free(gpointer p) {
  QhQuantPoint *pt = p;
  g_array_unref(pt->edges);
  g_array_unref(pt->values);
  if (pt->observer)
    qh_observer_free(pt->observer);
  qh_quant_params_free(pt->qparams);
  g_free(pt->name);
  g_free(pt);
}

void qh_quant_points_free(QhQuantPoints *points) {
  if (points == NULL)
    return;
  g_hash_table_unref(points->by_value);
  g_hash_table_unref(points->by_edge);
  g_ptr_array_unref(points->points);
  g_free(points);
}

typedef struct {
  QhQuantPoints *pts;
} Collect;

static gboolean collect(gpointer data, const QhEdgeRef *edge, const QhQuantSpec *spec, GError **error) {
  QhQuantPoints *pts = ((Collect *)data)->pts;
  (void)error;
  if (spec->kind == QH_SPEC_FLOAT)
    return TRUE;
  QhEdgeRef root;
  const QhQuantSpec *root_spec;
  if (!qh_annotation_set_resolve(pts->set, pts->graph, edge, &root, &root_spec)) {
    char *where = qh_annotation_describe_edge(pts->graph, edge);
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: its sharing group has no quantized root", where);
    g_free(where);
    return FALSE;
  }
  if (root_spec->kind == QH_SPEC_FLOAT)
    return TRUE;
  guint64 key = qh_edge_key(&root);
  QhQuantPoint *pt = g_hash_table_lookup(pts->by_edge, &key);
  if (pt == NULL) {
    pt = g_new0(QhQuantPoint, 1);
    pt->index = (int)pts->points->len;
    pt->root = root;
    pt->spec = root_spec;
    pt->edges = g_array_new(FALSE, FALSE, sizeof(QhEdgeRef));
    pt->values = g_array_new(FALSE, FALSE, sizeof(int));
    g_ptr_array_add(pts->points, pt);
    guint64 *k = g_new(guint64, 1);
    *k = qh_edge_key(&root);
    g_hash_table_insert(pts->by_edge, k, pt);
  }
  g_array_append_val(pt->edges, *edge);
  guint64 *k = g_new(guint64, 1);
  *k = qh_edge_key(edge);
  g_hash_table_replace(pts->by_edge, k, pt);
  int v = edge_value(pts->graph, edge);
  gboolean seen = FALSE;
  for (guint i = 0; i < pt->values->len; i++)
    seen = seen || g_array_index(pt->values, int, i) == v;
  if (v >= 0 && !seen) {
    g_array_append_val(pt->values, v);
    if (pt->name == NULL)
      pt->name = g_strdup(qh_graph_value(pts->graph, v)->name);
  }
  return TRUE;
}

static gboolean watch(QhQuantPoints *pts, QhQuantPoint *pt, int v) {
  GPtrArray *list = g_hash_table_lookup(pts->by_value, GINT_TO_POINTER(v));
  if (list == NULL) {
    list = g_ptr_array_new();
    g_hash_table_insert(pts->by_value, GINT_TO_POINTER(v), list);
  }
  g_ptr_array_add(list, pt);
  return TRUE;
}

static gboolean observe_one(QhQuantPoint *pt, const QhGraph *g, int v, const QhTensor *t, GError **error) {
  if (t->dtype != QH_DTYPE_F32) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "value '%s' is %s, not float32: it cannot be observed",
                qh_graph_value(g, v)->name, qh_dtype_name(t->dtype));
    return FALSE;
  }
  if (!qh_observer_observe(pt->observer, t, error)) {
    g_prefix_error(error, "value '%s': ", qh_graph_value(g, v)->name);
    return FALSE;
  }
  return TRUE;
}

static gboolean make_observer(QhQuantPoints *pts, QhQuantPoint *pt, const QhPlan *plan,
                              QhObserverFactory factory, gpointer fdata, GError **error) {
  int v0 = g_array_index(pt->values, int, 0);
  const QhTensor *info = qh_plan_value_info(plan, v0);
  if (info == NULL || info->shape.rank < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "value '%s': shape unknown, cannot observe it",
                qh_graph_value(pts->graph, v0)->name);
    return FALSE;
  }
  pt->observer = factory(fdata, pt->spec, info->shape.rank, info->shape.dims, error);
  if (pt->observer == NULL) {
    g_prefix_error(error, "value '%s': ", qh_graph_value(pts->graph, v0)->name);
    return FALSE;
  }
  pt->is_constant = TRUE;
  for (guint i = 0; i < pt->values->len; i++) {
    int v = g_array_index(pt->values, int, i);
    const QhTensor *vi = qh_plan_value_info(plan, v);
    if (vi && vi->data) {
      if (!observe_one(pt, pts->graph, v, vi, error))
        return FALSE;
    } else {
      pt->is_constant = FALSE;
      watch(pts, pt, v);
    }
  }
  return TRUE;
}

QhQuantPoints *qh_quant_points_new(QhGraph *graph, const QhAnnotationSet *set, const QhPlan *plan,
                                   QhObserverFactory factory, gpointer factory_data, GError **error) {
  QhQuantPoints *pts = g_new0(QhQuantPoints, 1);
  pts->graph = graph;
  pts->set = set;
  pts->points = g_ptr_array_new_with_free_func(point_free);
  pts->by_edge = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  pts->by_value = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                        (GDestroyNotify)g_ptr_array_unref);
  Collect c = {pts};
  gboolean ok = qh_annotation_set_foreach(set, graph, collect, &c, error);
  for (guint i = 0; ok && i < pts->points->len; i++) {
    QhQuantPoint *pt = pts->points->pdata[i];
    if (pt->values->len == 0)
      continue;
    if (pt->spec->kind == QH_SPEC_QUANTIZE)
      ok = make_observer(pts, pt, plan, factory, factory_data, error);
  }
  if (!ok) {
    qh_quant_points_free(pts);
    return NULL;
  }
  return pts;
}

QhQuantPoint *qh_quant_points_for_edge(const QhQuantPoints *points, const QhEdgeRef *edge) {
  guint64 key = qh_edge_key(edge);
  return g_hash_table_lookup(points->by_edge, &key);
}

gboolean qh_quant_points_observe(gpointer data, int value_id, const QhTensor *value, GError **error) {
  QhQuantPoints *pts = data;
  GPtrArray *list = g_hash_table_lookup(pts->by_value, GINT_TO_POINTER(value_id));
  for (guint i = 0; list && i < list->len; i++)
    if (!observe_one(list->pdata[i], pts->graph, value_id, value, error))
      return FALSE;
  return TRUE;
}

/* ---- qparams ---- */

static void full_range(int32_t dtype, int32_t *lo, int32_t *hi) {
  int64_t l = 0, h = 0;
  qh_quant_dtype_range(dtype, &l, &h, NULL);
  *lo = (int32_t)l;
  *hi = (int32_t)h;
}

static QhQuantParams *fixed_qparams(const QhQuantSpec *s) {
  QhQuantParams *q = qh_quant_params_new(1);
  q->dtype = s->dtype;
  q->qscheme = QH_QSCHEME_PER_TENSOR_AFFINE;
  if (s->flags & QH_SPEC_HAS_RANGE) {
    q->quant_min = s->quant_min;
    q->quant_max = s->quant_max;
  } else {
    full_range(s->dtype, &q->quant_min, &q->quant_max);
  }
  q->ch_axis = -1;
  q->scale[0] = s->scale;
  q->zero_point[0] = s->zero_point;
  return q;
}

static void to_abi(const QhQuantParams *q, QhQParams *out) {
  memset(out, 0, sizeof *out);
  out->abi_version = QH_ABI_VERSION;
  out->struct_size = sizeof *out;
  out->dtype = q->dtype;
  out->qscheme = q->qscheme;
  out->quant_min = q->quant_min;
  out->quant_max = q->quant_max;
  out->ch_axis = q->ch_axis;
  out->count = (size_t)q->n;
  out->capacity = (size_t)q->n;
  out->scale = q->scale;
  out->zero_point = q->zero_point;
}

static QhQuantParams *derive(QhQuantPoints *pts, QhQuantPoint *pt, GError **error) {
  const QhQuantSpec *s = pt->spec;
  size_t n = s->n_derived_from;
  QhQParams *abi = g_new0(QhQParams, n);
  const QhQParams **srcs = g_new0(const QhQParams *, n);
  int cap = 1;
  for (size_t i = 0; i < n; i++) {
    QhQuantPoint *src = qh_quant_points_for_edge(pts, &s->derived_from[i]);
    if (src == NULL || src->qparams == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "derived spec of '%s': source %zu has no qparams",
                  pt->name ? pt->name : "?", i);
      g_free(abi);
      g_free(srcs);
      return NULL;
    }
    to_abi(src->qparams, &abi[i]);
    srcs[i] = &abi[i];
    cap = MAX(cap, src->qparams->n);
  }
  QhQuantParams *q = qh_quant_params_new(cap);
  for (int i = 0; i < cap; i++) {
    q->scale[i] = NAN;
    q->zero_point[i] = INT32_MIN;
  }
  QhQParams out;
  to_abi(q, &out);
  out.count = 0;
  out.dtype = s->dtype;
  out.qscheme = s->qscheme;
  out.ch_axis = s->ch_axis;
  if (s->flags & QH_SPEC_HAS_RANGE) {
    out.quant_min = s->quant_min;
    out.quant_max = s->quant_max;
  } else {
    full_range(s->dtype, &out.quant_min, &out.quant_max);
  }
  QhStatus *st = s->derive(s->derive_user_data, qh_host_api_get(), srcs, n, &out);
  g_free(abi);
  g_free(srcs);
  if (st) {
    char *prefix = g_strdup_printf("derived spec of '%s'", pt->name ? pt->name : "?");
    qh_status_to_gerror(st, prefix, error);
    g_free(prefix);
    qh_quant_params_free(q);
    return NULL;
  }
  if (out.count < 1 || out.count > (size_t)cap) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "derived spec of '%s': count %zu (capacity %d)",
                pt->name ? pt->name : "?", out.count, cap);
    qh_quant_params_free(q);
    return NULL;
  }
  for (size_t i = 0; i < out.count; i++)
    if (!(isfinite(q->scale[i]) && q->scale[i] > 0) || q->zero_point[i] < out.quant_min ||
        q->zero_point[i] > out.quant_max) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "derived spec of '%s': scale[%zu] = %g, zero_point[%zu] = %d is not valid",
                  pt->name ? pt->name : "?", i, (double)q->scale[i], i, q->zero_point[i]);
      qh_quant_params_free(q);
      return NULL;
    }
  q->n = (int)out.count;
  q->dtype = s->dtype;
  q->qscheme = s->qscheme;
  q->quant_min = out.quant_min;
  q->quant_max = out.quant_max;
  q->ch_axis = q->n > 1 ? s->ch_axis : -1;
  return q;
}

gboolean qh_quant_points_compute(QhQuantPoints *pts, GError **error) {
  for (guint i = 0; i < pts->points->len; i++) {
    QhQuantPoint *pt = pts->points->pdata[i];
    if (pt->spec->kind == QH_SPEC_QUANTIZE && pt->observer) {
      pt->qparams = qh_observer_compute(pt->observer, error);
      if (pt->qparams == NULL) {
        g_prefix_error(error, "value '%s': ", pt->name ? pt->name : "?");
        return FALSE;
      }
    } else if (pt->spec->kind == QH_SPEC_FIXED) {
      pt->qparams = fixed_qparams(pt->spec);
    }
  }
  /* derived specs may depend on each other: repeat until nothing changes */
  gboolean progress = TRUE;
  while (progress) {
    progress = FALSE;
    for (guint i = 0; i < pts->points->len; i++) {
      QhQuantPoint *pt = pts->points->pdata[i];
      if (pt->spec->kind != QH_SPEC_DERIVED || pt->qparams)
        continue;
      gboolean ready = TRUE;
      for (size_t k = 0; k < pt->spec->n_derived_from; k++) {
        QhQuantPoint *src = qh_quant_points_for_edge(pts, &pt->spec->derived_from[k]);
        ready = ready && src && src->qparams;
      }
      if (!ready)
        continue;
      pt->qparams = derive(pts, pt, error);
      if (pt->qparams == NULL)
        return FALSE;
      progress = TRUE;
    }
  }
  for (guint i = 0; i < pts->points->len; i++) {
    QhQuantPoint *pt = pts->points->pdata[i];
    if (pt->qparams == NULL && pt->values->len > 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "value '%s': its derived qparams depend on a cycle or on an unquantized edge",
                  pt->name ? pt->name : "?");
      return FALSE;
    }
  }
  return TRUE;
}
