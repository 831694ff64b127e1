/* example_vitis's kernels against scalar twins, element for element. Each twin works
 * on real numbers in double precision (x = xi * 2^-ipos, w = wi * 2^-wpos, ...), does
 * the op the ONNX way, then quantizes with the DPU's documented rounding:
 *   q(v) = clamp(floor(v * 2^opos + 1/2), -128, 127)
 * and for a bias finer than the accumulator, the bias is first rounded the same way to
 * the accumulator's position. All the values involved are dyadic and small, so double
 * arithmetic is exact and a twin is a plain statement of what the kernel must give.
 * Random shapes and positions; ties (x.5) occur often because shifts are small, so a
 * kernel that rounded half-even, or half away from zero, fails. Exit 0 = pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels.h"

static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;
static int failures;
static long n_compared, n_interior, n_ties;

static unsigned rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (unsigned)(rng_state >> 11);
}
static int irange(int lo, int hi) { return lo + (int)(rnd() % (unsigned)(hi - lo + 1)); }
static void fill(int8_t *p, size_t n, int lo, int hi) {
  for (size_t i = 0; i < n; i++)
    p[i] = (int8_t)irange(lo, hi);
}

static int quant(double v, int opos) {
  double s = v * ldexp(1.0, opos);
  if (s - floor(s) == 0.5)
    n_ties++;
  double r = floor(s + 0.5);
  return r < -128 ? -128 : r > 127 ? 127 : (int)r;
}

/* VITIS_ACT_CLIP's bounds as real values, set by the test that uses them */
static double twin_lo, twin_hi;

static double act_twin(double v, int act, int leaky_num) {
  if (act == VITIS_ACT_CLIP)
    return v < twin_lo ? twin_lo : v > twin_hi ? twin_hi : v;
  if (act == VITIS_ACT_RELU)
    return v < 0 ? 0 : v;
  if (act == VITIS_ACT_LEAKY)
    return v < 0 ? v * leaky_num / 256.0 : v;
  return v;
}

static void expect(const char *what, size_t i, int got, int want) {
  n_compared++;
  n_interior += want > -128 && want < 127;
  if (got != want && failures++ < 10)
    fprintf(stderr, "FAIL %s: element %zu: kernel %d, twin %d\n", what, i, got, want);
}

/* The bias as the twin sees it: its exact real value, also when it is finer than the
 * products' position (the kernel then sums at the bias's position, as the QDQ graph
 * adds the float bias exactly). */
static double bias_twin(int bi, int bpos) {
  return ldexp(bi, -bpos);
}

/* Clip bounds in units of 2^-P around the output's range, and their real values. */
static void clip_pick(int P, int opos, int64_t *lo, int64_t *hi) {
  int up = P - opos + 6 > 0 ? P - opos + 6 : 0;
  *lo = -(int64_t)irange(0, 40) * ((int64_t)1 << up) - irange(0, 3);
  *hi = (int64_t)irange(0, 40) * ((int64_t)1 << up) + irange(0, 3);
  twin_lo = ldexp((double)*lo, -P), twin_hi = ldexp((double)*hi, -P);
}

