/* ONNX Runtime's HistogramCollector (onnxruntime/python/tools/quantization/calibrate.py)
 * in C: the state behind PercentileObserver, EntropyObserver and MSEObserver. Counts are
 * kept in double so that merged (weighted) histograms stay exact sums; bin edges are
 * uniform and computed in double, where numpy's np.histogram works on float32 edges, so
 * a value lying on an edge may land one bin over from ONNX Runtime (docs/observers.md).
 * Merging folds the other histogram's bin centres in as one more weighted batch. */
#include "quant/observers/orthist.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "quant/quantize.h"

#define STATE_VERSION 1u
/* Bins a growing histogram may reach (32 MiB of counts). */
#define MAX_BINS (1 << 22)

float qh_orthist_edge(const QhOrtHist *h, int i) {
  if (i >= h->n)
    return (float)h->hi;
  return (float)(h->lo + (h->hi - h->lo) * (double)i / (double)h->n);
}

/* np.histogram over [lo, hi] with n uniform bins, added to dest at offset. */
static void bin_into(double *dest, int n, double lo, double hi, const float *v, const double *w,
                     size_t count, gboolean absval) {
  double span = hi - lo;
  for (size_t i = 0; i < count; i++) {
    double x = absval ? fabs((double)v[i]) : (double)v[i];
    if (!(x >= lo && x <= hi))
      continue;
    int64_t k = (int64_t)floor((x - lo) / span * (double)n);
    if (k >= n)
      k = n - 1;
    if (k < 0)
      k = 0;
    dest[k] += w ? w[i] : 1.0;
  }
}

static gboolean grow_to(QhOrtHist *h, int n, GError **error) {
  if (n > MAX_BINS) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT,
                "%s: the histogram would grow to more than %d bins (the range grew %.3g times)",
                h->base.config->name, MAX_BINS, (double)n / h->first_bins);
    return FALSE;
  }
  return TRUE;
}

/* One batch of values (weights w, or 1) whose raw extremes are vmin, vmax. */
static gboolean collect(QhOrtHist *h, const float *v, const double *w, size_t count, float vmin,
                        float vmax, GError **error) {
  if (h->absval) {
    double amin = INFINITY, amax = 0.0;
    for (size_t i = 0; i < count; i++) {
      double a = fabs((double)v[i]);
      amin = a < amin ? a : amin;
      amax = a > amax ? a : amax;
    }
    if (!h->seen) {
      h->n = h->first_bins;
      h->lo = amin;
      h->hi = amax;
      if (h->lo == h->hi) {
        h->lo -= 0.5;
        h->hi += 0.5;
      }
      h->hist = g_new0(double, h->n);
    } else if (amax > h->hi) {
      /* np.arange(last + width, amax + width, width) more edges on the right */
      double width = (h->hi - h->lo) / h->n;
      double more = ceil((amax - h->hi) / width);
      if (!grow_to(h, (int)fmin((double)h->n + more, (double)MAX_BINS + 1), error))
        return FALSE;
      int k = (int)more;
      h->hist = g_renew(double, h->hist, h->n + k);
      memset(h->hist + h->n, 0, sizeof(double) * (size_t)k);
      h->n += k;
      h->hi = h->lo + width * h->n;
    }
    bin_into(h->hist, h->n, h->lo, h->hi, v, w, count, TRUE);
  } else {
    double th = fmax(fabs((double)vmin), fabs((double)vmax));
    if (!h->seen) {
      h->n = h->first_bins;
      h->threshold = th;
      h->lo = th == 0.0 ? -0.5 : -th;
      h->hi = th == 0.0 ? 0.5 : th;
      h->hist = g_new0(double, h->n);
      bin_into(h->hist, h->n, h->lo, h->hi, v, w, count, FALSE);
    } else if (th <= h->threshold) {
      bin_into(h->hist, h->n, h->lo, h->hi, v, w, count, FALSE);
    } else if (h->threshold == 0.0) {
      /* ONNX Runtime adds the old counts bin by bin onto the new range */
      h->threshold = th;
      h->lo = -th;
      h->hi = th;
      bin_into(h->hist, h->n, h->lo, h->hi, v, w, count, FALSE);
    } else {
      double stride = 2.0 * h->threshold / h->n;
      double half_d = floor((th - h->threshold) / stride) + 1.0;
      double new_n = (double)h->n + 2.0 * half_d;
      if (!grow_to(h, (int)fmin(new_n, (double)MAX_BINS + 1), error))
        return FALSE;
      int half = (int)half_d;
      double *nh = g_new0(double, (size_t)new_n);
      memcpy(nh + half, h->hist, sizeof(double) * (size_t)h->n);
      g_free(h->hist);
      h->hist = nh;
      h->n = (int)new_n;
      h->threshold = half * stride + h->threshold;
      h->lo = -h->threshold;
      h->hi = h->threshold;
      bin_into(h->hist, h->n, h->lo, h->hi, v, w, count, FALSE);
    }
  }
  if (!h->seen) {
    h->min = vmin;
    h->max = vmax;
    h->seen = TRUE;
  } else {
    h->min = vmin < h->min ? vmin : h->min;
    h->max = vmax > h->max ? vmax : h->max;
  }
  return TRUE;
}

