/* The multiply-add loops that measure this machine's one-thread peaks (and the read loops
 * of a bandwidth-bound kernel's roof), shared by
 * qhost-peak (bench/peak.c) and qhost-fbgemm-shapes (bench/fbgemm_conv_shapes.c), so that
 * a kernel's share of "the peak" means the same loop in every benchmark that prints one.
 * Header-only (static functions with their own target attributes, for binaries built for
 * baseline x86-64; call each only where the CPU has its ISA). Each loop keeps independent
 * accumulators in registers (16 zmm, 12 ymm for FMA, 10 ymm for the madd chain) so only
 * throughput counts, and returns the multiply-accumulates it did. Not thread-safe only in
 * that the sinks are shared: results are discarded anyway. No errors. */
#ifndef QH_BENCH_PEAK_LOOPS_H
#define QH_BENCH_PEAK_LOOPS_H

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define QH_PEAK_NACC 16
#define QH_PEAK_NACC_YMM 12
/* madd256 needs two temporaries besides its two constants: 10 chains fit in 16 ymm. */
#define QH_PEAK_NACC_MADD256 10
/* Fully unrolled, or GCC at -O2 keeps acc[] on the stack and every multiply-add pays a
 * load and a store (the loop measured 443 Gops where oneDNN's convolutions reach more). */
#define QH_PEAK_UNROLL _Pragma("GCC unroll 16")

static inline double qh_peak_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Keeps results alive without the compiler folding the loops away. */
static volatile int32_t qh_peak_sink_i;
static volatile float qh_peak_sink_f;

/* vpdpbusd zmm (AVX-512 VNNI). */
__attribute__((target("avx512f,avx512bw,avx512vnni"), unused)) static double qh_peak_vnni512(long iters) {
  __m512i acc[QH_PEAK_NACC];
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  QH_PEAK_UNROLL
  for (int i = 0; i < QH_PEAK_NACC; i++)
    acc[i] = _mm512_set1_epi32(i); /* distinct, or the chains fold into one */
  for (long it = 0; it < iters; it++) {
    QH_PEAK_UNROLL
    for (int i = 0; i < QH_PEAK_NACC; i++)
      acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  __m512i s = acc[0];
  QH_PEAK_UNROLL
  for (int i = 1; i < QH_PEAK_NACC; i++)
    s = _mm512_add_epi32(s, acc[i]);
  qh_peak_sink_i = _mm512_reduce_add_epi32(s);
  return (double)iters * QH_PEAK_NACC * 64.0;
}

/* vpmaddubsw + vpmaddwd + vpaddd zmm (AVX-512BW without VNNI). The products must not
 * depend on the accumulators (an int8 kernel's do not: each chain would otherwise wait
 * for maddubs + maddwd + add, 11 cycles, and 10-16 chains read 10% below what a kernel
 * reaches), and must not fold into one product per iteration either (one shared operand
 * pair: the loop then measures vpaddd). So the u8 operand passes through an empty
 * volatile asm before each product: no instruction, but a value the compiler cannot
 * reuse. */
__attribute__((target("avx512f,avx512bw"), unused)) static double qh_peak_madd512(long iters) {
  __m512i acc[QH_PEAK_NACC];
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2), one = _mm512_set1_epi16(1);
  QH_PEAK_UNROLL
  for (int i = 0; i < QH_PEAK_NACC; i++)
    acc[i] = _mm512_set1_epi32(i);
  for (long it = 0; it < iters; it++) {
    QH_PEAK_UNROLL
    for (int i = 0; i < QH_PEAK_NACC; i++) {
      __asm__ volatile("" : "+v"(a));
      acc[i] = _mm512_add_epi32(acc[i], _mm512_madd_epi16(_mm512_maddubs_epi16(a, b), one));
    }
  }
  __m512i s = acc[0];
  QH_PEAK_UNROLL
  for (int i = 1; i < QH_PEAK_NACC; i++)
    s = _mm512_add_epi32(s, acc[i]);
  qh_peak_sink_i = _mm512_reduce_add_epi32(s);
  return (double)iters * QH_PEAK_NACC * 64.0;
}