static void test_conv(int round) {
  VitisConv p = {0};
  int depthwise = round % 4 == 1, grouped = round % 4 == 2;
  p.n = irange(1, 2);
  p.group = depthwise ? irange(2, 6) : grouped ? 2 : 1;
  p.ci = depthwise ? p.group : p.group * irange(1, 4);
  p.co = depthwise ? p.group * irange(1, 2) : p.group * irange(1, 3);
  p.h = irange(3, 9), p.w = irange(3, 9);
  p.kh = irange(1, 3), p.kw = irange(1, 3);
  p.stride[0] = irange(1, 2), p.stride[1] = irange(1, 2);
  for (int i = 0; i < 4; i++)
    p.pad[i] = irange(0, 1);
  p.dil[0] = irange(1, 2), p.dil[1] = irange(1, 2);
  p.oh = vitis_conv_out_size(p.h, p.kh, p.stride[0], p.pad[0], p.pad[2], p.dil[0]);
  p.ow = vitis_conv_out_size(p.w, p.kw, p.stride[1], p.pad[1], p.pad[3], p.dil[1]);
  if (p.oh < 1 || p.ow < 1)
    return;
  int ipos = irange(2, 7), wpos = irange(4, 8), bpos = irange(3, 12), accpos = ipos + wpos;
  int kernel = (int)(p.ci / p.group * p.kh * p.kw);
  /* choose opos so the output is mostly unsaturated: acc spans about 2^(7+7) * sqrt(K) */
  int opos = accpos - (int)(log2(sqrt(kernel)) + 7) + irange(-1, 1);
  p.act = (round / 4) % 4; /* every activation with every kind of grouping */
  p.leaky_num = 26;
  int P = bpos > accpos ? bpos : accpos;
  p.acc_lshift = P - accpos;
  p.shift = P - opos + (p.act == VITIS_ACT_LEAKY ? VITIS_LEAKY_DEN_SHIFT : 0);
  clip_pick(P, opos, &p.clip_lo, &p.clip_hi);
  size_t nx = (size_t)(p.n * p.ci * p.h * p.w), nw = (size_t)(p.co * kernel);
  size_t ny = (size_t)(p.n * p.co * p.oh * p.ow);
  int8_t *x = malloc(nx), *w = malloc(nw), *y = malloc(ny), *bq = malloc((size_t)p.co);
  int64_t *bias = malloc((size_t)p.co * sizeof *bias);
  fill(x, nx, -128, 127), fill(w, nw, -128, 127), fill(bq, (size_t)p.co, -128, 127);
  for (int64_t c = 0; c < p.co; c++)
    bias[c] = vitis_shift_round(bq[c], bpos - P);
  for (int64_t b = 0; b < p.n; b++)
    for (int64_t c = 0; c < p.co; c++)
      vitis_conv_plane(&p, x, w, bias, y, b, c);
  int64_t cig = p.ci / p.group, cog = p.co / p.group;
  for (int64_t b = 0; b < p.n; b++)
    for (int64_t c = 0; c < p.co; c++)
      for (int64_t oy = 0; oy < p.oh; oy++)
        for (int64_t ox = 0; ox < p.ow; ox++) {
          double v = bias_twin(bq[c], bpos);
          for (int64_t ic = 0; ic < cig; ic++)
            for (int64_t ky = 0; ky < p.kh; ky++)
              for (int64_t kx = 0; kx < p.kw; kx++) {
                int64_t iy = oy * p.stride[0] - p.pad[0] + ky * p.dil[0];
                int64_t ix = ox * p.stride[1] - p.pad[1] + kx * p.dil[1];
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w)
                  continue;
                int64_t cin = (c / cog) * cig + ic;
                double xv = ldexp(x[((b * p.ci + cin) * p.h + iy) * p.w + ix], -ipos);
                double wv = ldexp(w[((c * cig + ic) * p.kh + ky) * p.kw + kx], -wpos);
                v += xv * wv;
              }
          size_t i = (size_t)(((b * p.co + c) * p.oh + oy) * p.ow + ox);
          expect("conv", i, y[i], quant(act_twin(v, p.act, 26), opos));
        }
  free(x), free(w), free(y), free(bq), free(bias);
}

static void test_linear(int round) {
  VitisLinear p = {.k = irange(1, 40), .n = irange(1, 12), .act = (round / 2) % 4, .leaky_num = 26};
  int rows = irange(1, 4), ipos = irange(0, 7), wpos = irange(3, 8), accpos = ipos + wpos;
  int opos = accpos - (int)(log2(sqrt((double)p.k)) + 7) + irange(-1, 1);
  int int32_bias = round % 2;
  int8_t *x = malloc((size_t)(rows * p.k)), *w = malloc((size_t)(p.n * p.k));
  int8_t *y = malloc((size_t)(rows * p.n));
  int *bi = malloc((size_t)p.n * sizeof *bi);
  int64_t *bias = malloc((size_t)p.n * sizeof *bias);
  fill(x, (size_t)(rows * p.k), -128, 127), fill(w, (size_t)(p.n * p.k), -128, 127);
  /* int32 bias at the accumulator's position (ONNX's convention), or int8 with its own */
  int bpos = int32_bias ? accpos : irange(2, 14), P = bpos > accpos ? bpos : accpos;
  p.acc_lshift = P - accpos;
  p.shift = P - opos + (p.act == VITIS_ACT_LEAKY ? VITIS_LEAKY_DEN_SHIFT : 0);
  clip_pick(P, opos, &p.clip_lo, &p.clip_hi);
  for (int64_t j = 0; j < p.n; j++) {
    bi[j] = int32_bias ? irange(-20000, 20000) : irange(-128, 127);
    bias[j] = vitis_shift_round(bi[j], bpos - P);
  }
  for (int r = 0; r < rows; r++)
    vitis_linear_row(&p, x, w, bias, y, r);
  for (int r = 0; r < rows; r++)
    for (int64_t j = 0; j < p.n; j++) {
      double v = bias_twin(bi[j], bpos);
      for (int64_t i = 0; i < p.k; i++)
        v += ldexp(x[r * p.k + i], -ipos) * ldexp(w[j * p.k + i], -wpos);
      size_t i = (size_t)(r * p.n + j);
      expect("linear", i, y[i], quant(act_twin(v, p.act, 26), opos));
    }
  free(x), free(w), free(y), free(bi), free(bias);
}

