/* Unit tests of the pointwise, normalisation, reduction and Q/DQ reference kernels:
 * each op is driven through its QhOpDef (infer, allocate, run) on nodes built in a
 * QhGraph; results are compared with expectations computed here independently
 * (own broadcast indexing, double-precision formulas, hand-worked values), the fast
 * elementwise paths with their naive twins, and one thread with two. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "exec/op.h"

static QhThreadPool *pool1, *pool2;

/* ---- fixtures ---------------------------------------------------------------- */

/* A node of op with n_in inputs (present[i] FALSE leaves slot i omitted) and n_out
 * outputs, in graph g. */
static QhNode *make_node_opt(QhGraph *g, const char *op, int n_in, const gboolean *present,
                             int n_out) {
  static int counter;
  int ins[8], outs[8];
  for (int i = 0; i < n_in; i++) {
    char *name = g_strdup_printf("v%d", counter++);
    ins[i] = present == NULL || present[i] ? qh_graph_add_value(g, name, NULL)->id : -1;
    g_free(name);
  }
  for (int i = 0; i < n_out; i++) {
    char *name = g_strdup_printf("v%d", counter++);
    outs[i] = qh_graph_add_value(g, name, NULL)->id;
    g_free(name);
  }
  char *name = g_strdup_printf("n%d", counter++);
  QhNode *n = qh_graph_add_node(g, name, op, "", n_in, ins, n_out, outs, NULL);
  g_free(name);
  g_assert_nonnull(n);
  return n;
}

static QhNode *make_node(QhGraph *g, const char *op, int n_in, int n_out) {
  return make_node_opt(g, op, n_in, NULL, n_out);
}

static QhShape shp(int rank, ...) {
  QhShape s = {.rank = rank};
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++)
    s.dims[i] = va_arg(ap, int64_t);
  va_end(ap);
  return s;
}
#define S0() shp(0)
#define S1(a) shp(1, (int64_t)(a))
#define S2(a, b) shp(2, (int64_t)(a), (int64_t)(b))
#define S3(a, b, c) shp(3, (int64_t)(a), (int64_t)(b), (int64_t)(c))
#define S4(a, b, c, d) shp(4, (int64_t)(a), (int64_t)(b), (int64_t)(c), (int64_t)(d))

static QhTensor *tensor(QhDType dt, QhShape s, const void *values) {
  QhTensor *t = qh_tensor_new(dt, &s, NULL);
  g_assert_nonnull(t);
  if (values != NULL && t->nbytes > 0)
    memcpy(t->data, values, t->nbytes);
  return t;
}

static QhTensor *random_f32(QhShape s, GRand *r, gboolean nonzero) {
  QhTensor *t = tensor(QH_DTYPE_F32, s, NULL);
  float *p = t->data;
  for (int64_t i = 0; i < qh_tensor_numel(t); i++) {
    p[i] = (float)g_rand_double_range(r, -4.0, 4.0);
    if (nonzero && fabsf(p[i]) < 0.25f)
      p[i] += 1.0f;
  }
  return t;
}

/* Infer and run node on inputs; *out gets n_out new tensors (caller frees). */
static gboolean run_op(const QhNode *node, const QhTensor *const *in, int n_in, QhTensor **out,
                       int n_out, QhThreadPool *pool, gboolean naive, GError **error) {
  const QhOpDef *def = qh_op_find("", node->op_type);
  g_assert_nonnull(def);
  g_assert_cmpint(n_in, >=, def->min_inputs);
  g_assert_cmpint(n_in, <=, def->max_inputs);
  QhTensor desc[8];
  memset(desc, 0, sizeof desc);
  for (int i = 0; i < n_out; i++)
    out[i] = NULL;
  if (!def->infer(node, in, n_in, desc, n_out, error))
    return FALSE;
  for (int i = 0; i < n_out; i++) {
    out[i] = qh_tensor_new(desc[i].dtype, &desc[i].shape, NULL);
    g_assert_nonnull(out[i]);
    /* Poison the output: run must write every element. */
    if (out[i]->nbytes > 0)
      memset(out[i]->data, 0xA5, out[i]->nbytes);
  }
  QhExecContext ctx = {.pool = pool};
  QhOpRunFn fn = naive && def->run_naive ? def->run_naive : def->run;
  if (!fn(&ctx, node, in, n_in, out, n_out, error)) {
    for (int i = 0; i < n_out; i++)
      g_clear_pointer(&out[i], qh_tensor_free);
    return FALSE;
  }
  return TRUE;
}

/* Run a one-output node that must succeed; returns the output. */
static QhTensor *run1(const QhNode *node, const QhTensor *const *in, int n_in) {
  QhTensor *out;
  GError *error = NULL;
  gboolean ok = run_op(node, in, n_in, &out, 1, pool1, FALSE, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  return out;
}

/* Infer or run must fail with code and a message containing fragment. */
static void expect_fail(const QhNode *node, const QhTensor *const *in, int n_in, int n_out,
                        QhErrorCode code, const char *fragment) {
  QhTensor *out[8];
  GError *error = NULL;
  g_assert_false(run_op(node, in, n_in, out, n_out, pool1, FALSE, &error));
  g_assert_error(error, QH_ERROR, code);
  if (strstr(error->message, fragment) == NULL)
    g_error("message '%s' lacks '%s'", error->message, fragment);
  g_assert_nonnull(strstr(error->message, node->name));
  g_error_free(error);
}

static void assert_close(const float *got, const double *want, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - want[i]);
    if (!(err <= tol * (1.0 + fabs(want[i]))))
      g_error("element %" G_GINT64_FORMAT ": got %.9g, want %.9g", i, got[i], want[i]);
  }
}

static void assert_floats(const QhTensor *t, int64_t n, const float *want) {
  g_assert_cmpint(qh_tensor_numel(t), ==, n);
  for (int64_t i = 0; i < n; i++)
    if (((const float *)t->data)[i] != want[i] &&
        !(isnan(want[i]) && isnan(((const float *)t->data)[i])))
      g_error("element %" G_GINT64_FORMAT ": got %.9g, want %.9g", i,
              ((const float *)t->data)[i], want[i]);
}

/* ---- elementwise ------------------------------------------------------------- */

static const char *const binops[] = {"Add", "Sub", "Mul", "Div"};

