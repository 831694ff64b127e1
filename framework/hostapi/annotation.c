/* The annotation store: quantization specs on graph edges, copied out of plugin
 * memory and checked field by field when set, then checked as a whole (sharing
 * targets, derived sources, sharing cycles) when annotation ends. */
#include "hostapi/annotation.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/error.h"

/* Sanity bounds on plugin-given counts, far above any real spec. */
#define MAX_OBSERVER_ARGS 64
#define MAX_DERIVED_FROM 64
#define MAX_OBSERVER_NAME 256

struct QhAnnotationSet {
  GHashTable *specs;      /* gint64 edge key -> QhQuantSpec * (deep copy) */
  GHashTable *node_flags; /* GUINT_TO_POINTER(node + 1) -> GUINT_TO_POINTER(flags) */
  GHashTable *observers;  /* extra known observer names (owned) */
};

static const char *const pytorch_observers[] = {
    "MinMaxObserver",          "HistogramObserver",
    "PerChannelMinMaxObserver", "MovingAverageMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver", "PlaceholderObserver",
};

static gint64 edge_key(const QhEdgeRef *e) {
  return (gint64)(((guint64)e->node << 32) | ((guint64)(e->slot & 0x7fffffffu) << 1) |
                  (guint64)(e->kind == QH_EDGE_OUTPUT));
}

static QhEdgeRef key_edge(gint64 key) {
  QhEdgeRef e = {(uint32_t)((guint64)key >> 32), (uint32_t)(((guint64)key >> 1) & 0x7fffffffu),
                 (int32_t)(key & 1), 0};
  return e;
}

static void spec_free(gpointer p) {
  QhQuantSpec *s = p;
  g_free((char *)s->observer);
  for (size_t i = 0; i < s->n_observer_args; i++) {
    g_free((char *)s->observer_args[i].key);
    g_free((char *)s->observer_args[i].value);
  }
  g_free((QhOption *)s->observer_args);
  g_free((QhEdgeRef *)s->derived_from);
  g_free(s);
}

QhAnnotationSet *qh_annotation_set_new(void) {
  QhAnnotationSet *set = g_new0(QhAnnotationSet, 1);
  set->specs = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, spec_free);
  set->node_flags = g_hash_table_new(g_direct_hash, g_direct_equal);
  set->observers = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  return set;
}

void qh_annotation_set_free(QhAnnotationSet *set) {
  if (set == NULL)
    return;
  g_hash_table_destroy(set->specs);
  g_hash_table_destroy(set->node_flags);
  g_hash_table_destroy(set->observers);
  g_free(set);
}

void qh_annotation_set_add_observer(QhAnnotationSet *set, const char *name) {
  if (name != NULL)
    g_hash_table_add(set->observers, g_strdup(name));
}

gboolean qh_annotation_set_observer_is_known(const QhAnnotationSet *set, const char *name) {
  for (gsize i = 0; i < G_N_ELEMENTS(pytorch_observers); i++)
    if (strcmp(pytorch_observers[i], name) == 0)
      return TRUE;
  return g_hash_table_contains(set->observers, name);
}

char *qh_annotation_describe_edge(const QhGraph *g, const QhEdgeRef *e) {
  const QhNode *n = qh_graph_node(g, (int)e->node);
  return g_strdup_printf("%s %u of node '%s' (%s)", e->kind == QH_EDGE_OUTPUT ? "output" : "input",
                         e->slot, n->name, n->op_type);
}

gboolean qh_annotation_check_edge(const QhGraph *g, const QhEdgeRef *e, const char *what,
                                  GError **error) {
  if (e->kind != QH_EDGE_INPUT && e->kind != QH_EDGE_OUTPUT) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s.kind %d is neither QH_EDGE_INPUT nor QH_EDGE_OUTPUT", what, e->kind);
    return FALSE;
  }
  if (e->reserved != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s.reserved is %u, must be 0", what,
                e->reserved);
    return FALSE;
  }
  if (e->node == QH_INVALID_ID || e->node >= (uint32_t)qh_graph_n_nodes(g)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s.node %u is not a node id (the graph has %d nodes)", what, e->node,
                qh_graph_n_nodes(g));
    return FALSE;
  }
  const QhNode *n = qh_graph_node(g, (int)e->node);
  if (n->is_removed) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s.node %u (node '%s' (%s)) was removed",
                what, e->node, n->name, n->op_type);
    return FALSE;
  }
  gboolean is_input = e->kind == QH_EDGE_INPUT;
  int count = is_input ? n->n_inputs : n->n_outputs;
  if (e->slot >= (uint32_t)count) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s.slot %u is out of range: node '%s' (%s) has %d %s", what, e->slot, n->name,
                n->op_type, count, is_input ? "inputs" : "outputs");
    return FALSE;
  }
  int vid = is_input ? n->inputs[e->slot] : n->outputs[e->slot];
  if (vid < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s %u of node '%s' (%s) is omitted",
                what, is_input ? "input" : "output", e->slot, n->name, n->op_type);
    return FALSE;
  }
  return TRUE;
}

