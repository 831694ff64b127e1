/* HistogramObserver exactly as PyTorch 1.13 computes it (docs/numerics.md §6): histc with
 * the int() truncation of its bounds (pytorch/pytorch#83672, reproduced on purpose),
 * the upsample/downsample combine of histograms when the range grows, and the L2
 * search for a clipped range (_non_linear_param_search) with torch.sum's float32
 * order (torch-sum.c). The combine never materialises PyTorch's bins*downsample_rate
 * buffer: only its double prefix sums at the bin ends are needed, and zeros add
 * nothing to them. Merging two observers (sharded calibration) folds the other's
 * histogram in as if its bin centres were one more batch: an approximation
 * (merge_is_exact FALSE), documented in docs/observers.md. */
#pragma GCC optimize("fp-contract=off")

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "quant/observers/host-observers.h"
#include "quant/quantize.h"

#define STATE_VERSION 1u
/* Largest downsample rate accepted when a batch widens the range; PyTorch would
 * allocate bins * rate floats. */
#define MAX_DOWNSAMPLE (INT64_C(1) << 31)

typedef struct {
  QhObserver base;
  int bins;
  int upsample;
  double dst_nbins; /* 2^bits of the dtype: the search always assumes the full width */
  float min, max;
  float *hist;
  float *scratch;
  double *integral;
} Hist;

static gboolean uninitialised(const Hist *h) { return h->min == INFINITY && h->max == -INFINITY; }

/* A source of values to bin: a tensor (weights 1) or a merged histogram's points. */
typedef struct {
  const float *v;
  const float *w; /* NULL: every weight is 1 */
  size_t n;
  float vmin, vmax;
} Points;

/* §6.2: ATen's histc (linear interpolation) over [lo, hi]. */
static void histc(const Points *p, int bins, double lo, double hi, float *out) {
  double L = lo, R = hi;
  if (L == R) {
    L = p->vmin;
    R = p->vmax;
  }
  if (L == R) {
    L -= 1;
    R += 1;
  }
  float lf = (float)L, rf = (float)R;
  float fb = (float)bins;
  float width = rf - lf;
  memset(out, 0, sizeof(float) * (size_t)bins);
  if (p->w == NULL) {
    /* Counts are exact in float32 below 2^24 per bin, as in ATen. */
    for (size_t i = 0; i < p->n; i++) {
      float v = p->v[i];
      if (!(v >= lf && v <= rf))
        continue;
      float t = (v - lf) * fb;
      int64_t pos = (int64_t)(t / width);
      if (pos >= bins)
        pos = bins - 1;
      out[pos] += 1.0f;
    }
  } else {
    for (size_t i = 0; i < p->n; i++) {
      float v = p->v[i];
      if (!(v >= lf && v <= rf))
        continue;
      float t = (v - lf) * fb;
      int64_t pos = (int64_t)(t / width);
      if (pos >= bins)
        pos = bins - 1;
      out[pos] += p->w[i];
    }
  }
}

/* _combine_histograms: hist (the old state) upsampled by U, placed at start in a grid
 * of bins*dr cells, integrated in double at every dr-th cell and interpolated back;
 * the result is added to fresh (the new batch's histogram). */
static void combine(Hist *h, float *fresh, int64_t dr, int64_t start) {
  const int64_t B = h->bins, U = h->upsample, total = B * U;
  double acc = 0.0;
  int64_t j = 0;
  for (int64_t k = 0; k < B; k++) {
    int64_t target = (k + 1) * dr - 1;
    while (j < total && start + j <= target) {
      acc += (double)h->hist[j / U];
      j++;
    }
    h->integral[k] = acc;
  }
  for (int64_t k = 0; k < B; k++) {
    float shifted = k == 0 ? 0.0f : (float)h->integral[k - 1];
    double diff = h->integral[k] - (double)shifted;
    float interp = (float)(diff / (double)U);
    fresh[k] = fresh[k] + interp;
  }
}

/* §6.1: fold one batch (or a merged histogram's points) into the state. trunc_bounds:
 * PyTorch's int() of the histc bounds; FALSE for merged points. */
