/* The x86 plugin's int8 MatMul between two activations (attention's Q x K^T and
 * attention x V): both operands uint8 per tensor with the file's zero points, batched
 * over any leading dimensions the two operands share, uint8 output.
 *
 * oneDNN 2.6's int8 matmul takes u8/s8 sources but only s8 weights, and a weights zero
 * point only on its slow reference path, so the kernel shifts the right operand to s8
 * (b' = b - 128), runs a plain u8 x s8 -> s32 matmul and corrects exactly in int32:
 *   sum_k (a - za)(b' - zb') = acc - za * colsum(b')[n] - zb' * rowsum(a)[m] + K za zb',
 * with zb' = zb - 128. That is exact only with VNNI (vpdpbusd accumulates in int32):
 * without it oneDNN uses vpmaddubsw, whose int16 pair sums a0 b'0 + a1 b'1 saturate at
 * 32767 for any operands a [0, 255] and b' [-128, 127] can hold. Without VNNI the kernel
 * runs the same product as an fp32 matmul of (a - za) and (b - zb): every partial sum
 * is an integer of magnitude at most K * max|a - za| * max|b - zb|, exact in fp32 while
 * that bound is at most 2^24; beyond it the unit is declined with that reason. The
 * result is requantized like the host's QuantizeLinear of the float product. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <emmintrin.h> /* SSE2: x86-64's baseline */

#include "../common/unit-query.h"
#include "onednn.h"

#define FP32_EXACT_LIMIT 16777216.0 /* 2^24: the largest run of exact integers in fp32 */

typedef struct {
  X86Instance *inst;
  int32_t za, zb, zo;
  float sab, so, lo, hi; /* sab = f32(sa * sb); lo/hi: the output range minus zo */
  int vnni;              /* the int8 path; else the exact fp32 one */
  double ma, mb;         /* max |a - za|, max |b - zb| over the operands' ranges */
  /* set by reshape */
  int reshaped, rank;
  int64_t batch, m, k, n;
  int64_t a_dims[QH_MAX_RANK], b_dims[QH_MAX_RANK];
  X86Prim p;
  size_t off_b, off_colsum, off_rowsum, off_acc, off_af; /* workspace layout */
} ActMatmul;

static double max_offset(const QhQParams *q) {
  double lo = q->zero_point[0] - q->quant_min, hi = q->quant_max - q->zero_point[0];
  return lo > hi ? lo : hi;
}

static const char *exact_fp32_problem(const ActMatmul *k, int64_t kdim) {
  if ((double)kdim * k->ma * k->mb <= FP32_EXACT_LIMIT)
    return NULL;
  return "without VNNI the u8 x s8 pair sums of vpmaddubsw may saturate, and the exact fp32 "
         "path needs K * max|a - za| * max|b - zb| <= 2^24";
}

/* Everything accept and create check; fills the qparams part of k. */
static const char *analyze(const X86Instance *inst, const QhHostApi *host, const QhGraphView *g,
                           const QhNodeUnit *u, ActMatmul *k) {
  if (u->n_nodes != 1 || !uq_op_is(host, g, u->nodes[0], "MatMul"))
    return "activation matmul pattern on an op other than MatMul";
  if (u->n_inputs != 2)
    return "MatMul with other than two inputs";
  const char *p = uq_act_problem(u->input_qparams[0], 0);
  if (!p)
    p = uq_act_problem(u->input_qparams[1], 0);
  if (!p)
    p = uq_act_problem(u->output_qparams[0], 1);
  if (p)
    return p;
  const QhQParams *aq = u->input_qparams[0], *bq = u->input_qparams[1], *yq = u->output_qparams[0];
  k->za = aq->zero_point[0], k->zb = bq->zero_point[0], k->zo = yq->zero_point[0];
  volatile float sab = aq->scale[0] * bq->scale[0];
  k->sab = sab;
  k->so = yq->scale[0];
  k->lo = (float)(yq->quant_min - k->zo), k->hi = (float)(yq->quant_max - k->zo);
  k->ma = max_offset(aq), k->mb = max_offset(bq);
  k->vnni = inst ? inst->vnni : 1;
  if (!isnormal(k->sab))
    return "the product of the input scales is not a normal float";
  int64_t ad[QH_MAX_RANK], bd[QH_MAX_RANK];
  int32_t ar = uq_input_shape(host, g, u, 0, ad), br = uq_input_shape(host, g, u, 1, bd);
  if (ar >= 0 && br >= 0) {
    if (ar < 2 || ar != br)
      return "MatMul operands of rank below 2 or of different ranks (broadcasting) are not supported";
    for (int32_t i = 0; i + 2 < ar; i++)
      if (ad[i] != bd[i])
        return "MatMul operands with different batch dimensions (broadcasting) are not supported";
  }
  if (!k->vnni && ar >= 2)
    return exact_fp32_problem(k, ad[ar - 1]);
  return NULL;
}

