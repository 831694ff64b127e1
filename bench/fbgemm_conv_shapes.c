/* qhost-fbgemm-shapes: the fbgemm plugin's convolution kernel (plugins/fbgemm's packed GEMM
 * with its fused im2col) on resnet18's convolution shapes, its Linear layer (M = 1) and
 * mobilenet_v2's first and pointwise ones, one thread, on the path the plugin would take
 * (AVX-512 VNNI, else AVX2; QHOST_CPU_DISABLE hides features as it does for qhost) and,
 * where the CPU and the OS allow AMX-INT8, on the AMX path too, each against this
 * machine's own peak for its multiply-add (vpdpbusd zmm, tdpbusd on tiles, vpmaddubsw +
 * vpmaddwd ymm for AVX2: bench/peak-loops.h, the loops qhost-peak runs), measured in
 * rounds interleaved with the shape's own timings (ROUNDS): a shape's hot share is the
 * median round's ratio of its best time to the peak measured just before, two rates taken
 * in the same milliseconds of one run; the cold share is of the highest of the shape's
 * peaks. The peak before and after all shapes is printed too. Each shape is timed twice:
 * with its weights hot (the same packed copy every repetition, as a kernel
 * microbenchmark sees it) and cold (repetitions rotate over enough packed copies to
 * overflow the last-level cache, as a whole-model run sees each layer's weights once, the
 * best of REPS runs). Inputs are below 128 (reduce_range), so the AVX2 path runs its fast
 * variant. An M = 1 layer also gets its share of this core's
 * read rate of its packed weights, its real roof (print_read_roof). Exit 77 without
 * AVX-512 VNNI and AVX2.
 * Usage: qhost-fbgemm-shapes [NAME-PART] (only the shapes whose name holds it). Output:
 * one line per shape and path, then one JSON object. Not installed. */
#define _DEFAULT_SOURCE 1 /* clock_gettime and strncasecmp in peak-loops.h */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "peak-loops.h"

#define REPS 15
#define COLD_BYTES (64u << 20) /* packed weight copies rotated through in the cold runs */

/* The paths this bench can time, each with the multiply-add loop it is held to. */
typedef struct {
  FbIsa isa;
  const char *peak_name;
  double (*peak_loop)(long);
  long peak_iters; /* ~1-2 ms per timing at this CPU's speed */
} Path;

static const Path paths[] = {
    {FB_ISA_AVX512VNNI, "vpdpbusd zmm", qh_peak_vnni512, 200000L},
    {FB_ISA_AMX, "tdpbusd tiles (AMX-INT8)", qh_peak_amx_int8, 20000L},
    {FB_ISA_AVX2, "vpmaddubsw+vpmaddwd+vpaddd ymm", qh_peak_madd256, 200000L},
};
enum { N_PATHS = sizeof paths / sizeof paths[0] };

/* The peak as the best of 60 short timings, like the kernels below: on a shared machine
 * one long run is preempted and reads low, which would flatter every share printed
 * against it. */
static double peak_gops(const Path *p) { return qh_peak_best(p->peak_loop, p->peak_iters, 60); }

/* AMX-INT8 in the CPU, and the OS's permission for the tile state (as the host checks). */
static int have_amx(void) {
  if (qh_peak_cpu_disabled("amxint8"))
    return 0;
  return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
         fb_amx_request_permission() == 0;
}

static int have_avx512vnni(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
         !qh_peak_cpu_disabled("avx512vnni") && !qh_peak_cpu_disabled("avx512f") &&
         !qh_peak_cpu_disabled("avx512bw") && !qh_peak_cpu_disabled("avx512vl");
}

typedef struct {
  const char *name;
  int64_t h, ic, oc, k, stride;
  int64_t batch; /* 0: 1 */
} Shape;

