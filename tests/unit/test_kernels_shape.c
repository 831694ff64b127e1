/* Unit tests of the shape and index kernels (Shape, Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose, Identity, Dropout, Constant, Concat, Gather, Slice, Pad),
 * called through their QhOpDefs. Expected values were computed by hand or with
 * numpy and pasted here; fast paths are also compared with their naive twins on
 * random data. */
#include "kernel_case.h"

/* ---- shape family ---- */

static void test_shape(void) {
  Case *c = case_new("Shape", 1, 1);
  c->in[0] = mk(QH_DTYPE_F32, 4, DIMS(2, 3, 4, 5), NULL);
  c->dynamic[0] = TRUE;
  /* the planner runs Shape on inputs without data */
  qh_aligned_free(c->in[0]->data);
  c->in[0]->data = NULL;
  run_ok(c, FALSE);
  check_i64(c->out[0], 1, DIMS(4), DIMS(2, 3, 4, 5));
  qh_node_set_attr_int(c->node, "start", 1);
  qh_node_set_attr_int(c->node, "end", -1);
  run_ok(c, FALSE);
  check_i64(c->out[0], 1, DIMS(2), DIMS(3, 4));
  qh_node_set_attr_int(c->node, "start", -10);
  qh_node_set_attr_int(c->node, "end", 100);
  run_ok(c, FALSE);
  check_i64(c->out[0], 1, DIMS(4), DIMS(2, 3, 4, 5));
  qh_node_set_attr_int(c->node, "start", 3);
  qh_node_set_attr_int(c->node, "end", 1);
  run_ok(c, FALSE);
  check_shape(c->out[0], 1, DIMS(0));
  case_free(c);
}

static void test_reshape(void) {
  Case *c = case_new("Reshape", 2, 1);
  c->in[0] = iota(QH_DTYPE_S64, 3, DIMS(2, 3, 4));
  c->in[1] = I64(0, -1);
  run_ok(c, FALSE);
  int64_t want[24];
  for (int i = 0; i < 24; i++)
    want[i] = i;
  check_i64(c->out[0], 2, DIMS(2, 12), want);
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(4, -1, 2);
  run_ok(c, FALSE);
  check_i64(c->out[0], 3, DIMS(4, 3, 2), want);

  /* allowzero: a 0 is a real empty dimension */
  qh_tensor_free(c->in[0]);
  qh_tensor_free(c->in[1]);
  c->in[0] = mk(QH_DTYPE_U8, 2, DIMS(0, 3), NULL);
  c->in[1] = I64(3, 0);
  qh_node_set_attr_int(c->node, "allowzero", 1);
  run_ok(c, FALSE);
  check_shape(c->out[0], 2, DIMS(3, 0));
  qh_node_set_attr_int(c->node, "allowzero", 0);
  expect_error(c, QH_ERROR_INVALID, "cannot reshape [0, 3]");

  qh_tensor_free(c->in[0]);
  qh_tensor_free(c->in[1]);
  c->in[0] = mk(QH_DTYPE_F32, 2, DIMS(2, 3), NULL);
  c->in[1] = I64(4, 2);
  expect_error(c, QH_ERROR_INVALID, "cannot reshape [2, 3] (6 elements) to [4, 2]");
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(4, -1);
  expect_error(c, QH_ERROR_INVALID, "to [4, -1]");
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(-1, -1);
  expect_error(c, QH_ERROR_INVALID, "more than one -1");
  c->dynamic[1] = TRUE;
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 'shape' must be a constant");
  case_free(c);
}

static void test_flatten(void) {
  static const struct {
    int64_t axis, rows, cols;
  } cases[] = {{0, 1, 24}, {1, 2, 12}, {-1, 6, 4}, {3, 24, 1}, {-3, 1, 24}};
  Case *c = case_new("Flatten", 1, 1);
  c->in[0] = iota(QH_DTYPE_F32, 3, DIMS(2, 3, 4));
  float want[24];
  for (int i = 0; i < 24; i++)
    want[i] = (float)i;
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    qh_node_set_attr_int(c->node, "axis", cases[i].axis);
    run_ok(c, FALSE);
    check_f32(c->out[0], 2, DIMS(cases[i].rows, cases[i].cols), want, 0);
  }
  qh_node_set_attr_int(c->node, "axis", 4);
  expect_error(c, QH_ERROR_INVALID, "axis 4 is outside [-3, 3]");
  case_free(c);
}

