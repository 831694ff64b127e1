/* The fbgemm plugin's grouped convolutions (conv-grouped.h) against their scalar twin,
 * fb_group_ref, bit for bit, without the host: random grouped shapes (1 to 64 input
 * channels per group, output channels per group a multiple of 16 among them, odd counts
 * and groups, channel multipliers, kernels 1x1 to 5x5, strides, dilations, asymmetric
 * padding, M = 1, zero points from 0 to the top of the input's range, inputs up to 127
 * and up to 255, output ranges [0, 255] and [0, 127], fused Relu, multipliers that make
 * exact .5 ties), each on every path that can take it (GEMM always, direct where the
 * lanes' dwords fit a vector, multiplier for one input channel per group) on every ISA
 * this CPU has, on one worker, on a 3-worker pool that runs its tasks in reverse and on
 * two real threads. The input is allocated to its last byte plus the 3 bytes
 * conv-grouped.h promises may be read; the output's next byte must stay untouched. A path the
 * CPU lacks (or QHOST_CPU_DISABLE hides) is skipped; with --isa naming it the test exits
 * 77 (CTest's skip).
 * usage: test_grouped [--isa NAME] [--cases N] [--seed S] */
#include <stdio.h>

#include "../conv-grouped.h"
#include "test-helpers.h"

static int path_cases[3];

