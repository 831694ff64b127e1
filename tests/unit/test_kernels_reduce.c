/* The reductions' forms that ONNX Runtime cannot be asked about through a model qhost
 * loads (axes as an input for ReduceMax/Min/Prod/L2 is opset 18, which the loader
 * refuses for them), hand-computed: axes as input and as attribute, negative axes,
 * noop_with_empty_axes, the identities of empty reductions, integer inputs; ArgMax's
 * select_last_index; and the errors for conflicting or repeated axes. */
#include "kernel_case.h"

static Case *reduce_case(const char *op, QhTensor *x, QhTensor *axes) {
  Case *c = case_new(op, axes ? 2 : 1, 1);
  c->in[0] = x;
  if (axes)
    c->in[1] = axes;
  return c;
}

static void test_axes_forms(void) {
  /* x = [[1, 5, 2], [-3, 4, 0]] */
  const float xs[] = {1, 5, 2, -3, 4, 0};
  static const struct {
    const char *op;
    float want_last[2], want_first[3];
  } cases[] = {
      {"ReduceSum", {8, 1}, {-2, 9, 2}},
      {"ReduceMax", {5, 4}, {1, 5, 2}},
      {"ReduceMin", {1, -3}, {-3, 4, 0}},
      {"ReduceProd", {10, 0}, {-3, 20, 0}},
      {"ReduceL2", {5.4772256f, 5}, {3.1622777f, 6.4031242f, 2}},
      {"ReduceMean", {8.0f / 3, 1.0f / 3}, {-1, 4.5f, 1}},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    /* axis -1 as an input, keepdims 0 */
    Case *c = reduce_case(cases[i].op, mk(QH_DTYPE_F32, 2, DIMS(2, 3), xs), I64(-1));
    qh_node_set_attr_int(c->node, "keepdims", 0);
    run_ok(c, FALSE);
    check_f32(c->out[0], 1, DIMS(2), cases[i].want_last, 1e-6f);
    case_free(c);
    /* axis 0 as the attribute, keepdims 1 */
    c = reduce_case(cases[i].op, mk(QH_DTYPE_F32, 2, DIMS(2, 3), xs), NULL);
    qh_node_set_attr_ints(c->node, "axes", 1, DIMS(0));
    run_ok(c, FALSE);
    check_f32(c->out[0], 2, DIMS(1, 3), cases[i].want_first, 1e-6f);
    case_free(c);
  }
  /* empty axes input: all axes, or none with noop_with_empty_axes */
  Case *c = reduce_case("ReduceMax", mk(QH_DTYPE_F32, 2, DIMS(2, 3), xs),
                        mk(QH_DTYPE_S64, 1, DIMS(0), NULL));
  qh_node_set_attr_int(c->node, "keepdims", 0);
  run_ok(c, FALSE);
  check_f32(c->out[0], 0, DIMS(0), F32V(5), 0);
  qh_node_set_attr_int(c->node, "noop_with_empty_axes", 1);
  run_ok(c, FALSE);
  check_f32(c->out[0], 2, DIMS(2, 3), xs, 0);
  case_free(c);
}

static void test_empty_and_ints(void) {
  static const struct {
    const char *op;
    float want;
  } ids[] = {{"ReduceSum", 0}, {"ReduceProd", 1}, {"ReduceL2", 0}, {"ReduceMax", -INFINITY}, {"ReduceMin", INFINITY}};
  for (gsize i = 0; i < G_N_ELEMENTS(ids); i++) {
    Case *c = reduce_case(ids[i].op, mk(QH_DTYPE_F32, 2, DIMS(2, 0), NULL), I64(1));
    qh_node_set_attr_int(c->node, "keepdims", 0);
    run_ok(c, FALSE);
    g_assert_cmpint(c->out[0]->shape.dims[0], ==, 2);
    g_assert_cmpfloat(qh_f32(c->out[0])[0], ==, ids[i].want);
    g_assert_cmpfloat(qh_f32(c->out[0])[1], ==, ids[i].want);
    case_free(c);
  }
  Case *c = reduce_case("ReduceSum", mk(QH_DTYPE_S32, 2, DIMS(2, 2), (const int32_t[]){7, -2, 3, 9}), I64(0));
  run_ok(c, FALSE);
  g_assert_cmpint(c->out[0]->dtype, ==, QH_DTYPE_S32);
  g_assert_cmpint(((int32_t *)c->out[0]->data)[0], ==, 10);
  g_assert_cmpint(((int32_t *)c->out[0]->data)[1], ==, 7);
  case_free(c);
  /* int64 beyond 2^53 keeps every bit */
  const int64_t big = (INT64_C(1) << 60) + 1;
  c = reduce_case("ReduceMax", mk(QH_DTYPE_S64, 1, DIMS(3), (const int64_t[]){big - 1, big, -big}), NULL);
  qh_node_set_attr_int(c->node, "keepdims", 0);
  run_ok(c, FALSE);
  check_i64(c->out[0], 0, DIMS(0), (const int64_t[]){big});
  case_free(c);
}

