/* The fbgemm plugin's AMX-INT8 micro-kernel: tdpbusd (u8 x s8 into int32, exact for any
 * uint8) on tiles of 16 rows by 16 output channels, 32 rows by 2 panels per step (four
 * accumulator tiles, two A tiles, two B tiles: all eight tile registers). The packed
 * panels are already tdpbusd's B layout (kernels.h: 16 channels x 4 reduction bytes per
 * 64-byte row), padded to 64 reduction bytes per B tile by fb_pack_for(FB_ISA_AMX); the
 * rows of A are kp bytes, which im2col zero-fills past k. The accumulators go through a
 * small int32 buffer to kernels.h's output rule in AVX-512, the same operations in the
 * same order as the AVX-512 VNNI kernel, so the bytes are the scalar twin's. The tile
 * configuration and the step are ../common/amx-int8.h's (shared with the x86 plugin's
 * dynamic Linear GEMM); the gathered rows, the row map and the row tails are this file's.
 *
 * The tile configuration belongs to the thread and other code in the process (oneDNN in
 * the x86 plugin or the host) loads its own, so every call loads ours on entry and
 * releases the tiles on return: a worker of the host's pool needs nothing else. Built with
 * its own flags (CMakeLists.txt); the plugin calls it only when the host reports
 * QH_CPU_AMXINT8 and AVX-512 VNNI. */
#define _DEFAULT_SOURCE 1 /* syscall(): arch_prctl has no libc wrapper */
#include <immintrin.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "../common/amx-int8.h"
#include "kernels.h"

int fb_amx_request_permission(void) {
#if defined(__linux__)
  /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18), asm/prctl.h's values */
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 0 : -1;
#else
  return 0;
#endif
}

/* Where the output rows of a step go: y + r * ldy, or with a map (the gathered path) the
 * output pixel of padded row row0 + r, NULL for a padding row. Divides once per step,
 * then steps through the pixels: a 64-bit division per row and panel cost more than the
 * step's tdpbusd. */
static void out_rows(uint8_t *y, size_t ldy, const FbRowMap *map, int64_t row0, int mr, uint8_t **rows) {
  if (!map) {
    for (int r = 0; r < mr; r++)
      rows[r] = y + (size_t)r * ldy;
    return;
  }
  int64_t b = row0 / map->plane, rem = row0 % map->plane, oy = rem / map->pw, ox = rem % map->pw;
  for (int r = 0; r < mr; r++) {
    rows[r] = oy < map->oh && ox < map->ow ? y + (size_t)((b * map->oh + oy) * map->ow + ox) * ldy : NULL;
    if (++ox == map->pw) {
      ox = 0;
      if (++oy * map->pw == map->plane)
        oy = 0, b++;
    }
  }
}

/* Requantizes rows [0, mr) of the 32 x 32 int32 buffer's columns of nv panels into y. */
static void store_rows(const int32_t *cbuf, int mr, int nv, const FbPacked *pk, int64_t pan, uint8_t *y,
                       size_t ldy, const FbRowMap *map, int64_t row0) {
  const __m512 lo = _mm512_set1_ps(pk->lo), hi = _mm512_set1_ps(pk->hi);
  const __m512i zo = _mm512_set1_epi32(pk->zo);
  uint8_t *rows[32];
  out_rows(y, ldy, map, row0, mr, rows);
  for (int v = 0; v < nv; v++) {
    int64_t c0 = (pan + v) * FB_NR;
    int64_t valid = pk->n - c0 < FB_NR ? pk->n - c0 : FB_NR;
    __mmask16 mask = (__mmask16)((1u << valid) - 1u);
    __m512i zc = _mm512_load_si512((const void *)(pk->zcol + c0));
    __m512 bias = _mm512_load_ps(pk->bias + c0), mult = _mm512_load_ps(pk->mult + c0);
    for (int r = 0; r < mr; r++) {
      uint8_t *yr = rows[r];
      if (!yr)
        continue;
      __m512i acc = _mm512_loadu_si512((const void *)(cbuf + r * 32 + v * 16));
      __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, zc));
      f = _mm512_mul_ps(_mm512_add_ps(f, bias), mult);
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zo);
      _mm_mask_storeu_epi8(yr + c0, mask, _mm512_cvtepi32_epi8(q));
    }
  }
}

/* One step: mr (1..32) rows of A from a by nv (1 or 2) panels from pan, the whole
 * reduction, under a configuration whose row tiles hold min(mr, 16) and mr - 16 rows.
 * Chunk q (64 reduction bytes) of row r is at a + r * lda + koff[q] (q * 64 without koff). */
static void step(const uint8_t *a, size_t lda, const int64_t *koff, int mr, const FbPacked *pk, int64_t pan,
                 int nv, uint8_t *y, size_t ldy, const FbRowMap *map, int64_t row0) {
  const size_t pstride = (size_t)pk->kp * FB_NR;
  const QhAmxRows rows = {a, lda, 16 * lda, 64, koff};
  _Alignas(64) int32_t cbuf[32 * 32];
  qh_amx_step(cbuf, &rows, mr, pk->b + pan * (int64_t)pstride, pstride, pk->kp / 64, nv, NULL);
  store_rows(cbuf, mr, nv, pk, pan, y, ldy, map, row0);
}

static void block(const uint8_t *a, size_t lda, const int64_t *koff, int64_t m, const FbPacked *pk, int64_t p0,
                  int64_t p1, uint8_t *y, size_t ldy, const FbRowMap *map, int64_t row0) {
  int64_t full = m / 32 * 32;
  int tail = (int)(m - full), rows0 = tail > 16 ? 16 : tail, rows1 = tail > 16 ? tail - 16 : 0;
  /* The row tail (only in the last block: blocks are multiples of 32 rows) has its own
   * configuration, so that no tile reads a row past m (the input itself, for 1x1
   * convolutions). It runs right after the full rows of each panel pair, while that
   * pair's weights are still in cache: a separate pass would stream every weight twice,
   * which costs more on layer4's 2.4 MiB (M = 49) than two ldtilecfg per pair. */
  if (full > 0)
    qh_amx_load_config(16, 16);
  else
    qh_amx_load_config(rows0, rows1);
  for (int64_t pan = p0; pan < p1; pan += 2) {
    int nv = p1 - pan < 2 ? 1 : 2;
    for (int64_t r0 = 0; r0 < full; r0 += 32)
      step(a + (size_t)r0 * lda, lda, koff, 32, pk, pan, nv, map ? y : y + (size_t)r0 * ldy, ldy, map, row0 + r0);
    if (tail && full > 0) {
      qh_amx_load_config(rows0, rows1);
      step(a + (size_t)full * lda, lda, koff, tail, pk, pan, nv, map ? y : y + (size_t)full * ldy, ldy, map,
           row0 + full);
      if (pan + 2 < p1)
        qh_amx_load_config(16, 16);
    } else if (tail) {
      step(a, lda, koff, tail, pk, pan, nv, y, ldy, map, row0);
    }
  }
  _tile_release();
}

void fb_block_amx(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                  uint8_t *y, size_t ldy) {
  block(a, lda, NULL, m, pk, p0, p1, y, ldy, NULL, 0);
}

void fb_block_amx_gather(const uint8_t *a, size_t lda, const int64_t *koff, int64_t m, const FbPacked *pk,
                         int64_t p0, int64_t p1, uint8_t *y, size_t ldy, const FbRowMap *map, int64_t row0) {
  block(a, lda, koff, m, pk, p0, p1, y, ldy, map, row0);
}
