/* Softmax along the last axis (attention scores, 12 x 128 rows of 128 per BERT layer), 16
 * float lanes wide with AVX-512. The scalar twin (activation.c's softmax_task, the naive
 * kernel) spends its time in two dependency chains along each row, the running maximum and
 * the running sum, and in expf; here the maximum is two 16-lane accumulators (exact: the
 * same maximum), the exponentials are Cephes' single-precision expf (n = round(x log2 e),
 * r = x - n ln 2 in two parts, a degree-5 polynomial times r^2 plus 1 + r, scaled by
 * 2^n with vscalefps, which also rounds the subnormal results correctly) evaluated with
 * FMA, written to y and summed in two 16-lane accumulators in the same pass, and the row
 * is then multiplied by 1 / sum as the twin does. So the results are not the twin's bits:
 * the exponentials are within 2 ulp of exp (unit/test_kernels_pointwise's softmax test
 * measures it on every float in [-104, 0] step 2^-12 and holds the rows to 2 ulp / 1e-6 of
 * the row's largest value against the twin), and the sum is added in another order. Inputs
 * below -104 (exp below half the smallest subnormal) give 0; NaN anywhere in a row makes
 * the row NaN, as in the twin (an all -inf row too: -inf - -inf). */
#include <immintrin.h>
#include <math.h>

#include "core/cpu.h"
#include "exec/kernels/softmax-simd.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

#define AVX512 __attribute__((target("avx512f")))

/* exp(x) for x <= 0 (and NaN), 16 lanes */
AVX512 static inline __m512 exp16(__m512 x) {
  /* max() returns its second operand for NaN: NaN stays NaN */
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.715476p+0f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

static inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

AVX512 static void softmax_row(const float *x, float *y, int64_t n) {
  const __m512 lowest = _mm512_set1_ps(-INFINITY);
  __m512 m0 = lowest, m1 = lowest;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i < n; i += 16)
    m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(lowest, tail_mask(n - i), x + i));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(m0, m1)));
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  for (i = 0; i + 32 <= n; i += 32) {
    const __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    const __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), m));
    _mm512_storeu_ps(y + i, e0);
    _mm512_storeu_ps(y + i + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m));
    _mm512_mask_storeu_ps(y + i, k, e);
    s0 = _mm512_mask_add_ps(s0, k, s0, e);
  }
  /* a NaN from any element reaches the sum, so the whole row */
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
  for (i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), inv));
  }
}

gboolean qh_softmax_rows_simd(const float *x, float *y, int64_t rows, int64_t n) {
  if (!(qh_cpu_features() & QH_CPU_AVX512F))
    return FALSE;
  for (int64_t r = 0; r < rows; r++)
    softmax_row(x + r * n, y + r * n, n);
  return TRUE;
}

AVX512 static void expf_single_avx512(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, k, exp16(_mm512_maskz_loadu_ps(k, x + i)));
  }
}

gboolean qh_expf_f32_single(const float *x, float *y, int64_t n) {
  if (!(qh_cpu_features() & QH_CPU_AVX512F))
    return FALSE;
  expf_single_avx512(x, y, n);
  return TRUE;
}
