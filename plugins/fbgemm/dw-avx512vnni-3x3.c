/* The fbgemm plugin's 3x3 depthwise convolution on AVX-512 VNNI (mobilenet's shape). The
 * general path (dw-avx512vnni.c) spent about 40% of its time (perf) building its row
 * buffer: per 16 channels and column a zero-extension, two shifts and an or per row. Here
 * 4 input rows are interleaved per dword with byte then word unpacks (8 shuffles per 64
 * channels and column, nothing else), which leaves each block of 64 channels in lane
 * order (kernels.h, fb_dw_lane_channel); the packed weights, zero point sums, biases and
 * multipliers are in the same order (dw.c), and the saturating packs of the epilogue undo
 * it, so the 64 bytes leave in channel order through one store without the vpermd of
 * gemm-avx512-store.h. The channels after the last full block (32 of mobilenet's 96, 16 of
 * its 144) go in pieces of 32 through 256-bit unpacks and of up to 16 through 128-bit
 * ones (fb_dw3_tail_channel), so no work is spent on padding channels. With stride 1 and
 * dilation 1 the buffer's rows 0-3 serve the upper output row with weights (w0, w1, w2, 0)
 * and the lower with (0, w0, w1, w2): one build per two rows. The buffer holds one block
 * of channels of one chunk of columns, so it stays in L1 from its build to the pixels that
 * read it. Padding reads a line of zx bytes (every source pointer valid, so no branches
 * in the copy); the sums less zx * sum(w) are exactly sum (x - zx) * w, then kernels.h's
 * output rule as in gemm-avx512-store.h, so the bytes are the scalar twin's (fb_dw_ref).
 * Where no value can reach 2^31 (p->byte_hi) the upper clamp is a byte minimum after the
 * packs; at stride 2 over single rows the full blocks build their columns in registers,
 * and so does a tail of exactly 32 channels, two output pixels per vector. A last piece
 * of up to 16 channels shares one epilogue between four pixels (piece16).
 * Where every bias is a small integer (p->int_bias3, the int32 biases of QDQ models) the
 * accumulators start at bias - zx * sum(w) plus a magic number that makes their bits the
 * float of the sum (kernels.h, FB_DW3_MAGIC), which drops the int32 conversion and the bias
 * add from the epilogue of the full blocks and pieces of 32.
 * Built with AVX-512 F/BW/VL/VNNI flags of its own (CMakeLists.txt); called by dw.c on the
 * avx512vnni (and AMX) path only. */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

/* vpdpbusd through asm, as in dw-avx512vnni.c: acc += a (u8) . b (s8), per dword. */
static inline __attribute__((always_inline)) __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* Input columns per chunk (64 output columns at stride 1, 32 at stride 2): a chunk's
 * input bytes (4 rows of 64 columns) and row buffer (256 bytes a column) stay in L1 while
 * every block of channels of the chunk is built and computed, where whole rows of
 * mobilenet's 112-pixel maps overflowed it between blocks at stride 2; smaller chunks
 * measured slower (the weights reloaded and 2 columns built twice per chunk). */
#define FB_DW3_CHUNK_COLS 64

/* The tail block's pieces from offset k0 on (fb_dw3_tail_channel) of one buffer column
 * dst from its rows' bytes s0..s3 at channel cb: pieces of 32 through 256-bit unpacks
 * while more than 16 channels remain, then up to 16 through 128-bit ones, which keep
 * channel order; channels past ic read 0 and meet zero weights. */
static inline __attribute__((always_inline)) void tail_column(const uint8_t *s0, const uint8_t *s1,
                                                              const uint8_t *s2, const uint8_t *s3, int64_t rem,
                                                              int64_t k0, int32_t *dst, const int nr) {
  int64_t k = k0;
  for (; rem - k > 16; k += 32) {
    const __mmask32 m = rem - k >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << (rem - k)) - 1u);
    __m256i r0 = _mm256_maskz_loadu_epi8(m, s0 + k), r1 = _mm256_maskz_loadu_epi8(m, s1 + k);
    __m256i r2 = _mm256_maskz_loadu_epi8(m, s2 + k);
    __m256i r3 = nr == 4 ? _mm256_maskz_loadu_epi8(m, s3 + k) : _mm256_setzero_si256();
    __m256i lo01 = _mm256_unpacklo_epi8(r0, r1), hi01 = _mm256_unpackhi_epi8(r0, r1);
    __m256i lo23 = _mm256_unpacklo_epi8(r2, r3), hi23 = _mm256_unpackhi_epi8(r2, r3);
    _mm256_store_si256((__m256i *)(dst + k), _mm256_unpacklo_epi16(lo01, lo23));
    _mm256_store_si256((__m256i *)(dst + k + 8), _mm256_unpackhi_epi16(lo01, lo23));
    _mm256_store_si256((__m256i *)(dst + k + 16), _mm256_unpacklo_epi16(hi01, hi23));
    _mm256_store_si256((__m256i *)(dst + k + 24), _mm256_unpackhi_epi16(hi01, hi23));
  }
  if (k < rem) {
    const __mmask16 m = (__mmask16)((1u << (rem - k)) - 1u); /* 1..16 channels */
    __m128i r0 = _mm_maskz_loadu_epi8(m, s0 + k), r1 = _mm_maskz_loadu_epi8(m, s1 + k);
    __m128i r2 = _mm_maskz_loadu_epi8(m, s2 + k);
    __m128i r3 = nr == 4 ? _mm_maskz_loadu_epi8(m, s3 + k) : _mm_setzero_si128();
    __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
    __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
    _mm_store_si128((__m128i *)(dst + k), _mm_unpacklo_epi16(lo01, lo23));
    _mm_store_si128((__m128i *)(dst + k + 4), _mm_unpackhi_epi16(lo01, lo23));
    _mm_store_si128((__m128i *)(dst + k + 8), _mm_unpacklo_epi16(hi01, hi23));
    _mm_store_si128((__m128i *)(dst + k + 12), _mm_unpackhi_epi16(hi01, hi23));
  }
}

