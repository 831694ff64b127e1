/* The embedding API (qhost.h) as an application uses it, linked against libqhost.so and
 * nothing else: misuse is refused with a status naming the fault (NULL handles, unknown
 * or ill-fitting tensors, a closed model or session, bad option values); calibration data
 * and a qconfig given in memory quantize exactly as the same data and qconfig in files
 * do; two sessions run at once on two threads and each gets the outputs a lone run gets.
 * Use after free is undefined behaviour (qhost.h) and is not tested. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qhost.h"

static int failures;

#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                             \
    }                                                                         \
  } while (0)

/* The status has `code` and its message contains `part`; frees it. */
static void expect(QhostStatus *st, QhostStatusCode code, const char *part, int line) {
  if (st == NULL || qhost_status_code(st) != code || strstr(qhost_status_message(st), part) == NULL) {
    fprintf(stderr, "test_api.c:%d: expected status %d containing '%s', got %d '%s'\n", line, (int)code, part,
            (int)qhost_status_code(st), qhost_status_message(st));
    failures++;
  }
  qhost_status_free(st);
}
#define EXPECT(st, code, part) expect((st), (code), (part), __LINE__)

/* The call succeeded; else print its message and abort the test. */
static void ok(QhostStatus *st, int line) {
  if (st) {
    fprintf(stderr, "test_api.c:%d: unexpected failure: %s\n", line, qhost_status_message(st));
    exit(1);
  }
}
#define OK(st) ok((st), __LINE__)

static const char *model_path = QH_SOURCE_DIR "/examples/digits_cnn.onnx";
static const char *calib_path = QH_SOURCE_DIR "/examples/digits_calib.npy";
static const char *test_path = QH_SOURCE_DIR "/examples/digits_test.npy";

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc(*len + 1);
  if (fread(buf, 1, *len, f) != *len) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

static void test_null_handles(void) {
  QhostModel *model = NULL;
  QhostOptions *options = NULL;
  QhostValues *values = NULL;
  QhostTensor t;
  size_t n = 0;
  CHECK(qhost_status_code(NULL) == QHOST_STATUS_OK);
  CHECK(strcmp(qhost_status_message(NULL), "") == 0);
  EXPECT(qhost_model_load(NULL, &model), QHOST_STATUS_INVALID_ARGUMENT, "path");
  EXPECT(qhost_model_load(model_path, NULL), QHOST_STATUS_INVALID_ARGUMENT, "out");
  EXPECT(qhost_model_input_count(NULL, &n), QHOST_STATUS_INVALID_ARGUMENT, "model");
  EXPECT(qhost_session_new(NULL, NULL, NULL), QHOST_STATUS_INVALID_ARGUMENT, "model");
  EXPECT(qhost_session_run(NULL, NULL, 0, &values), QHOST_STATUS_INVALID_ARGUMENT, "session");
  EXPECT(qhost_session_close(NULL), QHOST_STATUS_INVALID_ARGUMENT, "session");
  EXPECT(qhost_values_get(NULL, 0, &t), QHOST_STATUS_INVALID_ARGUMENT, "values");
  EXPECT(qhost_options_set_threads(NULL, 2), QHOST_STATUS_INVALID_ARGUMENT, "options");
  EXPECT(qhost_options_set_backend(NULL, "x86"), QHOST_STATUS_INVALID_ARGUMENT, "options");
  EXPECT(qhost_quantize(NULL, NULL, NULL, NULL, NULL), QHOST_STATUS_INVALID_ARGUMENT, "model path");
  EXPECT(qhost_deploy(model_path, NULL, "/nonexistent", 0, NULL, NULL), QHOST_STATUS_INVALID_ARGUMENT, "options");
  EXPECT(qhost_plugin_check(NULL, NULL, QHOST_FORMAT_TEXT, NULL, NULL), QHOST_STATUS_INVALID_ARGUMENT, "plugin");
  CHECK(qhost_values_count(NULL) == 0);
  /* every *_free takes NULL */
  qhost_model_free(NULL);
  qhost_session_free(NULL);
  qhost_values_free(NULL);
  qhost_options_free(NULL);
  qhost_status_free(NULL);
  qhost_string_free(NULL);
  /* bad values are refused when set, naming the rule */
  OK(qhost_options_new(&options));
  EXPECT(qhost_options_set_threads(options, 0), QHOST_STATUS_INVALID_ARGUMENT, "between 1 and 256");
  EXPECT(qhost_options_set_shard(options, 4, 4), QHOST_STATUS_INVALID_ARGUMENT, "shard 4/4");
  EXPECT(qhost_options_set_bench_runs(options, -1, 5), QHOST_STATUS_INVALID_ARGUMENT, "warm-up");
  EXPECT(qhost_options_set_calibration_tensors(options, NULL, 1), QHOST_STATUS_INVALID_ARGUMENT, "calibration");
  EXPECT(qhost_set_log_level((QhostLogLevel)7), QHOST_STATUS_INVALID_ARGUMENT, "log level");
  /* a flow missing what it needs says what */
  EXPECT(qhost_quantize(model_path, options, "/tmp/never-written.onnx", NULL, NULL), QHOST_STATUS_INVALID_ARGUMENT,
         "no backend");
  OK(qhost_options_set_backend(options, "x86"));
  EXPECT(qhost_quantize(model_path, options, "/tmp/never-written.onnx", NULL, NULL), QHOST_STATUS_INVALID_ARGUMENT,
         "no calibration data");
  CHECK(access("/tmp/never-written.onnx", F_OK) != 0);
  qhost_options_free(options);
  /* a missing file names itself */
  EXPECT(qhost_model_load("/nonexistent/model.onnx", &model), QHOST_STATUS_IO, "/nonexistent/model.onnx");
  CHECK(model == NULL);
}

