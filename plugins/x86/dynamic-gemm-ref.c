/* The slow, obviously-correct twin of the dynamic Linear unit's GEMM (dynamic-gemm.h):
 * MatMulInteger's int32 sum of x * w with the zero point taken off as acc - zc[c] (wrapping,
 * as the fast paths' int32 lanes do), then the host's Cast, Mul and Add, one rounding
 * each. tests/test_dynamic_gemm.c compares the AMX path with it bit for bit. */
#include "dynamic-gemm.h"

void dyn_gemm_ref(const uint8_t *a, size_t lda, int64_t m, const int8_t *w, int64_t k, int64_t n,
                  const DynEpilogue *e, float *y, size_t ldy) {
  for (int64_t r = 0; r < m; r++)
    for (int64_t c = 0; c < n; c++) {
      uint32_t acc = 0;
      for (int64_t j = 0; j < k; j++)
        acc += (uint32_t)((int32_t)a[(size_t)r * lda + (size_t)j] * (int32_t)w[j * n + c]);
      volatile float p = (float)(int32_t)(acc - (uint32_t)e->zc[c]) * e->scale[e->per_column ? c : 0];
      y[(size_t)r * ldy + (size_t)c] = e->bias ? p + e->bias[c] : p;
    }
}
