/* The min/max family of PyTorch 1.13 (docs/numerics.md §2): MinMaxObserver,
 * MovingAverageMinMaxObserver, PerChannelMinMaxObserver and
 * MovingAveragePerChannelMinMaxObserver. One state type serves all four: n running
 * minima and maxima (n = 1 per tensor, the channel count per channel), updated exactly
 * (min/max) or by the float32 moving average min + c*(cur - min), and turned into qparams
 * by docs/numerics.md §3 (quant/quantize.c). Merging two min/max states is exact; merging
 * moving averages treats the other state as one more batch (order dependent). */
#pragma GCC optimize("fp-contract=off")

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "quant/observers/host-observers.h"
#include "quant/quantize.h"

#define STATE_VERSION 1u

typedef struct {
  QhObserver base;
  gboolean moving;
  float c;  /* f32(averaging_constant) */
  int axis; /* -1 per tensor */
  int n;
  gboolean seen; /* per channel: PyTorch's non-empty min_val; per tensor: min/max not +-inf */
  float *min;
  float *max;
  float *cur_min; /* scratch for one batch's per-channel stats */
  float *cur_max;
} MinMax;

static void fold(MinMax *m, const float *mn, const float *mx) {
  if (!m->seen) {
    memcpy(m->min, mn, sizeof(float) * (size_t)m->n);
    memcpy(m->max, mx, sizeof(float) * (size_t)m->n);
    m->seen = TRUE;
    return;
  }
  for (int i = 0; i < m->n; i++) {
    if (m->moving) {
      /* min + c * (cur - min), each step rounded to float32 (§2.2) */
      float dmin = mn[i] - m->min[i];
      float dmax = mx[i] - m->max[i];
      float smin = m->c * dmin;
      float smax = m->c * dmax;
      m->min[i] = m->min[i] + smin;
      m->max[i] = m->max[i] + smax;
    } else {
      m->min[i] = mn[i] < m->min[i] ? mn[i] : m->min[i];
      m->max[i] = mx[i] > m->max[i] ? mx[i] : m->max[i];
    }
  }
}

static gboolean minmax_observe(QhObserver *obs, const QhTensor *x, GError **error) {
  MinMax *m = (MinMax *)obs;
  const float *d = x->data;
  size_t numel = (size_t)qh_tensor_numel(x);
  if (m->axis < 0) {
    float mn, mx;
    if (!qh_obs_scan(obs, d, numel, &mn, &mx, error))
      return FALSE;
    fold(m, &mn, &mx);
    return TRUE;
  }
  size_t outer = 1, inner = 1, nch = (size_t)m->n;
  for (int i = 0; i < m->axis; i++)
    outer *= (size_t)x->shape.dims[i];
  for (int i = m->axis + 1; i < x->shape.rank; i++)
    inner *= (size_t)x->shape.dims[i];
  for (size_t c = 0; c < nch; c++) {
    for (size_t o = 0; o < outer; o++) {
      float mn, mx;
      if (!qh_obs_scan(obs, d + (o * nch + c) * inner, inner, &mn, &mx, error))
        return FALSE;
      if (o == 0 || mn < m->cur_min[c])
        m->cur_min[c] = mn;
      if (o == 0 || mx > m->cur_max[c])
        m->cur_max[c] = mx;
    }
  }
  fold(m, m->cur_min, m->cur_max);
  return TRUE;
}

static QhQuantParams *minmax_compute(QhObserver *obs, GError **error) {
  MinMax *m = (MinMax *)obs;
  if (!m->seen)
    return qh_obs_default_params(obs, m->n);
  int32_t qmin, qmax;
  float eps;
  qh_obs_range(obs, &qmin, &qmax, &eps);
  QhQuantParams *q = qh_obs_params_new(obs, m->n, m->axis);
  for (int i = 0; i < m->n; i++) {
    if (!(m->min[i] <= m->max[i])) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: min %g should be <= max %g",
                  obs->config->name, (double)m->min[i], (double)m->max[i]);
      qh_quant_params_free(q);
      return NULL;
    }
    qh_quant_calculate_qparams(m->min[i], m->max[i], qmin, qmax, obs->config->qscheme,
                               obs->config->dtype, obs->config->has_range, eps, &q->scale[i],
                               &q->zero_point[i]);
  }
  return q;
}

