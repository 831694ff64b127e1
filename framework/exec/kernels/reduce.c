/* Reference kernels of the reductions ReduceMean, ReduceSum, ReduceMax, ReduceMin,
 * ReduceProd and ReduceL2, and of ArgMax. Axes come from the attribute (opset 13,
 * and ReduceSum's input from opset 13) or from a constant second input (opset 18,
 * with noop_with_empty_axes); keepdims defaults to 1, no axes means all. One walk over
 * the input in memory order folds each element into its output's double accumulator,
 * so any set of axes costs the same and sums carry no float32 order effects. An
 * empty reduction gives the operation's identity (0 for Sum and L2, 1 for Prod, -inf
 * and +inf for Max and Min, as ONNX 18 spells out), NaN for Mean. Float32 reduces in
 * double (over trailing axes: row by row on the pool, the walk's bits); int64 and int32
 * inputs (Sum, Max, Min, Prod: exporters sum and compare masks and lengths) in int64 with
 * wrap-around. ArgMax walks its one axis per output
 * element, first (or with select_last_index, last) maximum wins; a NaN never wins. */
#include <math.h>
#include <string.h>

#include "exec/kernels/common.h"

/* Which axes of a rank-`rank` input are reduced (mask), and whether keepdims. */
static gboolean reduced_axes(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             int rank, gboolean *mask, gboolean *keepdims, GError **error) {
  int64_t keep, noop, n = -1;
  const int64_t *attr = NULL;
  int64_t *owned = NULL;
  if (!qh_node_attr_get_int(node, "keepdims", 1, &keep, error) ||
      !qh_node_attr_get_int(node, "noop_with_empty_axes", 0, &noop, error) ||
      !qh_node_attr_get_ints(node, "axes", &n, &attr, error))
    return FALSE;
  if (n_inputs >= 2 && inputs[1] != NULL) {
    if (attr != NULL)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "axes given both as attribute and as input");
    if (!qh_kernel_const_ints(node, inputs[1], "axes", &owned, &n, error))
      return FALSE;
    attr = owned;
  }
  *keepdims = keep != 0;
  for (int d = 0; d < rank; d++)
    mask[d] = n <= 0 && !noop;
  for (int64_t i = 0; i < MAX(n, 0); i++) {
    int a;
    if (!qh_kernel_axis(node, attr[i], rank, &a, error)) {
      g_free(owned);
      return FALSE;
    }
    if (mask[a]) {
      g_free(owned);
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "axis %d is listed twice", a);
    }
    mask[a] = TRUE;
  }
  g_free(owned);
  return TRUE;
}

typedef enum { RED_MEAN, RED_SUM, RED_MAX, RED_MIN, RED_PROD, RED_L2 } Reduction;

static Reduction reduction_of(const QhNode *node) {
  static const char *const names[] = {"ReduceMean", "ReduceSum", "ReduceMax",
                                      "ReduceMin",  "ReduceProd", "ReduceL2"};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    if (strcmp(node->op_type, names[i]) == 0)
      return (Reduction)i;
  return RED_MEAN;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                      QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  Reduction r = reduction_of(node);
  gboolean ints = r == RED_SUM || r == RED_MAX || r == RED_MIN || r == RED_PROD;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32,
                             ints ? QH_DTYPE_S64 : 0, ints ? QH_DTYPE_S32 : 0, 0))
    return FALSE;
  const QhShape *s = &inputs[0]->shape;
  gboolean mask[QH_MAX_RANK], keep;
  if (!reduced_axes(node, inputs, n_inputs, s->rank, mask, &keep, error))
    return FALSE;
  QhShape out = {.rank = 0};
  for (int d = 0; d < s->rank; d++) {
    if (!mask[d])
      out.dims[out.rank++] = s->dims[d];
    else if (keep)
      out.dims[out.rank++] = 1;
  }
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = out;
  outputs[0].data = NULL;
  return TRUE;
}

/* The reduction's identity, which an empty reduction returns. */
static double identity_f(Reduction r) {
  return r == RED_PROD ? 1.0 : r == RED_MAX ? -INFINITY : r == RED_MIN ? INFINITY : 0.0;
}

static int64_t identity_i(Reduction r) {
  return r == RED_PROD ? 1 : r == RED_MAX ? INT64_MIN : r == RED_MIN ? INT64_MAX : 0;
}

static inline double fold_f(Reduction r, double acc, double v) {
  switch (r) {
  case RED_MAX: return isnan(acc) || v <= acc ? acc : v; /* NaN sticks, as in ONNX Runtime */
  case RED_MIN: return isnan(acc) || v >= acc ? acc : v;
  case RED_PROD: return acc * v;
  case RED_L2: return acc + v * v;
  default: return acc + v;
  }
}

static inline int64_t fold_i(Reduction r, int64_t acc, int64_t v) {
  switch (r) {
  case RED_MAX: return MAX(acc, v);
  case RED_MIN: return MIN(acc, v);
  case RED_PROD: return (int64_t)((uint64_t)acc * (uint64_t)v);
  default: return (int64_t)((uint64_t)acc + (uint64_t)v);
  }
}

