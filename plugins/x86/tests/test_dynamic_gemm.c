/* The x86 dynamic Linear unit's own GEMMs (--isa amx: dynamic-gemm-amx.c; --isa avx512vnni:
 * dynamic-gemm-avx512vnni.c) against their scalar twin (dynamic-gemm-ref.c), bit for bit,
 * without the host: odd and tail shapes (M not a
 * multiple of 16 or 32, N not of 16 or 32, K not of 64), per-tensor and per-column scales,
 * with and without bias, accumulators past 2^24 (where the int32 -> float conversion
 * rounds), panel sub-ranges (columns outside them untouched), and a second thread running
 * its own panels at the same time (each AMX call loads its own tile configuration). Exits 77
 * (CTest's skip) where the CPU, the OS or QHOST_CPU_DISABLE (amxint8, avx512vnni) leaves
 * the path's ISA out. */
#define _DEFAULT_SOURCE 1 /* syscall(): arch_prctl has no libc wrapper */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../common/tests/cpu-disable.h"
#include "../dynamic-gemm.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

static int avx512_available(void) {
  __builtin_cpu_init();
  return !disabled("avx512f") && !disabled("avx512bw") && !disabled("avx512vl") && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

static int vnni_available(void) {
  return avx512_available() && !disabled("avx512vnni") && __builtin_cpu_supports("avx512vnni");
}

static int amx_available(void) {
  if (!avx512_available() || disabled("amxint8") || !__builtin_cpu_supports("amx-tile") ||
      !__builtin_cpu_supports("amx-int8"))
    return 0;
  /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18), as the host requests it */
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

typedef void BlockFn(const uint8_t *ap, int64_t m, const DynPacked *pk, int64_t p0, int64_t p1,
                     const DynEpilogue *e, float *y, size_t ldy);
static BlockFn *block_fn; /* the path under test */

typedef struct {
  const uint8_t *ap; /* packed A from the call's first row */
  int64_t m, p0, p1;
  const DynPacked *pk;
  const DynEpilogue *e;
  float *y;
  size_t ldy;
} Call;

static void *run_call(void *arg) {
  const Call *c = arg;
  block_fn(c->ap, c->m, c->pk, c->p0, c->p1, c->e, c->y, c->ldy);
  return NULL;
}

/* Returns the number of mismatching elements of one case. big: full-range inputs and
 * weights of one sign (accumulators past 2^24 for large k). */
static long one_case(int64_t m, int64_t k, int64_t n, int per_column, int with_bias, int big, int split) {
  int64_t kp = (k + DYN_KB - 1) / DYN_KB * DYN_KB;
  size_t lda = (size_t)k + (rnd() % 3), ldy = (size_t)n + (size_t)(rnd() % 3);
  uint8_t *a = malloc((size_t)m * lda);
  int8_t *w = malloc((size_t)(k * n));
  int32_t *zc = malloc((size_t)n * sizeof *zc);
  float *scale = malloc((size_t)n * sizeof *scale), *bias = malloc((size_t)n * sizeof *bias);
  float *y = malloc((size_t)m * ldy * sizeof *y), *want = malloc((size_t)m * ldy * sizeof *want);
  if (!a || !w || !zc || !scale || !bias || !y || !want) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  /* bytes past k in a row hold garbage: packing must leave them out */
  for (size_t i = 0; i < (size_t)m * lda; i++)
    a[i] = (uint8_t)(big ? 200 + rnd() % 56 : rnd());
  for (int64_t i = 0; i < k * n; i++)
    w[i] = (int8_t)(big ? 100 + (int)(rnd() % 28) : (int)(rnd() % 256) - 128);
  /* big: a zero point well below the inputs, so that acc - zc still passes 2^24 while both
   * terms are large (subtracting in float instead of int32 would round) */
  uint32_t zx = big ? rnd() % 61 : rnd() % 256;
  for (int64_t c = 0; c < n; c++) {
    int32_t colsum = 0;
    for (int64_t j = 0; j < k; j++)
      colsum += w[j * n + c];
    zc[c] = (int32_t)(zx * (uint32_t)colsum);
    scale[c] = ldexpf(1.0f + (float)(rnd() % 1000) / 997.0f, -(int)(rnd() % 20));
    bias[c] = ((float)(rnd() % 20001) - 10000.0f) / 777.0f;
  }
  DynEpilogue e = {zc, scale, per_column, with_bias ? bias : NULL};
  DynPacked pk;
  if (dyn_pack_w(w, k, n, &pk)) {
    fprintf(stderr, "out of memory packing\n");
    exit(1);
  }
  /* a random panel range; columns outside it keep their sentinel */
  int64_t p0 = split ? (int64_t)(rnd() % (uint32_t)pk.panels) : 0;
  int64_t p1 = split ? p0 + 1 + (int64_t)(rnd() % (uint32_t)(pk.panels - p0)) : pk.panels;
  for (size_t i = 0; i < (size_t)m * ldy; i++)
    y[i] = want[i] = -1234.5f;
  int64_t c0 = p0 * DYN_NR, c1 = p1 * DYN_NR < n ? p1 * DYN_NR : n;
  /* the twin on the same columns: w's columns [c0, c1) as a [k, c1 - c0] matrix */
  int8_t *ws = malloc((size_t)(k * (c1 - c0)));
  for (int64_t j = 0; j < k; j++)
    memcpy(ws + j * (c1 - c0), w + j * n + c0, (size_t)(c1 - c0));
  DynEpilogue es = {zc + c0, per_column ? scale + c0 : scale, per_column, with_bias ? bias + c0 : NULL};
  dyn_gemm_ref(a, lda, m, ws, k, c1 - c0, &es, want + c0, ldy);
  /* A packed in two calls (as two tasks would), over garbage: every byte must be written */
  int64_t blocks = (m + DYN_MB - 1) / DYN_MB, half = blocks / 2;
  size_t ap_bytes = dyn_a_bytes(m, kp);
  uint8_t *ap = malloc(ap_bytes);
  if (!ap) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(ap, 0xA5, ap_bytes);
  dyn_pack_a(a, lda, m, k, kp, half, blocks, ap);
  dyn_pack_a(a, lda, m, k, kp, 0, half, ap);
  /* two threads, each its own tile configuration: on halves of the panel range (split), or
   * on row blocks [0, half) and [half, blocks) (the row split of a narrow unit) */
  int64_t mid = p0 + (p1 - p0) / 2, rmid = split || half == 0 ? m : half * DYN_MB;
  Call lo = {ap, rmid, p0, split ? mid : p1, &pk, &e, y, ldy};
  Call hi = {ap + (split ? 0 : (size_t)(rmid / DYN_MB) * (size_t)(kp * DYN_MB)), split ? m : m - rmid, split ? mid : p0, p1, &pk,
             &e, y + (split ? 0 : (size_t)rmid * ldy), ldy};
  pthread_t t;
  int started = (split ? mid > p0 : rmid < m) && pthread_create(&t, NULL, run_call, &lo) == 0;
  if (!started)
    run_call(&lo);
  run_call(&hi);
  if (started)
    pthread_join(t, NULL);
  long bad = 0;
  for (size_t i = 0; i < (size_t)m * ldy; i++)
    if (memcmp(&y[i], &want[i], sizeof y[i]) != 0) {
      if (bad++ < 3)
        fprintf(stderr, "  m %lld k %lld n %lld: element (%zu, %zu) %.9g, twin %.9g\n", (long long)m, (long long)k,
                (long long)n, i / ldy, i % ldy, y[i], want[i]);
    }
  if (big) {
    /* the case must reach past 2^24 or it checks nothing about rounding */
    int64_t acc = 0;
    for (int64_t j = 0; j < k; j++)
      acc += (int64_t)a[j] * w[j * n];
    if (acc - zc[0] <= (1 << 24) && k >= 1024) {
      fprintf(stderr, "  big case's accumulator %lld is not past 2^24\n", (long long)(acc - zc[0]));
      bad++;
    }
  }
  dyn_unpack_w(&pk);
  free(ap), free(ws), free(a), free(w), free(zc), free(scale), free(bias), free(y), free(want);
  return bad;
}

int main(int argc, char **argv) {
  const char *isa = argc == 3 && strcmp(argv[1], "--isa") == 0 ? argv[2] : NULL;
  if (!isa || (strcmp(isa, "amx") != 0 && strcmp(isa, "avx512vnni") != 0)) {
    fprintf(stderr, "usage: %s --isa amx|avx512vnni\n", argv[0]);
    return 2;
  }
  int amx = strcmp(isa, "amx") == 0;
  if (amx ? !amx_available() : !vnni_available()) {
    printf("skip: no %s here (CPU, OS permission or QHOST_CPU_DISABLE)\n", isa);
    return 77;
  }
  block_fn = amx ? dyn_amx_block : dyn_vnni_block;
  /* m, k, n: BERT's four (M = 128), then tails of every dimension */
  static const int64_t shapes[][3] = {{128, 768, 2304}, {128, 768, 768},  {128, 3072, 768}, {128, 768, 3072},
                                      {1, 1, 1},        {5, 7, 3},        {16, 64, 16},     {17, 64, 17},
                                      {31, 65, 31},     {32, 128, 32},    {33, 100, 37},    {45, 130, 50},
                                      {48, 24, 40},     {64, 192, 48},    {70, 2048, 300},  {3, 600, 300},
                                      {100, 1, 33},     {2, 4096, 5}};
  long bad = 0;
  int cases = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int variant = 0; variant < 4; variant++) {
      int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
      int per_column = variant & 1, with_bias = variant != 2, big = variant == 3, split = variant == 2;
      long b = one_case(m, k, n, per_column, with_bias, big, split);
      if (b)
        fprintf(stderr, "FAIL m %lld k %lld n %lld variant %d: %ld elements differ\n", (long long)m, (long long)k,
                (long long)n, variant, b);
      bad += b != 0;
      cases++;
    }
  printf("%d cases, %ld failed\n", cases, bad);
  return bad ? 1 : 0;
}
