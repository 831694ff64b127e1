/* The uint8 helper kernels of u8-kernels.h: activation lookup tables built with the host
 * reference's own float formulas (framework/exec/kernels/activation.c), and the
 * per-channel broadcasting Add / Mul of squeeze-excitation blocks, as a scalar twin and
 * as one clone per instruction set of the same scalar formula. The clones are plain C
 * that GCC vectorises under target attributes (no -march flags, no -ffast-math, no FP
 * contraction), so every lane does the twin's IEEE operations in the same order and the
 * bytes are the same; the caller picks the clone from the host's CPU features. */
#include "u8-kernels.h"

#include <math.h>
#include <string.h>

int qh_u8_act_from_name(const char *op_type) {
  static const char *const names[QH_U8_N_ACTS] = {"Sigmoid", "Tanh", "HardSigmoid", "HardSwish"};
  for (int i = 0; op_type && i < QH_U8_N_ACTS; i++)
    if (strcmp(op_type, names[i]) == 0)
      return i;
  return -1;
}

/* The host's formulas, written as activation.c writes them, so that libm and the float
 * operations give the same values (NaN cannot occur: the inputs are finite). */
static float clip01(float x) {
  float y = x < 0.0f ? 0.0f : x;
  return y > 1.0f ? 1.0f : y;
}

static float act_value(QhU8Act act, float x, float alpha, float beta) {
  switch (act) {
  case QH_U8_SIGMOID:
    if (x >= 0.0f)
      return 1.0f / (1.0f + expf(-x));
    else {
      float e = expf(x);
      return e / (1.0f + e);
    }
  case QH_U8_TANH:
    return tanhf(x);
  case QH_U8_HARDSIGMOID:
    return clip01(alpha * x + beta);
  case QH_U8_HARDSWISH:
  default:
    return x * clip01(x / 6.0f + 0.5f);
  }
}

void qh_u8_act_lut(QhU8Act act, float alpha, float beta, float sx, int32_t zx, float so, int32_t zo,
                   uint8_t lut[256]) {
  const float lo = (float)(0 - zo), hi = (float)(255 - zo);
  for (int q = 0; q < 256; q++) {
    float x = (float)(q - zx) * sx; /* DequantizeLinear */
    lut[q] = qh_u8_quant(act_value(act, x, alpha, beta), so, lo, hi, zo);
  }
}

void qh_u8_lut_apply(const uint8_t lut[256], const uint8_t *x, uint8_t *y, size_t n) {
  /* A local copy of the table: a uint8_t store may alias it, which would reload it per byte */
  uint8_t t[256];
  memcpy(t, lut, sizeof t);
  for (size_t i = 0; i < n; i++)
    y[i] = t[x[i]];
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* 64 lookups per step: vpermi2b indexes a 128-byte table by an index's low seven bits,
 * so the two halves of the table each give a candidate and the index's top bit picks
 * one. The tail is the same step on a masked load and store. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void qh_u8_lut_apply_vbmi(const uint8_t lut[256],
                                                                                const uint8_t *x, uint8_t *y,
                                                                                size_t n) {
  const __m512i t0 = _mm512_loadu_si512(lut), t1 = _mm512_loadu_si512(lut + 64);
  const __m512i t2 = _mm512_loadu_si512(lut + 128), t3 = _mm512_loadu_si512(lut + 192);
  for (size_t i = 0; i < n; i += 64) {
    __mmask64 m = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
    __m512i idx = _mm512_maskz_loadu_epi8(m, x + i);
    __m512i low = _mm512_permutex2var_epi8(t0, idx, t1), high = _mm512_permutex2var_epi8(t2, idx, t3);
    _mm512_mask_storeu_epi8(y + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high));
  }
}
#else
void qh_u8_lut_apply_vbmi(const uint8_t lut[256], const uint8_t *x, uint8_t *y, size_t n) {
  qh_u8_lut_apply(lut, x, y, n);
}
#endif

/* The element formula: DequantizeLinear of both operands, the float op, then
 * QuantizeLinear; Relu then quantize is quantize clamped below at zo. */
static inline __attribute__((always_inline)) uint8_t bin_one(int mul, float a, float b, float so, float lo,
                                                             float hi, int32_t zo) {
  return qh_u8_quant(mul ? a * b : a + b, so, lo, hi, zo);
}

void qh_u8_binary_channels_ref(const QhU8Binary *p, const uint8_t *a, const uint8_t *b, uint8_t *y, size_t P,
                               size_t C) {
  const float lo = p->relu ? 0.0f : (float)(0 - p->zo), hi = (float)(255 - p->zo);
  for (size_t i = 0; i < P; i++)
    for (size_t c = 0; c < C; c++) {
      float fa = ((float)a[i * C + c] - (float)p->za) * p->sa;
      float fb = ((float)b[c] - (float)p->zb) * p->sb;
      y[i * C + c] = bin_one(p->mul, fa, fb, p->so, lo, hi, p->zo);
    }
}

/* Channels in blocks whose dequantized b fits on the stack; within a block each pixel's
 * row is one vectorisable loop over contiguous channels. */
