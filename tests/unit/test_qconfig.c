/* Unit tests of qconfig mappings (quant/qconfig*.c): a backend default mapping shaped
 * like PyTorch's fbgemm one turned into observer configs, --config files layered over
 * it (global replacing the entries that shared it, fixed/shared entries kept, base
 * none, partial entries, null), resolution order (node_name exact, then globs in file
 * order, object_type with PyTorch aliases, global), strict file checking with one-line
 * messages that leave the mapping unchanged, and the plugin view hook. Expectations
 * are written out by hand from docs/design.md ("QCONFIG.json") and docs/qconfig.md. */
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "hostapi/graph-view.h"
#include "quant/qconfig-private.h"

/* ---- A graph with one node of each kind the tests resolve ---- */

static int add_const(QhGraph *g, const char *name, int rank, const int64_t *dims) {
  QhValue *v = qh_graph_add_value(g, name, NULL);
  QhShape shape = qh_shape_make(rank, dims);
  qh_value_set_initializer(v, qh_tensor_new(QH_DTYPE_F32, &shape, NULL));
  return v->id;
}

static int add_value(QhGraph *g, const char *name) {
  return qh_graph_add_value(g, name, NULL)->id;
}

static void add_node(QhGraph *g, const char *name, const char *op, int a, int b, int out) {
  int ins[2] = {a, b};
  g_assert_nonnull(qh_graph_add_node(g, name, op, "", b < 0 ? 1 : 2, ins, 1, &out, NULL));
}

static QhGraph *test_graph(void) {
  QhGraph *g = qh_graph_new();
  int x = add_value(g, "x");
  qh_graph_value(g, x)->is_input = TRUE;
  qh_graph_value(g, x)->shape = qh_shape_make(4, (int64_t[]){1, 3, 8, 8});
  int w4 = add_const(g, "w4", 4, (int64_t[]){8, 3, 3, 3});
  int w3 = add_const(g, "w3", 3, (int64_t[]){8, 3, 3});
  int wl = add_const(g, "wl", 2, (int64_t[]){16, 8});
  int bl = add_const(g, "bl", 1, (int64_t[]){8});
  int wg = add_const(g, "wg", 2, (int64_t[]){8, 8});
  int sc = add_const(g, "sc", 0, NULL);
  int shp = add_const(g, "shp", 1, (int64_t[]){2});
  int v[15];
  for (int i = 0; i < 15; i++) {
    char name[16];
    g_snprintf(name, sizeof name, "v%d", i);
    v[i] = add_value(g, name);
  }
  add_node(g, "conv1", "Conv", x, w4, v[0]);             /* 0 */
  add_node(g, "relu1", "Relu", v[0], -1, v[1]);          /* 1 */
  add_node(g, "/fc/MatMul", "MatMul", v[1], wl, v[2]);   /* 2: Linear */
  add_node(g, "/fc/Add", "Add", v[2], bl, v[3]);         /* 3: Linear's bias */
  add_node(g, "/layer4/fc", "Gemm", v[3], wg, v[4]);     /* 4 */
  add_node(g, "/layer4/conv", "Conv", x, w3, v[5]);      /* 5: Conv1d */
  add_node(g, "sig", "Sigmoid", v[4], -1, v[6]);         /* 6 */
  add_node(g, "tanh", "Tanh", v[6], -1, v[7]);           /* 7 */
  add_node(g, "reshape", "Reshape", v[7], shp, v[8]);    /* 8 */
  add_node(g, "deconv", "ConvTranspose", x, w4, v[9]);   /* 9 */
  add_node(g, "mm2", "MatMul", x, v[1], v[10]);          /* 10: not Linear */
  add_node(g, "scale_mul", "Mul", v[10], sc, v[11]);     /* 11 */
  add_node(g, "flat", "Flatten", v[11], -1, v[12]);      /* 12 */
  add_node(g, "plain_add", "Add", v[12], v[8], v[13]);   /* 13 */
  add_node(g, "head", "Gemm", v[13], wg, v[14]);         /* 14 */
  return g;
}

static const QhNode *node_named(const QhGraph *g, const char *name) {
  for (int i = 0; i < qh_graph_n_nodes(g); i++)
    if (strcmp(qh_graph_node(g, i)->name, name) == 0)
      return qh_graph_node(g, i);
  g_error("no node %s", name);
}

/* ---- A backend default mapping like get_default_qconfig_mapping("fbgemm") ---- */

static const QhOption hist_args[] = {{"bins", "2048"}};
static const QhQuantSpec act_hist = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                     .dtype = QH_DTYPE_UINT8,
                                     .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE, .ch_axis = -1,
                                     .flags = QH_SPEC_REDUCE_RANGE,
                                     .observer = "HistogramObserver", .observer_args = hist_args,
                                     .n_observer_args = 1};
static const QhQuantSpec w_pc = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                 .dtype = QH_DTYPE_INT8,
                                 .qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC, .ch_axis = 0};
static const QhQuantSpec fixed_sig = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_FIXED,
                                      .dtype = QH_DTYPE_UINT8, .flags = QH_SPEC_HAS_RANGE,
                                      .quant_min = 0, .quant_max = 255, .scale = 1.0f / 256.0f,
                                      .zero_point = 0, .ch_axis = -1};
static const QhQuantSpec fixed_tanh = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_FIXED,
                                       .dtype = QH_DTYPE_UINT8, .flags = QH_SPEC_HAS_RANGE,
                                       .quant_min = 0, .quant_max = 255, .scale = 2.0f / 256.0f,
                                       .zero_point = 128, .ch_axis = -1};
static const QhQuantSpec reuse = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_SHARED,
                                  .dtype = QH_DTYPE_UINT8,
                                  .shared_with = {QH_INVALID_ID, 0, 0, 0}};

