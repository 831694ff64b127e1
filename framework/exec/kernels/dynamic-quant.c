/* Reference kernels of ONNX Runtime's dynamic quantization format, which `qhost
 * quantize --dynamic` writes: DynamicQuantizeLinear (opset 11: float32 -> uint8 with
 * a scale and zero point computed from the tensor's own range on every call) and
 * MatMulInteger (opset 10: uint8/int8 x uint8/int8 -> int32, with optional zero
 * points, scalar or per-row of A and scalar or per-column of B).
 *
 * DynamicQuantizeLinear follows ONNX Runtime's arithmetic exactly, all in float32:
 * the range is widened to include 0, scale = (max - min) / 255 (1 when the range is
 * empty), zero point = round-half-even(clamp(0 - min / scale, 0, 255)), and
 * y = clamp(round-half-even(x / scale) + zero point, 0, 255). MatMulInteger is
 * NumPy's matmul on (a - a_zero_point) and (b - b_zero_point) with batch broadcasting;
 * its sums wrap modulo 2^32 as int32 accumulators do. DynamicQuantizeLinear runs four
 * elements per SSE2 instruction, or sixteen per AVX-512F one where the CPU has it (chosen
 * at run time), each the scalar twin's operation, in blocks over the run's threads: min
 * and max are order-free and every block starts from 0 (so -0 never replaces +0), and
 * each byte depends on its own element only, so any split gives the twin's result.
 * The vector quantize loops multiply by 1 / scale instead of dividing, which is exact
 * where it matters: only the rounded integer of x / scale is kept, and the product is
 * within 3 ulp of the quotient, so wherever the product is farther than 2^-12 from a
 * half step (and below 512 in magnitude, which every x in [lo, hi] is) both round to
 * the same integer; a vector with any lane closer to a half step, or NaN, is divided
 * as the twin does (dql_recip_ok, near_half).
 * MatMulInteger's fast path runs each batch matrix as a double-precision GEMM (OpenBLAS
 * dgemm) on the zero-point-shifted operands: every product is at most 255^2 and every
 * sum of fewer than 2^37 of them is an exact integer in double, so the result is exact;
 * its naive twin is the integer triple loop. The int8 kernels that run fast live in the
 * backends; these are the host's reference. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/common.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

/* ---- DynamicQuantizeLinear ---- */

static gboolean dql_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                          int n_outputs, GError **error) {
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0))
    return FALSE;
  for (int o = 0; o < n_outputs; o++) {
    outputs[o].dtype = o == 1 ? QH_DTYPE_F32 : QH_DTYPE_U8;
    outputs[o].shape = o == 0 ? inputs[0]->shape : (QhShape){.rank = 0};
    outputs[o].data = NULL;
  }
  return TRUE;
}

/* The tensor's range widened to hold 0: a NaN never wins a comparison, so it is skipped. */
static void dql_range_naive(const float *x, int64_t n, float *lo, float *hi) {
  for (int64_t i = 0; i < n; i++) {
    *lo = x[i] < *lo ? x[i] : *lo;
    *hi = x[i] > *hi ? x[i] : *hi;
  }
}

/* nearbyintf in the default rounding mode without a libm call: adding and subtracting
 * 1.5 * 2^23 rounds half to even for |r| < 2^22. Here |x / scale| <= 255 (x lies in
 * [lo, hi], which holds 0); the bounds, far outside, keep the trick in its exact range
 * and send NaN to the low one (code 0). Each step is written as the SSE2 path's
 * instruction computes it (max/min return their second operand on NaN). */
static inline uint8_t dql_one(float x, float scale, float zp) {
  float r = x / scale;
  r = r > -4096.0f ? r : -4096.0f;
  r = r < 4096.0f ? r : 4096.0f;
  float v = ((r + 12582912.0f) - 12582912.0f) + zp;
  v = v > 0.0f ? v : 0.0f;
  v = v < 255.0f ? v : 255.0f;
  return (uint8_t)(int32_t)v;
}

#ifdef __SSE2__
#include <emmintrin.h>

/* The same comparisons four lanes at a time; min and max are order-free, so the result
 * is the scalar loop's. */
