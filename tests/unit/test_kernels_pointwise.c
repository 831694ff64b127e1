/* Unit tests of the pointwise, normalisation, reduction and Q/DQ reference kernels:
 * each op is driven through its QhOpDef (infer, allocate, run) on nodes built in a
 * QhGraph; results are compared with expectations computed here independently
 * (own broadcast indexing, double-precision formulas, hand-worked values), the fast
 * elementwise paths with their naive twins, and one thread with two. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/graph.h"
#include "exec/kernels/softmax-simd.h"
#include "exec/op.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

static QhThreadPool *pool1, *pool2;

/* ---- fixtures ---------------------------------------------------------------- */

#define IN(...) ((const QhTensor *[]){__VA_ARGS__})
#define S0() shp(0)
#define S1(a) shp(1, (int64_t)(a))
#define S2(a, b) shp(2, (int64_t)(a), (int64_t)(b))
#define S3(a, b, c) shp(3, (int64_t)(a), (int64_t)(b), (int64_t)(c))
#define S4(a, b, c, d) shp(4, (int64_t)(a), (int64_t)(b), (int64_t)(c), (int64_t)(d))
#define F32(shape, ...) tensor(QH_DTYPE_F32, shape, (const float[]){__VA_ARGS__})

static QhShape shp(int rank, ...) {
  QhShape s = {.rank = rank};
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++)
    s.dims[i] = va_arg(ap, int64_t);
  va_end(ap);
  return s;
}

/* A node of op with n_in inputs (present[i] FALSE leaves slot i omitted) and n_out
 * outputs, in graph g. */
static QhNode *make_node_opt(QhGraph *g, const char *op, int n_in, const gboolean *present,
                             int n_out) {
  static int counter;
  int ids[16];
  for (int i = 0; i < n_in + n_out; i++) {
    char *name = g_strdup_printf("v%d", counter++);
    gboolean omit = i < n_in && present != NULL && !present[i];
    ids[i] = omit ? -1 : qh_graph_add_value(g, name, NULL)->id;
    g_free(name);
  }
  char *name = g_strdup_printf("n%d", counter++);
  QhNode *n = qh_graph_add_node(g, name, op, "", n_in, ids, n_out, ids + n_in, NULL);
  g_free(name);
  g_assert_nonnull(n);
  return n;
}

static QhNode *make_node(QhGraph *g, const char *op, int n_in, int n_out) {
  return make_node_opt(g, op, n_in, NULL, n_out);
}

static QhNode *node_with_int(QhGraph *g, const char *op, int n_in, const char *attr, int64_t v) {
  QhNode *n = make_node(g, op, n_in, 1);
  qh_node_set_attr_int(n, attr, v);
  return n;
}

static QhNode *node_with_ints(QhGraph *g, const char *op, const char *attr, int64_t n,
                              const int64_t *v) {
  QhNode *node = make_node(g, op, 1, 1);
  qh_node_set_attr_ints(node, attr, n, v);
  return node;
}

static QhTensor *tensor(QhDType dt, QhShape s, const void *values) {
  QhTensor *t = qh_tensor_new(dt, &s, NULL);
  g_assert_nonnull(t);
  if (values != NULL && t->nbytes > 0)
    memcpy(t->data, values, t->nbytes);
  return t;
}

static QhTensor *random_f32(QhShape s, GRand *r, double lo, double hi) {
  QhTensor *t = tensor(QH_DTYPE_F32, s, NULL);
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    ((float *)t->data)[i] = (float)g_rand_double_range(r, lo, hi);
  return t;
}

/* Free a NULL-terminated list of tensors. */
static void free_all(QhTensor *t, ...) {
  va_list ap;
  va_start(ap, t);
  for (; t != NULL; t = va_arg(ap, QhTensor *))
    qh_tensor_free(t);
  va_end(ap);
}

/* Infer and run node on inputs; *out gets n_out new tensors (caller frees). */
static gboolean run_op(const QhNode *node, const QhTensor *const *in, int n_in, QhTensor **out,
                       int n_out, QhThreadPool *pool, gboolean naive, GError **error) {
  const QhOpDef *def = qh_op_find("", node->op_type);
  g_assert_true(def != NULL && n_in >= def->min_inputs && n_in <= def->max_inputs);
  QhTensor desc[8] = {{0}};
  for (int i = 0; i < n_out; i++)
    out[i] = NULL;
  if (!def->infer(node, in, n_in, desc, n_out, error))
    return FALSE;
  for (int i = 0; i < n_out; i++) {
    out[i] = tensor(desc[i].dtype, desc[i].shape, NULL);
    if (out[i]->nbytes > 0) /* poisoned: run must write every element */
      memset(out[i]->data, 0xA5, out[i]->nbytes);
  }
  QhExecContext ctx = {.pool = pool};
  QhOpRunFn fn = naive && def->run_naive ? def->run_naive : def->run;
  if (fn(&ctx, node, in, n_in, out, n_out, error))
    return TRUE;
  for (int i = 0; i < n_out; i++)
    g_clear_pointer(&out[i], qh_tensor_free);
  return FALSE;
}

/* Run a one-output node that must succeed; returns the output. */
static QhTensor *run1(const QhNode *node, const QhTensor *const *in, int n_in) {
  QhTensor *out;
  GError *error = NULL;
  run_op(node, in, n_in, &out, 1, pool1, FALSE, &error);
  g_assert_no_error(error);
  return out;
}

/* Infer or run (and the naive twin) must fail with code and a message containing
 * fragment and the node's name. */
static void expect_fail(const QhNode *node, const QhTensor *const *in, int n_in, int n_out,
                        QhErrorCode code, const char *fragment) {
  for (int naive = 0; naive < 2; naive++) {
    QhTensor *out[8];
    GError *error = NULL;
    g_assert_false(run_op(node, in, n_in, out, n_out, pool1, naive, &error));
    g_assert_error(error, QH_ERROR, code);
    if (strstr(error->message, fragment) == NULL || strstr(error->message, node->name) == NULL)
      g_error("message '%s' lacks '%s' or the node's name", error->message, fragment);
    g_error_free(error);
  }
}

static void assert_close(const QhTensor *t, const double *want, int64_t n, double tol) {
  g_assert_cmpint(qh_tensor_numel(t), ==, n);
  for (int64_t i = 0; i < n; i++) {
    double got = ((const float *)t->data)[i];
    if (!(fabs(got - want[i]) <= tol * (1.0 + fabs(want[i]))))
      g_error("element %" G_GINT64_FORMAT ": got %.9g, want %.9g", i, got, want[i]);
  }
}

/* Bit-for-bit equality (NaN matches NaN). */
static void assert_floats(const QhTensor *t, int64_t n, const float *want) {
  g_assert_cmpint(qh_tensor_numel(t), ==, n);
  for (int64_t i = 0; i < n; i++) {
    float got = ((const float *)t->data)[i];
    if (got != want[i] && !(isnan(want[i]) && isnan(got)))
      g_error("element %" G_GINT64_FORMAT ": got %.9g, want %.9g", i, got, want[i]);
  }
}

