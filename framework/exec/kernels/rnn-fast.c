/* The fast path of LSTM and GRU (rnn.c reads the attributes, infers shapes and keeps the
 * naive twin). A time step cannot start before the previous one ends, so what does not
 * depend on the state leaves the step loop: the input projection X W^T + biases of all
 * time steps is one GEMM (qh_sgemm, on the pool), done in chunks of steps so a long
 * sequence keeps the scratch bounded. What stays per step and batch entry is the state
 * times R^T, a row vector times a matrix whose lanes run along the gates (R is
 * transposed once per run), and the gate activations on arrays: sigmoid on
 * qh_sigmoid_f32's lanes (glibc's bits), tanh from the same lanes or an odd polynomial
 * near zero. The naive loops spend most of their time in glibc's tanhf and in scalar dot
 * products (perf on the zoo's 2-layer LSTM classifier: 58% dot products, 32% libm). */
#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/rnn-private.h"
#include "exec/kernels/sigmoid-simd.h"
#include "exec/sgemm-private.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

/* The projected gates of this many bytes at most are kept at a time. */
#define PROJECTION_MAX_BYTES ((size_t)1 << 20)

#define AVX512 __attribute__((target("avx512f")))
#define AVX2_FMA __attribute__((target("avx2,fma")))

static void vecmat_scalar(const float *v, const float *m, int64_t n_k, int64_t n, int64_t ld, float *acc) {
  for (int64_t k = 0; k < n_k; k++) {
    const float vk = v[k];
    const float *row = m + k * ld;
    for (int64_t j = 0; j < n; j++)
      acc[j] += vk * row[j];
  }
}

/* 64 columns per pass (four registers), the last pass masked. */
AVX512 static void vecmat_avx512(const float *v, const float *m, int64_t n_k, int64_t n, int64_t ld,
                                 float *acc) {
  for (int64_t j0 = 0; j0 < n; j0 += 64) {
    __mmask16 mask[4];
    __m512 a[4];
    for (int q = 0; q < 4; q++) {
      int64_t left = n - j0 - 16 * q;
      mask[q] = left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
      a[q] = _mm512_maskz_loadu_ps(mask[q], acc + j0 + 16 * q);
    }
    for (int64_t k = 0; k < n_k; k++) {
      const __m512 vk = _mm512_set1_ps(v[k]);
      const float *row = m + k * ld + j0;
      for (int q = 0; q < 4; q++)
        a[q] = _mm512_fmadd_ps(vk, _mm512_maskz_loadu_ps(mask[q], row + 16 * q), a[q]);
    }
    for (int q = 0; q < 4; q++)
      _mm512_mask_storeu_ps(acc + j0 + 16 * q, mask[q], a[q]);
  }
}

/* 32 columns per pass, then 8, then the scalar loop for the last n % 8. */
AVX2_FMA static void vecmat_avx2(const float *v, const float *m, int64_t n_k, int64_t n, int64_t ld,
                                 float *acc) {
  const int64_t n8 = n / 8 * 8;
  int64_t j0 = 0;
  for (; j0 + 32 <= n8; j0 += 32) {
    __m256 a0 = _mm256_loadu_ps(acc + j0), a1 = _mm256_loadu_ps(acc + j0 + 8);
    __m256 a2 = _mm256_loadu_ps(acc + j0 + 16), a3 = _mm256_loadu_ps(acc + j0 + 24);
    for (int64_t k = 0; k < n_k; k++) {
      const __m256 vk = _mm256_set1_ps(v[k]);
      const float *row = m + k * ld + j0;
      a0 = _mm256_fmadd_ps(vk, _mm256_loadu_ps(row), a0);
      a1 = _mm256_fmadd_ps(vk, _mm256_loadu_ps(row + 8), a1);
      a2 = _mm256_fmadd_ps(vk, _mm256_loadu_ps(row + 16), a2);
      a3 = _mm256_fmadd_ps(vk, _mm256_loadu_ps(row + 24), a3);
    }
    _mm256_storeu_ps(acc + j0, a0);
    _mm256_storeu_ps(acc + j0 + 8, a1);
    _mm256_storeu_ps(acc + j0 + 16, a2);
    _mm256_storeu_ps(acc + j0 + 24, a3);
  }
  for (; j0 < n8; j0 += 8) {
    __m256 a0 = _mm256_loadu_ps(acc + j0);
    for (int64_t k = 0; k < n_k; k++)
      a0 = _mm256_fmadd_ps(_mm256_set1_ps(v[k]), _mm256_loadu_ps(m + k * ld + j0), a0);
    _mm256_storeu_ps(acc + j0, a0);
  }
  if (n8 < n)
    vecmat_scalar(v, m + n8, n_k, n - n8, ld, acc + n8);
}

