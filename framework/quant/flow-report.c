/* The report of a quantization: every node's decision, every quantized tensor's dtype,
 * qparams and observer, and the error it cost: SQNR of each weight (float vs
 * quantize-dequantize) and of each activation and output between the float model and
 * the QDQ model on one probe sample, worst first. Printed on stdout; JSON with --report
 * (schema_version 1, written atomically). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/json-text.h"
#include "hostapi/annotation.h"
#include "hostapi/host-private.h"
#include "quant/flow-private.h"
#include "quant/quantize.h"
#include "quant/report-private.h"

/* ---- decisions of an imperative annotate ---- */

/* Quantized by the final annotations: a quantizing spec on one of its edges, or the
 * ANNOTATED mark PT2E puts on every node of a fused pattern (a conv's Relu has no
 * spec of its own when the pattern quantizes only the conv's inputs). */
static gboolean is_annotated(const QhAnnotationSet *set, const QhNode *n) {
  if (qh_annotation_node_flags(set, (uint32_t)n->id) & QH_ANNOTATION_ANNOTATED)
    return TRUE;
  for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
    gboolean in = k < n->n_inputs;
    QhEdgeRef e = {(uint32_t)n->id, (uint32_t)(in ? k : k - n->n_inputs), in ? QH_EDGE_INPUT : QH_EDGE_OUTPUT, 0};
    const QhQuantSpec *spec = qh_annotation_set_lookup(set, &e);
    if (spec && spec->kind != QH_SPEC_FLOAT)
      return TRUE;
  }
  return FALSE;
}

/* Whether edge e ends up quantized: its sharing group (implicit sharing with the
 * producer's output included) has a quantizing root. */
static gboolean resolves_quantized(const QhAnnotationSet *set, const QhGraph *g, const QhEdgeRef *e) {
  QhEdgeRef root;
  const QhQuantSpec *spec = NULL;
  return qh_annotation_set_resolve(set, g, e, &root, &spec) && spec->kind != QH_SPEC_FLOAT;
}

/* What the annotations say about node n, as a string of flags: its ANNOTATED mark,
 * then one character per input and per output edge, '1' when the edge resolves to
 * a quantizing spec. A node whose spec is nothing of its own (an Add or a
 * BatchNormalization fused with the Relu after it, whose inputs are its producers'
 * quantized outputs) is quantized through its neighbours, which this captures. */
static char *node_state(const QhAnnotationSet *set, const QhGraph *g, const QhNode *n) {
  GString *s = g_string_new(qh_annotation_node_flags(set, (uint32_t)n->id) & QH_ANNOTATION_ANNOTATED ? "A" : "-");
  for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
    gboolean in = k < n->n_inputs;
    int v = in ? n->inputs[k] : n->outputs[k - n->n_inputs];
    QhEdgeRef e = {(uint32_t)n->id, (uint32_t)(in ? k : k - n->n_inputs), in ? QH_EDGE_INPUT : QH_EDGE_OUTPUT, 0};
    g_string_append_c(s, v >= 0 && resolves_quantized(set, g, &e) ? '1' : '0');
  }
  return g_string_free(s, FALSE);
}

GPtrArray *qh_flow_report_snapshot(const QhFlow *f) {
  GPtrArray *states = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; i < qh_graph_n_nodes(f->graph); i++) {
    const QhNode *n = qh_graph_node(f->graph, i);
    g_ptr_array_add(states, n->is_removed ? NULL : node_state(f->set, f->graph, n));
  }
  return states;
}

/* Quantized after the plugin changed n's annotations: a mark or a quantizing spec of
 * its own, or every computed input and its output quantized through its neighbours. */
static gboolean runs_quantized(const QhAnnotationSet *set, const QhGraph *g, const QhNode *n) {
  if (is_annotated(set, n))
    return TRUE;
  gboolean any = FALSE;
  for (int s = 0; s < n->n_inputs; s++) {
    if (n->inputs[s] < 0 || qh_graph_value(g, n->inputs[s])->initializer)
      continue;
    QhEdgeRef e = {(uint32_t)n->id, (uint32_t)s, QH_EDGE_INPUT, 0};
    if (!resolves_quantized(set, g, &e))
      return FALSE;
    any = TRUE;
  }
  QhEdgeRef out = {(uint32_t)n->id, 0, QH_EDGE_OUTPUT, 0};
  return any && n->n_outputs > 0 && n->outputs[0] >= 0 && resolves_quantized(set, g, &out);
}