gboolean qh_orthist_observe(QhObserver *obs, const QhTensor *x, GError **error) {
  QhOrtHist *h = (QhOrtHist *)obs;
  size_t n = (size_t)qh_tensor_numel(x);
  float mn, mx;
  if (!qh_obs_scan(obs, x->data, n, &mn, &mx, error))
    return FALSE;
  return collect(h, x->data, NULL, n, mn, mx, error);
}

gboolean qh_orthist_merge(QhObserver *obs, const QhObserver *other, GError **error) {
  QhOrtHist *h = (QhOrtHist *)obs;
  const QhOrtHist *o = (const QhOrtHist *)other;
  if (!o->seen)
    return TRUE;
  if (!h->seen) {
    h->seen = TRUE;
    h->min = o->min;
    h->max = o->max;
    h->threshold = o->threshold;
    h->lo = o->lo;
    h->hi = o->hi;
    h->n = o->n;
    h->hist = g_memdup2(o->hist, sizeof(double) * (size_t)o->n);
    return TRUE;
  }
  float *v = g_new(float, o->n);
  double *w = g_new(double, o->n);
  size_t k = 0;
  for (int i = 0; i < o->n; i++) {
    if (o->hist[i] == 0.0)
      continue;
    v[k] = (float)(o->lo + (o->hi - o->lo) * ((double)i + 0.5) / o->n);
    w[k] = o->hist[i];
    k++;
  }
  gboolean ok = collect(h, v, w, k, o->min, o->max, error);
  g_free(v);
  g_free(w);
  return ok;
}

gboolean qh_orthist_save(const QhObserver *obs, GByteArray *out, GError **error) {
  (void)error;
  const QhOrtHist *h = (const QhOrtHist *)obs;
  qh_obs_put_u32(out, STATE_VERSION);
  qh_obs_put_u32(out, h->seen ? 1u : 0u);
  qh_obs_put_u32(out, (uint32_t)h->n);
  qh_obs_put_f32(out, h->min);
  qh_obs_put_f32(out, h->max);
  qh_obs_put_f64(out, h->threshold);
  qh_obs_put_f64(out, h->lo);
  qh_obs_put_f64(out, h->hi);
  for (int i = 0; h->seen && i < h->n; i++)
    qh_obs_put_f64(out, h->hist[i]);
  return TRUE;
}

gboolean qh_obs_orthist_load(QhObserver *obs, const guint8 *data, gsize size, GError **error) {
  QhOrtHist *h = (QhOrtHist *)obs;
  QhObsReader r = {data, size, FALSE};
  uint32_t version = qh_obs_get_u32(&r);
  uint32_t seen = qh_obs_get_u32(&r);
  uint32_t n = qh_obs_get_u32(&r);
  float mn = qh_obs_get_f32(&r), mx = qh_obs_get_f32(&r);
  double th = qh_obs_get_f64(&r), lo = qh_obs_get_f64(&r), hi = qh_obs_get_f64(&r);
  gboolean ok = !r.bad && version == STATE_VERSION && seen <= 1;
  if (ok && seen)
    ok = n >= 1 && n <= MAX_BINS && (gsize)n * 8 == r.left && isfinite(mn) && isfinite(mx) &&
         mn <= mx && isfinite(lo) && isfinite(hi) && lo < hi && isfinite(th) && th >= 0;
  if (!ok) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "%s: saved state is truncated, of another version (%u) or inconsistent",
                obs->config->name, version);
    return FALSE;
  }
  if (seen) {
    g_free(h->hist);
    h->hist = g_new(double, n);
    for (uint32_t i = 0; i < n; i++)
      h->hist[i] = qh_obs_get_f64(&r);
    h->n = (int)n;
    h->seen = TRUE;
    h->min = mn;
    h->max = mx;
    h->threshold = th;
    h->lo = lo;
    h->hi = hi;
  }
  return qh_obs_reader_done(&r, obs, error);
}

void qh_orthist_free(QhObserver *obs) {
  QhOrtHist *h = (QhOrtHist *)obs;
  g_free(h->hist);
  qh_observer_clear_base(obs);
  g_free(h);
}

QhOrtHist *qh_orthist_new(const QhObsSetup *s, int rank, const int64_t *dims,
                          const QhObserverClass *klass, QhOrtMethod method, gboolean absval,
                          int first_bins, double arg) {
  QhOrtHist *h = g_new0(QhOrtHist, 1);
  qh_observer_init_base(&h->base, klass, s->cfg, rank, dims);
  h->method = method;
  h->absval = absval;
  h->first_bins = first_bins;
  h->arg = arg;
  return h;
}

QhQuantParams *qh_orthist_params(QhObserver *obs, float lo, float hi) {
  int32_t qmin, qmax;
  float eps;
  qh_obs_range(obs, &qmin, &qmax, &eps);
  QhQuantParams *q = qh_obs_params_new(obs, 1, -1);
  qh_quant_calculate_qparams(lo, hi, qmin, qmax, obs->config->qscheme, obs->config->dtype,
                             obs->config->has_range, eps, &q->scale[0], &q->zero_point[0]);
  return q;
}
