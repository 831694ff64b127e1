/* The quantization flow (flow.h): one function per stage, run in docs/design.md's order by
 * qh_quantize and qh_calibrate. The plugin is loaded once, after its file was scanned
 * out of process; every plugin call goes through a graph view with exactly the
 * permissions that stage allows. */
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "exec/plan.h"
#include "io/onnx.h"
#include "hostapi/graph-view.h"
#include "hostapi/host-private.h"
#include "hostapi/qdq-qparams.h"
#include "quant/backend-annotate.h"
#include "quant/calib-data.h"
#include "quant/const-fold.h"
#include "quant/convert.h"
#include "quant/flow-private.h"
#include "quant/observer-private.h"
#include "quant/plugin-observer.h"
#include "quant/stats.h"

/* ---- plugin ---- */

static gboolean load_plugin(QhFlow *f, GError **error) {
  f->backend = qh_backend_open(&f->opt->search, f->opt->backend, f->opt->backend_opts, f->opt->threads, error);
  if (f->backend == NULL)
    return FALSE;
  f->name = qh_backend_name(f->backend);
  f->bc = qh_backend_config(f->backend);
  f->annotate = qh_backend_annotate_ops(f->backend);
  if (f->bc == NULL && f->annotate == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "plugin '%s' supplies neither a backend_config nor annotate: it cannot quantize", f->name);
    return FALSE;
  }
  return TRUE;
}

static gboolean graph_sound(QhFlow *f, const char *after, GError **error) {
  GArray *order = NULL;
  if (!qh_graph_topo_order(f->graph, &order, error)) {
    g_prefix_error(error, "plugin '%s': %s left the graph broken: ", f->name, after);
    return FALSE;
  }
  g_array_unref(order);
  return TRUE;
}

static gboolean transform(QhFlow *f, GError **error) {
  /* Before anything looks at the graph: a bias PyTorch's exporter shared through an
   * Identity is a constant of each conv, not an activation to observe. */
  int folded = 0;
  if (!qh_quant_fold_constants(f->graph, &folded, error)) {
    g_prefix_error(error, "%s: ", f->opt->model_path);
    return FALSE;
  }
  if (folded > 0)
    qh_quant_report_note(f->report, "%d node%s computing constants only (Identity of shared initializers, "
                         "...) folded into initializers, one per consumer", folded, folded == 1 ? "" : "s");
  if (qh_backend_transform_ops(f->backend)) {
    QhGraphView *view = qh_graph_view_new(f->graph, QH_VIEW_READ);
    gboolean ok = qh_backend_transform_graph(f->backend, view, error);
    qh_graph_view_free(view);
    if (!ok || !graph_sound(f, "transform_for_annotation", error))
      return FALSE;
  }
  if (f->bc && !qh_backend_fold_batchnorm(f->bc, f->graph, error))
    return FALSE;
  return TRUE;
}

/* ---- annotation ---- */

static char **plugin_observer_names(const QhFlow *f) {
  size_t n = qh_backend_n_observers(f->backend);
  char **names = g_new0(char *, n + 1);
  for (size_t i = 0; i < n; i++)
    names[i] = g_strdup(qh_backend_observer(f->backend, i)->name);
  return names;
}

