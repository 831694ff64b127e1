/* qhost-fbgemm-shapes: the fbgemm plugin's convolution kernel (plugins/fbgemm's packed GEMM
 * with its fused im2col) on resnet18's convolution shapes and mobilenet_v2's first one,
 * one thread, on the AVX-512 VNNI path and, where the CPU and the OS allow AMX-INT8, on
 * the AMX path, each against this machine's own peak for it measured in the same process
 * before and after (vpdpbusd zmm, and tdpbusd on tiles; the higher counts; each the best
 * of 60 short runs, as each shape is the best of REPS), so that each shape's share of the
 * peak is a ratio from one run. Each shape is timed twice: with its weights hot
 * (the same packed copy every repetition, as a kernel microbenchmark sees it) and cold
 * (repetitions rotate over enough packed copies to overflow the last-level cache, as a
 * whole-model run sees each layer's weights once), the best of REPS runs each. Exit 77
 * without AVX-512 VNNI. Usage: qhost-fbgemm-shapes [NAME-PART] (only the shapes whose name
 * holds it). Output: one line per shape and path, then one JSON object. Not installed. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

#define REPS 15
#define COLD_BYTES (64u << 20) /* packed weight copies rotated through in the cold runs */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile int32_t sink;

/* The vpdpbusd zmm loop of bench/peak.c (16 independent accumulators), but timed as the
 * best of many short runs, like the kernels below: on a shared machine one long run is
 * preempted and reads low, which would flatter every share printed against it. */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double peak_once(long iters) {
  __m512i acc[16];
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_epi32(i);
  double t = now_s();
  for (long it = 0; it < iters; it++) {
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  t = now_s() - t;
  __m512i s = acc[0];
  _Pragma("GCC unroll 16") for (int i = 1; i < 16; i++) s = _mm512_add_epi32(s, acc[i]);
  sink = _mm512_reduce_add_epi32(s);
  return 2.0 * (double)iters * 16 * 64 / t / 1e9;
}

/* tdpbusd on tiles already loaded: four independent 16x16 int32 accumulators (tiles 0-3)
 * from two A (4, 5) and two B (6, 7) tiles, each tdpbusd 16 x 16 x 64 multiply-adds; no
 * memory traffic in the loop, so it is the tile unit's own rate. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileConfig;

__attribute__((target("amx-tile,amx-int8"))) static double amx_peak_once(long iters) {
  TileConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++)
    cfg.rows[t] = 16, cfg.colsb[t] = 64;
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
  static _Alignas(64) uint8_t buf[1024];
  memset(buf, 1, sizeof buf);
  _tile_loadd(4, buf, 64);
  _tile_loadd(5, buf, 64);
  _tile_loadd(6, buf, 64);
  _tile_loadd(7, buf, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  double t = now_s();
  for (long it = 0; it < iters; it++) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  t = now_s() - t;
  _tile_stored(0, buf, 64);
  sink = ((int32_t *)buf)[0];
  _tile_release();
  return 2.0 * (double)iters * 4 * 16 * 16 * 64 / t / 1e9;
}

static double peak_gops(int amx) {
  double best = 0;
  for (int r = 0; r < 60; r++) { /* 60 runs of ~2 ms each at this CPU's speed */
    double g = amx ? amx_peak_once(20000L) : peak_once(200000L);
    best = g > best ? g : best;
  }
  return best;
}

/* AMX-INT8 in the CPU, and the OS's permission for the tile state (as the host checks). */
static int have_amx(void) {
  const char *off = getenv("QHOST_CPU_DISABLE");
  if (off && strstr(off, "amxint8"))
    return 0;
  return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
         fb_amx_request_permission() == 0;
}

typedef struct {
  const char *name;
  int64_t h, ic, oc, k, stride;
} Shape;

