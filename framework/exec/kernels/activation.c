/* Reference kernels of the float32 activations: the pointwise Relu, Clip, LeakyRelu,
 * Sigmoid, Tanh, HardSigmoid and HardSwish, and Softmax along one axis (opset 13
 * semantics). Each pointwise op is one scalar function applied over chunks of the
 * tensor on the thread pool; the loops are plain enough to serve as their own
 * reference. Softmax along the last axis has a fast path (softmax-simd.c with AVX-512: a
 * single-precision exp, within 2 ulp / 1e-6 of the row's largest value; the same bits as
 * the plain loop without it), whose twin is the plain loop. */
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/kernels/common.h"
#include "exec/kernels/sigmoid-simd.h"
#include "exec/kernels/softmax-simd.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

typedef enum { ACT_RELU, ACT_CLIP, ACT_LEAKY, ACT_SIGMOID, ACT_TANH, ACT_HSIGMOID, ACT_HSWISH } Act;

typedef struct {
  Act act;
  float alpha, beta; /* LeakyRelu: alpha; HardSigmoid: alpha, beta; Clip: lo, hi */
  const float *x;
  float *y;
} Job;

#define PAR_GRAIN 8192

static Act act_of(const QhNode *node) {
  static const struct {
    const char *name;
    Act act;
  } names[] = {{"Relu", ACT_RELU},       {"Clip", ACT_CLIP},    {"LeakyRelu", ACT_LEAKY},
               {"Sigmoid", ACT_SIGMOID}, {"Tanh", ACT_TANH},    {"HardSigmoid", ACT_HSIGMOID},
               {"HardSwish", ACT_HSWISH}};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    if (strcmp(node->op_type, names[i].name) == 0)
      return names[i].act;
  return ACT_RELU;
}

/* Written so that NaN inputs stay NaN (every comparison with NaN is false). */
static inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

static inline float clip(float x, float lo, float hi) {
  float y = x < lo ? lo : x;
  return y > hi ? hi : y; /* min > max gives max everywhere, as ONNX specifies */
}

static inline float hard_sigmoid(float x, float alpha, float beta) {
  return clip(alpha * x + beta, 0.0f, 1.0f);
}

static inline float hard_swish(float x) { return x * clip(x / 6.0f + 0.5f, 0.0f, 1.0f); }

/* The piecewise-linear loops, compiled for the baseline and for AVX-512: ISO C mode
 * contracts nothing into FMAs, so each clone gives the bits of the other. Sigmoid is
 * sigmoid-simd.c's (glibc's expf, lane by lane); Tanh stays scalar. */
#define ACT_LOOPS(sfx, attrs)                                                                     \
  attrs static void act_loop_##sfx(const Job *j, const float *x, float *y,                      \
                                   int64_t n) {                                                   \
    const float a = j->alpha, b = j->beta;                                                        \
    switch (j->act) {                                                                             \
    case ACT_RELU:                                                                                \
      for (int64_t i = 0; i < n; i++)                                                             \
        y[i] = relu(x[i]);                                                                        \
      break;                                                                                      \
    case ACT_CLIP:                                                                                \
      for (int64_t i = 0; i < n; i++)                                                             \
        y[i] = clip(x[i], a, b);                                                                  \
      break;                                                                                      \
    case ACT_LEAKY:                                                                               \
      for (int64_t i = 0; i < n; i++)                                                             \
        y[i] = x[i] < 0.0f ? a * x[i] : x[i];                                                     \
      break;                                                                                      \
    case ACT_SIGMOID:                                                                             \
      qh_sigmoid_f32(x, y, n);                                                                    \
      break;                                                                                      \
    case ACT_TANH:                                                                                \
      for (int64_t i = 0; i < n; i++)                                                             \
        y[i] = tanhf(x[i]);                                                                       \
      break;                                                                                      \
    case ACT_HSIGMOID:                                                                            \
      for (int64_t i = 0; i < n; i++)                                                             \
        y[i] = hard_sigmoid(x[i], a, b);                                                          \
      break;                                                                                      \
    case ACT_HSWISH:                                                                              \
      for (int64_t i = 0; i < n; i++)                                                             \
        y[i] = hard_swish(x[i]);                                                                  \
      break;                                                                                      \
    }                                                                                             \
  }
ACT_LOOPS(base, )
ACT_LOOPS(avx512, __attribute__((target("avx512f"), optimize("tree-vectorize"))))

