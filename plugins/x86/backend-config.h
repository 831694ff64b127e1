/* The x86 plugin's BackendConfig (backend-config.c): PyTorch's x86 pattern table with
 * get_default_qconfig_mapping("onednn") as its default. Plugin code: SDK only. */
#ifndef QH_PLUGINS_X86_BACKEND_CONFIG_H
#define QH_PLUGINS_X86_BACKEND_CONFIG_H

#include <qhost/qhost-plugin.h>

extern const QhBackendConfig qh_x86_backend_config;

#endif
