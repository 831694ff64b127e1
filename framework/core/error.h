/* Errors of the host: one GError domain, a few codes, and the message conventions.
 *
 * Every fallible host function takes `GError **error` as its last parameter and
 * returns FALSE / NULL on failure with *error set (GLib's convention). Messages are
 * one line, without a trailing period, and name what failed:
 *   - functions that read or write a file start the message with the file's path
 *     ("model.onnx: truncated protobuf at byte 1234");
 *   - graph and kernel functions name the node and its op ("node 'conv1' (Conv): ...");
 * the CLI adds the model path in front of graph-level messages. */
#ifndef QH_CORE_ERROR_H
#define QH_CORE_ERROR_H

#include <glib.h>

G_BEGIN_DECLS

#define QH_ERROR (qh_error_quark())
GQuark qh_error_quark(void);

typedef enum {
  QH_ERROR_FAILED = 1,    /* anything not covered below */
  QH_ERROR_IO,            /* open/read/write/rename failed */
  QH_ERROR_PARSE,         /* a file is malformed (protobuf, .npy header, zip) */
  QH_ERROR_INVALID,       /* well-formed but inconsistent (dangling input, cycle, bad attribute) */
  QH_ERROR_UNSUPPORTED,   /* valid but outside what qhost implements (op, opset, dtype) */
  QH_ERROR_LIMIT,         /* a size or depth bound was hit (element count overflow, nesting) */
  QH_ERROR_NOMEM,         /* an allocation failed */
  QH_ERROR_MISMATCH,      /* data does not fit the model (shape, dtype, missing input) */
} QhErrorCode;

/* Prefix an existing error's message with "PREFIX: " unless it already starts with it.
 * Threading: any. Does nothing when error or *error is NULL. */
void qh_error_prefix(GError **error, const char *prefix);

G_END_DECLS

#endif