static void test_model_and_tensors(void) {
  QhostModel *model = NULL;
  QhostSession *session = NULL;
  QhostValues *out = NULL;
  OK(qhost_model_load(model_path, &model));
  size_t n_in = 0, n_out = 0;
  OK(qhost_model_input_count(model, &n_in));
  OK(qhost_model_output_count(model, &n_out));
  CHECK(n_in == 1 && n_out == 1);
  QhostTensorInfo info;
  OK(qhost_model_input_info(model, 0, &info));
  CHECK(strcmp(info.name, "input") == 0 && info.dtype == QHOST_DTYPE_FLOAT32 && info.rank == 4);
  CHECK(info.dims[0] == -1 && info.dims[1] == 1 && info.dims[2] == 8 && info.dims[3] == 8);
  EXPECT(qhost_model_input_info(model, 1, &info), QHOST_STATUS_INVALID_ARGUMENT, "input 1");
  OK(qhost_session_new(model, NULL, &session));

  float x[2 * 64] = {0};
  int64_t shape[] = {2, 1, 8, 8};
  QhostTensor in = {"input", QHOST_DTYPE_FLOAT32, 4, shape, x, sizeof x};
  OK(qhost_session_run(session, &in, 1, &out));
  QhostTensor y;
  OK(qhost_values_get(out, 0, &y));
  CHECK(strcmp(y.name, "logits") == 0 && y.dtype == QHOST_DTYPE_FLOAT32 && y.rank == 2 && y.shape[0] == 2 &&
        y.shape[1] == 10 && y.nbytes == 2 * 10 * sizeof(float));
  EXPECT(qhost_values_get(out, 1, &y), QHOST_STATUS_INVALID_ARGUMENT, "value 1");
  qhost_values_free(out);
  out = NULL;

  /* wrong dtype, wrong shape, wrong size, unknown name, wrong count: refused, nothing out */
  int64_t wrong[2 * 64] = {0};
  QhostTensor bad = {"input", QHOST_DTYPE_INT64, 4, shape, wrong, sizeof wrong};
  EXPECT(qhost_session_run(session, &bad, 1, &out), QHOST_STATUS_MISMATCH, "input 'input' is int64");
  int64_t odd[] = {2, 1, 3, 3};
  bad = (QhostTensor){"input", QHOST_DTYPE_FLOAT32, 4, odd, x, 2 * 9 * sizeof(float)};
  EXPECT(qhost_session_run(session, &bad, 1, &out), QHOST_STATUS_MISMATCH, "does not fit");
  bad = (QhostTensor){"input", QHOST_DTYPE_FLOAT32, 4, shape, x, sizeof x - 4};
  EXPECT(qhost_session_run(session, &bad, 1, &out), QHOST_STATUS_INVALID_ARGUMENT, "bytes given");
  bad = (QhostTensor){"image", QHOST_DTYPE_FLOAT32, 4, shape, x, sizeof x};
  EXPECT(qhost_session_run(session, &bad, 1, &out), QHOST_STATUS_MISMATCH, "no tensor given for input 'input'");
  EXPECT(qhost_session_run(session, NULL, 0, &out), QHOST_STATUS_MISMATCH, "0 inputs given");
  bad = (QhostTensor){NULL, QHOST_DTYPE_FLOAT32, 9, shape, x, sizeof x};
  EXPECT(qhost_session_run(session, &bad, 1, &out), QHOST_STATUS_INVALID_ARGUMENT, "rank 9");
  CHECK(out == NULL);
  /* after the refusals the session still runs, positionally this time */
  in.name = NULL;
  OK(qhost_session_run(session, &in, 1, &out));
  qhost_values_free(out);
  out = NULL;
  /* other shapes: the session plans again (one row, then the two rows again) */
  int64_t one[] = {1, 1, 8, 8};
  QhostTensor row = {NULL, QHOST_DTYPE_FLOAT32, 4, one, x, 64 * sizeof(float)};
  OK(qhost_session_run(session, &row, 1, &out));
  OK(qhost_values_get(out, 0, &y));
  CHECK(y.rank == 2 && y.shape[0] == 1 && y.shape[1] == 10);
  qhost_values_free(out);
  out = NULL;
  OK(qhost_session_run(session, &in, 1, &out));
  OK(qhost_values_get(out, 0, &y));
  CHECK(y.shape[0] == 2);
  qhost_values_free(out);
  out = NULL;

  /* a closed model is refused; the session made before it keeps running */
  OK(qhost_model_close(model));
  size_t n = 0;
  EXPECT(qhost_model_input_count(model, &n), QHOST_STATUS_CLOSED, "closed");
  EXPECT(qhost_model_close(model), QHOST_STATUS_CLOSED, "closed");
  QhostSession *second = NULL;
  EXPECT(qhost_session_new(model, NULL, &second), QHOST_STATUS_CLOSED, "digits_cnn.onnx");
  CHECK(second == NULL);
  char *text = NULL;
  EXPECT(qhost_model_inspect(model, NULL, QHOST_FORMAT_TEXT, &text), QHOST_STATUS_CLOSED, "closed");
  OK(qhost_session_run(session, &in, 1, &out));
  qhost_values_free(out);
  out = NULL;
  /* a closed session is refused too */
  OK(qhost_session_close(session));
  EXPECT(qhost_session_run(session, &in, 1, &out), QHOST_STATUS_CLOSED, "closed");
  qhost_session_free(session);
  qhost_model_free(model);
}