/* The value on a checked edge. */
static const QhValue *edge_value(const QhGraph *g, const QhEdgeRef *e) {
  const QhNode *n = qh_graph_node(g, (int)e->node);
  int vid = e->kind == QH_EDGE_INPUT ? n->inputs[e->slot] : n->outputs[e->slot];
  return qh_graph_value(g, vid);
}

gboolean qh_quant_dtype_range(int32_t dtype, int64_t *lo, int64_t *hi, const char **name) {
  switch (dtype) {
  case QH_DTYPE_UINT8: *lo = 0, *hi = 255, *name = "uint8"; return TRUE;
  case QH_DTYPE_INT8: *lo = -128, *hi = 127, *name = "int8"; return TRUE;
  case QH_DTYPE_UINT16: *lo = 0, *hi = 65535, *name = "uint16"; return TRUE;
  case QH_DTYPE_INT16: *lo = -32768, *hi = 32767, *name = "int16"; return TRUE;
  case QH_DTYPE_UINT4: *lo = 0, *hi = 15, *name = "uint4"; return TRUE;
  case QH_DTYPE_INT4: *lo = -8, *hi = 7, *name = "int4"; return TRUE;
  case QH_DTYPE_INT32: *lo = G_MININT32, *hi = G_MAXINT32, *name = "int32"; return TRUE;
  default: return FALSE;
  }
}

gboolean qh_quant_qscheme_is_per_channel(int32_t qscheme) {
  return qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE || qscheme == QH_QSCHEME_PER_CHANNEL_SYMMETRIC ||
         qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS;
}

const char *qh_quant_default_observer(int32_t qscheme) {
  return qh_quant_qscheme_is_per_channel(qscheme) ? "PerChannelMinMaxObserver" : "MinMaxObserver";
}

/* dtype, range and eps; *qmin and *qmax get the range quantized values may take. */
static gboolean check_numeric(const QhQuantSpec *s, int64_t *qmin, int64_t *qmax, GError **error) {
  int64_t lo, hi;
  const char *dname;
  if (!qh_quant_dtype_range(s->dtype, &lo, &hi, &dname)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "spec.dtype %d is not a quantized type (uint8, int8, uint16, int16, int32)",
                s->dtype);
    return FALSE;
  }
  *qmin = lo, *qmax = hi;
  if (s->flags & QH_SPEC_HAS_RANGE) {
    if (s->quant_min < lo || s->quant_min > hi) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.quant_min %d is outside the range of %s [%" PRId64 ", %" PRId64 "]",
                  s->quant_min, dname, lo, hi);
      return FALSE;
    }
    if (s->quant_max < lo || s->quant_max > hi) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.quant_max %d is outside the range of %s [%" PRId64 ", %" PRId64 "]",
                  s->quant_max, dname, lo, hi);
      return FALSE;
    }
    if (s->quant_min > s->quant_max) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.quant_min %d is greater than spec.quant_max %d", s->quant_min,
                  s->quant_max);
      return FALSE;
    }
    *qmin = s->quant_min, *qmax = s->quant_max;
  }
  if ((s->flags & QH_SPEC_HAS_EPS) && !(isfinite(s->eps) && s->eps > 0.0f)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec.eps %g must be > 0 and finite",
                (double)s->eps);
    return FALSE;
  }
  return TRUE;
}