static const Shape shapes[] = {
    {"resnet18 conv1 7x7/2 (K=147)", 224, 3, 64, 7, 2},
    {"resnet18 layer1 3x3 56x56x64", 56, 64, 64, 3, 1},
    {"resnet18 layer2.0 3x3/2 56->28 64->128", 56, 64, 128, 3, 2},
    {"resnet18 layer2 3x3 28x28x128", 28, 128, 128, 3, 1},
    {"resnet18 layer3.0 3x3/2 28->14 128->256", 28, 128, 256, 3, 2},
    {"resnet18 layer3 3x3 14x14x256", 14, 256, 256, 3, 1},
    {"resnet18 layer4.0 3x3/2 14->7 256->512", 14, 256, 512, 3, 2},
    {"resnet18 layer4 3x3 7x7x512", 7, 512, 512, 3, 1},
    {"resnet18 layer2.0 down 1x1/2 64->128", 56, 64, 128, 1, 2},
    {"resnet18 layer3.0 down 1x1/2 128->256", 28, 128, 256, 1, 2},
    {"resnet18 layer4.0 down 1x1/2 256->512", 14, 256, 512, 1, 2},
    {"mobilenet_v2 first 3x3/2 (K=27)", 224, 3, 32, 3, 2},
    {"mobilenet_v2 1x1 112x112 32->16", 112, 32, 16, 1, 1},
    {"mobilenet_v2 1x1 56x56 24->144", 56, 24, 144, 1, 1},
    {"mobilenet_v2 1x1 28x28 192->32", 28, 192, 32, 1, 1},
    {"mobilenet_v2 1x1 14x14 64->384", 14, 64, 384, 1, 1},
    {"mobilenet_v2 1x1 7x7 960->160", 7, 960, 160, 1, 1},
    {"mobilenet_v2 1x1 7x7 320->1280", 7, 320, 1280, 1, 1},
};

