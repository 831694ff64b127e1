/* plugin-check's graph-based checks: transform_for_annotation, annotate, refine and
 * deploy, each run on small built-in graphs (conv -> batchnorm -> relu; gemm -> relu
 * -> add with a second input; a Q/DQ graph for deploy). The graphs are annotated as
 * `quantize` annotates a model: the plugin's transform, the BackendConfig's BatchNorm
 * folds and declarative annotator, then its imperative annotate over those specs (with
 * the qconfig mapping behind qconfig_for_node), so annotate code that only runs on
 * annotated nodes is exercised. What the plugin leaves behind is checked the way the
 * real flows will check it: the graph still has a topological order and its outputs,
 * annotations pass the host's validation, refined qparams pass the host's checks, and a
 * failed deploy leaves no files. A check that had nothing to look at (no spec on a
 * graph, no quantized edge for refine) is a SKIP with the reason, never a PASS. */
#include <glib/gstdio.h>
#include <string.h>

#include "conformance/check-private.h"
#include "hostapi/graph-view.h"
#include "hostapi/host-private.h"
#include "hostapi/status-private.h"
#include "hostapi/annotation.h"
#include "lower/deploy-model.h"
#include "quant/backend-annotate.h"
#include "quant/qconfig.h"
#include "quant/report.h"

/* ---- built-in graphs ---- */

static QhValue *value(QhGraph *g, const char *name, int rank, const int64_t *dims) {
  QhValue *v = qh_graph_add_value(g, name, NULL);
  v->dtype = QH_DTYPE_F32;
  v->shape = qh_shape_make(rank, dims);
  return v;
}

static QhValue *constant(QhGraph *g, const char *name, int rank, const int64_t *dims, float base) {
  QhShape shape = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &shape, NULL);
  float *d = t->data;
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    d[i] = base + 0.01f * (float)(i % 17) - 0.05f;
  QhValue *v = qh_graph_add_value(g, name, NULL);
  qh_value_set_initializer(v, t);
  return v;
}

static QhNode *node(QhGraph *g, const char *name, const char *op, int n_in, const QhValue *const *in,
                    const QhValue *out) {
  int ids[4];
  for (int i = 0; i < n_in; i++)
    ids[i] = in[i]->id;
  return qh_graph_add_node(g, name, op, "", n_in, ids, 1, &out->id, NULL);
}

static void mark_io(QhGraph *g, QhValue *in, QhValue *out) {
  in->is_input = TRUE;
  g_array_append_val(g->inputs, in->id);
  out->is_output = TRUE;
  g_array_append_val(g->outputs, out->id);
}

static QhGraph *graph_conv_bn_relu(void) {
  QhGraph *g = qh_graph_new();
  qh_graph_set_opset(g, "", 13);
  static const int64_t x_dims[4] = {1, 3, 8, 8}, w_dims[4] = {4, 3, 3, 3}, c_dims[1] = {4},
                       y_dims[4] = {1, 4, 8, 8};
  QhValue *x = value(g, "x", 4, x_dims);
  QhValue *w = constant(g, "conv.weight", 4, w_dims, 0.1f);
  QhValue *b = constant(g, "conv.bias", 1, c_dims, 0.0f);
  QhValue *c = value(g, "conv_out", 4, y_dims);
  const QhValue *conv_in[3] = {x, w, b};
  QhNode *conv = node(g, "conv", "Conv", 3, conv_in, c);
  int64_t pads[4] = {1, 1, 1, 1};
  qh_node_set_attr_ints(conv, "pads", 4, pads);
  QhValue *scale = constant(g, "bn.scale", 1, c_dims, 1.0f), *bias = constant(g, "bn.bias", 1, c_dims, 0.1f);
  QhValue *mean = constant(g, "bn.mean", 1, c_dims, 0.0f), *var = constant(g, "bn.var", 1, c_dims, 1.0f);
  QhValue *n = value(g, "bn_out", 4, y_dims);
  const QhValue *bn_in[5] = {c, scale, bias, mean, var};
  int ids[5];
  for (int i = 0; i < 5; i++)
    ids[i] = bn_in[i]->id;
  qh_graph_add_node(g, "bn", "BatchNormalization", "", 5, ids, 1, &n->id, NULL);
  QhValue *y = value(g, "y", 4, y_dims);
  const QhValue *relu_in[1] = {n};
  node(g, "relu", "Relu", 1, relu_in, y);
  mark_io(g, x, y);
  return g;
}

