/* Internal interfaces shared by the ONNX loader and saver: the wire-format nesting
 * pre-scan and the opset-change table. Not installed (the SDK never sees protobuf-c). */
#ifndef QH_IO_ONNX_PRIVATE_H
#define QH_IO_ONNX_PRIVATE_H

#include <glib.h>
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

G_BEGIN_DECLS

/* The newest default-domain opset the change table covers. */
#define QH_ONNX_NEWEST_KNOWN_OPSET 23

/* Walk the protobuf wire format of a message of type `desc` without building it:
 * check every tag, varint and length against the buffer end and fail when messages
 * nest deeper than max_depth (the outer message is depth 1). Messages carry no path;
 * the caller prefixes it. QH_ERROR_LIMIT for nesting, QH_ERROR_PARSE otherwise. */
gboolean qh_onnx_wire_check(const guint8 *data, gsize len, const ProtobufCMessageDescriptor *desc,
                            int max_depth, GError **error);

/* The first opset version in 18..opset at which the default-domain op_type changed,
 * 0 when it is unchanged through `opset`, -1 when the op is not in the table or
 * opset is beyond QH_ONNX_NEWEST_KNOWN_OPSET. */
int qh_onnx_op_first_change_after_17(const char *op_type, int64_t opset);
/* The same, counting only changes after the newest form of op_type the kernels implement
 * (opset 18's for the reductions, Split, Pad, Resize and ScatterND; else 17): what the
 * loader refuses. */
int qh_onnx_op_first_unimplemented_change(const char *op_type, int64_t opset);

G_END_DECLS

#endif
