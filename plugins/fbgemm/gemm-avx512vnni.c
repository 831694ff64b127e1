/* The fbgemm plugin's AVX-512 VNNI micro-kernel: 6 rows of A by up to 4 panels of 16
 * output channels, or 12 rows by 1 or 2 (24 zmm accumulators), the rows given as
 * pointers (a strided convolution's pixels, kernel rows in a padded copy), one vpdpbusd
 * per row and panel for every 4 reduction bytes (u8 x s8 into int32, exact for any
 * uint8) into accumulators that start at the column offsets, then kernels.h's output
 * rule in registers: float bias and multiplier, clamp, round half to even (vcvtps2dq
 * under the default MXCSR), zero point, and a masked store of the valid channels (4
 * panels: saturating packs, one store per row); or, where the pack allows it (kernels.h,
 * int_bias), the bias in the accumulators' start and the clamps on the bytes. A long
 * reduction goes in chunks (block_chunked), each chunk's weights reused from L1 by every
 * row tile while the next chunk comes into L2. Built with AVX-512 flags of its own
 * (CMakeLists.txt); the plugin calls it only when the host reports avx512f/bw/vl and
 * avx512vnni. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "gemm-avx512-store.h"
#include "kernels.h"

/* Rows per tile: 6 by up to 4 panels, 12 by 1 or 2 (24 accumulators either way, so that
 * a narrow GEMM, N = 16 or 32, still has enough independent vpdpbusd chains to hide
 * their latency). */
#define MR 6
#define MR_NARROW 12

/* vpdpbusd through asm: GCC 12 copies the accumulator to a scratch register and back around
 * every _mm512_dpbusd_epi32 (three instructions per multiply, and spills in the 6x4 tile);
 * the tied "+v" operand keeps it in place. */
