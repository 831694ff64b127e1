/* Tensor storage: shapes with overflow-checked element counts and aligned buffers.
 * Every size that reaches an allocation here may come from an untrusted file, so
 * each is checked and failure is an error, not an abort. */
#include "core/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

gboolean qh_shape_numel(const QhShape *shape, int64_t *out_numel, GError **error) {
  if (shape->rank < 0 || shape->rank > QH_MAX_RANK) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "rank %d is outside 0..%d", shape->rank,
                QH_MAX_RANK);
    return FALSE;
  }
  int64_t n = 1;
  for (int i = 0; i < shape->rank; i++) {
    int64_t d = shape->dims[i];
    if (d < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "dimension %d of shape is unknown or negative (%" G_GINT64_FORMAT ")", i, d);
      return FALSE;
    }
    if (d != 0 && n > QH_MAX_ELEMENTS / d) {
      g_set_error(error, QH_ERROR, QH_ERROR_LIMIT,
                  "shape's element count exceeds the limit of 2^34 elements");
      return FALSE;
    }
    n *= d;
  }
  if (n > QH_MAX_ELEMENTS) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT, "shape's element count exceeds the limit of 2^34 elements");
    return FALSE;
  }
  *out_numel = n;
  return TRUE;
}

gboolean qh_shape_equal(const QhShape *a, const QhShape *b) {
  if (a->rank != b->rank)
    return FALSE;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i])
      return FALSE;
  return TRUE;
}

char *qh_shape_to_string(const QhShape *shape) {
  GString *s = g_string_new("[");
  for (int i = 0; i < shape->rank; i++) {
    if (i)
      g_string_append(s, ", ");
    if (shape->dims[i] < 0)
      g_string_append_c(s, '?');
    else
      g_string_append_printf(s, "%" G_GINT64_FORMAT, shape->dims[i]);
  }
  g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

QhShape qh_shape_make(int rank, const int64_t *dims) {
  QhShape s = {0};
  g_assert(rank >= 0 && rank <= QH_MAX_RANK);
  s.rank = rank;
  for (int i = 0; i < rank; i++)
    s.dims[i] = dims[i];
  return s;
}

void *qh_aligned_alloc0(size_t size) {
  if (size > SIZE_MAX / 2)
    return NULL;
  size_t padded = (size + QH_TENSOR_ALIGN + QH_TENSOR_ALIGN - 1) / QH_TENSOR_ALIGN * QH_TENSOR_ALIGN;
  void *p = NULL;
  if (posix_memalign(&p, QH_TENSOR_ALIGN, padded) != 0)
    return NULL;
  memset(p, 0, padded);
  return p;
}

void qh_aligned_free(void *p) { free(p); }

QhTensor *qh_tensor_new(QhDType dtype, const QhShape *shape, GError **error) {
  int64_t n;
  size_t esize = qh_dtype_size(dtype);
  if (esize == 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "unsupported element type %d", (int)dtype);
    return NULL;
  }
  if (!qh_shape_numel(shape, &n, error))
    return NULL;
  size_t nbytes = (size_t)n * esize;
  void *data = qh_aligned_alloc0(nbytes);
  if (data == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_NOMEM, "out of memory allocating %zu bytes", nbytes);
    return NULL;
  }
  QhTensor *t = g_new0(QhTensor, 1);
  t->dtype = dtype;
  t->shape = *shape;
  t->data = data;
  t->nbytes = nbytes;
  return t;
}

QhTensor *qh_tensor_copy(const QhTensor *src, GError **error) {
  QhTensor *t = qh_tensor_new(src->dtype, &src->shape, error);
  if (t != NULL && src->nbytes > 0)
    memcpy(t->data, src->data, src->nbytes);
  return t;
}

void qh_tensor_free(QhTensor *tensor) {
  if (tensor == NULL)
    return;
  qh_aligned_free(tensor->data);
  g_free(tensor);
}

int64_t qh_tensor_numel(const QhTensor *tensor) {
  int64_t n = 1;
  for (int i = 0; i < tensor->shape.rank; i++)
    n *= tensor->shape.dims[i];
  return n;
}
