/* plugin-check's graph-based checks: transform_for_annotation, annotate, refine and
 * deploy, run on small built-in graphs. */
#include "plugin/check-private.h"

void qh_check_transform(QhCheckRun *run) {
  qh_check_add(run, QH_CHECK_SKIP, "transform_for_annotation", "not yet run");
}
void qh_check_annotate(QhCheckRun *run) {
  qh_check_add(run, QH_CHECK_SKIP, "annotate", "not yet run");
}
void qh_check_refine(QhCheckRun *run) {
  qh_check_add(run, QH_CHECK_SKIP, "refine", "not yet run");
}
void qh_check_deploy(QhCheckRun *run) {
  qh_check_add(run, QH_CHECK_SKIP, "deploy", "not yet run");
}
