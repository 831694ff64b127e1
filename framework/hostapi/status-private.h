/* The host's side of QhStatus: the object behind the opaque SDK type, and the bridge
 * between plugin statuses and the host's GError.
 *
 * A status holds a code, a one-line message and optionally the node it concerns (as
 * the node's description, so it outlives the graph view). Threading: all functions
 * may be called from any thread. */
#ifndef QH_HOSTAPI_STATUS_PRIVATE_H
#define QH_HOSTAPI_STATUS_PRIVATE_H

#include "hostapi/sdk-private.h"

struct QhStatus {
  uint32_t magic; /* QH_STATUS_MAGIC while alive: catches foreign or freed pointers */
  int32_t code;   /* QH_ERR_* */
  char *message;  /* one line, valid UTF-8 */
  char *node;     /* "node 'NAME' (OP)" or NULL */
};
#define QH_STATUS_MAGIC 0x51485354u /* "QHST" */

/* A new status; the message is formatted, cut at the first newline and made valid
 * UTF-8. code QH_OK or unknown reads as QH_ERR_INTERNAL. Never returns NULL. */
QhStatus *qh_status_new(int32_t code, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* As qh_status_new, naming a node ("node 'NAME' (OP)"); node may be NULL. */
QhStatus *qh_status_new_for_node(const QhNode *node, int32_t code, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

/* Free a status; NULL is a no-op. */
void qh_status_free(QhStatus *status);

/* TRUE when ptr looks like a live host-made status (checked before a plugin's return
 * value is trusted). */
gboolean qh_status_is_valid(const QhStatus *status);

/* Turn a status returned by a plugin into a GError, taking ownership of status:
 * "PREFIX: [node '...' (Op): ]message". A status that is not a live host status (a
 * plugin bug) becomes "PREFIX: returned an invalid status pointer". Always sets
 * *error (if error is non-NULL) and returns FALSE, so callers can write
 * `if (st) return qh_status_to_gerror(st, prefix, error);`. */
gboolean qh_status_to_gerror(QhStatus *status, const char *prefix, GError **error);

/* A status carrying a GError's message (code mapped to QH_ERR_*); frees error. */
QhStatus *qh_status_from_gerror(GError *error);

#endif
