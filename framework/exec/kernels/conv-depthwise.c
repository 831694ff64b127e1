/* Direct depthwise convolution (one filter per channel, as in MobileNet): a matrix
 * product per channel would be a 1-row sgemm, so instead each output plane is
 * computed in place, parallel over planes. Every plane splits into an interior,
 * where all taps fall inside the image and the loops need no bounds checks (with
 * 3x3 stride 1 and 2 unrolled), and a border walked with checks. */
#include "exec/kernels/conv-private.h"

#define DW_BLOCK 8

typedef struct {
  const QhWindow *w;
  int64_t channels;
  const float *x, *wt, *b;
  float *y;
} DwArgs;

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Outputs [*lo, *hi) of n_out whose taps 0..k-1 all fall inside [0, n_in). */
static void interior(int64_t n_out, int64_t n_in, int64_t k, int64_t s, int64_t d, int64_t p,
                     int64_t *lo, int64_t *hi) {
  int64_t a = -floor_div(-p, s), b = floor_div(n_in - 1 + p - (k - 1) * d, s) + 1;
  *lo = CLAMP(a, 0, n_out);
  *hi = CLAMP(b, *lo, n_out);
}

/* One output element with bounds checks (any rank). */
static float tap_checked(const QhWindow *w, const float *x, const float *f, float bias,
                         int64_t od, int64_t oh, int64_t ow) {
  float acc = bias;
  for (int64_t kd = 0; kd < w->k[0]; kd++) {
    int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
    if (id < 0 || id >= w->in[0])
      continue;
    for (int64_t kh = 0; kh < w->k[1]; kh++) {
      int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
      if (ih < 0 || ih >= w->in[1])
        continue;
      const float *row = x + (id * w->in[1] + ih) * w->in[2];
      const float *frow = f + (kd * w->k[1] + kh) * w->k[2];
      for (int64_t kw = 0; kw < w->k[2]; kw++) {
        int64_t iw = ow * w->s[2] - w->pb[2] + kw * w->d[2];
        if (iw >= 0 && iw < w->in[2])
          acc += frow[kw] * row[iw];
      }
    }
  }
  return acc;
}

/* Interior run [lo, hi) of one output row of a 2-D plane: every tap is in range. */
static void row_interior(const QhWindow *w, const float *x, const float *f, float bias,
                         int64_t oh, int64_t lo, int64_t hi, float *restrict yrow) {
  const int64_t W = w->in[2], KH = w->k[1], KW = w->k[2];
  const int64_t sw = w->s[2], dh = w->d[1], dw = w->d[2], pw = w->pb[2];
  const float *r0 = x + (oh * w->s[1] - w->pb[1]) * W;
  if (KH == 3 && KW == 3 && dh == 1 && dw == 1 && (sw == 1 || sw == 2)) {
    const float *restrict a = r0, *restrict b = r0 + W, *restrict c = r0 + 2 * W;
    const float f0 = f[0], f1 = f[1], f2 = f[2], f3 = f[3], f4 = f[4], f5 = f[5], f6 = f[6],
                f7 = f[7], f8 = f[8];
    /* Blocks of a fixed 8 outputs: at -O2 GCC vectorises the unrolled block (straight-line
     * code) but not a loop of unknown trip count. */
    int64_t ow = lo;
    if (sw == 1) {
      for (; ow + DW_BLOCK <= hi; ow += DW_BLOCK) {
        const int64_t i = ow - pw;
        float acc[DW_BLOCK];
        for (int j = 0; j < DW_BLOCK; j++)
          acc[j] = bias + f0 * a[i + j] + f1 * a[i + j + 1] + f2 * a[i + j + 2] + f3 * b[i + j] +
                   f4 * b[i + j + 1] + f5 * b[i + j + 2] + f6 * c[i + j] + f7 * c[i + j + 1] +
                   f8 * c[i + j + 2];
        for (int j = 0; j < DW_BLOCK; j++)
          yrow[ow + j] = acc[j];
      }
    }
    for (; ow < hi; ow++) {
      const int64_t i = ow * sw - pw;
      yrow[ow] = bias + f0 * a[i] + f1 * a[i + 1] + f2 * a[i + 2] + f3 * b[i] + f4 * b[i + 1] +
                 f5 * b[i + 2] + f6 * c[i] + f7 * c[i + 1] + f8 * c[i + 2];
    }
    return;
  }
  for (int64_t ow = lo; ow < hi; ow++)
    yrow[ow] = bias;
  for (int64_t kh = 0; kh < KH; kh++) {
    const float *row = r0 + kh * dh * W;
    for (int64_t kw = 0; kw < KW; kw++) {
      const float fv = f[kh * KW + kw];
      const int64_t base = kw * dw - pw;
      for (int64_t ow = lo; ow < hi; ow++)
        yrow[ow] += fv * row[base + ow * sw];
    }
  }
}

static void plane(const QhWindow *w, const float *x, const float *f, float bias, float *y) {
  const int64_t OD = w->out[0], OH = w->out[1], OW = w->out[2];
  if (w->in[0] != 1 || w->k[0] != 1 || OD != 1) {
    /* 3-D: rare enough for the checked loop */
    for (int64_t od = 0; od < OD; od++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++)
          y[(od * OH + oh) * OW + ow] = tap_checked(w, x, f, bias, od, oh, ow);
    return;
  }
  int64_t h_lo, h_hi, w_lo, w_hi;
  interior(OH, w->in[1], w->k[1], w->s[1], w->d[1], w->pb[1], &h_lo, &h_hi);
  interior(OW, w->in[2], w->k[2], w->s[2], w->d[2], w->pb[2], &w_lo, &w_hi);
  for (int64_t oh = 0; oh < OH; oh++) {
    float *yrow = y + oh * OW;
    gboolean inner = oh >= h_lo && oh < h_hi;
    int64_t a = inner ? w_lo : OW, b = inner ? w_hi : OW;
    for (int64_t ow = 0; ow < a; ow++)
      yrow[ow] = tap_checked(w, x, f, bias, 0, oh, ow);
    if (inner)
      row_interior(w, x, f, bias, oh, a, b, yrow);
    for (int64_t ow = b; ow < OW; ow++)
      yrow[ow] = tap_checked(w, x, f, bias, 0, oh, ow);
  }
}

static void dw_task(void *arg, int64_t begin, int64_t end) {
  const DwArgs *a = arg;
  const QhWindow *w = a->w;
  const int64_t isz = qh_window_in_size(w), osz = qh_window_out_size(w);
  const int64_t kvol = qh_window_k_size(w);
  for (int64_t p = begin; p < end; p++) {
    int64_t c = p % a->channels;
    plane(w, a->x + p * isz, a->wt + c * kvol, a->b ? a->b[c] : 0.0f, a->y + p * osz);
  }
}

void qh_conv_depthwise(QhThreadPool *pool, const QhWindow *w, int64_t planes, int64_t channels,
                       const float *x, const float *wt, const float *b, float *y) {
  DwArgs a = {.w = w, .channels = channels, .x = x, .wt = wt, .b = b, .y = y};
  qh_thread_pool_parallel_for(pool, planes, 1, dw_task, &a);
}
