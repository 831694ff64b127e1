/* MaxPool, AveragePool and GlobalAveragePool over NC + 1 to 3 spatial dims. The
 * window geometry (pads, strides, dilations, auto_pad, ceil_mode) is conv-window.c's;
 * the loops are direct and parallel over the N*C planes. pool_task is the reference
 * (run_naive); the run path computes each axis's tap ranges once per call instead of per
 * output (the divisions were a quarter of googlenet's fp32 time) and keeps max and
 * average apart, with the same comparisons and the same double sums in the same order,
 * so its bits are the reference's. AveragePool's count_include_pad counts
 * the taps inside the explicitly padded input, not those a ceil_mode window hangs
 * past it (PyTorch's rule). Where the plan's layout plan (exec/layout.c) keeps the
 * tensors channels-last, the loops run over pixels with the channels innermost, each
 * channel seeing its taps in the reference's order with the same comparison or double
 * sum, so the numbers are the reference's there too. */
#include <float.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/common.h"
#include "exec/kernels/conv-private.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

static gboolean check_input(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            int min_rank, int max_rank, GError **error) {
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0))
    return FALSE;
  const QhShape *xs = &inputs[0]->shape;
  if (xs->rank < min_rank || xs->rank > max_rank)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "input has rank %d; supported: %d to %d", xs->rank, min_rank, max_rank);
  for (int i = 0; i < xs->rank; i++)
    if (xs->dims[i] < 0)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "input shape is not known");
  return TRUE;
}

static gboolean pool_geom(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhWindow *w, GError **error) {
  if (!check_input(node, inputs, n_inputs, 3, 2 + QH_WINDOW_DIMS, error))
    return FALSE;
  const QhShape *xs = &inputs[0]->shape;
  int nsp = xs->rank - 2;
  int64_t k[QH_WINDOW_DIMS], n_k;
  if (!qh_window_kernel_shape(node, nsp, NULL, k, &n_k, error))
    return FALSE;
  if (n_k < 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "attribute kernel_shape is required");
  if (strcmp(node->op_type, "MaxPool") == 0) {
    int64_t storage_order;
    if (!qh_node_attr_get_int(node, "storage_order", 0, &storage_order, error))
      return FALSE;
    if (storage_order != 0)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                            "storage_order %" G_GINT64_FORMAT " is not supported (only 0)",
                            storage_order);
    if (qh_node_output(node, 1) >= 0)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                            "the Indices output is not supported");
  }
  return qh_window_resolve(node, nsp, xs->dims + 2, k, TRUE, w, error);
}

static gboolean pool_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                           QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  QhWindow w;
  if (!pool_geom(node, inputs, n_inputs, &w, error))
    return FALSE;
  const QhShape *xs = &inputs[0]->shape;
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = *xs;
  for (int i = 0; i < w.nsp; i++)
    outputs[0].shape.dims[2 + i] = w.out[QH_WINDOW_DIMS - w.nsp + i];
  return TRUE;
}

typedef struct {
  const QhWindow *w;
  gboolean is_max;
  gboolean include_pad;
  const float *x;
  float *y;
} PoolArgs;

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Taps of kernel axis j at output o that fall in [lo_bound, hi_bound): [*a, *b). */
static void tap_range(const QhWindow *w, int j, int64_t o, int64_t lo_bound, int64_t hi_bound,
                      int64_t *a, int64_t *b) {
  int64_t start = o * w->s[j] - w->pb[j], d = w->d[j];
  int64_t ka = -floor_div(start - lo_bound, d), kb = floor_div(hi_bound - 1 - start, d) + 1;
  *a = CLAMP(ka, 0, w->k[j]);
  *b = CLAMP(kb, *a, w->k[j]);
}

