/* PercentileObserver: ONNX Runtime's percentile calibration (HistogramCollector with
 * method "percentile", compute_percentile). With a symmetric qscheme the histogram is of
 * |x| and the range is [-t, t] for the edge t where the cumulative share first reaches
 * percentile/100; with an affine qscheme the histogram is of x and (100 - percentile)/2
 * percent is cut from each side. Both ends are then clipped to the observed min/max, and
 * docs/numerics.md §3 turns the range into qparams with this observer's dtype and range. */
#include <math.h>

#include "quant/observers/orthist.h"

/* np.searchsorted(cdf, v) (side 'left'): the first i with cdf[i] >= v, else n. */
static int searchsorted(const double *cdf, int n, double v) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (cdf[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static QhQuantParams *percentile_compute(QhObserver *obs, GError **error) {
  (void)error;
  QhOrtHist *h = (QhOrtHist *)obs;
  if (!h->seen)
    return qh_obs_default_params(obs, 1);
  double total = 0.0;
  for (int i = 0; i < h->n; i++)
    total += h->hist[i];
  double *cdf = g_new(double, h->n);
  double run = 0.0;
  for (int i = 0; i < h->n; i++) {
    run += h->hist[i] / total;
    cdf[i] = run;
  }
  double pct = h->arg;
  float lo, hi;
  if (h->absval) {
    float t = qh_orthist_edge(h, searchsorted(cdf, h->n, pct / 100.0));
    lo = -t;
    hi = t;
  } else {
    double cut = (100.0 - pct) / 200.0;
    lo = qh_orthist_edge(h, searchsorted(cdf, h->n, cut));
    hi = qh_orthist_edge(h, searchsorted(cdf, h->n, 1.0 - cut));
  }
  g_free(cdf);
  if (lo < h->min)
    lo = h->min;
  if (hi > h->max)
    hi = h->max;
  return qh_orthist_params(obs, lo, hi);
}

static const QhObserverClass percentile_class = {
    "PercentileObserver", FALSE, qh_orthist_observe, percentile_compute, qh_orthist_merge,
    qh_orthist_save, qh_orthist_free};

QhObserver *qh_obs_percentile_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                  GError **error) {
  (void)error;
  gboolean sym = s->cfg->qscheme == QH_QSCHEME_PER_TENSOR_SYMMETRIC;
  QhOrtHist *h = qh_orthist_new(s, rank, dims, &percentile_class, ORT_PERCENTILE, sym,
                                (int)s->args[1], s->args[0]);
  return &h->base;
}
