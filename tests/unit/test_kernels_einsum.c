/* Einsum's fast path (packing into a batched sgemm) against its naive twin on the
 * equation forms exporters write and on shapes that stress the packing (broadcast
 * ellipsis, diagonals, permuted outputs, empty and size-1 labels), plus a few
 * hand-computed values, and the one-line errors for equations that do not parse or do
 * not fit their inputs. */
#include "kernel_case.h"

static Case *einsum_case(const char *eq, int n, const int *ranks, const int64_t *const *dims, GRand *rng) {
  Case *c = case_new("Einsum", n, 1);
  qh_node_set_attr_string(c->node, "equation", eq);
  for (int i = 0; i < n; i++) {
    c->in[i] = mk(QH_DTYPE_F32, ranks[i], dims[i], NULL);
    for (int64_t e = 0; e < qh_tensor_numel(c->in[i]); e++)
      qh_f32(c->in[i])[e] = (float)g_rand_double_range(rng, -1.0, 1.0);
  }
  return c;
}

/* fast (2 threads) and naive agree within float32 summation order */
static void agree(Case *c) {
  run_ok(c, TRUE);
  QhTensor *slow = qh_tensor_copy(c->out[0], NULL);
  run_ok(c, FALSE);
  g_assert_true(qh_shape_equal(&slow->shape, &c->out[0]->shape));
  double diff = 0, mag = 1e-30;
  for (int64_t i = 0; i < qh_tensor_numel(slow); i++) {
    diff = MAX(diff, fabs((double)qh_f32(slow)[i] - qh_f32(c->out[0])[i]));
    mag = MAX(mag, fabs((double)qh_f32(slow)[i]));
  }
  if (diff / mag > 1e-5)
    g_error("fast vs naive relative difference %g", diff / mag);
  qh_tensor_free(slow);
}

static void test_sweep(void) {
  GRand *rng = g_rand_new_with_seed(18);
  static const struct {
    const char *eq;
    int n, ranks[3];
    int64_t dims[3][5];
  } forms[] = {
      {"bhqd,bhkd->bhqk", 2, {4, 4}, {{2, 3, 17, 8}, {2, 3, 9, 8}}},
      {"bhqk,bhkd->bhqd", 2, {4, 4}, {{2, 3, 17, 9}, {2, 3, 9, 8}}},
      {"bij,jk->bik", 2, {3, 2}, {{3, 5, 7}, {7, 4}}},
      {"bij,jk->kbi", 2, {3, 2}, {{3, 5, 7}, {7, 4}}},           /* permuted output */
      {"...ij,...jk->...ik", 2, {4, 3}, {{2, 1, 3, 4}, {5, 4, 6}}}, /* broadcast both ways */
      {"ij,kj", 2, {2, 2}, {{6, 4}, {5, 4}}},
      {"i,j->ij", 2, {1, 1}, {{6}, {5}}},
      {"bij,bij->b", 2, {3, 3}, {{4, 3, 5}, {4, 3, 5}}},          /* all summed: K only */
      {"abc,cd->abd", 2, {3, 2}, {{2, 1, 3}, {3, 1}}},            /* size-1 labels */
      {"ij,jk->ik", 2, {2, 2}, {{0, 4}, {4, 5}}},                 /* empty M */
      {"ij,jk->ik", 2, {2, 2}, {{3, 0}, {0, 5}}},                 /* empty K: zeros */
      {"iij,jk->ik", 2, {3, 2}, {{4, 4, 3}, {3, 2}}},             /* diagonal: naive */
      {"ij,jk->i", 2, {2, 2}, {{4, 3}, {3, 2}}},                  /* N summed in B: naive */
      {"bn,anm,bm->ba", 3, {2, 3, 2}, {{2, 3}, {4, 3, 5}, {2, 5}}},
  };
  for (gsize f = 0; f < G_N_ELEMENTS(forms); f++) {
    const int64_t *dims[3] = {forms[f].dims[0], forms[f].dims[1], forms[f].dims[2]};
    g_test_message("%s", forms[f].eq);
    Case *c = einsum_case(forms[f].eq, forms[f].n, forms[f].ranks, dims, rng);
    agree(c);
    case_free(c);
  }
  g_rand_free(rng);
}

