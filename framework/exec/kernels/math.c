/* Reference kernels of the elementwise math, comparison and selection ops that
 * transformer and recurrent exports use around their matrix products: the unary
 * Sqrt, Erf, Exp, Neg, Log, Reciprocal (float32), Abs (float32, int64, int32) and Not
 * (bool); the broadcasting Pow, Mod, Equal, Less, Greater, And and Where; the
 * variadic Min and Max (folded one input at a time into the output); and Expand.
 * LayerNorm exported at opsets below 17 is ReduceMean/Sub/Pow/Sqrt/Div, GELU is Erf,
 * attention masks are Equal/Where/Expand.
 * Every op here is a plain loop over the output, one ONNX formula per element;
 * operands of the output's shape are read directly, broadcast ones through
 * per-dimension strides. One fast path: Pow of a dense float base by one scalar
 * exponent (LayerNorm's x^2, on every row of every layer) skips the per-element
 * broadcast walk and squares by one multiplication, as ONNX Runtime does; its twin
 * (run_naive) is the walk with powf. The other: Erf (GELU's) runs erf-simd.c's vector
 * polynomial, within 1 ulp of glibc's erff, which run_naive calls. */
#include <math.h>
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/kernels/erf-simd.h"

#define MAX_OPERANDS 3
#define PAR_GRAIN 16384

/* ---- broadcasting walk -------------------------------------------------------- */

/* How each operand is read for an output element: its own element strides along the
 * output's dimensions, 0 where it is broadcast. */
typedef struct {
  int rank, n;
  int64_t dims[QH_MAX_RANK];
  int64_t strides[MAX_OPERANDS][QH_MAX_RANK];
  gboolean flat[MAX_OPERANDS]; /* the operand has the output's shape: offset = index */
} Walk;

