/* Reference kernel of InstanceNormalization (opset 6-21 semantics): for each sample n
 * and channel c of an N x C x D1 x ... input, y = scale[c] * (x - mean) / sqrt(var +
 * epsilon) + B[c], mean and (biased) variance over the spatial elements of that (n, c)
 * plane. Style-transfer and some norm-swapped vision exports write it; PyTorch's
 * GroupNorm export also goes through it. Statistics are accumulated in double, one
 * plane per task; the loop is its own reference. */
#include <math.h>

#include "exec/kernels/common.h"

static gboolean check(const QhNode *node, const QhTensor *const *inputs, int n_inputs, float *eps,
                      GError **error) {
  for (int i = 0; i < 3; i++)
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_F32, 0))
      return FALSE;
  if (!qh_node_attr_get_float(node, "epsilon", 1e-5f, eps, error))
    return FALSE;
  const QhShape *x = &inputs[0]->shape;
  if (x->rank < 3)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input must be N x C x D1 ..., not rank %d",
                          x->rank);
  for (int i = 1; i < 3; i++)
    if (inputs[i]->shape.rank != 1 || inputs[i]->shape.dims[0] != x->dims[1])
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "%s must be 1-D with the %" G_GINT64_FORMAT " channels", i == 1 ? "scale" : "B",
                            x->dims[1]);
  return TRUE;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                      int n_outputs, GError **error) {
  (void)n_outputs;
  float eps;
  if (!check(node, inputs, n_inputs, &eps, error))
    return FALSE;
  outputs[0].dtype = QH_DTYPE_F32;
  outputs[0].shape = inputs[0]->shape;
  outputs[0].data = NULL;
  return TRUE;
}

typedef struct {
  const float *x, *scale, *bias;
  float *y;
  int64_t channels, plane;
  float eps;
} Job;

static void plane_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  for (int64_t p = begin; p < end; p++) {
    const float *x = j->x + p * j->plane;
    float *y = j->y + p * j->plane;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < j->plane; i++)
      sum += x[i];
    double mean = j->plane > 0 ? sum / (double)j->plane : 0;
    for (int64_t i = 0; i < j->plane; i++)
      sq += (x[i] - mean) * (x[i] - mean);
    double var = j->plane > 0 ? sq / (double)j->plane : 0;
    int64_t c = p % j->channels;
    double k = j->scale[c] / sqrt(var + j->eps);
    for (int64_t i = 0; i < j->plane; i++)
      y[i] = (float)((x[i] - mean) * k + j->bias[c]);
  }
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                    QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  Job j;
  if (!check(node, inputs, n_inputs, &j.eps, error))
    return FALSE;
  const QhShape *s = &inputs[0]->shape;
  j.x = qh_f32(inputs[0]), j.scale = qh_f32(inputs[1]), j.bias = qh_f32(inputs[2]), j.y = qh_f32(outputs[0]);
  j.channels = s->dims[1];
  j.plane = 1;
  for (int d = 2; d < s->rank; d++)
    j.plane *= s->dims[d];
  if (j.channels == 0 || s->dims[0] == 0)
    return TRUE;
  qh_thread_pool_parallel_for(ctx->pool, s->dims[0] * j.channels, 1, plane_task, &j);
  return TRUE;
}

const QhOpDef qh_ops_instancenorm[] = {
    {"InstanceNormalization", 3, 3, 1, 1, infer, run, NULL, NULL},
    {NULL},
};
