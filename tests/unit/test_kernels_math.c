/* Pow's fast path (a dense float base by one scalar exponent, framework/exec/kernels/
 * math.c) against its twin, the broadcast walk with powf: bit for bit for every
 * exponent but 2, which the fast path squares by one multiplication as ONNX Runtime
 * does (correctly rounded; powf may be 1 ulp off), so within 1 ulp there and exactly
 * x * x; plus the cases that must keep the walk (a broadcast base, a vector exponent). */
#include <float.h>

#include "kernel_case.h"

static Case *pow_case(QhTensor *base, QhTensor *exponent) {
  Case *c = case_new("Pow", 2, 1);
  c->in[0] = base;
  c->in[1] = exponent;
  return c;
}

static QhTensor *random_base(GRand *rng, int rank, const int64_t *dims) {
  QhTensor *x = mk(QH_DTYPE_F32, rank, dims, NULL);
  for (int64_t i = 0; i < qh_tensor_numel(x); i++)
    qh_f32(x)[i] = (float)g_rand_double_range(rng, -3.0, 3.0);
  if (qh_tensor_numel(x) > 40) {
    qh_f32(x)[7] = NAN;
    qh_f32(x)[13] = INFINITY;
    qh_f32(x)[21] = -0.0f;
    qh_f32(x)[33] = 1e-30f; /* squares to a subnormal */
  }
  return x;
}

static void test_scalar_exponents(void) {
  GRand *rng = g_rand_new_with_seed(18);
  static const float exps[] = {2.0f, 3.0f, 0.5f, -1.0f, 1.5f, 0.0f};
  for (gsize e = 0; e < G_N_ELEMENTS(exps); e++) {
    Case *c = pow_case(random_base(rng, 3, DIMS(4, 33, 129)), mk(QH_DTYPE_F32, 0, NULL, &exps[e]));
    if (exps[e] != 2.0f) {
      compare_fast_naive(c);
      case_free(c);
      continue;
    }
    run_ok(c, TRUE);
    QhTensor *slow = qh_tensor_copy(c->out[0], NULL);
    run_ok(c, FALSE);
    for (int64_t i = 0; i < qh_tensor_numel(slow); i++) {
      float x = qh_f32(c->in[0])[i], fast = qh_f32(c->out[0])[i], naive = qh_f32(slow)[i];
      if (isnan(x)) {
        g_assert_true(isnan(fast) && isnan(naive));
        continue;
      }
      g_assert_true(fast == x * x);
      g_assert_true(fast == naive || fabsf(fast - naive) <= fabsf(naive) * FLT_EPSILON);
    }
    qh_tensor_free(slow);
    case_free(c);
  }
  /* an int64 exponent, hand-checked on both paths */
  const int64_t two = 2;
  Case *c = pow_case(mk(QH_DTYPE_F32, 1, DIMS(3), F32V(-1.5f, 0, 3)), mk(QH_DTYPE_S64, 0, NULL, &two));
  check_both_f32(c, 1, DIMS(3), F32V(2.25f, 0, 9), 0.0f);
  case_free(c);
  g_rand_free(rng);
}

static void test_broadcast_forms(void) {
  GRand *rng = g_rand_new_with_seed(19);
  /* a vector exponent and a broadcast base: the walk, the same on both paths */
  Case *c = pow_case(random_base(rng, 2, DIMS(5, 8)), mk(QH_DTYPE_F32, 1, DIMS(8), F32V(2, 3, 0.5f, 1, 2, 2, -2, 4)));
  compare_fast_naive(c);
  check_shape(c->out[0], 2, DIMS(5, 8));
  case_free(c);
  const float two = 2.0f;
  c = pow_case(random_base(rng, 1, DIMS(8)), mk(QH_DTYPE_F32, 3, DIMS(2, 1, 1), F32V(2, 3)));
  compare_fast_naive(c);
  check_shape(c->out[0], 3, DIMS(2, 1, 8));
  case_free(c);
  /* a one-element exponent of rank 2 broadcasting the base up: not the fast path */
  c = pow_case(mk(QH_DTYPE_F32, 1, DIMS(2), F32V(3, -2)), mk(QH_DTYPE_F32, 2, DIMS(1, 1), &two));
  check_both_f32(c, 2, DIMS(1, 2), F32V(9, 4), 0.0f);
  case_free(c);
  g_rand_free(rng);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/math/pow_scalar_exponents", test_scalar_exponents);
  g_test_add_func("/kernels/math/pow_broadcast_forms", test_broadcast_forms);
  return g_test_run();
}