static inline __attribute__((always_inline)) __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* The reduction as runs: run t is k4 groups of 4 bytes at row + off[t] (one run at 0 for
 * a plain row of kp bytes; a tap's ic bytes or a kernel row for fb_block_avx512vnni_rows_runs), the packed
 * weights continuing from one run to the next, from group q0 of each panel on (a chunk of
 * the reduction, block_chunked). */
typedef struct {
  const int64_t *off;
  int64_t n, k4, q0;
} Runs;

/* Where a tile's accumulators come from and go: first, from the column offsets (else from
 * part, where the previous chunk left them); last, through the epilogue to the output
 * (else back to part). A whole reduction is both. pf: bytes the tile brings into L2, a
 * line per reduction group (block_chunked's next chunk), or NULL. */
typedef struct {
  __m512i (*part)[4];
  int first, last;
  const int8_t *pf;
} Phase;

/* One reduction group of a tile: 4 bytes of each row (a + d[r]) by the 64 bytes of each
 * panel at b (panels pstride apart). */
static inline __attribute__((always_inline)) void group(__m512i acc[][4], const uint8_t *a, const ptrdiff_t *d,
                                                        const int8_t *b, size_t pstride, const int mr, const int nv) {
  __m512i bv[4];
  _Pragma("GCC unroll 8")
  for (int v = 0; v < nv; v++)
    bv[v] = _mm512_load_si512((const void *)(b + v * pstride));
  _Pragma("GCC unroll 16")
  for (int r = 0; r < mr; r++) {
    int32_t a4;
    memcpy(&a4, a + d[r], 4);
    __m512i av = _mm512_set1_epi32(a4);
    _Pragma("GCC unroll 8")
    for (int v = 0; v < nv; v++)
      acc[r][v] = dpbusd(acc[r][v], av, bv[v]);
  }
}

/* One tile: rows[r] is row r of A (anywhere: gemm.c's strided 1x1 path gathers the rows
 * of a strided convolution this way, with no copy), output row r at y + r * ldy. */
static inline __attribute__((always_inline)) void tile(const uint8_t *const *rows, const Runs *runs,
                                                       const FbPacked *pk, int64_t pan, Phase ph, uint8_t *y,
                                                       size_t ldy, const int mr, const int nv) {
  const int64_t k4n = pk->kp / 4;
  const size_t pstride = (size_t)k4n * 64;
  /* the accumulators start at -zx * colsum (the column offsets), so the epilogue has
   * nothing to subtract */
  __m512i acc[MR_NARROW][4];
  /* The short epilogue (kernels.h, int_bias) for 2 panels or more; one panel (N = 16)
   * keeps the float one, whose single vpmovdb beat the packs and vpermd there
   * (qhost-fbgemm-shapes, mobilenet_v2's 32->16: 290-327 against 254-285 GOPS). */
  const int int_epi = pk->int_bias && nv > 1;
  const int32_t *start = int_epi ? pk->nzbias : pk->nzcol; /* the short epilogue's bias too */
  _Pragma("GCC unroll 16")
  for (int r = 0; r < mr; r++)
    _Pragma("GCC unroll 8")
    for (int v = 0; v < nv; v++)
      acc[r][v] = ph.first ? _mm512_load_si512((const void *)(start + (pan + v) * FB_NR)) : ph.part[r][v];
  if (mr == 1) {
    /* One row (M = 1 linear layers, row tails): nv chains alone would wait on vpdpbusd's
     * latency, so even and odd reduction groups go to two sets of accumulators, summed
     * (exactly, in int32) before the epilogue. */
    __m512i acc1[4];
    _Pragma("GCC unroll 8")
    for (int v = 0; v < nv; v++)
      acc1[v] = _mm512_setzero_si512();
    for (int64_t t = 0; t < runs->n; t++) {
      const uint8_t *at = rows[0] + runs->off[t];
      const int8_t *b = pk->b + pan * pstride + (size_t)(runs->q0 + t * runs->k4) * 64;
      int64_t q = 0, k4 = runs->k4;
      for (; q + 2 <= k4; q += 2) {
        int32_t a0, a1;
        memcpy(&a0, at + q * 4, 4);
        memcpy(&a1, at + q * 4 + 4, 4);
        __m512i av0 = _mm512_set1_epi32(a0), av1 = _mm512_set1_epi32(a1);
        _Pragma("GCC unroll 8")
        for (int v = 0; v < nv; v++) {
          acc[0][v] = dpbusd(acc[0][v], av0, _mm512_load_si512((const void *)(b + v * pstride + q * 64)));
          acc1[v] = dpbusd(acc1[v], av1, _mm512_load_si512((const void *)(b + v * pstride + q * 64 + 64)));
        }
      }
      if (q < k4) {
        int32_t a0;
        memcpy(&a0, at + q * 4, 4);
        __m512i av0 = _mm512_set1_epi32(a0);
        _Pragma("GCC unroll 8")
        for (int v = 0; v < nv; v++)
          acc[0][v] = dpbusd(acc[0][v], av0, _mm512_load_si512((const void *)(b + v * pstride + q * 64)));
      }
    }
    _Pragma("GCC unroll 8")
    for (int v = 0; v < nv; v++)
      acc[0][v] = _mm512_add_epi32(acc[0][v], acc1[v]);
  } else {
    /* each row as a distance from row 0 (all rows lie in one buffer): one moving pointer
     * and base + index loads, where 6 or 12 moving pointers each took an add per step
     * from the ports vpdpbusd runs on */
    ptrdiff_t d[MR_NARROW];
    _Pragma("GCC unroll 16")
    for (int r = 0; r < mr; r++)
      d[r] = rows[r] - rows[0];
    for (int64_t t = 0; t < runs->n; t++) {
      const uint8_t *at = rows[0] + runs->off[t];
      const int8_t *b = pk->b + pan * pstride + (size_t)(runs->q0 + t * runs->k4) * 64;
      if (ph.pf) {
        for (int64_t q = 0; q < runs->k4; q++) {
          _mm_prefetch((const char *)ph.pf, _MM_HINT_T1);
          ph.pf += 64;
          group(acc, at + q * 4, d, b + q * 64, pstride, mr, nv);
        }
      } else {
        for (int64_t q = 0; q < runs->k4; q++)
          group(acc, at + q * 4, d, b + q * 64, pstride, mr, nv);
      }
    }
  }
  if (!ph.last) {
    _Pragma("GCC unroll 16")
    for (int r = 0; r < mr; r++)
      _Pragma("GCC unroll 8")
      for (int v = 0; v < nv; v++)
        ph.part[r][v] = acc[r][v];
    return;
  }
  if (int_epi) {
    int64_t c0 = pan * FB_NR, valid = pk->n - c0 < nv * FB_NR ? pk->n - c0 : nv * FB_NR;
    __mmask64 mask = valid == 64 ? ~(__mmask64)0 : ((__mmask64)1 << valid) - 1;
    __m512 hv;
    __m512i zo16, lo8, perm;
    fb_store64_consts(pk->lo, pk->hi, pk->zo, &hv, &zo16, &lo8, &perm);
    const __m512i hi8 = _mm512_set1_epi8((char)(uint8_t)((int32_t)pk->hi + pk->zo));
    const float *mult = pk->mult + c0; /* once: the byte stores below may alias *pk */
    if (pk->lo + (float)pk->zo == 0.0f && pk->hi + (float)pk->zo == 255.0f) {
      _Pragma("GCC unroll 16")
      for (int r = 0; r < mr; r++)
        fb_store_int_avx512(acc[r], nv, mult, zo16, lo8, hi8, perm, y + r * ldy + c0, mask, 0);
    } else {
      _Pragma("GCC unroll 16")
      for (int r = 0; r < mr; r++)
        fb_store_int_avx512(acc[r], nv, mult, zo16, lo8, hi8, perm, y + r * ldy + c0, mask, 1);
    }
    return;
  }
  const __m512 lo = _mm512_set1_ps(pk->lo), hi = _mm512_set1_ps(pk->hi);
  const __m512i zo = _mm512_set1_epi32(pk->zo);
  if (nv == 4) {
    int64_t c0 = pan * FB_NR, valid = pk->n - c0 < 4 * FB_NR ? pk->n - c0 : 4 * FB_NR;
    __mmask64 mask = valid == 64 ? ~(__mmask64)0 : ((__mmask64)1 << valid) - 1;
    __m512 hv;
    __m512i zo16, lo8, perm;
    fb_store64_consts(pk->lo, pk->hi, pk->zo, &hv, &zo16, &lo8, &perm);
    const float *bias = pk->bias + c0, *mult = pk->mult + c0;
    _Pragma("GCC unroll 16")
    for (int r = 0; r < mr; r++)
      fb_store64_avx512(acc[r], bias, mult, hv, zo16, lo8, perm, y + r * ldy + c0, mask);
    return;
  }
  _Pragma("GCC unroll 8")
  for (int v = 0; v < nv; v++) {
    int64_t c0 = (pan + v) * FB_NR;
    int64_t valid = pk->n - c0 < FB_NR ? pk->n - c0 : FB_NR;
    __mmask16 mask = (__mmask16)((1u << valid) - 1u);
    __m512 bias = _mm512_load_ps(pk->bias + c0), mult = _mm512_load_ps(pk->mult + c0);
    _Pragma("GCC unroll 16")
    for (int r = 0; r < mr; r++) {
      __m512 f = _mm512_cvtepi32_ps(acc[r][v]);
      f = _mm512_mul_ps(_mm512_add_ps(f, bias), mult);
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zo);
      _mm_mask_storeu_epi8(y + r * ldy + c0, mask, _mm512_cvtepi32_epi8(q));
    }
  }
}

