/* The vector Erf (exec/kernels/erf-simd.c) against its scalar twin bit for bit, and both
 * against glibc's erff within 1 ulp: every float in [0.5, 4) and its negative (the
 * shifted polynomials), a sweep over all bit patterns (every 251st: every exponent, both
 * signs, subnormals, +-Inf and NaNs), array lengths around the vector steps and the
 * in-place call (thinned under the sanitizers). QH_ERF_EXHAUSTIVE=1 walks all 2^32
 * patterns instead of the sweep. On a
 * CPU without AVX2+FMA qh_erf_f32 is glibc's erff loop; then only the twin's accuracy is
 * checked. Prints the largest distance to erff seen and how many results differ.
 * The fused GELU's single-precision Erf (qh_erf_f32_single, AVX-512 only) is held to
 * 2.5 ulp of the double erf (rounded to float: its ulp) on [0, 4.5) and its negatives,
 * every 7th bit pattern (every 127th under the sanitizers), and on the special values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/erf-simd.h"
#include "qhost/host-api.h"

#define CHUNK 65536
/* Under ASan/UBSan (unoptimised) the sweeps are thinned 16-60x: memory and UB checks need
 * every path, not every value; the plain build checks the values. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static int64_t key(float f) { /* floats in order as integers, -0 next to +0 */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

static int64_t ulps(float a, float b) {
  if (isnan(a) || isnan(b))
    return isnan(a) && isnan(b) ? 0 : INT64_MAX;
  int64_t d = key(a) - key(b);
  return d < 0 ? -d : d;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)); }

typedef struct {
  long bad, seen, off_by_one;
  int64_t worst;
  int simd; /* qh_erf_f32 runs the polynomial (AVX2+FMA or AVX-512F) */
} Tally;

static void check(Tally *t, const float *x, int64_t n, float *fast, float *slow) {
  qh_erf_f32(x, fast, n);
  qh_erf_f32_scalar(x, slow, n);
  for (int64_t i = 0; i < n; i++) {
    const float ref = erff(x[i]);
    const int64_t d = ulps(slow[i], ref);
    if (d > t->worst)
      t->worst = d;
    t->off_by_one += d == 1;
    if (d > 1 && t->bad++ < 10)
      fprintf(stderr, "erf(%a): polynomial %a, erff %a (%lld ulp)\n", x[i], slow[i], ref, (long long)d);
    if (t->simd ? !same_bits(fast[i], slow[i]) : ulps(fast[i], ref) > 0) {
      if (t->bad++ < 10)
        fprintf(stderr, "erf(%a): vector %a, scalar %a\n", x[i], fast[i], t->simd ? slow[i] : ref);
    }
  }
  t->seen += n;
}

/* all patterns in [lo, hi) with the given step, and their negatives when negate */
static void walk(Tally *t, uint64_t lo, uint64_t hi, uint64_t step, int negate, float *x, float *a, float *b) {
  for (uint64_t bits = lo; bits < hi;) {
    int64_t n = 0;
    for (; n < CHUNK && bits < hi; n += negate ? 2 : 1, bits += step) {
      uint32_t u = (uint32_t)bits;
      memcpy(&x[n], &u, 4);
      if (negate)
        x[n + 1] = -x[n];
    }
    check(t, x, n, a, b);
  }
}

/* |y - erf(x)| in units of the float ulp at erf(x) */
static double ulp_err(float x, float y) {
  const double ref = erf((double)x);
  const float r = (float)ref;
  const double ulp = (double)nextafterf(fabsf(r), INFINITY) - (double)fabsf(r);
  return fabs((double)y - ref) / ulp;
}