static void test_squeeze_unsqueeze(void) {
  Case *c = case_new("Squeeze", 2, 1);
  c->in[0] = iota(QH_DTYPE_S32, 4, DIMS(1, 3, 1, 2));
  c->in[1] = I64(-2);
  run_ok(c, FALSE);
  check_shape(c->out[0], 3, DIMS(1, 3, 2));
  g_assert_cmpint(((int32_t *)c->out[0]->data)[5], ==, 5);
  qh_tensor_free(c->in[1]);
  c->in[1] = NULL;
  run_ok(c, FALSE);
  check_shape(c->out[0], 2, DIMS(3, 2));
  qh_node_set_attr_ints(c->node, "axes", 1, DIMS(0)); /* opset < 13 attribute */
  run_ok(c, FALSE);
  check_shape(c->out[0], 3, DIMS(3, 1, 2));
  c->in[1] = I64(1);
  expect_error(c, QH_ERROR_INVALID, "cannot squeeze axis 1 of size 3");
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(0, -4);
  expect_error(c, QH_ERROR_INVALID, "repeated");
  case_free(c);

  c = case_new("Unsqueeze", 2, 1);
  c->in[0] = iota(QH_DTYPE_S32, 2, DIMS(3, 2));
  c->in[1] = I64(0, -1);
  run_ok(c, FALSE);
  check_shape(c->out[0], 4, DIMS(1, 3, 2, 1));
  g_assert_cmpint(((int32_t *)c->out[0]->data)[4], ==, 4);
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(1);
  run_ok(c, FALSE);
  check_shape(c->out[0], 3, DIMS(3, 1, 2));
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(3);
  expect_error(c, QH_ERROR_INVALID, "axis 3 is outside [-3, 3)");
  c->dynamic[1] = TRUE;
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 'axes' must be a constant");
  case_free(c);
}

static void test_identity_dropout(void) {
  Case *c = case_new("Identity", 1, 1);
  c->in[0] = iota(QH_DTYPE_F32, 2, DIMS(2, 2));
  run_ok(c, FALSE);
  check_f32(c->out[0], 2, DIMS(2, 2), F32V(0, 1, 2, 3), 0);
  case_free(c);

  c = case_new("Dropout", 3, 2);
  c->in[0] = iota(QH_DTYPE_F32, 2, DIMS(2, 2));
  c->in[1] = mk(QH_DTYPE_F32, 0, NULL, F32V(0.5f));
  c->in[2] = mk(QH_DTYPE_BOOL, 0, NULL, (const guint8[]){0});
  run_ok(c, FALSE);
  check_f32(c->out[0], 2, DIMS(2, 2), F32V(0, 1, 2, 3), 0);
  g_assert_cmpint(c->out[1]->dtype, ==, QH_DTYPE_BOOL);
  check_shape(c->out[1], 2, DIMS(2, 2));
  for (int i = 0; i < 4; i++)
    g_assert_cmpint(((guint8 *)c->out[1]->data)[i], ==, 1);
  ((guint8 *)c->in[2]->data)[0] = 1;
  expect_error(c, QH_ERROR_UNSUPPORTED, "training_mode is true");
  /* ratio 0 in training mode (torchvision swin's F.dropout(p=0.0)): an identity */
  ((float *)c->in[1]->data)[0] = 0.0f;
  run_ok(c, FALSE);
  check_f32(c->out[0], 2, DIMS(2, 2), F32V(0, 1, 2, 3), 0);
  case_free(c);
}