#define T(r, nv) tile(rows, runs, pk, pan, ph, y, ldy, r, nv)
#define ROWS6(nv)                                                                                  \
  switch (mr) {                                                                                    \
  case 6: T(6, nv); break;                                                                         \
  case 5: T(5, nv); break;                                                                         \
  case 4: T(4, nv); break;                                                                         \
  case 3: T(3, nv); break;                                                                         \
  case 2: T(2, nv); break;                                                                         \
  default: T(1, nv); break;                                                                        \
  }
#define ROWS12(nv)                                                                                 \
  switch (mr) {                                                                                    \
  case 12: T(12, nv); break;                                                                       \
  case 11: T(11, nv); break;                                                                       \
  case 10: T(10, nv); break;                                                                       \
  case 9: T(9, nv); break;                                                                         \
  case 8: T(8, nv); break;                                                                         \
  case 7: T(7, nv); break;                                                                         \
  default: ROWS6(nv); break;                                                                       \
  }

/* One tile with compile-time row and panel counts, so the accumulators stay in registers. */
static void run_tile(const uint8_t *const *rows, const Runs *runs, int mr, const FbPacked *pk, int64_t pan,
                     Phase ph, int nv, uint8_t *y, size_t ldy) {
  switch (nv) {
  case 4: ROWS6(4); break;
  case 3: ROWS6(3); break;
  case 2: ROWS12(2); break;
  default: ROWS12(1); break;
  }
}