/* ---- elementwise ------------------------------------------------------------- */

static const char *const binops[] = {"Add", "Sub", "Mul", "Div"};

/* The test's own arithmetic (operands are small, so no integer overflow). */
static int64_t ref_int(int op, int64_t a, int64_t b) {
  return op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b;
}

/* Offset in an operand of shape s of the output index idx (right-aligned). */
static int64_t bcast_offset(const QhShape *s, const QhShape *out, const int64_t *idx) {
  int64_t off = 0;
  for (int d = 0; d < s->rank; d++)
    off = off * s->dims[d] + (s->dims[d] == 1 ? 0 : idx[d + out->rank - s->rank]);
  return off;
}

static void expected_binop(int op, const QhTensor *a, const QhTensor *b, QhTensor *want) {
  int64_t idx[QH_MAX_RANK];
  const QhShape *os = &want->shape;
  for (int64_t i = 0; i < qh_tensor_numel(want); i++) {
    for (int64_t d = os->rank - 1, rem = i; d >= 0; rem /= os->dims[d], d--)
      idx[d] = rem % os->dims[d];
    int64_t ia = bcast_offset(&a->shape, os, idx), ib = bcast_offset(&b->shape, os, idx);
    if (a->dtype == QH_DTYPE_F32) {
      float x = ((float *)a->data)[ia], y = ((float *)b->data)[ib];
      ((float *)want->data)[i] = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
    } else if (a->dtype == QH_DTYPE_S64) {
      ((int64_t *)want->data)[i] = ref_int(op, ((int64_t *)a->data)[ia], ((int64_t *)b->data)[ib]);
    } else {
      ((int32_t *)want->data)[i] =
          (int32_t)ref_int(op, ((int32_t *)a->data)[ia], ((int32_t *)b->data)[ib]);
    }
  }
}

/* Run op on a and b fast and naive, on 1 and 2 threads: all must equal, bit for bit,
 * the expectation computed here element by element. */
static void check_binop(int op, const QhTensor *a, const QhTensor *b) {
  QhGraph *g = qh_graph_new();
  QhNode *node = make_node(g, binops[op], 2, 1);
  QhTensor *want = NULL;
  for (int variant = 0; variant < 4; variant++) {
    QhTensor *out;
    GError *error = NULL;
    run_op(node, IN(a, b), 2, &out, 1, variant & 1 ? pool2 : pool1, variant >= 2, &error);
    g_assert_no_error(error);
    g_assert_cmpint(out->dtype, ==, a->dtype);
    if (want == NULL) {
      want = tensor(out->dtype, out->shape, NULL);
      expected_binop(op, a, b, want);
    }
    g_assert_true(qh_shape_equal(&out->shape, &want->shape));
    if (out->nbytes > 0 && memcmp(out->data, want->data, out->nbytes) != 0) {
      char *sa = qh_shape_to_string(&a->shape), *sb = qh_shape_to_string(&b->shape);
      g_error("%s %s %s (variant %d) differs from the expectation", binops[op], sa, sb, variant);
    }
    qh_tensor_free(out);
  }
  qh_tensor_free(want);
  qh_graph_free(g);
}

/* Both operand orders of every op (divisors never hit 0.0 exactly; if they did,
 * inf and NaN would still compare bit for bit). */
static void check_pair(GRand *r, QhShape sa, QhShape sb) {
  for (int op = 0; op < 4; op++) {
    QhTensor *a = random_f32(sa, r, -4, 4), *b = random_f32(sb, r, -4, 4);
    check_binop(op, a, b);
    check_binop(op, b, a);
    free_all(a, b, NULL);
  }
}

static void test_broadcast_fixed(void) {
  GRand *r = g_rand_new_with_seed(1);
  /* Same shape, scalars, per-channel and trailing rows, two-sided and general
   * broadcasts, empty dims, and sizes that split across threads. */
  const QhShape pairs[][2] = {
      {S4(2, 3, 4, 5), S4(2, 3, 4, 5)}, {S4(2, 3, 4, 5), S0()},        {S4(2, 3, 4, 5), S1(1)},
      {S4(2, 3, 4, 5), S3(3, 1, 1)},    {S2(7, 9), S1(9)},             {S2(7, 9), S2(7, 1)},
      {S3(2, 3, 4), S3(1, 3, 1)},       {S3(2, 1, 4), S2(3, 1)},       {S3(2, 3, 4), S2(3, 4)},
      {S4(2, 3, 4, 5), S4(1, 3, 1, 5)}, {S1(1), S3(1, 1, 1)},          {S0(), S0()},
      {S2(0, 3), S1(3)},                {S3(2, 0, 4), S3(2, 1, 4)},    {S2(0, 3), S0()},
      {S4(4, 64, 9, 9), S3(64, 1, 1)},  {S2(300, 100), S2(1, 100)},    {S2(40000, 1), S1(1)},
      {S3(64, 3, 100), S3(64, 1, 100)}, {S4(2, 1, 3, 1), S4(1, 4, 1, 5)}, {S2(1, 5), S2(6, 1)},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(pairs); i++)
    check_pair(r, pairs[i][0], pairs[i][1]);
  g_rand_free(r);
}

static void test_broadcast_random(void) {
  GRand *r = g_rand_new_with_seed(42);
  static const int64_t choices[] = {0, 1, 1, 2, 3, 5};
  for (int it = 0; it < 150; it++) {
    QhShape out = {.rank = g_rand_int_range(r, 0, 6)}, sa, sb, *s[] = {&sa, &sb};
    gboolean allow_zero = g_rand_int_range(r, 0, 8) == 0;
    for (int d = 0; d < out.rank; d++)
      out.dims[d] = choices[g_rand_int_range(r, allow_zero ? 0 : 1, 6)];
    for (int k = 0; k < 2; k++) { /* drop leading dims, set others to 1 at random */
      int drop = g_rand_int_range(r, 0, out.rank + 1);
      s[k]->rank = out.rank - drop;
      for (int d = 0; d < s[k]->rank; d++)
        s[k]->dims[d] = g_rand_boolean(r) ? 1 : out.dims[d + drop];
    }
    check_pair(r, sa, sb);
  }
  g_rand_free(r);
}

