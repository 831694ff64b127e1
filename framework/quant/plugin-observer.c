/* Wraps a plugin's QhObserverOps as a QhObserver: tensors are handed over as
 * QhTensorView (host memory, 64-byte aligned), qparams come back into host arrays of
 * the right capacity and are checked before the host believes them. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "hostapi/host-private.h"
#include "hostapi/annotation.h"
#include "quant/observer-private.h"
#include "quant/plugin-observer.h"

typedef struct {
  QhObserver base;
  QhBackend *backend; /* borrowed: every call into the plugin goes through it */
  const QhObserverOps *ops;
  void *state;
  int n_channels; /* capacity of compute_qparams: 1, or dims[ch_axis] */
} PluginObserver;

static gboolean po_observe(QhObserver *obs, const QhTensor *x, GError **error) {
  PluginObserver *po = (PluginObserver *)obs;
  QhTensorView v = {QH_STRUCT_HEADER(QhTensorView), .dtype = QH_DTYPE_FLOAT,
                    .layout = x->shape.rank == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY,
                    .rank = x->shape.rank, .data = x->data, .nbytes = x->nbytes};
  memcpy(v.dims, x->shape.dims, sizeof(int64_t) * (size_t)x->shape.rank);
  return qh_backend_observer_observe(po->backend, po->ops, po->state, &v, error);
}

static QhQuantParams *po_compute(QhObserver *obs, GError **error) {
  PluginObserver *po = (PluginObserver *)obs;
  int cap = po->n_channels;
  float *scale = g_new(float, cap);
  int32_t *zp = g_new(int32_t, cap);
  for (int i = 0; i < cap; i++) {
    scale[i] = NAN;
    zp[i] = INT32_MIN;
  }
  QhQParams q = {QH_STRUCT_HEADER(QhQParams), .ch_axis = -1, .capacity = (size_t)cap,
                 .scale = scale, .zero_point = zp};
  QhQuantParams *out = NULL;
  const char *name = po->ops->name;
  if (!qh_backend_observer_compute(po->backend, po->ops, po->state, &q, error)) {
    /* error set */
  } else if (q.count < 1 || q.count > (size_t)cap || (q.count != 1 && q.count != (size_t)cap)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "plugin observer '%s': compute_qparams: count %zu (capacity %d)", name, q.count, cap);
  } else if (q.scale != scale || q.zero_point != zp) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "plugin observer '%s': compute_qparams replaced the host's arrays", name);
  } else if (q.quant_min > q.quant_max) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "plugin observer '%s': compute_qparams: quant_min %d > quant_max %d", name, q.quant_min,
                q.quant_max);
  } else {
    out = qh_quant_params_new((int)q.count);
    out->dtype = q.dtype;
    out->qscheme = q.qscheme;
    out->quant_min = q.quant_min;
    out->quant_max = q.quant_max;
    out->ch_axis = q.count > 1 ? q.ch_axis : -1;
    for (size_t i = 0; i < q.count && out; i++) {
      if (!(isfinite(scale[i]) && scale[i] > 0) || zp[i] < q.quant_min || zp[i] > q.quant_max) {
        g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                    "plugin observer '%s': compute_qparams: scale[%zu] = %g, zero_point[%zu] = %d "
                    "(want a positive finite scale and a zero point in [%d, %d])",
                    name, i, (double)scale[i], i, zp[i], q.quant_min, q.quant_max);
        g_clear_pointer(&out, qh_quant_params_free);
        break;
      }
      out->scale[i] = scale[i];
      out->zero_point[i] = zp[i];
    }
  }
  g_free(scale);
  g_free(zp);
  return out;
}

static gboolean po_merge(QhObserver *obs, const QhObserver *other, GError **error) {
  PluginObserver *po = (PluginObserver *)obs;
  const PluginObserver *o = (const PluginObserver *)other;
  if (other->klass != obs->klass || o->ops != po->ops) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "plugin observer '%s': cannot merge a different observer",
                po->ops->name);
    return FALSE;
  }
  if (po->ops->merge == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "plugin observer '%s' cannot merge shards",
                po->ops->name);
    return FALSE;
  }
  return qh_backend_observer_merge(po->backend, po->ops, po->state, o->state, error);
}

