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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "peak-loops.h"

#define ITERS 20000000L

/* 1200 chunks of about 0.2 ms each (the same total work as three full runs): among them
 * some run on an undisturbed core (qh_peak_best). */
#define CHUNKS 1200
static double measure(double (*fn)(long), long iters) {
  long chunk = iters * 3 / CHUNKS;
  fn(iters / 20); /* a longer warm-up than qh_peak_best's: clocks up, code paged in */
  return qh_peak_best(fn, chunk < 1 ? 1 : chunk, CHUNKS);
}

/* AMX-INT8 in the CPU, not hidden, and the OS's permission for the tile data. */
static int amx_usable(void) {
  if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-int8") || qh_peak_cpu_disabled("amxint8"))
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
               !qh_peak_cpu_disabled("avx512f") && !qh_peak_cpu_disabled("avx512bw");
  int vnni = has512 && __builtin_cpu_supports("avx512vnni") && !qh_peak_cpu_disabled("avx512vnni");
  const char *int8_path;
  double int8;
  if (vnni) {
    int8_path = "vpdpbusd zmm (AVX-512 VNNI)";
    int8 = measure(qh_peak_vnni512, iters);
  } else if (has512) {
    int8_path = "vpmaddubsw+vpmaddwd+vpaddd zmm (AVX-512BW)";
    int8 = measure(qh_peak_madd512, iters);
  } else if (__builtin_cpu_supports("avx2") && !qh_peak_cpu_disabled("avx2")) {
    int8_path = "vpmaddubsw+vpmaddwd+vpaddd ymm (AVX2)";
    int8 = measure(qh_peak_madd256, iters);
  } else {
    fprintf(stderr, "qhost-peak: this CPU has neither AVX2 nor AVX-512\n");
    return 1;
  }
  const char *fp32_path = has512 ? "vfmadd231ps zmm" : "vfmadd231ps ymm";
  double fp32 = measure(has512 ? qh_peak_fma512 : qh_peak_fma256, iters);
  /* a tdpbusd is 16x the work of 16 vpdpbusd: 1/16 of the iterations per chunk */
  double amx = vnni && amx_usable() ? measure(qh_peak_amx_int8, iters / 16) : -1.0;
  char amx_text[32] = "null";
  if (amx > 0)
    snprintf(amx_text, sizeof amx_text, "%.1f", amx);
  printf("{\"int8_path\": \"%s\", \"int8_gops\": %.1f, \"fp32_path\": \"%s\", \"fp32_gflops\": %.1f, "
         "\"int8_over_fp32\": %.3f, \"vnni\": %s, \"amx_int8_gops\": %s}\n",
         int8_path, int8, fp32_path, fp32, int8 / fp32, vnni ? "true" : "false", amx_text);
  return 0;
}
