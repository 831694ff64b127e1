/* Reference kernel of BatchNormalization in its inference form (opset 9-15):
 * y = (x - mean) / sqrt(var + epsilon) * scale + B over channel axis 1. Like
 * PyTorch's CPU kernel, the per-channel terms are folded first (a = scale /
 * sqrt(var + eps), b = B - mean * a) and each element costs one multiply-add, so
 * float results track PyTorch's rather than the formula's literal rounding.
 * Training mode and the optional statistics outputs are refused. A 4-D tensor the layout
 * plan keeps channels-last (exec/layout.c) is walked pixel by pixel with the same
 * multiply-add per element, so its bits are the NCHW loop's. */
#include <math.h>

#include "exec/kernels/common.h"

static const char *const param_names[] = {"X", "scale", "B", "input_mean", "input_var"};

static gboolean check_attrs(const QhNode *node, float *eps, GError **error) {
  int64_t training, spatial;
  if (!qh_node_attr_get_float(node, "epsilon", 1e-5f, eps, error) ||
      !qh_node_attr_get_int(node, "training_mode", 0, &training, error) ||
      !qh_node_attr_get_int(node, "spatial", 1, &spatial, error))
    return FALSE;
  if (training != 0)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "training_mode=%" G_GINT64_FORMAT " is not supported; only inference "
                          "(training_mode=0)", training);
  if (spatial != 1)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "spatial=%" G_GINT64_FORMAT " (per-element statistics) is not supported",
                          spatial);
  return TRUE;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                      QhTensor *outputs, int n_outputs, GError **error) {
  float eps;
  if (!check_attrs(node, &eps, error))
    return FALSE;
  for (int i = 1; i < n_outputs; i++)
    if (qh_node_output(node, i) >= 0)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                            "output %d (running or saved statistics) is only produced in "
                            "training mode, which is not supported", i);
  for (int i = 0; i < 5; i++)
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_F32, 0))
      return FALSE;
  const QhShape *xs = &inputs[0]->shape;
  if (xs->rank < 2)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input X must have rank >= 2, not %d",
                          xs->rank);
  int64_t c = xs->dims[1];
  for (int i = 1; i < 5; i++) {
    const QhShape *s = &inputs[i]->shape;
    if (s->rank != 1 || s->dims[0] != c) {
      char *str = qh_shape_to_string(s);
      qh_kernel_fail(error, node, QH_ERROR_INVALID,
                     "input %s has shape %s; expected [%" G_GINT64_FORMAT "] (the channels of X)",
                     param_names[i], str, c);
      g_free(str);
      return FALSE;
    }
  }
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = *xs;
  outputs[0].data = NULL;
  /* Omitted optional outputs still get a consistent description. */
  for (int i = 1; i < n_outputs; i++) {
    outputs[i].dtype = QH_DTYPE_F32;
    outputs[i].shape = inputs[1]->shape;
    outputs[i].data = NULL;
  }
  return TRUE;
}

typedef struct {
  const float *x, *a, *b;
  float *y;
  int64_t channels, inner;
} Job;

/* Each task item is one (n, c) plane of inner elements. */
static void bn_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  const int64_t in = j->inner;
  for (int64_t p = begin; p < end; p++) {
    const float a = j->a[p % j->channels], b = j->b[p % j->channels];
    const float *x = j->x + p * in;
    float *y = j->y + p * in;
    for (int64_t i = 0; i < in; i++)
      y[i] = x[i] * a + b;
  }
}

/* Channels-last: each task item is one pixel of `channels` elements. */
static void bn_task_nhwc(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  const int64_t c = j->channels;
  for (int64_t p = begin; p < end; p++) {
    const float *x = j->x + p * c;
    float *y = j->y + p * c;
    for (int64_t k = 0; k < c; k++)
      y[k] = x[k] * j->a[k] + j->b[k];
  }
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                    int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_inputs;
  (void)n_outputs;
  float eps;
  if (!check_attrs(node, &eps, error))
    return FALSE;
  const QhShape *xs = &inputs[0]->shape;
  int64_t c = xs->dims[1], inner = 1;
  for (int d = 2; d < xs->rank; d++)
    inner *= xs->dims[d];
  int64_t planes = xs->dims[0] * c;
  if (planes == 0 || inner == 0)
    return TRUE;
  /* Channel counts come from the model: allocate the folded terms fallibly. */
  float *ab = qh_aligned_alloc0(sizeof(float) * 2 * (size_t)c);
  if (ab == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_NOMEM,
                          "out of memory for %" G_GINT64_FORMAT " channels", c);
  const float *scale = qh_f32(inputs[1]), *bias = qh_f32(inputs[2]);
  const float *mean = qh_f32(inputs[3]), *var = qh_f32(inputs[4]);
  for (int64_t k = 0; k < c; k++) {
    float invstd = 1.0f / sqrtf(var[k] + eps);
    ab[k] = scale[k] * invstd;
    ab[c + k] = bias[k] - mean[k] * ab[k];
  }
  Job j = {.x = qh_f32(inputs[0]), .a = ab, .b = ab + c, .y = qh_f32(outputs[0]),
           .channels = c, .inner = inner};
  if (((ctx->nhwc_inputs | ctx->nhwc_outputs) & 1) && xs->rank == 4)
    qh_thread_pool_parallel_for(ctx->pool, xs->dims[0] * inner, MAX(1, 16384 / c), bn_task_nhwc, &j);
  else
    qh_thread_pool_parallel_for(ctx->pool, planes, MAX(1, 16384 / inner), bn_task, &j);
  qh_aligned_free(ab);
  return TRUE;
}

const QhOpDef qh_ops_norm[] = {
    {"BatchNormalization", 5, 5, 1, 5, infer, run, NULL, NULL},
    {NULL},
};
