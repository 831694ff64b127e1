/* A plugin written against the frozen ABI 1.0 headers, standing for a vendor's binary
 * that was built once and never rebuilt: every later 1.x host must load it and pass it
 * through `qhost plugin-check`. It uses the parts of the 1.0 API a real backend would:
 * an option, an instance, an observer with merge and save/load, and reference
 * numerics. The same source is built three times, each against one include directory
 * alone: tests/abi/sdk-snapshots/1.0 ("snapshot"), tests/abi/sdk-snapshots/1.1
 * ("snapshot11") and sdk/include ("snapshot12"); the three must give the same results
 * in this host (tests/abi/test_loader.py, case snapshot_versions). */
#include <qhost/qhost-plugin.h>
#include <stdlib.h>
#include <string.h>

#include "rounding.h"

typedef struct {
  int64_t bits;
} Instance;

static const QhOptionDecl opt_bits = {
    QH_STRUCT_HEADER(QhOptionDecl), "bits", QH_OPTION_INT, 0, "8", "activation bits", NULL, 2, 8,
};
static const QhOptionDecl *const options[] = {&opt_bits};

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info,
                                 const QhOption *opts, size_t n_opts, void **out_instance) {
  (void)info;
  if (n_opts != 1)
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "expected 1 option, got %zu", n_opts);
  Instance *inst = malloc(sizeof *inst);
  if (inst == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  inst->bits = strtoll(opts[0].value, NULL, 10);
  *out_instance = inst;
  return NULL;
}

static void instance_destroy(void *instance) { free(instance); }


/* ---- observer: absolute maximum, symmetric int8 only (like a DPU) ---- */

typedef struct {
  float amax;
  int32_t quant_min, quant_max;
} AbsMax;

static QhStatus *obs_create(void *instance, const QhHostApi *host, const QhQuantSpec *spec,
                            int32_t rank, const int64_t *dims, void **out_state) {
  (void)instance, (void)rank, (void)dims;
  if (spec->dtype != QH_DTYPE_INT8 || spec->qscheme != QH_QSCHEME_PER_TENSOR_SYMMETRIC)
    return host->status_new(QH_ERR_UNSUPPORTED, "symmetric per-tensor int8 only");
  AbsMax *s = malloc(sizeof *s);
  if (s == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  s->amax = 0.0f;
  s->quant_min = (spec->flags & QH_SPEC_HAS_RANGE) ? spec->quant_min : -128;
  s->quant_max = (spec->flags & QH_SPEC_HAS_RANGE) ? spec->quant_max : 127;
  *out_state = s;
  return NULL;
}

static QhStatus *obs_observe(void *state, const QhHostApi *host, const QhTensorView *t) {
  if (t->dtype != QH_DTYPE_FLOAT)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "float tensors only");
  AbsMax *s = state;
  const float *x = t->data;
  for (size_t i = 0; i < t->nbytes / sizeof(float); i++) {
    float a = x[i] < 0 ? -x[i] : x[i];
    if (a == a && a < 3e38f && a > s->amax)
      s->amax = a;
  }
  return NULL;
}

static QhStatus *obs_compute(void *state, const QhHostApi *host, QhQParams *out) {
  const AbsMax *s = state;
  if (out->capacity < 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "no room for one scale");
  float scale = s->amax / ((float)(s->quant_max - s->quant_min) / 2);
  if (scale < 1.1920928955078125e-07f)
    scale = 1.1920928955078125e-07f;
  out->dtype = QH_DTYPE_INT8;
  out->qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC;
  out->quant_min = s->quant_min;
  out->quant_max = s->quant_max;
  out->ch_axis = -1;
  out->flags = 0;
  out->count = 1;
  out->scale[0] = scale;
  out->zero_point[0] = 0;
  return NULL;
}

static QhStatus *obs_merge(void *state, const QhHostApi *host, const void *other) {
  (void)host;
  AbsMax *s = state;
  const AbsMax *o = other;
  if (o->amax > s->amax)
    s->amax = o->amax;
  return NULL;
}

static QhStatus *obs_save(const void *state, const QhHostApi *host, QhBuffer *out) {
  const AbsMax *s = state;
  unsigned char bytes[8];
  memcpy(bytes, "SAM1", 4);
  memcpy(bytes + 4, &s->amax, 4);
  return host->buffer_append(out, bytes, sizeof bytes);
}

static QhStatus *obs_load(void *instance, const QhHostApi *host, const QhQuantSpec *spec,
                          int32_t rank, const int64_t *dims, const void *data, size_t size,
                          void **out_state) {
  if (size != 8 || memcmp(data, "SAM1", 4) != 0)
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "not a SnapAbsMax state (%zu bytes)", size);
  void *state = NULL;
  QhStatus *st = obs_create(instance, host, spec, rank, dims, &state);
  if (st)
    return st;
  memcpy(&((AbsMax *)state)->amax, (const unsigned char *)data + 4, 4);
  *out_state = state;
  return NULL;
}

static void obs_destroy(void *state) { free(state); }

static const QhObserverOps absmax_ops = {
    QH_STRUCT_HEADER(QhObserverOps), "SnapAbsMax", "absolute maximum, symmetric int8",
    QH_OBSERVER_MERGE_IS_EXACT, obs_create, obs_observe, obs_compute, obs_merge, obs_save,
    obs_load, obs_destroy,
};
static const QhObserverOps *const observers[] = {&absmax_ops};

/* ---- reference numerics: symmetric int8, round half away from zero ---- */

static QhStatus *fake_quantize(void *instance, const QhHostApi *host, int32_t role,
                               const QhQParams *q, const QhTensorView *in, QhTensorView *out) {
  (void)instance, (void)role;
  if (q->dtype != QH_DTYPE_INT8 || q->count != 1 || out->nbytes != in->nbytes)
    return host->status_new(QH_ERR_UNSUPPORTED, "per-tensor int8 only");
  const float *x = in->data;
  float *y = out->data;
  for (size_t i = 0; i < in->nbytes / sizeof(float); i++) {
    int32_t v = abi_test_round(x[i] / q->scale[0]) + q->zero_point[0];
    v = v < q->quant_min ? q->quant_min : v > q->quant_max ? q->quant_max : v;
    y[i] = (float)(v - q->zero_point[0]) * q->scale[0];
  }
  return NULL;
}
static const QhReferenceNumericsOps numerics_ops = {
    QH_STRUCT_HEADER(QhReferenceNumericsOps), "int8 only, half away from zero", fake_quantize,
};

#define STR_(x) #x
#define STR(x) STR_(x)

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    PLUGIN_NAME,
    "1.0.0",
    "built against the qhost ABI " STR(QH_ABI_MAJOR) "." STR(QH_ABI_MINOR) " headers",
    0,
    options,
    1,
    instance_create,
    instance_destroy,
    NULL,
    NULL,
    NULL,
    observers,
    1,
    NULL,
    &numerics_ops,
    NULL,
    NULL,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
