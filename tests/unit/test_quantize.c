/* Unit tests of PyTorch's quantization arithmetic (quant/quantize.c) against the worked
 * examples of docs/numerics.md §3 and §10 (oracle outputs written down as float32 hex):
 * qparams from min/max for affine and symmetric schemes, quint8 / qint8, reduced and
 * custom ranges, eps; quantize with the reciprocal rule and ties to even; dequantize;
 * and a check that this build does not contract a*b+c into an FMA. */
#include <math.h>
#include <string.h>

#include "hostapi/sdk-private.h"
#include "quant/quantize.h"

#define U8 QH_DTYPE_UINT8
#define S8 QH_DTYPE_INT8
#define AFF QH_QSCHEME_PER_TENSOR_AFFINE
#define SYM QH_QSCHEME_PER_TENSOR_SYMMETRIC
#define EPS 0x1p-23f

static void expect(float mn, float mx, int32_t qmin, int32_t qmax, int32_t qs, int32_t dt,
                   gboolean custom, float eps, float want_scale, int32_t want_zp) {
  float s;
  int32_t z;
  qh_quant_calculate_qparams(mn, mx, qmin, qmax, qs, dt, custom, eps, &s, &z);
  if (memcmp(&s, &want_scale, 4) != 0 || z != want_zp)
    g_error("qparams(%a, %a, [%d, %d], qscheme %d, dtype %d): got %a / %d, want %a / %d",
            (double)mn, (double)mx, qmin, qmax, qs, dt, (double)s, z, (double)want_scale, want_zp);
}

/* §10.1: x = [-1, -0.5, 0, 0.25, 2] -> min -1, max 2. */
static void test_minmax_examples(void) {
  expect(-1, 2, 0, 255, AFF, U8, FALSE, EPS, 0x1.818182p-7f, 85);
  expect(-1, 2, -128, 127, AFF, S8, FALSE, EPS, 0x1.818182p-7f, -43);
  expect(-1, 2, 0, 127, AFF, U8, FALSE, EPS, 0x1.83060cp-6f, 42);
  expect(-1, 2, 0, 255, SYM, U8, FALSE, EPS, 0x1.010102p-6f, 128);
  expect(-1, 2, -128, 127, SYM, S8, FALSE, EPS, 0x1.010102p-6f, 0);
  expect(-1, 2, -64, 63, SYM, S8, FALSE, EPS, 0x1.020408p-5f, 0);
  expect(-1, 2, -127, 127, SYM, S8, TRUE, 0x1p-12f, 0x1.020408p-6f, 0);
  expect(-1, 2, 0, 127, SYM, U8, TRUE, EPS, 0x1.020408p-5f, 63);
  /* x2 = [0.1, 0.2, 0.3] */
  expect(0.1f, 0.3f, 0, 255, AFF, U8, FALSE, EPS, 0x1.34679cp-10f, 0);
  expect(0.1f, 0.3f, -128, 127, AFF, S8, FALSE, EPS, 0x1.34679cp-10f, -128);
  /* zeros: the scale is eps */
  expect(0, 0, 0, 255, AFF, U8, FALSE, EPS, 0x1p-23f, 0);
  expect(0, 0, -128, 127, SYM, S8, FALSE, EPS, 0x1p-23f, 0);
}

/* §10.2 rows, one channel at a time. */
static void test_per_channel_examples(void) {
  const int32_t PCS = QH_QSCHEME_PER_CHANNEL_SYMMETRIC, PCA = QH_QSCHEME_PER_CHANNEL_AFFINE;
  expect(-0.25f, 0.5f, -128, 127, PCS, S8, FALSE, EPS, 0x1.010102p-8f, 0);
  expect(-2.0f, 1.0f, -128, 127, PCS, S8, FALSE, EPS, 0x1.010102p-6f, 0);
  expect(0, 0, -128, 127, PCS, S8, FALSE, EPS, 0x1p-23f, 0);
  expect(0.001f, 3.0f, -128, 127, PCS, S8, FALSE, EPS, 0x1.818182p-6f, 0);
  expect(-0.25f, 0.5f, 0, 255, PCA, U8, FALSE, EPS, 0x1.818182p-9f, 85);
  expect(-2.0f, 1.0f, 0, 255, PCA, U8, FALSE, EPS, 0x1.818182p-7f, 170);
  expect(0.001f, 3.0f, 0, 255, PCA, U8, FALSE, EPS, 0x1.818182p-7f, 0);
  expect(-0.25f, 0.5f, -127, 127, PCS, S8, TRUE, 0x1p-12f, 0x1.020408p-8f, 0);
  expect(0, 0, -127, 127, PCS, S8, TRUE, 0x1p-12f, 0x1p-12f, 0);
  expect(0.001f, 3.0f, -127, 127, PCS, S8, TRUE, 0x1p-12f, 0x1.83060cp-6f, 0);
}

