/* The x86 plugin's uint8 units, part 3 (u8-ops.h): run, which checks the views against
 * reshape's and splits each op into tasks on the instance's team: same-shape and
 * per-channel Add / Mul (plugins/common/u8-kernels.c's clone for this CPU), the table
 * lookups (a vector min/max when the table is a clamp, as for Relu and Clip with shared
 * qparams; AVX-512 VBMI's byte permutes where the CPU has them), BatchNormalization's per-channel tables, and plugins/common/u8-layout.c's
 * pooling rows, Pad rows, channel Slice and shuffle, NHWC to NCHW (Flatten). */
#include <emmintrin.h>
#include <string.h>

#include "../common/u8-kernels.h"
#include "../common/u8-layout.h"
#include "../common/unit-query.h"
#include "u8-ops.h"

#define VEC 16


typedef struct {
  const U8Op *k;
  const uint8_t *a, *b;
  uint8_t *y;
  size_t n;
} Job;

/* CHUNK elements of a same-shape Add or Mul: plugins/common's clone for this CPU. */
static void binary_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t i0 = index * CHUNK, n = i0 + CHUNK < j->n ? CHUNK : j->n - i0;
  QhU8Binary p = {.mul = k->op == U_MUL, .relu = k->relu, .sa = k->sa, .sb = k->sb, .so = k->so, .za = k->za,
                  .zb = k->zb, .zo = k->zo};
  qh_u8_binary_same(&p, k->isa, j->a + i0, j->b + i0, j->y + i0, n);
}

/* Pixels [p0, p1) of image n of a per-channel Add or Mul (j->n: pixels per task). */
static void channels_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t hw = (size_t)(k->h * k->w), tasks = (hw + j->n - 1) / j->n, n = index / tasks;
  size_t p0 = index % tasks * j->n, p1 = p0 + j->n < hw ? p0 + j->n : hw, C = (size_t)k->c;
  const uint8_t *bv = j->b + (k->bn == 1 ? 0 : n * C);
  QhU8Binary p = {.mul = k->op == U_MUL, .relu = k->relu, .so = k->so, .zo = k->zo};
  /* the full operand's qparams first */
  p.sa = k->bcast == 1 ? k->sa : k->sb, p.za = k->bcast == 1 ? k->za : k->zb;
  p.sb = k->bcast == 1 ? k->sb : k->sa, p.zb = k->bcast == 1 ? k->zb : k->za;
  size_t off = (n * hw + p0) * C;
  qh_u8_binary_channels(&p, k->isa, j->a + off, bv, j->y + off, p1 - p0, C);
}

/* 1024 pixels of a channel Slice: channels [c0, c1) of each, requantized (a copy when
 * the qparams are shared). */
static void slice_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, nc = (size_t)(k->s_c1 - k->s_c0), p0 = index * 1024;
  size_t p1 = p0 + 1024 < j->n ? p0 + 1024 : j->n;
  qh_u8_slice_channels(j->a + p0 * C, j->y + p0 * nc, p1 - p0, C, (size_t)k->s_c0, (size_t)k->s_c1,
                       k->identity ? NULL : k->lut);
}

/* Pixels [p0, p0 + j->n) of the channel shuffle: output channel i * g + j is input
 * channel j * (C / g) + i, requantized (a copy when the qparams are shared). */
static void shuffle_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, pixels = k->in_bytes / C, p0 = index * j->n;
  size_t p1 = p0 + j->n < pixels ? p0 + j->n : pixels;
  qh_u8_channel_shuffle(j->a + p0 * C, j->y + p0 * C, p1 - p0, C, (size_t)k->kh, k->lut);
}

/* One output row (n, oh) of Pad: the value's code in the border, the input requantized
 * (a copy when the qparams are shared) inside. */
static void pad_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, n = index / (size_t)k->oh;
  int64_t oh = (int64_t)(index % (size_t)k->oh), ih = oh - k->pad[0];
  const uint8_t *x = ih < 0 || ih >= k->h ? NULL : j->a + ((size_t)n * k->h + (size_t)ih) * (size_t)k->w * C;
  qh_u8_pad_row(x, j->y + index * (size_t)k->ow * C, (size_t)k->w, C, (size_t)k->pad[1], (size_t)k->pad[3],
                k->pad_code, k->identity ? NULL : k->lut);
}