static gboolean annotate(QhFlow *f, GError **error) {
  char **observers = plugin_observer_names(f);
  f->mapping = qh_qconfig_mapping_new(f->bc, (const char *const *)observers, error);
  f->set = qh_annotation_set_new();
  for (char **p = observers; *p; p++)
    qh_annotation_set_add_observer(f->set, *p);
  g_strfreev(observers);
  if (f->mapping == NULL)
    return FALSE;
  if (f->opt->config_json &&
      !qh_qconfig_mapping_load_data(f->mapping, f->opt->config_path ? f->opt->config_path : "qconfig",
                                    f->opt->config_json, error))
    return FALSE;
  if (!f->opt->config_json && f->opt->config_path &&
      !qh_qconfig_mapping_load_file(f->mapping, f->opt->config_path, error))
    return FALSE;
  if (f->bc && !qh_backend_annotate(f->bc, f->graph, f->mapping, f->set, f->report, error))
    return FALSE;
  if (f->annotate) {
    /* what the declarative pass decided, to tell the plugin's changes from it */
    GPtrArray *before = qh_flow_report_snapshot(f);
    QhGraphView *view = qh_graph_view_new(f->graph, QH_VIEW_READ);
    qh_graph_view_set_annotations(view, f->set);
    qh_graph_view_set_qconfig_hook(view, qh_qconfig_view_hook, f->mapping);
    gboolean ok = qh_backend_annotate_graph(f->backend, view, error);
    if (ok && !qh_annotation_set_validate(f->set, f->graph, error)) {
      g_prefix_error(error, "plugin '%s': annotate: ", f->name);
      ok = FALSE;
    }
    ok = ok && qh_backend_validate_graph(f->backend, view, error);
    qh_graph_view_free(view);
    if (ok)
      qh_flow_report_imperative(f, before);
    g_ptr_array_unref(before);
    if (!ok)
      return FALSE;
  } else if (!qh_annotation_set_validate(f->set, f->graph, error)) {
    return FALSE;
  }
  return TRUE;
}

/* ---- observers ---- */

static const QhObserverOps *plugin_observer(const QhFlow *f, const char *name) {
  return name ? qh_backend_find_observer(f->backend, name) : NULL;
}

static QhObserver *make_observer(gpointer data, const QhQuantSpec *spec, int rank, const int64_t *dims,
                                 GError **error) {
  QhFlow *f = data;
  const QhObserverOps *ops = plugin_observer(f, spec->observer);
  if (ops)
    return qh_plugin_observer_new(f->backend, ops, spec, rank, dims, error);
  QhObserverConfig *cfg = qh_observer_config_from_spec(spec);
  QhObserver *obs = qh_observer_config_check(cfg, error) ? qh_observer_new(cfg, rank, dims, error) : NULL;
  qh_observer_config_free(cfg);
  return obs;
}

static QhObserver *load_observer(gpointer data, const QhQuantPoint *pt, const guint8 *bytes, gsize size,
                                 GError **error) {
  QhFlow *f = data;
  const QhObserverConfig *cfg = qh_observer_config(pt->observer);
  const QhObserverOps *ops = plugin_observer(f, pt->spec->observer);
  if (ops)
    return qh_plugin_observer_load(f->backend, ops, pt->spec, pt->observer->rank, pt->observer->dims, bytes,
                                   size, error);
  return qh_observer_load(cfg, pt->observer->rank, pt->observer->dims, bytes, size, error);
}

/* ---- calibration ---- */

QhCalibSource *qh_flow_open_calib(const QhFlow *f, GError **error) {
  if (f->opt->calib_arrays)
    return qh_calib_open_arrays(f->opt->calib_path, f->graph, f->opt->calib_arrays, error);
  return qh_calib_open(f->opt->calib_path, f->graph, error);
}

static gboolean open_plan(QhFlow *f, GError **error) {
  f->calib = qh_flow_open_calib(f, error);
  if (f->calib == NULL)
    return FALSE;
  f->plan = qh_plan_new(f->graph, qh_calib_shapes(f->calib), FALSE, error);
  if (f->plan == NULL)
    g_prefix_error(error, "%s: ", f->opt->model_path);
  return f->plan != NULL;
}

static void progress(const QhFlow *f, int64_t done, int64_t total) {
  if (!f->opt->progress)
    return;
  int width = 30, filled = total > 0 ? (int)(done * width / total) : width;
  fprintf(stderr, "\rcalibrating [%.*s%*s] %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, filled,
          "##############################", width - filled, "", done, total);
  if (done == total)
    fputc('\n', stderr);
  fflush(stderr);
}