static gboolean absorb(Hist *h, const Points *p, gboolean trunc_bounds, GError **error) {
  const char *name = h->base.config->name;
  if (uninitialised(h) || (double)h->min == (double)h->max) {
    h->min = p->vmin;
    h->max = p->vmax;
    double lo = trunc_bounds ? trunc((double)p->vmin) : (double)p->vmin;
    double hi = trunc_bounds ? trunc((double)p->vmax) : (double)p->vmax;
    histc(p, h->bins, lo, hi, h->hist);
    return TRUE;
  }
  float cmin = p->vmin < h->min ? p->vmin : h->min;
  float cmax = p->vmax > h->max ? p->vmax : h->max;
  /* _adjust_min_max */
  float span_old = h->max - h->min;
  float hbw = span_old / (float)((double)h->bins * (double)h->upsample);
  float bhbw = (float)h->bins * hbw;
  float span = cmax - cmin;
  float ratio = span / bhbw;
  float dr_f = ceilf(ratio);
  if (!(hbw > 0.0f) || !(dr_f >= 1.0f) || !((double)dr_f <= (double)MAX_DOWNSAMPLE)) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT,
                "%s: a batch widens the range [%g, %g] to [%g, %g], beyond what the histogram "
                "can combine",
                name, (double)h->min, (double)h->max, (double)cmin, (double)cmax);
    return FALSE;
  }
  int64_t dr = (int64_t)dr_f;
  float grown = (float)dr * bhbw;
  float e = grown - span;
  cmax = cmax + e;
  float off = (h->min - cmin) / hbw;
  int64_t start = (int64_t)nearbyintf(off);
  double lo = trunc_bounds ? trunc((double)cmin) : (double)cmin;
  double hi = trunc_bounds ? trunc((double)cmax) : (double)cmax;
  histc(p, h->bins, lo, hi, h->scratch);
  if (cmin == h->min && cmax == h->max) {
    for (int k = 0; k < h->bins; k++)
      h->scratch[k] = h->scratch[k] + h->hist[k];
  } else {
    if (start + (int64_t)h->bins * h->upsample > (int64_t)h->bins * dr) {
      /* PyTorch fails here too (a shape mismatch in the slice assignment) */
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s: histograms cannot be combined (start %" G_GINT64_FORMAT
                  " + %d x %d bins exceeds %d x %" G_GINT64_FORMAT ")",
                  name, start, h->bins, h->upsample, h->bins, dr);
      return FALSE;
    }
    combine(h, h->scratch, dr, start);
  }
  float *t = h->hist;
  h->hist = h->scratch;
  h->scratch = t;
  h->min = cmin;
  h->max = cmax;
  return TRUE;
}

static gboolean hist_observe(QhObserver *obs, const QhTensor *x, GError **error) {
  Hist *h = (Hist *)obs;
  Points p = {.v = x->data, .n = (size_t)qh_tensor_numel(x)};
  if (!qh_obs_scan(obs, p.v, p.n, &p.vmin, &p.vmax, error))
    return FALSE;
  return absorb(h, &p, TRUE, error);
}

/* ATen's div_floor for floats (docs/numerics.md §6.5), not floorf(a / b). */
static float pyfloor_div(float a, float b) {
  if (b == 0.0f)
    return a / b;
  float m = fmodf(a, b);
  float q = (a - m) / b;
  if (m != 0.0f && ((b < 0.0f) != (m < 0.0f)))
    q = q - 1.0f;
  if (q != 0.0f) {
    float f = floorf(q);
    if (q - f > 0.5f)
      f = f + 1.0f;
    return f;
  }
  return copysignf(0.0f, a / b);
}

static float cube(float v) {
  float sq = v * v;
  return sq * v;
}

/* §6.5: _compute_quantization_error (L2) of clipping to bins [s, e]. */
static double quant_error(Hist *h, int s, int e) {
  const int B = h->bins;
  double bw = ((double)h->max - (double)h->min) / B;
  double dbw = bw * (double)(e - s + 1) / h->dst_nbins;
  if (dbw == 0.0)
    return 0.0;
  float bwf = (float)bw, d = (float)dbw, hh = (float)(dbw / 2), mh = (float)(-dbw / 2);
  float top = (float)(h->dst_nbins - 1);
  float hcube = cube(hh), mcube = cube(mh);
  float g = (hcube - mcube) / 3.0f;
  float *norm = h->scratch;
  for (int k = 0; k < B; k++) {
    float begin = (float)(k - s) * bwf;
    float end = begin + bwf;
    float db = pyfloor_div(begin, d);
    db = db < 0.0f ? 0.0f : (db > top ? top : db);
    float de = pyfloor_div(end, d);
    de = de < 0.0f ? 0.0f : (de > top ? top : de);
    float density = h->hist[k] / bwf;
    float center = (db + 0.5f) * d;
    float t1 = begin - center;
    float n = density * ((hcube - cube(t1)) / 3.0f);
    float mid = (de - db - 1.0f) * (density * g);
    n = n + mid;
    float ecenter = de * d + hh;
    float t2 = end - ecenter;
    n = n + density * ((cube(t2) - mcube) / 3.0f);
    norm[k] = n;
  }
  return (double)qh_torch_sum_f32(norm, (size_t)B);
}