static void test_int_arith(void) {
  GRand *r = g_rand_new_with_seed(7);
  const QhShape pairs[][2] = {{S2(3, 4), S1(4)}, {S2(3, 4), S0()}, {S3(2, 3, 4), S3(2, 1, 4)},
                              {S1(5), S1(5)},    {S2(3, 1), S2(1, 4)}};
  for (size_t p = 0; p < G_N_ELEMENTS(pairs); p++)
    for (int op = 0; op < 8; op++) { /* op & 3: the op; op & 4: int32 instead of int64 */
      QhDType t = op & 4 ? QH_DTYPE_S32 : QH_DTYPE_S64;
      QhTensor *x[2] = {tensor(t, pairs[p][0], NULL), tensor(t, pairs[p][1], NULL)};
      for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < qh_tensor_numel(x[k]); i++) {
          int32_t v = g_rand_int_range(r, 1, 50) * (g_rand_boolean(r) ? 1 : -1);
          if (t == QH_DTYPE_S64)
            ((int64_t *)x[k]->data)[i] = v;
          else
            ((int32_t *)x[k]->data)[i] = v;
        }
      check_binop(op & 3, x[0], x[1]);
      free_all(x[0], x[1], NULL);
    }
  g_rand_free(r);
}

static void test_int_div(void) {
  QhGraph *g = qh_graph_new();
  QhNode *div = make_node(g, "Div", 2, 1);
  const int64_t want64[] = {-3, -3, 3, 3, 0, INT64_MIN, 2};
  QhTensor *a = tensor(QH_DTYPE_S64, S1(7), (const int64_t[]){-7, 7, -7, 7, 0, INT64_MIN, 6});
  QhTensor *b = tensor(QH_DTYPE_S64, S1(7), (const int64_t[]){2, -2, -2, 2, -5, -1, 3});
  for (int naive = 0; naive < 2; naive++) { /* truncation toward zero; MIN / -1 wraps */
    QhTensor *out;
    g_assert_true(run_op(div, IN(a, b), 2, &out, 1, pool1, naive, NULL));
    g_assert_cmpmem(out->data, out->nbytes, want64, sizeof want64);
    qh_tensor_free(out);
  }
  ((int64_t *)b->data)[3] = 0;
  expect_fail(div, IN(a, b), 2, 1, QH_ERROR_INVALID, "division by zero");

  const int32_t want32[] = {-2, INT32_MIN, -2};
  QhTensor *c = tensor(QH_DTYPE_S32, S1(3), (const int32_t[]){-9, INT32_MIN, 9});
  QhTensor *d = tensor(QH_DTYPE_S32, S1(3), (const int32_t[]){4, -1, -4});
  QhTensor *out = run1(div, IN(c, d), 2);
  g_assert_cmpmem(out->data, out->nbytes, want32, sizeof want32);
  qh_tensor_free(out);
  QhTensor *z = tensor(QH_DTYPE_S32, S0(), (const int32_t[]){0});
  expect_fail(div, IN(c, z), 2, 1, QH_ERROR_INVALID, "division by zero");
  /* Overflow wraps instead of being undefined (UBSan watches this). */
  QhTensor *e = tensor(QH_DTYPE_S64, S1(1), (const int64_t[]){INT64_MAX});
  QhTensor *f = tensor(QH_DTYPE_S64, S0(), (const int64_t[]){2});
  out = run1(make_node(g, "Mul", 2, 1), IN(e, f), 2);
  g_assert_cmpint(((int64_t *)out->data)[0], ==, -2);
  free_all(out, a, b, c, d, z, e, f, NULL);
  qh_graph_free(g);
}

static void test_elementwise_errors(void) {
  QhGraph *g = qh_graph_new();
  QhNode *add = make_node(g, "Add", 2, 1);
  QhTensor *a = tensor(QH_DTYPE_F32, S2(2, 3), NULL), *b = tensor(QH_DTYPE_F32, S1(4), NULL);
  QhTensor *c = tensor(QH_DTYPE_S64, S2(2, 3), NULL), *u = tensor(QH_DTYPE_U8, S2(2, 3), NULL);
  expect_fail(add, IN(a, b), 2, 1, QH_ERROR_INVALID, "do not broadcast");
  expect_fail(add, IN(a, c), 2, 1, QH_ERROR_INVALID, "types differ");
  expect_fail(add, IN(u, u), 2, 1, QH_ERROR_UNSUPPORTED, "uint8");
  expect_fail(add, IN(a, NULL), 2, 1, QH_ERROR_INVALID, "missing");
  free_all(a, b, c, u, NULL);
  qh_graph_free(g);
}

/* ---- activations ------------------------------------------------------------- */

static const float act_x[] = {-1000, -6, -3, -2.5f, -1, -0.5f, 0, 0.5f, 1, 2.5f, 3, 4, 100};
#define N_ACT ((int64_t)G_N_ELEMENTS(act_x))

static QhTensor *act_run(QhNode *node) {
  QhTensor *x = tensor(QH_DTYPE_F32, S1(N_ACT), act_x);
  QhTensor *y = run1(node, IN(x), 1);
  qh_tensor_free(x);
  return y;
}

static void test_activations(void) {
  QhGraph *g = qh_graph_new();
  float want[N_ACT];
  double ref[4][N_ACT]; /* HardSwish, Sigmoid, Tanh, HardSigmoid in double */
  for (int i = 0; i < N_ACT; i++) {
    double x = act_x[i];
    ref[0][i] = x <= -3 ? 0 : x >= 3 ? x : x * (x + 3) / 6;
    ref[1][i] = 1.0 / (1.0 + exp(-x));
    ref[2][i] = tanh(x);
    ref[3][i] = x <= -2.5 ? 0 : x >= 2.5 ? 1 : 0.2 * x + 0.5;
  }
  QhTensor *y = act_run(make_node(g, "Relu", 1, 1));
  for (int i = 0; i < N_ACT; i++)
    want[i] = act_x[i] > 0 ? act_x[i] : 0.0f;
  assert_floats(y, N_ACT, want);
  qh_tensor_free(y);

  y = act_run(make_node(g, "LeakyRelu", 1, 1)); /* alpha defaults to 0.01 */
  for (int i = 0; i < N_ACT; i++)
    want[i] = act_x[i] >= 0 ? act_x[i] : 0.01f * act_x[i];
  assert_floats(y, N_ACT, want);
  qh_tensor_free(y);
  QhNode *leaky = make_node(g, "LeakyRelu", 1, 1);
  qh_node_set_attr_float(leaky, "alpha", 0.25f);
  y = act_run(leaky);
  g_assert_true(((float *)y->data)[4] == -0.25f && ((float *)y->data)[8] == 1.0f);
  qh_tensor_free(y);

  /* HardSigmoid: exactly 0 from -2.5 down, exactly 1 from 2.5 up. */
  y = act_run(make_node(g, "HardSigmoid", 1, 1));
  assert_close(y, ref[3], N_ACT, 1e-7);
  g_assert_true(((float *)y->data)[3] == 0.0f && ((float *)y->data)[9] == 1.0f);
  qh_tensor_free(y);
  QhNode *hs2 = make_node(g, "HardSigmoid", 1, 1);
  qh_node_set_attr_float(hs2, "alpha", 0.5f);
  qh_node_set_attr_float(hs2, "beta", 0.25f);
  y = act_run(hs2); /* -0.5 -> 0, 1 -> 0.75, 2.5 -> 1 */
  const float *v = y->data;
  g_assert_true(v[5] == 0.0f && v[8] == 0.75f && v[9] == 1.0f);
  qh_tensor_free(y);

  /* HardSwish: exactly 0 from -3 down, exactly x from 3 up. */
  y = act_run(make_node(g, "HardSwish", 1, 1));
  assert_close(y, ref[0], N_ACT, 1e-7);
  g_assert_true(((float *)y->data)[2] == 0.0f && ((float *)y->data)[10] == 3.0f);
  qh_tensor_free(y);

  /* Sigmoid and Tanh saturate cleanly at -1000 and 100 (no NaN, no overflow). */
  y = act_run(make_node(g, "Sigmoid", 1, 1));
  assert_close(y, ref[1], N_ACT, 1e-6);
  v = y->data;
  g_assert_true(v[0] == 0.0f && v[6] == 0.5f && v[12] == 1.0f);
  qh_tensor_free(y);
  y = act_run(make_node(g, "Tanh", 1, 1));
  assert_close(y, ref[2], N_ACT, 1e-6);
  qh_tensor_free(y);
  qh_graph_free(g);
}

