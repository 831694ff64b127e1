/* The x86 plugin's instance: one oneDNN CPU engine and stream for the job, the thread
 * count handed to oneDNN's OpenMP runtime, and the VNNI decision. Without VNNI oneDNN 2.6
 * multiplies u8 x s8 with vpmaddubsw, whose int16 pair sums saturate when
 * x0*w0 + x1*w1 > 32767 (oneDNN only compensates signed s8 sources, by halving the
 * weights: "wei_adj_scale"); reduce_range makes the plugin decline units where that can
 * happen (see lowering.c), and the quantizer narrows its default activations to
 * [0, 127] (inductor.c), which keeps every pair sum below 2 * 127 * 128 = 32512. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inductor.h"
#include "onednn.h"

QhStatus *x86_dnnl_status(const QhHostApi *host, dnnl_status_t s, const char *what) {
  if (s == dnnl_success)
    return NULL;
  return qh_status_newf(host, s == dnnl_unimplemented ? QH_ERR_UNSUPPORTED : QH_ERR_INTERNAL,
                        "oneDNN %s failed (dnnl_status %d)", what, (int)s);
}

static const QhOptionDecl opt_quantizer = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "quantizer", .type = QH_OPTION_ENUM,
    .default_value = "fx",
    .help = "fx: PyTorch 1.13's FX x86 BackendConfig with the onednn qconfig mapping; "
            "inductor: X86InductorQuantizer's PT2E recipe (conv/linear fusions, no output spec)",
    .choices = "fx|inductor"};
/* `qhost plugins` shows what auto means on the CPU at hand: the entry point picks the
 * option list whose help says it (plugin.c). */
#define REDUCE_RANGE_OPTION(decl_name, this_cpu)                                                              \
  static const QhOptionDecl decl_name = {                                                                  \
      QH_STRUCT_HEADER(QhOptionDecl), .name = "reduce_range", .type = QH_OPTION_ENUM,                   \
      .default_value = "auto",                                                                          \
      .help = "on: default activations quantized to [0, 127] (PyTorch's reduce_range) and units "      \
              "whose u8*s8 int16 pair sums could still saturate declined; auto: on without VNNI " this_cpu, \
      .choices = "auto|on|off"}
REDUCE_RANGE_OPTION(opt_reduce_range_vnni, "(this CPU has VNNI: off)");
REDUCE_RANGE_OPTION(opt_reduce_range_no_vnni, "(this CPU has no VNNI: on)");
const QhOptionDecl *const x86_options_vnni[X86_PLUGIN_N_OPTIONS] = {&opt_quantizer, &opt_reduce_range_vnni};
const QhOptionDecl *const x86_options_no_vnni[X86_PLUGIN_N_OPTIONS] = {&opt_quantizer,
                                                                       &opt_reduce_range_no_vnni};

int x86_cpu_has_vnni(const QhHostApi *host) {
  return (host->cpu_features() & (QH_CPU_AVX512VNNI | QH_CPU_AVXVNNI)) != 0;
}

void x86_parallel_for(const X86Instance *inst, size_t n, QhParallelTaskFn task, void *user) {
  int team = inst->n_threads;
  if (team <= 1 || n <= 1) {
    for (size_t i = 0; i < n; i++)
      task(user, i, 0);
    return;
  }
  if ((size_t)team > n)
    team = (int)n;
#pragma omp parallel for schedule(static) num_threads(team)
  for (size_t i = 0; i < n; i++)
    task(user, i, (uint32_t)omp_get_thread_num());
}

void x86_instance_destroy(void *instance) {
  X86Instance *inst = instance;
  if (!inst)
    return;
  if (inst->stream)
    dnnl_stream_destroy(inst->stream);
  if (inst->engine)
    dnnl_engine_destroy(inst->engine);
  pthread_mutex_destroy(&inst->lock);
  free(inst);
}