static const Shape shapes[] = {
    {"resnet18 conv1 7x7/2 (K=147)", 224, 3, 64, 7, 2, 0},
    {"resnet18 layer1 3x3 56x56x64", 56, 64, 64, 3, 1, 0},
    {"resnet18 layer2.0 3x3/2 56->28 64->128", 56, 64, 128, 3, 2, 0},
    {"resnet18 layer2 3x3 28x28x128", 28, 128, 128, 3, 1, 0},
    {"resnet18 layer3.0 3x3/2 28->14 128->256", 28, 128, 256, 3, 2, 0},
    {"resnet18 layer3 3x3 14x14x256", 14, 256, 256, 3, 1, 0},
    {"resnet18 layer4.0 3x3/2 14->7 256->512", 14, 256, 512, 3, 2, 0},
    {"resnet18 layer4 3x3 7x7x512", 7, 512, 512, 3, 1, 0},
    {"resnet18 layer2.0 down 1x1/2 64->128", 56, 64, 128, 1, 2, 0},
    {"resnet18 layer3.0 down 1x1/2 128->256", 28, 128, 256, 1, 2, 0},
    {"resnet18 layer4.0 down 1x1/2 256->512", 14, 256, 512, 1, 2, 0},
    {"resnet18 fc 512->1000 (M=1)", 1, 512, 1000, 1, 1, 0},
    /* the same GEMM where the weights are reused: what the kernel does with K = 512 when the
     * multiplier, not the read rate, is the roof */
    {"resnet18 fc 512->1000, batch 32 (M=32)", 1, 512, 1000, 1, 1, 32},
    {"mobilenet_v2 first 3x3/2 (K=27)", 224, 3, 32, 3, 2, 0},
    {"mobilenet_v2 classifier 1280->1000 (M=1)", 1, 1280, 1000, 1, 1, 0},
    {"mobilenet_v2 1x1 112x112 32->16", 112, 32, 16, 1, 1, 0},
    {"mobilenet_v2 1x1 56x56 24->144", 56, 24, 144, 1, 1, 0},
    {"mobilenet_v2 1x1 28x28 192->32", 28, 192, 32, 1, 1, 0},
    {"mobilenet_v2 1x1 14x14 64->384", 14, 64, 384, 1, 1, 0},
    {"mobilenet_v2 1x1 7x7 960->160", 7, 960, 160, 1, 1, 0},
    {"mobilenet_v2 1x1 7x7 320->1280", 7, 320, 1280, 1, 1, 0},
};

/* Rounds of the hot timing, each after a short peak timing (PEAK_CHUNKS chunks): a
 * shape's share is held to the peak this core gave in the same milliseconds. On these
 * shared virtual machines the multiplier's throughput moves by 10-15% from one second to
 * the next, so a peak taken once for all shapes put the same build of resnet18's layer4
 * anywhere between 72% and 88% of it in consecutive runs (session 14). */
#define ROUNDS 9
#define PEAK_CHUNKS 8

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int64_t nb_of(const Shape *sh) { return sh->batch ? sh->batch : 1; }

/* One shape on one path: hot and cold GOPS (see the top of the file), the hot share of
 * the path's peak, the median over ROUNDS rounds of (the round's best hot rate / the
 * peak measured just before it), and the highest of those peaks. */
