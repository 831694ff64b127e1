/* Reference kernels of QuantizeLinear and DequantizeLinear (opset 10-21 forms,
 * without blocked quantization; uint8, int8, and opset 21's uint16, int16, uint4 and
 * int4, the 4-bit ones held one per byte (core/dtype.h), so that they take the 8-bit
 * loops except for Quantize's range; int32 input to Dequantize): per-tensor or per-axis
 * scales and zero points.
 * Quantize follows ONNX's definition literally, saturate(round_half_even(x / scale)
 * + zero_point), with exact division (never the reciprocal) under the default
 * rounding mode; Dequantize computes (x - zero_point) * scale. Both see the input as
 * [outer, channels, inner] around the quantization axis (channels = 1 per tensor).
 * The naive twins apply that formula per element with nearbyintf; the fast paths
 * restate it in a form GCC vectorises without roundps and that gives the same bytes
 * (see quantize_fast_one), compiled for SSE2, AVX2 and AVX-512 and picked at run time. */
#include <math.h>

#include "core/cpu.h"
#include "exec/kernels/common.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

typedef struct {
  const QhTensor *scale, *zp; /* zp may be NULL */
  int64_t channels, inner;    /* per tensor: 1 and the element count */
} QParams;

static gboolean elems(const QhShape *s, int64_t *n) {
  *n = 1;
  for (int d = 0; d < s->rank; d++)
    *n *= s->dims[d];
  return s->rank <= 1;
}

/* Validate scale and zero point against the input shape and fill p. */
static gboolean qparams(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                        const char *scale_name, const char *zp_name, QParams *p, GError **error) {
  const QhTensor *x = inputs[0], *scale = inputs[1];
  const QhTensor *zp = n_inputs > 2 ? inputs[2] : NULL;
  int64_t block = 0, axis_attr;
  if (!qh_node_attr_get_int(node, "block_size", 0, &block, error) ||
      !qh_node_attr_get_int(node, "axis", 1, &axis_attr, error))
    return FALSE;
  if (block != 0)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "blocked quantization (block_size=%" G_GINT64_FORMAT ") is not supported",
                          block);
  int64_t ns, nz;
  if (!elems(&scale->shape, &ns))
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "%s must be a scalar or 1-D, not rank %d", scale_name,
                          scale->shape.rank);
  if (zp != NULL) {
    if (!elems(&zp->shape, &nz) || nz != ns)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "%s has %" G_GINT64_FORMAT " elements (rank %d) but %s has %"
                            G_GINT64_FORMAT, zp_name, nz, zp->shape.rank, scale_name, ns);
  }
  p->scale = scale;
  p->zp = zp;
  int64_t n = 1;
  for (int d = 0; d < x->shape.rank; d++)
    n *= x->shape.dims[d];
  if (scale->shape.rank == 0 || ns == 1) {
    p->channels = 1;
    p->inner = n;
    return TRUE;
  }
  int axis;
  if (x->shape.rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "%s has %" G_GINT64_FORMAT " elements but the input is a scalar",
                          scale_name, ns);
  if (!qh_kernel_axis(node, axis_attr, x->shape.rank, &axis, error))
    return FALSE;
  if (x->shape.dims[axis] != ns) {
    char *s = qh_shape_to_string(&x->shape);
    qh_kernel_fail(error, node, QH_ERROR_INVALID,
                   "%s has %" G_GINT64_FORMAT " elements but axis %d of input %s has %"
                   G_GINT64_FORMAT, scale_name, ns, axis, s, x->shape.dims[axis]);
    g_free(s);
    return FALSE;
  }
  p->channels = ns;
  p->inner = 1;
  for (int d = axis + 1; d < x->shape.rank; d++)
    p->inner *= x->shape.dims[d];
  return TRUE;
}

static int32_t zp_at(const QhTensor *zp, int64_t c) {
  if (zp == NULL)
    return 0;
  switch (zp->dtype) {
  case QH_DTYPE_U8: case QH_DTYPE_U4: return ((const uint8_t *)zp->data)[c];
  case QH_DTYPE_S8: case QH_DTYPE_S4: return ((const int8_t *)zp->data)[c];
  case QH_DTYPE_U16: return ((const uint16_t *)zp->data)[c];
  case QH_DTYPE_S16: return ((const int16_t *)zp->data)[c];
  default: return ((const int32_t *)zp->data)[c];
  }
}

