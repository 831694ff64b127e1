/* The fbgemm plugin's 3x3 depthwise convolution on AVX-512 VNNI (mobilenet's shape),
 * built for the two ports that the general path (dw-avx512vnni.c) keeps busy: on these
 * cores vpdpbusd zmm, the int/float conversions and the shifts share one port, the
 * shuffles another. Per output row pair, 4 input rows are interleaved into the worker's
 * row buffer with byte then word unpacks (8 shuffles per 64 channels and column, no
 * shifts: the rolled buffer took 8 shifts and 4 zero-extensions), which leaves each block
 * of 64 channels in lane order (kernels.h, fb_dw_lane_channel); the packed weights, zero
 * point sums, biases and multipliers are in the same order (dw.c), and the saturating
 * packs of the epilogue undo it, so the 64 bytes leave in channel order through one store
 * without the vpermd of gemm-avx512-store.h. The channels after the last full block (32
 * of mobilenet's 96, 16 of its 144) go 16 at a time through 128-bit unpacks, which keep
 * channel order, and a per-vector epilogue, so no work is spent on padding channels. With stride 1 and dilation 1 the buffer's
 * rows 0-3 serve the upper output row with weights (w0, w1, w2, 0) and the lower with
 * (0, w0, w1, w2): one build per two rows. Padding reads a line of zx bytes (every
 * source pointer valid, so no branches in the copy); the sums less zx * sum(w) are
 * exactly sum (x - zx) * w, then kernels.h's output rule as in gemm-avx512-store.h, so the
 * bytes are the scalar twin's (fb_dw_ref). Built with AVX-512 F/BW/VL/VNNI flags of its
 * own (CMakeLists.txt); called by dw.c on the avx512vnni (and AMX) path only. */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

/* vpdpbusd through asm, as in dw-avx512vnni.c: acc += a (u8) . b (s8), per dword. */
static inline __attribute__((always_inline)) __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* The row buffer: v[j * cq + position], input column j - pl, dword byte t from input row
 * iy0 + t * dh (the zx line outside the image). */
static void build4(const FbConv *c, const FbDwPacked *p, const uint8_t *img, int64_t iy0, int32_t *v,
                   const uint8_t *zxl) {
  const int64_t ih = c->ih, iw = c->iw, ic = c->ic, cq = p->cq, ncol = fb_dw_cols(c), pl = c->pl;
  const uint8_t *row[4];
  for (int t = 0; t < 4; t++) {
    int64_t iy = iy0 + t * c->dh;
    row[t] = iy >= 0 && iy < ih ? img + iy * iw * ic : NULL;
  }
  const int64_t full = ic / 64 * 64;
  for (int64_t j = 0; j < ncol; j++) {
    int64_t ix = j - pl;
    int inside = ix >= 0 && ix < iw;
    const uint8_t *s0 = inside && row[0] ? row[0] + ix * ic : zxl, *s1 = inside && row[1] ? row[1] + ix * ic : zxl;
    const uint8_t *s2 = inside && row[2] ? row[2] + ix * ic : zxl, *s3 = inside && row[3] ? row[3] + ix * ic : zxl;
    int32_t *dst = v + j * cq;
    int64_t cb = 0;
    for (; cb < full; cb += 64) {
      __m512i r0 = _mm512_loadu_si512((const void *)(s0 + cb)), r1 = _mm512_loadu_si512((const void *)(s1 + cb));
      __m512i r2 = _mm512_loadu_si512((const void *)(s2 + cb)), r3 = _mm512_loadu_si512((const void *)(s3 + cb));
      __m512i lo01 = _mm512_unpacklo_epi8(r0, r1), hi01 = _mm512_unpackhi_epi8(r0, r1);
      __m512i lo23 = _mm512_unpacklo_epi8(r2, r3), hi23 = _mm512_unpackhi_epi8(r2, r3);
      _mm512_store_si512((void *)(dst + cb), _mm512_unpacklo_epi16(lo01, lo23));
      _mm512_store_si512((void *)(dst + cb + 16), _mm512_unpackhi_epi16(lo01, lo23));
      _mm512_store_si512((void *)(dst + cb + 32), _mm512_unpacklo_epi16(hi01, hi23));
      _mm512_store_si512((void *)(dst + cb + 48), _mm512_unpackhi_epi16(hi01, hi23));
    }
    /* the tail 16 channels at a time: unpacks within one 128-bit lane keep channel order;
     * channels past ic read 0 and meet zero weights */
    for (; cb < ic; cb += 16) {
      const __mmask16 m = ic - cb >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (ic - cb)) - 1u);
      __m128i r0 = _mm_maskz_loadu_epi8(m, s0 + cb), r1 = _mm_maskz_loadu_epi8(m, s1 + cb);
      __m128i r2 = _mm_maskz_loadu_epi8(m, s2 + cb), r3 = _mm_maskz_loadu_epi8(m, s3 + cb);
      __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
      __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
      _mm_store_si128((__m128i *)(dst + cb), _mm_unpacklo_epi16(lo01, lo23));
      _mm_store_si128((__m128i *)(dst + cb + 4), _mm_unpackhi_epi16(lo01, lo23));
      _mm_store_si128((__m128i *)(dst + cb + 8), _mm_unpacklo_epi16(hi01, hi23));
      _mm_store_si128((__m128i *)(dst + cb + 12), _mm_unpackhi_epi16(hi01, hi23));
    }
  }
}

