/* The x86 plugin's descriptor: PyTorch's x86 backend semantics (the FX default config,
 * with X86InductorQuantizer's recipe to come as an option). This file holds only what
 * the plugin claims to be; it supplies no callback group yet, so `qhost plugins` shows
 * it as supplying nothing. The quantizer and the oneDNN-backed kernels arrive as their
 * own files with the quantization and lowering issues. */
#include <qhost/qhost-plugin.h>

#include "backend-config.h"

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/x86/CMakeLists.txt)"
#endif

static const QhPluginDesc x86_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "x86",
    .version = QHOST_PLUGIN_VERSION,
    .description = "PyTorch x86 semantics (x86 BackendConfig, onednn default qconfig); int8 kernels not built yet",
    .flags = 0,
    .backend_config = &qh_x86_backend_config,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &x86_desc;
  return NULL;
}
