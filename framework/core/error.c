/* The host's GError domain and small helpers shared by every module. */
#include "core/error.h"

#include <string.h>

G_DEFINE_QUARK(qh-error-quark, qh_error)

void qh_error_prefix(GError **error, const char *prefix) {
  if (error == NULL || *error == NULL || prefix == NULL)
    return;
  size_t n = strlen(prefix);
  const char *msg = (*error)->message;
  if (strncmp(msg, prefix, n) == 0 && msg[n] == ':')
    return;
  g_prefix_error(error, "%s: ", prefix);
}
