/* The direct grouped convolution's row on AVX2 (conv-grouped.h): the shared ymm body
 * (conv-grouped-ymm.h: 8 output channels per ymm, vpermd per 4-byte chunk or broadcast)
 * with a dot product of 4 u8 x s8 pairs made exact for any uint8 without vpdpbusd: the
 * input's low 7 bits and its top bit go through vpmaddubsw separately (pair sums of at
 * most 2 * 127 * 128, and 2 * 128: no int16 saturation), then vpmaddwd by 1 and by 128
 * into int32. Built with -mavx2; run only where the host reports AVX2. */
#include <immintrin.h>
#include <string.h>

#include "conv-grouped.h"

static inline __attribute__((always_inline)) __m256i dot_exact(__m256i acc, __m256i a, __m256i w) {
  const __m256i low7 = _mm256_set1_epi8(0x7f), one8 = _mm256_set1_epi8(1);
  __m256i lo = _mm256_and_si256(a, low7), top = _mm256_and_si256(_mm256_srli_epi16(a, 7), one8);
  __m256i plo = _mm256_maddubs_epi16(lo, w), ptop = _mm256_maddubs_epi16(top, w);
  acc = _mm256_add_epi32(acc, _mm256_madd_epi16(plo, _mm256_set1_epi16(1)));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(ptop, _mm256_set1_epi16(128)));
}
#define DOT dot_exact
#define ROW_FN fb_group_row_avx2

#include "conv-grouped-ymm.h"
