/* The fbgemm plugin's descriptor and instance: PyTorch's fbgemm backend semantics (server
 * x86: uint8 activations with reduce_range, per-channel int8 weights). Its BackendConfig
 * (backend-config.c, ../common/pytorch-backend-config.c) drives the host's annotator; its
 * lowering (lowering.c, kernel.c) runs Conv and Linear units on the plugin's own int8
 * kernels (kernels.h), whose path the instance picks once from the CPU features the host
 * reports (QHOST_CPU_DISABLE hides some, to test the others on one machine). */
#include <stdlib.h>
#include <string.h>

#include "../common/pytorch-backend-config.h"
#include "fbgemm.h"

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/fbgemm/CMakeLists.txt)"
#endif

static FbIsa pick_isa(uint64_t cpu) {
  const uint64_t vnni = QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VL | QH_CPU_AVX512VNNI;
  if ((cpu & vnni) == vnni)
    return cpu & QH_CPU_AMXINT8 ? FB_ISA_AMX : FB_ISA_AVX512VNNI;
  if ((cpu & (QH_CPU_AVX2 | QH_CPU_AVXVNNI)) == (QH_CPU_AVX2 | QH_CPU_AVXVNNI))
    return FB_ISA_AVXVNNI;
  if (cpu & QH_CPU_AVX2)
    return FB_ISA_AVX2;
  return FB_ISA_PACKED_C;
}

/* The output clamp: docs/fbgemm.md, "Numerics", says what each choice costs. The default is
 * dtype because FBGEMM, PyTorch's reference model, ONNX Runtime and the host's QuantizeLinear
 * all saturate at 255; range (127 where the file records reduce_range) is kept for users who
 * want the plugin's own outputs to stay inside the recorded range. */
static const QhOptionDecl opt_output_clamp = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "output_clamp", .type = QH_OPTION_ENUM, .default_value = "dtype",
    .help = "dtype (default): saturate at 255 as FBGEMM, PyTorch's reference model and the host's "
            "QuantizeLinear do; range: clamp outputs to the unit's quantized range (127 where the file "
            "records reduce_range)",
    .choices = "range|dtype"};
static const QhOptionDecl *const options_decl[] = {&opt_output_clamp};

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info, const QhOption *options,
                                 size_t n_options, void **out) {
  FbInstance *inst = calloc(1, sizeof *inst);
  if (!inst)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  inst->n_threads = info && info->n_threads > 0 ? info->n_threads : 1;
  inst->isa = pick_isa(host->cpu_features());
  inst->clamp_to_dtype = 1; /* the declared default, should a host pass no value */
  for (size_t i = 0; i < n_options; i++)
    if (options[i].key && options[i].value && strcmp(options[i].key, "output_clamp") == 0)
      inst->clamp_to_dtype = strcmp(options[i].value, "range") != 0;
  *out = inst;
  return NULL;
}

static void instance_destroy(void *instance) { free(instance); }

static const QhPluginDesc fbgemm_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "fbgemm",
    .version = QHOST_PLUGIN_VERSION,
    .description = "PyTorch fbgemm semantics (server x86); BackendConfig; own int8 conv and linear "
                   "kernels (AMX-INT8, AVX-512 VNNI, AVX-VNNI, AVX2, portable C)",
    .flags = 0,
    .options = options_decl,
    .n_options = sizeof options_decl / sizeof options_decl[0],
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .backend_config = &qh_pt_fbgemm_backend_config,
    .lowering = &fb_lowering,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &fbgemm_desc;
  return NULL;
}