static void walk_init(Walk *w, const QhShape *out, int n, const QhShape *const *in) {
  w->rank = out->rank;
  w->n = n;
  memcpy(w->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
  for (int k = 0; k < n; k++) {
    int64_t st = 1;
    w->flat[k] = in[k]->rank == out->rank;
    for (int i = out->rank - 1; i >= 0; i--) {
      int j = i - (out->rank - in[k]->rank);
      int64_t d = j >= 0 ? in[k]->dims[j] : 1;
      w->strides[k][i] = d == 1 && out->dims[i] != 1 ? 0 : st;
      w->flat[k] &= d == out->dims[i];
      st *= d;
    }
  }
}

/* Offsets into each operand of output element idx. */
static inline void walk_offsets(const Walk *w, int64_t idx, int64_t *off) {
  for (int k = 0; k < w->n; k++)
    off[k] = w->flat[k] ? idx : 0;
  if (w->flat[0] && (w->n < 2 || w->flat[1]) && (w->n < 3 || w->flat[2]))
    return;
  int64_t rem = idx;
  for (int i = w->rank - 1; i >= 0; i--) {
    int64_t c = rem % w->dims[i];
    rem /= w->dims[i];
    for (int k = 0; k < w->n; k++)
      if (!w->flat[k])
        off[k] += c * w->strides[k][i];
  }
}

/* Broadcast n shapes into *out (NumPy rules), naming the node on a mismatch. */
static gboolean broadcast_n(const QhNode *node, int n, const QhShape *const *in, QhShape *out,
                            GError **error) {
  *out = *in[0];
  for (int k = 1; k < n; k++) {
    QhShape next;
    if (!qh_kernel_broadcast(node, out, in[k], &next, error))
      return FALSE;
    *out = next;
  }
  return TRUE;
}

/* ---- ops ---------------------------------------------------------------------- */

typedef enum {
  OP_SQRT, OP_ERF, OP_EXP, OP_NEG, OP_LOG, OP_RECIPROCAL, OP_ABS, OP_NOT, /* unary */
  OP_POW, OP_MOD, OP_EQUAL, OP_LESS, OP_GREATER, OP_AND,                  /* binary */
  OP_WHERE, OP_EXPAND, OP_MIN, OP_MAX
} MathOp;

static MathOp op_of(const QhNode *node) {
  static const struct {
    const char *name;
    MathOp op;
  } names[] = {{"Sqrt", OP_SQRT},   {"Erf", OP_ERF},     {"Exp", OP_EXP},       {"Neg", OP_NEG},
               {"Not", OP_NOT},     {"Pow", OP_POW},     {"Mod", OP_MOD},       {"Equal", OP_EQUAL},
               {"Less", OP_LESS},   {"Greater", OP_GREATER}, {"Where", OP_WHERE}, {"Expand", OP_EXPAND},
               {"Log", OP_LOG},     {"Reciprocal", OP_RECIPROCAL}, {"Abs", OP_ABS}, {"And", OP_AND},
               {"Min", OP_MIN},     {"Max", OP_MAX}};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    if (strcmp(node->op_type, names[i].name) == 0)
      return names[i].op;
  return OP_SQRT;
}

/* An element of a float32, int64, int32 or bool operand as a double (exact for the
 * int32 and bool ranges, and for the int64 values shape arithmetic uses). */
static inline double value_at(const QhTensor *t, int64_t i) {
  switch (t->dtype) {
  case QH_DTYPE_F32: return ((const float *)t->data)[i];
  case QH_DTYPE_S64: return (double)((const int64_t *)t->data)[i];
  case QH_DTYPE_S32: return ((const int32_t *)t->data)[i];
  default: return ((const uint8_t *)t->data)[i];
  }
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                      int n_outputs, GError **error) {
  (void)n_outputs;
  MathOp op = op_of(node);
  QhDType out_dt = inputs[0]->dtype;
  const QhShape *shapes[MAX_OPERANDS] = {NULL};
  int n = 0;
  switch (op) {
  case OP_SQRT: case OP_ERF: case OP_EXP: case OP_NEG: case OP_LOG: case OP_RECIPROCAL:
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0))
      return FALSE;
    shapes[n++] = &inputs[0]->shape;
    break;
  case OP_ABS:
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32, 0))
      return FALSE;
    shapes[n++] = &inputs[0]->shape;
    break;
  case OP_AND:
    for (int i = 0; i < 2; i++)
      if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_BOOL, 0))
        return FALSE;
    shapes[n++] = &inputs[0]->shape, shapes[n++] = &inputs[1]->shape;
    break;
  case OP_MIN: case OP_MAX: {
    /* any number of inputs: broadcast them here, fold them one by one in run */
    QhShape acc = inputs[0] ? inputs[0]->shape : (QhShape){0};
    for (int i = 0; i < n_inputs; i++) {
      if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_F32, QH_DTYPE_S64,
                                 QH_DTYPE_S32, 0))
        return FALSE;
      if (inputs[i]->dtype != inputs[0]->dtype)
        return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input types differ (%s and %s)",
                              qh_dtype_name(inputs[0]->dtype), qh_dtype_name(inputs[i]->dtype));
      const QhShape *two[2] = {&acc, &inputs[i]->shape};
      if (!broadcast_n(node, 2, two, &acc, error))
        return FALSE;
    }
    outputs[0].dtype = out_dt;
    outputs[0].shape = acc;
    outputs[0].data = NULL;
    return TRUE;
  }
  case OP_NOT:
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_BOOL, 0))
      return FALSE;
    shapes[n++] = &inputs[0]->shape;
    break;
  case OP_POW:
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, 0) ||
        !qh_kernel_check_dtype(node, inputs, n_inputs, 1, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32, 0))
      return FALSE;
    shapes[n++] = &inputs[0]->shape, shapes[n++] = &inputs[1]->shape;
    break;
  case OP_MOD: case OP_EQUAL: case OP_LESS: case OP_GREATER: {
    gboolean eq = op == OP_EQUAL;
    for (int i = 0; i < 2; i++)
      if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32,
                                 eq ? QH_DTYPE_BOOL : 0, 0))
        return FALSE;
    if (inputs[0]->dtype != inputs[1]->dtype)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input types differ (%s and %s)",
                            qh_dtype_name(inputs[0]->dtype), qh_dtype_name(inputs[1]->dtype));
    if (op == OP_MOD) {
      int64_t fmod_attr = 0;
      if (!qh_node_attr_get_int(node, "fmod", 0, &fmod_attr, error))
        return FALSE;
      if (inputs[0]->dtype == QH_DTYPE_F32 && fmod_attr != 1)
        return qh_kernel_fail(error, node, QH_ERROR_INVALID, "float Mod needs fmod=1 (ONNX)");
    } else {
      out_dt = QH_DTYPE_BOOL;
    }
    shapes[n++] = &inputs[0]->shape, shapes[n++] = &inputs[1]->shape;
    break;
  }
  case OP_WHERE:
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_BOOL, 0))
      return FALSE;
    for (int i = 1; i < 3; i++)
      if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32,
                                 QH_DTYPE_BOOL, 0))
        return FALSE;
    if (inputs[1]->dtype != inputs[2]->dtype)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "X and Y types differ (%s and %s)",
                            qh_dtype_name(inputs[1]->dtype), qh_dtype_name(inputs[2]->dtype));
    out_dt = inputs[1]->dtype;
    shapes[n++] = &inputs[0]->shape, shapes[n++] = &inputs[1]->shape, shapes[n++] = &inputs[2]->shape;
    break;
  case OP_EXPAND: {
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, 0, error, QH_DTYPE_F32, QH_DTYPE_S64, QH_DTYPE_S32,
                               QH_DTYPE_BOOL, QH_DTYPE_U8, QH_DTYPE_S8, 0))
      return FALSE;
    int64_t *v = NULL, count = 0;
    if (!qh_kernel_const_ints(node, inputs[1], "shape", &v, &count, error))
      return FALSE;
    if (count > QH_MAX_RANK) {
      g_free(v);
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "shape has %" G_GINT64_FORMAT " dimensions",
                            count);
    }
    QhShape target = qh_shape_make((int)count, v);
    g_free(v);
    for (int i = 0; i < target.rank; i++)
      if (target.dims[i] < 0)
        return qh_kernel_fail(error, node, QH_ERROR_INVALID, "negative dimension in shape");
    const QhShape *both[2] = {&inputs[0]->shape, &target};
    QhShape out;
    if (!broadcast_n(node, 2, both, &out, error))
      return FALSE;
    outputs[0].dtype = out_dt;
    outputs[0].shape = out;
    outputs[0].data = NULL;
    return TRUE;
  }
  }
  QhShape out;
  if (!broadcast_n(node, n, shapes, &out, error))
    return FALSE;
  outputs[0].dtype = out_dt;
  outputs[0].shape = out;
  outputs[0].data = NULL;
  return TRUE;
}