#define CBLOCK 512
#define CHANNELS_SPAN(name, MUL)                                                                          \
  static inline __attribute__((always_inline)) void name(const QhU8Binary *p, const uint8_t *restrict a,  \
                                                         const uint8_t *restrict b, uint8_t *restrict y,  \
                                                         size_t P, size_t C) {                            \
    const float lo = p->relu ? 0.0f : (float)(0 - p->zo), hi = (float)(255 - p->zo);                      \
    const float sa = p->sa, za = (float)p->za, so = p->so;                                                \
    const int32_t zo = p->zo;                                                                             \
    float fb[CBLOCK];                                                                                     \
    for (size_t c0 = 0; c0 < C; c0 += CBLOCK) {                                                           \
      size_t nc = C - c0 < CBLOCK ? C - c0 : CBLOCK;                                                      \
      for (size_t c = 0; c < nc; c++)                                                                     \
        fb[c] = ((float)b[c0 + c] - (float)p->zb) * p->sb;                                                \
      for (size_t i = 0; i < P; i++) {                                                                    \
        const uint8_t *restrict ar = a + i * C + c0;                                                      \
        uint8_t *restrict yr = y + i * C + c0;                                                            \
        for (size_t c = 0; c < nc; c++)                                                                   \
          yr[c] = bin_one(MUL, ((float)ar[c] - za) * sa, fb[c], so, lo, hi, zo);                          \
      }                                                                                                   \
    }                                                                                                     \
  }
CHANNELS_SPAN(add_span, 0)
CHANNELS_SPAN(mul_span, 1)

#define CLONE(name, span, isa)                                                                              \
  __attribute__((target(isa), optimize("tree-vectorize", "fp-contract=off"))) static void name(            \
      const QhU8Binary *p, const uint8_t *restrict a, const uint8_t *restrict b, uint8_t *restrict y,       \
      size_t P, size_t C) {                                                                                 \
    span(p, a, b, y, P, C);                                                                                 \
  }
CLONE(add_sse2, add_span, "sse2")
CLONE(add_avx2, add_span, "avx2")
CLONE(add_avx512, add_span, "avx512f,avx512bw,avx512vl")
CLONE(mul_sse2, mul_span, "sse2")
CLONE(mul_avx2, mul_span, "avx2")
CLONE(mul_avx512, mul_span, "avx512f,avx512bw,avx512vl")

void qh_u8_binary_channels(const QhU8Binary *p, int isa, const uint8_t *a, const uint8_t *b, uint8_t *y,
                           size_t P, size_t C) {
  typedef void Fn(const QhU8Binary *, const uint8_t *, const uint8_t *, uint8_t *, size_t, size_t);
  static Fn *const clones[2][QH_U8_N_ISAS] = {{add_sse2, add_avx2, add_avx512}, {mul_sse2, mul_avx2, mul_avx512}};
  if (isa < 0 || isa >= QH_U8_N_ISAS)
    isa = QH_U8_ISA_SSE2;
  clones[p->mul != 0][isa](p, a, b, y, P, C);
}

/* Same shapes: the element formula as the twin writes it, once per instruction set. */
#define SAME_SPAN(name, MUL)                                                                              \
  static inline __attribute__((always_inline)) void name(const QhU8Binary *p, const uint8_t *restrict a,  \
                                                         const uint8_t *restrict b, uint8_t *restrict y,  \
                                                         size_t n) {                                      \
    const float sa = p->sa, sb = p->sb, so = p->so, za = (float)p->za, zb = (float)p->zb;                 \
    const float lo = p->relu ? 0.0f : (float)(0 - p->zo), hi = (float)(255 - p->zo);                      \
    const int32_t zo = p->zo;                                                                             \
    for (size_t i = 0; i < n; i++)                                                                        \
      y[i] = bin_one(MUL, ((float)a[i] - za) * sa, ((float)b[i] - zb) * sb, so, lo, hi, zo);              \
  }
SAME_SPAN(add_same_span, 0)
SAME_SPAN(mul_same_span, 1)

__attribute__((optimize("no-tree-vectorize", "fp-contract=off"))) void qh_u8_binary_same_ref(
    const QhU8Binary *p, const uint8_t *a, const uint8_t *b, uint8_t *y, size_t n) {
  if (p->mul)
    mul_same_span(p, a, b, y, n);
  else
    add_same_span(p, a, b, y, n);
}

#define SAME_CLONE(name, span, isa)                                                                         \
  __attribute__((target(isa), optimize("tree-vectorize", "fp-contract=off"))) static void name(            \
      const QhU8Binary *p, const uint8_t *restrict a, const uint8_t *restrict b, uint8_t *restrict y,       \
      size_t n) {                                                                                           \
    span(p, a, b, y, n);                                                                                    \
  }
SAME_CLONE(add_same_sse2, add_same_span, "sse2")
SAME_CLONE(add_same_avx2, add_same_span, "avx2")
SAME_CLONE(add_same_avx512, add_same_span, "avx512f,avx512bw,avx512vl")
SAME_CLONE(mul_same_sse2, mul_same_span, "sse2")
SAME_CLONE(mul_same_avx2, mul_same_span, "avx2")
SAME_CLONE(mul_same_avx512, mul_same_span, "avx512f,avx512bw,avx512vl")

void qh_u8_binary_same(const QhU8Binary *p, int isa, const uint8_t *a, const uint8_t *b, uint8_t *y, size_t n) {
  typedef void Fn(const QhU8Binary *, const uint8_t *, const uint8_t *, uint8_t *, size_t);
  static Fn *const clones[2][QH_U8_N_ISAS] = {{add_same_sse2, add_same_avx2, add_same_avx512},
                                              {mul_same_sse2, mul_same_avx2, mul_same_avx512}};
  if (isa < 0 || isa >= QH_U8_N_ISAS)
    isa = QH_U8_ISA_SSE2;
  clones[p->mul != 0][isa](p, a, b, y, n);
}