static void dql_range(const float *x, int64_t n, float *lo, float *hi) {
  __m128 l = _mm_setzero_ps(), h = _mm_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 v = _mm_loadu_ps(x + i);
    l = _mm_min_ps(v, l); /* v < l ? v : l */
    h = _mm_max_ps(v, h); /* v > h ? v : h */
  }
  float ls[4], hs[4];
  _mm_storeu_ps(ls, l);
  _mm_storeu_ps(hs, h);
  for (int k = 0; k < 4; k++)
    dql_range_naive(&ls[k], 1, lo, hi), dql_range_naive(&hs[k], 1, lo, hi);
  dql_range_naive(x + i, n - i, lo, hi);
}

/* The reciprocal's error bound holds for normal numbers: with a scale or 1 / scale
 * outside them (a subnormal range) the loops divide throughout. */
static gboolean dql_recip_ok(float scale, float inv) {
  return isnormal(scale) && isnormal(inv);
}

/* A product farther than this from every half step rounds as the quotient does: the two
 * differ by at most 3 * 2^-24 * 512 < 2^-13 where the product is below DQL_FAST_MAX. */
#define DQL_HALF_MARGIN (0.5f - 1.0f / 4096.0f)
#define DQL_FAST_MAX 512.0f

static void dql_quantize(const float *x, int64_t n, float scale, float zp, uint8_t *y) {
  const __m128 s = _mm_set1_ps(scale), z = _mm_set1_ps(zp), magic = _mm_set1_ps(12582912.0f);
  const __m128 lo = _mm_set1_ps(-4096.0f), hi = _mm_set1_ps(4096.0f), zero = _mm_setzero_ps();
  const __m128 top = _mm_set1_ps(255.0f), sign = _mm_set1_ps(-0.0f);
  const __m128 margin = _mm_set1_ps(DQL_HALF_MARGIN), fast_max = _mm_set1_ps(DQL_FAST_MAX);
  const float inv_s = 1.0f / scale;
  const __m128 inv = _mm_set1_ps(inv_s);
  const int recip = dql_recip_ok(scale, inv_s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i q[4];
    for (int k = 0; k < 4; k++) {
      __m128 xv = _mm_loadu_ps(x + i + 4 * k), rr = zero;
      int near_half = 1;
      if (recip) {
        __m128 r = _mm_mul_ps(xv, inv);
        rr = _mm_sub_ps(_mm_add_ps(r, magic), magic);
        __m128 far = _mm_and_ps(_mm_cmplt_ps(_mm_andnot_ps(sign, _mm_sub_ps(r, rr)), margin),
                                _mm_cmplt_ps(_mm_andnot_ps(sign, r), fast_max));
        near_half = _mm_movemask_ps(far) != 0xF;
      }
      if (near_half) {
        __m128 r = _mm_div_ps(xv, s);
        r = _mm_min_ps(_mm_max_ps(r, lo), hi);
        rr = _mm_sub_ps(_mm_add_ps(r, magic), magic);
      }
      __m128 v = _mm_add_ps(rr, z);
      v = _mm_min_ps(_mm_max_ps(v, zero), top);
      q[k] = _mm_cvttps_epi32(v);
    }
    __m128i w = _mm_packus_epi16(_mm_packs_epi32(q[0], q[1]), _mm_packs_epi32(q[2], q[3]));
    _mm_storeu_si128((__m128i *)(y + i), w);
  }
  for (; i < n; i++)
    y[i] = dql_one(x[i], scale, zp);
}
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))

/* The SSE2 loops' instructions sixteen lanes wide: vminps / vmaxps pick their second
 * operand on NaN as minps / maxps do, division is IEEE's in both, and vpmovdb keeps the
 * low byte of lanes already clamped to [0, 255]. */
