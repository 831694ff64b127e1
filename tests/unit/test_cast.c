/* Unit tests of the cast family (Cast, ConstantOfShape) through their QhOpDefs and
 * through a plan, and of the no-op Cast lowering pass on a small QDQ graph. Expected
 * values were worked out by hand from the rules in kernels/cast.c's file comment
 * (truncate, clamp, NaN -> 0; integers wrap; bool is != 0) and pasted here; the
 * float16 bit patterns are IEEE half encodings checked with numpy. */
#include <stdlib.h>

#include "exec/plan.h"
#include "kernel_case.h"
#include "lower/noop-cast.h"

/* ---- Cast ---- */

static Case *cast_case(QhTensor *in, QhDType to) {
  Case *c = case_new("Cast", 1, 1);
  c->in[0] = in;
  qh_node_set_attr_int(c->node, "to", to);
  return c;
}

static void retarget(Case *c, QhDType to) {
  qh_node_set_attr_int(c->node, "to", to);
  run_ok(c, FALSE);
  g_assert_cmpint(c->out[0]->dtype, ==, to);
  check_shape(c->out[0], c->in[0]->shape.rank, c->in[0]->shape.dims);
}

/* Every element of out, widened to int64, for comparing integer and bool outputs. */
static int64_t elem(const QhTensor *t, int64_t i) {
  switch (t->dtype) {
  case QH_DTYPE_U8:
  case QH_DTYPE_BOOL: return ((const guint8 *)t->data)[i];
  case QH_DTYPE_S8: return ((const gint8 *)t->data)[i];
  case QH_DTYPE_S32: return ((const gint32 *)t->data)[i];
  case QH_DTYPE_S64: return ((const int64_t *)t->data)[i];
  default: g_assert_not_reached();
  }
}

static void expect_ints(Case *c, QhDType to, const int64_t *want) {
  retarget(c, to);
  for (int64_t i = 0; i < qh_tensor_numel(c->out[0]); i++)
    if (elem(c->out[0], i) != want[i])
      g_error("to %s, element %" G_GINT64_FORMAT ": %" G_GINT64_FORMAT ", expected %" G_GINT64_FORMAT,
              qh_dtype_name(to), i, elem(c->out[0], i), want[i]);
}

