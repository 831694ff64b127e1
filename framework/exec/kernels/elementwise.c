/* Reference kernels of the binary arithmetic ops Add, Sub, Mul and Div with ONNX's
 * multidirectional broadcasting, for float32 and for the int64/int32 shape
 * arithmetic exporters emit. Every path reduces to one strided inner loop per
 * (op, dtype) whose operand strides are 0 (broadcast) or 1; run picks the cheapest
 * way to cover the output (one contiguous run, per-row blocks for trailing-dimension
 * broadcasts, or rows of the general walk), run_naive walks every output index. Where the
 * plan keeps the 4-D output channels-last (exec/layout.c: then every operand has the
 * output's shape, in NHWC too, or one spatial position), run works on the physical
 * [N, H, W, C] shapes, so a per-channel operand becomes a row along the last dim. */
#include <string.h>

#include "exec/kernels/common.h"

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV } BinOp;

/* c[i] = a[i*sa] op b[i*sb] for i < n, with sa and sb each 0 or 1. */
typedef void (*InnerFn)(const void *a, int sa, const void *b, int sb, void *c, int64_t n);

/* Integer arithmetic wraps like the hardware (and NumPy) instead of being undefined:
 * the operation is done on the unsigned type and converted back. */
#define WRAP_OPS(T, U, NAME)                                                            \
  static inline T NAME##_add(T a, T b) { return (T)((U)a + (U)b); }                     \
  static inline T NAME##_sub(T a, T b) { return (T)((U)a - (U)b); }                     \
  static inline T NAME##_mul(T a, T b) { return (T)((U)a * (U)b); }                     \
  /* Truncates toward zero like ONNX; MIN / -1 wraps; zero divisors are rejected      \
   * before any loop runs. */                                                          \
  static inline T NAME##_div(T a, T b) { return b == -1 ? (T)(0 - (U)a) : (T)(a / b); }

WRAP_OPS(int64_t, uint64_t, s64)
WRAP_OPS(int32_t, uint32_t, s32)

static inline float f32_add(float a, float b) { return a + b; }
static inline float f32_sub(float a, float b) { return a - b; }
static inline float f32_mul(float a, float b) { return a * b; }
static inline float f32_div(float a, float b) { return a / b; }

/* The branches on the strides keep each loop simple enough to vectorise. */
#define DEFINE_INNER(T, NAME, OP)                                                       \
  static void inner_##NAME##_##OP(const void *a_, int sa, const void *b_, int sb, void *c_, \
                                  int64_t n) {                                         \
    const T *a = a_, *b = b_;                                                          \
    T *c = c_;                                                                         \
    if (sa && sb) {                                                                    \
      for (int64_t i = 0; i < n; i++)                                                  \
        c[i] = NAME##_##OP(a[i], b[i]);                                                \
    } else if (sa) {                                                                   \
      const T bv = b[0];                                                               \
      for (int64_t i = 0; i < n; i++)                                                  \
        c[i] = NAME##_##OP(a[i], bv);                                                  \
    } else if (sb) {                                                                   \
      const T av = a[0];                                                               \
      for (int64_t i = 0; i < n; i++)                                                  \
        c[i] = NAME##_##OP(av, b[i]);                                                  \
    } else {                                                                           \
      const T v = NAME##_##OP(a[0], b[0]);                                             \
      for (int64_t i = 0; i < n; i++)                                                  \
        c[i] = v;                                                                      \
    }                                                                                  \
  }

#define DEFINE_INNER_ALL(T, NAME) \
  DEFINE_INNER(T, NAME, add)      \
  DEFINE_INNER(T, NAME, sub)      \
  DEFINE_INNER(T, NAME, mul)      \
  DEFINE_INNER(T, NAME, div)

DEFINE_INNER_ALL(float, f32)
DEFINE_INNER_ALL(int64_t, s64)
DEFINE_INNER_ALL(int32_t, s32)

