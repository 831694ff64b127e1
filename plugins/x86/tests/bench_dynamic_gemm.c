/* The x86 dynamic Linear unit's own GEMMs on BERT-base's four Linear shapes (128 tokens),
 * against the machine's own tdpbusd peak measured in the same run (a register-only loop of
 * independent tdpbusd): per shape and path (AMX, AVX-512 VNNI), the time of one call (A
 * packed, then every panel with the epilogue, 1 thread) with the weights hot (the same
 * matrix every call) and cold (12 matrices in turn, 12 layers' worth, as in the model),
 * GMAC/s, and the share of the AMX peak. A benchmark, not a test: it prints, it does not
 * judge. Exits 77 without AMX-INT8. */
#define _DEFAULT_SOURCE 1 /* syscall(): arch_prctl has no libc wrapper */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../dynamic-gemm.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileConfig;

/* MACs per second of tdpbusd alone: 4 independent accumulators, operands in tiles. */
__attribute__((target("amx-tile,amx-int8"))) static double peak_macs(void) {
  TileConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++)
    cfg.rows[t] = 16, cfg.colsb[t] = 64;
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  const long iters = 2000000;
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now();
    for (long i = 0; i < iters; i++) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
    double r = (double)iters * 4 * 16 * 16 * 64 / (now() - t0);
    best = r > best ? r : best;
  }
  _tile_release();
  return best;
}

int main(void) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("amx-int8") ||
      syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    printf("skip: no AMX-INT8 here\n");
    return 77;
  }
  static const struct {
    const char *name;
    int64_t k, n;
  } shapes[] = {{"QKV", 768, 2304}, {"out-proj", 768, 768}, {"linear1", 768, 3072}, {"linear2", 3072, 768}};
  const int64_t m = 128, layers = 12;
  double peak = peak_macs();
  printf("tdpbusd peak (register-only loop): %.0f GMAC/s\n", peak * 1e-9);
  printf("%-9s %-6s %5s %5s %5s | %9s %9s | %8s %8s | %6s %6s\n", "shape", "path", "M", "K", "N", "hot ms",
         "cold ms", "hot GM/s", "cold", "hot/pk", "cold/pk");
  for (size_t s = 0; s < 2 * sizeof shapes / sizeof shapes[0]; s++) {
    int vnni = (int)(s % 2);
    void (*block)(const uint8_t *, int64_t, const DynPacked *, int64_t, int64_t, const DynEpilogue *, float *,
                  size_t) = vnni ? dyn_vnni_block : dyn_amx_block;
    int64_t k = shapes[s / 2].k, n = shapes[s / 2].n;
    DynPacked pk[12];
    int8_t *w = malloc((size_t)(k * n));
    uint8_t *x = malloc((size_t)(m * k));
    int32_t *zc = calloc((size_t)n, sizeof *zc);
    float *scale = malloc((size_t)n * sizeof *scale), *bias = malloc((size_t)n * sizeof *bias);
    float *y = malloc((size_t)(m * n) * sizeof *y);
    for (int64_t i = 0; i < k * n; i++)
      w[i] = (int8_t)(rand() % 256 - 128);
    for (int64_t i = 0; i < m * k; i++)
      x[i] = (uint8_t)(rand() % 256);
    for (int64_t c = 0; c < n; c++)
      scale[c] = 0.001f, bias[c] = 0.5f;
    for (int l = 0; l < layers; l++)
      if (dyn_pack_w(w, k, n, &pk[l])) {
        fprintf(stderr, "out of memory\n");
        return 1;
      }
    uint8_t *ap = malloc(dyn_a_bytes(m, pk[0].kp));
    DynEpilogue e = {zc, scale, 1, bias};
    double hot = 1e9, cold = 1e9;
    for (int round = 0; round < 5; round++) { /* interleaved: hot and cold alternate */
      for (int mode = 0; mode < 2; mode++) {
        const int calls = 48;
        double t0 = now();
        for (int c = 0; c < calls; c++) {
          const DynPacked *p = &pk[mode ? c % layers : 0];
          dyn_pack_a(x, (size_t)k, m, k, p->kp, 0, (m + DYN_MB - 1) / DYN_MB, ap);
          block(ap, m, p, 0, p->panels, &e, y, (size_t)n);
        }
        double t = (now() - t0) / calls;
        if (mode)
          cold = t < cold ? t : cold;
        else
          hot = t < hot ? t : hot;
      }
    }
    double macs = (double)(m * k * n);
    printf("%-9s %-6s %5lld %5lld %5lld | %9.4f %9.4f | %8.0f %8.0f | %6.2f %6.2f\n", shapes[s / 2].name,
           vnni ? "vnni" : "amx", (long long)m,
           (long long)k, (long long)n, hot * 1e3, cold * 1e3, macs / hot * 1e-9, macs / cold * 1e-9,
           macs / hot / peak, macs / cold / peak);
    for (int l = 0; l < layers; l++)
      dyn_unpack_w(&pk[l]);
    free(ap), free(w), free(x), free(zc), free(scale), free(bias), free(y);
  }
  return 0;
}