static gboolean minmax_merge(QhObserver *obs, const QhObserver *other, GError **error) {
  (void)error;
  MinMax *m = (MinMax *)obs;
  const MinMax *o = (const MinMax *)other;
  if (o->seen)
    fold(m, o->min, o->max);
  return TRUE;
}

static gboolean minmax_save(const QhObserver *obs, GByteArray *out, GError **error) {
  (void)error;
  const MinMax *m = (const MinMax *)obs;
  qh_obs_put_u32(out, STATE_VERSION);
  qh_obs_put_u32(out, m->seen ? 1u : 0u);
  qh_obs_put_u32(out, (uint32_t)m->n);
  qh_obs_put_f32s(out, m->min, (size_t)m->n);
  qh_obs_put_f32s(out, m->max, (size_t)m->n);
  return TRUE;
}

gboolean qh_obs_minmax_load(QhObserver *obs, const guint8 *data, gsize size, GError **error) {
  MinMax *m = (MinMax *)obs;
  QhObsReader r = {data, size, FALSE};
  uint32_t version = qh_obs_get_u32(&r);
  uint32_t seen = qh_obs_get_u32(&r);
  uint32_t n = qh_obs_get_u32(&r);
  if (!r.bad && (version != STATE_VERSION || seen > 1 || n != (uint32_t)m->n)) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "%s: saved state has version %u, flag %u, %u channels (expected %u, 0/1, %d)",
                obs->config->name, version, seen, n, STATE_VERSION, m->n);
    return FALSE;
  }
  qh_obs_get_f32s(&r, m->min, (size_t)m->n);
  qh_obs_get_f32s(&r, m->max, (size_t)m->n);
  if (!qh_obs_reader_done(&r, obs, error))
    return FALSE;
  m->seen = seen == 1;
  return TRUE;
}

static void minmax_free(QhObserver *obs) {
  MinMax *m = (MinMax *)obs;
  g_free(m->min);
  g_free(m->max);
  g_free(m->cur_min);
  g_free(m->cur_max);
  qh_observer_clear_base(obs);
  g_free(m);
}

static const QhObserverClass classes[4] = {
    {"MinMaxObserver", TRUE, minmax_observe, minmax_compute, minmax_merge, minmax_save,
     minmax_free},
    {"MovingAverageMinMaxObserver", FALSE, minmax_observe, minmax_compute, minmax_merge,
     minmax_save, minmax_free},
    {"PerChannelMinMaxObserver", TRUE, minmax_observe, minmax_compute, minmax_merge, minmax_save,
     minmax_free},
    {"MovingAveragePerChannelMinMaxObserver", FALSE, minmax_observe, minmax_compute,
     minmax_merge, minmax_save, minmax_free},
};

static QhObserver *make(const QhObsSetup *s, int rank, const int64_t *dims, int which) {
  MinMax *m = g_new0(MinMax, 1);
  qh_observer_init_base(&m->base, &classes[which], s->cfg, rank, dims);
  m->moving = which == 1 || which == 3;
  m->c = m->moving ? (float)s->args[0] : 0.0f;
  m->axis = s->ch_axis;
  m->n = m->axis >= 0 ? (int)dims[m->axis] : 1;
  m->min = g_new(float, m->n);
  m->max = g_new(float, m->n);
  m->cur_min = g_new(float, m->n);
  m->cur_max = g_new(float, m->n);
  for (int i = 0; i < m->n; i++) {
    m->min[i] = INFINITY;
    m->max[i] = -INFINITY;
  }
  return &m->base;
}

QhObserver *qh_obs_minmax_new(const QhObsSetup *s, int rank, const int64_t *dims, GError **error) {
  (void)error;
  return make(s, rank, dims, 0);
}

QhObserver *qh_obs_moving_minmax_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                     GError **error) {
  (void)error;
  return make(s, rank, dims, 1);
}

QhObserver *qh_obs_per_channel_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                   GError **error) {
  (void)error;
  return make(s, rank, dims, 2);
}

QhObserver *qh_obs_moving_per_channel_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                          GError **error) {
  (void)error;
  return make(s, rank, dims, 3);
}
