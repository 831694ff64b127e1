/* A plugin that supplies every callback group (transform, backend_config, annotate, an
 * observer with merge and save/load, refine, reference numerics, lowering, deploy) and
 * behaves correctly unless told otherwise, so that `qhost plugin-check` can be shown
 * to catch each way a callback goes wrong. The fault is chosen at run time with
 *   QHOST_TEST_FAULT=<point>[:<mode>]
 * (read with getenv, so the plugin still exports nothing but its entry point). Without
 * a mode, or with mode "error", the callback at <point> returns an error status whose
 * message is "injected fault N", N being the point's number below: the message does
 * not name the callback, so a test can tell that the host does. Other modes return bad
 * data instead of an error (compute_qparams:count|scale_zero|scale_negative|scale_nan|
 * zero_point, load:drift|lenient, kernel_run:off for a Relu kernel two steps off,
 * annotate:bad_node for a bad node id on the nodes the BackendConfig quantized);
 * observe:leak loses a block of memory, to show
 * that the sanitized build's leak check is awake; mode "log" logs "<point> called" and
 * goes on, to show whom the host names in the log line. */
#include <qhost/qhost-plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rounding.h"

/* Fault points, numbered as in the messages; tests/abi/test_faults.py has the same table. */
static const char *const fault_points[] = {
    "",         "entry",   "instance_create", "transform_for_annotation", "annotate",
    "create",   "observe", "compute_qparams", "merge",
    "save",     "load",    "refine",          "fake_quantize",            "deploy",
    "kernel_run",
};
#define N_FAULT_POINTS (sizeof fault_points / sizeof fault_points[0])

/* The mode when QHOST_TEST_FAULT names this point ("" without one), else NULL. */
static const char *fault_mode(const char *point) {
  const char *f = getenv("QHOST_TEST_FAULT");
  size_t n = strlen(point);
  if (f == NULL || strncmp(f, point, n) != 0)
    return NULL;
  if (f[n] == '\0')
    return "";
  return f[n] == ':' ? f + n + 1 : NULL;
}

static int fault_is(const char *point, const char *mode) {
  const char *m = fault_mode(point);
  return m != NULL && strcmp(m, mode) == 0;
}

/* The error status for an error-mode fault at this point, or NULL. */
static QhStatus *injected(const QhHostApi *host, const char *point) {
  const char *m = fault_mode(point);
  if (m != NULL && strcmp(m, "log") == 0) {
    char line[64];
    snprintf(line, sizeof line, "%s called", point);
    host->log(QH_LOG_WARNING, line);
    return NULL;
  }
  if (m == NULL || (*m != '\0' && strcmp(m, "error") != 0))
    return NULL;
  for (size_t i = 1; i < N_FAULT_POINTS; i++)
    if (strcmp(fault_points[i], point) == 0)
      return qh_status_newf(host, QH_ERR_INTERNAL, "injected fault %zu", i);
  return host->status_new(QH_ERR_INTERNAL, "injected fault at an unnumbered point");
}


/* ---- instance ---- */

typedef struct {
  int strict;
} Instance;

static const QhOptionDecl opt_strict = {
    QH_STRUCT_HEADER(QhOptionDecl), "strict", QH_OPTION_BOOL, 0, "false",
    "refuse specs the observer cannot honour exactly", NULL, 0, -1,
};
static const QhOptionDecl *const options[] = {&opt_strict};

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info,
                                 const QhOption *opts, size_t n_opts, void **out_instance) {
  (void)info;
  QhStatus *st = injected(host, "instance_create");
  if (st)
    return st;
  if (n_opts != 1 || strcmp(opts[0].key, "strict") != 0)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "expected the option 'strict'");
  Instance *inst = malloc(sizeof *inst);
  if (inst == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  inst->strict = strcmp(opts[0].value, "true") == 0 || strcmp(opts[0].value, "1") == 0 ||
                 strcmp(opts[0].value, "yes") == 0;
  *out_instance = inst;
  return NULL;
}

static void instance_destroy(void *instance) { free(instance); }

/* ---- graph groups: they change nothing unless a fault is injected ---- */