static QhGraph *graph_gemm_add(void) {
  QhGraph *g = qh_graph_new();
  qh_graph_set_opset(g, "", 13);
  static const int64_t x_dims[2] = {1, 16}, w_dims[2] = {8, 16}, b_dims[1] = {8}, y_dims[2] = {1, 8};
  QhValue *x = value(g, "x", 2, x_dims);
  QhValue *w = constant(g, "fc.weight", 2, w_dims, 0.05f);
  QhValue *b = constant(g, "fc.bias", 1, b_dims, 0.0f);
  QhValue *h = value(g, "fc_out", 2, y_dims);
  const QhValue *fc_in[3] = {x, w, b};
  QhNode *fc = node(g, "fc", "Gemm", 3, fc_in, h);
  qh_node_set_attr_int(fc, "transB", 1);
  QhValue *r = value(g, "relu_out", 2, y_dims);
  const QhValue *relu_in[1] = {h};
  node(g, "relu", "Relu", 1, relu_in, r);
  QhValue *skip = value(g, "skip", 2, y_dims);
  skip->is_input = TRUE;
  g_array_append_val(g->inputs, skip->id);
  QhValue *y = value(g, "y", 2, y_dims);
  const QhValue *add_in[2] = {r, skip};
  node(g, "add", "Add", 2, add_in, y);
  mark_io(g, x, y);
  return g;
}

/* x -> Q -> DQ -> Relu -> y with one per-tensor quantization of x: uint8 with zero point
 * 128, or (int8) symmetric int8, the most restrictive form a backend may require. Both
 * scales are 2^-4, so power-of-two hardware takes the int8 one. */
static QhGraph *graph_qdq_typed(gboolean int8) {
  QhGraph *g = qh_graph_new();
  qh_graph_set_opset(g, "", 13);
  static const int64_t dims[2] = {1, 8};
  QhValue *x = value(g, "x", 2, dims);
  QhShape scalar = qh_shape_make(0, NULL);
  QhDType qtype = int8 ? QH_DTYPE_S8 : QH_DTYPE_U8;
  QhTensor *s = qh_tensor_new(QH_DTYPE_F32, &scalar, NULL), *zp = qh_tensor_new(qtype, &scalar, NULL);
  *(float *)s->data = 0.0625f;
  if (int8)
    *(int8_t *)zp->data = 0;
  else
    *(uint8_t *)zp->data = 128;
  QhValue *sv = qh_graph_add_value(g, "x_scale", NULL), *zv = qh_graph_add_value(g, "x_zero_point", NULL);
  qh_value_set_initializer(sv, s);
  qh_value_set_initializer(zv, zp);
  QhValue *q = value(g, "x_quantized", 2, dims);
  q->dtype = qtype;
  const QhValue *q_in[3] = {x, sv, zv};
  node(g, "x_quantize", "QuantizeLinear", 3, q_in, q);
  QhValue *dq = value(g, "x_dequantized", 2, dims);
  const QhValue *dq_in[3] = {q, sv, zv};
  node(g, "x_dequantize", "DequantizeLinear", 3, dq_in, dq);
  QhValue *y = value(g, "y", 2, dims);
  const QhValue *relu_in[1] = {dq};
  node(g, "relu", "Relu", 1, relu_in, y);
  mark_io(g, x, y);
  return g;
}

