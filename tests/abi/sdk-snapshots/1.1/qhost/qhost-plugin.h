/* The one header a qhost plugin includes.
 *
 * A plugin is a shared object named libqhost-<name>.so that exports exactly one
 * symbol, qhost_plugin_init (build it with the SDK's qhost_add_plugin() or the flags
 * `pkg-config --cflags --libs qhost-plugin` gives):
 *
 *   #include <qhost/qhost-plugin.h>
 *   static const QhPluginDesc desc = {
 *     QH_STRUCT_HEADER(QhPluginDesc), .name = "mybackend", .version = "1.0.0",
 *     .description = "My backend",
 *   };
 *   QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
 *                                                const QhPluginDesc **out_desc) {
 *     QhStatus *st = qh_plugin_check_host(host);
 *     if (st) return st;
 *     *out_desc = &desc;
 *     return NULL;
 *   }
 *
 * Designated initialisers keep -Wextra quiet about the members a plugin leaves NULL.
 * sdk/docs/PLUGIN_GUIDE.md walks through a complete plugin.
 *
 * Since: ABI 1.0 */
#ifndef QHOST_PLUGIN_API_H
#define QHOST_PLUGIN_API_H

#include <stdarg.h>
#include <stdio.h>

#include "qhost/abi.h"
#include "qhost/backend-config.h"
#include "qhost/host-api.h"
#include "qhost/plugin.h"
#include "qhost/status.h"
#include "qhost/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The entry point every plugin defines and exports (and nothing else).
 *   host     [in]  the host's table; valid for the life of the process.
 *   out_desc [out] the plugin's static descriptor, on success only.
 * Returns NULL on success, or a status made with host->status_new (only the frozen
 * base of `host` may be used before the versions are known to agree).
 * Must not allocate, start threads, initialise libraries, print or exit: it is also
 * called just to list plugins. Threading: called once per process, on the main
 * thread. Since: ABI 1.0; the signature is frozen across majors. */
QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc);

/* A status with a printf-style message (formatted in the plugin, then copied by the
 * host; longer messages are cut at 1023 bytes). Threading: any thread. */
static inline QhStatus *qh_status_newf(const QhHostApi *host, int32_t code, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline QhStatus *qh_status_newf(const QhHostApi *host, int32_t code, const char *fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return host->status_new(code, message);
}

/* NULL when the host can run a plugin built with this SDK (same major, host minor not
 * older); otherwise a QH_ERR_ABI_MISMATCH status naming both versions. Uses only the
 * host table's frozen base, so it is safe whatever the host's version. */
static inline QhStatus *qh_plugin_check_host(const QhHostApi *host) {
  uint32_t v = host->abi_version;
  /* + 1 keeps -Wtype-limits quiet while QH_ABI_MINOR is 0 */
  if (QH_ABI_VERSION_MAJOR(v) == QH_ABI_MAJOR && QH_ABI_VERSION_MINOR(v) + 1 > QH_ABI_MINOR)
    return NULL;
  return qh_status_newf(host, QH_ERR_ABI_MISMATCH,
                        "built for qhost ABI %d.%d, this host provides %u.%u", QH_ABI_MAJOR,
                        QH_ABI_MINOR, (unsigned)QH_ABI_VERSION_MAJOR(v),
                        (unsigned)QH_ABI_VERSION_MINOR(v));
}

#ifdef __cplusplus
}
#endif

#endif
