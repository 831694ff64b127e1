/* Functions of the shape family defined outside shape.c (Transpose lives in
 * shape-transpose.c) so that shape.c can keep the family's one table. Private to
 * the kernels directory; never installed. */
#ifndef QH_EXEC_KERNELS_SHAPE_PRIVATE_H
#define QH_EXEC_KERNELS_SHAPE_PRIVATE_H

#include "exec/op.h"

gboolean qh_transpose_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            QhTensor *outputs, int n_outputs, GError **error);
gboolean qh_transpose_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                          int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error);
gboolean qh_transpose_run_naive(QhExecContext *ctx, const QhNode *node,
                                const QhTensor *const *inputs, int n_inputs,
                                QhTensor *const *outputs, int n_outputs, GError **error);

#endif
