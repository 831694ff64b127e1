/* Leveled logging to stderr. Kept tiny on purpose: the CLI owns the policy (-v,
 * --quiet), the library only asks whether a level is enabled. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static volatile gint current_level = QH_LOG_WARNING;

void qh_log_set_level(QhLogLevel level) { g_atomic_int_set(&current_level, (gint)level); }

QhLogLevel qh_log_get_level(void) { return (QhLogLevel)g_atomic_int_get(&current_level); }

void qh_log(QhLogLevel level, const char *fmt, ...) {
  static const char *const names[] = {"error", "warning", "info", "debug"};
  if ((gint)level > g_atomic_int_get(&current_level))
    return;
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  fprintf(stderr, "qhost: %s: %s\n", names[level], msg);
  g_free(msg);
}
