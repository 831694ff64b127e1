/* The report's storage, shared by report.c and the flow that prints it. */
#ifndef QH_QUANT_REPORT_PRIVATE_H
#define QH_QUANT_REPORT_PRIVATE_H

#include "quant/report.h"

typedef struct {
  int node_id;
  gboolean quantized;
  char *pattern;
  char *reason;
} QhQuantReportEntry;

struct QhQuantReport {
  GHashTable *nodes; /* node id -> QhQuantReportEntry* */
  GPtrArray *notes;  /* char* */
};

void qh_quant_report_entry_free(gpointer entry);

#endif