/* §10.5 */
static void test_quantize_examples(void) {
  const float x[7] = {-1.0f, -0.5f, 0.0f, 0.25f, 2.0f, 0.0058823530562222f, 0.00784313678741455f};
  uint8_t qu[7];
  qh_quant_quantize(x, 7, 0x1.818182p-7f, 85, U8, qu);
  const uint8_t want_u[7] = {0, 43, 85, 106, 255, 85, 86};
  g_assert_cmpmem(qu, 7, want_u, 7);
  float dq[7];
  qh_quant_dequantize(qu, 7, U8, 0x1.818182p-7f, 85, dq);
  const float want_dq[7] = {-1.0f, -0.4941176474094391f, 0.0f, 0.24705882370471954f, 2.0f, 0.0f,
                            0.0117647061124444f};
  g_assert_cmpmem(dq, sizeof dq, want_dq, sizeof want_dq);

  int8_t qs[7];
  qh_quant_quantize(x, 7, 0.015748031437397003f, 0, S8, qs);
  const int8_t want_s[7] = {-64, -32, 0, 16, 127, 0, 0};
  g_assert_cmpmem(qs, 7, want_s, 7);
  qh_quant_dequantize(qs, 7, S8, 0.015748031437397003f, 0, dq);
  const float want_ds[7] = {-1.0078740119934082f, -0.5039370059967041f, 0, 0.25196850299835205f,
                            2.0f, 0, 0};
  g_assert_cmpmem(dq, sizeof dq, want_ds, sizeof want_ds);

  /* reciprocal rule: x * f32(1/s) = 127.5 exactly -> 128 (x / s would give 127) */
  const float r = 0.273939937f;
  uint8_t q1;
  qh_quant_quantize(&r, 1, 0.00214854861f, 0, U8, &q1);
  g_assert_cmpint(q1, ==, 128);

  /* §0: ties to even, zero point added after rounding, storage clamp not range clamp */
  const float ties[7] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f};
  uint8_t qt[7];
  qh_quant_quantize(ties, 7, 1.0f, 10, U8, qt);
  const uint8_t want_t[7] = {10, 12, 12, 10, 8, 8, 14};
  g_assert_cmpmem(qt, 7, want_t, 7);
  const float five = 5.0f;
  qh_quant_quantize(&five, 1, 0.01f, 0, U8, &q1);
  g_assert_cmpint(q1, ==, 255);
}

static void test_per_channel_quantize(void) {
  QhQuantParams *q = qh_quant_params_new(2);
  q->dtype = S8;
  q->ch_axis = 1;
  q->scale[0] = 0.5f;
  q->scale[1] = 0.25f;
  q->zero_point[0] = 0;
  q->zero_point[1] = 1;
  /* shape [2, 2, 2]: axis 1 */
  const float x[8] = {1, 2, 1, 2, -1, 100, -1, -100};
  int8_t out[8];
  qh_quant_quantize_per_channel(x, 3, (int64_t[]){2, 2, 2}, q, out);
  const int8_t want[8] = {2, 4, 5, 9, -2, 127, -3, -128};
  g_assert_cmpmem(out, 8, want, 8);
  qh_quant_params_free(q);
}

/* GCC contracts a*b+c into an FMA unless told not to; parity needs two roundings. */
static volatile float va = 0x1.000002p+0f, vb = 0x1.000002p+0f, vc = -0x1.000004p+0f;
static void test_no_fma(void) {
  float a = va, b = vb, c = vc;
  float r = a * b + c; /* exact product 1 + 2^-22 + 2^-46; rounded product is 1 + 2^-22 */
  g_assert_true(r == 0.0f);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/quantize/minmax-examples", test_minmax_examples);
  g_test_add_func("/quantize/per-channel-examples", test_per_channel_examples);
  g_test_add_func("/quantize/quantize-examples", test_quantize_examples);
  g_test_add_func("/quantize/per-channel", test_per_channel_quantize);
  g_test_add_func("/quantize/no-fma", test_no_fma);
  return g_test_run();
}