static void test_constant(void) {
  Case *c = case_new("Constant", 0, 1);
  qh_node_set_attr_tensor(c->node, "value", iota(QH_DTYPE_S32, 2, DIMS(2, 3)));
  run_ok(c, FALSE);
  g_assert_cmpint(c->out[0]->dtype, ==, QH_DTYPE_S32);
  check_shape(c->out[0], 2, DIMS(2, 3));
  g_assert_cmpint(((int32_t *)c->out[0]->data)[5], ==, 5);
  case_free(c);

  c = case_new("Constant", 0, 1);
  qh_node_set_attr_floats(c->node, "value_floats", 3, F32V(1.5f, -2, 4));
  run_ok(c, FALSE);
  check_f32(c->out[0], 1, DIMS(3), F32V(1.5f, -2, 4), 0);
  case_free(c);

  c = case_new("Constant", 0, 1);
  qh_node_set_attr_int(c->node, "value_int", -7);
  run_ok(c, FALSE);
  check_i64(c->out[0], 0, NULL, DIMS(-7));
  qh_node_set_attr_ints(c->node, "value_ints", 2, DIMS(3, 4));
  expect_error(c, QH_ERROR_INVALID, "has both 'value_int' and 'value_ints'");
  case_free(c);

  c = case_new("Constant", 0, 1);
  qh_node_set_attr_float(c->node, "value_float", 0.25f);
  run_ok(c, FALSE);
  check_f32(c->out[0], 0, NULL, F32V(0.25f), 0);
  case_free(c);

  c = case_new("Constant", 0, 1);
  qh_node_set_attr_string(c->node, "value_string", "x");
  expect_error(c, QH_ERROR_UNSUPPORTED, "'value_string' is not supported");
  case_free(c);
}

static void test_concat(void) {
  Case *c = case_new("Concat", 3, 1);
  c->in[0] = mk(QH_DTYPE_S8, 2, DIMS(2, 1), (const gint8[]){1, 2});
  c->in[1] = mk(QH_DTYPE_S8, 2, DIMS(2, 2), (const gint8[]){3, 4, 5, 6});
  c->in[2] = mk(QH_DTYPE_S8, 2, DIMS(2, 0), NULL);
  qh_node_set_attr_int(c->node, "axis", -1);
  run_ok(c, FALSE);
  check_shape(c->out[0], 2, DIMS(2, 3));
  static const gint8 want[] = {1, 3, 4, 2, 5, 6};
  g_assert_cmpmem(c->out[0]->data, 6, want, 6);
  qh_node_set_attr_int(c->node, "axis", 0);
  expect_error(c, QH_ERROR_INVALID, "input 1's shape [2, 2] does not match input 0's [2, 1]");
  case_free(c);

  c = case_new("Concat", 2, 1);
  c->in[0] = iota(QH_DTYPE_F32, 2, DIMS(1, 2));
  c->in[1] = iota(QH_DTYPE_F32, 2, DIMS(2, 2));
  qh_node_set_attr_int(c->node, "axis", 0);
  run_ok(c, FALSE);
  check_f32(c->out[0], 2, DIMS(3, 2), F32V(0, 1, 0, 1, 2, 3), 0);
  qh_tensor_free(c->in[1]);
  c->in[1] = iota(QH_DTYPE_S32, 2, DIMS(2, 2));
  expect_error(c, QH_ERROR_INVALID, "input 1 has type int32");
  case_free(c);
}

/* ---- Transpose ---- */

static void transpose_case(const int64_t *perm, int rank, QhTensor *input,
                           const int64_t *want_dims, const float *want) {
  Case *c = case_new("Transpose", 1, 1);
  c->in[0] = input;
  if (perm != NULL)
    qh_node_set_attr_ints(c->node, "perm", rank, perm);
  check_both_f32(c, rank, want_dims, want, 0);
  case_free(c);
}