static QhStatus *transform(void *instance, const QhHostApi *host, QhGraphView *graph) {
  (void)instance, (void)graph;
  return injected(host, "transform_for_annotation");
}
static const QhTransformOps transform_ops = {QH_STRUCT_HEADER(QhTransformOps), transform};

/* annotate:bad_node is a bug on the path a plugin with a BackendConfig takes: it adjusts
 * the nodes the declarative annotator quantized, and writes the spec with a node id past
 * the graph's end. A check that annotated without the BackendConfig would see no
 * quantized node and never reach it. */
static QhStatus *annotate(void *instance, const QhHostApi *host, QhGraphView *graph) {
  (void)instance;
  if (!fault_is("annotate", "bad_node"))
    return injected(host, "annotate");
  uint32_t n = host->graph_node_count(graph);
  for (uint32_t node = 0; node < n; node++) {
    QhEdgeRef out = {node, 0, QH_EDGE_OUTPUT, 0};
    int32_t kind = host->node_is_live(graph, node) ? host->annotation_spec_kind(graph, &out) : 0;
    if (kind != 0 && kind != QH_SPEC_FLOAT) {
      static const QhQuantSpec keep_float = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_FLOAT};
      return host->annotation_set_output_spec(graph, node + n, 0, &keep_float);
    }
  }
  return NULL;
}
static const QhAnnotateOps annotate_ops = {QH_STRUCT_HEADER(QhAnnotateOps), annotate, NULL};

static QhStatus *refine(void *instance, const QhHostApi *host, QhGraphView *graph) {
  (void)instance, (void)graph;
  return injected(host, "refine");
}
static const QhRefineOps refine_ops = {QH_STRUCT_HEADER(QhRefineOps), refine};

static QhStatus *deploy(void *instance, const QhHostApi *host, const QhGraphView *graph,
                        QhArtifact *artifact) {
  (void)instance, (void)graph;
  QhStatus *st = injected(host, "deploy");
  if (st)
    return st;
  static const char text[] = "faulty test artefact\n";
  return host->artifact_write(artifact, "faulty/README.txt", text, sizeof text - 1);
}
static const QhDeployOps deploy_ops = {QH_STRUCT_HEADER(QhDeployOps), "a README file", deploy};

/* ---- backend_config: Relu shares its input's observer ---- */

static const QhDTypeConstraint u8 = {QH_STRUCT_HEADER(QhDTypeConstraint), QH_DTYPE_UINT8, 0, 0, 0, 0, 0, 0, 0};
static const QhDTypeConfig u8_config = {QH_STRUCT_HEADER(QhDTypeConfig), "faulty_u8", 0, &u8, &u8, NULL, NULL};
static const QhDTypeConfig *const u8_configs[] = {&u8_config};
static const char *const relu_ops[] = {"Relu"};
static const QhBackendPatternConfig relu_pattern = {
    QH_STRUCT_HEADER(QhBackendPatternConfig), relu_ops, 1, 0, 0, NULL, 0,
    QH_OBS_OUTPUT_SHARE_OBSERVER_WITH_INPUT, 0, {0, 0, 0}, u8_configs, 1, QH_FUSER_NONE, NULL,
};
static const QhBackendPatternConfig *const bc_patterns[] = {&relu_pattern};
static const QhQuantSpec global_activation = {
    QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE, .dtype = QH_DTYPE_UINT8,
    .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE, .quant_min = 0, .quant_max = 255, .ch_axis = -1,
    .flags = QH_SPEC_HAS_RANGE, .observer = "FaultyMinMax",
};
static const QhQConfigEntry global_entry = {
    QH_STRUCT_HEADER(QhQConfigEntry), QH_QCONFIG_MATCH_GLOBAL, 0, NULL, &global_activation, NULL,
};
static const QhQConfigEntry *const bc_qconfig[] = {&global_entry};
static const QhBackendConfig backend_config = {
    QH_STRUCT_HEADER(QhBackendConfig), "faulty", 0, bc_patterns, 1, bc_qconfig, 1,
};