static gboolean check_qscheme(const QhGraph *g, const QhEdgeRef *edge, const QhQuantSpec *s,
                              GError **error) {
  if (s->qscheme < QH_QSCHEME_PER_TENSOR_AFFINE ||
      s->qscheme > QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec.qscheme %d is not a QH_QSCHEME_* value",
                s->qscheme);
    return FALSE;
  }
  if (!qh_quant_qscheme_is_per_channel(s->qscheme)) {
    if (s->ch_axis != -1) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.ch_axis %d must be -1 for a per-tensor qscheme", s->ch_axis);
      return FALSE;
    }
    return TRUE;
  }
  const QhValue *v = edge_value(g, edge);
  if (s->ch_axis < 0 || (v->shape.rank >= 0 && s->ch_axis >= v->shape.rank)) {
    if (v->shape.rank >= 0)
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.ch_axis %d is outside [0, %d) for value '%s' of rank %d", s->ch_axis,
                  v->shape.rank, v->name, v->shape.rank);
    else
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.ch_axis %d must be >= 0 for a per-channel qscheme", s->ch_axis);
    return FALSE;
  }
  return TRUE;
}

static gboolean check_observer(const QhAnnotationSet *set, const QhQuantSpec *s, GError **error) {
  if (s->observer != NULL) {
    size_t len = strnlen(s->observer, MAX_OBSERVER_NAME + 1);
    if (len > MAX_OBSERVER_NAME || !g_utf8_validate(s->observer, (gssize)len, NULL)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.observer is not a UTF-8 string of at most %d bytes", MAX_OBSERVER_NAME);
      return FALSE;
    }
    if (!qh_annotation_set_observer_is_known(set, s->observer)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.observer '%s' is not a known observer (PyTorch's or a plugin's)",
                  s->observer);
      return FALSE;
    }
    /* PyTorch's own observers are either per-channel or per-tensor. */
    gboolean pc_observer = strstr(s->observer, "PerChannel") != NULL;
    gboolean builtin = !g_hash_table_contains(set->observers, s->observer) &&
                       strcmp(s->observer, "PlaceholderObserver") != 0;
    if (builtin && pc_observer != qh_quant_qscheme_is_per_channel(s->qscheme)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.observer '%s' does not match spec.qscheme %d (%s)", s->observer,
                  s->qscheme, qh_quant_qscheme_is_per_channel(s->qscheme) ? "per-channel" : "per-tensor");
      return FALSE;
    }
  }
  if (s->n_observer_args > MAX_OBSERVER_ARGS) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec.n_observer_args %zu is above %d",
                s->n_observer_args, MAX_OBSERVER_ARGS);
    return FALSE;
  }
  if (s->n_observer_args > 0 && s->observer_args == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "spec.observer_args is NULL but spec.n_observer_args is %zu", s->n_observer_args);
    return FALSE;
  }
  for (size_t i = 0; i < s->n_observer_args; i++) {
    const QhOption *o = &s->observer_args[i];
    if (o->key == NULL || *o->key == '\0' || !g_utf8_validate(o->key, -1, NULL) ||
        o->value == NULL || !g_utf8_validate(o->value, -1, NULL)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.observer_args[%zu] needs a non-empty UTF-8 key and a UTF-8 value", i);
      return FALSE;
    }
    for (size_t j = 0; j < i; j++) {
      if (strcmp(s->observer_args[j].key, o->key) == 0) {
        g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec.observer_args[%zu].key '%s' is given twice",
                    i, o->key);
        return FALSE;
      }
    }
  }
  return TRUE;
}

