/* Calibration data: one model-input set per sample, in file order, read one sample at
 * a time so memory stays bounded by the model, not the data set. Accepted (docs/design.md,
 * CALIB): a .npy whose first axis indexes samples (single-input models; the file is
 * streamed); a directory of .npy files, one sample each, in name order; an .npz with
 * one array per model input name (samples along each array's first axis; loaded
 * whole). For a model input [1, C, H, W] the file is [N, C, H, W] and sample i is
 * rows i:i+1; for an input without a batch axis ([C, H, W]) sample i is row i. Every
 * sample must be finite (NaN or Inf is an error naming the file and the sample).
 *
 * Ownership: the caller's. Threading: one thread. Errors start with the file's path. */
#ifndef QH_QUANT_CALIB_DATA_H
#define QH_QUANT_CALIB_DATA_H

#include <glib.h>

#include "core/graph.h"
#include "core/tensor.h"

G_BEGIN_DECLS

typedef struct QhCalibSource QhCalibSource;

QhCalibSource *qh_calib_open(const char *path, const QhGraph *graph, GError **error);
/* The same from arrays in memory: arrays holds QhNamedTensor* (io/npy.h), one per model
 * input, named after it, samples along the first axis (copied; arrays is unchanged).
 * label names the source in errors. */
QhCalibSource *qh_calib_open_arrays(const char *label, const QhGraph *graph, const GPtrArray *arrays,
                                    GError **error);
void qh_calib_close(QhCalibSource *source);
/* Number of samples (>= 1: an empty source is refused at open). */
int64_t qh_calib_count(const QhCalibSource *source);
/* The shapes every sample has, one per graph input (borrowed). */
const QhShape *qh_calib_shapes(const QhCalibSource *source);
/* Sample `index`: a new array of one tensor per graph input (graph->inputs order),
 * freed with qh_calib_free_sample. */
QhTensor **qh_calib_read(QhCalibSource *source, int64_t index, GError **error);
void qh_calib_free_sample(QhCalibSource *source, QhTensor **sample);

G_END_DECLS

#endif