/* vpmaddubsw + vpmaddwd + vpaddd ymm (AVX2): the multiply the fbgemm plugin's AVX2 path
 * uses, hence its bar's peak. Products independent of the accumulators, as above. */
__attribute__((target("avx2"), unused)) static double qh_peak_madd256(long iters) {
  __m256i acc[QH_PEAK_NACC_MADD256];
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
  QH_PEAK_UNROLL
  for (int i = 0; i < QH_PEAK_NACC_MADD256; i++)
    acc[i] = _mm256_set1_epi32(i);
  for (long it = 0; it < iters; it++) {
    QH_PEAK_UNROLL
    for (int i = 0; i < QH_PEAK_NACC_MADD256; i++) {
      __asm__ volatile("" : "+x"(a));
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one));
    }
  }
  __m256i s = acc[0];
  QH_PEAK_UNROLL
  for (int i = 1; i < QH_PEAK_NACC_MADD256; i++)
    s = _mm256_add_epi32(s, acc[i]);
  int32_t v[8];
  memcpy(v, &s, sizeof(v));
  qh_peak_sink_i = v[0];
  return (double)iters * QH_PEAK_NACC_MADD256 * 32.0;
}

__attribute__((target("avx512f"), unused)) static double qh_peak_fma512(long iters) {
  __m512 acc[QH_PEAK_NACC];
  __m512 a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.9999f);
  QH_PEAK_UNROLL
  for (int i = 0; i < QH_PEAK_NACC; i++)
    acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++) {
    QH_PEAK_UNROLL
    for (int i = 0; i < QH_PEAK_NACC; i++)
      acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  __m512 s = acc[0];
  QH_PEAK_UNROLL
  for (int i = 1; i < QH_PEAK_NACC; i++)
    s = _mm512_add_ps(s, acc[i]);
  qh_peak_sink_f = _mm512_reduce_add_ps(s);
  return (double)iters * QH_PEAK_NACC * 16.0;
}

__attribute__((target("avx2,fma"), unused)) static double qh_peak_fma256(long iters) {
  __m256 acc[QH_PEAK_NACC_YMM];
  __m256 a = _mm256_set1_ps(1.0001f), b = _mm256_set1_ps(0.9999f);
  QH_PEAK_UNROLL
  for (int i = 0; i < QH_PEAK_NACC_YMM; i++)
    acc[i] = _mm256_set1_ps((float)i);
  for (long it = 0; it < iters; it++) {
    QH_PEAK_UNROLL
    for (int i = 0; i < QH_PEAK_NACC_YMM; i++)
      acc[i] = _mm256_fmadd_ps(a, b, acc[i]);
    __asm__ volatile("" : "+x"(a), "+x"(b));
  }
  __m256 s = acc[0];
  QH_PEAK_UNROLL
  for (int i = 1; i < QH_PEAK_NACC_YMM; i++)
    s = _mm256_add_ps(s, acc[i]);
  float v[8];
  memcpy(v, &s, sizeof(v));
  qh_peak_sink_f = v[0];
  return (double)iters * QH_PEAK_NACC_YMM * 8.0;
}

/* LDTILECFG's 64-byte operand, palette 1. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} QhPeakTileConfig;

/* tdpbusd on tiles already loaded, four independent 16 x 16 int32 accumulators (tiles
 * 0-3) from two A (4, 5) and two B (6, 7) tiles of 16 rows x 64 bytes: 16 x 16 x 64
 * multiply-adds each, no memory traffic in the loop. The caller must hold the OS's tile
 * data permission (Linux: arch_prctl ARCH_REQ_XCOMP_PERM); the tiles are released. */
__attribute__((target("amx-tile,amx-int8"), unused)) static double qh_peak_amx_int8(long iters) {
  QhPeakTileConfig cfg;
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
  qh_peak_sink_i = ((int32_t *)buf)[0];
  _tile_release();
  return (double)iters * 4 * 16 * 16 * 64;
}

