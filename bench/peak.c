/* qhost-peak: this machine's one-thread int8 and fp32 peaks, measured with a loop of
 * the best multiply-add the CPU has, so that benchmarks can print kernel speed as a
 * fraction of what the core can do in the same run. int8: vpdpbusd zmm (AVX-512 VNNI)
 * when present, else vpmaddubsw + vpmaddwd (AVX-512BW, else AVX2), which is how int8
 * kernels without VNNI multiply u8 by s8 (AVX-VNNI on ymm alone is not measured: such a
 * CPU gets the AVX2 madd figure). fp32: vfmadd on the widest registers. Each loop keeps
 * 16 (zmm), 12 (ymm) or 10 (ymm madd) independent accumulators in registers so the
 * instruction latency is hidden and only throughput counts. Paths are chosen at run
 * time (the file is built for baseline x86-64 with per-function target attributes).
 * Where the CPU has AMX-INT8 and the OS grants the tile state (Linux's arch_prctl, as the
 * host asks for it), the tile peak too: tdpbusd on four accumulator tiles from tiles
 * already loaded (no memory traffic), "amx_int8_gops" (null without AMX, or with
 * QHOST_CPU_DISABLE=amxint8).
 * Output: one JSON object (ops = 2 per multiply-accumulate). */
#define _DEFAULT_SOURCE 1 /* syscall(): arch_prctl has no libc wrapper */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define ITERS 20000000L
/* Independent accumulators: 16 on 32 zmm registers, 12 on the 16 ymm ones (with the
 * operands) so that nothing spills. */
#define NACC 16
#define NACC_YMM 12
/* madd256 needs two temporaries besides its two constants: 10 chains fit in 16 ymm. */
#define NACC_MADD256 10
/* Fully unrolled, or GCC at -O2 keeps acc[] on the stack and every multiply-add pays a
 * load and a store (the loop measured 443 Gops where oneDNN's convolutions reach more). */
#define UNROLL _Pragma("GCC unroll 16")

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Keeps results alive without the compiler folding the loop away. */
static volatile int32_t sink_i;
static volatile float sink_f;

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double vnni512(long iters) {
  __m512i acc[NACC];
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  UNROLL
  for (int i = 0; i < NACC; i++)
    acc[i] = _mm512_set1_epi32(i); /* distinct, or the chains fold into one */
  for (long it = 0; it < iters; it++) {
    UNROLL
    for (int i = 0; i < NACC; i++)
      acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  __m512i s = acc[0];
  UNROLL
  for (int i = 1; i < NACC; i++)
    s = _mm512_add_epi32(s, acc[i]);
  sink_i = _mm512_reduce_add_epi32(s);
  return (double)iters * NACC * 64.0; /* MACs */
}

/* The u8 operand is the accumulator itself: with one shared operand pair the compiler
 * computes the product once per iteration and the loop measures vpaddd. */
__attribute__((target("avx512f,avx512bw"))) static double madd512(long iters) {
  __m512i acc[NACC];
  __m512i b = _mm512_set1_epi8(-2), one = _mm512_set1_epi16(1);
  UNROLL
  for (int i = 0; i < NACC; i++)
    acc[i] = _mm512_set1_epi32(i); /* distinct, or the chains fold into one */
  for (long it = 0; it < iters; it++) {
    UNROLL
    for (int i = 0; i < NACC; i++)
      acc[i] = _mm512_add_epi32(acc[i], _mm512_madd_epi16(_mm512_maddubs_epi16(acc[i], b), one));
    __asm__ volatile("" : "+v"(b));
  }
  __m512i s = acc[0];
  UNROLL
  for (int i = 1; i < NACC; i++)
    s = _mm512_add_epi32(s, acc[i]);
  sink_i = _mm512_reduce_add_epi32(s);
  return (double)iters * NACC * 64.0;
}

__attribute__((target("avx2"))) static double madd256(long iters) {
  __m256i acc[NACC_MADD256];
  __m256i b = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  UNROLL
  for (int i = 0; i < NACC_MADD256; i++)
    acc[i] = _mm256_set1_epi32(i);
  for (long it = 0; it < iters; it++) {
    UNROLL
    for (int i = 0; i < NACC_MADD256; i++)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(acc[i], b), one));
    __asm__ volatile("" : "+x"(b));
  }
  __m256i s = acc[0];
  UNROLL
  for (int i = 1; i < NACC_MADD256; i++)
    s = _mm256_add_epi32(s, acc[i]);
  int32_t v[8];
  memcpy(v, &s, sizeof(v));
  sink_i = v[0];
  return (double)iters * NACC_MADD256 * 32.0;
}

__attribute__((target("avx512f"))) static double fma512(long iters) {
  __m512 acc[NACC];
  __m512 a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.9999f);
  UNROLL
  for (int i = 0; i < NACC; i++)
    acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++) {
    UNROLL
    for (int i = 0; i < NACC; i++)
      acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  __m512 s = acc[0];
  UNROLL
  for (int i = 1; i < NACC; i++)
    s = _mm512_add_ps(s, acc[i]);
  sink_f = _mm512_reduce_add_ps(s);
  return (double)iters * NACC * 16.0;
}

