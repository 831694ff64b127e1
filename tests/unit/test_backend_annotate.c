/* Unit tests of the declarative annotator (quant/backend-annotate.c, pattern-match.c)
 * over hand-made BackendConfigs, and of BatchNorm folding (quant/bn-fold.c) against
 * folded weights PyTorch 1.13 computed (torch.nn.utils.fusion, bit patterns below). */
#include <math.h>

#include "../quant/qh-test-graph.h"

/* ---- BatchNorm folding ---- */

/* Inputs, in float32 exactly as the generator computed them: element i of a weight is
 * f32((i * 37) % 101 - 50) / f32(7); per channel c: gamma (c + 3) / 5, beta (2c - 3) / 9,
 * mean (c - 1) / 3, var (c^2 + 1) / 11, bias (5 - c) / 13; eps 1e-5. Expected values:
 * fuse_conv_bn_weights / fuse_linear_bn_weights; grouped ConvTranspose (which PyTorch
 * cannot fold) with the same torch ops per element. */
static const uint32_t conv_w[24] = {
    0xc16369c8u, 0xc06c827du, 0x40da5112u, 0xc135ee3au, 0xbf5a5112u, 0x411aa417u,
    0xc10872abu, 0x3ffeb3eau, 0x413caefdu, 0xc0ab87cfu, 0x4091cd0au, 0xc1498c60u,
    0xc02b87cfu, 0x40e790f1u, 0xc11eaa6cu, 0x00000000u, 0x40fae06cu, 0xc0b71279u,
    0x40079be8u, 0x411f5730u, 0xc066890au, 0x40879be8u, 0xc1152b7eu, 0xbfbdda44u,
};
static const uint32_t conv_b[3] = {
    0x3f8c3267u, 0x3eeeabe0u, 0xbd27feb2u,
};
static const uint32_t convt_w[24] = {
    0xc16369c8u, 0xc06c827du, 0x40da5112u, 0xc135ee3au, 0xbf4dd62cu, 0x4111cd0au,
    0xc100a5dbu, 0x3ff02488u, 0x41152b7eu, 0xc0879be8u, 0x4066890au, 0xc11f5730u,
    0xc035ee3au, 0x40f59b34u, 0xc1284928u, 0x00000000u, 0x411eaa6cu, 0xc0e790f1u,
    0x402b87cfu, 0x41498c60u, 0xc066890au, 0x40879be8u, 0xc1152b7eu, 0xbfbdda44u,
};
static const uint32_t convt_b[3] = {
    0x3ea8efe5u, 0xbde38e39u, 0xbec43f78u,
};
static const uint32_t convt_g2_w[24] = {
    0xc16369c8u, 0xc06c827du, 0x40cdd62cu, 0xc12b87cfu, 0xbf22bb16u, 0x40e6890au,
    0xc10872abu, 0x3ffeb3eau, 0x413caefdu, 0xc0ab87cfu, 0x4066890au, 0xc11f5730u,
    0xbfe6232bu, 0x409b57bdu, 0xc0be7b31u, 0x00000000u, 0x40b0073bu, 0xc08073fbu,
    0x3fe6232bu, 0x410734a9u, 0xc02f096cu, 0x404decf7u, 0xc0d154b5u, 0xbf8535e8u,
};
static const uint32_t convt_g2_b[6] = {
    0x3ea8efe5u, 0xbde38e39u, 0xbec43f78u, 0xbf017628u, 0xbf1212dcu, 0xbf1c1dfau,
};
static const uint32_t gemm_w[12] = {
    0xc16369c8u, 0xc06c827du, 0x40da5112u, 0xc135ee3au, 0xbf4dd62cu, 0x4111cd0au,
    0xc100a5dbu, 0x3ff02488u, 0x41152b7eu, 0xc0879be8u, 0x4066890au, 0xc11f5730u,
};
static const uint32_t gemm_b[3] = {
    0x3f8c3266u, 0x3eeeabe0u, 0xbd27feb2u,
};

static float *fill(int n, float (*f)(int)) {
  float *a = g_new(float, n);
  for (int i = 0; i < n; i++)
    a[i] = f(i);
  return a;
}
static float w_of(int i) { return (float)((i * 37) % 101 - 50) / 7.0f; }
static float gamma_of(int c) { return (float)(c + 3) / 5.0f; }
static float beta_of(int c) { return (float)(c * 2 - 3) / 9.0f; }
static float mean_of(int c) { return (float)(c - 1) / 3.0f; }
static float var_of(int c) { return (float)(c * c + 1) / 11.0f; }
static float bias_of(int c) { return (float)(5 - c) / 13.0f; }

static const char *const conv_bn_relu_ops[] = {"Conv", "BatchNormalization", "Relu"};
static const char *const convt_bn_ops[] = {"ConvTranspose", "BatchNormalization"};
static const char *const gemm_bn_ops[] = {"Gemm", "BatchNormalization"};
#define FOLD_PATTERN(id, ops_)                                                                 \
  static const QhBackendPatternConfig id = {QH_STRUCT_HEADER(QhBackendPatternConfig),           \
                                            .ops = ops_, .n_ops = G_N_ELEMENTS(ops_),           \
                                            .fuser = QH_FUSER_FOLD_BATCHNORM}
FOLD_PATTERN(fold_conv_bn_relu, conv_bn_relu_ops);
FOLD_PATTERN(fold_convt_bn, convt_bn_ops);
FOLD_PATTERN(fold_gemm_bn, gemm_bn_ops);
static const QhBackendPatternConfig *const fold_patterns[] = {&fold_conv_bn_relu, &fold_convt_bn,
                                                              &fold_gemm_bn};
static const QhBackendConfig fold_bc = {QH_STRUCT_HEADER(QhBackendConfig), .name = "fold",
                                        .patterns = fold_patterns, .n_patterns = 3};

/* x -> op (weight w of shape wdims, optional bias) -> bn (C channels) -> tail; returns
 * the graph, the weighted op called "op". */