/* 32 bytes at a in the lower half, 32 at b in the upper. */
static inline __attribute__((always_inline)) __m512i load2x32(const uint8_t *a, const uint8_t *b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                            _mm256_loadu_si256((const __m256i *)b), 1);
}

/* 32 channels of one row at two adjacent columns (bytes s and s + st, st = 0 for the zx
 * line) in one vector: one load where they are contiguous (ic 32, or the zx line). */
static inline __attribute__((always_inline)) __m512i load_pair32(const uint8_t *s, int64_t st, int64_t ic) {
  if (ic == 32 || st == 0)
    return _mm512_loadu_si512((const void *)s);
  return load2x32(s, s + st);
}

/* The dword interleave of 4 rows' bytes r0..r3 (r3 zero for 3 rows), per 128-bit lane:
 * q[k] holds dword vector k of the lane-ordered layout, each dword one channel's bytes
 * of the 4 rows. */
static inline __attribute__((always_inline)) void interleave4(__m512i r0, __m512i r1, __m512i r2, __m512i r3,
                                                              __m512i q[4]) {
  __m512i lo01 = _mm512_unpacklo_epi8(r0, r1), hi01 = _mm512_unpackhi_epi8(r0, r1);
  __m512i lo23 = _mm512_unpacklo_epi8(r2, r3), hi23 = _mm512_unpackhi_epi8(r2, r3);
  q[0] = _mm512_unpacklo_epi16(lo01, lo23), q[1] = _mm512_unpackhi_epi16(lo01, lo23);
  q[2] = _mm512_unpacklo_epi16(hi01, hi23), q[3] = _mm512_unpackhi_epi16(hi01, hi23);
}

/* The first piece of 32 channels of the tail block at two adjacent columns at once
 * (dst and dst + 64), through 512-bit unpacks: per 128-bit lane they do what tail_column's
 * 256-bit ones do, so the lower half of each result is the first column's vector and
 * the upper half the second's; half the shuffles of two tail_column calls (mobilenet's
 * 112x112x32 layer and the 32-channel tail of its 112x112x96 one). */
static inline __attribute__((always_inline)) void tail_pair32(const uint8_t *const s[4], const int64_t st[4],
                                                              int64_t ic, int32_t *dst, const int nr) {
  __m512i r0 = load_pair32(s[0], st[0], ic), r1 = load_pair32(s[1], st[1], ic);
  __m512i r2 = load_pair32(s[2], st[2], ic);
  __m512i r3 = nr == 4 ? load_pair32(s[3], st[3], ic) : _mm512_setzero_si512();
  __m512i q[4];
  interleave4(r0, r1, r2, r3, q);
  _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
    _mm256_store_si256((__m256i *)(dst + 8 * k), _mm512_castsi512_si256(q[k]));
    _mm256_store_si256((__m256i *)(dst + 64 + 8 * k), _mm512_extracti64x4_epi64(q[k], 1));
  }
}

/* One buffer column dst of a full block of 64 channels from its rows' bytes s0..s3. */
static inline __attribute__((always_inline)) void full_column(const uint8_t *s0, const uint8_t *s1,
                                                              const uint8_t *s2, const uint8_t *s3, int32_t *dst,
                                                              const int nr) {
  __m512i r0 = _mm512_loadu_si512((const void *)s0), r1 = _mm512_loadu_si512((const void *)s1);
  __m512i r2 = _mm512_loadu_si512((const void *)s2);
  __m512i r3 = nr == 4 ? _mm512_loadu_si512((const void *)s3) : _mm512_setzero_si512();
  __m512i q[4];
  interleave4(r0, r1, r2, r3, q);
  _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) _mm512_store_si512((void *)(dst + 16 * k), q[k]);
}

/* build_block for a full block (full 1) or the tail block (0): the padding columns from
 * the zx line, the columns inside the image by stepping 4 row pointers (a padding row's
 * stays on the zx line), free of per-column bounds and address arithmetic, which perf
 * put at about a third of 112x112x32's time (dw5). */
static inline __attribute__((always_inline)) void build_cols(const FbConv *c, const uint8_t *const row[4],
                                                             int64_t cb, int64_t j0, int64_t j1, int32_t *v,
                                                             const uint8_t *zxl, const int nr, const int full) {
  const int64_t ic = c->ic, pl = c->pl, rem = ic - cb;
  const uint8_t *z = zxl + cb;
  /* the tail's first piece of 32 two columns at a time while both are inside */
  const int pairs = !full && rem >= 32;
  const int64_t st[4] = {row[0] ? ic : 0, row[1] ? ic : 0, row[2] ? ic : 0, row[3] ? ic : 0};
  int64_t ja = pl > j0 ? pl : j0, jb = pl + c->iw < j1 ? pl + c->iw : j1;
  ja = ja < j1 ? ja : j1, jb = jb > ja ? jb : ja;
  int64_t j = j0;
  for (; j < ja; j++) { /* left of the image */
    if (full)
      full_column(z, z, z, z, v + (j - j0) * 64, nr);
    else
      tail_column(z, z, z, z, rem, 0, v + (j - j0) * 64, nr);
  }
  const uint8_t *s[4];
  for (int t = 0; t < 4; t++)
    s[t] = (row[t] ? row[t] + (ja - pl) * ic : zxl) + cb;
  for (; j < jb; j++) {
    int32_t *dst = v + (j - j0) * 64;
    if (full) {
      full_column(s[0], s[1], s[2], s[3], dst, nr);
    } else if (pairs && j + 1 < jb) {
      tail_pair32(s, st, ic, dst, nr);
      tail_column(s[0], s[1], s[2], s[3], rem, 32, dst, nr);
      tail_column(s[0] + st[0], s[1] + st[1], s[2] + st[2], s[3] + st[3], rem, 32, dst + 64, nr);
      j++;
      for (int t = 0; t < 4; t++)
        s[t] += st[t];
    } else {
      tail_column(s[0], s[1], s[2], s[3], rem, 0, dst, nr);
    }
    for (int t = 0; t < 4; t++)
      s[t] += st[t];
  }
  for (; j < j1; j++) { /* right of the image */
    if (full)
      full_column(z, z, z, z, v + (j - j0) * 64, nr);
    else
      tail_column(z, z, z, z, rem, 0, v + (j - j0) * 64, nr);
  }
}

