/* The body of the direct grouped convolution's row on ymm (8 output channels per
 * vector), shared by conv-grouped-avxvnni.c and conv-grouped-avx2.c, which define DOT
 * (acc += 4 u8 x s8 products per dword, exact for any uint8) and ROW_FN (the row's name)
 * before including it, each compiled with its own ISA flags. The structure is
 * conv-grouped-avx512vnni.c's: a table of the input pixels of up to 6 output pixels at
 * every tap, built once per pixel group and shared by the blocks of channels; where a
 * block's lanes span several groups, a masked load per pixel and tap and a vpermd per
 * 4-byte chunk; where all 8 lanes are in one group, each chunk broadcast from memory. */
#ifndef DOT
#error "define DOT and ROW_FN before including conv-grouped-ymm.h"
#endif

/* kernels.h's output rule on np pixels' accumulators; the valid lanes' bytes stored. */
static inline __attribute__((always_inline)) void store(const FbConv *c, const FbGroupPacked *p, int64_t b,
                                                        int64_t oy, int64_t ox0, int64_t blk, uint8_t *y,
                                                        const __m256i *acc, const int np) {
  const int64_t c0 = blk * 8, valid = c->oc - c0 < 8 ? c->oc - c0 : 8;
  const __m256 lo = _mm256_set1_ps(p->lo), hi = _mm256_set1_ps(p->hi);
  const __m256i zo = _mm256_set1_epi32(p->zo), zs = _mm256_load_si256((const __m256i *)(p->zsum + c0));
  const __m256 bias = _mm256_load_ps(p->bias + c0), mult = _mm256_load_ps(p->mult + c0);
  _Pragma("GCC unroll 6")
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

/* Lanes in several groups. px[t * 6 + i]: pixel i's input at tap t, NULL outside. */
static inline __attribute__((always_inline)) void pixels_perm(const FbConv *c, const FbGroupPacked *p,
                                                              const uint8_t *const *px, int64_t b, int64_t oy,
                                                              int64_t ox0, int64_t blk, uint8_t *y, const int np) {
  const int64_t taps = c->kh * c->kw, nq = p->nq;
  const __m256i lmask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(p->span[blk]), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i zxv = _mm256_set1_epi8((char)p->zx);
  const int64_t off = 4 * (int64_t)p->base[blk];
  const int32_t *iv = p->idx + blk * nq * 8;
  __m256i acc[6];
  _Pragma("GCC unroll 6")
  for (int i = 0; i < np; i++)
    acc[i] = _mm256_setzero_si256();
  for (int64_t t = 0; t < taps; t++) {
    __m256i xv[6];
    _Pragma("GCC unroll 6")
    for (int i = 0; i < np; i++)
      xv[i] = px[t * 6 + i] ? _mm256_maskload_epi32((const int *)(px[t * 6 + i] + off), lmask) : zxv;
    const int8_t *wt = p->w + (blk * taps + t) * nq * 32;
    for (int64_t q = 0; q < nq; q++) {
      __m256i wv = _mm256_load_si256((const __m256i *)(wt + q * 32));
      __m256i ix = _mm256_load_si256((const __m256i *)(iv + q * 8));
      _Pragma("GCC unroll 6")
      for (int i = 0; i < np; i++)
        acc[i] = DOT(acc[i], _mm256_permutevar8x32_epi32(xv[i], ix), wv);
    }
  }
  store(c, p, b, oy, ox0, blk, y, acc, np);
}

/* All lanes in one group: chunk q is dword base + q for every lane; only the group's own
 * span[blk] chunks are read; a tap outside the image reads zline (zx bytes). */
static inline __attribute__((always_inline)) void pixels_bcast(const FbConv *c, const FbGroupPacked *p,
                                                               const uint8_t *const *px, const uint8_t *zline,
                                                               int64_t b, int64_t oy, int64_t ox0, int64_t blk,
                                                               uint8_t *y, const int np) {
  const int64_t taps = c->kh * c->kw, nq = p->nq, live = p->span[blk];
  const int64_t off = 4 * (int64_t)p->base[blk];
  __m256i acc[6];
  _Pragma("GCC unroll 6")
  for (int i = 0; i < np; i++)
    acc[i] = _mm256_setzero_si256();
  for (int64_t t = 0; t < taps; t++) {
    const uint8_t *pt[6];
    _Pragma("GCC unroll 6")
    for (int i = 0; i < np; i++)
      pt[i] = px[t * 6 + i] ? px[t * 6 + i] + off : zline;
    const int8_t *wt = p->w + (blk * taps + t) * nq * 32;
    for (int64_t q = 0; q < live; q++) {
      __m256i wv = _mm256_load_si256((const __m256i *)(wt + q * 32));
      _Pragma("GCC unroll 6")
      for (int i = 0; i < np; i++) {
        int32_t a4;
        memcpy(&a4, pt[i] + 4 * q, 4);
        acc[i] = DOT(acc[i], _mm256_set1_epi32(a4), wv);
      }
    }
  }
  store(c, p, b, oy, ox0, blk, y, acc, np);
}

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

#define TAIL(call, left)                                                                           \
  switch (left) {                                                                                  \
  case 5: call(5); break;                                                                          \
  case 4: call(4); break;                                                                          \
  case 3: call(3); break;                                                                          \
  case 2: call(2); break;                                                                          \
  case 1: call(1); break;                                                                          \
  default: break;                                                                                  \
  }

void ROW_FN(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y) {
  const uint8_t *px[FB_GROUP_MAX_TAPS * 6];
  uint8_t zline[32]; /* a block reads at most 8 dwords (fb_group_direct_fits) */
  memset(zline, p->zx, sizeof zline);
  const int bcast = p->og % 8 == 0, step = bcast ? 6 : 4;
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
