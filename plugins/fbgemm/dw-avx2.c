/* The fbgemm plugin's depthwise convolution on AVX2: 8 channels per ymm in int32, per
 * tap one 8-byte load of the input, widened, less zx, times the packed int32 weights
 * (vpmulld; exact for any uint8, so no exact variant is needed here), then kernels.h's
 * output rule in registers (vcvtps2dq rounds half to even under the default MXCSR) and
 * the results packed to bytes (values already in [0, 255], so the saturating packs are
 * exact). The last channels short of 8 take the portable C code (dw.c), which computes
 * the same operations. Built with -mavx2 (CMakeLists.txt), called only where the host
 * reports AVX2. */
#include <immintrin.h>

#include "kernels.h"

/* The geometry is copied into locals first: the byte stores through y may alias *c and
 * *p as far as the compiler knows, which otherwise reloads every field and redoes the
 * index products for every tap. */
void fb_dw_row_avx2(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y,
                    void *ws) {
  (void)ws;
  const int64_t ih = c->ih, iw = c->iw, ic = c->ic, kw = c->kw, sw = c->sw, pl = c->pl, dh = c->dh, dw = c->dw;
  const int64_t ow = c->ow, oc = c->oc, cp = p->cp, iy0 = oy * c->sh - c->pt, full = oc / 8 * 8;
  const int32_t *pw = p->w;
  const float *pb = p->bias, *pm = p->mult;
  const __m256 lo = _mm256_set1_ps(p->lo), hi = _mm256_set1_ps(p->hi);
  const __m256i zo = _mm256_set1_epi32(p->zo), zx = _mm256_set1_epi32(p->zx);
  const uint8_t *img = x + b * ih * iw * ic;
  uint8_t *orow = y + (b * c->oh + oy) * ow * oc;
  int64_t ky0, ky1, kx0, kx1;
  fb_dw_range(iy0, ih, c->kh, dh, &ky0, &ky1);
  for (int64_t ox = 0; ox < ow; ox++) {
    const int64_t ix0 = ox * sw - pl;
    fb_dw_range(ix0, iw, kw, dw, &kx0, &kx1);
    uint8_t *out = orow + ox * oc;
    for (int64_t cb = 0; cb < full; cb += 8) {
      __m256i acc = _mm256_setzero_si256();
      for (int64_t ky = ky0; ky < ky1; ky++) {
        const uint8_t *xr = img + ((iy0 + ky * dh) * iw + ix0) * ic + cb;
        const int32_t *wr = pw + ky * kw * cp + cb;
        for (int64_t kx = kx0; kx < kx1; kx++) {
          __m256i xv = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(xr + kx * dw * ic))), zx);
          __m256i wv = _mm256_load_si256((const __m256i *)(wr + kx * cp));
          acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(xv, wv));
        }
      }
      __m256 f = _mm256_cvtepi32_ps(acc);
      f = _mm256_mul_ps(_mm256_add_ps(f, _mm256_load_ps(pb + cb)), _mm256_load_ps(pm + cb));
      f = _mm256_min_ps(_mm256_max_ps(f, lo), hi);
      __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), zo);
      __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      _mm_storel_epi64((__m128i *)(out + cb), _mm_packus_epi16(w16, w16));
    }
    if (full < oc)
      fb_dw_pixel_c(c, p, x, b, oy, ox, full, oc, y);
  }
}
