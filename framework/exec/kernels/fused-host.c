/* Fused host kernels for the two decompositions every transformer exported below opset 17
 * carries in each layer, GELU (Div by sqrt(2), Erf, Add 1, Mul x, Mul 0.5) and LayerNorm
 * (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul scale, Add bias). Run node
 * by node they pass over the activation five and nine times, allocating as many arena
 * slots; here each block of a GELU and each row of a LayerNorm is read once, kept in
 * cache, and written once. The arithmetic is the decomposition's, operation by operation:
 * float Div/Mul/Add/Sqrt in the graph's order, Erf from erf-simd.c as the Erf kernel
 * computes it, the means as reduce.c's ReduceMean computes them (a double sum in memory
 * order, divided in double, rounded to float), the square as math.c's Pow by 2 (one
 * multiplication). So a fused run gives the unfused run's bits (ctest
 * unit/test_fused_host compares the two through the plan), and the unfused nodes are
 * this kernel's slow twin. The LayerNorm sums four rows side by side: the same
 * additions per row, in four independent dependency chains.
 * The Q/DQ chain around a Transpose, Reshape or Slice (the attention heads' split and
 * merge in a QDQ file: a float pass in, a copy, a float pass out) moves the 8-bit data
 * with the same Transpose/Slice kernel and maps each byte through a 256-entry table
 * made by running the chain's own DequantizeLinear and QuantizeLinear kernels on every
 * byte value: both are element-wise, so each element gets the bits it got before. */
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/common.h"
#include "exec/kernels/erf-simd.h"
#include "exec/kernels/fused-host.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

#define GELU_BLOCK 512
#define GELU_GRAIN 16384
#define LN_ROWS 4 /* rows summed side by side */

typedef struct {
  const QhHostGroup *g;
  const float *x;
  float *y;
} GeluJob;

/* GELU's float steps around the Erf, compiled for the baseline and for AVX-512 (as
 * activation.c's loops): ISO C contracts nothing into FMAs, so both give the Div, Mul and
 * Add kernels' bits. */
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
GELU_LOOPS(avx512, __attribute__((target("avx512f"))))

static void gelu_task(void *arg, int64_t begin, int64_t end) {
  const GeluJob *j = arg;
  const gboolean wide = (qh_cpu_features() & QH_CPU_AVX512F) != 0;
  float t[GELU_BLOCK];
  for (int64_t b = begin; b < end; b += GELU_BLOCK) {
    const int64_t n = MIN(GELU_BLOCK, end - b);
    const float *x = j->x + b;
    float *y = j->y + b;
    if (wide)
      gelu_in_avx512(j->g, x, t, n);
    else
      gelu_in_base(j->g, x, t, n);
    qh_erf_f32(t, t, n);
    if (wide)
      gelu_out_avx512(j->g, x, t, y, n);
    else
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

/* [begin, end): blocks of LN_ROWS rows */
static void layernorm_task(void *arg, int64_t begin, int64_t end) {
  const LayerNormJob *j = arg;
  for (int64_t b = begin; b < end; b++)
    layernorm_rows(j, b * LN_ROWS, (int)MIN(LN_ROWS, j->rows - b * LN_ROWS));
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
