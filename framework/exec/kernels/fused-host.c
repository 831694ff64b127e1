/* Fused host kernels for the two decompositions every transformer exported below opset 17
 * carries in each layer, GELU (Div by sqrt(2), Erf, Add 1, Mul x, Mul 0.5) and LayerNorm
 * (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias). Run node
 * by node they pass over the activation five and nine times, allocating as many arena
 * slots; here each block of a GELU and each row of a LayerNorm is read once, kept in
 * cache, and written once. Without AVX-512 the arithmetic is the decomposition's,
 * operation by operation: float Div/Mul/Add/Sqrt in the graph's order, Erf from
 * erf-simd.c as the Erf kernel computes it, the means as reduce.c's ReduceMean computes
 * them (a double sum in memory order, divided in double, rounded to float), the square as
 * math.c's Pow by 2 (one multiplication), four LayerNorm rows side by side: the unfused
 * run's bits. With AVX-512 (BERT-base: these were ~13 of the 44 ms of the dynamic int8
 * run, bound by the sums' dependency chains and the double Erf) the results are NOT the
 * unfused run's bits: LayerNorm's double sums run in 32 lanes (double rounding only: the
 * float mean and variance kept their bits on all of 20000 random 768-wide rows of a numpy
 * emulation of both orders), and GELU multiplies by the rounded
 * 1/sqrt(2) instead of dividing by sqrt(2) (1 ulp) and takes erf-simd.c's
 * single-precision Erf (2.3 ulp); the float steps stay the graph's, 16 lanes wide. The
 * unfused nodes are the slow twin: ctest unit/test_fused_host holds the fused run to
 * 1e-6 of each row's largest value of theirs (and to their bits with AVX-512 hidden).
 * Attention's scores go through Mul (or Div) by a scalar, Add of the padding mask and
 * Softmax over the last axis: here row by row, the Mul and Add as their kernels compute
 * them into y, then Softmax in place with softmax-simd.c's vector rows (within 2 ulp /
 * 1e-6 of the row's largest value of the Softmax kernel's scalar twin; without AVX-512
 * that twin itself, the unfused nodes' bits).
 * The Q/DQ chain around a Transpose, Reshape or Slice (the attention heads' split and
 * merge in a QDQ file: a float pass in, a copy, a float pass out) moves the 8-bit data
 * with the same Transpose/Slice kernel and maps each byte through a 256-entry table
 * made by running the chain's own DequantizeLinear and QuantizeLinear kernels on every
 * byte value: both are element-wise, so each element gets the bits it got before. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/common.h"
#include "exec/kernels/erf-simd.h"
#include "exec/kernels/fused-host.h"
#include "exec/kernels/softmax-simd.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

#define GELU_BLOCK 512
#define GELU_GRAIN 16384
#define LN_ROWS 4 /* rows summed side by side */

typedef struct {
  const QhHostGroup *g;
  const float *x;
  float *y;
} GeluJob;

/* GELU's float steps around the Erf on CPUs without AVX-512: ISO C contracts nothing into
 * FMAs, so they give the Div, Mul and Add kernels' bits. */
#define GELU_LOOPS(sfx, attrs)                                                                   \
  attrs static void gelu_in_##sfx(const QhHostGroup *g, const float *x, float *t, int64_t n) {   \
    const float k = g->k_in;                                                                     \
    if (g->in_divides)                                                                           \
      for (int64_t i = 0; i < n; i++)                                                            \
        t[i] = x[i] / k;                                                                         \
    else                                                                                         \
      for (int64_t i = 0; i < n; i++)                                                            \
        t[i] = x[i] * k;                                                                         \
  }                                                                                              \
  attrs static void gelu_out_##sfx(const QhHostGroup *g, const float *x, const float *t, float *y, \
                                   int64_t n) {                                                  \
    const float k_add = g->k_add, k_half = g->k_half;                                            \
    if (g->half_first)                                                                           \
      for (int64_t i = 0; i < n; i++)                                                            \
        y[i] = (x[i] * k_half) * (t[i] + k_add);                                                 \
    else                                                                                         \
      for (int64_t i = 0; i < n; i++)                                                            \
        y[i] = (x[i] * (t[i] + k_add)) * k_half;                                                 \
  }

GELU_LOOPS(base, )

#define AVX512 __attribute__((target("avx512f")))