/* A session plans again for new shapes from the bytes the model was loaded from: the file
 * replaced by garbage, then removed, changes nothing it computes. */
static void test_file_replaced(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/replaced.onnx", dir);
  size_t len = 0;
  char *bytes = read_all(model_path, &len);
  CHECK(bytes != NULL);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL && fwrite(bytes, 1, len, f) == len);
  fclose(f);
  free(bytes);
  QhostModel *model = NULL;
  QhostSession *session = NULL;
  QhostValues *first = NULL, *later = NULL;
  OK(qhost_model_load(path, &model));
  OK(qhost_session_new(model, NULL, &session));
  qhost_model_free(model);
  float x[2 * 64];
  for (int i = 0; i < 2 * 64; i++)
    x[i] = (float)(i % 7) * 0.25f;
  int64_t two[] = {2, 1, 8, 8}, one[] = {1, 1, 8, 8};
  QhostTensor in = {NULL, QHOST_DTYPE_FLOAT32, 4, two, x, sizeof x};
  OK(qhost_session_run(session, &in, 1, &first));
  f = fopen(path, "wb");
  CHECK(f != NULL && fputs("not an ONNX model", f) >= 0);
  fclose(f);
  QhostTensor row = {NULL, QHOST_DTYPE_FLOAT32, 4, one, x, 64 * sizeof(float)};
  OK(qhost_session_run(session, &row, 1, &later));
  QhostTensor a, b;
  OK(qhost_values_get(first, 0, &a));
  OK(qhost_values_get(later, 0, &b));
  /* one row alone against row 0 of two: the same model, up to the fp32 GEMM's blocking */
  CHECK(b.shape[0] == 1);
  for (int i = 0; i < 10; i++) {
    float u = ((const float *)a.data)[i], v = ((const float *)b.data)[i];
    CHECK(u - v <= 1e-4f * (1.0f + (u > 0 ? u : -u)) && v - u <= 1e-4f * (1.0f + (u > 0 ? u : -u)));
  }
  qhost_values_free(later);
  later = NULL;
  CHECK(unlink(path) == 0);
  OK(qhost_session_run(session, &in, 1, &later));
  OK(qhost_values_get(later, 0, &b));
  CHECK(b.nbytes == a.nbytes && memcmp(a.data, b.data, a.nbytes) == 0);
  qhost_values_free(later);
  qhost_values_free(first);
  qhost_session_free(session);
}