/* After a plugin's annotate, each node's decision follows the final annotations: the
 * declarative pass's entry stays where the plugin changed nothing about the node (its
 * mark and how each of its edges resolves, compared with before; with its pattern or
 * reason), and is replaced where the plugin quantized or un-quantized the node. */
void qh_flow_report_imperative(QhFlow *f, const GPtrArray *before) {
  for (int i = 0; i < qh_graph_n_nodes(f->graph); i++) {
    const QhNode *n = qh_graph_node(f->graph, i);
    if (n->is_removed)
      continue;
    gboolean quantized;
    const char *reason;
    gboolean decided = qh_quant_report_lookup(f->report, n->id, &quantized, &reason);
    const char *was = before && (guint)i < before->len ? g_ptr_array_index(before, i) : NULL;
    char *now = node_state(f->set, f->graph, n);
    gboolean unchanged = was && strcmp(was, now) == 0;
    g_free(now);
    if (decided && unchanged)
      continue;
    gboolean annotated = runs_quantized(f->set, f->graph, n);
    if (decided && quantized == annotated)
      continue;
    if (annotated)
      qh_quant_report_node(f->report, n, TRUE, "annotated by the plugin", NULL);
    else if (decided)
      qh_quant_report_node(f->report, n, FALSE, NULL, "left float by plugin %s's annotate", f->name);
    else
      qh_quant_report_node(f->report, n, FALSE, NULL, "not annotated by plugin '%s'", f->name);
  }
}

/* ---- SQNR ---- */

static double sqnr_db(const float *ref, const float *test, int64_t n) {
  double signal = 0, noise = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = (double)ref[i] - (double)test[i];
    signal += (double)ref[i] * ref[i];
    noise += d * d;
  }
  if (noise == 0)
    return INFINITY;
  if (signal == 0)
    return -INFINITY;
  return 10.0 * log10(signal / noise);
}

static double *boxed(double v) {
  double *p = g_new(double, 1);
  *p = v;
  return p;
}

/* PyTorch's quantize then dequantize of a weight. */
static void torch_fake_quantize(const QhTensor *t, const QhQuantParams *q, float *dq) {
  int64_t n = qh_tensor_numel(t);
  size_t esize = q->dtype == QH_DTYPE_S32 ? 4 : 1;
  void *qd = g_malloc((size_t)n * esize);
  if (q->n > 1)
    qh_quant_quantize_per_channel(t->data, t->shape.rank, t->shape.dims, q, qd);
  else
    qh_quant_quantize(t->data, (size_t)n, q->scale[0], q->zero_point[0], q->dtype, qd);
  /* the channel of element k is its index along ch_axis */
  int64_t inner = 1;
  for (int d = q->ch_axis + 1; q->n > 1 && d < t->shape.rank; d++)
    inner *= t->shape.dims[d];
  for (int64_t k = 0; k < n; k++) {
    int c = q->n > 1 ? (int)((k / inner) % q->n) : 0;
    qh_quant_dequantize((const char *)qd + (size_t)k * esize, 1, q->dtype, q->scale[c], q->zero_point[c], &dq[k]);
  }
  g_free(qd);
}

/* The backend's own fake-quant (QhReferenceNumericsOps), where it supplies one. */
gboolean qh_flow_plugin_fake_quantize(QhFlow *f, const QhTensor *t,
                                      const QhQuantParams *q, float *dq) {
  QhQParams qp = {QH_STRUCT_HEADER(QhQParams), .dtype = q->dtype, .qscheme = q->qscheme,
                  .quant_min = q->quant_min, .quant_max = q->quant_max, .ch_axis = q->ch_axis,
                  .count = (size_t)q->n, .capacity = (size_t)q->n, .scale = q->scale,
                  .zero_point = q->zero_point};
  QhTensorView in = {QH_STRUCT_HEADER(QhTensorView), .dtype = QH_DTYPE_FLOAT, .rank = t->shape.rank,
                     .data = t->data, .nbytes = t->nbytes};
  memcpy(in.dims, t->shape.dims, sizeof(int64_t) * (size_t)t->shape.rank);
  QhTensorView out = in;
  out.data = dq;
  GError *error = NULL;
  if (qh_backend_fake_quantize(f->backend, q->dtype == QH_DTYPE_S32 ? QH_ROLE_BIAS : QH_ROLE_WEIGHT, &qp, &in,
                               &out, &error))
    return TRUE;
  qh_quant_report_note(f->report, "%s; SQNR with PyTorch's rounding instead", error->message);
  g_error_free(error);
  return FALSE;
}