void qh_rnn_vecmat_f32(const float *v, const float *m, int64_t n_k, int64_t n, int64_t ld, float *acc) {
  const uint64_t cpu = qh_cpu_features();
  if (cpu & QH_CPU_AVX512F)
    vecmat_avx512(v, m, n_k, n, ld, acc);
  else if ((cpu & (QH_CPU_AVX2 | QH_CPU_FMA)) == (QH_CPU_AVX2 | QH_CPU_FMA))
    vecmat_avx2(v, m, n_k, n, ld, acc);
  else
    vecmat_scalar(v, m, n_k, n, ld, acc);
}

/* tanh's Taylor series to x^9: below |x| = 0.25 the next term is under 1e-8 relative,
 * where 2 sigmoid(2x) - 1 would lose digits to cancellation. */
static inline float tanh_near_zero(float x) {
  const float x2 = x * x;
  return x + x * x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835))));
}

void qh_rnn_tanh_f32(const float *x, float *y, int64_t n, float *work) {
  for (int64_t i = 0; i < n; i++)
    work[i] = 2.0f * x[i];
  qh_sigmoid_f32(work, work, n);
  for (int64_t i = 0; i < n; i++)
    y[i] = fabsf(x[i]) < 0.25f ? tanh_near_zero(x[i]) : 2.0f * work[i] - 1.0f;
}

static void clip_range(float *g, int64_t n, float clip) {
  if (clip <= 0.0f)
    return;
  for (int64_t i = 0; i < n; i++)
    g[i] = g[i] < -clip ? -clip : g[i] > clip ? clip : g[i];
}

/* The node's inputs for one direction, and the scratch arrays. */
typedef struct {
  const Rnn *r;
  const float *X, *W, *R, *Wb, *Rb, *P, *h0, *c0;
  const QhTensor *lens;
  float *Y, *Yh, *Yc;
  float *rt;   /* [H][G]: R transposed */
  float *bias; /* [G]: folded into the projection */
  float *xw;   /* [chunk steps][B][G]: the projection */
  float *h, *c; /* [B][H] */
  float *g;    /* [G]: one batch entry's gates */
  float *tmp;  /* [2G] */
  int64_t chunk;
} Dir;

static int64_t seq_len(const Dir *d, int64_t b) {
  const int64_t T = d->r->seq;
  if (d->lens == NULL)
    return T;
  int64_t len = d->lens->dtype == QH_DTYPE_S64 ? ((const int64_t *)d->lens->data)[b]
                                                : ((const int32_t *)d->lens->data)[b];
  return len < 0 ? 0 : len > T ? T : len;
}

/* xw rows of time steps [t_lo, t_hi) = X W^T + bias. */
static void project(QhExecContext *ctx, const Dir *d, int64_t t_lo, int64_t t_hi) {
  const int64_t B = d->r->batch, Fin = d->r->input, G = d->r->gates * d->r->hidden;
  const int64_t rows = (t_hi - t_lo) * B;
  for (int64_t i = 0; i < rows; i++)
    memcpy(d->xw + i * G, d->bias, sizeof(float) * (size_t)G);
  qh_sgemm(ctx, CblasNoTrans, CblasTrans, (int)rows, (int)G, (int)Fin, 1.0f, d->X + t_lo * B * Fin, (int)Fin, d->W,
           (int)Fin, 1.0f, d->xw, (int)G);
}

/* One LSTM step of one batch entry: xrow (projection and both biases) and the state h, c
 * (updated in place). The gate order is ONNX's i, o, f, c. */