__attribute__((target("avx2,fma"))) static double fma256(long iters) {
  __m256 acc[NACC_YMM];
  __m256 a = _mm256_set1_ps(1.0001f), b = _mm256_set1_ps(0.9999f);
  UNROLL
  for (int i = 0; i < NACC_YMM; i++)
    acc[i] = _mm256_set1_ps((float)i);
  for (long it = 0; it < iters; it++) {
    UNROLL
    for (int i = 0; i < NACC_YMM; i++)
      acc[i] = _mm256_fmadd_ps(a, b, acc[i]);
    __asm__ volatile("" : "+x"(a), "+x"(b));
  }
  __m256 s = acc[0];
  UNROLL
  for (int i = 1; i < NACC_YMM; i++)
    s = _mm256_add_ps(s, acc[i]);
  float v[8];
  memcpy(v, &s, sizeof(v));
  sink_f = v[0];
  return (double)iters * NACC_YMM * 8.0;
}

/* QHOST_CPU_DISABLE (the comma-separated list plugins honour, e.g. avx512vnni,avxvnni or
 * avx512vnni,avxvnni,avx512f) measures the path a CPU without those features would use,
 * so a benchmark that hides them from qhost compares its kernels with the right peak. */
static int cpu_disabled(const char *feature) {
  const char *v = getenv("QHOST_CPU_DISABLE");
  size_t n = strlen(feature);
  for (const char *p = v; p && *p;) {
    while (*p == ' ' || *p == ',')
      p++;
    size_t len = strcspn(p, ",");
    size_t end = len;
    while (end > 0 && p[end - 1] == ' ')
      end--;
    if (end == n && strncasecmp(p, feature, n) == 0)
      return 1;
    p += len;
  }
  return 0;
}

/* The best of many short timings of fn, in Gops (2 ops per multiply-accumulate). A peak
 * is a maximum: on a shared machine a few long timings each cover the scheduler's share
 * of the core (best of three 0.1 s runs read 138 Gops under load where the core does
 * 443), while among 1200 chunks of about 0.2 ms some run on an undisturbed core. */
#define CHUNKS 1200
static double measure(double (*fn)(long), long iters) {
  fn(iters / 20); /* warm-up: clocks up, code paged in */
  long chunk = iters * 3 / CHUNKS; /* the same total work as three full runs */
  if (chunk < 1)
    chunk = 1;
  double best = 0.0;
  for (int r = 0; r < CHUNKS; r++) {
    double t0 = now_s();
    double macs = fn(chunk);
    double g = 2.0 * macs / (now_s() - t0) / 1e9;
    if (g > best)
      best = g;
  }
  return best;
}

/* LDTILECFG's 64-byte operand, palette 1. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileConfig;

/* tdpbusd, four independent 16 x 16 int32 accumulators (tiles 0-3) from two A (4, 5) and
 * two B (6, 7) tiles of 16 rows x 64 bytes: 16 x 16 x 64 multiply-adds each. */
__attribute__((target("amx-tile,amx-int8"))) static double amx_int8(long iters) {
  TileConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++)
    cfg.rows[t] = 16, cfg.colsb[t] = 64;
  /* the whole struct as the operand: GCC 12's _tile_loadconfig names only 8 bytes of it */
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
  for (long it = 0; it < iters; it++) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  _tile_stored(0, buf, 64);
  sink_i = ((int32_t *)buf)[0];
  _tile_release();
  return (double)iters * 4 * 16 * 16 * 64;
}

/* AMX-INT8 in the CPU, not hidden, and the OS's permission for the tile data. */
static int amx_usable(void) {
  if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-int8") || cpu_disabled("amxint8"))
    return 0;
#if defined(__linux__)
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0; /* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA */
#else
  return 1;
#endif
}

int main(int argc, char **argv) {
  long iters = ITERS;
  if (argc > 1 && strcmp(argv[1], "--quick") == 0)
    iters /= 20;
  __builtin_cpu_init();
  int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               !cpu_disabled("avx512f") && !cpu_disabled("avx512bw");
  int vnni = has512 && __builtin_cpu_supports("avx512vnni") && !cpu_disabled("avx512vnni");
  const char *int8_path;
  double int8;
  if (vnni) {
    int8_path = "vpdpbusd zmm (AVX-512 VNNI)";
    int8 = measure(vnni512, iters);
  } else if (has512) {
    int8_path = "vpmaddubsw+vpmaddwd+vpaddd zmm (AVX-512BW)";
    int8 = measure(madd512, iters);
  } else if (__builtin_cpu_supports("avx2") && !cpu_disabled("avx2")) {
    int8_path = "vpmaddubsw+vpmaddwd+vpaddd ymm (AVX2)";
    int8 = measure(madd256, iters);
  } else {
    fprintf(stderr, "qhost-peak: this CPU has neither AVX2 nor AVX-512\n");
    return 1;
  }
  const char *fp32_path = has512 ? "vfmadd231ps zmm" : "vfmadd231ps ymm";
  double fp32 = measure(has512 ? fma512 : fma256, iters);
  /* a tdpbusd is 16x the work of 16 vpdpbusd: 1/16 of the iterations per chunk */
  double amx = vnni && amx_usable() ? measure(amx_int8, iters / 16) : -1.0;
  char amx_text[32] = "null";
  if (amx > 0)
    snprintf(amx_text, sizeof amx_text, "%.1f", amx);
  printf("{\"int8_path\": \"%s\", \"int8_gops\": %.1f, \"fp32_path\": \"%s\", \"fp32_gflops\": %.1f, "
         "\"int8_over_fp32\": %.3f, \"vnni\": %s, \"amx_int8_gops\": %s}\n",
         int8_path, int8, fp32_path, fp32, int8 / fp32, vnni ? "true" : "false", amx_text);
  return 0;
}
