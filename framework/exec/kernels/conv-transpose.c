/* ConvTranspose: the adjoint of Conv. The fast path computes, per (image, group),
 * the column matrix W_g^T X_g [M/g*kvol, in] with one sgemm and scatters it into the
 * output with col2im (parallel over output channels, whose planes are disjoint);
 * the naive twin scatters every input pixel times every tap directly.
 * The output size and padding follow the ONNX spec: explicit pads, or (with
 * output_shape or auto_pad SAME_*) a total padding split with the extra unit at the
 * start except for SAME_UPPER, where it goes at the end. */
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/sgemm-private.h"
#include "exec/kernels/conv-private.h"

/* w describes the Conv that this ConvTranspose is the adjoint of: w->in is the
 * output image, w->out the input grid. */
typedef struct {
  QhWindow w;
  int64_t n, c, m, group, cg, mg;
} TGeom;

static gboolean output_shape_attr(const QhNode *node, int nsp, int64_t *dst, gboolean *given,
                                  GError **error) {
  int64_t n;
  const int64_t *v;
  *given = FALSE;
  if (!qh_node_attr_get_ints(node, "output_shape", &n, &v, error))
    return FALSE;
  if (n < 0)
    return TRUE;
  if (n != nsp && n != nsp + 2)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "attribute output_shape has %" G_GINT64_FORMAT
                          " values; expected %d or %d",
                          n, nsp, nsp + 2);
  for (int i = 0; i < nsp; i++) {
    dst[i] = v[n - nsp + i];
    if (dst[i] < 1 || dst[i] > INT64_C(0x7fffffff))
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "attribute output_shape has an out-of-range size %" G_GINT64_FORMAT,
                            dst[i]);
  }
  *given = TRUE;
  return TRUE;
}

static gboolean tgeom(const QhNode *node, const QhTensor *const *inputs, int n_inputs, TGeom *g,
                      GError **error) {
  if (!qh_conv_check_operands(node, inputs, n_inputs, error))
    return FALSE;
  gboolean has_b = n_inputs > 2 && inputs[2] != NULL;
  const QhShape *xs = &inputs[0]->shape, *ws = &inputs[1]->shape;
  int nsp = xs->rank - 2, off = QH_WINDOW_DIMS - nsp;
  g->n = xs->dims[0];
  g->c = xs->dims[1];
  if (!qh_node_attr_get_int(node, "group", 1, &g->group, error))
    return FALSE;
  if (g->group < 1 || g->c % g->group != 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "group %" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT
                          " input channels",
                          g->group, g->c);
  if (ws->dims[0] != g->c)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "weight has %" G_GINT64_FORMAT " input channels; the input has %"
                          G_GINT64_FORMAT,
                          ws->dims[0], g->c);
  g->cg = g->c / g->group;
  g->mg = ws->dims[1];
  g->m = g->mg * g->group;
  if (has_b && (inputs[2]->shape.rank != 1 || inputs[2]->shape.dims[0] != g->m)) {
    char *s = qh_shape_to_string(&inputs[2]->shape);
    qh_kernel_fail(error, node, QH_ERROR_INVALID,
                   "bias has shape %s; expected [%" G_GINT64_FORMAT "]", s, g->m);
    g_free(s);
    return FALSE;
  }
  int64_t kshape[QH_WINDOW_DIMS], n_k;
  if (!qh_window_kernel_shape(node, nsp, ws->dims + 2, kshape, &n_k, error))
    return FALSE;
  int64_t strides[QH_WINDOW_DIMS] = {1, 1, 1}, dil[QH_WINDOW_DIMS] = {1, 1, 1};
  int64_t pads[2 * QH_WINDOW_DIMS] = {0}, opad[QH_WINDOW_DIMS] = {0}, oshape[QH_WINDOW_DIMS];
  gboolean has_oshape;
  if (!qh_window_attr_ints(node, "strides", nsp, 1, strides, error) ||
      !qh_window_attr_ints(node, "dilations", nsp, 1, dil, error) ||
      !qh_window_attr_ints(node, "pads", 2 * nsp, 0, pads, error) ||
      !qh_window_attr_ints(node, "output_padding", nsp, 0, opad, error) ||
      !output_shape_attr(node, nsp, oshape, &has_oshape, error))
    return FALSE;
  QhAutoPad auto_pad;
  if (!qh_window_auto_pad(node, &auto_pad, error))
    return FALSE;
  gboolean same_upper = auto_pad == QH_AUTO_PAD_SAME_UPPER;
  gboolean same_lower = auto_pad == QH_AUTO_PAD_SAME_LOWER;
  gboolean valid = auto_pad == QH_AUTO_PAD_VALID;

  QhWindow *w = &g->w;
  memset(w, 0, sizeof(*w));
  w->nsp = nsp;
  for (int j = 0; j < QH_WINDOW_DIMS; j++)
    w->in[j] = w->k[j] = w->s[j] = w->d[j] = w->out[j] = 1;
  for (int i = 0; i < nsp; i++) {
    int j = i + off;
    int64_t in = xs->dims[2 + i], k = ws->dims[2 + i];
    if (in < 1 || k < 1)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "spatial dimension %d of the input or weight is empty", i);
    if (k > INT64_C(0x7fffffff))
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "kernel size %" G_GINT64_FORMAT " is out of range", k);
    /* every factor is < 2^35, but the products could overflow int64 */
    if ((double)strides[i] * (double)in + (double)(k - 1) * (double)dil[i] + (double)opad[i] >
        (double)QH_MAX_ELEMENTS)
      return qh_kernel_fail(error, node, QH_ERROR_LIMIT,
                            "output spatial dimension %d would exceed the element limit", i);
    int64_t full = strides[i] * (in - 1) + opad[i] + (k - 1) * dil[i] + 1;
    int64_t out, pb = 0, pe = 0;
    if (has_oshape || same_upper || same_lower) {
      out = has_oshape ? oshape[i] : in * strides[i];
      int64_t total = MAX(0, full - out);
      pb = same_upper ? total / 2 : total - total / 2;
      pe = total - pb;
    } else {
      if (!valid) {
        pb = pads[i];
        pe = pads[i + nsp];
      }
      out = full - pb - pe;
    }
    if (out < 1)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "output spatial dimension %d would be %" G_GINT64_FORMAT, i, out);
    w->in[j] = out;
    w->out[j] = in;
    w->k[j] = k;
    w->s[j] = strides[i];
    w->d[j] = dil[i];
    w->pb[j] = pb;
    w->pe[j] = pe;
  }
  return TRUE;
}