void qh_flow_weight_sqnr(QhFlow *f) {
  f->weight_sqnr = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  const QhReferenceNumericsOps *rn = qh_backend_reference_numerics(f->backend);
  if (rn)
    qh_quant_report_note(f->report, "weight SQNR uses plugin %s's reference numerics: %s", f->name,
                         rn->description);
  for (guint i = 0; i < f->points->points->len; i++) {
    const QhQuantPoint *pt = f->points->points->pdata[i];
    if (!pt->is_constant || pt->qparams == NULL || pt->values->len == 0)
      continue;
    const QhValue *v = qh_graph_value(f->graph, g_array_index(pt->values, int, 0));
    const QhTensor *t = v->initializer;
    if (t == NULL || t->dtype != QH_DTYPE_F32)
      continue;
    float *dq = qh_aligned_alloc0(t->nbytes);
    if (dq == NULL)
      continue;
    if (!rn || !qh_flow_plugin_fake_quantize(f, t, pt->qparams, dq))
      torch_fake_quantize(t, pt->qparams, dq);
    g_hash_table_replace(f->weight_sqnr, g_strdup(v->name), boxed(sqnr_db(t->data, dq, qh_tensor_numel(t))));
    qh_aligned_free(dq);
  }
}

/* ---- the probe runs ---- */

static gboolean load_probe(QhFlow *f, GError **error) {
  QhCalibSource *src = f->calib;
  QhCalibSource *own = NULL;
  if (f->opt->probe_path) {
    own = src = qh_calib_open(f->opt->probe_path, f->graph, error);
    if (src == NULL)
      return FALSE;
  } else if (src == NULL && f->opt->calib_path) {
    own = src = qh_flow_open_calib(f, error);
    if (src == NULL)
      return FALSE;
  }
  if (src == NULL)
    return TRUE; /* quantize --stats without --calib or --probe: no activation SQNR */
  QhTensor **sample = qh_calib_read(src, 0, error);
  if (sample) {
    f->n_probe_inputs = (int)f->graph->inputs->len;
    f->probe_inputs = g_new0(QhTensor *, f->n_probe_inputs + 1);
    for (int i = 0; i < f->n_probe_inputs; i++) {
      f->probe_inputs[i] = sample[i];
      sample[i] = NULL;
    }
    qh_calib_free_sample(src, sample);
  }
  qh_calib_close(own);
  return f->probe_inputs != NULL;
}

static QhPlan *probe_plan(QhFlow *f, GError **error) {
  QhShape *shapes = g_new0(QhShape, f->n_probe_inputs + 1);
  for (int i = 0; i < f->n_probe_inputs; i++)
    shapes[i] = f->probe_inputs[i]->shape;
  QhPlan *plan = qh_plan_new(f->graph, shapes, FALSE, error);
  g_free(shapes);
  return plan;
}

typedef struct {
  QhFlow *f;
  GHashTable *watch; /* value id -> char* name to store under (not owned) */
  GHashTable *out;   /* name -> QhTensor* */
} Capture;

static gboolean capture(gpointer data, int value_id, const QhTensor *t, GError **error) {
  Capture *c = data;
  const char *name = g_hash_table_lookup(c->watch, GINT_TO_POINTER(value_id));
  if (name == NULL || t->dtype != QH_DTYPE_F32)
    return TRUE;
  QhTensor *copy = qh_tensor_copy(t, error);
  if (copy == NULL)
    return FALSE;
  g_hash_table_replace(c->out, g_strdup(name), copy);
  return TRUE;
}

static gboolean run_probe(QhFlow *f, GHashTable *watch, GHashTable *out, GPtrArray **outputs, GError **error) {
  QhPlan *plan = probe_plan(f, error);
  if (plan == NULL) {
    g_prefix_error(error, "probe: ");
    return FALSE;
  }
  Capture c = {f, watch, out};
  qh_plan_set_value_hook(plan, capture, &c);
  QhExecContext ctx = {0};
  ctx.pool = f->pool;
  QhTensor **outs = NULL;
  gboolean ok = qh_plan_run(plan, &ctx, (const QhTensor *const *)f->probe_inputs, &outs, error);
  qh_exec_context_clear(&ctx);
  qh_plan_free(plan);
  if (!ok) {
    g_prefix_error(error, "probe: ");
    return FALSE;
  }
  *outputs = g_ptr_array_new_with_free_func((GDestroyNotify)qh_tensor_free);
  for (guint i = 0; i < f->graph->outputs->len; i++)
    g_ptr_array_add(*outputs, outs[i]);
  g_free(outs);
  return TRUE;
}