/* The saturation range of a quantized type (Quantize's outputs are 8 or 16 bits). */
static void qrange(QhDType qdt, int32_t *qmin, int32_t *qmax) {
  switch (qdt) {
  case QH_DTYPE_U8: *qmin = 0, *qmax = 255; break;
  case QH_DTYPE_S8: *qmin = -128, *qmax = 127; break;
  case QH_DTYPE_U16: *qmin = 0, *qmax = 65535; break;
  case QH_DTYPE_U4: *qmin = 0, *qmax = 15; break;
  case QH_DTYPE_S4: *qmin = -8, *qmax = 7; break;
  default: *qmin = -32768, *qmax = 32767; break;
  }
}

/* The 8-bit type whose storage and dequantize formula a 4-bit type shares. */
static QhDType storage_type(QhDType qdt) {
  return qdt == QH_DTYPE_U4 ? QH_DTYPE_U8 : qdt == QH_DTYPE_S4 ? QH_DTYPE_S8 : qdt;
}

/* Store an integer already inside qdt's range. */
static inline void store_q(void *y, int64_t i, QhDType qdt, int32_t q) {
  switch (qdt) {
  case QH_DTYPE_U8: case QH_DTYPE_U4: ((uint8_t *)y)[i] = (uint8_t)q; break;
  case QH_DTYPE_S8: case QH_DTYPE_S4: ((int8_t *)y)[i] = (int8_t)q; break;
  case QH_DTYPE_U16: ((uint16_t *)y)[i] = (uint16_t)q; break;
  default: ((int16_t *)y)[i] = (int16_t)q; break;
  }
}

typedef struct {
  QParams p;
  const void *x;
  void *y;
  QhDType qdt; /* the quantized type: Quantize's output, Dequantize's input */
} Job;

/* Calls BODY(c, i0, i1) over the maximal runs [i0, i1) of [begin, end) sharing channel c. */
#define FOR_CHANNEL_RUNS(j, begin, end, BODY)                                    \
  for (int64_t i0 = (begin); i0 < (end);) {                                     \
    int64_t plane = i0 / (j)->p.inner;                                          \
    int64_t c = plane % (j)->p.channels;                                        \
    int64_t i1 = MIN((end), (plane + 1) * (j)->p.inner);                        \
    BODY(c, i0, i1);                                                            \
    i0 = i1;                                                                    \
  }

/* ---- Naive twins ------------------------------------------------------------ */

/* NaN has no integer to round to: it quantizes like 0.0, to the zero point. */
static inline int32_t quantize_one(float x, float scale, float zp, float lo, float hi) {
  float q = nearbyintf(x / scale) + zp;
  if (isnan(q))
    return (int32_t)zp;
  return (int32_t)(q < lo ? lo : q > hi ? hi : q);
}

static void quantize_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  const float *x = j->x;
  int32_t qmin, qmax;
  qrange(j->qdt, &qmin, &qmax);
  const float lo = (float)qmin, hi = (float)qmax;
#define QUANTIZE_RUN(c, i0, i1)                                                  \
  do {                                                                          \
    const float s = qh_f32(j->p.scale)[c], z = (float)zp_at(j->p.zp, c);        \
    for (int64_t i = i0; i < i1; i++)                                           \
      store_q(j->y, i, j->qdt, quantize_one(x[i], s, z, lo, hi));               \
  } while (0)
  FOR_CHANNEL_RUNS(j, begin, end, QUANTIZE_RUN)
#undef QUANTIZE_RUN
}

static void dequantize_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  float *y = j->y;
  /* Widened to int64 so that int32 inputs minus a zero point cannot overflow. */
#define DEQUANTIZE_RUN(c, i0, i1)                                                \
  do {                                                                          \
    const float s = qh_f32(j->p.scale)[c];                                      \
    const int64_t z = zp_at(j->p.zp, c);                                        \
    if (j->qdt == QH_DTYPE_U8)                                                  \
      for (int64_t i = i0; i < i1; i++)                                         \
        y[i] = (float)(((const uint8_t *)j->x)[i] - z) * s;                     \
    else if (j->qdt == QH_DTYPE_S8)                                             \
      for (int64_t i = i0; i < i1; i++)                                         \
        y[i] = (float)(((const int8_t *)j->x)[i] - z) * s;                      \
    else if (j->qdt == QH_DTYPE_U16)                                            \
      for (int64_t i = i0; i < i1; i++)                                         \
        y[i] = (float)(((const uint16_t *)j->x)[i] - z) * s;                    \
    else if (j->qdt == QH_DTYPE_S16)                                            \
      for (int64_t i = i0; i < i1; i++)                                         \
        y[i] = (float)(((const int16_t *)j->x)[i] - z) * s;                     \
    else                                                                        \
      for (int64_t i = i0; i < i1; i++)                                         \
        y[i] = (float)(((const int32_t *)j->x)[i] - z) * s;                     \
  } while (0)
  FOR_CHANNEL_RUNS(j, begin, end, DEQUANTIZE_RUN)
