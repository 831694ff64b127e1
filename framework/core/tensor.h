/* Dense tensors: an element type, a static shape and a 64-byte aligned buffer.
 *
 * Ownership: qh_tensor_new* return a tensor the caller owns and frees with
 * qh_tensor_free; the tensor owns its buffer. Threading: a tensor is not
 * synchronised; concurrent readers are fine, a writer needs exclusive access.
 * Errors: allocation failures and element counts that overflow or exceed
 * QH_MAX_ELEMENTS are reported as GErrors (QH_ERROR_NOMEM / QH_ERROR_LIMIT), never
 * by aborting, because sizes come from untrusted files. */
#ifndef QH_CORE_TENSOR_H
#define QH_CORE_TENSOR_H

#include <glib.h>
#include <stdint.h>

#include "core/dtype.h"

G_BEGIN_DECLS

#define QH_MAX_RANK 8
/* Upper bound on the elements of one tensor (2^34): far above any model qhost runs,
 * far below what a hostile header can claim. */
#define QH_MAX_ELEMENTS (INT64_C(1) << 34)
/* Buffers are aligned to this and followed by this much slack. */
#define QH_TENSOR_ALIGN 64

typedef struct {
  int rank;
  int64_t dims[QH_MAX_RANK]; /* -1 marks an unknown (symbolic) dimension */
} QhShape;

typedef struct {
  QhDType dtype;
  QhShape shape;
  void *data;    /* 64-byte aligned; NULL only for a shape-only description */
  size_t nbytes; /* element count * element size */
} QhTensor;

/* Element count of a fully known shape, checking each dimension is >= 0 and the
 * product stays within QH_MAX_ELEMENTS. Rank 0 has one element. */
gboolean qh_shape_numel(const QhShape *shape, int64_t *out_numel, GError **error);

/* TRUE when both shapes have the same rank and dimensions. */
gboolean qh_shape_equal(const QhShape *a, const QhShape *b);

/* Format as "[1, 3, 224, 224]" ("?" for unknown dims); the caller g_free()s it. */
char *qh_shape_to_string(const QhShape *shape);

/* Make a shape from a dims array; rank must be <= QH_MAX_RANK. */
QhShape qh_shape_make(int rank, const int64_t *dims);

/* A new zero-filled tensor. shape must be fully known. */
QhTensor *qh_tensor_new(QhDType dtype, const QhShape *shape, GError **error);

/* A deep copy of src; NULL with an error when memory runs out. */
QhTensor *qh_tensor_copy(const QhTensor *src, GError **error);

/* Free a tensor and its buffer. NULL is fine. */
void qh_tensor_free(QhTensor *tensor);

/* Element count (product of dims; 1 for rank 0). The shape must be valid. */
int64_t qh_tensor_numel(const QhTensor *tensor);

/* Aligned allocation with QH_TENSOR_ALIGN slack after the end, zero-filled. Returns
 * NULL when size is absurd or memory runs out. Free with qh_aligned_free. */
void *qh_aligned_alloc0(size_t size);
void qh_aligned_free(void *p);

G_END_DECLS

#endif
