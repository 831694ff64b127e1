/* The fbgemm plugin's AVX-VNNI micro-kernel (the VEX-encoded vpdpbusd on ymm, for CPUs
 * with AVX-VNNI but no AVX-512): 6 rows of A by one panel of 16 output channels (two ymm
 * of 8 int32 accumulators per row, 12 in all), one vpdpbusd per row and half-panel for
 * every 4 reduction bytes. vpdpbusd multiplies u8 by s8 into int32 without the int16
 * saturation of AVX2's vpmaddubsw, so any uint8 input is exact and no block needs the
 * AVX2 path's exact variant. Then kernels.h's output rule in registers, as in
 * gemm-avx2.c. Built with -mavx2 -mavxvnni of its own (CMakeLists.txt); the plugin calls
 * it only where the host reports AVX-VNNI and AVX2 without AVX-512 VNNI. */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

#define MR 6

/* vpdpbusd (VEX) through asm with a tied accumulator, as gemm-avx512vnni.c does for zmm:
 * acc += a (u8) . b (s8) per dword. The {vex} prefix picks AVX-VNNI's encoding. */
static inline __attribute__((always_inline)) __m256i dpbusd(__m256i acc, __m256i a, __m256i b) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}

static inline __attribute__((always_inline)) void tile(const uint8_t *a, size_t lda, const FbPacked *pk,
                                                       int64_t pan, uint8_t *y, size_t ldy, const int mr) {
  const int64_t k4n = pk->kp / 4;
  const int8_t *b = pk->b + pan * k4n * 64;
  __m256i acc[MR][2];
  _Pragma("GCC unroll 8")
  for (int r = 0; r < mr; r++)
    acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < k4n; q++) {
    __m256i b0 = _mm256_load_si256((const __m256i *)(b + q * 64));
    __m256i b1 = _mm256_load_si256((const __m256i *)(b + q * 64 + 32));
    _Pragma("GCC unroll 8")
    for (int r = 0; r < mr; r++) {
      int32_t a4;
      memcpy(&a4, a + r * lda + q * 4, 4);
      __m256i av = _mm256_set1_epi32(a4);
      acc[r][0] = dpbusd(acc[r][0], av, b0);
      acc[r][1] = dpbusd(acc[r][1], av, b1);
    }
  }
  const __m256 lo = _mm256_set1_ps(pk->lo), hi = _mm256_set1_ps(pk->hi);
  const __m256i zo = _mm256_set1_epi32(pk->zo);
  int64_t c0 = pan * FB_NR;
  int64_t valid = pk->n - c0 < FB_NR ? pk->n - c0 : FB_NR;
  _Pragma("GCC unroll 8")
  for (int h = 0; h < 2; h++) {
    int64_t n8 = valid - 8 * h;
    if (n8 <= 0)
      break;
    __m256i zc = _mm256_load_si256((const __m256i *)(pk->zcol + c0 + 8 * h));
    __m256 bias = _mm256_load_ps(pk->bias + c0 + 8 * h), mult = _mm256_load_ps(pk->mult + c0 + 8 * h);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < mr; r++) {
      __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[r][h], zc));
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

void fb_block_avxvnni(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                      uint8_t *y, size_t ldy) {
  for (int64_t pan = p0; pan < p1; pan++)
    for (int64_t r0 = 0; r0 < m; r0 += MR) {
      const uint8_t *ar = a + (size_t)r0 * lda;
      uint8_t *yr = y + (size_t)r0 * ldy;
      switch (m - r0 < MR ? m - r0 : MR) {
      case 6: tile(ar, lda, pk, pan, yr, ldy, 6); break;
      case 5: tile(ar, lda, pk, pan, yr, ldy, 5); break;
      case 4: tile(ar, lda, pk, pan, yr, ldy, 4); break;
      case 3: tile(ar, lda, pk, pan, yr, ldy, 3); break;
      case 2: tile(ar, lda, pk, pan, yr, ldy, 2); break;
      default: tile(ar, lda, pk, pan, yr, ldy, 1); break;
      }
    }
}
