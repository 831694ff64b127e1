/* The annotator over the fbgemm and qnnpack plugins' BackendConfig tables (loaded from
 * the build's plugin directory) on a small CNN: Conv -> BN -> Relu -> MaxPool -> Reshape
 * -> Gemm -> Sigmoid. fbgemm with its default qconfig: BN folded, conv-relu fused,
 * per-channel weights, pool and reshape sharing their input's qparams, sigmoid fixed.
 * qnnpack: the default quint8 qconfig takes the second dtype config, a symmetric qint8
 * one (PyTorch's default_symmetric_qnnpack_qconfig) the first, and a qint8 one whose
 * weight eps is too small neither, with the reason naming both configs. fbgemm runs
 * twice: with hand-made qconfigs, and with the plugin's default mapping through the
 * public qh_backend_annotate. */
#include "plugin/plugin.h"
#include "qh-test-graph.h"

static const QhBackendConfig *load(const char *name, QhPlugin **out) {
  GError *error = NULL;
  char *path = g_strdup_printf("%s/libqhost-%s.so", QH_BUILD_PLUGIN_DIR, name);
  QhPlugin *p = qh_plugin_load(path, name, &error);
  g_assert_no_error(error);
  g_free(path);
  *out = p;
  return ((const QhPluginDesc *)qh_plugin_desc(p))->backend_config;
}

static QhGraph *cnn(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 3, 8, 8});
  int c = tg_node(g, "conv", "Conv", 3,
                  (int[]){x, tg_const(g, "conv.w", QH_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3}, NULL),
                          tg_const(g, "conv.b", QH_DTYPE_F32, 1, (int64_t[]){4}, NULL)});
  int bn_in[5] = {c};
  const char *names[] = {"bn.scale", "bn.b", "bn.mean", "bn.var"};
  for (int i = 0; i < 4; i++)
    bn_in[i + 1] = tg_const(g, names[i], QH_DTYPE_F32, 1, (int64_t[]){4}, NULL);
  float *var = qh_graph_value(g, bn_in[4])->initializer->data;
  for (int i = 0; i < 4; i++)
    var[i] = 0.5f + (float)i;
  int b = tg_node(g, "bn", "BatchNormalization", 5, bn_in);
  int r = tg_node(g, "relu", "Relu", 1, &b);
  int m = tg_node(g, "pool", "MaxPool", 1, &r);
  int64_t shape[2] = {1, -1};
  int flat = tg_node(g, "reshape", "Reshape", 2,
                     (int[]){m, tg_const(g, "shape", QH_DTYPE_S64, 1, (int64_t[]){2}, shape)});
  int fc = tg_node(g, "fc", "Gemm", 3,
                   (int[]){flat, tg_const(g, "fc.w", QH_DTYPE_F32, 2, (int64_t[]){10, 36}, NULL),
                           tg_const(g, "fc.b", QH_DTYPE_F32, 1, (int64_t[]){10}, NULL)});
  qh_node_set_attr_int(qh_graph_node(g, tg_node_id(g, "fc")), "transB", 1);
  tg_output(g, tg_node(g, "sigmoid", "Sigmoid", 1, &fc));
  return g;
}

typedef struct {
  QhAnnotationSet *set;
  QhQuantReport *report;
} Result;