/* ---- the observer: per-tensor min/max, PyTorch's affine and symmetric qparams ---- */

typedef struct {
  int32_t dtype, qscheme, quant_min, quant_max;
  float min, max;
  uint32_t seen;
} MinMax;

#define SAVE_MAGIC "FMM1"
#define SAVE_SIZE 16 /* magic, min, max, seen */

static QhStatus *minmax_new(const QhHostApi *host, const QhQuantSpec *spec, MinMax **out) {
  int32_t lo, hi;
  if (spec->dtype == QH_DTYPE_UINT8)
    lo = 0, hi = 255;
  else if (spec->dtype == QH_DTYPE_INT8)
    lo = -128, hi = 127;
  else
    return qh_status_newf(host, QH_ERR_UNSUPPORTED, "dtype %d: only uint8 and int8", spec->dtype);
  if (spec->qscheme != QH_QSCHEME_PER_TENSOR_AFFINE && spec->qscheme != QH_QSCHEME_PER_TENSOR_SYMMETRIC)
    return qh_status_newf(host, QH_ERR_UNSUPPORTED, "qscheme %d: per-tensor only", spec->qscheme);
  if (spec->flags & QH_SPEC_HAS_RANGE)
    lo = spec->quant_min, hi = spec->quant_max;
  MinMax *s = malloc(sizeof *s);
  if (s == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  *s = (MinMax){spec->dtype, spec->qscheme, lo, hi, 0.0f, 0.0f, 0};
  *out = s;
  return NULL;
}

static QhStatus *obs_create(void *instance, const QhHostApi *host, const QhQuantSpec *spec,
                            int32_t rank, const int64_t *dims, void **out_state) {
  (void)instance, (void)rank, (void)dims;
  QhStatus *st = injected(host, "create");
  if (st)
    return st;
  MinMax *s = NULL;
  st = minmax_new(host, spec, &s);
  if (st == NULL)
    *out_state = s;
  return st;
}

/* Where observe:leak drops its block (volatile, so the allocation is not optimised out). */
static void *volatile leak_sink;

static QhStatus *obs_observe(void *state, const QhHostApi *host, const QhTensorView *t) {
  QhStatus *st = injected(host, "observe");
  if (st)
    return st;
  if (t->dtype != QH_DTYPE_FLOAT)
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "observed a tensor of dtype %d", t->dtype);
  if (fault_is("observe", "leak")) {
    leak_sink = malloc(64);
    leak_sink = NULL;
  }
  MinMax *s = state;
  const float *x = t->data;
  for (size_t i = 0; i < t->nbytes / sizeof(float); i++) {
    if (!(x[i] == x[i]) || x[i] > 3e38f || x[i] < -3e38f)
      continue; /* NaN and infinities carry no range */
    if (s->seen == 0 || x[i] < s->min)
      s->min = x[i];
    if (s->seen == 0 || x[i] > s->max)
      s->max = x[i];
    s->seen = 1;
  }
  return NULL;
}

static QhStatus *obs_compute(void *state, const QhHostApi *host, QhQParams *out) {
  QhStatus *st = injected(host, "compute_qparams");
  if (st)
    return st;
  if (out->capacity < 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "no room for one scale");
  const MinMax *s = state;
  float lo = s->min < 0 ? s->min : 0, hi = s->max > 0 ? s->max : 0;
  float qrange = (float)(s->quant_max - s->quant_min);
  float scale;
  int32_t zp;
  if (s->qscheme == QH_QSCHEME_PER_TENSOR_SYMMETRIC) {
    float amax = -lo > hi ? -lo : hi;
    scale = amax / (qrange / 2);
    zp = s->dtype == QH_DTYPE_UINT8 ? 128 : 0;
  } else {
    scale = (hi - lo) / qrange;
    zp = 0;
  }
  if (scale < 1.1920928955078125e-07f)
    scale = 1.1920928955078125e-07f;
  if (s->qscheme != QH_QSCHEME_PER_TENSOR_SYMMETRIC) {
    zp = s->quant_min - abi_test_round(lo / scale);
    zp = zp < s->quant_min ? s->quant_min : zp > s->quant_max ? s->quant_max : zp;
  }
  out->dtype = s->dtype;
  out->qscheme = s->qscheme;
  out->quant_min = s->quant_min;
  out->quant_max = s->quant_max;
  out->ch_axis = -1;
  out->flags = 0;
  out->count = 1;
  out->scale[0] = scale;
  out->zero_point[0] = zp;
  /* bad data, written only where the host's arrays have room */
  if (fault_is("compute_qparams", "count"))
    out->count = out->capacity + 1;
  else if (fault_is("compute_qparams", "scale_zero"))
    out->scale[0] = 0.0f;
  else if (fault_is("compute_qparams", "scale_negative"))
    out->scale[0] = -0.5f;
  else if (fault_is("compute_qparams", "scale_nan"))
    out->scale[0] = __builtin_nanf("");
  else if (fault_is("compute_qparams", "zero_point"))
    out->zero_point[0] = s->quant_max + 1;
  return NULL;
}

