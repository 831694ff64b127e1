/* The fbgemm plugin's AVX2 micro-kernel: 4 rows of A by one panel of 16 output channels
 * (two ymm of 8 int32 accumulators per row). For every 4 reduction bytes, vpmaddubsw
 * multiplies u8 by s8 and adds neighbouring pairs into int16 with saturation, and
 * vpmaddwd by ones widens the pairs into int32. The pair sum is exact while activations
 * stay <= 127 (2 * 127 * 128 < 32768), which reduce_range promises but a QDQ file cannot
 * enforce (the host's QuantizeLinear saturates at 255, not at the recorded 127). So the
 * driver checks each block of rows, and a block holding a byte above 127 takes the exact
 * variant: x = (x & 127) + 128 * (x >> 7), two vpmaddubsw that cannot saturate, about
 * half the speed. A byte past the reduction meets a zero weight, so its pair cannot
 * saturate either way. One-row tiles (M = 1 linear layers) prefetch the weights they
 * stream. Then kernels.h's output rule in registers, as in gemm-avx512vnni.c. Built with
 * -mavx2 of its own. */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

#define MR 4
/* Bytes ahead of the M = 1 loop's weight reads that it prefetches (16 groups of 4
 * reduction bytes; 512 to 2048 all helped, 1024 the most steadily in interleaved runs). */
#define PREFETCH_AHEAD 1024

static inline __attribute__((always_inline)) void tile(const uint8_t *a, size_t lda, const FbPacked *pk,
                                                       int64_t pan, uint8_t *y, size_t ldy, const int mr,
                                                       const int exact) {
  const int64_t k4n = pk->kp / 4;
  const int8_t *b = pk->b + pan * k4n * 64;
  const __m256i ones = _mm256_set1_epi16(1), low7 = _mm256_set1_epi8(0x7f), bit0 = _mm256_set1_epi8(1);
  /* the accumulators start at -zx * colsum (the column offsets): no subtraction after */
  const __m256i nz0 = _mm256_load_si256((const __m256i *)(pk->nzcol + pan * FB_NR));
  const __m256i nz1 = _mm256_load_si256((const __m256i *)(pk->nzcol + pan * FB_NR + 8));
  __m256i acc[MR][2];
  _Pragma("GCC unroll 8")
  for (int r = 0; r < mr; r++)
    acc[r][0] = nz0, acc[r][1] = nz1;
  int64_t q = 0;
  if (mr == 1 && !exact) {
    /* One row (M = 1 linear layers): every weight byte is used once, streamed from L2.
     * The hardware prefetcher alone left the multiplies waiting on it (resnet18's fc at
     * 67-83% of the vpmaddubsw peak, qhost-fbgemm-shapes); a software prefetch
     * PREFETCH_AHEAD bytes ahead, four groups per step (fewer loop branches), and even
     * and odd groups on two accumulator sets (summed exactly in int32 below) read 76-90%
     * (bench/README.md, session 13). Prefetches past the panels' end are harmless: they
     * do not fault. */
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (; q + 4 <= k4n; q += 4) {
      _Pragma("GCC unroll 4")
      for (int u = 0; u < 4; u++)
        _mm_prefetch((const char *)(b + (q + u) * 64 + PREFETCH_AHEAD), _MM_HINT_T0);
      _Pragma("GCC unroll 4")
      for (int u = 0; u < 4; u++) {
        int32_t a4;
        memcpy(&a4, a + (q + u) * 4, 4);
        __m256i av = _mm256_set1_epi32(a4);
        const int8_t *bq = b + (q + u) * 64;
        __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_load_si256((const __m256i *)bq)), ones);
        __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_load_si256((const __m256i *)(bq + 32))), ones);
        if (u & 1)
          s0 = _mm256_add_epi32(s0, p0), s1 = _mm256_add_epi32(s1, p1);
        else
          acc[0][0] = _mm256_add_epi32(acc[0][0], p0), acc[0][1] = _mm256_add_epi32(acc[0][1], p1);
      }
    }
    acc[0][0] = _mm256_add_epi32(acc[0][0], s0), acc[0][1] = _mm256_add_epi32(acc[0][1], s1);
  }
  for (; q < k4n; q++) {
    __m256i b0 = _mm256_load_si256((const __m256i *)(b + q * 64));
    __m256i b1 = _mm256_load_si256((const __m256i *)(b + q * 64 + 32));
    _Pragma("GCC unroll 8")
    for (int r = 0; r < mr; r++) {
      int32_t a4;
      memcpy(&a4, a + r * lda + q * 4, 4);
      __m256i av = _mm256_set1_epi32(a4);
      if (exact) {
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(av, 7), bit0);
        av = _mm256_and_si256(av, low7);
        __m256i h0 = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(hi, b0), ones), 7);
        __m256i h1 = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(hi, b1), ones), 7);
        acc[r][0] = _mm256_add_epi32(acc[r][0], h0);
        acc[r][1] = _mm256_add_epi32(acc[r][1], h1);
      }
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(av, b0), ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(av, b1), ones));
    }
  }
  const __m256 lo = _mm256_set1_ps(pk->lo), hi = _mm256_set1_ps(pk->hi);
  const __m256i zo = _mm256_set1_epi32(pk->zo);
  int64_t c0 = pan * FB_NR;
  int64_t valid = pk->n - c0 < FB_NR ? pk->n - c0 : FB_NR;
  _Pragma("GCC unroll 8")
  for (int h = 0; h < 2; h++) {
    __m256 bias = _mm256_load_ps(pk->bias + c0 + 8 * h), mult = _mm256_load_ps(pk->mult + c0 + 8 * h);
    int64_t n8 = valid - 8 * h;
    if (n8 <= 0)
      break;
    _Pragma("GCC unroll 8")
    for (int r = 0; r < mr; r++) {
      __m256 f = _mm256_cvtepi32_ps(acc[r][h]);
      f = _mm256_mul_ps(_mm256_add_ps(f, bias), mult);
      f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
      __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), zo);
      /* every value is already inside [0, 255]: the saturating packs only narrow */
      __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      __m128i u8 = _mm_packus_epi16(w16, w16);
      uint8_t *dst = y + r * ldy + c0 + 8 * h;
      if (n8 >= 8) {
        _mm_storel_epi64((__m128i *)dst, u8);
      } else {
        uint8_t tmp[16];
        _mm_storeu_si128((__m128i *)tmp, u8);
        memcpy(dst, tmp, (size_t)n8);
      }
    }
  }
}

