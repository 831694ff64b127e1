/* Unit tests of the host reference int8 kernels (exec/int8-reference.h) against
 * hand-computed results: the spec's worked linear example under all three rules, a
 * constructed tie where QNNPACK's integer bias and oneDNN's float bias give answers one
 * step apart, clamps, depthwise / grouped / padded / dilated conv, per-channel weights,
 * add, saturation and argument checks.
 *
 * Oracle mode: `test_int8_reference --oracle IN.json OUT.json` runs the cases of IN
 * (written by tests/parity/int8/check_int8.py) through the kernels and writes the
 * quantized outputs to OUT. */
#include <string.h>

#include <json-glib/json-glib.h>

#include "core/error.h"
#include "exec/int8-reference.h"

static const QhRequantRule all_rules[] = {QH_REQUANT_QNNPACK, QH_REQUANT_ONEDNN,
                                          QH_REQUANT_REFERENCE};

static QhInt8Params params(QhRequantRule rule, QhDType xdt, float sx, int32_t zx,
                           const float *sw, const int32_t *zw, gboolean per_channel,
                           QhDType ydt, float so, int32_t zo, gboolean relu) {
  QhInt8Params p = {.rule = rule,
                    .x = {xdt, sx, zx},
                    .w = {sw, zw, per_channel},
                    .y = {ydt, so, zo}};
  qh_int8_params_set_clamp(&p, relu);
  return p;
}

/* docs/numerics.md §10.6: all three rules agree on it. */
static void test_spec_linear(void) {
  const uint8_t xq[] = {160, 64, 144, 255, 224, 176, 96, 0};
  const int8_t wq[] = {32, -64, 96, 16, -128, 80, 0, 40, 106, 106, -106, 3};
  const float b[] = {0.1f, -0.05f, 0.001f};
  const float sw[] = {0.003125f};
  const uint8_t want[] = {187, 88, 91, 101, 29, 234};
  const uint8_t want_relu[] = {187, 120, 120, 120, 120, 234};
  for (guint r = 0; r < G_N_ELEMENTS(all_rules); r++)
    for (int relu = 0; relu < 2; relu++) {
      QhInt8Params p = params(all_rules[r], QH_DTYPE_U8, 0x1p-6f, 128, sw, NULL, FALSE,
                              QH_DTYPE_U8, 0x1p-7f, 120, relu);
      uint8_t y[6];
      GError *error = NULL;
      g_assert_true(qh_int8_linear_ref(xq, wq, b, 2, 3, 4, &p, y, &error));
      g_assert_no_error(error);
      g_assert_cmpmem(y, 6, relu ? want_relu : want, 6);
    }
}

/* sx = sw = 1, so = 2 (M = 0.5), K = 1, acc = 1. Bias 0.5: QNNPACK bq = rint(0.5) = 0,
 * (1 + 0)·0.5 = 0.5 → 0; oneDNN (1 + 0.5)·0.5 = 0.75 → 1. Bias 1.5: bq = rint(1.5) = 2,
 * 3·0.5 = 1.5 → 2; oneDNN 2.5·0.5 = 1.25 → 1. The reference path follows oneDNN here. */
static void test_tie_rules_differ(void) {
  const uint8_t x[] = {11};
  const int8_t w[] = {1};
  const float sw[] = {1.0f};
  const float biases[] = {0.5f, 1.5f};
  const int8_t want[2][3] = {{0, 1, 1}, {2, 1, 1}}; /* qnnpack, onednn, reference */
  for (int bi = 0; bi < 2; bi++)
    for (guint r = 0; r < 3; r++) {
      QhInt8Params p = params(all_rules[r], QH_DTYPE_U8, 1.0f, 10, sw, NULL, FALSE,
                              QH_DTYPE_S8, 2.0f, 0, FALSE);
      int8_t y = 99;
      g_assert_true(qh_int8_linear_ref(x, w, &biases[bi], 1, 1, 1, &p, &y, NULL));
      g_assert_cmpint(y, ==, want[bi][r]);
    }
}

/* QNNPACK's multiplier is f32(sb * f32(1/so)), not f32(sb / so) as docs/numerics.md §7
 * says: here the two differ by one ulp and acc·M lands either side of −101.5. PyTorch
 * 1.13 (engine qnnpack) gives 26; f32(sb / so) would give 27. Found by the oracle. */
