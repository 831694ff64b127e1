/* Conv (1-D, 2-D, 3-D over NCHW) and the conv family's op table. The fast path
 * turns each (image, group) into one sgemm: weights [M/g, C/g*kvol] times the
 * im2col matrix [C/g*kvol, out] (skipped for pointwise convs, whose input already
 * is that matrix); depthwise convs take the direct kernel of conv-depthwise.c.
 * The naive twin is the textbook seven-deep loop. ConvTranspose lives in
 * conv-transpose.c. */
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/sgemm-private.h"
#include "exec/kernels/conv-private.h"

typedef struct {
  QhWindow w;
  int64_t n, c, m, group, cg, mg;
} ConvGeom;

static gboolean conv_geom(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          ConvGeom *g, GError **error) {
  if (!qh_conv_check_operands(node, inputs, n_inputs, error))
    return FALSE;
  gboolean has_b = n_inputs > 2 && inputs[2] != NULL;
  const QhShape *xs = &inputs[0]->shape, *ws = &inputs[1]->shape;
  int nsp = xs->rank - 2;
  g->n = xs->dims[0];
  g->c = xs->dims[1];
  g->m = ws->dims[0];
  if (!qh_node_attr_get_int(node, "group", 1, &g->group, error))
    return FALSE;
  if (g->group < 1 || g->c % g->group != 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "group %" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT
                          " input channels",
                          g->group, g->c);
  if (g->m % g->group != 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "group %" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT
                          " output channels of the weight",
                          g->group, g->m);
  g->cg = g->c / g->group;
  g->mg = g->m / g->group;
  if (ws->dims[1] != g->cg)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "weight has %" G_GINT64_FORMAT " input channels per group; the input has %"
                          G_GINT64_FORMAT " channels in %" G_GINT64_FORMAT " groups, so expected %"
                          G_GINT64_FORMAT,
                          ws->dims[1], g->c, g->group, g->cg);
  if (has_b && (inputs[2]->shape.rank != 1 || inputs[2]->shape.dims[0] != g->m)) {
    char *s = qh_shape_to_string(&inputs[2]->shape);
    qh_kernel_fail(error, node, QH_ERROR_INVALID,
                   "bias has shape %s; expected [%" G_GINT64_FORMAT "]", s, g->m);
    g_free(s);
    return FALSE;
  }
  int64_t k[QH_WINDOW_DIMS], n_k;
  if (!qh_window_kernel_shape(node, nsp, ws->dims + 2, k, &n_k, error))
    return FALSE;
  return qh_window_resolve(node, nsp, xs->dims + 2, ws->dims + 2, FALSE, &g->w, error);
}

static gboolean conv_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                           QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  ConvGeom g;
  if (!conv_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  return qh_conv_set_output(node, g.n, g.m, &g.w, g.w.out, &outputs[0], error);
}

typedef struct {
  const QhWindow *w;
  const float *x;
  float *col;
} Im2colArgs;

static void im2col_task(void *arg, int64_t begin, int64_t end) {
  const Im2colArgs *a = arg;
  qh_conv_im2col(a->w, a->x, begin, end, a->col);
}

static gboolean conv_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                         int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  ConvGeom g;
  if (!conv_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  const QhWindow *w = &g.w;
  const float *x = qh_f32(inputs[0]), *wt = qh_f32(inputs[1]);
  const float *b = n_inputs > 2 && inputs[2] != NULL ? qh_f32(inputs[2]) : NULL;
  float *y = qh_f32(outputs[0]);
  const int64_t isz = qh_window_in_size(w), osz = qh_window_out_size(w);
  const int64_t kvol = qh_window_k_size(w), kdim = g.cg * kvol;
  if (g.n == 0 || g.m == 0 || osz == 0)
    return TRUE;
  if (kdim > 0) {
    QhConvGeometry eg = {.node = node, .w = w, .n = g.n, .c = g.c, .m = g.m, .group = g.group,
                         .x = inputs[0], .wt = inputs[1], .b = b, .y = y,
                         .weights_constant = (ctx->constant_inputs & 2) != 0,
                         .src_nhwc = (ctx->nhwc_inputs & 1) != 0,
                         .dst_nhwc = (ctx->nhwc_outputs & 1) != 0, .post_op = ctx->post_op,
                         .post_alpha = ctx->post_alpha, .post_beta = ctx->post_beta};
    QhConvEngineResult r = qh_conv_onednn(ctx, &eg, error);
    if (r != QH_CONV_ENGINE_DECLINED)
      return r == QH_CONV_ENGINE_RAN;
  }
  if (ctx->post_op != QH_POST_NONE) /* the plan fuses only channels-last convs: never here */
    return qh_kernel_fail(error, node, QH_ERROR_FAILED, "a fused post-op needs the oneDNN engine");
  if (g.group == g.c && g.m == g.c) {
    qh_conv_depthwise(ctx->pool, w, g.n * g.c, g.c, x, wt, b, y);
    return TRUE;
  }
  if (g.mg > G_MAXINT || osz > G_MAXINT || kdim > G_MAXINT || kdim * osz > QH_MAX_ELEMENTS)
    return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "the convolution is too large for sgemm");
  gboolean pointwise = TRUE;
  for (int i = 0; i < QH_WINDOW_DIMS; i++)
    pointwise = pointwise && w->k[i] == 1 && w->s[i] == 1 && w->pb[i] == 0 && w->pe[i] == 0;
  float *col = NULL;
  if (!pointwise && kdim > 0) {
    /* the context's scratch: reused by every conv and every run */
    col = qh_exec_scratch(ctx, sizeof(float) * (size_t)(kdim * osz));
    if (col == NULL)
      return qh_kernel_fail(error, node, QH_ERROR_NOMEM,
                            "cannot allocate the %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                            " im2col buffer",
                            kdim, osz);
  }
  for (int64_t n = 0; n < g.n; n++) {
    for (int64_t gi = 0; gi < g.group; gi++) {
      const float *xg = x + (n * g.c + gi * g.cg) * isz;
      float *yg = y + (n * g.m + gi * g.mg) * osz;
      const float *bmat = xg;
      if (col != NULL) {
        Im2colArgs a = {.w = w, .x = xg, .col = col};
        qh_thread_pool_parallel_for(ctx->pool, kdim, 8, im2col_task, &a);
        bmat = col;
      }
      if (b != NULL)
        for (int64_t m = 0; m < g.mg; m++) {
          float bv = b[gi * g.mg + m];
          float *row = yg + m * osz;
          for (int64_t i = 0; i < osz; i++)
            row[i] = bv;
        }
      if (kdim == 0) {
        if (b == NULL)
          memset(yg, 0, sizeof(float) * (size_t)(g.mg * osz));
        continue;
      }
      qh_sgemm(ctx, CblasNoTrans, CblasNoTrans, (int)g.mg, (int)osz, (int)kdim, 1.0f,
               wt + gi * g.mg * kdim, (int)kdim, bmat, (int)osz, b != NULL ? 1.0f : 0.0f, yg,
               (int)osz);
    }
  }
  return TRUE;
}