static gboolean calibrate(QhFlow *f, GError **error) {
  int64_t n = qh_calib_count(f->calib), begin = 0, end = n;
  if (f->opt->shard_count > 0) {
    begin = n * f->opt->shard_index / f->opt->shard_count;
    end = n * (f->opt->shard_index + 1) / f->opt->shard_count;
    if (begin == end) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: shard %d/%d of %" G_GINT64_FORMAT " samples is empty",
                  f->opt->calib_path, f->opt->shard_index, f->opt->shard_count, n);
      return FALSE;
    }
  }
  QhExecContext ctx = {0};
  ctx.pool = f->pool;
  qh_plan_set_value_hook(f->plan, qh_quant_points_observe, f->points);
  gboolean ok = TRUE;
  for (int64_t i = begin; i < end && ok; i++) {
    QhTensor **sample = qh_calib_read(f->calib, i, error);
    QhTensor **outs = NULL;
    ok = sample && qh_plan_run(f->plan, &ctx, (const QhTensor *const *)sample, &outs, error);
    if (!ok && sample)
      g_prefix_error(error, "%s: sample %" G_GINT64_FORMAT ": ", f->opt->calib_path, i);
    for (guint k = 0; outs && k < f->graph->outputs->len; k++)
      qh_tensor_free(outs[k]);
    g_free(outs);
    qh_calib_free_sample(f->calib, sample);
    progress(f, i - begin + 1, end - begin);
  }
  qh_plan_set_value_hook(f->plan, NULL, NULL);
  qh_exec_context_clear(&ctx);
  f->samples = end - begin;
  return ok;
}

/* Constants stored with the backend's rounding (QhConstantRounding over its reference
 * numerics): a DPU rounds weights half away from zero where ONNX rounds half to even. */
static gboolean backend_rounding(gpointer data, const QhTensor *t, const QhQuantParams *q, float *fake) {
  QhFlow *f = data;
  return qh_flow_plugin_fake_quantize(f, t, q, fake);
}

/* ---- refine ---- */

static gboolean refine_get(gpointer data, const QhGraph *graph, const QhEdgeRef *edge, QhQParams *out,
                           gboolean *found, GError **error) {
  (void)graph;
  (void)error;
  QhQuantPoint *pt = qh_quant_points_for_edge(((QhFlow *)data)->points, edge);
  *found = pt && pt->qparams;
  if (*found) {
    const QhQuantParams *q = pt->qparams;
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
  return TRUE;
}

static gboolean refine_set(gpointer data, QhGraph *graph, const QhEdgeRef *edge, const QhQParams *qp,
                           const char *reason, GError **error) {
  (void)graph;
  QhFlow *f = data;
  QhQuantPoint *pt = qh_quant_points_for_edge(f->points, edge);
  if (pt == NULL || pt->qparams == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "that edge is not quantized");
    return FALSE;
  }
  QhQuantParams *q = qh_quant_params_new((int)qp->count);
  q->dtype = qp->dtype;
  q->qscheme = qp->qscheme;
  q->quant_min = qp->quant_min;
  q->quant_max = qp->quant_max;
  q->ch_axis = qp->count > 1 ? qp->ch_axis : -1;
  memcpy(q->scale, qp->scale, sizeof(float) * qp->count);
  memcpy(q->zero_point, qp->zero_point, sizeof(int32_t) * qp->count);
  qh_quant_report_note(f->report, "%s%s%s: '%s': scale %.9g -> %.9g, zero point %d -> %d (%s)",
                       f->stage ? f->stage : "refine", f->stage ? " by plugin " : "",
                       f->stage ? f->name : "", pt->name ? pt->name : "?", (double)pt->qparams->scale[0],
                       (double)q->scale[0],
                       pt->qparams->zero_point[0], q->zero_point[0], reason ? reason : "no reason given");
  qh_quant_params_free(pt->qparams);
  pt->qparams = q;
  return TRUE;
}

static gboolean refine(QhFlow *f, GError **error) {
  if (qh_backend_refine_ops(f->backend) == NULL)
    return TRUE;
  QhGraphView *view = qh_graph_view_new(f->graph, QH_VIEW_READ);
  qh_graph_view_set_annotations(view, f->set);
  qh_graph_view_set_qparams_hooks(view, refine_get, refine_set, f);
  gboolean ok = qh_backend_refine_graph(f->backend, view, error);
  qh_graph_view_free(view);
  return ok;
}

/* ---- the 1.2 passes: post_calibration, post_convert ---- */

/* constant_set's hook: the view has checked the value is a float constant of that size
 * with finite elements; store them and put the change on record. */
