/* PyTorch's BackendConfig tutorial, its three experiments over the ONNX form of the
 * tutorial's MyModel (linear on the last axis exports as MatMul + Add; conv; optional
 * bn; relu; sigmoid) with the tutorial backend (plugins/my_backend.c) loaded as a
 * plugin:
 *   1. the tutorial's qconfig (MinMaxObserver quint8 [0, 127], eps 2^-12; default
 *      weight observer) satisfies the constraints: linear and conv-relu quantized,
 *      sigmoid float;
 *   2. conv-bn-relu, which the backend does not declare: only linear quantized, and no
 *      BatchNorm folding either;
 *   3. PyTorch's default qconfig (HistogramObserver, eps 2^-23 < 2^-12): nothing
 *      quantized, each linear/conv node's reason naming scale_min_lower_bound.
 * Qconfigs come from the real mappings: the tutorial's QConfigMapping as a --config
 * file over an empty base, and get_default_qconfig_mapping() as the fbgemm plugin's
 * default mapping; the tests go through the public qh_backend_annotate. */
#include <glib/gstdio.h>
#include <unistd.h>

#include "plugin/plugin.h"
#include "qh-test-graph.h"

static const QhBackendConfig *load(QhPlugin **out) {
  GError *error = NULL;
  QhPlugin *p = qh_plugin_load(QH_QUANT_PLUGIN_DIR "/libqhost-my_backend.so", "my_backend", &error);
  g_assert_no_error(error);
  *out = p;
  return ((const QhPluginDesc *)qh_plugin_desc(p))->backend_config;
}

static QhGraph *my_model(gboolean use_bn) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 3, 10, 10});
  int mm = tg_node(g, "linear_matmul", "MatMul", 2,
                   (int[]){x, tg_const(g, "linear.weight", QH_DTYPE_F32, 2, (int64_t[]){10, 3}, NULL)});
  int lin = tg_node(g, "linear_add", "Add", 2,
                    (int[]){mm, tg_const(g, "linear.bias", QH_DTYPE_F32, 1, (int64_t[]){3}, NULL)});
  int c = tg_node(g, "conv", "Conv", 3,
                  (int[]){lin, tg_const(g, "conv.weight", QH_DTYPE_F32, 4, (int64_t[]){3, 3, 3, 3}, NULL),
                          tg_const(g, "conv.bias", QH_DTYPE_F32, 1, (int64_t[]){3}, NULL)});
  if (use_bn) {
    int bn_in[5] = {c};
    const char *names[] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"};
    for (int i = 0; i < 4; i++)
      bn_in[i + 1] = tg_const(g, names[i], QH_DTYPE_F32, 1, (int64_t[]){3}, NULL);
    float *var = qh_graph_value(g, bn_in[4])->initializer->data;
    for (int i = 0; i < 3; i++)
      var[i] = 1.0f;
    c = tg_node(g, "bn", "BatchNormalization", 5, bn_in);
  }
  int r = tg_node(g, "relu", "Relu", 1, &c);
  tg_output(g, tg_node(g, "sigmoid", "Sigmoid", 1, &r));
  return g;
}

/* activation_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127, eps=2**-12);
 * QConfig(activation=activation_observer, weight=default_weight_observer), set for
 * Linear, Conv2d, BatchNorm2d and ReLU only (QConfigMapping() with set_object_type). */
