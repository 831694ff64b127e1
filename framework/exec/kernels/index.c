/* Reference kernels of the index family: Gather, Slice and Pad (ONNX opset 13-18).
 * They select or replicate elements without computing new values, so they move
 * bytes and work for every element type. Slice and Pad read their index inputs in
 * both infer and run (a kernel keeps no state between the two); run copies whole
 * innermost rows, and each has a naive twin that resolves every output element on
 * its own. */
#include <math.h>
#include <string.h>

#include "exec/kernels/common.h"

static gboolean need_input(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int i,
                           GError **error) {
  if (i >= n_inputs || inputs[i] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input %d is missing", i);
  return TRUE;
}

static gboolean set_output(const QhNode *node, QhTensor *out, QhDType dtype, const QhShape *shape,
                           GError **error) {
  int64_t n;
  GError *e = NULL;
  if (!qh_shape_numel(shape, &n, &e)) {
    qh_kernel_fail(error, node, (QhErrorCode)e->code, "%s", e->message);
    g_error_free(e);
    return FALSE;
  }
  out->dtype = dtype;
  out->shape = *shape;
  return TRUE;
}

/* ---- Gather ---- */

static gboolean gather_axis(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            int *axis, GError **error) {
  int64_t a;
  if (!need_input(node, inputs, n_inputs, 0, error) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_S64, QH_DTYPE_S32, 0) ||
      !qh_node_attr_get_int(node, "axis", 0, &a, error))
    return FALSE;
  if (inputs[0]->shape.rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "data must have rank >= 1");
  return qh_kernel_axis(node, a, inputs[0]->shape.rank, axis, error);
}

static gboolean gather_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int axis;
  if (!gather_axis(node, inputs, n_inputs, &axis, error))
    return FALSE;
  const QhShape *d = &inputs[0]->shape, *ix = &inputs[1]->shape;
  /* Any index into an empty axis is out of range: say so before the output (which
   * may be large) is allocated. */
  int64_t n_ix = 1;
  for (int i = 0; i < ix->rank; i++)
    n_ix *= ix->dims[i];
  if (d->dims[axis] == 0 && n_ix > 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "indices into axis %d, which is empty",
                          axis);
  int rank = d->rank - 1 + ix->rank;
  if (rank > QH_MAX_RANK)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "output rank %d exceeds %d", rank,
                          QH_MAX_RANK);
  QhShape out = {.rank = rank};
  int k = 0;
  for (int i = 0; i < axis; i++)
    out.dims[k++] = d->dims[i];
  for (int i = 0; i < ix->rank; i++)
    out.dims[k++] = ix->dims[i];
  for (int i = axis + 1; i < d->rank; i++)
    out.dims[k++] = d->dims[i];
  return set_output(node, &outputs[0], inputs[0]->dtype, &out, error);
}

static gboolean gather_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                           int n_inputs, QhTensor *const *outputs, int n_outputs,
                           GError **error) {
  (void)ctx, (void)n_outputs;
  int axis;
  if (!gather_axis(node, inputs, n_inputs, &axis, error))
    return FALSE;
  const QhTensor *x = inputs[0], *ix = inputs[1];
  int64_t outer = 1, inner = (int64_t)qh_dtype_size(x->dtype), dim = x->shape.dims[axis];
  for (int i = 0; i < axis; i++)
    outer *= x->shape.dims[i];
  for (int i = axis + 1; i < x->shape.rank; i++)
    inner *= x->shape.dims[i];
  int64_t n_ix = qh_tensor_numel(ix);
  const guint8 *src = x->data;
  guint8 *dst = outputs[0]->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < n_ix; j++) {
      int64_t i = ix->dtype == QH_DTYPE_S64 ? ((const int64_t *)ix->data)[j]
                                            : ((const int32_t *)ix->data)[j];
      if (i < -dim || i >= dim)
        return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                              "index %" G_GINT64_FORMAT " is out of range [-%" G_GINT64_FORMAT
                              ", %" G_GINT64_FORMAT ") on axis %d",
                              i, dim, dim, axis);
      if (i < 0)
        i += dim;
      if (inner > 0)
        memcpy(dst, src + (size_t)((o * dim + i) * inner), (size_t)inner);
      dst += inner;
    }
  return TRUE;
}