static void test_clip(void) {
  QhGraph *g = qh_graph_new();
  QhTensor *x = tensor(QH_DTYPE_F32, S1(N_ACT), act_x);
  QhTensor *lo = F32(S0(), -1), *hi = F32(S1(1), 2), *big = F32(S0(), 5);
  QhNode *both = make_node(g, "Clip", 3, 1), *only_min = make_node(g, "Clip", 2, 1);
  QhNode *only_max = make_node_opt(g, "Clip", 3, (const gboolean[]){TRUE, FALSE, TRUE}, 1);
  const struct {
    QhNode *node;
    const QhTensor *const *in;
    int n_in;
    float lo, hi;
  } cases[] = {
      {both, IN(x, lo, hi), 3, -1, 2},
      {only_min, IN(x, lo), 2, -1, INFINITY},       /* the max slot absent altogether */
      {only_max, IN(x, NULL, hi), 3, -INFINITY, 2}, /* the min slot omitted ("") */
      {make_node(g, "Clip", 1, 1), IN(x), 1, -INFINITY, INFINITY},
      {both, IN(x, big, hi), 3, 2, 2}, /* min > max: max everywhere */
  };
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    float want[N_ACT];
    for (int i = 0; i < N_ACT; i++)
      want[i] = act_x[i] < cases[k].lo ? cases[k].lo : act_x[i] > cases[k].hi ? cases[k].hi
                                                                               : act_x[i];
    QhTensor *y = run1(cases[k].node, cases[k].in, cases[k].n_in);
    assert_floats(y, N_ACT, want);
    qh_tensor_free(y);
  }
  QhTensor *vec = tensor(QH_DTYPE_F32, S1(2), NULL);
  expect_fail(both, IN(x, vec, hi), 3, 1, QH_ERROR_INVALID, "scalar");
  /* A computed bound (no data at inference) is fine. */
  QhTensor desc = {0}, lo_desc = {.dtype = QH_DTYPE_F32, .shape = S0()};
  g_assert_true(qh_op_find("", "Clip")->infer(both, IN(x, &lo_desc, hi), 3, &desc, 1, NULL));
  free_all(x, lo, hi, big, vec, NULL);
  qh_graph_free(g);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define SANITIZED 1 /* unoptimised: thinner sweeps */
#else
#define SANITIZED 0
#endif

/* a and b agree within 2 ulp or 1e-6 of the row's largest |b| (rows of n), NaN for NaN */
static void assert_rows_close(const QhTensor *a, const QhTensor *b, int64_t n) {
  const float *x = a->data, *y = b->data;
  const int64_t total = qh_tensor_numel(b);
  for (int64_t r = 0; r < total; r += n) {
    float mag = 0.0f;
    for (int64_t i = r; i < r + n; i++)
      mag = isnan(y[i]) ? mag : MAX(mag, fabsf(y[i]));
    for (int64_t i = r; i < r + n; i++) {
      g_assert_cmpint(isnan(x[i]), ==, isnan(y[i]));
      if (isnan(y[i]))
        continue;
      const float d = fabsf(x[i] - y[i]);
      if (d > 1e-6f * mag && d > 2.0f * (nextafterf(fabsf(y[i]), INFINITY) - fabsf(y[i])))
        g_error("row %" G_GINT64_FORMAT " element %" G_GINT64_FORMAT ": %a, twin %a", r / n, i - r, x[i], y[i]);
    }
  }
}

/* The single-precision exp of the vector Softmax against exp in double: within 2 ulp on
 * [-104, 0] (a step of 2^-12 between -104 and -1, 2^-8 under the sanitizers; every 61st
 * float in [-1, -2^-20], every 1021st under them), below the smallest normal within one
 * subnormal step; NaN stays NaN, -inf gives 0. */
static void test_softmax_exp(void) {
  float probe = 0.0f;
  if (!qh_expf_f32_single(&probe, &probe, 0)) {
    g_test_skip("no AVX-512F");
    return;
  }
  const int step = SANITIZED ? 1 << 8 : 1 << 12;
  GArray *xs = g_array_new(FALSE, FALSE, sizeof(float));
  for (int64_t k = -104 * step; k <= -step; k++) {
    const float v = (float)k / (float)step;
    g_array_append_val(xs, v);
  }
  for (guint32 bits = 0x35800000u; bits <= 0x3f800000u; bits += SANITIZED ? 1021 : 61) {
    float v;
    memcpy(&v, &bits, 4);
    v = -v;
    g_array_append_val(xs, v);
  }
  const float special[] = {0.0f, -0.0f, -INFINITY, NAN, -103.9f, -87.4f, -0x1p-30f};
  g_array_append_vals(xs, special, G_N_ELEMENTS(special));
  const float *x = (const float *)xs->data;
  float *y = g_new(float, xs->len);
  g_assert_true(qh_expf_f32_single(x, y, xs->len));
  double worst = 0.0;
  for (guint i = 0; i < xs->len; i++) {
    if (isnan(x[i])) {
      g_assert_true(isnan(y[i]));
      continue;
    }
    const double ref = exp((double)x[i]);
    const float r = (float)ref;
    const double ulp = r < 0x1p-126f ? 0x1p-149 : (double)nextafterf(r, INFINITY) - (double)r;
    const double e = fabs((double)y[i] - ref) / ulp;
    worst = MAX(worst, r < 0x1p-126f ? 0.0 : e);
    if (r < 0x1p-126f ? e > 1.0 : e > 2.0)
      g_error("exp(%a) = %a, exp %a (%.2f ulp)", x[i], y[i], ref, e);
  }
  g_test_message("single-precision exp: at most %.2f ulp on %u values", worst, xs->len);
  g_free(y);
  g_array_free(xs, TRUE);
}

