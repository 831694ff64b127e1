/* MSEObserver (qhost's own): the histogram of ONNX Runtime's collector (values, range
 * symmetric around zero, num_bins bins for the first batch), then a search over
 * num_steps clipping ranges [min * k / num_steps, max * k / num_steps], k = 1..num_steps:
 * each range goes through docs/numerics.md §3 with this observer's dtype, qscheme and quant
 * range, every bin centre is fake-quantized with those qparams (§4.3: PyTorch's rounding,
 * clamped to [quant_min, quant_max]) and the squared error is weighted by the bin's
 * count. The range with the smallest mean squared error wins (the widest on ties). */
#pragma GCC optimize("fp-contract=off")

#include <math.h>

#include "quant/observers/orthist.h"
#include "quant/quantize.h"

static double fq_error(const QhOrtHist *h, float scale, int32_t zp, int32_t qmin, int32_t qmax) {
  float inv = 1.0f / scale;
  double err = 0.0;
  for (int k = 0; k < h->n; k++) {
    if (h->hist[k] == 0.0)
      continue;
    float c = (float)(h->lo + (h->hi - h->lo) * ((double)k + 0.5) / h->n);
    float r = nearbyintf(c * inv) + (float)zp;
    if (r < (float)qmin)
      r = (float)qmin;
    if (r > (float)qmax)
      r = (float)qmax;
    float dq = (r - (float)zp) * scale;
    double d = (double)c - (double)dq;
    err += h->hist[k] * d * d;
  }
  return err;
}

static QhQuantParams *mse_compute(QhObserver *obs, GError **error) {
  (void)error;
  QhOrtHist *h = (QhOrtHist *)obs;
  if (!h->seen)
    return qh_obs_default_params(obs, 1);
  int32_t qmin, qmax;
  float eps;
  qh_obs_range(obs, &qmin, &qmax, &eps);
  int steps = (int)h->arg;
  double best = INFINITY;
  float best_lo = h->min, best_hi = h->max;
  for (int k = steps; k >= 1; k--) {
    float lo = (float)((double)h->min * k / steps), hi = (float)((double)h->max * k / steps);
    float scale;
    int32_t zp;
    qh_quant_calculate_qparams(lo, hi, qmin, qmax, obs->config->qscheme, obs->config->dtype,
                               obs->config->has_range, eps, &scale, &zp);
    double e = fq_error(h, scale, zp, qmin, qmax);
    if (e < best) {
      best = e;
      best_lo = lo;
      best_hi = hi;
    }
  }
  return qh_orthist_params(obs, best_lo, best_hi);
}

static const QhObserverClass mse_class = {"MSEObserver", FALSE, qh_orthist_observe,
                                          mse_compute, qh_orthist_merge, qh_orthist_save,
                                          qh_orthist_free};

QhObserver *qh_obs_mse_new(const QhObsSetup *s, int rank, const int64_t *dims, GError **error) {
  (void)error;
  QhOrtHist *h = qh_orthist_new(s, rank, dims, &mse_class, ORT_MSE, FALSE, (int)s->args[0],
                                s->args[1]);
  return &h->base;
}