static QhStatus *obs_merge(void *state, const QhHostApi *host, const void *other) {
  QhStatus *st = injected(host, "merge");
  if (st)
    return st;
  MinMax *s = state;
  const MinMax *o = other;
  if (o->seen) {
    if (!s->seen || o->min < s->min)
      s->min = o->min;
    if (!s->seen || o->max > s->max)
      s->max = o->max;
    s->seen = 1;
  }
  return NULL;
}

static QhStatus *obs_save(const void *state, const QhHostApi *host, QhBuffer *out) {
  QhStatus *st = injected(host, "save");
  if (st)
    return st;
  const MinMax *s = state;
  unsigned char bytes[SAVE_SIZE];
  memcpy(bytes, SAVE_MAGIC, 4);
  memcpy(bytes + 4, &s->min, 4);
  memcpy(bytes + 8, &s->max, 4);
  memcpy(bytes + 12, &s->seen, 4);
  return host->buffer_append(out, bytes, sizeof bytes);
}

static QhStatus *obs_load(void *instance, const QhHostApi *host, const QhQuantSpec *spec,
                          int32_t rank, const int64_t *dims, const void *data, size_t size,
                          void **out_state) {
  (void)instance, (void)rank, (void)dims;
  QhStatus *st = injected(host, "load");
  if (st)
    return st;
  unsigned char bytes[SAVE_SIZE] = {0};
  if (fault_is("load", "lenient")) {
    /* the bug under test: whatever arrived is taken, the rest read as zeros */
    memcpy(bytes, data, size < SAVE_SIZE ? size : SAVE_SIZE);
  } else {
    if (size != SAVE_SIZE || memcmp(data, SAVE_MAGIC, 4) != 0)
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT,
                            "not a FaultyMinMax state (%zu bytes, want %d starting with " SAVE_MAGIC ")",
                            size, SAVE_SIZE);
    memcpy(bytes, data, SAVE_SIZE);
  }
  MinMax *s = NULL;
  st = minmax_new(host, spec, &s);
  if (st)
    return st;
  memcpy(&s->min, bytes + 4, 4);
  memcpy(&s->max, bytes + 8, 4);
  memcpy(&s->seen, bytes + 12, 4);
  if (fault_is("load", "drift"))
    s->max += 1.0f;
  *out_state = s;
  return NULL;
}

static void obs_destroy(void *state) { free(state); }

static const QhObserverOps minmax_ops = {
    QH_STRUCT_HEADER(QhObserverOps), "FaultyMinMax", "running min and max, per tensor",
    QH_OBSERVER_MERGE_IS_EXACT, obs_create, obs_observe, obs_compute, obs_merge, obs_save,
    obs_load, obs_destroy,
};
static const QhObserverOps *const observers[] = {&minmax_ops};

/* ---- reference numerics: ONNX's grid, rounding half away from zero ---- */