gboolean qh_conv_transpose_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                 QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  TGeom g;
  if (!tgeom(node, inputs, n_inputs, &g, error))
    return FALSE;
  return qh_conv_set_output(node, g.n, g.m, &g.w, g.w.in, &outputs[0], error);
}

/* Fill each of the planes [M, size] of y with its bias (or zero). */
static void fill_bias(float *y, int64_t m, int64_t size, const float *b) {
  for (int64_t i = 0; i < m; i++) {
    float v = b != NULL ? b[i] : 0.0f;
    for (int64_t j = 0; j < size; j++)
      y[i * size + j] = v;
  }
}

typedef struct {
  const QhWindow *w;
  const float *col;
  float *y;
} Col2imArgs;

static void col2im_task(void *arg, int64_t begin, int64_t end) {
  const Col2imArgs *a = arg;
  qh_conv_col2im(a->w, a->col, begin, end, a->y);
}

gboolean qh_conv_transpose_run(QhExecContext *ctx, const QhNode *node,
                               const QhTensor *const *inputs, int n_inputs,
                               QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  TGeom g;
  if (!tgeom(node, inputs, n_inputs, &g, error))
    return FALSE;
  const QhWindow *w = &g.w;
  const float *x = qh_f32(inputs[0]), *wt = qh_f32(inputs[1]);
  const float *b = n_inputs > 2 && inputs[2] != NULL ? qh_f32(inputs[2]) : NULL;
  float *y = qh_f32(outputs[0]);
  /* the input grid is the "output" of the adjoint conv, and vice versa */
  const int64_t isz = qh_window_out_size(w), osz = qh_window_in_size(w);
  const int64_t rows = g.mg * qh_window_k_size(w);
  for (int64_t n = 0; n < g.n; n++)
    fill_bias(y + n * g.m * osz, g.m, osz, b);
  if (g.n == 0 || rows == 0 || g.cg == 0)
    return TRUE;
  if (rows > G_MAXINT || isz > G_MAXINT || g.cg > G_MAXINT || rows * isz > QH_MAX_ELEMENTS)
    return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "the convolution is too large for sgemm");
  float *col = qh_aligned_alloc0(sizeof(float) * (size_t)(rows * isz));
  if (col == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_NOMEM,
                          "cannot allocate the %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                          " column buffer",
                          rows, isz);
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t gi = 0; gi < g.group; gi++) {
      const float *xg = x + (n * g.c + gi * g.cg) * isz;
      const float *wg = wt + gi * g.cg * rows;
      qh_sgemm(ctx, CblasTrans, CblasNoTrans, (int)rows, (int)isz, (int)g.cg, 1.0f,
               wg, (int)rows, xg, (int)isz, 0.0f, col, (int)isz);
      Col2imArgs a = {.w = w, .col = col, .y = y + (n * g.m + gi * g.mg) * osz};
      qh_thread_pool_parallel_for(ctx->pool, g.mg, 1, col2im_task, &a);
    }
  qh_aligned_free(col);
  return TRUE;
}