static gboolean set_constant(gpointer data, QhGraph *graph, uint32_t value, const float *values,
                             size_t nbytes, const char *reason, GError **error) {
  QhFlow *f = data;
  QhValue *v = qh_graph_value(graph, (int)value);
  QhTensor *t = qh_tensor_copy(v->initializer, error);
  if (t == NULL)
    return FALSE;
  const float *old = v->initializer->data;
  size_t n = nbytes / sizeof(float), changed = 0;
  double largest = 0;
  for (size_t i = 0; i < n; i++)
    if (old[i] != values[i]) {
      changed++;
      largest = MAX(largest, fabs((double)values[i] - (double)old[i]));
    }
  memcpy(t->data, values, nbytes);
  qh_value_set_initializer(v, t);
  qh_quant_report_note(f->report, "post_calibration by plugin %s: weight '%s': %zu of %zu values changed, "
                       "largest change %.9g (%s)", f->name, v->name, changed, n, largest, reason);
  return TRUE;
}

static gboolean post_calibration(QhFlow *f, GError **error) {
  const QhPassOps *p = qh_backend_passes(f->backend);
  if (p == NULL || p->post_calibration == NULL)
    return TRUE;
  QhGraphView *view = qh_graph_view_new(f->graph, QH_VIEW_READ);
  qh_graph_view_set_annotations(view, f->set);
  qh_graph_view_set_qparams_hooks(view, refine_get, refine_set, f);
  qh_graph_view_set_constant_hook(view, set_constant, f);
  f->stage = "post_calibration";
  gboolean ok = qh_backend_post_calibration(f->backend, view, error);
  f->stage = NULL;
  qh_graph_view_free(view);
  /* derived qparams (an int32 bias at sx*sw) follow the scales the pass changed */
  return ok && qh_quant_points_rederive(f->points, error);
}

typedef struct {
  char *name;
  QhDType dtype;
} Port;

static GArray *ports_of(const QhGraph *g, const GArray *ids) {
  GArray *ports = g_array_new(FALSE, TRUE, sizeof(Port));
  for (guint i = 0; i < ids->len; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(ids, int, i));
    Port p = {g_strdup(v->name), v->dtype};
    g_array_append_val(ports, p);
  }
  return ports;
}

static void ports_free(GArray *ports) {
  for (guint i = 0; i < ports->len; i++)
    g_free(g_array_index(ports, Port, i).name);
  g_array_unref(ports);
}

static gboolean same_ports(const QhFlow *f, const GArray *before, const GArray *ids, const char *what,
                           GError **error) {
  gboolean same = before->len == ids->len;
  for (guint i = 0; same && i < ids->len; i++) {
    const QhValue *v = qh_graph_value(f->graph, g_array_index(ids, int, i));
    const Port *p = &g_array_index(before, Port, i);
    same = strcmp(p->name, v->name) == 0 && p->dtype == v->dtype;
  }
  if (!same)
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "plugin '%s': post_convert changed the graph's %s "
                "(names or dtypes); a pass may rewrite the inside of the graph only", f->name, what);
  return same;
}

/* What a post_convert rewrite must leave: an ordered graph with the same inputs and
 * outputs, Q/DQ nodes with sound constant parameters, and shapes for every node. */
static gboolean converted_graph_sound(QhFlow *f, const GArray *inputs, const GArray *outputs,
                                      GError **error) {
  if (!graph_sound(f, "post_convert", error) || !same_ports(f, inputs, f->graph->inputs, "inputs", error) ||
      !same_ports(f, outputs, f->graph->outputs, "outputs", error))
    return FALSE;
  for (int i = 0; i < qh_graph_n_nodes(f->graph); i++) {
    const QhNode *n = qh_graph_node(f->graph, i);
    if (n->is_removed || (*n->domain && strcmp(n->domain, "ai.onnx") != 0))
      continue;
    gboolean q = strcmp(n->op_type, "QuantizeLinear") == 0, dq = strcmp(n->op_type, "DequantizeLinear") == 0;
    if (!q && !dq)
      continue;
    QhQParams qp = {0};
    int x = q ? (n->n_outputs ? n->outputs[0] : -1) : qh_node_input(n, 0);
    int r = qh_qdq_read_qparams(f->graph, n, x, &qp, error);
    qh_qdq_qparams_clear(&qp);
    if (r == 0)
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node '%s' (%s): its scale or zero point is not a "
                  "constant of an integer type", n->name, n->op_type);
    if (r != 1) {
      g_prefix_error(error, "plugin '%s': post_convert left a broken %s: ", f->name, n->op_type);
      return FALSE;
    }
  }
  QhPlan *shapes = qh_plan_new(f->graph, NULL, TRUE, error);
  if (shapes == NULL) {
    g_prefix_error(error, "plugin '%s': post_convert left the graph broken: ", f->name);
    return FALSE;
  }
  qh_plan_free(shapes);
  return TRUE;
}

