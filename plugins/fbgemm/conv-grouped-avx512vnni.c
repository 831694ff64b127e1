/* The direct grouped convolution's row on AVX-512 VNNI (conv-grouped.h): 16 output
 * channels per zmm, vpdpbusd (u8 x s8 into int32, exact for any uint8) per 4-byte input
 * chunk. Where a block's lanes span several groups (fewer than 16 output channels per
 * group), per tap one masked load of the dwords they read from the input pixel and a
 * vpermd per chunk that hands each lane its own group's chunk, four pixels at a time;
 * where every lane is in one group, each chunk is broadcast from memory (no vpermd), six
 * pixels at a time. A tap outside the image reads zx, which zsum takes out again. The
 * epilogue is gemm-avx512vnni.c's: kernels.h's output rule. Built with AVX-512 flags of
 * its own; run only when the host reports them. */
#include <immintrin.h>
#include <string.h>

#include "conv-grouped.h"

static inline __attribute__((always_inline)) __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* kernels.h's output rule on np pixels' accumulators, a masked store of the valid lanes. */
static inline __attribute__((always_inline)) void store(const FbConv *c, const FbGroupPacked *p, int64_t b,
                                                        int64_t oy, int64_t ox0, int64_t blk, uint8_t *y,
                                                        const __m512i *acc, const int np) {
  const int64_t c0 = blk * 16, valid = c->oc - c0 < 16 ? c->oc - c0 : 16;
  const __mmask16 smask = (__mmask16)((1u << valid) - 1u);
  const __m512 lo = _mm512_set1_ps(p->lo), hi = _mm512_set1_ps(p->hi);
  const __m512i zo = _mm512_set1_epi32(p->zo), zs = _mm512_load_si512((const void *)(p->zsum + c0));
  const __m512 bias = _mm512_load_ps(p->bias + c0), mult = _mm512_load_ps(p->mult + c0);
  _Pragma("GCC unroll 6")
  for (int i = 0; i < np; i++) {
    __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i], zs));
    f = _mm512_mul_ps(_mm512_add_ps(f, bias), mult);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zo);
    _mm_mask_storeu_epi8(y + ((b * c->oh + oy) * c->ow + ox0 + i) * c->oc + c0, smask, _mm512_cvtepi32_epi8(q));
  }
}

/* Lanes in several groups: masked load, vpermd per chunk. px[t * 6 + i]: pixel i's input
 * at tap t, NULL outside the image. */
static inline __attribute__((always_inline)) void pixels_perm(const FbConv *c, const FbGroupPacked *p,
                                                              const uint8_t *const *px, int64_t b, int64_t oy,
                                                              int64_t ox0, int64_t blk, uint8_t *y, const int np) {
  const int64_t taps = c->kh * c->kw, nq = p->nq;
  const __mmask16 lmask = (__mmask16)((1u << p->span[blk]) - 1u);
  const __m512i zxv = _mm512_set1_epi8((char)p->zx);
  const int64_t off = 4 * (int64_t)p->base[blk];
  const int32_t *iv = p->idx + blk * nq * 16;
  __m512i acc[6];
  _Pragma("GCC unroll 6")
  for (int i = 0; i < np; i++)
    acc[i] = _mm512_setzero_si512();
  for (int64_t t = 0; t < taps; t++) {
    __m512i xv[6];
    _Pragma("GCC unroll 6")
    for (int i = 0; i < np; i++)
      xv[i] = px[t * 6 + i] ? _mm512_maskz_loadu_epi32(lmask, px[t * 6 + i] + off) : zxv;
    const int8_t *wt = p->w + (blk * taps + t) * nq * 64;
    for (int64_t q = 0; q < nq; q++) {
      __m512i wv = _mm512_load_si512((const void *)(wt + q * 64));
      __m512i ix = _mm512_load_si512((const void *)(iv + q * 16));
      _Pragma("GCC unroll 6")
      for (int i = 0; i < np; i++)
        acc[i] = dpbusd(acc[i], _mm512_permutexvar_epi32(ix, xv[i]), wv);
    }
  }
  store(c, p, b, oy, ox0, blk, y, acc, np);
}