static QhGraph *weighted_bn(const char *op, int wrank, const int64_t *wdims, gboolean with_bias,
                            int64_t c_out, const char *tail) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 4, 5, 5});
  int64_t numel = 1;
  for (int i = 0; i < wrank; i++)
    numel *= wdims[i];
  float *w = fill((int)numel, w_of), *gm = fill((int)c_out, gamma_of), *bt = fill((int)c_out, beta_of);
  float *mn = fill((int)c_out, mean_of), *vr = fill((int)c_out, var_of), *bs = fill((int)c_out, bias_of);
  int ins[3] = {x, tg_const(g, "w", QH_DTYPE_F32, wrank, wdims, w), -1};
  if (with_bias)
    ins[2] = tg_const(g, "b", QH_DTYPE_F32, 1, &c_out, bs);
  int y = tg_node(g, "op", op, with_bias ? 3 : 2, ins);
  int bn_in[5] = {y, tg_const(g, "gamma", QH_DTYPE_F32, 1, &c_out, gm),
                  tg_const(g, "beta", QH_DTYPE_F32, 1, &c_out, bt),
                  tg_const(g, "mean", QH_DTYPE_F32, 1, &c_out, mn),
                  tg_const(g, "var", QH_DTYPE_F32, 1, &c_out, vr)};
  int z = tg_node(g, "bn", "BatchNormalization", 5, bn_in);
  tg_output(g, tail ? tg_node(g, "tail", tail, 1, &z) : z);
  g_free(w), g_free(gm), g_free(bt), g_free(mn), g_free(vr), g_free(bs);
  return g;
}

static void expect_bits(const QhGraph *g, int v, const uint32_t *want, int n) {
  const QhTensor *t = qh_graph_value(g, v)->initializer;
  g_assert_nonnull(t);
  g_assert_cmpint(qh_tensor_numel(t), ==, n);
  for (int i = 0; i < n; i++) {
    uint32_t got;
    memcpy(&got, (const float *)t->data + i, 4);
    if (got != want[i])
      g_error("element %d: 0x%08x, PyTorch 0x%08x", i, got, want[i]);
  }
}

/* BN gone, op named "op" writes BN's output value, weights and bias as PyTorch's. */
static void expect_folded(QhGraph *g, const uint32_t *w, int nw, const uint32_t *b, int nb) {
  GError *error = NULL;
  g_assert_true(qh_backend_fold_batchnorm(&fold_bc, g, &error));
  g_assert_no_error(error);
  const QhNode *op = qh_graph_node(g, tg_node_id(g, "op"));
  const QhNode *bn = qh_graph_node(g, tg_node_id(g, "bn"));
  g_assert_true(bn->is_removed);
  g_assert_false(op->is_removed);
  int bn_out = qh_graph_find_value(g, "bn:0");
  g_assert_cmpint(op->outputs[0], ==, bn_out);
  g_assert_cmpint(qh_graph_value(g, bn_out)->producer, ==, op->id);
  g_assert_cmpint(qh_graph_value(g, qh_graph_find_value(g, "op:0"))->producer, ==, -1);
  g_assert_cmpint(op->n_inputs, ==, 3);
  expect_bits(g, op->inputs[1], w, nw);
  expect_bits(g, op->inputs[2], b, nb);
  GArray *order = NULL;
  g_assert_true(qh_graph_topo_order(g, &order, &error));
  g_array_unref(order);
}

static void test_fold_conv(void) {
  QhGraph *g = weighted_bn("Conv", 4, (int64_t[]){3, 2, 2, 2}, TRUE, 3, "Relu");
  expect_folded(g, conv_w, 24, conv_b, 3);
  qh_graph_free(g);
}

/* The backend declares Conv -> BN -> Relu only: Conv -> BN -> Sigmoid stays. */
static void test_fold_needs_declared_pattern(void) {
  QhGraph *g = weighted_bn("Conv", 4, (int64_t[]){3, 2, 2, 2}, TRUE, 3, "Sigmoid");
  GError *error = NULL;
  g_assert_true(qh_backend_fold_batchnorm(&fold_bc, g, &error));
  g_assert_false(qh_graph_node(g, tg_node_id(g, "bn"))->is_removed);
  g_assert_cmpint(qh_graph_count_live_nodes(g), ==, 3);
  qh_graph_free(g);
}

static void test_fold_conv_transpose(void) {
  /* No bias: the fold adds one. */
  QhGraph *g = weighted_bn("ConvTranspose", 4, (int64_t[]){2, 3, 2, 2}, FALSE, 3, NULL);
  expect_folded(g, convt_w, 24, convt_b, 3);
  qh_graph_free(g);
  g = weighted_bn("ConvTranspose", 4, (int64_t[]){4, 3, 1, 2}, FALSE, 6, NULL);
  qh_node_set_attr_int(qh_graph_node(g, tg_node_id(g, "op")), "group", 2);
  expect_folded(g, convt_g2_w, 24, convt_g2_b, 6);
  qh_graph_free(g);
}

static void test_fold_gemm(void) {
  QhGraph *g = weighted_bn("Gemm", 2, (int64_t[]){3, 4}, TRUE, 3, NULL);
  qh_node_set_attr_int(qh_graph_node(g, tg_node_id(g, "op")), "transB", 1);
  expect_folded(g, gemm_w, 12, gemm_b, 3);
  qh_graph_free(g);
  /* transB = 0: the weight is [in, out]; feed the transpose, expect the transpose. */
  g = weighted_bn("Gemm", 2, (int64_t[]){4, 3}, TRUE, 3, NULL);
  QhTensor *w = qh_graph_value(g, qh_graph_find_value(g, "w"))->initializer;
  for (int o = 0; o < 3; o++)
    for (int i = 0; i < 4; i++)
      ((float *)w->data)[i * 3 + o] = w_of(o * 4 + i);
  uint32_t want[12];
  for (int o = 0; o < 3; o++)
    for (int i = 0; i < 4; i++)
      want[i * 3 + o] = gemm_w[o * 4 + i];
  expect_folded(g, want, 12, gemm_b, 3);
  qh_graph_free(g);
}

