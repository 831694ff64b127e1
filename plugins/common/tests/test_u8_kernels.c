/* The shared uint8 helper kernels (plugins/common/u8-kernels.c, u8-layout.c) against their
 * scalar twins, without the host: the per-channel broadcasting and the same-shape Add /
 * Mul clones of each instruction set (given as --isa, exit 77 where the CPU lacks it) over
 * random shapes, qparams and data, byte for byte; MaxPool rows (SSE2 and plain) against a
 * direct window max; the activation tables against a direct
 * evaluation of the same formula in double-checked float (monotonic where the op is);
 * and (--isa vbmi) the AVX-512 VBMI table lookup against its scalar twin. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../u8-kernels.h"
#include "../u8-layout.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 16);
}
static float rnd_scale(void) { return 0.001f + (float)(rnd() % 100000) * 1e-6f; }

static int binary_cases(int isa) {
  size_t fails = 0, checked = 0;
  for (int t = 0; t < 400; t++) {
    QhU8Binary p = {.mul = t & 1, .relu = (t >> 1) & 1, .sa = rnd_scale(), .sb = rnd_scale(),
                    .so = rnd_scale(), .za = (int32_t)(rnd() % 256), .zb = (int32_t)(rnd() % 256),
                    .zo = (int32_t)(rnd() % 256)};
    if (p.mul)
      p.so *= 0.05f; /* products are small: an output scale that spreads them over many steps */
    /* channel counts across the vector widths and past the stack block (512) */
    static const size_t cs[] = {1, 3, 8, 15, 16, 17, 31, 64, 72, 120, 513, 960, 1100};
    size_t C = cs[rnd() % (sizeof cs / sizeof cs[0])], P = 1 + rnd() % 37;
    uint8_t *a = malloc(P * C), *b = malloc(C), *y0 = malloc(P * C), *y1 = malloc(P * C);
    if (!a || !b || !y0 || !y1)
      return 1;
    for (size_t i = 0; i < P * C; i++)
      a[i] = (uint8_t)rnd();
    for (size_t i = 0; i < C; i++)
      b[i] = (uint8_t)rnd();
    qh_u8_binary_channels_ref(&p, a, b, y0, P, C);
    qh_u8_binary_channels(&p, isa, a, b, y1, P, C);
    for (size_t i = 0; i < P * C; i++) {
      if (y0[i] != y1[i] && fails++ < 5)
        fprintf(stderr, "binary %s%s P=%zu C=%zu at %zu: twin %u, isa %d gives %u\n", p.mul ? "Mul" : "Add",
                p.relu ? "+Relu" : "", P, C, i, y0[i], isa, y1[i]);
    }
    checked += P * C;
    /* the twin itself against the formula written out once more */
    size_t i = rnd() % (P * C), c = i % C;
    float fa = ((float)a[i] - (float)p.za) * p.sa, fb = ((float)b[c] - (float)p.zb) * p.sb;
    float v = p.mul ? fa * fb : fa + fb;
    if (p.relu && v < 0.0f)
      v = 0.0f;
    float r = v / p.so;
    r = r < (float)-p.zo ? (float)-p.zo : r > (float)(255 - p.zo) ? (float)(255 - p.zo) : r;
    long q = lrintf(r) + p.zo;
    if (q != y0[i] && fails++ < 5)
      fprintf(stderr, "twin differs from the formula: %ld against %u\n", q, y0[i]);
    free(a), free(b), free(y0), free(y1);
  }
  printf("binary_channels isa %d: %zu bytes compared, %zu differ\n", isa, checked, fails);
  return fails != 0;
}

/* Same-shape Add / Mul: the clone for isa against the scalar twin, byte for byte, over
 * lengths across the vector widths. */
