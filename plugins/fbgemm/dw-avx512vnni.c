/* The fbgemm plugin's depthwise convolution on AVX-512 VNNI: vpdpbusd multiplies 4 u8
 * inputs by 4 s8 weights and adds them to an int32 lane, so each lane takes 4 kernel rows
 * of one channel at once. Per output row, the input rows its taps read are interleaved
 * once into the worker's row buffer: dword (g, column, channel) holds the inputs of kernel
 * rows 4g .. 4g+3 at that column, a padding row or column reading a line of zx bytes
 * (so the copy has no branches; a byte past the kernel's rows is 0 and meets weight 0). Each output pixel is
 * then, per 16 channels, groups x kw aligned loads and vpdpbusd against weights held in
 * registers, plus -zx * sum(w) (zsum), which cancels the zx every tap read: exactly
 * sum (x - zx) * w, as the scalar twin computes. A column serves every output pixel that
 * reaches it (about kw / stride), where the vpmulld path (dw-avx2.c) widened each input
 * once per tap. Then kernels.h's output rule in registers (vcvtps2dq rounds half to even
 * under the default MXCSR) and a masked byte store. Built with AVX-512 F/BW/VL/VNNI flags
 * of its own (CMakeLists.txt); the plugin calls it on its avx512vnni path only. */
#include <immintrin.h>
#include <string.h>

#include "gemm-avx512-store.h"
#include "kernels.h"

/* vpdpbusd through asm, as in gemm-avx512vnni.c (GCC 12 copies the accumulator around the
 * intrinsic): acc += a (u8) . b (s8), per dword. */
static inline __attribute__((always_inline)) __m512i dpbusd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* Columns of one group of nr kernel rows (compile-time nr, so the loads unroll without
 * branches): every source pointer is valid, a row or column outside the image reading
 * the zx line instead. */
static inline __attribute__((always_inline)) void build_group(const uint8_t *const row[4], const uint8_t *zxl,
                                                              int64_t iw, int64_t ic, int64_t pl, int64_t ncol,
                                                              int64_t cp, int32_t *vg, const int nr) {
  const int64_t full = ic / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (ic - full)) - 1u);
  for (int64_t j = 0; j < ncol; j++) {
    int64_t ix = j - pl;
    int inside = ix >= 0 && ix < iw;
    const uint8_t *s[4];
    _Pragma("GCC unroll 4") for (int t = 0; t < nr; t++)
      s[t] = inside && row[t] ? row[t] + ix * ic : zxl;
    int32_t *dst = vg + j * cp;
    int64_t cb = 0;
    for (; cb < full; cb += 16) {
      __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(s[0] + cb)));
      _Pragma("GCC unroll 4") for (int t = 1; t < nr; t++)
        d = _mm512_or_si512(d, _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(s[t] + cb))), 8 * t));
      _mm512_store_si512((void *)(dst + cb), d);
    }
    if (tail) {
      __m512i d = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(tail, s[0] + cb));
      _Pragma("GCC unroll 4") for (int t = 1; t < nr; t++)
        d = _mm512_or_si512(d, _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(tail, s[t] + cb)), 8 * t));
      _mm512_store_si512((void *)(dst + cb), d);
    }
  }
}

/* The row buffer for output row oy: v[(g * ncol + j) * cp + c], input column j - pl;
 * zxl: ic bytes of zx. */
static void build_rows(const FbConv *c, const FbDwPacked *p, const uint8_t *img, int64_t oy, int32_t *v,
                       const uint8_t *zxl) {
  const int64_t ih = c->ih, iw = c->iw, ic = c->ic, cp = p->cp, ncol = fb_dw_cols(c), pl = c->pl;
  const int64_t iy0 = oy * c->sh - c->pt;
  for (int64_t g = 0; g < p->groups; g++) {
    const uint8_t *row[4] = {NULL, NULL, NULL, NULL};
    int nr = p->kh - 4 * g < 4 ? (int)(p->kh - 4 * g) : 4;
    for (int t = 0; t < nr; t++) {
      int64_t iy = iy0 + (4 * g + t) * c->dh;
      row[t] = iy >= 0 && iy < ih ? img + iy * iw * ic : NULL;
    }
    int32_t *vg = v + g * ncol * cp;
    switch (nr) {
    case 4: build_group(row, zxl, iw, ic, pl, ncol, cp, vg, 4); break;
    case 3: build_group(row, zxl, iw, ic, pl, ncol, cp, vg, 3); break;
    case 2: build_group(row, zxl, iw, ic, pl, ncol, cp, vg, 2); break;
    default: build_group(row, zxl, iw, ic, pl, ncol, cp, vg, 1); break;
    }
  }
}