static void act_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  const float *x = j->x;
  float *y = j->y;
  if (qh_cpu_features() & QH_CPU_AVX512F)
    act_loop_avx512(j, x + begin, y + begin, end - begin);
  else
    act_loop_base(j, x + begin, y + begin, end - begin);
}

/* Clip's bound from input i (opset 11+) or from the attribute of the same name
 * (opset 6); dflt when neither is given. */
static gboolean clip_bound(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int i,
                           const char *name, float dflt, float *out, GError **error) {
  const QhTensor *t = i < n_inputs ? inputs[i] : NULL;
  if (t == NULL)
    return qh_node_attr_get_float(node, name, dflt, out, error);
  if (t->dtype != QH_DTYPE_F32)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "input '%s' has type %s; supported: float32", name,
                          qh_dtype_name(t->dtype));
  int64_t n = 1;
  for (int d = 0; d < t->shape.rank; d++)
    n *= t->shape.dims[d];
  if (n != 1) {
    char *s = qh_shape_to_string(&t->shape);
    qh_kernel_fail(error, node, QH_ERROR_INVALID, "input '%s' must be a scalar, not %s", name, s);
    g_free(s);
    return FALSE;
  }
  *out = t->data ? qh_f32(t)[0] : dflt; /* inference may see a computed bound: no data yet */
  return TRUE;
}

static gboolean params(const QhNode *node, const QhTensor *const *inputs, int n_inputs, Job *j,
                       GError **error) {
  j->act = act_of(node);
  j->alpha = j->beta = 0.0f;
  switch (j->act) {
  case ACT_CLIP:
    return clip_bound(node, inputs, n_inputs, 1, "min", -INFINITY, &j->alpha, error) &&
           clip_bound(node, inputs, n_inputs, 2, "max", INFINITY, &j->beta, error);
  case ACT_LEAKY:
    return qh_node_attr_get_float(node, "alpha", 0.01f, &j->alpha, error);
  case ACT_HSIGMOID:
    return qh_node_attr_get_float(node, "alpha", 0.2f, &j->alpha, error) &&
           qh_node_attr_get_float(node, "beta", 0.5f, &j->beta, error);
  default:
    return TRUE;
  }
}

static gboolean infer_pointwise(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0))
    return FALSE;
  Job j;
  if (!params(node, inputs, n_inputs, &j, error))
    return FALSE;
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = inputs[0]->shape;
  outputs[0].data = NULL;
  return TRUE;
}

static gboolean run_pointwise(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                              int n_inputs, QhTensor *const *outputs, int n_outputs,
                              GError **error) {
  (void)n_outputs;
  Job j;
  if (!params(node, inputs, n_inputs, &j, error))
    return FALSE;
  j.x = qh_f32(inputs[0]);
  j.y = qh_f32(outputs[0]);
  qh_thread_pool_parallel_for(ctx->pool, qh_tensor_numel(outputs[0]), PAR_GRAIN, act_task, &j);
  return TRUE;
}

/* Softmax sees its input as [outer, n, inner] around the axis. */
typedef struct {
  const float *x;
  float *y;
  int64_t n, inner;
} SoftmaxJob;

static gboolean softmax_axis(const QhNode *node, const QhShape *s, int *axis, GError **error) {
  int64_t a;
  if (!qh_node_attr_get_int(node, "axis", -1, &a, error))
    return FALSE;
  if (s->rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input must have rank >= 1");
  return qh_kernel_axis(node, a, s->rank, axis, error);
}

static gboolean infer_softmax(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                              QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int axis;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0) ||
      !softmax_axis(node, &inputs[0]->shape, &axis, error))
    return FALSE;
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = inputs[0]->shape;
  outputs[0].data = NULL;
  return TRUE;
}

/* Each task item is one (outer, inner) line along the axis. The maximum is
 * subtracted first so that expf never overflows; the line's maximum becomes 1. */
static void softmax_task(void *arg, int64_t begin, int64_t end) {
  const SoftmaxJob *j = arg;
  const int64_t n = j->n, in = j->inner;
  for (int64_t l = begin; l < end; l++) {
    int64_t base = (l / in) * n * in + l % in;
    const float *x = j->x + base;
    float *y = j->y + base;
    float m = x[0];
    for (int64_t k = 1; k < n; k++)
      m = x[k * in] > m ? x[k * in] : m;
    float sum = 0.0f;
    for (int64_t k = 0; k < n; k++) {
      float e = expf(x[k * in] - m);
      y[k * in] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t k = 0; k < n; k++)
      y[k * in] *= inv;
  }
}

