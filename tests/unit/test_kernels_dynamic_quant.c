/* MatMulInteger's dgemm path against its integer-loop twin (bit-identical int32:
 * zero points scalar, per row of A and per column of B, uint8 and int8 mixes, batch
 * broadcasting, vector operands, an empty K, and a K long enough for the int32 sums to
 * wrap), and DynamicQuantizeLinear's scale, zero point and saturation on
 * hand-computed values. */
#include "kernel_case.h"

static QhTensor *random_int8(QhDType dt, int rank, const int64_t *dims, GRand *rng) {
  QhTensor *t = mk(dt, rank, dims, NULL);
  random_fill(t, rng);
  return t;
}

static void compare(Case *c) {
  run_ok(c, TRUE);
  QhTensor *slow = qh_tensor_copy(c->out[0], NULL);
  run_ok(c, FALSE);
  g_assert_cmpint(c->out[0]->dtype, ==, QH_DTYPE_S32);
  g_assert_true(qh_shape_equal(&slow->shape, &c->out[0]->shape));
  g_assert_cmpmem(slow->data, slow->nbytes, c->out[0]->data, c->out[0]->nbytes);
  qh_tensor_free(slow);
}

static void test_matmulinteger(void) {
  GRand *rng = g_rand_new_with_seed(18);
  static const struct {
    QhDType a, b;
    int ra, rb;
    int64_t da[4], db[4];
    int zpa, zpb; /* 0 none, 1 scalar, 2 per row / column */
  } forms[] = {
      {QH_DTYPE_U8, QH_DTYPE_S8, 2, 2, {7, 33}, {33, 5}, 1, 0},
      {QH_DTYPE_U8, QH_DTYPE_U8, 3, 2, {2, 7, 16}, {16, 9}, 1, 2},
      {QH_DTYPE_S8, QH_DTYPE_S8, 2, 2, {6, 8}, {8, 4}, 2, 1},
      {QH_DTYPE_U8, QH_DTYPE_S8, 4, 3, {2, 1, 3, 5}, {4, 5, 6}, 0, 2}, /* batch broadcast */
      {QH_DTYPE_U8, QH_DTYPE_S8, 1, 2, {9}, {9, 4}, 1, 2},             /* vector A */
      {QH_DTYPE_U8, QH_DTYPE_S8, 3, 1, {2, 3, 9}, {9}, 1, 1},          /* vector B */
      {QH_DTYPE_U8, QH_DTYPE_S8, 2, 2, {3, 0}, {0, 4}, 1, 1},          /* empty K: zeros */
      {QH_DTYPE_U8, QH_DTYPE_U8, 2, 2, {1, 40000}, {40000, 2}, 0, 0},  /* sums wrap in int32 */
  };
  for (gsize f = 0; f < G_N_ELEMENTS(forms); f++) {
    Case *c = case_new("MatMulInteger", 4, 1);
    c->in[0] = random_int8(forms[f].a, forms[f].ra, forms[f].da, rng);
    c->in[1] = random_int8(forms[f].b, forms[f].rb, forms[f].db, rng);
    int64_t m = forms[f].ra >= 2 ? forms[f].da[forms[f].ra - 2] : 1,
            n = forms[f].rb >= 2 ? forms[f].db[forms[f].rb - 1] : 1;
    if (forms[f].zpa)
      c->in[2] = forms[f].zpa == 1 ? random_int8(forms[f].a, 0, DIMS(0), rng)
                                   : random_int8(forms[f].a, 1, DIMS(m), rng);
    if (forms[f].zpb)
      c->in[3] = forms[f].zpb == 1 ? random_int8(forms[f].b, 0, DIMS(0), rng)
                                   : random_int8(forms[f].b, 1, DIMS(n), rng);
    if (f == G_N_ELEMENTS(forms) - 1) { /* all 255: 40000 * 65025 > 2^31 */
      memset(c->in[0]->data, 255, c->in[0]->nbytes);
      memset(c->in[1]->data, 255, c->in[1]->nbytes);
    }
    compare(c);
    if (f == G_N_ELEMENTS(forms) - 1)
      g_assert_cmpint(((int32_t *)c->out[0]->data)[0], ==, (int32_t)(uint32_t)(40000u * 65025u));
    case_free(c);
  }
  g_rand_free(rng);
  /* [[1, 2], [3, 4]] - 1 times [[1, 0], [0, 1]] */
  Case *c = case_new("MatMulInteger", 3, 1);
  c->in[0] = mk(QH_DTYPE_U8, 2, DIMS(2, 2), (const guint8[]){1, 2, 3, 4});
  c->in[1] = mk(QH_DTYPE_S8, 2, DIMS(2, 2), (const gint8[]){1, 0, 0, 1});
  c->in[2] = mk(QH_DTYPE_U8, 0, DIMS(0), (const guint8[]){1});
  run_ok(c, FALSE);
  g_assert_cmpmem(c->out[0]->data, 16, ((const int32_t[]){0, 1, 2, 3}), 16);
  case_free(c);
  c = case_new("MatMulInteger", 4, 1);
  c->in[0] = mk(QH_DTYPE_U8, 2, DIMS(2, 3), NULL);
  c->in[1] = mk(QH_DTYPE_S8, 2, DIMS(3, 4), NULL);
  c->in[3] = mk(QH_DTYPE_S8, 2, DIMS(3, 4), NULL);
  expect_error(c, QH_ERROR_UNSUPPORTED, "b_zero_point of shape [3, 4]: only a scalar or one per column of B");
  case_free(c);
}

static void test_dql(void) {
  Case *c = case_new("DynamicQuantizeLinear", 1, 3);
  c->in[0] = mk(QH_DTYPE_F32, 1, DIMS(4), F32V(-1, 0, 2, 1000));
  run_ok(c, FALSE);
  /* range [-1, 1000]: scale 1001/255, zero point round(255/1001) = 0 */
  g_assert_cmpfloat(qh_f32(c->out[1])[0], ==, 1001.0f / 255.0f);
  g_assert_cmpint(((guint8 *)c->out[2]->data)[0], ==, 0);
  g_assert_cmpmem(c->out[0]->data, 4, ((const guint8[]){0, 0, 1, 255}), 4);
  case_free(c);
  c = case_new("DynamicQuantizeLinear", 1, 3);
  c->in[0] = mk(QH_DTYPE_F32, 1, DIMS(3), F32V(-1, 0, 2));
  run_ok(c, FALSE);
  /* range [-1, 2]: zero point round(1 / (3/255)) = 85; -1 -> 0, 0 -> 85, 2 -> 255 */
  g_assert_cmpint(((guint8 *)c->out[2]->data)[0], ==, 85);
  g_assert_cmpmem(c->out[0]->data, 3, ((const guint8[]){0, 85, 255}), 3);
  case_free(c);
  c = case_new("DynamicQuantizeLinear", 1, 3);
  c->in[0] = mk(QH_DTYPE_F32, 1, DIMS(2), F32V(0, 0));
  run_ok(c, FALSE);
  g_assert_cmpfloat(qh_f32(c->out[1])[0], ==, 1.0f); /* an empty range: scale 1, as ONNX Runtime */
  case_free(c);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/dynamic_quant/matmulinteger", test_matmulinteger);
  g_test_add_func("/kernels/dynamic_quant/dql", test_dql);
  return g_test_run();
}
