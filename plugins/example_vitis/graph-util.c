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

/* A float scalar initializer's value; 0 when v is not one. */
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

/* Relu, LeakyRelu and Clip (ReLU6): what the DPU applies in the conv or add engine's
 * output stage, with no requantization in between. Any Clip fuses: where the Q/DQ
 * goes does not change what the QDQ graph computes, and PyTorch exports ReLU6's bounds
 * as Constant nodes, whose tensors ABI 1.0 gives a plugin no way to read. */
int vg_fusable_act(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  return vg_is_op(h, g, n, "Relu") || vg_is_op(h, g, n, "LeakyRelu") || vg_is_op(h, g, n, "Clip");
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

static int64_t attr_at(const QhHostApi *h, const QhGraphView *g, uint32_t n, const char *name, size_t i,
                       int64_t dflt) {
  const int64_t *v = NULL;
  size_t count = 0;
  QhStatus *st = h->node_attr_ints(g, n, name, &v, &count);
  h->status_free(st);
  return !st && i < count ? v[i] : dflt;
}

/* Spatial size of a 4-D NCHW value: its recorded shape, else followed back through
 * the ops that keep or compute it. ONNX exporters rarely record intermediate shapes
 * and the host infers them only after annotation, but the DPU's average-pool factor
 * depends on the window of a GlobalAveragePool. */
static int spatial(const QhHostApi *h, const QhGraphView *g, uint32_t v, int64_t hw[2], int depth) {
  int64_t dims[QH_MAX_RANK];
  int32_t rank = -1;
  QhStatus *st = h->value_shape(g, v, dims, QH_MAX_RANK, &rank);
  h->status_free(st);
  if (!st && rank == 4 && dims[2] > 0 && dims[3] > 0) {
    hw[0] = dims[2];
    hw[1] = dims[3];
    return 1;
  }
  uint32_t p = v == QH_INVALID_ID ? QH_INVALID_ID : h->value_producer(g, v);
  if (p == QH_INVALID_ID || depth > 4096)
    return 0;
  static const char *const keep[] = {"Relu", "Clip", "LeakyRelu", "HardSigmoid", "Sigmoid", "HardSwish",
                                     "Add", "Mul", "Sub", "Div", "BatchNormalization", "Concat",
                                     "Identity", "Dropout"};
  for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
    if (vg_is_op(h, g, p, keep[i])) {
      for (uint32_t s = 0; s < h->node_input_count(g, p); s++)
        if (!vg_is_const(h, g, h->node_input(g, p, s)))
          return spatial(h, g, h->node_input(g, p, s), hw, depth + 1);
      return 0;
    }
  if (vg_is_op(h, g, p, "GlobalAveragePool") || vg_is_op(h, g, p, "GlobalMaxPool")) {
    hw[0] = hw[1] = 1;
    return 1;
  }
  int conv = vg_is_op(h, g, p, "Conv"), pool = vg_is_op(h, g, p, "MaxPool") || vg_is_op(h, g, p, "AveragePool");
  const char *pad_mode = NULL;
  h->status_free(h->node_attr_string(g, p, "auto_pad", &pad_mode));
  if ((!conv && !pool) || (pad_mode && strcmp(pad_mode, "NOTSET") != 0))
    return 0;
  int64_t in[2], k[2];
  if (!spatial(h, g, h->node_input(g, p, 0), in, depth + 1))
    return 0;
  for (int d = 0; d < 2; d++) {
    k[d] = attr_at(h, g, p, "kernel_shape", (size_t)d, 0);
    if (!k[d] && conv) { /* a Conv may leave kernel_shape to its weight */
      int64_t w[QH_MAX_RANK];
      st = h->value_shape(g, h->node_input(g, p, 1), w, QH_MAX_RANK, &rank);
      h->status_free(st);
      k[d] = !st && rank == 4 ? w[2 + d] : 0;
    }
    int64_t s = attr_at(h, g, p, "strides", (size_t)d, 1), dil = attr_at(h, g, p, "dilations", (size_t)d, 1);
    int64_t span = in[d] + attr_at(h, g, p, "pads", (size_t)d, 0) + attr_at(h, g, p, "pads", (size_t)d + 2, 0) -
                   ((k[d] - 1) * dil + 1);
    if (k[d] <= 0 || s <= 0 || span < 0)
      return 0;
    int ceil_mode = pool && attr_at(h, g, p, "ceil_mode", 0, 0) != 0;
    hw[d] = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  }
  return 1;
}

int vg_pool_window(const QhHostApi *h, const QhGraphView *g, uint32_t n, int64_t *kh, int64_t *kw) {
  if (vg_is_op(h, g, n, "GlobalAveragePool")) {
    int64_t hw[2];
    if (!spatial(h, g, h->node_input(g, n, 0), hw, 0))
      return 0;
    *kh = hw[0];
    *kw = hw[1];
    return 1;
  }
  *kh = attr_at(h, g, n, "kernel_shape", 0, 0);
  *kw = attr_at(h, g, n, "kernel_shape", 1, 0);
  return *kh > 0 && *kw > 0 && attr_at(h, g, n, "kernel_shape", 2, 0) == 0;
}

int vg_avgpool_ready(const QhHostApi *h, const QhGraphView *g, uint32_t n) {
  int64_t kh, kw;
  if (!vg_pool_window(h, g, n, &kh, &kw))
    return 0;
  return vitis_avgpool_factor(kh, kw) == 1.0 || vg_pool_factor(h, g, n, vg_sole_user(h, g, n));
}