static void pool_task(void *arg, int64_t begin, int64_t end) {
  const PoolArgs *p = arg;
  const QhWindow *w = p->w;
  const int64_t isz = qh_window_in_size(w), osz = qh_window_out_size(w);
  for (int64_t plane = begin; plane < end; plane++) {
    const float *x = p->x + plane * isz;
    float *y = p->y + plane * osz;
    for (int64_t od = 0; od < w->out[0]; od++) {
      int64_t d0, d1;
      tap_range(w, 0, od, 0, w->in[0], &d0, &d1);
      for (int64_t oh = 0; oh < w->out[1]; oh++) {
        int64_t h0, h1;
        tap_range(w, 1, oh, 0, w->in[1], &h0, &h1);
        for (int64_t ow = 0; ow < w->out[2]; ow++) {
          int64_t w0, w1;
          tap_range(w, 2, ow, 0, w->in[2], &w0, &w1);
          const int64_t sd = od * w->s[0] - w->pb[0], sh = oh * w->s[1] - w->pb[1];
          const int64_t sw = ow * w->s[2] - w->pb[2];
          float mx = -FLT_MAX;
          double sum = 0.0;
          for (int64_t kd = d0; kd < d1; kd++)
            for (int64_t kh = h0; kh < h1; kh++) {
              const float *row = x + ((sd + kd * w->d[0]) * w->in[1] + sh + kh * w->d[1]) * w->in[2];
              for (int64_t kw = w0; kw < w1; kw++) {
                float v = row[sw + kw * w->d[2]];
                if (v > mx)
                  mx = v;
                sum += v;
              }
            }
          float out;
          if (p->is_max) {
            out = mx;
          } else {
            double count; /* a product of three kernel sizes may exceed int64 */
            if (p->include_pad) {
              int64_t a[3], b[3];
              tap_range(w, 0, od, -w->pb[0], w->in[0] + w->pe[0], &a[0], &b[0]);
              tap_range(w, 1, oh, -w->pb[1], w->in[1] + w->pe[1], &a[1], &b[1]);
              tap_range(w, 2, ow, -w->pb[2], w->in[2] + w->pe[2], &a[2], &b[2]);
              count = (double)(b[0] - a[0]) * (double)(b[1] - a[1]) * (double)(b[2] - a[2]);
            } else {
              count = (double)(d1 - d0) * (double)(h1 - h0) * (double)(w1 - w0);
            }
            out = count > 0 ? (float)(sum / count) : 0.0f;
          }
          y[(od * w->out[1] + oh) * w->out[2] + ow] = out;
        }
      }
    }
  }
}

/* The taps of every output position along each axis: [a, b) inside the input and, for
 * count_include_pad, the count inside the padded input; and for each tap kw of the
 * innermost axis, the outputs [kw_lo, kw_hi) whose window has it inside the input (an
 * interval: both bounds of a window's taps fall as the output moves right). */
typedef struct {
  const PoolArgs *p;
  int64_t *a[QH_WINDOW_DIMS], *b[QH_WINDOW_DIMS], *cnt[QH_WINDOW_DIMS];
  int64_t *kw_lo, *kw_hi;
  int64_t channels; /* channels-last runs: C */
} FastArgs;

/* One output row, tap by tap across the row (the inner loop runs over outputs, so it
 * vectorises); each output still sees its taps in the reference's order, with its
 * comparison and its double sum. Compiled for the baseline and for AVX-512. */