gboolean qh_flow_probe_float(QhFlow *f, GError **error) {
  if (!load_probe(f, error))
    return FALSE;
  if (f->probe_inputs == NULL)
    return TRUE;
  GHashTable *watch = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < f->points->points->len; i++) {
    const QhQuantPoint *pt = f->points->points->pdata[i];
    for (guint k = 0; k < pt->values->len && !pt->is_constant; k++) {
      int v = g_array_index(pt->values, int, k);
      g_hash_table_insert(watch, GINT_TO_POINTER(v), qh_graph_value(f->graph, v)->name);
    }
  }
  f->float_values = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)qh_tensor_free);
  gboolean ok = run_probe(f, watch, f->float_values, &f->float_outputs, error);
  g_hash_table_unref(watch);
  return ok;
}

gboolean qh_flow_probe_quantized(QhFlow *f, GError **error) {
  f->sqnr = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  f->output_sqnr = g_ptr_array_new_with_free_func(g_free);
  if (f->probe_inputs == NULL)
    return TRUE;
  /* the dequantized form of a float value V is "V_dequantized" (or V for an output) */
  GHashTable *watch = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, f->float_values);
  while (g_hash_table_iter_next(&it, &key, NULL)) {
    char *dq = g_strdup_printf("%s_dequantized", (const char *)key);
    int id = qh_graph_find_value(f->graph, dq);
    g_free(dq);
    if (id < 0)
      id = qh_graph_find_value(f->graph, key); /* graph outputs keep their name */
    if (id >= 0)
      g_hash_table_insert(watch, GINT_TO_POINTER(id), g_strdup(key));
  }
  GHashTable *got = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)qh_tensor_free);
  GPtrArray *outs = NULL;
  gboolean ok = run_probe(f, watch, got, &outs, error);
  if (ok) {
    g_hash_table_iter_init(&it, got);
    gpointer value;
    while (g_hash_table_iter_next(&it, &key, &value)) {
      const QhTensor *ref = g_hash_table_lookup(f->float_values, key), *test = value;
      if (ref && qh_tensor_numel(ref) == qh_tensor_numel(test))
        g_hash_table_replace(f->sqnr, g_strdup(key), boxed(sqnr_db(ref->data, test->data, qh_tensor_numel(ref))));
    }
    for (guint i = 0; i < outs->len; i++) {
      const QhTensor *ref = f->float_outputs->pdata[i], *test = outs->pdata[i];
      double v = ref->dtype == QH_DTYPE_F32 && test->dtype == QH_DTYPE_F32 &&
                         qh_tensor_numel(ref) == qh_tensor_numel(test)
                     ? sqnr_db(ref->data, test->data, qh_tensor_numel(ref))
                     : NAN;
      g_ptr_array_add(f->output_sqnr, boxed(v));
    }
    g_ptr_array_unref(outs);
  }
  g_hash_table_unref(got);
  g_hash_table_unref(watch);
  return ok;
}

void qh_flow_probe_free(QhFlow *f) {
  for (int i = 0; f->probe_inputs && i < f->n_probe_inputs; i++)
    qh_tensor_free(f->probe_inputs[i]);
  g_clear_pointer(&f->probe_inputs, g_free);
  g_clear_pointer(&f->float_values, g_hash_table_unref);
  g_clear_pointer(&f->float_outputs, g_ptr_array_unref);
  g_clear_pointer(&f->sqnr, g_hash_table_unref);
  g_clear_pointer(&f->output_sqnr, g_ptr_array_unref);
  g_clear_pointer(&f->weight_sqnr, g_hash_table_unref);
}

/* ---- printing ---- */

typedef struct {
  const QhQuantPoint *pt;
  double sqnr; /* NAN when unknown */
  const char *kind; /* "activation", "weight" or "bias" */
} Row;

static gint worst_first(gconstpointer a, gconstpointer b) {
  const Row *x = a, *y = b;
  double p = isnan(x->sqnr) ? INFINITY : x->sqnr, q = isnan(y->sqnr) ? INFINITY : y->sqnr;
  return p < q ? -1 : p > q ? 1 : x->pt->index - y->pt->index;
}

static const char *dtype_word(int32_t dtype) {
  int64_t lo, hi;
  const char *name = "?";
  qh_quant_dtype_range(dtype, &lo, &hi, &name);
  return name;
}