/* Pixels [p0, p0 + j->n) of BatchNormalization: a table per channel. */
static void bn_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t C = (size_t)k->c, pixels = k->in_bytes / C, p0 = index * j->n;
  size_t p1 = p0 + j->n < pixels ? p0 + j->n : pixels;
  const uint8_t *restrict lut = k->bn_lut;
  for (size_t p = p0; p < p1; p++) {
    const uint8_t *restrict x = j->a + p * C;
    uint8_t *restrict y = j->y + p * C;
    for (size_t c = 0; c < C; c++)
      y[c] = lut[c * 256 + x[c]];
  }
}

static void lut_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  size_t i0 = index * CHUNK, i1 = i0 + CHUNK < j->n ? i0 + CHUNK : j->n, i = i0;
  /* Locals, because a uint8_t store may alias the job and the table: without them
   * every byte reloads both (measured 1.5 GB/s on mobilenet_v2's ReLU6s). */
  const uint8_t *restrict a = j->a, *restrict lut = j->k->lut;
  uint8_t *restrict y = j->y;
  if (j->k->clamp) {
    /* The table is a clamp (Relu/Clip with shared qparams): 16 bytes per min/max */
    const __m128i lo = _mm_set1_epi8((char)lut[0]), hi = _mm_set1_epi8((char)lut[255]);
    for (; i + VEC <= i1; i += VEC)
      _mm_storeu_si128((__m128i *)(y + i),
                       _mm_min_epu8(_mm_max_epu8(_mm_loadu_si128((const __m128i *)(a + i)), lo), hi));
  }
  if (j->k->vbmi)
    qh_u8_lut_apply_vbmi(lut, a + i, y + i, i1 - i);
  else
    for (; i < i1; i++)
      y[i] = lut[a[i]];
}

/* One output row (n, oh) of MaxPool, AveragePool or GlobalAveragePool (oh = 1):
 * plugins/common/u8-layout.c (GlobalAveragePool with VBMI: u8-gap.c). */
static void pool_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  int kind = k->op == U_MAXPOOL ? QH_U8_POOL_MAX : k->op == U_AVGPOOL ? QH_U8_POOL_AVG : QH_U8_POOL_GLOBAL;
  QhU8Pool p = {.kind = kind, .h = k->h, .w = k->w, .c = k->c, .oh = k->oh, .ow = k->ow, .kh = k->kh,
                .kw = k->kw, .sh = k->sh, .sw = k->sw, .include_pad = k->include_pad,
                .lut = k->identity ? NULL : k->lut, .dq = k->dq, .so = k->so, .zo = k->zo};
  memcpy(p.pad, k->pad, sizeof p.pad);
  int64_t n = (int64_t)index / k->oh, oh = (int64_t)index % k->oh;
  const uint8_t *img = j->a + (size_t)n * k->h * k->w * k->c;
  uint8_t *row = j->y + ((size_t)n * k->oh + oh) * k->ow * k->c;
  if (kind == QH_U8_POOL_GLOBAL && k->vbmi && qh_u8_global_avg_vbmi(&p, img, row))
    return;
  qh_u8_pool_row(&p, img, oh, row);
}