/* A weight two convs read is not changed in place. */
static void test_fold_shared_weight(void) {
  QhGraph *g = weighted_bn("Conv", 4, (int64_t[]){3, 2, 2, 2}, TRUE, 3, "Relu");
  int x = qh_graph_find_value(g, "x"), w = qh_graph_find_value(g, "w");
  int other = tg_node(g, "other", "Conv", 2, (int[]){x, w});
  tg_output(g, other);
  expect_folded(g, conv_w, 24, conv_b, 3);
  const QhNode *o = qh_graph_node(g, tg_node_id(g, "other"));
  g_assert_cmpint(o->inputs[1], ==, w);
  g_assert_cmpfloat(((float *)qh_graph_value(g, w)->initializer->data)[1], ==, w_of(1));
  g_assert_cmpint(qh_graph_node(g, tg_node_id(g, "op"))->inputs[1], !=, w);
  qh_graph_free(g);
}

/* ---- the annotator over a hand-made table ---- */

static const QhDTypeConstraint u8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8};
static const QhDTypeConstraint i8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT8};
static const QhDTypeConstraint f32 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_FLOAT};
static const QhDTypeConstraint u8_0_127 = {
    QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8,
    .flags = QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND | QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND,
    .quant_min_lower_bound = 0, .quant_max_upper_bound = 127};
static const QhDTypeConstraint u8_fixed = {
    QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8,
    .flags = QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND | QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND |
             QH_CONSTRAINT_SCALE_EXACT | QH_CONSTRAINT_ZERO_POINT_EXACT,
    .quant_min_lower_bound = 0, .quant_max_upper_bound = 255, .scale_exact = 1.0f / 256.0f,
    .zero_point_exact = 0};
#define DC(id, in, out, w, b, fl)                                                              \
  static const QhDTypeConfig id = {QH_STRUCT_HEADER(QhDTypeConfig), .name = #id, .flags = fl,   \
                                   .input = in, .output = out, .weight = w, .bias = b}
DC(weighted, &u8, &u8, &i8, &f32, 0);
DC(plain, &u8, &u8, NULL, NULL, 0);
DC(fixed, &u8_fixed, &u8_fixed, NULL, NULL, 0);
DC(dynamic, &u8, &f32, &i8, &f32, QH_DTYPE_CONFIG_IS_DYNAMIC);
DC(narrow, &u8_0_127, &u8_0_127, NULL, NULL, 0);
static const QhDTypeConfig *const weighted_list[] = {&weighted};
static const QhDTypeConfig *const plain_list[] = {&plain};
static const QhDTypeConfig *const fixed_list[] = {&fixed};
static const QhDTypeConfig *const dyn_narrow_list[] = {&dynamic, &narrow};
static const int32_t roles_p1[] = {QH_ROLE_ACTIVATION, QH_ROLE_NOT_OBSERVED};