/* A constant feeding a Conv/Gemm's bias slot is a bias (backends such as
 * example_vitis quantize it with its own scale); other constants are weights. */
static const char *kind_of(const QhFlow *f, const QhQuantPoint *pt) {
  if (!pt->is_constant)
    return "activation";
  const QhEdgeRef *e = &pt->root;
  const QhGraph *g = f->points->graph;
  const QhNode *n = e->kind == QH_EDGE_INPUT && e->node < g->nodes->len ? qh_graph_node(g, (int)e->node) : NULL;
  return n && qh_annotation_default_role(n->op_type, (int)e->slot) == QH_ROLE_BIAS ? "bias" : "weight";
}

static GArray *rows_of(const QhFlow *f) {
  GArray *rows = g_array_new(FALSE, FALSE, sizeof(Row));
  for (guint i = 0; i < f->points->points->len; i++) {
    const QhQuantPoint *pt = f->points->points->pdata[i];
    if (pt->qparams == NULL || pt->name == NULL)
      continue;
    GHashTable *table = pt->is_constant ? f->weight_sqnr : f->sqnr;
    const double *s = table ? g_hash_table_lookup(table, pt->name) : NULL;
    Row r = {pt, s ? *s : NAN, kind_of(f, pt)};
    g_array_append_val(rows, r);
  }
  g_array_sort(rows, worst_first);
  return rows;
}

static const char *observer_of(const QhQuantPoint *pt) {
  if (pt->observer)
    return qh_observer_config(pt->observer)->name;
  return pt->spec->kind == QH_SPEC_FIXED ? "fixed" : pt->spec->kind == QH_SPEC_DERIVED ? "derived" : "?";
}

static void print_text(FILE *out, const QhFlow *f, GArray *rows) {
  const QhQuantizeOptions *o = f->opt;
  int nq = 0, nf = 0;
  GHashTableIter it;
  gpointer value;
  g_hash_table_iter_init(&it, f->report->nodes);
  while (g_hash_table_iter_next(&it, NULL, &value))
    ((QhQuantReportEntry *)value)->quantized ? nq++ : nf++;
  fprintf(out, "%s -> %s: backend %s, %" G_GINT64_FORMAT " calibration samples\n", o->model_path, o->output_path,
         f->name, f->samples);
  fprintf(out, "nodes: %d quantized, %d float\n", nq, nf);
  for (int i = 0; i < qh_graph_n_nodes(f->graph); i++) {
    const QhQuantReportEntry *e = g_hash_table_lookup(f->report->nodes, GINT_TO_POINTER(i));
    if (e == NULL || e->quantized)
      continue;
    const QhNode *n = qh_graph_node(f->graph, i);
    fprintf(out, "  float  %s (%s): %s\n", n->name, n->op_type, e->reason ? e->reason : "");
  }
  fprintf(out, "tensors, worst SQNR first:\n");
  for (guint i = 0; i < rows->len; i++) {
    const Row *r = &g_array_index(rows, Row, i);
    const QhQuantParams *q = r->pt->qparams;
    char sq[32];
    if (isnan(r->sqnr))
      g_strlcpy(sq, "-", sizeof sq);
    else
      g_snprintf(sq, sizeof sq, "%.1f dB", r->sqnr);
    if (q->n == 1)
      fprintf(out, "  %-8s %-40s %-5s scale %-14.9g zero point %-6d %-28s SQNR %s\n", strcmp(r->kind, "activation") == 0 ? "act" : r->kind,
             r->pt->name, dtype_word(q->dtype), (double)q->scale[0], q->zero_point[0], observer_of(r->pt), sq);
    else
      fprintf(out, "  %-8s %-40s %-5s %d channels (axis %d)                  %-28s SQNR %s\n", strcmp(r->kind, "activation") == 0 ? "act" : r->kind,
             r->pt->name, dtype_word(q->dtype), q->n, q->ch_axis, observer_of(r->pt), sq);
  }
  for (guint i = 0; f->output_sqnr && i < f->output_sqnr->len; i++)
    fprintf(out, "output %s: SQNR %.1f dB\n", qh_graph_value(f->graph, g_array_index(f->graph->outputs, int, i))->name,
           *(double *)f->output_sqnr->pdata[i]);
  for (guint i = 0; i < f->report->notes->len; i++)
    fprintf(out, "note: %s\n", (const char *)f->report->notes->pdata[i]);
}