static void test_softmax(void) {
  QhGraph *g = qh_graph_new();
  /* Large values: exp(1002) overflows without max subtraction. */
  QhTensor *x = F32(S2(2, 3), 1000, 1001, 1002, -1000, -1000, -1000);
  QhTensor *y = run1(make_node(g, "Softmax", 1, 1), IN(x), 1);
  double e1 = exp(-1.0), e2 = exp(-2.0), s = 1 + e1 + e2;
  assert_close(y, (const double[]){e2 / s, e1 / s, 1 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 6, 1e-6);
  free_all(y, x, NULL);
  /* Every axis, on 1 and 2 threads. */
  GRand *r = g_rand_new_with_seed(3);
  x = random_f32(S3(4, 5, 300), r, -4, 4);
  const float *xv = x->data;
  int64_t numel = qh_tensor_numel(x);
  double *want = g_new(double, numel);
  for (int axis = -3; axis < 3; axis++) {
    QhNode *node = node_with_int(g, "Softmax", 1, "axis", axis);
    int a = axis < 0 ? axis + 3 : axis;
    int64_t n = x->shape.dims[a], stride = a == 2 ? 1 : a == 1 ? 300 : 1500;
    for (int64_t i = 0; i < numel; i++) {
      int64_t base = i - ((i / stride) % n) * stride;
      double sum = 0;
      for (int64_t m = 0; m < n; m++)
        sum += exp((double)xv[base + m * stride]);
      want[i] = exp((double)xv[i]) / sum;
    }
    QhTensor *out[2];
    for (int t = 0; t < 2; t++) {
      g_assert_true(run_op(node, IN(x), 1, &out[t], 1, t ? pool2 : pool1, FALSE, NULL));
      assert_close(out[t], want, numel, 1e-5);
    }
    g_assert_cmpmem(out[0]->data, out[0]->nbytes, out[1]->data, out[1]->nbytes);
    free_all(out[0], out[1], NULL);
  }
  g_free(want);
  /* The last-axis fast path against its twin (bit for bit without AVX-512, else within
   * 2 ulp or 1e-6 of the row's largest value, NaNs at the same places): line lengths
   * around the 16 lanes, an attention mask's -inf, a large value (expf's special lanes),
   * NaN; 21 lines, so that the fast path's blocks of 8 lines side by side end in a
   * partial one. */
  static const int64_t lens[] = {1, 15, 16, 17, 128, 197};
  for (gsize l = 0; l < G_N_ELEMENTS(lens); l++) {
    QhTensor *m = random_f32(S3(3, 7, lens[l]), r, -30, 30);
    float *mv = m->data;
    for (int64_t i = 0; i < qh_tensor_numel(m); i += 5)
      mv[i] = -INFINITY;
    mv[qh_tensor_numel(m) - 1] = 95.0f;
    if (lens[l] > 1)
      mv[lens[l]] = NAN; /* the second line is all NaN */
    QhNode *node = make_node(g, "Softmax", 1, 1);
    QhTensor *fast, *naive;
    g_assert_true(run_op(node, IN(m), 1, &fast, 1, pool2, FALSE, NULL));
    g_assert_true(run_op(node, IN(m), 1, &naive, 1, pool1, TRUE, NULL));
    if (qh_cpu_features() & QH_CPU_AVX512F)
      assert_rows_close(fast, naive, lens[l]);
    else
      g_assert_cmpmem(fast->data, fast->nbytes, naive->data, naive->nbytes);
    free_all(fast, naive, m, NULL);
  }
  expect_fail(node_with_int(g, "Softmax", 1, "axis", 3), IN(x), 1, 1, QH_ERROR_INVALID, "axis 3");
  qh_tensor_free(x);
  g_rand_free(r);
  qh_graph_free(g);
}

/* ---- BatchNormalization and ReduceMean --------------------------------------- */

static void test_batchnorm(void) {
  QhGraph *g = qh_graph_new();
  GRand *r = g_rand_new_with_seed(11);
  const int C = 3;
  QhTensor *x = random_f32(S4(2, C, 5, 7), r, -4, 4), *p[4];
  for (int i = 0; i < 4; i++) /* scale, B, mean in [-4, 4); var in [0.01, 4) */
    p[i] = random_f32(S1(C), r, i == 3 ? 0.01 : -4, 4);
  const QhTensor *const *in = IN(x, p[0], p[1], p[2], p[3]);
  const float *sc = p[0]->data, *bias = p[1]->data, *mean = p[2]->data, *var = p[3]->data;
  int64_t n = qh_tensor_numel(x);
  double *want = g_new(double, n);
  for (int variant = 0; variant < 2; variant++) { /* default epsilon on 1 thread, 0.5 on 2 */
    QhNode *bn = make_node(g, "BatchNormalization", 5, 1);
    float eps = 1e-5f;
    if (variant)
      qh_node_set_attr_float(bn, "epsilon", eps = 0.5f);
    for (int64_t i = 0; i < n; i++) {
      int c = (int)((i / 35) % C);
      want[i] = ((double)((float *)x->data)[i] - mean[c]) / sqrt((double)var[c] + eps) * sc[c] +
                bias[c];
    }
    QhTensor *y;
    g_assert_true(run_op(bn, in, 5, &y, 1, variant ? pool2 : pool1, FALSE, NULL));
    assert_close(y, want, n, 2e-6);
    qh_tensor_free(y);
  }
  g_free(want);
  /* Rank 2 (no spatial dims) works too. */
  QhTensor *x2 = F32(S2(1, C), 1, 2, 3), *one = F32(S1(C), 1, 1, 1), *zero = F32(S1(C), 0, 0, 0);
  QhNode *bn2 = make_node(g, "BatchNormalization", 5, 1);
  qh_node_set_attr_float(bn2, "epsilon", 0.0f);
  QhTensor *y2 = run1(bn2, IN(x2, one, zero, zero, one), 5);
  assert_floats(y2, 3, (const float[]){1, 2, 3});

  expect_fail(node_with_int(g, "BatchNormalization", 5, "training_mode", 1), in, 5, 1,
              QH_ERROR_UNSUPPORTED, "training_mode");
  expect_fail(make_node(g, "BatchNormalization", 5, 3), in, 5, 3, QH_ERROR_UNSUPPORTED, "output 1");
  QhNode *bn = make_node(g, "BatchNormalization", 5, 1);
  QhTensor *wrong = tensor(QH_DTYPE_F32, S1(C + 1), NULL), *x1 = tensor(QH_DTYPE_F32, S1(C), NULL);
  expect_fail(bn, IN(x, p[0], p[1], wrong, p[3]), 5, 1, QH_ERROR_INVALID, "input_mean");
  expect_fail(bn, IN(x1, p[0], p[1], p[2], p[3]), 5, 1, QH_ERROR_INVALID, "rank >= 2");
  free_all(x, p[0], p[1], p[2], p[3], x2, one, zero, y2, wrong, x1, NULL);
  g_rand_free(r);
  qh_graph_free(g);
}

/* Mean of x [2,3,4] over the axes in mask, in output order (reduced dims as 1). */
static int64_t ref_mean(const float *x, const gboolean *mask, double *out) {
  int64_t od[3] = {mask[0] ? 1 : 2, mask[1] ? 1 : 3, mask[2] ? 1 : 4};
  int64_t n = od[0] * od[1] * od[2];
  for (int64_t o = 0; o < n; o++) {
    int64_t oi[3] = {o / (od[1] * od[2]), (o / od[2]) % od[1], o % od[2]}, cnt = 0;
    double sum = 0;
    for (int64_t i = 0; i < 24; i++) {
      int64_t ii[3] = {i / 12, (i / 4) % 3, i % 4};
      if ((mask[0] || ii[0] == oi[0]) && (mask[1] || ii[1] == oi[1]) &&
          (mask[2] || ii[2] == oi[2])) {
        sum += x[i];
        cnt++;
      }
    }
    out[o] = sum / (double)cnt;
  }
  return n;
}

static void test_reduce_mean(void) {
  QhGraph *g = qh_graph_new();
  GRand *r = g_rand_new_with_seed(5);
  QhTensor *x = random_f32(S3(2, 3, 4), r, -4, 4);
  const struct {
    int n_axes, keepdims; /* keepdims -1: attribute absent */
    int64_t axes[3];
    QhShape want;
    gboolean mask[3];
  } cases[] = {
      {1, -1, {1}, S3(2, 1, 4), {FALSE, TRUE, FALSE}},
      {1, 0, {1}, S2(2, 4), {FALSE, TRUE, FALSE}},
      {2, 1, {-1, 0}, S3(1, 3, 1), {TRUE, FALSE, TRUE}},
      {2, 0, {2, 1}, S1(2), {FALSE, TRUE, TRUE}},
      {0, -1, {0}, S3(1, 1, 1), {TRUE, TRUE, TRUE}},
      {0, 0, {0}, S0(), {TRUE, TRUE, TRUE}},
      {3, 0, {0, 1, 2}, S0(), {TRUE, TRUE, TRUE}},
  };
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++)
    for (int as_input = 0; as_input < 1 + (cases[k].n_axes > 0); as_input++) {
      /* Opset 13 takes axes as an attribute, opset 18 as a (constant) input. */
      QhNode *node = make_node(g, "ReduceMean", 1 + as_input, 1);
      QhTensor *axes = as_input ? tensor(QH_DTYPE_S64, S1(cases[k].n_axes), cases[k].axes) : NULL;
      if (!as_input && cases[k].n_axes > 0)
        qh_node_set_attr_ints(node, "axes", cases[k].n_axes, cases[k].axes);
      if (cases[k].keepdims >= 0)
        qh_node_set_attr_int(node, "keepdims", cases[k].keepdims);
      QhTensor *y = run1(node, IN(x, axes), 1 + as_input);
      g_assert_true(qh_shape_equal(&y->shape, &cases[k].want));
      double want[24];
      assert_close(y, want, ref_mean(x->data, cases[k].mask, want), 1e-6);
      free_all(y, axes, NULL);
    }
  /* Opset 18: an empty axes input with noop_with_empty_axes is the identity. */
  QhNode *noop = node_with_int(g, "ReduceMean", 2, "noop_with_empty_axes", 1);
  QhTensor *empty = tensor(QH_DTYPE_S64, S1(0), NULL);
  QhTensor *y = run1(noop, IN(x, empty), 2);
  g_assert_true(qh_shape_equal(&y->shape, &x->shape));
  g_assert_cmpmem(y->data, y->nbytes, x->data, x->nbytes);
  qh_tensor_free(y);
  /* A computed axes input cannot be inferred. */
  QhTensor axes_desc = {.dtype = QH_DTYPE_S64, .shape = S1(1)};
  expect_fail(noop, IN(x, &axes_desc), 2, 1, QH_ERROR_UNSUPPORTED, "constant");
  expect_fail(node_with_ints(g, "ReduceMean", "axes", 2, (const int64_t[]){1, -2}), IN(x), 1, 1,
              QH_ERROR_INVALID, "twice");
  expect_fail(node_with_ints(g, "ReduceMean", "axes", 1, (const int64_t[]){3}), IN(x), 1, 1,
              QH_ERROR_INVALID, "axis 3");
  /* The mean over an empty axis is NaN. */
  QhTensor *z = tensor(QH_DTYPE_F32, S2(2, 0), NULL);
  y = run1(node_with_ints(g, "ReduceMean", "axes", 1, (const int64_t[]){1}), IN(z), 1);
  assert_floats(y, 2, (const float[]){NAN, NAN});
  free_all(y, z, empty, x, NULL);
  g_rand_free(r);
  qh_graph_free(g);
}

