/* Unit tests of HistogramObserver (quant/observers/histogram.c) against the worked
 * examples of docs/numerics.md §10.4, written down from PyTorch 1.13 as float32 hex: the
 * int() truncation of the histc bounds (E2 loses 99 samples), the combine of two
 * histograms (E3) and the plain add when the range does not grow (E4); torch.sum's
 * float32 order (§6.6) on a vector where it differs from a double sum; saving, loading
 * and merging histogram state. The stored min, max and histogram are read back from the
 * saved state, whose layout this test knows. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "hostapi/sdk-private.h"
#include "quant/observer.h"
#include "quant/observers/host-observers.h"

static float *series(int n, float off, float div) {
  float *x = g_new(float, n);
  for (int i = 0; i < n; i++)
    x[i] = ((float)i - off) / div;
  return x;
}

static QhObserverConfig *cfg_hist(int32_t dtype, int32_t qscheme) {
  QhObserverConfig *c = qh_observer_config_new("HistogramObserver");
  c->dtype = dtype;
  c->qscheme = qscheme;
  return c;
}

static QhObserver *make(const QhObserverConfig *c, int n) {
  GError *error = NULL;
  QhObserver *o = qh_observer_new(c, 1, (int64_t[]){n}, &error);
  g_assert_no_error(error);
  return o;
}

static void feed(QhObserver *o, const float *x, int n) {
  QhTensor t = {.dtype = QH_DTYPE_F32, .shape = qh_shape_make(1, (int64_t[]){n}),
                .data = (void *)x, .nbytes = sizeof(float) * (size_t)n};
  GError *error = NULL;
  /* observers are made for one shape; later batches of other lengths need their own */
  o->dims[0] = n;
  g_assert_true(qh_observer_observe(o, &t, &error));
  g_assert_no_error(error);
}

/* min, max and histogram sum from the saved state (header: magic 5, version 4, name
 * length 4 + name, fingerprint 8, rank 4 + 8 per dim, body length 8; body: version 4,
 * bins 4, min 4, max 4, hist). */
static void state(const QhObserver *o, float *mn, float *mx, double *sum) {
  GByteArray *b = g_byte_array_new();
  GError *error = NULL;
  g_assert_true(qh_observer_save(o, b, &error));
  size_t off = 5 + 4 + 4 + strlen("HistogramObserver") + 8 + 4 + 8 * (size_t)o->rank + 8 + 8;
  memcpy(mn, b->data + off, 4);
  memcpy(mx, b->data + off + 4, 4);
  uint32_t bins;
  memcpy(&bins, b->data + off - 4, 4);
  *sum = 0;
  for (uint32_t i = 0; i < bins; i++) {
    float h;
    memcpy(&h, b->data + off + 8 + 4 * i, 4);
    *sum += h;
  }
  g_byte_array_unref(b);
}

static void expect_q(QhObserver *o, float scale, int32_t zp) {
  GError *error = NULL;
  QhQuantParams *q = qh_observer_compute(o, &error);
  g_assert_no_error(error);
  g_assert_cmpint(q->n, ==, 1);
  if (memcmp(&q->scale[0], &scale, 4) != 0 || q->zero_point[0] != zp)
    g_error("got %a / %d, want %a / %d", (double)q->scale[0], q->zero_point[0], (double)scale, zp);
  qh_quant_params_free(q);
}

static void expect_state(const QhObserver *o, float mn, float mx, double sum) {
  float a, b;
  double s;
  state(o, &a, &b, &s);
  g_assert_true(a == mn);
  g_assert_true(b == mx);
  g_assert_cmpfloat(s, ==, sum);
}

static void test_e1(void) {
  float *a = series(2001, 1000, 1000);
  struct {
    int32_t dtype, qscheme;
    gboolean reduce, custom;
    int32_t lo, hi;
    float eps, scale;
    int32_t zp;
  } cases[] = {
      {QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE, FALSE, FALSE, 0, 0, 0, 0x1.00e0ep-7f, 128},
      {QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE, TRUE, FALSE, 0, 0, 0, 0x1.01e3c8p-6f, 64},
      {QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC, FALSE, FALSE, 0, 0, 0x1p-12f,
       0x1.010102p-7f, 0},
      {QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_AFFINE, FALSE, TRUE, -128, 127, 0x1p-12f,
       0x1.00e0ep-7f, 0},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    QhObserverConfig *c = cfg_hist(cases[i].dtype, cases[i].qscheme);
    c->reduce_range = cases[i].reduce;
    c->has_range = cases[i].custom;
    c->quant_min = cases[i].lo;
    c->quant_max = cases[i].hi;
    c->has_eps = cases[i].eps != 0;
    c->eps = cases[i].eps;
    QhObserver *o = make(c, 2001);
    feed(o, a, 2001);
    expect_state(o, -1.0f, 1.0f, 2001);
    expect_q(o, cases[i].scale, cases[i].zp);
    qh_observer_free(o);
    qh_observer_config_free(c);
  }
  g_free(a);
}