/* One output row with the kernel's width and row groups known at compile time (kw, ng >
 * 0) or not (0), so that the weights of the common 3x3 and 5x5 stay in registers. */
static inline __attribute__((always_inline)) void compute_row(const FbConv *c, const FbDwPacked *p,
                                                              const int32_t *v, uint8_t *orow, const int kw_c,
                                                              const int ng_c) {
  const int64_t kw = kw_c ? kw_c : p->kw, ng = ng_c ? ng_c : p->groups;
  const int64_t ow = c->ow, oc = c->oc, cp = p->cp, sw = c->sw, dw = c->dw, ncol = fb_dw_cols(c);
  const __m512 lo = _mm512_set1_ps(p->lo), hi = _mm512_set1_ps(p->hi);
  const __m512i zo = _mm512_set1_epi32(p->zo);
  int64_t cb = 0;
  if (kw_c == 3 && ng_c == 1) {
    /* 3x3 on 64 channels at a time: 12 independent vpdpbusd per pixel against weights
     * held in registers, and the 64 bytes leave through one packed store (the epilogue
     * was most of the work per pixel: 3 vpdpbusd against about 10 operations). */
    __m512 hv;
    __m512i zo16, lo8, perm;
    fb_store64_consts(p->lo, p->hi, p->zo, &hv, &zo16, &lo8, &perm);
    for (; cb + 64 <= oc; cb += 64) {
      __m512i wv[4][3], nzs[4];
      _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
        nzs[u] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_load_si512((const void *)(p->zsum + cb + 16 * u)));
        _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
          wv[u][kx] = _mm512_load_si512((const void *)(p->w4 + (kx * cp + cb + 16 * u) * 4));
      }
      for (int64_t ox = 0; ox < ow; ox++) {
        const int32_t *vc = v + ox * sw * cp + cb;
        __m512i acc[4];
        _Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
          acc[u] = nzs[u];
          _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++)
            acc[u] = dpbusd(acc[u], _mm512_load_si512((const void *)(vc + kx * dw * cp + 16 * u)), wv[u][kx]);
        }
        fb_store64_avx512(acc, p->bias + cb, p->mult + cb, hv, zo16, lo8, perm, orow + ox * oc + cb,
                          ~(__mmask64)0);
      }
    }
  }
  for (; cb < oc; cb += 16) {
    int64_t n = oc - cb < 16 ? oc - cb : 16;
    __mmask16 mask = (__mmask16)((1u << n) - 1u);
    const __m512i nzs = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_load_si512((const void *)(p->zsum + cb)));
    const __m512 bias = _mm512_load_ps(p->bias + cb), mult = _mm512_load_ps(p->mult + cb);
    if (kw_c && ng_c) {
      __m512i wv[2][5];
      _Pragma("GCC unroll 8") for (int g = 0; g < ng_c; g++)
        _Pragma("GCC unroll 8") for (int kx = 0; kx < kw_c; kx++)
          wv[g][kx] = _mm512_load_si512((const void *)(p->w4 + ((g * kw + kx) * cp + cb) * 4));
      for (int64_t ox = 0; ox < ow; ox++) {
        __m512i acc = nzs;
        const int32_t *vc = v + ox * sw * cp + cb;
        _Pragma("GCC unroll 8") for (int g = 0; g < ng_c; g++)
          _Pragma("GCC unroll 8") for (int kx = 0; kx < kw_c; kx++)
            acc = dpbusd(acc, _mm512_load_si512((const void *)(vc + (g * ncol + kx * dw) * cp)), wv[g][kx]);
        __m512 f = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(acc), bias), mult);
        f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
        _mm_mask_storeu_epi8(orow + ox * oc + cb, mask, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zo)));
      }
    } else {
      for (int64_t ox = 0; ox < ow; ox++) {
        __m512i acc = nzs;
        const int32_t *vc = v + ox * sw * cp + cb;
        for (int64_t g = 0; g < ng; g++)
          for (int64_t kx = 0; kx < kw; kx++)
            acc = dpbusd(acc, _mm512_load_si512((const void *)(vc + (g * ncol + kx * dw) * cp)),
                         _mm512_load_si512((const void *)(p->w4 + ((g * kw + kx) * cp + cb) * 4)));
        __m512 f = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(acc), bias), mult);
        f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
        _mm_mask_storeu_epi8(orow + ox * oc + cb, mask, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zo)));
      }
    }
  }
}