/* ---- Slice ---- */

typedef struct {
  int64_t start[QH_MAX_RANK], step[QH_MAX_RANK];
  QhShape out;
} SliceParams;

/* ONNX's Slice rules: negative starts/ends count from the end, then starts clamp to
 * [0, dim] (step > 0) or [0, dim - 1] (step < 0) and ends to [0, dim] or [-1, dim - 1];
 * so INT64_MAX / INT64_MIN ends mean "to the end" in either direction. */
static gboolean slice_params(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             SliceParams *p, GError **error) {
  int64_t *st = NULL, *en = NULL, *ax = NULL, *sp = NULL, ns, ne, na = -1, nsp = -1;
  gboolean ok = FALSE;
  if (!need_input(node, inputs, n_inputs, 0, error) ||
      !qh_kernel_const_ints(node, n_inputs > 1 ? inputs[1] : NULL, "starts", &st, &ns, error) ||
      !qh_kernel_const_ints(node, n_inputs > 2 ? inputs[2] : NULL, "ends", &en, &ne, error) ||
      (n_inputs > 3 && inputs[3] != NULL &&
       !qh_kernel_const_ints(node, inputs[3], "axes", &ax, &na, error)) ||
      (n_inputs > 4 && inputs[4] != NULL &&
       !qh_kernel_const_ints(node, inputs[4], "steps", &sp, &nsp, error)))
    goto done;
  const QhShape *in = &inputs[0]->shape;
  if (ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns)) {
    qh_kernel_fail(error, node, QH_ERROR_INVALID,
                   "starts, ends, axes and steps must have the same length");
    goto done;
  }
  p->out = *in;
  gboolean seen[QH_MAX_RANK] = {0};
  for (int a = 0; a < in->rank; a++) {
    p->start[a] = 0;
    p->step[a] = 1;
  }
  for (int64_t i = 0; i < ns; i++) {
    int a;
    if (!qh_kernel_axis(node, ax ? ax[i] : i, in->rank, &a, error))
      goto done;
    if (seen[a]) {
      qh_kernel_fail(error, node, QH_ERROR_INVALID, "axis %d is repeated", a);
      goto done;
    }
    seen[a] = TRUE;
    int64_t step = sp ? sp[i] : 1, dim = in->dims[a];
    if (step == 0) {
      qh_kernel_fail(error, node, QH_ERROR_INVALID, "step on axis %d is 0", a);
      goto done;
    }
    int64_t s = st[i], e = en[i];
    if (s < 0)
      s += dim;
    if (e < 0)
      e += dim;
    int64_t count;
    if (dim == 0) {
      s = 0;
      count = 0;
    } else if (step > 0) {
      s = CLAMP(s, 0, dim);
      e = CLAMP(e, 0, dim);
      count = e > s ? 1 + (e - s - 1) / step : 0;
    } else {
      s = CLAMP(s, 0, dim - 1);
      e = CLAMP(e, -1, dim - 1);
      /* -step overflows for INT64_MIN; any step beyond the dim takes one element */
      int64_t back = step < -dim ? dim + 1 : -step;
      count = s > e ? 1 + (s - e - 1) / back : 0;
    }
    p->start[a] = s;
    p->step[a] = step;
    p->out.dims[a] = count;
  }
  ok = TRUE;
done:
  g_free(st);
  g_free(en);
  g_free(ax);
  g_free(sp);
  return ok;
}

static gboolean slice_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  SliceParams p;
  if (!slice_params(node, inputs, n_inputs, &p, error))
    return FALSE;
  return set_output(node, &outputs[0], inputs[0]->dtype, &p.out, error);
}

