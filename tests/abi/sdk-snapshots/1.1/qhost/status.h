/* Status codes and the opaque status object that carries errors across the boundary.
 *
 * Every fallible function (host or plugin) returns `QhStatus *`: NULL means success;
 * anything else is an error object created by the host (host->status_new) and owned
 * by whoever receives it. The host frees statuses plugins return to it; a plugin
 * frees statuses the host returns to it with host->status_free (or hands them back
 * by returning them). A plugin never allocates a status itself, never prints, never
 * calls abort() or exit().
 *
 * Codes have explicit values and are only ever appended. A code the host does not
 * know (from a newer plugin) is read as QH_ERR_INTERNAL.
 *
 * Since: ABI 1.0 */
#ifndef QHOST_STATUS_H
#define QHOST_STATUS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque; created only by the host. */
typedef struct QhStatus QhStatus;

#define QH_OK 0
/* The caller broke a documented rule (bad id, bad value, unknown flag): a bug. */
#define QH_ERR_INVALID_ARGUMENT 1
/* Valid, but this backend does not do it. For an annotation or lowering decision
 * it means "leave this node to the host / in float", and the message is the reason
 * shown in reports. */
#define QH_ERR_UNSUPPORTED 2
#define QH_ERR_OUT_OF_MEMORY 3
/* A lifecycle rule was broken (run before reshape, a query outside its callback). */
#define QH_ERR_INVALID_STATE 4
/* The plugin and host ABI versions are incompatible. */
#define QH_ERR_ABI_MISMATCH 5
#define QH_ERR_IO 6
/* Anything else that went wrong inside the plugin or host. */
#define QH_ERR_INTERNAL 7
/* A retired host function was called; the message names its replacement. */
#define QH_ERR_DEPRECATED 8
/* A lookup found nothing (no attribute of that name, no qparams on that edge). */
#define QH_ERR_NOT_FOUND 9

/* Log levels for host->log and report levels for host->report. */
#define QH_LOG_ERROR 0
#define QH_LOG_WARNING 1
#define QH_LOG_INFO 2
#define QH_LOG_DEBUG 3

#ifdef __cplusplus
}
#endif

#endif