static gboolean check_kind(const QhAnnotationSet *set, const QhGraph *g, const QhEdgeRef *edge,
                           const QhQuantSpec *s, GError **error) {
  int64_t qmin, qmax;
  switch (s->kind) {
  case QH_SPEC_QUANTIZE:
    return check_numeric(s, &qmin, &qmax, error) && check_qscheme(g, edge, s, error) &&
           check_observer(set, s, error);
  case QH_SPEC_FIXED:
    if (!check_numeric(s, &qmin, &qmax, error))
      return FALSE;
    if (!(s->scale > 0.0f && isfinite(s->scale) && isnormal(s->scale))) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.scale %g must be positive, finite and normal", (double)s->scale);
      return FALSE;
    }
    if (s->zero_point < qmin || s->zero_point > qmax) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.zero_point %d is outside the quantized range [%" PRId64 ", %" PRId64 "]",
                  s->zero_point, qmin, qmax);
      return FALSE;
    }
    return TRUE;
  case QH_SPEC_SHARED:
    if (s->shared_with.node == QH_INVALID_ID) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.shared_with.node is QH_INVALID_ID: an annotation must name the edge it "
                  "shares with");
      return FALSE;
    }
    return qh_annotation_check_edge(g, &s->shared_with, "spec.shared_with", error);
  case QH_SPEC_DERIVED:
    if (!check_numeric(s, &qmin, &qmax, error) || !check_qscheme(g, edge, s, error))
      return FALSE;
    if (s->n_derived_from == 0 || s->derived_from == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.derived_from is empty: a derived spec needs at least one source");
      return FALSE;
    }
    if (s->n_derived_from > MAX_DERIVED_FROM) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec.n_derived_from %zu is above %d",
                  s->n_derived_from, MAX_DERIVED_FROM);
      return FALSE;
    }
    if (s->derive == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec.derive is NULL (required for a derived spec)");
      return FALSE;
    }
    for (size_t i = 0; i < s->n_derived_from; i++) {
      char *what = g_strdup_printf("spec.derived_from[%zu]", i);
      gboolean ok = qh_annotation_check_edge(g, &s->derived_from[i], what, error);
      g_free(what);
      if (!ok)
        return FALSE;
    }
    return TRUE;
  case QH_SPEC_FLOAT:
    if (s->dtype != QH_DTYPE_FLOAT && s->dtype != QH_DTYPE_UNDEFINED) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.dtype %d must be QH_DTYPE_FLOAT (or 0) for QH_SPEC_FLOAT", s->dtype);
      return FALSE;
    }
    return TRUE;
  default:
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec.kind %d is not a QH_SPEC_* value",
                s->kind);
    return FALSE;
  }
}

/* A host-sized copy of the plugin's spec; pointers still borrowed. */
static gboolean normalise(const QhQuantSpec *spec, QhQuantSpec *out, GError **error) {
  if (spec == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec is NULL");
    return FALSE;
  }
  if (QH_ABI_VERSION_MAJOR(spec->abi_version) != QH_ABI_MAJOR) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "spec.abi_version %u.%u is not ABI major %d (use QH_STRUCT_HEADER)",
                QH_ABI_VERSION_MAJOR(spec->abi_version), QH_ABI_VERSION_MINOR(spec->abi_version),
                QH_ABI_MAJOR);
    return FALSE;
  }
  if (spec->struct_size < QH_QUANT_SPEC_SIZE_1_0 || spec->struct_size > sizeof(QhQuantSpec)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "spec.struct_size %u is outside [%zu, %zu] (use QH_STRUCT_HEADER)",
                spec->struct_size, (size_t)QH_QUANT_SPEC_SIZE_1_0, sizeof(QhQuantSpec));
    return FALSE;
  }
  memset(out, 0, sizeof *out);
  memcpy(out, spec, spec->struct_size);
  out->abi_version = QH_ABI_VERSION;
  out->struct_size = sizeof(QhQuantSpec);
  return TRUE;
}

static QhQuantSpec *deep_copy(const QhQuantSpec *s) {
  QhQuantSpec *c = g_new0(QhQuantSpec, 1);
  *c = *s;
  /* Only the pointers the kind uses are kept; the others are dropped, never dangling. */
  c->observer = NULL, c->observer_args = NULL, c->n_observer_args = 0;
  c->derived_from = NULL, c->n_derived_from = 0, c->derive = NULL, c->derive_user_data = NULL;
  if (s->kind != QH_SPEC_SHARED)
    memset(&c->shared_with, 0, sizeof c->shared_with);
  if (s->kind == QH_SPEC_QUANTIZE) {
    c->observer = g_strdup(s->observer);
    if (s->n_observer_args > 0) {
      QhOption *args = g_new0(QhOption, s->n_observer_args);
      for (size_t i = 0; i < s->n_observer_args; i++) {
        args[i].key = g_strdup(s->observer_args[i].key);
        args[i].value = g_strdup(s->observer_args[i].value);
      }
      c->observer_args = args;
      c->n_observer_args = s->n_observer_args;
    }
  } else if (s->kind == QH_SPEC_DERIVED) {
    c->derived_from = g_memdup2(s->derived_from, sizeof(QhEdgeRef) * s->n_derived_from);
    c->n_derived_from = s->n_derived_from;
    c->derive = s->derive;
    c->derive_user_data = s->derive_user_data;
  }
  return c;
}