static gboolean slice_run_naive(QhExecContext *ctx, const QhNode *node,
                                const QhTensor *const *inputs, int n_inputs,
                                QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  SliceParams p;
  if (!slice_params(node, inputs, n_inputs, &p, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  int rank = x->shape.rank;
  size_t es = qh_dtype_size(x->dtype);
  int64_t strides[QH_MAX_RANK], n = qh_tensor_numel(outputs[0]);
  qh_shape_strides(&x->shape, strides);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, src = 0;
    for (int k = rank - 1; k >= 0; k--) {
      src += (p.start[k] + rest % p.out.dims[k] * p.step[k]) * strides[k];
      rest /= p.out.dims[k];
    }
    memcpy((guint8 *)outputs[0]->data + (size_t)i * es, (const guint8 *)x->data + (size_t)src * es,
           es);
  }
  return TRUE;
}

/* Walks output rows (all but the last dim) with an odometer; a unit-step last dim
 * is one memcpy per row. */
static gboolean slice_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                          int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  SliceParams p;
  if (!slice_params(node, inputs, n_inputs, &p, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  QhTensor *y = outputs[0];
  if (y->nbytes == 0)
    return TRUE;
  if (x->shape.rank == 0) {
    memcpy(y->data, x->data, y->nbytes);
    return TRUE;
  }
  int last = x->shape.rank - 1;
  size_t es = qh_dtype_size(x->dtype);
  int64_t strides[QH_MAX_RANK], idx[QH_MAX_RANK] = {0}, rows = 1, len = p.out.dims[last];
  qh_shape_strides(&x->shape, strides);
  for (int k = 0; k < last; k++)
    rows *= p.out.dims[k];
  int64_t off = 0;
  for (int k = 0; k <= last; k++)
    off += p.start[k] * strides[k];
  const guint8 *src = x->data;
  guint8 *dst = y->data;
  for (int64_t r = 0; r < rows; r++) {
    if (p.step[last] == 1) {
      memcpy(dst, src + (size_t)off * es, (size_t)len * es);
      dst += (size_t)len * es;
    } else {
      for (int64_t j = 0; j < len; j++, dst += es)
        memcpy(dst, src + (size_t)(off + j * p.step[last]) * es, es);
    }
    for (int k = last - 1; k >= 0; k--) {
      off += p.step[k] * strides[k];
      if (++idx[k] < p.out.dims[k])
        break;
      off -= idx[k] * p.step[k] * strides[k];
      idx[k] = 0;
    }
  }
  return TRUE;
}

/* ---- Pad ---- */

typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE } PadMode;

typedef struct {
  PadMode mode;
  int64_t before[QH_MAX_RANK]; /* may be negative (crops) */
  QhShape out;
} PadParams;

static gboolean pad_params(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                           PadParams *p, GError **error) {
  const char *mode;
  int64_t *pads = NULL, n, *axes = NULL, n_axes = -1;
  if (!need_input(node, inputs, n_inputs, 0, error) ||
      !qh_node_attr_get_string(node, "mode", "constant", &mode, error))
    return FALSE;
  if (strcmp(mode, "constant") == 0)
    p->mode = PAD_CONSTANT;
  else if (strcmp(mode, "reflect") == 0)
    p->mode = PAD_REFLECT;
  else if (strcmp(mode, "edge") == 0)
    p->mode = PAD_EDGE;
  else
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "mode '%s' is not supported", mode);
  if (!qh_kernel_const_ints(node, n_inputs > 1 ? inputs[1] : NULL, "pads", &pads, &n, error))
    return FALSE;
  if (n_inputs > 3 && inputs[3] != NULL &&
      !qh_kernel_const_ints(node, inputs[3], "axes", &axes, &n_axes, error)) {
    g_free(pads);
    return FALSE;
  }
  const QhShape *in = &inputs[0]->shape;
  int64_t n_ax = n_axes >= 0 ? n_axes : in->rank;
  gboolean ok = TRUE, seen[QH_MAX_RANK] = {0};
  int64_t after[QH_MAX_RANK] = {0};
  memset(p->before, 0, sizeof(p->before));
  if (n != 2 * n_ax)
    ok = qh_kernel_fail(error, node, QH_ERROR_INVALID,
                        "pads has %" G_GINT64_FORMAT " entries; %" G_GINT64_FORMAT " expected", n,
                        2 * n_ax);
  for (int64_t i = 0; ok && i < n_ax; i++) {
    int a;
    ok = qh_kernel_axis(node, axes ? axes[i] : i, in->rank, &a, error);
    if (ok && seen[a])
      ok = qh_kernel_fail(error, node, QH_ERROR_INVALID, "axis %d is repeated", a);
    if (!ok)
      break;
    seen[a] = TRUE;
    p->before[a] = pads[i];
    after[a] = pads[i + n_ax];
  }
  g_free(pads);
  g_free(axes);
  if (!ok)
    return FALSE;
  p->out = *in;
  for (int a = 0; a < in->rank; a++) {
    int64_t b = p->before[a], e = after[a], d = in->dims[a];
    if (b < -d || e < -d || b > QH_MAX_ELEMENTS || e > QH_MAX_ELEMENTS || d + b + e < 0)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "pads %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT
                            " do not fit axis %d of size %" G_GINT64_FORMAT,
                            b, e, a, d);
    if (d == 0 && d + b + e > 0 && p->mode != PAD_CONSTANT)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "cannot %s-pad the empty axis %d", mode,
                            a);
    p->out.dims[a] = d + b + e;
  }
  return TRUE;
}