typedef struct {
  const char *name;
  QhGraph *(*make)(void);
} BuiltinGraph;

static const BuiltinGraph float_graphs[] = {{"conv_bn_relu", graph_conv_bn_relu},
                                            {"gemm_relu_add", graph_gemm_add}};

/* ---- helpers ---- */

static gboolean graph_intact(QhGraph *g, char **why) {
  GArray *order = NULL;
  GError *error = NULL;
  if (!qh_graph_topo_order(g, &order, &error)) {
    *why = g_strdup(error->message);
    g_error_free(error);
    return FALSE;
  }
  g_array_unref(order);
  for (guint i = 0; i < g->outputs->len; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(g->outputs, int, i));
    if (v->producer < 0 && !v->is_input && !v->initializer) {
      *why = g_strdup_printf("graph output '%s' has no producer", v->name);
      return FALSE;
    }
  }
  return TRUE;
}

static QhAnnotationSet *new_annotation_set(const QhCheckRun *run) {
  QhAnnotationSet *set = qh_annotation_set_new();
  const QhPluginInfo *info = run->report->info;
  for (guint i = 0; i < info->observers->len; i++)
    qh_annotation_set_add_observer(set, info->observers->pdata[i]);
  return set;
}

static const QhBackendConfig *backend_config(const QhCheckRun *run) {
  const QhPluginDesc *d = run->desc;
  return QH_HAS_FIELD(d, QhPluginDesc, backend_config) ? d->backend_config : NULL;
}

static gboolean has_annotate(const QhCheckRun *run) {
  const QhPluginDesc *d = run->desc;
  return QH_HAS_FIELD(d, QhPluginDesc, annotate) && d->annotate != NULL;
}

static char *error_text(GError *error, const char *what) {
  char *text = g_strdup_printf("%s: %s", what, error->message);
  g_error_free(error);
  return text;
}

/* Annotate g as quantize does (flow.c's prepare and annotate): the plugin's transform,
 * the BackendConfig's BatchNorm folds and declarative annotator, then the plugin's
 * annotate and validate on top. *n_declarative counts the specs the BackendConfig made.
 * FALSE with *why on failure. */
static gboolean annotate_graph(QhCheckRun *run, QhGraph *g, QhAnnotationSet *set, guint *n_declarative,
                               char **why) {
  const QhBackendConfig *bc = backend_config(run);
  GError *error = NULL;
  *n_declarative = 0;
  if (QH_HAS_FIELD(run->desc, QhPluginDesc, transform) && run->desc->transform) {
    QhGraphView *view = qh_graph_view_new(g, QH_VIEW_READ);
    QhStatus *st = qh_backend_call_transform(run->backend, view);
    qh_graph_view_free(view);
    if (st) {
      char *text = qh_check_status_text(st);
      *why = g_strdup_printf("transform_for_annotation, which quantize runs first: %s", text);
      g_free(text);
      return FALSE;
    }
  }
  if (bc && !qh_backend_fold_batchnorm(bc, g, &error)) {
    *why = error_text(error, "the BackendConfig's BatchNorm fold");
    return FALSE;
  }
  const QhPluginInfo *info = run->report->info;
  char **observers = g_new0(char *, info->observers->len + 1);
  for (guint i = 0; i < info->observers->len; i++)
    observers[i] = g_strdup(info->observers->pdata[i]);
  QhQConfigMapping *mapping = qh_qconfig_mapping_new(bc, (const char *const *)observers, &error);
  g_strfreev(observers);
  if (mapping == NULL) {
    *why = error_text(error, "the BackendConfig's qconfig mapping");
    return FALSE;
  }
  gboolean ok = TRUE;
  if (bc) {
    QhQuantReport *report = qh_quant_report_new();
    ok = qh_backend_annotate(bc, g, mapping, set, report, &error);
    qh_quant_report_free(report);
    if (!ok)
      *why = error_text(error, "the BackendConfig's declarative annotator");
    *n_declarative = qh_annotation_set_n_specs(set);
  }
  if (ok && has_annotate(run)) {
    QhGraphView *view = qh_graph_view_new(g, QH_VIEW_READ);
    qh_graph_view_set_annotations(view, set);
    qh_graph_view_set_qconfig_hook(view, qh_qconfig_view_hook, mapping);
    QhStatus *st = qh_backend_call_annotate(run->backend, view);
    if (st) {
      char *text = qh_check_status_text(st);
      *why = g_strdup_printf("annotate: %s", text);
      g_free(text);
      ok = FALSE;
    } else if (!qh_annotation_set_validate(set, g, &error)) {
      *why = error_text(error, "the annotation it made is invalid");
      ok = FALSE;
    } else if ((st = qh_backend_call_validate(run->backend, view)) != NULL) {
      char *text = qh_check_status_text(st);
      *why = g_strdup_printf("validate: %s", text);
      g_free(text);
      ok = FALSE;
    }
    qh_graph_view_free(view);
  } else if (ok && !qh_annotation_set_validate(set, g, &error)) {
    *why = error_text(error, "the BackendConfig's annotation is invalid");
    ok = FALSE;
  }
  qh_qconfig_mapping_free(mapping);
  return ok;
}

