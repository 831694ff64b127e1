/* The AVX-512 Sigmoid (glibc's expf lane by lane) against the scalar formula, and the
 * AVX-512 expf array function against glibc's expf, bit for bit: a sweep over the float bit patterns (every 251st, so every exponent and both signs,
 * NaN and infinities included), array lengths around the 16-lane step, and the in-place
 * call. QH_SIGMOID_EXHAUSTIVE=1 walks all 2^32 patterns instead (about a minute).
 * Skips (77) without AVX-512F. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/sigmoid-simd.h"
#include "qhost/host-api.h"

#define CHUNK 65536

static int same(float a, float b) {
  uint32_t ua, ub;
  memcpy(&ua, &a, 4);
  memcpy(&ub, &b, 4);
  return ua == ub || (isnan(a) && isnan(b));
}

static long compare(const float *x, int64_t n, float *fast, float *slow) {
  long bad = 0;
  qh_sigmoid_f32(x, fast, n);
  qh_sigmoid_f32_scalar(x, slow, n);
  for (int64_t i = 0; i < n; i++)
    if (!same(fast[i], slow[i]) && bad++ < 5)
      fprintf(stderr, "sigmoid(%a): simd %a, scalar %a\n", x[i], fast[i], slow[i]);
  qh_expf_f32(x, fast, n);
  qh_expf_f32_scalar(x, slow, n); /* glibc's expf, element by element */
  for (int64_t i = 0; i < n; i++)
    if (!same(fast[i], slow[i]) && bad++ < 10)
      fprintf(stderr, "expf(%a): simd %a, glibc %a\n", x[i], fast[i], slow[i]);
  return bad;
}

int main(void) {
  if (!(qh_cpu_features() & QH_CPU_AVX512F)) {
    puts("SKIP: no AVX-512F (the scalar loop is the only path)");
    return 77;
  }
  const uint64_t step = getenv("QH_SIGMOID_EXHAUSTIVE") ? 1 : 251;
  float *x = malloc(CHUNK * sizeof(float)), *a = malloc(CHUNK * sizeof(float)),
        *b = malloc(CHUNK * sizeof(float));
  long bad = 0, seen = 0;
  for (uint64_t bits = 0; bits < (1ull << 32);) {
    int64_t n = 0;
    for (; n < CHUNK && bits < (1ull << 32); n++, bits += step) {
      uint32_t u = (uint32_t)bits;
      memcpy(&x[n], &u, 4);
    }
    bad += compare(x, n, a, b);
    seen += n;
  }
  /* tails: every length up to 40, values around the sign change and expf's range edge */
  for (int n = 0; n <= 40; n++) {
    for (int i = 0; i < n; i++)
      x[i] = (float)(i - 20) * (i % 3 == 0 ? 4.4f : 0.37f);
    bad += compare(x, n, a, b);
  }
  /* in place */
  for (int i = 0; i < 100; i++)
    x[i] = b[i] = (float)(i - 50) * 0.21f;
  qh_sigmoid_f32(x, x, 100);
  for (int i = 0; i < 100; i++)
    bad += !same(x[i], qh_sigmoid_scalar(b[i]));
  /* expf in place, special lanes (overflow, -Inf, NaN) among ordinary ones */
  for (int i = 0; i < 100; i++)
    x[i] = b[i] = i % 7 == 0 ? (i % 2 ? -INFINITY : 100.0f) : i == 50 ? NAN : (float)(i - 50) * 0.9f;
  qh_expf_f32(x, x, 100);
  for (int i = 0; i < 100; i++)
    bad += !same(x[i], expf(b[i]));
  printf("%ld patterns swept, %ld mismatches\n", seen, bad);
  free(x);
  free(a);
  free(b);
  return bad == 0 ? 0 : 1;
}