static void gelu_task(void *arg, int64_t begin, int64_t end) {
  const GeluJob *j = arg;
  /* with AVX-512: the Div by sqrt(2) as a product with the rounded reciprocal (1 ulp) */
  const QhGeluSteps steps = {j->g->in_divides ? (float)(1.0 / (double)j->g->k_in) : j->g->k_in, j->g->k_add,
                             j->g->k_half, j->g->half_first};
  if (qh_gelu_f32_single(&steps, j->x + begin, j->y + begin, end - begin))
    return;
  float t[GELU_BLOCK];
  for (int64_t b = begin; b < end; b += GELU_BLOCK) {
    const int64_t n = MIN(GELU_BLOCK, end - b);
    const float *x = j->x + b;
    float *y = j->y + b;
    gelu_in_base(j->g, x, t, n);
    qh_erf_f32(t, t, n);
    gelu_out_base(j->g, x, t, y, n);
  }
}

typedef struct {
  const float *x, *scale, *bias;
  float *y;
  int64_t n, rows; /* elements per row, rows */
  float eps;
} LayerNormJob;

/* rows r0 .. r0 + m - 1 (m <= LN_ROWS) */
static void layernorm_rows(const LayerNormJob *j, int64_t r0, int m) {
  const int64_t n = j->n;
  const float *x[LN_ROWS];
  double acc[LN_ROWS] = {0};
  float mean[LN_ROWS], s[LN_ROWS];
  for (int r = 0; r < m; r++)
    x[r] = j->x + (r0 + r) * n;
  for (int64_t k = 0; k < n; k++)
    for (int r = 0; r < m; r++)
      acc[r] += x[r][k];
  for (int r = 0; r < m; r++) {
    mean[r] = (float)(acc[r] / (double)n);
    acc[r] = 0.0;
  }
  for (int64_t k = 0; k < n; k++)
    for (int r = 0; r < m; r++) {
      const float d = x[r][k] - mean[r];
      const float sq = d * d;
      acc[r] += sq;
    }
  for (int r = 0; r < m; r++) {
    const float var = (float)(acc[r] / (double)n);
    s[r] = sqrtf(var + j->eps);
  }
  for (int r = 0; r < m; r++) {
    float *y = j->y + (r0 + r) * n;
    for (int64_t k = 0; k < n; k++) {
      const float d = x[r][k] - mean[r];
      y[k] = (d / s[r]) * j->scale[k] + j->bias[k];
    }
  }
}

/* The sum of x[0..n) in double: 32 lanes in four accumulators, then the lanes in order. */
AVX512 static double sum_avx512(const float *x, int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0; /* named: kept in registers */
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
    a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 16)));
    a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 24)));
  }
  for (; i + 8 <= n; i += 8)
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
  double s = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
  for (; i < n; i++)
    s += x[i];
  return s;
}

/* 8 squares (p[k] - m)^2 as the float Sub and Mul give them, widened to double */
AVX512 static inline __m512d sq8(const float *p, __m256 m) {
  const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(p), m);
  return _mm512_cvtps_pd(_mm256_mul_ps(d, d));
}

/* The sum of (x - mean)^2 in double, each square as the float Sub and Mul give it. */
AVX512 static double sum_sq_avx512(const float *x, float mean, int64_t n) {
  const __m256 m = _mm256_set1_ps(mean);
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_pd(a0, sq8(x + i, m));
    a1 = _mm512_add_pd(a1, sq8(x + i + 8, m));
    a2 = _mm512_add_pd(a2, sq8(x + i + 16, m));
    a3 = _mm512_add_pd(a3, sq8(x + i + 24, m));
  }
  for (; i + 8 <= n; i += 8)
    a0 = _mm512_add_pd(a0, sq8(x + i, m));
  double s = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
  for (; i < n; i++) {
    const float d = x[i] - mean;
    const float sq = d * d;
    s += sq;
  }
  return s;
}

/* One row: the statistics from the sums above, then layernorm_rows' float steps (Sub,
 * Div, Mul, Add: the same bits given the same mean and deviation), 16 lanes at a time. */
AVX512 static void layernorm_row_avx512(const LayerNormJob *j, int64_t r) {
  const int64_t n = j->n;
  const float *x = j->x + r * n;
  float *y = j->y + r * n;
  const float mean = (float)(sum_avx512(x, n) / (double)n);
  const float var = (float)(sum_sq_avx512(x, mean, n) / (double)n);
  const __m512 m = _mm512_set1_ps(mean), s = _mm512_set1_ps(sqrtf(var + j->eps));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
    const __m512 q = _mm512_div_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m), s);
    const __m512 w = _mm512_mul_ps(q, _mm512_maskz_loadu_ps(k, j->scale + i));
    _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(w, _mm512_maskz_loadu_ps(k, j->bias + i)));
  }
}