static QhQConfigMapping *tutorial_mapping(void) {
  const char *qconfig =
      "{\"activation\": {\"observer\": \"MinMaxObserver\", \"dtype\": \"quint8\", \"quant_min\": 0, "
      "\"quant_max\": 127, \"eps\": 0.000244140625}, \"weight\": {\"observer\": \"MinMaxObserver\", "
      "\"dtype\": \"qint8\", \"qscheme\": \"per_tensor_symmetric\"}}";
  char *text = g_strdup_printf("{\"base\": \"none\", \"object_type\": {\"Linear\": %s, \"Conv2d\": %s, "
                               "\"BatchNorm2d\": %s, \"ReLU\": %s}}", qconfig, qconfig, qconfig, qconfig);
  char *path = NULL;
  GError *error = NULL;
  int fd = g_file_open_tmp("tutorial-qconfig-XXXXXX.json", &path, &error);
  g_assert_no_error(error);
  close(fd);
  g_assert_true(g_file_set_contents(path, text, -1, &error));
  QhQConfigMapping *m = qh_qconfig_mapping_new(NULL, NULL, &error);
  g_assert_no_error(error);
  if (!qh_qconfig_mapping_load_file(m, path, &error))
    g_error("%s", error->message);
  g_unlink(path);
  g_free(path);
  g_free(text);
  return m;
}

typedef struct {
  QhAnnotationSet *set;
  QhQuantReport *report;
} Result;

static Result run(const QhBackendConfig *bc, QhGraph *g, const QhQConfigMapping *m) {
  Result r = {qh_annotation_set_new(), qh_quant_report_new()};
  GError *error = NULL;
  g_assert_true(qh_backend_fold_batchnorm(bc, g, &error));
  g_assert_no_error(error);
  g_assert_true(qh_backend_annotate(bc, g, m, r.set, r.report, &error));
  g_assert_no_error(error);
  g_assert_true(qh_annotation_set_validate(r.set, g, &error));
  g_assert_no_error(error);
  return r;
}

static void result_free(Result r) {
  qh_annotation_set_free(r.set);
  qh_quant_report_free(r.report);
}

#define IN QH_EDGE_INPUT
#define OUT QH_EDGE_OUTPUT
#define NO_PATTERN(op) TG_NEEDLES("no pattern for " op " in backend 'my_backend'")

static void expect_activation(const QhQuantSpec *s) {
  g_assert_nonnull(s);
  g_assert_cmpint(s->kind, ==, QH_SPEC_QUANTIZE);
  g_assert_cmpint(s->dtype, ==, QH_DTYPE_UINT8);
  g_assert_cmpstr(s->observer, ==, "MinMaxObserver");
  g_assert_true(s->flags & QH_SPEC_HAS_RANGE);
  g_assert_cmpint(s->quant_min, ==, 0);
  g_assert_cmpint(s->quant_max, ==, 127);
  g_assert_true(s->flags & QH_SPEC_HAS_EPS);
  g_assert_cmpfloat(s->eps, ==, 0x1p-12f);
}

static void expect_weight(const QhQuantSpec *s) {
  g_assert_nonnull(s);
  g_assert_cmpint(s->kind, ==, QH_SPEC_QUANTIZE);
  g_assert_cmpint(s->dtype, ==, QH_DTYPE_INT8);
  g_assert_cmpint(s->qscheme, ==, QH_QSCHEME_PER_TENSOR_SYMMETRIC);
}

static void test_satisfied(void) {
  QhPlugin *p;
  const QhBackendConfig *bc = load(&p);
  QhGraph *g = my_model(FALSE);
  QhQConfigMapping *m = tutorial_mapping();
  Result r = run(bc, g, m);
  tg_expect_report(r.report, g, "linear_matmul", TRUE, "MatMul -> Add", NULL);
  tg_expect_report(r.report, g, "linear_add", TRUE, "MatMul -> Add", NULL);
  tg_expect_report(r.report, g, "conv", TRUE, "Conv -> Relu", NULL);
  tg_expect_report(r.report, g, "relu", TRUE, "Conv -> Relu", NULL);
  tg_expect_report(r.report, g, "sigmoid", FALSE, NULL, NO_PATTERN("Sigmoid"));
  /* quant1 - [dequant1 - fp32_linear - quant2] - [fp32_conv_relu - quant3] - dequant */
  expect_activation(tg_spec(r.set, g, "linear_matmul", 0, IN));
  expect_weight(tg_spec(r.set, g, "linear_matmul", 1, IN));
  g_assert_null(tg_spec(r.set, g, "linear_add", 1, IN)); /* float bias */
  expect_activation(tg_spec(r.set, g, "linear_add", 0, OUT));
  g_assert_null(tg_spec(r.set, g, "conv", 0, IN)); /* linear's output, quantized already */
  expect_weight(tg_spec(r.set, g, "conv", 1, IN));
  g_assert_null(tg_spec(r.set, g, "conv", 0, OUT));
  expect_activation(tg_spec(r.set, g, "relu", 0, OUT));
  g_assert_cmpuint(qh_annotation_set_n_specs(r.set), ==, 5);
  result_free(r);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
  qh_plugin_free(p);
}

