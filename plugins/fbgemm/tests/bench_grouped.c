/* Same-run speed of the grouped convolution's paths (conv-grouped.h) on the grouped 3x3
 * shapes of regnet_x_400mf, resnext50_32x4d (and one of regnet_x_1_6gf's, 24 channels
 * per group) at 224x224 (stride 1 unless named s2, padding 1, batch 1,
 * one thread): each path this ISA can take, in alternating rounds, the median of each
 * path's round medians in GMAC/s and the ratio to the GEMM path; the path fb_group_pick
 * chooses is marked. Not a test: it asserts nothing about time.
 * usage: bench_grouped [--isa NAME] [--rounds N] [--runs N] */
#include <stdio.h>
#include <time.h>

#include "../conv-grouped.h"
#include "test-helpers.h"

typedef struct {
  const char *name;
  int64_t ch, groups, hw, stride; /* hw: the input's; stride 0 means 1 */
} Shape;

static const Shape shapes[] = {
    {"regnet_x_400mf block1 s2", 32, 2, 112, 2},
    {"regnet_x_400mf block1", 32, 2, 56, 1},
    {"regnet_x_400mf block2", 64, 4, 28, 1},
    {"regnet_x_400mf block3", 160, 10, 14, 1},
    {"regnet_x_400mf block4", 400, 25, 7, 1},
    {"regnet_x_1_6gf block2", 168, 7, 28, 1},
    {"resnext50 layer1", 128, 32, 56, 1},
    {"resnext50 layer2", 256, 32, 28, 1},
    {"resnext50 layer3", 512, 32, 14, 1},
    {"resnext50 layer4", 1024, 32, 7, 1},
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
  const char *isa_name = "avx512vnni";
  int rounds = 5, runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--isa") == 0)
      isa_name = argv[i + 1];
    else if (strcmp(argv[i], "--rounds") == 0)
      rounds = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--runs") == 0)
      runs = atoi(argv[i + 1]);
  }
  FbIsa isa = FB_ISA_PACKED_C;
  const FbIsa all[] = {FB_ISA_PACKED_C, FB_ISA_AVX2, FB_ISA_AVXVNNI, FB_ISA_AVX512VNNI, FB_ISA_AMX};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(fb_isa_name(all[i]), isa_name) == 0)
      isa = all[i];
  if (!isa_available(isa)) {
    printf("SKIP %s: this CPU lacks it\n", isa_name);
    return 77;
  }
  double load[3] = {0};
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
      load[0] = -1;
    fclose(f);
  }
  printf("isa %s, one thread, %d rounds of %d runs, load average %.1f\n", isa_name, rounds, runs, load[0]);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const Shape *sh = &shapes[s];
    int64_t st = sh->stride ? sh->stride : 1, ohw = (sh->hw - 1) / st + 1;
    FbConv c = {.n = 1, .ih = sh->hw, .iw = sh->hw, .ic = sh->ch, .oc = sh->ch, .kh = 3, .kw = 3, .sh = st, .sw = st,
                .dh = 1, .dw = 1, .pt = 1, .pl = 1, .oh = ohw, .ow = ohw};
    int64_t cg = sh->ch / sh->groups, wn = c.oc * cg * 9, xn = c.ih * c.iw * c.ic, yn = c.oh * c.ow * c.oc;
    uint8_t *x = malloc((size_t)xn + 64), *y = malloc((size_t)yn);
    int8_t *w = malloc((size_t)wn);
    float *bias = malloc((size_t)c.oc * sizeof *bias), *mult = malloc((size_t)c.oc * sizeof *mult);
    for (int64_t i = 0; i < xn + 64; i++)
      x[i] = (uint8_t)rnd_in(0, 127);
    for (int64_t i = 0; i < wn; i++)
      w[i] = (int8_t)rnd_in(-127, 127);
    for (int64_t o = 0; o < c.oc; o++)
      bias[o] = 10.0f, mult[o] = 1.0f / 4096.0f;
    FbRequant rq = {.zx = 60, .zo = 5, .lo = 0, .hi = 255, .bias = bias, .mult = mult};
    FbGroupPacked p[2];
    int have[2];
    void *ws[2];
    double t[2][64];
    for (int k = 0; k < 2; k++) {
      have[k] = fb_group_pack(&p[k], isa, k ? FB_GROUP_DIRECT : FB_GROUP_GEMM, w, c.ic, c.oc, sh->groups, 3, 3,
                              &rq) == 0;
      size_t wsn = have[k] ? fb_group_workspace(&c, &p[k], 1) : 0;
      ws[k] = aligned_alloc(64, (wsn + 63) / 64 * 64 + 64);
    }
    for (int r = 0; r < rounds && r < 64; r++)
      for (int k = 0; k < 2; k++) {
        if (!have[k])
          continue;
        double v[64];
        fb_group_run(&c, &p[k], x, y, ws[k], NULL);
        for (int i = 0; i < runs && i < 64; i++) {
          double t0 = now();
          fb_group_run(&c, &p[k], x, y, ws[k], NULL);
          v[i] = now() - t0;
        }
        t[k][r] = median(v, runs < 64 ? runs : 64);
      }
    double macs = (double)(yn * cg * 9);
    FbGroupPath pick = fb_group_pick(isa, c.ic, c.oc, sh->groups, 3, 3);
    double gm[2] = {0, 0};
    for (int k = 0; k < 2; k++)
      if (have[k])
        gm[k] = macs / median(t[k], rounds < 64 ? rounds : 64) * 1e-9;
    printf("%-25s C=%-5lld groups=%-3lld %lldx%lld: gemm %7.1f GMAC/s%s", sh->name, (long long)sh->ch,
           (long long)sh->groups, (long long)sh->hw, (long long)sh->hw, gm[0], pick == FB_GROUP_GEMM ? "*" : " ");
    if (have[1])
      printf("  direct %7.1f GMAC/s%s  direct/gemm speed %.2f\n", gm[1], pick == FB_GROUP_DIRECT ? "*" : " ",
             gm[1] / gm[0]);
    else
      printf("  direct: does not fit\n");
    for (int k = 0; k < 2; k++) {
      fb_group_pack_free(&p[k]);
      free(ws[k]);
    }
    free(x), free(y), free(w), free(bias), free(mult);
  }
  printf("(* the path fb_group_pick takes)\n");
  return 0;
}
