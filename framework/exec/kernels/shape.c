/* Reference kernels of the shape family: ops that change how a tensor's elements are
 * addressed without computing new values (Shape, Reshape, Flatten, Squeeze,
 * Unsqueeze, Identity, Dropout in inference mode, Constant, Concat), following ONNX
 * opset 13-17. They move bytes, so every element type qhost knows works; Transpose,
 * which needs a blocked fast path, lives in shape-transpose.c but is listed in this
 * file's table. */
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/kernels/shape-private.h"

static gboolean need_input(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int i,
                           GError **error) {
  if (i >= n_inputs || inputs[i] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input %d is missing", i);
  return TRUE;
}

/* Element count of an inferred shape, with the error naming the node. */
static gboolean shape_numel(const QhNode *node, const QhShape *shape, int64_t *out,
                            GError **error) {
  GError *e = NULL;
  if (qh_shape_numel(shape, out, &e))
    return TRUE;
  qh_kernel_fail(error, node, (QhErrorCode)e->code, "%s", e->message);
  g_error_free(e);
  return FALSE;
}

static gboolean set_output(const QhNode *node, QhTensor *out, QhDType dtype, const QhShape *shape,
                           GError **error) {
  int64_t n;
  if (!shape_numel(node, shape, &n, error))
    return FALSE;
  out->dtype = dtype;
  out->shape = *shape;
  return TRUE;
}

/* The ops that only relabel dims share one run: the bytes are unchanged. */
static void copy_bytes(const QhTensor *in, QhTensor *out) {
  size_t n = MIN(in->nbytes, out->nbytes);
  if (n > 0 && in->data != out->data)
    memmove(out->data, in->data, n);
}

static gboolean run_copy(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                         int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)node, (void)n_inputs, (void)n_outputs, (void)error;
  copy_bytes(inputs[0], outputs[0]);
  return TRUE;
}

/* ---- Shape ---- */

/* Opset 15's start/end: negative counts from the end, then both clamp to [0, rank]. */
static gboolean shape_range(const QhNode *node, int rank, int64_t *start, int64_t *end,
                            GError **error) {
  if (!qh_node_attr_get_int(node, "start", 0, start, error) ||
      !qh_node_attr_get_int(node, "end", rank, end, error))
    return FALSE;
  int64_t *v[] = {start, end};
  for (int i = 0; i < 2; i++) {
    if (*v[i] < 0)
      *v[i] += rank;
    *v[i] = CLAMP(*v[i], 0, rank);
  }
  if (*end < *start)
    *end = *start;
  return TRUE;
}

static gboolean shape_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int64_t start, end;
  if (!need_input(node, inputs, n_inputs, 0, error) ||
      !shape_range(node, inputs[0]->shape.rank, &start, &end, error))
    return FALSE;
  QhShape s = {.rank = 1, .dims = {end - start}};
  return set_output(node, &outputs[0], QH_DTYPE_S64, &s, error);
}

/* Reads only the input's shape: the planner runs it on inputs without data. */
static gboolean shape_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                          int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_inputs, (void)n_outputs;
  int64_t start, end;
  if (!shape_range(node, inputs[0]->shape.rank, &start, &end, error))
    return FALSE;
  int64_t *o = outputs[0]->data;
  for (int64_t i = start; i < end; i++)
    o[i - start] = inputs[0]->shape.dims[i];
  return TRUE;
}

/* ---- Reshape ---- */

static gboolean reshape_mismatch(const QhNode *node, const QhShape *in, int64_t in_n,
                                 const int64_t *req, int64_t n_req, const char *why,
                                 GError **error) {
  char *sin = qh_shape_to_string(in);
  GString *sr = g_string_new("[");
  for (int64_t i = 0; i < n_req; i++)
    g_string_append_printf(sr, "%s%" G_GINT64_FORMAT, i ? ", " : "", req[i]);
  g_string_append_c(sr, ']');
  qh_kernel_fail(error, node, QH_ERROR_INVALID,
                 "cannot reshape %s (%" G_GINT64_FORMAT " elements) to %s: %s", sin, in_n, sr->str,
                 why);
  g_free(sin);
  g_string_free(sr, TRUE);
  return FALSE;
}