/* §6.4: _non_linear_param_search. The two linear scans of PyTorch's loop are binary
 * searches here when cSum is monotone (the same answers, far fewer steps). */
static void param_search(Hist *h, float *out_min, float *out_max) {
  const int B = h->bins;
  float *c = g_new(float, B);
  double run = 0.0;
  for (int i = 0; i < B; i++) {
    run += (double)h->hist[i];
    c[i] = (float)run;
  }
  /* Interpolated bins can come out a hair below zero, and then cSum is not monotone:
   * the binary searches below are used only when it is. */
  gboolean mono = TRUE;
  for (int i = 1; i < B && mono; i++)
    mono = c[i] >= c[i - 1];
  double total = (double)qh_torch_sum_f32(h->hist, (size_t)B);
  double alpha = 0.0, beta = 1.0;
  const double step = 1e-5;
  int s = 0, e = B - 1;
  double norm_min = INFINITY;
  while (alpha < beta) {
    double na = alpha + step, nb = beta - step;
    float ta = (float)(na * total), tb = (float)(nb * total);
    int l = s, r = e;
    if (mono) {
      /* l: first index in [s, e) with c >= ta, else e */
      int lo = s, hi = e;
      while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (c[mid] < ta)
          lo = mid + 1;
        else
          hi = mid;
      }
      l = lo;
      /* r: last index in (s, e] with c <= tb, else s */
      lo = s;
      hi = e;
      while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (c[mid] > tb)
          hi = mid - 1;
        else
          lo = mid;
      }
      r = lo;
    } else {
      while (l < e && c[l] < ta)
        l++;
      while (r > s && c[r] > tb)
        r--;
    }
    int ns = s, ne = e;
    if ((l - s) > (e - r)) {
      ns = l;
      alpha = na;
    } else {
      ne = r;
      beta = nb;
    }
    if (ns == s && ne == e)
      continue;
    double n = quant_error(h, ns, ne);
    if (n > norm_min)
      break;
    norm_min = n;
    s = ns;
    e = ne;
  }
  g_free(c);
  float bw = (h->max - h->min) / (float)B;
  *out_min = h->min + bw * (float)s;
  *out_max = h->min + bw * (float)(e + 1);
}

static QhQuantParams *hist_compute(QhObserver *obs, GError **error) {
  (void)error;
  Hist *h = (Hist *)obs;
  if (uninitialised(h))
    return qh_obs_default_params(obs, 1);
  float mn, mx;
  param_search(h, &mn, &mx);
  int32_t qmin, qmax;
  float eps;
  qh_obs_range(obs, &qmin, &qmax, &eps);
  QhQuantParams *q = qh_obs_params_new(obs, 1, -1);
  qh_quant_calculate_qparams(mn, mx, qmin, qmax, obs->config->qscheme, obs->config->dtype,
                             obs->config->has_range, eps, &q->scale[0], &q->zero_point[0]);
  return q;
}

/* A state as weighted points: its bin centres, or one point for a constant state. */
static Points state_points(const Hist *h, float *v, float *w) {
  Points p = {.v = v, .w = w, .n = 0, .vmin = h->min, .vmax = h->max};
  if ((double)h->min == (double)h->max) {
    v[0] = h->min;
    w[0] = qh_torch_sum_f32(h->hist, (size_t)h->bins);
    p.n = 1;
    return p;
  }
  float bw = (h->max - h->min) / (float)h->bins;
  for (int k = 0; k < h->bins; k++) {
    if (h->hist[k] == 0.0f)
      continue;
    float c = h->min + bw * ((float)k + 0.5f);
    v[p.n] = c < h->min ? h->min : (c > h->max ? h->max : c);
    w[p.n] = h->hist[k];
    p.n++;
  }
  return p;
}