AVX512 static void dql_range_avx512(const float *x, int64_t n, float *lo, float *hi) {
  /* four pairs of running bounds, so that each vminps / vmaxps waits for its own chain
   * only (one chain would run at one vector per instruction latency) */
  __m512 l0 = _mm512_setzero_ps(), h0 = l0, l1 = l0, h1 = l0, l2 = l0, h2 = l0, l3 = l0, h3 = l0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    __m512 v2 = _mm512_loadu_ps(x + i + 32), v3 = _mm512_loadu_ps(x + i + 48);
    l0 = _mm512_min_ps(v0, l0), h0 = _mm512_max_ps(v0, h0);
    l1 = _mm512_min_ps(v1, l1), h1 = _mm512_max_ps(v1, h1);
    l2 = _mm512_min_ps(v2, l2), h2 = _mm512_max_ps(v2, h2);
    l3 = _mm512_min_ps(v3, l3), h3 = _mm512_max_ps(v3, h3);
  }
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    l0 = _mm512_min_ps(v, l0);
    h0 = _mm512_max_ps(v, h0);
  }
  /* the bounds hold no NaN (min / max keep their second operand on NaN), so merging them
   * in any order gives the same two values */
  __m512 l = _mm512_min_ps(_mm512_min_ps(l0, l1), _mm512_min_ps(l2, l3));
  __m512 h = _mm512_max_ps(_mm512_max_ps(h0, h1), _mm512_max_ps(h2, h3));
  float ls[16], hs[16];
  _mm512_storeu_ps(ls, l);
  _mm512_storeu_ps(hs, h);
  for (int k = 0; k < 16; k++)
    dql_range_naive(&ls[k], 1, lo, hi), dql_range_naive(&hs[k], 1, lo, hi);
  dql_range(x + i, n - i, lo, hi);
}

AVX512 static void dql_quantize_avx512(const float *x, int64_t n, float scale, float zp, uint8_t *y) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(zp), magic = _mm512_set1_ps(12582912.0f);
  const __m512 lo = _mm512_set1_ps(-4096.0f), hi = _mm512_set1_ps(4096.0f), zero = _mm512_setzero_ps();
  const __m512 top = _mm512_set1_ps(255.0f);
  const __m512 margin = _mm512_set1_ps(DQL_HALF_MARGIN), fast_max = _mm512_set1_ps(DQL_FAST_MAX);
  const float inv_s = 1.0f / scale;
  const __m512 inv = _mm512_set1_ps(inv_s);
  const int recip = dql_recip_ok(scale, inv_s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 xv = _mm512_loadu_ps(x + i), rr = zero;
    __mmask16 far = 0;
    if (recip) {
      __m512 r = _mm512_mul_ps(xv, inv);
      rr = _mm512_sub_ps(_mm512_add_ps(r, magic), magic);
      far = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(r, rr)), margin, _CMP_LT_OQ) &
            _mm512_cmp_ps_mask(_mm512_abs_ps(r), fast_max, _CMP_LT_OQ);
    }
    if (far != 0xFFFF) {
      __m512 r = _mm512_div_ps(xv, s);
      r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
      rr = _mm512_sub_ps(_mm512_add_ps(r, magic), magic);
    }
    __m512 v = _mm512_add_ps(rr, z);
    v = _mm512_min_ps(_mm512_max_ps(v, zero), top);
    _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
  }
  dql_quantize(x + i, n - i, scale, zp, y + i);
}

static gboolean dql_wide(void) { return (qh_cpu_features() & QH_CPU_AVX512F) != 0; }
#else
#define dql_range dql_range_naive
static void dql_quantize(const float *x, int64_t n, float scale, float zp, uint8_t *y) {
  for (int64_t i = 0; i < n; i++)
    y[i] = dql_one(x[i], scale, zp);
}
#define dql_range_avx512 dql_range
#define dql_quantize_avx512 dql_quantize
static gboolean dql_wide(void) { return FALSE; }
#endif

#define DQL_BLOCK 16384 /* elements per task */

typedef struct {
  const float *x;
  int64_t n;
  gboolean wide;
  float *lo, *hi; /* per block */
  float scale, zp;
  uint8_t *y;
} DqlJob;

static void dql_range_task(void *arg, int64_t b0, int64_t b1) {
  DqlJob *j = arg;
  for (int64_t b = b0; b < b1; b++) {
    int64_t i = b * DQL_BLOCK, m = MIN(DQL_BLOCK, j->n - i);
    j->lo[b] = j->hi[b] = 0.0f;
    (j->wide ? dql_range_avx512 : dql_range)(j->x + i, m, &j->lo[b], &j->hi[b]);
  }
}

static void dql_quantize_task(void *arg, int64_t b0, int64_t b1) {
  DqlJob *j = arg;
  int64_t i = b0 * DQL_BLOCK, m = MIN(b1 * DQL_BLOCK, j->n) - i;
  (j->wide ? dql_quantize_avx512 : dql_quantize)(j->x + i, m, j->scale, j->zp, j->y + i);
}

