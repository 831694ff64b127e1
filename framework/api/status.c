/* The status objects of the embedding API (qhost.h): a code and one line of message,
 * made from the host's GErrors, plus the version queries, the log level and the
 * argument checks every API function starts with. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api-private.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"

static void one_line(char *s) {
  for (char *p = s; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
}

QhostStatus *qh_api_status(QhostStatusCode code, const char *fmt, ...) {
  QhostStatus *st = g_new0(QhostStatus, 1);
  va_list ap;
  va_start(ap, fmt);
  st->message = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  one_line(st->message);
  st->code = code;
  return st;
}

QhostStatus *qh_api_status_from_error(GError *error) {
  /* QH_ERROR's codes 1..8 are QHOST_STATUS_FAILED..MISMATCH, in the same order */
  QhostStatusCode code = QHOST_STATUS_FAILED;
  if (error && error->domain == QH_ERROR && error->code >= QH_ERROR_FAILED && error->code <= QH_ERROR_MISMATCH)
    code = (QhostStatusCode)error->code;
  QhostStatus *st = qh_api_status(code, "%s", error ? error->message : "failed (no message)");
  if (error)
    g_error_free(error);
  return st;
}

QhostStatus *qh_api_need(const void *p, const char *what) {
  return p ? NULL : qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "%s: NULL", what);
}

QhostStatus *qh_api_model_ready(const QhostModel *model) {
  if (model == NULL)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "model: NULL");
  if (model->graph == NULL)
    return qh_api_status(QHOST_STATUS_CLOSED, "%s: the model was closed", model->path);
  return NULL;
}

QhostStatus *qh_api_capture(QhApiPrintFn fn, gpointer data, char **out_text) {
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  if (out == NULL)
    return qh_api_status(QHOST_STATUS_NOMEM, "no memory for the report");
  GError *error = NULL;
  gboolean ok = fn(data, out, &error);
  fclose(out);
  if (!ok) {
    free(buf);
    return qh_api_status_from_error(error);
  }
  *out_text = g_strdup(buf ? buf : "");
  free(buf);
  return NULL;
}

int qhost_api_version(void) { return QHOST_API_VERSION; }

const char *qhost_version_string(void) { return QHOST_VERSION; }

QhostStatusCode qhost_status_code(const QhostStatus *status) {
  return status ? status->code : QHOST_STATUS_OK;
}

const char *qhost_status_message(const QhostStatus *status) { return status ? status->message : ""; }

void qhost_status_free(QhostStatus *status) {
  if (status == NULL)
    return;
  g_free(status->message);
  g_free(status);
}

void qhost_string_free(char *string) { g_free(string); }

QhostStatus *qhost_set_log_level(QhostLogLevel level) {
  if ((int)level < QHOST_LOG_ERROR || (int)level > QHOST_LOG_DEBUG)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "log level %d: not one of 0 (error) to 3 (debug)",
                         (int)level);
  qh_log_set_level((QhLogLevel)level);
  return NULL;
}

size_t qhost_dtype_size(int32_t dtype) { return qh_dtype_size((QhDType)dtype); }

const char *qhost_dtype_name(int32_t dtype) { return qh_dtype_name((QhDType)dtype); }
