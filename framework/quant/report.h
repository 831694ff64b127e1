/* The quantization report: for every node whether it was quantized, by which pattern,
 * or why it stayed float; for every quantized tensor its dtype, scale, zero point and
 * observer; and the error it cost (SQNR). Printed as text by `qhost quantize` and as
 * JSON with --report.
 *
 * Ownership: the caller's. Threading: one thread. */
#ifndef QH_QUANT_REPORT_H
#define QH_QUANT_REPORT_H

#include <glib.h>
#include <json-glib/json-glib.h>

#include "core/graph.h"

G_BEGIN_DECLS

typedef struct QhQuantReport QhQuantReport;

QhQuantReport *qh_quant_report_new(void);
void qh_quant_report_free(QhQuantReport *report);

/* Record the decision for a node (the last call for a node wins). pattern: the
 * matched pattern ("Conv -> Relu"), or NULL. reason: why it stayed float (NULL when
 * quantized), e.g. "no pattern for Sigmoid in backend 'my_backend'", "the qconfig
 * violates dtype config 'weighted_op_quint8': activation quant_min 0 ... ", "excluded by
 * node_name '/l4/x*' in qconfig.json". */
void qh_quant_report_node(QhQuantReport *report, const QhNode *node, gboolean quantized,
                          const char *pattern, const char *reason_fmt, ...) G_GNUC_PRINTF(5, 6);

/* A note of the plugin or the host (refine changes, warnings), one line. */
void qh_quant_report_note(QhQuantReport *report, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* The decision recorded for a node: TRUE when one was; *out_quantized and *out_reason
 * (borrowed, NULL when quantized) describe it. */
gboolean qh_quant_report_lookup(const QhQuantReport *report, int node_id, gboolean *out_quantized,
                                const char **out_reason);

G_END_DECLS

#endif
