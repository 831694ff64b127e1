/* What npy.c shares with npz.c: the pieces of the .npy format (preamble, header
 * dict, data length) as separate steps, so that every reader (memory, file,
 * zip member) validates the header before it allocates or reads any data, and the
 * writers' header formatting and atomic temporary-file naming. Not installed. */
#ifndef QH_IO_NPY_PRIVATE_H
#define QH_IO_NPY_PRIVATE_H

#include <glib.h>
#include <stdint.h>

#include "core/tensor.h"

G_BEGIN_DECLS

/* Magic (6) + version (2) + header length (2 in version 1.0, 4 in 2.0 and 3.0). */
#define QH_NPY_PREAMBLE_MAX 12

/* A parsed and validated header: the array is supported and its size is bounded. */
typedef struct {
  QhDType dtype;
  QhShape shape;
  int64_t numel;
  guint64 data_offset; /* preamble + header text: where the data starts */
  guint64 data_bytes;  /* numel * element size */
} QhNpyHeader;

/* Parse the first min(len, 12) bytes of a .npy image. On success *preamble_len is
 * 10 or 12, *header_len is bounded by QH_NPY_MAX_HEADER and *major is 1, 2 or 3.
 * total_len is the size of the whole image, to refuse headers running past it. */
gboolean qh_npy_parse_preamble(const guint8 *buf, gsize len, guint64 total_len,
                               gsize *preamble_len, gsize *header_len, int *major,
                               GError **error);

/* Parse the header dict text that follows the preamble and fill *out (data_offset
 * is preamble_len + len). Refuses unsupported dtypes, Fortran order and shapes
 * whose element count exceeds QH_MAX_ELEMENTS. */
gboolean qh_npy_parse_header(const char *text, gsize len, gsize preamble_len, int major,
                             QhNpyHeader *out, GError **error);

/* Check that exactly hdr->data_bytes follow the header when the image holds
 * `available` bytes after it. */
gboolean qh_npy_check_data_length(const QhNpyHeader *hdr, guint64 available, GError **error);

/* numpy stores bools as bytes 0 and 1; make any other byte 1 so kernels can rely on it. */
void qh_npy_normalize_bools(QhTensor *tensor);

/* The preamble and padded header of a .npy holding `tensor` (format 1.0, or 2.0 when
 * the header does not fit 1.0), such that the data starts at a multiple of 64 bytes.
 * Returns NULL with an error for dtypes qhost cannot write. g_free the result. */
guint8 *qh_npy_format_header(const QhTensor *tensor, gsize *out_len, GError **error);

/* A fresh temporary path next to `path` ("PATH.tmp-PID-RANDOM"); g_free it. */
char *qh_npy_temp_path(const char *path);

/* Write the concatenation of n byte ranges to `path` atomically: a temporary file in
 * the same directory, fsync, rename. On failure nothing is left at `path` (an
 * existing file there is kept) and no temporary remains. Errors name `path`. */
gboolean qh_npy_write_atomic(const char *path, const void *const *parts, const gsize *sizes,
                             int n, GError **error);

G_END_DECLS

#endif