static void test_qnnpack_multiplier(void) {
  const uint8_t x[] = {58};
  const int8_t w[] = {30};
  const float sw[] = {0x1.0dee5ep-7f};
  QhInt8Params p = params(QH_REQUANT_QNNPACK, QH_DTYPE_U8, 0x1.05362cp-5f, 255, sw, NULL, FALSE,
                          QH_DTYPE_U8, 0x1.f5291ep-7f, 128, FALSE);
  uint8_t y = 0;
  g_assert_true(qh_int8_linear_ref(x, w, NULL, 1, 1, 1, &p, &y, NULL));
  g_assert_cmpint(y, ==, 26);
}

/* Clamps: relu keeps [zo, max]; a hand-set relu6-style window; saturation at both ends;
 * an accumulator past int32 saturates instead of wrapping. */
static void test_clamps(void) {
  const int8_t x[] = {-100, 50, 3, -3};
  const int8_t w[] = {1, -1}; /* y = x0 - x1 per row, 2 rows of K = 2 */
  const float sw[] = {1.0f};
  for (guint r = 0; r < 3; r++) {
    QhInt8Params p = params(all_rules[r], QH_DTYPE_S8, 1.0f, 0, sw, NULL, FALSE, QH_DTYPE_S8,
                            1.0f, -10, FALSE);
    int8_t y[2];
    g_assert_true(qh_int8_linear_ref(x, w, NULL, 2, 1, 2, &p, y, NULL));
    g_assert_cmpint(y[0], ==, -128); /* -150 - 10 saturates */
    g_assert_cmpint(y[1], ==, -4);   /* 6 - 10 */
    qh_int8_params_set_clamp(&p, TRUE);
    g_assert_cmpint(p.lo, ==, -10);
    g_assert_true(qh_int8_linear_ref(x, w, NULL, 2, 1, 2, &p, y, NULL));
    g_assert_cmpint(y[0], ==, -10);
    g_assert_cmpint(y[1], ==, -4);
    p.lo = -7;
    p.hi = -5;
    g_assert_true(qh_int8_linear_ref(x, w, NULL, 2, 1, 2, &p, y, NULL));
    g_assert_cmpint(y[0], ==, -7);
    g_assert_cmpint(y[1], ==, -5);
  }
  /* K = 40 000 terms of (255 − 0)·(−128 − 127) = −65 025: −2.6e9 saturates at INT32_MIN. */
  enum { K = 40000 };
  uint8_t *xb = g_malloc(K);
  int8_t *wb = g_malloc(K);
  memset(xb, 255, K);
  memset(wb, -128, K);
  const int32_t zw[] = {127};
  for (guint r = 0; r < 2; r++) {
    QhInt8Params p = params(all_rules[r], QH_DTYPE_U8, 1.0f, 0, sw, zw, FALSE, QH_DTYPE_U8,
                            0x1p-24f, 0, FALSE);
    uint8_t y = 77;
    g_assert_true(qh_int8_linear_ref(xb, wb, NULL, 1, 1, K, &p, &y, NULL));
    g_assert_cmpint(y, ==, 0);
  }
  g_free(xb);
  g_free(wb);
}

/* Per-channel scales and non-zero weight zero points: channel c's result uses sw[c]. */
static void test_per_channel_linear(void) {
  const uint8_t x[] = {12, 14, 6}; /* zx = 10: 2, 4, −4 */
  const int8_t w[] = {1, 2, 3, 5, 5, 5};
  const float sw[] = {0.5f, 0.25f};
  const int32_t zw[] = {0, 4}; /* channel 1: 1, 1, 1 */
  const float b[] = {1.0f, -0.25f};
  /* ch0: acc = 2 + 8 − 12 = −2 → −1 + 1 = 0 → zo; ch1: acc = 2 → 0.5 − 0.25 = 0.25 at so
   * 0.125 → 2 steps. */
  for (guint r = 0; r < 3; r++) {
    QhInt8Params p = params(all_rules[r], QH_DTYPE_U8, 1.0f, 10, sw, zw, TRUE, QH_DTYPE_U8,
                            0.125f, 100, FALSE);
    uint8_t y[2];
    g_assert_true(qh_int8_linear_ref(x, w, b, 1, 2, 3, &p, y, NULL));
    g_assert_cmpint(y[0], ==, 100);
    g_assert_cmpint(y[1], ==, 102);
  }
}