/* the single-precision Erf: -1 when the host lacks AVX-512F, else the failures */
static long check_single(float *x, float *y) {
  if (!qh_erf_f32_single(x, y, 0))
    return -1;
  long bad = 0;
  double worst = 0.0;
  const uint32_t top = 0x40900000u; /* 4.5 */
  for (uint32_t bits = 0; bits < top;) {
    int64_t n = 0;
    for (; n < CHUNK && bits < top; n += 2, bits += SANITIZED ? 127 : 7) {
      memcpy(&x[n], &bits, 4);
      x[n + 1] = -x[n];
    }
    qh_erf_f32_single(x, y, n - 1); /* an odd length: the masked tail */
    y[n - 1] = -y[n - 2];
    for (int64_t i = 0; i < n; i++) {
      const double e = ulp_err(x[i], y[i]);
      worst = e > worst ? e : worst;
      if (!(e <= 2.5) && bad++ < 10)
        fprintf(stderr, "single erf(%a) = %a, erf %a (%.2f ulp)\n", x[i], y[i], erf((double)x[i]), e);
    }
  }
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1e-45f, -1e-45f, 1e30f, -1e30f, 4.0f, -3.99f};
  float ys[10], nan_y;
  qh_erf_f32_single(special, ys, 10);
  for (int i = 0; i < 10; i++)
    if (!(ulp_err(special[i], ys[i]) <= 2.5) || signbit(ys[i]) != signbit(special[i]))
      fprintf(stderr, "single erf(%a) = %a\n", special[i], ys[i]), bad++;
  const float nan_x = NAN;
  qh_erf_f32_single(&nan_x, &nan_y, 1);
  bad += !isnan(nan_y);
  printf("single-precision erf: at most %.2f ulp from erf, %ld failures\n", worst, bad);
  return bad;
}

int main(void) {
  const uint64_t cpu = qh_cpu_features();
  Tally t = {0};
  t.simd = (cpu & QH_CPU_AVX512F) || ((cpu & QH_CPU_AVX2) && (cpu & QH_CPU_FMA));
  printf("path: %s\n", (cpu & QH_CPU_AVX512F) ? "avx512f" : t.simd ? "avx2+fma" : "erff");
  float *x = malloc(CHUNK * sizeof(float)), *a = malloc(CHUNK * sizeof(float)),
        *b = malloc(CHUNK * sizeof(float));
  if (getenv("QH_ERF_EXHAUSTIVE")) {
    walk(&t, 0, 1ull << 32, 1, 0, x, a, b);
  } else {
    walk(&t, 0x3f000000u, 0x40800000u, SANITIZED ? 61 : 1, 1, x, a, b); /* [0.5, 4) and (-4, -0.5] */
    walk(&t, 0, 1ull << 32, SANITIZED ? 4099 : 251, 0, x, a, b);
  }
  /* the special values, every length up to 40 (vector bodies and scalar tails) */
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 1e-38f,
                           3.9f, 3.92f, 4.0f, -4.0f, 0.5f, 3.5f, 1e30f, -1e30f};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
    const float e = erff(special[i]);
    float y;
    qh_erf_f32(&special[i], &y, 1);
    if (ulps(y, e) > 1 || (special[i] == 0.0f && signbit(y) != signbit(special[i])))
      fprintf(stderr, "erf(%a) = %a, erff %a\n", special[i], y, e), t.bad++;
  }
  for (int n = 0; n <= 40; n++) {
    for (int i = 0; i < n; i++)
      x[i] = (i % 5 == 0) ? special[i % 17] : (float)(i - 20) * 0.23f;
    check(&t, x, n, a, b);
  }
  for (int i = 0; i < 100; i++) /* in place */
    x[i] = b[i] = (float)(i - 50) * 0.09f;
  qh_erf_f32(x, x, 100);
  for (int i = 0; i < 100; i++)
    if (!same_bits(x[i], t.simd ? qh_erf_poly(b[i]) : erff(b[i])))
      t.bad++;
  const long single_bad = check_single(x, a);
  t.bad += single_bad > 0 ? single_bad : 0;
  printf("%ld values, %ld one ulp from erff, at most %lld ulp, %ld failures\n", t.seen, t.off_by_one,
         (long long)t.worst, t.bad);
  free(x);
  free(a);
  free(b);
  return t.bad == 0 ? 0 : 1;
}
