/* Sliding-window geometry shared by Conv, ConvTranspose and the pools (strides,
 * dilations, explicit pads, auto_pad and ceil_mode resolved into one QhWindow), and
 * the im2col/col2im reshuffles that turn a convolution into one matrix product. */
#include "exec/kernels/conv-private.h"

#include <string.h>

#include "exec/kernels/common.h"

/* Attribute values beyond this are rejected: they only come from broken or hostile
 * files, and the bound keeps every product below in int64 range. */
#define WINDOW_ATTR_MAX INT64_C(0x7fffffff)

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* Range [*lo, *hi) of output positions o in [0, n_out) whose tap o*s - p + off
 * lands inside [0, n_in). */
static void valid_range(int64_t n_out, int64_t n_in, int64_t s, int64_t p, int64_t off,
                        int64_t *lo, int64_t *hi) {
  int64_t a = ceil_div(p - off, s), b = floor_div(n_in - 1 + p - off, s) + 1;
  *lo = CLAMP(a, 0, n_out);
  *hi = CLAMP(b, *lo, n_out);
}

gboolean qh_window_attr_ints(const QhNode *node, const char *name, int64_t want, int64_t lo,
                             int64_t *dst, GError **error) {
  int64_t n;
  const int64_t *v;
  if (!qh_node_attr_get_ints(node, name, &n, &v, error))
    return FALSE;
  if (n < 0)
    return TRUE;
  if (n != want)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "attribute %s has %" G_GINT64_FORMAT " values; expected %" G_GINT64_FORMAT,
                          name, n, want);
  for (int64_t i = 0; i < n; i++) {
    if (v[i] < lo || v[i] > WINDOW_ATTR_MAX)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "attribute %s[%" G_GINT64_FORMAT "] = %" G_GINT64_FORMAT
                            " is out of range",
                            name, i, v[i]);
    dst[i] = v[i];
  }
  return TRUE;
}

gboolean qh_window_kernel_shape(const QhNode *node, int nsp, const int64_t *expect,
                                int64_t *out_k, int64_t *out_n, GError **error) {
  int64_t n;
  const int64_t *v;
  if (!qh_node_attr_get_ints(node, "kernel_shape", &n, &v, error))
    return FALSE;
  *out_n = n;
  if (n < 0)
    return TRUE;
  if (n != nsp)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "attribute kernel_shape has %" G_GINT64_FORMAT
                          " values; the input has %d spatial dimensions",
                          n, nsp);
  for (int i = 0; i < nsp; i++) {
    if (v[i] < 1 || v[i] > WINDOW_ATTR_MAX)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "attribute kernel_shape[%d] = %" G_GINT64_FORMAT " is out of range", i,
                            v[i]);
    if (expect != NULL && v[i] != expect[i])
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "attribute kernel_shape[%d] = %" G_GINT64_FORMAT
                            " disagrees with the weight's %" G_GINT64_FORMAT,
                            i, v[i], expect[i]);
    out_k[i] = v[i];
  }
  return TRUE;
}