/* Calibration arrays and a qconfig in memory give the bytes the same data and qconfig in
 * files give, and the report comes back as JSON and text. */
static void test_quantize_from_memory(const char *dir) {
  static const char qconfig[] = "{\"global\": {\"activation\": {\"observer\": \"HistogramObserver\"}}}";
  char qconfig_path[512], from_files[512], from_memory[512];
  snprintf(qconfig_path, sizeof qconfig_path, "%s/qconfig.json", dir);
  snprintf(from_files, sizeof from_files, "%s/files.qdq.onnx", dir);
  snprintf(from_memory, sizeof from_memory, "%s/memory.qdq.onnx", dir);
  FILE *f = fopen(qconfig_path, "w");
  fputs(qconfig, f);
  fclose(f);

  QhostOptions *options = NULL;
  OK(qhost_options_new(&options));
  OK(qhost_options_set_plugin_dir(options, QH_BUILD_PLUGIN_DIR));
  OK(qhost_options_set_backend(options, "x86"));
  OK(qhost_options_set_calibration_file(options, calib_path));
  OK(qhost_options_set_qconfig_file(options, qconfig_path));
  OK(qhost_quantize(model_path, options, from_files, NULL, NULL));

  QhostValues *calib = NULL;
  QhostTensor t;
  OK(qhost_values_read_file(calib_path, &calib));
  OK(qhost_values_get(calib, 0, &t));
  OK(qhost_options_set_calibration_tensors(options, &t, 1));
  qhost_values_free(calib); /* the options hold a copy */
  OK(qhost_options_set_qconfig_json(options, qconfig));
  char *json = NULL, *text = NULL;
  OK(qhost_quantize(model_path, options, from_memory, &json, &text));
  CHECK(json && strstr(json, "\"schema_version\"") && strstr(json, "HistogramObserver"));
  CHECK(text && strstr(text, "calibration samples") && strstr(text, "tensors, worst SQNR first"));
  qhost_string_free(json);
  qhost_string_free(text);
  size_t a_len = 0, b_len = 0;
  char *a = read_all(from_files, &a_len), *b = read_all(from_memory, &b_len);
  CHECK(a && b && a_len == b_len && memcmp(a, b, a_len) == 0);
  free(a);
  free(b);

  /* a qconfig with an error names its source; nothing is written */
  char never[512];
  snprintf(never, sizeof never, "%s/never.qdq.onnx", dir);
  OK(qhost_options_set_qconfig_json(options, "{\"global\": 3}"));
  QhostStatus *st = qhost_quantize(model_path, options, never, NULL, NULL);
  CHECK(st && qhost_status_code(st) != QHOST_STATUS_OK && strstr(qhost_status_message(st), "qconfig"));
  qhost_status_free(st);
  CHECK(access(never, F_OK) != 0);
  /* calibration arrays that do not fit the model are refused, naming the input */
  float small[9] = {0};
  int64_t shape[] = {1, 1, 3, 3};
  QhostTensor odd = {NULL, QHOST_DTYPE_FLOAT32, 4, shape, small, sizeof small};
  OK(qhost_options_set_qconfig_file(options, qconfig_path));
  OK(qhost_options_set_calibration_tensors(options, &odd, 1));
  EXPECT(qhost_quantize(model_path, options, never, NULL, NULL), QHOST_STATUS_MISMATCH, "input 'input'");
  CHECK(access(never, F_OK) != 0);
  /* two unnamed arrays: only a lone array for a single-input model may go unnamed */
  QhostTensor pair[2] = {odd, odd};
  OK(qhost_options_set_calibration_tensors(options, pair, 2));
  EXPECT(qhost_quantize(model_path, options, never, NULL, NULL), QHOST_STATUS_MISMATCH, "has no name");
  CHECK(access(never, F_OK) != 0);
  qhost_options_free(options);
}

