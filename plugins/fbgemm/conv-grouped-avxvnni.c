/* The direct grouped convolution's row on AVX-VNNI (conv-grouped.h): the shared ymm body
 * (conv-grouped-ymm.h: 8 output channels per ymm, vpermd per 4-byte chunk or broadcast)
 * with the VEX vpdpbusd as its dot product (exact for any uint8). Built with -mavx2
 * -mavxvnni; run only where the host reports AVX-VNNI. */
#include <immintrin.h>
#include <string.h>

#include "conv-grouped.h"

static inline __attribute__((always_inline)) __m256i dpbusd(__m256i acc, __m256i a, __m256i b) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}
#define DOT dpbusd
#define ROW_FN fb_group_row_avxvnni

#include "conv-grouped-ymm.h"
