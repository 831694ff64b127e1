/* The qnnpack plugin's descriptor: PyTorch's qnnpack backend semantics (mobile: uint8
 * activations, per-tensor weights, quant_min/quant_max constraints of XNNPACK). Its BackendConfig
 * (backend-config.c, ../common/pytorch-backend-config.c) drives the host's annotator; the
 * XNNPACK-backed kernels arrive with the lowering issue. */
#include <qhost/qhost-plugin.h>

#include "../common/pytorch-backend-config.h"

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/qnnpack/CMakeLists.txt)"
#endif

static const QhPluginDesc qnnpack_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "qnnpack",
    .version = QHOST_PLUGIN_VERSION,
    .description = "PyTorch qnnpack semantics (mobile, XNNPACK); BackendConfig; int8 kernels not built yet",
    .flags = 0,
    .backend_config = &qh_pt_qnnpack_backend_config,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &qnnpack_desc;
  return NULL;
}