static void run_conv(const QhConv2dGeom *g, const void *x, const int8_t *w, const float *b,
                     const QhInt8Params *p, const int8_t *want, size_t n_want) {
  int64_t oh, ow;
  g_assert_true(qh_conv2d_geom_out(g, &oh, &ow, NULL));
  g_assert_cmpint(g->n * g->c_out * oh * ow, ==, (int64_t)n_want);
  int8_t *y = g_malloc(n_want);
  GError *error = NULL;
  g_assert_true(qh_int8_conv2d_ref(x, w, b, g, p, y, &error));
  g_assert_no_error(error);
  g_assert_cmpmem(y, n_want, want, n_want);
  g_free(y);
}

/* Depthwise 2×2 over two 3×3 channels, per-channel scales; ties to even at 2.5, 4.5. */
static void test_depthwise(void) {
  const int8_t x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 0, 2, 0, 3, 0, 1, 1, 1};
  const int8_t w[] = {1, 0, 0, -1, 2, 1, 1, 2};
  const float sw[] = {1.0f, 0.5f};
  const float b[] = {1.0f, 0.0f};
  const int8_t want[] = {-3, -3, -3, -3, 4, 2, 3, 4};
  QhConv2dGeom g = {.n = 1, .c_in = 2, .h = 3, .w = 3, .c_out = 2, .kh = 2, .kw = 2,
                    .groups = 2, .stride = {1, 1}, .dilation = {1, 1}};
  for (guint r = 0; r < 3; r++) {
    QhInt8Params p = params(all_rules[r], QH_DTYPE_S8, 1.0f, 0, sw, NULL, TRUE, QH_DTYPE_S8,
                            1.0f, 0, FALSE);
    run_conv(&g, x, w, b, &p, want, G_N_ELEMENTS(want));
  }
}

/* Two groups of 1×1 convs over two channels each, two batches. */
static void test_grouped(void) {
  const uint8_t x[] = {11, 12, 13, 14, 15, 16, 17, 18, /* batch 0, zx = 10 */
                       10, 10, 10, 10, 10, 10, 10, 11};
  const int8_t w[] = {1, -1, 2, 1};
  const float sw[] = {1.0f};
  const int8_t want[] = {-2, -2, 17, 20, 0, 0, 0, 1};
  QhConv2dGeom g = {.n = 2, .c_in = 4, .h = 1, .w = 2, .c_out = 2, .kh = 1, .kw = 1,
                    .groups = 2, .stride = {1, 1}, .dilation = {1, 1}};
  for (guint r = 0; r < 3; r++) {
    QhInt8Params p = params(all_rules[r], QH_DTYPE_U8, 1.0f, 10, sw, NULL, FALSE, QH_DTYPE_S8,
                            1.0f, 0, FALSE);
    run_conv(&g, x, w, NULL, &p, want, G_N_ELEMENTS(want));
  }
}

/* Padding holds the input zero point; stride 2; dilation 2 picks the corners. */
static void test_pad_stride_dilation(void) {
  const uint8_t x[] = {11, 12, 13, 14}; /* zx = 10: 1, 2, 3, 4 */
  const int8_t ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const float sw[] = {1.0f};
  QhConv2dGeom g = {.n = 1, .c_in = 1, .h = 2, .w = 2, .c_out = 1, .kh = 3, .kw = 3,
                    .groups = 1, .stride = {1, 1}, .pad = {1, 1, 1, 1}, .dilation = {1, 1}};
  const int8_t want1[] = {10, 10, 10, 10};
  const int8_t want2[] = {10};
  const uint8_t x9[] = {11, 12, 13, 14, 15, 16, 17, 18, 19};
  const int8_t w4[] = {1, 2, 3, 4};
  const int8_t want3[] = {64}; /* 1 + 2·3 + 3·7 + 4·9 */
  QhConv2dGeom gd = {.n = 1, .c_in = 1, .h = 3, .w = 3, .c_out = 1, .kh = 2, .kw = 2,
                     .groups = 1, .stride = {1, 1}, .dilation = {2, 2}};
  /* Asymmetric pads: only the bottom-right pad row/column: 2×2 output of 2×2 sums. */
  const int8_t want4[] = {10, 6, 7, 4};
  QhConv2dGeom ga = {.n = 1, .c_in = 1, .h = 2, .w = 2, .c_out = 1, .kh = 2, .kw = 2,
                     .groups = 1, .stride = {1, 1}, .pad = {0, 0, 1, 1}, .dilation = {1, 1}};
  for (guint r = 0; r < 3; r++) {
    QhInt8Params p = params(all_rules[r], QH_DTYPE_U8, 1.0f, 10, sw, NULL, FALSE, QH_DTYPE_S8,
                            1.0f, 0, FALSE);
    g.stride[0] = g.stride[1] = 1;
    run_conv(&g, x, ones, NULL, &p, want1, 4);
    g.stride[0] = g.stride[1] = 2;
    run_conv(&g, x, ones, NULL, &p, want2, 1);
    run_conv(&gd, x9, w4, NULL, &p, want3, 1);
    run_conv(&ga, x, ones, NULL, &p, want4, 4);
  }
}