static void test_transpose_values(void) {
  transpose_case(NULL, 2, iota(QH_DTYPE_F32, 2, DIMS(2, 3)), DIMS(3, 2),
                 F32V(0, 3, 1, 4, 2, 5));
  transpose_case(DIMS(0, 2, 3, 1), 4, iota(QH_DTYPE_F32, 4, DIMS(1, 2, 2, 3)),
                 DIMS(1, 2, 3, 2), F32V(0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11));
  transpose_case(DIMS(0, 3, 1, 2), 4, iota(QH_DTYPE_F32, 4, DIMS(1, 2, 3, 2)),
                 DIMS(1, 2, 2, 3), F32V(0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11));
  transpose_case(DIMS(0, 2, 1, 3), 4, iota(QH_DTYPE_F32, 4, DIMS(1, 2, 3, 2)),
                 DIMS(1, 3, 2, 2), F32V(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11));
  transpose_case(DIMS(2, 0, 1), 3, iota(QH_DTYPE_F32, 3, DIMS(2, 1, 3)),
                 DIMS(3, 2, 1), F32V(0, 3, 1, 4, 2, 5));

  Case *c = case_new("Transpose", 1, 1);
  c->in[0] = iota(QH_DTYPE_F32, 2, DIMS(2, 3));
  qh_node_set_attr_ints(c->node, "perm", 2, DIMS(0, 0));
  expect_error(c, QH_ERROR_INVALID, "perm is not a permutation");
  case_free(c);
}

static gboolean next_perm(int64_t *p, int n) {
  int i = n - 2;
  while (i >= 0 && p[i] >= p[i + 1])
    i--;
  if (i < 0)
    return FALSE;
  int j = n - 1;
  while (p[j] <= p[i])
    j--;
  int64_t t = p[i];
  p[i] = p[j];
  p[j] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--) {
    t = p[a];
    p[a] = p[b];
    p[b] = t;
  }
  return TRUE;
}

static void transpose_random(int rank, const int64_t *dims, const int64_t *perm, QhDType dt,
                             GRand *rng) {
  Case *c = case_new("Transpose", 1, 1);
  c->in[0] = mk(dt, rank, dims, NULL);
  random_fill(c->in[0], rng);
  qh_node_set_attr_ints(c->node, "perm", rank, perm);
  compare_fast_naive(c);
  case_free(c);
}

static void test_transpose_fast_vs_naive(void) {
  static const QhDType dts[] = {QH_DTYPE_U8, QH_DTYPE_F16, QH_DTYPE_F32, QH_DTYPE_S64,
                                QH_DTYPE_BOOL};
  GRand *rng = g_rand_new_with_seed(7);
  int k = 0;
  for (int rank = 1; rank <= 5; rank++) {
    int64_t perm[5] = {0, 1, 2, 3, 4}, dims[5];
    do {
      for (int d = 0; d < rank; d++)
        dims[d] = g_rand_int_range(rng, 1, rank <= 3 ? 7 : 4);
      transpose_random(rank, dims, perm, dts[k++ % G_N_ELEMENTS(dts)], rng);
    } while (next_perm(perm, rank));
  }
  /* tile edges, several threads, and a merged trailing element of odd size */
  transpose_random(3, DIMS(2, 67, 45), DIMS(0, 2, 1), QH_DTYPE_F32, rng);
  transpose_random(4, DIMS(3, 40, 33, 5), DIMS(0, 2, 3, 1), QH_DTYPE_U8, rng);
  transpose_random(4, DIMS(3, 33, 5, 40), DIMS(0, 3, 1, 2), QH_DTYPE_S64, rng);
  transpose_random(4, DIMS(2, 35, 34, 3), DIMS(0, 2, 1, 3), QH_DTYPE_F16, rng);
  transpose_random(4, DIMS(2, 0, 3, 4), DIMS(3, 2, 1, 0), QH_DTYPE_F32, rng);
  /* images with a few channels to channels-last: the column-band path, bands with a tail */
  transpose_random(4, DIMS(1, 3, 97, 91), DIMS(0, 2, 3, 1), QH_DTYPE_U8, rng);
  transpose_random(4, DIMS(2, 4, 64, 130), DIMS(0, 2, 3, 1), QH_DTYPE_U8, rng);
  transpose_random(4, DIMS(1, 3, 70, 70), DIMS(0, 2, 3, 1), QH_DTYPE_F32, rng);
  transpose_random(4, DIMS(1, 5, 80, 60), DIMS(0, 2, 3, 1), QH_DTYPE_S8, rng);
  transpose_random(4, DIMS(1, 2, 50, 90), DIMS(0, 2, 3, 1), QH_DTYPE_F16, rng);
  g_rand_free(rng);
}