static void test_values(void) {
  /* [[1,2],[3,4]] x [[5,6],[7,8]] and its trace */
  Case *c = case_new("Einsum", 2, 1);
  qh_node_set_attr_string(c->node, "equation", "ij, jk -> ik");
  c->in[0] = mk(QH_DTYPE_F32, 2, DIMS(2, 2), F32V(1, 2, 3, 4));
  c->in[1] = mk(QH_DTYPE_F32, 2, DIMS(2, 2), F32V(5, 6, 7, 8));
  check_both_f32(c, 2, DIMS(2, 2), F32V(19, 22, 43, 50), 0);
  case_free(c);
  c = case_new("Einsum", 1, 1);
  qh_node_set_attr_string(c->node, "equation", "ii");
  c->in[0] = mk(QH_DTYPE_F32, 2, DIMS(2, 2), F32V(1, 2, 3, 4));
  check_both_f32(c, 0, DIMS(0), F32V(5), 0);
  case_free(c);
}

static void expect_einsum_error(const char *eq, int n, int rank0, const int64_t *d0, int rank1, const int64_t *d1,
                                QhErrorCode code, const char *fragment) {
  Case *c = case_new("Einsum", n, 1);
  if (eq != NULL)
    qh_node_set_attr_string(c->node, "equation", eq);
  c->in[0] = mk(QH_DTYPE_F32, rank0, d0, NULL);
  if (n > 1)
    c->in[1] = mk(QH_DTYPE_F32, rank1, d1, NULL);
  expect_error(c, code, fragment);
  case_free(c);
}

static void test_errors(void) {
  const int64_t *d23 = DIMS(2, 3), *d34 = DIMS(3, 4);
  expect_einsum_error("ij,jk->ik?", 2, 2, d23, 2, d34, QH_ERROR_INVALID,
                      "equation 'ij,jk->ik?' does not parse: a character that is not a letter");
  expect_einsum_error("ij,jk,kl->il", 2, 2, d23, 2, d34, QH_ERROR_INVALID, "more terms than inputs");
  expect_einsum_error("ij->ij", 2, 2, d23, 2, d34, QH_ERROR_INVALID, "fewer terms than inputs");
  expect_einsum_error("i..j,jk", 2, 2, d23, 2, d34, QH_ERROR_INVALID, "a '.' that is not part of '...'");
  expect_einsum_error("...i...,jk", 2, 2, d23, 2, d34, QH_ERROR_INVALID, "two ellipses in one term");
  expect_einsum_error("ij,jk->iz", 2, 2, d23, 2, d34, QH_ERROR_INVALID, "an output letter that no input has");
  expect_einsum_error("ij,jk->ii", 2, 2, d23, 2, d34, QH_ERROR_INVALID, "a letter repeated in the output");
  expect_einsum_error("ijk,jk->i", 2, 2, d23, 2, d34, QH_ERROR_INVALID, "term 0 has 3 letters for input 0");
  expect_einsum_error("ij,kj->ik", 2, 2, d23, 2, d34, QH_ERROR_INVALID, "label j has sizes 3 and 4");
  expect_einsum_error(NULL, 1, 2, d23, 0, NULL, QH_ERROR_INVALID, "attribute 'equation' is missing");
  char *longeq = g_strnfill(300, 'i');
  expect_einsum_error(longeq, 1, 2, d23, 0, NULL, QH_ERROR_INVALID, "equation of 300 characters (at most 256)");
  g_free(longeq);
  /* 2^21 x 2^21 x 2^2: more than 2^40 multiply-adds, refused before any work */
  expect_einsum_error("i,j,k->ijk", 1, 1, DIMS(4), 0, NULL, QH_ERROR_INVALID, "more terms than inputs");
  Case *c = case_new("Einsum", 3, 1);
  qh_node_set_attr_string(c->node, "equation", "i,j,k->");
  c->in[0] = mk(QH_DTYPE_F32, 1, DIMS(1 << 21), NULL);
  c->in[1] = mk(QH_DTYPE_F32, 1, DIMS(1 << 21), NULL);
  c->in[2] = mk(QH_DTYPE_F32, 1, DIMS(4), NULL);
  expect_error(c, QH_ERROR_LIMIT, "needs more than 2^40 multiply-adds");
  case_free(c);
  c = case_new("Einsum", 1, 1);
  qh_node_set_attr_string(c->node, "equation", "ij");
  c->in[0] = mk(QH_DTYPE_S64, 2, d23, NULL);
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 0 has type int64");
  case_free(c);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/einsum/sweep", test_sweep);
  g_test_add_func("/kernels/einsum/values", test_values);
  g_test_add_func("/kernels/einsum/errors", test_errors);
  return g_test_run();
}
