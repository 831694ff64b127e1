/* Unit tests of the fast QuantizeLinear and DequantizeLinear kernels against their
 * naive twins and against a scalar reference computed here (rint in double of the
 * float quotient, saturated afterwards), on random data seeded with the values the
 * vectorised rounding could get wrong: exact ties k + 0.5, quotients beyond the
 * magic number's range (2^22, 2^23, huge, infinite), NaN, signed zeros, subnormals,
 * odd scales (0, negative, infinite, NaN), per-tensor and per-axis layouts (axis 0,
 * inner, innermost) and lengths that leave vector tails and span two threads; for
 * uint8, int8 and opset 21's uint16, int16, uint4 and int4 (held one per byte). */
#include <float.h>

#include "kernel_case.h"

static float pick_scale(GRand *r) {
  static const float fixed[] = {0.25f, 1.0f, 3.0f, 0.1f, 0.0078125f, 0.3f, 6.0f, 1e-38f,
                                0.0f, -0.5f, INFINITY, NAN, 1e-3f};
  int k = g_rand_int_range(r, 0, G_N_ELEMENTS(fixed) + 6);
  if (k < (int)G_N_ELEMENTS(fixed))
    return fixed[k];
  return (float)g_rand_double_range(r, 1e-4, 2.0);
}

/* A value whose quotient by s probes one of the awkward cases. */
static float pick_x(GRand *r, float s) {
  switch (g_rand_int_range(r, 0, 12)) {
  case 0: /* a tie: exact when s has few mantissa bits (0.25, 3, 6, ...) */
  case 1: return ((float)g_rand_int_range(r, -400, 400) + 0.5f) * s;
  case 8: return ((float)g_rand_int_range(r, -70000, 70000) + 0.5f) * s; /* 16-bit ties */
  case 9: return (float)g_rand_int_range(r, -70000, 70000) * s;
  case 2: return (float)g_rand_int_range(r, -400, 400) * s;
  case 3: {
    static const float huge[] = {1e30f, -1e30f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY};
    return huge[g_rand_int_range(r, 0, G_N_ELEMENTS(huge))];
  }
  case 4: return g_rand_boolean(r) ? NAN : -NAN;
  case 5: return g_rand_boolean(r) ? 0.0f : -0.0f;
  case 6: return (g_rand_boolean(r) ? 1 : -1) * FLT_MIN * (float)g_rand_double(r);
  case 7: { /* around the magic number's range: 2^22, 2^23, 2^24 */
    float base = ldexpf(1.0f, g_rand_int_range(r, 22, 25));
    return (g_rand_boolean(r) ? 1 : -1) * (base + (float)g_rand_int_range(r, -3, 4) * 0.5f) * s;
  }
  default: return (float)(g_rand_double_range(r, -300, 300)) * s;
  }
}

/* Random bytes, brought into range for the 4-bit types (their low nibble, int4's
 * sign-extended), as the loader leaves them. */
static void random_fill_q(QhTensor *t, GRand *r) {
  random_fill(t, r);
  if (t->dtype == QH_DTYPE_U4 || t->dtype == QH_DTYPE_S4)
    for (size_t i = 0; i < t->nbytes; i++) {
      uint8_t v = ((uint8_t *)t->data)[i] & 0xF;
      ((uint8_t *)t->data)[i] = t->dtype == QH_DTYPE_S4 && v >= 8 ? (uint8_t)(v | 0xF0) : v;
    }
}

/* Element i of an integer tensor (4, 8, 16 or 32 bits). */
static int64_t int_at(const QhTensor *t, int64_t i) {
  switch (t->dtype) {
  case QH_DTYPE_U8: case QH_DTYPE_U4: return ((const uint8_t *)t->data)[i];
  case QH_DTYPE_S8: case QH_DTYPE_S4: return ((const int8_t *)t->data)[i];
  case QH_DTYPE_U16: return ((const uint16_t *)t->data)[i];
  case QH_DTYPE_S16: return ((const int16_t *)t->data)[i];
  default: return ((const int32_t *)t->data)[i];
  }
}

static void range_of(QhDType dt, int32_t *qmin, int32_t *qmax) {
  if (dt == QH_DTYPE_U4 || dt == QH_DTYPE_S4) {
    *qmin = dt == QH_DTYPE_S4 ? -8 : 0;
    *qmax = dt == QH_DTYPE_S4 ? 7 : 15;
    return;
  }
  *qmin = dt == QH_DTYPE_S8 ? -128 : dt == QH_DTYPE_S16 ? -32768 : 0;
  *qmax = dt == QH_DTYPE_S8 ? 127 : dt == QH_DTYPE_S16 ? 32767 : dt == QH_DTYPE_U16 ? 65535 : 255;
}

static int32_t ref_quantize(float x, float s, int32_t z, int32_t qmin, int32_t qmax) {
  float v = x / s;
  if (isnan(v))
    return z; /* qhost's choice: NaN quantizes like 0 */
  double q = rint((double)v) + z;
  return q < qmin ? qmin : q > qmax ? qmax : (int32_t)q;
}

