/* The AMX-INT8 tile step that the fbgemm plugin's static GEMM (plugins/fbgemm/gemm-amx.c)
 * and the x86 plugin's dynamic Linear GEMM (plugins/x86/dynamic-gemm-amx.c) share: the
 * palette-1 tile configuration and one step of tdpbusd (u8 x s8 into int32, exact for any
 * uint8 and any int8) over the whole reduction, 32 rows by 2 panels of 16 columns (four
 * accumulator tiles, two A tiles, two B tiles: all eight tile registers), into a 32 x 32
 * int32 buffer. Each caller keeps what is its own: where A's rows come from (packed blocks,
 * im2col rows or gathered input rows), the output epilogue and the loop over panels.
 *
 * B is the packed panel layout both plugins use: panel p's 64-byte reduction chunk q is
 * one 16 x 64-byte tile (16 columns x 4 reduction bytes per row) at b + p * pstride + q *
 * 1024. Static inline, so that each caller's step compiles to its own specialization as
 * before (no call, the unused A addressing and prefetch folded away); include it only from
 * a file built with -mamx-tile -mamx-int8. Plugin code: includes only the SDK and this
 * directory.
 *
 * Threading: the tile configuration and the tile registers belong to the calling thread,
 * and other code on the same threads (oneDNN in the x86 plugin or the host) loads its own,
 * so a caller loads ours with qh_amx_load_config before its steps and releases the tiles
 * (_tile_release) before it returns. The caller has checked that the host reports
 * QH_CPU_AMXINT8 (the OS's tile data permission included). No function here fails. */
#ifndef QH_PLUGINS_AMX_INT8_H
#define QH_PLUGINS_AMX_INT8_H

#if !defined(__AMX_TILE__) || !defined(__AMX_INT8__)
#error "amx-int8.h needs -mamx-tile -mamx-int8 (see the plugin's CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* LDTILECFG's 64-byte memory operand, palette 1. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} QhAmxTileConfig;

/* Loads the calling thread's tile configuration for qh_amx_step: tiles 0-3 the
 * accumulators (row tile r, panel v: tile 2r + v), 4-5 the A row tiles, 6-7 the B panels,
 * every row 64 bytes. rows0 and rows1: the rows of the first and second row tile (1..16;
 * rows1 0 when the second is unused, which then keeps 1: tiles unused never mind). A tile
 * loads only its configured rows, so a row tail configured this way reads no row past the
 * caller's m. Replaces whatever configuration the thread had. */