QhStatus *x86_accept_act_matmul(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  ActMatmul k;
  memset(&k, 0, sizeof k);
  const char *p = analyze(instance, host, g, u, &k);
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

static void release(ActMatmul *k) {
  x86_prim_release(&k->p);
  k->reshaped = 0;
}

static void destroy(void *kernel) {
  ActMatmul *k = kernel;
  if (!k)
    return;
  release(k);
  free(k);
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  if (!out || !u)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  ActMatmul *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  const char *p = analyze(instance, host, g, u, k);
  if (p) {
    free(k);
    return host->status_new(QH_ERR_UNSUPPORTED, p);
  }
  k->inst = instance;
  *out = k;
  return NULL;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  ActMatmul *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != 2 || !outputs || n_outputs != 1 || !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *a = &inputs[0], *b = &inputs[1];
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(a) || !uq_u8_view_ok(b))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: inputs must be uint8 tensors");
  if (y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: output view too small");
  if (a->layout == QH_LAYOUT_NHWC || b->layout == QH_LAYOUT_NHWC || a->layout == QH_LAYOUT_OPAQUE ||
      b->layout == QH_LAYOUT_OPAQUE)
    return host->status_new(QH_ERR_UNSUPPORTED, "reshape: operands must be row-major, not channels-last");
  release(k);
  int32_t r = a->rank;
  if (r < 2 || r > QH_MAX_RANK || b->rank != r)
    return host->status_new(QH_ERR_UNSUPPORTED, "reshape: operands of rank below 2 or of different ranks");
  int64_t batch = 1;
  for (int32_t i = 0; i + 2 < r; i++) {
    if (a->dims[i] != b->dims[i])
      return host->status_new(QH_ERR_UNSUPPORTED, "reshape: operands with different batch dimensions");
    batch *= a->dims[i];
  }
  int64_t m = a->dims[r - 2], kd = a->dims[r - 1], n = b->dims[r - 1];
  if (b->dims[r - 2] != kd)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: inner dimensions differ");
  if (!k->vnni) {
    const char *p = exact_fp32_problem(k, kd);
    if (p)
      return host->status_new(QH_ERR_UNSUPPORTED, p);
  }
  y->dtype = QH_DTYPE_UINT8;
  y->rank = r;
  memcpy(y->dims, a->dims, sizeof y->dims);
  y->dims[r - 1] = n;
  y->layout = a->layout;
  k->rank = r, k->batch = batch, k->m = m, k->k = kd, k->n = n;
  memcpy(k->a_dims, a->dims, sizeof k->a_dims);
  memcpy(k->b_dims, b->dims, sizeof k->b_dims);
  size_t mk = (size_t)(batch * m * kd), kn = (size_t)(batch * kd * n), mn = (size_t)(batch * m * n);
  size_t ws = 0;
  if (k->vnni) { /* b' (s8), column sums of b', row sums of a, the s32 accumulator */
    k->off_b = ws, ws += align64(kn);
    k->off_colsum = ws, ws += align64((size_t)(batch * n) * 4);
    k->off_rowsum = ws, ws += align64((size_t)(batch * m) * 4);
    k->off_acc = ws, ws += align64(mn * 4);
  } else { /* a - za, b - zb and the product, fp32 */
    k->off_af = ws, ws += align64(mk * 4);
    k->off_b = ws, ws += align64(kn * 4);
    k->off_acc = ws, ws += align64(mn * 4);
  }
  *out_workspace = ws;
  if (mn == 0) {
    k->reshaped = 1;
    return NULL;
  }
  dnnl_dims_t sd = {batch, m, kd}, wd = {batch, kd, n}, dd = {batch, m, n};
  dnnl_memory_desc_t src, wei, dst;
  dnnl_data_type_t st = k->vnni ? dnnl_u8 : dnnl_f32, wt = k->vnni ? dnnl_s8 : dnnl_f32,
                   dt = k->vnni ? dnnl_s32 : dnnl_f32;
  X86_CK(dnnl_memory_desc_init_by_tag(&src, 3, sd, st, dnnl_abc), "memory_desc_init(src)");
  X86_CK(dnnl_memory_desc_init_by_tag(&wei, 3, wd, wt, dnnl_abc), "memory_desc_init(weights)");
  X86_CK(dnnl_memory_desc_init_by_tag(&dst, 3, dd, dt, dnnl_abc), "memory_desc_init(dst)");
  dnnl_matmul_desc_t md;
  X86_CK(dnnl_matmul_desc_init(&md, &src, &wei, NULL, &dst), "matmul_desc_init");
  dnnl_primitive_desc_t pd = NULL;
  X86_CK(dnnl_primitive_desc_create(&pd, &md, NULL, k->inst->engine, NULL),
         k->vnni ? "u8 x s8 matmul" : "fp32 matmul");
  /* both operands are activations: the weights memory is bound at run too */
  QhStatus *s = x86_prim_create(k->inst, host, pd, NULL, NULL, &k->p);
  dnnl_primitive_desc_destroy(pd);
  if (s) {
    release(k);
    return s;
  }
  k->reshaped = 1;
  return NULL;
}

typedef struct {
  const ActMatmul *k;
  const uint8_t *a, *b;
  uint8_t *y;
  char *ws;
} Job;

/* Per batch: the operands into the primitive's types. The int8 path stores b' = b - 128
 * (b xor 0x80 as a byte), zb' * (rowsum(a)[m] - K za) per row and za * colsum(b')[n] per
 * column, the two correction terms of the header's identity, so that finish only adds. */
static void prepare_task(void *user, size_t bi, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const ActMatmul *k = j->k;
  size_t mk = (size_t)(k->m * k->k), kn = (size_t)(k->k * k->n), nn = (size_t)k->n, kk = (size_t)k->k;
  const uint8_t *a = j->a + bi * mk, *b = j->b + bi * kn;
  if (k->vnni) {
    uint8_t *bs = (uint8_t *)(j->ws + k->off_b) + bi * kn;
    int32_t *cs = (int32_t *)(j->ws + k->off_colsum) + bi * nn;
    int32_t *rs = (int32_t *)(j->ws + k->off_rowsum) + bi * (size_t)k->m;
    memset(cs, 0, nn * sizeof *cs);
    const __m128i flip = _mm_set1_epi8((char)0x80), zero = _mm_setzero_si128();
    for (size_t r = 0; r < kk; r++) {
      const uint8_t *br = b + r * nn;
      size_t c = 0;
      for (; c + 16 <= nn; c += 16) { /* column sums of b (u8), widened to int32 */
        __m128i v = _mm_loadu_si128((const __m128i *)(br + c));
        _mm_storeu_si128((__m128i *)(bs + r * nn + c), _mm_xor_si128(v, flip));
        __m128i lo = _mm_unpacklo_epi8(v, zero), hi = _mm_unpackhi_epi8(v, zero);
        __m128i *d = (__m128i *)(cs + c);
        _mm_storeu_si128(d, _mm_add_epi32(_mm_loadu_si128(d), _mm_unpacklo_epi16(lo, zero)));
        _mm_storeu_si128(d + 1, _mm_add_epi32(_mm_loadu_si128(d + 1), _mm_unpackhi_epi16(lo, zero)));
        _mm_storeu_si128(d + 2, _mm_add_epi32(_mm_loadu_si128(d + 2), _mm_unpacklo_epi16(hi, zero)));
        _mm_storeu_si128(d + 3, _mm_add_epi32(_mm_loadu_si128(d + 3), _mm_unpackhi_epi16(hi, zero)));
      }
      for (; c < nn; c++) {
        bs[r * nn + c] = (uint8_t)(br[c] ^ 0x80);
        cs[c] += br[c];
      }
    }
    for (size_t c = 0; c < nn; c++) /* colsum(b') = colsum(b) - 128 K */
      cs[c] = k->za * (cs[c] - 128 * (int32_t)kk);
    int32_t zb = k->zb - 128; /* zb' */
    for (int64_t m = 0; m < k->m; m++) {
      const uint8_t *ar = a + (size_t)m * kk;
      __m128i acc = _mm_setzero_si128();
      size_t i = 0;
      for (; i + 16 <= kk; i += 16) /* two 8-byte sums per instruction */
        acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(ar + i)), zero));
      int32_t sum = _mm_cvtsi128_si32(acc) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(acc, acc));
      for (; i < kk; i++)
        sum += ar[i];
      rs[m] = zb * (sum - (int32_t)kk * k->za);
    }
  } else {
    float *af = (float *)(j->ws + k->off_af) + bi * mk, *bf = (float *)(j->ws + k->off_b) + bi * kn;
    for (size_t i = 0; i < mk; i++)
      af[i] = (float)((int32_t)a[i] - k->za);
    for (size_t i = 0; i < kn; i++)
      bf[i] = (float)((int32_t)b[i] - k->zb);
  }
}