static gboolean dql_common(QhExecContext *ctx, const QhTensor *const *inputs, QhTensor *const *outputs,
                           int n_outputs, gboolean naive) {
  const float *x = qh_f32(inputs[0]);
  int64_t n = qh_tensor_numel(inputs[0]), blocks = (n + DQL_BLOCK - 1) / DQL_BLOCK;
  float lo = 0.0f, hi = 0.0f;
  DqlJob j = {x, n, !naive && dql_wide(), NULL, NULL, 0.0f, 0.0f, outputs[0]->data};
  if (naive) {
    dql_range_naive(x, n, &lo, &hi);
  } else if (blocks > 0) {
    j.lo = g_new(float, 2 * blocks);
    j.hi = j.lo + blocks;
    qh_thread_pool_parallel_for(ctx->pool, blocks, 1, dql_range_task, &j);
    for (int64_t b = 0; b < blocks; b++)
      dql_range_naive(&j.lo[b], 1, &lo, &hi), dql_range_naive(&j.hi[b], 1, &lo, &hi);
    g_free(j.lo);
  }
  float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  float zp_f = 0.0f - lo / scale;
  zp_f = zp_f < 0.0f ? 0.0f : zp_f > 255.0f ? 255.0f : zp_f;
  float zp = nearbyintf(zp_f);
  uint8_t *y = outputs[0]->data;
  if (naive) {
    for (int64_t i = 0; i < n; i++)
      y[i] = dql_one(x[i], scale, zp);
  } else {
    j.scale = scale, j.zp = zp;
    qh_thread_pool_parallel_for(ctx->pool, blocks, 1, dql_quantize_task, &j);
  }
  if (n_outputs > 1 && outputs[1] != NULL)
    *qh_f32(outputs[1]) = scale;
  if (n_outputs > 2 && outputs[2] != NULL)
    *(uint8_t *)outputs[2]->data = (uint8_t)zp;
  return TRUE;
}

static gboolean dql_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                        QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)node, (void)n_inputs, (void)error;
  return dql_common(ctx, inputs, outputs, n_outputs, FALSE);
}

/* The twin: the same formulas one element at a time. */
static gboolean dql_run_naive(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                              int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)node, (void)n_inputs, (void)error;
  return dql_common(ctx, inputs, outputs, n_outputs, TRUE);
}

/* ---- MatMulInteger ---- */

typedef struct {
  int64_t M, K, N, batch;
  QhShape out, batch_shape;
  gboolean a_per_row, b_per_col;
} Mmi;

static gboolean zero_point_ok(const QhNode *node, const QhTensor *zp, const QhTensor *of, int64_t per,
                              const char *what, const char *per_what, gboolean *per_out, GError **error) {
  *per_out = FALSE;
  if (zp == NULL)
    return TRUE;
  if (zp->dtype != of->dtype)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "%s has type %s, its operand %s", what,
                          qh_dtype_name(zp->dtype), qh_dtype_name(of->dtype));
  int64_t n = 1;
  for (int i = 0; i < zp->shape.rank; i++)
    n *= zp->shape.dims[i];
  if (n == 1)
    return TRUE;
  if (zp->shape.rank == 1 && n == per) {
    *per_out = TRUE;
    return TRUE;
  }
  char *s = qh_shape_to_string(&zp->shape);
  qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                 "%s of shape %s: only a scalar or one per %s (%" G_GINT64_FORMAT ") is supported", what, s,
                 per_what, per);
  g_free(s);
  return FALSE;
}

