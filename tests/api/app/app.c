/* An application written against the installed qhost.h alone (tests/api/app_build.py
 * builds it out of tree with CMake's find_package(QHost) and with pkg-config): quantize
 * the digits CNN for a backend, run the QDQ model on that backend in a session on the
 * test set in memory, check the accuracy, and write the backend's deploy package.
 *
 *   app EXAMPLES_DIR BACKEND WORK_DIR     exit 0 when every step worked */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qhost.h>

static int fail(QhostStatus *st, const char *step) {
  fprintf(stderr, "app: %s: %s\n", step, qhost_status_message(st));
  qhost_status_free(st);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: app EXAMPLES_DIR BACKEND WORK_DIR\n");
    return 2;
  }
  char model[1024], calib[1024], test[1024], labels[1024], qdq[1024], package[1024];
  snprintf(model, sizeof model, "%s/digits_cnn.onnx", argv[1]);
  snprintf(calib, sizeof calib, "%s/digits_calib.npy", argv[1]);
  snprintf(test, sizeof test, "%s/digits_test.npy", argv[1]);
  snprintf(labels, sizeof labels, "%s/digits_labels.npy", argv[1]);
  snprintf(qdq, sizeof qdq, "%s/digits.qdq.onnx", argv[3]);
  snprintf(package, sizeof package, "%s/package", argv[3]);
  printf("qhost %s, API %d\n", qhost_version_string(), qhost_api_version());
  if (qhost_api_version() / 1000 != QHOST_API_VERSION_MAJOR)
    return 1;

  QhostOptions *options = NULL;
  QhostStatus *st = qhost_options_new(&options);
  if (st || (st = qhost_options_set_backend(options, argv[2])) ||
      (st = qhost_options_set_calibration_file(options, calib)))
    return fail(st, "options");
  char *report = NULL;
  if ((st = qhost_quantize(model, options, qdq, &report, NULL)))
    return fail(st, "quantize");
  printf("quantize: report of %zu bytes of JSON\n", strlen(report));
  qhost_string_free(report);

  QhostModel *m = NULL;
  QhostValues *inputs = NULL, *outputs = NULL, *truth = NULL;
  QhostSession *session = NULL;
  QhostTensor x, y, l;
  if ((st = qhost_model_load(qdq, &m)) || (st = qhost_model_read_inputs(m, test, &inputs)) ||
      (st = qhost_session_new(m, options, &session)) || (st = qhost_values_get(inputs, 0, &x)) ||
      (st = qhost_session_run(session, &x, 1, &outputs)) || (st = qhost_values_get(outputs, 0, &y)) ||
      (st = qhost_values_read_file(labels, &truth)) || (st = qhost_values_get(truth, 0, &l)))
    return fail(st, "run");
  const float *logits = y.data;
  int64_t n = y.shape[0], k = y.shape[1], correct = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t best = 0;
    for (int64_t j = 1; j < k; j++)
      if (logits[i * k + j] > logits[i * k + best])
        best = j;
    correct += best == ((const int64_t *)l.data)[i];
  }
  double accuracy = 100.0 * (double)correct / (double)n;
  printf("run: %s on %s: accuracy %.2f%% (%lld/%lld)\n", qdq, argv[2], accuracy, (long long)correct,
         (long long)n);
  qhost_values_free(truth);
  qhost_values_free(outputs);
  qhost_values_free(inputs);
  qhost_session_free(session);
  qhost_model_free(m);
  if (accuracy < 90.0)
    return 1;

  uint64_t bytes = 0;
  char *plugin = NULL;
  if ((st = qhost_deploy(qdq, options, package, 0, &bytes, &plugin)))
    return fail(st, "deploy");
  printf("deploy: %s: %llu bytes written by plugin '%s'\n", package, (unsigned long long)bytes, plugin);
  qhost_string_free(plugin);
  qhost_options_free(options);
  return bytes > 0 ? 0 : 1;
}