static gboolean reshape_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                              QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int64_t allowzero, in_n, *req = NULL, n_req;
  if (!need_input(node, inputs, n_inputs, 0, error) ||
      !qh_node_attr_get_int(node, "allowzero", 0, &allowzero, error) ||
      !shape_numel(node, &inputs[0]->shape, &in_n, error) ||
      !qh_kernel_const_ints(node, n_inputs > 1 ? inputs[1] : NULL, "shape", &req, &n_req, error))
    return FALSE;
  const QhShape *in = &inputs[0]->shape;
  gboolean ok = FALSE;
  QhShape out = {.rank = (int)MIN(n_req, QH_MAX_RANK + 1)};
  int infer_at = -1;
  int64_t known = 1;
  gboolean has_zero = FALSE;
  if (n_req > QH_MAX_RANK) {
    qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "target rank %" G_GINT64_FORMAT " exceeds %d",
                   n_req, QH_MAX_RANK);
    goto done;
  }
  for (int i = 0; i < out.rank; i++) {
    int64_t d = req[i];
    if (d == 0 && !allowzero) {
      if (i >= in->rank) {
        reshape_mismatch(node, in, in_n, req, n_req, "0 copies a dimension the input lacks", error);
        goto done;
      }
      d = in->dims[i];
    }
    if (d == -1) {
      if (infer_at >= 0) {
        reshape_mismatch(node, in, in_n, req, n_req, "more than one -1", error);
        goto done;
      }
      infer_at = i;
      continue;
    }
    if (d < 0 || d > QH_MAX_ELEMENTS) {
      reshape_mismatch(node, in, in_n, req, n_req, "invalid dimension", error);
      goto done;
    }
    out.dims[i] = d;
    if (d == 0)
      has_zero = TRUE;
    else /* saturates above the limit: such a product can never match in_n */
      known = known > QH_MAX_ELEMENTS / d ? QH_MAX_ELEMENTS + 1 : known * d;
  }
  if (has_zero)
    known = 0;
  if (infer_at >= 0) {
    if (allowzero && has_zero) {
      reshape_mismatch(node, in, in_n, req, n_req, "-1 with a 0 dimension under allowzero", error);
      goto done;
    }
    if (known == 0 || in_n % known != 0) {
      reshape_mismatch(node, in, in_n, req, n_req, "the element counts do not divide", error);
      goto done;
    }
    out.dims[infer_at] = in_n / known;
  } else if (known != in_n) {
    reshape_mismatch(node, in, in_n, req, n_req, "the element counts differ", error);
    goto done;
  }
  ok = set_output(node, &outputs[0], inputs[0]->dtype, &out, error);
done:
  g_free(req);
  return ok;
}

/* ---- Flatten ---- */

static gboolean flatten_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                              QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int64_t axis;
  if (!need_input(node, inputs, n_inputs, 0, error) ||
      !qh_node_attr_get_int(node, "axis", 1, &axis, error))
    return FALSE;
  const QhShape *in = &inputs[0]->shape;
  /* unlike most axes, rank itself is valid here (everything goes into the rows) */
  if (axis < -in->rank || axis > in->rank)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "axis %" G_GINT64_FORMAT " is outside [-%d, %d]", axis, in->rank,
                          in->rank);
  if (axis < 0)
    axis += in->rank;
  QhShape head = {.rank = (int)axis}, tail = {.rank = in->rank - (int)axis};
  memcpy(head.dims, in->dims, sizeof(int64_t) * (size_t)head.rank);
  memcpy(tail.dims, in->dims + axis, sizeof(int64_t) * (size_t)tail.rank);
  QhShape out = {.rank = 2};
  if (!shape_numel(node, &head, &out.dims[0], error) ||
      !shape_numel(node, &tail, &out.dims[1], error))
    return FALSE;
  return set_output(node, &outputs[0], inputs[0]->dtype, &out, error);
}

/* ---- Squeeze / Unsqueeze ---- */

/* Axes from input 1 (opset 13) or, for older models, the attribute; *n = -1 when
 * neither is given. */
static gboolean read_axes(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          int64_t **axes, int64_t *n, GError **error) {
  if (n_inputs > 1 && inputs[1] != NULL)
    return qh_kernel_const_ints(node, inputs[1], "axes", axes, n, error);
  const int64_t *v;
  if (!qh_node_attr_get_ints(node, "axes", n, &v, error))
    return FALSE;
  *axes = *n >= 0 ? g_memdup2(v, sizeof(int64_t) * (size_t)MAX(*n, 1)) : NULL;
  return TRUE;
}

/* Normalise axes against rank into a membership mask, rejecting duplicates. */
static gboolean axes_mask(const QhNode *node, const int64_t *axes, int64_t n, int rank,
                          gboolean *mask, GError **error) {
  memset(mask, 0, sizeof(gboolean) * QH_MAX_RANK);
  for (int64_t i = 0; i < n; i++) {
    int a;
    if (!qh_kernel_axis(node, axes[i], rank, &a, error))
      return FALSE;
    if (mask[a])
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "axis %" G_GINT64_FORMAT " is repeated",
                            axes[i]);
    mask[a] = TRUE;
  }
  return TRUE;
}