static gboolean mmi_shapes(const QhNode *node, const QhTensor *const *inputs, int n_inputs, Mmi *g,
                           GError **error) {
  for (int i = 0; i < 2; i++)
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_U8, QH_DTYPE_S8, 0))
      return FALSE;
  QhShape a = inputs[0]->shape, b = inputs[1]->shape;
  if (a.rank == 0 || b.rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "operands must have rank >= 1");
  gboolean a_vec = a.rank == 1, b_vec = b.rank == 1;
  if (a_vec)
    a = (QhShape){.rank = 2, .dims = {1, a.dims[0]}};
  if (b_vec)
    b = (QhShape){.rank = 2, .dims = {b.dims[0], 1}};
  g->M = a.dims[a.rank - 2], g->K = a.dims[a.rank - 1], g->N = b.dims[b.rank - 1];
  if (b.dims[b.rank - 2] != g->K) {
    char *sa = qh_shape_to_string(&inputs[0]->shape), *sb = qh_shape_to_string(&inputs[1]->shape);
    qh_kernel_fail(error, node, QH_ERROR_INVALID, "shapes %s and %s do not multiply", sa, sb);
    g_free(sa), g_free(sb);
    return FALSE;
  }
  QhShape ab = {.rank = a.rank - 2}, bb = {.rank = b.rank - 2};
  memcpy(ab.dims, a.dims, sizeof(int64_t) * (size_t)ab.rank);
  memcpy(bb.dims, b.dims, sizeof(int64_t) * (size_t)bb.rank);
  if (!qh_kernel_broadcast(node, &ab, &bb, &g->batch_shape, error))
    return FALSE;
  g->out = g->batch_shape;
  if (!a_vec)
    g->out.dims[g->out.rank++] = g->M;
  if (!b_vec)
    g->out.dims[g->out.rank++] = g->N;
  if (g->out.rank > QH_MAX_RANK)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "output rank exceeds %d", QH_MAX_RANK);
  g->batch = 1;
  for (int i = 0; i < g->batch_shape.rank; i++)
    g->batch *= g->batch_shape.dims[i];
  return zero_point_ok(node, n_inputs > 2 ? inputs[2] : NULL, inputs[0], g->M, "a_zero_point", "row of A",
                       &g->a_per_row, error) &&
         zero_point_ok(node, n_inputs > 3 ? inputs[3] : NULL, inputs[1], g->N, "b_zero_point", "column of B",
                       &g->b_per_col, error);
}

static gboolean mmi_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                          int n_outputs, GError **error) {
  (void)n_outputs;
  Mmi g;
  if (!mmi_shapes(node, inputs, n_inputs, &g, error))
    return FALSE;
  int64_t n;
  GError *e = NULL;
  if (!qh_shape_numel(&g.out, &n, &e)) {
    qh_kernel_fail(error, node, (QhErrorCode)e->code, "%s", e->message);
    g_error_free(e);
    return FALSE;
  }
  outputs[0].dtype = QH_DTYPE_S32;
  outputs[0].shape = g.out;
  outputs[0].data = NULL;
  return TRUE;
}

static inline int32_t int8_at(const QhTensor *t, int64_t i) {
  return t->dtype == QH_DTYPE_U8 ? ((const uint8_t *)t->data)[i] : ((const int8_t *)t->data)[i];
}

/* Offset of batch index bi (of the broadcast batch shape) into an operand whose own
 * batch dims are the leading rank-2 dims of s (none for a vector). */
static int64_t batch_offset(const QhShape *batch, int64_t bi, const QhShape *s, int64_t matrix) {
  int own = s->rank > 2 ? s->rank - 2 : 0;
  int64_t off = 0, st = matrix, rem = bi;
  for (int i = batch->rank - 1, j = own - 1; i >= 0; i--, j--) {
    int64_t c = rem % batch->dims[i];
    rem /= batch->dims[i];
    if (j >= 0) {
      if (s->dims[j] != 1)
        off += c * st;
      st *= s->dims[j];
    }
  }
  return off;
}

