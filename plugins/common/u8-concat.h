/* uint8 Concat shared by the lowering plugins (x86, fbgemm): the inputs of a
 * DequantizeLinear* -> Concat -> QuantizeLinear unit joined along the ONNX axis, in
 * whatever layout the tensors have (channels-last rank-4 tensors concatenate along their
 * physical axis). Each input is requantized to the output's qparams through a 256-entry
 * table built with the host's formulas (u8-kernels.h's qh_u8_quant), so the output is
 * identical to the host's QDQ run; an input on the output's grid is a plain copy.
 * The calling plugin owns the kernel object and runs the tasks on its own threads.
 * Functions taking a host report errors as a QhStatus the caller frees (NULL: success);
 * a QhU8Concat is used by one thread at a time, except qh_u8_concat_task, which any
 * number of threads may run on one prepared job. Plugin code: includes only the SDK and
 * this directory. */
#ifndef QH_PLUGINS_U8_CONCAT_H
#define QH_PLUGINS_U8_CONCAT_H

#include <stddef.h>
#include <stdint.h>

#include <qhost/qhost-plugin.h>

typedef struct QhU8Concat QhU8Concat;

/* NULL when u is a well-formed lone Concat of uint8 per-tensor activations; otherwise an
 * UNSUPPORTED status with the reason (INVALID_ARGUMENT for a malformed unit). */
QhStatus *qh_u8_concat_accept(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u);

/* The kernel for u (accepted first) into *out, owned by the caller (qh_u8_concat_destroy). */
QhStatus *qh_u8_concat_create(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                              QhU8Concat **out);
void qh_u8_concat_destroy(QhU8Concat *k);

/* QhKernelOps.reshape's contract: checks the inputs, sets the output's shape and layout. */
QhStatus *qh_u8_concat_reshape(QhU8Concat *k, const QhHostApi *host, const QhTensorView *inputs,
                               size_t n_inputs, QhTensorView *outputs, size_t n_outputs, size_t *out_workspace);

/* One run's work: checked by qh_u8_concat_prepare against reshape's views, then *tasks
 * calls of qh_u8_concat_task(job, index < *tasks, worker) in any order do the copy
 * (*tasks = 0: nothing to do). job borrows inputs and outputs for the run. */
typedef struct {
  const QhU8Concat *k;
  const QhTensorView *inputs;
  uint8_t *y;
  size_t per_task; /* outer indices per task */
} QhU8ConcatJob;
QhStatus *qh_u8_concat_prepare(const QhU8Concat *k, const QhHostApi *host, const QhTensorView *inputs,
                               size_t n_inputs, QhTensorView *outputs, size_t n_outputs, QhU8ConcatJob *job,
                               size_t *tasks);
void qh_u8_concat_task(void *job, size_t index, uint32_t worker);

#endif
