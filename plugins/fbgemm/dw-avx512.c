/* The fbgemm plugin's depthwise convolution on AVX-512: 16 channels per zmm in int32,
 * per tap one 16-byte load of the input (masked at the channel tail, so nothing past the
 * channels is read), widened, less zx, times the packed int32 weights (vpmulld), then
 * kernels.h's output rule in registers (vcvtps2dq rounds half to even under the default
 * MXCSR) and a masked byte store. Built with AVX-512 F/BW/VL flags of its own
 * (CMakeLists.txt); the plugin calls it on its avx512vnni path only. */
#include <immintrin.h>

#include "kernels.h"

/* The geometry is copied into locals first: the byte stores through y may alias *c and
 * *p as far as the compiler knows, which otherwise reloads every field and redoes the
 * index products for every tap. */
void fb_dw_row_avx512(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y) {
  const int64_t ih = c->ih, iw = c->iw, ic = c->ic, kw = c->kw, sw = c->sw, pl = c->pl, dh = c->dh, dw = c->dw;
  const int64_t ow = c->ow, oc = c->oc, cp = p->cp, iy0 = oy * c->sh - c->pt;
  const int32_t *pw = p->w;
  const float *pb = p->bias, *pm = p->mult;
  const __m512 lo = _mm512_set1_ps(p->lo), hi = _mm512_set1_ps(p->hi);
  const __m512i zo = _mm512_set1_epi32(p->zo), zx = _mm512_set1_epi32(p->zx);
  const uint8_t *img = x + b * ih * iw * ic;
  uint8_t *orow = y + (b * c->oh + oy) * ow * oc;
  int64_t ky0, ky1, kx0, kx1;
  fb_dw_range(iy0, ih, c->kh, dh, &ky0, &ky1);
  for (int64_t ox = 0; ox < ow; ox++) {
    const int64_t ix0 = ox * sw - pl;
    fb_dw_range(ix0, iw, kw, dw, &kx0, &kx1);
    uint8_t *out = orow + ox * oc;
    for (int64_t cb = 0; cb < oc; cb += 16) {
      int64_t n = oc - cb < 16 ? oc - cb : 16;
      __mmask16 mask = (__mmask16)((1u << n) - 1u);
      __m512i acc = _mm512_setzero_si512();
      for (int64_t ky = ky0; ky < ky1; ky++) {
        const uint8_t *xr = img + ((iy0 + ky * dh) * iw + ix0) * ic + cb;
        const int32_t *wr = pw + ky * kw * cp + cb;
        for (int64_t kx = kx0; kx < kx1; kx++) {
          __m512i xv = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, xr + kx * dw * ic)), zx);
          __m512i wv = _mm512_load_si512((const void *)(wr + kx * cp));
          acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(xv, wv));
        }
      }
      __m512 f = _mm512_cvtepi32_ps(acc);
      f = _mm512_mul_ps(_mm512_add_ps(f, _mm512_load_ps(pb + cb)), _mm512_load_ps(pm + cb));
      f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
      __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), zo);
      _mm_mask_storeu_epi8(out + cb, mask, _mm512_cvtepi32_epi8(q));
    }
  }
}
