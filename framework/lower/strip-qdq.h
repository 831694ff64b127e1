/* The float model inside a QDQ model: every QuantizeLinear -> DequantizeLinear pair
 * on an activation is dropped, so the consumers read the float value the pair
 * fake-quantized. Weights' DequantizeLinear nodes stay (the planner folds them into
 * float constants), so the float model computes with the dequantized weights. This
 * is the fp32 baseline `qhost bench` compares an int8 run with.
 *
 * Ownership: rewrites graph in place. Errors: QH_ERROR_INVALID if the graph cannot
 * be ordered. Returns the number of pairs dropped through *out_dropped. */
#ifndef QH_LOWER_STRIP_QDQ_H
#define QH_LOWER_STRIP_QDQ_H

#include <glib.h>

#include "core/graph.h"

G_BEGIN_DECLS

gboolean qh_qdq_strip(QhGraph *graph, int *out_dropped, GError **error);

/* Number of live QuantizeLinear and DequantizeLinear nodes. */
int qh_qdq_count(const QhGraph *graph);

G_END_DECLS

#endif