#undef DEQUANTIZE_RUN
}

/* ---- Fast paths ------------------------------------------------------------ */

/* 1.5 * 2^23: adding it to a float v with |v| <= 2^22 leaves the integer nearest to
 * v (ties to even, the default rounding mode, like nearbyintf) in the low mantissa
 * bits, and subtracting it again recovers that integer exactly. */
#define ROUND_MAGIC 12582912.0f

/* round_half_even(x / s) clamped to [lo, hi] = [qmin - zp, qmax - zp]: since
 * rounding is monotonic and lo, hi are integers, clamping before rounding gives
 * the same integer as saturating after, and keeps |v| within the magic number's
 * range (|lo|, |hi| <= 98303 for 16 bits, 383 for 8). NaN becomes 0, i.e. the zero point, as in the naive
 * twin. Written branch-free on floats so that the loops below vectorise. */
static inline float quantize_fast_one(float x, float s, float lo, float hi) {
  float v = x / s;
  v = v == v ? v : 0.0f;
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return (v + ROUND_MAGIC) - ROUND_MAGIC;
}

/* The per-tensor loops, written once and compiled per instruction set (baseline SSE2,
 * AVX2, AVX-512): x / s is an exactly rounded IEEE division in every width, so each clone
 * gives the bytes of the others, and wider lanes pay off on a model's input (a 224x224
 * image is 150 528 divisions). Picked from the host's CPU features, so QHOST_CPU_DISABLE
 * selects each one for the tests. */
#define QDQ_LOOPS(sfx, isa)                                                                        \
  __attribute__((target(isa), optimize("tree-vectorize"))) static void quantize_u8_##sfx(            \
      const float *restrict x, uint8_t *restrict y, int64_t n, float s, int32_t z) {               \
    const float lo = (float)(0 - z), hi = (float)(255 - z);                                        \
    for (int64_t i = 0; i < n; i++)                                                                \
      y[i] = (uint8_t)((int32_t)quantize_fast_one(x[i], s, lo, hi) + z);                           \
  }                                                                                                \
  __attribute__((target(isa), optimize("tree-vectorize"))) static void quantize_s8_##sfx(            \
      const float *restrict x, int8_t *restrict y, int64_t n, float s, int32_t z) {                \
    const float lo = (float)(-128 - z), hi = (float)(127 - z);                                     \
    for (int64_t i = 0; i < n; i++)                                                                \
      y[i] = (int8_t)((int32_t)quantize_fast_one(x[i], s, lo, hi) + z);                            \
  }                                                                                                \
  __attribute__((target(isa), optimize("tree-vectorize"))) static void quantize_u16_##sfx(           \
      const float *restrict x, uint16_t *restrict y, int64_t n, float s, int32_t z) {              \
    const float lo = (float)(0 - z), hi = (float)(65535 - z);                                      \
    for (int64_t i = 0; i < n; i++)                                                                \
      y[i] = (uint16_t)((int32_t)quantize_fast_one(x[i], s, lo, hi) + z);                          \
  }                                                                                                \
  __attribute__((target(isa), optimize("tree-vectorize"))) static void quantize_s16_##sfx(           \
      const float *restrict x, int16_t *restrict y, int64_t n, float s, int32_t z) {               \
    const float lo = (float)(-32768 - z), hi = (float)(32767 - z);                                 \
    for (int64_t i = 0; i < n; i++)                                                                \
      y[i] = (int16_t)((int32_t)quantize_fast_one(x[i], s, lo, hi) + z);                           \
  }                                                                                                \
  __attribute__((target(isa), optimize("tree-vectorize"))) static void dequantize_u16_##sfx(         \
      const uint16_t *restrict x, float *restrict y, int64_t n, float s, int32_t z) {              \
    for (int64_t i = 0; i < n; i++)                                                                \
      y[i] = (float)((int32_t)x[i] - z) * s;                                                       \
  }                                                                                                \
  __attribute__((target(isa), optimize("tree-vectorize"))) static void dequantize_s16_##sfx(         \
      const int16_t *restrict x, float *restrict y, int64_t n, float s, int32_t z) {               \
    for (int64_t i = 0; i < n; i++)                                                                \
      y[i] = (float)((int32_t)x[i] - z) * s;                                                       \
  }                                                                                                \
  __attribute__((target(isa), optimize("tree-vectorize"))) static void dequantize_u8_##sfx(          \
      const uint8_t *restrict x, float *restrict y, int64_t n, float s, int32_t z) {               \
    for (int64_t i = 0; i < n; i++)                                                                \
      y[i] = (float)((int32_t)x[i] - z) * s;                                                       \
  }                                                                                                \
  __attribute__((target(isa), optimize("tree-vectorize"))) static void dequantize_s8_##sfx(          \
      const int8_t *restrict x, float *restrict y, int64_t n, float s, int32_t z) {                \
    for (int64_t i = 0; i < n; i++)                                                                \
      y[i] = (float)((int32_t)x[i] - z) * s;                                                       \
  }