/* Dynamic quantization (API 1.1): no calibration data; calibration settings beside it,
 * or per-channel weights without it, are refused and nothing is written. */
static void test_quantize_dynamic(const char *dir) {
  char out[512], never[512];
  snprintf(out, sizeof out, "%s/dynamic.onnx", dir);
  snprintf(never, sizeof never, "%s/never-dynamic.onnx", dir);
  EXPECT(qhost_options_set_dynamic(NULL, 1), QHOST_STATUS_INVALID_ARGUMENT, "options");
  EXPECT(qhost_options_set_dynamic_per_channel(NULL, 1), QHOST_STATUS_INVALID_ARGUMENT, "options");
  QhostOptions *options = NULL;
  OK(qhost_options_new(&options));
  OK(qhost_options_set_dynamic_per_channel(options, 1));
  EXPECT(qhost_quantize(model_path, options, never, NULL, NULL), QHOST_STATUS_INVALID_ARGUMENT,
         "qhost_options_set_dynamic");
  OK(qhost_options_set_dynamic(options, 1));
  char *json = NULL, *text = NULL;
  OK(qhost_quantize(model_path, options, out, &json, &text));
  CHECK(json && strstr(json, "\"mode\" : \"dynamic\"") && strstr(json, "per_channel_symmetric"));
  CHECK(text && strstr(text, "dynamic quantization"));
  qhost_string_free(json);
  qhost_string_free(text);
  QhostModel *model = NULL;
  OK(qhost_model_load(out, &model));
  qhost_model_free(model);
  OK(qhost_options_set_calibration_file(options, calib_path));
  EXPECT(qhost_quantize(model_path, options, never, NULL, NULL), QHOST_STATUS_INVALID_ARGUMENT,
         "takes no calibration data");
  CHECK(access(never, F_OK) != 0);
  qhost_options_free(options);
}

/* Shards calibrated apart and merged; bench, inspect, the plugin listing and plugin-check
 * return the reports the runner prints. */
static void test_flows(const char *dir) {
  char stats[2][512], merged[512];
  QhostOptions *options = NULL;
  OK(qhost_options_new(&options));
  OK(qhost_options_set_plugin_dir(options, QH_BUILD_PLUGIN_DIR));
  OK(qhost_options_set_backend(options, "x86"));
  OK(qhost_options_set_calibration_file(options, calib_path));
  int64_t total = 0;
  for (int i = 0; i < 2; i++) {
    snprintf(stats[i], sizeof stats[i], "%s/shard%d.stats", dir, i);
    int64_t samples = 0, points = 0;
    OK(qhost_options_set_shard(options, i, 2));
    OK(qhost_calibrate(model_path, options, stats[i], &samples, &points));
    CHECK(samples > 0 && points > 0);
    total += samples;
  }
  CHECK(total == 256); /* digits_calib.npy */
  QhostOptions *merge = NULL;
  OK(qhost_options_new(&merge));
  OK(qhost_options_set_plugin_dir(merge, QH_BUILD_PLUGIN_DIR));
  OK(qhost_options_set_backend(merge, "x86"));
  OK(qhost_options_add_stats_file(merge, stats[0]));
  OK(qhost_options_add_stats_file(merge, stats[1]));
  snprintf(merged, sizeof merged, "%s/merged.qdq.onnx", dir);
  char *text = NULL;
  OK(qhost_quantize(model_path, merge, merged, NULL, &text));
  CHECK(text && strstr(text, "256 calibration samples"));
  qhost_string_free(text);
  /* a statistics file of another backend's flow is refused, naming it */
  OK(qhost_options_set_backend(merge, "fbgemm"));
  EXPECT(qhost_quantize(model_path, merge, merged, NULL, NULL), QHOST_STATUS_MISMATCH, stats[0]);
  qhost_options_free(merge);

  OK(qhost_options_set_bench_runs(options, 1, 2));
  OK(qhost_bench(merged, options, QHOST_FORMAT_JSON, &text));
  CHECK(strstr(text, "\"median_ms\"") && strstr(text, "\"path\" : \"plugin:x86\"") && strstr(text, "\"coverage\""));
  qhost_string_free(text);
  QhostModel *model = NULL;
  OK(qhost_model_load(merged, &model));
  OK(qhost_model_inspect(model, NULL, QHOST_FORMAT_TEXT, &text));
  CHECK(strstr(text, "quantized: yes"));
  qhost_string_free(text);
  qhost_model_free(model);
  char *warnings = NULL;
  OK(qhost_plugins_list(options, QHOST_FORMAT_JSON, &text, &warnings));
  CHECK(strstr(text, "\"x86\"") && warnings != NULL);
  qhost_string_free(text);
  qhost_string_free(warnings);
  int conforms = -1;
  OK(qhost_plugin_check("x86", options, QHOST_FORMAT_TEXT, &text, &conforms));
  CHECK(conforms == 1 && strstr(text, "conforms: yes"));
  qhost_string_free(text);
  EXPECT(qhost_plugin_check("no_such_plugin", options, QHOST_FORMAT_TEXT, &text, &conforms),
         QHOST_STATUS_INVALID, "no plugin named 'no_such_plugin'");
  qhost_options_free(options);
}