#define POOL_ROWS(sfx, attrs)                                                                     \
  attrs static void pool_rows_##sfx(const FastArgs *f, const float *x, float *y, double *acc) {  \
    const PoolArgs *p = f->p;                                                                     \
    const QhWindow *w = p->w;                                                                     \
    const int64_t s2 = w->s[2], d2 = w->d[2], pb2 = w->pb[2], ow_n = w->out[2];                  \
    for (int64_t od = 0; od < w->out[0]; od++) {                                                  \
      const int64_t sd = od * w->s[0] - w->pb[0];                                                 \
      for (int64_t oh = 0; oh < w->out[1]; oh++) {                                                \
        const int64_t sh = oh * w->s[1] - w->pb[1];                                               \
        float *yrow = y + (od * w->out[1] + oh) * ow_n;                                           \
        for (int64_t ow = 0; ow < ow_n; ow++) {                                                   \
          yrow[ow] = -FLT_MAX;                                                                    \
          acc[ow] = 0.0;                                                                          \
        }                                                                                         \
        for (int64_t kd = f->a[0][od]; kd < f->b[0][od]; kd++)                                    \
          for (int64_t kh = f->a[1][oh]; kh < f->b[1][oh]; kh++) {                                \
            const float *row = x + ((sd + kd * w->d[0]) * w->in[1] + sh + kh * w->d[1]) * w->in[2]; \
            for (int64_t kw = 0; kw < w->k[2]; kw++) {                                            \
              const int64_t off = kw * d2 - pb2, lo = f->kw_lo[kw], hi = f->kw_hi[kw];            \
              if (p->is_max)                                                                      \
                for (int64_t ow = lo; ow < hi; ow++) {                                            \
                  float v = row[ow * s2 + off];                                                   \
                  yrow[ow] = v > yrow[ow] ? v : yrow[ow];                                         \
                }                                                                                 \
              else                                                                                \
                for (int64_t ow = lo; ow < hi; ow++)                                              \
                  acc[ow] += row[ow * s2 + off];                                                  \
            }                                                                                     \
          }                                                                                       \
        if (!p->is_max)                                                                           \
          for (int64_t ow = 0; ow < ow_n; ow++) {                                                 \
            double count = p->include_pad ? (double)f->cnt[0][od] * (double)f->cnt[1][oh] *       \
                                                (double)f->cnt[2][ow]                             \
                                          : (double)(f->b[0][od] - f->a[0][od]) *                 \
                                                (double)(f->b[1][oh] - f->a[1][oh]) *             \
                                                (double)(f->b[2][ow] - f->a[2][ow]);              \
            yrow[ow] = count > 0 ? (float)(acc[ow] / count) : 0.0f;                               \
          }                                                                                       \
      }                                                                                           \
    }                                                                                             \
  }
POOL_ROWS(base, )
POOL_ROWS(avx512, __attribute__((target("avx512f"), optimize("tree-vectorize"))))

/* Channels-last: one output pixel, tap by tap, the inner loop over the c channels. */
#define POOL_PIXELS(sfx, attrs)                                                                   \
  attrs static void pool_pixels_##sfx(const FastArgs *f, const float *x, float *y, double *acc, \
                                      int64_t c, int64_t od, int64_t oh) {                       \
    const PoolArgs *p = f->p;                                                                     \
    const QhWindow *w = p->w;                                                                     \
    const int64_t sd = od * w->s[0] - w->pb[0], sh = oh * w->s[1] - w->pb[1];                     \
    for (int64_t ow = 0; ow < w->out[2]; ow++) {                                                  \
      const int64_t sw = ow * w->s[2] - w->pb[2];                                                 \
      float *yp = y + ((od * w->out[1] + oh) * w->out[2] + ow) * c;                               \
      for (int64_t ch = 0; ch < c; ch++) {                                                        \
        yp[ch] = -FLT_MAX;                                                                        \
        acc[ch] = 0.0;                                                                            \
      }                                                                                           \
      for (int64_t kd = f->a[0][od]; kd < f->b[0][od]; kd++)                                      \
        for (int64_t kh = f->a[1][oh]; kh < f->b[1][oh]; kh++)                                    \
          for (int64_t kw = f->a[2][ow]; kw < f->b[2][ow]; kw++) {                                \
            const float *xp =                                                                     \
                x + (((sd + kd * w->d[0]) * w->in[1] + sh + kh * w->d[1]) * w->in[2] + sw +       \
                     kw * w->d[2]) * c;                                                           \
            if (p->is_max)                                                                        \
              for (int64_t ch = 0; ch < c; ch++)                                                  \
                yp[ch] = xp[ch] > yp[ch] ? xp[ch] : yp[ch];                                       \
            else                                                                                  \
              for (int64_t ch = 0; ch < c; ch++)                                                  \
                acc[ch] += xp[ch];                                                                \
          }                                                                                       \
      if (!p->is_max) {                                                                           \
        double count = p->include_pad ? (double)f->cnt[0][od] * (double)f->cnt[1][oh] *          \
                                            (double)f->cnt[2][ow]                                 \
                                      : (double)(f->b[0][od] - f->a[0][od]) *                     \
                                            (double)(f->b[1][oh] - f->a[1][oh]) *                 \
                                            (double)(f->b[2][ow] - f->a[2][ow]);                  \
        for (int64_t ch = 0; ch < c; ch++)                                                        \
          yp[ch] = count > 0 ? (float)(acc[ch] / count) : 0.0f;                                   \
      }                                                                                           \
    }                                                                                             \
  }