static int same_cases(int isa) {
  size_t fails = 0, checked = 0;
  for (int t = 0; t < 400; t++) {
    QhU8Binary p = {.mul = t & 1, .relu = (t >> 1) & 1, .sa = rnd_scale(), .sb = rnd_scale(),
                    .so = rnd_scale(), .za = (int32_t)(rnd() % 256), .zb = (int32_t)(rnd() % 256),
                    .zo = (int32_t)(rnd() % 256)};
    if (p.mul)
      p.so *= 0.05f;
    size_t n = 1 + rnd() % 300;
    uint8_t *a = malloc(n), *b = malloc(n), *y0 = malloc(n), *y1 = malloc(n);
    if (!a || !b || !y0 || !y1)
      return 1;
    for (size_t i = 0; i < n; i++)
      a[i] = (uint8_t)rnd(), b[i] = (uint8_t)rnd();
    qh_u8_binary_same_ref(&p, a, b, y0, n);
    qh_u8_binary_same(&p, isa, a, b, y1, n);
    for (size_t i = 0; i < n; i++)
      if (y0[i] != y1[i] && fails++ < 5)
        fprintf(stderr, "same-shape %s%s n=%zu at %zu: twin %u, isa %d gives %u\n", p.mul ? "Mul" : "Add",
                p.relu ? "+Relu" : "", n, i, y0[i], isa, y1[i]);
    /* the twin against the formula written out once more */
    size_t i = rnd() % n;
    float fa = ((float)a[i] - (float)p.za) * p.sa, fb = ((float)b[i] - (float)p.zb) * p.sb;
    float v = p.mul ? fa * fb : fa + fb;
    if (p.relu && v < 0.0f)
      v = 0.0f;
    float r = v / p.so;
    r = r < (float)-p.zo ? (float)-p.zo : r > (float)(255 - p.zo) ? (float)(255 - p.zo) : r;
    if (lrintf(r) + p.zo != y0[i] && fails++ < 5)
      fprintf(stderr, "same-shape twin differs from the formula at %zu\n", i);
    checked += n;
    free(a), free(b), free(y0), free(y1);
  }
  printf("binary_same isa %d: %zu bytes compared, %zu differ\n", isa, checked, fails);
  return fails != 0;
}

/* MaxPool rows (u8-layout.c): the SSE2 loop against its plain twin and against a direct
 * max over the window, random windows, strides, pads (windows wholly in the padding
 * included) and channel counts across the 16-byte vector. */
static int maxpool_cases(void) {
  size_t fails = 0, checked = 0;
  for (int t = 0; t < 300; t++) {
    QhU8Pool p = {.kind = QH_U8_POOL_MAX, .h = 1 + rnd() % 9, .w = 1 + rnd() % 9, .c = 1 + rnd() % 40,
                  .kh = 1 + rnd() % 4, .kw = 1 + rnd() % 4, .sh = 1 + rnd() % 3, .sw = 1 + rnd() % 3};
    for (int i = 0; i < 4; i++)
      p.pad[i] = rnd() % 5;
    int64_t eh = p.h + p.pad[0] + p.pad[2] - p.kh, ew = p.w + p.pad[1] + p.pad[3] - p.kw;
    if (eh < 0 || ew < 0)
      continue;
    p.oh = eh / p.sh + 1, p.ow = ew / p.sw + 1;
    size_t xn = (size_t)(p.h * p.w * p.c), yn = (size_t)(p.ow * p.c);
    uint8_t *x = malloc(xn), *y0 = malloc(yn), *y1 = malloc(yn);
    if (!x || !y0 || !y1)
      return 1;
    for (size_t i = 0; i < xn; i++)
      x[i] = (uint8_t)rnd();
    for (int64_t oy = 0; oy < p.oh; oy++) {
      QhU8Pool q = p;
      q.plain = 1;
      qh_u8_pool_row(&q, x, oy, y0);
      qh_u8_pool_row(&p, x, oy, y1);
      for (int64_t ox = 0; ox < p.ow; ox++)
        for (int64_t c = 0; c < p.c; c++) {
          int m = 0; /* no tap: 0, the host's -FLT_MAX quantized */
          for (int64_t ky = 0; ky < p.kh; ky++)
            for (int64_t kx = 0; kx < p.kw; kx++) {
              int64_t iy = oy * p.sh - p.pad[0] + ky, ix = ox * p.sw - p.pad[1] + kx;
              if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w && x[(iy * p.w + ix) * p.c + c] > m)
                m = x[(iy * p.w + ix) * p.c + c];
            }
          size_t i = (size_t)(ox * p.c + c);
          if ((y0[i] != m || y1[i] != m) && fails++ < 5)
            fprintf(stderr, "maxpool row %lld px %lld ch %lld: direct %d, twin %u, sse2 %u\n", (long long)oy,
                    (long long)ox, (long long)c, m, y0[i], y1[i]);
          checked++;
        }
    }
    free(x), free(y0), free(y1);
  }
  printf("maxpool rows: %zu bytes compared, %zu differ\n", checked, fails);
  return fails != 0;
}