static gboolean post_convert(QhFlow *f, GError **error) {
  const QhPassOps *p = qh_backend_passes(f->backend);
  if (p == NULL || p->post_convert == NULL)
    return TRUE;
  int nodes_before = 0, nodes_after = 0;
  for (int i = 0; i < qh_graph_n_nodes(f->graph); i++)
    nodes_before += !qh_graph_node(f->graph, i)->is_removed;
  GArray *inputs = ports_of(f->graph, f->graph->inputs), *outputs = ports_of(f->graph, f->graph->outputs);
  QhGraphView *view = qh_graph_view_new(f->graph, QH_VIEW_READ);
  QhQdqReader *reader = qh_qdq_reader_new();
  qh_qdq_reader_attach(reader, view);
  gboolean ok = qh_backend_post_convert(f->backend, view, error);
  qh_graph_view_free(view);
  qh_qdq_reader_free(reader);
  ok = ok && converted_graph_sound(f, inputs, outputs, error);
  ports_free(inputs);
  ports_free(outputs);
  for (int i = 0; ok && i < qh_graph_n_nodes(f->graph); i++)
    nodes_after += !qh_graph_node(f->graph, i)->is_removed;
  if (ok && nodes_after != nodes_before)
    qh_quant_report_note(f->report, "post_convert by plugin %s: %d nodes in the QDQ graph, %d before", f->name,
                         nodes_after, nodes_before);
  return ok;
}

/* ---- the whole flow ---- */

static void flow_clear(QhFlow *f) {
  if (f->plan)
    qh_plan_free(f->plan);
  qh_quant_points_free(f->points);
  qh_calib_close(f->calib);
  qh_annotation_set_free(f->set);
  qh_qconfig_mapping_free(f->mapping);
  qh_quant_report_free(f->report);
  qh_flow_probe_free(f);
  if (f->pool)
    qh_thread_pool_free(f->pool);
  qh_graph_free(f->graph);
  qh_backend_free(f->backend);
  g_free(f->origin.model_hash);
  g_free(f->origin.backend);
}

static gboolean hash_model(QhFlow *f, GError **error) {
  char *data = NULL;
  gsize len = 0;
  GError *local = NULL;
  if (!g_file_get_contents(f->opt->model_path, &data, &len, &local)) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  f->origin.model_hash = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, len);
  f->origin.backend = g_strdup(f->name);
  g_free(data);
  return TRUE;
}

/* Everything up to calibrated (or merged) observers. */
static gboolean prepare(QhFlow *f, gboolean need_calib, GError **error) {
  f->report = qh_quant_report_new();
  f->graph = qh_onnx_load(f->opt->model_path, error);
  if (f->graph == NULL || !load_plugin(f, error) || !hash_model(f, error) || !transform(f, error) ||
      !annotate(f, error))
    return FALSE;
  f->pool = qh_thread_pool_new(f->opt->threads);
  if (need_calib) {
    if (!open_plan(f, error))
      return FALSE;
  } else {
    f->plan = qh_plan_new(f->graph, NULL, FALSE, error);
    if (f->plan == NULL) {
      g_prefix_error(error, "%s: ", f->opt->model_path);
      return FALSE;
    }
  }
  f->points = qh_quant_points_new(f->graph, f->set, f->plan, make_observer, f, error);
  if (f->points)
    f->points->backend = f->backend;
  if (f->points == NULL) {
    g_prefix_error(error, "%s: ", f->opt->model_path);
    return FALSE;
  }
  return TRUE;
}