static int run_shape(const Shape *sh, const Path *path, double *hot, double *cold, double *share,
                     double *peak_max, size_t *packed_bytes) {
  FbIsa isa = path->isa;
  int64_t pad = sh->k / 2, o = (sh->h + 2 * pad - sh->k) / sh->stride + 1;
  int64_t nb = nb_of(sh);
  FbConv c = {nb, sh->h, sh->h, sh->ic, sh->oc, sh->k, sh->k, sh->stride, sh->stride, 1, 1, pad, pad, o, o};
  int64_t K = sh->k * sh->k * sh->ic;
  int8_t *w = malloc((size_t)(sh->oc * K));
  float *bias = calloc((size_t)sh->oc, sizeof *bias), *mult = malloc((size_t)sh->oc * sizeof *mult);
  uint8_t *x = malloc((size_t)(nb * sh->h * sh->h * sh->ic) + 64), *y = malloc((size_t)(nb * o * o * sh->oc));
  if (!w || !bias || !mult || !x || !y)
    return 1;
  srand(1);
  for (int64_t i = 0; i < sh->oc * K; i++)
    w[i] = (int8_t)(rand() % 255 - 127);
  for (int64_t i = 0; i < sh->oc; i++)
    mult[i] = 0.0005f;
  for (int64_t i = 0; i < nb * sh->h * sh->h * sh->ic + 64; i++)
    x[i] = (uint8_t)(rand() % 128);
  FbRequant rq = {64, 3, 0, 255, bias, mult};
  size_t wbytes = (size_t)(sh->oc * K), copies = COLD_BYTES / wbytes + 2;
  FbPacked *pk = calloc(copies, sizeof *pk);
  if (!pk)
    return 1;
  for (size_t i = 0; i < copies; i++)
    if ((fb_kernel_rows_pay(isa, sh->ic, sh->k, sh->k, 1)
             ? fb_pack_kernel_rows(isa, &pk[i], w, sh->oc, sh->k, sh->k * sh->ic, &rq) /* as kernel.c */
             : fb_pack_for(isa, &pk[i], w, sh->oc, K, &rq)) != 0)
      return 1;
  size_t wsb = fb_conv_workspace(&c, &pk[0], 1);
  void *ws = aligned_alloc(64, (wsb + 63) / 64 * 64 + 64);
  if (!ws)
    return 1;
  double ops = 2.0 * (double)(nb * o * o * sh->oc * K), bh = 1e30, bc = 1e30, shares[ROUNDS];
  *peak_max = 0.0;
  for (int round = 0; round < ROUNDS; round++) {
    double p = qh_peak_best(path->peak_loop, path->peak_iters, PEAK_CHUNKS), b = 1e30;
    *peak_max = p > *peak_max ? p : *peak_max;
    for (int r = 0; r < REPS + 2; r++) {
      double t = qh_peak_now_s();
      fb_conv_packed(isa, &c, &pk[0], x, y, ws, NULL);
      t = qh_peak_now_s() - t;
      b = r >= 2 && t < b ? t : b;
    }
    bh = b < bh ? b : bh;
    shares[round] = ops / b / 1e9 / p;
  }
  /* the median round's share of its own peak */
  qsort(shares, ROUNDS, sizeof shares[0], cmp_double);
  *share = shares[ROUNDS / 2];
  for (size_t r = 0; r < copies + REPS; r++) {
    double t = qh_peak_now_s();
    fb_conv_packed(isa, &c, &pk[(r + 1) % copies], x, y, ws, NULL);
    t = qh_peak_now_s() - t;
    bc = r >= copies && t < bc ? t : bc; /* every copy visited once before timing */
  }
  *hot = ops / bh / 1e9, *cold = ops / bc / 1e9;
  *packed_bytes = (size_t)(pk[0].npanel * pk[0].kp * FB_NR);
  for (size_t i = 0; i < copies; i++)
    fb_pack_free(&pk[i]);
  free(pk), free(ws), free(w), free(bias), free(mult), free(x), free(y);
  return 0;
}

/* An M = 1 layer uses each weight byte once, so its roof is the rate this core reads its
 * packed weights (hot: from L2), not the multiplier: that rate, measured now on a buffer
 * of the same size with the path's vector width, and the kernel's share of it. */