/* [begin, end): blocks of LN_ROWS rows */
static void layernorm_task(void *arg, int64_t begin, int64_t end) {
  const LayerNormJob *j = arg;
  const gboolean wide = (qh_cpu_features() & QH_CPU_AVX512F) != 0;
  for (int64_t b = begin; b < end; b++) {
    const int m = (int)MIN(LN_ROWS, j->rows - b * LN_ROWS);
    if (!wide) {
      layernorm_rows(j, b * LN_ROWS, m);
      continue;
    }
    for (int r = 0; r < m; r++)
      layernorm_row_avx512(j, b * LN_ROWS + r);
  }
}

typedef struct {
  const QhHostGroup *g;
  const float *x, *mask;
  float *y;
  int64_t n;                       /* row length (the last dim) */
  int outer_rank;                  /* x's dims before the last */
  int64_t dims[QH_MAX_RANK];       /* x's dims before the last */
  int64_t mask_step[QH_MAX_RANK];  /* the mask's offset per step of each of those dims (0: broadcast) */
} SoftmaxJob;

/* the mask row added to row r of x */
static const float *mask_row(const SoftmaxJob *j, int64_t r) {
  int64_t off = 0;
  for (int d = j->outer_rank - 1; d >= 0; d--) {
    off += (r % j->dims[d]) * j->mask_step[d];
    r /= j->dims[d];
  }
  return j->mask + off;
}

/* y = (x OP k) + mask, the Mul or Div then the Add as their kernels compute them */
static void scores_base(const QhHostGroup *g, const float *x, const float *m, float *y, int64_t n) {
  const float k = g->k_in;
  if (g->in_divides)
    for (int64_t i = 0; i < n; i++)
      y[i] = x[i] / k + m[i];
  else
    for (int64_t i = 0; i < n; i++)
      y[i] = x[i] * k + m[i];
}

AVX512 static void scores_avx512(const QhHostGroup *g, const float *x, const float *m, float *y, int64_t n) {
  const __m512 k = _mm512_set1_ps(g->k_in);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 t = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(t, x + i);
    const __m512 s = g->in_divides ? _mm512_div_ps(v, k) : _mm512_mul_ps(v, k);
    _mm512_mask_storeu_ps(y + i, t, _mm512_add_ps(s, _mm512_maskz_loadu_ps(t, m + i)));
  }
}

