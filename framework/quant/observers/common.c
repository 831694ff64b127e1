/* Helpers every host observer family uses: the input scan that rejects NaN/Inf and
 * finds min/max in one vectorisable pass, the qparams of an observer that saw nothing,
 * and the little-endian reader and writer of saved state. */
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "quant/observers/host-observers.h"

void qh_obs_range(const QhObserver *obs, int32_t *qmin, int32_t *qmax, float *eps) {
  qh_observer_config_range(obs->config, qmin, qmax);
  *eps = obs->config->has_eps ? obs->config->eps : 0x1p-23f;
}

QhQuantParams *qh_obs_params_new(const QhObserver *obs, int n, int ch_axis) {
  QhQuantParams *q = qh_quant_params_new(n);
  q->dtype = obs->config->dtype;
  q->qscheme = obs->config->qscheme;
  qh_observer_config_range(obs->config, &q->quant_min, &q->quant_max);
  q->ch_axis = ch_axis;
  return q;
}

QhQuantParams *qh_obs_default_params(const QhObserver *obs, int n) {
  qh_log(QH_LOG_WARNING, "%s: must run observer before computing qparams; using scale 1, zero point 0",
         obs->config->name);
  int axis = -1;
  if (n > 1 || obs->config->qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE ||
      obs->config->qscheme == QH_QSCHEME_PER_CHANNEL_SYMMETRIC)
    axis = obs->config->ch_axis < 0 ? obs->config->ch_axis + obs->rank : obs->config->ch_axis;
  QhQuantParams *q = qh_obs_params_new(obs, n, axis);
  for (int i = 0; i < n; i++) {
    q->scale[i] = 1.0f;
    q->zero_point[i] = 0;
  }
  return q;
}

/* Map float bits to integers ordered like the floats, so the reductions below are
 * integer min/max that GCC vectorises (float min/max reductions need -ffast-math). */
static inline int32_t order_key(uint32_t u) {
  return (int32_t)(u ^ ((uint32_t)((int32_t)u >> 31) & 0x7fffffffu));
}

gboolean qh_obs_scan(const QhObserver *obs, const float *x, size_t n, float *out_min,
                     float *out_max, GError **error) {
  const uint32_t *u = (const uint32_t *)(const void *)x;
  int32_t kmin = INT32_MAX, kmax = INT32_MIN;
  uint32_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t v = u[i];
    int32_t k = order_key(v);
    bad |= (uint32_t)((v & 0x7f800000u) == 0x7f800000u);
    kmin = k < kmin ? k : kmin;
    kmax = k > kmax ? k : kmax;
  }
  if (bad) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: NaN or Inf in the data",
                obs->config->name);
    return FALSE;
  }
  uint32_t bmin = (uint32_t)kmin ^ ((uint32_t)(kmin >> 31) & 0x7fffffffu);
  uint32_t bmax = (uint32_t)kmax ^ ((uint32_t)(kmax >> 31) & 0x7fffffffu);
  memcpy(out_min, &bmin, 4);
  memcpy(out_max, &bmax, 4);
  return TRUE;
}

void qh_obs_put_u32(GByteArray *out, uint32_t v) {
  guint8 b[4];
  for (int i = 0; i < 4; i++)
    b[i] = (guint8)(v >> (8 * i));
  g_byte_array_append(out, b, 4);
}

void qh_obs_put_u64(GByteArray *out, uint64_t v) {
  guint8 b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (guint8)(v >> (8 * i));
  g_byte_array_append(out, b, 8);
}

void qh_obs_put_f32(GByteArray *out, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  qh_obs_put_u32(out, u);
}

void qh_obs_put_f64(GByteArray *out, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  qh_obs_put_u64(out, u);
}

void qh_obs_put_f32s(GByteArray *out, const float *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    qh_obs_put_f32(out, v[i]);
}

uint32_t qh_obs_get_u32(QhObsReader *r) {
  if (r->bad || r->left < 4) {
    r->bad = TRUE;
    return 0;
  }
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)r->p[i] << (8 * i);
  r->p += 4;
  r->left -= 4;
  return v;
}

uint64_t qh_obs_get_u64(QhObsReader *r) {
  uint64_t lo = qh_obs_get_u32(r);
  uint64_t hi = qh_obs_get_u32(r);
  return lo | (hi << 32);
}

float qh_obs_get_f32(QhObsReader *r) {
  uint32_t u = qh_obs_get_u32(r);
  float v;
  memcpy(&v, &u, 4);
  return v;
}

double qh_obs_get_f64(QhObsReader *r) {
  uint64_t u = qh_obs_get_u64(r);
  double v;
  memcpy(&v, &u, 8);
  return v;
}

gboolean qh_obs_get_f32s(QhObsReader *r, float *v, size_t n) {
  if (r->bad || r->left / 4 < n) {
    r->bad = TRUE;
    return FALSE;
  }
  for (size_t i = 0; i < n; i++)
    v[i] = qh_obs_get_f32(r);
  return TRUE;
}

gboolean qh_obs_reader_done(const QhObsReader *r, const QhObserver *obs, GError **error) {
  if (r->bad || r->left != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "%s: saved state is truncated or has trailing bytes", obs->config->name);
    return FALSE;
  }
  return TRUE;
}