/* ---- transform_for_annotation ---- */

void qh_check_transform(QhCheckRun *run) {
  for (gsize i = 0; i < G_N_ELEMENTS(float_graphs); i++) {
    char *check = g_strdup_printf("transform_for_annotation on %s", float_graphs[i].name);
    QhGraph *g = float_graphs[i].make();
    int before = qh_graph_count_live_nodes(g);
    QhGraphView *view = qh_graph_view_new(g, QH_VIEW_READ);
    QhStatus *st = qh_backend_call_transform(run->backend, view);
    qh_graph_view_free(view);
    char *why = NULL;
    if (st) {
      why = qh_check_status_text(st);
      qh_check_add(run, QH_CHECK_FAIL, check, "%s", why);
    } else if (!graph_intact(g, &why)) {
      qh_check_add(run, QH_CHECK_FAIL, check, "left the graph broken: %s", why);
    } else {
      qh_check_add(run, QH_CHECK_PASS, check, "%d nodes before, %d after; the graph is intact", before,
                   qh_graph_count_live_nodes(g));
    }
    g_free(why);
    qh_graph_free(g);
    g_free(check);
  }
}

/* ---- annotate ---- */

void qh_check_annotate(QhCheckRun *run) {
  gboolean imperative = has_annotate(run);
  for (gsize i = 0; i < G_N_ELEMENTS(float_graphs); i++) {
    char *check = g_strdup_printf("annotate on %s", float_graphs[i].name);
    QhGraph *g = float_graphs[i].make();
    QhAnnotationSet *set = new_annotation_set(run);
    char *why = NULL;
    guint n_declarative = 0;
    if (!annotate_graph(run, g, set, &n_declarative, &why)) {
      qh_check_add(run, QH_CHECK_FAIL, check, "%s", why);
    } else {
      guint n = qh_annotation_set_n_specs(set);
      /* zero specs checked nothing: the validation had nothing to look at */
      if (n == 0)
        qh_check_add(run, QH_CHECK_SKIP, check, "no spec on this graph (%s quantized nothing): nothing to "
                     "validate", backend_config(run) && imperative ? "the BackendConfig and then annotate"
                                                : imperative ? "annotate" : "the BackendConfig");
      else if (backend_config(run) && imperative)
        qh_check_add(run, QH_CHECK_PASS, check, "%u specs (%u from the BackendConfig, then annotate), valid", n,
                     n_declarative);
      else
        qh_check_add(run, QH_CHECK_PASS, check, "%u specs, valid", n);
    }
    g_free(why);
    qh_annotation_set_free(set);
    qh_graph_free(g);
    g_free(check);
  }
}

/* ---- refine: with stand-in qparams on every quantized edge ---- */