static InnerFn inner_fn(BinOp op, QhDType dt) {
  static const InnerFn f32[] = {inner_f32_add, inner_f32_sub, inner_f32_mul, inner_f32_div};
  static const InnerFn s64[] = {inner_s64_add, inner_s64_sub, inner_s64_mul, inner_s64_div};
  static const InnerFn s32[] = {inner_s32_add, inner_s32_sub, inner_s32_mul, inner_s32_div};
  return dt == QH_DTYPE_F32 ? f32[op] : dt == QH_DTYPE_S64 ? s64[op] : s32[op];
}

static BinOp node_op(const QhNode *node) {
  if (strcmp(node->op_type, "Add") == 0)
    return OP_ADD;
  if (strcmp(node->op_type, "Sub") == 0)
    return OP_SUB;
  if (strcmp(node->op_type, "Mul") == 0)
    return OP_MUL;
  return OP_DIV;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                      QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  for (int i = 0; i < 2; i++)
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_F32, QH_DTYPE_S64,
                               QH_DTYPE_S32, 0))
      return FALSE;
  if (inputs[0]->dtype != inputs[1]->dtype)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "input types differ (%s and %s); both must be the same",
                          qh_dtype_name(inputs[0]->dtype), qh_dtype_name(inputs[1]->dtype));
  QhShape out;
  if (!qh_kernel_broadcast(node, &inputs[0]->shape, &inputs[1]->shape, &out, error))
    return FALSE;
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = out;
  outputs[0].data = NULL;
  return TRUE;
}

/* One operand's dims right-aligned to the output rank (missing leading dims are 1). */
static void align_dims(const QhShape *s, int rank, int64_t *dims) {
  for (int i = 0; i < rank; i++) {
    int j = i - (rank - s->rank);
    dims[i] = j >= 0 ? s->dims[j] : 1;
  }
}

/* Element strides of an operand as seen from the output: 0 along broadcast dims. */
static void broadcast_strides(const QhShape *s, const QhShape *out, int64_t *strides) {
  int64_t dims[QH_MAX_RANK];
  align_dims(s, out->rank, dims);
  int64_t st = 1;
  for (int i = out->rank - 1; i >= 0; i--) {
    strides[i] = (dims[i] == 1 && out->dims[i] != 1) ? 0 : st;
    st *= dims[i];
  }
}

static gboolean check_divisors(const QhNode *node, BinOp op, const QhTensor *b, GError **error) {
  if (op != OP_DIV || b->dtype == QH_DTYPE_F32)
    return TRUE;
  int64_t n = qh_tensor_numel(b);
  for (int64_t i = 0; i < n; i++) {
    gboolean zero = b->dtype == QH_DTYPE_S64 ? ((const int64_t *)b->data)[i] == 0
                                             : ((const int32_t *)b->data)[i] == 0;
    if (zero)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "integer division by zero (divisor element %" G_GINT64_FORMAT ")", i);
  }
  return TRUE;
}

/* How run covers the output: see plan_layout. */
typedef enum { LAYOUT_FLAT, LAYOUT_ROW, LAYOUT_GENERAL } Layout;

typedef struct {
  InnerFn fn;
  size_t esize;
  const char *a, *b;
  char *c;
  Layout layout;
  int sa, sb;          /* FLAT: operand strides (0 = one element) */
  gboolean row_is_b;   /* ROW: which operand is the broadcast row */
  int64_t mid, inner;  /* ROW: the row's length and how often each element repeats */
  int rank;            /* GENERAL */
  int64_t dims[QH_MAX_RANK], str_a[QH_MAX_RANK], str_b[QH_MAX_RANK];
} Job;

/* Elements per task below which splitting costs more than it saves. */
#define PAR_GRAIN 16384

static void flat_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  int64_t s = (int64_t)j->esize;
  j->fn(j->a + begin * j->sa * s, j->sa, j->b + begin * j->sb * s, j->sb, j->c + begin * s,
        end - begin);
}

