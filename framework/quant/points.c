/* Prepare: turns a validated annotation into quantization points (one per sharing
 * group), makes their observers, and computes their qparams after calibration. Shared
 * groups observe every distinct value on their edges with one observer, in execution
 * order, as PyTorch's shared observer instances do; weights and other constants are
 * observed once, here. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "hostapi/status-private.h"
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

/* One annotated edge and the root of its sharing chain. */
typedef struct {
  QhEdgeRef edge;
  QhEdgeRef root;
  const QhQuantSpec *root_spec;
} Member;

typedef struct {
  QhQuantPoints *pts;
  GArray *members;     /* Member, in graph order */
  GHashTable *parent;  /* root key -> parent root key (union-find over roots) */
} Collect;

static gboolean collect(gpointer data, const QhEdgeRef *edge, const QhQuantSpec *spec, GError **error) {
  Collect *c = data;
  if (spec->kind == QH_SPEC_FLOAT)
    return TRUE;
  Member m = {.edge = *edge};
  if (!qh_annotation_set_resolve(c->pts->set, c->pts->graph, edge, &m.root, &m.root_spec)) {
    char *where = qh_annotation_describe_edge(c->pts->graph, edge);
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: its sharing group has no quantized root", where);
    g_free(where);
    return FALSE;
  }
  if (m.root_spec->kind == QH_SPEC_FLOAT)
    return TRUE;
  g_array_append_val(c->members, m);
  guint64 key = qh_edge_key(&m.root);
  if (!g_hash_table_contains(c->parent, &key)) {
    guint64 *k = g_new(guint64, 2);
    k[0] = k[1] = key;
    g_hash_table_insert(c->parent, k, k + 1);
  }
  return TRUE;
}

static guint64 find_root(GHashTable *parent, guint64 key) {
  for (;;) {
    guint64 *up = g_hash_table_lookup(parent, &key);
    if (up == NULL || *up == key)
      return key;
    key = *up;
  }
}

/* The earlier root (smaller key order of appearance is kept by the caller) wins. */
static void unite(GHashTable *parent, guint64 keep, guint64 other) {
  keep = find_root(parent, keep);
  other = find_root(parent, other);
  if (keep != other)
    *(guint64 *)g_hash_table_lookup(parent, &other) = keep;
}

static gboolean same_observation(const QhQuantSpec *a, const QhQuantSpec *b) {
  return a->kind == QH_SPEC_QUANTIZE && b->kind == QH_SPEC_QUANTIZE && a->dtype == b->dtype &&
         a->qscheme == b->qscheme && a->flags == b->flags && a->ch_axis == b->ch_axis &&
         (!(a->flags & QH_SPEC_HAS_RANGE) || (a->quant_min == b->quant_min && a->quant_max == b->quant_max)) &&
         (!(a->flags & QH_SPEC_HAS_EPS) || a->eps == b->eps) && g_strcmp0(a->observer, b->observer) == 0 &&
         a->n_observer_args == b->n_observer_args;
}

/* PT2E's implicit sharing (allow_implicit_sharing, prepare.py): an input edge joins the
 * group of the producer's output, and of the other consumers' edges of the same value,
 * when their root specs observe the same way. This is how Concat's shared observer
 * also becomes its inputs' producers' output observer, as in PyTorch 1.13. */
static void share_implicitly(Collect *c) {
  const QhGraph *g = c->pts->graph;
  for (guint i = 0; i < c->members->len; i++) {
    const Member *a = &g_array_index(c->members, Member, i);
    if (a->edge.kind != QH_EDGE_INPUT ||
        (qh_annotation_node_flags(c->pts->set, a->edge.node) & QH_ANNOTATION_NO_IMPLICIT_SHARING))
      continue;
    int v = edge_value(g, &a->edge);
    /* the producer's output first, then the other consumers (PT2E's order) */
    for (int pass = 0; pass < 2; pass++)
      for (guint k = 0; k < c->members->len; k++) {
        const Member *b = &g_array_index(c->members, Member, k);
        if (k == i || edge_value(g, &b->edge) != v || (b->edge.kind == QH_EDGE_OUTPUT) != (pass == 0))
          continue;
        if (!same_observation(a->root_spec, b->root_spec))
          continue;
        guint64 ka = qh_edge_key(&a->root), kb = qh_edge_key(&b->root);
        if (k < i)
          unite(c->parent, kb, ka);
        else
          unite(c->parent, ka, kb);
      }
  }
}

