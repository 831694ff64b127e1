/* Whether the host's reference computes a QDQ graph exactly: then the value its output
 * QuantizeLinear reads is the real result, and a plugin's own fake_quantize of it is
 * what the plugin's kernel must give bit for bit (check-lowering.c holds kernels to
 * their reference_numerics there). That is so when every Q/DQ scale is a power of two
 * and every op only adds, multiplies or moves values of those grids without leaving
 * float32's 24-bit significand: a sum of K int8 x int8 products (at most 2^15 each)
 * plus the bias stays exact in any order while its range over its finest grid is below
 * 2^24; an average divides by a power of two; LeakyRelu's slope has few bits. Ops that
 * round (Sigmoid, Softmax, a 3x3 average) make the graph inexact, and the kernels are
 * then held to the tie rule only. Conservative: FALSE whenever it cannot tell. */
#include <math.h>
#include <string.h>

#include "conformance/check-private.h"

#define SIGNIFICAND 16777216.0 /* 2^24 */

static gboolean is_op(const QhNode *n, const char *op) { return strcmp(n->op_type, op) == 0; }

static gboolean power_of_two(double x) {
  int e;
  return x > 0 && isfinite(x) && frexp(x, &e) == 0.5;
}

static double element(const QhTensor *t, int64_t i) {
  switch (t->dtype) {
  case QH_DTYPE_S8: return ((const int8_t *)t->data)[i];
  case QH_DTYPE_U8: return ((const uint8_t *)t->data)[i];
  case QH_DTYPE_S32: return ((const int32_t *)t->data)[i];
  case QH_DTYPE_F32: return ((const float *)t->data)[i];
  default: return NAN;
  }
}

static const QhTensor *constant_of(const QhGraph *g, int value) {
  return value >= 0 ? qh_graph_value(g, value)->initializer : NULL;
}

/* The grid of value v: the scales of the DequantizeLinear writing it (smallest and
 * largest) and the largest magnitude of its integers (the dtype's bound for an
 * activation, the data's for a constant). FALSE when v is not a DequantizeLinear's
 * output with power-of-two scales. */
typedef struct {
  double min_scale, max_scale, max_int;
} Grid;

static gboolean grid_of(const QhGraph *g, int v, Grid *out) {
  const QhValue *val = v >= 0 ? qh_graph_value(g, v) : NULL;
  const QhNode *dq = val && val->producer >= 0 ? qh_graph_node(g, val->producer) : NULL;
  if (dq == NULL || !is_op(dq, "DequantizeLinear"))
    return FALSE;
  const QhTensor *scale = constant_of(g, qh_node_input(dq, 1));
  if (scale == NULL || scale->dtype != QH_DTYPE_F32 || qh_tensor_numel(scale) < 1)
    return FALSE;
  *out = (Grid){INFINITY, 0, 0};
  for (int64_t i = 0; i < qh_tensor_numel(scale); i++) {
    double s = element(scale, i);
    if (!power_of_two(s))
      return FALSE;
    out->min_scale = fmin(out->min_scale, s);
    out->max_scale = fmax(out->max_scale, s);
  }
  const QhTensor *q = constant_of(g, qh_node_input(dq, 0));
  if (q) {
    for (int64_t i = 0; i < qh_tensor_numel(q); i++)
      out->max_int = fmax(out->max_int, fabs(element(q, i)));
  } else {
    out->max_int = 256; /* an 8-bit activation, zero point included */
  }
  return isfinite(out->max_int);
}