QhStatus *x86_instance_create(const QhHostApi *host, const QhInstanceInfo *info,
                              const QhOption *opts, size_t n_opts, void **out) {
  if (!out || (n_opts && !opts))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "instance_create: bad arguments");
  int rr = RR_AUTO, quantizer = X86_QUANTIZER_FX;
  for (size_t i = 0; i < n_opts; i++) {
    if (!opts[i].key || !opts[i].value)
      continue;
    const char *v = opts[i].value;
    if (strcmp(opts[i].key, "reduce_range") == 0) {
      rr = strcmp(v, "on") == 0 ? RR_ON : strcmp(v, "off") == 0 ? RR_OFF : strcmp(v, "auto") == 0 ? RR_AUTO : -1;
      if (rr < 0)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reduce_range must be auto, on or off");
    } else if (strcmp(opts[i].key, "quantizer") == 0) {
      quantizer = strcmp(v, "fx") == 0 ? X86_QUANTIZER_FX : strcmp(v, "inductor") == 0 ? X86_QUANTIZER_INDUCTOR : -1;
      if (quantizer < 0)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "quantizer must be fx or inductor");
    }
  }
  X86PluginInstance *pinst = calloc(1, sizeof *pinst);
  if (!pinst)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  pinst->quantizer = quantizer;
  X86Instance *inst = &pinst->base;
  pthread_mutex_init(&inst->lock, NULL);
  uint64_t cpu = host->cpu_features();
  inst->vnni = x86_cpu_has_vnni(host);
  inst->reduce_range = rr == RR_ON || (rr == RR_AUTO && !inst->vnni);
  /* oneDNN detects the CPU itself; cap it to what the host reports so that
   * QHOST_CPU_DISABLE=avx512vnni,avxvnni really runs the vpmaddubsw path. The cap can
   * only be set before oneDNN's first dispatch; later instances of the process keep
   * the first cap (the call then fails, which is harmless). */
  if (!inst->vnni) {
    dnnl_cpu_isa_t isa = (cpu & (QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VL)) ==
                                 (QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VL)
                             ? dnnl_cpu_isa_avx512_core
                         : (cpu & QH_CPU_AVX2) ? dnnl_cpu_isa_avx2
                                               : dnnl_cpu_isa_sse41;
    (void)dnnl_set_max_cpu_isa(isa);
  } else if ((cpu & (QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VL | QH_CPU_AVX512VNNI)) ==
                 (QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VL | QH_CPU_AVX512VNNI) &&
             !(cpu & QH_CPU_AMXINT8)) {
    /* QHOST_CPU_DISABLE=amxint8 keeps oneDNN off the AMX tiles too, so both plugins can be
     * compared at VNNI. (A 1.2 host from before the bit never reports it: oneDNN then
     * stays off AMX with it, the price of pairing this plugin with an older host.) */
    (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_vnni);
  }
  inst->n_threads = info && info->struct_size >= sizeof *info && info->n_threads > 0
                        ? (int)info->n_threads : 1;
  omp_set_num_threads(inst->n_threads);
  QhStatus *st = x86_dnnl_status(host, dnnl_engine_create(&inst->engine, dnnl_cpu, 0), "engine_create");
  if (!st)
    st = x86_dnnl_status(host, dnnl_stream_create(&inst->stream, inst->engine, dnnl_stream_default_flags),
                         "stream_create");
  if (st) {
    x86_instance_destroy(inst);
    return st;
  }
  const dnnl_version_t *v = dnnl_version();
  char line[200];
  snprintf(line, sizeof line, "oneDNN %d.%d.%d, %d thread(s), VNNI %s, reduce_range %s, quantizer %s",
           v ? v->major : 0, v ? v->minor : 0, v ? v->patch : 0, inst->n_threads,
           inst->vnni ? "yes" : "no", inst->reduce_range ? "on" : "off",
           quantizer == X86_QUANTIZER_INDUCTOR ? "inductor" : "fx");
  host->log(QH_LOG_DEBUG, line);
  *out = pinst;
  return NULL;
}