static QhStatus *fake_quantize(void *instance, const QhHostApi *host, int32_t role,
                               const QhQParams *q, const QhTensorView *in, QhTensorView *out) {
  (void)instance, (void)role;
  QhStatus *st = injected(host, "fake_quantize");
  if (st)
    return st;
  if (q->count != 1 || in->dtype != QH_DTYPE_FLOAT || out->nbytes != in->nbytes)
    return host->status_new(QH_ERR_UNSUPPORTED, "per-tensor float tensors only");
  const float *x = in->data;
  float *y = out->data;
  float s = q->scale[0];
  int32_t zp = q->zero_point[0];
  for (size_t i = 0; i < in->nbytes / sizeof(float); i++) {
    int32_t v = abi_test_round(x[i] / s) + zp;
    v = v < q->quant_min ? q->quant_min : v > q->quant_max ? q->quant_max : v;
    y[i] = (float)(v - zp) * s;
  }
  return NULL;
}
static const QhReferenceNumericsOps numerics_ops = {
    QH_STRUCT_HEADER(QhReferenceNumericsOps), "round half away from zero", fake_quantize,
};

/* ---- lowering: a uint8 Relu kernel ---- */

static QhStatus *k_create(void *instance, const QhHostApi *host, const QhGraphView *graph,
                          const QhNodeUnit *unit, void **out_kernel) {
  (void)instance, (void)host, (void)graph, (void)unit;
  static int stateless; /* the host wants a non-NULL kernel even without state */
  *out_kernel = &stateless;
  return NULL;
}

static QhStatus *k_reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs,
                           size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                           size_t *out_workspace_bytes) {
  (void)kernel;
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].dtype != QH_DTYPE_UINT8)
    return host->status_new(QH_ERR_UNSUPPORTED, "one uint8 input and output only");
  outputs[0].dtype = QH_DTYPE_UINT8;
  outputs[0].layout = inputs[0].layout;
  outputs[0].rank = inputs[0].rank;
  memcpy(outputs[0].dims, inputs[0].dims, sizeof outputs[0].dims);
  *out_workspace_bytes = 0;
  return NULL;
}

static QhStatus *k_run(void *kernel, const QhHostApi *host, const QhRunContext *ctx,
                       const QhTensorView *inputs, size_t n_inputs, QhTensorView *outputs,
                       size_t n_outputs, void *workspace, size_t workspace_bytes) {
  (void)kernel, (void)ctx, (void)n_inputs, (void)n_outputs, (void)workspace, (void)workspace_bytes;
  QhStatus *st = injected(host, "kernel_run");
  if (st)
    return st;
  int off = fault_is("kernel_run", "off") ? 2 : 0;
  const uint8_t *x = inputs[0].data;
  uint8_t *y = outputs[0].data;
  int32_t zp = inputs[0].qparams ? inputs[0].qparams->zero_point[0] : 0;
  for (size_t i = 0; i < inputs[0].nbytes; i++) {
    int v = (x[i] < zp ? zp : x[i]) + off;
    y[i] = (uint8_t)(v > 255 ? 255 : v);
  }
  return NULL;
}

static void k_destroy(void *kernel) { (void)kernel; }

static const QhKernelOps relu_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), "relu_any_qu8", QH_LAYOUT_ANY, QH_LAYOUT_ANY,
    QH_KERNEL_INPLACE_OK, k_create, k_reshape, k_run, k_destroy, NULL, NULL,
};
static const QhLoweringPattern relu_lowering = {
    QH_STRUCT_HEADER(QhLoweringPattern), "relu", relu_ops, 1, 0, NULL, 0, 0, &relu_kernel, NULL,
};
static const QhLoweringPattern *const lowering_patterns[] = {&relu_lowering};
static const QhLoweringOps lowering_ops = {QH_STRUCT_HEADER(QhLoweringOps), lowering_patterns, 1};

/* ---- the descriptor ---- */

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    "faulty",
    "1.0.0",
    "every callback group, with faults injected through QHOST_TEST_FAULT",
    0,
    options,
    1,
    instance_create,
    instance_destroy,
    &transform_ops,
    &backend_config,
    &annotate_ops,
    observers,
    1,
    &refine_ops,
    &numerics_ops,
    &lowering_ops,
    &deploy_ops,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  st = injected(host, "entry");
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