/* Output row oy from the row buffer of row oy - 1, for stride 1, dilation 1 and one group
 * (kh <= 4): each dword's kernel rows move down one byte and the one new input row enters
 * at byte kh - 1, so the rows already interleaved are not read again. */
static void roll_rows(const FbConv *c, const FbDwPacked *p, const uint8_t *img, int64_t oy, int32_t *v,
                      const uint8_t *zxl) {
  const int64_t iw = c->iw, ic = c->ic, cp = p->cp, ncol = fb_dw_cols(c), pl = c->pl, iy = oy - c->pt + p->kh - 1;
  const uint8_t *row = iy >= 0 && iy < c->ih ? img + iy * iw * ic : NULL;
  const int64_t full = ic / 16 * 16;
  const __mmask16 tail = (__mmask16)((1u << (ic - full)) - 1u);
  const unsigned shift = (unsigned)(8 * (p->kh - 1));
  for (int64_t j = 0; j < ncol; j++) {
    int64_t ix = j - pl;
    const uint8_t *s = row && ix >= 0 && ix < iw ? row + ix * ic : zxl;
    int32_t *dst = v + j * cp;
    int64_t cb = 0;
    for (; cb < full; cb += 16) {
      __m512i d = _mm512_srli_epi32(_mm512_load_si512((const void *)(dst + cb)), 8);
      d = _mm512_or_si512(d, _mm512_sll_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(s + cb))),
                                              _mm_cvtsi32_si128((int)shift)));
      _mm512_store_si512((void *)(dst + cb), d);
    }
    if (tail) {
      __m512i d = _mm512_srli_epi32(_mm512_load_si512((const void *)(dst + cb)), 8);
      d = _mm512_or_si512(d, _mm512_sll_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(tail, s + cb)),
                                              _mm_cvtsi32_si128((int)shift)));
      _mm512_store_si512((void *)(dst + cb), d);
    }
  }
}

static void compute(const FbConv *c, const FbDwPacked *p, const int32_t *v, uint8_t *orow) {
  if (p->kw == 3 && p->groups == 1)
    compute_row(c, p, v, orow, 3, 1);
  else if (p->kw == 5 && p->groups == 2)
    compute_row(c, p, v, orow, 5, 2);
  else
    compute_row(c, p, v, orow, 0, 0);
}

void fb_dw_row_avx512vnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                          uint8_t *y, void *ws) {
  fb_dw_rows_avx512vnni(c, p, x, b, oy, oy + 1, y, ws);
}

void fb_dw_rows_avx512vnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy0,
                           int64_t oy1, uint8_t *y, void *ws) {
  int32_t *v = ws;
  uint8_t *zxl = (uint8_t *)ws + fb_dw_row_bytes(c, p);
  memset(zxl, p->zx, (size_t)c->ic);
  const uint8_t *img = x + b * c->ih * c->iw * c->ic;
  const int roll = c->sh == 1 && c->dh == 1 && p->groups == 1;
  for (int64_t oy = oy0; oy < oy1; oy++) {
    if (roll && oy > oy0)
      roll_rows(c, p, img, oy, v, zxl);
    else
      build_rows(c, p, img, oy, v, zxl);
    compute(c, p, v, y + (b * c->oh + oy) * c->ow * c->oc);
  }
}