/* ROW with inner == 1: each task item is one output row of mid elements. */
static void row_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  int64_t s = (int64_t)j->esize, m = j->mid;
  for (int64_t r = begin; r < end; r++) {
    const char *full = (j->row_is_b ? j->a : j->b) + r * m * s;
    const char *a = j->row_is_b ? full : j->a, *b = j->row_is_b ? j->b : full;
    j->fn(a, 1, b, 1, j->c + r * m * s, m);
  }
}

/* ROW with inner > 1: each task item is a block of inner elements sharing one row element. */
static void block_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  int64_t s = (int64_t)j->esize, in = j->inner;
  for (int64_t k = begin; k < end; k++) {
    const char *full = (j->row_is_b ? j->a : j->b) + k * in * s;
    const char *one = (j->row_is_b ? j->b : j->a) + (k % j->mid) * s;
    if (j->row_is_b)
      j->fn(full, 1, one, 0, j->c + k * in * s, in);
    else
      j->fn(one, 0, full, 1, j->c + k * in * s, in);
  }
}

/* GENERAL: each task item is one run along the last output dimension. */
static void general_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  int64_t s = (int64_t)j->esize, last = j->dims[j->rank - 1];
  for (int64_t r = begin; r < end; r++) {
    int64_t rem = r, oa = 0, ob = 0;
    for (int d = j->rank - 2; d >= 0; d--) {
      int64_t idx = rem % j->dims[d];
      rem /= j->dims[d];
      oa += idx * j->str_a[d];
      ob += idx * j->str_b[d];
    }
    j->fn(j->a + oa * s, (int)j->str_a[j->rank - 1], j->b + ob * s, (int)j->str_b[j->rank - 1],
          j->c + r * last * s, last);
  }
}

/* TRUE when the operand's aligned dims equal the output's on one contiguous range
 * [p, q) and are 1 elsewhere; gives the output extents before, on and after it. */
static gboolean is_row(const int64_t *dims, const QhShape *out, int64_t *outer, int64_t *mid,
                       int64_t *inner) {
  int p = 0, q = out->rank;
  while (p < q && dims[p] == 1)
    p++;
  while (q > p && dims[q - 1] == 1)
    q--;
  int64_t o = 1, m = 1, in = 1;
  for (int i = 0; i < out->rank; i++) {
    if (i < p)
      o *= out->dims[i];
    else if (i < q) {
      if (dims[i] != out->dims[i])
        return FALSE;
      m *= dims[i];
    } else
      in *= out->dims[i];
  }
  *outer = o;
  *mid = m;
  *inner = in;
  return TRUE;
}