static void test_argmax(void) {
  const float xs[] = {1, 5, 5, 5, 0, -1};
  Case *c = case_new("ArgMax", 1, 1);
  c->in[0] = mk(QH_DTYPE_F32, 2, DIMS(2, 3), xs);
  qh_node_set_attr_int(c->node, "axis", -1);
  run_ok(c, FALSE);
  check_i64(c->out[0], 2, DIMS(2, 1), DIMS(1, 0));
  qh_node_set_attr_int(c->node, "select_last_index", 1);
  qh_node_set_attr_int(c->node, "keepdims", 0);
  run_ok(c, FALSE);
  check_i64(c->out[0], 1, DIMS(2), DIMS(2, 0));
  qh_node_set_attr_int(c->node, "axis", 0);
  run_ok(c, FALSE);
  check_i64(c->out[0], 1, DIMS(3), DIMS(1, 0, 0));
  case_free(c);
  c = case_new("ArgMax", 1, 1);
  c->in[0] = mk(QH_DTYPE_F32, 2, DIMS(2, 0), NULL);
  qh_node_set_attr_int(c->node, "axis", 1);
  expect_error(c, QH_ERROR_INVALID, "axis 1 is empty");
  case_free(c);
}

static void test_errors(void) {
  Case *c = reduce_case("ReduceSum", mk(QH_DTYPE_F32, 2, DIMS(2, 3), NULL), I64(0));
  qh_node_set_attr_ints(c->node, "axes", 1, DIMS(0));
  expect_error(c, QH_ERROR_INVALID, "axes given both as attribute and as input");
  case_free(c);
  c = reduce_case("ReduceMin", mk(QH_DTYPE_F32, 2, DIMS(2, 3), NULL), NULL);
  qh_node_set_attr_ints(c->node, "axes", 2, DIMS(1, -1));
  expect_error(c, QH_ERROR_INVALID, "axis 1 is listed twice");
  case_free(c);
  c = reduce_case("ReduceL2", mk(QH_DTYPE_S64, 1, DIMS(3), NULL), NULL);
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 0 has type int64");
  case_free(c);
}

/* The trailing-axes fast path against the walk (its twin), bit for bit: every float
 * reduction, trailing and non-trailing axis sets (the latter take the walk in both),
 * keepdims 0 and 1, NaN and infinities among the values, 2 threads against 1. */
static void test_trailing_fast_path(void) {
  static const char *const ops[] = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"};
  static const struct {
    int n;
    int64_t axes[4];
  } sets[] = {{1, {-1}}, {2, {2, 3}}, {3, {1, 2, 3}}, {4, {0, 1, 2, 3}}, {1, {0}}, {1, {2}}, {2, {1, 3}}};
  GRand *rng = g_rand_new_with_seed(18);
  QhTensor *x = mk(QH_DTYPE_F32, 4, DIMS(3, 5, 7, 64), NULL);
  for (int64_t i = 0; i < qh_tensor_numel(x); i++)
    qh_f32(x)[i] = (float)g_rand_double_range(rng, -2.0, 2.0);
  qh_f32(x)[100] = NAN;
  qh_f32(x)[2000] = INFINITY;
  qh_f32(x)[3000] = -INFINITY;
  for (gsize o = 0; o < G_N_ELEMENTS(ops); o++)
    for (gsize a = 0; a < G_N_ELEMENTS(sets); a++)
      for (int keep = 0; keep < 2; keep++) {
        Case *c = reduce_case(ops[o], qh_tensor_copy(x, NULL), NULL);
        qh_node_set_attr_ints(c->node, "axes", sets[a].n, sets[a].axes);
        qh_node_set_attr_int(c->node, "keepdims", keep);
        compare_fast_naive(c);
        case_free(c);
      }
  /* a hand-checked row: the fast path's mean of [1, 2, 4, 8] and [-1, 0, 1, 6] */
  Case *c = reduce_case("ReduceMean", mk(QH_DTYPE_F32, 2, DIMS(2, 4), F32V(1, 2, 4, 8, -1, 0, 1, 6)), NULL);
  qh_node_set_attr_ints(c->node, "axes", 1, DIMS(-1));
  check_both_f32(c, 2, DIMS(2, 1), F32V(3.75f, 1.5f), 0.0f);
  case_free(c);
  qh_tensor_free(x);
  g_rand_free(rng);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/reduce/axes_forms", test_axes_forms);
  g_test_add_func("/kernels/reduce/empty_and_ints", test_empty_and_ints);
  g_test_add_func("/kernels/reduce/argmax", test_argmax);
  g_test_add_func("/kernels/reduce/errors", test_errors);
  g_test_add_func("/kernels/reduce/trailing_fast_path", test_trailing_fast_path);
  return g_test_run();
}
