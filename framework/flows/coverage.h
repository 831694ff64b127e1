/* Coverage figures of a lowered run (coverage.c): what ran in a plugin's kernels and
 * what stayed on the host. Everything is borrowed; printing goes to the FILE* given. */
#ifndef QH_FLOWS_COVERAGE_H
#define QH_FLOWS_COVERAGE_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>

#include "lower/lowering.h"

G_BEGIN_DECLS

typedef struct {
  int units, plugin_units;
  int64_t total_macs, plugin_macs;
  double total_ms, plugin_ms;       /* per run, over the profiled runs */
  int qdq_nodes, layout_nodes;      /* host nodes that are no unit */
  double qdq_ms, layout_ms;
  int qdq_between_kernels;          /* Q/DQ nodes with a plugin kernel on both sides */
} QhCoverage;

/* Figures of lowering l whose lowered graph g ran `runs` profiled times on plan
 * (plan NULL or runs 0: MACs and unit counts only). */
void qh_coverage_compute(const QhLowering *l, const QhGraph *g, const QhPlan *plan, int runs,
                             QhCoverage *c);
void qh_coverage_print(FILE *out, const QhLowering *l, const QhPlan *plan, const QhCoverage *c,
                           int runs, gboolean with_time);
/* Adds one object value (the "coverage" member's) to b. */
void qh_coverage_json(const QhLowering *l, const QhPlan *plan, const QhCoverage *c,
                          int runs, gboolean with_time, JsonBuilder *b);

G_END_DECLS

#endif