static float ref_f32(int op, float a, float b) {
  return op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b;
}

static int64_t ref_s64(int op, int64_t a, int64_t b) {
  return op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b;
}

/* Offset in an operand of shape s of the output index idx (right-aligned). */
static int64_t bcast_offset(const QhShape *s, const QhShape *out, const int64_t *idx) {
  int64_t off = 0;
  for (int d = 0; d < s->rank; d++) {
    int od = d + out->rank - s->rank;
    off = off * s->dims[d] + (s->dims[d] == 1 ? 0 : idx[od]);
  }
  return off;
}

/* Run op on a and b with fast/naive and 1/2 threads; all must equal the expectation
 * computed here element by element. */
static void check_binop(int op, const QhTensor *a, const QhTensor *b) {
  QhGraph *g = qh_graph_new();
  QhNode *node = make_node(g, binops[op], 2, 1);
  const QhTensor *in[] = {a, b};
  QhTensor *want = NULL;
  for (int variant = 0; variant < 4; variant++) {
    QhTensor *out;
    GError *error = NULL;
    g_assert_true(run_op(node, in, 2, &out, 1, variant & 1 ? pool2 : pool1, variant >= 2, &error));
    g_assert_no_error(error);
    if (want == NULL) {
      want = qh_tensor_copy(out, NULL);
      int64_t n = qh_tensor_numel(out), idx[QH_MAX_RANK];
      for (int64_t i = 0; i < n; i++) {
        int64_t rem = i;
        for (int d = out->shape.rank - 1; d >= 0; d--) {
          idx[d] = rem % out->shape.dims[d];
          rem /= out->shape.dims[d];
        }
        int64_t ia = bcast_offset(&a->shape, &out->shape, idx);
        int64_t ib = bcast_offset(&b->shape, &out->shape, idx);
        if (a->dtype == QH_DTYPE_F32)
          ((float *)want->data)[i] = ref_f32(op, ((float *)a->data)[ia], ((float *)b->data)[ib]);
        else if (a->dtype == QH_DTYPE_S64)
          ((int64_t *)want->data)[i] =
              ref_s64(op, ((int64_t *)a->data)[ia], ((int64_t *)b->data)[ib]);
        else
          ((int32_t *)want->data)[i] =
              (int32_t)ref_s64(op, ((int32_t *)a->data)[ia], ((int32_t *)b->data)[ib]);
      }
    }
    g_assert_true(qh_shape_equal(&out->shape, &want->shape));
    g_assert_cmpint(out->dtype, ==, a->dtype);
    if (out->nbytes > 0 && memcmp(out->data, want->data, out->nbytes) != 0) {
      char *sa = qh_shape_to_string(&a->shape), *sb = qh_shape_to_string(&b->shape);
      g_error("%s %s %s (variant %d) differs from the expectation", binops[op], sa, sb, variant);
    }
    qh_tensor_free(out);
  }
  qh_tensor_free(want);
  qh_graph_free(g);
}

static void check_pair(GRand *r, QhShape sa, QhShape sb) {
  for (int op = 0; op < 4; op++) {
    QhTensor *a = random_f32(sa, r, FALSE), *b = random_f32(sb, r, op == 3);
    check_binop(op, a, b);
    check_binop(op, b, a);
    qh_tensor_free(a);
    qh_tensor_free(b);
  }
}

static void test_broadcast_fixed(void) {
  GRand *r = g_rand_new_with_seed(1);
  const QhShape pairs[][2] = {
      {S4(2, 3, 4, 5), S4(2, 3, 4, 5)}, {S4(2, 3, 4, 5), S0()},       {S4(2, 3, 4, 5), S1(1)},
      {S4(2, 3, 4, 5), S3(3, 1, 1)},    {S2(7, 9), S1(9)},            {S2(7, 9), S2(7, 1)},
      {S3(2, 3, 4), S3(1, 3, 1)},       {S3(2, 1, 4), S2(3, 1)},      {S3(2, 3, 4), S2(3, 4)},
      {S4(2, 3, 4, 5), S4(1, 3, 1, 5)}, {S1(1), S3(1, 1, 1)},         {S0(), S0()},
      {S2(0, 3), S1(3)},                {S3(2, 0, 4), S3(2, 1, 4)},   {S2(0, 3), S0()},
      {S4(4, 64, 9, 9), S3(64, 1, 1)},  {S2(300, 100), S2(1, 100)}, {S3(64, 3, 100), S3(64, 1, 100)},
      {S2(40000, 1), S1(1)},            {S4(2, 1, 3, 1), S4(1, 4, 1, 5)}, {S2(1, 5), S2(6, 1)},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(pairs); i++)
    check_pair(r, pairs[i][0], pairs[i][1]);
  g_rand_free(r);
}