/* ---- index family ---- */

static void test_gather(void) {
  Case *c = case_new("Gather", 2, 1);
  c->in[0] = iota(QH_DTYPE_F32, 2, DIMS(3, 2));
  c->in[1] = mk(QH_DTYPE_S64, 2, DIMS(2, 2), DIMS(0, 1, -1, 0));
  c->dynamic[1] = TRUE; /* the output shape needs only the indices' shape */
  run_ok(c, FALSE);
  check_f32(c->out[0], 3, DIMS(2, 2, 2), F32V(0, 1, 2, 3, 4, 5, 0, 1), 0);
  qh_tensor_free(c->in[1]);
  c->in[1] = mk(QH_DTYPE_S32, 0, NULL, (const int32_t[]){1});
  qh_node_set_attr_int(c->node, "axis", -1);
  run_ok(c, FALSE);
  check_f32(c->out[0], 1, DIMS(3), F32V(1, 3, 5), 0);
  qh_tensor_free(c->in[1]);
  c->in[1] = mk(QH_DTYPE_S32, 1, DIMS(2), (const int32_t[]){-2, 2});
  expect_error(c, QH_ERROR_INVALID, "index 2 is out of range [-2, 2) on axis 1");
  qh_tensor_free(c->in[1]);
  c->in[1] = mk(QH_DTYPE_F32, 1, DIMS(1), NULL);
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 1 has type float32");
  case_free(c);
}

static Case *slice_case(QhTensor *data, QhTensor *starts, QhTensor *ends, QhTensor *axes,
                        QhTensor *steps) {
  Case *c = case_new("Slice", 5, 1);
  c->in[0] = data;
  c->in[1] = starts;
  c->in[2] = ends;
  c->in[3] = axes;
  c->in[4] = steps;
  return c;
}

static void slice_expect(QhTensor *starts, QhTensor *ends, QhTensor *axes, QhTensor *steps,
                         int rank, const int64_t *dims, const float *want) {
  Case *c = slice_case(iota(QH_DTYPE_F32, 2, DIMS(3, 4)), starts, ends, axes, steps);
  check_both_f32(c, rank, dims, want, 0);
  case_free(c);
}

