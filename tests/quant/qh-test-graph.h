/* Test helpers shared by the annotator tests (tests/unit/test_backend_annotate.c and
 * tests/quant/test_*.c): building small float graphs with graph.h, hand-made qconfigs
 * and a per-op-type qconfig lookup, and reading back specs and report entries. */
#ifndef QH_TEST_GRAPH_H
#define QH_TEST_GRAPH_H

#include <string.h>

#include "core/error.h"
#include "quant/backend-annotate-private.h"
#include "quant/report-private.h"

/* A float graph input of the given shape. */
static inline int tg_input(QhGraph *g, const char *name, int rank, const int64_t *dims) {
  QhValue *v = qh_graph_add_value(g, name, NULL);
  v->dtype = QH_DTYPE_F32;
  v->shape = qh_shape_make(rank, dims);
  v->is_input = TRUE;
  g_array_append_val(g->inputs, v->id);
  return v->id;
}

/* A constant; data NULL fills element i with (i % 7 - 3) / 4 (floats) or i (int64). */
static inline int tg_const(QhGraph *g, const char *name, QhDType dtype, int rank,
                           const int64_t *dims, const void *data) {
  QhShape shape = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(dtype, &shape, NULL);
  int64_t n = qh_tensor_numel(t);
  if (data)
    memcpy(t->data, data, t->nbytes);
  else
    for (int64_t i = 0; i < n; i++) {
      if (dtype == QH_DTYPE_F32)
        ((float *)t->data)[i] = (float)(i % 7 - 3) / 4.0f;
      else if (dtype == QH_DTYPE_S64)
        ((int64_t *)t->data)[i] = i;
    }
  QhValue *v = qh_graph_add_value(g, name, NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

/* A node with one output value named "<name>:0"; returns the output value id. */
static inline int tg_node(QhGraph *g, const char *name, const char *op, int n_inputs,
                          const int *inputs) {
  char *out_name = g_strdup_printf("%s:0", name);
  int out = qh_graph_add_value(g, out_name, NULL)->id;
  g_free(out_name);
  GError *error = NULL;
  QhNode *n = qh_graph_add_node(g, name, op, "", n_inputs, inputs, 1, &out, &error);
  g_assert_no_error(error);
  g_assert_nonnull(n);
  return out;
}

static inline int tg_node_id(const QhGraph *g, const char *name) {
  for (int i = 0; i < qh_graph_n_nodes(g); i++)
    if (strcmp(qh_graph_node(g, i)->name, name) == 0)
      return i;
  g_error("no node '%s'", name);
  return -1;
}

static inline void tg_output(QhGraph *g, int v) {
  qh_graph_value(g, v)->is_output = TRUE;
  g_array_append_val(g->outputs, v);
}

/* ---- qconfigs ---- */

static inline QhObserverConfig *tg_observer(const char *name, int32_t dtype, int32_t qscheme) {
  QhObserverConfig *c = qh_observer_config_new(name);
  c->dtype = dtype;
  c->qscheme = qscheme;
  c->ch_axis = 0;
  return c;
}

static inline QhObserverConfig *tg_fixed(float scale, int zero_point) {
  QhObserverConfig *c = tg_observer("FixedQParamsObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  char s[32], z[16];
  g_snprintf(s, sizeof s, "%.9g", (double)scale);
  g_snprintf(z, sizeof z, "%d", zero_point);
  qh_observer_config_add_arg(c, "scale", s);
  qh_observer_config_add_arg(c, "zero_point", z);
  c->has_range = TRUE;
  c->quant_min = 0;
  c->quant_max = 255;
  return c;
}

static inline QhQConfig *tg_qconfig(QhObserverConfig *act, QhObserverConfig *weight, const char *origin) {
  QhQConfig *q = g_new0(QhQConfig, 1);
  q->is_none = act == NULL;
  q->activation = act;
  q->weight = weight;
  q->origin = g_strdup(origin);
  return q;
}

static inline void tg_qconfig_free(QhQConfig *q) {
  qh_observer_config_free(q->activation);
  qh_observer_config_free(q->weight);
  g_free(q->origin);
  g_free(q);
}

/* Qconfigs by op type, else the global one (may be NULL). */
typedef struct {
  const char *op[16];
  const QhQConfig *qc[16];
  const QhQConfig *global;
} TgLookup;

static inline const QhQConfig *tg_lookup(gpointer user_data, const QhGraph *g, const QhNode *n) {
  (void)g;
  const TgLookup *l = user_data;
  for (int i = 0; i < 16 && l->op[i]; i++)
    if (strcmp(l->op[i], n->op_type) == 0)
      return l->qc[i];
  return l->global;
}

/* ---- reading results ---- */

static inline const QhQuantSpec *tg_spec(const QhAnnotationSet *set, const QhGraph *g,
                                         const char *node, int slot, int kind) {
  QhEdgeRef e = {(uint32_t)tg_node_id(g, node), (uint32_t)slot, kind, 0};
  return qh_annotation_set_lookup(set, &e);
}

/* The report entry of a node: quantized with pattern, or float with a reason containing
 * every string in `needles` (NULL-terminated). */
static inline void tg_expect_report(const QhQuantReport *r, const QhGraph *g, const char *node,
                                    gboolean quantized, const char *pattern,
                                    const char *const *needles) {
  const QhQuantReportEntry *e =
      g_hash_table_lookup(r->nodes, GINT_TO_POINTER(tg_node_id(g, node)));
  if (e == NULL)
    g_error("node '%s' has no report entry", node);
  if (e->quantized != quantized)
    g_error("node '%s': quantized %d, expected %d (reason: %s)", node, e->quantized, quantized,
            e->reason ? e->reason : "-");
  if (pattern && g_strcmp0(e->pattern, pattern) != 0)
    g_error("node '%s': pattern '%s', expected '%s'", node, e->pattern, pattern);
  for (; needles && *needles; needles++)
    if (e->reason == NULL || strstr(e->reason, *needles) == NULL)
      g_error("node '%s': reason '%s' lacks '%s'", node, e->reason ? e->reason : "-", *needles);
}

#define TG_NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif
