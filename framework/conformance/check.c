/* plugin-check: loads one plugin and drives every callback group it supplies with small
 * built-in inputs, checking what comes back the way the real flows will (statuses,
 * counts within capacity, scales positive and finite, zero points in range, observer
 * state that survives save/load and merge, nothing printed). Each check yields one
 * line a vendor can act on. Graph-based groups use check-graphs.c, lowering
 * check-lowering.c, partitions check-partitions.c. */
#include <math.h>
#include <string.h>

#include "plugin/capture-private.h"
#include "conformance/check-private.h"
#include "hostapi/host-private.h"
#include "hostapi/status-private.h"

void qh_check_add(QhCheckRun *run, QhCheckVerdict verdict, const char *name, const char *fmt, ...) {
  QhCheckResult *r = g_new0(QhCheckResult, 1);
  r->name = g_strdup(name);
  r->verdict = verdict;
  va_list ap;
  va_start(ap, fmt);
  r->detail = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_ptr_array_add(run->report->results, r);
}

char *qh_check_status_text(QhStatus *st) {
  if (!qh_status_is_valid(st))
    return g_strdup("returned an invalid status pointer");
  char *text = st->node ? g_strdup_printf("%s: %s", st->node, st->message) : g_strdup(st->message);
  qh_status_free(st);
  return text;
}

/* ---- observers ---- */

#define OBS_RANK 4
static const int64_t obs_dims[OBS_RANK] = {2, 3, 4, 4};
#define OBS_NUMEL (2 * 3 * 4 * 4)

typedef struct {
  float data[3][OBS_NUMEL];
  float *aligned[3];
} ObsInputs;

static void make_inputs(ObsInputs *in, float *storage[3]) {
  GRand *rand = g_rand_new_with_seed(20261122);
  static const float ranges[3][2] = {{-1.0f, 2.0f}, {-3.0f, 0.5f}, {0.0f, 4.0f}};
  for (int t = 0; t < 3; t++) {
    for (int i = 0; i < OBS_NUMEL; i++)
      in->data[t][i] = (float)g_rand_double_range(rand, ranges[t][0], ranges[t][1]);
    storage[t] = qh_aligned_alloc0(sizeof in->data[t]);
    memcpy(storage[t], in->data[t], sizeof in->data[t]);
    in->aligned[t] = storage[t];
  }
  g_rand_free(rand);
}

static void float_view(QhTensorView *v, float *data, int rank, const int64_t *dims, size_t numel) {
  memset(v, 0, sizeof *v);
  v->abi_version = QH_ABI_VERSION;
  v->struct_size = sizeof *v;
  v->dtype = QH_DTYPE_FLOAT;
  v->layout = rank == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY;
  v->rank = rank;
  memcpy(v->dims, dims, (size_t)rank * sizeof *dims);
  v->data = data;
  v->nbytes = numel * sizeof(float);
}

static const QhQuantSpec spec_u8 = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                    .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
                                    .quant_min = 0, .quant_max = 255, .ch_axis = -1,
                                    .flags = QH_SPEC_HAS_RANGE};
static const QhQuantSpec spec_s8 = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                    .dtype = QH_DTYPE_INT8, .qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC,
                                    .quant_min = -128, .quant_max = 127, .ch_axis = -1,
                                    .flags = QH_SPEC_HAS_RANGE};

typedef struct {
  float scale;
  int32_t zero_point;
} OneQParams;

/* Validate what compute_qparams wrote (capacity 1); NULL when fine, else the reason. */
static char *qparams_problem(const QhQParams *q, size_t capacity) {
  if (q->count < 1 || q->count > capacity)
    return g_strdup_printf("count %zu, capacity %zu", q->count, capacity);
  if (q->quant_min > q->quant_max)
    return g_strdup_printf("quant_min %d > quant_max %d", q->quant_min, q->quant_max);
  for (size_t i = 0; i < q->count; i++) {
    if (!(isfinite(q->scale[i]) && q->scale[i] > 0))
      return g_strdup_printf("scale[%zu] = %g is not > 0 and finite", i, (double)q->scale[i]);
    if (q->zero_point[i] < q->quant_min || q->zero_point[i] > q->quant_max)
      return g_strdup_printf("zero_point[%zu] = %d is outside [%d, %d]", i, q->zero_point[i],
                             q->quant_min, q->quant_max);
  }
  return NULL;
}

static QhStatus *compute(QhCheckRun *run, const QhObserverOps *o, void *state, OneQParams *out, char **problem) {
  float scale = NAN;
  int32_t zp = INT32_MIN;
  QhQParams q = {QH_STRUCT_HEADER(QhQParams), 0, 0, 0, 0, -1, 0, 0, 1, &scale, &zp};
  QhStatus *st = qh_backend_call_observer_compute(run->backend, o, state, &q);
  if (st == NULL) {
    *problem = qparams_problem(&q, 1);
    out->scale = scale;
    out->zero_point = zp;
  }
  return st;
}

static void *observe_all(QhCheckRun *run, const QhObserverOps *o, const QhQuantSpec *spec,
                         float *const *tensors, int n, const char *check) {
  void *state = NULL;
  QhStatus *st = qh_backend_call_observer_create(run->backend, o, spec, OBS_RANK, obs_dims, &state);
  if (st) {
    char *why = qh_check_status_text(st);
    qh_check_add(run, QH_CHECK_FAIL, check, "create: %s", why);
    g_free(why);
    return NULL;
  }
  for (int t = 0; t < n; t++) {
    QhTensorView v;
    float_view(&v, tensors[t], OBS_RANK, obs_dims, OBS_NUMEL);
    st = qh_backend_call_observer_observe(run->backend, o, state, &v);
    if (st) {
      char *why = qh_check_status_text(st);
      qh_check_add(run, QH_CHECK_FAIL, check, "observe: %s", why);
      g_free(why);
      qh_backend_observer_destroy(run->backend, o, state);
      return NULL;
    }
  }
  return state;
}

static gboolean same_qparams(const OneQParams *a, const OneQParams *b) {
  return memcmp(&a->scale, &b->scale, sizeof a->scale) == 0 && a->zero_point == b->zero_point;
}

static void check_save_load(QhCheckRun *run, const QhObserverOps *o, const QhQuantSpec *spec,
                            void *state, const OneQParams *expected, const char *check) {
  QhBuffer buf;
  qh_buffer_init(&buf, 64u << 20);
  QhStatus *st = qh_backend_call_observer_save(run->backend, o, state, &buf);
  void *loaded = NULL;
  char *why = NULL;
  if (st) {
    why = qh_check_status_text(st);
    qh_check_add(run, QH_CHECK_FAIL, check, "save: %s", why);
  } else if ((st = qh_backend_call_observer_load(run->backend, o, spec, OBS_RANK, obs_dims, buf.bytes->data,
                           buf.bytes->len, &loaded)) != NULL) {
    why = qh_check_status_text(st);
    qh_check_add(run, QH_CHECK_FAIL, check, "load of its own %u saved bytes: %s", buf.bytes->len, why);
  } else {
    OneQParams again;
    char *problem = NULL;
    st = compute(run, o, loaded, &again, &problem);
    if (st) {
      why = qh_check_status_text(st);
      qh_check_add(run, QH_CHECK_FAIL, check, "compute_qparams after load: %s", why);
    } else if (!same_qparams(&again, expected)) {
      qh_check_add(run, QH_CHECK_FAIL, check,
                   "qparams after save/load differ: scale %.9g zp %d, before %.9g zp %d",
                   (double)again.scale, again.zero_point, (double)expected->scale, expected->zero_point);
    } else {
      /* Bytes it did not write must be refused, not trusted. */
      guint half = buf.bytes->len / 2;
      void *bogus = NULL;
      QhStatus *bad = qh_backend_call_observer_load(run->backend, o, spec, OBS_RANK, obs_dims, buf.bytes->data, half, &bogus);
      if (bad == NULL) {
        qh_backend_observer_destroy(run->backend, o, bogus);
        qh_check_add(run, QH_CHECK_FAIL, check, "load accepted a truncated state (%u of %u bytes)",
                     half, buf.bytes->len);
      } else {
        g_free(qh_check_status_text(bad));
        qh_check_add(run, QH_CHECK_PASS, check,
                     "%u bytes, same qparams after load; a truncated state is refused", buf.bytes->len);
      }
    }
    g_free(problem);
    qh_backend_observer_destroy(run->backend, o, loaded);
  }
  g_free(why);
  qh_buffer_clear(&buf);
}

static void check_merge(QhCheckRun *run, const QhObserverOps *o, const QhQuantSpec *spec,
                        float *const *tensors, const OneQParams *one_pass, const char *check) {
  void *a = observe_all(run, o, spec, tensors, 2, check);
  void *b = a ? observe_all(run, o, spec, tensors + 2, 1, check) : NULL;
  if (a && b) {
    QhStatus *st = qh_backend_call_observer_merge(run->backend, o, a, b);
    OneQParams merged;
    char *problem = NULL;
    if (st == NULL)
      st = compute(run, o, a, &merged, &problem);
    if (st) {
      char *why = qh_check_status_text(st);
      qh_check_add(run, QH_CHECK_FAIL, check, "%s", why);
      g_free(why);
    } else if (problem) {
      qh_check_add(run, QH_CHECK_FAIL, check, "after merge: %s", problem);
    } else if (same_qparams(&merged, one_pass)) {
      qh_check_add(run, QH_CHECK_PASS, check, "two shards merged give the one-pass qparams");
    } else if (o->flags & QH_OBSERVER_MERGE_IS_EXACT) {
      qh_check_add(run, QH_CHECK_FAIL, check,
                   "declares QH_OBSERVER_MERGE_IS_EXACT but merged scale %.9g zp %d != one-pass %.9g zp %d",
                   (double)merged.scale, merged.zero_point, (double)one_pass->scale, one_pass->zero_point);
    } else {
      qh_check_add(run, QH_CHECK_PASS, check, "merged scale differs from one pass by %.3g relative",
                   fabs((double)merged.scale - one_pass->scale) / one_pass->scale);
    }
    g_free(problem);
  }
  if (a) qh_backend_observer_destroy(run->backend, o, a);
  if (b) qh_backend_observer_destroy(run->backend, o, b);
}

static void check_observer(QhCheckRun *run, const QhObserverOps *o) {
  char *check = g_strdup_printf("observer %s", o->name);
  ObsInputs in;
  float *storage[3];
  make_inputs(&in, storage);
  /* A backend may refuse uint8 (a symmetric int8 DPU does): then int8 symmetric. */
  const QhQuantSpec *spec = &spec_u8;
  void *probe = NULL;
  QhStatus *st = qh_backend_call_observer_create(run->backend, o, spec, OBS_RANK, obs_dims, &probe);
  if (st && qh_status_is_valid(st) && st->code == QH_ERR_UNSUPPORTED) {
    qh_status_free(st);
    spec = &spec_s8;
  } else if (st) {
    qh_status_free(st);
  } else {
    qh_backend_observer_destroy(run->backend, o, probe);
  }
  void *state = observe_all(run, o, spec, in.aligned, 3, check);
  if (state) {
    OneQParams q;
    char *problem = NULL;
    st = compute(run, o, state, &q, &problem);
    if (st) {
      char *why = qh_check_status_text(st);
      qh_check_add(run, QH_CHECK_FAIL, check, "compute_qparams: %s", why);
      g_free(why);
    } else if (problem) {
      qh_check_add(run, QH_CHECK_FAIL, check, "compute_qparams: %s", problem);
    } else {
      qh_check_add(run, QH_CHECK_PASS, check, "%s spec: 3 tensors observed, scale %.9g, zero point %d",
                   spec == &spec_u8 ? "uint8 affine" : "int8 symmetric", (double)q.scale, q.zero_point);
      char *sub = g_strdup_printf("%s save/load", check);
      if (o->save)
        check_save_load(run, o, spec, state, &q, sub);
      else
        qh_check_add(run, QH_CHECK_SKIP, sub, "not supplied: this observer's state cannot be saved");
      g_free(sub);
      sub = g_strdup_printf("%s merge", check);
      if (o->merge)
        check_merge(run, o, spec, in.aligned, &q, sub);
      else
        qh_check_add(run, QH_CHECK_SKIP, sub, "not supplied: calibration cannot be sharded");
      g_free(sub);
    }
    g_free(problem);
    qh_backend_observer_destroy(run->backend, o, state);
  }
  for (int t = 0; t < 3; t++)
    qh_aligned_free(storage[t]);
  g_free(check);
}

/* ---- reference numerics ---- */

static void check_reference_numerics(QhCheckRun *run, const QhReferenceNumericsOps *rn) {
  static const int64_t dims[2] = {4, 16};
  const size_t n = 64;
  float *in = qh_aligned_alloc0(n * sizeof(float)), *out = qh_aligned_alloc0(n * sizeof(float));
  for (size_t i = 0; i < n; i++)
    in[i] = -3.0f + 6.0f * (float)i / (float)(n - 1);
  float scale_u8 = 0.05f, scale_s8 = 0.0625f;
  int32_t zp_u8 = 128, zp_s8 = 0;
  QhQParams q_u8 = {QH_STRUCT_HEADER(QhQParams), QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE, 0, 255, -1, 0, 1, 1, &scale_u8, &zp_u8};
  QhQParams q_s8 = {QH_STRUCT_HEADER(QhQParams), QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC, -128, 127, -1, 0, 1, 1, &scale_s8, &zp_s8};
  QhTensorView vin, vout;
  float_view(&vin, in, 2, dims, n);
  float_view(&vout, out, 2, dims, n);
  const QhQParams *q = &q_u8;
  QhStatus *st = qh_backend_call_fake_quantize(run->backend, QH_ROLE_ACTIVATION, q, &vin, &vout);
  if (st && qh_status_is_valid(st) && st->code == QH_ERR_UNSUPPORTED) {
    qh_status_free(st);
    q = &q_s8;
    st = qh_backend_call_fake_quantize(run->backend, QH_ROLE_ACTIVATION, q, &vin, &vout);
  }
  if (st) {
    char *why = qh_check_status_text(st);
    qh_check_add(run, QH_CHECK_FAIL, "reference_numerics", "fake_quantize: %s", why);
    g_free(why);
  } else {
    float s = q->scale[0];
    int32_t zp = q->zero_point[0];
    char *problem = NULL;
    for (size_t i = 0; i < n && !problem; i++) {
      float steps = out[i] / s + (float)zp;
      if (!isfinite(out[i]))
        problem = g_strdup_printf("output %zu is not finite", i);
      else if (fabsf(steps - nearbyintf(steps)) > 1e-3f || steps < q->quant_min - 1e-3f ||
               steps > q->quant_max + 1e-3f)
        problem = g_strdup_printf("output %zu (%g) is not on the quantization grid", i, (double)out[i]);
      else if (in[i] >= (q->quant_min - zp) * s && in[i] <= (q->quant_max - zp) * s &&
               fabsf(out[i] - in[i]) > s * 1.0001f)
        problem = g_strdup_printf("output %zu is %g for input %g: more than one step away", i,
                                  (double)out[i], (double)in[i]);
    }
    if (problem)
      qh_check_add(run, QH_CHECK_FAIL, "reference_numerics", "fake_quantize: %s", problem);
    else
      qh_check_add(run, QH_CHECK_PASS, "reference_numerics",
                   "fake_quantize of 64 values (%s) lands on the grid within one step", rn->description);
    g_free(problem);
  }
  qh_aligned_free(in);
  qh_aligned_free(out);
}

/* ---- the run ---- */

static QhPluginInfo *scan_target(QhCheckRun *run, const QhPluginSearch *search, const char *name_or_path,
                                 GError **error) {
  if (strchr(name_or_path, '/')) {
    /* an explicit path is not held to the libqhost-<name>.so pattern, as with --plugin */
    GError *local = NULL;
    QhPluginInfo *info = qh_plugin_scan(name_or_path, NULL, &local);
    if (info == NULL) {
      qh_check_add(run, QH_CHECK_FAIL, "scan", "%s", local->message);
      g_error_free(local);
    }
    return info;
  }
  QhPluginRegistry *reg = qh_plugin_registry_scan(search);
  QhPluginInfo *info = NULL;
  for (guint i = 0; i < reg->plugins->len && !info; i++)
    if (strcmp(((QhPluginInfo *)reg->plugins->pdata[i])->name, name_or_path) == 0)
      info = g_ptr_array_steal_index(reg->plugins, i);
  if (info == NULL) {
    /* a broken file of that name is a failed check, not "not found" */
    char *file = g_strdup_printf("/libqhost-%s.so:", name_or_path);
    for (guint i = 0; i < reg->problems->len; i++)
      if (strstr(reg->problems->pdata[i], file)) {
        char *problem = reg->problems->pdata[i];
        if (g_str_has_suffix(problem, "; skipped"))
          problem[strlen(problem) - strlen("; skipped")] = '\0';
        qh_check_add(run, QH_CHECK_FAIL, "scan", "%s", problem);
        g_free(file);
        qh_plugin_registry_free(reg);
        return NULL;
      }
    g_free(file);
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "no plugin named '%s'; 'qhost plugins' lists what is found", name_or_path);
  }
  qh_plugin_registry_free(reg);
  return info;
}

static void run_groups(QhCheckRun *run) {
  const QhPluginDesc *d = run->desc;
  if (QH_HAS_FIELD(d, QhPluginDesc, transform) && d->transform)
    qh_check_transform(run);
  if (QH_HAS_FIELD(d, QhPluginDesc, backend_config) && d->backend_config)
    qh_check_add(run, QH_CHECK_PASS, "backend_config", "%s; tables validated at load",
                 run->report->info->backend_config);
  if (QH_HAS_FIELD(d, QhPluginDesc, annotate) && d->annotate)
    qh_check_annotate(run);
  if (QH_HAS_FIELD(d, QhPluginDesc, n_observers))
    for (size_t i = 0; i < d->n_observers; i++)
      check_observer(run, d->observers[i]);
  if (QH_HAS_FIELD(d, QhPluginDesc, refine) && d->refine)
    qh_check_refine(run);
  if (QH_HAS_FIELD(d, QhPluginDesc, reference_numerics) && d->reference_numerics)
    check_reference_numerics(run, d->reference_numerics);
  if (QH_HAS_FIELD(d, QhPluginDesc, lowering) && d->lowering)
    qh_check_lowering(run);
  if (QH_HAS_FIELD(d, QhPluginDesc, partitions) && d->partitions)
    qh_check_partitions(run);
  if (QH_HAS_FIELD(d, QhPluginDesc, deploy) && d->deploy)
    qh_check_deploy(run);
}