gboolean qh_annotation_set_spec(QhAnnotationSet *set, const QhGraph *graph, const QhEdgeRef *edge,
                                const QhQuantSpec *spec, GError **error) {
  if (edge == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "edge is NULL");
    return FALSE;
  }
  if (!qh_annotation_check_edge(graph, edge, "edge", error))
    return FALSE;
  QhQuantSpec s;
  if (!normalise(spec, &s, error))
    return FALSE;
  const uint32_t known = QH_SPEC_HAS_RANGE | QH_SPEC_REDUCE_RANGE | QH_SPEC_IS_DYNAMIC | QH_SPEC_HAS_EPS;
  if (s.flags & ~known) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "spec.flags 0x%x has unknown bits 0x%x", s.flags,
                s.flags & ~known);
    return FALSE;
  }
  if (s.flags & QH_SPEC_IS_DYNAMIC) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "dynamic quantization is not supported");
    return FALSE;
  }
  if (!check_kind(set, graph, edge, &s, error))
    return FALSE;
  gint64 *key = g_new(gint64, 1);
  *key = edge_key(edge);
  g_hash_table_replace(set->specs, key, deep_copy(&s));
  return TRUE;
}

const QhQuantSpec *qh_annotation_set_lookup(const QhAnnotationSet *set, const QhEdgeRef *edge) {
  if (edge == NULL || (edge->kind != QH_EDGE_INPUT && edge->kind != QH_EDGE_OUTPUT) ||
      edge->slot > 0x7fffffffu)
    return NULL;
  gint64 key = edge_key(edge);
  return g_hash_table_lookup(set->specs, &key);
}

void qh_annotation_set_remove(QhAnnotationSet *set, const QhEdgeRef *edge) {
  if (qh_annotation_set_lookup(set, edge) != NULL) {
    gint64 key = edge_key(edge);
    g_hash_table_remove(set->specs, &key);
  }
}

guint qh_annotation_set_n_specs(const QhAnnotationSet *set) {
  return g_hash_table_size(set->specs);
}

gboolean qh_annotation_set_node_flags(QhAnnotationSet *set, const QhGraph *graph, uint32_t node,
                                      uint32_t flags, GError **error) {
  const uint32_t known = QH_ANNOTATION_ANNOTATED | QH_ANNOTATION_NO_IMPLICIT_SHARING;
  if (node >= (uint32_t)qh_graph_n_nodes(graph) || qh_graph_node(graph, (int)node)->is_removed) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node %u is not a live node id", node);
    return FALSE;
  }
  if (flags & ~known) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "flags 0x%x has unknown bits 0x%x", flags,
                flags & ~known);
    return FALSE;
  }
  if (flags == 0)
    g_hash_table_remove(set->node_flags, GUINT_TO_POINTER(node + 1));
  else
    g_hash_table_insert(set->node_flags, GUINT_TO_POINTER(node + 1), GUINT_TO_POINTER(flags));
  return TRUE;
}

uint32_t qh_annotation_node_flags(const QhAnnotationSet *set, uint32_t node) {
  if (node == QH_INVALID_ID)
    return 0;
  return GPOINTER_TO_UINT(g_hash_table_lookup(set->node_flags, GUINT_TO_POINTER(node + 1)));
}

/* One step along a sharing chain from a checked edge. */
typedef enum { STEP_NEXT, STEP_ROOT, STEP_MISSING } Step;

static Step step(const QhAnnotationSet *set, const QhGraph *g, const QhEdgeRef *e, QhEdgeRef *next,
                 const QhQuantSpec **spec) {
  const QhQuantSpec *s = qh_annotation_set_lookup(set, e);
  *spec = s;
  if (s != NULL) {
    if (s->kind != QH_SPEC_SHARED)
      return STEP_ROOT;
    if (!qh_annotation_check_edge(g, &s->shared_with, "shared_with", NULL))
      return STEP_MISSING;
    *next = s->shared_with;
    return STEP_NEXT;
  }
  if (e->kind != QH_EDGE_INPUT)
    return STEP_MISSING;
  const QhValue *v = edge_value(g, e);
  if (v->producer < 0)
    return STEP_MISSING;
  const QhNode *p = qh_graph_node(g, v->producer);
  for (int o = 0; o < p->n_outputs; o++) {
    if (p->outputs[o] == v->id) {
      QhEdgeRef out = {(uint32_t)p->id, (uint32_t)o, QH_EDGE_OUTPUT, 0};
      if (qh_annotation_set_lookup(set, &out) == NULL)
        return STEP_MISSING;
      *next = out;
      return STEP_NEXT;
    }
  }
  return STEP_MISSING;
}