/* The row buffer of one block of channels [cb, cb + 64) (fewer in the tail block): v[j * 64 +
 * position], input column j - pl, dword byte t from row[t] (the zx line for a padding
 * row or column; byte 3 is 0 when nr is 3, for a single output row), input columns
 * [j0, j1) - pl at v[(j - j0) * 64 + position]. One block and chunk at a time. */
static inline __attribute__((always_inline)) void build_block(const FbConv *c, const uint8_t *const row[4], int64_t cb,
                                                              int64_t j0, int64_t j1, int32_t *v, const uint8_t *zxl,
                                                              const int nr) {
  if (cb + 64 <= c->ic)
    build_cols(c, row, cb, j0, j1, v, zxl, nr, 1);
  else
    build_cols(c, row, cb, j0, j1, v, zxl, nr, 0);
}

/* The epilogues (ep): FB_DW3_EP_FLOAT the upper clamp in float; FB_DW3_EP_BYTE
 * (p->byte_hi) the upper clamp as a byte minimum after the packs; FB_DW3_EP_INT
 * (p->int_bias3, which implies byte_hi) that too, with the accumulators started at
 * p->nzb3, so that their bits are the float 1.5 * 2^23 + acc + bias (kernels.h,
 * FB_DW3_MAGIC): one float subtraction gives (float)acc + bias exactly, in place of the
 * int32 conversion and the bias add. */
enum { FB_DW3_EP_FLOAT, FB_DW3_EP_BYTE, FB_DW3_EP_INT };

/* The accumulators' start for 16 lane-ordered channels at position pos. */
static inline __attribute__((always_inline)) __m512i acc_start(const FbDwPacked *p, int64_t pos, const int ep) {
  if (ep == FB_DW3_EP_INT)
    return _mm512_load_si512((const void *)(p->nzb3 + pos));
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_load_si512((const void *)(p->zsum3 + pos)));
}

/* kernels.h's output rule up to vcvtps2dq for one vector of 16 channels. */
static inline __attribute__((always_inline)) __m512i requant16v(__m512i acc, __m512 bias, __m512 mult, __m512 hi,
                                                                const int ep) {
  __m512 f;
  if (ep == FB_DW3_EP_INT)
    f = _mm512_sub_ps(_mm512_castsi512_ps(acc), _mm512_set1_ps(FB_DW3_MAGIC_F));
  else
    f = _mm512_add_ps(_mm512_cvtepi32_ps(acc), bias);
  f = _mm512_mul_ps(f, mult);
  return _mm512_cvtps_epi32(ep == FB_DW3_EP_FLOAT ? _mm512_min_ps(f, hi) : f);
}

/* requant16v with the bias and multiplier at bias and mult (the bias not read for
 * FB_DW3_EP_INT). */
static inline __attribute__((always_inline)) __m512i requant16(__m512i acc, const float *bias, const float *mult,
                                                               __m512 hi, const int ep) {
  return requant16v(acc, ep == FB_DW3_EP_INT ? _mm512_setzero_ps() : _mm512_load_ps(bias), _mm512_load_ps(mult), hi,
                    ep);
}

/* kernels.h's output rule for one lane-ordered block of 64 channels, as
 * fb_store64_avx512 (gemm-avx512-store.h) applies it: the upper bound in float,
 * vcvtps2dq rounding half to even, the saturating packs and the byte maximum with lo
 * taking the lower one; the packs' lane interleave puts lane-ordered channels back in
 * channel order. With ep not FB_DW3_EP_FLOAT (p->byte_hi: no value reaches 2^31, so the
 * rounding is exact) the upper bound is a byte minimum after the packs instead of 4 float
 * minimums: the rounding and the saturating packs and add are non-decreasing and hi is
 * an integer, so clamping before or after them gives the same bytes. */
static inline __attribute__((always_inline)) void store64(const __m512i acc[4], const float *bias,
                                                          const float *mult, __m512 hi, __m512i zo16, __m512i lo8,
                                                          __m512i hi8, uint8_t *dst, const int ep) {
  const int bh = ep != FB_DW3_EP_FLOAT;
  __m512i q[4];
  _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) q[u] = requant16(acc[u], bias + 16 * u, mult + 16 * u, hi, ep);
  __m512i w01 = _mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), zo16);
  __m512i w23 = _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), zo16);
  __m512i u8 = _mm512_max_epu8(_mm512_packus_epi16(w01, w23), lo8);
  _mm512_storeu_si512((void *)dst, bh ? _mm512_min_epu8(u8, hi8) : u8);
}

/* A full block of 64 channels of one output row with the stride and dilation known at
 * compile time (sw_c, dw_c > 0) or not (0), so that the common ones address the row
 * buffer with constant offsets: the 12 weight vectors stay in registers, and each pixel
 * is 12 independent vpdpbusd and one store. */
