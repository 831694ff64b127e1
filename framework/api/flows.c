/* The embedding API's flows over files: quantize and calibrate (quant/flow.h), bench,
 * deploy, the plugin listing and plugin-check (flows/flows.h). Each builds the internal
 * options from a QhostOptions, runs the flow quietly and hands its report back as a
 * string: the library never prints a report itself. */
#include <string.h>

#include "api/api-private.h"
#include "io/npy.h"
#include "quant/dynamic.h"
#include "quant/flow.h"

/* Quantize's options from the API's; calib arrays get their input names here when the
 * model has a single input and the caller gave none. */
static void quantize_options(const char *model_path, const QhostOptions *o, const char *output_path,
                             QhQuantizeOptions *q) {
  memset(q, 0, sizeof *q);
  q->model_path = model_path;
  q->backend = o->backend;
  q->search.paths = o->plugin_paths;
  q->search.dir = o->plugin_dir;
  q->backend_opts = o->backend_opts;
  q->config_path = o->qconfig_path;
  q->config_json = o->qconfig_json;
  q->calib_path = o->calib_arrays ? "calibration arrays" : o->calib_path;
  q->calib_arrays = o->calib_arrays;
  q->stats_paths = o->stats_paths;
  q->output_path = output_path;
  q->report_path = o->report_path;
  q->probe_path = o->probe_path;
  q->opset = o->opset;
  q->threads = o->threads;
  q->shard_index = o->shard_index;
  q->shard_count = o->shard_count;
  q->progress = o->progress;
  q->quiet = TRUE;
}

static QhostStatus *check_quantize_args(const char *model_path, const QhostOptions *o, const char *output) {
  QhostStatus *st = qh_api_need(model_path, "model path");
  if (st || (st = qh_api_need(o, "options")) || (st = qh_api_need(output, "output path")))
    return st;
  if (o->backend == NULL)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "no backend set (qhost_options_set_backend)");
  return NULL;
}

/* qhost_quantize with qhost_options_set_dynamic: nothing to calibrate, so none of the
 * calibration settings may be given (a silent no-op would hide a mistake). */
static QhostStatus *quantize_dynamic(const char *model_path, const QhostOptions *o, const char *output_path,
                                     char **out_report_json, char **out_report_text) {
  if (o->calib_path || o->calib_arrays || (o->stats_paths && o->stats_paths[0]) || o->qconfig_path ||
      o->qconfig_json || o->probe_path)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT,
                         "dynamic quantization takes no calibration data, statistics files, qconfig or probe");
  QhDynamicOptions d = {.model_path = model_path, .output_path = output_path, .backend = o->backend,
                        .per_channel = o->dynamic_per_channel, .report_path = o->report_path};
  char *json = NULL, *text = NULL;
  d.report_json_out = out_report_json ? &json : NULL;
  d.report_text_out = out_report_text ? &text : NULL;
  GError *error = NULL;
  if (!qh_quantize_dynamic(&d, &error))
    return qh_api_status_from_error(error);
  if (out_report_json)
    *out_report_json = json;
  if (out_report_text)
    *out_report_text = text;
  return NULL;
}

QhostStatus *qhost_quantize(const char *model_path, const QhostOptions *options, const char *output_path,
                            char **out_report_json, char **out_report_text) {
  QhostStatus *st = qh_api_need(model_path, "model path");
  if (st || (st = qh_api_need(options, "options")) || (st = qh_api_need(output_path, "output path")))
    return st;
  if (options->dynamic)
    return quantize_dynamic(model_path, options, output_path, out_report_json, out_report_text);
  if (options->dynamic_per_channel)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT,
                         "per-channel dynamic weights set without dynamic quantization (qhost_options_set_dynamic)");
  st = check_quantize_args(model_path, options, output_path);
  if (st)
    return st;
  gboolean has_stats = options->stats_paths && options->stats_paths[0];
  if (!has_stats && options->calib_path == NULL && options->calib_arrays == NULL)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "no calibration data and no statistics files set");
  QhQuantizeOptions q;
  quantize_options(model_path, options, output_path, &q);
  char *json = NULL, *text = NULL;
  q.report_json_out = out_report_json ? &json : NULL;
  q.report_text_out = out_report_text ? &text : NULL;
  GError *error = NULL;
  if (!qh_quantize(&q, &error)) {
    g_free(json);
    g_free(text);
    return qh_api_status_from_error(error);
  }
  if (out_report_json)
    *out_report_json = json;
  if (out_report_text)
    *out_report_text = text;
  return NULL;
}

