/* The host's oneDNN engine, its ISA cap and its per-call thread count (see onednn.h). */
#include "exec/onednn.h"

#include <omp.h>

#include "core/cpu.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

static dnnl_engine_t engine;

static gpointer engine_once(gpointer unused) {
  (void)unused;
  uint64_t f = qh_cpu_features();
  const uint64_t avx512 = QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VL;
  if ((f & avx512) == avx512 && !(f & QH_CPU_AVX512VNNI))
    (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core);
  else if ((f & avx512) != avx512 && (f & QH_CPU_AVX2) && (f & QH_CPU_FMA))
    (void)dnnl_set_max_cpu_isa((f & QH_CPU_AVXVNNI) ? dnnl_cpu_isa_avx2_vnni : dnnl_cpu_isa_avx2);
  else if ((f & avx512) != avx512)
    (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_sse41);
  if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    engine = NULL;
  return NULL;
}

dnnl_engine_t qh_onednn_engine(void) {
  static GOnce once = G_ONCE_INIT;
  g_once(&once, engine_once, NULL);
  return engine;
}

static gpointer enabled_once(gpointer unused) {
  (void)unused;
  const char *choice = g_getenv("QHOST_FP32_ENGINE");
  gboolean openblas = choice != NULL && g_ascii_strcasecmp(choice, "openblas") == 0;
  return GINT_TO_POINTER(!openblas && qh_onednn_engine() != NULL);
}

gboolean qh_onednn_enabled(void) {
  static GOnce once = G_ONCE_INIT;
  return GPOINTER_TO_INT(g_once(&once, enabled_once, NULL));
}

static const char *isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
  case dnnl_cpu_isa_sse41: return "sse41";
  case dnnl_cpu_isa_avx: return "avx";
  case dnnl_cpu_isa_avx2: return "avx2";
  case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
  case dnnl_cpu_isa_avx512_core: return "avx512_core";
  case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
  default: return "other";
  }
}

static gpointer describe_once(gpointer unused) {
  (void)unused;
  if (qh_onednn_engine() == NULL)
    return g_strdup("oneDNN unavailable");
  if (!qh_onednn_enabled())
    return g_strdup("oneDNN off (QHOST_FP32_ENGINE=openblas)");
  const dnnl_version_t *v = dnnl_version();
  return g_strdup_printf("oneDNN %d.%d.%d, ISA %s", v->major, v->minor, v->patch,
                         isa_name(dnnl_get_effective_cpu_isa()));
}

const char *qh_onednn_describe(void) {
  static GOnce once = G_ONCE_INIT;
  return g_once(&once, describe_once, NULL);
}

int qh_onednn_threads_set(int threads) {
  const int previous = omp_get_max_threads();
  if (previous != threads)
    omp_set_num_threads(threads);
  return previous;
}

void qh_onednn_threads_restore(int previous) {
  if (omp_get_max_threads() != previous)
    omp_set_num_threads(previous);
}