POOL_PIXELS(base, )
POOL_PIXELS(avx512, __attribute__((target("avx512f"), optimize("tree-vectorize"))))

static void pool_task_fast(void *arg, int64_t begin, int64_t end) {
  const FastArgs *f = arg;
  const QhWindow *w = f->p->w;
  const int64_t isz = qh_window_in_size(w), osz = qh_window_out_size(w);
  double *acc = g_new(double, MAX(w->out[2], 1));
  const gboolean wide = (qh_cpu_features() & QH_CPU_AVX512F) != 0;
  for (int64_t plane = begin; plane < end; plane++) {
    if (wide)
      pool_rows_avx512(f, f->p->x + plane * isz, f->p->y + plane * osz, acc);
    else
      pool_rows_base(f, f->p->x + plane * isz, f->p->y + plane * osz, acc);
  }
  g_free(acc);
}

/* Channels-last: one item per output row (image, depth, height). */
static void pool_task_nhwc(void *arg, int64_t begin, int64_t end) {
  const FastArgs *f = arg;
  const QhWindow *w = f->p->w;
  const int64_t c = f->channels, isz = qh_window_in_size(w) * c, osz = qh_window_out_size(w) * c;
  const int64_t rows = w->out[0] * w->out[1];
  double *acc = g_new(double, MAX(c, 1));
  const gboolean wide = (qh_cpu_features() & QH_CPU_AVX512F) != 0;
  for (int64_t r = begin; r < end; r++) {
    const int64_t n = r / rows, od = (r % rows) / w->out[1], oh = r % w->out[1];
    if (wide)
      pool_pixels_avx512(f, f->p->x + n * isz, f->p->y + n * osz, acc, c, od, oh);
    else
      pool_pixels_base(f, f->p->x + n * isz, f->p->y + n * osz, acc, c, od, oh);
  }
  g_free(acc);
}

static gboolean pool_args(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *const *outputs, QhWindow *w, PoolArgs *a, GError **error) {
  if (!pool_geom(node, inputs, n_inputs, w, error))
    return FALSE;
  *a = (PoolArgs){.w = w, .is_max = strcmp(node->op_type, "MaxPool") == 0,
                  .x = qh_f32(inputs[0]), .y = qh_f32(outputs[0])};
  if (!a->is_max) {
    int64_t include_pad;
    if (!qh_node_attr_get_int(node, "count_include_pad", 0, &include_pad, error))
      return FALSE;
    a->include_pad = include_pad != 0;
  }
  return TRUE;
}

static gboolean pool_run_naive(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                               int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  QhWindow w;
  PoolArgs a;
  if (!pool_args(node, inputs, n_inputs, outputs, &w, &a, error))
    return FALSE;
  const QhShape *xs = &inputs[0]->shape;
  qh_thread_pool_parallel_for(ctx->pool, xs->dims[0] * xs->dims[1], 1, pool_task, &a);
  return TRUE;
}

static gboolean pool_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                         int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  QhWindow w;
  PoolArgs a;
  if (!pool_args(node, inputs, n_inputs, outputs, &w, &a, error))
    return FALSE;
  const int64_t n_out = w.out[0] + w.out[1] + w.out[2];
  int64_t *buf = g_new(int64_t, 3 * n_out + 2 * w.k[2] + 1);
  FastArgs f = {.p = &a, .kw_lo = buf + 3 * n_out, .kw_hi = buf + 3 * n_out + w.k[2]};
  int64_t at = 0;
  for (int j = 0; j < QH_WINDOW_DIMS; at += w.out[j], j++) {
    f.a[j] = buf + at;
    f.b[j] = buf + n_out + at;
    f.cnt[j] = buf + 2 * n_out + at;
    for (int64_t o = 0; o < w.out[j]; o++) {
      int64_t pa, pb;
      tap_range(&w, j, o, 0, w.in[j], &f.a[j][o], &f.b[j][o]);
      tap_range(&w, j, o, -w.pb[j], w.in[j] + w.pe[j], &pa, &pb);
      f.cnt[j][o] = pb - pa;
    }
  }
  for (int64_t kw = 0; kw < w.k[2]; kw++) {
    int64_t lo = 0, hi = w.out[2];
    while (lo < hi && !(f.a[2][lo] <= kw && kw < f.b[2][lo]))
      lo++;
    hi = lo;
    while (hi < w.out[2] && f.a[2][hi] <= kw && kw < f.b[2][hi])
      hi++;
    f.kw_lo[kw] = lo;
    f.kw_hi[kw] = hi;
  }
  const QhShape *xs = &inputs[0]->shape;
  if ((ctx->nhwc_inputs | ctx->nhwc_outputs) & 1) {
    f.channels = xs->dims[1];
    qh_thread_pool_parallel_for(ctx->pool, xs->dims[0] * w.out[0] * w.out[1], 1, pool_task_nhwc, &f);
  } else {
    qh_thread_pool_parallel_for(ctx->pool, xs->dims[0] * xs->dims[1], 1, pool_task_fast, &f);
  }
  g_free(buf);
  return TRUE;
}