static inline __attribute__((always_inline)) void full_block(const FbConv *c, const FbDwPacked *p, const int32_t *v,
                                                             const int8_t *w3, int64_t cb, int64_t ox0, int64_t ox1,
                                                             uint8_t *orow, const int sw_c, const int dw_c,
                                                             const int ep) {
  const int64_t oc = c->oc, cq = p->cq, sw = sw_c ? sw_c : c->sw, dw = dw_c ? dw_c : c->dw;
  const __m512 hi = _mm512_set1_ps(p->hi);
  const __m512i zo16 = _mm512_set1_epi16((short)p->zo);
  const __m512i lo8 = _mm512_set1_epi8((char)(uint8_t)((int32_t)p->lo + p->zo)); /* in [0, 255] */
  const __m512i hi8 = _mm512_set1_epi8((char)p->hi8);
  __m512i wv[4][3], nzs[4];
  _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
    nzs[u] = acc_start(p, cb + 16 * u, ep);
    _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
      wv[u][kx] = _mm512_load_si512((const void *)(w3 + (kx * cq + cb + 16 * u) * 4));
  }
  const float *bias = p->bias3 + cb, *mult = p->mult3 + cb;
  const int32_t *vc = v;
  uint8_t *out = orow + ox0 * oc + cb;
  for (int64_t ox = ox0; ox < ox1; ox++, vc += sw * 64, out += oc) {
    __m512i acc[4];
    _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
      acc[u] = nzs[u];
      _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
        acc[u] = dpbusd(acc[u], _mm512_load_si512((const void *)(vc + kx * dw * 64 + 16 * u)), wv[u][kx]);
    }
    store64(acc, bias, mult, hi, zo16, lo8, hi8, out, ep);
  }
}

/* Two vectors of a tail piece of 32 channels (lane order of 256-bit unpacks) of one
 * pixel, requantized up to vcvtps2dq as store64 does. */
static inline __attribute__((always_inline)) void piece32_pixel(const int32_t *vc, int64_t dw, const __m512i wv[2][3],
                                                                const __m512i nzs[2], const float *bias,
                                                                const float *mult, __m512 hi, __m512i q[2],
                                                                const int ep) {
  _Pragma("GCC unroll 2") for (int u = 0; u < 2; u++) {
    __m512i acc = nzs[u];
    _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
      acc = dpbusd(acc, _mm512_load_si512((const void *)(vc + kx * dw * 64 + 16 * u)), wv[u][kx]);
    q[u] = requant16(acc, bias + 16 * u, mult + 16 * u, hi, ep);
  }
}

/* A tail piece of 32 channels [ck, ck + 32) (fewer past oc) of one output row, v at the
 * piece's first column (the row buffer at output column 0), stride and dilation as in
 * full_block. Two pixels share one epilogue: the packs of pixel A's vectors and of B's
 * leave A's channels in dwords 0, 8, 1, 9, 4, 12, 5, 13 (4 channels each, in order) and
 * B's in 2, 10, 3, 11, 6, 14, 7, 15, which one vpermd puts back. */
static inline __attribute__((always_inline)) void piece32(const FbConv *c, const FbDwPacked *p, const int32_t *v,
                                                          const int8_t *w3, int64_t ck, int64_t ox0, int64_t ox1,
                                                          uint8_t *orow, const int sw_c, const int dw_c, const int ep) {
  const int bh = ep != FB_DW3_EP_FLOAT;
  const int64_t oc = c->oc, cq = p->cq, sw = sw_c ? sw_c : c->sw, dw = dw_c ? dw_c : c->dw;
  const __m512 hi = _mm512_set1_ps(p->hi);
  const __m512i zo16 = _mm512_set1_epi16((short)p->zo);
  const __m512i lo8 = _mm512_set1_epi8((char)(uint8_t)((int32_t)p->lo + p->zo));
  const __m512i hi8 = _mm512_set1_epi8((char)p->hi8);
  const __m512i perm = _mm512_setr_epi32(0, 8, 1, 9, 4, 12, 5, 13, 2, 10, 3, 11, 6, 14, 7, 15);
  const __mmask32 mask = oc - ck >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << (oc - ck)) - 1u);
  const int adjacent = oc == 32; /* B's 32 bytes follow A's */
  __m512i wv[2][3], nzs[2];
  _Pragma("GCC unroll 2") for (int u = 0; u < 2; u++) {
    nzs[u] = acc_start(p, ck + 16 * u, ep);
    _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
      wv[u][kx] = _mm512_load_si512((const void *)(w3 + (kx * cq + ck + 16 * u) * 4));
  }
  const float *bias = p->bias3 + ck, *mult = p->mult3 + ck;
  int64_t ox = ox0;
  for (; ox + 2 <= ox1; ox += 2) {
    __m512i qa[2], qb[2];
    piece32_pixel(v + ox * sw * 64, dw, wv, nzs, bias, mult, hi, qa, ep);
    piece32_pixel(v + (ox + 1) * sw * 64, dw, wv, nzs, bias, mult, hi, qb, ep);
    __m512i wa = _mm512_adds_epi16(_mm512_packs_epi32(qa[0], qa[1]), zo16);
    __m512i wb = _mm512_adds_epi16(_mm512_packs_epi32(qb[0], qb[1]), zo16);
    __m512i u8 = _mm512_max_epu8(_mm512_packus_epi16(wa, wb), lo8);
    u8 = _mm512_permutexvar_epi32(perm, bh ? _mm512_min_epu8(u8, hi8) : u8);
    uint8_t *out = orow + ox * oc + ck;
    if (adjacent) {
      _mm512_storeu_si512((void *)out, u8);
    } else {
      _mm256_mask_storeu_epi8(out, mask, _mm512_castsi512_si256(u8));
      _mm256_mask_storeu_epi8(out + oc, mask, _mm512_extracti64x4_epi64(u8, 1));
    }
  }
  if (ox < ox1) {
    __m512i qa[2];
    piece32_pixel(v + ox * sw * 64, dw, wv, nzs, bias, mult, hi, qa, ep);
    __m512i wa = _mm512_adds_epi16(_mm512_packs_epi32(qa[0], qa[1]), zo16);
    __m512i u8 = _mm512_max_epu8(_mm512_packus_epi16(wa, wa), lo8);
    u8 = _mm512_permutexvar_epi32(perm, bh ? _mm512_min_epu8(u8, hi8) : u8);
    _mm256_mask_storeu_epi8(orow + ox * oc + ck, mask, _mm512_castsi512_si256(u8));
  }
}