/* One shape on one path: hot and cold GOPS (see the top of the file). */
static int run_shape(const Shape *sh, FbIsa isa, double *hot, double *cold) {
  int64_t pad = sh->k / 2, o = (sh->h + 2 * pad - sh->k) / sh->stride + 1;
  FbConv c = {1, sh->h, sh->h, sh->ic, sh->oc, sh->k, sh->k, sh->stride, sh->stride, 1, 1, pad, pad, o, o};
  int64_t K = sh->k * sh->k * sh->ic;
  int8_t *w = malloc((size_t)(sh->oc * K));
  float *bias = calloc((size_t)sh->oc, sizeof *bias), *mult = malloc((size_t)sh->oc * sizeof *mult);
  uint8_t *x = malloc((size_t)(sh->h * sh->h * sh->ic) + 64), *y = malloc((size_t)(o * o * sh->oc));
  if (!w || !bias || !mult || !x || !y)
    return 1;
  srand(1);
  for (int64_t i = 0; i < sh->oc * K; i++)
    w[i] = (int8_t)(rand() % 255 - 127);
  for (int64_t i = 0; i < sh->oc; i++)
    mult[i] = 0.0005f;
  for (int64_t i = 0; i < sh->h * sh->h * sh->ic + 64; i++)
    x[i] = (uint8_t)(rand() % 128);
  FbRequant rq = {64, 3, 0, 255, bias, mult};
  size_t wbytes = (size_t)(sh->oc * K), copies = COLD_BYTES / wbytes + 2;
  FbPacked *pk = calloc(copies, sizeof *pk);
  if (!pk)
    return 1;
  for (size_t i = 0; i < copies; i++)
    if (fb_pack_for(isa, &pk[i], w, sh->oc, K, &rq) != 0)
      return 1;
  size_t wsb = fb_conv_workspace(&c, &pk[0], 1);
  void *ws = aligned_alloc(64, (wsb + 63) / 64 * 64 + 64);
  if (!ws)
    return 1;
  double ops = 2.0 * (double)(o * o * sh->oc * K), bh = 1e30, bc = 1e30;
  for (int r = 0; r < REPS + 2; r++) {
    double t = now_s();
    fb_conv_packed(isa, &c, &pk[0], x, y, ws, NULL);
    t = now_s() - t;
    bh = r >= 2 && t < bh ? t : bh;
  }
  for (size_t r = 0; r < copies + REPS; r++) {
    double t = now_s();
    fb_conv_packed(isa, &c, &pk[(r + 1) % copies], x, y, ws, NULL);
    t = now_s() - t;
    bc = r >= copies && t < bc ? t : bc; /* every copy visited once before timing */
  }
  *hot = ops / bh / 1e9, *cold = ops / bc / 1e9;
  for (size_t i = 0; i < copies; i++)
    fb_pack_free(&pk[i]);
  free(pk), free(ws), free(w), free(bias), free(mult), free(x), free(y);
  return 0;
}

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL; /* run only the shapes whose name holds it */
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni")) {
    fprintf(stderr, "qhost-fbgemm-shapes: this CPU has no AVX-512 VNNI\n");
    return 77;
  }
  int amx = have_amx();
  const FbIsa isas[2] = {FB_ISA_AVX512VNNI, FB_ISA_AMX};
  int n_isas = amx ? 2 : 1;
  double peak[2][2] = {{0}};
  for (int i = 0; i < n_isas; i++)
    peak[i][0] = peak_gops(i);
  enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };
  double hot[2][N_SHAPES], cold[2][N_SHAPES];
  for (size_t s = 0; s < N_SHAPES; s++)
    for (int i = 0; i < n_isas; i++) {
      hot[i][s] = cold[i][s] = -1;
      if (only && !strstr(shapes[s].name, only))
        continue;
      if (run_shape(&shapes[s], isas[i], &hot[i][s], &cold[i][s]))
        return 1;
    }
  for (int i = 0; i < n_isas; i++) {
    peak[i][1] = peak_gops(i);
    printf("one-thread peak, %s: %.1f GOPS before, %.1f after (shares below: of the higher)\n",
           i ? "tdpbusd tiles (AMX-INT8)" : "vpdpbusd zmm", peak[i][0], peak[i][1]);
    peak[i][0] = peak[i][1] > peak[i][0] ? peak[i][1] : peak[i][0];
  }
  if (!amx)
    printf("AMX-INT8: not available (CPU, OS permission or QHOST_CPU_DISABLE=amxint8)\n");
  for (size_t s = 0; s < N_SHAPES; s++)
    for (int i = 0; i < n_isas; i++) {
      const Shape *sh = &shapes[s];
      if (hot[i][s] < 0)
        continue;
      printf("%-42s %-10s K=%-5lld hot %7.1f GOPS (%5.1f%% of peak)  cold weights %7.1f GOPS (%5.1f%%)\n",
             sh->name, fb_isa_name(isas[i]), (long long)(sh->k * sh->k * sh->ic), hot[i][s],
             100 * hot[i][s] / peak[i][0], cold[i][s], 100 * cold[i][s] / peak[i][0]);
    }
  printf("{\"peak_gops\": {\"avx512vnni\": %.1f, \"amx\": %.1f}, \"shapes\": [", peak[0][0], amx ? peak[1][0] : 0.0);
  for (size_t s = 0, first = 1; s < N_SHAPES; s++)
    for (int i = 0; i < n_isas; i++)
      if (hot[i][s] >= 0)
        printf("%s{\"name\": \"%s\", \"isa\": \"%s\", \"hot_gops\": %.1f, \"cold_gops\": %.1f, "
               "\"hot_pct\": %.1f, \"cold_pct\": %.1f}",
               first ? "" : ", ", shapes[s].name, fb_isa_name(isas[i]), hot[i][s], cold[i][s],
               100 * hot[i][s] / peak[i][0], 100 * cold[i][s] / peak[i][0]),
            first = 0;
  printf("]}\n");
  return 0;
}