static void test_slice(void) {
  /* numpy: d = np.arange(12).reshape(3, 4) */
  slice_expect(I64(1, 0), I64(2, 3), NULL, NULL, 2, DIMS(1, 3), F32V(4, 5, 6)); /* d[1:2, 0:3] */
  slice_expect(I64(-1), I64(INT64_MIN), I64(1), I64(-1), 2, DIMS(3, 4),
               F32V(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8)); /* d[:, ::-1] */
  slice_expect(I64(0), I64(INT64_MAX), I64(0), I64(2), 2, DIMS(2, 4),
               F32V(0, 1, 2, 3, 8, 9, 10, 11)); /* d[0::2] */
  slice_expect(I64(1), I64(-1), I64(-1), NULL, 2, DIMS(3, 2),
               F32V(1, 2, 5, 6, 9, 10)); /* d[:, 1:-1] */
  slice_expect(I64(10), I64(-100), I64(1), I64(-2), 2, DIMS(3, 2),
               F32V(3, 1, 7, 5, 11, 9)); /* d[:, 3::-2] */
  slice_expect(I64(2), I64(1), I64(0), NULL, 2, DIMS(0, 4), NULL);
  slice_expect(I64(0), I64(5), I64(1), I64(INT64_MAX), 2, DIMS(3, 1), F32V(0, 4, 8));
  slice_expect(I64(3), I64(0), I64(1), I64(INT64_MIN), 2, DIMS(3, 1), F32V(3, 7, 11));

  /* d3 = np.arange(24).reshape(2, 3, 4); d3[::-1, 2:0:-1, ::3], int32 index inputs */
  Case *c = slice_case(iota(QH_DTYPE_S64, 3, DIMS(2, 3, 4)),
                       mk(QH_DTYPE_S32, 1, DIMS(3), (const int32_t[]){-1, 2, 0}),
                       mk(QH_DTYPE_S32, 1, DIMS(3), (const int32_t[]){INT32_MIN, 0, 4}),
                       mk(QH_DTYPE_S32, 1, DIMS(3), (const int32_t[]){0, 1, 2}),
                       mk(QH_DTYPE_S32, 1, DIMS(3), (const int32_t[]){-1, -1, 3}));
  for (int naive = 0; naive < 2; naive++) {
    run_ok(c, naive);
    check_i64(c->out[0], 3, DIMS(2, 2, 2), DIMS(20, 23, 16, 19, 8, 11, 4, 7));
  }
  c->dynamic[2] = TRUE;
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 'ends' must be a constant");
  case_free(c);

  c = slice_case(iota(QH_DTYPE_F32, 2, DIMS(3, 4)), I64(0), I64(1), I64(1), I64(0));
  expect_error(c, QH_ERROR_INVALID, "step on axis 1 is 0");
  case_free(c);
  c = slice_case(iota(QH_DTYPE_F32, 2, DIMS(3, 4)), I64(0, 0), I64(1), NULL, NULL);
  expect_error(c, QH_ERROR_INVALID, "same length");
  case_free(c);

  GRand *rng = g_rand_new_with_seed(3);
  for (int i = 0; i < 200; i++) {
    int64_t st[3], en[3], sp[3];
    for (int k = 0; k < 3; k++) {
      st[k] = g_rand_int_range(rng, -8, 8);
      en[k] = g_rand_int_range(rng, -8, 8);
      sp[k] = g_rand_int_range(rng, 1, 4) * (g_rand_boolean(rng) ? 1 : -1);
    }
    c = slice_case(mk(QH_DTYPE_F16, 3, DIMS(4, 5, 6), NULL), mk(QH_DTYPE_S64, 1, DIMS(3), st),
                   mk(QH_DTYPE_S64, 1, DIMS(3), en), I64(2, 0, 1),
                   mk(QH_DTYPE_S64, 1, DIMS(3), sp));
    random_fill(c->in[0], rng);
    compare_fast_naive(c);
    case_free(c);
  }
  g_rand_free(rng);
}

static Case *pad_case(const char *mode, QhTensor *data, QhTensor *pads, QhTensor *value) {
  Case *c = case_new("Pad", 4, 1);
  c->in[0] = data;
  c->in[1] = pads;
  c->in[2] = value;
  if (mode != NULL)
    qh_node_set_attr_string(c->node, "mode", mode);
  return c;
}