/* DynamicQuantizeLinear's vector path (AVX-512F, or SSE2: unit/test_kernels_pointwise/sse2)
 * gives its scalar twin's bytes, scale and zero point:
 * random data (a tail past the vector width), exact half-step ties, NaN, a range
 * without negative values, several blocks split over two threads, values a few ulp
 * either side of half steps (where multiplying by 1 / scale could round the other way:
 * the vector loops must divide there), and QuantizeLinear's own example of that
 * (scale 0.3: -35.25 / 0.3 rounds to -117, -35.25 * (1 / 0.3) to -118). */
static void test_dql_matches_twin(void) {
  QhGraph *g = qh_graph_new();
  GRand *r = g_rand_new_with_seed(13);
  QhNode *node = make_node(g, "DynamicQuantizeLinear", 1, 3);
  for (int form = 0; form < 6; form++) {
    /* form 3: several blocks of the threaded loops, on two threads */
    int64_t n = form == 3 ? 3 * 16384 + 1001 : 1003;
    QhTensor *x = random_f32(S1(n), r, form == 2 ? 0.5 : -3, 4);
    float *v = x->data;
    if (form == 1) { /* range [-2.55, 0]: scale 0.01, half steps are ties */
      for (int64_t i = 0; i < 1003; i++)
        v[i] = -(float)(i % 511) * 0.005f;
      v[7] = NAN;
    }
    if (form == 3) /* a NaN and a -0 in later blocks than the first */
      v[20000] = NAN, v[40000] = -0.0f;
    if (form == 4) { /* range [0, 2.55]: every other value within 3 ulp of a half step */
      float step = 2.55f / 255.0f;
      for (int64_t i = 1; i < n; i += 2) {
        v[i] = ((float)(i % 254) + 0.5f) * step;
        for (int k = (int)(i % 7) - 3; k != 0; k += k < 0 ? 1 : -1)
          v[i] = nextafterf(v[i], k < 0 ? 0.0f : 3.0f);
      }
      v[0] = 2.55f;
    }
    if (form == 5) { /* range [-76.5, 0]: scale 0.3, zero point 255 */
      for (int64_t i = 0; i < n; i++)
        v[i] = -fabsf(v[i]) * 19.0f;
      v[0] = -76.5f, v[5] = 0.0f;
      for (int64_t i = 1; i + 1 < n; i += 37)
        v[i] = -35.25f, v[i + 1] = -17.25f;
    }
    QhTensor *fast[3], *twin[3];
    GError *error = NULL;
    run_op(node, IN(x), 1, fast, 3, form == 3 ? pool2 : pool1, FALSE, &error);
    g_assert_no_error(error);
    run_op(node, IN(x), 1, twin, 3, pool1, TRUE, &error);
    g_assert_no_error(error);
    for (int o = 0; o < 3; o++)
      g_assert_cmpmem(fast[o]->data, fast[o]->nbytes, twin[o]->data, twin[o]->nbytes);
    free_all(x, fast[0], fast[1], fast[2], twin[0], twin[1], twin[2], NULL);
  }
  g_rand_free(r);
  qh_graph_free(g);
}