static gboolean is_annotated(const QhAnnotationSet *set, const QhGraph *g, const QhEdgeRef *e) {
  QhEdgeRef next;
  const QhQuantSpec *s;
  return step(set, g, e, &next, &s) != STEP_MISSING;
}

gboolean qh_annotation_set_resolve(const QhAnnotationSet *set, const QhGraph *graph,
                                   const QhEdgeRef *edge, QhEdgeRef *out_root,
                                   const QhQuantSpec **out_spec) {
  if (edge == NULL || !qh_annotation_check_edge(graph, edge, "edge", NULL))
    return FALSE;
  QhEdgeRef cur = *edge;
  /* Each step either ends or moves to another edge with a spec, so a chain longer
   * than the number of specs (plus the first, unannotated, input edge) has a cycle. */
  for (guint i = 0; i <= qh_annotation_set_n_specs(set) + 1; i++) {
    QhEdgeRef next;
    const QhQuantSpec *s;
    switch (step(set, graph, &cur, &next, &s)) {
    case STEP_ROOT:
      *out_root = cur;
      *out_spec = s;
      return TRUE;
    case STEP_MISSING: return FALSE;
    case STEP_NEXT: cur = next; break;
    }
  }
  return FALSE;
}

static gint compare_keys(gconstpointer a, gconstpointer b) {
  gint64 x = **(const gint64 *const *)a, y = **(const gint64 *const *)b;
  return x < y ? -1 : x > y;
}

/* Keys of every spec in (node, kind, slot) order, for deterministic messages. */
static GPtrArray *sorted_keys(const QhAnnotationSet *set) {
  GPtrArray *keys = g_ptr_array_new();
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, set->specs);
  while (g_hash_table_iter_next(&it, &k, NULL))
    g_ptr_array_add(keys, k);
  g_ptr_array_sort(keys, compare_keys);
  return keys;
}

static gboolean check_references(const QhAnnotationSet *set, const QhGraph *g, const QhEdgeRef *e,
                                 const QhQuantSpec *s, GError **error) {
  char *where = qh_annotation_describe_edge(g, e);
  gboolean ok = TRUE;
  if (s->kind == QH_SPEC_SHARED) {
    ok = qh_annotation_check_edge(g, &s->shared_with, "spec.shared_with", error);
    if (ok && !is_annotated(set, g, &s->shared_with)) {
      char *target = qh_annotation_describe_edge(g, &s->shared_with);
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "spec.shared_with: %s is not annotated", target);
      g_free(target);
      ok = FALSE;
    }
  } else if (s->kind == QH_SPEC_DERIVED) {
    for (size_t i = 0; ok && i < s->n_derived_from; i++) {
      char *what = g_strdup_printf("spec.derived_from[%zu]", i);
      ok = qh_annotation_check_edge(g, &s->derived_from[i], what, error);
      if (ok && !is_annotated(set, g, &s->derived_from[i])) {
        char *source = qh_annotation_describe_edge(g, &s->derived_from[i]);
        g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s is not annotated", what, source);
        g_free(source);
        ok = FALSE;
      }
      g_free(what);
    }
  }
  if (!ok)
    qh_error_prefix(error, where);
  g_free(where);
  return ok;
}

/* Follow the chain from a SHARED spec; report a cycle (every edge in it) or a group
 * whose root is not quantized. state: edge key -> 1 on the current path, 2 done. */