gboolean qh_window_resolve(const QhNode *node, int nsp, const int64_t *in, const int64_t *k,
                           gboolean with_ceil, QhWindow *w, GError **error) {
  g_return_val_if_fail(nsp >= 1 && nsp <= QH_WINDOW_DIMS, FALSE);
  int off = QH_WINDOW_DIMS - nsp;
  memset(w, 0, sizeof(*w));
  w->nsp = nsp;
  for (int i = 0; i < QH_WINDOW_DIMS; i++)
    w->in[i] = w->k[i] = w->s[i] = w->d[i] = w->out[i] = 1;
  int64_t strides[QH_WINDOW_DIMS] = {1, 1, 1}, dil[QH_WINDOW_DIMS] = {1, 1, 1};
  int64_t pads[2 * QH_WINDOW_DIMS] = {0};
  if (!qh_window_attr_ints(node, "strides", nsp, 1, strides, error) ||
      !qh_window_attr_ints(node, "dilations", nsp, 1, dil, error) ||
      !qh_window_attr_ints(node, "pads", 2 * nsp, 0, pads, error))
    return FALSE;
  QhAutoPad auto_pad;
  if (!qh_window_auto_pad(node, &auto_pad, error))
    return FALSE;
  gboolean same_upper = auto_pad == QH_AUTO_PAD_SAME_UPPER;
  gboolean same_lower = auto_pad == QH_AUTO_PAD_SAME_LOWER;
  gboolean valid = auto_pad == QH_AUTO_PAD_VALID;
  int64_t ceil_mode = 0;
  if (with_ceil && !qh_node_attr_get_int(node, "ceil_mode", 0, &ceil_mode, error))
    return FALSE;
  for (int i = 0; i < nsp; i++) {
    int j = i + off;
    if (in[i] < 1)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "spatial dimension %d of the input is %" G_GINT64_FORMAT
                            "; expected a known size >= 1",
                            i, in[i]);
    if (k[i] < 1 || k[i] > WINDOW_ATTR_MAX)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "kernel size %" G_GINT64_FORMAT " is out of range", k[i]);
    w->in[j] = in[i];
    w->k[j] = k[i];
    w->s[j] = strides[i];
    w->d[j] = dil[i];
    int64_t dk = (k[i] - 1) * dil[i] + 1;
    if (same_upper || same_lower) {
      w->out[j] = ceil_div(in[i], strides[i]);
      int64_t total = MAX(0, (w->out[j] - 1) * strides[i] + dk - in[i]);
      w->pb[j] = same_upper ? total / 2 : total - total / 2;
      w->pe[j] = total - w->pb[j];
    } else {
      if (!valid) {
        w->pb[j] = pads[i];
        w->pe[j] = pads[i + nsp];
      }
      int64_t span = in[i] + w->pb[j] + w->pe[j] - dk;
      if (span < 0)
        return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                              "the kernel (%" G_GINT64_FORMAT " with dilation %" G_GINT64_FORMAT
                              ") is larger than the padded input (%" G_GINT64_FORMAT ")",
                              k[i], dil[i], in[i] + w->pb[j] + w->pe[j]);
      if (ceil_mode) {
        w->out[j] = ceil_div(span, strides[i]) + 1;
        /* The last window must start inside the input or the left padding. */
        if ((w->out[j] - 1) * strides[i] >= in[i] + w->pb[j])
          w->out[j]--;
      } else {
        w->out[j] = span / strides[i] + 1;
      }
    }
  }
  return TRUE;
}

void qh_conv_im2col(const QhWindow *w, const float *x, int64_t row_begin, int64_t row_end,
                    float *col) {
  const int64_t iD = w->in[0], iH = w->in[1], iW = w->in[2];
  const int64_t oD = w->out[0], oH = w->out[1], oW = w->out[2];
  const int64_t kvol = qh_window_k_size(w), osz = qh_window_out_size(w);
  for (int64_t r = row_begin; r < row_end; r++) {
    int64_t c = r / kvol, t = r % kvol;
    int64_t kw = t % w->k[2], kh = (t / w->k[2]) % w->k[1], kd = t / (w->k[2] * w->k[1]);
    const float *xc = x + c * iD * iH * iW;
    float *dst = col + r * osz;
    int64_t w_lo, w_hi;
    valid_range(oW, iW, w->s[2], w->pb[2], kw * w->d[2], &w_lo, &w_hi);
    for (int64_t od = 0; od < oD; od++) {
      int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
      for (int64_t oh = 0; oh < oH; oh++, dst += oW) {
        int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
        if (id < 0 || id >= iD || ih < 0 || ih >= iH || w_lo >= w_hi) {
          memset(dst, 0, sizeof(float) * (size_t)oW);
          continue;
        }
        /* index arithmetic, not pointer arithmetic: base may be negative */
        const float *row = xc + (id * iH + ih) * iW;
        const int64_t base = kw * w->d[2] - w->pb[2], s = w->s[2];
        for (int64_t ow = 0; ow < w_lo; ow++)
          dst[ow] = 0.0f;
        if (s == 1) {
          memcpy(dst + w_lo, row + (base + w_lo), sizeof(float) * (size_t)(w_hi - w_lo));
        } else {
          for (int64_t ow = w_lo; ow < w_hi; ow++)
            dst[ow] = row[base + ow * s];
        }
        for (int64_t ow = w_hi; ow < oW; ow++)
          dst[ow] = 0.0f;
      }
    }
  }
}