/* The tail block's last piece of up to 16 channels [ck, oc) (channel order) of one output
 * row, v at the piece's first column, stride and dilation as in full_block. Four pixels
 * share one epilogue, store64's: the packs of pixels 0-3's vectors leave pixel s's
 * channels 4L..4L+3 in dword 4L + s, which one vpermd puts in pixel order, and each
 * pixel leaves through a masked 128-bit store; where it went one pixel at a time (its
 * 16 outputs through as many float operations as 64 of a full block's) the 16-channel
 * tail of mobilenet's 144-channel layers took about a fifth of their time. The pixels
 * after the last four go one at a time with the float clamps and vpmovdb. */
static inline __attribute__((always_inline)) void piece16(const FbConv *c, const FbDwPacked *p, const int32_t *v,
                                                          const int8_t *w3, int64_t ck, int64_t ox0, int64_t ox1,
                                                          uint8_t *orow, const int sw_c, const int dw_c, const int ep) {
  const int bh = ep != FB_DW3_EP_FLOAT;
  const int64_t oc = c->oc, cq = p->cq, sw = sw_c ? sw_c : c->sw, dw = dw_c ? dw_c : c->dw;
  const __mmask16 mask = (__mmask16)((1u << (oc - ck)) - 1u);
  const __m512 hi = _mm512_set1_ps(p->hi);
  const __m512i zo16 = _mm512_set1_epi16((short)p->zo);
  const __m512i lo8 = _mm512_set1_epi8((char)(uint8_t)((int32_t)p->lo + p->zo));
  const __m512i hi8 = _mm512_set1_epi8((char)p->hi8);
  const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i nzs = acc_start(p, ck, ep);
  const float *bias = p->bias3 + ck, *mult = p->mult3 + ck;
  __m512i wv[3];
  _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
    wv[kx] = _mm512_load_si512((const void *)(w3 + (kx * cq + ck) * 4));
  int64_t ox = ox0;
  for (; ox + 4 <= ox1; ox += 4) {
    __m512i q[4];
    _Pragma("GCC unroll 4") for (int s = 0; s < 4; s++) {
      const int32_t *vc = v + (ox + s) * sw * 64;
      __m512i acc = nzs;
      _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
        acc = dpbusd(acc, _mm512_load_si512((const void *)(vc + kx * dw * 64)), wv[kx]);
      q[s] = requant16(acc, bias, mult, hi, ep);
    }
    __m512i w01 = _mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), zo16);
    __m512i w23 = _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), zo16);
    __m512i u8 = _mm512_max_epu8(_mm512_packus_epi16(w01, w23), lo8);
    u8 = _mm512_permutexvar_epi32(perm, bh ? _mm512_min_epu8(u8, hi8) : u8);
    uint8_t *out = orow + ox * oc + ck;
    _mm_mask_storeu_epi8(out, mask, _mm512_castsi512_si128(u8));
    _mm_mask_storeu_epi8(out + oc, mask, _mm512_extracti32x4_epi32(u8, 1));
    _mm_mask_storeu_epi8(out + 2 * oc, mask, _mm512_extracti32x4_epi32(u8, 2));
    _mm_mask_storeu_epi8(out + 3 * oc, mask, _mm512_extracti32x4_epi32(u8, 3));
  }
  if (ox < ox1) {
    const __m512 lo = _mm512_set1_ps(p->lo);
    const __m512i zo = _mm512_set1_epi32(p->zo);
    const __m512i nzs0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_load_si512((const void *)(p->zsum3 + ck)));
    const __m512 bv = _mm512_load_ps(bias), mv = _mm512_load_ps(mult);
    for (; ox < ox1; ox++) {
      const int32_t *vc = v + ox * sw * 64;
      __m512i acc = nzs0;
      _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
        acc = dpbusd(acc, _mm512_load_si512((const void *)(vc + kx * dw * 64)), wv[kx]);
      __m512 f = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(acc), bv), mv);
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      _mm_mask_storeu_epi8(orow + ox * oc + ck, mask, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zo)));
    }
  }
}

/* Block cb of one output row from its row buffer with weight set w3 (p->w3[0] or
 * p->w3[1]): a full block (full_block), or the tail block's pieces. */
static void compute_block(const FbConv *c, const FbDwPacked *p, const int32_t *v, const int8_t *w3, int64_t cb,
                          int64_t ox0, int64_t ox1, uint8_t *orow) {
  const int64_t oc = c->oc, sw = c->sw, dw = c->dw;
  v -= ox0 * sw * 64; /* the buffer starts at output column ox0's first input column */
  if (cb + 64 <= oc) {
    if (sw == 1 && dw == 1 && p->int_bias3)
      full_block(c, p, v + ox0 * 64, w3, cb, ox0, ox1, orow, 1, 1, FB_DW3_EP_INT);
    else if (sw == 1 && dw == 1 && p->byte_hi)
      full_block(c, p, v + ox0 * 64, w3, cb, ox0, ox1, orow, 1, 1, FB_DW3_EP_BYTE);
    else if (sw == 1 && dw == 1)
      full_block(c, p, v + ox0 * 64, w3, cb, ox0, ox1, orow, 1, 1, FB_DW3_EP_FLOAT);
    else if (sw == 2 && dw == 1)
      full_block(c, p, v + ox0 * 128, w3, cb, ox0, ox1, orow, 2, 1, FB_DW3_EP_FLOAT);
    else
      full_block(c, p, v + ox0 * sw * 64, w3, cb, ox0, ox1, orow, 0, 0, FB_DW3_EP_FLOAT);
    return;
  }
  int64_t k = 0;
  for (; oc - cb - k > 16; k += 32) {
    if (sw == 1 && dw == 1 && p->int_bias3)
      piece32(c, p, v + k, w3, cb + k, ox0, ox1, orow, 1, 1, FB_DW3_EP_INT);
    else if (sw == 1 && dw == 1 && p->byte_hi)
      piece32(c, p, v + k, w3, cb + k, ox0, ox1, orow, 1, 1, FB_DW3_EP_BYTE);
    else if (sw == 1 && dw == 1)
      piece32(c, p, v + k, w3, cb + k, ox0, ox1, orow, 1, 1, FB_DW3_EP_FLOAT);
    else if (sw == 2 && dw == 1 && p->int_bias3)
      piece32(c, p, v + k, w3, cb + k, ox0, ox1, orow, 2, 1, FB_DW3_EP_INT);
    else if (sw == 2 && dw == 1 && p->byte_hi)
      piece32(c, p, v + k, w3, cb + k, ox0, ox1, orow, 2, 1, FB_DW3_EP_BYTE);
    else if (sw == 2 && dw == 1)
      piece32(c, p, v + k, w3, cb + k, ox0, ox1, orow, 2, 1, FB_DW3_EP_FLOAT);
    else
      piece32(c, p, v + k, w3, cb + k, ox0, ox1, orow, 0, 0, FB_DW3_EP_FLOAT);
  }
  if (cb + k < oc) { /* up to 16 in channel order */
    if (sw == 1 && dw == 1 && p->int_bias3)
      piece16(c, p, v + k, w3, cb + k, ox0, ox1, orow, 1, 1, FB_DW3_EP_INT);
    else if (sw == 1 && dw == 1 && p->byte_hi)
      piece16(c, p, v + k, w3, cb + k, ox0, ox1, orow, 1, 1, FB_DW3_EP_BYTE);
    else if (sw == 2 && dw == 1 && p->int_bias3)
      piece16(c, p, v + k, w3, cb + k, ox0, ox1, orow, 2, 1, FB_DW3_EP_INT);
    else if (sw == 2 && dw == 1 && p->byte_hi)
      piece16(c, p, v + k, w3, cb + k, ox0, ox1, orow, 2, 1, FB_DW3_EP_BYTE);
    else
      piece16(c, p, v + k, w3, cb + k, ox0, ox1, orow, 0, 0, FB_DW3_EP_FLOAT);
  }
}

