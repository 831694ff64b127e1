/* The x86 plugin's descriptor: PyTorch's x86 backend semantics (the FX default config of
 * backend-config.c, with X86InductorQuantizer's recipe to come as an option). This file
 * holds only what
 * the plugin claims to be and points at its groups: the lowering onto oneDNN int8
 * primitives (lowering.c, onednn-kernels.c) with its instance (onednn-instance.c). */
#include <qhost/qhost-plugin.h>

#include "backend-config.h"
#include "inductor.h"
#include "onednn.h"

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/x86/CMakeLists.txt)"
#endif

static const QhPluginDesc x86_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "x86",
    .version = QHOST_PLUGIN_VERSION,
    .description = "PyTorch x86 semantics (x86 BackendConfig + onednn qconfig, or X86InductorQuantizer); oneDNN int8 conv and linear kernels",
    .flags = 0,
    .options = x86_plugin_options,
    .n_options = X86_PLUGIN_N_OPTIONS,
    .instance_create = x86_instance_create,
    .instance_destroy = x86_instance_destroy,
    .backend_config = &qh_x86_backend_config,
    .annotate = &x86_annotate,
    .lowering = &x86_lowering,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &x86_desc;
  return NULL;
}