#define NF 19
static void test_cast_float_to_int(void) {
  const float x[NF] = {0.0f,   1.5f,    -1.5f,    2.9f,     -2.9f,  127.6f, 128.0f,
                       -129.0f, 300.0f, -300.0f,  NAN,      INFINITY, -INFINITY, 1e20f,
                       -1e20f, 255.9f,  256.0f,   9223372036854775808.0f /* 2^63 */,
                       9223371487098961920.0f /* the float below 2^63 */};
  Case *c = cast_case(mk(QH_DTYPE_F32, 1, DIMS(NF), x), QH_DTYPE_S8);
  expect_ints(c, QH_DTYPE_S8,
              (const int64_t[NF]){0, 1, -1, 2, -2, 127, 127, -128, 127, -128, 0, 127, -128, 127,
                                  -128, 127, 127, 127, 127});
  expect_ints(c, QH_DTYPE_U8,
              (const int64_t[NF]){0, 1, 0, 2, 0, 127, 128, 0, 255, 0, 0, 255, 0, 255, 0, 255, 255,
                                  255, 255});
  expect_ints(c, QH_DTYPE_S32,
              (const int64_t[NF]){0, 1, -1, 2, -2, 127, 128, -129, 300, -300, 0, G_MAXINT32,
                                  G_MININT32, G_MAXINT32, G_MININT32, 255, 256, G_MAXINT32,
                                  G_MAXINT32});
  expect_ints(c, QH_DTYPE_S64,
              (const int64_t[NF]){0, 1, -1, 2, -2, 127, 128, -129, 300, -300, 0, G_MAXINT64,
                                  G_MININT64, G_MAXINT64, G_MININT64, 255, 256, G_MAXINT64,
                                  INT64_C(9223371487098961920)});
  expect_ints(c, QH_DTYPE_BOOL,
              (const int64_t[NF]){0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  case_free(c);
}

#define NI 13
static void test_cast_int_wraps(void) {
  const int64_t x[NI] = {0,   1,    -1,   127, 128, 255, 256, -128, -129, INT64_C(2147483648),
                         INT64_C(-2147483649), G_MAXINT64, G_MININT64};
  Case *c = cast_case(mk(QH_DTYPE_S64, 1, DIMS(NI), x), QH_DTYPE_U8);
  expect_ints(c, QH_DTYPE_U8, (const int64_t[NI]){0, 1, 255, 127, 128, 255, 0, 128, 127, 0, 255, 255, 0});
  expect_ints(c, QH_DTYPE_S8, (const int64_t[NI]){0, 1, -1, 127, -128, -1, 0, -128, 127, 0, -1, -1, 0});
  expect_ints(c, QH_DTYPE_S32,
              (const int64_t[NI]){0, 1, -1, 127, 128, 255, 256, -128, -129, G_MININT32, G_MAXINT32,
                                  -1, 0});
  expect_ints(c, QH_DTYPE_BOOL, (const int64_t[NI]){0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  retarget(c, QH_DTYPE_F32);
  check_f32(c->out[0], 1, DIMS(NI),
            F32V(0, 1, -1, 127, 128, 255, 256, -128, -129, 2147483648.0f, -2147483648.0f,
                 9223372036854775808.0f, -9223372036854775808.0f),
            0.0f);
  case_free(c);

  /* narrow sources: sign extension, and any nonzero bool byte is true */
  c = cast_case(mk(QH_DTYPE_U8, 1, DIMS(3), (const guint8[]){0, 200, 255}), QH_DTYPE_S8);
  expect_ints(c, QH_DTYPE_S8, (const int64_t[]){0, -56, -1});
  retarget(c, QH_DTYPE_F32);
  check_f32(c->out[0], 1, DIMS(3), F32V(0, 200, 255), 0.0f);
  case_free(c);
  c = cast_case(mk(QH_DTYPE_S8, 1, DIMS(3), (const gint8[]){-1, -128, 5}), QH_DTYPE_U8);
  expect_ints(c, QH_DTYPE_U8, (const int64_t[]){255, 128, 5});
  expect_ints(c, QH_DTYPE_S64, (const int64_t[]){-1, -128, 5});
  case_free(c);
  c = cast_case(mk(QH_DTYPE_BOOL, 1, DIMS(3), (const guint8[]){0, 1, 2}), QH_DTYPE_S32);
  expect_ints(c, QH_DTYPE_S32, (const int64_t[]){0, 1, 1});
  retarget(c, QH_DTYPE_F32);
  check_f32(c->out[0], 1, DIMS(3), F32V(0, 1, 1), 0.0f);
  case_free(c);
}

static void test_cast_half(void) {
  /* 70000 is above float16's largest finite value (65504) and rounds to infinity */
  Case *c = cast_case(mk(QH_DTYPE_F32, 1, DIMS(5), F32V(1.0f, 0.1f, 65504.0f, 70000.0f, -2.5f)),
                      QH_DTYPE_F16);
  retarget(c, QH_DTYPE_F16);
  const guint16 want[] = {0x3C00, 0x2E66, 0x7BFF, 0x7C00, 0xC100};
  g_assert_cmpmem(c->out[0]->data, c->out[0]->nbytes, want, sizeof want);
  case_free(c);
  c = cast_case(mk(QH_DTYPE_F16, 1, DIMS(4), (const guint16[]){0x3C00, 0xC100, 0x7C00, 0x7E00}),
                QH_DTYPE_S8);
  expect_ints(c, QH_DTYPE_S8, (const int64_t[]){1, -2, 127, 0});
  retarget(c, QH_DTYPE_F32);
  g_assert_cmpfloat(qh_f32(c->out[0])[1], ==, -2.5f);
  g_assert_true(isinf(qh_f32(c->out[0])[2]) && isnan(qh_f32(c->out[0])[3]));
  case_free(c);
  c = cast_case(mk(QH_DTYPE_S32, 1, DIMS(3), (const gint32[]){-3, 2049, 100000}), QH_DTYPE_F16);
  retarget(c, QH_DTYPE_F16);
  /* 2049 is not a float16: the tie rounds to even, 2048 */
  const guint16 want_i[] = {0xC200, 0x6800, 0x7C00};
  g_assert_cmpmem(c->out[0]->data, c->out[0]->nbytes, want_i, sizeof want_i);
  case_free(c);
}

static void test_cast_same_type_and_errors(void) {
  Case *c = cast_case(iota(QH_DTYPE_S32, 3, DIMS(2, 1, 3)), QH_DTYPE_S32);
  retarget(c, QH_DTYPE_S32);
  g_assert_cmpmem(c->out[0]->data, c->out[0]->nbytes, c->in[0]->data, c->in[0]->nbytes);
  qh_node_set_attr_int(c->node, "to", 8); /* string */
  expect_error(c, QH_ERROR_UNSUPPORTED, "target type 8 is not supported");
  qh_node_set_attr_int(c->node, "to", 11); /* double */
  expect_error(c, QH_ERROR_UNSUPPORTED, "target type 11");
  qh_node_set_attr_int(c->node, "to", G_MAXINT64);
  expect_error(c, QH_ERROR_UNSUPPORTED, "is not supported");
  qh_node_set_attr_float(c->node, "to", 1.0f);
  expect_error(c, QH_ERROR_INVALID, "to");
  case_free(c);
  c = case_new("Cast", 1, 1);
  c->in[0] = iota(QH_DTYPE_F32, 1, DIMS(2));
  expect_error(c, QH_ERROR_INVALID, "attribute 'to' is missing");
  case_free(c);
}

/* ---- ConstantOfShape ---- */

static void test_constant_of_shape(void) {
  Case *c = case_new("ConstantOfShape", 1, 1);
  c->in[0] = I64(2, 3);
  run_ok(c, FALSE); /* the harness pre-fills outputs with 0xA5, so zeros are written */
  check_f32(c->out[0], 2, DIMS(2, 3), F32V(0, 0, 0, 0, 0, 0), 0.0f);

  qh_node_set_attr_tensor(c->node, "value", mk(QH_DTYPE_S32, 1, DIMS(1), (const gint32[]){-7}));
  run_ok(c, FALSE);
  g_assert_cmpint(c->out[0]->dtype, ==, QH_DTYPE_S32);
  check_shape(c->out[0], 2, DIMS(2, 3));
  for (int i = 0; i < 6; i++)
    g_assert_cmpint(((gint32 *)c->out[0]->data)[i], ==, -7);

  /* an empty shape is a scalar; a 0 dimension an empty tensor */
  qh_node_set_attr_tensor(c->node, "value", mk(QH_DTYPE_U8, 0, NULL, (const guint8[]){200}));
  qh_tensor_free(c->in[0]);
  c->in[0] = mk(QH_DTYPE_S64, 1, DIMS(0), NULL);
  run_ok(c, FALSE);
  check_shape(c->out[0], 0, NULL);
  g_assert_cmpint(((guint8 *)c->out[0]->data)[0], ==, 200);
  qh_tensor_free(c->in[0]);
  c->in[0] = I64(0, 5);
  run_ok(c, FALSE);
  check_shape(c->out[0], 2, DIMS(0, 5));

  qh_node_set_attr_tensor(c->node, "value", mk(QH_DTYPE_S64, 1, DIMS(1), DIMS(INT64_C(1) << 40)));
  qh_tensor_free(c->in[0]);
  c->in[0] = I64(3);
  run_ok(c, FALSE);
  check_i64(c->out[0], 1, DIMS(3), DIMS(INT64_C(1) << 40, INT64_C(1) << 40, INT64_C(1) << 40));
  case_free(c);
}

static void test_constant_of_shape_errors(void) {
  Case *c = case_new("ConstantOfShape", 1, 1);
  c->in[0] = I64(2, 3);
  c->dynamic[0] = TRUE;
  expect_error(c, QH_ERROR_UNSUPPORTED, "must be a constant");
  c->dynamic[0] = FALSE;
  qh_tensor_free(c->in[0]);
  c->in[0] = I64(2, -1);
  expect_error(c, QH_ERROR_INVALID, "dimension 1 is negative");
  qh_tensor_free(c->in[0]);
  c->in[0] = I64(1, 1, 1, 1, 1, 1, 1, 1, 1);
  expect_error(c, QH_ERROR_UNSUPPORTED, "output rank 9 exceeds 8");
  qh_tensor_free(c->in[0]);
  c->in[0] = I64(1 << 20, 1 << 20, 1 << 20); /* 2^60 elements from a 24-byte input */
  expect_error(c, QH_ERROR_LIMIT, "limit");
  qh_tensor_free(c->in[0]);
  c->in[0] = I64(G_MAXINT64, G_MAXINT64);
  expect_error(c, QH_ERROR_LIMIT, "");
  qh_tensor_free(c->in[0]);
  c->in[0] = mk(QH_DTYPE_S32, 1, DIMS(1), (const gint32[]){2});
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 0 has type int32");
  qh_tensor_free(c->in[0]);
  c->in[0] = mk(QH_DTYPE_S64, 2, DIMS(1, 1), DIMS(2));
  expect_error(c, QH_ERROR_INVALID, "1-D");
  qh_tensor_free(c->in[0]);
  c->in[0] = I64(2);
  qh_node_set_attr_tensor(c->node, "value", mk(QH_DTYPE_F32, 1, DIMS(2), F32V(1, 2)));
  expect_error(c, QH_ERROR_INVALID, "exactly one element");
  qh_node_set_attr_int(c->node, "value", 3);
  expect_error(c, QH_ERROR_INVALID, "'value' is not a tensor");
  case_free(c);
}

/* ---- through a plan ---- */

static int add_value(QhGraph *g, const char *name, QhDType dt, int rank, const int64_t *dims,
                     gboolean input) {
  QhValue *v = qh_graph_add_value(g, name, NULL);
  g_assert_nonnull(v);
  if (input) {
    v->is_input = TRUE;
    v->dtype = dt;
    v->shape = qh_shape_make(rank, dims);
    g_array_append_val(g->inputs, v->id);
  }
  return v->id;
}

static void mark_output(QhGraph *g, int v) {
  qh_graph_value(g, v)->is_output = TRUE;
  g_array_append_val(g->outputs, v);
}

static QhNode *node(QhGraph *g, const char *name, const char *op, int n_in, const int *in, int out) {
  QhNode *n = qh_graph_add_node(g, name, op, "", n_in, in, 1, &out, NULL);
  g_assert_nonnull(n);
  return n;
}

static int init(QhGraph *g, const char *name, QhTensor *t) {
  int v = add_value(g, name, 0, 0, NULL, FALSE);
  qh_value_set_initializer(qh_graph_value(g, v), t);
  return v;
}

/* Run graph on x and return its outputs (n of them). */
static QhTensor **run_graph(const QhGraph *g, const QhTensor *x) {
  GError *error = NULL;
  QhPlan *plan = qh_plan_new(g, NULL, FALSE, &error);
  g_assert_no_error(error);
  QhExecContext ctx = {.pool = qh_thread_pool_new(1)};
  QhTensor **outs = NULL;
  g_assert_true(qh_plan_run(plan, &ctx, &x, &outs, &error));
  g_assert_no_error(error);
  qh_exec_context_clear(&ctx);
  qh_thread_pool_free(ctx.pool);
  qh_plan_free(plan);
  return outs;
}

/* The bias zero point PyTorch's exporter computes: ConstantOfShape -> Cast, folded
 * at plan time; and a Cast of an activation, run. */
static void test_plan_folds(void) {
  QhGraph *g = qh_graph_new();
  int x = add_value(g, "x", QH_DTYPE_F32, 1, DIMS(3), TRUE);
  int shape = init(g, "shape", I64(3)), zc = add_value(g, "zc", 0, 0, NULL, FALSE);
  int z = add_value(g, "z", 0, 0, NULL, FALSE), y = add_value(g, "y", 0, 0, NULL, FALSE);
  QhNode *n = node(g, "cos", "ConstantOfShape", 1, &shape, zc);
  qh_node_set_attr_tensor(n, "value", mk(QH_DTYPE_F32, 1, DIMS(1), F32V(-3.7f)));
  qh_node_set_attr_int(node(g, "zcast", "Cast", 1, &zc, z), "to", QH_DTYPE_S32);
  qh_node_set_attr_int(node(g, "ycast", "Cast", 1, &x, y), "to", QH_DTYPE_U8);
  mark_output(g, z);
  mark_output(g, y);
  GError *error = NULL;
  QhPlan *plan = qh_plan_new(g, NULL, FALSE, &error);
  g_assert_no_error(error);
  g_assert_true(qh_plan_node_is_folded(plan, 0) && qh_plan_node_is_folded(plan, 1));
  g_assert_false(qh_plan_node_is_folded(plan, 2));
  qh_plan_free(plan);
  QhTensor *xt = mk(QH_DTYPE_F32, 1, DIMS(3), F32V(-1.0f, 3.99f, 1000.0f));
  QhTensor **outs = run_graph(g, xt);
  g_assert_cmpmem(outs[0]->data, outs[0]->nbytes, ((const gint32[]){-3, -3, -3}), 12);
  g_assert_cmpmem(outs[1]->data, outs[1]->nbytes, ((const guint8[]){0, 3, 255}), 3);
  for (int i = 0; i < 2; i++)
    qh_tensor_free(outs[i]);
  g_free(outs);
  qh_tensor_free(xt);
  qh_graph_free(g);
}

/* ---- the no-op Cast pass ---- */

/* x -> Q -> q; c1 = Cast(q, uint8) (no-op) -> DQ -> d; c2 = Cast(d, int32) (changes
 * the type) -> di; c3 = Cast(q, uint8) is a graph output (stays); c4 = Cast(di,
 * int32) (no-op) read by two Identities; c5 = Cast(f, float) after an op the host
 * cannot infer (stays: its input type is unknown). Value ids are returned for checks. */
typedef struct {
  int q, d, di, c4o, id1, id2, f;
  int n_dq, n_c1, n_c2, n_c3, n_c4, n_c5, n_id1, n_id2;
} Qdq;

static QhGraph *make_qdq(Qdq *v, gboolean with_unknown) {
  QhGraph *g = qh_graph_new();
  int x = add_value(g, "x", QH_DTYPE_F32, 2, DIMS(1, 4), TRUE);
  int s = init(g, "s", mk(QH_DTYPE_F32, 0, NULL, F32V(0.5f)));
  int zp = init(g, "zp", mk(QH_DTYPE_U8, 0, NULL, (const guint8[]){3}));
  const char *names[] = {"q", "qc", "d", "di", "qo", "c4o", "o1", "o2", "f", "fc"};
  int id[G_N_ELEMENTS(names)];
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    id[i] = add_value(g, names[i], 0, 0, NULL, FALSE);
  v->q = id[0], v->d = id[2], v->di = id[3], v->c4o = id[5], v->id1 = id[6], v->id2 = id[7];
  v->f = id[8];
  node(g, "Q", "QuantizeLinear", 3, (int[]){x, s, zp}, v->q);
  QhNode *n = node(g, "c1", "Cast", 1, &v->q, id[1]);
  qh_node_set_attr_int(n, "to", QH_DTYPE_U8);
  v->n_c1 = n->id;
  v->n_dq = node(g, "DQ", "DequantizeLinear", 3, (int[]){id[1], s, zp}, v->d)->id;
  n = node(g, "c2", "Cast", 1, &v->d, v->di);
  qh_node_set_attr_int(n, "to", QH_DTYPE_S32);
  v->n_c2 = n->id;
  n = node(g, "c3", "Cast", 1, &v->q, id[4]);
  qh_node_set_attr_int(n, "to", QH_DTYPE_U8);
  v->n_c3 = n->id;
  n = node(g, "c4", "Cast", 1, &v->di, v->c4o);
  qh_node_set_attr_int(n, "to", QH_DTYPE_S32);
  v->n_c4 = n->id;
  v->n_id1 = node(g, "id1", "Identity", 1, &v->c4o, v->id1)->id;
  v->n_id2 = node(g, "id2", "Identity", 1, &v->c4o, v->id2)->id;
  mark_output(g, id[4]);
  mark_output(g, v->id1);
  mark_output(g, v->id2);
  v->n_c5 = -1;
  if (with_unknown) {
    node(g, "mystery", "NoSuchOp", 1, &x, v->f);
    n = node(g, "c5", "Cast", 1, &v->f, id[9]);
    qh_node_set_attr_int(n, "to", QH_DTYPE_F32);
    v->n_c5 = n->id;
    mark_output(g, id[9]);
  }
  return g;
}

static void test_drop_noop_casts(void) {
  Qdq v;
  QhGraph *ref = make_qdq(&v, FALSE), *g = make_qdq(&v, FALSE);
  GError *error = NULL;
  QhPlan *sp = qh_plan_new(g, NULL, TRUE, &error);
  g_assert_no_error(error);
  int dropped = -1;
  g_assert_true(qh_lower_drop_noop_casts(g, sp, &dropped, &error));
  g_assert_no_error(error);
  qh_plan_free(sp);
  g_assert_cmpint(dropped, ==, 2);
  g_assert_true(qh_graph_node(g, v.n_c1)->is_removed && qh_graph_node(g, v.n_c4)->is_removed);
  g_assert_false(qh_graph_node(g, v.n_c2)->is_removed || qh_graph_node(g, v.n_c3)->is_removed);
  g_assert_cmpint(qh_graph_node(g, v.n_dq)->inputs[0], ==, v.q); /* Q -> DQ now */
  g_assert_cmpint(qh_graph_node(g, v.n_id1)->inputs[0], ==, v.di);
  g_assert_cmpint(qh_graph_node(g, v.n_id2)->inputs[0], ==, v.di);
  g_assert_cmpint(qh_graph_count_live_nodes(g), ==, qh_graph_count_live_nodes(ref) - 2);

  /* same outputs as the untouched graph: q = round(x / 0.5) + 3 clamped, d, int32(d) */
  QhTensor *x = mk(QH_DTYPE_F32, 2, DIMS(1, 4), F32V(-1.6f, 0.74f, 200.0f, -9.0f));
  QhTensor **a = run_graph(ref, x), **b = run_graph(g, x);
  g_assert_cmpmem(a[0]->data, 4, ((const guint8[]){0, 4, 255, 0}), 4);
  g_assert_cmpmem(a[1]->data, 16, ((const gint32[]){-1, 0, 126, -1}), 16);
  for (int i = 0; i < 3; i++) {
    g_assert_cmpint(a[i]->dtype, ==, b[i]->dtype);
    g_assert_cmpmem(a[i]->data, a[i]->nbytes, b[i]->data, b[i]->nbytes);
    qh_tensor_free(a[i]);
    qh_tensor_free(b[i]);
  }
  g_free(a);
  g_free(b);
  qh_tensor_free(x);
  qh_graph_free(ref);
  qh_graph_free(g);
}

static void test_drop_noop_casts_unknown_and_bad(void) {
  Qdq v;
  QhGraph *g = make_qdq(&v, TRUE);
  GError *error = NULL;
  QhPlan *sp = qh_plan_new(g, NULL, TRUE, &error);
  g_assert_no_error(error);
  g_assert_null(qh_plan_value_info(sp, v.f));

  /* a Cast added after planning without 'to': an error naming it, nothing rewritten */
  int bad_out = add_value(g, "bad_out", 0, 0, NULL, FALSE);
  QhNode *bad = node(g, "bad", "Cast", 1, &v.q, bad_out);
  int dropped = -1;
  g_assert_false(qh_lower_drop_noop_casts(g, sp, &dropped, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "node 'bad' (Cast)"));
  g_assert_nonnull(strstr(error->message, "'to'"));
  g_clear_error(&error);
  g_assert_cmpint(dropped, ==, 0);
  g_assert_false(qh_graph_node(g, v.n_c1)->is_removed);
  g_assert_cmpint(qh_graph_node(g, v.n_dq)->inputs[0], !=, v.q);

  qh_graph_remove_node(g, bad->id);
  g_assert_true(qh_lower_drop_noop_casts(g, sp, &dropped, &error));
  g_assert_no_error(error);
  g_assert_cmpint(dropped, ==, 2);
  g_assert_false(qh_graph_node(g, v.n_c5)->is_removed);
  qh_plan_free(sp);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cast/float-to-int", test_cast_float_to_int);
  g_test_add_func("/cast/int-wraps", test_cast_int_wraps);
  g_test_add_func("/cast/half", test_cast_half);
  g_test_add_func("/cast/same-type-and-errors", test_cast_same_type_and_errors);
  g_test_add_func("/cast/constant-of-shape", test_constant_of_shape);
  g_test_add_func("/cast/constant-of-shape-errors", test_constant_of_shape_errors);
  g_test_add_func("/cast/plan-folds", test_plan_folds);
  g_test_add_func("/cast/drop-noop", test_drop_noop_casts);
  g_test_add_func("/cast/drop-noop-unknown-and-bad", test_drop_noop_casts_unknown_and_bad);
  return g_test_run();
}