/* v = f32(c) * sab quantized as x86_quant_u8 does (exact division by so, clamp, round half
 * to even with the 1.5 * 2^23 trick, + zo), four at a time; n_out of the 16 stored. */
static inline void quant16(const __m128 *v, const ActMatmul *k, uint8_t *y, size_t n_out) {
  const __m128 so = _mm_set1_ps(k->so), lo = _mm_set1_ps(k->lo), hi = _mm_set1_ps(k->hi);
  const __m128 magic = _mm_set1_ps(X86_ROUND_MAGIC);
  const __m128i zo = _mm_set1_epi32(k->zo);
  __m128i q[4];
  for (int t = 0; t < 4; t++) {
    __m128 r = _mm_div_ps(v[t], so);
    r = _mm_min_ps(_mm_max_ps(r, lo), hi);
    r = _mm_sub_ps(_mm_add_ps(r, magic), magic);
    q[t] = _mm_add_epi32(_mm_cvttps_epi32(r), zo);
  }
  __m128i w = _mm_packus_epi16(_mm_packs_epi32(q[0], q[1]), _mm_packs_epi32(q[2], q[3]));
  if (n_out == 16) {
    _mm_storeu_si128((__m128i *)y, w);
  } else {
    uint8_t tmp[16];
    _mm_storeu_si128((__m128i *)tmp, w);
    memcpy(y, tmp, n_out);
  }
}