QhCheckReport *qh_plugin_check(const QhPluginSearch *search, const char *name_or_path,
                               char *const *backend_opts, GError **error) {
  QhCheckReport *report = g_new0(QhCheckReport, 1);
  report->results = g_ptr_array_new();
  report->findings = g_ptr_array_new_with_free_func(g_free);
  report->unrun_patterns = g_ptr_array_new_with_free_func(g_free);
  QhCheckRun run = {report, NULL, NULL, search, backend_opts};
  GError *local = NULL;
  report->info = scan_target(&run, search, name_or_path, &local);
  if (local) {
    g_propagate_error(error, local);
    qh_check_report_free(report);
    return NULL;
  }
  if (report->info == NULL)
    return report;
  QhPluginInfo *info = report->info;
  qh_check_add(&run, QH_CHECK_PASS, "scan", "the entry point answered in a separate process");
  char *supplies = qh_plugin_info_supplies_text(info);
  qh_check_add(&run, QH_CHECK_PASS, "descriptor", "%s %s, ABI %u.%u, struct_size %u; supplies %s",
               info->name, info->version, QH_ABI_VERSION_MAJOR(info->abi_version),
               QH_ABI_VERSION_MINOR(info->abi_version), info->struct_size, supplies);
  g_free(supplies);
  if (info->entry_output_bytes > 0)
    qh_check_add(&run, QH_CHECK_FAIL, "quiet entry point",
                 "wrote %" G_GINT64_FORMAT " bytes to stdout/stderr while loading; use host->log",
                 info->entry_output_bytes);
  else
    qh_check_add(&run, QH_CHECK_PASS, "quiet entry point", "nothing written to stdout/stderr");
  qh_check_add(&run, QH_CHECK_PASS, "options", "%u declared, every default valid for its type",
               info->options->len);

  QhReportSink sink = {report->findings};
  QhReportSink *prev_sink = qh_plugin_set_report_sink(&sink);
  const char *prev_name = qh_plugin_set_current(info->name);
  QhOutputCapture capture;
  qh_output_capture_begin(&capture);
  QhPlugin *plugin = qh_plugin_load(info->path, NULL, &local);
  if (plugin == NULL) {
    qh_check_add(&run, QH_CHECK_FAIL, "load", "%s", local->message);
    g_clear_error(&local);
  } else if ((run.backend = qh_backend_new(plugin, backend_opts, 1, &local)) == NULL) {
    qh_check_add(&run, QH_CHECK_FAIL, "instance", "%s", local->message);
    g_clear_error(&local);
  } else {
    run.desc = qh_backend_desc(run.backend);
    gboolean has_create = QH_HAS_FIELD(run.desc, QhPluginDesc, instance_destroy) &&
                          run.desc->instance_create != NULL;
    qh_check_add(&run, QH_CHECK_PASS, "instance", "%s",
                 has_create ? "instance_create accepted the options"
                            : "no instance_create (the instance is NULL)");
    run_groups(&run);
  }
  qh_backend_free(run.backend);
  long printed = qh_output_capture_end(&capture);
  qh_plugin_set_current(prev_name);
  qh_plugin_set_report_sink(prev_sink);
  if (printed > 0)
    qh_check_add(&run, QH_CHECK_FAIL, "quiet callbacks",
                 "wrote %ld bytes to stdout/stderr; plugins report through host->log and host->report",
                 printed);
  else
    qh_check_add(&run, QH_CHECK_PASS, "quiet callbacks", "nothing written to stdout/stderr");
  return report;
}

gboolean qh_check_report_conforms(const QhCheckReport *report) {
  if (report->info == NULL)
    return FALSE;
  for (guint i = 0; i < report->results->len; i++)
    if (((const QhCheckResult *)report->results->pdata[i])->verdict == QH_CHECK_FAIL)
      return FALSE;
  return TRUE;
}

void qh_check_report_free(QhCheckReport *report) {
  if (report == NULL)
    return;
  for (guint i = 0; i < report->results->len; i++) {
    QhCheckResult *r = report->results->pdata[i];
    g_free(r->name);
    g_free(r->detail);
    g_free(r);
  }
  g_ptr_array_unref(report->results);
  g_ptr_array_unref(report->findings);
  g_ptr_array_unref(report->unrun_patterns);
  qh_plugin_info_free(report->info);
  g_free(report);
}