static gboolean squeeze_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                              QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int64_t *axes = NULL, n;
  if (!need_input(node, inputs, n_inputs, 0, error) ||
      !read_axes(node, inputs, n_inputs, &axes, &n, error))
    return FALSE;
  const QhShape *in = &inputs[0]->shape;
  gboolean mask[QH_MAX_RANK];
  gboolean ok = TRUE;
  if (n <= 0) { /* like ONNX Runtime, empty axes squeeze every 1 as absent axes do */
    for (int i = 0; i < in->rank; i++)
      mask[i] = in->dims[i] == 1;
  } else {
    ok = axes_mask(node, axes, n, in->rank, mask, error);
    for (int i = 0; ok && i < in->rank; i++)
      if (mask[i] && in->dims[i] != 1)
        ok = qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "cannot squeeze axis %d of size %" G_GINT64_FORMAT, i, in->dims[i]);
  }
  g_free(axes);
  if (!ok)
    return FALSE;
  QhShape out = {.rank = 0};
  for (int i = 0; i < in->rank; i++)
    if (!mask[i])
      out.dims[out.rank++] = in->dims[i];
  return set_output(node, &outputs[0], inputs[0]->dtype, &out, error);
}

static gboolean unsqueeze_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int64_t *axes = NULL, n;
  if (!need_input(node, inputs, n_inputs, 0, error) ||
      !read_axes(node, inputs, n_inputs, &axes, &n, error))
    return FALSE;
  const QhShape *in = &inputs[0]->shape;
  gboolean ok = TRUE, mask[QH_MAX_RANK];
  int64_t rank = in->rank + MAX(n, 0);
  if (n < 0)
    ok = qh_kernel_fail(error, node, QH_ERROR_INVALID, "axes are missing");
  else if (rank > QH_MAX_RANK)
    ok = qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                        "output rank %" G_GINT64_FORMAT " exceeds %d", rank, QH_MAX_RANK);
  else
    ok = axes_mask(node, axes, n, (int)rank, mask, error);
  g_free(axes);
  if (!ok)
    return FALSE;
  QhShape out = {.rank = (int)rank};
  for (int i = 0, j = 0; i < out.rank; i++)
    out.dims[i] = mask[i] ? 1 : in->dims[j++];
  return set_output(node, &outputs[0], inputs[0]->dtype, &out, error);
}

/* ---- Identity / Dropout ---- */

static gboolean identity_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                               QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  if (!need_input(node, inputs, n_inputs, 0, error))
    return FALSE;
  return set_output(node, &outputs[0], inputs[0]->dtype, &inputs[0]->shape, error);
}

/* qhost only runs inference: a training-mode Dropout would have to be random, unless
 * its ratio is 0 (torchvision's swin calls F.dropout(p=0.0) without training=False,
 * which exports training_mode true: an identity, as ONNX Runtime runs it). */
static gboolean dropout_check_mode(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                   GError **error) {
  const QhTensor *t = n_inputs > 2 ? inputs[2] : NULL;
  if (t == NULL || t->data == NULL || t->nbytes == 0)
    return TRUE;
  if (t->dtype != QH_DTYPE_BOOL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "training_mode must be bool, not %s",
                          qh_dtype_name(t->dtype));
  const QhTensor *ratio = n_inputs > 1 ? inputs[1] : NULL;
  gboolean zero_ratio = ratio != NULL && ratio->data != NULL && ratio->dtype == QH_DTYPE_F32 &&
                        qh_tensor_numel(ratio) == 1 && ((const float *)ratio->data)[0] == 0.0f;
  if (*(const guint8 *)t->data && !zero_ratio)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "training_mode is true with a non-zero ratio; only inference is supported");
  return TRUE;
}

static gboolean dropout_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                              QhTensor *outputs, int n_outputs, GError **error) {
  if (!identity_infer(node, inputs, n_inputs, outputs, n_outputs, error) ||
      !dropout_check_mode(node, inputs, n_inputs, error))
    return FALSE;
  if (n_outputs > 1)
    return set_output(node, &outputs[1], QH_DTYPE_BOOL, &inputs[0]->shape, error);
  return TRUE;
}

