/* The fbgemm plugin's depthwise convolution on AVX-VNNI (vpdpbusd on ymm, CPUs without
 * AVX-512): the scheme of dw-avx512vnni.c with 8 channels per vector. Per output row the
 * input rows its taps read are interleaved once into the worker's row buffer (dword
 * (g, column, channel) = the inputs of kernel rows 4g .. 4g+3, padding read from a line of
 * zx bytes, 0 past the kernel's rows, where the weights are 0), then each
 * output pixel is groups x kw vpdpbusd per 8 channels against weights held in registers,
 * plus -zx * sum(w): exactly sum (x - zx) * w. No masked byte loads or stores without
 * AVX-512, so channel tails go through small buffers and nothing past the input or the
 * output row is touched. Built with -mavx2 -mavxvnni of its own (CMakeLists.txt). */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

static inline __attribute__((always_inline)) __m256i dpbusd(__m256i acc, __m256i a, __m256i b) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}

/* 8 input bytes of channels cb.. of one pixel, zero past the channel count ic. */
static inline __m256i load8(const uint8_t *px, int64_t cb, int64_t ic) {
  if (cb + 8 <= ic)
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(px + cb)));
  uint8_t tmp[16] = {0};
  if (cb < ic)
    memcpy(tmp, px + cb, (size_t)(ic - cb));
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)tmp));
}

/* Columns of one group of nr kernel rows (compile-time nr): every source pointer is
 * valid, a row or column outside the image reading the zx line instead. */
static inline __attribute__((always_inline)) void build_group(const uint8_t *const row[4], const uint8_t *zxl,
                                                              int64_t iw, int64_t ic, int64_t pl, int64_t ncol,
                                                              int64_t cp, int32_t *vg, const int nr) {
  const int64_t full = ic / 8 * 8;
  for (int64_t j = 0; j < ncol; j++) {
    int64_t ix = j - pl;
    int inside = ix >= 0 && ix < iw;
    const uint8_t *s[4];
    _Pragma("GCC unroll 4") for (int t = 0; t < nr; t++)
      s[t] = inside && row[t] ? row[t] + ix * ic : zxl;
    int32_t *dst = vg + j * cp;
    int64_t cb = 0;
    for (; cb < full; cb += 8) {
      __m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s[0] + cb)));
      _Pragma("GCC unroll 4") for (int t = 1; t < nr; t++)
        d = _mm256_or_si256(d, _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s[t] + cb))), 8 * t));
      _mm256_store_si256((__m256i *)(dst + cb), d);
    }
    if (cb < ic) {
      __m256i d = load8(s[0], cb, ic);
      _Pragma("GCC unroll 4") for (int t = 1; t < nr; t++)
        d = _mm256_or_si256(d, _mm256_slli_epi32(load8(s[t], cb, ic), 8 * t));
      _mm256_store_si256((__m256i *)(dst + cb), d);
    }
  }
}

/* The row buffer for output row oy: v[(g * ncol + j) * cp + c], input column j - pl;
 * zxl: ic bytes of zx. Channels past the last multiple of 8 above ic are not written:
 * they meet zero weights and their outputs are not stored. */
static void build_rows(const FbConv *c, const FbDwPacked *p, const uint8_t *img, int64_t oy, int32_t *v,
                       const uint8_t *zxl) {
  const int64_t ih = c->ih, iw = c->iw, ic = c->ic, cp = p->cp, ncol = fb_dw_cols(c), pl = c->pl;
  const int64_t iy0 = oy * c->sh - c->pt;
  for (int64_t g = 0; g < p->groups; g++) {
    const uint8_t *row[4] = {NULL, NULL, NULL, NULL};
    int nr = p->kh - 4 * g < 4 ? (int)(p->kh - 4 * g) : 4;
    for (int t = 0; t < nr; t++) {
      int64_t iy = iy0 + (4 * g + t) * c->dh;
      row[t] = iy >= 0 && iy < ih ? img + iy * iw * ic : NULL;
    }
    int32_t *vg = v + g * ncol * cp;
    switch (nr) {
    case 4: build_group(row, zxl, iw, ic, pl, ncol, cp, vg, 4); break;
    case 3: build_group(row, zxl, iw, ic, pl, ncol, cp, vg, 3); break;
    case 2: build_group(row, zxl, iw, ic, pl, ncol, cp, vg, 2); break;
    default: build_group(row, zxl, iw, ic, pl, ncol, cp, vg, 1); break;
    }
  }
}