static int check(const FbConv *c, int64_t groups, const uint8_t *x, const int8_t *w, const FbRequant *rq,
                 const uint8_t *ref, uint8_t *out, FbIsa isa, FbGroupPath path, int idx) {
  FbGroupPacked p;
  int r = fb_group_pack(&p, isa, path, w, c->ic, c->oc, groups, c->kh, c->kw, rq);
  if (r == -2)
    return 0;
  if (r) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  path_cases[path]++;
  int64_t yn = c->n * c->oh * c->ow * c->oc;
  int bad = 0;
  for (int threads = 0; threads < 3 && !bad; threads++) {
    FbPool pool = {.run = threads == 1 ? reverse_pool : two_thread_pool, .n_workers = threads == 1 ? 3 : 2};
    size_t wsn = fb_group_workspace(c, &p, threads ? pool.n_workers : 1);
    uint8_t *ws = aligned_alloc(64, (wsn + 63) / 64 * 64 + 64);
    memset(out, 0xA5, (size_t)yn + 1);
    fb_group_run(c, &p, x, out, ws, threads ? &pool : NULL);
    for (int64_t i = 0; i < yn && !bad; i++)
      if (out[i] != ref[i]) {
        fprintf(stderr,
                "case %d %s/%s%s: n=%lld ih=%lld iw=%lld ic=%lld oc=%lld groups=%lld k=%lldx%lld s=%lld,%lld "
                "d=%lld,%lld p=%lld,%lld zx=%d zo=%d lo=%d hi=%d: y[%lld] = %d, twin %d\n",
                idx, fb_isa_name(isa), fb_group_path_name(path),
                threads == 1 ? " (3 workers)" : threads ? " (2 threads)" : "", (long long)c->n,
                (long long)c->ih, (long long)c->iw, (long long)c->ic, (long long)c->oc, (long long)groups,
                (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw, (long long)c->dh,
                (long long)c->dw, (long long)c->pt, (long long)c->pl, rq->zx, rq->zo, rq->lo, rq->hi,
                (long long)i, out[i], ref[i]);
        bad = 1;
      }
    if (!bad && out[yn] != 0xA5) {
      fprintf(stderr, "case %d %s/%s: wrote past the output\n", idx, fb_isa_name(isa), fb_group_path_name(path));
      bad = 1;
    }
    free(ws);
  }
  fb_group_pack_free(&p);
  return bad;
}

/* One random case on every path and ISA; returns 0 when all agree with the twin. */
static int run_case(int idx, const FbIsa *isas, size_t n_isas) {
  FbConv c = {0};
  int x_max = rnd() % 2 ? 255 : 127;
  int64_t groups = rnd() % 3 == 0 ? rnd_in(2, 3) : rnd_in(2, 40);
  int64_t cg, og;
  switch (rnd() % 6) {
  case 5: /* whole 16-lane blocks per group (AVX-512's broadcast rows), any input count */
    cg = rnd_in(1, 64), og = 16 * rnd_in(1, 2);
    break;
  case 0: /* depthwise with a channel multiplier */
    cg = 1, og = rnd_in(2, 4);
    break;
  case 1: /* FBGEMM's groupwise sizes */
    cg = (int64_t[]){2, 4, 8, 16}[rnd() % 4], og = rnd() % 2 ? cg : rnd_in(1, 16);
    break;
  case 2: /* many channels per group: the GEMM path's panels */
    cg = rnd_in(17, 40), og = rnd_in(1, 40);
    break;
  default:
    cg = rnd_in(1, 12), og = rnd_in(1, 12);
  }
  if (groups * (cg + og) > 800)
    groups = 800 / (cg + og) < 2 ? 2 : 800 / (cg + og);
  c.ic = groups * cg, c.oc = groups * og;
  int m1 = rnd() % 8 == 0; /* a single output pixel (M = 1) */
  c.n = m1 ? 1 : rnd_in(1, 2);
  c.kh = rnd() % 3 == 0 ? 3 : rnd_in(1, 5);
  c.kw = rnd() % 3 == 0 ? c.kh : rnd_in(1, 5);
  c.sh = rnd_in(1, 3), c.sw = rnd_in(1, 3);
  c.dh = rnd() % 3 == 0 ? 2 : 1, c.dw = rnd() % 3 == 0 ? 2 : 1;
  if (rnd() % 3 == 0)
    c.sh = c.sw = c.dh = c.dw = 1;
  c.ih = m1 ? c.kh : rnd_in(1, 11), c.iw = m1 ? c.kw : rnd_in(1, 11);
  int64_t pb = 0, pr = 0;
  if (!m1 && rnd() % 3)
    c.pt = rnd_in(0, c.kh), c.pl = rnd_in(0, c.kw), pb = rnd_in(0, c.kh), pr = rnd_in(0, c.kw);
  int64_t eh = c.ih + c.pt + pb - ((c.kh - 1) * c.dh + 1), ew = c.iw + c.pl + pr - ((c.kw - 1) * c.dw + 1);
  if (eh < 0 || ew < 0) {
    c.kh = c.kw = 1, c.dh = c.dw = 1;
    eh = c.ih + c.pt + pb - 1, ew = c.iw + c.pl + pr - 1;
  }
  c.oh = m1 ? 1 : eh / c.sh + 1, c.ow = m1 ? 1 : ew / c.sw + 1;
  int64_t taps = c.kh * c.kw, xn = c.n * c.ih * c.iw * c.ic, yn = c.n * c.oh * c.ow * c.oc;
  int64_t wn = c.oc * cg * taps;

  uint8_t *x = malloc((size_t)xn + 3); /* the 3 bytes conv-grouped.h may read past the end */
  int8_t *w = malloc((size_t)wn);
  float *bias = malloc((size_t)c.oc * sizeof *bias), *mult = malloc((size_t)c.oc * sizeof *mult);
  uint8_t *ref = malloc((size_t)yn + 1), *out = malloc((size_t)yn + 1);
  FbRequant rq = {.zx = (int32_t)rnd_in(0, x_max), .bias = bias, .mult = mult};
  if (rnd() % 4 == 0)
    rq.zx = rnd() % 2 ? 0 : x_max;
  for (int64_t i = 0; i < xn + 3; i++)
    x[i] = (uint8_t)(i < xn ? rnd_in(0, x_max) : 255);
  int wide = rnd() % 2;
  for (int64_t i = 0; i < wn; i++)
    w[i] = (int8_t)(wide ? rnd_in(-128, 127) : rnd_in(-10, 10));
  int out_max = rnd() % 2 ? 255 : 127, relu = rnd() % 2;
  rq.zo = (int32_t)rnd_in(0, out_max);
  rq.lo = relu ? rq.zo : 0, rq.hi = out_max;
  int ties = rnd() % 4 == 0;
  int64_t k = cg * taps;
  float spread = 1.0f / (float)((wide ? 128 : 10) * (x_max / 2 + 1)) / (float)(k < 4 ? 1 : k / 4);
  for (int64_t o = 0; o < c.oc; o++) {
    if (ties) {
      mult[o] = rnd() % 2 ? 0.5f : 0.25f;
      bias[o] = (float)rnd_in(-50, 50);
    } else {
      mult[o] = spread * (float)rnd_in(1, 2000) / 100.0f;
      bias[o] = rnd() % 4 == 0 ? 0.0f : (float)rnd_in(-100000, 100000) / 100.0f;
    }
  }
  fb_group_ref(&c, groups, x, w, &rq, ref);
  int bad = 0;
  for (size_t t = 0; t < n_isas && !bad; t++)
    for (int path = FB_GROUP_GEMM; path <= FB_GROUP_MULTIPLIER && !bad; path++)
      bad = check(&c, groups, x, w, &rq, ref, out, isas[t], (FbGroupPath)path, idx);
  free(x), free(w), free(bias), free(mult), free(ref), free(out);
  return bad;
}

/* The twin on a hand-checked case: two groups of one input channel, two outputs each
 * (a channel multiplier of 2), 1x2 kernel with a padded tap, a tie to even. */
static int twin_sanity(void) {
  FbConv c = {.n = 1, .ih = 1, .iw = 1, .ic = 2, .oc = 4, .kh = 1, .kw = 2, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
              .pt = 0, .pl = 1, .oh = 1, .ow = 1};
  const uint8_t x[2 + 3] = {13, 20};
  const int8_t w[8] = {5, 1, 5, 2, 5, 3, 5, -1};
  float bias[4] = {0, 0, 0, 0.5f}, mult[4] = {0.5f, 0.5f, 0.5f, 1.0f};
  FbRequant rq = {.zx = 10, .zo = 100, .lo = 0, .hi = 255, .bias = bias, .mult = mult};
  uint8_t y[4];
  fb_group_ref(&c, 2, x, w, &rq, y);
  /* (13-10)*1 = 3 -> 1.5 -> 2; 3*2 = 6 -> 3; (20-10)*3 = 30 -> 15; -10 + 0.5 -> -9.5 -> -10 */
  if (y[0] != 102 || y[1] != 103 || y[2] != 115 || y[3] != 90) {
    fprintf(stderr, "grouped twin: got %d %d %d %d, want 102 103 115 90\n", y[0], y[1], y[2], y[3]);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int cases = 300;
  const char *only = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--isa") == 0)
      only = argv[i + 1];
    else if (strcmp(argv[i], "--cases") == 0)
      cases = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--seed") == 0)
      rng_state = strtoull(argv[i + 1], NULL, 0) | 1;
    else {
      fprintf(stderr, "usage: %s [--isa NAME] [--cases N] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  if (twin_sanity())
    return 1;
  const FbIsa all[] = {FB_ISA_PACKED_C, FB_ISA_AVX2, FB_ISA_AVXVNNI, FB_ISA_AVX512VNNI, FB_ISA_AMX};
  FbIsa isas[5];
  size_t n = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    if (only && strcmp(only, fb_isa_name(all[i])) != 0)
      continue;
    if (!isa_available(all[i])) {
      printf("SKIP %s: this CPU lacks it (or QHOST_CPU_DISABLE hides it)\n", fb_isa_name(all[i]));
      if (only)
        return 77;
      continue;
    }
    isas[n++] = all[i];
  }
  if (n == 0) {
    fprintf(stderr, "unknown --isa %s\n", only ? only : "");
    return 2;
  }
  int failed = 0;
  for (int i = 0; i < cases; i++)
    failed += run_case(i, isas, n);
  printf("%d random grouped cases on %zu ISA(s): %d gemm, %d direct, %d multiplier runs; %s\n", cases, n,
         path_cases[FB_GROUP_GEMM], path_cases[FB_GROUP_DIRECT], path_cases[FB_GROUP_MULTIPLIER],
         failed ? "some differ" : "all bit-exact with the twin");
  if (cases >= 100 && (!path_cases[FB_GROUP_DIRECT] || !path_cases[FB_GROUP_MULTIPLIER])) {
    fprintf(stderr, "a path was never reached\n");
    return 1;
  }
  if (failed)
    fprintf(stderr, "%d of %d cases differ from the grouped twin\n", failed, cases);
  return failed ? 1 : 0;
}
