/* The qnnpack plugin's descriptor: PyTorch's qnnpack backend semantics (mobile: uint8
 * activations, per-tensor weights, quant_min/quant_max constraints of XNNPACK). This
 * file holds only what the plugin claims to be; it supplies no callback group yet, so
 * `qhost plugins` shows it as supplying nothing. The quantizer and the XNNPACK-backed
 * kernels arrive as their own files with the quantization and lowering issues. */
#include <qhost/qhost-plugin.h>

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/qnnpack/CMakeLists.txt)"
#endif

static const QhPluginDesc qnnpack_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "qnnpack",
    .version = QHOST_PLUGIN_VERSION,
    .description = "PyTorch qnnpack semantics (mobile, XNNPACK); quantizer and int8 kernels not built yet",
    .flags = 0,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &qnnpack_desc;
  return NULL;
}