/* Rows per call of block(): its row pointers live on the stack. */
#define BLOCK_ROWS 512

/* The whole reduction in one pass per tile. Panels outer: one group of weights is reused
 * by every row tile of the block (from L1 where it fits; a long reduction's group comes
 * from L2 for every tile, which block_chunked avoids). */
static void block_whole(const uint8_t *const *rows, const Runs *runs, int64_t m, const FbPacked *pk, int64_t p0,
                        int64_t p1, uint8_t *y, size_t ldy) {
  for (int64_t pan = p0; pan < p1; pan += 4) {
    int nv = p1 - pan < 4 ? (int)(p1 - pan) : 4, tr = nv <= 2 ? MR_NARROW : MR;
    const Phase whole = {NULL, 1, 1, NULL};
    for (int64_t r0 = 0; r0 < m; r0 += tr) {
      int mr = m - r0 < tr ? (int)(m - r0) : tr;
      run_tile(rows + r0, runs, mr, pk, pan, whole, nv, y + (size_t)r0 * ldy, ldy);
    }
  }
}

/* Reduction groups per chunk (kernels.h): 4 panels of KC groups are 24 KiB of weights,
 * which stay in L1 while every row tile of the block takes its share of them, where a
 * long reduction (resnet18's layer4, K = 4608: 288 KiB per group of panels) streamed its
 * weights from L2 once per 6-row tile. Chunks alone gained 1-2 points of the peak on
 * layer4 (qhost-fbgemm-shapes); bringing the next chunk into L2 meanwhile (Phase.pf) took
 * it from 75-79% to 82-85%, and its cold-weight run from 53-58% to 62-73%. */
#define KC FB_VNNI_KC
/* Rows whose partial sums (CHUNK_ROWS x 64 int32, 24 KiB on the stack) one pass keeps. */
#define CHUNK_ROWS 96

/* The reduction in chunks of about KC groups (whole runs where runs are shorter, else
 * pieces of one run), each chunk over every tile of up to CHUNK_ROWS rows before the
 * next, the tiles' sums kept in part between chunks. */
