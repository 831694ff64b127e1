/* The CPU's instruction-set features, detected once per process and masked by
 * QHOST_CPU_DISABLE. The host's own fp32 engine (exec/onednn.c) and the plugins (through
 * the QhHostApi table's cpu_features) read the same answer, so one variable steers every
 * kernel path in a test. */
#define _DEFAULT_SOURCE 1 /* syscall() (arch_prctl has no libc wrapper) */
#include "core/cpu.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

#include <glib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* AMX-INT8 is usable when CPUID reports AMX-TILE (leaf 7, EDX bit 24) and AMX-INT8 (bit
 * 25), the OS has enabled the tile state in XCR0 (bits 17 XTILECFG and 18 XTILEDATA), and,
 * on Linux, the process holds the permission for the large XTILEDATA state: the first
 * tile instruction without it kills the process with SIGILL. The permission covers every
 * thread of the process, so asking once here, before any kernel runs, is enough. */
#if defined(__x86_64__) || defined(__i386__)
static int amx_int8_usable(void) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
    return 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE: xgetbv is allowed */
    return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17))
    return 0;
#if defined(__linux__)
  /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18), asm/prctl.h's values (Linux
   * 5.16); an older kernel refuses the code, and then AMX stays off. */
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0)
    return 0;
#endif
  return 1;
#else
  return 0;
#endif
}
#endif


static uint64_t detect_cpu(void) {
  uint64_t f = 0;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.1")) f |= QH_CPU_SSE41;
  if (__builtin_cpu_supports("avx2")) f |= QH_CPU_AVX2;
  if (__builtin_cpu_supports("fma")) f |= QH_CPU_FMA;
  if (__builtin_cpu_supports("avx512f")) f |= QH_CPU_AVX512F;
  if (__builtin_cpu_supports("avx512bw")) f |= QH_CPU_AVX512BW;
  if (__builtin_cpu_supports("avx512vl")) f |= QH_CPU_AVX512VL;
  if (__builtin_cpu_supports("avx512vnni")) f |= QH_CPU_AVX512VNNI;
  if (__builtin_cpu_supports("avx512vbmi")) f |= QH_CPU_AVX512VBMI;
  /* AVX-VNNI (vpdpbusd on ymm, e.g. Alder Lake without AVX-512) is read from CPUID itself:
   * leaf 7 subleaf 1, EAX bit 4; subleaf 1 exists when subleaf 0's EAX (the highest
   * subleaf) is at least 1. It uses the ymm state, so it counts only where the OS has
   * enabled that state, which __builtin_cpu_supports("avx2") has already checked. */
  unsigned a, b, c, d;
  if ((f & QH_CPU_AVX2) && __get_cpuid_count(7, 0, &a, &b, &c, &d) && a >= 1 &&
      __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)))
    f |= QH_CPU_AVXVNNI;
  if (amx_int8_usable())
    f |= QH_CPU_AMXINT8;
#endif
  return f;
}

/* QHOST_CPU_DISABLE=avx512vnni,avx512f,... hides features so that every kernel path
 * can be tested on one machine. */
static uint64_t masked_features(void) {
  static const struct { const char *name; uint64_t bit; } names[] = {
      {"sse4.1", QH_CPU_SSE41},       {"avx2", QH_CPU_AVX2},         {"fma", QH_CPU_FMA},
      {"avx512f", QH_CPU_AVX512F},    {"avx512bw", QH_CPU_AVX512BW}, {"avx512vl", QH_CPU_AVX512VL},
      {"avx512vnni", QH_CPU_AVX512VNNI}, {"avxvnni", QH_CPU_AVXVNNI}, {"avx512vbmi", QH_CPU_AVX512VBMI},
      {"amxint8", QH_CPU_AMXINT8},
  };
  uint64_t f = detect_cpu();
  const char *mask = g_getenv("QHOST_CPU_DISABLE");
  if (mask == NULL)
    return f;
  char **parts = g_strsplit(mask, ",", -1);
  for (char **p = parts; *p; p++)
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++)
      if (g_ascii_strcasecmp(g_strstrip(*p), names[i].name) == 0)
        f &= ~names[i].bit;
  g_strfreev(parts);
  return f;
}

uint64_t qh_cpu_features(void) {
  static gsize once;
  static uint64_t features;
  if (g_once_init_enter(&once)) {
    features = masked_features();
    g_once_init_leave(&once, 1);
  }
  return features;
}
