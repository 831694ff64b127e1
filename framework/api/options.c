/* QhostOptions: the settings of every flow of the embedding API, set one by one through
 * functions so that new settings are new functions (qhost.h, Versioning). Strings and
 * arrays are copied; a bad value is refused when it is set, with the rule it broke. */
#include <string.h>

#include "api/api-private.h"
#include "io/npy.h"

void qh_api_options_defaults(QhostOptions *o) {
  memset(o, 0, sizeof *o);
  o->threads = 1;
  o->warmup = 3;
  o->runs = 20;
  o->fp32 = TRUE;
}

void qh_api_backend_choice(const QhostOptions *o, QhBackendChoice *out) {
  memset(out, 0, sizeof *out);
  out->threads = 1;
  if (o == NULL)
    return;
  out->search.paths = o->plugin_paths;
  out->search.dir = o->plugin_dir;
  out->name = o->backend;
  out->options = o->backend_opts;
  out->threads = o->threads;
}

QhostStatus *qhost_options_new(QhostOptions **out) {
  QhostStatus *st = qh_api_need(out, "out");
  if (st)
    return st;
  *out = g_new0(QhostOptions, 1);
  qh_api_options_defaults(*out);
  return NULL;
}

static void clear_calibration(QhostOptions *o) {
  g_clear_pointer(&o->calib_path, g_free);
  g_clear_pointer(&o->calib_arrays, g_ptr_array_unref);
}

void qhost_options_free(QhostOptions *o) {
  if (o == NULL)
    return;
  g_free(o->backend);
  g_strfreev(o->plugin_paths);
  g_free(o->plugin_dir);
  g_strfreev(o->backend_opts);
  clear_calibration(o);
  g_free(o->qconfig_path);
  g_free(o->qconfig_json);
  g_free(o->probe_path);
  g_free(o->report_path);
  g_strfreev(o->stats_paths);
  g_free(o->input_path);
  g_free(o);
}

static void strv_append(char ***v, const char *s) {
  guint n = *v ? g_strv_length(*v) : 0;
  *v = g_renew(char *, *v, n + 2);
  (*v)[n] = g_strdup(s);
  (*v)[n + 1] = NULL;
}

/* Set *field to a copy of value (both checked non-NULL). */
static QhostStatus *set_string(QhostOptions *o, char **field, const char *value, const char *what) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st || (st = qh_api_need(value, what)))
    return st;
  g_free(*field);
  *field = g_strdup(value);
  return NULL;
}

static QhostStatus *add_string(QhostOptions *o, char ***field, const char *value, const char *what) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st || (st = qh_api_need(value, what)))
    return st;
  strv_append(field, value);
  return NULL;
}

QhostStatus *qhost_options_set_backend(QhostOptions *o, const char *name_or_path) {
  return set_string(o, o ? &o->backend : NULL, name_or_path, "backend");
}

QhostStatus *qhost_options_add_plugin_path(QhostOptions *o, const char *path) {
  return add_string(o, o ? &o->plugin_paths : NULL, path, "plugin path");
}

QhostStatus *qhost_options_set_plugin_dir(QhostOptions *o, const char *dir) {
  return set_string(o, o ? &o->plugin_dir : NULL, dir, "plugin directory");
}

QhostStatus *qhost_options_add_backend_option(QhostOptions *o, const char *key_value) {
  return add_string(o, o ? &o->backend_opts : NULL, key_value, "backend option");
}

QhostStatus *qhost_options_set_threads(QhostOptions *o, int threads) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st)
    return st;
  if (threads < 1 || threads > 256)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "threads must be between 1 and 256, not %d", threads);
  o->threads = threads;
  return NULL;
}

QhostStatus *qhost_options_set_progress(QhostOptions *o, int on) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st == NULL)
    o->progress = on != 0;
  return st;
}

QhostStatus *qhost_options_set_calibration_file(QhostOptions *o, const char *path) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st || (st = qh_api_need(path, "calibration file")))
    return st;
  clear_calibration(o);
  o->calib_path = g_strdup(path);
  return NULL;
}

