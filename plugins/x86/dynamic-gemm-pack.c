/* The packing of the x86 dynamic Linear unit's own GEMMs (dynamic-gemm.h): the weights once
 * at kernel creation, A on every run; plain C, shared by the AMX and the AVX-512 VNNI
 * paths (the layouts are the header's). */
#include <stdlib.h>
#include <string.h>

#include "dynamic-gemm.h"

int dyn_pack_w(const int8_t *w, int64_t k, int64_t n, DynPacked *out) {
  memset(out, 0, sizeof *out);
  int64_t kp = (k + DYN_KB - 1) / DYN_KB * DYN_KB, panels = (n + DYN_NR - 1) / DYN_NR;
  size_t bytes = (size_t)(panels * kp * DYN_NR);
  int8_t *b = aligned_alloc(64, bytes); /* a multiple of 64: kp * DYN_NR is */
  if (!b)
    return -1;
  memset(b, 0, bytes);
  /* panel by panel, each of w's rows read as one run of 16 bytes (a division per element
   * cost BERT's 85 MB of weights a visible share of the model's load) */
  for (int64_t p = 0; p < panels; p++) {
    int64_t c0 = p * DYN_NR, nc = n - c0 < DYN_NR ? n - c0 : DYN_NR;
    int8_t *bp = b + p * kp * DYN_NR;
    for (int64_t kk = 0; kk < k; kk++) {
      const int8_t *src = w + kk * n + c0;
      int8_t *dst = bp + (kk / 4) * 64 + kk % 4;
      for (int64_t c = 0; c < nc; c++)
        dst[c * 4] = src[c];
    }
  }
  *out = (DynPacked){.k = k, .n = n, .kp = kp, .panels = panels, .b = b};
  return 0;
}

void dyn_unpack_w(DynPacked *pk) {
  free(pk->b);
  pk->b = NULL;
}

void dyn_pack_a(const uint8_t *x, size_t ldx, int64_t m, int64_t k, int64_t kp, int64_t rb0, int64_t rb1,
                uint8_t *out) {
  int64_t kc = kp / DYN_KB;
  for (int64_t rb = rb0; rb < rb1; rb++)
    for (int r = 0; r < DYN_MB; r++) {
      int64_t row = rb * DYN_MB + r;
      uint8_t *o = out + (size_t)(rb * kc * DYN_MB + r) * DYN_KB;
      for (int64_t q = 0; q < kc; q++, o += DYN_MB * DYN_KB) {
        int64_t have = row < m ? (k - q * DYN_KB < DYN_KB ? k - q * DYN_KB : DYN_KB) : 0;
        if (have == DYN_KB) {
          memcpy(o, x + (size_t)row * ldx + (size_t)(q * DYN_KB), DYN_KB);
        } else {
          memset(o, 0, DYN_KB);
          if (have > 0)
            memcpy(o, x + (size_t)row * ldx + (size_t)(q * DYN_KB), (size_t)have);
        }
      }
    }
}