/* Output offset of each input element, advanced in input memory order. */
typedef struct {
  int rank;
  int64_t dims[QH_MAX_RANK], ostr[QH_MAX_RANK], idx[QH_MAX_RANK], off;
} OutWalk;

static void out_walk_init(OutWalk *w, const QhShape *s, const gboolean *mask) {
  int64_t st = 1;
  w->rank = s->rank;
  w->off = 0;
  for (int d = s->rank - 1; d >= 0; d--) {
    w->dims[d] = s->dims[d];
    w->idx[d] = 0;
    w->ostr[d] = mask[d] ? 0 : st;
    st *= mask[d] ? 1 : s->dims[d];
  }
}

static inline void out_walk_next(OutWalk *w) {
  for (int d = w->rank - 1; d >= 0; d--) {
    w->off += w->ostr[d];
    if (++w->idx[d] < w->dims[d])
      return;
    w->off -= w->ostr[d] * w->dims[d];
    w->idx[d] = 0;
  }
}

static gboolean run_walk(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                         int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  (void)n_outputs;
  const QhShape *s = &inputs[0]->shape;
  Reduction r = reduction_of(node);
  gboolean mask[QH_MAX_RANK], keep;
  if (!reduced_axes(node, inputs, n_inputs, s->rank, mask, &keep, error))
    return FALSE;
  int64_t n_out = qh_tensor_numel(outputs[0]), n_in = qh_tensor_numel(inputs[0]);
  int64_t count = 1;
  for (int d = 0; d < s->rank; d++)
    if (mask[d])
      count *= s->dims[d];
  OutWalk w;
  out_walk_init(&w, s, mask);
  if (inputs[0]->dtype != QH_DTYPE_F32) {
    int64_t *acc = qh_aligned_alloc0(sizeof(int64_t) * (size_t)MAX(n_out, 1));
    if (acc == NULL)
      return qh_kernel_fail(error, node, QH_ERROR_NOMEM,
                            "out of memory for %" G_GINT64_FORMAT " accumulators", n_out);
    for (int64_t i = 0; i < n_out; i++)
      acc[i] = identity_i(r);
    gboolean wide = inputs[0]->dtype == QH_DTYPE_S64;
    for (int64_t i = 0; i < n_in; i++, out_walk_next(&w)) {
      int64_t v = wide ? ((const int64_t *)inputs[0]->data)[i] : ((const int32_t *)inputs[0]->data)[i];
      acc[w.off] = fold_i(r, acc[w.off], v);
    }
    for (int64_t i = 0; i < n_out; i++) {
      int64_t v = acc[i];
      if (wide) {
        ((int64_t *)outputs[0]->data)[i] = v;
        continue;
      }
      /* int32: Max/Min of an empty set is the type's bound; sums and products wrap */
      if (r == RED_MAX && v == INT64_MIN)
        v = G_MININT32;
      else if (r == RED_MIN && v == INT64_MAX)
        v = G_MAXINT32;
      ((int32_t *)outputs[0]->data)[i] = (int32_t)(uint32_t)(uint64_t)v;
    }
    qh_aligned_free(acc);
    return TRUE;
  }
  float *y = qh_f32(outputs[0]);
  if (count == 0 && r == RED_MEAN) { /* the mean of nothing */
    for (int64_t i = 0; i < n_out; i++)
      y[i] = NAN;
    return TRUE;
  }
  double *acc = qh_aligned_alloc0(sizeof(double) * (size_t)MAX(n_out, 1));
  if (acc == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_NOMEM,
                          "out of memory for %" G_GINT64_FORMAT " accumulators", n_out);
  for (int64_t i = 0; i < n_out; i++)
    acc[i] = identity_f(r);
  const float *x = qh_f32(inputs[0]);
  for (int64_t i = 0; i < n_in; i++, out_walk_next(&w))
    acc[w.off] = fold_f(r, acc[w.off], x[i]);
  for (int64_t i = 0; i < n_out; i++)
    y[i] = (float)(r == RED_MEAN ? acc[i] / (double)count : r == RED_L2 ? sqrt(acc[i]) : acc[i]);
  qh_aligned_free(acc);
  return TRUE;
}

/* The fast path for float32 over trailing axes (LayerNorm's ReduceMean over the hidden
 * size): each output folds one contiguous row, in memory order, into its double
 * accumulator, which is the walk's order for that output, so the results are the walk's
 * bits; rows are split over the pool. Other forms take the walk (run_walk, the twin). */
typedef struct {
  Reduction r;
  const float *x;
  float *y;
  int64_t count;
} RowJob;