/* kernels.h's output rule for one lane-ordered block of 64 channels, as
 * fb_store64_avx512 (gemm-avx512-store.h) applies it: only the upper bound in float,
 * vcvtps2dq rounding half to even, the saturating packs and the byte maximum with lo
 * taking the lower one; the packs' lane interleave puts lane-ordered channels back in
 * channel order. */
static inline __attribute__((always_inline)) void store64(const __m512i acc[4], const float *bias,
                                                          const float *mult, __m512 hi, __m512i zo16, __m512i lo8,
                                                          uint8_t *dst) {
  __m512i q[4];
  _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
    __m512 f = _mm512_cvtepi32_ps(acc[u]);
    f = _mm512_mul_ps(_mm512_add_ps(f, _mm512_load_ps(bias + 16 * u)), _mm512_load_ps(mult + 16 * u));
    q[u] = _mm512_cvtps_epi32(_mm512_min_ps(f, hi));
  }
  __m512i w01 = _mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), zo16);
  __m512i w23 = _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), zo16);
  _mm512_storeu_si512((void *)dst, _mm512_max_epu8(_mm512_packus_epi16(w01, w23), lo8));
}

/* One output row from the row buffer with weight set w3 (p->w3[0] or p->w3[1]): per full
 * block of 64 channels, the 12 weight vectors stay in registers and each pixel is 12
 * independent vpdpbusd and one store; then the tail. */
static void compute_row(const FbConv *c, const FbDwPacked *p, const int32_t *v, const int8_t *w3, uint8_t *orow) {
  const int64_t ow = c->ow, oc = c->oc, cq = p->cq, sw = c->sw, dw = c->dw;
  const __m512 hi = _mm512_set1_ps(p->hi);
  const __m512i zo16 = _mm512_set1_epi16((short)p->zo);
  const __m512i lo8 = _mm512_set1_epi8((char)(uint8_t)((int32_t)p->lo + p->zo)); /* in [0, 255] */
  const int64_t full = oc / 64 * 64;
  for (int64_t cb = 0; cb < full; cb += 64) {
    __m512i wv[4][3], nzs[4];
    _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
      nzs[u] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_load_si512((const void *)(p->zsum3 + cb + 16 * u)));
      _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
        wv[u][kx] = _mm512_load_si512((const void *)(w3 + (kx * cq + cb + 16 * u) * 4));
    }
    const float *bias = p->bias3 + cb, *mult = p->mult3 + cb;
    for (int64_t ox = 0; ox < ow; ox++) {
      const int32_t *vc = v + ox * sw * cq + cb;
      __m512i acc[4];
      _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
        acc[u] = nzs[u];
        _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
          acc[u] = dpbusd(acc[u], _mm512_load_si512((const void *)(vc + kx * dw * cq + 16 * u)), wv[u][kx]);
      }
      store64(acc, bias, mult, hi, zo16, lo8, orow + ox * oc + cb);
    }
  }
  /* the tail in channel order, 16 at a time, each vector through vpmovdb and a masked store */
  const __m512 lo = _mm512_set1_ps(p->lo);
  const __m512i zo = _mm512_set1_epi32(p->zo);
  for (int64_t cb = full; cb < oc; cb += 16) {
    const __mmask16 mask = oc - cb >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (oc - cb)) - 1u);
    const __m512i nzs = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_load_si512((const void *)(p->zsum3 + cb)));
    const __m512 bias = _mm512_load_ps(p->bias3 + cb), mult = _mm512_load_ps(p->mult3 + cb);
    __m512i wv[3];
    _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
      wv[kx] = _mm512_load_si512((const void *)(w3 + (kx * cq + cb) * 4));
    for (int64_t ox = 0; ox < ow; ox++) {
      const int32_t *vc = v + ox * sw * cq + cb;
      __m512i acc = nzs;
      _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
        acc = dpbusd(acc, _mm512_load_si512((const void *)(vc + kx * dw * cq)), wv[kx]);
      __m512 f = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(acc), bias), mult);
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      _mm_mask_storeu_epi8(orow + ox * oc + cb, mask, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zo)));
    }
  }
}

void fb_dw3_rows_avx512vnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy0,
                            int64_t oy1, uint8_t *y, void *ws) {
  int32_t *v = ws;
  uint8_t *zxl = (uint8_t *)ws + fb_dw_row_bytes(c, p);
  memset(zxl, p->zx, (size_t)c->ic);
  const uint8_t *img = x + b * c->ih * c->iw * c->ic;
  const int pairs = c->sh == 1 && c->dh == 1;
  const int64_t row_bytes = c->ow * c->oc;
  uint8_t *yb = y + b * c->oh * row_bytes;
  for (int64_t oy = oy0; oy < oy1; oy += pairs ? 2 : 1) {
    build4(c, p, img, oy * c->sh - c->pt, v, zxl);
    compute_row(c, p, v, p->w3[0], yb + oy * row_bytes);
    if (pairs && oy + 1 < oy1)
      compute_row(c, p, v, p->w3[1], yb + (oy + 1) * row_bytes);
  }
}