/* NHWC [n, h, w, c] to ONNX's Flatten order [n, c*h*w]. */
static void flatten_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const U8Op *k = j->k;
  size_t per = (size_t)(k->h * k->w * k->c), hw = (size_t)(k->h * k->w);
  qh_u8_nhwc_to_nchw(j->a + index * per, j->y + index * per, hw, (size_t)k->c, k->identity ? NULL : k->lut);
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  (void)ctx, (void)workspace, (void)workspace_bytes;
  U8Op *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || !outputs || n_outputs != 1 || n_inputs != k->n_in)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  /* Clip's min and max inputs are scalars read at create */
  size_t n_data = k->op == U_CLIP || k->op == U_BN || k->op == U_PAD || k->op == U_SHUFFLE || k->op == U_SLICE
                      ? 1
                      : n_inputs;
  for (size_t i = 0; i < n_data; i++) {
    const QhTensorView *x = &inputs[i];
    const int64_t *dims = i ? k->bdims : k->dims;
    size_t bytes = i ? k->bin_bytes : k->in_bytes;
    if (!uq_u8_view_ok(x) || x->rank != k->rank || memcmp(x->dims, dims, (size_t)x->rank * sizeof *x->dims) ||
        x->nbytes != bytes || (bytes && !x->data))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  }
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  Job j = {k, inputs[0].data, n_inputs > 1 ? inputs[1].data : NULL, y->data, k->in_bytes};
  size_t blocks = (j.n + CHUNK - 1) / (CHUNK);
  switch (k->op) {
  case U_ADD:
  case U_MUL:
    if (k->gate >= 0) { /* act(x) * x: a table over x (act(x) has x's shape) */
      j.a = inputs[k->gate].data;
      x86_parallel_for(k->inst, blocks, lut_task, &j);
      return NULL;
    }
    if (k->bcast) {
      if (k->bcast == 2) /* a is the per-channel one: swap (Add and Mul commute exactly) */
        j.a = inputs[1].data, j.b = inputs[0].data;
      size_t hw = (size_t)(k->h * k->w), per = CHUNK / (size_t)(k->c > 0 ? k->c : 1);
      j.n = per ? per : 1; /* pixels per task */
      x86_parallel_for(k->inst, (size_t)k->n * ((hw + j.n - 1) / j.n), channels_task, &j);
      return NULL;
    }
    x86_parallel_for(k->inst, blocks, binary_task, &j);
    return NULL;
  case U_FLATTEN:
    if (k->n > 0 && k->h * k->w > 1) {
      x86_parallel_for(k->inst, (size_t)k->n, flatten_task, &j);
      return NULL;
    }
    /* Otherwise the same bytes in the same order: */
    /* fall through */
  case U_RELU:
  case U_CLIP:
  case U_SIGMOID:
  case U_TANH:
  case U_HSIGMOID:
  case U_HSWISH:
    if (k->identity) {
      if (y->data != inputs[0].data)
        memcpy(y->data, inputs[0].data, j.n);
      return NULL;
    }
    x86_parallel_for(k->inst, blocks, lut_task, &j);
    return NULL;
  case U_PAD:
    x86_parallel_for(k->inst, (size_t)(k->n * k->oh), pad_task, &j);
    return NULL;
  case U_SLICE:
    j.n = (size_t)(k->n * k->h * k->w); /* pixels */
    x86_parallel_for(k->inst, (j.n + 1023) / 1024, slice_task, &j);
    return NULL;
  case U_SHUFFLE: {
    size_t pixels = j.n / (size_t)k->c;
    j.n = CHUNK / (size_t)k->c ? CHUNK / (size_t)k->c : 1; /* pixels per task */
    x86_parallel_for(k->inst, (pixels + j.n - 1) / j.n, shuffle_task, &j);
    return NULL;
  }
  case U_BN: {
    size_t pixels = j.n / (size_t)k->c;
    j.n = CHUNK / (size_t)k->c ? CHUNK / (size_t)k->c : 1; /* pixels per task */
    x86_parallel_for(k->inst, (pixels + j.n - 1) / j.n, bn_task, &j);
    return NULL;
  }
  default:
    x86_parallel_for(k->inst, (size_t)(k->n * k->oh), pool_task, &j);
    return NULL;
  }
}

#define U8KERNEL(name, kid)                                                                                 \
  const QhKernelOps name = {QH_STRUCT_HEADER(QhKernelOps), .id = kid, .input_layout = QH_LAYOUT_NHWC,      \
                            .output_layout = QH_LAYOUT_NHWC, .create = x86_u8op_create, .reshape = x86_u8op_reshape, \
                            .run = run, .destroy = x86_u8op_destroy}
U8KERNEL(x86_add_kernel, "x86_add_nhwc_qu8");
U8KERNEL(x86_mul_kernel, "x86_mul_nhwc_qu8");
U8KERNEL(x86_act_mul_kernel, "x86_act_mul_lut_qu8");
U8KERNEL(x86_relu_kernel, "x86_relu_nhwc_qu8");
U8KERNEL(x86_clip_kernel, "x86_clip_nhwc_qu8");
U8KERNEL(x86_maxpool_kernel, "x86_maxpool2d_nhwc_qu8");
U8KERNEL(x86_avgpool_kernel, "x86_avgpool2d_nhwc_qu8");
U8KERNEL(x86_gap_kernel, "x86_global_avgpool_nhwc_qu8");
U8KERNEL(x86_flatten_kernel, "x86_flatten_nhwc_qu8");
U8KERNEL(x86_sigmoid_kernel, "x86_sigmoid_lut_qu8");
U8KERNEL(x86_tanh_kernel, "x86_tanh_lut_qu8");
U8KERNEL(x86_hardsigmoid_kernel, "x86_hardsigmoid_lut_qu8");
U8KERNEL(x86_hardswish_kernel, "x86_hardswish_lut_qu8");
U8KERNEL(x86_batchnorm_kernel, "x86_batchnorm_nhwc_qu8");
U8KERNEL(x86_pad_kernel, "x86_pad_nhwc_qu8");
U8KERNEL(x86_reducemean_kernel, "x86_reducemean_hw_nhwc_qu8");
U8KERNEL(x86_shuffle_kernel, "x86_channel_shuffle_nhwc_qu8");
U8KERNEL(x86_slice_kernel, "x86_slice_channels_nhwc_qu8");