static void test_e2_trunc_bug(void) {
  float *b = series(1000, 250, 100);
  QhObserverConfig *c = cfg_hist(QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  QhObserver *o = make(c, 1000);
  feed(o, b, 1000);
  expect_state(o, -2.5f, 7.489999771118164f, 901); /* histc over [-2, 7] */
  expect_q(o, 0x1.40c6e4p-5f, 64);
  qh_observer_free(o);
  qh_observer_config_free(c);
  g_free(b);
}

static void test_e3_e4_merge_paths(void) {
  float *cc = series(500, 0, 499), *d = series(700, 200, 280);
  QhObserverConfig *c = cfg_hist(QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  QhObserver *o = make(c, 500);
  feed(o, cc, 500);
  feed(o, d, 700);
  expect_state(o, -0.7142857313156128f, 1.7857143878936768f, 781);
  expect_q(o, 0x1.41191ap-7f, 73);
  qh_observer_free(o);
  o = make(c, 700);
  feed(o, d, 700);
  feed(o, cc, 500);
  expect_state(o, -0.7142857313156128f, 1.7821428775787354f, 781);
  expect_q(o, 0x1.40a3aap-7f, 73);
  qh_observer_free(o);
  qh_observer_config_free(c);
  g_free(cc);
  g_free(d);
}

static void test_e5_custom_range(void) {
  float *a = series(2001, 1000, 1000);
  for (int i = 0; i < 2001; i++) {
    float r = a[i] > 0 ? a[i] : 0;
    a[i] = r * r;
  }
  QhObserverConfig *c = cfg_hist(QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  c->has_range = TRUE;
  c->quant_min = 0;
  c->quant_max = 127;
  QhObserver *o = make(c, 2001);
  feed(o, a, 2001);
  expect_state(o, 0.0f, 1.0f, 2001);
  expect_q(o, 0x1.0162c6p-7f, 0);
  qh_observer_free(o);
  qh_observer_config_free(c);
  g_free(a);
}

static void test_constant_and_empty(void) {
  QhObserverConfig *c = cfg_hist(QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  QhObserver *o = make(c, 4);
  expect_q(o, 1.0f, 0); /* nothing seen */
  feed(o, (float[]){0, 0, 0, 0}, 4);
  feed(o, (float[]){0}, 0); /* empty: ignored */
  expect_q(o, 0x1p-23f, 0); /* MinMax on (0, 0) */
  float *a = series(2001, 1000, 1000);
  feed(o, a, 2001); /* the constant batch is discarded, as PyTorch does */
  expect_state(o, -1.0f, 1.0f, 2001);
  expect_q(o, 0x1.00e0ep-7f, 128);
  qh_observer_free(o);
  qh_observer_config_free(c);
  g_free(a);
}

static void test_torch_sum_order(void) {
  float v[16] = {0x1p24f, 1.0f};
  v[8] = 1.0f;
  g_assert_cmpfloat(qh_torch_sum_f32(v, 16), ==, 0x1p24f);
  g_assert_cmpfloat(qh_torch_sum_f32_double(v, 16), ==, 0x1p24f + 2.0f);
  /* tail first, then the lanes */
  float w[9] = {0x1p24f, 0, 0, 0, 0, 0, 0, 0, 1.0f};
  g_assert_cmpfloat(qh_torch_sum_f32(w, 9), ==, 0x1p24f);
  float small[3] = {1.0f, 2.0f, 3.0f};
  g_assert_cmpfloat(qh_torch_sum_f32(small, 3), ==, 6.0f);
  /* 2048 ones: every level of the cascade */
  float *ones = g_new(float, 4096);
  for (int i = 0; i < 4096; i++)
    ones[i] = 1.0f;
  g_assert_cmpfloat(qh_torch_sum_f32(ones, 2048), ==, 2048.0f);
  g_assert_cmpfloat(qh_torch_sum_f32(ones, 4093), ==, 4093.0f);
  g_free(ones);
}

static void test_save_load_merge(void) {
  float *cc = series(500, 0, 499), *d = series(700, 200, 280);
  QhObserverConfig *c = cfg_hist(QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  QhObserver *o = make(c, 500);
  feed(o, cc, 500);
  feed(o, d, 700);
  GByteArray *b = g_byte_array_new();
  GError *error = NULL;
  g_assert_true(qh_observer_save(o, b, &error));
  QhObserver *l = qh_observer_load(c, 1, o->dims, b->data, b->len, &error);
  g_assert_no_error(error);
  GByteArray *b2 = g_byte_array_new();
  g_assert_true(qh_observer_save(l, b2, &error));
  g_assert_cmpmem(b->data, b->len, b2->data, b2->len);
  expect_q(l, 0x1.41191ap-7f, 73);

  /* merging into an empty observer copies; merging is approximate otherwise */
  g_assert_false(qh_observer_merge_is_exact(o));
  QhObserver *e = make(c, 700);
  g_assert_true(qh_observer_merge(e, o, &error));
  expect_q(e, 0x1.41191ap-7f, 73);
  QhObserver *s1 = make(c, 500), *s2 = make(c, 700);
  feed(s1, cc, 500);
  feed(s2, d, 700);
  s2->dims[0] = 500;
  g_assert_true(qh_observer_merge(s1, s2, &error));
  g_assert_no_error(error);
  float mn, mx;
  double sum;
  state(s1, &mn, &mx, &sum);
  g_assert_cmpfloat(fabs(sum - 781), <, 1e-3);
  QhQuantParams *q = qh_observer_compute(s1, &error);
  g_assert_cmpfloat(fabs(q->scale[0] / 0x1.41191ap-7f - 1), <, 0.02);
  qh_quant_params_free(q);

  /* another bins count: refused */
  QhObserverConfig *c2 = qh_observer_config_copy(c);
  qh_observer_config_add_arg(c2, "bins", "1024");
  g_assert_null(qh_observer_load(c2, 1, o->dims, b->data, b->len, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_MISMATCH);
  g_clear_error(&error);
  QhObserver *o2 = make(c2, 700);
  g_assert_false(qh_observer_merge(o2, o, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_MISMATCH);
  g_clear_error(&error);
  /* truncated */
  g_assert_null(qh_observer_load(c, 1, o->dims, b->data, b->len - 3, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_PARSE);
  g_clear_error(&error);

  for (QhObserver **p = (QhObserver *[]){o, l, e, s1, s2, o2, NULL}; *p; p++)
    qh_observer_free(*p);
  g_byte_array_unref(b);
  g_byte_array_unref(b2);
  qh_observer_config_free(c);
  qh_observer_config_free(c2);
  g_free(cc);
  g_free(d);
}

static void test_range_blowup_refused(void) {
  QhObserverConfig *c = cfg_hist(QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  QhObserver *o = make(c, 2);
  feed(o, (float[]){0.0f, 1e-30f}, 2);
  QhTensor t = {.dtype = QH_DTYPE_F32, .shape = qh_shape_make(1, (int64_t[]){2}),
                .data = (float[]){0.0f, 1e30f}, .nbytes = 8};
  GError *error = NULL;
  g_assert_false(qh_observer_observe(o, &t, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_LIMIT);
  g_assert_nonnull(strstr(error->message, "HistogramObserver"));
  g_error_free(error);
  qh_observer_free(o);
  qh_observer_config_free(c);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/histogram/e1", test_e1);
  g_test_add_func("/histogram/e2-trunc-bug", test_e2_trunc_bug);
  g_test_add_func("/histogram/e3-e4-merge-paths", test_e3_e4_merge_paths);
  g_test_add_func("/histogram/e5-custom-range", test_e5_custom_range);
  g_test_add_func("/histogram/constant-and-empty", test_constant_and_empty);
  g_test_add_func("/histogram/torch-sum-order", test_torch_sum_order);
  g_test_add_func("/histogram/save-load-merge", test_save_load_merge);
  g_test_add_func("/histogram/range-blowup-refused", test_range_blowup_refused);
  return g_test_run();
}
