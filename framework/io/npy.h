/* NumPy .npy and .npz files: the formats of calibration data, inputs and outputs.
 *
 * Supported: format versions 1.0, 2.0 and 3.0; C order; dtypes float32, uint8,
 * int8, int32, int64 (and bool for reading), little-endian or byte-order free.
 * Fortran order, object arrays (pickles), structured, complex, unicode and other
 * dtypes are refused with QH_ERROR_UNSUPPORTED. Headers are parsed strictly and
 * bounded in size; the data length must match the shape exactly; element counts are
 * bounded by QH_MAX_ELEMENTS before anything is allocated.
 *
 * .npz is a zip archive (stored or deflated, as numpy's savez / savez_compressed
 * write it) of NAME.npy members, read through libzip; qhost writes it stored.
 *
 * Ownership: returned tensors and arrays belong to the caller. Threading:
 * independent calls may run concurrently; a QhNpyReader is used by one thread at a
 * time. Errors: one-line GErrors that start with the file's path. Writes are atomic
 * (temporary file, then rename): on failure nothing is left at the destination. */
#ifndef QH_IO_NPY_H
#define QH_IO_NPY_H

#include <glib.h>
#include <stdint.h>

#include "core/tensor.h"

G_BEGIN_DECLS

/* Largest .npy header accepted, in bytes (numpy itself writes a few hundred). */
#define QH_NPY_MAX_HEADER 65536

/* Read a whole .npy file. */
QhTensor *qh_npy_read(const char *path, GError **error);

/* Parse an in-memory .npy image (borrowed); `name` is used in messages. */
QhTensor *qh_npy_read_from_memory(const guint8 *data, gsize len, const char *name,
                                  GError **error);

/* Write a tensor as .npy (format 1.0, or 2.0 when the header needs it). */
gboolean qh_npy_write(const QhTensor *tensor, const char *path, GError **error);

/* Streaming access to the rows of a large .npy along its first axis, so calibration
 * can read sample by sample without loading the file. */
typedef struct QhNpyReader QhNpyReader;

QhNpyReader *qh_npy_reader_open(const char *path, GError **error);
/* dtype and full shape of the array in the file. */
QhDType qh_npy_reader_dtype(const QhNpyReader *reader);
const QhShape *qh_npy_reader_shape(const QhNpyReader *reader);
/* Read rows [start, start + count) of the first axis into a new tensor whose first
 * dimension is count. Rank-0 arrays have no rows. */
QhTensor *qh_npy_reader_read_rows(QhNpyReader *reader, int64_t start, int64_t count,
                                  GError **error);
void qh_npy_reader_close(QhNpyReader *reader);

/* One named array of an .npz archive. */
typedef struct {
  char *name;       /* member name without the ".npy" suffix */
  QhTensor *tensor;
} QhNamedTensor;

void qh_named_tensor_free(QhNamedTensor *nt);

/* Read every array of an .npz, in archive order: a GPtrArray of QhNamedTensor* whose
 * free function releases them. */
GPtrArray *qh_npz_read(const char *path, GError **error);

/* Write n named tensors as an uncompressed .npz. */
gboolean qh_npz_write(const char *path, const char *const *names, const QhTensor *const *tensors,
                      int n, GError **error);

G_END_DECLS

#endif