static void plan_layout(Job *j, const QhTensor *a, const QhTensor *b, const QhShape *out,
                        int64_t n) {
  int64_t na = qh_tensor_numel(a), nb = qh_tensor_numel(b);
  j->layout = LAYOUT_FLAT;
  if (na == n && nb == n) {
    /* With equal counts broadcasting can only have added leading 1s: same layout. */
    j->sa = j->sb = 1;
    return;
  }
  if (na == 1 || nb == 1) {
    if ((na == 1 ? nb : na) == n) {
      j->sa = na != 1;
      j->sb = nb != 1;
      return;
    }
  }
  int64_t da[QH_MAX_RANK], db[QH_MAX_RANK], outer, mid, inner;
  align_dims(&a->shape, out->rank, da);
  align_dims(&b->shape, out->rank, db);
  if ((na == n && is_row(db, out, &outer, &mid, &inner)) ||
      (nb == n && is_row(da, out, &outer, &mid, &inner))) {
    j->layout = LAYOUT_ROW;
    j->row_is_b = na == n;
    j->mid = mid;
    j->inner = inner;
    return;
  }
  j->layout = LAYOUT_GENERAL;
  j->rank = out->rank;
  memcpy(j->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
  broadcast_strides(&a->shape, out, j->str_a);
  broadcast_strides(&b->shape, out, j->str_b);
}

/* t's dims right-aligned to rank 4 and permuted from NCHW to NHWC order (the same bytes
 * for an operand that is channels-last or has one spatial position). */
static QhTensor channels_last_view(const QhTensor *t) {
  QhTensor v = *t;
  int64_t d[4];
  align_dims(&t->shape, 4, d);
  v.shape.rank = 4;
  v.shape.dims[0] = d[0];
  v.shape.dims[1] = d[2];
  v.shape.dims[2] = d[3];
  v.shape.dims[3] = d[1];
  return v;
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                    int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_inputs;
  (void)n_outputs;
  const QhTensor *a = inputs[0], *b = inputs[1];
  QhTensor *c = outputs[0];
  QhTensor views[3];
  if ((ctx->nhwc_inputs | ctx->nhwc_outputs) != 0 && c->shape.rank == 4 && a->shape.rank <= 4 &&
      b->shape.rank <= 4) {
    views[0] = channels_last_view(a);
    views[1] = channels_last_view(b);
    views[2] = channels_last_view(c);
    a = &views[0], b = &views[1], c = &views[2];
  }
  BinOp op = node_op(node);
  if (!check_divisors(node, op, b, error))
    return FALSE;
  int64_t n = qh_tensor_numel(c);
  if (n == 0)
    return TRUE;
  Job j = {.fn = inner_fn(op, a->dtype), .esize = qh_dtype_size(a->dtype),
           .a = a->data, .b = b->data, .c = c->data};
  plan_layout(&j, a, b, &c->shape, n);
  switch (j.layout) {
  case LAYOUT_FLAT:
    qh_thread_pool_parallel_for(ctx->pool, n, PAR_GRAIN, flat_task, &j);
    break;
  case LAYOUT_ROW:
    if (j.inner == 1)
      qh_thread_pool_parallel_for(ctx->pool, n / j.mid, MAX(1, PAR_GRAIN / j.mid), row_task, &j);
    else
      qh_thread_pool_parallel_for(ctx->pool, n / j.inner, MAX(1, PAR_GRAIN / j.inner),
                                  block_task, &j);
    break;
  case LAYOUT_GENERAL: {
    int64_t last = j.dims[j.rank - 1];
    qh_thread_pool_parallel_for(ctx->pool, n / last, MAX(1, PAR_GRAIN / last), general_task, &j);
    break;
  }
  }
  return TRUE;
}

/* The obviously-correct twin: every output index decomposed and mapped back to each
 * operand through its right-aligned dims, one element at a time. */
static gboolean run_naive(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                          int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx;
  (void)n_inputs;
  (void)n_outputs;
  const QhTensor *a = inputs[0], *b = inputs[1];
  QhTensor *c = outputs[0];
  BinOp op = node_op(node);
  if (!check_divisors(node, op, b, error))
    return FALSE;
  const QhShape *out = &c->shape;
  int rank = out->rank;
  int64_t da[QH_MAX_RANK], db[QH_MAX_RANK];
  align_dims(&a->shape, rank, da);
  align_dims(&b->shape, rank, db);
  InnerFn fn = inner_fn(op, a->dtype);
  size_t s = qh_dtype_size(a->dtype);
  int64_t n = qh_tensor_numel(c);
  for (int64_t i = 0; i < n; i++) {
    int64_t rem = i, ia = 0, ib = 0, sa = 1, sb = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t idx = rem % out->dims[d];
      rem /= out->dims[d];
      ia += (da[d] == 1 ? 0 : idx) * sa;
      ib += (db[d] == 1 ? 0 : idx) * sb;
      sa *= da[d];
      sb *= db[d];
    }
    fn((const char *)a->data + ia * (int64_t)s, 1, (const char *)b->data + ib * (int64_t)s, 1,
       (char *)c->data + i * (int64_t)s, 1);
  }
  return TRUE;
}

const QhOpDef qh_ops_elementwise[] = {
    {"Add", 2, 2, 1, 1, infer, run, run_naive, NULL},
    {"Sub", 2, 2, 1, 1, infer, run, run_naive, NULL},
    {"Mul", 2, 2, 1, 1, infer, run, run_naive, NULL},
    {"Div", 2, 2, 1, 1, infer, run, run_naive, NULL},
    {NULL},
};