static gboolean dropout_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                            int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  if (!dropout_check_mode(node, inputs, n_inputs, error))
    return FALSE;
  copy_bytes(inputs[0], outputs[0]);
  if (n_outputs > 1 && outputs[1] != NULL && outputs[1]->nbytes > 0)
    memset(outputs[1]->data, 1, outputs[1]->nbytes);
  return TRUE;
}

/* ---- Constant ---- */

/* The attribute holding the value, as a borrowed tensor or a scalar/list to build. */
static gboolean constant_value(const QhNode *node, const QhAttr **attr, GError **error) {
  static const char *const supported[] = {"value", "value_float", "value_floats", "value_int",
                                          "value_ints"};
  static const char *const unsupported[] = {"sparse_value", "value_string", "value_strings"};
  *attr = NULL;
  for (size_t i = 0; i < G_N_ELEMENTS(unsupported); i++)
    if (qh_node_attr(node, unsupported[i]) != NULL)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "attribute '%s' is not supported",
                            unsupported[i]);
  for (size_t i = 0; i < G_N_ELEMENTS(supported); i++) {
    const QhAttr *a = qh_node_attr(node, supported[i]);
    if (a == NULL)
      continue;
    if (*attr != NULL)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "has both '%s' and '%s'",
                            (*attr)->name, a->name);
    static const QhAttrType want[] = {QH_ATTR_TENSOR, QH_ATTR_FLOAT, QH_ATTR_FLOATS, QH_ATTR_INT,
                                      QH_ATTR_INTS};
    if (a->type != want[i] || (a->type == QH_ATTR_TENSOR && a->t == NULL))
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "attribute '%s' has the wrong type",
                            a->name);
    *attr = a;
  }
  if (*attr == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "no value attribute");
  return TRUE;
}

static gboolean constant_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                               QhTensor *outputs, int n_outputs, GError **error) {
  (void)inputs, (void)n_inputs, (void)n_outputs;
  const QhAttr *a;
  if (!constant_value(node, &a, error))
    return FALSE;
  QhShape s = {.rank = 0};
  switch (a->type) {
  case QH_ATTR_TENSOR: return set_output(node, &outputs[0], a->t->dtype, &a->t->shape, error);
  case QH_ATTR_FLOAT: return set_output(node, &outputs[0], QH_DTYPE_F32, &s, error);
  case QH_ATTR_INT: return set_output(node, &outputs[0], QH_DTYPE_S64, &s, error);
  default:
    s.rank = 1;
    s.dims[0] = a->n;
    return set_output(node, &outputs[0], a->type == QH_ATTR_FLOATS ? QH_DTYPE_F32 : QH_DTYPE_S64,
                      &s, error);
  }
}

static gboolean constant_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                             int n_inputs, QhTensor *const *outputs, int n_outputs,
                             GError **error) {
  (void)ctx, (void)inputs, (void)n_inputs, (void)n_outputs;
  const QhAttr *a;
  if (!constant_value(node, &a, error))
    return FALSE;
  QhTensor *o = outputs[0];
  switch (a->type) {
  case QH_ATTR_TENSOR: copy_bytes(a->t, o); break;
  case QH_ATTR_FLOAT: *(float *)o->data = a->f; break;
  case QH_ATTR_INT: *(int64_t *)o->data = a->i; break;
  case QH_ATTR_FLOATS:
    if (a->n > 0)
      memcpy(o->data, a->floats, sizeof(float) * (size_t)a->n);
    break;
  default:
    if (a->n > 0)
      memcpy(o->data, a->ints, sizeof(int64_t) * (size_t)a->n);
    break;
  }
  return TRUE;
}

/* ---- Concat ---- */

static gboolean concat_axis(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            int *axis, GError **error) {
  for (int i = 0; i < n_inputs; i++)
    if (!need_input(node, inputs, n_inputs, i, error))
      return FALSE;
  if (qh_node_attr(node, "axis") == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "attribute 'axis' is missing");
  int64_t a;
  if (!qh_node_attr_get_int(node, "axis", 0, &a, error))
    return FALSE;
  if (inputs[0]->shape.rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "cannot concatenate scalars");
  return qh_kernel_axis(node, a, inputs[0]->shape.rank, axis, error);
}

