/* Logging for the host: leveled messages on stderr, silenced by --quiet, widened by -v.
 *
 * Threading: qh_log may be called from any thread; the level is process-wide and
 * should be set once at start-up (the CLI does it before any work). */
#ifndef QH_CORE_LOG_H
#define QH_CORE_LOG_H

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  QH_LOG_ERROR = 0,
  QH_LOG_WARNING = 1,
  QH_LOG_INFO = 2,
  QH_LOG_DEBUG = 3,
} QhLogLevel;

/* Messages above this level are dropped. Default: QH_LOG_WARNING. */
void qh_log_set_level(QhLogLevel level);
QhLogLevel qh_log_get_level(void);

/* Print "qhost: <level>: message" on stderr when level is enabled. */
void qh_log(QhLogLevel level, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

G_END_DECLS

#endif