/* ---- QuantizeLinear / DequantizeLinear --------------------------------------- */

static void test_quantize_rounding(void) {
  QhGraph *g = qh_graph_new();
  QhNode *q = make_node(g, "QuantizeLinear", 3, 1);
  /* x / scale = 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5: ties go to even. */
  QhTensor *x = F32(S1(7), 1, 3, 5, -1, -3, -5, 7), *s = F32(S0(), 2);
  QhTensor *z = tensor(QH_DTYPE_S8, S0(), (const int8_t[]){0});
  QhTensor *y = run1(q, IN(x, s, z), 3);
  g_assert_cmpint(y->dtype, ==, QH_DTYPE_S8);
  const int8_t want[] = {0, 2, 2, 0, -2, -2, 4};
  g_assert_cmpmem(y->data, y->nbytes, want, sizeof want);
  qh_tensor_free(y);
  /* Exact division, not multiplication by the reciprocal: with scale 0.3f,
   * -35.25f / 0.3f = -117.49999 (-> -117) while -35.25f * (1 / 0.3f) = -117.5 (-> -118);
   * -17.25f likewise gives -57 rather than -58. */
  QhTensor *s3 = F32(S1(1), 0.3f), *x1 = F32(S1(2), -35.25f, -17.25f);
  y = run1(q, IN(x1, s3, z), 3);
  g_assert_cmpint(((int8_t *)y->data)[0], ==, -117);
  g_assert_cmpint(((int8_t *)y->data)[1], ==, -57);
  qh_tensor_free(y);
  y = run1(make_node(g, "QuantizeLinear", 2, 1), IN(x1, s3), 2); /* no zero point: uint8 */
  g_assert_cmpint(y->dtype, ==, QH_DTYPE_U8);
  g_assert_cmpint(((uint8_t *)y->data)[0], ==, 0);
  free_all(y, x, s, z, s3, x1, NULL);
  qh_graph_free(g);
}

static void test_quantize_saturation(void) {
  QhGraph *g = qh_graph_new();
  QhNode *q = make_node(g, "QuantizeLinear", 3, 1);
  QhTensor *s = F32(S0(), 1);
  QhTensor *x =
      F32(S1(10), -1000, -10.6f, -10.4f, 0, 244.4f, 244.6f, 1000, INFINITY, -INFINITY, NAN);
  QhTensor *zu = tensor(QH_DTYPE_U8, S0(), (const uint8_t[]){10});
  QhTensor *zs = tensor(QH_DTYPE_S8, S1(1), (const int8_t[]){-5});
  QhTensor *y = run1(q, IN(x, s, zu), 3);
  const uint8_t wu[] = {0, 0, 0, 10, 254, 255, 255, 255, 0, 10}; /* NaN -> the zero point */
  g_assert_cmpmem(y->data, y->nbytes, wu, sizeof wu);
  qh_tensor_free(y);
  y = run1(q, IN(x, s, zs), 3);
  const int8_t ws[] = {-128, -16, -15, -5, 127, 127, 127, 127, -128, -5};
  g_assert_cmpmem(y->data, y->nbytes, ws, sizeof ws);
  free_all(y, x, s, zu, zs, NULL);
  qh_graph_free(g);
}