/* The best of runs timings of fn(chunk_iters) after one warm-up, in Gops (2 ops per
 * multiply-accumulate). A peak is a maximum: on a shared machine a long timing covers the
 * scheduler's share of the core (best of three 0.1 s runs read 138 Gops under load where
 * the core does 443), while among many short chunks some run on an undisturbed core. */
static inline double qh_peak_best(double (*fn)(long), long chunk_iters, int runs) {
  fn(chunk_iters); /* warm-up: clocks up, code paged in */
  double best = 0.0;
  for (int r = 0; r < runs; r++) {
    double t0 = qh_peak_now_s();
    double macs = fn(chunk_iters);
    double g = 2.0 * macs / (qh_peak_now_s() - t0) / 1e9;
    best = g > best ? g : best;
  }
  return best;
}

/* The rate one core reads buf (bytes, a multiple of 256, 64-byte aligned) when it read
 * the same bytes just before: the roof of a kernel that uses each loaded byte once, as an
 * M = 1 GEMM uses its weights (L2's read bandwidth for a few hundred KiB). Eight
 * independent OR chains of aligned loads, passes passes per timing; returns the best of
 * runs timings after one warm-up, in GB/s. The 256-bit twin is the roof of an AVX2
 * kernel's loads. */
__attribute__((target("avx512f"), unused)) static double qh_read_roof512(const void *buf, size_t bytes, int passes,
                                                                        int runs) {
  double best = 0.0;
  for (int r = -1; r < runs; r++) {
    __m512i acc[8];
    for (int i = 0; i < 8; i++)
      acc[i] = _mm512_setzero_si512();
    double t0 = qh_peak_now_s();
    for (int p = 0; p < passes; p++) {
      const __m512i *v = buf;
      for (size_t o = 0; o < bytes / 64; o += 8) {
        QH_PEAK_UNROLL
        for (int i = 0; i < 8; i++)
          acc[i] = _mm512_or_si512(acc[i], _mm512_load_si512(v + o + i));
      }
      __asm__ volatile("" ::: "memory");
    }
    double g = (double)bytes * passes / (qh_peak_now_s() - t0) / 1e9;
    for (int i = 1; i < 8; i++)
      acc[0] = _mm512_or_si512(acc[0], acc[i]);
    qh_peak_sink_i = _mm512_reduce_or_epi32(acc[0]);
    if (r >= 0 && g > best)
      best = g;
  }
  return best;
}

__attribute__((target("avx2"), unused)) static double qh_read_roof256(const void *buf, size_t bytes, int passes,
                                                                     int runs) {
  double best = 0.0;
  for (int r = -1; r < runs; r++) {
    __m256i acc[8];
    for (int i = 0; i < 8; i++)
      acc[i] = _mm256_setzero_si256();
    double t0 = qh_peak_now_s();
    for (int p = 0; p < passes; p++) {
      const __m256i *v = buf;
      for (size_t o = 0; o < bytes / 32; o += 8) {
        QH_PEAK_UNROLL
        for (int i = 0; i < 8; i++)
          acc[i] = _mm256_or_si256(acc[i], _mm256_load_si256(v + o + i));
      }
      __asm__ volatile("" ::: "memory");
    }
    double g = (double)bytes * passes / (qh_peak_now_s() - t0) / 1e9;
    for (int i = 1; i < 8; i++)
      acc[0] = _mm256_or_si256(acc[0], acc[i]);
    int32_t v[8];
    memcpy(v, &acc[0], sizeof v);
    qh_peak_sink_i = v[0] | v[7];
    if (r >= 0 && g > best)
      best = g;
  }
  return best;
}

/* feature is in the comma-separated QHOST_CPU_DISABLE list (the switch the host and the
 * plugins honour, e.g. avx512vnni,avxvnni,amxint8), so a benchmark that hides features
 * from qhost measures the peak of the path such a CPU would take. Case-insensitive,
 * spaces around the names ignored. */
static inline int qh_peak_cpu_disabled(const char *feature) {
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

#endif
