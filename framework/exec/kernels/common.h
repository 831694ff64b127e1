/* Small helpers shared by the reference kernels: node-named errors, typed data
 * access, axis normalisation, broadcasting and reading constant index inputs. */
#ifndef QH_EXEC_KERNELS_COMMON_H
#define QH_EXEC_KERNELS_COMMON_H

#include <glib.h>
#include <stdint.h>

#include "core/error.h"
#include "exec/op.h"

G_BEGIN_DECLS

/* Set *error to "node 'NAME' (OP): <formatted cause>" with the given code; returns FALSE. */
gboolean qh_kernel_fail(GError **error, const QhNode *node, QhErrorCode code, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

/* Check that input i exists and has one of the dtypes in the 0-terminated list. */
gboolean qh_kernel_check_dtype(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                               int i, GError **error, ...);

/* Normalise axis into [0, rank) (negative counts from the end); error when outside. */
gboolean qh_kernel_axis(const QhNode *node, int64_t axis, int rank, int *out_axis, GError **error);

/* NumPy-style multidirectional broadcast of a and b into *out. */
gboolean qh_kernel_broadcast(const QhNode *node, const QhShape *a, const QhShape *b, QhShape *out,
                             GError **error);

/* Read a constant 1-D (or scalar) int64/int32 input into a new array (g_free it).
 * Fails with QH_ERROR_UNSUPPORTED when the input is not a constant. */
gboolean qh_kernel_const_ints(const QhNode *node, const QhTensor *input, const char *what,
                              int64_t **out_v, int64_t *out_n, GError **error);

/* Row-major strides of a shape, in elements. */
void qh_shape_strides(const QhShape *shape, int64_t *strides);

static inline float *qh_f32(const QhTensor *t) { return (float *)t->data; }

G_END_DECLS

#endif
