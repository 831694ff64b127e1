/* EntropyObserver: ONNX Runtime's entropy (KL divergence) calibration
 * (HistogramCollector.get_entropy_threshold, after TensorRT's): for every window of
 * bins centred on zero, at least num_quantized_bins wide, the clipped distribution p
 * (outliers folded into its end bins) is compared with q, the same window merged into
 * num_quantized_bins bins and expanded back (integer division of counts, as ONNX
 * Runtime's int64 array does); both are smoothed with eps 1e-4 and the window with the
 * smallest KL(p || q) gives the range, clipped to the observed min/max. */
#include <math.h>
#include <string.h>

#include "quant/observers/orthist.h"

/* ORT's smooth_distribution: FALSE when it would fail (all zero, or eps1 too large). */
static gboolean smooth(double *p, int n) {
  int zeros = 0;
  for (int i = 0; i < n; i++)
    zeros += p[i] == 0.0;
  int nonzeros = n - zeros;
  if (nonzeros == 0)
    return FALSE;
  double eps = 0.0001, eps1 = eps * zeros / nonzeros;
  if (!(eps1 < 1.0))
    return FALSE;
  for (int i = 0; i < n; i++) {
    p[i] = (float)p[i];
    p[i] += p[i] == 0.0 ? eps : -eps1;
    if (p[i] <= 0.0)
      return FALSE;
  }
  return TRUE;
}

/* scipy.stats.entropy(p, q): both normalised, sum p log(p / q). */
static double kl(const double *p, const double *q, int n) {
  double sp = 0.0, sq = 0.0, s = 0.0;
  for (int i = 0; i < n; i++) {
    sp += p[i];
    sq += q[i];
  }
  for (int i = 0; i < n; i++) {
    double a = p[i] / sp, b = q[i] / sq;
    if (a > 0.0)
      s += a * log(a / b);
  }
  return s;
}

static QhQuantParams *entropy_compute(QhObserver *obs, GError **error) {
  (void)error;
  QhOrtHist *h = (QhOrtHist *)obs;
  if (!h->seen)
    return qh_obs_default_params(obs, 1);
  const int nb = h->n, zero = nb / 2, nq = (int)h->arg, nhalf = nq / 2;
  double *prefix = g_new(double, nb + 1);
  prefix[0] = 0.0;
  for (int i = 0; i < nb; i++)
    prefix[i + 1] = prefix[i] + h->hist[i];
  double *p = g_new(double, nb), *q = g_new(double, nb);
  double best = INFINITY;
  int best_start = 0, best_end = nb;
  gboolean found = FALSE;
  for (int i = nhalf; i <= zero; i++) {
    int start = zero - i;
    int end = zero + i + 1 <= nb ? zero + i + 1 : nb;
    int len = end - start;
    memcpy(p, h->hist + start, sizeof(double) * (size_t)len);
    p[0] += prefix[start];
    p[len - 1] += prefix[nb] - prefix[end];
    int merged = len / nq;
    memset(q, 0, sizeof(double) * (size_t)len);
    for (int b = 0; b < nq; b++) {
      int s0 = b * merged, s1 = s0 + merged;
      double count = 0.0;
      int nonzero = 0;
      for (int j = s0; j < s1; j++) {
        count += h->hist[start + j];
        nonzero += p[j] != 0.0;
      }
      if (b == nq - 1)
        for (int j = nq * merged; j < len; j++)
          count += h->hist[start + j];
      if (nonzero != 0)
        for (int j = s0; j < s1; j++)
          q[j] = trunc(count / nonzero);
    }
    double d = INFINITY;
    if (smooth(p, len) && smooth(q, len))
      d = kl(p, q, len);
    if (!found || d < best) {
      found = TRUE;
      best = d;
      best_start = start;
      best_end = end;
    }
  }
  g_free(prefix);
  g_free(p);
  g_free(q);
  float lo = qh_orthist_edge(h, best_start), hi = qh_orthist_edge(h, best_end);
  if (lo < h->min)
    lo = h->min;
  if (hi > h->max)
    hi = h->max;
  return qh_orthist_params(obs, lo, hi);
}

static const QhObserverClass entropy_class = {"EntropyObserver", FALSE, qh_orthist_observe,
                                              entropy_compute, qh_orthist_merge,
                                              qh_orthist_save, qh_orthist_free};

QhObserver *qh_obs_entropy_new(const QhObsSetup *s, int rank, const int64_t *dims,
                               GError **error) {
  (void)error;
  QhOrtHist *h = qh_orthist_new(s, rank, dims, &entropy_class, ORT_ENTROPY, FALSE,
                                (int)s->args[0], s->args[1]);
  return &h->base;
}