/* One column of a full block at stride 2 (nr 3) in registers from its 3 rows' 64 bytes:
 * the 4 lane-ordered vectors that build_block stores for a buffer column. */
static inline __attribute__((always_inline)) void interleave3(const uint8_t *s0, const uint8_t *s1,
                                                              const uint8_t *s2, __m512i q[4]) {
  __m512i r0 = _mm512_loadu_si512((const void *)s0), r1 = _mm512_loadu_si512((const void *)s1);
  __m512i r2 = _mm512_loadu_si512((const void *)s2);
  interleave4(r0, r1, r2, _mm512_setzero_si512(), q);
}

/* Buffer column j (input column j - pl, the zx line outside the image) of interleave3. */
static inline __attribute__((always_inline)) void column3(const FbConv *c, const uint8_t *const row[4], int64_t cb,
                                                          int64_t j, const uint8_t *zxl, __m512i q[4]) {
  const int64_t ix = j - c->pl, ic = c->ic;
  const int inside = ix >= 0 && ix < c->iw;
  interleave3((inside && row[0] ? row[0] + ix * ic : zxl) + cb, (inside && row[1] ? row[1] + ix * ic : zxl) + cb,
              (inside && row[2] ? row[2] + ix * ic : zxl) + cb, q);
}

/* One pixel of stream_s2_block from its columns a (kept from the pixel before), b and n;
 * a becomes n. */
static inline __attribute__((always_inline)) void s2_pixel(const FbDwPacked *p, int64_t cb, __m512i a[4],
                                                           const __m512i b[4], const __m512i n[4], __m512 hi,
                                                           __m512i zo16, __m512i lo8, __m512i hi8, uint8_t *out,
                                                           const int ep) {
  const int64_t cq = p->cq;
  const int8_t *w3 = p->w3[0];
  __m512i acc[4];
  _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
    acc[u] = acc_start(p, cb + 16 * u, ep);
    acc[u] = dpbusd(acc[u], a[u], _mm512_load_si512((const void *)(w3 + (cb + 16 * u) * 4)));
    acc[u] = dpbusd(acc[u], b[u], _mm512_load_si512((const void *)(w3 + (cq + cb + 16 * u) * 4)));
    acc[u] = dpbusd(acc[u], n[u], _mm512_load_si512((const void *)(w3 + (2 * cq + cb + 16 * u) * 4)));
    a[u] = n[u];
  }
  store64(acc, p->bias3 + cb, p->mult3 + cb, hi, zo16, lo8, hi8, out, ep);
}

/* A full block of one output row at stride 2, dilation 1, without the row buffer: each
 * pixel builds its columns 2ox + 1 and 2ox + 2 in registers and keeps 2ox + 2 for the
 * next pixel. The buffered path stored 8 and reloaded 12 vectors per pixel here, and
 * its stride-2 time went to that build (perf, dw3); the vectors and their lane order
 * are the buffer's, so the sums and bytes are full_block's. The pixels whose columns
 * are all inside the image step 3 row pointers (a padding row's stays on the zx line),
 * free of column3's per-column bounds and address arithmetic, which perf showed next to
 * the vector work (dw5). */