/* Per output row: the exact integer product, requantized as the host's QuantizeLinear. */
static void finish_task(void *user, size_t row, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const ActMatmul *k = j->k;
  size_t bi = row / (size_t)k->m, n = (size_t)k->n;
  uint8_t *y = j->y + row * n;
  const __m128 sab = _mm_set1_ps(k->sab);
  if (k->vnni) {
    const int32_t *acc = (const int32_t *)(j->ws + k->off_acc) + row * n;
    const int32_t *cs = (const int32_t *)(j->ws + k->off_colsum) + bi * n;
    int32_t rs = ((const int32_t *)(j->ws + k->off_rowsum))[row];
    /* acc - za colsum(b')[c] - zb' (rowsum(a) - K za) */
    const __m128i c0 = _mm_set1_epi32(rs);
    for (size_t c = 0; c < n; c += 16) {
      size_t w = n - c < 16 ? n - c : 16;
      int32_t ta[16] = {0}, tc[16] = {0};
      const int32_t *pa = acc + c, *pc = cs + c;
      if (w < 16) {
        memcpy(ta, pa, w * 4), memcpy(tc, pc, w * 4);
        pa = ta, pc = tc;
      }
      __m128 v[4];
      for (int t = 0; t < 4; t++) {
        __m128i s = _mm_sub_epi32(_mm_loadu_si128((const __m128i *)(pa + 4 * t)),
                                  _mm_loadu_si128((const __m128i *)(pc + 4 * t)));
        v[t] = _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(s, c0)), sab);
      }
      quant16(v, k, y + c, w);
    }
  } else {
    const float *acc = (const float *)(j->ws + k->off_acc) + row * n;
    for (size_t c = 0; c < n; c += 16) {
      size_t w = n - c < 16 ? n - c : 16;
      float t16[16] = {0};
      const float *pa = acc + c;
      if (w < 16) {
        memcpy(t16, pa, w * 4);
        pa = t16;
      }
      __m128 v[4];
      for (int t = 0; t < 4; t++)
        v[t] = _mm_mul_ps(_mm_loadu_ps(pa + 4 * t), sab);
      quant16(v, k, y + c, w);
    }
  }
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  (void)ctx, (void)workspace_bytes;
  ActMatmul *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != 2 || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  const QhTensorView *a = &inputs[0], *b = &inputs[1];
  QhTensorView *y = &outputs[0];
  size_t mk = (size_t)(k->batch * k->m * k->k), kn = (size_t)(k->batch * k->k * k->n),
         mn = (size_t)(k->batch * k->m * k->n);
  if (!uq_u8_view_ok(a) || !uq_u8_view_ok(b) || a->rank != k->rank || b->rank != k->rank ||
      memcmp(a->dims, k->a_dims, (size_t)k->rank * sizeof *a->dims) ||
      memcmp(b->dims, k->b_dims, (size_t)k->rank * sizeof *b->dims) || a->nbytes != mk || b->nbytes != kn ||
      (mk && !a->data) || (kn && !b->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: inputs differ from reshape's");
  if (!uq_u8_view_ok(y) || y->nbytes != mn || (mn && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (mn == 0)
    return NULL;
  if (k->k == 0) { /* an empty sum: every output is the quantized zero */
    memset(y->data, (uint8_t)x86_quant_u8(0.0f, k->so, k->lo, k->hi, k->zo), mn);
    return NULL;
  }
  Job j = {k, a->data, b->data, y->data, workspace};
  X86Instance *inst = k->inst;
  pthread_mutex_lock(&inst->lock);
  omp_set_num_threads(inst->n_threads);
  x86_parallel_for(inst, (size_t)k->batch, prepare_task, &j);
  void *src = k->vnni ? (void *)a->data : (void *)(j.ws + k->off_af);
  dnnl_status_t s = x86_prim_execute(inst, &k->p, src, j.ws + k->off_b, j.ws + k->off_acc);
  if (s == dnnl_success)
    x86_parallel_for(inst, (size_t)(k->batch * k->m), finish_task, &j);
  pthread_mutex_unlock(&inst->lock);
  return x86_dnnl_status(host, s, "execute");
}

const QhKernelOps x86_act_matmul_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "onednn_matmul_qu8_qu8", .input_layout = QH_LAYOUT_ANY,
    .output_layout = QH_LAYOUT_ANY, .create = create, .reshape = reshape, .run = run, .destroy = destroy};