gboolean qh_calibrate(const QhQuantizeOptions *opt, GError **error) {
  QhFlow f = {.opt = opt};
  gboolean ok = prepare(&f, TRUE, error) && calibrate(&f, error) &&
                qh_stats_save(opt->output_path, &f.origin, f.points, f.samples, error);
  if (ok && !opt->quiet)
    printf("%s: %" G_GINT64_FORMAT " samples, %u quantization points\n", opt->output_path, f.samples,
           f.points->points->len);
  if (ok && opt->samples_out)
    *opt->samples_out = f.samples;
  if (ok && opt->points_out)
    *opt->points_out = f.points->points->len;
  flow_clear(&f);
  return ok;
}

static gboolean merge_stats(QhFlow *f, GError **error) {
  int64_t total = 0;
  for (int i = 0; f->opt->stats_paths[i]; i++) {
    int64_t samples = 0;
    if (!qh_stats_load(f->opt->stats_paths[i], &f->origin, f->points, i == 0, load_observer, f, &samples, error))
      return FALSE;
    total += samples;
  }
  f->samples = total;
  return TRUE;
}

/* What the plugin reported (host->report) goes into the quantize report's notes, so a
 * choice the plugin made by itself (x86's reduce_range on a CPU without VNNI) is on
 * record next to the qparams it changed. */
static void report_plugin_findings(QhFlow *f, const QhReportSink *sink) {
  static const char *const words[] = {"error: ", "warning: ", "info: ", "debug: "};
  const char *name = f->name ? f->name : "?";
  for (guint i = 0; i < sink->findings->len; i++) {
    const char *finding = g_ptr_array_index(sink->findings, i);
    /* host->log lines ("log LEVEL: ...") go back to the log; report lines are notes */
    gboolean logged = g_str_has_prefix(finding, "log ");
    const char *rest = logged ? finding + 4 : finding;
    int level = QH_LOG_INFO;
    for (int k = 0; k < 4; k++)
      if (g_str_has_prefix(rest, words[k])) {
        level = k;
        rest += strlen(words[k]);
      }
    qh_log(level, "plugin %s: %s", name, rest); /* as without a sink: the log level filters */
    if (!logged && level != QH_LOG_DEBUG && f->report)
      qh_quant_report_note(f->report, "plugin '%s': %s", name, finding);
  }
}

gboolean qh_quantize(const QhQuantizeOptions *opt, GError **error) {
  QhFlow f = {.opt = opt};
  QhReportSink sink = {g_ptr_array_new_with_free_func(g_free)};
  QhReportSink *prev_sink = qh_plugin_set_report_sink(&sink);
  gboolean from_stats = opt->stats_paths && opt->stats_paths[0];
  gboolean ok = prepare(&f, !from_stats, error);
  if (ok)
    ok = from_stats ? merge_stats(&f, error) : calibrate(&f, error);
  ok = ok && qh_flow_probe_float(&f, error) && qh_quant_points_compute(f.points, error) && refine(&f, error) &&
       post_calibration(&f, error);
  if (ok) {
    qh_flow_weight_sqnr(&f);
    qh_plan_free(f.plan); /* the plan borrows the float graph, which convert rewrites */
    f.plan = NULL;
    const QhReferenceNumericsOps *rn = f.backend ? qh_backend_reference_numerics(f.backend) : NULL;
    if (rn)
      qh_quant_report_note(f.report, "integer weights and biases rounded by plugin %s's reference numerics",
                           f.name);
    ok = qh_quant_convert_rounded(f.graph, f.points, rn ? backend_rounding : NULL, &f, error) &&
         post_convert(&f, error) && qh_quant_choose_opset(f.graph, opt->opset, error);
    if (!ok)
      g_prefix_error(error, "%s: ", opt->model_path);
  }
  qh_plugin_set_report_sink(prev_sink);
  report_plugin_findings(&f, &sink);
  g_ptr_array_unref(sink.findings);
  /* the report first: if the model cannot be written, the report is taken back */
  ok = ok && qh_flow_probe_quantized(&f, error) && qh_flow_report(&f, error);
  if (ok && !qh_onnx_save(f.graph, opt->output_path, error)) {
    if (opt->report_path)
      g_unlink(opt->report_path);
    ok = FALSE;
  }
  flow_clear(&f);
  return ok;
}