#define ENTRY(m, k, a, w) \
  {QH_STRUCT_HEADER(QhQConfigEntry), .match = (m), .key = (k), .activation = (a), .weight = (w)}
static const QhQConfigEntry e_global = ENTRY(QH_QCONFIG_MATCH_GLOBAL, NULL, &act_hist, &w_pc);
static const QhQConfigEntry e_conv = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "Conv", &act_hist, &w_pc);
static const QhQConfigEntry e_gemm = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "Gemm", &act_hist, &w_pc);
static const QhQConfigEntry e_relu = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "Relu", &act_hist, &w_pc);
static const QhQConfigEntry e_deconv = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "ConvTranspose",
                                             &act_hist, NULL);
static const QhQConfigEntry e_sig = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "Sigmoid", &fixed_sig, NULL);
static const QhQConfigEntry e_tanh = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "Tanh", &fixed_tanh, NULL);
static const QhQConfigEntry e_reshape = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "Reshape", &reuse,
                                              NULL);
static const QhQConfigEntry e_flatten = {QH_STRUCT_HEADER(QhQConfigEntry),
                                         .match = QH_QCONFIG_MATCH_OBJECT_TYPE,
                                         .flags = QH_QCONFIG_ENTRY_NONE, .key = "Flatten"};
static const QhQConfigEntry *const fbgemm_entries[] = {&e_conv, &e_global, &e_gemm, &e_relu,
                                                       &e_deconv, &e_sig, &e_tanh, &e_reshape,
                                                       &e_flatten};
static const QhBackendConfig fbgemm = {QH_STRUCT_HEADER(QhBackendConfig), .name = "fakegemm",
                                       .default_qconfig = fbgemm_entries,
                                       .n_default_qconfig = G_N_ELEMENTS(fbgemm_entries)};

static QhQConfigMapping *default_mapping(void) {
  GError *error = NULL;
  QhQConfigMapping *m = qh_qconfig_mapping_new(&fbgemm, NULL, &error);
  g_assert_no_error(error);
  g_assert_nonnull(m);
  return m;
}

static char *data_path(const char *name) {
  return g_build_filename(QH_SOURCE_DIR, "tests", "unit", "data", "qconfig", name, NULL);
}