static void test_conv_bn_relu_not_declared(void) {
  QhPlugin *p;
  const QhBackendConfig *bc = load(&p);
  QhGraph *g = my_model(TRUE);
  QhQConfigMapping *m = tutorial_mapping();
  Result r = run(bc, g, m);
  g_assert_false(qh_graph_node(g, tg_node_id(g, "bn"))->is_removed); /* neither fused nor folded */
  tg_expect_report(r.report, g, "linear_matmul", TRUE, "MatMul -> Add", NULL);
  tg_expect_report(r.report, g, "conv", FALSE, NULL, NO_PATTERN("Conv"));
  tg_expect_report(r.report, g, "bn", FALSE, NULL, NO_PATTERN("BatchNormalization"));
  tg_expect_report(r.report, g, "relu", FALSE, NULL, NO_PATTERN("Relu"));
  tg_expect_report(r.report, g, "sigmoid", FALSE, NULL, NO_PATTERN("Sigmoid"));
  g_assert_cmpuint(qh_annotation_set_n_specs(r.set), ==, 3);
  result_free(r);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
  qh_plugin_free(p);
}

static void test_default_qconfig_violates(void) {
  QhPlugin *p, *fbgemm;
  const QhBackendConfig *bc = load(&p);
  GError *error = NULL;
  fbgemm = qh_plugin_load(QH_BUILD_PLUGIN_DIR "/libqhost-fbgemm.so", "fbgemm", &error);
  g_assert_no_error(error);
  QhQConfigMapping *m = qh_qconfig_mapping_new(
      ((const QhPluginDesc *)qh_plugin_desc(fbgemm))->backend_config, NULL, &error);
  g_assert_no_error(error);
  for (int use_bn = 0; use_bn <= 1; use_bn++) {
    QhGraph *g = my_model(use_bn);
    Result r = run(bc, g, m);
    const char *const *eps = TG_NEEDLES("violates every dtype config",
                                        "'weighted_int8_dtype_config': input activation eps "
                                        "1.1920929e-07 is below scale_min_lower_bound 0.000244140625");
    tg_expect_report(r.report, g, "linear_matmul", FALSE, NULL, eps);
    tg_expect_report(r.report, g, "linear_add", FALSE, NULL, eps);
    tg_expect_report(r.report, g, "conv", FALSE, NULL, use_bn ? NO_PATTERN("Conv") : eps);
    tg_expect_report(r.report, g, "relu", FALSE, NULL, use_bn ? NO_PATTERN("Relu") : eps);
    tg_expect_report(r.report, g, "sigmoid", FALSE, NULL, NO_PATTERN("Sigmoid"));
    g_assert_cmpuint(qh_annotation_set_n_specs(r.set), ==, 0);
    result_free(r);
    qh_graph_free(g);
  }
  qh_qconfig_mapping_free(m);
  qh_plugin_free(fbgemm);
  qh_plugin_free(p);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/tutorial/satisfied", test_satisfied);
  g_test_add_func("/tutorial/conv-bn-relu-not-declared", test_conv_bn_relu_not_declared);
  g_test_add_func("/tutorial/default-qconfig-violates", test_default_qconfig_violates);
  return g_test_run();
}