typedef struct {
  MathOp op;
  const QhTensor *in[MAX_OPERANDS];
  QhTensor *out;
  Walk walk;
  gboolean naive; /* run_naive: Erf is glibc's erff */
} Job;

/* Python's integer %: the result takes the divisor's sign (ONNX Mod with fmod=0). */
static inline int64_t mod_floor(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

static inline float unary_f32(MathOp op, float v) {
  switch (op) {
  case OP_SQRT: return sqrtf(v);
  case OP_ERF: return erff(v);
  case OP_EXP: return expf(v);
  case OP_LOG: return logf(v);
  case OP_RECIPROCAL: return 1.0f / v;
  case OP_ABS: return fabsf(v);
  default: return -v;
  }
}

static void unary_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  if (j->op == OP_ABS && j->in[0]->dtype == QH_DTYPE_S64) {
    const int64_t *x = j->in[0]->data;
    int64_t *y = j->out->data;
    for (int64_t i = begin; i < end; i++) /* INT64_MIN stays itself, as in two's complement */
      y[i] = x[i] < 0 ? (int64_t)(0 - (uint64_t)x[i]) : x[i];
    return;
  }
  if (j->op == OP_ABS && j->in[0]->dtype == QH_DTYPE_S32) {
    const int32_t *x = j->in[0]->data;
    int32_t *y = j->out->data;
    for (int64_t i = begin; i < end; i++)
      y[i] = x[i] < 0 ? (int32_t)(0 - (uint32_t)x[i]) : x[i];
    return;
  }
  if (j->op == OP_NOT) {
    const uint8_t *x = j->in[0]->data;
    uint8_t *y = j->out->data;
    for (int64_t i = begin; i < end; i++)
      y[i] = !x[i];
    return;
  }
  const float *x = j->in[0]->data;
  float *y = j->out->data;
  if (j->op == OP_ERF && !j->naive) { /* GELU's Erf: the vector polynomial, within 1 ulp of erff */
    qh_erf_f32(x + begin, y + begin, end - begin);
    return;
  }
  for (int64_t i = begin; i < end; i++)
    y[i] = unary_f32(j->op, x[i]);
}