typedef struct {
  QhostSession *session;
  QhostTensor input;
  const QhostValues *expected;
  int runs;
  int mismatches;
} Worker;

static void *work(void *data) {
  Worker *w = data;
  QhostTensor want;
  qhost_status_free(qhost_values_get(w->expected, 0, &want));
  for (int i = 0; i < w->runs; i++) {
    QhostValues *out = NULL;
    QhostTensor got;
    QhostStatus *st = qhost_session_run(w->session, &w->input, 1, &out);
    if (st || qhost_values_get(out, 0, &got) != NULL || got.nbytes != want.nbytes ||
        memcmp(got.data, want.data, want.nbytes) != 0)
      w->mismatches++;
    qhost_status_free(st);
    qhost_values_free(out);
  }
  return NULL;
}

/* Two sessions (the float model on the host, its QDQ twin on x86) on two threads at once. */
static void test_two_threads(const char *dir) {
  char qdq[512];
  snprintf(qdq, sizeof qdq, "%s/threads.qdq.onnx", dir);
  QhostOptions *options = NULL;
  OK(qhost_options_new(&options));
  OK(qhost_options_set_plugin_dir(options, QH_BUILD_PLUGIN_DIR));
  OK(qhost_options_set_backend(options, "x86"));
  OK(qhost_options_set_calibration_file(options, calib_path));
  OK(qhost_quantize(model_path, options, qdq, NULL, NULL));

  QhostModel *fp32 = NULL, *int8 = NULL;
  QhostValues *data = NULL;
  OK(qhost_model_load(model_path, &fp32));
  OK(qhost_model_load(qdq, &int8));
  OK(qhost_model_read_inputs(fp32, test_path, &data));
  Worker w[2] = {{0}, {0}};
  QhostValues *expected[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    OK(qhost_session_new(k ? int8 : fp32, k ? options : NULL, &w[k].session));
    OK(qhost_values_get(data, 0, &w[k].input));
    /* one row first, so that the full set makes the session plan (and lower) again */
    int64_t one[] = {1, 1, 8, 8};
    QhostTensor row = {NULL, QHOST_DTYPE_FLOAT32, 4, one, w[k].input.data, 64 * sizeof(float)};
    QhostValues *first = NULL;
    OK(qhost_session_run(w[k].session, &row, 1, &first));
    qhost_values_free(first);
    OK(qhost_session_run(w[k].session, &w[k].input, 1, &expected[k])); /* alone */
    w[k].expected = expected[k];
    w[k].runs = 20;
  }
  qhost_model_free(fp32); /* the sessions hold what they need */
  qhost_model_free(int8);
  pthread_t threads[2];
  for (int k = 0; k < 2; k++)
    CHECK(pthread_create(&threads[k], NULL, work, &w[k]) == 0);
  for (int k = 0; k < 2; k++)
    pthread_join(threads[k], NULL);
  for (int k = 0; k < 2; k++) {
    CHECK(w[k].mismatches == 0);
    qhost_session_free(w[k].session);
    qhost_values_free(expected[k]);
  }
  qhost_values_free(data);
  qhost_options_free(options);
}