static inline __attribute__((always_inline)) void stream_s2_block(const FbConv *c, const FbDwPacked *p,
                                                                  const uint8_t *const row[4], int64_t cb, int64_t ox0,
                                                                  int64_t ox1, uint8_t *orow, const uint8_t *zxl,
                                                                  const int ep) {
  const int64_t oc = c->oc, ic = c->ic, pl = c->pl, iw = c->iw;
  const __m512 hi = _mm512_set1_ps(p->hi);
  const __m512i zo16 = _mm512_set1_epi16((short)p->zo);
  const __m512i lo8 = _mm512_set1_epi8((char)(uint8_t)((int32_t)p->lo + p->zo)); /* in [0, 255] */
  const __m512i hi8 = _mm512_set1_epi8((char)p->hi8);
  __m512i a[4], b[4], n[4];
  column3(c, row, cb, 2 * ox0, zxl, a);
  int64_t ox = ox0;
  /* pixels before the first whose columns 2ox + 1 and 2ox + 2 are inside (2ox + 1 >= pl) */
  for (; ox < ox1 && 2 * ox + 1 < pl; ox++) {
    column3(c, row, cb, 2 * ox + 1, zxl, b);
    column3(c, row, cb, 2 * ox + 2, zxl, n);
    s2_pixel(p, cb, a, b, n, hi, zo16, lo8, hi8, orow + ox * oc + cb, ep);
  }
  const int64_t st0 = row[0] ? ic : 0, st1 = row[1] ? ic : 0, st2 = row[2] ? ic : 0;
  const int64_t ix = 2 * ox + 1 - pl; /* >= 0 */
  const uint8_t *s0 = (row[0] ? row[0] + ix * ic : zxl) + cb, *s1 = (row[1] ? row[1] + ix * ic : zxl) + cb;
  const uint8_t *s2 = (row[2] ? row[2] + ix * ic : zxl) + cb;
  for (; ox < ox1 && 2 * ox + 2 - pl < iw; ox++, s0 += 2 * st0, s1 += 2 * st1, s2 += 2 * st2) {
    interleave3(s0, s1, s2, b);
    interleave3(s0 + st0, s1 + st1, s2 + st2, n);
    s2_pixel(p, cb, a, b, n, hi, zo16, lo8, hi8, orow + ox * oc + cb, ep);
  }
  for (; ox < ox1; ox++) { /* columns past the image's right edge */
    column3(c, row, cb, 2 * ox + 1, zxl, b);
    column3(c, row, cb, 2 * ox + 2, zxl, n);
    s2_pixel(p, cb, a, b, n, hi, zo16, lo8, hi8, orow + ox * oc + cb, ep);
  }
}

/* 32 channels of 3 rows at buffer columns j and j + 2 (two output pixels' same tap at
 * stride 2) interleaved in registers: q[k] holds dword vector k of tail_column's 256-bit
 * lane order, column j's in its lower half and column j + 2's in its upper half. s[t]:
 * row t's bytes at column j (the zx line: st[t] = 0), st[t]: bytes from column to column. */
static inline __attribute__((always_inline)) void pair32_s2(const uint8_t *const s[3], const int64_t st[3],
                                                            __m512i q[4]) {
  interleave4(load2x32(s[0], s[0] + 2 * st[0]), load2x32(s[1], s[1] + 2 * st[1]),
              load2x32(s[2], s[2] + 2 * st[2]), _mm512_setzero_si512(), q);
}

/* pair32_s2 at buffer column j of an image row or the zx line, each column checked. */
static inline __attribute__((always_inline)) void pair32_s2_edge(const FbConv *c, const uint8_t *const row[4],
                                                                 int64_t ck, int64_t j, const uint8_t *zxl,
                                                                 __m512i q[4]) {
  const int64_t ic = c->ic, ia = j - c->pl, ib = j + 2 - c->pl;
  __m512i r[3];
  _Pragma("GCC unroll 3") for (int t = 0; t < 3; t++) {
    const uint8_t *a = (row[t] && ia >= 0 && ia < c->iw ? row[t] + ia * ic : zxl) + ck;
    const uint8_t *b = (row[t] && ib >= 0 && ib < c->iw ? row[t] + ib * ic : zxl) + ck;
    r[t] = load2x32(a, b);
  }
  interleave4(r[0], r[1], r[2], _mm512_setzero_si512(), q);
}

/* A 256-bit vector of 8 lane-ordered dwords at v, in both halves. */
static inline __attribute__((always_inline)) __m512i both_halves(const void *v) {
  return _mm512_broadcast_i64x4(_mm256_load_si256((const __m256i *)v));
}

/* A tail block of exactly 32 channels [ck, ck + 32) of one output row at stride 2,
 * dilation 1, without the row buffer, two output pixels at a time: each 512-bit vector
 * holds one tap's columns of both pixels (pair32_s2), so the weights, accumulator starts,
 * biases and multipliers are the 256-bit lane-ordered vectors of the tail piece in both
 * halves, and store64's packs leave pixel A's 32 bytes in channel order in the lower half
 * and B's in the upper, without piece32's vpermd. Per two pixels the columns 2ox + 1 ..
 * 2ox + 4 are built; tap 0's pair (2ox, 2ox + 2) is one 128-bit lane shuffle of the pair
 * before (2ox - 2, 2ox) and this one's (2ox + 2, 2ox + 4), where the buffered path built,
 * stored and reloaded every column (mobilenet's 112x112x96 /2 layer). The sums are
 * piece32's, so are the bytes. */