static void test_add(void) {
  const uint8_t a[] = {12, 11, 0, 255, 13};
  const uint8_t b[] = {2, 0, 4, 255, 4};
  const QhInt8Quant qa = {QH_DTYPE_U8, 0.5f, 10}, qb = {QH_DTYPE_U8, 0.25f, 0},
                    qy = {QH_DTYPE_U8, 1.0f, 5};
  /* 1.5 → 2; 0.5 → 0 (tie); −4; 122.5 + 63.75 = 186.25; 2.5 → 2 (tie) */
  const uint8_t want[] = {7, 5, 1, 191, 7};
  const uint8_t want_relu[] = {7, 5, 5, 191, 7};
  uint8_t y[5];
  g_assert_true(qh_int8_add_ref(a, &qa, b, &qb, 5, &qy, FALSE, y, NULL));
  g_assert_cmpmem(y, 5, want, 5);
  g_assert_true(qh_int8_add_ref(a, &qa, b, &qb, 5, &qy, TRUE, y, NULL));
  g_assert_cmpmem(y, 5, want_relu, 5);
  const QhInt8Quant qs = {QH_DTYPE_S8, 1.0f, -128};
  int8_t ys[5];
  g_assert_true(qh_int8_add_ref(a, &qa, b, &qb, 5, &qs, FALSE, ys, NULL));
  const int8_t want_s[] = {-126, -128, -128, 58, -126};
  g_assert_cmpmem(ys, 5, want_s, 5);
}

/* docs/numerics.md §10.5: x·inv is exactly 127.5 and rounds to even. */
static void test_quantize_one(void) {
  g_assert_cmpint(qh_int8_quantize_one(0.273939937f, 0.00214854861f, 0, QH_DTYPE_U8), ==, 128);
  g_assert_cmpint(qh_int8_quantize_one(5.0f, 0.01f, 0, QH_DTYPE_U8), ==, 255);
  g_assert_cmpint(qh_int8_quantize_one(-1e30f, 0.01f, 0, QH_DTYPE_S8), ==, -128);
}