/* Run a session on the first `rows` test images; returns the logits (rows x 10, malloc'd). */
static float *run_rows(QhostSession *session, float *images, int64_t rows) {
  int64_t shape[] = {rows, 1, 8, 8};
  QhostTensor in = {NULL, QHOST_DTYPE_FLOAT32, 4, shape, images, (size_t)rows * 64 * sizeof(float)};
  QhostValues *out = NULL;
  float *logits = NULL;
  OK(qhost_session_run(session, &in, 1, &out));
  QhostTensor y;
  if (out && qhost_values_get(out, 0, &y) == NULL && y.nbytes == (size_t)rows * 10 * sizeof(float)) {
    logits = malloc(y.nbytes);
    memcpy(logits, y.data, y.nbytes);
  }
  CHECK(logits != NULL);
  qhost_values_free(out);
  return logits;
}

/* A symbolic batch that changes between runs of one lowered session (PLUGIN_GUIDE.md,
 * "Shapes at accept"): the session plans again, and a unit whose kernel declines the new
 * shapes in reshape runs on the host path for those shapes. scalar_int8 with
 * reshape_max_batch=1 refuses every unit at batch 3: those runs equal the host path
 * exactly; at batch 1 the kernels run again (and differ from the host only at near-ties:
 * within one output step, checked by tests/lower). */
static void test_shape_change(const char *dir) {
  char qdq[512];
  snprintf(qdq, sizeof qdq, "%s/digits.qnnpack.qdq.onnx", dir);
  QhostOptions *qo = NULL;
  OK(qhost_options_new(&qo));
  OK(qhost_options_set_plugin_dir(qo, QH_BUILD_PLUGIN_DIR));
  OK(qhost_options_set_backend(qo, "qnnpack"));
  OK(qhost_options_set_calibration_file(qo, calib_path));
  OK(qhost_quantize(model_path, qo, qdq, NULL, NULL));
  qhost_options_free(qo);

  size_t len = 0;
  char *npy = read_all(test_path, &len);
  CHECK(npy != NULL && len > 128 + 3 * 64 * sizeof(float));
  if (npy == NULL)
    return;
  /* digits_test.npy: float32 [N, 1, 8, 8] after a 128-byte header */
  float *images = (float *)(npy + 128);

  QhostModel *model = NULL;
  OK(qhost_model_load(qdq, &model));
  QhostSession *host = NULL, *lowered = NULL;
  OK(qhost_session_new(model, NULL, &host));
  QhostOptions *lo = NULL;
  OK(qhost_options_new(&lo));
  OK(qhost_options_set_plugin_dir(lo, QH_LOWER_PLUGIN_DIR));
  OK(qhost_options_set_backend(lo, "scalar_int8"));
  OK(qhost_options_add_backend_option(lo, "reshape_max_batch=1"));
  OK(qhost_session_new(model, lo, &lowered));

  float *h1 = run_rows(host, images, 1), *h3 = run_rows(host, images, 3);
  float *l1 = run_rows(lowered, images, 1), *l3 = run_rows(lowered, images, 3);
  float *l1_again = run_rows(lowered, images, 1);
  if (h1 && h3 && l1 && l3 && l1_again) {
    CHECK(memcmp(l3, h3, 3 * 10 * sizeof(float)) == 0); /* every unit on the host path */
    CHECK(memcmp(l1, l1_again, 10 * sizeof(float)) == 0); /* batch 1 lowered again */
    int differ = memcmp(l1, h1, 10 * sizeof(float)) != 0;
    printf("shape change: batch 3 equals the host path; batch 1 %s the host path\n",
           differ ? "differs at near-ties from" : "equals");
  }
  free(h1), free(h3), free(l1), free(l3), free(l1_again);
  qhost_options_free(lo);
  qhost_session_free(lowered);
  qhost_session_free(host);
  qhost_model_free(model);
  free(npy);
}

int main(void) {
  CHECK(qhost_api_version() == QHOST_API_VERSION);
  CHECK(strlen(qhost_version_string()) > 0);
  CHECK(qhost_dtype_size(QHOST_DTYPE_INT64) == 8 && strcmp(qhost_dtype_name(QHOST_DTYPE_UINT8), "uint8") == 0);
  char dir[] = "/tmp/qhost-api-XXXXXX";
  if (mkdtemp(dir) == NULL)
    return 1;
  test_null_handles();
  test_model_and_tensors();
  test_file_replaced(dir);
  test_quantize_from_memory(dir);
  test_quantize_dynamic(dir);
  test_flows(dir);
  test_two_threads(dir);
  test_shape_change(dir);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    failures++;
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