static void lstm_step(const Dir *d, const float *xrow, float *h, float *c) {
  const int64_t H = d->r->hidden, G = 4 * H;
  const float clip = d->r->clip;
  float *g = d->g, *tmp = d->tmp;
  memcpy(g, xrow, sizeof(float) * (size_t)G);
  qh_rnn_vecmat_f32(h, d->rt, H, G, G, g);
  if (d->P) {
    for (int64_t k = 0; k < H; k++) {
      g[k] += d->P[k] * c[k];
      g[2 * H + k] += d->P[2 * H + k] * c[k];
    }
    clip_range(g, H, clip);
    clip_range(g + 2 * H, 2 * H, clip);
    qh_sigmoid_f32(g, g, H);
    qh_sigmoid_f32(g + 2 * H, g + 2 * H, H);
  } else {
    clip_range(g, G, clip);
    qh_sigmoid_f32(g, g, 3 * H); /* i, o, f */
  }
  qh_rnn_tanh_f32(g + 3 * H, g + 3 * H, H, tmp);
  for (int64_t k = 0; k < H; k++)
    c[k] = g[2 * H + k] * c[k] + g[k] * g[3 * H + k];
  if (d->P) { /* the output gate peeks at the new cell */
    for (int64_t k = 0; k < H; k++)
      g[H + k] += d->P[H + k] * c[k];
    clip_range(g + H, H, clip);
    qh_sigmoid_f32(g + H, g + H, H);
  }
  qh_rnn_tanh_f32(c, tmp, H, tmp + H);
  for (int64_t k = 0; k < H; k++)
    h[k] = g[H + k] * tmp[k];
}

/* One GRU step of one batch entry; gates z, r, h. xrow holds X W^T + Wb, plus Rb for z
 * and r (Rbh sits inside the reset gate's product or after it). */
static void gru_step(const Dir *d, const float *xrow, float *h) {
  const int64_t H = d->r->hidden, G = 3 * H;
  const float clip = d->r->clip;
  const float *Rbh = d->Rb ? d->Rb + 2 * H : NULL;
  float *g = d->g, *acc = d->tmp;
  memcpy(g, xrow, sizeof(float) * (size_t)G);
  if (d->r->lbr) { /* h~ = tanh(x Wh + Wbh + r (.) (h Rh + Rbh)) */
    memset(acc, 0, sizeof(float) * (size_t)(2 * H));
    for (int64_t k = 0; k < H; k++)
      acc[2 * H + k] = Rbh ? Rbh[k] : 0.0f;
    qh_rnn_vecmat_f32(h, d->rt, H, G, G, acc);
    for (int64_t j = 0; j < 2 * H; j++)
      g[j] += acc[j];
    clip_range(g, 2 * H, clip);
    qh_sigmoid_f32(g, g, 2 * H);
    for (int64_t k = 0; k < H; k++)
      g[2 * H + k] += g[H + k] * acc[2 * H + k];
  } else { /* h~ = tanh(x Wh + Wbh + (r (.) h) Rh + Rbh) */
    memset(acc, 0, sizeof(float) * (size_t)(2 * H));
    qh_rnn_vecmat_f32(h, d->rt, H, 2 * H, G, acc);
    for (int64_t j = 0; j < 2 * H; j++)
      g[j] += acc[j];
    clip_range(g, 2 * H, clip);
    qh_sigmoid_f32(g, g, 2 * H);
    float *rh = acc, *cand = acc + H;
    for (int64_t k = 0; k < H; k++) {
      rh[k] = g[H + k] * h[k];
      cand[k] = Rbh ? Rbh[k] : 0.0f;
    }
    qh_rnn_vecmat_f32(rh, d->rt + 2 * H, H, H, G, cand);
    for (int64_t k = 0; k < H; k++)
      g[2 * H + k] += cand[k];
  }
  clip_range(g + 2 * H, H, clip);
  qh_rnn_tanh_f32(g + 2 * H, g + 2 * H, H, acc);
  for (int64_t k = 0; k < H; k++)
    h[k] = (1.0f - g[k]) * g[2 * H + k] + g[k] * h[k];
}