/* Input coordinate for output coordinate o along an axis, or -1 for the constant. */
static int64_t pad_source(PadMode mode, int64_t o, int64_t before, int64_t dim) {
  int64_t i = o - before;
  if (i >= 0 && i < dim)
    return i;
  if (mode == PAD_CONSTANT)
    return -1;
  if (mode == PAD_EDGE || dim == 1)
    return i < 0 ? 0 : dim - 1;
  /* reflect without repeating the edge, period 2(dim-1), as numpy does for wide pads */
  int64_t period = 2 * (dim - 1), m = i % period;
  if (m < 0)
    m += period;
  return m < dim ? m : period - m;
}

/* The fill value as the data's element type (ONNX gives it in that type already;
 * other numeric types are converted for robustness). */
static gboolean pad_value(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhDType dtype, guint8 *value, GError **error) {
  memset(value, 0, 8);
  const QhTensor *c = n_inputs > 2 ? inputs[2] : NULL;
  if (c == NULL || c->nbytes == 0)
    return TRUE;
  if (c->data == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "constant_value has no data");
  if (c->dtype == dtype) {
    memcpy(value, c->data, qh_dtype_size(dtype));
    return TRUE;
  }
  double v;
  switch (c->dtype) {
  case QH_DTYPE_F32: v = *(const float *)c->data; break;
  case QH_DTYPE_U8: v = *(const guint8 *)c->data; break;
  case QH_DTYPE_S8: v = *(const gint8 *)c->data; break;
  case QH_DTYPE_S32: v = *(const gint32 *)c->data; break;
  case QH_DTYPE_S64: v = (double)*(const gint64 *)c->data; break;
  default:
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "constant_value of type %s",
                          qh_dtype_name(c->dtype));
  }
  double r = nearbyint(v);
  switch (dtype) {
  case QH_DTYPE_F32: *(float *)value = (float)v; break;
  case QH_DTYPE_U8: *value = (guint8)CLAMP(r, 0, 255); break;
  case QH_DTYPE_S8: *(gint8 *)value = (gint8)CLAMP(r, -128, 127); break;
  case QH_DTYPE_S32: *(gint32 *)value = (gint32)CLAMP(r, G_MININT32, G_MAXINT32); break;
  case QH_DTYPE_S64: *(gint64 *)value = (gint64)CLAMP(r, -0x1p63, 0x1p63 - 1024); break;
  default:
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "constant_value of type %s for %s data",
                          qh_dtype_name(c->dtype), qh_dtype_name(dtype));
  }
  return TRUE;
}

static gboolean pad_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  PadParams p;
  if (!pad_params(node, inputs, n_inputs, &p, error))
    return FALSE;
  return set_output(node, &outputs[0], inputs[0]->dtype, &p.out, error);
}