/* Quantize x of shape dims with channels scales along axis (channels 0: per tensor,
 * a scalar scale); zdt U8, S8, or 0 for no zero point. */
static void check_quantize(GRand *r, int rank, const int64_t *dims, int axis, QhDType zdt) {
  int64_t channels = axis < 0 ? 1 : dims[axis];
  Case *c = case_new("QuantizeLinear", zdt ? 3 : 2, 1);
  if (axis >= 0)
    qh_node_set_attr_int(c->node, "axis", g_rand_boolean(r) ? axis : axis - rank);
  c->in[0] = mk(QH_DTYPE_F32, rank, dims, NULL);
  c->in[1] = mk(QH_DTYPE_F32, axis < 0 ? 0 : 1, &channels, NULL);
  c->dynamic[0] = TRUE;
  for (int64_t k = 0; k < channels; k++)
    qh_f32(c->in[1])[k] = pick_scale(r);
  if (zdt) {
    c->in[2] = mk(zdt, axis < 0 ? 0 : 1, &channels, NULL);
    random_fill_q(c->in[2], r);
  }
  int64_t inner = 1;
  for (int d = axis + 1; axis >= 0 && d < rank; d++)
    inner *= dims[d];
  int64_t n = qh_tensor_numel(c->in[0]);
  for (int64_t i = 0; i < n; i++)
    qh_f32(c->in[0])[i] = pick_x(r, qh_f32(c->in[1])[(i / inner) % channels]);
  compare_fast_naive(c); /* leaves the fast output in c->out[0] */
  const QhTensor *y = c->out[0];
  g_assert_cmpint(y->dtype, ==, zdt ? zdt : QH_DTYPE_U8);
  int32_t qmin, qmax;
  range_of(y->dtype, &qmin, &qmax);
  for (int64_t i = 0; i < n; i++) {
    int64_t ch = (i / inner) % channels;
    int32_t z = !zdt ? 0 : (int32_t)int_at(c->in[2], ch);
    float x = qh_f32(c->in[0])[i], s = qh_f32(c->in[1])[ch];
    int32_t want = ref_quantize(x, s, z, qmin, qmax);
    int32_t got = (int32_t)int_at(y, i);
    if (got != want)
      g_error("element %" G_GINT64_FORMAT ": x %a scale %a zp %d: got %d, expected %d", i,
              (double)x, (double)s, z, got, want);
  }
  case_free(c);
}

static void check_dequantize(GRand *r, int rank, const int64_t *dims, int axis, QhDType xdt,
                             gboolean with_zp) {
  int64_t channels = axis < 0 ? 1 : dims[axis];
  Case *c = case_new("DequantizeLinear", with_zp ? 3 : 2, 1);
  if (axis >= 0)
    qh_node_set_attr_int(c->node, "axis", axis);
  c->in[0] = mk(xdt, rank, dims, NULL);
  c->in[1] = mk(QH_DTYPE_F32, axis < 0 ? 0 : 1, &channels, NULL);
  c->dynamic[0] = TRUE;
  random_fill_q(c->in[0], r);
  for (int64_t k = 0; k < channels; k++)
    qh_f32(c->in[1])[k] = g_rand_int_range(r, 0, 4) == 0 ? pick_scale(r)
                                                       : (float)g_rand_double_range(r, -1, 1);
  if (with_zp) {
    c->in[2] = mk(xdt, axis < 0 ? 0 : 1, &channels, NULL);
    if (xdt != QH_DTYPE_S32) /* int32 zero points must be 0; mk leaves them zeroed */
      random_fill_q(c->in[2], r);
  }
  int64_t n = qh_tensor_numel(c->in[0]);
  if (xdt == QH_DTYPE_S32 && n >= 4) { /* the extremes, whose float conversion rounds */
    const int32_t ext[] = {INT32_MIN, INT32_MAX, INT32_MAX - 63, 16777217};
    memcpy(c->in[0]->data, ext, sizeof ext);
  }
  int64_t inner = 1;
  for (int d = axis + 1; axis >= 0 && d < rank; d++)
    inner *= dims[d];
  compare_fast_naive(c);
  for (int64_t i = 0; i < n; i++) {
    int64_t ch = (i / inner) % channels;
    int64_t x = int_at(c->in[0], i), z = with_zp ? int_at(c->in[2], ch) : 0;
    float want = (float)(x - z) * qh_f32(c->in[1])[ch], got = qh_f32(c->out[0])[i];
    if (memcmp(&want, &got, sizeof want) != 0 && !(isnan(want) && isnan(got)))
      g_error("element %" G_GINT64_FORMAT ": got %a, expected %a", i, (double)got,
              (double)want);
  }
  case_free(c);
}

typedef struct {
  int rank;
  int64_t dims[4];
  int axis; /* -1: per tensor */
} Layout;