static int lut_cases(void) {
  int fails = 0;
  const float alpha[QH_U8_N_ACTS] = {0, 0, 1.0f / 6.0f, 0}, beta[QH_U8_N_ACTS] = {0, 0, 0.5f, 0};
  for (int act = 0; act < QH_U8_N_ACTS; act++) {
    uint8_t lut[256];
    float so = act == QH_U8_TANH ? 2.0f / 256.0f : act == QH_U8_HARDSWISH ? 0.03f : 1.0f / 256.0f;
    int32_t zo = act == QH_U8_TANH ? 128 : act == QH_U8_HARDSWISH ? 20 : 0;
    qh_u8_act_lut((QhU8Act)act, alpha[act], beta[act], 0.05f, 128, so, zo, lut);
    int distinct = 1;
    for (int q = 1; q < 256; q++) {
      distinct += lut[q] != lut[q - 1];
      /* Sigmoid, Tanh and HardSigmoid are monotonic; HardSwish is from its minimum at -1.5 */
      if (lut[q] < lut[q - 1] && (act != QH_U8_HARDSWISH || (float)(q - 128) * 0.05f > -1.5f)) {
        fprintf(stderr, "act %d: table decreases at %d\n", act, q);
        fails++;
      }
    }
    if (distinct < 20) {
      fprintf(stderr, "act %d: only %d distinct values: degenerate table\n", act, distinct);
      fails++;
    }
    uint8_t x[300], y[300];
    for (int i = 0; i < 300; i++)
      x[i] = (uint8_t)rnd();
    qh_u8_lut_apply(lut, x, y, 300);
    for (int i = 0; i < 300; i++)
      fails += y[i] != lut[x[i]];
  }
  if (qh_u8_act_from_name("HardSwish") != QH_U8_HARDSWISH || qh_u8_act_from_name("Relu") != -1)
    fails++;
  printf("activation tables: %d failures\n", fails);
  return fails != 0;
}

/* The VBMI table lookup against the scalar twin: random tables, every length up to 300
 * (every tail of the 64-byte step), offsets that misalign both buffers, and in place. */
static int lut_vbmi_cases(void) {
  size_t fails = 0, checked = 0;
  uint8_t lut[256], x[400], y0[400], y1[400];
  for (int t = 0; t < 8; t++) {
    for (int q = 0; q < 256; q++)
      lut[q] = (uint8_t)rnd();
    for (size_t n = 0; n <= 300; n++) {
      size_t off = (size_t)t * 7 % 64;
      for (size_t i = 0; i < n + off; i++)
        x[i] = (uint8_t)rnd();
      memset(y0, 0xA5, sizeof y0), memset(y1, 0xA5, sizeof y1);
      qh_u8_lut_apply(lut, x + off, y0 + off, n);
      qh_u8_lut_apply_vbmi(lut, x + off, y1 + off, n);
      fails += memcmp(y0, y1, sizeof y0) != 0; /* also: nothing written past n */
      qh_u8_lut_apply_vbmi(lut, x + off, x + off, n);
      fails += memcmp(x + off, y0 + off, n) != 0;
      checked += n;
    }
  }
  printf("vbmi table lookups: %zu bytes compared, %zu cases differ\n", checked, fails);
  return fails != 0;
}