static inline __attribute__((always_inline)) void block(const uint8_t *a, size_t lda, int64_t m,
                                                        const FbPacked *pk, int64_t p0, int64_t p1,
                                                        uint8_t *y, size_t ldy, const int exact) {
  for (int64_t pan = p0; pan < p1; pan++)
    for (int64_t r0 = 0; r0 < m; r0 += MR) {
      const uint8_t *ar = a + (size_t)r0 * lda;
      uint8_t *yr = y + (size_t)r0 * ldy;
      switch (m - r0 < MR ? m - r0 : MR) {
      case 4: tile(ar, lda, pk, pan, yr, ldy, 4, exact); break;
      case 3: tile(ar, lda, pk, pan, yr, ldy, 3, exact); break;
      case 2: tile(ar, lda, pk, pan, yr, ldy, 2, exact); break;
      default: tile(ar, lda, pk, pan, yr, ldy, 1, exact); break;
      }
    }
}

void fb_block_avx2(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                   uint8_t *y, size_t ldy) {
  block(a, lda, m, pk, p0, p1, y, ldy, 0);
}

void fb_block_avx2_exact(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0,
                         int64_t p1, uint8_t *y, size_t ldy) {
  block(a, lda, m, pk, p0, p1, y, ldy, 1);
}

int fb_rows_above_127(const uint8_t *a, size_t lda, int64_t m, int64_t k) {
  __m256i any = _mm256_setzero_si256();
  int tail = 0;
  for (int64_t r = 0; r < m; r++) {
    const uint8_t *row = a + (size_t)r * lda;
    int64_t i = 0;
    for (; i + 32 <= k; i += 32)
      any = _mm256_or_si256(any, _mm256_loadu_si256((const __m256i *)(row + i)));
    for (; i < k; i++)
      tail |= row[i];
  }
  return (_mm256_movemask_epi8(any) | (tail & 0x80)) != 0;
}
