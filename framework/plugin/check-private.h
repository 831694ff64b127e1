/* What the plugin-check files share: the state of one run and the graph-based checks
 * (check-graphs.c) and the lowering checks (check-lowering.c). */
#ifndef QH_PLUGIN_CHECK_PRIVATE_H
#define QH_PLUGIN_CHECK_PRIVATE_H

#include "plugin/check.h"
#include "plugin/sdk-private.h"

typedef struct {
  QhCheckReport *report;
  QhPlugin *plugin;
  const QhPluginDesc *desc;
  void *instance;
} QhCheckRun;

void qh_check_add(QhCheckRun *run, QhCheckVerdict verdict, const char *name, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
/* The status's message (with its node), freeing the status. */
char *qh_check_status_text(QhStatus *status);

void qh_check_transform(QhCheckRun *run);
void qh_check_annotate(QhCheckRun *run);
void qh_check_refine(QhCheckRun *run);
void qh_check_deploy(QhCheckRun *run);
void qh_check_lowering(QhCheckRun *run);

#endif
