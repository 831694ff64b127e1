/* The x86 dynamic Linear unit's AMX-INT8 GEMM: tdpbusd (u8 x s8 into int32, exact for any
 * uint8 and any int8, so MatMulInteger's accumulator without its zero point) on tiles of 16
 * rows by 16 columns, 32 rows by 2 panels per step (four accumulator tiles, two A tiles,
 * two B tiles: all eight tile registers; the step and the tile configuration are
 * ../common/amx-int8.h's, shared with the fbgemm plugin). Each step's 32 x 32 int32 result
 * goes through a 4 KiB buffer to the unit's float epilogue while it is in L1, so the int32
 * matrix never travels through the cache as a whole (oneDNN's s32 output did: 1.5 MiB for
 * BERT's feed-forward, written, then read and rewritten by a separate pass). A is packed
 * per call into 32-row blocks of contiguous 16 x 64-byte tiles, zero-padded in K and M:
 * every tile load reads 1 KiB in a row (rows K bytes apart cost a cache line each, from
 * L2, and the tile loads were the step's stall), and no tail needs a tile configuration.
 *
 * The tile configuration belongs to the thread and oneDNN loads its own on the same
 * threads, so every call loads ours on entry and releases the tiles on return. Built with
 * its own flags (CMakeLists.txt: AMX, AVX-512 for the epilogue, -ffp-contract=off so that
 * the Mul and the Add round separately as the host's nodes do); called only where the host
 * reports QH_CPU_AMXINT8. */
#include <immintrin.h>

#include "../common/amx-int8.h"
#include "dynamic-gemm.h"

/* The epilogue of rows [0, mr) of the 32 x 32 buffer, nv panels from pan, into y. */
static void store_rows(const int32_t *cbuf, int mr, int nv, const DynPacked *pk, int64_t pan,
                       const DynEpilogue *e, float *y, size_t ldy) {
  for (int v = 0; v < nv; v++) {
    int64_t c0 = (pan + v) * DYN_NR, valid = pk->n - c0 < DYN_NR ? pk->n - c0 : DYN_NR;
    __mmask16 mask = (__mmask16)((1u << valid) - 1u);
    __m512i zc = _mm512_maskz_loadu_epi32(mask, e->zc + c0);
    __m512 s = e->per_column ? _mm512_maskz_loadu_ps(mask, e->scale + c0) : _mm512_set1_ps(e->scale[0]);
    __m512 b = e->bias ? _mm512_maskz_loadu_ps(mask, e->bias + c0) : _mm512_setzero_ps();
    for (int r = 0; r < mr; r++) {
      __m512i acc = _mm512_loadu_si512((const void *)(cbuf + r * 32 + v * 16));
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, zc)), s);
      if (e->bias)
        f = _mm512_add_ps(f, b);
      _mm512_mask_storeu_ps(y + (size_t)r * ldy + c0, mask, f);
    }
  }
}

/* One step: the packed row block a (mr of its 32 rows wanted, 1..32) by nv (1 or 2) panels
 * from pan over the whole reduction; a block of 16 rows or fewer computes one row tile. */
static void step(const uint8_t *a, int mr, const DynPacked *pk, int64_t pan, int nv, const DynEpilogue *e,
                 float *y, size_t ldy, const QhAmxPrefetch *f) {
  const size_t pstride = (size_t)pk->kp * DYN_NR;
  /* the block's chunk q: 32 rows of 64 bytes, the second row tile 1 KiB on */
  const QhAmxRows rows = {a, DYN_KB, 16 * DYN_KB, 32 * DYN_KB, NULL};
  _Alignas(64) int32_t cbuf[32 * 32];
  qh_amx_step(cbuf, &rows, mr, pk->b + pan * (int64_t)pstride, pstride, pk->kp / DYN_KB, nv, f);
  store_rows(cbuf, mr, nv, pk, pan, e, y, ldy);
}

void dyn_amx_block(const uint8_t *ap, int64_t m, const DynPacked *pk, int64_t p0, int64_t p1, const DynEpilogue *e,
                   float *y, size_t ldy) {
  if (m <= 0 || p0 >= p1)
    return;
  const size_t block_bytes = (size_t)pk->kp * DYN_MB, pstride = (size_t)pk->kp * DYN_NR;
  const int64_t blocks = (m + DYN_MB - 1) / DYN_MB;
  /* every tile 16 rows: packed A has whole 32-row blocks (zero rows past m), so no tail
   * needs a configuration of its own */
  qh_amx_load_config(16, 16);
  /* each panel pair's weights are read once from memory and then from cache for every
   * row block; the row blocks share the prefetch of the next pair's (16 lines a chunk) */
  for (int64_t pan = p0; pan < p1; pan += 2) {
    int nv = p1 - pan < 2 ? 1 : 2;
    int64_t next = pan + 2;
    int next_np = next >= p1 ? 0 : p1 - next < 2 ? 1 : 2;
    for (int64_t rb = 0; rb < blocks; rb++) {
      int64_t r0 = rb * DYN_MB;
      int mr = m - r0 < DYN_MB ? (int)(m - r0) : DYN_MB;
      QhAmxPrefetch f = {pk->b + next * (int64_t)pstride, next_np, (int)(rb * 16 / blocks), (int)((rb + 1) * 16 / blocks)};
      step(ap + (size_t)rb * block_bytes, mr, pk, pan, nv, e, y + (size_t)r0 * ldy, ldy, &f);
    }
  }
  _tile_release();
}