/* activation.c's softmax_task on one row in place: its bits */
static void softmax_row_base(float *y, int64_t n) {
  float m = y[0];
  for (int64_t k = 1; k < n; k++)
    m = y[k] > m ? y[k] : m;
  float sum = 0.0f;
  for (int64_t k = 0; k < n; k++) {
    const float e = expf(y[k] - m);
    y[k] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
  for (int64_t k = 0; k < n; k++)
    y[k] *= inv;
}

static void softmax_task(void *arg, int64_t begin, int64_t end) {
  const SoftmaxJob *j = arg;
  const gboolean wide = (qh_cpu_features() & QH_CPU_AVX512F) != 0;
  for (int64_t r = begin; r < end; r++) {
    float *y = j->y + r * j->n;
    if (wide) {
      scores_avx512(j->g, j->x + r * j->n, mask_row(j, r), y, j->n);
      qh_softmax_rows_simd(y, y, 1, j->n);
    } else {
      scores_base(j->g, j->x + r * j->n, mask_row(j, r), y, j->n);
      softmax_row_base(y, j->n);
    }
  }
}

static void masked_softmax(QhExecContext *ctx, const QhHostGroup *g, const QhTensor *x, const QhTensor *mask,
                           QhTensor *y) {
  SoftmaxJob j = {g, qh_f32(x), qh_f32(mask), qh_f32(y), x->shape.dims[x->shape.rank - 1], x->shape.rank - 1,
                  {0}, {0}};
  int64_t step = mask->shape.dims[mask->shape.rank - 1];
  for (int d = j.outer_rank - 1; d >= 0; d--) {
    j.dims[d] = x->shape.dims[d];
    const int md = d - (x->shape.rank - mask->shape.rank); /* the mask's dim under x's dim d */
    const int64_t mdim = md >= 0 ? mask->shape.dims[md] : 1;
    j.mask_step[d] = mdim == 1 ? 0 : step;
    step *= mdim;
  }
  const int64_t rows = j.n > 0 ? qh_tensor_numel(x) / j.n : 0;
  qh_thread_pool_parallel_for(ctx->pool, rows, MAX(1, 8192 / MAX(j.n, 1)), softmax_task, &j);
}

/* Q(move(DQ(x))): the table, then the move on the bytes, then the table applied. */
static gboolean qmove(QhExecContext *ctx, const QhHostGroup *g, const QhTensor *const *live, QhTensor *y,
                      GError **error) {
  const QhTensor *x = live[g->dq->inputs[0]];
  uint8_t bytes[256], table[256];
  float values[256];
  for (int v = 0; v < 256; v++)
    bytes[v] = (uint8_t)v;
  const QhShape all = {.rank = 1, .dims = {256}};
  QhTensor t_bytes = {x->dtype, all, bytes, 256}, t_values = {QH_DTYPE_F32, all, values, sizeof values};
  QhTensor t_table = {y->dtype, all, table, 256};
  const QhTensor *dq_in[3] = {&t_bytes, live[g->dq->inputs[1]],
                              g->dq->n_inputs > 2 && g->dq->inputs[2] >= 0 ? live[g->dq->inputs[2]] : NULL};
  const QhTensor *q_in[3] = {&t_values, live[g->q->inputs[1]],
                             g->q->n_inputs > 2 && g->q->inputs[2] >= 0 ? live[g->q->inputs[2]] : NULL};
  QhTensor *dq_out[1] = {&t_values}, *q_out[1] = {&t_table};
  ctx->constant_inputs = 6; /* scale and zero point */
  if (!g->dq_def->run(ctx, g->dq, dq_in, g->dq->n_inputs, dq_out, 1, error) ||
      !g->q_def->run(ctx, g->q, q_in, g->q->n_inputs, q_out, 1, error))
    return FALSE;
  /* the moved bytes land in y, shaped as the move's output */
  const QhTensor *moved_info = live[g->move->outputs[0]];
  QhTensor moved = {x->dtype, moved_info->shape, y->data, y->nbytes};
  if (strcmp(g->move->op_type, "Reshape") == 0) {
    memcpy(y->data, x->data, y->nbytes);
  } else {
    const QhTensor *in[8] = {NULL};
    const int n_in = MIN(g->move->n_inputs, 8);
    for (int k = 0; k < n_in; k++)
      in[k] = k == 0 ? x : g->move->inputs[k] >= 0 ? live[g->move->inputs[k]] : NULL;
    QhTensor *out[1] = {&moved};
    ctx->constant_inputs = (G_GUINT64_CONSTANT(1) << n_in) - 2; /* all but the data */
    if (!g->move_def->run(ctx, g->move, in, n_in, out, 1, error))
      return FALSE;
  }
  ctx->constant_inputs = 0;
  gboolean identity = TRUE;
  for (int v = 0; v < 256 && identity; v++)
    identity = table[v] == v;
  if (!identity) {
    uint8_t *b = y->data;
    for (size_t i = 0; i < y->nbytes; i++)
      b[i] = table[b[i]];
  }
  return TRUE;
}

gboolean qh_fused_host_run(QhExecContext *ctx, const QhHostGroup *g, const QhTensor *const *live, QhTensor *y,
                           GError **error) {
  if (g->kind == QH_HOST_GROUP_QMOVE)
    return qmove(ctx, g, live, y, error);
  if (g->kind == QH_HOST_GROUP_TMATMUL)
    return qh_fused_matmul_run(ctx, &g->tmm, live, y, error);
  const QhTensor *x = live[g->x];
  const int64_t total = qh_tensor_numel(x);
  if (g->kind == QH_HOST_GROUP_SOFTMAX) {
    masked_softmax(ctx, g, x, live[g->mask], y);
    return TRUE;
  }
  if (g->kind == QH_HOST_GROUP_GELU) {
    GeluJob j = {g, qh_f32(x), qh_f32(y)};
    qh_thread_pool_parallel_for(ctx->pool, total, GELU_GRAIN, gelu_task, &j);
    return TRUE;
  }
  LayerNormJob j = {qh_f32(x), qh_f32(live[g->scale]), qh_f32(live[g->bias]), qh_f32(y), 1, 0, g->eps};
  j.n = x->shape.rank > 0 ? x->shape.dims[x->shape.rank - 1] : 1;
  j.rows = j.n > 0 ? total / j.n : 0;
  const int64_t blocks = (j.rows + LN_ROWS - 1) / LN_ROWS;
  qh_thread_pool_parallel_for(ctx->pool, blocks, MAX(1, 4096 / MAX(j.n * LN_ROWS, 1)), layernorm_task, &j);
  return TRUE;
}
