/* Sigmoid over a float array, 16 lanes at a time with AVX-512, giving the same bits as
 * the scalar loop (1 / (1 + expf(-x)) for x >= 0, e / (1 + e) with e = expf(x) below).
 * The scalar loop spends its time in glibc's expf (efficientnet_b0's SiLU: half of the
 * fp32 run), and calibration observes these values with a discontinuous histogram, so
 * a faster approximation could move a scale. Instead this is glibc's own expf
 * (sysdeps/ieee754/flt-32/e_expf.c, the ARM optimized-routines algorithm, as GCC built it
 * into __expf_fma, the variant glibc picks on every CPU with AVX-512): the same table,
 * constants, double-precision steps and fused multiply-adds, lane by lane. Lanes whose
 * |argument| reaches expf's special-case range (|x| > ~85, Inf, NaN) go through the scalar
 * function. ctest unit/test_sigmoid_simd compares the two on a sweep of every float
 * exponent; the scalar function is also the path on CPUs without AVX-512F. The same
 * lanes give expf itself over an array (Softmax's exponentials), compared the same way. */
#include <immintrin.h>
#include <math.h>

#include "core/cpu.h"
#include "exec/kernels/sigmoid-simd.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

float qh_sigmoid_scalar(float x) {
  if (x >= 0.0f)
    return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}

static void sigmoid_scalar_loop(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = qh_sigmoid_scalar(x[i]);
}

/* glibc 2.36 __exp2f_data: 2^(i/32) with i<<47 subtracted from its bits, then
 * 32/ln2, the cubic's coefficients scaled by (ln2/32)^k, and the rounding shift 0x1.8p52. */
static const uint64_t EXP2F_TAB[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
#define EXPF_INVLN2N 0x40471547652b82feull
#define EXPF_C0 0x3ebc6af84b912394ull
#define EXPF_C1 0x3f2ebfce50fac4f3ull
#define EXPF_C2 0x3f962e42ff0c52d6ull
#define EXPF_SHIFT 0x4338000000000000ull
/* expf's top 12 bits above which it takes its special-case branch (|x| >= 2^6 * 1.3...) */
#define EXPF_SPECIAL_TOP 0x42a

#define AVX512 __attribute__((target("avx512f")))

typedef struct {
  __m512i t0, t1, t2, t3;
  __m512d invln2n, shift, c0, c1, c2, one;
} ExpConsts;

AVX512 static inline __m512d d_of(uint64_t bits) { return _mm512_castsi512_pd(_mm512_set1_epi64((long long)bits)); }

/* expf on 8 doubles widened from floats, the steps of __expf_fma in its order */
AVX512 static inline __m256 expf8(const ExpConsts *k, __m512d xd) {
  __m512d kd = _mm512_fmadd_pd(k->invln2n, xd, k->shift);
  __m512i ki = _mm512_castpd_si512(kd);
  kd = _mm512_sub_pd(kd, k->shift);
  __m512d r = _mm512_fmsub_pd(k->invln2n, xd, kd);
  __m512i lo = _mm512_permutex2var_epi64(k->t0, ki, k->t1);
  __m512i hi = _mm512_permutex2var_epi64(k->t2, ki, k->t3);
  __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
  t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
  __m512d s = _mm512_castsi512_pd(t);
  __m512d z = _mm512_fmadd_pd(r, k->c0, k->c1);
  __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(r, k->c2, k->one);
  y = _mm512_fmadd_pd(z, r2, y);
  return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

AVX512 static void sigmoid_avx512(const float *x, float *y, int64_t n) {
  ExpConsts k = {
      .t0 = _mm512_loadu_si512(EXP2F_TAB),      .t1 = _mm512_loadu_si512(EXP2F_TAB + 8),
      .t2 = _mm512_loadu_si512(EXP2F_TAB + 16), .t3 = _mm512_loadu_si512(EXP2F_TAB + 24),
      .invln2n = d_of(EXPF_INVLN2N),            .shift = d_of(EXPF_SHIFT),
      .c0 = d_of(EXPF_C0),                      .c1 = d_of(EXPF_C1),
      .c2 = d_of(EXPF_C2),                      .one = _mm512_set1_pd(1.0)};
  const __m512 zero = _mm512_setzero_ps(), onef = _mm512_set1_ps(1.0f);
  const __m512i top_mask = _mm512_set1_epi32(0x7ff), special = _mm512_set1_epi32(EXPF_SPECIAL_TOP);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __mmask16 pos = _mm512_cmp_ps_mask(v, zero, _CMP_GE_OQ);
    __m512 a = _mm512_mask_sub_ps(v, pos, zero, v); /* -x where x >= 0, else x */
    __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(a), 20), top_mask);
    __mmask16 odd = _mm512_cmpgt_epi32_mask(top, special);
    __m256 e_lo = expf8(&k, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
    __m256 e_hi = expf8(&k, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
    __m512 e = _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(e_lo)), _mm256_castps_pd(e_hi), 1));
    __m512 num = _mm512_mask_blend_ps(pos, e, onef);
    _mm512_storeu_ps(y + i, _mm512_div_ps(num, _mm512_add_ps(onef, e)));
    while (odd) {
      int l = __builtin_ctz(odd);
      y[i + l] = qh_sigmoid_scalar(x[i + l]);
      odd &= (__mmask16)(odd - 1);
    }
  }
  sigmoid_scalar_loop(x + i, y + i, n - i);
}