typedef struct {
  QhEdgeRef edge;
  QhQParams q;
  float scale;
  int32_t zero_point;
} EdgeQParams;

typedef struct {
  GArray *edges; /* EdgeQParams */
  int changes;
} QParamsTable;

static EdgeQParams *find_edge(QParamsTable *t, const QhEdgeRef *edge) {
  for (guint i = 0; i < t->edges->len; i++) {
    EdgeQParams *e = &g_array_index(t->edges, EdgeQParams, i);
    if (e->edge.node == edge->node && e->edge.slot == edge->slot && e->edge.kind == edge->kind)
      return e;
  }
  return NULL;
}

static gboolean table_get(gpointer data, const QhGraph *graph, const QhEdgeRef *edge, QhQParams *out,
                          gboolean *out_found, GError **error) {
  (void)graph;
  (void)error;
  EdgeQParams *e = find_edge(data, edge);
  *out_found = e != NULL;
  if (e) {
    uint32_t size = out->struct_size;
    *out = e->q;
    out->struct_size = size;
    out->scale = &e->scale;
    out->zero_point = &e->zero_point;
  }
  return TRUE;
}

static gboolean table_set(gpointer data, QhGraph *graph, const QhEdgeRef *edge, const QhQParams *q,
                          const char *reason, GError **error) {
  (void)graph;
  QParamsTable *t = data;
  EdgeQParams *e = find_edge(t, edge);
  if (e == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "that edge is not quantized");
    return FALSE;
  }
  if (q->count != 1) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "per-tensor edge given %zu qparams", q->count);
    return FALSE;
  }
  e->scale = q->scale[0];
  e->zero_point = q->zero_point[0];
  e->q.quant_min = q->quant_min;
  e->q.quant_max = q->quant_max;
  t->changes++;
  qh_log(QH_LOG_DEBUG, "refine: %s", reason ? reason : "");
  return TRUE;
}

static gboolean add_stand_in(gpointer data, const QhEdgeRef *edge, const QhQuantSpec *spec, GError **error) {
  (void)error;
  if (spec->kind == QH_SPEC_FLOAT || spec->kind == QH_SPEC_SHARED)
    return TRUE;
  EdgeQParams e = {.edge = *edge, .q = {QH_STRUCT_HEADER(QhQParams), .ch_axis = -1},
                   .scale = 0.0625f};
  e.q.dtype = spec->dtype;
  e.q.qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC;
  e.q.quant_min = spec->dtype == QH_DTYPE_UINT8 ? 0 : -128;
  e.q.quant_max = spec->dtype == QH_DTYPE_UINT8 ? 255 : 127;
  if (spec->dtype == QH_DTYPE_UINT8) {
    e.q.qscheme = QH_QSCHEME_PER_TENSOR_AFFINE;
    e.zero_point = 128;
  }
  e.q.count = 1;
  g_array_append_val(((QParamsTable *)data)->edges, e);
  return TRUE;
}

