/* The pooling and data-movement kernels of u8-layout.h, written once for the x86 and
 * fbgemm plugins (their uint8 units between convolutions). MaxPool's inner loop is SSE2
 * pmaxub (baseline x86-64), its scalar twin the same loop in plain C; the averages are
 * scalar loops in the host's summation order; the rest move bytes (a table lookup where
 * the grid changes). */
#include "u8-layout.h"

#include <emmintrin.h>
#include <string.h>

#include "u8-kernels.h"

/* The taps of output position o along one axis: [t0, t1) within the input. */
static void taps(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t size, int64_t *t0, int64_t *t1) {
  int64_t s = o * stride - pad;
  *t0 = s < 0 ? (-s < kernel ? -s : kernel) : 0;
  *t1 = s + kernel > size ? size - s : kernel;
  *t1 = *t1 < *t0 ? *t0 : *t1; /* a window wholly in the padding has no taps */
}

void qh_u8_pool_row(const QhU8Pool *p, const uint8_t *x, int64_t oy, uint8_t *yrow) {
  const int64_t C = p->c;
  const float lo = (float)(0 - p->zo), hi = (float)(255 - p->zo);
  int64_t h0 = 0, h1 = p->h, sh = 0, ph = 0;
  if (p->kind != QH_U8_POOL_GLOBAL) {
    int64_t a, b; /* taps inside the explicitly padded input: count_include_pad's count */
    taps(oy, p->sh, p->pad[0], p->kh, p->h, &h0, &h1);
    taps(oy, p->sh, 0, p->kh, p->h + p->pad[0] + p->pad[2], &a, &b);
    sh = oy * p->sh - p->pad[0], ph = b - a;
  }
  for (int64_t ox = 0; ox < p->ow; ox++) {
    int64_t w0 = 0, w1 = p->w, sw = 0, pw = 0;
    if (p->kind != QH_U8_POOL_GLOBAL) {
      int64_t a, b;
      taps(ox, p->sw, p->pad[1], p->kw, p->w, &w0, &w1);
      taps(ox, p->sw, 0, p->kw, p->w + p->pad[1] + p->pad[3], &a, &b);
      sw = ox * p->sw - p->pad[1], pw = b - a;
    }
    uint8_t *restrict y = yrow + ox * C;
    if (p->kind == QH_U8_POOL_MAX) {
      /* the bytes' max is the max of the dequantized values (dequantization is increasing) */
      memset(y, 0, (size_t)C);
      for (int64_t kh = h0; kh < h1; kh++)
        for (int64_t kw = w0; kw < w1; kw++) {
          const uint8_t *restrict xp = x + ((sh + kh) * p->w + sw + kw) * C;
          int64_t c = 0;
          if (!p->plain)
            for (; c + 16 <= C; c += 16)
              _mm_storeu_si128((__m128i *)(y + c), _mm_max_epu8(_mm_loadu_si128((const __m128i *)(y + c)),
                                                                 _mm_loadu_si128((const __m128i *)(xp + c))));
          for (; c < C; c++)
            y[c] = xp[c] > y[c] ? xp[c] : y[c];
        }
      if (h0 == h1 || w0 == w1) /* no input tap: the host's max is -FLT_MAX, quantized to 0 */
        continue;
      if (p->lut)
        for (int64_t c = 0; c < C; c++)
          y[c] = p->lut[y[c]];
      continue;
    }
    /* Averages sum the dequantized taps in double in the host's order (kh, then kw);
     * count_include_pad counts the taps inside the padded input (not those a ceil_mode
     * window hangs past it); no tap at all averages to 0, as the host's reference */
    double count = p->kind == QH_U8_POOL_AVG && p->include_pad ? (double)(ph * pw) : (double)((h1 - h0) * (w1 - w0));
    for (int64_t c0 = 0; c0 < C; c0 += 64) {
      int64_t nc = C - c0 < 64 ? C - c0 : 64;
      double acc[64] = {0};
      for (int64_t kh = h0; kh < h1; kh++)
        for (int64_t kw = w0; kw < w1; kw++) {
          const uint8_t *xp = x + ((sh + kh) * p->w + sw + kw) * C + c0;
          for (int64_t c = 0; c < nc; c++)
            acc[c] += (double)p->dq[xp[c]];
        }
      for (int64_t c = 0; c < nc; c++)
        y[c0 + c] = qh_u8_quant(count > 0 ? (float)(acc[c] / count) : 0.0f, p->so, lo, hi, p->zo);
    }
  }
}

void qh_u8_nhwc_to_nchw(const uint8_t *x, uint8_t *y, size_t hw, size_t c, const uint8_t *lut) {
  if (!lut) {
    for (size_t p = 0; p < hw; p++)
      for (size_t ch = 0; ch < c; ch++)
        y[ch * hw + p] = x[p * c + ch];
    return;
  }
  for (size_t p = 0; p < hw; p++)
    for (size_t ch = 0; ch < c; ch++)
      y[ch * hw + p] = lut[x[p * c + ch]];
}

void qh_u8_pad_row(const uint8_t *x, uint8_t *y, size_t w, size_t c, size_t left, size_t right, uint8_t code,
                   const uint8_t *lut) {
  if (!x) {
    memset(y, code, (left + w + right) * c);
    return;
  }
  memset(y, code, left * c);
  if (lut)
    qh_u8_lut_apply(lut, x, y + left * c, w * c);
  else
    memcpy(y + left * c, x, w * c);
  memset(y + (left + w) * c, code, right * c);
}

void qh_u8_slice_channels(const uint8_t *x, uint8_t *y, size_t n, size_t c, size_t c0, size_t c1,
                          const uint8_t *lut) {
  size_t nc = c1 - c0;
  for (size_t p = 0; p < n; p++) {
    if (lut)
      qh_u8_lut_apply(lut, x + p * c + c0, y + p * nc, nc);
    else
      memcpy(y + p * nc, x + p * c + c0, nc);
  }
}

void qh_u8_channel_shuffle(const uint8_t *x, uint8_t *y, size_t n, size_t c, size_t g, const uint8_t lut[256]) {
  size_t per = c / g;
  for (size_t p = 0; p < n; p++) {
    const uint8_t *restrict xp = x + p * c;
    uint8_t *restrict yp = y + p * c;
    for (size_t i = 0; i < per; i++)
      for (size_t j = 0; j < g; j++)
        yp[i * g + j] = lut[xp[j * per + i]];
  }
}
