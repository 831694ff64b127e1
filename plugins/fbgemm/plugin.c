/* The fbgemm plugin's descriptor: PyTorch's fbgemm backend semantics (server x86:
 * uint8 activations with reduce_range, per-channel int8 weights). This file holds only
 * what the plugin claims to be; it supplies no callback group yet, so `qhost plugins`
 * shows it as supplying nothing. The quantizer (BackendConfig data) and the int8
 * kernels arrive as their own files with the quantization and lowering issues. */
#include <qhost/qhost-plugin.h>

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/fbgemm/CMakeLists.txt)"
#endif

static const QhPluginDesc fbgemm_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "fbgemm",
    .version = QHOST_PLUGIN_VERSION,
    .description = "PyTorch fbgemm semantics (server x86); quantizer and int8 kernels not built yet",
    .flags = 0,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &fbgemm_desc;
  return NULL;
}