/* Every lane in one group: chunk q is dword base + q of the pixel for all lanes; only
 * the group's own span[blk] chunks are read (the others have zero weights, and reading
 * them could pass the input's end by more than 3 bytes). A tap outside the image reads
 * zline, a line of zx bytes: no branch in the inner loop. */
static inline __attribute__((always_inline)) void pixels_bcast(const FbConv *c, const FbGroupPacked *p,
                                                               const uint8_t *const *px, const uint8_t *zline,
                                                               int64_t b, int64_t oy, int64_t ox0, int64_t blk,
                                                               uint8_t *y, const int np) {
  const int64_t taps = c->kh * c->kw, nq = p->nq, live = p->span[blk];
  const int64_t off = 4 * (int64_t)p->base[blk];
  __m512i acc[6];
  _Pragma("GCC unroll 6")
  for (int i = 0; i < np; i++)
    acc[i] = _mm512_setzero_si512();
  for (int64_t t = 0; t < taps; t++) {
    const uint8_t *pt[6];
    _Pragma("GCC unroll 6")
    for (int i = 0; i < np; i++)
      pt[i] = px[t * 6 + i] ? px[t * 6 + i] + off : zline;
    const int8_t *wt = p->w + (blk * taps + t) * nq * 64;
    for (int64_t q = 0; q < live; q++) {
      __m512i wv = _mm512_load_si512((const void *)(wt + q * 64));
      _Pragma("GCC unroll 6")
      for (int i = 0; i < np; i++) {
        int32_t a4;
        memcpy(&a4, pt[i] + 4 * q, 4);
        acc[i] = dpbusd(acc[i], _mm512_set1_epi32(a4), wv);
      }
    }
  }
  store(c, p, b, oy, ox0, blk, y, acc, np);
}

/* The input pointers of np pixels from ox0 at every tap (NULL outside the image), shared
 * by all blocks of output channels. */
static void pixel_table(const FbConv *c, const uint8_t *x, int64_t b, int64_t oy, int64_t ox0, int np,
                        const uint8_t **px) {
  for (int64_t t = 0; t < c->kh * c->kw; t++) {
    int64_t iy = oy * c->sh - c->pt + (t / c->kw) * c->dh, ix0 = ox0 * c->sw - c->pl + (t % c->kw) * c->dw;
    for (int i = 0; i < np; i++) {
      int64_t ix = ix0 + i * c->sw;
      px[t * 6 + i] = iy >= 0 && iy < c->ih && ix >= 0 && ix < c->iw ? x + ((b * c->ih + iy) * c->iw + ix) * c->ic
                                                                      : NULL;
    }
  }
}

#define TAIL(call, left)                                                                          \
  switch (left) {                                                                                  \
  case 5: call(5); break;                                                                          \
  case 4: call(4); break;                                                                          \
  case 3: call(3); break;                                                                          \
  case 2: call(2); break;                                                                          \
  case 1: call(1); break;                                                                          \
  default: break;                                                                                  \
  }

void fb_group_row_avx512vnni(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                             uint8_t *y) {
  const uint8_t *px[FB_GROUP_MAX_TAPS * 6];
  uint8_t zline[64];
  memset(zline, p->zx, sizeof zline);
  const int bcast = p->og % 16 == 0, step = bcast ? 6 : 4;
  for (int64_t ox = 0; ox < c->ow; ox += step) {
    int np = c->ow - ox < step ? (int)(c->ow - ox) : step;
    pixel_table(c, x, b, oy, ox, np, px);
    for (int64_t blk = 0; blk < p->nblk; blk++) {
#define BCAST(n) pixels_bcast(c, p, px, zline, b, oy, ox, blk, y, n)
#define PERM(n) pixels_perm(c, p, px, b, oy, ox, blk, y, n)
      if (bcast && np == 6)
        BCAST(6);
      else if (bcast)
        TAIL(BCAST, np)
      else if (np == 4)
        PERM(4);
      else
        TAIL(PERM, np)
#undef BCAST
#undef PERM
    }
  }
}