static void add_member(QhQuantPoints *pts, QhQuantPoint *pt, const Member *m) {
  g_array_append_val(pt->edges, m->edge);
  guint64 *k = g_new(guint64, 1);
  *k = qh_edge_key(&m->edge);
  g_hash_table_replace(pts->by_edge, k, pt);
  int v = edge_value(pts->graph, &m->edge);
  gboolean seen = FALSE;
  for (guint i = 0; i < pt->values->len; i++)
    seen = seen || g_array_index(pt->values, int, i) == v;
  if (v >= 0 && !seen) {
    g_array_append_val(pt->values, v);
    if (pt->name == NULL)
      pt->name = g_strdup(qh_graph_value(pts->graph, v)->name);
  }
}

/* One point per union-find class, in graph order of first appearance. */
static void build_points(Collect *c) {
  QhQuantPoints *pts = c->pts;
  GHashTable *by_class = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  for (guint i = 0; i < c->members->len; i++) {
    const Member *m = &g_array_index(c->members, Member, i);
    guint64 cls = find_root(c->parent, qh_edge_key(&m->root));
    QhQuantPoint *pt = g_hash_table_lookup(by_class, &cls);
    if (pt == NULL) {
      pt = g_new0(QhQuantPoint, 1);
      pt->index = (int)pts->points->len;
      pt->root = m->root;
      pt->spec = m->root_spec;
      pt->edges = g_array_new(FALSE, FALSE, sizeof(QhEdgeRef));
      pt->values = g_array_new(FALSE, FALSE, sizeof(int));
      g_ptr_array_add(pts->points, pt);
      guint64 *k = g_new(guint64, 1);
      *k = cls;
      g_hash_table_insert(by_class, k, pt);
    }
    guint64 *rk = g_new(guint64, 1);
    *rk = qh_edge_key(&m->root);
    g_hash_table_replace(pts->by_edge, rk, pt);
    add_member(pts, pt, m);
  }
  g_hash_table_unref(by_class);
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
  /* Histograms and min/max turn a single Inf or NaN into garbage qparams silently. */
  const float *d = t->data;
  for (int64_t i = 0, n = qh_tensor_numel(t); d && i < n; i++)
    if (!isfinite(d[i])) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "value '%s': its observer sees a non-finite value (%s at element %" G_GINT64_FORMAT
                  "); an attention mask or an overflow reaches a quantized tensor",
                  qh_graph_value(g, v)->name, isnan(d[i]) ? "NaN" : d[i] > 0 ? "+Inf" : "-Inf", i);
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
  for (guint i = 0; i < pt->values->len; i++) {
    int v = g_array_index(pt->values, int, i);
    const QhTensor *vi = qh_plan_value_info(plan, v);
    if (vi && vi->data) {
      if (!observe_one(pt, pts->graph, v, vi, error))
        return FALSE;
    } else {
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
  Collect c = {pts, g_array_new(FALSE, FALSE, sizeof(Member)),
               g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL)};
  gboolean ok = qh_annotation_set_foreach(set, graph, collect, &c, error);
  if (ok) {
    share_implicitly(&c);
    build_points(&c);
  }
  g_array_unref(c.members);
  g_hash_table_unref(c.parent);
  for (guint i = 0; ok && i < pts->points->len; i++) {
    QhQuantPoint *pt = pts->points->pdata[i];
    if (pt->values->len == 0)
      continue;
    pt->is_constant = TRUE;
    for (guint k = 0; k < pt->values->len; k++) {
      const QhTensor *vi = qh_plan_value_info(plan, g_array_index(pt->values, int, k));
      pt->is_constant = pt->is_constant && vi && vi->data;
    }
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
  const char *name;
  qh_quant_dtype_range(dtype, &l, &h, &name);
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
  QhStatus *st = qh_backend_call_derive(pts->backend, s, srcs, n, &out);
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

static gboolean derive_all(QhQuantPoints *pts, GError **error);

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
  return derive_all(pts, error);
}

gboolean qh_quant_points_rederive(QhQuantPoints *pts, GError **error) {
  for (guint i = 0; i < pts->points->len; i++) {
    QhQuantPoint *pt = pts->points->pdata[i];
    if (pt->spec->kind == QH_SPEC_DERIVED && pt->qparams) {
      qh_quant_params_free(pt->qparams);
      pt->qparams = NULL;
    }
  }
  return derive_all(pts, error);
}

/* derived specs may depend on each other: repeat until nothing changes */
static gboolean derive_all(QhQuantPoints *pts, GError **error) {
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