QDQ_LOOPS(sse2, "sse2")
QDQ_LOOPS(avx2, "avx2")
QDQ_LOOPS(avx512, "avx512f,avx512bw,avx512vl")

typedef struct {
  void (*quantize_u8)(const float *, uint8_t *, int64_t, float, int32_t);
  void (*quantize_s8)(const float *, int8_t *, int64_t, float, int32_t);
  void (*dequantize_u8)(const uint8_t *, float *, int64_t, float, int32_t);
  void (*dequantize_s8)(const int8_t *, float *, int64_t, float, int32_t);
  void (*quantize_u16)(const float *, uint16_t *, int64_t, float, int32_t);
  void (*quantize_s16)(const float *, int16_t *, int64_t, float, int32_t);
  void (*dequantize_u16)(const uint16_t *, float *, int64_t, float, int32_t);
  void (*dequantize_s16)(const int16_t *, float *, int64_t, float, int32_t);
} QdqLoops;

static const QdqLoops *qdq_loops(void) {
#define QDQ_TABLE(sfx)                                                                             \
  {quantize_u8_##sfx,   quantize_s8_##sfx,   dequantize_u8_##sfx,   dequantize_s8_##sfx,              \
   quantize_u16_##sfx,  quantize_s16_##sfx,  dequantize_u16_##sfx,  dequantize_s16_##sfx}
  static const QdqLoops sse2 = QDQ_TABLE(sse2), avx2 = QDQ_TABLE(avx2), avx512 = QDQ_TABLE(avx512);
#undef QDQ_TABLE
  const uint64_t f = qh_cpu_features(), want512 = QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VL;
  return (f & want512) == want512 ? &avx512 : (f & QH_CPU_AVX2) ? &avx2 : &sse2;
}

/* Per-axis with inner == 1 (the axis is the innermost one): runs would be single
 * elements, so step the channel along with the element instead of per run. */
static void quantize_fast_interleaved(const Job *j, int64_t begin, int64_t end) {
  const float *x = j->x;
  const float *scale = qh_f32(j->p.scale);
  int32_t qmin, qmax;
  qrange(j->qdt, &qmin, &qmax);
  int64_t c = begin % j->p.channels;
  for (int64_t i = begin; i < end; i++) {
    int32_t z = zp_at(j->p.zp, c);
    float v = quantize_fast_one(x[i], scale[c], (float)(qmin - z), (float)(qmax - z));
    store_q(j->y, i, j->qdt, (int32_t)v + z);
    if (++c == j->p.channels)
      c = 0;
  }
}

static void quantize_fast_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  if (qh_dtype_is_4bit(j->qdt)) { /* weights, quantized once: no vector loops */
    quantize_task(arg, begin, end);
    return;
  }
  if (j->p.inner == 1 && j->p.channels > 1) {
    quantize_fast_interleaved(j, begin, end);
    return;
  }
  const float *x = j->x;
  const QdqLoops *f = qdq_loops();
#define QUANTIZE_FAST_RUN(c, i0, i1)                                             \
  do {                                                                          \
    const float s = qh_f32(j->p.scale)[c];                                      \
    const int32_t z = zp_at(j->p.zp, c);                                        \
    if (j->qdt == QH_DTYPE_U8)                                                  \
      f->quantize_u8(x + i0, (uint8_t *)j->y + i0, i1 - i0, s, z);              \
    else if (j->qdt == QH_DTYPE_S8)                                             \
      f->quantize_s8(x + i0, (int8_t *)j->y + i0, i1 - i0, s, z);               \
    else if (j->qdt == QH_DTYPE_U16)                                            \
      f->quantize_u16(x + i0, (uint16_t *)j->y + i0, i1 - i0, s, z);            \
    else                                                                        \
      f->quantize_s16(x + i0, (int16_t *)j->y + i0, i1 - i0, s, z);             \
  } while (0)
  FOR_CHANNEL_RUNS(j, begin, end, QUANTIZE_FAST_RUN)
#undef QUANTIZE_FAST_RUN
}