static const Layout layouts[] = {
    {1, {1}, -1},          {1, {37}, -1},        {4, {1, 8, 56, 56}, -1}, /* two threads */
    {4, {2, 3, 5, 7}, 1},  {4, {2, 3, 5, 7}, 0}, {4, {2, 3, 5, 7}, 3},    /* innermost */
    {2, {19, 13}, 1},      {1, {23}, 0},         {4, {1, 32, 33, 33}, 1}, /* two threads */
    {3, {4, 1, 9}, 1},     {0, {0}, -1},         {2, {0, 5}, 1},          /* scalar, empty */
};

static void test_quantize_fast_vs_naive(void) {
  GRand *r = g_rand_new_with_seed(20261122);
  const QhDType zdts[] = {QH_DTYPE_U8, QH_DTYPE_S8, QH_DTYPE_U16, QH_DTYPE_S16, QH_DTYPE_U4, QH_DTYPE_S4, 0};
  for (int rep = 0; rep < 4; rep++)
    for (guint l = 0; l < G_N_ELEMENTS(layouts); l++)
      for (guint z = 0; z < G_N_ELEMENTS(zdts); z++)
        check_quantize(r, layouts[l].rank, layouts[l].dims, layouts[l].axis, zdts[z]);
  g_rand_free(r);
}

/* Every length up to a few vectors, so that each tail length is exercised. */
static void test_quantize_tails(void) {
  GRand *r = g_rand_new_with_seed(7);
  for (int64_t n = 1; n <= 70; n++) {
    static const QhDType dts[] = {QH_DTYPE_U8, QH_DTYPE_S8, QH_DTYPE_U16, QH_DTYPE_S16};
    check_quantize(r, 1, &n, -1, dts[n % 4]);
    check_dequantize(r, 1, &n, -1, dts[n % 4], TRUE);
  }
  g_rand_free(r);
}

/* The ties and the reciprocal trap, spelled out: with scale 0.3f, -35.25f / 0.3f is
 * -117.49999 (-> -117) while -35.25f * (1 / 0.3f) is -117.5 (-> -118); 2.5 -> 2,
 * -2.5 -> -2, 3.5 -> 4 on a 16-element input so that the vector loop handles them. */
static void test_quantize_known(void) {
  Case *c = case_new("QuantizeLinear", 3, 1);
  const float xs[16] = {-35.25f, -17.25f, 2.5f, -2.5f, 3.5f, -0.0f, NAN, 1e30f,
                        -1e30f,  0.5f,    1.5f, -1.5f, 127.5f, -128.5f, 126.5f, 8388609.0f};
  c->in[0] = mk(QH_DTYPE_F32, 1, DIMS(16), xs);
  c->in[2] = mk(QH_DTYPE_S8, 0, NULL, (const int8_t[]){0});
  const int8_t want[16] = {-117, -57, 2, -2, 4, 0, 0, 127, -128, 0, 2, -2, 127, -128, 126, 127};
  c->in[1] = mk(QH_DTYPE_F32, 0, NULL, F32V(0.3f));
  for (int naive = 0; naive < 2; naive++) {
    run_ok(c, naive);
    g_assert_cmpint(((int8_t *)c->out[0]->data)[0], ==, -117);
    g_assert_cmpint(((int8_t *)c->out[0]->data)[1], ==, -57);
  }
  qh_tensor_free(c->in[1]);
  c->in[1] = mk(QH_DTYPE_F32, 0, NULL, F32V(1.0f));
  for (int naive = 0; naive < 2; naive++) {
    run_ok(c, naive);
    g_assert_cmpmem(c->out[0]->data + 2, 14, want + 2, 14);
  }
  case_free(c);
}

static void test_dequantize_fast_vs_naive(void) {
  GRand *r = g_rand_new_with_seed(99);
  const QhDType xdts[] = {QH_DTYPE_U8,  QH_DTYPE_S8, QH_DTYPE_U16, QH_DTYPE_S16,
                          QH_DTYPE_U4,  QH_DTYPE_S4, QH_DTYPE_S32};
  for (int rep = 0; rep < 3; rep++)
    for (guint l = 0; l < G_N_ELEMENTS(layouts); l++)
      for (guint x = 0; x < G_N_ELEMENTS(xdts); x++)
        for (int zp = 0; zp < 2; zp++)
          check_dequantize(r, layouts[l].rank, layouts[l].dims, layouts[l].axis, xdts[x], zp);
  g_rand_free(r);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/qdq/quantize_fast_vs_naive", test_quantize_fast_vs_naive);
  g_test_add_func("/kernels/qdq/quantize_tails", test_quantize_tails);
  g_test_add_func("/kernels/qdq/quantize_known", test_quantize_known);
  g_test_add_func("/kernels/qdq/dequantize_fast_vs_naive", test_dequantize_fast_vs_naive);
  return g_test_run();
}