static inline __attribute__((always_inline)) void stream_s2_piece32(const FbConv *c, const FbDwPacked *p,
                                                                    const uint8_t *const row[4], int64_t ck,
                                                                    int64_t ox0, int64_t ox1, uint8_t *orow,
                                                                    const uint8_t *zxl, const int ep) {
  const int bh = ep != FB_DW3_EP_FLOAT;
  const int64_t oc = c->oc, ic = c->ic, cq = p->cq, pl = c->pl, iw = c->iw;
  const int8_t *w3 = p->w3[0];
  const __m512 hi = _mm512_set1_ps(p->hi);
  const __m512i zo16 = _mm512_set1_epi16((short)p->zo);
  const __m512i lo8 = _mm512_set1_epi8((char)(uint8_t)((int32_t)p->lo + p->zo));
  const __m512i hi8 = _mm512_set1_epi8((char)p->hi8);
  __m512i wv[4][3], nzs[4];
  __m512 bias[4], mult[4];
  _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
    const int64_t pos = ck + 8 * k;
    nzs[k] = ep == FB_DW3_EP_INT ? both_halves(p->nzb3 + pos)
                                 : _mm512_sub_epi32(_mm512_setzero_si512(), both_halves(p->zsum3 + pos));
    bias[k] = _mm512_castsi512_ps(both_halves(p->bias3 + pos));
    mult[k] = _mm512_castsi512_ps(both_halves(p->mult3 + pos));
    _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++) wv[k][kx] = both_halves(w3 + (kx * cq + pos) * 4);
  }
  const int64_t st[3] = {row[0] ? ic : 0, row[1] ? ic : 0, row[2] ? ic : 0};
  __m512i prev[4], o[4], e1[4];
  pair32_s2_edge(c, row, ck, 2 * ox0 - 2, zxl, prev); /* its upper half: column 2ox0 */
  for (int64_t ox = ox0; ox < ox1; ox += 2) {
    const int64_t ix = 2 * ox + 1 - pl; /* pixel A's tap 1; B's tap 2 is ix + 3 */
    if (ix >= 0 && ix + 3 < iw) {
      const uint8_t *s[3];
      _Pragma("GCC unroll 3") for (int t = 0; t < 3; t++) s[t] = (row[t] ? row[t] + ix * ic : zxl) + ck;
      pair32_s2(s, st, o);
      _Pragma("GCC unroll 3") for (int t = 0; t < 3; t++) s[t] += st[t];
      pair32_s2(s, st, e1);
    } else {
      pair32_s2_edge(c, row, ck, 2 * ox + 1, zxl, o);
      pair32_s2_edge(c, row, ck, 2 * ox + 2, zxl, e1);
    }
    __m512i q[4];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
      /* tap 0: columns 2ox and 2ox + 2, the upper half of the pair before and the lower of e1 */
      __m512i e0 = _mm512_shuffle_i64x2(prev[k], e1[k], _MM_SHUFFLE(1, 0, 3, 2));
      __m512i acc = dpbusd(dpbusd(dpbusd(nzs[k], e0, wv[k][0]), o[k], wv[k][1]), e1[k], wv[k][2]);
      q[k] = requant16v(acc, bias[k], mult[k], hi, ep);
      prev[k] = e1[k];
    }
    __m512i w01 = _mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), zo16);
    __m512i w23 = _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), zo16);
    __m512i u8 = _mm512_max_epu8(_mm512_packus_epi16(w01, w23), lo8);
    u8 = bh ? _mm512_min_epu8(u8, hi8) : u8;
    uint8_t *out = orow + ox * oc + ck;
    if (ox + 1 < ox1 && oc == 32) {
      _mm512_storeu_si512((void *)out, u8);
    } else {
      _mm256_storeu_si256((__m256i *)out, _mm512_castsi512_si256(u8));
      if (ox + 1 < ox1)
        _mm256_storeu_si256((__m256i *)(out + oc), _mm512_extracti64x4_epi64(u8, 1));
    }
  }
}

void fb_dw3_rows_avx512vnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy0,
                            int64_t oy1, int64_t c0, int64_t c1, uint8_t *y, void *ws) {
  int32_t *v = ws;
  uint8_t *zxl = (uint8_t *)ws + fb_dw_row_bytes(c, p);
  memset(zxl, p->zx, (size_t)(c->ic + 63) / 64 * 64); /* whole vectors of it: load_pair32 */
  const int64_t ih = c->ih, iw = c->iw, ic = c->ic;
  const uint8_t *img = x + b * ih * iw * ic;
  const int pairs = c->sh == 1 && c->dh == 1;
  const int64_t chunk = c->sw < FB_DW3_CHUNK_COLS ? FB_DW3_CHUNK_COLS / c->sw : 1;
  const int64_t row_bytes = c->ow * c->oc;
  uint8_t *yb = y + b * c->oh * row_bytes;
  /* chunks outermost: down a band the input rows that consecutive output rows share
   * (row 2oy + 1 at stride 2) are still in L1 */
  for (int64_t ox0 = 0; ox0 < c->ow; ox0 += chunk) {
    const int64_t ox1 = ox0 + chunk < c->ow ? ox0 + chunk : c->ow;
    const int64_t j0 = ox0 * c->sw, j1 = (ox1 - 1) * c->sw + 2 * c->dw + 1;
    for (int64_t oy = oy0; oy < oy1; oy += pairs ? 2 : 1) {
      const uint8_t *row[4];
      for (int t = 0; t < 4; t++) {
        int64_t iy = oy * c->sh - c->pt + t * c->dh;
        row[t] = iy >= 0 && iy < ih ? img + iy * iw * ic : NULL;
      }
      const int second = pairs && oy + 1 < oy1;
      for (int64_t cb = c0; cb < c1; cb += 64) {
        if (!pairs && c->sw == 2 && c->dw == 1 && cb + 64 <= c->oc) {
          if (p->int_bias3)
            stream_s2_block(c, p, row, cb, ox0, ox1, yb + oy * row_bytes, zxl, FB_DW3_EP_INT);
          else if (p->byte_hi)
            stream_s2_block(c, p, row, cb, ox0, ox1, yb + oy * row_bytes, zxl, FB_DW3_EP_BYTE);
          else
            stream_s2_block(c, p, row, cb, ox0, ox1, yb + oy * row_bytes, zxl, FB_DW3_EP_FLOAT);
          continue;
        }
        if (!pairs && c->sw == 2 && c->dw == 1 && c->oc - cb == 32) {
          if (p->int_bias3)
            stream_s2_piece32(c, p, row, cb, ox0, ox1, yb + oy * row_bytes, zxl, FB_DW3_EP_INT);
          else if (p->byte_hi)
            stream_s2_piece32(c, p, row, cb, ox0, ox1, yb + oy * row_bytes, zxl, FB_DW3_EP_BYTE);
          else
            stream_s2_piece32(c, p, row, cb, ox0, ox1, yb + oy * row_bytes, zxl, FB_DW3_EP_FLOAT);
          continue;
        }
        if (second) /* the fourth row only where the lower output row reads it */
          build_block(c, row, cb, j0, j1, v, zxl, 4);
        else
          build_block(c, row, cb, j0, j1, v, zxl, 3);
        compute_block(c, p, v, p->w3[0], cb, ox0, ox1, yb + oy * row_bytes);
        if (second)
          compute_block(c, p, v, p->w3[1], cb, ox0, ox1, yb + (oy + 1) * row_bytes);
      }
    }
  }
}