static void print_read_roof(const Shape *sh, FbIsa isa, double hot_gops, size_t bytes) {
  size_t n = (bytes + 255) / 256 * 256;
  void *buf = aligned_alloc(64, n);
  if (!buf)
    return;
  memset(buf, 1, n);
  int passes = (int)(8u * 1024 * 1024 / n) + 1;
  double roof = isa == FB_ISA_AVX2 ? qh_read_roof256(buf, n, passes, 30) : qh_read_roof512(buf, n, passes, 30);
  free(buf);
  double macs = (double)(sh->ic * sh->oc), kernel = hot_gops / 2.0 * (double)bytes / macs; /* GB/s */
  printf("%-42s %-10s   weights %zu KiB hot at %.1f GB/s = %.1f%% of this core's read rate of as many bytes "
         "(%.1f GB/s)\n",
         "", fb_isa_name(isa), bytes / 1024, kernel, 100 * kernel / roof, roof);
}

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL; /* run only the shapes whose name holds it */
  __builtin_cpu_init();
  /* the plugin's choice: AVX-512 VNNI (and AMX on top of it), else AVX2; AVX-VNNI alone
   * has no peak loop here, so hiding avx512vnni measures the AVX2 path */
  int vnni = have_avx512vnni(), avx2 = __builtin_cpu_supports("avx2") && !qh_peak_cpu_disabled("avx2");
  int use[N_PATHS] = {vnni, vnni && have_amx(), !vnni && avx2};
  if (!vnni && !avx2) {
    fprintf(stderr, "qhost-fbgemm-shapes: this CPU has neither AVX-512 VNNI nor AVX2 (or both are hidden)\n");
    return 77;
  }
  double peak[N_PATHS][2] = {{0}};
  for (int i = 0; i < N_PATHS; i++)
    if (use[i])
      peak[i][0] = peak_gops(&paths[i]);
  enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };
  double hot[N_PATHS][N_SHAPES], cold[N_PATHS][N_SHAPES], share[N_PATHS][N_SHAPES], pmax[N_PATHS][N_SHAPES];
  size_t wbytes[N_PATHS][N_SHAPES];
  for (size_t s = 0; s < N_SHAPES; s++)
    for (int i = 0; i < N_PATHS; i++) {
      hot[i][s] = cold[i][s] = -1;
      if (!use[i] || (only && !strstr(shapes[s].name, only)))
        continue;
      if (run_shape(&shapes[s], &paths[i], &hot[i][s], &cold[i][s], &share[i][s], &pmax[i][s], &wbytes[i][s]))
        return 1;
    }
  for (int i = 0; i < N_PATHS; i++) {
    if (!use[i])
      continue;
    peak[i][1] = peak_gops(&paths[i]);
    printf("one-thread peak, %s: %.1f GOPS before, %.1f after (hot shares below: each round's of the peak "
           "measured just before it, the median round; cold shares: of the highest of those)\n",
           paths[i].peak_name, peak[i][0], peak[i][1]);
    peak[i][0] = peak[i][1] > peak[i][0] ? peak[i][1] : peak[i][0];
  }
  if (vnni && !use[1])
    printf("AMX-INT8: not available (CPU, OS permission or QHOST_CPU_DISABLE=amxint8)\n");
  for (size_t s = 0; s < N_SHAPES; s++)
    for (int i = 0; i < N_PATHS; i++) {
      const Shape *sh = &shapes[s];
      if (hot[i][s] < 0)
        continue;
      printf("%-42s %-10s K=%-5lld hot %7.1f GOPS (%5.1f%% of peak)  cold weights %7.1f GOPS (%5.1f%%)\n",
             sh->name, fb_isa_name(paths[i].isa), (long long)(sh->k * sh->k * sh->ic), hot[i][s],
             100 * share[i][s], cold[i][s], 100 * cold[i][s] / pmax[i][s]);
      if (sh->h == 1 && nb_of(sh) == 1)
        print_read_roof(sh, paths[i].isa, hot[i][s], wbytes[i][s]);
    }
  printf("{\"peak_gops\": {");
  for (int i = 0, first = 1; i < N_PATHS; i++)
    if (use[i])
      printf("%s\"%s\": %.1f", first ? "" : ", ", fb_isa_name(paths[i].isa), peak[i][0]), first = 0;
  printf("}, \"shapes\": [");
  for (size_t s = 0, first = 1; s < N_SHAPES; s++)
    for (int i = 0; i < N_PATHS; i++)
      if (hot[i][s] >= 0)
        printf("%s{\"name\": \"%s\", \"isa\": \"%s\", \"k\": %lld, \"hot_gops\": %.1f, \"cold_gops\": %.1f, "
               "\"hot_pct\": %.1f, \"cold_pct\": %.1f}",
               first ? "" : ", ", shapes[s].name, fb_isa_name(paths[i].isa),
               (long long)(shapes[s].k * shapes[s].k * shapes[s].ic), hot[i][s], cold[i][s],
               100 * share[i][s], 100 * cold[i][s] / pmax[i][s]),
            first = 0;
  printf("]}\n");
  return 0;
}