static gboolean concat_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int axis;
  if (!concat_axis(node, inputs, n_inputs, &axis, error))
    return FALSE;
  QhShape out = inputs[0]->shape;
  for (int i = 1; i < n_inputs; i++) {
    const QhTensor *t = inputs[i];
    if (t->dtype != inputs[0]->dtype)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input %d has type %s, input 0 has %s",
                            i, qh_dtype_name(t->dtype), qh_dtype_name(inputs[0]->dtype));
    gboolean fits = t->shape.rank == out.rank;
    for (int d = 0; fits && d < out.rank; d++)
      fits = d == axis || t->shape.dims[d] == out.dims[d];
    if (!fits) {
      char *s0 = qh_shape_to_string(&inputs[0]->shape), *si = qh_shape_to_string(&t->shape);
      qh_kernel_fail(error, node, QH_ERROR_INVALID,
                     "input %d's shape %s does not match input 0's %s outside axis %d", i, si, s0,
                     axis);
      g_free(s0);
      g_free(si);
      return FALSE;
    }
    if (t->shape.dims[axis] > QH_MAX_ELEMENTS || out.dims[axis] > QH_MAX_ELEMENTS)
      return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "concatenated axis is too large");
    out.dims[axis] += t->shape.dims[axis];
  }
  return set_output(node, &outputs[0], inputs[0]->dtype, &out, error);
}

typedef struct {
  const QhTensor *const *inputs;
  int n_inputs;
  guint8 *dst;
  size_t esize, pixel_bytes; /* one output pixel: all its channels */
} ConcatNhwc;

/* Channels-last concatenation along the channels: each pixel's channels are the inputs'
 * channels of that pixel, one after the other. */
static void concat_nhwc_task(void *arg, int64_t begin, int64_t end) {
  const ConcatNhwc *j = arg;
  for (int64_t p = begin; p < end; p++) {
    guint8 *dst = j->dst + (size_t)p * j->pixel_bytes;
    for (int i = 0; i < j->n_inputs; i++) {
      size_t chunk = (size_t)j->inputs[i]->shape.dims[1] * j->esize;
      memcpy(dst, (const guint8 *)j->inputs[i]->data + (size_t)p * chunk, chunk);
      dst += chunk;
    }
  }
}

static gboolean concat_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                           int n_inputs, QhTensor *const *outputs, int n_outputs,
                           GError **error) {
  (void)n_outputs;
  int axis;
  if (!concat_axis(node, inputs, n_inputs, &axis, error))
    return FALSE;
  if ((ctx->nhwc_inputs | ctx->nhwc_outputs) != 0 && axis == 1 && outputs[0]->shape.rank == 4) {
    /* the layout plan (exec/layout.c) keeps every operand channels-last */
    const QhShape *os = &outputs[0]->shape;
    ConcatNhwc j = {.inputs = inputs, .n_inputs = n_inputs, .dst = outputs[0]->data,
                    .esize = qh_dtype_size(outputs[0]->dtype)};
    j.pixel_bytes = (size_t)os->dims[1] * j.esize;
    qh_thread_pool_parallel_for(ctx->pool, os->dims[0] * os->dims[2] * os->dims[3], 256,
                                concat_nhwc_task, &j);
    return TRUE;
  }
  const QhShape *os = &outputs[0]->shape;
  int64_t outer = 1, inner = (int64_t)qh_dtype_size(outputs[0]->dtype);
  for (int d = 0; d < axis; d++)
    outer *= os->dims[d];
  for (int d = axis + 1; d < os->rank; d++)
    inner *= os->dims[d];
  guint8 *dst = outputs[0]->data;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n_inputs; i++) {
      size_t chunk = (size_t)(inputs[i]->shape.dims[axis] * inner);
      if (chunk == 0)
        continue;
      memcpy(dst, (const guint8 *)inputs[i]->data + (size_t)o * chunk, chunk);
      dst += chunk;
    }
  return TRUE;
}

const QhOpDef qh_ops_shape[] = {
    {"Shape", 1, 1, 1, 1, shape_infer, shape_run, NULL, NULL},
    {"Reshape", 2, 2, 1, 1, reshape_infer, run_copy, NULL, NULL},
    {"Flatten", 1, 1, 1, 1, flatten_infer, run_copy, NULL, NULL},
    {"Squeeze", 1, 2, 1, 1, squeeze_infer, run_copy, NULL, NULL},
    {"Unsqueeze", 1, 2, 1, 1, unsqueeze_infer, run_copy, NULL, NULL},
    {"Transpose", 1, 1, 1, 1, qh_transpose_infer, qh_transpose_run, qh_transpose_run_naive, NULL},
    {"Identity", 1, 1, 1, 1, identity_infer, run_copy, NULL, NULL},
    {"Dropout", 1, 3, 1, 2, dropout_infer, dropout_run, NULL, NULL},
    {"Constant", 0, 0, 1, 1, constant_infer, constant_run, NULL, NULL},
    {"Concat", 1, G_MAXINT, 1, 1, concat_infer, concat_run, NULL, NULL},
    {NULL},
};