QhostStatus *qhost_calibrate(const char *model_path, const QhostOptions *options, const char *stats_path,
                             int64_t *out_samples, int64_t *out_points) {
  QhostStatus *st = check_quantize_args(model_path, options, stats_path);
  if (st)
    return st;
  if (options->calib_path == NULL && options->calib_arrays == NULL)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "no calibration data set");
  QhQuantizeOptions q;
  quantize_options(model_path, options, stats_path, &q);
  q.stats_paths = NULL;
  q.report_path = NULL;
  int64_t samples = 0, points = 0;
  q.samples_out = &samples;
  q.points_out = &points;
  GError *error = NULL;
  if (!qh_calibrate(&q, &error))
    return qh_api_status_from_error(error);
  if (out_samples)
    *out_samples = samples;
  if (out_points)
    *out_points = points;
  return NULL;
}

static gboolean bench_to(gpointer data, FILE *out, GError **error) { return qh_bench(data, out, error); }

QhostStatus *qhost_bench(const char *model_path, const QhostOptions *options, QhostFormat format,
                         char **out_report) {
  QhostStatus *st = qh_api_need(model_path, "model path");
  if (st || (st = qh_api_need(out_report, "out")))
    return st;
  QhostOptions defaults;
  qh_api_options_defaults(&defaults);
  const QhostOptions *o = options ? options : &defaults;
  QhBenchOptions b = {.model_path = model_path, .input_path = o->input_path, .warmup = o->warmup,
                      .runs = o->runs, .no_fp32 = !o->fp32, .json = format == QHOST_FORMAT_JSON,
                      .progress = o->progress};
  qh_api_backend_choice(o, &b.backend);
  return qh_api_capture(bench_to, &b, out_report);
}

QhostStatus *qhost_deploy(const char *model_path, const QhostOptions *options, const char *dir, int force,
                          uint64_t *out_bytes, char **out_backend) {
  QhostStatus *st = qh_api_need(model_path, "model path");
  if (st || (st = qh_api_need(options, "options")) || (st = qh_api_need(dir, "dir")))
    return st;
  if (options->backend == NULL)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "no backend set (qhost_options_set_backend)");
  QhBackendChoice choice;
  qh_api_backend_choice(options, &choice);
  gsize written = 0;
  char *name = NULL;
  GError *error = NULL;
  if (!qh_deploy(model_path, &choice, dir, force != 0, &written, &name, &error))
    return qh_api_status_from_error(error);
  if (out_bytes)
    *out_bytes = written;
  if (out_backend)
    *out_backend = name;
  else
    g_free(name);
  return NULL;
}

typedef struct {
  QhBackendChoice choice;
  const char *name;
  gboolean json;
  GString *problems;
  gboolean conforms;
} PluginJob;

static gboolean plugins_to(gpointer data, FILE *out, GError **error) {
  (void)error;
  PluginJob *j = data;
  qh_plugins_report(&j->choice.search, j->json, out, j->problems);
  return TRUE;
}

QhostStatus *qhost_plugins_list(const QhostOptions *options, QhostFormat format, char **out_report,
                                char **out_warnings) {
  QhostStatus *st = qh_api_need(out_report, "out");
  if (st)
    return st;
  PluginJob job = {.json = format == QHOST_FORMAT_JSON, .problems = g_string_new("")};
  qh_api_backend_choice(options, &job.choice);
  st = qh_api_capture(plugins_to, &job, out_report);
  if (st == NULL && out_warnings)
    *out_warnings = g_string_free(job.problems, FALSE);
  else
    g_string_free(job.problems, TRUE);
  return st;
}

static gboolean check_to(gpointer data, FILE *out, GError **error) {
  PluginJob *j = data;
  return qh_plugin_check_report(&j->choice.search, j->name, j->choice.options, j->json, out, &j->conforms,
                                error);
}

QhostStatus *qhost_plugin_check(const char *name_or_path, const QhostOptions *options, QhostFormat format,
                                char **out_report, int *out_conforms) {
  QhostStatus *st = qh_api_need(name_or_path, "plugin");
  if (st || (st = qh_api_need(out_report, "out")) || (st = qh_api_need(out_conforms, "out_conforms")))
    return st;
  PluginJob job = {.name = name_or_path, .json = format == QHOST_FORMAT_JSON};
  qh_api_backend_choice(options, &job.choice);
  st = qh_api_capture(check_to, &job, out_report);
  if (st == NULL)
    *out_conforms = job.conforms ? 1 : 0;
  return st;
}