static Result run(const QhBackendConfig *bc, QhGraph *g, const TgLookup *l) {
  Result r = {qh_annotation_set_new(), qh_quant_report_new()};
  GError *error = NULL;
  g_assert_true(qh_backend_fold_batchnorm(bc, g, &error));
  g_assert_true(qh_backend_annotate_with(bc, g, tg_lookup, (gpointer)l, r.set, r.report, &error));
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

static QhQConfig *histogram_qconfig(gboolean reduce_range, int32_t wscheme, const char *wname) {
  QhObserverConfig *act = tg_observer("HistogramObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  act->reduce_range = reduce_range;
  return tg_qconfig(act, tg_observer(wname, QH_DTYPE_INT8, wscheme), "global");
}

static void check_fbgemm(Result r, QhGraph *g);

static void test_fbgemm(void) {
  QhPlugin *p;
  const QhBackendConfig *bc = load("fbgemm", &p);
  QhGraph *g = cnn();
  QhQConfig *global = histogram_qconfig(TRUE, QH_QSCHEME_PER_CHANNEL_SYMMETRIC, "PerChannelMinMaxObserver");
  QhQConfig *sigmoid = tg_qconfig(tg_fixed(1.0f / 256.0f, 0), NULL, "object_type 'Sigmoid'");
  QhQConfig *reuse = tg_qconfig(tg_observer("ReuseInputObserver", QH_DTYPE_UINT8,
                                            QH_QSCHEME_PER_TENSOR_AFFINE), NULL, "object_type 'Reshape'");
  TgLookup l = {.op = {"Sigmoid", "Reshape"}, .qc = {sigmoid, reuse}, .global = global};
  Result r = run(bc, g, &l);
  check_fbgemm(r, g);
  result_free(r);
  tg_qconfig_free(global), tg_qconfig_free(sigmoid), tg_qconfig_free(reuse);
  qh_graph_free(g);
  qh_plugin_free(p);
}

/* The same through the public entry and the plugin's own default mapping. */
static void test_fbgemm_default_mapping(void) {
  QhPlugin *p;
  const QhBackendConfig *bc = load("fbgemm", &p);
  GError *error = NULL;
  QhQConfigMapping *m = qh_qconfig_mapping_new(bc, NULL, &error);
  g_assert_no_error(error);
  QhGraph *g = cnn();
  Result r = {qh_annotation_set_new(), qh_quant_report_new()};
  g_assert_true(qh_backend_fold_batchnorm(bc, g, &error));
  g_assert_true(qh_backend_annotate(bc, g, m, r.set, r.report, &error));
  g_assert_no_error(error);
  g_assert_true(qh_annotation_set_validate(r.set, g, &error));
  g_assert_no_error(error);
  check_fbgemm(r, g);
  result_free(r);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
  qh_plugin_free(p);
}

static void check_fbgemm(Result r, QhGraph *g) {
  g_assert_true(qh_graph_node(g, tg_node_id(g, "bn"))->is_removed);
  tg_expect_report(r.report, g, "conv", TRUE, "Conv -> Relu", NULL);
  tg_expect_report(r.report, g, "relu", TRUE, "Conv -> Relu", NULL);
  tg_expect_report(r.report, g, "pool", TRUE, "MaxPool", NULL);
  tg_expect_report(r.report, g, "reshape", TRUE, "Reshape", NULL);
  tg_expect_report(r.report, g, "fc", TRUE, "Gemm", NULL);
  tg_expect_report(r.report, g, "sigmoid", TRUE, "Sigmoid", NULL);
  const QhQuantSpec *x = tg_spec(r.set, g, "conv", 0, IN);
  g_assert_cmpint(x->kind, ==, QH_SPEC_QUANTIZE);
  g_assert_true(x->flags & QH_SPEC_REDUCE_RANGE);
  g_assert_cmpstr(x->observer, ==, "HistogramObserver");
  const QhQuantSpec *w = tg_spec(r.set, g, "conv", 1, IN);
  g_assert_cmpint(w->qscheme, ==, QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  g_assert_cmpint(w->ch_axis, ==, 0);
  g_assert_null(tg_spec(r.set, g, "conv", 2, IN));
  g_assert_cmpint(tg_spec(r.set, g, "relu", 0, OUT)->kind, ==, QH_SPEC_QUANTIZE);
  g_assert_null(tg_spec(r.set, g, "pool", 0, IN));
  g_assert_cmpint(tg_spec(r.set, g, "pool", 0, OUT)->kind, ==, QH_SPEC_SHARED);
  g_assert_null(tg_spec(r.set, g, "reshape", 0, IN));
  g_assert_null(tg_spec(r.set, g, "reshape", 1, IN));
  g_assert_cmpint(tg_spec(r.set, g, "reshape", 0, OUT)->kind, ==, QH_SPEC_SHARED);
  g_assert_null(tg_spec(r.set, g, "fc", 0, IN));
  g_assert_cmpint(tg_spec(r.set, g, "fc", 1, IN)->ch_axis, ==, 0);
  g_assert_cmpint(tg_spec(r.set, g, "fc", 0, OUT)->kind, ==, QH_SPEC_QUANTIZE);
  g_assert_null(tg_spec(r.set, g, "sigmoid", 0, IN));
  const QhQuantSpec *s = tg_spec(r.set, g, "sigmoid", 0, OUT);
  g_assert_cmpint(s->kind, ==, QH_SPEC_FIXED);
  g_assert_cmpfloat(s->scale, ==, 1.0f / 256.0f);
  /* The whole reshape group resolves to the conv-relu's output. */
  QhEdgeRef e = {(uint32_t)tg_node_id(g, "reshape"), 0, OUT, 0}, root;
  const QhQuantSpec *rs = NULL;
  g_assert_true(qh_annotation_set_resolve(r.set, g, &e, &root, &rs));
  g_assert_cmpint(root.node, ==, tg_node_id(g, "relu"));
}

static QhQConfig *qint8_qconfig(gboolean weight_eps) {
  QhObserverConfig *act = tg_observer("HistogramObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  act->has_eps = TRUE;
  act->eps = 0x1p-12f;
  QhObserverConfig *w = tg_observer("MinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC);
  w->has_range = TRUE;
  w->quant_min = -127;
  w->quant_max = 127;
  if (weight_eps) {
    w->has_eps = TRUE;
    w->eps = 0x1p-12f;
  }
  return tg_qconfig(act, w, "global");
}

static void test_qnnpack(void) {
  QhPlugin *p;
  const QhBackendConfig *bc = load("qnnpack", &p);
  QhQConfig *qcs[3] = {histogram_qconfig(FALSE, QH_QSCHEME_PER_TENSOR_SYMMETRIC, "MinMaxObserver"),
                       qint8_qconfig(TRUE), qint8_qconfig(FALSE)};
  for (int k = 0; k < 3; k++) {
    QhGraph *g = cnn();
    TgLookup l = {.global = qcs[k]};
    Result r = run(bc, g, &l);
    if (k < 2) {
      tg_expect_report(r.report, g, "conv", TRUE, "Conv -> Relu", NULL);
      tg_expect_report(r.report, g, "fc", TRUE, "Gemm", NULL);
      const QhQuantSpec *x = tg_spec(r.set, g, "conv", 0, IN);
      g_assert_cmpint(x->dtype, ==, k == 0 ? QH_DTYPE_UINT8 : QH_DTYPE_INT8);
      g_assert_cmpint(tg_spec(r.set, g, "conv", 1, IN)->qscheme, ==, QH_QSCHEME_PER_TENSOR_SYMMETRIC);
    } else {
      tg_expect_report(r.report, g, "conv", FALSE, NULL,
                       TG_NEEDLES("'weighted_op_qint8_symmetric': weight eps 1.1920929e-07 is below "
                                  "scale_min_lower_bound 0.000244140625",
                                  "'weighted_op_quint8': input activation dtype is int8, the dtype "
                                  "config wants uint8"));
      /* Ops without weights still take the qint8-symmetric config. */
      tg_expect_report(r.report, g, "pool", TRUE, "MaxPool", NULL);
    }
    result_free(r);
    qh_graph_free(g);
  }
  for (int k = 0; k < 3; k++)
    tg_qconfig_free(qcs[k]);
  qh_plugin_free(p);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/pytorch-tables/fbgemm", test_fbgemm);
  g_test_add_func("/pytorch-tables/fbgemm-default-mapping", test_fbgemm_default_mapping);
  g_test_add_func("/pytorch-tables/qnnpack", test_qnnpack);
  return g_test_run();
}