static void test_binary(int round) {
  VitisBinary p = {.op = round % 2 ? VITIS_BINARY_MUL : VITIS_BINARY_ADD, .rank = 4,
                   .relu = round % 4 == 2};
  int64_t adims[4], bdims[4];
  for (int d = 0; d < 4; d++) {
    p.dims[d] = irange(1, 4);
    adims[d] = p.dims[d];
    bdims[d] = irange(0, 2) == 0 ? 1 : p.dims[d]; /* broadcast some dims of b */
  }
  int64_t as = 1, bs = 1;
  for (int d = 3; d >= 0; d--) {
    p.a_stride[d] = adims[d] == 1 ? 0 : as;
    p.b_stride[d] = bdims[d] == 1 ? 0 : bs;
    as *= adims[d], bs *= bdims[d];
  }
  int apos = irange(1, 7), bpos = irange(1, 7), opos;
  if (p.op == VITIS_BINARY_ADD) {
    int P = apos > bpos ? apos : bpos;
    opos = (apos < bpos ? apos : bpos) - irange(0, 2);
    p.a_lshift = P - apos, p.b_lshift = P - bpos, p.shift = P - opos;
  } else {
    opos = apos + bpos - 7 + irange(-1, 1);
    p.shift = apos + bpos - opos;
  }
  size_t n = (size_t)(p.dims[0] * p.dims[1] * p.dims[2] * p.dims[3]);
  int8_t *a = malloc((size_t)as), *b = malloc((size_t)bs), *y = malloc(n);
  fill(a, (size_t)as, -128, 127), fill(b, (size_t)bs, -128, 127);
  vitis_binary(&p, a, b, y, 0, n / 2);
  vitis_binary(&p, a, b, y, n / 2, n);
  for (size_t i = 0; i < n; i++) {
    int64_t rest = (int64_t)i, ai = 0, bi = 0, am = 1, bm = 1;
    for (int d = 3; d >= 0; d--) {
      int64_t idx = rest % p.dims[d];
      rest /= p.dims[d];
      ai += (adims[d] == 1 ? 0 : idx) * am, am *= adims[d];
      bi += (bdims[d] == 1 ? 0 : idx) * bm, bm *= bdims[d];
    }
    double av = ldexp(a[ai], -apos), bv = ldexp(b[bi], -bpos);
    double v = p.op == VITIS_BINARY_ADD ? av + bv : av * bv;
    expect(p.op == VITIS_BINARY_ADD ? "add" : "mul", i, y[i], quant(p.relu && v < 0 ? 0 : v, opos));
  }
  free(a), free(b), free(y);
}

/* The DPU's average-pool factors (peers §3.2): 3x3 -> 9*7/64, 5x5 -> 25*10/256, 7x7 ->
 * 49*21/1024; the graph multiplies the average by them. */
