/* Small graph queries the annotator and the constraints share: op tests, the sole
 * consumer of a node, constants, and which DPU units fuse (conv + activation, pool +
 * the DPU factor), so that both read the QDQ structure the same way. */
#include <string.h>

#include "vitis.h"
#include "vitis-graph.h"

int vg_is_op(const QhHostApi *h, const QhGraphView *g, uint32_t n, const char *op) {
  if (n == QH_INVALID_ID || !h->node_is_live(g, n))
    return 0;
  const char *t = h->node_op_type(g, n), *d = h->node_domain(g, n);
  return t && strcmp(t, op) == 0 && (!d || !d[0] || strcmp(d, "ai.onnx") == 0);
}

int vg_is_const(const QhHostApi *h, const QhGraphView *g, uint32_t v) {
  return v != QH_INVALID_ID && (h->value_flags(g, v) & QH_VALUE_CONSTANT);
}

int vg_rank(const QhHostApi *h, const QhGraphView *g, uint32_t v) {
  int64_t dims[QH_MAX_RANK];
  int32_t rank = -1;
  QhStatus *st = h->value_shape(g, v, dims, QH_MAX_RANK, &rank);
  h->status_free(st);
  return st ? -1 : rank;
}

uint32_t vg_sole_user(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  uint32_t v = h->node_output(g, n, 0), user = QH_INVALID_ID, slot;
  if (v == QH_INVALID_ID || h->value_consumer_count(g, v) != 1 ||
      (h->value_flags(g, v) & QH_VALUE_GRAPH_OUTPUT))
    return QH_INVALID_ID;
  QhStatus *st = h->value_consumer(g, v, 0, &user, &slot);
  h->status_free(st);
  return st ? QH_INVALID_ID : user;
}

/* A float scalar constant's value; 0 when v is not one. */
static int scalar_const(const QhHostApi *h, const QhGraphView *g, uint32_t v, float *out) {
  const void *data;
  size_t nbytes;
  if (!vg_is_const(h, g, v) || h->value_dtype(g, v) != QH_DTYPE_FLOAT)
    return 0;
  QhStatus *st = h->value_data(g, v, &data, &nbytes);
  h->status_free(st);
  if (st || nbytes != sizeof(float))
    return 0;
  memcpy(out, data, sizeof *out);
  return 1;
}

int vg_weighted(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  int conv = vg_is_op(h, g, n, "Conv"), gemm = vg_is_op(h, g, n, "Gemm"), mm = vg_is_op(h, g, n, "MatMul");
  if ((!conv && !gemm && !mm) || h->node_input_count(g, n) < 2)
    return 0;
  uint32_t w = h->node_input(g, n, 1);
  int r = vg_is_const(h, g, w) ? vg_rank(h, g, w) : -1;
  if (conv)
    return r == 3 || r == 4;
  int64_t ta = 0;
  if (gemm)
    h->status_free(h->node_attr_int(g, n, "transA", &ta));
  return r == 2 && ta == 0;
}

/* Relu, LeakyRelu and Clip(0, hi) (ReLU6): what the DPU applies in the conv or add
 * engine's output stage, with no requantization in between. */
int vg_fusable_act(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  if (vg_is_op(h, g, n, "Relu") || vg_is_op(h, g, n, "LeakyRelu"))
    return 1;
  if (!vg_is_op(h, g, n, "Clip"))
    return 0;
  float lo;
  uint32_t min_v = h->node_input_count(g, n) > 1 ? h->node_input(g, n, 1) : QH_INVALID_ID;
  return min_v != QH_INVALID_ID && scalar_const(h, g, min_v, &lo) && lo == 0.0f;
}

/* The Mul by a scalar constant that transform.c puts after an average pool. */
int vg_pool_factor(const QhHostApi *h, const QhGraphView *g, uint32_t pool, uint32_t mul) {
  float f;
  if (!vg_is_op(h, g, mul, "Mul") || h->node_input_count(g, mul) != 2)
    return 0;
  return h->node_input(g, mul, 0) == h->node_output(g, pool, 0) && scalar_const(h, g, h->node_input(g, mul, 1), &f);
}

int vg_is_avgpool(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  return vg_is_op(h, g, n, "AveragePool") || vg_is_op(h, g, n, "GlobalAveragePool");
}

uint32_t vg_unit_last(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  uint32_t u = vg_sole_user(h, g, n);
  if (u == QH_INVALID_ID)
    return n;
  if ((vg_weighted(h, g, n) || vg_is_op(h, g, n, "Add")) && vg_fusable_act(h, g, u))
    return u;
  if (vg_is_avgpool(h, g, n) && vg_pool_factor(h, g, n, u))
    return u;
  return n;
}
