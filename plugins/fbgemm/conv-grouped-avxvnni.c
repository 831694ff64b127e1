/* The direct grouped convolution's row on AVX-VNNI (conv-grouped.h): 8 output channels per
 * ymm; per tap, one masked load of the dwords the block's lanes read from the input pixel
 * (a broadcast of zx outside the image, which zsum takes out again), vpermd per 4-byte
 * chunk so each lane gets its own group's chunk, and the VEX vpdpbusd (exact for any
 * uint8). Four output pixels share the weight loads; kernels.h's output rule after.
 * Built with -mavx2 -mavxvnni; run only where the host reports AVX-VNNI. */
#include <immintrin.h>
#include <string.h>

#include "conv-grouped.h"

static inline __attribute__((always_inline)) __m256i dpbusd(__m256i acc, __m256i a, __m256i b) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}
#define DOT dpbusd
#define ROW_FN fb_group_row_avxvnni

static inline __attribute__((always_inline)) void pixels(const FbConv *c, const FbGroupPacked *p,
                                                         const uint8_t *x, int64_t b, int64_t oy, int64_t ox0,
                                                         int64_t blk, uint8_t *y, const int np) {
  const int64_t taps = c->kh * c->kw, nq = p->nq;
  const __m256i lmask = _mm256_cmpgt_epi32(_mm256_set1_epi32(p->span[blk]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i zxv = _mm256_set1_epi8((char)p->zx);
  const int64_t off = 4 * (int64_t)p->base[blk];
  const int32_t *iv = p->idx + blk * nq * 8;
  __m256i acc[4];
  _Pragma("GCC unroll 4")
  for (int i = 0; i < np; i++)
    acc[i] = _mm256_setzero_si256();
  for (int64_t t = 0; t < taps; t++) {
    int64_t iy = oy * c->sh - c->pt + (t / c->kw) * c->dh, ix0 = ox0 * c->sw - c->pl + (t % c->kw) * c->dw;
    __m256i xv[4];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < np; i++) {
      int64_t ix = ix0 + i * c->sw;
      xv[i] = iy >= 0 && iy < c->ih && ix >= 0 && ix < c->iw
                  ? _mm256_maskload_epi32((const int *)(x + ((b * c->ih + iy) * c->iw + ix) * c->ic + off), lmask)
                  : zxv;
    }
    const int8_t *wt = p->w + (blk * taps + t) * nq * 32;
    for (int64_t q = 0; q < nq; q++) {
      __m256i wv = _mm256_load_si256((const __m256i *)(wt + q * 32));
      __m256i ix = _mm256_load_si256((const __m256i *)(iv + q * 8));
      _Pragma("GCC unroll 4")
      for (int i = 0; i < np; i++)
        acc[i] = DOT(acc[i], _mm256_permutevar8x32_epi32(xv[i], ix), wv);
    }
  }
  const int64_t c0 = blk * 8, valid = c->oc - c0 < 8 ? c->oc - c0 : 8;
  const __m256 lo = _mm256_set1_ps(p->lo), hi = _mm256_set1_ps(p->hi);
  const __m256i zo = _mm256_set1_epi32(p->zo), zs = _mm256_load_si256((const __m256i *)(p->zsum + c0));
  const __m256 bias = _mm256_load_ps(p->bias + c0), mult = _mm256_load_ps(p->mult + c0);
  _Pragma("GCC unroll 4")
  for (int i = 0; i < np; i++) {
    __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[i], zs));
    f = _mm256_mul_ps(_mm256_add_ps(f, bias), mult);
    f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
    __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), zo);
    /* every value is already inside [0, 255]: the saturating packs only narrow */
    __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    __m128i b8 = _mm_packus_epi16(w16, w16);
    uint8_t *out = y + ((b * c->oh + oy) * c->ow + ox0 + i) * c->oc + c0;
    if (valid == 8) {
      _mm_storel_epi64((__m128i *)out, b8);
    } else {
      uint8_t tmp[16];
      _mm_storeu_si128((__m128i *)tmp, b8);
      memcpy(out, tmp, (size_t)valid);
    }
  }
}

void ROW_FN(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y) {
  for (int64_t blk = 0; blk < p->nblk; blk++) {
    int64_t ox = 0;
    for (; ox + 4 <= c->ow; ox += 4)
      pixels(c, p, x, b, oy, ox, blk, y, 4);
    switch (c->ow - ox) {
    case 3: pixels(c, p, x, b, oy, ox, blk, y, 3); break;
    case 2: pixels(c, p, x, b, oy, ox, blk, y, 2); break;
    case 1: pixels(c, p, x, b, oy, ox, blk, y, 1); break;
    default: break;
    }
  }
}