static void test_broadcast_random(void) {
  GRand *r = g_rand_new_with_seed(42);
  static const int64_t choices[] = {0, 1, 1, 2, 3, 5};
  for (int it = 0; it < 150; it++) {
    QhShape out = {.rank = g_rand_int_range(r, 0, 6)}, sa, sb;
    gboolean allow_zero = g_rand_int_range(r, 0, 8) == 0;
    for (int d = 0; d < out.rank; d++)
      out.dims[d] = choices[g_rand_int_range(r, allow_zero ? 0 : 1, 6)];
    QhShape *s[] = {&sa, &sb};
    for (int k = 0; k < 2; k++) {
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
    for (int dt = 0; dt < 2; dt++)
      for (int op = 0; op < 4; op++) {
        QhDType t = dt ? QH_DTYPE_S32 : QH_DTYPE_S64;
        QhTensor *a = tensor(t, pairs[p][0], NULL), *b = tensor(t, pairs[p][1], NULL);
        for (int k = 0; k < 2; k++) {
          QhTensor *x = k ? b : a;
          for (int64_t i = 0; i < qh_tensor_numel(x); i++) {
            int32_t v = g_rand_int_range(r, -50, 50);
            v = v == 0 ? 3 : v;
            if (t == QH_DTYPE_S64)
              ((int64_t *)x->data)[i] = v;
            else
              ((int32_t *)x->data)[i] = v;
          }
        }
        check_binop(op, a, b);
        qh_tensor_free(a);
        qh_tensor_free(b);
      }
  g_rand_free(r);
}

static void test_int_div(void) {
  QhGraph *g = qh_graph_new();
  QhNode *div = make_node(g, "Div", 2, 1);
  const int64_t a64[] = {-7, 7, -7, 7, 0, INT64_MIN, 6};
  const int64_t b64[] = {2, -2, -2, 2, -5, -1, 3};
  const int64_t want64[] = {-3, -3, 3, 3, 0, INT64_MIN, 2};
  QhTensor *a = tensor(QH_DTYPE_S64, S1(7), a64), *b = tensor(QH_DTYPE_S64, S1(7), b64);
  const QhTensor *in[] = {a, b};
  for (int naive = 0; naive < 2; naive++) {
    QhTensor *out;
    g_assert_true(run_op(div, in, 2, &out, 1, pool1, naive, NULL));
    g_assert_cmpmem(out->data, out->nbytes, want64, sizeof want64);
    qh_tensor_free(out);
  }
  ((int64_t *)b->data)[3] = 0;
  expect_fail(div, in, 2, 1, QH_ERROR_INVALID, "division by zero");
  QhTensor *out;
  GError *error = NULL;
  g_assert_false(run_op(div, in, 2, &out, 1, pool1, TRUE, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_clear_error(&error);

  const int32_t a32[] = {-9, INT32_MIN, 9}, b32[] = {4, -1, -4}, want32[] = {-2, INT32_MIN, -2};
  QhTensor *c = tensor(QH_DTYPE_S32, S1(3), a32), *d = tensor(QH_DTYPE_S32, S1(3), b32);
  const QhTensor *in32[] = {c, d};
  out = run1(div, in32, 2);
  g_assert_cmpmem(out->data, out->nbytes, want32, sizeof want32);
  qh_tensor_free(out);
  const int32_t zero = 0;
  QhTensor *z = tensor(QH_DTYPE_S32, S0(), &zero);
  const QhTensor *inz[] = {c, z};
  expect_fail(div, inz, 2, 1, QH_ERROR_INVALID, "division by zero");
  /* Overflow wraps instead of being undefined (UBSan watches this). */
  QhNode *mul = make_node(g, "Mul", 2, 1);
  const int64_t big[] = {INT64_MAX}, two[] = {2};
  QhTensor *e = tensor(QH_DTYPE_S64, S1(1), big), *f = tensor(QH_DTYPE_S64, S0(), two);
  const QhTensor *inm[] = {e, f};
  out = run1(mul, inm, 2);
  g_assert_cmpint(((int64_t *)out->data)[0], ==, -2);
  qh_tensor_free(out);
  for (QhTensor **t = (QhTensor *[]){a, b, c, d, z, e, f, NULL}; *t; t++)
    qh_tensor_free(*t);
  qh_graph_free(g);
}

static void test_elementwise_errors(void) {
  QhGraph *g = qh_graph_new();
  QhNode *add = make_node(g, "Add", 2, 1);
  QhTensor *a = tensor(QH_DTYPE_F32, S2(2, 3), NULL), *b = tensor(QH_DTYPE_F32, S1(4), NULL);
  QhTensor *c = tensor(QH_DTYPE_S64, S2(2, 3), NULL), *u = tensor(QH_DTYPE_U8, S2(2, 3), NULL);
  expect_fail(add, (const QhTensor *[]){a, b}, 2, 1, QH_ERROR_INVALID, "do not broadcast");
  expect_fail(add, (const QhTensor *[]){a, c}, 2, 1, QH_ERROR_INVALID, "types differ");
  expect_fail(add, (const QhTensor *[]){u, u}, 2, 1, QH_ERROR_UNSUPPORTED, "uint8");
  expect_fail(add, (const QhTensor *[]){a, NULL}, 2, 1, QH_ERROR_INVALID, "missing");
  qh_tensor_free(a);
  qh_tensor_free(b);
  qh_tensor_free(c);
  qh_tensor_free(u);
  qh_graph_free(g);
}

/* ---- activations ------------------------------------------------------------- */

static const float act_x[] = {-1000.0f, -6.0f, -3.0f, -2.5f, -1.0f, -0.5f, 0.0f,
                              0.5f,     1.0f,  2.5f,  3.0f,  4.0f,  100.0f};
#define N_ACT ((int64_t)G_N_ELEMENTS(act_x))

static QhTensor *act_run(QhNode *node) {
  QhTensor *x = tensor(QH_DTYPE_F32, S1(N_ACT), act_x);
  const QhTensor *in[] = {x};
  QhTensor *y = run1(node, in, 1);
  qh_tensor_free(x);
  return y;
}

static void test_activations_exact(void) {
  QhGraph *g = qh_graph_new();
  float want[N_ACT];
  QhTensor *y;

  y = act_run(make_node(g, "Relu", 1, 1));
  for (int i = 0; i < N_ACT; i++)
    want[i] = act_x[i] > 0 ? act_x[i] : 0.0f;
  assert_floats(y, N_ACT, want);
  qh_tensor_free(y);

  y = act_run(make_node(g, "LeakyRelu", 1, 1));
  for (int i = 0; i < N_ACT; i++)
    want[i] = act_x[i] >= 0 ? act_x[i] : 0.01f * act_x[i];
  assert_floats(y, N_ACT, want);
  qh_tensor_free(y);
  QhNode *leaky = make_node(g, "LeakyRelu", 1, 1);
  qh_node_set_attr_float(leaky, "alpha", 0.25f);
  y = act_run(leaky);
  g_assert_cmpfloat(((float *)y->data)[4], ==, -0.25f);
  g_assert_cmpfloat(((float *)y->data)[8], ==, 1.0f);
  qh_tensor_free(y);

  /* HardSigmoid: 0 below -2.5, 1 above 2.5, 0.2x + 0.5 between. */
  y = act_run(make_node(g, "HardSigmoid", 1, 1));
  const float hs[N_ACT] = {0, 0, 0, 0, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 1, 1, 1, 1};
  assert_close(y->data, (const double[]){0, 0, 0, 0, 0.3, 0.4, 0.5, 0.6, 0.7, 1, 1, 1, 1},
               N_ACT, 1e-7);
  g_assert_cmpfloat(((float *)y->data)[3], ==, hs[3]);
  g_assert_cmpfloat(((float *)y->data)[9], ==, hs[9]);
  qh_tensor_free(y);
  QhNode *hs2 = make_node(g, "HardSigmoid", 1, 1);
  qh_node_set_attr_float(hs2, "alpha", 0.5f);
  qh_node_set_attr_float(hs2, "beta", 0.25f);
  y = act_run(hs2);
  g_assert_cmpfloat(((float *)y->data)[5], ==, 0.0f);  /* -0.5 * 0.5 + 0.25 */
  g_assert_cmpfloat(((float *)y->data)[8], ==, 0.75f); /* 1 * 0.5 + 0.25 */
  g_assert_cmpfloat(((float *)y->data)[9], ==, 1.0f);
  qh_tensor_free(y);

  /* HardSwish: 0 at and below -3, x at and above 3, x (x + 3) / 6 between. */
  y = act_run(make_node(g, "HardSwish", 1, 1));
  double hw[N_ACT];
  for (int i = 0; i < N_ACT; i++) {
    double x = act_x[i];
    hw[i] = x <= -3 ? 0 : x >= 3 ? x : x * (x + 3) / 6;
  }
  assert_close(y->data, hw, N_ACT, 1e-7);
  g_assert_cmpfloat(((float *)y->data)[2], ==, 0.0f);
  g_assert_cmpfloat(((float *)y->data)[10], ==, 3.0f);
  qh_tensor_free(y);

  /* Sigmoid and Tanh saturate cleanly at +-1000 and +100 (no NaN, no overflow). */
  y = act_run(make_node(g, "Sigmoid", 1, 1));
  double sg[N_ACT], th[N_ACT];
  for (int i = 0; i < N_ACT; i++) {
    sg[i] = 1.0 / (1.0 + exp(-(double)act_x[i]));
    th[i] = tanh((double)act_x[i]);
  }
  assert_close(y->data, sg, N_ACT, 1e-6);
  g_assert_cmpfloat(((float *)y->data)[6], ==, 0.5f);
  g_assert_cmpfloat(((float *)y->data)[0], ==, 0.0f);
  g_assert_cmpfloat(((float *)y->data)[12], ==, 1.0f);
  qh_tensor_free(y);
  y = act_run(make_node(g, "Tanh", 1, 1));
  assert_close(y->data, th, N_ACT, 1e-6);
  qh_tensor_free(y);
  qh_graph_free(g);
}

static void test_clip(void) {
  QhGraph *g = qh_graph_new();
  const float lo = -1.0f, hi[] = {2.0f};
  QhTensor *x = tensor(QH_DTYPE_F32, S1(N_ACT), act_x);
  QhTensor *tlo = tensor(QH_DTYPE_F32, S0(), &lo), *thi = tensor(QH_DTYPE_F32, S1(1), hi);
  float want[N_ACT];
  QhTensor *y;

  /* Both bounds. */
  QhNode *both = make_node(g, "Clip", 3, 1);
  y = run1(both, (const QhTensor *[]){x, tlo, thi}, 3);
  for (int i = 0; i < N_ACT; i++)
    want[i] = act_x[i] < -1 ? -1 : act_x[i] > 2 ? 2 : act_x[i];
  assert_floats(y, N_ACT, want);
  qh_tensor_free(y);
  /* Only min: the max slot is absent altogether. */
  QhNode *only_min = make_node(g, "Clip", 2, 1);
  y = run1(only_min, (const QhTensor *[]){x, tlo}, 2);
  for (int i = 0; i < N_ACT; i++)
    want[i] = act_x[i] < -1 ? -1 : act_x[i];
  assert_floats(y, N_ACT, want);
  qh_tensor_free(y);
  /* Only max: the min slot is omitted (""). */
  QhNode *only_max = make_node_opt(g, "Clip", 3, (const gboolean[]){TRUE, FALSE, TRUE}, 1);
  y = run1(only_max, (const QhTensor *[]){x, NULL, thi}, 3);
  for (int i = 0; i < N_ACT; i++)
    want[i] = act_x[i] > 2 ? 2 : act_x[i];
  assert_floats(y, N_ACT, want);
  qh_tensor_free(y);
  /* Neither: identity. */
  y = run1(make_node(g, "Clip", 1, 1), (const QhTensor *[]){x}, 1);
  assert_floats(y, N_ACT, act_x);
  qh_tensor_free(y);
  /* min > max gives max everywhere. */
  const float big = 5.0f;
  QhTensor *tbig = tensor(QH_DTYPE_F32, S0(), &big);
  y = run1(both, (const QhTensor *[]){x, tbig, thi}, 3);
  for (int i = 0; i < N_ACT; i++)
    want[i] = 2.0f;
  assert_floats(y, N_ACT, want);
  qh_tensor_free(y);
  /* Bounds must be scalars of float32. */
  QhTensor *vec = tensor(QH_DTYPE_F32, S1(2), NULL);
  expect_fail(both, (const QhTensor *[]){x, vec, thi}, 3, 1, QH_ERROR_INVALID, "scalar");
  /* A computed bound (no data at inference) is fine. */
  const QhOpDef *def = qh_op_find("", "Clip");
  QhTensor desc = {0}, lo_desc = {.dtype = QH_DTYPE_F32, .shape = S0()};
  g_assert_true(def->infer(both, (const QhTensor *[]){x, &lo_desc, thi}, 3, &desc, 1, NULL));
  for (QhTensor **t = (QhTensor *[]){x, tlo, thi, tbig, vec, NULL}; *t; t++)
    qh_tensor_free(*t);
  qh_graph_free(g);
}

static void test_softmax(void) {
  QhGraph *g = qh_graph_new();
  /* Large values: exp(1002) overflows without max subtraction. */
  const float big[] = {1000.0f, 1001.0f, 1002.0f, -1000.0f, -1000.0f, -1000.0f};
  QhTensor *x = tensor(QH_DTYPE_F32, S2(2, 3), big);
  QhTensor *y = run1(make_node(g, "Softmax", 1, 1), (const QhTensor *[]){x}, 1);
  double e1 = exp(-1.0), e2 = exp(-2.0), s = 1 + e1 + e2;
  assert_close(y->data, (const double[]){e2 / s, e1 / s, 1 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 6,
               1e-6);
  qh_tensor_free(y);
  qh_tensor_free(x);
  /* A middle axis, on 1 and 2 threads. */
  GRand *r = g_rand_new_with_seed(3);
  x = random_f32(S3(4, 5, 300), r, FALSE);
  for (int axis = -3; axis < 3; axis++) {
    QhNode *node = make_node(g, "Softmax", 1, 1);
    qh_node_set_attr_int(node, "axis", axis);
    int a = axis < 0 ? axis + 3 : axis;
    int64_t n = x->shape.dims[a], stride = 1;
    for (int d = a + 1; d < 3; d++)
      stride *= x->shape.dims[d];
    double *want = g_new(double, qh_tensor_numel(x));
    const float *xv = x->data;
    for (int64_t i = 0; i < qh_tensor_numel(x); i++) {
      int64_t k = (i / stride) % n, base = i - k * stride;
      double sum = 0;
      for (int64_t m = 0; m < n; m++)
        sum += exp((double)xv[base + m * stride]);
      want[i] = exp((double)xv[i]) / sum;
    }
    QhTensor *out[2];
    for (int t = 0; t < 2; t++) {
      g_assert_true(run_op(node, (const QhTensor *[]){x}, 1, &out[t], 1, t ? pool2 : pool1, FALSE,
                           NULL));
      assert_close(out[t]->data, want, qh_tensor_numel(x), 1e-5);
    }
    g_assert_cmpmem(out[0]->data, out[0]->nbytes, out[1]->data, out[1]->nbytes);
    qh_tensor_free(out[0]);
    qh_tensor_free(out[1]);
    g_free(want);
  }
  QhNode *bad = make_node(g, "Softmax", 1, 1);
  qh_node_set_attr_int(bad, "axis", 3);
  expect_fail(bad, (const QhTensor *[]){x}, 1, 1, QH_ERROR_INVALID, "axis 3");
  qh_tensor_free(x);
  g_rand_free(r);
  qh_graph_free(g);
}

/* ---- BatchNormalization ------------------------------------------------------ */

static void test_batchnorm(void) {
  QhGraph *g = qh_graph_new();
  GRand *r = g_rand_new_with_seed(11);
  const int C = 3;
  QhTensor *x = random_f32(S4(2, C, 5, 7), r, FALSE);
  QhTensor *p[4];
  for (int i = 0; i < 4; i++)
    p[i] = random_f32(S1(C), r, FALSE);
  for (int c = 0; c < C; c++)
    ((float *)p[3]->data)[c] = fabsf(((float *)p[3]->data)[c]) + 0.01f;
  const QhTensor *in[] = {x, p[0], p[1], p[2], p[3]};
  for (int variant = 0; variant < 2; variant++) {
    QhNode *bn = make_node(g, "BatchNormalization", 5, 1);
    double eps = 1e-5;
    if (variant) {
      eps = 0.5;
      qh_node_set_attr_float(bn, "epsilon", 0.5f);
    }
    QhTensor *y;
    g_assert_true(run_op(bn, in, 5, &y, 1, variant ? pool2 : pool1, FALSE, NULL));
    int64_t n = qh_tensor_numel(x);
    double *want = g_new(double, n);
    for (int64_t i = 0; i < n; i++) {
      int c = (int)((i / 35) % C);
      const float *s = p[0]->data, *b = p[1]->data, *m = p[2]->data, *v = p[3]->data;
      want[i] = ((double)((float *)x->data)[i] - m[c]) / sqrt((double)v[c] + (float)eps) * s[c] + b[c];
    }
    assert_close(y->data, want, n, 2e-6);
    g_free(want);
    qh_tensor_free(y);
  }
  /* Rank 2 (no spatial dims) works too. */
  QhTensor *x2 = tensor(QH_DTYPE_F32, S2(1, C), (const float[]){1, 2, 3});
  const float ones[] = {1, 1, 1}, zeros[] = {0, 0, 0};
  QhTensor *one = tensor(QH_DTYPE_F32, S1(C), ones), *zero = tensor(QH_DTYPE_F32, S1(C), zeros);
  QhNode *bn2 = make_node(g, "BatchNormalization", 5, 1);
  qh_node_set_attr_float(bn2, "epsilon", 0.0f);
  QhTensor *y2 = run1(bn2, (const QhTensor *[]){x2, one, zero, zero, one}, 5);
  assert_floats(y2, 3, (const float[]){1, 2, 3});
  qh_tensor_free(y2);

  QhNode *train = make_node(g, "BatchNormalization", 5, 1);
  qh_node_set_attr_int(train, "training_mode", 1);
  expect_fail(train, in, 5, 1, QH_ERROR_UNSUPPORTED, "training_mode");
  QhNode *stats = make_node(g, "BatchNormalization", 5, 3);
  expect_fail(stats, in, 5, 3, QH_ERROR_UNSUPPORTED, "output 1");
  QhNode *bn = make_node(g, "BatchNormalization", 5, 1);
  QhTensor *wrong = tensor(QH_DTYPE_F32, S1(C + 1), NULL);
  expect_fail(bn, (const QhTensor *[]){x, p[0], p[1], wrong, p[3]}, 5, 1, QH_ERROR_INVALID,
              "input_mean");
  QhTensor *x1 = tensor(QH_DTYPE_F32, S1(C), NULL);
  expect_fail(bn, (const QhTensor *[]){x1, p[0], p[1], p[2], p[3]}, 5, 1, QH_ERROR_INVALID,
              "rank >= 2");
  for (QhTensor **t = (QhTensor *[]){x, p[0], p[1], p[2], p[3], x2, one, zero, wrong, x1, NULL}; *t;
       t++)
    qh_tensor_free(*t);
  g_rand_free(r);
  qh_graph_free(g);
}

/* ---- ReduceMean -------------------------------------------------------------- */

/* Mean of x [2,3,4] over the axes in mask, as a [2,3,4]-indexed double array
 * compacted in output order. */
static void ref_mean(const float *x, const gboolean *mask, double *out, int64_t *n_out) {
  const int64_t dims[3] = {2, 3, 4};
  int64_t od[3], n = 1;
  for (int d = 0; d < 3; d++) {
    od[d] = mask[d] ? 1 : dims[d];
    n *= od[d];
  }
  for (int64_t o = 0; o < n; o++) {
    int64_t oi[3] = {o / (od[1] * od[2]), (o / od[2]) % od[1], o % od[2]};
    double sum = 0;
    int64_t cnt = 0;
    for (int64_t i = 0; i < 24; i++) {
      int64_t ii[3] = {i / 12, (i / 4) % 3, i % 4};
      gboolean hit = TRUE;
      for (int d = 0; d < 3; d++)
        hit = hit && (mask[d] || ii[d] == oi[d]);
      if (hit) {
        sum += x[i];
        cnt++;
      }
    }
    out[o] = sum / (double)cnt;
  }
  *n_out = n;
}

static void test_reduce_mean(void) {
  QhGraph *g = qh_graph_new();
  GRand *r = g_rand_new_with_seed(5);
  QhTensor *x = random_f32(S3(2, 3, 4), r, FALSE);
  const struct {
    int n_axes;
    int64_t axes[3];
    int keepdims; /* -1: attribute absent */
    QhShape want;
    gboolean mask[3];
  } cases[] = {
      {1, {1}, -1, S3(2, 1, 4), {FALSE, TRUE, FALSE}},
      {1, {1}, 0, S2(2, 4), {FALSE, TRUE, FALSE}},
      {2, {-1, 0}, 1, S3(1, 3, 1), {TRUE, FALSE, TRUE}},
      {2, {2, 1}, 0, S1(2), {FALSE, TRUE, TRUE}},
      {0, {0}, -1, S3(1, 1, 1), {TRUE, TRUE, TRUE}},
      {0, {0}, 0, S0(), {TRUE, TRUE, TRUE}},
      {3, {0, 1, 2}, 0, S0(), {TRUE, TRUE, TRUE}},
  };
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    for (int as_input = 0; as_input < 2; as_input++) {
      if (as_input && cases[k].n_axes == 0)
        continue;
      QhNode *node = make_node(g, "ReduceMean", as_input ? 2 : 1, 1);
      QhTensor *axes = NULL;
      if (as_input)
        axes = tensor(QH_DTYPE_S64, S1(cases[k].n_axes), cases[k].axes);
      else if (cases[k].n_axes > 0)
        qh_node_set_attr_ints(node, "axes", cases[k].n_axes, cases[k].axes);
      if (cases[k].keepdims >= 0)
        qh_node_set_attr_int(node, "keepdims", cases[k].keepdims);
      QhTensor *y = run1(node, (const QhTensor *[]){x, axes}, as_input ? 2 : 1);
      g_assert_true(qh_shape_equal(&y->shape, &cases[k].want));
      double want[24];
      int64_t n;
      ref_mean(x->data, cases[k].mask, want, &n);
      g_assert_cmpint(n, ==, qh_tensor_numel(y));
      assert_close(y->data, want, n, 1e-6);
      qh_tensor_free(y);
      qh_tensor_free(axes);
    }
  }
  /* Opset 18: an empty axes input with noop_with_empty_axes is the identity. */
  QhNode *noop = make_node(g, "ReduceMean", 2, 1);
  qh_node_set_attr_int(noop, "noop_with_empty_axes", 1);
  QhTensor *empty = tensor(QH_DTYPE_S64, S1(0), NULL);
  QhTensor *y = run1(noop, (const QhTensor *[]){x, empty}, 2);
  g_assert_true(qh_shape_equal(&y->shape, &x->shape));
  g_assert_cmpmem(y->data, y->nbytes, x->data, x->nbytes);
  qh_tensor_free(y);
  /* A computed axes input cannot be inferred. */
  QhTensor axes_desc = {.dtype = QH_DTYPE_S64, .shape = S1(1)};
  expect_fail(noop, (const QhTensor *[]){x, &axes_desc}, 2, 1, QH_ERROR_UNSUPPORTED, "constant");
  QhNode *dup = make_node(g, "ReduceMean", 1, 1);
  qh_node_set_attr_ints(dup, "axes", 2, (const int64_t[]){1, -2});
  expect_fail(dup, (const QhTensor *[]){x}, 1, 1, QH_ERROR_INVALID, "twice");
  QhNode *out_of_range = make_node(g, "ReduceMean", 1, 1);
  qh_node_set_attr_ints(out_of_range, "axes", 1, (const int64_t[]){3});
  expect_fail(out_of_range, (const QhTensor *[]){x}, 1, 1, QH_ERROR_INVALID, "axis 3");
  /* Reducing an empty axis gives NaN, reducing an empty tensor elsewhere gives nothing. */
  QhTensor *z = tensor(QH_DTYPE_F32, S2(2, 0), NULL);
  QhNode *last = make_node(g, "ReduceMean", 1, 1);
  qh_node_set_attr_ints(last, "axes", 1, (const int64_t[]){1});
  y = run1(last, (const QhTensor *[]){z}, 1);
  assert_floats(y, 2, (const float[]){NAN, NAN});
  qh_tensor_free(y);
  qh_tensor_free(z);
  qh_tensor_free(empty);
  qh_tensor_free(x);
  g_rand_free(r);
  qh_graph_free(g);
}

/* ---- QuantizeLinear / DequantizeLinear --------------------------------------- */

static void test_quantize_rounding(void) {
  QhGraph *g = qh_graph_new();
  QhNode *q = make_node(g, "QuantizeLinear", 3, 1);
  /* x / scale = 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5: ties go to even. */
  const float xv[] = {1, 3, 5, -1, -3, -5, 7}, two = 2.0f;
  const int8_t zp0 = 0;
  QhTensor *x = tensor(QH_DTYPE_F32, S1(7), xv), *s = tensor(QH_DTYPE_F32, S0(), &two);
  QhTensor *z = tensor(QH_DTYPE_S8, S0(), &zp0);
  QhTensor *y = run1(q, (const QhTensor *[]){x, s, z}, 3);
  g_assert_cmpint(y->dtype, ==, QH_DTYPE_S8);
  const int8_t want[] = {0, 2, 2, 0, -2, -2, 4};
  g_assert_cmpmem(y->data, y->nbytes, want, sizeof want);
  qh_tensor_free(y);
  /* Exact division, not multiplication by the reciprocal: with scale 0.3f,
   * -35.25f / 0.3f = -117.49999 (-> -117) while -35.25f * (1 / 0.3f) = -117.5 (-> -118);
   * -17.25f likewise gives -57 rather than -58. No zero point: uint8 output. */
  const float tenths = 0.3f, xr[] = {-35.25f, -17.25f};
  QhTensor *s10 = tensor(QH_DTYPE_F32, S1(1), &tenths), *x1 = tensor(QH_DTYPE_F32, S1(2), xr);
  QhNode *q2 = make_node(g, "QuantizeLinear", 3, 1);
  y = run1(q2, (const QhTensor *[]){x1, s10, z}, 3);
  g_assert_cmpint(((int8_t *)y->data)[0], ==, -117);
  g_assert_cmpint(((int8_t *)y->data)[1], ==, -57);
  qh_tensor_free(y);
  QhNode *q3 = make_node(g, "QuantizeLinear", 2, 1);
  y = run1(q3, (const QhTensor *[]){x1, s10}, 2);
  g_assert_cmpint(y->dtype, ==, QH_DTYPE_U8);
  g_assert_cmpint(((uint8_t *)y->data)[0], ==, 0);
  qh_tensor_free(y);
  for (QhTensor **t = (QhTensor *[]){x, s, z, s10, x1, NULL}; *t; t++)
    qh_tensor_free(*t);
  qh_graph_free(g);
}

static void test_quantize_saturation(void) {
  QhGraph *g = qh_graph_new();
  const float xv[] = {-1000, -10.6f, -10.4f, 0, 244.4f, 244.6f, 1000, INFINITY, -INFINITY, NAN};
  const float one = 1.0f;
  QhTensor *x = tensor(QH_DTYPE_F32, S1(10), xv), *s = tensor(QH_DTYPE_F32, S0(), &one);
  const uint8_t zu = 10;
  QhTensor *zpu = tensor(QH_DTYPE_U8, S0(), &zu);
  QhTensor *y = run1(make_node(g, "QuantizeLinear", 3, 1), (const QhTensor *[]){x, s, zpu}, 3);
  const uint8_t wu[] = {0, 0, 0, 10, 254, 255, 255, 255, 0, 10};
  g_assert_cmpmem(y->data, y->nbytes, wu, sizeof wu);
  qh_tensor_free(y);
  const int8_t zs = -5;
  QhTensor *zps = tensor(QH_DTYPE_S8, S1(1), &zs);
  y = run1(make_node(g, "QuantizeLinear", 3, 1), (const QhTensor *[]){x, s, zps}, 3);
  const int8_t ws[] = {-128, -16, -15, -5, 127, 127, 127, 127, -128, -5};
  g_assert_cmpmem(y->data, y->nbytes, ws, sizeof ws);
  qh_tensor_free(y);
  for (QhTensor **t = (QhTensor *[]){x, s, zpu, zps, NULL}; *t; t++)
    qh_tensor_free(*t);
  qh_graph_free(g);
}

static void test_qdq_per_axis(void) {
  QhGraph *g = qh_graph_new();
  const float sv[] = {1, 2, 4};
  const uint8_t zv[] = {0, 10, 20};
  QhTensor *s = tensor(QH_DTYPE_F32, S1(3), sv), *z = tensor(QH_DTYPE_U8, S1(3), zv);
  /* axis 0 on [3, 2]. */
  const float x0v[] = {3, -3, 3, 5, 3, 6};
  QhTensor *x0 = tensor(QH_DTYPE_F32, S2(3, 2), x0v);
  QhNode *q0 = make_node(g, "QuantizeLinear", 3, 1);
  qh_node_set_attr_int(q0, "axis", 0);
  QhTensor *y = run1(q0, (const QhTensor *[]){x0, s, z}, 3);
  const uint8_t w0[] = {3, 0, 12, 12, 21, 22}; /* 3/2=1.5->2, 5/2=2.5->2, 3/4->1, 6/4=1.5->2 */
  g_assert_cmpmem(y->data, y->nbytes, w0, sizeof w0);
  QhNode *dq0 = make_node(g, "DequantizeLinear", 3, 1);
  qh_node_set_attr_int(dq0, "axis", -2);
  QhTensor *back = run1(dq0, (const QhTensor *[]){y, s, z}, 3);
  assert_floats(back, 6, (const float[]){3, 0, 4, 4, 4, 8});
  qh_tensor_free(back);
  qh_tensor_free(y);
  /* Default axis 1 on [2, 3, 2]. */
  float x1v[12];
  for (int i = 0; i < 12; i++)
    x1v[i] = (float)(i - 4);
  QhTensor *x1 = tensor(QH_DTYPE_F32, S3(2, 3, 2), x1v);
  QhNode *q1 = make_node(g, "QuantizeLinear", 3, 1);
  y = run1(q1, (const QhTensor *[]){x1, s, z}, 3);
  for (int i = 0; i < 12; i++) {
    int c = (i / 2) % 3;
    double v = nearbyint((double)x1v[i] / sv[c]) + zv[c];
    v = v < 0 ? 0 : v > 255 ? 255 : v;
    g_assert_cmpint(((uint8_t *)y->data)[i], ==, (int)v);
  }
  qh_tensor_free(y);
  /* Length mismatches. */
  QhTensor *s4 = tensor(QH_DTYPE_F32, S1(4), (const float[]){1, 1, 1, 1});
  QhTensor *z2 = tensor(QH_DTYPE_U8, S1(2), NULL);
  expect_fail(q1, (const QhTensor *[]){x1, s4, NULL}, 3, 1, QH_ERROR_INVALID,
              "y_scale has 4 elements but axis 1");
  expect_fail(q1, (const QhTensor *[]){x1, s, z2}, 3, 1, QH_ERROR_INVALID,
              "y_zero_point has 2 elements");
  QhNode *dq1 = make_node(g, "DequantizeLinear", 3, 1);
  qh_node_set_attr_int(dq1, "axis", 0);
  expect_fail(dq1, (const QhTensor *[]){z2, s, NULL}, 3, 1, QH_ERROR_INVALID, "x_scale has 3");
  QhTensor *s2d = tensor(QH_DTYPE_F32, S2(3, 1), sv);
  expect_fail(q1, (const QhTensor *[]){x1, s2d, NULL}, 3, 1, QH_ERROR_UNSUPPORTED, "rank 2");
  for (QhTensor **t = (QhTensor *[]){s, z, x0, x1, s4, z2, s2d, NULL}; *t; t++)
    qh_tensor_free(*t);
  qh_graph_free(g);
}

static void test_dequantize(void) {
  QhGraph *g = qh_graph_new();
  /* An int32 bias: scale = input scale * weight scale, zero point 0 or absent. */
  const int32_t bv[] = {-1000, 0, 123456, INT32_MIN};
  const float bs = 0.001f;
  QhTensor *b = tensor(QH_DTYPE_S32, S1(4), bv), *s = tensor(QH_DTYPE_F32, S0(), &bs);
  QhTensor *y = run1(make_node(g, "DequantizeLinear", 2, 1), (const QhTensor *[]){b, s}, 2);
  float want[4];
  for (int i = 0; i < 4; i++)
    want[i] = (float)bv[i] * bs;
  assert_floats(y, 4, want);
  qh_tensor_free(y);
  const int32_t z0 = 0, z1 = 7;
  QhTensor *tz0 = tensor(QH_DTYPE_S32, S0(), &z0), *tz1 = tensor(QH_DTYPE_S32, S0(), &z1);
  QhNode *dq = make_node(g, "DequantizeLinear", 3, 1);
  y = run1(dq, (const QhTensor *[]){b, s, tz0}, 3);
  assert_floats(y, 4, want);
  qh_tensor_free(y);
  expect_fail(dq, (const QhTensor *[]){b, s, tz1}, 3, 1, QH_ERROR_INVALID, "must be 0");
  /* int8 with a zero point; dtype mismatch between x and zero point. */
  const int8_t xv[] = {-128, -1, 0, 127};
  const int8_t zv = -1;
  QhTensor *x = tensor(QH_DTYPE_S8, S1(4), xv), *z = tensor(QH_DTYPE_S8, S0(), &zv);
  const float half = 0.5f;
  QhTensor *sh = tensor(QH_DTYPE_F32, S0(), &half);
  y = run1(dq, (const QhTensor *[]){x, sh, z}, 3);
  assert_floats(y, 4, (const float[]){-63.5f, 0, 0.5f, 64});
  qh_tensor_free(y);
  expect_fail(dq, (const QhTensor *[]){x, sh, tz0}, 3, 1, QH_ERROR_INVALID, "must match");
  QhTensor *f = tensor(QH_DTYPE_F32, S1(4), NULL);
  expect_fail(dq, (const QhTensor *[]){f, sh, NULL}, 3, 1, QH_ERROR_UNSUPPORTED, "float32");
  for (QhTensor **t = (QhTensor *[]){b, s, tz0, tz1, x, z, sh, f, NULL}; *t; t++)
    qh_tensor_free(*t);
  qh_graph_free(g);
}

/* Large tensors go through the thread pool: two threads must match one exactly. */
static void test_threads_match(void) {
  QhGraph *g = qh_graph_new();
  GRand *r = g_rand_new_with_seed(9);
  QhTensor *x = random_f32(S4(2, 16, 40, 40), r, FALSE);
  QhTensor *s = random_f32(S1(16), r, TRUE);
  for (int c = 0; c < 16; c++)
    ((float *)s->data)[c] = fabsf(((float *)s->data)[c]) * 0.05f;
  QhTensor *z = tensor(QH_DTYPE_S8, S1(16), NULL);
  for (int c = 0; c < 16; c++)
    ((int8_t *)z->data)[c] = (int8_t)(c * 5 - 40);
  QhTensor *bn_p[4];
  for (int i = 0; i < 4; i++) {
    bn_p[i] = random_f32(S1(16), r, TRUE);
    if (i == 3)
      for (int c = 0; c < 16; c++)
        ((float *)bn_p[i]->data)[c] = fabsf(((float *)bn_p[i]->data)[c]);
  }
  const char *ops[] = {"Relu", "Sigmoid", "Tanh", "HardSwish", "QuantizeLinear",
                       "BatchNormalization"};
  for (size_t k = 0; k < G_N_ELEMENTS(ops); k++) {
    const QhTensor *in[5] = {x};
    int n_in = 1;
    if (k == 4) {
      in[1] = s, in[2] = z, n_in = 3;
    } else if (k == 5) {
      for (int i = 0; i < 4; i++)
        in[1 + i] = bn_p[i];
      n_in = 5;
    }
    QhNode *node = make_node(g, ops[k], n_in, 1);
    QhTensor *y1, *y2;
    g_assert_true(run_op(node, in, n_in, &y1, 1, pool1, FALSE, NULL));
    g_assert_true(run_op(node, in, n_in, &y2, 1, pool2, FALSE, NULL));
    g_assert_cmpmem(y1->data, y1->nbytes, y2->data, y2->nbytes);
    if (k == 4) { /* Dequantize the result per channel and check the round trip. */
      QhNode *dq = make_node(g, "DequantizeLinear", 3, 1);
      QhTensor *back = run1(dq, (const QhTensor *[]){y1, s, z}, 3);
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
    qh_tensor_free(y1);
    qh_tensor_free(y2);
  }
  for (QhTensor **t = (QhTensor *[]){x, s, z, bn_p[0], bn_p[1], bn_p[2], bn_p[3], NULL}; *t; t++)
    qh_tensor_free(*t);
  g_rand_free(r);
  qh_graph_free(g);
}

static void test_registry(void) {
  const char *names[] = {"Add", "Sub", "Mul", "Div", "Relu", "Clip", "LeakyRelu", "Sigmoid",
                         "Tanh", "HardSigmoid", "HardSwish", "Softmax", "BatchNormalization",
                         "ReduceMean", "QuantizeLinear", "DequantizeLinear"};
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
    const QhOpDef *d = qh_op_find("ai.onnx", names[i]);
    g_assert_nonnull(d);
    g_assert_nonnull(d->infer);
    g_assert_nonnull(d->run);
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
  g_test_add_func("/kernels/activation/exact", test_activations_exact);
  g_test_add_func("/kernels/activation/clip", test_clip);
  g_test_add_func("/kernels/activation/softmax", test_softmax);
  g_test_add_func("/kernels/norm/batchnorm", test_batchnorm);
  g_test_add_func("/kernels/reduce/mean", test_reduce_mean);
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