static gboolean po_save(const QhObserver *obs, GByteArray *out, GError **error) {
  const PluginObserver *po = (const PluginObserver *)obs;
  if (po->ops->save == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "plugin observer '%s' cannot save its state",
                po->ops->name);
    return FALSE;
  }
  QhBuffer buf;
  qh_buffer_init(&buf, (gsize)1 << 30);
  gboolean ok = qh_backend_observer_save(po->backend, po->ops, po->state, &buf, error);
  if (ok)
    g_byte_array_append(out, buf.bytes->data, buf.bytes->len);
  qh_buffer_clear(&buf);
  return ok;
}

static void po_free(QhObserver *obs) {
  PluginObserver *po = (PluginObserver *)obs;
  qh_backend_observer_destroy(po->backend, po->ops, po->state);
  qh_observer_clear_base(obs);
  g_free(po);
}

static const QhObserverClass plugin_class = {"plugin", FALSE, po_observe, po_compute, po_merge, po_save,
                                             po_free};

QhObserverConfig *qh_observer_config_from_spec(const QhQuantSpec *spec) {
  gboolean per_channel = qh_quant_qscheme_is_per_channel(spec->qscheme);
  QhObserverConfig *cfg =
      qh_observer_config_new(spec->observer ? spec->observer : qh_quant_default_observer(spec->qscheme));
  cfg->dtype = spec->dtype;
  cfg->qscheme = spec->qscheme;
  cfg->has_range = (spec->flags & QH_SPEC_HAS_RANGE) != 0;
  cfg->quant_min = spec->quant_min;
  cfg->quant_max = spec->quant_max;
  cfg->reduce_range = (spec->flags & QH_SPEC_REDUCE_RANGE) != 0;
  cfg->has_eps = (spec->flags & QH_SPEC_HAS_EPS) != 0;
  cfg->eps = spec->eps;
  cfg->ch_axis = per_channel ? spec->ch_axis : 0;
  for (size_t i = 0; i < spec->n_observer_args; i++)
    qh_observer_config_add_arg(cfg, spec->observer_args[i].key, spec->observer_args[i].value);
  return cfg;
}

static PluginObserver *new_shell(QhBackend *backend, const QhObserverOps *ops, const QhQuantSpec *spec,
                                 int rank, const int64_t *dims, GError **error) {
  int channels = 1;
  if (spec->ch_axis >= 0 && (spec->qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE ||
                             spec->qscheme == QH_QSCHEME_PER_CHANNEL_SYMMETRIC)) {
    if (spec->ch_axis >= rank || dims[spec->ch_axis] < 1 || dims[spec->ch_axis] > (1 << 24)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "plugin observer '%s': ch_axis %d does not fit the tensor",
                  ops->name, spec->ch_axis);
      return NULL;
    }
    channels = (int)dims[spec->ch_axis];
  }
  PluginObserver *po = g_new0(PluginObserver, 1);
  QhObserverConfig *cfg = qh_observer_config_from_spec(spec);
  qh_observer_init_base(&po->base, &plugin_class, cfg, rank, dims);
  qh_observer_config_free(cfg);
  po->backend = backend;
  po->ops = ops;
  po->n_channels = channels;
  return po;
}

QhObserver *qh_plugin_observer_new(QhBackend *backend, const QhObserverOps *ops, const QhQuantSpec *spec,
                                   int rank, const int64_t *dims, GError **error) {
  PluginObserver *po = new_shell(backend, ops, spec, rank, dims, error);
  if (po == NULL)
    return NULL;
  void *state = NULL;
  if (!qh_backend_observer_create(backend, ops, spec, rank, dims, &state, error)) {
    po_free(&po->base);
    return NULL;
  }
  po->state = state;
  return &po->base;
}

QhObserver *qh_plugin_observer_load(QhBackend *backend, const QhObserverOps *ops, const QhQuantSpec *spec,
                                    int rank, const int64_t *dims, const guint8 *data, gsize size,
                                    GError **error) {
  if (ops->load == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "plugin observer '%s' cannot load a saved state",
                ops->name);
    return NULL;
  }
  PluginObserver *po = new_shell(backend, ops, spec, rank, dims, error);
  if (po == NULL)
    return NULL;
  void *state = NULL;
  if (!qh_backend_observer_load(backend, ops, spec, rank, dims, data, size, &state, error)) {
    po_free(&po->base);
    return NULL;
  }
  po->state = state;
  return &po->base;
}
