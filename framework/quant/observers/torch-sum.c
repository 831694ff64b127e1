/* torch.sum's float32 summation order on a contiguous vector (docs/numerics.md §6.6: ATen's
 * cascade_sum -> vectorized_inner_sum -> row_sum -> multi_row_sum with 8-lane AVX2
 * vectors). HistogramObserver's search compares sums whose last bit depends on this
 * order, so parity needs it; the double-precision twin below is what one would write
 * naively and is kept for the tests that show the difference. */
#pragma GCC optimize("fp-contract=off")

#include <string.h>

#include "quant/observers/host-observers.h"

#define LANES 8
#define ILP 4
#define LEVELS 4

static int64_t ceil_log2(int64_t x) {
  if (x <= 2)
    return 1;
  uint64_t v = (uint64_t)x - 1;
  int64_t bits = 0;
  while (v) {
    bits++;
    v >>= 1;
  }
  return bits;
}

static void vadd(float *acc, const float *v) {
  for (int l = 0; l < LANES; l++)
    acc[l] = acc[l] + v[l];
}

/* Fewer elements than one vector: ATen's scalar row_sum, rows of ILP scalars (at most
 * one row here, so the level cascade never triggers), the rest into partial 0. */
static float scalar_row_sum(const float *a, size_t n) {
  float part[ILP] = {0};
  size_t rows = n / ILP;
  for (size_t i = 0; i < rows; i++)
    for (int k = 0; k < ILP; k++)
      part[k] = part[k] + a[i * ILP + (size_t)k];
  for (size_t i = rows * ILP; i < n; i++)
    part[0] = part[0] + a[i];
  for (int k = 1; k < ILP; k++)
    part[0] = part[0] + part[k];
  return part[0];
}

float qh_torch_sum_f32(const float *a, size_t n) {
  if (n < LANES)
    return scalar_row_sum(a, n);
  size_t nvec = n / LANES;
  float part[ILP][LANES];
  memset(part, 0, sizeof part);
  if (nvec > 0) {
    /* multi_row_sum over rows of ILP vectors */
    int64_t rows = (int64_t)(nvec / ILP);
    int64_t power = ceil_log2(rows) / LEVELS;
    if (power < 4)
      power = 4;
    int64_t step = INT64_C(1) << power;
    int64_t mask = step - 1;
    float acc[LEVELS][ILP][LANES];
    memset(acc, 0, sizeof acc);
    int64_t i = 0;
    while (i + step <= rows) {
      for (int64_t j = 0; j < step; j++, i++)
        for (int k = 0; k < ILP; k++)
          vadd(acc[0][k], a + ((size_t)i * ILP + (size_t)k) * LANES);
      for (int j = 1; j < LEVELS; j++) {
        for (int k = 0; k < ILP; k++) {
          vadd(acc[j][k], acc[j - 1][k]);
          memset(acc[j - 1][k], 0, sizeof acc[j - 1][k]);
        }
        if ((i & (mask << (j * power))) != 0)
          break;
      }
    }
    for (; i < rows; i++)
      for (int k = 0; k < ILP; k++)
        vadd(acc[0][k], a + ((size_t)i * ILP + (size_t)k) * LANES);
    for (int j = 1; j < LEVELS; j++)
      for (int k = 0; k < ILP; k++)
        vadd(acc[0][k], acc[j][k]);
    memcpy(part, acc[0], sizeof part);
    /* row_sum: leftover vectors into partial 0, then fold the partials */
    for (size_t v = (size_t)rows * ILP; v < nvec; v++)
      vadd(part[0], a + v * LANES);
    for (int k = 1; k < ILP; k++)
      vadd(part[0], part[k]);
  }
  float s = 0.0f;
  for (size_t t = nvec * LANES; t < n; t++)
    s = s + a[t];
  for (int l = 0; l < LANES; l++)
    s = s + part[0][l];
  return s;
}

float qh_torch_sum_f32_double(const float *a, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++)
    s += a[i];
  return (float)s;
}
