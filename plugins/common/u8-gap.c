/* GlobalAveragePool of a channels-last uint8 image with AVX-512 VBMI, giving the bytes of
 * qh_u8_pool_row's GLOBAL kind (its twin). The twin sums the 256-entry dequantized table
 * dq[x] = (float)(x - z) * s in double; every dq[x] is a multiple of u = ulp(s) below
 * 2^32 u, so for fewer than 2^21 pixels every partial sum is exact and the order does not
 * matter. Writing dq[x] = (a (x - z) + r[x]) u with a = s / u (s's 24-bit significand)
 * and r[x] the rounding of the float product (|r| <= 128), the sum is
 * (a * sum(x - z) + sum(r[x])) u: a sum of bytes and a sum of one small table, both
 * exact in integers and both 64 channels per step (vpermi2b looks r up). The double is
 * then the twin's, and so is the quantized average. */
#include "u8-kernels.h"
#include "u8-layout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIXELS (1 << 21) /* exactness bound of the double sum (see above) */
#define FLUSH 128            /* int16 partial sums: 128 * 255 and 128 * 128 fit */

/* a, u and the int16 table r of p->dq, or 0 when the shortcut does not apply. */
static int decompose(const float *dq, int32_t z, int64_t *a, double *u, int16_t r[256]) {
  float s = z < 255 ? dq[z + 1] : -dq[z - 1];
  if (!isnormal(s) || s < 0.0f)
    return 0;
  int e;
  frexpf(s, &e);            /* s = m 2^e, 0.5 <= m < 1 */
  *u = ldexp(1.0, e - 24);  /* s's last significand bit */
  *a = (int64_t)(s / *u);   /* exact: s's significand as an integer */
  for (int q = 0; q < 256; q++) {
    double k = (double)dq[q] / *u;
    if (!isfinite(dq[q]) || k != floor(k))
      return 0;
    double rest = k - (double)*a * (q - z);
    if (rest < -128.0 || rest > 128.0)
      return 0;
    r[q] = (int16_t)rest;
  }
  return 1;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* Lanes of _mm512_unpacklo/hi_epi8 (lo: 0, hi: 1) back to channel order. */
static inline int64_t lane_channel(int hi, int e) { return (e / 8) * 16 + hi * 8 + e % 8; }

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) int qh_u8_global_sums_vbmi(const QhU8Pool *p,
                                                                                 const uint8_t *img,
                                                                                 double *sums) {
  const int64_t hw = p->h * p->w, C = p->c;
  int32_t z = 0;
  while (z < 256 && p->dq[z] != 0.0f)
    z++;
  if (z == 256 || hw <= 0 || hw >= MAX_PIXELS || C <= 0)
    return 0;
  int64_t a;
  double u;
  int16_t r[256];
  if (!decompose(p->dq, z, &a, &u, r))
    return 0;
  uint8_t rlo[256], rhi[256];
  for (int q = 0; q < 256; q++)
    rlo[q] = (uint8_t)((uint16_t)r[q] & 0xff), rhi[q] = (uint8_t)((uint16_t)r[q] >> 8);
  const __m512i l0 = _mm512_loadu_si512(rlo), l1 = _mm512_loadu_si512(rlo + 64);
  const __m512i l2 = _mm512_loadu_si512(rlo + 128), l3 = _mm512_loadu_si512(rlo + 192);
  const __m512i h0 = _mm512_loadu_si512(rhi), h1 = _mm512_loadu_si512(rhi + 64);
  const __m512i h2 = _mm512_loadu_si512(rhi + 128), h3 = _mm512_loadu_si512(rhi + 192);
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t c0 = 0; c0 < C; c0 += 64) {
    const int64_t nc = C - c0 < 64 ? C - c0 : 64;
    const __mmask64 m = nc == 64 ? ~(__mmask64)0 : (((__mmask64)1 << nc) - 1);
    int32_t xs[2][32] = {{0}}, rs[2][32] = {{0}}; /* per unpack half, per lane */
    for (int64_t p0 = 0; p0 < hw; p0 += FLUSH) {
      const int64_t p1 = p0 + FLUSH < hw ? p0 + FLUSH : hw;
      __m512i sx[2] = {zero, zero}, sr[2] = {zero, zero};
      for (int64_t i = p0; i < p1; i++) {
        __m512i x = _mm512_maskz_loadu_epi8(m, img + i * C + c0);
        __mmask64 top = _mm512_movepi8_mask(x);
        __m512i rl = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(l0, x, l1),
                                            _mm512_permutex2var_epi8(l2, x, l3));
        __m512i rh = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(h0, x, h1),
                                            _mm512_permutex2var_epi8(h2, x, h3));
        sx[0] = _mm512_add_epi16(sx[0], _mm512_unpacklo_epi8(x, zero));
        sx[1] = _mm512_add_epi16(sx[1], _mm512_unpackhi_epi8(x, zero));
        sr[0] = _mm512_add_epi16(sr[0], _mm512_unpacklo_epi8(rl, rh));
        sr[1] = _mm512_add_epi16(sr[1], _mm512_unpackhi_epi8(rl, rh));
      }
      for (int h = 0; h < 2; h++) {
        int16_t bx[32], br[32];
        _mm512_storeu_si512(bx, sx[h]);
        _mm512_storeu_si512(br, sr[h]);
        for (int e = 0; e < 32; e++)
          xs[h][e] += (uint16_t)bx[e], rs[h][e] += br[e];
      }
    }
    for (int h = 0; h < 2; h++)
      for (int e = 0; e < 32; e++) {
        int64_t c = lane_channel(h, e);
        if (c >= nc)
          continue;
        int64_t k = a * ((int64_t)xs[h][e] - (int64_t)z * hw) + rs[h][e];
        sums[c0 + c] = (double)k * u;
      }
  }
  return 1;
}
#else
int qh_u8_global_sums_vbmi(const QhU8Pool *p, const uint8_t *img, double *sums) {
  (void)p, (void)img, (void)sums;
  return 0;
}
#endif

int qh_u8_global_avg_vbmi(const QhU8Pool *p, const uint8_t *img, uint8_t *y) {
  double stack[1024], *sums = p->c <= 1024 ? stack : malloc((size_t)p->c * sizeof *sums);
  int ok = sums && qh_u8_global_sums_vbmi(p, img, sums);
  const float lo = (float)(0 - p->zo), hi = (float)(255 - p->zo);
  for (int64_t c = 0; ok && c < p->c; c++)
    y[c] = qh_u8_quant((float)(sums[c] / (double)(p->h * p->w)), p->so, lo, hi, p->zo);
  if (sums != stack)
    free(sums);
  return ok;
}