static gboolean mmi_run_naive(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                              int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  Mmi g;
  if (!mmi_shapes(node, inputs, n_inputs, &g, error))
    return FALSE;
  const QhTensor *a = inputs[0], *b = inputs[1];
  const QhTensor *azp = n_inputs > 2 ? inputs[2] : NULL, *bzp = n_inputs > 3 ? inputs[3] : NULL;
  int64_t *acc = g_try_new(int64_t, MAX(g.N, 1));
  if (acc == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_NOMEM, "out of memory for a row of %" G_GINT64_FORMAT, g.N);
  int32_t *y = outputs[0]->data;
  for (int64_t bi = 0; bi < g.batch; bi++) {
    int64_t ao = batch_offset(&g.batch_shape, bi, &a->shape, g.M * g.K);
    int64_t bo = batch_offset(&g.batch_shape, bi, &b->shape, g.K * g.N);
    for (int64_t i = 0; i < g.M; i++) {
      int32_t za = azp == NULL ? 0 : int8_at(azp, g.a_per_row ? i : 0);
      memset(acc, 0, sizeof(int64_t) * (size_t)g.N);
      for (int64_t k = 0; k < g.K; k++) {
        int64_t av = int8_at(a, ao + i * g.K + k) - za;
        for (int64_t j = 0; j < g.N; j++) {
          int32_t zb = bzp == NULL ? 0 : int8_at(bzp, g.b_per_col ? j : 0);
          acc[j] += av * (int8_at(b, bo + k * g.N + j) - zb);
        }
      }
      for (int64_t j = 0; j < g.N; j++)
        y[(bi * g.M + i) * g.N + j] = (int32_t)(uint32_t)(uint64_t)acc[j];
    }
  }
  g_free(acc);
  return TRUE;
}

/* Matrix bi's operands as doubles, zero points subtracted. */
static void shifted(const QhTensor *t, int64_t off, int64_t rows, int64_t cols, const QhTensor *zp,
                    gboolean per_row, gboolean per_col, double *out) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      int32_t z = zp == NULL ? 0 : int8_at(zp, per_row ? r : per_col ? c : 0);
      out[r * cols + c] = (double)(int8_at(t, off + r * cols + c) - z);
    }
}

static gboolean mmi_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                        QhTensor *const *outputs, int n_outputs, GError **error) {
  Mmi g;
  if (!mmi_shapes(node, inputs, n_inputs, &g, error))
    return FALSE;
  if (g.M > G_MAXINT || g.N > G_MAXINT || g.K > G_MAXINT || g.K >= (INT64_C(1) << 37))
    return mmi_run_naive(ctx, node, inputs, n_inputs, outputs, n_outputs, error);
  const QhTensor *a = inputs[0], *b = inputs[1];
  const QhTensor *azp = n_inputs > 2 ? inputs[2] : NULL, *bzp = n_inputs > 3 ? inputs[3] : NULL;
  double *ad = g_try_new(double, MAX(g.M * g.K, 1)), *bd = g_try_new(double, MAX(g.K * g.N, 1)),
         *cd = g_try_new0(double, MAX(g.M * g.N, 1));
  gboolean ok = ad && bd && cd;
  if (!ok)
    qh_kernel_fail(error, node, QH_ERROR_NOMEM,
                   "out of memory for a %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                   " product",
                   g.M, g.K, g.N);
  int32_t *y = outputs[0]->data;
  for (int64_t bi = 0; ok && bi < g.batch; bi++) {
    shifted(a, batch_offset(&g.batch_shape, bi, &a->shape, g.M * g.K), g.M, g.K, azp, g.a_per_row, FALSE, ad);
    shifted(b, batch_offset(&g.batch_shape, bi, &b->shape, g.K * g.N), g.K, g.N, bzp, FALSE, g.b_per_col, bd);
    if (g.M > 0 && g.N > 0 && g.K > 0)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g.M, (int)g.N, (int)g.K, 1.0, ad, (int)g.K,
                  bd, (int)g.N, 0.0, cd, (int)g.N);
    for (int64_t e = 0; e < g.M * g.N; e++) /* exact integers; int32 wraps as accumulators would */
      y[bi * g.M * g.N + e] = g.K > 0 ? (int32_t)(uint32_t)(uint64_t)(int64_t)cd[e] : 0;
  }
  g_free(ad);
  g_free(bd);
  g_free(cd);
  return ok;
}

static int64_t mmi_macs(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                        const QhTensor *outputs, int n_outputs) {
  (void)outputs, (void)n_outputs;
  Mmi g;
  return mmi_shapes(node, inputs, n_inputs, &g, NULL) ? g.batch * g.M * g.K * g.N : 0;
}

const QhOpDef qh_ops_dynamic_quant[] = {
    {"DynamicQuantizeLinear", 1, 1, 1, 3, dql_infer, dql_run, dql_run_naive, NULL},
    {"MatMulInteger", 2, 4, 1, 1, mmi_infer, mmi_run, mmi_run_naive, mmi_macs},
    {NULL},
};
