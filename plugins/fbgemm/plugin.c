/* The fbgemm plugin's descriptor: PyTorch's fbgemm backend semantics (server x86:
 * uint8 activations with reduce_range, per-channel int8 weights). Its BackendConfig (backend-config.c,
 * ../common/pytorch-backend-config.c) drives the host's annotator; the int8 kernels arrive
 * with the lowering issue. */
#include <qhost/qhost-plugin.h>

#include "../common/pytorch-backend-config.h"

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/fbgemm/CMakeLists.txt)"
#endif

static const QhPluginDesc fbgemm_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "fbgemm",
    .version = QHOST_PLUGIN_VERSION,
    .description = "PyTorch fbgemm semantics (server x86); BackendConfig; int8 kernels not built yet",
    .flags = 0,
    .backend_config = &qh_pt_fbgemm_backend_config,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &fbgemm_desc;
  return NULL;
}