static inline __attribute__((always_inline)) void store8(uint8_t *dst, __m256i q, int64_t n) {
  __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  __m128i u8 = _mm_packus_epi16(w16, w16); /* values already in [0, 255]: the packs only narrow */
  if (n >= 8) {
    _mm_storel_epi64((__m128i *)dst, u8);
  } else {
    uint8_t tmp[16];
    _mm_storeu_si128((__m128i *)tmp, u8);
    memcpy(dst, tmp, (size_t)n);
  }
}

static inline __attribute__((always_inline)) void compute_row(const FbConv *c, const FbDwPacked *p,
                                                              const int32_t *v, uint8_t *orow, const int kw_c,
                                                              const int ng_c) {
  const int64_t kw = kw_c ? kw_c : p->kw, ng = ng_c ? ng_c : p->groups;
  const int64_t ow = c->ow, oc = c->oc, cp = p->cp, sw = c->sw, dw = c->dw, ncol = fb_dw_cols(c);
  const __m256 lo = _mm256_set1_ps(p->lo), hi = _mm256_set1_ps(p->hi);
  const __m256i zo = _mm256_set1_epi32(p->zo);
  for (int64_t cb = 0; cb < oc; cb += 8) {
    int64_t n = oc - cb;
    const __m256i nzs = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_load_si256((const __m256i *)(p->zsum + cb)));
    const __m256 bias = _mm256_load_ps(p->bias + cb), mult = _mm256_load_ps(p->mult + cb);
    if (kw_c && ng_c) {
      __m256i wv[2][5];
      _Pragma("GCC unroll 8") for (int g = 0; g < ng_c; g++)
        _Pragma("GCC unroll 8") for (int kx = 0; kx < kw_c; kx++)
          wv[g][kx] = _mm256_load_si256((const __m256i *)(p->w4 + ((g * kw + kx) * cp + cb) * 4));
      for (int64_t ox = 0; ox < ow; ox++) {
        __m256i acc = nzs;
        const int32_t *vc = v + ox * sw * cp + cb;
        _Pragma("GCC unroll 8") for (int g = 0; g < ng_c; g++)
          _Pragma("GCC unroll 8") for (int kx = 0; kx < kw_c; kx++)
            acc = dpbusd(acc, _mm256_load_si256((const __m256i *)(vc + (g * ncol + kx * dw) * cp)), wv[g][kx]);
        __m256 f = _mm256_mul_ps(_mm256_add_ps(_mm256_cvtepi32_ps(acc), bias), mult);
        f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
        store8(orow + ox * oc + cb, _mm256_add_epi32(_mm256_cvtps_epi32(f), zo), n);
      }
    } else {
      for (int64_t ox = 0; ox < ow; ox++) {
        __m256i acc = nzs;
        const int32_t *vc = v + ox * sw * cp + cb;
        for (int64_t g = 0; g < ng; g++)
          for (int64_t kx = 0; kx < kw; kx++)
            acc = dpbusd(acc, _mm256_load_si256((const __m256i *)(vc + (g * ncol + kx * dw) * cp)),
                         _mm256_load_si256((const __m256i *)(p->w4 + ((g * kw + kx) * cp + cb) * 4)));
        __m256 f = _mm256_mul_ps(_mm256_add_ps(_mm256_cvtepi32_ps(acc), bias), mult);
        f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
        store8(orow + ox * oc + cb, _mm256_add_epi32(_mm256_cvtps_epi32(f), zo), n);
      }
    }
  }
}

void fb_dw_row_avxvnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y,
                       void *ws) {
  int32_t *v = ws;
  uint8_t *zxl = (uint8_t *)ws + fb_dw_row_bytes(c, p);
  memset(zxl, p->zx, (size_t)c->ic);
  build_rows(c, p, x + b * c->ih * c->iw * c->ic, oy, v, zxl);
  uint8_t *orow = y + (b * c->oh + oy) * c->ow * c->oc;
  if (p->kw == 3 && p->groups == 1)
    compute_row(c, p, v, orow, 3, 1);
  else if (p->kw == 5 && p->groups == 2)
    compute_row(c, p, v, orow, 5, 2);
  else
    compute_row(c, p, v, orow, 0, 0);
}