/* A copy of a caller's tensor, its fields checked against each other. */
static QhostStatus *copy_tensor(const QhostTensor *t, const char *what, QhTensor **out) {
  if (qhost_dtype_size(t->dtype) == 0)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "%s: unknown dtype %d", what, (int)t->dtype);
  if (t->rank < 0 || t->rank > QHOST_MAX_RANK || (t->rank > 0 && t->shape == NULL))
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "%s: rank %d (0 to %d, with a shape)", what,
                         (int)t->rank, QHOST_MAX_RANK);
  QhShape shape = qh_shape_make(t->rank, t->shape);
  GError *error = NULL;
  QhTensor *c = qh_tensor_new((QhDType)t->dtype, &shape, &error);
  if (c == NULL) {
    g_prefix_error(&error, "%s: ", what);
    return qh_api_status_from_error(error);
  }
  if (c->nbytes != t->nbytes || (c->nbytes > 0 && t->data == NULL)) {
    QhostStatus *st = qh_api_status(QHOST_STATUS_INVALID_ARGUMENT,
                                    "%s: %zu bytes given, its dtype and shape need %zu", what, t->nbytes,
                                    c->nbytes);
    qh_tensor_free(c);
    return st;
  }
  if (c->nbytes)
    memcpy(c->data, t->data, c->nbytes);
  *out = c;
  return NULL;
}

QhostStatus *qhost_options_set_calibration_tensors(QhostOptions *o, const QhostTensor *arrays, size_t count) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st || (st = qh_api_need(arrays, "calibration arrays")))
    return st;
  if (count == 0)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "calibration arrays: none given");
  GPtrArray *copies = g_ptr_array_new_with_free_func((GDestroyNotify)qh_named_tensor_free);
  for (size_t i = 0; i < count && st == NULL; i++) {
    QhNamedTensor *nt = g_new0(QhNamedTensor, 1);
    nt->name = g_strdup(arrays[i].name);
    g_ptr_array_add(copies, nt);
    char *what = g_strdup_printf("calibration array %zu", i);
    st = copy_tensor(&arrays[i], what, &nt->tensor);
    g_free(what);
  }
  if (st) {
    g_ptr_array_unref(copies);
    return st;
  }
  clear_calibration(o);
  o->calib_arrays = copies;
  return NULL;
}

QhostStatus *qhost_options_set_qconfig_file(QhostOptions *o, const char *path) {
  QhostStatus *st = set_string(o, o ? &o->qconfig_path : NULL, path, "qconfig file");
  if (st == NULL)
    g_clear_pointer(&o->qconfig_json, g_free);
  return st;
}

QhostStatus *qhost_options_set_qconfig_json(QhostOptions *o, const char *json) {
  QhostStatus *st = set_string(o, o ? &o->qconfig_json : NULL, json, "qconfig JSON");
  if (st == NULL)
    g_clear_pointer(&o->qconfig_path, g_free);
  return st;
}

QhostStatus *qhost_options_set_probe_file(QhostOptions *o, const char *path) {
  return set_string(o, o ? &o->probe_path : NULL, path, "probe file");
}

QhostStatus *qhost_options_set_opset(QhostOptions *o, int opset) {
  if (o == NULL)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "options is NULL");
  if (opset != 0 && (opset < 13 || opset > 21))
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "opset %d: qhost writes opsets 13 to 21", opset);
  o->opset = opset;
  return NULL;
}

QhostStatus *qhost_options_set_report_file(QhostOptions *o, const char *path) {
  return set_string(o, o ? &o->report_path : NULL, path, "report file");
}

QhostStatus *qhost_options_set_shard(QhostOptions *o, int index, int count) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st)
    return st;
  if (count != 0 && (count < 1 || count > 100000 || index < 0 || index >= count))
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "shard %d/%d: want 0 <= I < N <= 100000", index, count);
  o->shard_index = count ? index : 0;
  o->shard_count = count;
  return NULL;
}

QhostStatus *qhost_options_add_stats_file(QhostOptions *o, const char *path) {
  return add_string(o, o ? &o->stats_paths : NULL, path, "statistics file");
}

QhostStatus *qhost_options_set_bench_runs(QhostOptions *o, int warmup, int runs) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st)
    return st;
  if (warmup < 0 || runs < 1 || runs > 100000)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT,
                         "warm-up runs must be >= 0 and timed runs between 1 and 100000");
  o->warmup = warmup;
  o->runs = runs;
  return NULL;
}

QhostStatus *qhost_options_set_bench_fp32(QhostOptions *o, int on) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st == NULL)
    o->fp32 = on != 0;
  return st;
}

QhostStatus *qhost_options_set_input_file(QhostOptions *o, const char *path) {
  return set_string(o, o ? &o->input_path : NULL, path, "input file");
}

QhostStatus *qhost_options_set_dynamic(QhostOptions *o, int on) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st == NULL)
    o->dynamic = on != 0;
  return st;
}

QhostStatus *qhost_options_set_dynamic_per_channel(QhostOptions *o, int on) {
  QhostStatus *st = qh_api_need(o, "options");
  if (st == NULL)
    o->dynamic_per_channel = on != 0;
  return st;
}