gboolean qh_conv_transpose_run_naive(QhExecContext *ctx, const QhNode *node,
                                     const QhTensor *const *inputs, int n_inputs,
                                     QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  (void)n_outputs;
  TGeom g;
  if (!tgeom(node, inputs, n_inputs, &g, error))
    return FALSE;
  const QhWindow *w = &g.w;
  const float *x = qh_f32(inputs[0]), *wt = qh_f32(inputs[1]);
  const float *b = n_inputs > 2 && inputs[2] != NULL ? qh_f32(inputs[2]) : NULL;
  float *y = qh_f32(outputs[0]);
  const int64_t *grid = w->out, *img = w->in, *k = w->k;
  const int64_t osz = qh_window_in_size(w);
  for (int64_t n = 0; n < g.n; n++)
    fill_bias(y + n * g.m * osz, g.m, osz, b);
  /* every input pixel, times every tap, lands on one output pixel */
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t c = 0; c < g.c; c++) {
      int64_t gi = c / g.cg;
      for (int64_t id = 0; id < grid[0]; id++)
        for (int64_t ih = 0; ih < grid[1]; ih++)
          for (int64_t iw = 0; iw < grid[2]; iw++) {
            float xv = x[(((n * g.c + c) * grid[0] + id) * grid[1] + ih) * grid[2] + iw];
            for (int64_t m = 0; m < g.mg; m++)
              for (int64_t kd = 0; kd < k[0]; kd++)
                for (int64_t kh = 0; kh < k[1]; kh++)
                  for (int64_t kw = 0; kw < k[2]; kw++) {
                    int64_t od = id * w->s[0] - w->pb[0] + kd * w->d[0];
                    int64_t oh = ih * w->s[1] - w->pb[1] + kh * w->d[1];
                    int64_t ow = iw * w->s[2] - w->pb[2] + kw * w->d[2];
                    if (od < 0 || od >= img[0] || oh < 0 || oh >= img[1] || ow < 0 || ow >= img[2])
                      continue;
                    float wv = wt[(((c * g.mg + m) * k[0] + kd) * k[1] + kh) * k[2] + kw];
                    y[(((n * g.m + gi * g.mg + m) * img[0] + od) * img[1] + oh) * img[2] + ow] +=
                        xv * wv;
                  }
          }
    }
  return TRUE;
}

int64_t qh_conv_transpose_macs(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                               const QhTensor *outputs, int n_outputs) {
  (void)node;
  (void)outputs;
  (void)n_outputs;
  if (n_inputs < 2 || inputs[0] == NULL || inputs[1] == NULL)
    return 0;
  const QhShape *xs = &inputs[0]->shape, *ws = &inputs[1]->shape;
  if (xs->rank < 3 || ws->rank != xs->rank)
    return 0;
  /* N * in * (C * M/g * kvol), the weight holding the last factor */
  int64_t macs = xs->dims[0];
  for (int i = 2; i < xs->rank; i++)
    macs *= xs->dims[i];
  for (int i = 0; i < ws->rank; i++)
    macs *= ws->dims[i];
  return macs;
}