static void test_errors(void) {
  const uint8_t x[4] = {0};
  const int8_t w[4] = {0};
  uint8_t y[4];
  const float sw[] = {1.0f}, bad_sw[] = {0.0f};
  const int32_t bad_zw[] = {200};
  GError *error = NULL;
  QhInt8Params p = params(QH_REQUANT_QNNPACK, QH_DTYPE_U8, 1.0f, 300, sw, NULL, FALSE,
                          QH_DTYPE_U8, 1.0f, 0, FALSE);
  g_assert_false(qh_int8_linear_ref(x, w, NULL, 1, 1, 4, &p, y, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_clear_error(&error);
  p.x.zero_point = 0;
  p.w.scales = bad_sw;
  g_assert_false(qh_int8_linear_ref(x, w, NULL, 1, 1, 4, &p, y, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_clear_error(&error);
  p.w.scales = sw;
  p.w.zero_points = bad_zw;
  g_assert_false(qh_int8_linear_ref(x, w, NULL, 1, 1, 4, &p, y, &error));
  g_clear_error(&error);
  p.w.zero_points = NULL;
  p.lo = 10;
  p.hi = 5;
  g_assert_false(qh_int8_linear_ref(x, w, NULL, 1, 1, 4, &p, y, &error));
  g_clear_error(&error);
  p.lo = 0;
  p.hi = 255;
  p.y.dtype = QH_DTYPE_F32;
  g_assert_false(qh_int8_linear_ref(x, w, NULL, 1, 1, 4, &p, y, &error));
  g_clear_error(&error);
  p.y.dtype = QH_DTYPE_U8;
  g_assert_false(qh_int8_linear_ref(x, w, NULL, 1, 1, INT64_MAX / 2, &p, y, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_LIMIT);
  g_clear_error(&error);
  QhConv2dGeom g = {.n = 1, .c_in = 3, .h = 2, .w = 2, .c_out = 2, .kh = 1, .kw = 1,
                    .groups = 2, .stride = {1, 1}, .dilation = {1, 1}};
  g_assert_false(qh_int8_conv2d_ref(x, w, NULL, &g, &p, y, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_clear_error(&error);
  g.c_in = 2;
  g.kh = 3; /* no pad: empty output */
  g_assert_false(qh_int8_conv2d_ref(x, w, NULL, &g, &p, y, &error));
  g_clear_error(&error);
  g_assert_true(qh_int8_linear_ref(x, w, NULL, 1, 1, 4, &p, y, &error));
  g_assert_no_error(error);
}

/* ---- oracle mode ------------------------------------------------------------- */

static float f32_bits(int64_t u) {
  uint32_t v = (uint32_t)u;
  float f;
  memcpy(&f, &v, 4);
  return f;
}

static QhDType dtype_of(const char *s) {
  return g_strcmp0(s, "u8") == 0 ? QH_DTYPE_U8 : QH_DTYPE_S8;
}

static QhInt8Quant quant_of(JsonObject *o) {
  return (QhInt8Quant){dtype_of(json_object_get_string_member(o, "dtype")),
                       f32_bits(json_object_get_int_member(o, "scale_bits")),
                       (int32_t)json_object_get_int_member(o, "zero_point")};
}

/* Integer list → bytes (u8 or s8 storage share the byte layout). */
static guint8 *bytes_of(JsonArray *a, guint *n) {
  *n = json_array_get_length(a);
  guint8 *out = g_malloc(*n + 1);
  for (guint i = 0; i < *n; i++)
    out[i] = (guint8)(int8_t)json_array_get_int_element(a, i);
  return out;
}

static float *floats_of(JsonObject *c, const char *name) {
  if (!json_object_has_member(c, name) || JSON_NODE_HOLDS_NULL(json_object_get_member(c, name)))
    return NULL;
  JsonArray *a = json_object_get_array_member(c, name);
  float *f = g_new(float, json_array_get_length(a) + 1);
  for (guint i = 0; i < json_array_get_length(a); i++)
    f[i] = f32_bits(json_array_get_int_element(a, i));
  return f;
}

/* One case {op: linear|conv2d|add, rule, x{dtype, scale_bits, zero_point}, xq [..],
 * wq [..], w_scale_bits [..], w_zero_points [..], per_channel, bias_bits [..] | null,
 * y{..}, relu, m n k | geometry, (add: b{..}, bq [..])} → [out ints] or {error}. */
static void oracle_case(JsonObject *c, JsonBuilder *out) {
  const char *op = json_object_get_string_member(c, "op");
  const char *rule = json_object_get_string_member_with_default(c, "rule", "qnnpack");
  gboolean relu = json_object_get_boolean_member_with_default(c, "relu", FALSE);
  guint nx, nw = 0, ny = 0;
  guint8 *xq = bytes_of(json_object_get_array_member(c, "xq"), &nx);
  guint8 *wq = NULL, *y = NULL;
  float *sw = NULL, *bias = floats_of(c, "bias_bits");
  int32_t *zw = NULL;
  QhInt8Quant qy = quant_of(json_object_get_object_member(c, "y"));
  GError *error = NULL;
  gboolean ok;
  if (g_strcmp0(op, "add") == 0) {
    guint nb;
    guint8 *bq = bytes_of(json_object_get_array_member(c, "bq"), &nb);
    QhInt8Quant qa = quant_of(json_object_get_object_member(c, "x"));
    QhInt8Quant qb = quant_of(json_object_get_object_member(c, "b"));
    ny = nx;
    y = g_malloc(ny + 1);
    ok = nb == nx && qh_int8_add_ref(xq, &qa, bq, &qb, nx, &qy, relu, y, &error);
    g_free(bq);
  } else {
    wq = bytes_of(json_object_get_array_member(c, "wq"), &nw);
    sw = floats_of(c, "w_scale_bits");
    JsonArray *za = json_object_get_array_member(c, "w_zero_points");
    zw = g_new0(int32_t, json_array_get_length(za) + 1);
    for (guint i = 0; i < json_array_get_length(za); i++)
      zw[i] = (int32_t)json_array_get_int_element(za, i);
    QhInt8Params p = {
        .rule = g_strcmp0(rule, "qnnpack") == 0  ? QH_REQUANT_QNNPACK
                : g_strcmp0(rule, "onednn") == 0 ? QH_REQUANT_ONEDNN
                                                 : QH_REQUANT_REFERENCE,
        .x = quant_of(json_object_get_object_member(c, "x")),
        .w = {sw, zw, json_object_get_boolean_member(c, "per_channel")},
        .y = qy};
    qh_int8_params_set_clamp(&p, relu);
    if (g_strcmp0(op, "linear") == 0) {
      int64_t m = json_object_get_int_member(c, "m"), n = json_object_get_int_member(c, "n"),
              k = json_object_get_int_member(c, "k");
      ny = (guint)(m * n);
      y = g_malloc(ny + 1);
      ok = (int64_t)nx == m * k && (int64_t)nw == n * k &&
           qh_int8_linear_ref(xq, (int8_t *)wq, bias, m, n, k, &p, y, &error);
    } else {
      JsonArray *ga = json_object_get_array_member(c, "geometry");
      int64_t v[16];
      for (guint i = 0; i < 16; i++)
        v[i] = json_array_get_int_element(ga, i);
      QhConv2dGeom g = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7],
                        {v[8], v[9]}, {v[10], v[11], v[12], v[13]}, {v[14], v[15]}};
      int64_t oh = 0, ow = 0;
      ok = qh_conv2d_geom_out(&g, &oh, &ow, &error);
      if (ok) {
        ny = (guint)(g.n * g.c_out * oh * ow);
        y = g_malloc(ny + 1);
        ok = (int64_t)nx == g.n * g.c_in * g.h * g.w &&
             qh_int8_conv2d_ref(xq, (int8_t *)wq, bias, &g, &p, y, &error);
      }
    }
  }
  if (ok) {
    gboolean s = qy.dtype == QH_DTYPE_S8;
    json_builder_begin_array(out);
    for (guint i = 0; i < ny; i++)
      json_builder_add_int_value(out, s ? (int8_t)y[i] : y[i]);
    json_builder_end_array(out);
  } else {
    json_builder_begin_object(out);
    json_builder_set_member_name(out, "error");
    json_builder_add_string_value(out, error ? error->message : "size mismatch");
    json_builder_end_object(out);
  }
  g_clear_error(&error);
  g_free(xq);
  g_free(wq);
  g_free(y);
  g_free(sw);
  g_free(zw);
  g_free(bias);
}

static int oracle_main(const char *in, const char *outp) {
  JsonParser *parser = json_parser_new();
  GError *error = NULL;
  if (!json_parser_load_from_file(parser, in, &error)) {
    g_printerr("%s: %s\n", in, error->message);
    g_error_free(error);
    g_object_unref(parser);
    return 1;
  }
  JsonArray *cases = json_object_get_array_member(
      json_node_get_object(json_parser_get_root(parser)), "cases");
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "results");
  json_builder_begin_array(b);
  for (guint i = 0; i < json_array_get_length(cases); i++)
    oracle_case(json_array_get_object_element(cases, i), b);
  json_builder_end_array(b);
  json_builder_end_object(b);
  JsonGenerator *g = json_generator_new();
  JsonNode *node = json_builder_get_root(b);
  json_generator_set_root(g, node);
  gboolean ok = json_generator_to_file(g, outp, &error);
  if (!ok) {
    g_printerr("%s: %s\n", outp, error->message);
    g_error_free(error);
  }
  json_node_unref(node);
  g_object_unref(g);
  g_object_unref(b);
  g_object_unref(parser);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--oracle") == 0)
    return oracle_main(argv[2], argv[3]);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/int8-reference/spec-linear", test_spec_linear);
  g_test_add_func("/int8-reference/tie-rules-differ", test_tie_rules_differ);
  g_test_add_func("/int8-reference/qnnpack-multiplier", test_qnnpack_multiplier);
  g_test_add_func("/int8-reference/clamps", test_clamps);
  g_test_add_func("/int8-reference/per-channel-linear", test_per_channel_linear);
  g_test_add_func("/int8-reference/depthwise", test_depthwise);
  g_test_add_func("/int8-reference/grouped", test_grouped);
  g_test_add_func("/int8-reference/pad-stride-dilation", test_pad_stride_dilation);
  g_test_add_func("/int8-reference/add", test_add);
  g_test_add_func("/int8-reference/quantize-one", test_quantize_one);
  g_test_add_func("/int8-reference/errors", test_errors);
  return g_test_run();
}