/* (x - z) fits in int32 for 8- and 16-bit inputs, and int32 inputs have z == 0
 * (check_int32_zp), so int32 arithmetic gives the naive twin's int64 values. */
static void dequantize_s32(const int32_t *restrict x, float *restrict y, int64_t n, float s) {
  for (int64_t i = 0; i < n; i++)
    y[i] = (float)x[i] * s;
}

static void dequantize_fast_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  if (j->p.inner == 1 && j->p.channels > 1) {
    dequantize_task(arg, begin, end); /* per element channels: nothing to vectorise */
    return;
  }
  const QdqLoops *f = qdq_loops();
#define DEQUANTIZE_FAST_RUN(c, i0, i1)                                           \
  do {                                                                          \
    const float s = qh_f32(j->p.scale)[c];                                      \
    const int32_t z = zp_at(j->p.zp, c);                                        \
    if (j->qdt == QH_DTYPE_U8)                                                  \
      f->dequantize_u8((const uint8_t *)j->x + i0, (float *)j->y + i0, i1 - i0, s, z); \
    else if (j->qdt == QH_DTYPE_S8)                                             \
      f->dequantize_s8((const int8_t *)j->x + i0, (float *)j->y + i0, i1 - i0, s, z);  \
    else if (j->qdt == QH_DTYPE_U16)                                            \
      f->dequantize_u16((const uint16_t *)j->x + i0, (float *)j->y + i0, i1 - i0, s, z); \
    else if (j->qdt == QH_DTYPE_S16)                                            \
      f->dequantize_s16((const int16_t *)j->x + i0, (float *)j->y + i0, i1 - i0, s, z); \
    else if (z == 0)                                                            \
      dequantize_s32((const int32_t *)j->x + i0, (float *)j->y + i0, i1 - i0, s);   \
    else                                                                        \
      dequantize_task(arg, i0, i1);                                             \
  } while (0)
  FOR_CHANNEL_RUNS(j, begin, end, DEQUANTIZE_FAST_RUN)
#undef DEQUANTIZE_FAST_RUN
}

#define PAR_GRAIN 16384

static gboolean infer_quantize(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                               QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  QParams p;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_F32, 0))
    return FALSE;
  if (n_inputs > 2 && inputs[2] != NULL &&
      !qh_kernel_check_dtype(node, inputs, n_inputs, 2, error, QH_DTYPE_U8, QH_DTYPE_S8, QH_DTYPE_U16,
                             QH_DTYPE_S16, QH_DTYPE_U4, QH_DTYPE_S4, 0))
    return FALSE;
  if (!qparams(node, inputs, n_inputs, "y_scale", "y_zero_point", &p, error))
    return FALSE;
  /* opset 21's output_dtype: the output type when there is no zero point; with one, the
   * two must agree. */
  int64_t out_dt;
  if (!qh_node_attr_get_int(node, "output_dtype", 0, &out_dt, error))
    return FALSE;
  if (out_dt != 0 && out_dt != QH_DTYPE_U8 && out_dt != QH_DTYPE_S8 && out_dt != QH_DTYPE_U16 &&
      out_dt != QH_DTYPE_S16 && out_dt != QH_DTYPE_U4 && out_dt != QH_DTYPE_S4)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "output_dtype %" G_GINT64_FORMAT " is not uint8, int8, uint16, int16, uint4 or int4",
                          out_dt);
  if (out_dt != 0 && p.zp != NULL && out_dt != p.zp->dtype)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "output_dtype is %s but y_zero_point has type %s; they must match",
                          qh_dtype_name((QhDType)out_dt), qh_dtype_name(p.zp->dtype));
  outputs[0].dtype = p.zp != NULL ? p.zp->dtype : out_dt != 0 ? (QhDType)out_dt : QH_DTYPE_U8;
  outputs[0].shape = inputs[0]->shape;
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean quantize_with(QhParallelFn task, QhExecContext *ctx, const QhNode *node,
                              const QhTensor *const *inputs, int n_inputs,
                              QhTensor *const *outputs, GError **error) {
  Job j = {.x = inputs[0]->data, .y = outputs[0]->data, .qdt = outputs[0]->dtype};
  if (!qparams(node, inputs, n_inputs, "y_scale", "y_zero_point", &j.p, error))
    return FALSE;
  qh_thread_pool_parallel_for(ctx->pool, qh_tensor_numel(inputs[0]), PAR_GRAIN, task, &j);
  return TRUE;
}