static gboolean pad_run_naive(QhExecContext *ctx, const QhNode *node,
                              const QhTensor *const *inputs, int n_inputs,
                              QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  PadParams p;
  guint8 value[8];
  const QhTensor *x = inputs[0];
  if (!pad_params(node, inputs, n_inputs, &p, error) ||
      !pad_value(node, inputs, n_inputs, x->dtype, value, error))
    return FALSE;
  size_t es = qh_dtype_size(x->dtype);
  int64_t strides[QH_MAX_RANK], n = qh_tensor_numel(outputs[0]);
  qh_shape_strides(&x->shape, strides);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, src = 0;
    for (int k = x->shape.rank - 1; k >= 0 && src >= 0; k--) {
      int64_t s = pad_source(p.mode, rest % p.out.dims[k], p.before[k], x->shape.dims[k]);
      rest /= p.out.dims[k];
      src = s < 0 ? -1 : src + s * strides[k];
    }
    guint8 *dst = (guint8 *)outputs[0]->data + (size_t)i * es;
    memcpy(dst, src < 0 ? value : (const guint8 *)x->data + (size_t)src * es, es);
  }
  return TRUE;
}

/* NCHW dims (or pads) in NHWC order. */
static void nchw_to_nhwc(int64_t *d) {
  const int64_t c = d[1];
  d[1] = d[2];
  d[2] = d[3];
  d[3] = c;
}

/* Row by row: each output row is a constant row or one input row with its ends
 * filled; the copied middle is one memcpy. A 4-D tensor the layout plan keeps
 * channels-last (exec/layout.c) is padded as the [N, H, W, C] array it is. */
static gboolean pad_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                        int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  PadParams p;
  guint8 value[8];
  const QhTensor *x = inputs[0];
  QhTensor *y = outputs[0], x_nhwc;
  if (!pad_params(node, inputs, n_inputs, &p, error) ||
      !pad_value(node, inputs, n_inputs, x->dtype, value, error))
    return FALSE;
  if (((ctx->nhwc_inputs | ctx->nhwc_outputs) & 1) && x->shape.rank == 4) {
    x_nhwc = *x;
    nchw_to_nhwc(x_nhwc.shape.dims);
    nchw_to_nhwc(p.before);
    nchw_to_nhwc(p.out.dims);
    x = &x_nhwc;
  }
  if (y->nbytes == 0)
    return TRUE;
  if (x->shape.rank == 0) {
    memcpy(y->data, x->data, y->nbytes);
    return TRUE;
  }
  int rank = x->shape.rank, last = rank - 1;
  size_t es = qh_dtype_size(x->dtype);
  int64_t strides[QH_MAX_RANK], idx[QH_MAX_RANK] = {0}, rows = 1;
  int64_t len = p.out.dims[last], dim = x->shape.dims[last], b = p.before[last];
  qh_shape_strides(&x->shape, strides);
  for (int k = 0; k < last; k++)
    rows *= p.out.dims[k];
  /* the output range [lo, hi) copies input [lo - b, hi - b) */
  int64_t lo = CLAMP(b, 0, len), hi = CLAMP(b + dim, lo, len);
  guint8 *dst = y->data;
  for (int64_t r = 0; r < rows; r++, dst += (size_t)len * es) {
    int64_t src = 0;
    for (int k = 0; k < last && src >= 0; k++) {
      int64_t s = pad_source(p.mode, idx[k], p.before[k], x->shape.dims[k]);
      src = s < 0 ? -1 : src + s * strides[k];
    }
    for (int k = last - 1; k >= 0; k--) {
      if (++idx[k] < p.out.dims[k])
        break;
      idx[k] = 0;
    }
    if (src < 0) {
      for (int64_t j = 0; j < len; j++)
        memcpy(dst + (size_t)j * es, value, es);
      continue;
    }
    const guint8 *row = (const guint8 *)x->data + (size_t)src * es;
    if (hi > lo)
      memcpy(dst + (size_t)lo * es, row + (size_t)(lo - b) * es, (size_t)(hi - lo) * es);
    for (int64_t j = 0; j < len; j++) {
      if (j == lo)
        j = hi;
      if (j >= len)
        break;
      int64_t s = pad_source(p.mode, j, b, dim);
      memcpy(dst + (size_t)j * es, s < 0 ? value : row + (size_t)s * es, es);
    }
  }
  return TRUE;
}

const QhOpDef qh_ops_index[] = {
    {"Gather", 2, 2, 1, 1, gather_infer, gather_run, NULL, NULL},
    {"Slice", 3, 5, 1, 1, slice_infer, slice_run, slice_run_naive, NULL},
    {"Pad", 2, 4, 1, 1, pad_infer, pad_run, pad_run_naive, NULL},
    {NULL},
};
