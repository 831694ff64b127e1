/* The example_vitis plugin's descriptor: an example vendor backend in the style of
 * AMD's Vitis AI flow (power-of-two scales, its own observer, shift-based kernels, a
 * deploy step writing a vendor package). It is built only from the installed SDK, so it
 * shows what a vendor's plugin looks like. This file holds only what the plugin claims
 * to be; it supplies no callback group yet, so `qhost plugins` shows it as supplying
 * nothing. The annotator, observer, kernels and deploy step arrive as their own files. */
#include <qhost/qhost-plugin.h>

#include "lowering.h"

#ifndef EXAMPLE_VITIS_VERSION
#error "EXAMPLE_VITIS_VERSION must be defined by the build (plugins/example_vitis/CMakeLists.txt)"
#endif

static const QhPluginDesc example_vitis_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "example_vitis",
    .version = EXAMPLE_VITIS_VERSION,
    .description = "Example vendor backend (power-of-two scales); annotator, observer, kernels "
                   "and deploy not built yet",
    .flags = 0,
    .lowering = &example_vitis_lowering,
    .deploy = &example_vitis_deploy,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &example_vitis_desc;
  return NULL;
}