static void test_pool(int round) {
  static const int dpu_k[][3] = {{3, 7, 6}, {5, 10, 8}, {7, 21, 10}, {2, 1, 0}};
  VitisPool p = {.is_max = round % 3 == 0, .n = irange(1, 2), .c = irange(1, 3)};
  const int *f = dpu_k[round % 4];
  int global = round % 5 == 4;
  p.h = irange(f[0], f[0] + 5), p.w = irange(f[0], f[0] + 5);
  p.kh = global ? p.h : f[0], p.kw = global ? p.w : round % 4 == 3 ? 3 : f[0];
  if (!global) {
    p.stride[0] = irange(1, 2), p.stride[1] = irange(1, 2);
    for (int i = 0; i < 4; i++)
      p.pad[i] = irange(0, 1);
  } else {
    p.stride[0] = p.stride[1] = 1;
  }
  p.count_include_pad = round % 2;
  double factor = 1.0;
  p.mult = 1, p.mult_shift = 0;
  if (!p.is_max && !global && round % 4 != 3) { /* avg pool followed by the DPU's factor */
    p.mult = (int64_t)f[0] * f[0] * f[1];
    p.mult_shift = f[2];
    factor = ldexp((double)p.mult, -p.mult_shift);
  }
  p.oh = vitis_conv_out_size(p.h, p.kh, p.stride[0], p.pad[0], p.pad[2], 1);
  p.ow = vitis_conv_out_size(p.w, p.kw, p.stride[1], p.pad[1], p.pad[3], 1);
  int ipos = irange(2, 6), opos = ipos + irange(-1, 1);
  p.shift = ipos - opos;
  size_t nx = (size_t)(p.n * p.c * p.h * p.w), ny = (size_t)(p.n * p.c * p.oh * p.ow);
  int8_t *x = malloc(nx), *y = malloc(ny);
  fill(x, nx, -128, 127);
  for (int64_t pl = 0; pl < p.n * p.c; pl++)
    vitis_pool_plane(&p, x, y, pl);
  for (int64_t pl = 0; pl < p.n * p.c; pl++)
    for (int64_t oy = 0; oy < p.oh; oy++)
      for (int64_t ox = 0; ox < p.ow; ox++) {
        double best = -1e9, sum = 0;
        int count = 0, window = 0;
        for (int64_t ky = 0; ky < p.kh; ky++)
          for (int64_t kx = 0; kx < p.kw; kx++) {
            int64_t iy = oy * p.stride[0] - p.pad[0] + ky, ix = ox * p.stride[1] - p.pad[1] + kx;
            window += iy < p.h + p.pad[2] && ix < p.w + p.pad[3];
            if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w)
              continue;
            double v = ldexp(x[(pl * p.h + iy) * p.w + ix], -ipos);
            best = v > best ? v : best;
            sum += v;
            count++;
          }
        size_t i = (size_t)((pl * p.oh + oy) * p.ow + ox);
        if (p.is_max) {
          expect("maxpool", i, y[i], quant(best, opos));
        } else {
          /* one correctly rounded division of an exact numerator: ties stay exact */
          double v = sum * factor * ldexp(1.0, opos) / (p.count_include_pad ? window : count);
          expect(global ? "globalavgpool" : "avgpool", i, y[i], quant(v, 0));
        }
      }
  free(x), free(y);
}

static void test_concat(void) {
  int n = irange(1, 4), opos = irange(2, 6);
  int64_t outer = irange(1, 3), inner = irange(1, 5), mid[4], total = 0;
  int shift[4], pos[4];
  int8_t *in[4];
  for (int i = 0; i < n; i++) {
    mid[i] = irange(1, 3), pos[i] = opos + irange(-2, 2), shift[i] = pos[i] - opos;
    in[i] = malloc((size_t)(outer * mid[i] * inner));
    fill(in[i], (size_t)(outer * mid[i] * inner), -128, 127);
    total += mid[i];
  }
  int8_t *y = malloc((size_t)(outer * total * inner));
  vitis_concat((size_t)n, (const int8_t *const *)in, mid, shift, outer, inner, y);
  for (int64_t o = 0; o < outer; o++) {
    int64_t m0 = 0;
    for (int i = 0; i < n; i++) {
      for (int64_t m = 0; m < mid[i]; m++)
        for (int64_t e = 0; e < inner; e++) {
          size_t yi = (size_t)((o * total + m0 + m) * inner + e);
          double v = ldexp(in[i][(o * mid[i] + m) * inner + e], -pos[i]);
          expect("concat", yi, y[yi], quant(v, opos));
        }
      m0 += mid[i];
    }
  }
  for (int i = 0; i < n; i++)
    free(in[i]);
  free(y);
}

