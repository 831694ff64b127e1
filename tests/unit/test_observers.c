/* Unit tests of the host observers through the public API (quant/observer.h): the
 * worked examples of docs/numerics.md §10.1-10.3 as float32 hex (MinMax family, per
 * channel, moving averages), config checks and their messages, NaN/Inf and shape
 * errors, saving/loading/merging state, FixedQParams and Placeholder, and the ONNX
 * Runtime-style observers on data whose answer is known.
 *
 * Oracle mode: `test_observers --oracle IN.json OUT.json` runs the observer cases of IN
 * (written by tests/parity/observers/check_observers.py, data as base64 float32) and
 * writes their qparams as float32 bits, plus torch_sum_f32 of the vectors under "sums",
 * so that the script can compare them bit for bit with PyTorch. */
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "hostapi/sdk-private.h"
#include "quant/observer.h"
#include "quant/observers/host-observers.h"

static QhObserverConfig *cfg(const char *name, int32_t dtype, int32_t qscheme) {
  QhObserverConfig *c = qh_observer_config_new(name);
  c->dtype = dtype;
  c->qscheme = qscheme;
  return c;
}

static QhTensor view(const float *x, int rank, const int64_t *dims) {
  QhTensor t = {.dtype = QH_DTYPE_F32, .shape = qh_shape_make(rank, dims), .data = (void *)x};
  t.nbytes = sizeof(float) * (size_t)qh_tensor_numel(&t);
  return t;
}

static QhQuantParams *run(const QhObserverConfig *c, int rank, const int64_t *dims, int nb,
                          const float *const *batches) {
  GError *error = NULL;
  QhObserver *o = qh_observer_new(c, rank, dims, &error);
  g_assert_no_error(error);
  for (int i = 0; i < nb; i++) {
    QhTensor t = view(batches[i], rank, dims);
    g_assert_true(qh_observer_observe(o, &t, &error));
    g_assert_no_error(error);
  }
  QhQuantParams *q = qh_observer_compute(o, &error);
  g_assert_no_error(error);
  qh_observer_free(o);
  return q;
}

static void expect(const QhQuantParams *q, int i, float scale, int32_t zp) {
  if (memcmp(&q->scale[i], &scale, 4) != 0 || q->zero_point[i] != zp)
    g_error("entry %d: got %a / %d, want %a / %d", i, (double)q->scale[i], q->zero_point[i],
            (double)scale, zp);
}

static const float X[5] = {-1.0f, -0.5f, 0.0f, 0.25f, 2.0f};

static void test_minmax(void) {
  const float *b[] = {X};
  int64_t d[] = {5};
  struct {
    int32_t dt, qs;
    gboolean rr, custom;
    int32_t lo, hi;
    float eps, scale;
    int32_t zp;
  } cs[] = {
      {QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE, FALSE, FALSE, 0, 0, 0, 0x1.818182p-7f, 85},
      {QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_AFFINE, FALSE, FALSE, 0, 0, 0, 0x1.818182p-7f, -43},
      {QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE, TRUE, FALSE, 0, 0, 0, 0x1.83060cp-6f, 42},
      {QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE, FALSE, TRUE, 0, 127, 0, 0x1.83060cp-6f, 42},
      {QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC, FALSE, FALSE, 0, 0, 0, 0x1.010102p-6f,
       128},
      {QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC, FALSE, FALSE, 0, 0, 0, 0x1.010102p-6f, 0},
      {QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC, TRUE, FALSE, 0, 0, 0, 0x1.020408p-5f, 0},
      {QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC, FALSE, TRUE, -127, 127, 0x1p-12f,
       0x1.020408p-6f, 0},
      {QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC, FALSE, TRUE, 0, 127, 0, 0x1.020408p-5f,
       63},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cs); i++) {
    QhObserverConfig *c = cfg("MinMaxObserver", cs[i].dt, cs[i].qs);
    c->reduce_range = cs[i].rr;
    c->has_range = cs[i].custom;
    c->quant_min = cs[i].lo;
    c->quant_max = cs[i].hi;
    c->has_eps = cs[i].eps != 0;
    c->eps = cs[i].eps;
    QhQuantParams *q = run(c, 1, d, 1, b);
    expect(q, 0, cs[i].scale, cs[i].zp);
    qh_quant_params_free(q);
    qh_observer_config_free(c);
  }
  /* never observed: (1.0, 0) */
  QhObserverConfig *c = cfg("MinMaxObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  QhQuantParams *q = run(c, 1, d, 0, b);
  expect(q, 0, 1.0f, 0);
  qh_quant_params_free(q);
  qh_observer_config_free(c);
}