static void test_pad(void) {
  /* numpy: x = np.arange(1, 7, dtype=np.float32).reshape(2, 3) */
  Case *c = pad_case(NULL, iota(QH_DTYPE_F32, 2, DIMS(2, 3)), I64(1, 0, 0, 2),
                     mk(QH_DTYPE_F32, 0, NULL, F32V(9)));
  for (int i = 0; i < 6; i++)
    qh_f32(c->in[0])[i] += 1;
  check_both_f32(c, 2, DIMS(3, 5), F32V(9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9), 0);
  qh_tensor_free(c->in[2]);
  c->in[2] = NULL; /* default 0 */
  check_both_f32(c, 2, DIMS(3, 5), F32V(0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0), 0);
  /* negative pads crop: x[:, 1:] padded with one row above */
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(1, -1, 0, 0);
  check_both_f32(c, 2, DIMS(3, 2), F32V(0, 0, 2, 3, 5, 6), 0);
  qh_node_set_attr_string(c->node, "mode", "reflect");
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(1, 2, 1, 1); /* np.pad(x, ((1, 1), (2, 1)), mode='reflect') */
  check_both_f32(c, 2, DIMS(4, 6),
                 F32V(6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2), 0);
  qh_node_set_attr_string(c->node, "mode", "edge");
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(0, 2, 1, 1); /* np.pad(x, ((0, 1), (2, 1)), mode='edge') */
  check_both_f32(c, 2, DIMS(3, 6), F32V(1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6, 4, 4, 4, 5, 6, 6), 0);
  qh_node_set_attr_string(c->node, "mode", "wrap");
  expect_error(c, QH_ERROR_UNSUPPORTED, "mode 'wrap' is not supported");
  qh_node_set_attr_string(c->node, "mode", "constant");
  qh_tensor_free(c->in[1]);
  c->in[1] = I64(0, -4, 0, 0);
  expect_error(c, QH_ERROR_INVALID, "do not fit axis 1 of size 3");
  c->dynamic[1] = TRUE;
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 'pads' must be a constant");
  case_free(c);

  /* opset 18's axes input: pad only the last axis */
  c = pad_case("edge", iota(QH_DTYPE_F32, 2, DIMS(2, 2)), I64(1, 0), NULL);
  c->in[3] = I64(-1);
  check_both_f32(c, 2, DIMS(2, 3), F32V(0, 0, 1, 2, 2, 3), 0);
  case_free(c);

  /* reflect wider than the axis, as numpy: np.pad([1, 2, 3], (5, 4), mode='reflect') */
  c = pad_case("reflect", mk(QH_DTYPE_S64, 1, DIMS(3), DIMS(1, 2, 3)), I64(5, 4), NULL);
  for (int naive = 0; naive < 2; naive++) {
    run_ok(c, naive);
    check_i64(c->out[0], 1, DIMS(12), DIMS(2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3));
  }
  case_free(c);

  /* integer fill values of the data's type, and converted from another type */
  c = pad_case(NULL, mk(QH_DTYPE_U8, 1, DIMS(2), (const guint8[]){7, 8}), I64(1, 1),
               mk(QH_DTYPE_U8, 0, NULL, (const guint8[]){200}));
  run_ok(c, FALSE);
  g_assert_cmpmem(c->out[0]->data, 4, ((const guint8[]){200, 7, 8, 200}), 4);
  qh_tensor_free(c->in[2]);
  c->in[2] = mk(QH_DTYPE_F32, 0, NULL, F32V(300));
  run_ok(c, TRUE);
  g_assert_cmpmem(c->out[0]->data, 4, ((const guint8[]){255, 7, 8, 255}), 4);
  case_free(c);
  c = pad_case(NULL, mk(QH_DTYPE_S32, 1, DIMS(1), (const int32_t[]){5}), I64(2, 0),
               mk(QH_DTYPE_S32, 0, NULL, (const int32_t[]){-3}));
  run_ok(c, FALSE);
  g_assert_cmpmem(c->out[0]->data, 12, ((const int32_t[]){-3, -3, 5}), 12);
  case_free(c);

  GRand *rng = g_rand_new_with_seed(5);
  static const char *modes[] = {"constant", "reflect", "edge"};
  for (int i = 0; i < 150; i++) {
    int64_t pads[6];
    for (int k = 0; k < 6; k++)
      pads[k] = g_rand_int_range(rng, -1, 5);
    c = pad_case(modes[i % 3], mk(QH_DTYPE_S8, 3, DIMS(2, 3, 4), NULL),
                 mk(QH_DTYPE_S64, 1, DIMS(6), pads), mk(QH_DTYPE_S8, 0, NULL, (const gint8[]){-9}));
    random_fill(c->in[0], rng);
    compare_fast_naive(c);
    case_free(c);
  }
  g_rand_free(rng);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/shape/shape", test_shape);
  g_test_add_func("/kernels/shape/reshape", test_reshape);
  g_test_add_func("/kernels/shape/flatten", test_flatten);
  g_test_add_func("/kernels/shape/squeeze_unsqueeze", test_squeeze_unsqueeze);
  g_test_add_func("/kernels/shape/identity_dropout", test_identity_dropout);
  g_test_add_func("/kernels/shape/constant", test_constant);
  g_test_add_func("/kernels/shape/concat", test_concat);
  g_test_add_func("/kernels/shape/transpose_values", test_transpose_values);
  g_test_add_func("/kernels/shape/transpose_fast_vs_naive", test_transpose_fast_vs_naive);
  g_test_add_func("/kernels/index/gather", test_gather);
  g_test_add_func("/kernels/index/slice", test_slice);
  g_test_add_func("/kernels/index/pad", test_pad);
  return g_test_run();
}