static void test_unary(int round) {
  int act = round % 3, ipos = irange(2, 6), opos = ipos + irange(-1, 2);
  size_t n = 300;
  int8_t x[300], y[300];
  fill(x, n, -128, 127);
  int shift = ipos - opos + (act == VITIS_ACT_LEAKY ? VITIS_LEAKY_DEN_SHIFT : 0);
  vitis_unary(x, y, n, shift, act, 26);
  for (size_t i = 0; i < n; i++)
    expect(act == VITIS_ACT_LEAKY ? "leakyrelu" : act == VITIS_ACT_RELU ? "relu" : "flatten", i,
           y[i], quant(act_twin(ldexp(x[i], -ipos), act, 26), opos));
}

/* A bias finer than the products (the DPU's negative shift_bias) with a small shift_cut,
 * so the bias's low bits decide many roundings: the kernel must add the bias exactly,
 * as the QDQ graph does, not the bias rounded to the products' position. */
static void test_fine_bias(int round) {
  int k = irange(1, 3), ipos = irange(2, 5), wpos = irange(2, 5), accpos = ipos + wpos;
  int bpos = accpos + irange(1, 6), opos = accpos - irange(0, 2), P = bpos;
  int8_t x[3 * 16], w[3 * 8], y[16 * 8], y2[16 * 8], bq[8];
  int64_t bias[8];
  fill(x, sizeof x, -8, 8), fill(w, sizeof w, -8, 8), fill(bq, sizeof bq, -128, 127);
  for (int j = 0; j < 8; j++)
    bias[j] = vitis_shift_round(bq[j], bpos - P);
  VitisLinear lin = {.k = k, .n = 8, .acc_lshift = P - accpos, .shift = P - opos};
  /* the same as a 1x1 conv over a 16-pixel row: x is [k][16], weights [8][k] */
  VitisConv conv = {.n = 1, .ci = k, .h = 1, .w = 16, .co = 8, .kh = 1, .kw = 1, .group = 1,
                    .oh = 1, .ow = 16, .stride = {1, 1}, .dil = {1, 1},
                    .acc_lshift = P - accpos, .shift = P - opos, .act = round % 2 ? VITIS_ACT_RELU : 0};
  int8_t xt[3 * 16];
  for (int r = 0; r < 16; r++) {
    vitis_linear_row(&lin, x, w, bias, y, r);
    for (int i = 0; i < k; i++)
      xt[i * 16 + r] = x[r * k + i];
  }
  for (int c = 0; c < 8; c++)
    vitis_conv_plane(&conv, xt, w, bias, y2, 0, c);
  for (int r = 0; r < 16; r++)
    for (int j = 0; j < 8; j++) {
      double v = bias_twin(bq[j], bpos);
      for (int i = 0; i < k; i++)
        v += ldexp(x[r * k + i], -ipos) * ldexp(w[j * k + i], -wpos);
      expect("linear, finer bias", (size_t)(r * 8 + j), y[r * 8 + j], quant(v, opos));
      expect("1x1 conv, finer bias", (size_t)(j * 16 + r), y2[j * 16 + r],
             quant(act_twin(v, conv.act, 0), opos));
    }
}

/* Spot values of the rounding rule itself, written out by hand. */
static void test_rounding(void) {
  static const struct { int64_t acc; int shift; int want; } cases[] = {
      {5, 1, 3},    {-5, 1, -2},  {3, 1, 2},     {-3, 1, -1}, {-1, 1, 0},   {1, 1, 1},
      {6, 2, 2},    {-6, 2, -1},  {-7, 2, -2},   {255, 1, 127}, {-257, 1, -128}, {-256, 1, -128},
      {3, -2, 12},  {-40, -2, -128}, {0, 5, 0},  {-26, 8, 0}, {-128 * 26, 8, -13}, {-5 * 26, 8, -1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect("rounding", i, vitis_requant(cases[i].acc, cases[i].shift), cases[i].want);
}

int main(void) {
  test_rounding();
  for (int round = 0; round < 60; round++) {
    test_conv(round);
    test_linear(round);
    test_binary(round);
    test_pool(round);
    test_concat();
    test_unary(round);
    test_fine_bias(round);
  }
  printf("%ld elements compared, %ld inside (-128, 127), %ld exact ties; %d mismatches\n",
         n_compared, n_interior, n_ties, failures);
  if (n_interior < n_compared / 2 || n_ties < 100) {
    fprintf(stderr, "FAIL: the sweep is too saturated or has too few ties to prove anything\n");
    return 1;
  }
  return failures ? 1 : 0;
}
