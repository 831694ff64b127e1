/* The x86 dynamic Linear unit's AVX-512 VNNI GEMM, for CPUs without AMX: the AMX path's
 * packed weights (a panel's reduction group g, 16 columns x 4 bytes, is one 64-byte vector)
 * and packed A (dynamic-gemm.h), vpdpbusd (u8 x s8 into int32, exact for any uint8) on
 * tiles of up to 4 rows by 4 panels (16 zmm accumulators: a packed block's 32 rows are
 * 8 tiles, no row tail; 6 rows left 2 for a latency-bound 1-row tile), and the epilogue straight from
 * the accumulators: f32(acc - zc) * scale (+ bias), masked stores for a column tail. Built
 * with its own flags (CMakeLists.txt, -ffp-contract=off as the AMX file); called only
 * where the host reports AVX-512F/BW/VL and AVX-512 VNNI. */
#include <immintrin.h>
#include <string.h>

#include "dynamic-gemm.h"

#define MR 4
#define NV 4

/* vpdpbusd through asm: GCC 12 copies the accumulator around every _mm512_dpbusd_epi32
 * (fbgemm's gemm-avx512vnni.c measured it); the tied operand keeps it in place. */
static inline __attribute__((always_inline)) __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* mr rows (of one packed block, from row r of it) by nv panels from pan, whole reduction. */
static inline __attribute__((always_inline)) void tile(const uint8_t *blk, int r, const DynPacked *pk,
                                                       int64_t pan, const DynEpilogue *e, float *y, size_t ldy,
                                                       const int mr, const int nv) {
  const int64_t kc = pk->kp / DYN_KB;
  const size_t pstride = (size_t)pk->kp * DYN_NR;
  const int8_t *b = pk->b + pan * (int64_t)pstride;
  __m512i acc[MR][NV];
  _Pragma("GCC unroll 8") for (int i = 0; i < mr; i++) _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++)
      acc[i][v] = _mm512_setzero_si512();
  for (int64_t q = 0; q < kc; q++) {
    const uint8_t *aq = blk + (size_t)q * (DYN_MB * DYN_KB) + (size_t)r * DYN_KB;
    const int8_t *bq = b + q * 1024;
    for (int g = 0; g < 16; g++) {
      __m512i bv[NV];
      _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) bv[v] =
          _mm512_load_si512((const void *)(bq + (size_t)v * pstride + g * 64));
      _Pragma("GCC unroll 8") for (int i = 0; i < mr; i++) {
        int32_t a4;
        memcpy(&a4, aq + i * DYN_KB + g * 4, 4);
        __m512i av = _mm512_set1_epi32(a4);
        _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) acc[i][v] = dpbusd(acc[i][v], av, bv[v]);
      }
    }
  }
  _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) {
    int64_t c0 = (pan + v) * DYN_NR, valid = pk->n - c0 < DYN_NR ? pk->n - c0 : DYN_NR;
    __mmask16 mask = (__mmask16)((1u << valid) - 1u);
    __m512i zc = _mm512_maskz_loadu_epi32(mask, e->zc + c0);
    __m512 s = e->per_column ? _mm512_maskz_loadu_ps(mask, e->scale + c0) : _mm512_set1_ps(e->scale[0]);
    __m512 bias = e->bias ? _mm512_maskz_loadu_ps(mask, e->bias + c0) : _mm512_setzero_ps();
    _Pragma("GCC unroll 8") for (int i = 0; i < mr; i++) {
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][v], zc)), s);
      if (e->bias)
        f = _mm512_add_ps(f, bias);
      _mm512_mask_storeu_ps(y + (size_t)i * ldy + c0, mask, f);
    }
  }
}

/* The tile shapes as separate instances, so every loop above unrolls completely: 4 rows
 * by 1 to 4 panels, and 1 row (a row tail of the last block) by 1 to 4. */
#define TILE(R, V)                                                                                             \
  static void tile_##R##x##V(const uint8_t *blk, int r, const DynPacked *pk, int64_t pan, const DynEpilogue *e, \
                             float *y, size_t ldy) {                                                           \
    tile(blk, r, pk, pan, e, y, ldy, R, V);                                                                    \
  }
TILE(4, 1)
TILE(4, 2)
TILE(4, 3)
TILE(4, 4)
TILE(1, 1)
TILE(1, 2)
TILE(1, 3)
TILE(1, 4)

typedef void TileFn(const uint8_t *blk, int r, const DynPacked *pk, int64_t pan, const DynEpilogue *e, float *y,
                    size_t ldy);
static TileFn *const tiles4[NV] = {tile_4x1, tile_4x2, tile_4x3, tile_4x4};
static TileFn *const tiles1[NV] = {tile_1x1, tile_1x2, tile_1x3, tile_1x4};

void dyn_vnni_block(const uint8_t *ap, int64_t m, const DynPacked *pk, int64_t p0, int64_t p1, const DynEpilogue *e,
                    float *y, size_t ldy) {
  const size_t block_bytes = (size_t)pk->kp * DYN_MB;
  /* four panels at a time (the weights' 4 x 64 bytes of a reduction group reused by 4
   * rows), every row block under them while they are in cache */
  for (int64_t pan = p0; pan < p1; pan += NV) {
    int nv = p1 - pan < NV ? (int)(p1 - pan) : NV;
    for (int64_t r0 = 0; r0 < m; r0 += DYN_MB) {
      const uint8_t *blk = ap + (size_t)(r0 / DYN_MB) * block_bytes;
      int rows = m - r0 < DYN_MB ? (int)(m - r0) : DYN_MB, r = 0;
      float *yb = y + (size_t)r0 * ldy;
      for (; r + MR <= rows; r += MR)
        tiles4[nv - 1](blk, r, pk, pan, e, yb + (size_t)r * ldy, ldy);
      for (; r < rows; r++)
        tiles1[nv - 1](blk, r, pk, pan, e, yb + (size_t)r * ldy, ldy);
    }
  }
}