static gboolean check_chain(const QhAnnotationSet *set, const QhGraph *g, const QhEdgeRef *start,
                            GHashTable *state, GError **error) {
  GArray *path = g_array_new(FALSE, FALSE, sizeof(QhEdgeRef));
  QhEdgeRef cur = *start;
  gboolean ok = TRUE;
  for (;;) {
    gint64 key = edge_key(&cur);
    gpointer st = g_hash_table_lookup(state, &key);
    if (GPOINTER_TO_INT(st) == 2)
      break;
    if (GPOINTER_TO_INT(st) == 1) {
      GString *msg = g_string_new("sharing forms a cycle: ");
      guint first = 0;
      while (edge_key(&g_array_index(path, QhEdgeRef, first)) != key)
        first++;
      for (guint i = first; i < path->len; i++) {
        char *d = qh_annotation_describe_edge(g, &g_array_index(path, QhEdgeRef, i));
        g_string_append_printf(msg, "%s -> ", d);
        g_free(d);
      }
      char *d = qh_annotation_describe_edge(g, &cur);
      g_string_append(msg, d);
      g_free(d);
      g_set_error_literal(error, QH_ERROR, QH_ERROR_INVALID, msg->str);
      g_string_free(msg, TRUE);
      ok = FALSE;
      break;
    }
    gint64 *k = g_new(gint64, 1);
    *k = key;
    g_hash_table_insert(state, k, GINT_TO_POINTER(1));
    g_array_append_val(path, cur);
    QhEdgeRef next;
    const QhQuantSpec *s;
    Step r = step(set, g, &cur, &next, &s);
    if (r == STEP_ROOT && s->kind == QH_SPEC_FLOAT) {
      char *from = qh_annotation_describe_edge(g, start);
      char *root = qh_annotation_describe_edge(g, &cur);
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s shares its qparams with %s, which is not quantized (QH_SPEC_FLOAT)", from,
                  root);
      g_free(from);
      g_free(root);
      ok = FALSE;
      break;
    }
    if (r != STEP_NEXT)
      break; /* a missing target was reported by check_references */
    cur = next;
  }
  for (guint i = 0; i < path->len; i++) {
    gint64 k = edge_key(&g_array_index(path, QhEdgeRef, i));
    g_hash_table_insert(state, g_memdup2(&k, sizeof k), GINT_TO_POINTER(2));
  }
  g_array_free(path, TRUE);
  return ok;
}

gboolean qh_annotation_set_validate(const QhAnnotationSet *set, const QhGraph *graph,
                                    GError **error) {
  GPtrArray *keys = sorted_keys(set);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < keys->len; i++) {
    QhEdgeRef e = key_edge(*(gint64 *)g_ptr_array_index(keys, i));
    if (!qh_annotation_check_edge(graph, &e, "annotated edge", error)) {
      ok = FALSE;
      break;
    }
    ok = check_references(set, graph, &e, qh_annotation_set_lookup(set, &e), error);
  }
  GHashTable *state = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  for (guint i = 0; ok && i < keys->len; i++) {
    QhEdgeRef e = key_edge(*(gint64 *)g_ptr_array_index(keys, i));
    const QhQuantSpec *s = qh_annotation_set_lookup(set, &e);
    if (s->kind == QH_SPEC_SHARED)
      ok = check_chain(set, graph, &e, state, error);
  }
  g_hash_table_destroy(state);
  g_ptr_array_free(keys, TRUE);
  return ok;
}

gboolean qh_annotation_set_foreach(const QhAnnotationSet *set, const QhGraph *graph,
                                   QhAnnotationSpecFn fn, gpointer user_data, GError **error) {
  GArray *order = NULL;
  if (!qh_graph_topo_order(graph, &order, error))
    return FALSE;
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < order->len; i++) {
    const QhNode *n = qh_graph_node(graph, g_array_index(order, int, i));
    for (int kind = QH_EDGE_INPUT; ok && kind <= QH_EDGE_OUTPUT; kind++) {
      int count = kind == QH_EDGE_INPUT ? n->n_inputs : n->n_outputs;
      for (int slot = 0; ok && slot < count; slot++) {
        QhEdgeRef e = {(uint32_t)n->id, (uint32_t)slot, kind, 0};
        const QhQuantSpec *s = qh_annotation_set_lookup(set, &e);
        if (s != NULL)
          ok = fn(user_data, &e, s, error);
      }
    }
  }
  g_array_free(order, TRUE);
  return ok;
}

int32_t qh_annotation_default_role(const char *op_type, int slot) {
  static const char *const weighted[] = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
  if (slot == 1 || slot == 2)
    for (size_t i = 0; i < G_N_ELEMENTS(weighted); i++)
      if (strcmp(op_type, weighted[i]) == 0)
        return slot == 1 ? QH_ROLE_WEIGHT : QH_ROLE_BIAS;
  return QH_ROLE_ACTIVATION;
}