#define DIFF QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
#define SHARE QH_OBS_OUTPUT_SHARE_OBSERVER_WITH_INPUT
#define PAT(id, obs, dcs, ...)                                                                 \
  static const char *const id##_ops[] = {__VA_ARGS__};                                         \
  static const QhBackendPatternConfig id = {                                                   \
      QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = id##_ops,                               \
      .n_ops = G_N_ELEMENTS(id##_ops), .observation_type = obs, .dtype_configs = dcs,          \
      .n_dtype_configs = G_N_ELEMENTS(dcs)}
PAT(p_conv_relu, DIFF, weighted_list, "Conv", "Relu");
PAT(p_conv_add_relu_nomask, DIFF, weighted_list, "Conv", "Add", "Relu");
PAT(p_conv, DIFF, weighted_list, "Conv");
PAT(p_convt, DIFF, weighted_list, "ConvTranspose");
PAT(p_gemm, DIFF, weighted_list, "Gemm");
PAT(p_matmul, DIFF, weighted_list, "MatMul");
PAT(p_relu, SHARE, plain_list, "Relu");
PAT(p_concat, SHARE, plain_list, "Concat");
PAT(p_sigmoid, DIFF, fixed_list, "Sigmoid");
PAT(p_tanh, DIFF, dyn_narrow_list, "Tanh");
PAT(p_shape, QH_OBS_INPUT_OUTPUT_NOT_OBSERVED, plain_list, "Shape");
static const char *const p_conv_add_relu_ops[] = {"Conv", "Add", "Relu"};
static const QhBackendPatternConfig p_conv_add_relu = {
    QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = p_conv_add_relu_ops, .n_ops = 3,
    .extra_inputs_mask = 0x2, .observation_type = DIFF, .dtype_configs = weighted_list,
    .n_dtype_configs = 1};
static const char *const p_add_ops[] = {"Add"};
static const QhBackendPatternConfig p_add = {
    QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = p_add_ops, .n_ops = 1,
    .observation_type = DIFF, .flags = QH_PATTERN_OBS_BY_TENSOR_ARGS,
    .observation_type_by_tensor_args = {DIFF, SHARE, DIFF}, .dtype_configs = weighted_list,
    .n_dtype_configs = 1};
static const char *const p_reshape_ops[] = {"Reshape"};
static const QhBackendPatternConfig p_reshape = {
    QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = p_reshape_ops, .n_ops = 1,
    .input_roles = roles_p1, .n_input_roles = 2, .observation_type = SHARE,
    .dtype_configs = plain_list, .n_dtype_configs = 1};

#define COMMON &p_conv_relu, &p_conv, &p_convt, &p_gemm, &p_matmul, &p_add, &p_relu, &p_concat, \
               &p_sigmoid, &p_tanh, &p_shape, &p_reshape
static const QhBackendPatternConfig *const t_patterns[] = {COMMON, &p_conv_add_relu};
static const QhBackendPatternConfig *const nomask_patterns[] = {COMMON, &p_conv_add_relu_nomask};
static const QhBackendConfig t_bc = {QH_STRUCT_HEADER(QhBackendConfig), .name = "t",
                                     .patterns = t_patterns, .n_patterns = G_N_ELEMENTS(t_patterns)};
static const QhBackendConfig nomask_bc = {QH_STRUCT_HEADER(QhBackendConfig), .name = "t",
                                          .patterns = nomask_patterns,
                                          .n_patterns = G_N_ELEMENTS(nomask_patterns)};

typedef struct {
  QhAnnotationSet *set;
  QhQuantReport *report;
} Result;

static Result annotate(const QhBackendConfig *bc, QhGraph *g, const TgLookup *l) {
  Result r = {qh_annotation_set_new(), qh_quant_report_new()};
  GError *error = NULL;
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

static QhQConfig *default_qconfig(void) {
  QhObserverConfig *w = tg_observer("PerChannelMinMaxObserver", QH_DTYPE_INT8,
                                    QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  return tg_qconfig(tg_observer("MinMaxObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE), w,
                    "global");
}

static void expect_kind(const QhQuantSpec *s, int kind, int32_t dtype) {
  g_assert_nonnull(s);
  g_assert_cmpint(s->kind, ==, kind);
  if (kind != QH_SPEC_SHARED)
    g_assert_cmpint(s->dtype, ==, dtype);
}

static void expect_shared_with(const QhQuantSpec *s, const QhGraph *g, const char *node, int slot,
                               int kind) {
  expect_kind(s, QH_SPEC_SHARED, 0);
  g_assert_cmpint(s->shared_with.node, ==, tg_node_id(g, node));
  g_assert_cmpint(s->shared_with.slot, ==, slot);
  g_assert_cmpint(s->shared_with.kind, ==, kind);
}

#define IN QH_EDGE_INPUT
#define OUT QH_EDGE_OUTPUT

/* conv -> add(c, y) -> relu */
static QhGraph *conv_add_relu(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 2, 4, 4});
  int y = tg_input(g, "y", 4, (int64_t[]){1, 3, 4, 4});
  int c = tg_node(g, "conv", "Conv", 3,
                  (int[]){x, tg_const(g, "w", QH_DTYPE_F32, 4, (int64_t[]){3, 2, 1, 1}, NULL),
                          tg_const(g, "b", QH_DTYPE_F32, 1, (int64_t[]){3}, NULL)});
  int a = tg_node(g, "add", "Add", 2, (int[]){c, y});
  tg_output(g, tg_node(g, "relu", "Relu", 1, &a));
  return g;
}

static void test_dag_pattern(void) {
  QhGraph *g = conv_add_relu();
  QhQConfig *qc = default_qconfig();
  TgLookup l = {.global = qc};
  Result r = annotate(&t_bc, g, &l);
  for (const char *const *n = (const char *const[]){"conv", "add", "relu", NULL}; *n; n++)
    tg_expect_report(r.report, g, *n, TRUE, "Conv -> Add -> Relu", NULL);
  expect_kind(tg_spec(r.set, g, "conv", 0, IN), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  const QhQuantSpec *w = tg_spec(r.set, g, "conv", 1, IN);
  expect_kind(w, QH_SPEC_QUANTIZE, QH_DTYPE_INT8);
  g_assert_cmpint(w->qscheme, ==, QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  g_assert_cmpint(w->ch_axis, ==, 0);
  expect_kind(tg_spec(r.set, g, "add", 1, IN), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  expect_kind(tg_spec(r.set, g, "relu", 0, OUT), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  g_assert_null(tg_spec(r.set, g, "conv", 2, IN));  /* float bias */
  g_assert_null(tg_spec(r.set, g, "conv", 0, OUT)); /* fused: no Q/DQ inside */
  g_assert_null(tg_spec(r.set, g, "add", 0, OUT));
  g_assert_cmpuint(qh_annotation_set_n_specs(r.set), ==, 4);
  result_free(r);

  /* Without extra_inputs_mask the add's second input keeps the chain from matching. */
  r = annotate(&nomask_bc, g, &l);
  tg_expect_report(r.report, g, "conv", TRUE, "Conv", NULL);
  tg_expect_report(r.report, g, "add", TRUE, "Add", NULL);
  tg_expect_report(r.report, g, "relu", TRUE, "Relu", NULL);
  expect_kind(tg_spec(r.set, g, "conv", 0, OUT), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  g_assert_null(tg_spec(r.set, g, "add", 0, IN)); /* the conv's output, observed already */
  expect_kind(tg_spec(r.set, g, "add", 0, OUT), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  g_assert_null(tg_spec(r.set, g, "relu", 0, IN));
  expect_shared_with(tg_spec(r.set, g, "relu", 0, OUT), g, "relu", 0, IN);
  result_free(r);
  tg_qconfig_free(qc);
  qh_graph_free(g);
}

/* An intermediate output with a second use (here: a graph output) breaks the chain. */
static void test_single_use(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 2, 4, 4});
  int c = tg_node(g, "conv", "Conv", 2,
                  (int[]){x, tg_const(g, "w", QH_DTYPE_F32, 4, (int64_t[]){3, 2, 1, 1}, NULL)});
  tg_output(g, c);
  tg_output(g, tg_node(g, "relu", "Relu", 1, &c));
  QhQConfig *qc = default_qconfig();
  TgLookup l = {.global = qc};
  Result r = annotate(&t_bc, g, &l);
  tg_expect_report(r.report, g, "conv", TRUE, "Conv", NULL);
  tg_expect_report(r.report, g, "relu", TRUE, "Relu", NULL);
  expect_kind(tg_spec(r.set, g, "conv", 0, OUT), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  result_free(r);
  tg_qconfig_free(qc);
  qh_graph_free(g);
}

static void test_tensor_args(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 2, (int64_t[]){2, 4});
  int y = tg_input(g, "y", 2, (int64_t[]){2, 4});
  tg_output(g, tg_node(g, "add_const", "Add", 2,
                       (int[]){x, tg_const(g, "k", QH_DTYPE_F32, 1, (int64_t[]){1}, NULL)}));
  tg_output(g, tg_node(g, "add_xy", "Add", 2, (int[]){x, y}));
  QhQConfig *qc = default_qconfig();
  TgLookup l = {.global = qc};
  Result r = annotate(&t_bc, g, &l);
  /* One tensor argument: the output shares the input's observer (1.13's x + scalar). */
  expect_kind(tg_spec(r.set, g, "add_const", 0, IN), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  g_assert_null(tg_spec(r.set, g, "add_const", 1, IN));
  expect_shared_with(tg_spec(r.set, g, "add_const", 0, OUT), g, "add_const", 0, IN);
  expect_kind(tg_spec(r.set, g, "add_xy", 1, IN), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  expect_kind(tg_spec(r.set, g, "add_xy", 0, OUT), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  result_free(r);
  tg_qconfig_free(qc);
  qh_graph_free(g);
}

static void test_concat_shares(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 2, (int64_t[]){2, 4});
  int y = tg_input(g, "y", 2, (int64_t[]){2, 4});
  int rx = tg_node(g, "relu", "Relu", 1, &x);
  tg_output(g, tg_node(g, "cat", "Concat", 3, (int[]){rx, y, x}));
  QhQConfig *qc = default_qconfig();
  TgLookup l = {.global = qc};
  Result r = annotate(&t_bc, g, &l);
  tg_expect_report(r.report, g, "cat", TRUE, "Concat", NULL);
  g_assert_null(tg_spec(r.set, g, "cat", 0, IN)); /* the relu's output */
  expect_shared_with(tg_spec(r.set, g, "cat", 1, IN), g, "cat", 0, IN);
  expect_shared_with(tg_spec(r.set, g, "cat", 2, IN), g, "cat", 0, IN);
  expect_shared_with(tg_spec(r.set, g, "cat", 0, OUT), g, "cat", 0, IN);
  result_free(r);
  tg_qconfig_free(qc);
  qh_graph_free(g);
}

static void test_fixed_qparams(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 2, (int64_t[]){2, 4});
  tg_output(g, tg_node(g, "sig", "Sigmoid", 1, &x));
  QhQConfig *fixed = tg_qconfig(tg_fixed(1.0f / 256.0f, 0), NULL, "object_type 'Sigmoid'");
  QhQConfig *tanh_like = tg_qconfig(tg_fixed(2.0f / 256.0f, 128), NULL, "object_type 'Sigmoid'");
  QhQConfig *minmax = default_qconfig();
  TgLookup l = {.global = fixed};
  Result r = annotate(&t_bc, g, &l);
  const QhQuantSpec *out = tg_spec(r.set, g, "sig", 0, OUT);
  expect_kind(out, QH_SPEC_FIXED, QH_DTYPE_UINT8);
  g_assert_cmpfloat(out->scale, ==, 1.0f / 256.0f);
  g_assert_cmpint(out->zero_point, ==, 0);
  /* 1.13 observes the input with the same FixedQParamsObserver. */
  expect_kind(tg_spec(r.set, g, "sig", 0, IN), QH_SPEC_FIXED, QH_DTYPE_UINT8);
  result_free(r);
  l.global = minmax;
  r = annotate(&t_bc, g, &l);
  tg_expect_report(r.report, g, "sig", FALSE, NULL,
                   TG_NEEDLES("'fixed'", "needs FixedQParamsObserver(scale=0.00390625", "MinMaxObserver"));
  g_assert_cmpuint(qh_annotation_set_n_specs(r.set), ==, 0);
  result_free(r);
  l.global = tanh_like;
  r = annotate(&t_bc, g, &l);
  tg_expect_report(r.report, g, "sig", FALSE, NULL, TG_NEEDLES("scale_exact 0.00390625"));
  result_free(r);
  tg_qconfig_free(fixed), tg_qconfig_free(tanh_like), tg_qconfig_free(minmax);
  qh_graph_free(g);
}

/* Shape -> Gather -> Concat (int64) -> Reshape's shape input: never observed. */
static void test_shape_subgraph(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 2, 3, 4});
  int shape = tg_node(g, "shape", "Shape", 1, &x);
  int first = tg_node(g, "gather", "Gather", 2,
                      (int[]){shape, tg_const(g, "idx", QH_DTYPE_S64, 1, (int64_t[]){1}, NULL)});
  int64_t minus_one = -1;
  int dims = tg_node(g, "cat", "Concat", 2,
                     (int[]){first, tg_const(g, "rest", QH_DTYPE_S64, 1, (int64_t[]){1}, &minus_one)});
  qh_node_set_attr_int(qh_graph_node(g, tg_node_id(g, "cat")), "axis", 0);
  tg_output(g, tg_node(g, "reshape", "Reshape", 2, (int[]){x, dims}));
  QhQConfig *qc = default_qconfig();
  TgLookup l = {.global = qc};
  Result r = annotate(&t_bc, g, &l);
  tg_expect_report(r.report, g, "shape", FALSE, NULL, TG_NEEDLES("input_output_not_observed"));
  tg_expect_report(r.report, g, "gather", FALSE, NULL, TG_NEEDLES("integer tensors"));
  tg_expect_report(r.report, g, "cat", FALSE, NULL, TG_NEEDLES("integer tensors"));
  tg_expect_report(r.report, g, "reshape", TRUE, "Reshape", NULL);
  expect_kind(tg_spec(r.set, g, "reshape", 0, IN), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  expect_shared_with(tg_spec(r.set, g, "reshape", 0, OUT), g, "reshape", 0, IN);
  g_assert_cmpuint(qh_annotation_set_n_specs(r.set), ==, 2);
  result_free(r);
  tg_qconfig_free(qc);
  qh_graph_free(g);
}

static void test_weight_channel_axis(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 2, (int64_t[]){2, 4});
  int x4 = tg_input(g, "x4", 4, (int64_t[]){1, 2, 3, 3});
  tg_output(g, tg_node(g, "gemm_kn", "Gemm", 2,
                       (int[]){x, tg_const(g, "w_kn", QH_DTYPE_F32, 2, (int64_t[]){4, 3}, NULL)}));
  tg_output(g, tg_node(g, "gemm_nk", "Gemm", 2,
                       (int[]){x, tg_const(g, "w_nk", QH_DTYPE_F32, 2, (int64_t[]){3, 4}, NULL)}));
  qh_node_set_attr_int(qh_graph_node(g, tg_node_id(g, "gemm_nk")), "transB", 1);
  tg_output(g, tg_node(g, "matmul", "MatMul", 2,
                       (int[]){x, tg_const(g, "w_mm", QH_DTYPE_F32, 2, (int64_t[]){4, 3}, NULL)}));
  tg_output(g, tg_node(g, "convt", "ConvTranspose", 2,
                       (int[]){x4, tg_const(g, "w_t", QH_DTYPE_F32, 4, (int64_t[]){2, 3, 1, 1}, NULL)}));
  QhQConfig *qc = default_qconfig();
  TgLookup l = {.global = qc};
  Result r = annotate(&t_bc, g, &l);
  const struct { const char *node; int axis; } want[] = {
      {"gemm_kn", 1}, {"gemm_nk", 0}, {"matmul", 1}, {"convt", 1}};
  for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
    const QhQuantSpec *w = tg_spec(r.set, g, want[i].node, 1, IN);
    expect_kind(w, QH_SPEC_QUANTIZE, QH_DTYPE_INT8);
    if (w->ch_axis != want[i].axis)
      g_error("%s: weight ch_axis %d, expected %d", want[i].node, w->ch_axis, want[i].axis);
  }
  result_free(r);
  tg_qconfig_free(qc);
  qh_graph_free(g);
}

static void test_reasons(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 2, 4, 4});
  tg_output(g, tg_node(g, "conv", "Conv", 2,
                       (int[]){x, tg_const(g, "w", QH_DTYPE_F32, 4, (int64_t[]){3, 2, 1, 1}, NULL)}));
  tg_output(g, tg_node(g, "tanh", "Tanh", 1, &x));
  tg_output(g, tg_node(g, "softmax", "Softmax", 1, &x));
  tg_output(g, tg_node(g, "relu", "Relu", 1, &x));
  QhQConfig *s8 = tg_qconfig(tg_observer("MinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_AFFINE),
                             NULL, "object_type 'Conv'");
  QhQConfig *u8q = default_qconfig();
  QhQConfig *excluded = tg_qconfig(NULL, NULL, "node_name 're*'");
  TgLookup l = {.op = {"Conv", "Relu", "Tanh"}, .qc = {s8, excluded, u8q}, .global = NULL};
  Result r = annotate(&t_bc, g, &l);
  tg_expect_report(r.report, g, "conv", FALSE, NULL,
                   TG_NEEDLES("the qconfig (object_type 'Conv') violates every dtype config of Conv",
                              "'weighted': input activation dtype is int8, the dtype config wants uint8"));
  tg_expect_report(r.report, g, "tanh", FALSE, NULL,
                   TG_NEEDLES("'dynamic': is_dynamic", "'narrow': input activation quant range [0, 255] "
                              "is outside the backend's [0, 127]"));
  tg_expect_report(r.report, g, "softmax", FALSE, NULL, TG_NEEDLES("no pattern for Softmax in backend 't'"));
  tg_expect_report(r.report, g, "relu", FALSE, NULL, TG_NEEDLES("excluded by node_name 're*'"));
  g_assert_cmpuint(qh_annotation_set_n_specs(r.set), ==, 0);
  result_free(r);
  /* reduce_range brings the range inside [0, 127]; no qconfig at all is its own reason. */
  u8q->activation->reduce_range = TRUE;
  l.qc[0] = NULL;
  r = annotate(&t_bc, g, &l);
  tg_expect_report(r.report, g, "tanh", TRUE, "Tanh", NULL);
  tg_expect_report(r.report, g, "conv", FALSE, NULL, TG_NEEDLES("no qconfig applies to conv"));
  result_free(r);
  tg_qconfig_free(s8), tg_qconfig_free(u8q), tg_qconfig_free(excluded);
  qh_graph_free(g);
}

static void test_reuse_input(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 2, (int64_t[]){2, 4});
  int shape = tg_const(g, "shape", QH_DTYPE_S64, 1, (int64_t[]){1}, (int64_t[]){8});
  int rx = tg_node(g, "relu", "Relu", 1, &x);
  tg_output(g, tg_node(g, "after_relu", "Reshape", 2, (int[]){rx, shape}));
  tg_output(g, tg_node(g, "after_input", "Reshape", 2, (int[]){x, shape}));
  QhQConfig *qc = default_qconfig();
  QhQConfig *reuse = tg_qconfig(tg_observer("ReuseInputObserver", QH_DTYPE_UINT8,
                                            QH_QSCHEME_PER_TENSOR_AFFINE), NULL, "object_type 'Reshape'");
  TgLookup l = {.op = {"Reshape"}, .qc = {reuse}, .global = qc};
  Result r = annotate(&t_bc, g, &l);
  tg_expect_report(r.report, g, "after_relu", TRUE, "Reshape", NULL);
  g_assert_null(tg_spec(r.set, g, "after_relu", 0, IN));
  expect_shared_with(tg_spec(r.set, g, "after_relu", 0, OUT), g, "after_relu", 0, IN);
  tg_expect_report(r.report, g, "after_input", FALSE, NULL, TG_NEEDLES("ReuseInputObserver"));
  g_assert_null(tg_spec(r.set, g, "after_input", 0, OUT));
  result_free(r);
  tg_qconfig_free(qc), tg_qconfig_free(reuse);
  qh_graph_free(g);
}

/* A post-norm transformer block's pieces as the exporter writes them: a residual Add,
 * LayerNorm decomposed (opset 13), a Linear (MatMul -> Add), GELU in its Erf form, scores
 * masked by Where(pad, -inf, 0) and a Softmax. LayerNorm, GELU and the mask stay float
 * with their reasons; the Linear, the residual and the Softmax's output are quantized,
 * the Softmax's masked input is not observed. */
static const char *const p_mul_ops[] = {"Mul"};
PAT(p_matmul_add, DIFF, weighted_list, "MatMul", "Add");
PAT(p_softmax, DIFF, fixed_list, "Softmax");
static const QhBackendPatternConfig p_mul_args = {
    QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = p_mul_ops, .n_ops = 1,
    .observation_type = DIFF, .flags = QH_PATTERN_OBS_BY_TENSOR_ARGS,
    .observation_type_by_tensor_args = {DIFF, SHARE, DIFF}, .dtype_configs = weighted_list,
    .n_dtype_configs = 1};
static const QhBackendPatternConfig *const xf_patterns[] = {&p_add, &p_mul_args, &p_matmul,
                                                             &p_matmul_add, &p_softmax};
static const QhBackendConfig xf_bc = {QH_STRUCT_HEADER(QhBackendConfig), .name = "xf",
                                      .patterns = xf_patterns, .n_patterns = G_N_ELEMENTS(xf_patterns)};

static int scalar(QhGraph *g, const char *name, float v) {
  return tg_const(g, name, QH_DTYPE_F32, 0, NULL, &v);
}

static void test_transformer_float_regions(void) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 3, (int64_t[]){1, 4, 8});
  int y = tg_input(g, "y", 3, (int64_t[]){1, 4, 8});
  int r = tg_node(g, "res", "Add", 2, (int[]){x, y});
  int mean = tg_node(g, "ln/mean", "ReduceMean", 1, &r);
  int d = tg_node(g, "ln/sub", "Sub", 2, (int[]){r, mean});
  int sq = tg_node(g, "ln/pow", "Pow", 2, (int[]){d, scalar(g, "two", 2.0f)});
  int var = tg_node(g, "ln/var", "ReduceMean", 1, &sq);
  int ve = tg_node(g, "ln/eps", "Add", 2, (int[]){var, scalar(g, "eps", 1e-5f)});
  int sd = tg_node(g, "ln/sqrt", "Sqrt", 1, &ve);
  int nrm = tg_node(g, "ln/div", "Div", 2, (int[]){d, sd});
  int ga = tg_node(g, "ln/gamma", "Mul", 2, (int[]){nrm, tg_const(g, "gamma", QH_DTYPE_F32, 1, (int64_t[]){8}, NULL)});
  int ln = tg_node(g, "ln/beta", "Add", 2, (int[]){ga, tg_const(g, "beta", QH_DTYPE_F32, 1, (int64_t[]){8}, NULL)});
  int mm = tg_node(g, "fc/mm", "MatMul", 2, (int[]){ln, tg_const(g, "w", QH_DTYPE_F32, 2, (int64_t[]){8, 8}, NULL)});
  int fc = tg_node(g, "fc/add", "Add", 2, (int[]){tg_const(g, "b", QH_DTYPE_F32, 1, (int64_t[]){8}, NULL), mm});
  int u = tg_node(g, "gelu/div", "Div", 2, (int[]){fc, scalar(g, "sqrt2", 1.4142135f)});
  int e = tg_node(g, "gelu/erf", "Erf", 1, &u);
  int a = tg_node(g, "gelu/one", "Add", 2, (int[]){e, scalar(g, "one", 1.0f)});
  int m = tg_node(g, "gelu/mul", "Mul", 2, (int[]){fc, a});
  int gl = tg_node(g, "gelu/half", "Mul", 2, (int[]){m, scalar(g, "half", 0.5f)});
  int scores = tg_node(g, "scores", "MatMul", 2, (int[]){gl, y});
  QhValue *tok = qh_graph_add_value(g, "tokens", NULL);
  tok->dtype = QH_DTYPE_S64;
  tok->shape = qh_shape_make(3, (int64_t[]){1, 4, 8});
  tok->is_input = TRUE;
  g_array_append_val(g->inputs, tok->id);
  int64_t zero = 0;
  int pad = tg_node(g, "pad", "Equal", 2, (int[]){tok->id, tg_const(g, "zero", QH_DTYPE_S64, 0, NULL, &zero)});
  int mask = tg_node(g, "mask", "Where", 3, (int[]){pad, scalar(g, "ninf", -INFINITY), scalar(g, "nil", 0.0f)});
  int masked = tg_node(g, "masked", "Add", 2, (int[]){scores, mask});
  tg_output(g, tg_node(g, "softmax", "Softmax", 1, &masked));
  QhQConfig *qc = default_qconfig();
  QhQConfig *fixed = tg_qconfig(tg_fixed(1.0f / 256.0f, 0), NULL, "object_type 'Softmax'");
  TgLookup l = {.op = {"Softmax"}, .qc = {fixed}, .global = qc};
  Result res = annotate(&xf_bc, g, &l);
  static const char *const ln_nodes[] = {"ln/mean", "ln/sub", "ln/pow", "ln/var", "ln/eps",
                                         "ln/sqrt", "ln/div", "ln/gamma", "ln/beta"};
  static const char *const gelu_nodes[] = {"gelu/div", "gelu/erf", "gelu/one", "gelu/mul", "gelu/half"};
  for (size_t i = 0; i < G_N_ELEMENTS(ln_nodes); i++) {
    tg_expect_report(res.report, g, ln_nodes[i], FALSE, NULL, TG_NEEDLES("LayerNorm decomposition"));
    const QhNode *n = qh_graph_node(g, tg_node_id(g, ln_nodes[i]));
    for (int s = 0; s < n->n_inputs; s++)
      g_assert_null(tg_spec(res.set, g, ln_nodes[i], s, IN));
    g_assert_null(tg_spec(res.set, g, ln_nodes[i], 0, OUT));
  }
  for (size_t i = 0; i < G_N_ELEMENTS(gelu_nodes); i++) {
    tg_expect_report(res.report, g, gelu_nodes[i], FALSE, NULL, TG_NEEDLES("GELU decomposition (Erf form"));
    const QhNode *n = qh_graph_node(g, tg_node_id(g, gelu_nodes[i]));
    for (int s = 0; s < n->n_inputs; s++)
      g_assert_null(tg_spec(res.set, g, gelu_nodes[i], s, IN));
    g_assert_null(tg_spec(res.set, g, gelu_nodes[i], 0, OUT));
  }
  tg_expect_report(res.report, g, "mask", FALSE, NULL, TG_NEEDLES("attention mask"));
  tg_expect_report(res.report, g, "masked", FALSE, NULL, TG_NEEDLES("attention mask arithmetic", "mask:0"));
  g_assert_null(tg_spec(res.set, g, "masked", 1, IN));
  g_assert_null(tg_spec(res.set, g, "masked", 0, OUT));
  /* The residual and the Linear are quantized; the Linear observes LayerNorm's output. */
  tg_expect_report(res.report, g, "res", TRUE, "Add", NULL);
  tg_expect_report(res.report, g, "fc/add", TRUE, "MatMul -> Add", NULL);
  expect_kind(tg_spec(res.set, g, "fc/mm", 0, IN), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  expect_kind(tg_spec(res.set, g, "fc/mm", 1, IN), QH_SPEC_QUANTIZE, QH_DTYPE_INT8);
  /* The scores MatMul observes GELU's output; the Softmax keeps its fixed output and
   * leaves its masked input alone. */
  expect_kind(tg_spec(res.set, g, "scores", 0, IN), QH_SPEC_QUANTIZE, QH_DTYPE_UINT8);
  tg_expect_report(res.report, g, "softmax", TRUE, "Softmax", NULL);
  expect_kind(tg_spec(res.set, g, "softmax", 0, OUT), QH_SPEC_FIXED, QH_DTYPE_UINT8);
  g_assert_null(tg_spec(res.set, g, "softmax", 0, IN));
  result_free(res);
  tg_qconfig_free(qc), tg_qconfig_free(fixed);
  qh_graph_free(g);
}

/* A causal mask folded into a constant holding -inf (1.13 at opset 13, where a mask built
 * without triu is folded into a Constant node; other exporters write an initializer),
 * added to the scores before a Softmax: the Add is mask arithmetic, nothing observes the
 * sum, the Softmax keeps its fixed output. */
static void expect_constant_causal_mask(gboolean as_node) {
  QhGraph *g = qh_graph_new();
  int x = tg_input(g, "x", 3, (int64_t[]){1, 2, 2});
  int scores = tg_node(g, "scores", "MatMul", 2, (int[]){x, x});
  float causal[4] = {0.0f, -INFINITY, 0.0f, 0.0f};
  int mask;
  if (as_node) {
    mask = tg_node(g, "causal", "Constant", 0, NULL);
    QhShape shape = qh_shape_make(3, (int64_t[]){1, 2, 2});
    QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &shape, NULL);
    memcpy(t->data, causal, sizeof causal);
    qh_node_set_attr_tensor(qh_graph_node(g, tg_node_id(g, "causal")), "value", t);
  } else {
    mask = tg_const(g, "causal", QH_DTYPE_F32, 3, (int64_t[]){1, 2, 2}, causal);
  }
  int masked = tg_node(g, "masked", "Add", 2, (int[]){scores, mask});
  tg_output(g, tg_node(g, "softmax", "Softmax", 1, &masked));
  QhQConfig *qc = default_qconfig();
  QhQConfig *fixed = tg_qconfig(tg_fixed(1.0f / 256.0f, 0), NULL, "object_type 'Softmax'");
  TgLookup l = {.op = {"Softmax"}, .qc = {fixed}, .global = qc};
  Result res = annotate(&xf_bc, g, &l);
  tg_expect_report(res.report, g, "masked", FALSE, NULL, TG_NEEDLES("attention mask arithmetic", "'causal"));
  for (int s = 0; s < 2; s++)
    g_assert_null(tg_spec(res.set, g, "masked", s, IN));
  g_assert_null(tg_spec(res.set, g, "masked", 0, OUT));
  g_assert_null(tg_spec(res.set, g, "softmax", 0, IN));
  expect_kind(tg_spec(res.set, g, "softmax", 0, OUT), QH_SPEC_FIXED, QH_DTYPE_UINT8);
  result_free(res);
  tg_qconfig_free(qc), tg_qconfig_free(fixed);
  qh_graph_free(g);
}