static gboolean conv_run_naive(QhExecContext *ctx, const QhNode *node,
                               const QhTensor *const *inputs, int n_inputs,
                               QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  (void)n_outputs;
  ConvGeom g;
  if (!conv_geom(node, inputs, n_inputs, &g, error))
    return FALSE;
  const QhWindow *w = &g.w;
  const float *x = qh_f32(inputs[0]), *wt = qh_f32(inputs[1]);
  const float *b = n_inputs > 2 && inputs[2] != NULL ? qh_f32(inputs[2]) : NULL;
  float *y = qh_f32(outputs[0]);
  const int64_t *in = w->in, *k = w->k, *out = w->out;
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t m = 0; m < g.m; m++) {
      int64_t gi = m / g.mg;
      for (int64_t od = 0; od < out[0]; od++)
        for (int64_t oh = 0; oh < out[1]; oh++)
          for (int64_t ow = 0; ow < out[2]; ow++) {
            double acc = b != NULL ? b[m] : 0.0;
            for (int64_t c = 0; c < g.cg; c++)
              for (int64_t kd = 0; kd < k[0]; kd++)
                for (int64_t kh = 0; kh < k[1]; kh++)
                  for (int64_t kw = 0; kw < k[2]; kw++) {
                    int64_t id = od * w->s[0] - w->pb[0] + kd * w->d[0];
                    int64_t ih = oh * w->s[1] - w->pb[1] + kh * w->d[1];
                    int64_t iw = ow * w->s[2] - w->pb[2] + kw * w->d[2];
                    if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2])
                      continue;
                    int64_t xi = (((n * g.c + gi * g.cg + c) * in[0] + id) * in[1] + ih) * in[2] + iw;
                    int64_t wi = (((m * g.cg + c) * k[0] + kd) * k[1] + kh) * k[2] + kw;
                    acc += (double)x[xi] * (double)wt[wi];
                  }
            y[(((n * g.m + m) * out[0] + od) * out[1] + oh) * out[2] + ow] = (float)acc;
          }
    }
  return TRUE;
}

static int64_t conv_macs(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                         const QhTensor *outputs, int n_outputs) {
  (void)node;
  if (n_inputs < 2 || inputs[0] == NULL || inputs[1] == NULL || n_outputs < 1)
    return 0;
  const QhShape *ws = &inputs[1]->shape, *ys = &outputs[0].shape;
  if (ws->rank < 3 || ys->rank != ws->rank)
    return 0;
  /* N * out * (M * C/g * kvol), the weight holding the last factor */
  int64_t macs = ys->dims[0];
  for (int i = 0; i < ws->rank; i++)
    macs *= ws->dims[i];
  for (int i = 2; i < ys->rank; i++)
    macs *= ys->dims[i];
  return macs;
}

const QhOpDef qh_ops_conv[] = {
    {"Conv", 2, 3, 1, 1, conv_infer, conv_run, conv_run_naive, conv_macs},
    {"ConvTranspose", 2, 3, 1, 1, qh_conv_transpose_infer, qh_conv_transpose_run,
     qh_conv_transpose_run_naive, qh_conv_transpose_macs},
    {NULL},
};