void qh_check_refine(QhCheckRun *run) {
  const char *check = "refine";
  if (!has_annotate(run) && backend_config(run) == NULL) {
    qh_check_add(run, QH_CHECK_SKIP, check,
                 "needs quantized edges; without annotate or a BackendConfig it is exercised by the quantization "
                 "flow (issue 5)");
    return;
  }
  /* the first built-in graph on which the plugin quantizes something */
  for (gsize i = 0; i < G_N_ELEMENTS(float_graphs); i++) {
    QhGraph *g = float_graphs[i].make();
    QhAnnotationSet *set = new_annotation_set(run);
    QParamsTable table = {g_array_new(FALSE, TRUE, sizeof(EdgeQParams)), 0};
    char *why = NULL;
    GError *error = NULL;
    guint n_declarative = 0;
    gboolean done = TRUE;
    if (!annotate_graph(run, g, set, &n_declarative, &why)) {
      qh_check_add(run, QH_CHECK_SKIP, check, "annotation failed first on %s: %s", float_graphs[i].name, why);
    } else if (!qh_annotation_set_foreach(set, g, add_stand_in, &table, &error)) {
      qh_check_add(run, QH_CHECK_FAIL, check, "%s", error->message);
      g_clear_error(&error);
    } else if (table.edges->len == 0) {
      done = i + 1 == G_N_ELEMENTS(float_graphs);
      if (done)
        qh_check_add(run, QH_CHECK_SKIP, check, "no built-in graph has a quantized edge: refine had nothing to "
                     "look at");
    } else {
      QhGraphView *view = qh_graph_view_new(g, QH_VIEW_READ);
      qh_graph_view_set_annotations(view, set);
      qh_graph_view_set_qparams_hooks(view, table_get, table_set, &table);
      QhStatus *st = qh_backend_call_refine(run->backend, view);
      qh_graph_view_free(view);
      if (st) {
        char *text = qh_check_status_text(st);
        qh_check_add(run, QH_CHECK_FAIL, check, "%s", text);
        g_free(text);
      } else {
        qh_check_add(run, QH_CHECK_PASS, check,
                     "%u quantized edges with stand-in qparams (scale 1/16); %d changed, each accepted by the host",
                     table.edges->len, table.changes);
      }
    }
    g_free(why);
    g_array_unref(table.edges);
    qh_annotation_set_free(set);
    qh_graph_free(g);
    if (done)
      break;
  }
}

/* ---- deploy: into a temporary directory that never outlives the check ---- */

void qh_check_deploy(QhCheckRun *run) {
  GError *error = NULL;
  char *dir = g_dir_make_tmp("qhost-plugin-check-XXXXXX", &error);
  if (dir == NULL) {
    qh_check_add(run, QH_CHECK_FAIL, "deploy", "cannot make a temporary directory: %s", error->message);
    g_error_free(error);
    return;
  }
  /* A backend may refuse a quantization its hardware cannot take (QH_ERR_UNSUPPORTED):
   * then the symmetric int8 graph must deploy. */
  static const struct { gboolean int8; const char *what; } graphs[] = {
      {FALSE, "uint8 Q/DQ graph (zero point 128)"}, {TRUE, "symmetric int8 Q/DQ graph (scale 2^-4)"}};
  char *declined = NULL;
  for (size_t i = 0; i < G_N_ELEMENTS(graphs); i++) {
    QhArtifact artifact = {QH_ARTIFACT_MAGIC, dir, 64u << 20, 0, NULL, /* no source file */
                            qh_deploy_model_save};
    QhGraph *g = graph_qdq_typed(graphs[i].int8);
    QhGraphView *view = qh_graph_view_new(g, QH_VIEW_READ);
    QhStatus *st = qh_backend_call_deploy(run->backend, view, &artifact);
    qh_graph_view_free(view);
    qh_graph_free(g);
    artifact.magic = 0;
    gboolean unsupported = st && qh_status_is_valid(st) && st->code == QH_ERR_UNSUPPORTED;
    if (st) {
      char *text = qh_check_status_text(st);
      if (unsupported && i + 1 < G_N_ELEMENTS(graphs)) {
        declined = g_strdup_printf("declined the %s (%s); ", graphs[i].what, text);
        g_free(text);
        qh_artifact_remove_tree(dir);
        g_mkdir(dir, 0700);
        continue;
      }
      qh_check_add(run, QH_CHECK_FAIL, "deploy", "%son the %s: %s", declined ? declined : "", graphs[i].what,
                   text);
      g_free(text);
    } else {
      qh_check_add(run, QH_CHECK_PASS, "deploy", "%son the %s: %" G_GSIZE_FORMAT " bytes written",
                   declined ? declined : "", graphs[i].what, artifact.written);
    }
    break;
  }
  g_free(declined);
  qh_artifact_remove_tree(dir);
  g_free(dir);
}