static void block_chunked(const uint8_t *const *rows, const Runs *runs, int64_t m, const FbPacked *pk, int64_t p0,
                          int64_t p1, uint8_t *y, size_t ldy) {
  __m512i part[CHUNK_ROWS][4];
  const int64_t k4n = pk->kp / 4;
  int64_t per = runs->k4 >= KC ? 0 : KC / runs->k4; /* whole runs per chunk, or 0: pieces */
  int64_t pieces = per ? 1 : (runs->k4 + KC - 1) / KC;
  int64_t chunks = per ? (runs->n + per - 1) / per : runs->n * pieces;
  for (int64_t m0 = 0; m0 < m; m0 += CHUNK_ROWS) {
    int64_t mm = m - m0 < CHUNK_ROWS ? m - m0 : CHUNK_ROWS;
    for (int64_t pan = p0; pan < p1; pan += 4) {
      int nv = p1 - pan < 4 ? (int)(p1 - pan) : 4, tr = nv <= 2 ? MR_NARROW : MR;
      for (int64_t ch = 0; ch < chunks; ch++) {
        int64_t off;
        Runs sub;
        if (per) {
          int64_t t0 = ch * per;
          sub = (Runs){runs->off + t0, runs->n - t0 < per ? runs->n - t0 : per, runs->k4, runs->q0 + t0 * runs->k4};
        } else {
          int64_t t = ch / pieces, q = ch % pieces * KC, len = runs->k4 - q < KC ? runs->k4 - q : KC;
          off = runs->off[t] + q * 4;
          sub = (Runs){&off, 1, len, runs->q0 + t * runs->k4 + q};
        }
        /* the next chunk of these panels, or the next group's first one: tile t brings
         * panel t's part of it into L2 while this chunk runs from L1, so that its first
         * tile does not wait on L3 (layer4's 2.3 MiB of weights overflow L2 and miss it
         * on every pass) */
        int64_t npan = pan, nq = sub.q0 + sub.n * sub.k4;
        if (ch == chunks - 1)
          npan = pan + 4, nq = runs->q0;
        int64_t nnv = p1 - npan < 4 ? p1 - npan : 4;
        for (int64_t r0 = 0, t = 0; r0 < mm; r0 += tr, t++) {
          int mr = mm - r0 < tr ? (int)(mm - r0) : tr;
          Phase ph = {part + r0, ch == 0, ch == chunks - 1,
                      t < nnv ? pk->b + (size_t)((npan + t) * k4n + nq) * 64 : NULL};
          run_tile(rows + m0 + r0, &sub, mr, pk, pan, ph, nv, y + (size_t)(m0 + r0) * ldy, ldy);
        }
      }
    }
  }
}

static void block(const uint8_t *const *rows, const Runs *runs, int64_t m, const FbPacked *pk, int64_t p0,
                  int64_t p1, uint8_t *y, size_t ldy) {
  /* chunks pay where the weights are reused by more than one tile and a group of panels
   * outgrows L1 */
  if (runs->n * runs->k4 > 2 * KC && m > MR)
    block_chunked(rows, runs, m, pk, p0, p1, y, ldy);
  else
    block_whole(rows, runs, m, pk, p0, p1, y, ldy);
}

/* Rows lda bytes apart, BLOCK_ROWS at a time. */
static void block_strided(const uint8_t *a, size_t lda, const Runs *runs, int64_t m, const FbPacked *pk,
                          int64_t p0, int64_t p1, uint8_t *y, size_t ldy) {
  const uint8_t *rows[BLOCK_ROWS];
  for (int64_t m0 = 0; m0 < m; m0 += BLOCK_ROWS) {
    int64_t n = m - m0 < BLOCK_ROWS ? m - m0 : BLOCK_ROWS;
    for (int64_t r = 0; r < n; r++)
      rows[r] = a + (size_t)(m0 + r) * lda;
    block(rows, runs, n, pk, p0, p1, y + (size_t)m0 * ldy, ldy);
  }
}

void fb_block_avx512vnni(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0,
                         int64_t p1, uint8_t *y, size_t ldy) {
  static const int64_t zero = 0;
  Runs runs = {&zero, 1, pk->kp / 4, 0};
  block_strided(a, lda, &runs, m, pk, p0, p1, y, ldy);
}

void fb_block_avx512vnni_rows(const uint8_t *const *rows, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                              uint8_t *y, size_t ldy) {
  static const int64_t zero = 0;
  Runs runs = {&zero, 1, pk->kp / 4, 0};
  block(rows, &runs, m, pk, p0, p1, y, ldy);
}

void fb_block_avx512vnni_rows_runs(const uint8_t *const *rows, const int64_t *toff, int64_t ntaps, int64_t m,
                                   const FbPacked *pk, int64_t p0, int64_t p1, uint8_t *y, size_t ldy) {
  Runs runs = {toff, ntaps, pk->k / ntaps / 4, 0};
  block(rows, &runs, m, pk, p0, p1, y, ldy);
}