static void broadcast_task(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  const QhTensor *a = j->in[0], *b = j->in[1];
  size_t es = qh_dtype_size(j->out->dtype);
  for (int64_t i = begin; i < end; i++) {
    int64_t off[MAX_OPERANDS];
    walk_offsets(&j->walk, i, off);
    switch (j->op) {
    case OP_POW:
      ((float *)j->out->data)[i] = powf(((const float *)a->data)[off[0]], (float)value_at(b, off[1]));
      break;
    case OP_MOD:
      if (a->dtype == QH_DTYPE_F32)
        ((float *)j->out->data)[i] = fmodf(((const float *)a->data)[off[0]], ((const float *)b->data)[off[1]]);
      else if (a->dtype == QH_DTYPE_S64)
        ((int64_t *)j->out->data)[i] =
            mod_floor(((const int64_t *)a->data)[off[0]], ((const int64_t *)b->data)[off[1]]);
      else
        ((int32_t *)j->out->data)[i] =
            (int32_t)mod_floor(((const int32_t *)a->data)[off[0]], ((const int32_t *)b->data)[off[1]]);
      break;
    case OP_EQUAL: case OP_LESS: case OP_GREATER: {
      /* int64 compared as int64: a double would merge values above 2^53 */
      int c;
      if (a->dtype == QH_DTYPE_S64) {
        int64_t x = ((const int64_t *)a->data)[off[0]], y = ((const int64_t *)b->data)[off[1]];
        c = j->op == OP_EQUAL ? x == y : j->op == OP_LESS ? x < y : x > y;
      } else {
        double x = value_at(a, off[0]), y = value_at(b, off[1]);
        c = j->op == OP_EQUAL ? x == y : j->op == OP_LESS ? x < y : x > y;
      }
      ((uint8_t *)j->out->data)[i] = (uint8_t)c;
      break;
    }
    case OP_AND:
      ((uint8_t *)j->out->data)[i] =
          (uint8_t)(((const uint8_t *)a->data)[off[0]] && ((const uint8_t *)b->data)[off[1]]);
      break;
    case OP_MIN: case OP_MAX: {
      /* a is the output itself (the inputs folded so far), b the next input; a NaN
       * on either side wins, as in NumPy's minimum/maximum and ONNX Runtime */
      gboolean mx = j->op == OP_MAX;
      if (a->dtype == QH_DTYPE_F32) {
        float x = ((const float *)a->data)[off[0]], y = ((const float *)b->data)[off[1]];
        ((float *)j->out->data)[i] = isnan(x) ? x : isnan(y) ? y : mx ? (y > x ? y : x) : (y < x ? y : x);
      } else if (a->dtype == QH_DTYPE_S64) {
        int64_t x = ((const int64_t *)a->data)[off[0]], y = ((const int64_t *)b->data)[off[1]];
        ((int64_t *)j->out->data)[i] = mx ? MAX(x, y) : MIN(x, y);
      } else {
        int32_t x = ((const int32_t *)a->data)[off[0]], y = ((const int32_t *)b->data)[off[1]];
        ((int32_t *)j->out->data)[i] = mx ? MAX(x, y) : MIN(x, y);
      }
      break;
    }
    case OP_WHERE: {
      const QhTensor *src = ((const uint8_t *)a->data)[off[0]] ? j->in[1] : j->in[2];
      int64_t o = ((const uint8_t *)a->data)[off[0]] ? off[1] : off[2];
      memcpy((char *)j->out->data + (size_t)i * es, (const char *)src->data + (size_t)o * es, es);
      break;
    }
    case OP_EXPAND:
      memcpy((char *)j->out->data + (size_t)i * es, (const char *)a->data + (size_t)off[0] * es, es);
      break;
    default: /* unary ops take unary_task */
      break;
    }
  }
}

/* Pow of a float base of the output's shape by a one-element exponent. */
typedef struct {
  const float *x;
  float *y, e;
} ScalarPow;

static void scalar_pow_task(void *arg, int64_t begin, int64_t end) {
  const ScalarPow *p = arg;
  if (p->e == 2.0f) {
    for (int64_t i = begin; i < end; i++)
      p->y[i] = p->x[i] * p->x[i];
    return;
  }
  for (int64_t i = begin; i < end; i++)
    p->y[i] = powf(p->x[i], p->e);
}

static gboolean is_scalar_pow(MathOp op, const QhTensor *const *inputs, int n_inputs, const QhTensor *out) {
  return op == OP_POW && n_inputs == 2 && inputs[0]->dtype == QH_DTYPE_F32 &&
         qh_tensor_numel(inputs[1]) == 1 && qh_shape_equal(&inputs[0]->shape, &out->shape);
}