static const float W[12] = {0.5f, -0.25f, 0.125f, -2.0f, 1.0f, 0.0f,
                            0,    0,      0,      3.0f,  2.9f, 0.001f};

static void test_per_channel(void) {
  const float *b[] = {W};
  int64_t d[] = {4, 3};
  QhObserverConfig *c =
      cfg("PerChannelMinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  QhQuantParams *q = run(c, 2, d, 1, b);
  g_assert_cmpint(q->n, ==, 4);
  g_assert_cmpint(q->ch_axis, ==, 0);
  expect(q, 0, 0x1.010102p-8f, 0);
  expect(q, 1, 0x1.010102p-6f, 0);
  expect(q, 2, 0x1p-23f, 0);
  expect(q, 3, 0x1.818182p-6f, 0);
  qh_quant_params_free(q);
  c->dtype = QH_DTYPE_UINT8;
  c->qscheme = QH_QSCHEME_PER_CHANNEL_AFFINE;
  q = run(c, 2, d, 1, b);
  expect(q, 0, 0x1.818182p-9f, 85);
  expect(q, 1, 0x1.818182p-7f, 170);
  expect(q, 2, 0x1p-23f, 0);
  expect(q, 3, 0x1.818182p-7f, 0);
  qh_quant_params_free(q);
  c->dtype = QH_DTYPE_INT8;
  c->qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC;
  c->has_range = TRUE;
  c->quant_min = -127;
  c->quant_max = 127;
  c->has_eps = TRUE;
  c->eps = 0x1p-12f;
  q = run(c, 2, d, 1, b);
  expect(q, 0, 0x1.020408p-8f, 0);
  expect(q, 1, 0x1.020408p-6f, 0);
  expect(q, 2, 0x1p-12f, 0);
  expect(q, 3, 0x1.83060cp-6f, 0);
  qh_quant_params_free(q);
  /* the channel axis can be the last one: transposed W gives the same answer */
  float wt[12];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      wt[j * 4 + i] = W[i * 3 + j];
  c->ch_axis = -1;
  const float *bt[] = {wt};
  q = run(c, 2, (int64_t[]){3, 4}, 1, bt);
  g_assert_cmpint(q->ch_axis, ==, 1);
  expect(q, 1, 0x1.020408p-6f, 0);
  expect(q, 3, 0x1.83060cp-6f, 0);
  qh_quant_params_free(q);
  qh_observer_config_free(c);
}

static void test_moving_average(void) {
  QhObserverConfig *c =
      cfg("MovingAverageMinMaxObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  const float *b[] = {(float[]){-1, 3}, (float[]){-2, 5}, (float[]){0.5f, 0.75f}};
  QhQuantParams *q = run(c, 1, (int64_t[]){2}, 3, b);
  expect(q, 0, 0x1.0080b4p-6f, 64);
  qh_quant_params_free(q);
  qh_observer_config_free(c);

  c = cfg("MovingAveragePerChannelMinMaxObserver", QH_DTYPE_INT8,
          QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  qh_observer_config_add_arg(c, "averaging_constant", "0.5");
  const float *pb[] = {(float[]){1, -2, 0.5f, 0.25f}, (float[]){3, -1, -4, 0}};
  q = run(c, 2, (int64_t[]){2, 2}, 2, pb);
  expect(q, 0, 0x1.010102p-6f, 0);
  expect(q, 1, 0x1.e1e1e2p-7f, 0);
  qh_quant_params_free(q);
  qh_observer_config_free(c);
}

/* 16-bit dtypes (issue 22; PyTorch 1.13 has none): the 8-bit formulas on [-32768, 32767]
 * and [0, 65535], written out here in float32 as PyTorch's _calculate_qparams does. */
static void test_int16(void) {
  const float *b[] = {X};
  int64_t d[] = {5};
  const float span = 2.0f - -1.0f;
  struct {
    int32_t dt, qs;
    gboolean rr;
    float scale;
    int32_t zp;
  } cs[] = {
      {QH_DTYPE_INT16, QH_QSCHEME_PER_TENSOR_AFFINE, FALSE, span / 65535.0f,
       -32768 - (int32_t)nearbyintf(-1.0f / (span / 65535.0f))},
      {QH_DTYPE_UINT16, QH_QSCHEME_PER_TENSOR_AFFINE, FALSE, span / 65535.0f,
       0 - (int32_t)nearbyintf(-1.0f / (span / 65535.0f))},
      {QH_DTYPE_INT16, QH_QSCHEME_PER_TENSOR_AFFINE, TRUE, span / 32767.0f,
       -16384 - (int32_t)nearbyintf(-1.0f / (span / 32767.0f))},
      {QH_DTYPE_INT16, QH_QSCHEME_PER_TENSOR_SYMMETRIC, FALSE, 2.0f / 32767.5f, 0},
      {QH_DTYPE_UINT16, QH_QSCHEME_PER_TENSOR_SYMMETRIC, FALSE, 2.0f / 32767.5f, 32768},
  };
  g_assert_cmpint(cs[0].zp, ==, -10923);
  for (size_t i = 0; i < G_N_ELEMENTS(cs); i++) {
    for (int which = 0; which < 2; which++) { /* MinMax, and MovingAverage over one batch */
      QhObserverConfig *c = cfg(which ? "MovingAverageMinMaxObserver" : "MinMaxObserver", cs[i].dt, cs[i].qs);
      c->reduce_range = cs[i].rr;
      GError *error = NULL;
      g_assert_true(qh_observer_config_check(c, &error));
      g_assert_no_error(error);
      QhQuantParams *q = run(c, 1, d, 1, b);
      g_assert_cmpint(q->dtype, ==, cs[i].dt);
      expect(q, 0, cs[i].scale, cs[i].zp);
      qh_quant_params_free(q);
      qh_observer_config_free(c);
    }
  }
  /* per channel, symmetric int16: max |w| of each row / 32767.5, eps for the zero row */
  const float *bw[] = {W};
  QhObserverConfig *c = cfg("PerChannelMinMaxObserver", QH_DTYPE_INT16, QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  QhQuantParams *q = run(c, 2, (int64_t[]){4, 3}, 1, bw);
  expect(q, 0, 0.5f / 32767.5f, 0);
  expect(q, 1, 2.0f / 32767.5f, 0);
  expect(q, 2, 0x1p-23f, 0);
  expect(q, 3, 3.0f / 32767.5f, 0);
  qh_quant_params_free(q);
  qh_observer_config_free(c);
  /* Histogram on evenly spread data keeps (nearly) the whole range: 2^16 destination bins */
  float ramp[4096];
  for (int i = 0; i < 4096; i++)
    ramp[i] = (float)i / 4095.0f;
  const float *br[] = {ramp};
  c = cfg("HistogramObserver", QH_DTYPE_INT16, QH_QSCHEME_PER_TENSOR_AFFINE);
  q = run(c, 1, (int64_t[]){4096}, 1, br);
  g_assert_cmpfloat(fabsf(q->scale[0] - 1.0f / 65535.0f), <, 0.01f / 65535.0f);
  g_assert_cmpint(q->zero_point[0], ==, -32768);
  qh_quant_params_free(q);
  qh_observer_config_free(c);
  /* 4-bit weights (issue 22): per channel symmetric qint4 is max |w| / 7.5; quint4's zero
   * point is 8 */
  c = cfg("PerChannelMinMaxObserver", QH_DTYPE_INT4, QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  q = run(c, 2, (int64_t[]){4, 3}, 1, bw);
  expect(q, 0, 0.5f / 7.5f, 0);
  expect(q, 1, 2.0f / 7.5f, 0);
  expect(q, 3, 3.0f / 7.5f, 0);
  qh_quant_params_free(q);
  c->dtype = QH_DTYPE_UINT4;
  q = run(c, 2, (int64_t[]){4, 3}, 1, bw);
  expect(q, 1, 2.0f / 7.5f, 8);
  qh_quant_params_free(q);
  c->dtype = QH_DTYPE_INT4;
  c->qscheme = QH_QSCHEME_PER_CHANNEL_AFFINE; /* row 0: [-0.25, 0.5] on [-8, 7] */
  q = run(c, 2, (int64_t[]){4, 3}, 1, bw);
  expect(q, 0, 0.75f / 15.0f, -8 - (int32_t)nearbyintf(-0.25f / (0.75f / 15.0f)));
  qh_quant_params_free(q);
  qh_observer_config_free(c);
  /* the 16-bit range bounds a custom quant_min/quant_max */
  c = cfg("MinMaxObserver", QH_DTYPE_INT16, QH_QSCHEME_PER_TENSOR_AFFINE);
  c->has_range = TRUE;
  c->quant_min = -40000;
  c->quant_max = 100;
  GError *error = NULL;
  g_assert_false(qh_observer_config_check(c, &error));
  g_assert_nonnull(error);
  g_clear_error(&error);
  qh_observer_config_free(c);
}

static void check_fails(QhObserverConfig *c, const char *const *parts) {
  GError *error = NULL;
  g_assert_false(qh_observer_config_check(c, &error));
  g_assert_nonnull(error);
  for (; *parts; parts++)
    if (!strstr(error->message, *parts))
      g_error("'%s' lacks '%s'", error->message, *parts);
  g_error_free(error);
  qh_observer_config_free(c);
}

#define FAILS(c, ...) check_fails(c, (const char *[]){__VA_ARGS__, NULL})

static void test_config_checks(void) {
  const int32_t U8 = QH_DTYPE_UINT8, S8 = QH_DTYPE_INT8;
  const int32_t PTA = QH_QSCHEME_PER_TENSOR_AFFINE, PTS = QH_QSCHEME_PER_TENSOR_SYMMETRIC;
  FAILS(cfg("NoSuchObserver", U8, PTA), "unknown observer 'NoSuchObserver'");
  QhObserverConfig *c = cfg("HistogramObserver", U8, PTA);
  qh_observer_config_add_arg(c, "binz", "10");
  FAILS(c, "HistogramObserver", "unknown argument 'binz'");
  c = cfg("HistogramObserver", U8, PTA);
  qh_observer_config_add_arg(c, "bins", "20x");
  FAILS(c, "HistogramObserver", "bins", "not an integer");
  c = cfg("HistogramObserver", U8, PTA);
  qh_observer_config_add_arg(c, "bins", "0");
  FAILS(c, "HistogramObserver", "bins must be in");
  c = cfg("MovingAverageMinMaxObserver", U8, PTA);
  qh_observer_config_add_arg(c, "averaging_constant", "nan");
  FAILS(c, "averaging_constant", "not a finite number");
  c = cfg("MovingAverageMinMaxObserver", U8, PTA);
  qh_observer_config_add_arg(c, "averaging_constant", "0.5");
  qh_observer_config_add_arg(c, "averaging_constant", "0.5");
  FAILS(c, "given twice");
  FAILS(cfg("MinMaxObserver", U8, QH_QSCHEME_PER_CHANNEL_AFFINE), "MinMaxObserver",
        "per_channel_affine is not supported");
  FAILS(cfg("PerChannelMinMaxObserver", U8, PTA), "PerChannelMinMaxObserver",
        "per_tensor_affine");
  FAILS(cfg("PerChannelMinMaxObserver", U8, QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS),
        "float_qparams");
  FAILS(cfg("MinMaxObserver", QH_DTYPE_FLOAT, PTA), "dtype float32");
  c = cfg("MinMaxObserver", U8, PTS);
  c->reduce_range = TRUE;
  FAILS(c, "reduce_range", "quint8");
  c = cfg("MinMaxObserver", U8, PTA);
  c->has_range = TRUE;
  c->quant_min = 1;
  c->quant_max = 255;
  FAILS(c, "must include 0");
  c = cfg("MinMaxObserver", S8, PTA);
  c->has_range = TRUE;
  c->quant_min = -200;
  c->quant_max = 50;
  FAILS(c, "outside qint8");
  c = cfg("MinMaxObserver", U8, PTA);
  c->has_range = TRUE;
  c->quant_min = 0;
  c->quant_max = 0;
  FAILS(c, "must be < quant_max");
  c = cfg("MinMaxObserver", U8, PTA);
  c->has_eps = TRUE;
  c->eps = 0;
  FAILS(c, "eps must be");
  FAILS(cfg("FixedQParamsObserver", U8, PTA), "argument 'scale' is required");
  c = cfg("FixedQParamsObserver", U8, PTA);
  qh_observer_config_add_arg(c, "scale", "0.00390625");
  qh_observer_config_add_arg(c, "zero_point", "300");
  FAILS(c, "zero_point 300 is outside");
  c = cfg("EntropyObserver", U8, PTA);
  qh_observer_config_add_arg(c, "num_bins", "64");
  FAILS(c, "num_quantized_bins 128 must be <= num_bins 64");
  c = cfg("PercentileObserver", U8, PTA);
  qh_observer_config_add_arg(c, "percentile", "101");
  FAILS(c, "percentile must be in");

  /* accepted: the defaults of every host observer but Fixed */
  for (const char *const *n = qh_observer_host_names(); *n; n++) {
    g_assert_true(qh_observer_is_host(*n));
    if (strcmp(*n, "FixedQParamsObserver") == 0)
      continue;
    QhObserverConfig *d = qh_observer_config_new(*n);
    GError *error = NULL;
    if (!qh_observer_config_check(d, &error))
      g_error("%s: %s", *n, error->message);
    qh_observer_config_free(d);
  }
  g_assert_false(qh_observer_is_host("MyPluginObserver"));
  c = qh_observer_config_new("PerChannelMinMaxObserver");
  c->reduce_range = TRUE;
  int32_t lo, hi;
  qh_observer_config_range(c, &lo, &hi);
  g_assert_cmpint(lo, ==, 0);
  g_assert_cmpint(hi, ==, 127);
  c->has_range = TRUE;
  c->quant_min = -127;
  c->quant_max = 127;
  qh_observer_config_range(c, &lo, &hi);
  g_assert_cmpint(lo, ==, -64); /* Python's // */
  g_assert_cmpint(hi, ==, 63);
  qh_observer_config_free(c);
}

static void test_bad_data(void) {
  QhObserverConfig *c = cfg("MinMaxObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  GError *error = NULL;
  QhObserver *o = qh_observer_new(c, 1, (int64_t[]){3}, &error);
  float bad[3] = {1, NAN, 2};
  QhTensor t = view(bad, 1, (int64_t[]){3});
  g_assert_false(qh_observer_observe(o, &t, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "MinMaxObserver: NaN or Inf"));
  g_clear_error(&error);
  bad[1] = -INFINITY;
  g_assert_false(qh_observer_observe(o, &t, &error));
  g_clear_error(&error);
  /* a per-tensor observer takes any shape (a shared observer sees MaxPool's input and
   * output); an empty batch is ignored */
  float ok[4] = {1, 2, 3, 4};
  t = view(ok, 1, (int64_t[]){0});
  g_assert_true(qh_observer_observe(o, &t, &error));
  QhQuantParams *q = qh_observer_compute(o, &error);
  expect(q, 0, 1.0f, 0);
  qh_quant_params_free(q);
  t = view(ok, 2, (int64_t[]){2, 2});
  g_assert_true(qh_observer_observe(o, &t, &error));
  q = qh_observer_compute(o, &error);
  g_assert_cmpfloat(q->scale[0], ==, 4.0f / 255.0f);
  qh_quant_params_free(q);
  qh_observer_free(o);
  qh_observer_config_free(c);
  /* a per-channel one needs the same channel count along ch_axis */
  c = cfg("PerChannelMinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  o = qh_observer_new(c, 2, (int64_t[]){2, 2}, &error);
  t = view(ok, 2, (int64_t[]){2, 2});
  g_assert_true(qh_observer_observe(o, &t, &error));
  t = view(ok, 2, (int64_t[]){4, 1});
  g_assert_false(qh_observer_observe(o, &t, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_MISMATCH);
  g_clear_error(&error);
  t = view(ok, 1, (int64_t[]){4});
  g_assert_false(qh_observer_observe(o, &t, &error));
  g_clear_error(&error);
  qh_observer_free(o);
  c->ch_axis = 2;
  g_assert_null(qh_observer_new(c, 2, (int64_t[]){4, 3}, &error));
  g_assert_nonnull(strstr(error->message, "ch_axis 2"));
  g_clear_error(&error);
  qh_observer_config_free(c);
}

static void test_fixed_placeholder(void) {
  QhObserverConfig *c = cfg("FixedQParamsObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  qh_observer_config_add_arg(c, "scale", "0.0078125");
  qh_observer_config_add_arg(c, "zero_point", "128");
  const float *b[] = {X};
  QhQuantParams *q = run(c, 1, (int64_t[]){5}, 1, b);
  expect(q, 0, 0x1p-7f, 128);
  g_assert_cmpint(q->quant_min, ==, 0);
  g_assert_cmpint(q->quant_max, ==, 255);
  qh_quant_params_free(q);
  qh_observer_config_free(c);
  c = qh_observer_config_new("PlaceholderObserver");
  GError *error = NULL;
  QhObserver *o = qh_observer_new(c, 1, (int64_t[]){5}, &error);
  g_assert_null(qh_observer_compute(o, &error));
  g_assert_nonnull(strstr(error->message, "PlaceholderObserver"));
  g_clear_error(&error);
  qh_observer_free(o);
  qh_observer_config_free(c);
}

/* Save, load, save again: same bytes and qparams; merging shards of min/max observers
 * equals one pass bit for bit. */
static void test_save_load_merge(void) {
  const char *names[] = {"MinMaxObserver", "PerChannelMinMaxObserver",
                         "MovingAverageMinMaxObserver", "MovingAveragePerChannelMinMaxObserver",
                         "PercentileObserver", "EntropyObserver", "MSEObserver",
                         "FixedQParamsObserver"};
  GRand *rng = g_rand_new_with_seed(7);
  float data[3][24];
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < 24; i++)
      data[s][i] = (float)g_rand_double_range(rng, -3, 5);
  int64_t d[] = {4, 6};
  for (size_t k = 0; k < G_N_ELEMENTS(names); k++) {
    QhObserverConfig *c = qh_observer_config_new(names[k]);
    if (k == 7) {
      qh_observer_config_add_arg(c, "scale", "0.5");
      qh_observer_config_add_arg(c, "zero_point", "3");
    }
    GError *error = NULL;
    QhObserver *one = qh_observer_new(c, 2, d, &error), *a = qh_observer_new(c, 2, d, &error),
               *b = qh_observer_new(c, 2, d, &error);
    g_assert_no_error(error);
    for (int s = 0; s < 3; s++) {
      QhTensor t = view(data[s], 2, d);
      g_assert_true(qh_observer_observe(one, &t, &error));
      g_assert_true(qh_observer_observe(s < 2 ? a : b, &t, &error));
    }
    GByteArray *bytes = g_byte_array_new(), *again = g_byte_array_new();
    g_assert_true(qh_observer_save(a, bytes, &error));
    QhObserver *l = qh_observer_load(c, 2, d, bytes->data, bytes->len, &error);
    g_assert_no_error(error);
    g_assert_true(qh_observer_save(l, again, &error));
    g_assert_cmpmem(bytes->data, bytes->len, again->data, again->len);
    g_assert_true(qh_observer_merge(l, b, &error));
    g_assert_no_error(error);
    QhQuantParams *q1 = qh_observer_compute(one, &error), *q2 = qh_observer_compute(l, &error);
    g_assert_no_error(error);
    if (qh_observer_merge_is_exact(one)) {
      g_assert_cmpmem(q1->scale, 4 * q1->n, q2->scale, 4 * q2->n);
      g_assert_cmpmem(q1->zero_point, 4 * q1->n, q2->zero_point, 4 * q2->n);
    }
    /* the wrong name, a changed config, a changed shape, a bad magic: refused */
    QhObserverConfig *other = qh_observer_config_copy(c);
    other->reduce_range = !other->reduce_range;
    g_assert_null(qh_observer_load(other, 2, d, bytes->data, bytes->len, &error));
    g_clear_error(&error);
    g_assert_null(qh_observer_load(c, 2, (int64_t[]){4, 7}, bytes->data, bytes->len, &error));
    g_clear_error(&error);
    bytes->data[0] = 'X';
    g_assert_null(qh_observer_load(c, 2, d, bytes->data, bytes->len, &error));
    g_assert_nonnull(strstr(error->message, "QHOBS"));
    g_clear_error(&error);
    qh_quant_params_free(q1);
    qh_quant_params_free(q2);
    for (QhObserver **p = (QhObserver *[]){one, a, b, l, NULL}; *p; p++)
      qh_observer_free(*p);
    g_byte_array_unref(bytes);
    g_byte_array_unref(again);
    qh_observer_config_free(c);
    qh_observer_config_free(other);
  }
  g_rand_free(rng);
}


/* 99 999 values in [-1, 1] and one outlier at 100: the ONNX Runtime-style observers
 * clip the outlier, MinMax does not. */
static float *outlier_data(int n) {
  float *x = g_new(float, n);
  for (int i = 0; i < n - 1; i++)
    x[i] = (float)(2.0 * i / (n - 2) - 1.0);
  x[n - 1] = 100.0f;
  return x;
}

static float scale_of(const char *name, int32_t dtype, int32_t qscheme, const char *key,
                      const char *value, const float *x, int n) {
  QhObserverConfig *c = cfg(name, dtype, qscheme);
  if (key)
    qh_observer_config_add_arg(c, key, value);
  const float *b[] = {x};
  QhQuantParams *q = run(c, 1, (int64_t[]){n}, 1, b);
  float s = q->scale[0];
  qh_quant_params_free(q);
  qh_observer_config_free(c);
  return s;
}

static void test_ort_style(void) {
  const int n = 100000;
  float *x = outlier_data(n);
  const int32_t S8 = QH_DTYPE_INT8, U8 = QH_DTYPE_UINT8;
  const int32_t PTS = QH_QSCHEME_PER_TENSOR_SYMMETRIC, PTA = QH_QSCHEME_PER_TENSOR_AFFINE;
  float mm = scale_of("MinMaxObserver", S8, PTS, NULL, NULL, x, n);
  g_assert_cmpfloat(fabsf(mm - 100.0f / 127.5f), <, 1e-6);
  /* |x| histogram of 2048 bins over [0, 100]: 99.9 % is reached in the bin
   * [0.977, 1.025), and ONNX Runtime takes its left edge */
  float p = scale_of("PercentileObserver", S8, PTS, "percentile", "99.9", x, n);
  g_assert_cmpfloat(p * 127.5f, >=, 0.976f);
  g_assert_cmpfloat(p * 127.5f, <=, 0.977f);
  /* the default 99.999 reaches the outlier's bin (1 value in 10^5 is 0.001 %): its left
   * edge, 100 - 100/2048 */
  float pd = scale_of("PercentileObserver", S8, PTS, NULL, NULL, x, n);
  g_assert_cmpfloat(fabsf(pd * 127.5f - (100.0f - 100.0f / 2048)), <, 1e-3f);
  /* affine: 0.05 % cut on each side of a histogram over [-100, 100] */
  float pa = scale_of("PercentileObserver", U8, PTA, "percentile", "99.9", x, n);
  g_assert_cmpfloat(pa * 255.0f, >=, 1.9f);
  g_assert_cmpfloat(pa * 255.0f, <=, 2.3f);
  /* ONNX Runtime's defaults (128 bins, 128 quantized bins) leave one candidate: all */
  float en = scale_of("EntropyObserver", U8, PTA, NULL, NULL, x, n);
  g_assert_cmpfloat(en * 255.0f, ==, 101.0f);
  /* TensorRT-like 2048 bins: a window far narrower than the outlier range wins */
  en = scale_of("EntropyObserver", U8, PTA, "num_bins", "2048", x, n);
  g_assert_cmpfloat(en * 255.0f, <, 20.0f);
  float ms = scale_of("MSEObserver", U8, PTA, NULL, NULL, x, n);
  /* one outlier against 10^5 rounding errors of (s^2 / 12): the optimum clips to about
   * 0.87 of the range, (100 - 87)^2 + 10^5 (88 / 255)^2 / 12 ~ 1160 */
  g_assert_cmpfloat(ms * 255.0f, >, 0.8f * 101.0f);
  g_assert_cmpfloat(ms * 255.0f, <, 0.95f * 101.0f);
  /* without the outlier MSE keeps nearly the whole range */
  float ms2 = scale_of("MSEObserver", U8, PTA, NULL, NULL, x, n - 1);
  g_assert_cmpfloat(ms2 * 255.0f, >, 1.8f);
  g_assert_cmpfloat(ms2 * 255.0f, <=, 2.0f + 1e-5f);
  g_free(x);
}

/* Histograms that grow: a later batch with a wider range keeps the earlier counts. */
static void test_ort_growth(void) {
  QhObserverConfig *c = cfg("PercentileObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  qh_observer_config_add_arg(c, "percentile", "100");
  float a[4] = {-1, -0.5f, 0.5f, 1}, b[4] = {-4, 0, 2, 3};
  const float *bs[] = {a, b};
  QhQuantParams *q = run(c, 1, (int64_t[]){4}, 2, bs);
  /* percentile 100 keeps [min, max] = [-4, 3] */
  float s = 7.0f / 255.0f;
  expect(q, 0, s, (int32_t)(0 - nearbyintf(-4.0f / s)));
  qh_quant_params_free(q);
  qh_observer_config_free(c);
}

static void add_ort_tests(void) {
  g_test_add_func("/observers/ort-style", test_ort_style);
  g_test_add_func("/observers/ort-growth", test_ort_growth);
}

/* ---- Oracle mode ---- */

static int32_t dtype_of(const char *s) {
  return strcmp(s, "qint8") == 0 ? QH_DTYPE_INT8 : strcmp(s, "qint32") == 0 ? QH_DTYPE_INT32
                                                                            : QH_DTYPE_UINT8;
}

static int32_t qscheme_of(const char *s) {
  const char *names[] = {"per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
                         "per_channel_symmetric"};
  for (int i = 0; i < 4; i++)
    if (strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

static float *decode(const char *b64, size_t *n) {
  gsize len = 0;
  guchar *raw = g_base64_decode(b64, &len);
  *n = len / 4;
  return (float *)raw;
}

/* One case: {observer, dtype, qscheme, [quant_min, quant_max], reduce_range, [eps],
 * ch_axis, args {k: v}, batches [{shape, data}]} -> {scale [bits], zero_point [..]} or
 * {error}. */
static void oracle_case(JsonObject *c, JsonBuilder *out) {
  QhObserverConfig *cf = qh_observer_config_new(json_object_get_string_member(c, "observer"));
  cf->dtype = dtype_of(json_object_get_string_member(c, "dtype"));
  cf->qscheme = qscheme_of(json_object_get_string_member(c, "qscheme"));
  if (json_object_has_member(c, "quant_min")) {
    cf->has_range = TRUE;
    cf->quant_min = (int32_t)json_object_get_int_member(c, "quant_min");
    cf->quant_max = (int32_t)json_object_get_int_member(c, "quant_max");
  }
  cf->reduce_range = json_object_get_boolean_member_with_default(c, "reduce_range", FALSE);
  if (json_object_has_member(c, "eps")) {
    cf->has_eps = TRUE;
    cf->eps = (float)json_object_get_double_member(c, "eps");
  }
  cf->ch_axis = (int)json_object_get_int_member_with_default(c, "ch_axis", 0);
  if (json_object_has_member(c, "args")) {
    JsonObject *a = json_object_get_object_member(c, "args");
    GList *keys = json_object_get_members(a);
    for (GList *k = keys; k; k = k->next)
      qh_observer_config_add_arg(cf, k->data, json_object_get_string_member(a, k->data));
    g_list_free(keys);
  }
  JsonArray *batches = json_object_get_array_member(c, "batches");
  GError *error = NULL;
  QhObserver *o = NULL;
  QhQuantParams *q = NULL;
  for (guint i = 0; i < json_array_get_length(batches); i++) {
    JsonObject *b = json_array_get_object_element(batches, i);
    JsonArray *sh = json_object_get_array_member(b, "shape");
    int rank = (int)json_array_get_length(sh);
    int64_t dims[QH_MAX_RANK], odims[QH_MAX_RANK];
    for (int k = 0; k < rank; k++) {
      dims[k] = json_array_get_int_element(sh, (guint)k);
      odims[k] = -1;
    }
    if (o == NULL) {
      int axis = cf->ch_axis < 0 ? cf->ch_axis + rank : cf->ch_axis;
      gboolean pc = cf->qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE ||
                    cf->qscheme == QH_QSCHEME_PER_CHANNEL_SYMMETRIC;
      if (pc && axis >= 0 && axis < rank)
        odims[axis] = dims[axis];
      o = qh_observer_new(cf, rank, odims, &error);
      if (o == NULL)
        break;
    }
    size_t n;
    float *x = decode(json_object_get_string_member(b, "data"), &n);
    QhTensor t = view(x, rank, dims);
    gboolean ok = qh_observer_observe(o, &t, &error);
    g_free(x);
    if (!ok)
      break;
  }
  if (o && !error)
    q = qh_observer_compute(o, &error);
  json_builder_begin_object(out);
  if (q) {
    json_builder_set_member_name(out, "scale");
    json_builder_begin_array(out);
    for (int i = 0; i < q->n; i++) {
      uint32_t u;
      memcpy(&u, &q->scale[i], 4);
      json_builder_add_int_value(out, u);
    }
    json_builder_end_array(out);
    json_builder_set_member_name(out, "zero_point");
    json_builder_begin_array(out);
    for (int i = 0; i < q->n; i++)
      json_builder_add_int_value(out, q->zero_point[i]);
    json_builder_end_array(out);
  } else {
    json_builder_set_member_name(out, "error");
    json_builder_add_string_value(out, error ? error->message : "no batch");
  }
  json_builder_end_object(out);
  g_clear_error(&error);
  qh_quant_params_free(q);
  qh_observer_free(o);
  qh_observer_config_free(cf);
}

static int oracle_main(const char *in, const char *outp) {
  JsonParser *p = json_parser_new();
  GError *error = NULL;
  if (!json_parser_load_from_file(p, in, &error)) {
    g_printerr("%s: %s\n", in, error->message);
    return 1;
  }
  JsonObject *root = json_node_get_object(json_parser_get_root(p));
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "results");
  json_builder_begin_array(b);
  JsonArray *cases = json_object_get_array_member(root, "cases");
  for (guint i = 0; i < json_array_get_length(cases); i++)
    oracle_case(json_array_get_object_element(cases, i), b);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "sums");
  json_builder_begin_array(b);
  JsonArray *sums = json_object_has_member(root, "sums")
                        ? json_object_get_array_member(root, "sums")
                        : NULL;
  for (guint i = 0; sums && i < json_array_get_length(sums); i++) {
    size_t n;
    float *x = decode(json_array_get_string_element(sums, i), &n);
    float s = qh_torch_sum_f32(x, n);
    uint32_t u;
    memcpy(&u, &s, 4);
    json_builder_add_int_value(b, u);
    g_free(x);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
  JsonGenerator *g = json_generator_new();
  JsonNode *node = json_builder_get_root(b);
  json_generator_set_root(g, node);
  gboolean ok = json_generator_to_file(g, outp, &error);
  if (!ok)
    g_printerr("%s: %s\n", outp, error->message);
  json_node_unref(node);
  g_object_unref(g);
  g_object_unref(b);
  g_object_unref(p);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--oracle") == 0)
    return oracle_main(argv[2], argv[3]);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/observers/minmax", test_minmax);
  g_test_add_func("/observers/per-channel", test_per_channel);
  g_test_add_func("/observers/moving-average", test_moving_average);
  g_test_add_func("/observers/int16", test_int16);
  g_test_add_func("/observers/config-checks", test_config_checks);
  g_test_add_func("/observers/bad-data", test_bad_data);
  g_test_add_func("/observers/fixed-placeholder", test_fixed_placeholder);
  g_test_add_func("/observers/save-load-merge", test_save_load_merge);
  add_ort_tests();
  return g_test_run();
}