static void test_constant_causal_mask(void) {
  expect_constant_causal_mask(TRUE);
  expect_constant_causal_mask(FALSE);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/bn-fold/conv", test_fold_conv);
  g_test_add_func("/bn-fold/needs-declared-pattern", test_fold_needs_declared_pattern);
  g_test_add_func("/bn-fold/conv-transpose", test_fold_conv_transpose);
  g_test_add_func("/bn-fold/gemm", test_fold_gemm);
  g_test_add_func("/bn-fold/shared-weight", test_fold_shared_weight);
  g_test_add_func("/backend-annotate/dag-pattern", test_dag_pattern);
  g_test_add_func("/backend-annotate/single-use", test_single_use);
  g_test_add_func("/backend-annotate/tensor-args", test_tensor_args);
  g_test_add_func("/backend-annotate/concat-shares", test_concat_shares);
  g_test_add_func("/backend-annotate/fixed-qparams", test_fixed_qparams);
  g_test_add_func("/backend-annotate/shape-subgraph", test_shape_subgraph);
  g_test_add_func("/backend-annotate/weight-channel-axis", test_weight_channel_axis);
  g_test_add_func("/backend-annotate/reasons", test_reasons);
  g_test_add_func("/backend-annotate/reuse-input", test_reuse_input);
  g_test_add_func("/backend-annotate/transformer-float-regions", test_transformer_float_regions);
  g_test_add_func("/backend-annotate/constant-causal-mask", test_constant_causal_mask);
  return g_test_run();
}