static void load_ok(QhQConfigMapping *m, const char *name) {
  char *path = data_path(name);
  GError *error = NULL;
  gboolean ok = qh_qconfig_mapping_load_file(m, path, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  g_free(path);
}

/* ---- Checks ---- */

static void assert_obs(const QhObserverConfig *c, const char *name, int32_t dtype, int32_t qscheme) {
  g_assert_nonnull(c);
  g_assert_cmpstr(c->name, ==, name);
  g_assert_cmpint(c->dtype, ==, dtype);
  g_assert_cmpint(c->qscheme, ==, qscheme);
}

static const QhQConfig *resolve(const QhQConfigMapping *m, const QhGraph *g, const char *node) {
  return qh_qconfig_resolve(m, g, node_named(g, node));
}

/* Resolves to a quantizing qconfig with this activation observer and origin. */
static const QhQConfig *assert_act(const QhQConfigMapping *m, const QhGraph *g, const char *node,
                                   const char *observer, const char *origin, int32_t source) {
  const QhQConfig *qc = resolve(m, g, node);
  g_assert_nonnull(qc);
  g_assert_false(qc->is_none);
  g_assert_nonnull(qc->activation);
  if (strcmp(qc->activation->name, observer) != 0 || strcmp(qc->origin, origin) != 0)
    g_error("%s: got %s from \"%s\", want %s from \"%s\"", node, qc->activation->name, qc->origin,
            observer, origin);
  g_assert_cmpint(qc->source, ==, source);
  return qc;
}

static void assert_none(const QhQConfigMapping *m, const QhGraph *g, const char *node,
                        const char *origin) {
  const QhQConfig *qc = resolve(m, g, node);
  g_assert_nonnull(qc);
  if (!qc->is_none || strcmp(qc->origin, origin) != 0)
    g_error("%s: want null from \"%s\", got is_none %d from \"%s\"", node, origin, qc->is_none,
            qc->origin);
  g_assert_null(qc->activation);
  g_assert_null(qc->weight);
}

/* ---- Backend defaults ---- */

static void test_backend_defaults(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  const QhQConfig *qc = assert_act(m, g, "conv1", "HistogramObserver", "object_type 'Conv'",
                                   QH_QCONFIG_BACKEND_DEFAULT);
  assert_obs(qc->activation, "HistogramObserver", QH_DTYPE_UINT8, QH_QSCHEME_PER_TENSOR_AFFINE);
  g_assert_true(qc->activation->reduce_range);
  g_assert_false(qc->activation->has_range);
  g_assert_false(qc->activation->has_eps);
  g_assert_cmpstr(qh_observer_config_arg(qc->activation, "bins"), ==, "2048");
  /* observer NULL with a per-channel qscheme: PerChannelMinMaxObserver */
  assert_obs(qc->weight, "PerChannelMinMaxObserver", QH_DTYPE_INT8,
             QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  g_assert_cmpint(qc->weight->ch_axis, ==, 0);
  /* NULL weight: default_weight_observer (MinMax, qint8, per-tensor symmetric) */
  qc = assert_act(m, g, "deconv", "HistogramObserver", "object_type 'ConvTranspose'",
                  QH_QCONFIG_BACKEND_DEFAULT);
  assert_obs(qc->weight, "MinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC);
  qc = assert_act(m, g, "sig", "FixedQParamsObserver", "object_type 'Sigmoid'",
                  QH_QCONFIG_BACKEND_DEFAULT);
  g_assert_true(qc->activation->has_range);
  g_assert_cmpint(qc->activation->quant_max, ==, 255);
  g_assert_cmpstr(qh_observer_config_arg(qc->activation, "scale"), ==, "0.00390625");
  g_assert_cmpstr(qh_observer_config_arg(qc->activation, "zero_point"), ==, "0");
  qc = assert_act(m, g, "tanh", "FixedQParamsObserver", "object_type 'Tanh'",
                  QH_QCONFIG_BACKEND_DEFAULT);
  g_assert_cmpstr(qh_observer_config_arg(qc->activation, "scale"), ==, "0.0078125");
  g_assert_cmpstr(qh_observer_config_arg(qc->activation, "zero_point"), ==, "128");
  assert_act(m, g, "reshape", "ReuseInputObserver", "object_type 'Reshape'",
             QH_QCONFIG_BACKEND_DEFAULT);
  assert_none(m, g, "flat", "object_type 'Flatten'");
  assert_act(m, g, "mm2", "HistogramObserver", "global", QH_QCONFIG_BACKEND_DEFAULT);
  /* the same node twice: the same borrowed qconfig */
  g_assert_true(resolve(m, g, "conv1") == resolve(m, g, "conv1"));
  qh_qconfig_mapping_free(m);

  m = qh_qconfig_mapping_new(NULL, NULL, NULL);
  g_assert_null(resolve(m, g, "conv1"));
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static void backend_fails(const QhQConfigEntry *const *entries, size_t n, const char *const *known,
                          int code, const char *part) {
  QhBackendConfig bc = {QH_STRUCT_HEADER(QhBackendConfig), .name = "bad",
                        .default_qconfig = entries, .n_default_qconfig = n};
  GError *error = NULL;
  g_assert_null(qh_qconfig_mapping_new(&bc, known, &error));
  g_assert_error(error, QH_ERROR, code);
  if (strstr(error->message, part) == NULL || strstr(error->message, "backend 'bad'") == NULL)
    g_error("'%s' lacks '%s'", error->message, part);
  g_error_free(error);
}

static void test_backend_checked(void) {
  const QhQConfigEntry *dup[] = {&e_conv, &e_conv};
  backend_fails(dup, 2, NULL, QH_ERROR_INVALID, "default_qconfig[1] (object_type 'Conv'): a second");
  const QhQConfigEntry *null_entry[] = {&e_global, NULL};
  backend_fails(null_entry, 2, NULL, QH_ERROR_INVALID, "default_qconfig[1] is NULL");
  QhQConfigEntry no_act = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "Add", NULL, NULL);
  const QhQConfigEntry *e1[] = {&no_act};
  backend_fails(e1, 1, NULL, QH_ERROR_INVALID, "(object_type 'Add').activation: NULL");
  QhQConfigEntry small = e_conv;
  small.struct_size = 8;
  const QhQConfigEntry *e2[] = {&small};
  backend_fails(e2, 1, NULL, QH_ERROR_INVALID, "struct_size 8");
  QhQuantSpec wide = act_hist;
  wide.flags |= QH_SPEC_HAS_RANGE, wide.quant_min = 0, wide.quant_max = 300;
  QhQConfigEntry e_wide = ENTRY(QH_QCONFIG_MATCH_GLOBAL, NULL, &wide, NULL);
  const QhQConfigEntry *e3[] = {&e_wide};
  backend_fails(e3, 1, NULL, QH_ERROR_INVALID, "(global).activation.quant_max: 300 is outside uint8");
  QhQuantSpec dyn = act_hist;
  dyn.flags |= QH_SPEC_IS_DYNAMIC;
  QhQConfigEntry e_dyn = ENTRY(QH_QCONFIG_MATCH_GLOBAL, NULL, &dyn, NULL);
  const QhQConfigEntry *e4[] = {&e_dyn};
  backend_fails(e4, 1, NULL, QH_ERROR_UNSUPPORTED, "dynamic");
  QhQuantSpec vendor = act_hist;
  vendor.observer = "VendorObserver", vendor.observer_args = NULL, vendor.n_observer_args = 0;
  QhQConfigEntry e_vendor = ENTRY(QH_QCONFIG_MATCH_GLOBAL, NULL, &vendor, NULL);
  const QhQConfigEntry *e5[] = {&e_vendor};
  backend_fails(e5, 1, NULL, QH_ERROR_INVALID, "unknown observer 'VendorObserver'");
  /* the same entry is fine once the plugin registered the observer */
  QhBackendConfig bc = {QH_STRUCT_HEADER(QhBackendConfig), .name = "ok",
                        .default_qconfig = e5, .n_default_qconfig = 1};
  const char *const known[] = {"VendorObserver", NULL};
  QhQConfigMapping *m = qh_qconfig_mapping_new(&bc, known, NULL);
  g_assert_nonnull(m);
  qh_qconfig_mapping_free(m);
  /* host observer arguments go through the observer's own check */
  const QhOption bad_bins[] = {{"bins", "0"}};
  QhQuantSpec hist0 = act_hist;
  hist0.observer_args = bad_bins;
  QhQConfigEntry e_hist0 = ENTRY(QH_QCONFIG_MATCH_GLOBAL, NULL, &hist0, NULL);
  const QhQConfigEntry *e6[] = {&e_hist0};
  backend_fails(e6, 1, NULL, QH_ERROR_INVALID, "(global).activation: HistogramObserver");
  QhQuantSpec edge = reuse;
  edge.shared_with.node = 3;
  QhQConfigEntry e_edge = ENTRY(QH_QCONFIG_MATCH_OBJECT_TYPE, "Reshape", &edge, NULL);
  const QhQConfigEntry *e7[] = {&e_edge};
  backend_fails(e7, 1, NULL, QH_ERROR_INVALID, "shared_with.node");
}

/* ---- Layering ---- */

static void test_global_replaces_shared_entries(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "minmax-global.json");
  /* Conv, Gemm, Relu used the default global: they now follow the file's */
  const QhQConfig *qc = assert_act(m, g, "conv1", "MinMaxObserver", "global", QH_QCONFIG_USER);
  g_assert_true(qc->activation->reduce_range);
  assert_obs(qc->weight, "PerChannelMinMaxObserver", QH_DTYPE_INT8,
             QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  assert_act(m, g, "relu1", "MinMaxObserver", "global", QH_QCONFIG_USER);
  assert_act(m, g, "/layer4/fc", "MinMaxObserver", "global", QH_QCONFIG_USER);
  /* ConvTranspose had its own weight: a different QConfig in PyTorch, kept */
  qc = assert_act(m, g, "deconv", "HistogramObserver", "object_type 'ConvTranspose'",
                  QH_QCONFIG_BACKEND_DEFAULT);
  assert_obs(qc->weight, "MinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC);
  /* fixed-qparams, shared-qparams and null entries stay */
  assert_act(m, g, "sig", "FixedQParamsObserver", "object_type 'Sigmoid'",
             QH_QCONFIG_BACKEND_DEFAULT);
  assert_act(m, g, "tanh", "FixedQParamsObserver", "object_type 'Tanh'",
             QH_QCONFIG_BACKEND_DEFAULT);
  assert_act(m, g, "reshape", "ReuseInputObserver", "object_type 'Reshape'",
             QH_QCONFIG_BACKEND_DEFAULT);
  assert_none(m, g, "flat", "object_type 'Flatten'");
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static void test_base_none(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "base-none.json");
  /* PyTorch's plain QConfigMapping(): the fixed-qparams op gets the ordinary global */
  const QhQConfig *qc = assert_act(m, g, "sig", "MinMaxObserver", "global", QH_QCONFIG_USER);
  g_assert_true(qc->activation->has_range);
  g_assert_cmpint(qc->activation->quant_min, ==, 0);
  g_assert_cmpint(qc->activation->quant_max, ==, 127);
  assert_act(m, g, "reshape", "MinMaxObserver", "global", QH_QCONFIG_USER);
  assert_act(m, g, "deconv", "MinMaxObserver", "global", QH_QCONFIG_USER);
  assert_act(m, g, "flat", "MinMaxObserver", "global", QH_QCONFIG_USER);
  assert_obs(qc->weight, "MinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static void test_design_example(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "design-example.json");
  const QhQConfig *qc = assert_act(m, g, "conv1", "HistogramObserver", "global", QH_QCONFIG_USER);
  g_assert_true(qc->activation->has_range);
  g_assert_cmpint(qc->activation->quant_max, ==, 127);
  g_assert_false(qc->activation->reduce_range);
  g_assert_true(qc->activation->has_eps);
  g_assert_true(qc->activation->eps == 0x1p-23f);
  g_assert_cmpint(qc->weight->quant_min, ==, -128);
  assert_none(m, g, "head", "object_type 'Gemm'");
  /* Gemm is null, but the node_name glob is stronger; it gives only the activation,
   * so the weight comes from below, past the null object_type entry */
  qc = assert_act(m, g, "/layer4/fc", "MinMaxObserver", "node_name '/layer4/*', weight from global",
                  QH_QCONFIG_USER);
  assert_obs(qc->weight, "PerChannelMinMaxObserver", QH_DTYPE_INT8,
             QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  qc = assert_act(m, g, "/layer4/conv", "MinMaxObserver", "node_name '/layer4/*', weight from global",
                  QH_QCONFIG_USER);
  g_assert_false(qc->activation->has_range);
  assert_act(m, g, "sig", "FixedQParamsObserver", "object_type 'Sigmoid'",
             QH_QCONFIG_BACKEND_DEFAULT);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static void test_aliases(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "aliases.json");
  /* Linear: every Gemm, the MatMul with a constant 2-D weight and its bias Add */
  assert_none(m, g, "/layer4/fc", "object_type 'Linear'");
  assert_none(m, g, "head", "object_type 'Linear'");
  assert_none(m, g, "/fc/MatMul", "object_type 'Linear'");
  assert_none(m, g, "/fc/Add", "object_type 'Linear'");
  assert_act(m, g, "mm2", "HistogramObserver", "global", QH_QCONFIG_BACKEND_DEFAULT);
  assert_act(m, g, "plain_add", "HistogramObserver", "global", QH_QCONFIG_BACKEND_DEFAULT);
  /* Conv2d (4-D weight) beats the op type Conv; the 3-D-weight Conv is a Conv1d. The
   * entries give only an activation: the weight comes from the default Conv entry
   * the file's Conv replaced */
  const QhQConfig *qc = assert_act(m, g, "conv1", "MovingAverageMinMaxObserver",
                                   "object_type 'Conv2d', weight from object_type 'Conv'",
                                   QH_QCONFIG_USER);
  g_assert_cmpstr(qh_observer_config_arg(qc->activation, "averaging_constant"), ==, "0.5");
  assert_obs(qc->weight, "PerChannelMinMaxObserver", QH_DTYPE_INT8,
             QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  qc = assert_act(m, g, "/layer4/conv", "MinMaxObserver", "object_type 'Conv'", QH_QCONFIG_USER);
  assert_obs(qc->weight, "PerChannelMinMaxObserver", QH_DTYPE_INT8,
             QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static void test_node_names(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "node-names.json");
  /* the exact name wins over the globs listed before it */
  const QhQConfig *qc = assert_act(m, g, "/layer4/fc", "HistogramObserver", "node_name '/layer4/fc', weight from object_type 'Gemm'",
                                   QH_QCONFIG_USER);
  g_assert_cmpstr(qh_observer_config_arg(qc->activation, "bins"), ==, "1024");
  /* two globs match: the first in file order wins */
  qc = assert_act(m, g, "/layer4/conv", "MinMaxObserver",
                  "node_name '/layer4/*', weight from object_type 'Conv'", QH_QCONFIG_USER);
  g_assert_cmpint(qc->activation->quant_max, ==, 15);
  /* node names beat object types, and names that match nothing fall through */
  assert_act(m, g, "conv1", "HistogramObserver", "object_type 'Conv'", QH_QCONFIG_BACKEND_DEFAULT);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static void test_partial_entries(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "partial.json");
  /* replacing the default ConvTranspose entry keeps its per-tensor weight */
  const QhQConfig *qc = assert_act(m, g, "deconv", "MinMaxObserver",
                                   "object_type 'ConvTranspose'", QH_QCONFIG_USER);
  assert_obs(qc->weight, "MinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC);
  /* a weight-only node entry: the activation the node would get without it */
  qc = assert_act(m, g, "conv1", "HistogramObserver",
                  "node_name 'conv1', activation from object_type 'Conv'", QH_QCONFIG_USER);
  assert_obs(qc->weight, "MinMaxObserver", QH_DTYPE_INT8, QH_QSCHEME_PER_TENSOR_SYMMETRIC);
  g_assert_true(qc->weight->has_eps && qc->weight->eps == 0x1p-12f);
  /* over a null object_type entry the search goes on down to global */
  qc = assert_act(m, g, "/layer4/fc", "PlaceholderObserver",
                  "node_name '/layer4/fc', weight from global", QH_QCONFIG_USER);
  g_assert_cmpint(qc->activation->dtype, ==, QH_DTYPE_FLOAT);
  assert_obs(qc->weight, "PerChannelMinMaxObserver", QH_DTYPE_INT8,
             QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  assert_none(m, g, "head", "object_type 'Gemm'");
  /* "weight": null: no weight part */
  qc = assert_act(m, g, "relu1", "MinMaxObserver", "node_name 'relu1'", QH_QCONFIG_USER);
  g_assert_null(qc->weight);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static void test_layers_stack(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "minmax-global.json");
  load_ok(m, "design-example.json");
  /* the second file's global replaces the first's, fixed entries still stay */
  assert_act(m, g, "conv1", "HistogramObserver", "global", QH_QCONFIG_USER);
  assert_act(m, g, "sig", "FixedQParamsObserver", "object_type 'Sigmoid'",
             QH_QCONFIG_BACKEND_DEFAULT);
  load_ok(m, "base-none.json");
  assert_act(m, g, "sig", "MinMaxObserver", "global", QH_QCONFIG_USER);
  assert_act(m, g, "head", "MinMaxObserver", "global", QH_QCONFIG_USER);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static void test_plugin_observer(void) {
  QhGraph *g = test_graph();
  const char *const known[] = {"MyVendorObserver", NULL};
  QhQConfigMapping *m = qh_qconfig_mapping_new(&fbgemm, known, NULL);
  load_ok(m, "plugin-observer.json");
  const QhQConfig *qc = assert_act(m, g, "conv1", "MyVendorObserver", "global", QH_QCONFIG_USER);
  g_assert_cmpint(qc->activation->dtype, ==, QH_DTYPE_INT8);
  /* arguments pass through as text, in file order */
  const char *want[][2] = {{"mode", "fast"}, {"depth", "3"}, {"gain", "0.25"}, {"enabled", "true"}};
  g_assert_cmpuint(qc->activation->args->len, ==, G_N_ELEMENTS(want));
  for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
    const QhObserverArg *a = g_ptr_array_index(qc->activation->args, i);
    g_assert_cmpstr(a->key, ==, want[i][0]);
    g_assert_cmpstr(a->value, ==, want[i][1]);
  }
  /* the weight part comes from the default global the file's global replaced */
  assert_obs(qc->weight, "PerChannelMinMaxObserver", QH_DTYPE_INT8,
             QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  qh_qconfig_mapping_free(m);

  /* unknown without the plugin */
  m = default_mapping();
  char *path = data_path("plugin-observer.json");
  GError *error = NULL;
  g_assert_false(qh_qconfig_mapping_load_file(m, path, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "global.activation.observer: unknown observer 'MyVendorObserver'"));
  g_error_free(error);
  g_free(path);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

/* ---- Bad files: one line naming the file and the key; the mapping unchanged ---- */

typedef struct {
  const char *json;
  int code;
  const char *part; /* follows "FILE:" in the message */
} BadCase;

static const BadCase bad_cases[] = {
    /* not JSON, or JSON that json-glib would let through */
    {"{\"global\": ", QH_ERROR_PARSE, "1:12: global: unexpected end of file"},
    {"{\"global\": null,}", QH_ERROR_PARSE, "1:17: expected a key"},
    {"{\n  // comment\n  \"global\": null}", QH_ERROR_PARSE, "2:3: expected a key"},
    {"{'global': null}", QH_ERROR_PARSE, "1:2: expected a key"},
    {"{\"global\": null} {}", QH_ERROR_PARSE, "1:18: unexpected text after"},
    {"{\"node_name\": {\"a\": {\"activation\": {\"quant_min\": 0x10}}}}", QH_ERROR_PARSE,
     "1:51: node_name.a.activation: expected ',' or '}'"},
    {"{\"node_name\": {\"a\": {\"activation\": {\"bins\": 99999999999999999999}}}}",
     QH_ERROR_PARSE,
     "1:45: node_name.a.activation.bins: number 99999999999999999999 is out of range"},
    {"{\"node_name\": {\"a\\ud800\": null}}", QH_ERROR_PARSE, "1:18: node_name: unpaired surrogate"},
    {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", QH_ERROR_PARSE,
     "1:33: nested deeper than 32 levels"},
    {"", QH_ERROR_PARSE, "1:1: unexpected end of file"},
    {"{\"object_type\": {\"Conv\": null, \"Conv\": null}}", QH_ERROR_INVALID,
     " object_type.Conv: key given twice"},
    {"{\"node_name\": {\"/l4/x*\": {\"activation\": {\"dtype\": \"qint8\", \"dtype\": \"quint8\"}}}}",
     QH_ERROR_INVALID, " node_name['/l4/x*'].activation.dtype: key given twice"},
    /* the format */
    {"[]", QH_ERROR_INVALID, " the top level must be a JSON object"},
    {"{\"globals\": null}", QH_ERROR_INVALID, " globals: unknown key"},
    {"{\"base\": \"fbgemm\"}", QH_ERROR_INVALID, " base: must be \"default\" or \"none\""},
    {"{\"object_type\": []}", QH_ERROR_INVALID, " object_type: must be an object"},
    {"{\"object_type\": {\"Linaer\": null}}", QH_ERROR_INVALID,
     " object_type.Linaer: 'Linaer' is neither an ONNX op type"},
    {"{\"node_name\": {\"\": null}}", QH_ERROR_INVALID, " node_name['']: empty key"},
    {"{\"global\": 3}", QH_ERROR_INVALID, " global: must be null or a qconfig object"},
    {"{\"global\": {}}", QH_ERROR_INVALID, " global: an empty qconfig"},
    {"{\"global\": {\"activations\": {}}}", QH_ERROR_INVALID, " global.activations: unknown key"},
    {"{\"global\": {\"activation\": null}}", QH_ERROR_INVALID, " global.activation: cannot be null"},
    {"{\"global\": {\"activation\": \"MinMaxObserver\"}}", QH_ERROR_INVALID,
     " global.activation: must be an object (an observer spec), not a string"},
    {"{\"global\": {\"activation\": {\"observer\": \"MinMax\"}}}", QH_ERROR_INVALID,
     " global.activation.observer: unknown observer 'MinMax'"},
    {"{\"global\": {\"activation\": {\"observer\": 3}}}", QH_ERROR_INVALID,
     " global.activation.observer: must be a string, not an integer"},
    {"{\"global\": {\"activation\": {\"dtype\": \"uint8\"}}}", QH_ERROR_INVALID,
     " global.activation.dtype: unknown dtype 'uint8' (one of quint8, qint8, quint16, qint16, quint4, qint4, qint32, float32)"},
    {"{\"global\": {\"activation\": {\"qscheme\": \"torch.per_tensor_affine\"}}}", QH_ERROR_INVALID,
     " global.activation.qscheme: unknown qscheme 'torch.per_tensor_affine'"},
    {"{\"global\": {\"activation\": {\"quant_min\": \"0\", \"quant_max\": 255}}}",
     QH_ERROR_INVALID, " global.activation.quant_min: must be an integer, not a string"},
    {"{\"global\": {\"activation\": {\"quant_min\": 0.0, \"quant_max\": 255}}}",
     QH_ERROR_INVALID, " global.activation.quant_min: must be an integer, not a number"},
    {"{\"global\": {\"activation\": {\"quant_min\": 0}}}", QH_ERROR_INVALID,
     " global.activation.quant_max: missing"},
    {"{\"object_type\": {\"Conv\": {\"activation\": {\"quant_min\": 0, \"quant_max\": 300}}}}",
     QH_ERROR_INVALID, " object_type.Conv.activation.quant_max: 300 is outside uint8 [0, 255]"},
    {"{\"global\": {\"activation\": {\"quant_min\": 100, \"quant_max\": 10}}}", QH_ERROR_INVALID,
     " global.activation.quant_min: 100 is above quant_max 10"},
    {"{\"global\": {\"activation\": {\"quant_min\": 5000000000, \"quant_max\": 10}}}",
     QH_ERROR_INVALID, " global.activation.quant_min: 5000000000 is outside the 32-bit"},
    {"{\"global\": {\"activation\": {\"reduce_range\": 1}}}", QH_ERROR_INVALID,
     " global.activation.reduce_range: must be true or false, not an integer"},
    {"{\"global\": {\"activation\": {\"eps\": \"1e-7\"}}}", QH_ERROR_INVALID,
     " global.activation.eps: must be a number, not a string"},
    {"{\"global\": {\"activation\": {\"eps\": -1}}}", QH_ERROR_INVALID,
     " global.activation.eps: -1 must be a positive float32 number"},
    {"{\"global\": {\"activation\": {\"eps\": 1e-60}}}", QH_ERROR_INVALID,
     " global.activation.eps: 1e-60 must be a positive float32 number"},
    {"{\"global\": {\"activation\": {\"dtype\": \"float32\"}}}", QH_ERROR_INVALID,
     " global.activation.dtype: MinMaxObserver cannot produce float32"},
    {"{\"global\": {\"activation\": {\"observer\": \"HistogramObserver\", \"bins\": \"2048\"}}}",
     QH_ERROR_INVALID, " global.activation.bins: must be a number or a boolean"},
    {"{\"global\": {\"activation\": {\"observer\": \"HistogramObserver\", \"bins\": [1]}}}",
     QH_ERROR_INVALID, " global.activation.bins: must be a number or a boolean"},
    {"{\"global\": {\"activation\": {\"observer\": \"ReuseInputObserver\", \"dtype\": \"quint8\"}}}",
     QH_ERROR_INVALID, " global.activation.dtype: ReuseInputObserver takes no arguments"},
    {"{\"base\": \"none\", \"global\": {\"weight\": {}}}", QH_ERROR_INVALID,
     " global: gives no \"activation\" and there is no global qconfig beneath"},
    /* what only the observer's own check knows */
    {"{\"global\": {\"activation\": {\"observer\": \"HistogramObserver\", \"bins\": 0}}}",
     QH_ERROR_INVALID, " global.activation: HistogramObserver"},
    {"{\"global\": {\"activation\": {\"observer\": \"MinMaxObserver\", \"binz\": 10}}}",
     QH_ERROR_INVALID, " global.activation: MinMaxObserver"},
    {"{\"global\": {\"weight\": {\"observer\": \"PerChannelMinMaxObserver\", \"qscheme\": \"per_tensor_affine\"}}}",
     QH_ERROR_INVALID, " global.weight: PerChannelMinMaxObserver"},
    {"{\"global\": {\"activation\": {\"quant_min\": 1, \"quant_max\": 255}}}",
     QH_ERROR_INVALID, " global.activation: MinMaxObserver"},
};

static void test_bad_files(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "partial.json");
  const QhQConfig *before = resolve(m, g, "conv1");
  char *dir = g_dir_make_tmp("qconfig-XXXXXX", NULL);
  char *path = g_build_filename(dir, "bad.json", NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    const BadCase *c = &bad_cases[i];
    g_assert_true(g_file_set_contents(path, c->json, -1, NULL));
    GError *error = NULL;
    g_assert_false(qh_qconfig_mapping_load_file(m, path, &error));
    g_assert_nonnull(error);
    char *want = g_strdup_printf("%s:%s", path, c->part);
    if (error->code != c->code || !g_str_has_prefix(error->message, want) ||
        strchr(error->message, '\n') != NULL)
      g_error("case %zu (%s): got code %d '%s', want code %d '%s...'", i, c->json, error->code,
              error->message, c->code, want);
    g_test_message("%s", error->message);
    g_free(want);
    g_error_free(error);
    g_assert_true(resolve(m, g, "conv1") == before);
  }
  /* a missing file names itself */
  GError *error = NULL;
  char *missing = g_build_filename(dir, "missing.json", NULL);
  g_assert_false(qh_qconfig_mapping_load_file(m, missing, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_IO);
  g_assert_nonnull(strstr(error->message, missing));
  g_error_free(error);
  g_free(missing);
  /* the mapping still answers as before every failure */
  assert_act(m, g, "deconv", "MinMaxObserver", "object_type 'ConvTranspose'", QH_QCONFIG_USER);
  g_remove(path);
  g_rmdir(dir);
  g_free(path);
  g_free(dir);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

/* Every file in the data directory loads (the docs' examples among them). */
static void test_strict_accepts(void) {
  char *dir = g_dir_make_tmp("qconfig-XXXXXX", NULL);
  char *path = g_build_filename(dir, "ok.json", NULL);
  const char *const good[] = {
      "\xEF\xBB\xBF{}",
      " {\"base\": \"default\"} \n",
      "{\"node_name\": {\"a\\u00e9\\ud83d\\ude00\\n\": null, \"b\": null}}",
      "{\"global\": {\"activation\": {\"observer\": \"HistogramObserver\", \"bins\": 2048, "
      "\"upsample_rate\": 64}}}",
      "{\"global\": {\"activation\": {\"eps\": 1, \"quant_min\": -0, \"quant_max\": 1.5e2}}}",
  };
  for (size_t i = 0; i < G_N_ELEMENTS(good); i++) {
    QhQConfigMapping *m = default_mapping();
    g_assert_true(g_file_set_contents(path, good[i], -1, NULL));
    GError *error = NULL;
    gboolean ok = qh_qconfig_mapping_load_file(m, path, &error);
    if (i == G_N_ELEMENTS(good) - 1) { /* 1.5e2 is a number, not an integer */
      g_assert_false(ok);
      g_assert_nonnull(strstr(error->message, "global.activation.quant_max: must be an integer"));
      g_error_free(error);
    } else if (!ok) {
      g_error("case %zu: %s", i, error->message);
    }
    qh_qconfig_mapping_free(m);
  }
  g_remove(path);
  g_rmdir(dir);
  g_free(path);
  g_free(dir);
}

/* ---- For plugins ---- */

static void test_to_spec(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  QhQuantSpec spec;
  QhOption *storage = NULL;
  /* round trip of the backend's fixed spec: the scale is exactly the float32 1/256 */
  qh_qconfig_to_spec(resolve(m, g, "sig")->activation, &spec, &storage);
  g_assert_cmpint(spec.kind, ==, QH_SPEC_FIXED);
  g_assert_true(spec.scale == 1.0f / 256.0f);
  g_assert_cmpint(spec.zero_point, ==, 0);
  g_assert_cmpint(spec.dtype, ==, QH_DTYPE_UINT8);
  g_assert_cmpint(spec.qscheme, ==, QH_QSCHEME_PER_TENSOR_AFFINE);
  g_assert_cmpuint(spec.flags, ==, QH_SPEC_HAS_RANGE);
  g_assert_cmpint(spec.quant_max, ==, 255);
  g_assert_cmpuint(spec.abi_version, ==, QH_ABI_VERSION);
  g_assert_cmpuint(spec.struct_size, ==, sizeof spec);
  g_free(storage);
  qh_qconfig_to_spec(resolve(m, g, "tanh")->activation, &spec, &storage);
  g_assert_true(spec.scale == 2.0f / 256.0f);
  g_assert_cmpint(spec.zero_point, ==, 128);
  g_free(storage);
  qh_qconfig_to_spec(resolve(m, g, "reshape")->activation, &spec, &storage);
  g_assert_cmpint(spec.kind, ==, QH_SPEC_SHARED);
  g_assert_cmpuint(spec.shared_with.node, ==, QH_INVALID_ID);
  g_assert_null(storage);
  const QhQConfig *qc = resolve(m, g, "conv1");
  qh_qconfig_to_spec(qc->activation, &spec, &storage);
  g_assert_cmpint(spec.kind, ==, QH_SPEC_QUANTIZE);
  g_assert_cmpstr(spec.observer, ==, "HistogramObserver");
  g_assert_cmpuint(spec.flags, ==, QH_SPEC_REDUCE_RANGE);
  g_assert_cmpint(spec.ch_axis, ==, -1);
  g_assert_cmpuint(spec.n_observer_args, ==, 1);
  g_assert_true(spec.observer_args == storage);
  g_assert_cmpstr(spec.observer_args[0].key, ==, "bins");
  g_assert_cmpstr(spec.observer_args[0].value, ==, "2048");
  g_free(storage);
  qh_qconfig_to_spec(qc->weight, &spec, &storage);
  g_assert_cmpint(spec.qscheme, ==, QH_QSCHEME_PER_CHANNEL_SYMMETRIC);
  g_assert_cmpint(spec.ch_axis, ==, 0);
  g_assert_cmpstr(spec.observer, ==, "PerChannelMinMaxObserver");
  g_assert_cmpuint(spec.flags, ==, 0);
  g_free(storage);
  /* eps travels with its flag */
  load_ok(m, "design-example.json");
  qh_qconfig_to_spec(resolve(m, g, "conv1")->activation, &spec, &storage);
  g_assert_cmpuint(spec.flags, ==, QH_SPEC_HAS_RANGE | QH_SPEC_HAS_EPS);
  g_assert_true(spec.eps == 0x1p-23f);
  g_assert_cmpint(spec.quant_max, ==, 127);
  g_free(storage);
  qh_qconfig_mapping_free(m);
  qh_graph_free(g);
}

static int32_t hook(QhQConfigMapping *m, const QhGraph *g, const char *node, int32_t role,
                    QhQuantSpec *spec) {
  memset(spec, 0, sizeof *spec);
  int32_t source = -1;
  GError *error = NULL;
  g_assert_true(qh_qconfig_view_hook(m, g, (uint32_t)node_named(g, node)->id, role, spec,
                                     &source, &error));
  g_assert_no_error(error);
  return source;
}

static void test_view_hook(void) {
  QhGraph *g = test_graph();
  QhQConfigMapping *m = default_mapping();
  load_ok(m, "partial.json");
  QhQuantSpec a, w;
  g_assert_cmpint(hook(m, g, "conv1", QH_ROLE_ACTIVATION, &a), ==, QH_QCONFIG_USER);
  g_assert_cmpint(hook(m, g, "conv1", QH_ROLE_WEIGHT, &w), ==, QH_QCONFIG_USER);
  /* both answers stay valid within one callback */
  g_assert_cmpstr(a.observer, ==, "HistogramObserver");
  g_assert_cmpstr(a.observer_args[0].value, ==, "2048");
  g_assert_cmpstr(w.observer, ==, "MinMaxObserver");
  g_assert_true(w.eps == 0x1p-12f);
  g_assert_cmpint(hook(m, g, "flat", QH_ROLE_ACTIVATION, &a), ==, QH_QCONFIG_EXCLUDED);
  g_assert_cmpint(hook(m, g, "head", QH_ROLE_WEIGHT, &a), ==, QH_QCONFIG_EXCLUDED);
  g_assert_cmpint(hook(m, g, "sig", QH_ROLE_ACTIVATION, &a), ==, QH_QCONFIG_BACKEND_DEFAULT);
  g_assert_cmpint(a.kind, ==, QH_SPEC_FIXED);
  /* no weight part: not found */
  g_assert_cmpint(hook(m, g, "relu1", QH_ROLE_WEIGHT, &a), ==, 0);
  g_assert_cmpint(hook(m, g, "relu1", QH_ROLE_ACTIVATION, &a), ==, QH_QCONFIG_USER);
  GError *error = NULL;
  int32_t source;
  g_assert_false(qh_qconfig_view_hook(m, g, 999, QH_ROLE_ACTIVATION, &a, &source, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_clear_error(&error);
  g_assert_false(qh_qconfig_view_hook(m, g, 0, QH_ROLE_BIAS, &a, &source, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_clear_error(&error);
  qh_qconfig_mapping_free(m);
  /* an empty mapping has no entry for anything */
  m = qh_qconfig_mapping_new(NULL, NULL, NULL);
  g_assert_cmpint(hook(m, g, "conv1", QH_ROLE_ACTIVATION, &a), ==, 0);
  qh_qconfig_mapping_free(m);
  /* the type the view expects */
  QhGraphViewQConfigFn fn = qh_qconfig_view_hook;
  (void)fn;
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/qconfig/backend-defaults", test_backend_defaults);
  g_test_add_func("/qconfig/backend-checked", test_backend_checked);
  g_test_add_func("/qconfig/global-replaces-shared-entries", test_global_replaces_shared_entries);
  g_test_add_func("/qconfig/base-none", test_base_none);
  g_test_add_func("/qconfig/design-example", test_design_example);
  g_test_add_func("/qconfig/aliases", test_aliases);
  g_test_add_func("/qconfig/node-names", test_node_names);
  g_test_add_func("/qconfig/partial-entries", test_partial_entries);
  g_test_add_func("/qconfig/layers-stack", test_layers_stack);
  g_test_add_func("/qconfig/plugin-observer", test_plugin_observer);
  g_test_add_func("/qconfig/bad-files", test_bad_files);
  g_test_add_func("/qconfig/strict-accepts", test_strict_accepts);
  g_test_add_func("/qconfig/to-spec", test_to_spec);
  g_test_add_func("/qconfig/view-hook", test_view_hook);
  return g_test_run();
}