static inline void qh_amx_load_config(int rows0, int rows1) {
  QhAmxTileConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  int r1 = rows1 > 0 ? rows1 : 1;
  const int rows[8] = {rows0, rows0, r1, r1, rows0, r1, 16, 16};
  for (int t = 0; t < 8; t++) {
    cfg.rows[t] = (uint8_t)rows[t];
    cfg.colsb[t] = 64;
  }
  /* not _tile_loadconfig: GCC 12's names only the operand's first 8 bytes, so the
   * compiler may drop the stores of the rest as dead (then palette 0: tiles off, SIGILL) */
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

/* Where a step finds A's rows (borrowed): the first row tile's 16 rows from a, lda bytes
 * apart, the second's from a + second; reduction chunk q (64 bytes) of a row at offset
 * koff[q], or q * chunk when koff is NULL. */
typedef struct {
  const uint8_t *a;
  size_t lda, second;
  int64_t chunk;
  const int64_t *koff;
} QhAmxRows;

/* Where a step prefetches into L2 (the next panel pair's weights, which otherwise come
 * from memory while the tiles wait): lines [l0, l1) of every 1 KiB chunk of np panels from
 * pf, panels as far apart as the step's. */
typedef struct {
  const int8_t *pf;
  int np, l0, l1;
} QhAmxPrefetch;

/* always_inline, and so is every function down to the step's loop: GCC 12 marks an
 * out-of-line function whose only effect is __builtin_prefetch as const and deletes its
 * calls, which is what became of the x86 dynamic GEMM's prefetch before this header (no
 * prefetcht1 in its binary; bench/README.md, session 14, amxc). */
static inline __attribute__((always_inline)) void qh_amx_prefetch_chunk(const QhAmxPrefetch *f, size_t pstride,
                                                                       int64_t q) {
  for (int p = 0; p < f->np; p++)
    for (int l = f->l0; l < f->l1; l++)
      _mm_prefetch((const char *)(f->pf + (size_t)p * pstride + (size_t)q * 1024 + (size_t)l * 64), _MM_HINT_T1);
}

static inline __attribute__((always_inline)) size_t qh_amx_chunk_offset(const QhAmxRows *a, int64_t q) {
  return (size_t)(a->koff ? a->koff[q] : q * a->chunk);
}

/* The reduction of one step on tiles 0-3 (as many as two_rows and two_panels say, both
 * constants where qh_amx_step calls it, so each of the four compiles to its own loop with
 * only its own loads and tdpbusd, in this order). */
static inline __attribute__((always_inline)) void qh_amx_reduce(const QhAmxRows *a, const int8_t *b0,
                                                                const int8_t *b1, size_t pstride, int64_t kc,
                                                                const QhAmxPrefetch *f, int two_rows,
                                                                int two_panels) {
  const uint8_t *a0 = a->a, *a1 = a->a + a->second;
  const size_t lda = a->lda;
  for (int64_t q = 0; q < kc; q++) {
    if (f)
      qh_amx_prefetch_chunk(f, pstride, q);
    size_t ko = qh_amx_chunk_offset(a, q);
    _tile_loadd(4, a0 + ko, lda);
    _tile_loadd(6, b0 + q * 1024, 64);
    if (two_rows) {
      _tile_loadd(5, a1 + ko, lda);
    }
    if (two_panels) {
      _tile_loadd(7, b1 + q * 1024, 64);
    }
    _tile_dpbusd(0, 4, 6);
    if (two_panels) {
      _tile_dpbusd(1, 4, 7);
    }
    if (two_rows) {
      _tile_dpbusd(2, 5, 6);
    }
    if (two_rows && two_panels) {
      _tile_dpbusd(3, 5, 7);
    }
  }
}

/* One step: mr (1..32) rows of A by nv (1 or 2) panels from b0 (the second panel pstride
 * bytes on), kc reduction chunks, under a configuration whose row tiles hold min(mr, 16)
 * and mr - 16 rows (or more). Prefetches per chunk as f says (NULL: none). Writes cbuf's
 * rows [0, min(mr, 16)), and [16, mr) when mr > 16, columns [0, 16 * nv): row r, column c
 * at cbuf[r * 32 + c]; the rest of cbuf is left as it was (rows past a row tile's
 * configured rows are not stored). cbuf is the caller's, 64-byte aligned. */
static inline __attribute__((always_inline)) void qh_amx_step(int32_t *cbuf, const QhAmxRows *a, int mr,
                                                              const int8_t *b0, size_t pstride, int64_t kc, int nv,
                                                              const QhAmxPrefetch *f) {
  const int8_t *b1 = b0 + pstride;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  if (mr > 16 && nv == 2)
    qh_amx_reduce(a, b0, b1, pstride, kc, f, 1, 1);
  else if (mr > 16)
    qh_amx_reduce(a, b0, b1, pstride, kc, f, 1, 0);
  else if (nv == 2)
    qh_amx_reduce(a, b0, b1, pstride, kc, f, 0, 1);
  else
    qh_amx_reduce(a, b0, b1, pstride, kc, f, 0, 0);
  _tile_stored(0, cbuf, 128);
  _tile_stored(1, cbuf + 16, 128);
  if (mr > 16) {
    _tile_stored(2, cbuf + 16 * 32, 128);
    _tile_stored(3, cbuf + 16 * 32 + 16, 128);
  }
}

#endif
