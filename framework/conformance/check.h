/* plugin-check: a conformance run over one plugin that a vendor can act on. Each check
 * has a name, a verdict and one line of detail; the plugin conforms when no check
 * failed (skipped checks name the issue whose machinery they wait for).
 *
 * Ownership: the report is the caller's (qh_check_report_free). Threading: one
 * thread; the run redirects fds 1 and 2 while plugin code runs. */
#ifndef QH_CONFORMANCE_CHECK_H
#define QH_CONFORMANCE_CHECK_H

#include <glib.h>

#include "plugin/plugin.h"

G_BEGIN_DECLS

typedef enum { QH_CHECK_PASS, QH_CHECK_FAIL, QH_CHECK_SKIP } QhCheckVerdict;

typedef struct {
  char *name;
  QhCheckVerdict verdict;
  char *detail;
} QhCheckResult;

typedef struct {
  QhPluginInfo *info;  /* NULL when the plugin could not be scanned */
  GPtrArray *results;  /* QhCheckResult* in the order run */
  GPtrArray *findings; /* char*: what the plugin logged or reported during the run */
  GPtrArray *unrun_patterns; /* char*: declared lowering patterns whose kernel never ran, and
                              * "partitions 'ID'" when the plugin's partitions never ran */
} QhCheckReport;

/* Run every check on the plugin `name_or_path` (a name, or a path with a '/').
 * backend_opts: the user's KEY=VALUE options for the instance (may be NULL).
 * Errors (NULL return) only when no such plugin exists; a broken plugin gives a
 * report with failed checks. */
QhCheckReport *qh_plugin_check(const QhPluginSearch *search, const char *name_or_path,
                               char *const *backend_opts, GError **error);
/* No check failed (a lowering pattern whose kernel never ran is a failed check). */
gboolean qh_check_report_conforms(const QhCheckReport *report);
void qh_check_report_free(QhCheckReport *report);

G_END_DECLS

#endif