void qh_conv_col2im(const QhWindow *w, const float *col, int64_t c_begin, int64_t c_end,
                    float *y) {
  const int64_t iD = w->in[0], iH = w->in[1], iW = w->in[2];
  const int64_t oD = w->out[0], oH = w->out[1], oW = w->out[2];
  const int64_t kvol = qh_window_k_size(w), osz = qh_window_out_size(w);
  for (int64_t c = c_begin; c < c_end; c++) {
    float *yc = y + c * iD * iH * iW;
    for (int64_t t = 0; t < kvol; t++) {
      int64_t kw = t % w->k[2], kh = (t / w->k[2]) % w->k[1], kd = t / (w->k[2] * w->k[1]);
      const float *src = col + (c * kvol + t) * osz;
      int64_t w_lo, w_hi;
      valid_range(oW, iW, w->s[2], w->pb[2], kw * w->d[2], &w_lo, &w_hi);
      for (int64_t od = 0; od < oD; od++) {
        int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
        for (int64_t oh = 0; oh < oH; oh++, src += oW) {
          int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
          if (id < 0 || id >= iD || ih < 0 || ih >= iH)
            continue;
          float *row = yc + (id * iH + ih) * iW;
          const int64_t base = kw * w->d[2] - w->pb[2], s = w->s[2];
          for (int64_t ow = w_lo; ow < w_hi; ow++)
            row[base + ow * s] += src[ow];
        }
      }
    }
  }
}

gboolean qh_conv_check_numel(const QhNode *node, const QhShape *shape, GError **error) {
  int64_t numel;
  GError *local = NULL;
  if (qh_shape_numel(shape, &numel, &local))
    return TRUE;
  qh_kernel_fail(error, node, QH_ERROR_LIMIT, "output: %s", local->message);
  g_error_free(local);
  return FALSE;
}

gboolean qh_conv_check_operands(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                GError **error) {
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_F32, 0))
    return FALSE;
  if (n_inputs > 2 && inputs[2] != NULL &&
      !qh_kernel_check_dtype(node, inputs, n_inputs, 2, error, QH_DTYPE_F32, 0))
    return FALSE;
  const QhShape *xs = &inputs[0]->shape, *ws = &inputs[1]->shape;
  if (xs->rank < 3 || xs->rank > 2 + QH_WINDOW_DIMS)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "input has rank %d; supported: 3 to 5 (N, C and 1 to 3 spatial dims)",
                          xs->rank);
  if (ws->rank != xs->rank)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "weight has rank %d but the input has rank %d", ws->rank, xs->rank);
  for (int i = 0; i < ws->rank; i++)
    if (ws->dims[i] < 0 || xs->dims[i] < 0)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "input or weight shape is not known");
  return TRUE;
}

gboolean qh_window_auto_pad(const QhNode *node, QhAutoPad *out, GError **error) {
  const char *s;
  if (!qh_node_attr_get_string(node, "auto_pad", "NOTSET", &s, error))
    return FALSE;
  if (strcmp(s, "NOTSET") == 0 || *s == '\0')
    *out = QH_AUTO_PAD_NOTSET;
  else if (strcmp(s, "SAME_UPPER") == 0)
    *out = QH_AUTO_PAD_SAME_UPPER;
  else if (strcmp(s, "SAME_LOWER") == 0)
    *out = QH_AUTO_PAD_SAME_LOWER;
  else if (strcmp(s, "VALID") == 0)
    *out = QH_AUTO_PAD_VALID;
  else
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "unknown auto_pad '%s'", s);
  return TRUE;
}

gboolean qh_conv_set_output(const QhNode *node, int64_t n, int64_t m, const QhWindow *w,
                            const int64_t *spatial, QhTensor *output, GError **error) {
  output->dtype = QH_DTYPE_F32;
  output->shape.rank = w->nsp + 2;
  output->shape.dims[0] = n;
  output->shape.dims[1] = m;
  for (int i = 0; i < w->nsp; i++)
    output->shape.dims[2 + i] = spatial[QH_WINDOW_DIMS - w->nsp + i];
  return qh_conv_check_numel(node, &output->shape, error);
}
