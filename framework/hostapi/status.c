/* QhStatus objects: how errors cross the plugin boundary in both directions, and how
 * they turn into the host's GError messages. */
#include <stdarg.h>
#include <string.h>

#include "hostapi/status-private.h"

static char *one_line(const char *text) {
  if (!text)
    text = "(no message)";
  const char *end = strpbrk(text, "\r\n");
  gsize len = end ? (gsize)(end - text) : strlen(text);
  if (len > 4096)
    len = 4096;
  return g_utf8_make_valid(text, (gssize)len);
}

static gboolean code_is_known(int32_t code) {
  return code >= QH_ERR_INVALID_ARGUMENT && code <= QH_ERR_NOT_FOUND;
}

static QhStatus *status_new_valist(char *node, int32_t code, const char *fmt, va_list ap) {
  QhStatus *st = g_new0(QhStatus, 1);
  st->magic = QH_STATUS_MAGIC;
  st->code = code_is_known(code) ? code : QH_ERR_INTERNAL;
  char *text = g_strdup_vprintf(fmt, ap);
  st->message = one_line(text);
  g_free(text);
  st->node = node;
  return st;
}

QhStatus *qh_status_new(int32_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  QhStatus *st = status_new_valist(NULL, code, fmt, ap);
  va_end(ap);
  return st;
}

QhStatus *qh_status_new_for_node(const QhNode *node, int32_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  QhStatus *st = status_new_valist(node ? qh_node_describe(node) : NULL, code, fmt, ap);
  va_end(ap);
  return st;
}

gboolean qh_status_is_valid(const QhStatus *status) {
  return status && status->magic == QH_STATUS_MAGIC;
}

void qh_status_free(QhStatus *status) {
  if (!qh_status_is_valid(status))
    return;
  status->magic = 0;
  g_free(status->message);
  g_free(status->node);
  g_free(status);
}

static QhErrorCode error_code_for(int32_t code) {
  switch (code) {
  case QH_ERR_UNSUPPORTED: return QH_ERROR_UNSUPPORTED;
  case QH_ERR_OUT_OF_MEMORY: return QH_ERROR_NOMEM;
  case QH_ERR_IO: return QH_ERROR_IO;
  case QH_ERR_INVALID_ARGUMENT:
  case QH_ERR_INVALID_STATE:
  case QH_ERR_ABI_MISMATCH: return QH_ERROR_INVALID;
  default: return QH_ERROR_FAILED;
  }
}

gboolean qh_status_to_gerror(QhStatus *status, const char *prefix, GError **error) {
  if (!qh_status_is_valid(status)) {
    g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "%s: returned an invalid status pointer",
                prefix);
    return FALSE;
  }
  if (status->node)
    g_set_error(error, QH_ERROR, error_code_for(status->code), "%s: %s: %s", prefix,
                status->node, status->message);
  else
    g_set_error(error, QH_ERROR, error_code_for(status->code), "%s: %s", prefix,
                status->message);
  qh_status_free(status);
  return FALSE;
}

QhStatus *qh_status_from_gerror(GError *error) {
  int32_t code = QH_ERR_INTERNAL;
  if (error->domain == QH_ERROR) {
    switch (error->code) {
    case QH_ERROR_UNSUPPORTED: code = QH_ERR_UNSUPPORTED; break;
    case QH_ERROR_NOMEM: code = QH_ERR_OUT_OF_MEMORY; break;
    case QH_ERROR_IO: code = QH_ERR_IO; break;
    case QH_ERROR_INVALID:
    case QH_ERROR_MISMATCH:
    case QH_ERROR_PARSE:
    case QH_ERROR_LIMIT: code = QH_ERR_INVALID_ARGUMENT; break;
    default: break;
    }
  }
  QhStatus *st = qh_status_new(code, "%s", error->message);
  g_error_free(error);
  return st;
}