static gboolean hist_merge(QhObserver *obs, const QhObserver *other, GError **error) {
  Hist *h = (Hist *)obs;
  const Hist *o = (const Hist *)other;
  if (uninitialised(o))
    return TRUE;
  size_t cap = (size_t)h->bins + (size_t)o->bins + 1;
  float *v = g_new(float, cap), *w = g_new(float, cap);
  gboolean ok = TRUE;
  if (uninitialised(h)) {
    memcpy(h->hist, o->hist, sizeof(float) * (size_t)h->bins);
    h->min = o->min;
    h->max = o->max;
  } else if ((double)h->min == (double)h->max) {
    /* PyTorch would drop a constant state on the next batch; a merge keeps both. */
    Points mine = state_points(h, v, w);
    Points theirs = state_points(o, v + mine.n, w + mine.n);
    Points all = {.v = v, .w = w, .n = mine.n + theirs.n};
    all.vmin = mine.vmin < theirs.vmin ? mine.vmin : theirs.vmin;
    all.vmax = mine.vmax > theirs.vmax ? mine.vmax : theirs.vmax;
    h->min = all.vmin;
    h->max = all.vmax;
    histc(&all, h->bins, all.vmin, all.vmax, h->hist);
  } else {
    Points theirs = state_points(o, v, w);
    ok = absorb(h, &theirs, FALSE, error);
  }
  g_free(v);
  g_free(w);
  return ok;
}

static gboolean hist_save(const QhObserver *obs, GByteArray *out, GError **error) {
  (void)error;
  const Hist *h = (const Hist *)obs;
  qh_obs_put_u32(out, STATE_VERSION);
  qh_obs_put_u32(out, (uint32_t)h->bins);
  qh_obs_put_f32(out, h->min);
  qh_obs_put_f32(out, h->max);
  qh_obs_put_f32s(out, h->hist, (size_t)h->bins);
  return TRUE;
}

gboolean qh_obs_histogram_load(QhObserver *obs, const guint8 *data, gsize size, GError **error) {
  Hist *h = (Hist *)obs;
  QhObsReader r = {data, size, FALSE};
  uint32_t version = qh_obs_get_u32(&r);
  uint32_t bins = qh_obs_get_u32(&r);
  if (!r.bad && (version != STATE_VERSION || bins != (uint32_t)h->bins)) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "%s: saved state has version %u with %u bins (expected %u, %d)",
                obs->config->name, version, bins, STATE_VERSION, h->bins);
    return FALSE;
  }
  float mn = qh_obs_get_f32(&r), mx = qh_obs_get_f32(&r);
  qh_obs_get_f32s(&r, h->hist, (size_t)h->bins);
  if (!qh_obs_reader_done(&r, obs, error))
    return FALSE;
  gboolean fresh = mn == INFINITY && mx == -INFINITY;
  if (!fresh && !(isfinite(mn) && isfinite(mx) && mn <= mx)) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: saved state has a bad range [%g, %g]",
                obs->config->name, (double)mn, (double)mx);
    return FALSE;
  }
  h->min = mn;
  h->max = mx;
  return TRUE;
}

static void hist_free(QhObserver *obs) {
  Hist *h = (Hist *)obs;
  g_free(h->hist);
  g_free(h->scratch);
  g_free(h->integral);
  qh_observer_clear_base(obs);
  g_free(h);
}

static const QhObserverClass hist_class = {"HistogramObserver", FALSE, hist_observe,
                                           hist_compute, hist_merge, hist_save, hist_free};

QhObserver *qh_obs_histogram_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                 GError **error) {
  (void)error;
  Hist *h = g_new0(Hist, 1);
  qh_observer_init_base(&h->base, &hist_class, s->cfg, rank, dims);
  h->bins = (int)s->args[0];
  h->upsample = (int)s->args[1];
  /* 2^bits, as later PyTorch computes it from torch.iinfo for its 16-bit dtypes. */
  h->dst_nbins = s->cfg->dtype == QH_DTYPE_INT32                                        ? 4294967296.0
                 : s->cfg->dtype == QH_DTYPE_INT16 || s->cfg->dtype == QH_DTYPE_UINT16 ? 65536.0
                                                                                       : 256.0;
  h->min = INFINITY;
  h->max = -INFINITY;
  h->hist = g_new0(float, h->bins);
  h->scratch = g_new0(float, h->bins);
  h->integral = g_new0(double, h->bins);
  return &h->base;
}
