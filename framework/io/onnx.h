/* ONNX models in and out of the graph IR, through protobuf-c code generated at build
 * time from the system's onnx.proto.
 *
 * Loading accepts default-domain opsets 13 to 17; a newer opset loads only when every
 * op the model uses is unchanged since opset 17 (otherwise QH_ERROR_UNSUPPORTED
 * naming the op and the opset). Every hostile-input check happens before the data it
 * guards is trusted: message nesting is bounded by a pre-scan of the wire format
 * (protobuf-c itself recurses without limit), tensor byte counts must match their
 * shapes, element counts are bounded (QH_MAX_ELEMENTS), and external-data locations
 * must resolve to a regular file inside the model's directory (absolute paths and
 * ".." components are refused, and symlinks may not lead out).
 *
 * Ownership: a loaded graph belongs to the caller (qh_graph_free). Saving borrows
 * the graph. Threading: independent calls may run concurrently. Errors: one-line
 * GErrors that start with the file's path. */
#ifndef QH_IO_ONNX_H
#define QH_IO_ONNX_H

#include <glib.h>

#include "core/graph.h"

G_BEGIN_DECLS

/* Deepest message nesting the loader accepts (ModelProto counts as depth 1). */
#define QH_ONNX_MAX_NESTING 32
/* The opset range whose semantics qhost implements. */
#define QH_ONNX_MIN_OPSET 13
#define QH_ONNX_MAX_OPSET 17
/* The newest default-domain opset qhost writes (for QuantizeLinear-21's 16-bit types). */
#define QH_ONNX_MAX_WRITE_OPSET 21

/* Load the model at path. External data resolves relative to path's directory. */
QhGraph *qh_onnx_load(const char *path, GError **error);

/* Load from a buffer (borrowed for the call). `name` is used in messages; external
 * data resolves relative to base_dir, and is refused when base_dir is NULL. */
QhGraph *qh_onnx_load_from_memory(const guint8 *data, gsize len, const char *name,
                                  const char *base_dir, GError **error);

/* Write graph to path atomically (a temporary file in the same directory, then
 * rename): on failure nothing is left at path and an existing file there is kept.
 * Keeps value names, node names, attributes, metadata and opset imports; all
 * initializers are stored inline. */
gboolean qh_onnx_save(const QhGraph *graph, const char *path, GError **error);

/* Raise graph's default-domain opset to `target` (at most QH_ONNX_MAX_WRITE_OPSET; a graph
 * without one counts as opset 17), rewriting the ops whose form changed at opset 18
 * (Reduce* axes attribute -> input, Split num_outputs). Every other node must mean the
 * same at `target` as the loader defines it; otherwise QH_ERROR_UNSUPPORTED naming the
 * node and op, and the graph is left unchanged. A target below the graph's opset is
 * QH_ERROR_UNSUPPORTED. Not thread-safe on one graph. */
gboolean qh_onnx_upgrade_opset(QhGraph *graph, int64_t target, GError **error);

/* TRUE when op_type (default domain) is unchanged between opset 17 and `opset`, so a
 * model importing `opset` may use it with opset-17 semantics. */
gboolean qh_onnx_op_unchanged_since_17(const char *op_type, int64_t opset);

G_END_DECLS

#endif
