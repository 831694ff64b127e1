/* Helpers shared by the reference kernels (see common.h). */
#include "exec/kernels/common.h"

#include <stdarg.h>
#include <string.h>

gboolean qh_kernel_fail(GError **error, const QhNode *node, QhErrorCode code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *cause = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QH_ERROR, code, "node '%s' (%s): %s", node->name, node->op_type, cause);
  g_free(cause);
  return FALSE;
}

gboolean qh_kernel_check_dtype(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                               int i, GError **error, ...) {
  if (i >= n_inputs || inputs[i] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input %d is missing", i);
  va_list ap;
  va_start(ap, error);
  int dt;
  GString *allowed = g_string_new(NULL);
  while ((dt = va_arg(ap, int)) != 0) {
    if (dt == (int)inputs[i]->dtype) {
      va_end(ap);
      g_string_free(allowed, TRUE);
      return TRUE;
    }
    g_string_append_printf(allowed, "%s%s", allowed->len ? ", " : "", qh_dtype_name((QhDType)dt));
  }
  va_end(ap);
  qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "input %d has type %s; supported: %s", i,
                 qh_dtype_name(inputs[i]->dtype), allowed->str);
  g_string_free(allowed, TRUE);
  return FALSE;
}

gboolean qh_kernel_axis(const QhNode *node, int64_t axis, int rank, int *out_axis, GError **error) {
  if (axis < -rank || axis >= rank || (rank == 0 && axis != 0))
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "axis %" G_GINT64_FORMAT " is outside [-%d, %d)", axis, rank, rank);
  *out_axis = (int)(axis < 0 ? axis + rank : axis);
  return TRUE;
}

gboolean qh_kernel_broadcast(const QhNode *node, const QhShape *a, const QhShape *b, QhShape *out,
                             GError **error) {
  int rank = MAX(a->rank, b->rank);
  QhShape r = {.rank = rank};
  for (int i = 0; i < rank; i++) {
    int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
    int64_t da = ia >= 0 ? a->dims[ia] : 1;
    int64_t db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char *sa = qh_shape_to_string(a), *sb = qh_shape_to_string(b);
      qh_kernel_fail(error, node, QH_ERROR_INVALID, "shapes %s and %s do not broadcast", sa, sb);
      g_free(sa);
      g_free(sb);
      return FALSE;
    }
    r.dims[i] = da == 1 ? db : da;
  }
  *out = r;
  return TRUE;
}

gboolean qh_kernel_const_ints(const QhNode *node, const QhTensor *input, const char *what,
                              int64_t **out_v, int64_t *out_n, GError **error) {
  if (input == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input '%s' is missing", what);
  if (input->data == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "input '%s' must be a constant (an initializer or computable at load time)",
                          what);
  if (input->shape.rank > 1)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input '%s' must be 1-D", what);
  int64_t n = input->shape.rank == 0 ? 1 : input->shape.dims[0];
  int64_t *v = g_new(int64_t, n > 0 ? n : 1);
  if (input->dtype == QH_DTYPE_S64) {
    memcpy(v, input->data, sizeof(int64_t) * (size_t)n);
  } else if (input->dtype == QH_DTYPE_S32) {
    for (int64_t i = 0; i < n; i++)
      v[i] = ((const int32_t *)input->data)[i];
  } else {
    g_free(v);
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input '%s' must be int64 or int32", what);
  }
  *out_v = v;
  *out_n = n;
  return TRUE;
}

void qh_shape_strides(const QhShape *shape, int64_t *strides) {
  int64_t s = 1;
  for (int i = shape->rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape->dims[i];
  }
}
