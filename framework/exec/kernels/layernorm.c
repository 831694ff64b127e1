/* Reference kernel of ONNX's LayerNormalization (opset 17, which PyTorch 1.13 emits
 * for nn.LayerNorm at opset 17; below it the exporter writes the ReduceMean/Sub/Pow/
 * Sqrt/Div decomposition that kernels/math.c and reduce.c run). Float32 in and out,
 * statistics computed in float32 (stash_type 1) in ONNX's order: mean, then the mean
 * of squared deviations, then 1/sqrt(var + epsilon). Each normalized row is one task
 * on the thread pool; the loop is its own reference. */
#include <math.h>
#include <string.h>

#include "exec/kernels/common.h"

typedef struct {
  const float *x, *scale, *bias;
  float *y, *mean, *inv;
  int64_t n; /* elements per normalized row */
  float eps;
} Job;

static gboolean attrs(const QhNode *node, const QhShape *x, int *axis, float *eps, GError **error) {
  int64_t a = -1, stash = 1;
  if (!qh_node_attr_get_int(node, "axis", -1, &a, error) ||
      !qh_node_attr_get_float(node, "epsilon", 1e-5f, eps, error) ||
      !qh_node_attr_get_int(node, "stash_type", 1, &stash, error))
    return FALSE;
  if (stash != 1)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "stash_type=%" G_GINT64_FORMAT
                          " is not supported (float32 statistics only)", stash);
  return qh_kernel_axis(node, a, x->rank, axis, error);
}

/* scale and bias must hold exactly the normalized dims (trailing x dims from axis). */
static gboolean check_param(const QhNode *node, const QhTensor *t, const QhShape *x, int axis,
                            const char *what, GError **error) {
  if (t == NULL)
    return TRUE;
  int64_t n = 1;
  for (int i = axis; i < x->rank; i++)
    n *= x->dims[i];
  if (t->dtype != QH_DTYPE_F32 || qh_tensor_numel(t) != n)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "%s must be float32 with the %" G_GINT64_FORMAT " elements of the normalized dims", what,
                          n);
  return TRUE;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                      int n_outputs, GError **error) {
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0) ||
      !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_F32, 0))
    return FALSE;
  int axis;
  float eps;
  const QhShape *x = &inputs[0]->shape;
  if (!attrs(node, x, &axis, &eps, error) || !check_param(node, inputs[1], x, axis, "Scale", error) ||
      !check_param(node, n_inputs > 2 ? inputs[2] : NULL, x, axis, "B", error))
    return FALSE;
  QhShape stat = *x;
  for (int i = axis; i < x->rank; i++)
    stat.dims[i] = 1;
  for (int o = 0; o < n_outputs; o++) {
    outputs[o].dtype = QH_DTYPE_F32;
    outputs[o].shape = o == 0 ? *x : stat;
    outputs[o].data = NULL;
  }
  return TRUE;
}

static void row_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  for (int64_t r = begin; r < end; r++) {
    const float *x = j->x + r * j->n;
    float *y = j->y + r * j->n;
    float sum = 0.0f;
    for (int64_t i = 0; i < j->n; i++)
      sum += x[i];
    float mean = sum / (float)j->n, sq = 0.0f;
    for (int64_t i = 0; i < j->n; i++) {
      float d = x[i] - mean;
      sq += d * d;
    }
    float inv = 1.0f / sqrtf(sq / (float)j->n + j->eps);
    for (int64_t i = 0; i < j->n; i++)
      y[i] = (x[i] - mean) * inv * j->scale[i] + (j->bias ? j->bias[i] : 0.0f);
    if (j->mean)
      j->mean[r] = mean;
    if (j->inv)
      j->inv[r] = inv;
  }
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                    QhTensor *const *outputs, int n_outputs, GError **error) {
  int axis;
  Job j = {.x = inputs[0]->data, .scale = inputs[1]->data, .y = outputs[0]->data};
  if (!attrs(node, &inputs[0]->shape, &axis, &j.eps, error))
    return FALSE;
  j.n = 1;
  for (int i = axis; i < inputs[0]->shape.rank; i++)
    j.n *= inputs[0]->shape.dims[i];
  j.bias = n_inputs > 2 && inputs[2] ? inputs[2]->data : NULL;
  j.mean = n_outputs > 1 && outputs[1] ? outputs[1]->data : NULL;
  j.inv = n_outputs > 2 && outputs[2] ? outputs[2]->data : NULL;
  int64_t rows = j.n ? qh_tensor_numel(inputs[0]) / j.n : 0;
  qh_thread_pool_parallel_for(ctx->pool, rows, MAX(1, 4096 / MAX(j.n, 1)), row_task, &j);
  return TRUE;
}

const QhOpDef qh_ops_layernorm[] = {
    {"LayerNormalization", 2, 3, 1, 3, infer, run, NULL, NULL},
    {NULL},
};