static gboolean run_impl(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                         QhTensor *const *outputs, gboolean naive, GError **error) {
  Job j = {.op = op_of(node), .out = outputs[0], .naive = naive};
  if (!naive && is_scalar_pow(j.op, inputs, n_inputs, outputs[0])) {
    ScalarPow p = {qh_f32(inputs[0]), qh_f32(outputs[0]), (float)value_at(inputs[1], 0)};
    qh_thread_pool_parallel_for(ctx->pool, qh_tensor_numel(outputs[0]), PAR_GRAIN, scalar_pow_task, &p);
    return TRUE;
  }
  gboolean one = j.op == OP_EXPAND || j.op == OP_MIN || j.op == OP_MAX || n_inputs < 2;
  int n = j.op == OP_WHERE ? 3 : one ? 1 : 2;
  const QhShape *shapes[MAX_OPERANDS];
  for (int k = 0; k < n; k++) {
    j.in[k] = inputs[k];
    shapes[k] = &inputs[k]->shape;
  }
  if (j.op == OP_MOD && inputs[0]->dtype != QH_DTYPE_F32)
    for (int64_t i = 0; i < qh_tensor_numel(inputs[1]); i++)
      if (value_at(inputs[1], i) == 0)
        return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                              "integer Mod by zero (divisor element %" G_GINT64_FORMAT ")", i);
  int64_t total = qh_tensor_numel(outputs[0]);
  if (j.op == OP_MIN || j.op == OP_MAX) {
    /* the output starts as input 0 broadcast, then takes each further input in turn */
    Job first = {.op = OP_EXPAND, .in = {inputs[0]}, .out = outputs[0]};
    walk_init(&first.walk, &outputs[0]->shape, 1, shapes);
    qh_thread_pool_parallel_for(ctx->pool, total, PAR_GRAIN, broadcast_task, &first);
    for (int k = 1; k < n_inputs; k++) {
      Job fold = {.op = j.op, .in = {outputs[0], inputs[k]}, .out = outputs[0]};
      const QhShape *pair[2] = {&outputs[0]->shape, &inputs[k]->shape};
      walk_init(&fold.walk, &outputs[0]->shape, 2, pair);
      qh_thread_pool_parallel_for(ctx->pool, total, PAR_GRAIN, broadcast_task, &fold);
    }
    return TRUE;
  }
  if (j.op <= OP_NOT) {
    qh_thread_pool_parallel_for(ctx->pool, total, PAR_GRAIN, unary_task, &j);
    return TRUE;
  }
  walk_init(&j.walk, &outputs[0]->shape, n, shapes);
  qh_thread_pool_parallel_for(ctx->pool, total, PAR_GRAIN, broadcast_task, &j);
  return TRUE;
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                    QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  return run_impl(ctx, node, inputs, n_inputs, outputs, FALSE, error);
}

static gboolean run_naive(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                          QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  return run_impl(ctx, node, inputs, n_inputs, outputs, TRUE, error);
}

const QhOpDef qh_ops_math[] = {
    {"Sqrt", 1, 1, 1, 1, infer, run, NULL, NULL},    {"Erf", 1, 1, 1, 1, infer, run, run_naive, NULL},
    {"Exp", 1, 1, 1, 1, infer, run, NULL, NULL},     {"Neg", 1, 1, 1, 1, infer, run, NULL, NULL},
    {"Not", 1, 1, 1, 1, infer, run, NULL, NULL},     {"Pow", 2, 2, 1, 1, infer, run, run_naive, NULL},
    {"Mod", 2, 2, 1, 1, infer, run, NULL, NULL},     {"Equal", 2, 2, 1, 1, infer, run, NULL, NULL},
    {"Less", 2, 2, 1, 1, infer, run, NULL, NULL},    {"Greater", 2, 2, 1, 1, infer, run, NULL, NULL},
    {"Where", 3, 3, 1, 1, infer, run, NULL, NULL},   {"Expand", 2, 2, 1, 1, infer, run, NULL, NULL},
    {"Log", 1, 1, 1, 1, infer, run, NULL, NULL},     {"Reciprocal", 1, 1, 1, 1, infer, run, NULL, NULL},
    {"Abs", 1, 1, 1, 1, infer, run, NULL, NULL},     {"And", 2, 2, 1, 1, infer, run, NULL, NULL},
    {"Min", 1, 64, 1, 1, infer, run, NULL, NULL},    {"Max", 1, 64, 1, 1, infer, run, NULL, NULL},
    {NULL},
};