/* A Conv, Gemm or MatMul: K products of its two operands' grids plus the bias. */
static gboolean exact_product_sum(const QhGraph *g, const QhNode *n) {
  Grid x, w, b;
  if (!grid_of(g, qh_node_input(n, 0), &x) || !grid_of(g, qh_node_input(n, 1), &w))
    return FALSE;
  const QhValue *wv = qh_graph_value(g, qh_node_input(n, 1));
  const QhValue *xv = qh_graph_value(g, qh_node_input(n, 0));
  int64_t k;
  if (is_op(n, "Conv")) {
    if (wv->shape.rank != 4)
      return FALSE;
    k = wv->shape.dims[1] * wv->shape.dims[2] * wv->shape.dims[3];
  } else {
    int64_t trans_a = 0;
    if (!qh_node_attr_get_int(n, "transA", 0, &trans_a, NULL) || trans_a || xv->shape.rank < 1)
      return FALSE;
    k = xv->shape.dims[xv->shape.rank - 1];
  }
  double fine = x.min_scale * w.min_scale;
  double range = (double)k * x.max_int * w.max_int * x.max_scale * w.max_scale;
  if (qh_node_input(n, 2) >= 0) {
    if (!grid_of(g, qh_node_input(n, 2), &b))
      return FALSE;
    fine = fmin(fine, b.min_scale);
    range += b.max_int * b.max_scale;
  }
  return k > 0 && range / fine < SIGNIFICAND;
}

/* An Add, Sub or Mul of two operands on power-of-two grids. */
static gboolean exact_elementwise(const QhGraph *g, const QhNode *n) {
  Grid a, b;
  if (n->n_inputs != 2 || !grid_of(g, qh_node_input(n, 0), &a) || !grid_of(g, qh_node_input(n, 1), &b))
    return FALSE;
  if (is_op(n, "Mul"))
    return a.max_int * b.max_int < SIGNIFICAND;
  double fine = fmin(a.min_scale, b.min_scale);
  return (a.max_int * a.max_scale + b.max_int * b.max_scale) / fine < SIGNIFICAND;
}

/* An average over a window (or the whole H x W) of area a power of two, no padding. */
static gboolean exact_average(const QhGraph *g, const QhNode *n) {
  const QhValue *x = qh_graph_value(g, qh_node_input(n, 0));
  if (x->shape.rank != 4)
    return FALSE;
  if (!is_op(n, "AveragePool"))
    return power_of_two((double)(x->shape.dims[2] * x->shape.dims[3]));
  int64_t nk = 0, np = 0;
  const int64_t *k = NULL, *p = NULL;
  if (!qh_node_attr_get_ints(n, "kernel_shape", &nk, &k, NULL) || nk != 2 ||
      !qh_node_attr_get_ints(n, "pads", &np, &p, NULL))
    return FALSE;
  for (int64_t i = 0; i < np; i++)
    if (p[i] != 0)
      return FALSE;
  return power_of_two((double)(k[0] * k[1]));
}

static gboolean exact_node(const QhGraph *g, const QhNode *n) {
  static const char *const moves[] = {"Relu", "MaxPool", "Concat", "Flatten", "Reshape", "Transpose",
                                      "Slice", "Clip", "Squeeze", "Unsqueeze"};
  if (*n->domain && strcmp(n->domain, "ai.onnx") != 0)
    return FALSE;
  for (size_t i = 0; i < G_N_ELEMENTS(moves); i++)
    if (is_op(n, moves[i]))
      return TRUE;
  if (is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear")) {
    const QhTensor *scale = constant_of(g, qh_node_input(n, 1));
    for (int64_t i = 0; scale && scale->dtype == QH_DTYPE_F32 && i < qh_tensor_numel(scale); i++)
      if (!power_of_two(element(scale, i)))
        return FALSE;
    return scale != NULL && scale->dtype == QH_DTYPE_F32;
  }
  if (is_op(n, "Conv") || is_op(n, "Gemm") || is_op(n, "MatMul"))
    return exact_product_sum(g, n);
  if (is_op(n, "Add") || is_op(n, "Sub") || is_op(n, "Mul"))
    return exact_elementwise(g, n);
  if (is_op(n, "AveragePool") || is_op(n, "GlobalAveragePool"))
    return exact_average(g, n);
  if (is_op(n, "LeakyRelu")) {
    float alpha = 0.01f;
    /* slope * an 8-bit integer keeps at most 8 + 16 significant bits */
    return qh_node_attr_get_float(n, "alpha", 0.01f, &alpha, NULL) &&
           ldexp(nearbyint(ldexp(alpha, 16)), -16) == (double)alpha;
  }
  return FALSE;
}

gboolean qh_check_graph_is_exact(const QhGraph *g) {
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *n = qh_graph_node(g, i);
    if (n && !n->is_removed && !exact_node(g, n))
      return FALSE;
  }
  return TRUE;
}