static gboolean run_quantize(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                             int n_inputs, QhTensor *const *outputs, int n_outputs,
                             GError **error) {
  (void)n_outputs;
  return quantize_with(quantize_fast_task, ctx, node, inputs, n_inputs, outputs, error);
}

static gboolean run_quantize_naive(QhExecContext *ctx, const QhNode *node,
                                   const QhTensor *const *inputs, int n_inputs,
                                   QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  return quantize_with(quantize_task, ctx, node, inputs, n_inputs, outputs, error);
}

/* ONNX allows int32 inputs only with a zero point of 0 (biases quantized with
 * scale = input scale * weight scale). */
static gboolean check_int32_zp(const QhNode *node, const QParams *p, GError **error) {
  if (p->zp == NULL || p->zp->data == NULL || p->zp->dtype != QH_DTYPE_S32)
    return TRUE;
  int64_t n = qh_tensor_numel(p->zp);
  for (int64_t i = 0; i < n; i++)
    if (((const int32_t *)p->zp->data)[i] != 0)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "x_zero_point must be 0 for int32 input, element %" G_GINT64_FORMAT
                            " is %d", i, ((const int32_t *)p->zp->data)[i]);
  return TRUE;
}

static gboolean infer_dequantize(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                 QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  QParams p;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_U8, QH_DTYPE_S8,
                             QH_DTYPE_U16, QH_DTYPE_S16, QH_DTYPE_U4, QH_DTYPE_S4, QH_DTYPE_S32, 0) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_F32, 0))
    return FALSE;
  if (n_inputs > 2 && inputs[2] != NULL && inputs[2]->dtype != inputs[0]->dtype)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "x_zero_point has type %s but x has type %s; they must match",
                          qh_dtype_name(inputs[2]->dtype), qh_dtype_name(inputs[0]->dtype));
  if (!qparams(node, inputs, n_inputs, "x_scale", "x_zero_point", &p, error) ||
      !check_int32_zp(node, &p, error))
    return FALSE;
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = inputs[0]->shape;
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean dequantize_with(QhParallelFn task, QhExecContext *ctx, const QhNode *node,
                                const QhTensor *const *inputs, int n_inputs,
                                QhTensor *const *outputs, GError **error) {
  Job j = {.x = inputs[0]->data, .y = outputs[0]->data, .qdt = storage_type(inputs[0]->dtype)};
  if (!qparams(node, inputs, n_inputs, "x_scale", "x_zero_point", &j.p, error) ||
      !check_int32_zp(node, &j.p, error))
    return FALSE;
  qh_thread_pool_parallel_for(ctx->pool, qh_tensor_numel(inputs[0]), PAR_GRAIN, task, &j);
  return TRUE;
}

static gboolean run_dequantize(QhExecContext *ctx, const QhNode *node,
                               const QhTensor *const *inputs, int n_inputs,
                               QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  return dequantize_with(dequantize_fast_task, ctx, node, inputs, n_inputs, outputs, error);
}

static gboolean run_dequantize_naive(QhExecContext *ctx, const QhNode *node,
                                     const QhTensor *const *inputs, int n_inputs,
                                     QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  return dequantize_with(dequantize_task, ctx, node, inputs, n_inputs, outputs, error);
}

const QhOpDef qh_ops_qdq[] = {
    {"QuantizeLinear", 2, 3, 1, 1, infer_quantize, run_quantize, run_quantize_naive, NULL},
    {"DequantizeLinear", 2, 3, 1, 1, infer_dequantize, run_dequantize, run_dequantize_naive,
     NULL},
    {NULL},
};