/* ---- GlobalAveragePool ---- */

static gboolean gap_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  if (!check_input(node, inputs, n_inputs, 3, QH_MAX_RANK, error))
    return FALSE;
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = inputs[0]->shape;
  for (int i = 2; i < outputs[0].shape.rank; i++)
    outputs[0].shape.dims[i] = 1;
  return TRUE;
}

typedef struct {
  const float *x;
  float *y;
  int64_t size;
  int64_t channels; /* channels-last runs: C */
} GapArgs;

/* Channels-last blocks of GAP_BLOCK channels of one image. */
#define GAP_BLOCK 64

static void gap_task(void *arg, int64_t begin, int64_t end) {
  const GapArgs *a = arg;
  for (int64_t p = begin; p < end; p++) {
    const float *x = a->x + p * a->size;
    double sum = 0.0;
    for (int64_t i = 0; i < a->size; i++)
      sum += x[i];
    a->y[p] = a->size > 0 ? (float)(sum / (double)a->size) : 0.0f;
  }
}

/* Channels-last: item = (image, block of channels); each channel sums its positions in
 * the reference's order, in double. */
static void gap_task_nhwc(void *arg, int64_t begin, int64_t end) {
  const GapArgs *a = arg;
  const int64_t c = a->channels, blocks = (c + GAP_BLOCK - 1) / GAP_BLOCK;
  double acc[GAP_BLOCK];
  for (int64_t item = begin; item < end; item++) {
    const int64_t n = item / blocks, c0 = (item % blocks) * GAP_BLOCK, nc = MIN(GAP_BLOCK, c - c0);
    const float *x = a->x + n * a->size * c + c0;
    for (int64_t k = 0; k < nc; k++)
      acc[k] = 0.0;
    for (int64_t i = 0; i < a->size; i++)
      for (int64_t k = 0; k < nc; k++)
        acc[k] += x[i * c + k];
    for (int64_t k = 0; k < nc; k++)
      a->y[n * c + c0 + k] = a->size > 0 ? (float)(acc[k] / (double)a->size) : 0.0f;
  }
}

static gboolean gap_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                        int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  if (!check_input(node, inputs, n_inputs, 3, QH_MAX_RANK, error))
    return FALSE;
  const QhShape *xs = &inputs[0]->shape;
  GapArgs a = {.x = qh_f32(inputs[0]), .y = qh_f32(outputs[0]), .size = 1};
  for (int i = 2; i < xs->rank; i++)
    a.size *= xs->dims[i];
  if ((ctx->nhwc_inputs & 1) && xs->rank == 4) {
    /* the output has one position per channel: the same bytes in either layout */
    a.channels = xs->dims[1];
    qh_thread_pool_parallel_for(ctx->pool, xs->dims[0] * ((a.channels + GAP_BLOCK - 1) / GAP_BLOCK), 1,
                                gap_task_nhwc, &a);
  } else {
    qh_thread_pool_parallel_for(ctx->pool, xs->dims[0] * xs->dims[1], 4, gap_task, &a);
  }
  return TRUE;
}

const QhOpDef qh_ops_pool[] = {
    {"MaxPool", 1, 1, 1, 2, pool_infer, pool_run, pool_run_naive, NULL},
    {"AveragePool", 1, 1, 1, 1, pool_infer, pool_run, pool_run_naive, NULL},
    {"GlobalAveragePool", 1, 1, 1, 1, gap_infer, gap_run, NULL, NULL},
    {NULL},
};