/* The VBMI GlobalAveragePool against qh_u8_pool_row's GLOBAL kind: random qparams
 * (zero points at both ends included), channel counts around the 64-channel step and
 * pixel counts around the 128-pixel flush, byte for byte, and its per-channel sums
 * against the twin's double sum exactly (the bytes alone would hide an error far below
 * one output step); the cases the shortcut declines are counted and must be few. */
static int gap_vbmi_cases(void) {
  size_t fails = 0, checked = 0, declined = 0;
  for (int t = 0; t < 300; t++) {
    int64_t c = 1 + (int64_t)(rnd() % 200), h = 1 + (int64_t)(rnd() % 17), w = 1 + (int64_t)(rnd() % 19);
    float dq[256], sx = rnd_scale() * (t % 3 == 0 ? 0.01f : 1.0f);
    int32_t zx = t % 5 == 0 ? 0 : t % 5 == 1 ? 255 : (int32_t)(rnd() % 256);
    for (int q = 0; q < 256; q++)
      dq[q] = (float)(q - zx) * sx;
    QhU8Pool p = {.kind = QH_U8_POOL_GLOBAL, .h = h, .w = w, .c = c, .oh = 1, .ow = 1, .dq = dq,
                  .so = rnd_scale() * 0.2f, .zo = (int32_t)(rnd() % 256)};
    uint8_t *x = malloc((size_t)(h * w * c)), y0[200], y1[200];
    int32_t centre = (int32_t)(rnd() % 256);
    for (int64_t i = 0; i < h * w * c; i++) {
      int32_t v = centre + (int32_t)(rnd() % 121) - 60;
      x[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
    qh_u8_pool_row(&p, x, 0, y0);
    memset(y1, 0, sizeof y1);
    double sums[200];
    if (!qh_u8_global_avg_vbmi(&p, x, y1) || !qh_u8_global_sums_vbmi(&p, x, sums)) {
      declined++;
    } else {
      for (int64_t i = 0; i < c; i++) {
        double want = 0.0; /* the twin's sum, in its order */
        for (int64_t px = 0; px < h * w; px++)
          want += (double)dq[x[px * c + i]];
        fails += y0[i] != y1[i] || sums[i] != want;
      }
      checked += (size_t)c;
    }
    free(x);
  }
  printf("vbmi global average pool: %zu outputs compared, %zu differ, %zu of 300 cases declined\n", checked,
         fails, declined);
  return fails != 0 || declined > 30;
}

int main(int argc, char **argv) {
  const char *isa = argc == 3 && strcmp(argv[1], "--isa") == 0 ? argv[2] : "sse2";
  int id;
  __builtin_cpu_init();
  if (strcmp(isa, "vbmi") == 0) {
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vbmi")) {
      printf("skip: this CPU lacks AVX-512 F/BW/VBMI\n");
      return 77;
    }
    return lut_vbmi_cases() | gap_vbmi_cases();
  }
  if (strcmp(isa, "avx512") == 0) {
    id = QH_U8_ISA_AVX512;
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl")) {
      printf("skip: this CPU lacks AVX-512 F/BW/VL\n");
      return 77;
    }
  } else if (strcmp(isa, "avx2") == 0) {
    id = QH_U8_ISA_AVX2;
    if (!__builtin_cpu_supports("avx2")) {
      printf("skip: this CPU lacks AVX2\n");
      return 77;
    }
  } else {
    id = QH_U8_ISA_SSE2;
  }
  int bad = binary_cases(id);
  bad |= same_cases(id);
  bad |= maxpool_cases();
  bad |= lut_cases();
  return bad;
}
