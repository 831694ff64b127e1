/* The quantization report's store: node decisions and notes, kept in the order they
 * were made, with the last decision per node winning. Printing lives with the flow
 * that also knows the qparams and errors (quant/flow-report.c). */
#include <stdarg.h>

#include "quant/report-private.h"

QhQuantReport *qh_quant_report_new(void) {
  QhQuantReport *r = g_new0(QhQuantReport, 1);
  r->nodes = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, qh_quant_report_entry_free);
  r->notes = g_ptr_array_new_with_free_func(g_free);
  return r;
}

void qh_quant_report_entry_free(gpointer p) {
  QhQuantReportEntry *e = p;
  g_free(e->pattern);
  g_free(e->reason);
  g_free(e);
}

void qh_quant_report_free(QhQuantReport *report) {
  if (report == NULL)
    return;
  g_hash_table_unref(report->nodes);
  g_ptr_array_unref(report->notes);
  g_free(report);
}

void qh_quant_report_node(QhQuantReport *report, const QhNode *node, gboolean quantized,
                          const char *pattern, const char *reason_fmt, ...) {
  QhQuantReportEntry *e = g_new0(QhQuantReportEntry, 1);
  e->node_id = node->id;
  e->quantized = quantized;
  e->pattern = g_strdup(pattern);
  if (reason_fmt) {
    va_list ap;
    va_start(ap, reason_fmt);
    e->reason = g_strdup_vprintf(reason_fmt, ap);
    va_end(ap);
  }
  g_hash_table_replace(report->nodes, GINT_TO_POINTER(node->id), e);
}

void qh_quant_report_note(QhQuantReport *report, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(report->notes, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

gboolean qh_quant_report_lookup(const QhQuantReport *report, int node_id, gboolean *out_quantized,
                                const char **out_reason) {
  const QhQuantReportEntry *e = g_hash_table_lookup(report->nodes, GINT_TO_POINTER(node_id));
  if (e == NULL)
    return FALSE;
  *out_quantized = e->quantized;
  *out_reason = e->reason;
  return TRUE;
}