static void add_double(JsonBuilder *b, const char *member, double v) {
  json_builder_set_member_name(b, member);
  if (isnan(v))
    json_builder_add_null_value(b);
  else if (isinf(v))
    json_builder_add_string_value(b, v > 0 ? "inf" : "-inf");
  else
    json_builder_add_double_value(b, v);
}

static char *report_json(const QhFlow *f, GArray *rows) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "schema_version");
  json_builder_add_int_value(b, 1);
  json_builder_set_member_name(b, "backend");
  json_builder_add_string_value(b, f->name);
  json_builder_set_member_name(b, "calibration_samples");
  json_builder_add_int_value(b, f->samples);
  json_builder_set_member_name(b, "nodes");
  json_builder_begin_array(b);
  for (int i = 0; i < qh_graph_n_nodes(f->graph); i++) {
    const QhQuantReportEntry *e = g_hash_table_lookup(f->report->nodes, GINT_TO_POINTER(i));
    if (e == NULL)
      continue;
    const QhNode *n = qh_graph_node(f->graph, i);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, n->name);
    json_builder_set_member_name(b, "op_type");
    json_builder_add_string_value(b, n->op_type);
    json_builder_set_member_name(b, "quantized");
    json_builder_add_boolean_value(b, e->quantized);
    if (e->pattern) {
      json_builder_set_member_name(b, "pattern");
      json_builder_add_string_value(b, e->pattern);
    }
    if (e->reason) {
      json_builder_set_member_name(b, "reason");
      json_builder_add_string_value(b, e->reason);
    }
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "tensors");
  json_builder_begin_array(b);
  for (guint i = 0; i < rows->len; i++) {
    const Row *r = &g_array_index(rows, Row, i);
    const QhQuantParams *q = r->pt->qparams;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, r->pt->name);
    json_builder_set_member_name(b, "kind");
    json_builder_add_string_value(b, r->kind);
    json_builder_set_member_name(b, "dtype");
    json_builder_add_string_value(b, dtype_word(q->dtype));
    json_builder_set_member_name(b, "observer");
    json_builder_add_string_value(b, observer_of(r->pt));
    json_builder_set_member_name(b, "quant_min");
    json_builder_add_int_value(b, q->quant_min);
    json_builder_set_member_name(b, "quant_max");
    json_builder_add_int_value(b, q->quant_max);
    if (q->n > 1) {
      json_builder_set_member_name(b, "axis");
      json_builder_add_int_value(b, q->ch_axis);
    }
    json_builder_set_member_name(b, "scale");
    json_builder_begin_array(b);
    for (int k = 0; k < q->n; k++)
      json_builder_add_double_value(b, q->scale[k]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "zero_point");
    json_builder_begin_array(b);
    for (int k = 0; k < q->n; k++)
      json_builder_add_int_value(b, q->zero_point[k]);
    json_builder_end_array(b);
    add_double(b, "sqnr_db", r->sqnr);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "outputs");
  json_builder_begin_array(b);
  for (guint i = 0; f->output_sqnr && i < f->output_sqnr->len; i++) {
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, qh_graph_value(f->graph, g_array_index(f->graph->outputs, int, i))->name);
    add_double(b, "sqnr_db", *(double *)f->output_sqnr->pdata[i]);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "notes");
  json_builder_begin_array(b);
  for (guint i = 0; i < f->report->notes->len; i++)
    json_builder_add_string_value(b, f->report->notes->pdata[i]);
  json_builder_end_array(b);
  json_builder_end_object(b);
  return qh_json_text(b);
}

gboolean qh_flow_report(QhFlow *f, GError **error) {
  GArray *rows = rows_of(f);
  gboolean ok = TRUE;
  if (f->opt->report_path || f->opt->report_json_out) {
    char *text = report_json(f, rows);
    GError *local = NULL;
    if (f->opt->report_path)
      ok = g_file_set_contents(f->opt->report_path, text, -1, &local);
    if (!ok) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s", local->message);
      g_error_free(local);
    }
    if (ok && f->opt->report_json_out)
      *f->opt->report_json_out = g_steal_pointer(&text);
    g_free(text);
  }
  if (ok && f->opt->report_text_out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (out == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_NOMEM, "no memory for the report");
      ok = FALSE;
    } else {
      print_text(out, f, rows);
      fclose(out);
      *f->opt->report_text_out = g_strdup(buf);
      free(buf);
    }
  } else if (ok && !f->opt->quiet) {
    print_text(stdout, f, rows);
  }
  g_array_unref(rows);
  return ok;
}
