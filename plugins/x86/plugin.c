/* The x86 plugin's descriptor: PyTorch's x86 backend semantics (the FX default config of
 * backend-config.c, or X86InductorQuantizer's recipe in inductor.c) and the lowering onto
 * oneDNN int8 primitives and the plugin's uint8 loops (lowering.c, onednn-kernels.c,
 * u8-ops-*.c, u8-concat.c) with its instance (onednn-instance.c). This file holds
 * only what the plugin claims to be and points at its groups. */
#include <qhost/qhost-plugin.h>

#include "backend-config.h"
#include "inductor.h"
#include "onednn.h"

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/x86/CMakeLists.txt)"
#endif

/* Two descriptors that differ only in the reduce_range help (what auto means on this
 * CPU); the entry point picks one, so `qhost plugins` says whether the CPU has VNNI. */
#define X86_DESC(desc_name, option_list)                                                                \
  static const QhPluginDesc desc_name = {                                                             \
      QH_STRUCT_HEADER(QhPluginDesc),                                                              \
      .name = "x86",                                                                               \
      .version = QHOST_PLUGIN_VERSION,                                                             \
      .description = "PyTorch x86 semantics (x86 BackendConfig + onednn qconfig, or "              \
                     "X86InductorQuantizer); oneDNN int8 conv and linear kernels",                 \
      .flags = 0,                                                                                  \
      .options = option_list,                                                                      \
      .n_options = X86_PLUGIN_N_OPTIONS,                                                           \
      .instance_create = x86_instance_create,                                                      \
      .instance_destroy = x86_instance_destroy,                                                    \
      .backend_config = &qh_x86_backend_config,                                                    \
      .annotate = &x86_annotate,                                                                   \
      .lowering = &x86_lowering,                                                                   \
  }
X86_DESC(x86_desc_vnni, x86_options_vnni);
X86_DESC(x86_desc_no_vnni, x86_options_no_vnni);

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = x86_cpu_has_vnni(host) ? &x86_desc_vnni : &x86_desc_no_vnni;
  return NULL;
}
