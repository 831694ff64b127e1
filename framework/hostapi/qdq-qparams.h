/* Quantization parameters as a QDQ model states them: read from the constant scale
 * and zero-point inputs of a QuantizeLinear or DequantizeLinear, with the narrower
 * range `qhost quantize` records in the file's metadata. The lowering reads its
 * units' qparams this way, and the host hands them to a plugin's qparams_get on a
 * QDQ graph (post_convert, deploy), so no plugin re-parses Q/DQ nodes.
 *
 * Ownership: qparams a reader fills own their scale/zero_point arrays (free them
 * with qh_qdq_qparams_clear); the graph is borrowed. Threading: reads only.
 * Errors: QH_ERROR_INVALID naming the node for malformed parameters (an empty or
 * non-positive scale, a zero point array not matching it, an axis out of range). */
#ifndef QH_HOSTAPI_QDQ_QPARAMS_H
#define QH_HOSTAPI_QDQ_QPARAMS_H

#include <glib.h>

#include "core/graph.h"
#include "hostapi/graph-view.h"

G_BEGIN_DECLS

/* The qparams of QuantizeLinear or DequantizeLinear node n, whose integer side is value
 * x (the DQ's input, the Q's output; -1 if unknown). Returns 1 with *out filled, 0 when
 * the parameters are not constants of a known integer type (no match, *out untouched),
 * -1 with error set when they are malformed. */
int qh_qdq_read_qparams(const QhGraph *g, const QhNode *n, int x, QhQParams *out, GError **error);
/* Free q's arrays and zero it. */
void qh_qdq_qparams_clear(QhQParams *q);

/* A qparams_get hook for a view of a QDQ graph (graph-view.h): input `slot` of a node
 * reads the DequantizeLinear producing it, output `slot` the first QuantizeLinear
 * reading it. The arrays it hands out live in the reader until qh_qdq_reader_free. */
typedef struct QhQdqReader QhQdqReader;
QhQdqReader *qh_qdq_reader_new(void);
void qh_qdq_reader_free(QhQdqReader *reader);
/* Install the reader as view's qparams_get hook (no qparams_set). */
void qh_qdq_reader_attach(QhQdqReader *reader, QhGraphView *view);

G_END_DECLS

#endif