/* The same for lines along the last axis (inner 1, attention scores): with AVX-512,
 * softmax-simd.c's vector rows (a single-precision exp, 16-lane maximum and sum: within
 * 2 ulp / 1e-6 of the row's largest value of softmax_task, its twin); without it, the
 * differences x - max written first, then exponentiated in place by qh_expf_f32 (glibc's
 * expf), then summed in the same order: the same bits as softmax_task. The maximum and the sum are chains of dependent operations
 * along a row (4 cycles each, the kernel's time for 128-wide attention rows); up to
 * SOFTMAX_ROWS rows go side by side, each still in its own order. */
#define SOFTMAX_ROWS 8
static void softmax_rows_task(void *arg, int64_t begin, int64_t end) {
  const SoftmaxJob *j = arg;
  const int64_t n = j->n;
  if (qh_softmax_rows_simd(j->x + begin * n, j->y + begin * n, end - begin, n))
    return;
  for (int64_t l0 = begin; l0 < end; l0 += SOFTMAX_ROWS) {
    const int rows = (int)MIN(SOFTMAX_ROWS, end - l0);
    const float *x[SOFTMAX_ROWS];
    float *y[SOFTMAX_ROWS], m[SOFTMAX_ROWS], sum[SOFTMAX_ROWS];
    for (int r = 0; r < rows; r++) {
      x[r] = j->x + (l0 + r) * n;
      y[r] = j->y + (l0 + r) * n;
      m[r] = x[r][0];
      sum[r] = 0.0f;
    }
    for (int64_t k = 1; k < n; k++)
      for (int r = 0; r < rows; r++)
        m[r] = x[r][k] > m[r] ? x[r][k] : m[r];
    for (int r = 0; r < rows; r++) {
      for (int64_t k = 0; k < n; k++)
        y[r][k] = x[r][k] - m[r];
      qh_expf_f32(y[r], y[r], n);
    }
    for (int64_t k = 0; k < n; k++)
      for (int r = 0; r < rows; r++)
        sum[r] += y[r][k];
    for (int r = 0; r < rows; r++) {
      const float inv = 1.0f / sum[r];
      for (int64_t k = 0; k < n; k++)
        y[r][k] *= inv;
    }
  }
}

static gboolean softmax_impl(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                             QhTensor *const *outputs, gboolean naive, GError **error) {
  const QhShape *s = &inputs[0]->shape;
  int axis;
  if (!softmax_axis(node, s, &axis, error))
    return FALSE;
  SoftmaxJob j = {.x = qh_f32(inputs[0]), .y = qh_f32(outputs[0]), .n = s->dims[axis], .inner = 1};
  int64_t outer = 1;
  for (int d = 0; d < s->rank; d++) {
    if (d < axis)
      outer *= s->dims[d];
    else if (d > axis)
      j.inner *= s->dims[d];
  }
  if (j.n == 0 || j.inner == 0 || outer == 0)
    return TRUE;
  gboolean rows = !naive && j.inner == 1;
  qh_thread_pool_parallel_for(ctx->pool, outer * j.inner, MAX(1, PAR_GRAIN / j.n),
                              rows ? softmax_rows_task : softmax_task, &j);
  return TRUE;
}

static gboolean run_softmax(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                            int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_inputs;
  (void)n_outputs;
  return softmax_impl(ctx, node, inputs, outputs, FALSE, error);
}

static gboolean run_softmax_naive(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                                  int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_inputs;
  (void)n_outputs;
  return softmax_impl(ctx, node, inputs, outputs, TRUE, error);
}

const QhOpDef qh_ops_activation[] = {
    {"Relu", 1, 1, 1, 1, infer_pointwise, run_pointwise, NULL, NULL},
    {"Clip", 1, 3, 1, 1, infer_pointwise, run_pointwise, NULL, NULL},
    {"LeakyRelu", 1, 1, 1, 1, infer_pointwise, run_pointwise, NULL, NULL},
    {"Sigmoid", 1, 1, 1, 1, infer_pointwise, run_pointwise, NULL, NULL},
    {"Tanh", 1, 1, 1, 1, infer_pointwise, run_pointwise, NULL, NULL},
    {"HardSigmoid", 1, 1, 1, 1, infer_pointwise, run_pointwise, NULL, NULL},
    {"HardSwish", 1, 1, 1, 1, infer_pointwise, run_pointwise, NULL, NULL},
    {"Softmax", 1, 1, 1, 1, infer_softmax, run_softmax, run_softmax_naive, NULL},
    {NULL},
};