static void run_direction(QhExecContext *ctx, Dir *d, int dir, gboolean reverse) {
  const Rnn *r = d->r;
  const int64_t H = r->hidden, G = r->gates * H, B = r->batch, T = r->seq;
  for (int64_t j = 0; j < G; j++)
    for (int64_t k = 0; k < H; k++)
      d->rt[k * G + j] = d->R[j * H + k];
  for (int64_t j = 0; j < G; j++) {
    float b = d->Wb ? d->Wb[j] : 0.0f;
    if (d->Rb && (r->kind == RNN_LSTM || j < 2 * H))
      b += d->Rb[j];
    d->bias[j] = b;
  }
  for (int64_t i = 0; i < B * H; i++) {
    d->h[i] = d->h0 ? d->h0[i] : 0.0f;
    d->c[i] = d->c0 ? d->c0[i] : 0.0f;
  }
  int64_t t_lo = 0; /* first time step of the projected chunk */
  for (int64_t s = 0; s < T; s++) {
    const int64_t t = reverse ? T - 1 - s : s;
    if (s % d->chunk == 0) {
      int64_t s_end = MIN(s + d->chunk, T);
      t_lo = reverse ? T - s_end : s;
      project(ctx, d, t_lo, reverse ? T - s : s_end);
    }
    for (int64_t b = 0; b < B; b++) {
      float *y = d->Y ? d->Y + ((t * r->dirs + dir) * B + b) * H : NULL;
      const int64_t len = seq_len(d, b);
      if (reverse ? t >= len : s >= len) { /* past this entry's end: zeros, state kept */
        if (y)
          memset(y, 0, sizeof(float) * (size_t)H);
        continue;
      }
      const float *xrow = d->xw + ((t - t_lo) * B + b) * G;
      if (r->kind == RNN_LSTM)
        lstm_step(d, xrow, d->h + b * H, d->c + b * H);
      else
        gru_step(d, xrow, d->h + b * H);
      if (y)
        memcpy(y, d->h + b * H, sizeof(float) * (size_t)H);
    }
  }
  if (d->Yh)
    memcpy(d->Yh, d->h, sizeof(float) * (size_t)(B * H));
  if (d->Yc)
    memcpy(d->Yc, d->c, sizeof(float) * (size_t)(B * H));
}

gboolean qh_rnn_run_fast(QhExecContext *ctx, const QhNode *node, const Rnn *r,
                         const QhTensor *const *in, int n_in, QhTensor *const *out, int n_out,
                         GError **error) {
  const int64_t H = r->hidden, G = r->gates * H, B = r->batch, T = r->seq, Fin = r->input;
  if (T == 0 || B == 0) { /* nothing to step through: Y is empty, the states are the initial ones */
    for (int o = 1; o < n_out; o++) {
      if (out[o] == NULL)
        continue;
      const float *init = o == 1 ? (n_in > 5 && in[5] ? qh_f32(in[5]) : NULL)
                                 : (n_in > 6 && in[6] ? qh_f32(in[6]) : NULL);
      if (init)
        memcpy(out[o]->data, init, out[o]->nbytes);
      else
        memset(out[o]->data, 0, out[o]->nbytes);
    }
    return TRUE;
  }
  if (G > INT_MAX || Fin > INT_MAX || B > INT_MAX)
    return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "the gates or the input are too wide for the GEMM");
  int64_t chunk = (int64_t)(PROJECTION_MAX_BYTES / (sizeof(float) * (size_t)(B * G)));
  chunk = chunk < 1 ? 1 : chunk > T ? T : chunk;
  if (chunk * B > INT_MAX)
    chunk = INT_MAX / B;
  const size_t floats = (size_t)(H * G + G + chunk * B * G + 2 * B * H + 3 * G);
  float *scratch = qh_exec_scratch(ctx, sizeof(float) * floats);
  if (scratch == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "out of memory for the recurrent state");
  for (int dir = 0; dir < r->dirs; dir++) {
    Dir d = {.r = r, .chunk = chunk};
    d.X = qh_f32(in[0]);
    d.W = qh_f32(in[1]) + dir * G * Fin;
    d.R = qh_f32(in[2]) + dir * G * H;
    d.Wb = n_in > 3 && in[3] ? qh_f32(in[3]) + dir * 2 * G : NULL;
    d.Rb = d.Wb ? d.Wb + G : NULL;
    d.lens = n_in > 4 ? in[4] : NULL;
    d.h0 = n_in > 5 && in[5] ? qh_f32(in[5]) + dir * B * H : NULL;
    if (r->kind == RNN_LSTM) {
      d.c0 = n_in > 6 && in[6] ? qh_f32(in[6]) + dir * B * H : NULL;
      d.P = n_in > 7 && in[7] ? qh_f32(in[7]) + dir * 3 * H : NULL;
    }
    d.Y = n_out > 0 && out[0] ? qh_f32(out[0]) : NULL;
    d.Yh = n_out > 1 && out[1] ? qh_f32(out[1]) + dir * B * H : NULL;
    d.Yc = r->kind == RNN_LSTM && n_out > 2 && out[2] ? qh_f32(out[2]) + dir * B * H : NULL;
    d.rt = scratch;
    d.bias = d.rt + H * G;
    d.xw = d.bias + G;
    d.h = d.xw + chunk * B * G;
    d.c = d.h + B * H;
    d.g = d.c + B * H;
    d.tmp = d.g + G;
    run_direction(ctx, &d, dir, r->reverse || dir == 1);
  }
  return TRUE;
}