static void expf_scalar_loop(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = expf(x[i]);
}

AVX512 static void expf_avx512(const float *x, float *y, int64_t n) {
  ExpConsts k = {
      .t0 = _mm512_loadu_si512(EXP2F_TAB),      .t1 = _mm512_loadu_si512(EXP2F_TAB + 8),
      .t2 = _mm512_loadu_si512(EXP2F_TAB + 16), .t3 = _mm512_loadu_si512(EXP2F_TAB + 24),
      .invln2n = d_of(EXPF_INVLN2N),            .shift = d_of(EXPF_SHIFT),
      .c0 = d_of(EXPF_C0),                      .c1 = d_of(EXPF_C1),
      .c2 = d_of(EXPF_C2),                      .one = _mm512_set1_pd(1.0)};
  const __m512i top_mask = _mm512_set1_epi32(0x7ff), special = _mm512_set1_epi32(EXPF_SPECIAL_TOP);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20), top_mask);
    __mmask16 odd = _mm512_cmpgt_epi32_mask(top, special);
    __m256 e_lo = expf8(&k, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    __m256 e_hi = expf8(&k, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    __m512 e = _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(e_lo)), _mm256_castps_pd(e_hi), 1));
    if (odd) { /* x may be y: keep the arguments of the special lanes before the store */
      float args[16];
      _mm512_storeu_ps(args, v);
      _mm512_storeu_ps(y + i, e);
      while (odd) {
        int l = __builtin_ctz(odd);
        y[i + l] = expf(args[l]);
        odd &= (__mmask16)(odd - 1);
      }
      continue;
    }
    _mm512_storeu_ps(y + i, e);
  }
  expf_scalar_loop(x + i, y + i, n - i);
}

void qh_expf_f32(const float *x, float *y, int64_t n) {
  if (qh_cpu_features() & QH_CPU_AVX512F)
    expf_avx512(x, y, n);
  else
    expf_scalar_loop(x, y, n);
}

void qh_expf_f32_scalar(const float *x, float *y, int64_t n) { expf_scalar_loop(x, y, n); }

void qh_sigmoid_f32(const float *x, float *y, int64_t n) {
  if (qh_cpu_features() & QH_CPU_AVX512F)
    sigmoid_avx512(x, y, n);
  else
    sigmoid_scalar_loop(x, y, n);
}

void qh_sigmoid_f32_scalar(const float *x, float *y, int64_t n) { sigmoid_scalar_loop(x, y, n); }