static void rows_task(void *arg, int64_t begin, int64_t end) {
  const RowJob *j = arg;
  for (int64_t o = begin; o < end; o++) {
    const float *x = j->x + o * j->count;
    double acc = identity_f(j->r);
    if (j->r == RED_MEAN || j->r == RED_SUM)
      for (int64_t i = 0; i < j->count; i++)
        acc += x[i];
    else
      for (int64_t i = 0; i < j->count; i++)
        acc = fold_f(j->r, acc, x[i]);
    j->y[o] = (float)(j->r == RED_MEAN ? acc / (double)j->count : j->r == RED_L2 ? sqrt(acc) : acc);
  }
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                    QhTensor *const *outputs, int n_outputs, GError **error) {
  const QhShape *s = &inputs[0]->shape;
  gboolean mask[QH_MAX_RANK], keep;
  if (inputs[0]->dtype != QH_DTYPE_F32)
    return run_walk(ctx, node, inputs, n_inputs, outputs, n_outputs, error);
  if (!reduced_axes(node, inputs, n_inputs, s->rank, mask, &keep, error))
    return FALSE;
  int d = s->rank;
  int64_t count = 1;
  while (d > 0 && mask[d - 1])
    count *= s->dims[--d];
  for (int k = 0; k < d; k++)
    if (mask[k])
      return run_walk(ctx, node, inputs, n_inputs, outputs, n_outputs, error);
  if (count == 0 || d == s->rank)
    return run_walk(ctx, node, inputs, n_inputs, outputs, n_outputs, error);
  RowJob j = {reduction_of(node), qh_f32(inputs[0]), qh_f32(outputs[0]), count};
  qh_thread_pool_parallel_for(ctx->pool, qh_tensor_numel(outputs[0]), MAX(1, 4096 / count), rows_task, &j);
  return TRUE;
}

/* ---- ArgMax ---- */

static gboolean argmax_params(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int *axis,
                              gboolean *keep, gboolean *last, GError **error) {
  int64_t a, k, l;
  if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32, 0) ||
      !qh_node_attr_get_int(node, "axis", 0, &a, error) ||
      !qh_node_attr_get_int(node, "keepdims", 1, &k, error) ||
      !qh_node_attr_get_int(node, "select_last_index", 0, &l, error))
    return FALSE;
  if (inputs[0]->shape.rank == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input must have rank >= 1");
  if (!qh_kernel_axis(node, a, inputs[0]->shape.rank, axis, error))
    return FALSE;
  if (inputs[0]->shape.dims[*axis] == 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "axis %d is empty: there is no maximum", *axis);
  *keep = k != 0;
  *last = l != 0;
  return TRUE;
}

static gboolean argmax_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  int axis;
  gboolean keep, last;
  if (!argmax_params(node, inputs, n_inputs, &axis, &keep, &last, error))
    return FALSE;
  const QhShape *s = &inputs[0]->shape;
  QhShape out = {.rank = 0};
  for (int d = 0; d < s->rank; d++)
    if (d != axis || keep)
      out.dims[out.rank++] = d == axis ? 1 : s->dims[d];
  outputs[0].dtype = QH_DTYPE_S64;
  outputs[0].shape = out;
  outputs[0].data = NULL;
  return TRUE;
}

static inline double element_at(const QhTensor *t, int64_t i) {
  switch (t->dtype) {
  case QH_DTYPE_F32: return ((const float *)t->data)[i];
  case QH_DTYPE_S32: return ((const int32_t *)t->data)[i];
  default: return (double)((const int64_t *)t->data)[i];
  }
}

static gboolean argmax_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                           int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  int axis;
  gboolean keep, last;
  if (!argmax_params(node, inputs, n_inputs, &axis, &keep, &last, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  int64_t outer = 1, inner = 1, dim = x->shape.dims[axis];
  for (int d = 0; d < axis; d++)
    outer *= x->shape.dims[d];
  for (int d = axis + 1; d < x->shape.rank; d++)
    inner *= x->shape.dims[d];
  int64_t *y = outputs[0]->data;
  gboolean wide = x->dtype == QH_DTYPE_S64;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * dim * inner + i, best = 0;
      for (int64_t k = 1; k < dim; k++) {
        int64_t a = base + k * inner, b = base + best * inner;
        /* int64 compared as int64: a double would merge values above 2^53 */
        gboolean gt = wide ? ((const int64_t *)x->data)[a] > ((const int64_t *)x->data)[b]
                           : element_at(x, a) > element_at(x, b);
        gboolean eq = wide ? ((const int64_t *)x->data)[a] == ((const int64_t *)x->data)[b]
                           : element_at(x, a) == element_at(x, b);
        if (gt || (last && eq) || (x->dtype == QH_DTYPE_F32 && isnan(element_at(x, b)) &&
                                   !isnan(element_at(x, a))))
          best = k;
      }
      y[o * inner + i] = best;
    }
  return TRUE;
}

const QhOpDef qh_ops_reduce[] = {
    {"ReduceMean", 1, 2, 1, 1, infer, run, run_walk, NULL},
    {"ReduceSum", 1, 2, 1, 1, infer, run, run_walk, NULL},
    {"ReduceMax", 1, 2, 1, 1, infer, run, run_walk, NULL},
    {"ReduceMin", 1, 2, 1, 1, infer, run, run_walk, NULL},
    {"ReduceProd", 1, 2, 1, 1, infer, run, run_walk, NULL},
    {"ReduceL2", 1, 2, 1, 1, infer, run, run_walk, NULL},
    {"ArgMax", 1, 1, 1, 1, argmax_infer, argmax_run, NULL, NULL},
    {NULL},
};