static void test_qdq_per_axis(void) {
  QhGraph *g = qh_graph_new();
  const float sv[] = {1, 2, 4};
  const uint8_t zv[] = {0, 10, 20};
  QhTensor *s = tensor(QH_DTYPE_F32, S1(3), sv), *z = tensor(QH_DTYPE_U8, S1(3), zv);
  /* axis 0 on [3, 2]: 3/2 = 1.5 -> 2, 5/2 = 2.5 -> 2, 3/4 -> 1, 6/4 = 1.5 -> 2. */
  QhTensor *x0 = F32(S2(3, 2), 3, -3, 3, 5, 3, 6);
  QhTensor *y = run1(node_with_int(g, "QuantizeLinear", 3, "axis", 0), IN(x0, s, z), 3);
  const uint8_t w0[] = {3, 0, 12, 12, 21, 22};
  g_assert_cmpmem(y->data, y->nbytes, w0, sizeof w0);
  QhTensor *back = run1(node_with_int(g, "DequantizeLinear", 3, "axis", -2), IN(y, s, z), 3);
  assert_floats(back, 6, (const float[]){3, 0, 4, 4, 4, 8}); /* (q - z) * s */
  free_all(back, y, NULL);
  /* Default axis 1 on [2, 3, 2]. */
  QhTensor *x1 = F32(S3(2, 3, 2), -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  QhNode *q1 = make_node(g, "QuantizeLinear", 3, 1);
  y = run1(q1, IN(x1, s, z), 3);
  for (int i = 0; i < 12; i++) {
    int c = (i / 2) % 3;
    double v = nearbyint((double)(i - 4) / sv[c]) + zv[c];
    g_assert_cmpint(((uint8_t *)y->data)[i], ==, (int)(v < 0 ? 0 : v > 255 ? 255 : v));
  }
  qh_tensor_free(y);
  /* Length and rank mismatches. */
  QhTensor *s4 = F32(S1(4), 1, 1, 1, 1), *z2 = tensor(QH_DTYPE_U8, S1(2), NULL);
  QhTensor *s2d = tensor(QH_DTYPE_F32, S2(3, 1), sv);
  expect_fail(q1, IN(x1, s4, NULL), 3, 1, QH_ERROR_INVALID, "y_scale has 4 elements but axis 1");
  expect_fail(q1, IN(x1, s, z2), 3, 1, QH_ERROR_INVALID, "y_zero_point has 2 elements");
  expect_fail(node_with_int(g, "DequantizeLinear", 3, "axis", 0), IN(z2, s, NULL), 3, 1,
              QH_ERROR_INVALID, "x_scale has 3");
  expect_fail(q1, IN(x1, s2d, NULL), 3, 1, QH_ERROR_UNSUPPORTED, "rank 2");
  free_all(s, z, x0, x1, s4, z2, s2d, NULL);
  qh_graph_free(g);
}

static void test_dequantize(void) {
  QhGraph *g = qh_graph_new();
  QhNode *dq = make_node(g, "DequantizeLinear", 3, 1);
  /* An int32 bias: scale = input scale * weight scale, zero point 0 or absent. */
  const int32_t bv[] = {-1000, 0, 123456, INT32_MIN};
  QhTensor *b = tensor(QH_DTYPE_S32, S1(4), bv), *s = F32(S0(), 0.001f);
  QhTensor *tz0 = tensor(QH_DTYPE_S32, S0(), (const int32_t[]){0});
  QhTensor *tz1 = tensor(QH_DTYPE_S32, S0(), (const int32_t[]){7});
  float want[4];
  for (int i = 0; i < 4; i++)
    want[i] = (float)bv[i] * 0.001f;
  QhTensor *y = run1(make_node(g, "DequantizeLinear", 2, 1), IN(b, s), 2);
  assert_floats(y, 4, want);
  qh_tensor_free(y);
  QhTensor *y0 = run1(dq, IN(b, s, tz0), 3);
  assert_floats(y0, 4, want);
  expect_fail(dq, IN(b, s, tz1), 3, 1, QH_ERROR_INVALID, "must be 0");
  /* int8 with a zero point; dtype mismatch between x and zero point; float x. */
  QhTensor *x = tensor(QH_DTYPE_S8, S1(4), (const int8_t[]){-128, -1, 0, 127});
  QhTensor *z = tensor(QH_DTYPE_S8, S0(), (const int8_t[]){-1}), *sh = F32(S0(), 0.5f);
  y = run1(dq, IN(x, sh, z), 3);
  assert_floats(y, 4, (const float[]){-63.5f, 0, 0.5f, 64});
  QhTensor *f = tensor(QH_DTYPE_F32, S1(4), NULL);
  expect_fail(dq, IN(x, sh, tz0), 3, 1, QH_ERROR_INVALID, "must match");
  expect_fail(dq, IN(f, sh, NULL), 3, 1, QH_ERROR_UNSUPPORTED, "float32");
  free_all(y, y0, b, s, tz0, tz1, x, z, sh, f, NULL);
  qh_graph_free(g);
}

/* Large tensors go through the thread pool: two threads must match one exactly, and
 * a per-channel quantize/dequantize round trip stays within half a step. */
static void test_threads_match(void) {
  QhGraph *g = qh_graph_new();
  GRand *r = g_rand_new_with_seed(9);
  QhTensor *x = random_f32(S4(2, 16, 40, 40), r, -4, 4), *s = random_f32(S1(16), r, 0.01, 0.2);
  QhTensor *z = tensor(QH_DTYPE_S8, S1(16), NULL), *bn[4];
  for (int c = 0; c < 16; c++)
    ((int8_t *)z->data)[c] = (int8_t)(c * 5 - 40);
  for (int i = 0; i < 4; i++)
    bn[i] = random_f32(S1(16), r, i == 3 ? 0.01 : -4, 4);
  const char *ops[] = {"Relu", "Sigmoid", "Tanh", "HardSwish", "Softmax", "QuantizeLinear",
                       "BatchNormalization"};
  for (size_t k = 0; k < G_N_ELEMENTS(ops); k++) {
    const QhTensor *const *in = k == 5 ? IN(x, s, z) : k == 6 ? IN(x, bn[0], bn[1], bn[2], bn[3])
                                                              : IN(x);
    int n_in = k == 5 ? 3 : k == 6 ? 5 : 1;
    QhNode *node = make_node(g, ops[k], n_in, 1);
    QhTensor *y1, *y2;
    g_assert_true(run_op(node, in, n_in, &y1, 1, pool1, FALSE, NULL));
    g_assert_true(run_op(node, in, n_in, &y2, 1, pool2, FALSE, NULL));
    g_assert_cmpmem(y1->data, y1->nbytes, y2->data, y2->nbytes);
    if (k == 5) {
      QhTensor *back = run1(make_node(g, "DequantizeLinear", 3, 1), IN(y1, s, z), 3);
      for (int64_t i = 0; i < qh_tensor_numel(x); i++) {
        int c = (int)((i / 1600) % 16);
        float sc = ((float *)s->data)[c], xv = ((float *)x->data)[i];
        float lo = (float)(-128 - ((int8_t *)z->data)[c]) * sc;
        float hi = (float)(127 - ((int8_t *)z->data)[c]) * sc;
        float clamped = xv < lo ? lo : xv > hi ? hi : xv;
        g_assert_cmpfloat(fabsf(((float *)back->data)[i] - clamped), <=, sc * 0.5f + 1e-6f);
      }
      qh_tensor_free(back);
    }
    free_all(y1, y2, NULL);
  }
  free_all(x, s, z, bn[0], bn[1], bn[2], bn[3], NULL);
  g_rand_free(r);
  qh_graph_free(g);
}

static void test_registry(void) {
  const char *names[] = {"Add",     "Sub",  "Mul",         "Div",       "Relu",    "Clip",
                         "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Softmax",
                         "BatchNormalization", "ReduceMean", "QuantizeLinear", "DequantizeLinear"};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
    const QhOpDef *d = qh_op_find("ai.onnx", names[i]);
    g_assert_true(d != NULL && d->infer != NULL && d->run != NULL);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  pool1 = qh_thread_pool_new(1);
  pool2 = qh_thread_pool_new(2);
  g_test_add_func("/kernels/registry", test_registry);
  g_test_add_func("/kernels/elementwise/broadcast-fixed", test_broadcast_fixed);
  g_test_add_func("/kernels/elementwise/broadcast-random", test_broadcast_random);
  g_test_add_func("/kernels/elementwise/int-arith", test_int_arith);
  g_test_add_func("/kernels/elementwise/int-div", test_int_div);
  g_test_add_func("/kernels/elementwise/errors", test_elementwise_errors);
  g_test_add_func("/kernels/activation/pointwise", test_activations);
  g_test_add_func("/kernels/activation/clip", test_clip);
  g_test_add_func("/kernels/activation/softmax", test_softmax);
  g_test_add_func("/kernels/activation/softmax_exp", test_softmax_exp);
  g_test_add_func("/kernels/norm/batchnorm", test_batchnorm);
  g_test_add_func("/kernels/reduce/mean", test_reduce_mean);
  g_test_add_func("/kernels/dynamic_quantize_linear/matches_twin", test_dql_matches_twin);
  g_test_add_func("/kernels/qdq/rounding", test_quantize_rounding);
  g_test_add_func("/kernels/qdq/saturation", test_quantize_saturation);
  g_test_add_func("/kernels/qdq/per-axis", test_qdq_per_axis);
  g_test_add_func("/kernels/qdq/dequantize", test_dequantize);
  g_test_add_func("/kernels/threads", test_threads_match);
  int rc = g_test_run();
  qh_thread_pool_free(pool1);
  qh_thread_pool_free(pool2);
  return rc;
}
