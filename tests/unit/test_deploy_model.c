/* Unit tests of the ABI 1.1 deploy functions of the host table: artifact_write_model
 * refuses unknown flag bits, bad handles and paths outside the artefact (writing
 * nothing), keeps the artefact's size limit, writes the QDQ graph as it is with flags
 * 0 and the deploy model with QH_MODEL_STRIP_QDQ (read back with the ONNX loader: no
 * Q/DQ left, an int8 weight dequantized, a float bias quantized with rounding half to
 * even and saturation then dequantized, unread initializers gone, the output's name
 * kept), and leaves the caller's graph as it was; artifact_source_digest hands back
 * the artefact's digest and NULL for a foreign handle. */
#include <glib/gstdio.h>
#include <string.h>

#include "io/onnx.h"
#include "lower/deploy-model.h"
#include "lower/strip-qdq.h"
#include "hostapi/graph-view.h"
#include "hostapi/host-api-private.h"
#include "hostapi/host-private.h"
#include "hostapi/status-private.h"

static QhValue *value(QhGraph *g, const char *name, QhDType dt, int rank, const int64_t *dims) {
  QhValue *v = qh_graph_add_value(g, name, NULL);
  v->dtype = dt;
  v->shape = qh_shape_make(rank, dims);
  return v;
}

static QhValue *constant(QhGraph *g, const char *name, QhDType dt, int rank, const int64_t *dims,
                         const void *data) {
  QhShape shape = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(dt, &shape, NULL);
  memcpy(t->data, data, t->nbytes);
  QhValue *v = qh_graph_add_value(g, name, NULL);
  qh_value_set_initializer(v, t);
  return v;
}

static void node(QhGraph *g, const char *name, const char *op, int n_in, const QhValue *const *in,
                 const QhValue *out) {
  int ids[3];
  for (int i = 0; i < n_in; i++)
    ids[i] = in[i]->id;
  g_assert_nonnull(qh_graph_add_node(g, name, op, "", n_in, ids, 1, &out->id, NULL));
}

/* x -> Q/DQ -> Gemm(W: DQ of int8, B: Q -> DQ of floats, transB) -> Q/DQ -> y_dq */
static const int8_t w_int[6] = {-128, -3, 0, 1, 5, 127};
static const float b_float[2] = {0.375f, 1000.0f};
static QhGraph *qdq_gemm(void) {
  QhGraph *g = qh_graph_new();
  qh_graph_set_opset(g, "", 13);
  static const int64_t xd[2] = {1, 3}, wd[2] = {2, 3}, bd[1] = {2}, yd[2] = {1, 2};
  const float s_half = 0.5f, s_quarter = 0.25f;
  const int8_t z = 0;
  QhValue *x = value(g, "x", QH_DTYPE_F32, 2, xd);
  QhValue *s = constant(g, "s", QH_DTYPE_F32, 0, NULL, &s_half);
  QhValue *bs = constant(g, "b_s", QH_DTYPE_F32, 0, NULL, &s_quarter);
  QhValue *zp = constant(g, "z", QH_DTYPE_S8, 0, NULL, &z);
  QhValue *w = constant(g, "w_int", QH_DTYPE_S8, 2, wd, w_int);
  QhValue *b = constant(g, "b_f", QH_DTYPE_F32, 1, bd, b_float);
  QhValue *xq = value(g, "x_q", QH_DTYPE_S8, 2, xd), *xdq = value(g, "x_dq", QH_DTYPE_F32, 2, xd);
  QhValue *wdq = value(g, "w_dq", QH_DTYPE_F32, 2, wd);
  QhValue *bq = value(g, "b_q", QH_DTYPE_S8, 1, bd), *bdq = value(g, "b_dq", QH_DTYPE_F32, 1, bd);
  QhValue *y = value(g, "y", QH_DTYPE_F32, 2, yd), *yq = value(g, "y_q", QH_DTYPE_S8, 2, yd);
  QhValue *ydq = value(g, "y_dq", QH_DTYPE_F32, 2, yd);
  node(g, "x_quantize", "QuantizeLinear", 3, (const QhValue *[]){x, s, zp}, xq);
  node(g, "x_dequantize", "DequantizeLinear", 3, (const QhValue *[]){xq, s, zp}, xdq);
  node(g, "w_dequantize", "DequantizeLinear", 3, (const QhValue *[]){w, s, zp}, wdq);
  node(g, "b_quantize", "QuantizeLinear", 3, (const QhValue *[]){b, bs, zp}, bq);
  node(g, "b_dequantize", "DequantizeLinear", 3, (const QhValue *[]){bq, bs, zp}, bdq);
  node(g, "fc", "Gemm", 3, (const QhValue *[]){xdq, wdq, bdq}, y);
  qh_node_set_attr_int(qh_graph_node(g, qh_graph_n_nodes(g) - 1), "transB", 1);
  node(g, "y_quantize", "QuantizeLinear", 3, (const QhValue *[]){y, s, zp}, yq);
  node(g, "y_dequantize", "DequantizeLinear", 3, (const QhValue *[]){yq, s, zp}, ydq);
  x->is_input = TRUE;
  g_array_append_val(g->inputs, x->id);
  ydq->is_output = TRUE;
  g_array_append_val(g->outputs, ydq->id);
  return g;
}

typedef struct {
  char *dir;
  QhArtifact art;
  QhGraph *graph;
  QhGraphView *view;
} Fixture;

static void setup(Fixture *f, gconstpointer data) {
  (void)data;
  f->dir = g_dir_make_tmp("qh-deploy-model-XXXXXX", NULL);
  f->art = (QhArtifact){QH_ARTIFACT_MAGIC, f->dir, 1u << 20, 0, "00ff", qh_deploy_model_save};
  f->graph = qdq_gemm();
  f->view = qh_graph_view_new(f->graph, QH_VIEW_READ);
}

static void teardown(Fixture *f, gconstpointer data) {
  (void)data;
  qh_graph_view_free(f->view);
  qh_graph_free(f->graph);
  /* only the test's own files: the tests below name each one */
  static const char *const files[] = {"m.onnx", "sub/d.onnx", "big.onnx"};
  for (gsize i = 0; i < G_N_ELEMENTS(files); i++) {
    char *p = g_build_filename(f->dir, files[i], NULL);
    g_unlink(p);
    g_free(p);
  }
  char *sub = g_build_filename(f->dir, "sub", NULL);
  g_rmdir(sub);
  g_free(sub);
  g_assert_cmpint(g_rmdir(f->dir), ==, 0); /* nothing else was left behind */
  g_free(f->dir);
}

static void expect_code(const QhHostApi *api, QhStatus *st, int32_t code) {
  g_assert_nonnull(st);
  g_assert_cmpint(api->status_code(st), ==, code);
  api->status_free(st);
}

static gboolean dir_is_empty(const char *dir) {
  GDir *d = g_dir_open(dir, 0, NULL);
  gboolean empty = g_dir_read_name(d) == NULL;
  g_dir_close(d);
  return empty;
}

static void test_refusals(Fixture *f, gconstpointer data) {
  (void)data;
  const QhHostApi *api = qh_host_api_get();
  g_assert_true(QH_HAS_FIELD(api, QhHostApi, artifact_source_digest));
  /* every bit the SDK does not define */
  for (int bit = 1; bit < 32; bit++)
    expect_code(api, api->artifact_write_model(&f->art, "m.onnx", f->view, 1u << bit),
                QH_ERR_INVALID_ARGUMENT);
  expect_code(api, api->artifact_write_model(&f->art, "m.onnx", f->view, QH_MODEL_STRIP_QDQ | 0x80u),
              QH_ERR_INVALID_ARGUMENT);
  static const char *const bad[] = {"../escape.onnx", "/tmp/abs.onnx", "a/../../b", "", "a//b", "./a",
                                    "\xff.onnx"};
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++)
    expect_code(api, api->artifact_write_model(&f->art, bad[i], f->view, QH_MODEL_STRIP_QDQ),
                QH_ERR_INVALID_ARGUMENT);
  expect_code(api, api->artifact_write_model(&f->art, NULL, f->view, 0), QH_ERR_INVALID_ARGUMENT);
  expect_code(api, api->artifact_write_model(&f->art, "m.onnx", NULL, 0), QH_ERR_INVALID_ARGUMENT);
  expect_code(api, api->artifact_write_model(&f->art, "m.onnx", (const QhGraphView *)"junk", 0),
              QH_ERR_INVALID_ARGUMENT);
  /* outside deploy there is no artefact handle: a stale or foreign one is refused */
  QhArtifact stale = f->art;
  stale.magic = 0;
  expect_code(api, api->artifact_write_model(&stale, "m.onnx", f->view, 0), QH_ERR_INVALID_ARGUMENT);
  expect_code(api, api->artifact_write_model(NULL, "m.onnx", f->view, 0), QH_ERR_INVALID_ARGUMENT);
  g_assert_null(api->artifact_source_digest(&stale));
  g_assert_null(api->artifact_source_digest(NULL));
  g_assert_cmpstr(api->artifact_source_digest(&f->art), ==, "00ff");
  /* the size limit holds for models too, and the file over it is not kept */
  QhArtifact small = f->art;
  small.limit = 100;
  expect_code(api, api->artifact_write_model(&small, "big.onnx", f->view, 0), QH_ERR_OUT_OF_MEMORY);
  g_assert_cmpuint(small.written, ==, 0);
  g_assert_true(dir_is_empty(f->dir));
  g_assert_cmpuint(f->art.written, ==, 0);
}

static void test_as_is(Fixture *f, gconstpointer data) {
  (void)data;
  const QhHostApi *api = qh_host_api_get();
  g_assert_null(api->artifact_write_model(&f->art, "m.onnx", f->view, 0));
  char *path = g_build_filename(f->dir, "m.onnx", NULL);
  GStatBuf st;
  g_assert_cmpint(g_stat(path, &st), ==, 0);
  g_assert_cmpuint(f->art.written, ==, (gsize)st.st_size);
  QhGraph *back = qh_onnx_load(path, NULL);
  g_assert_nonnull(back);
  g_assert_cmpint(qh_qdq_count(back), ==, 7);
  qh_graph_free(back);
  g_free(path);
}

static const float *floats_of(const QhGraph *g, const char *name, int64_t n) {
  int v = qh_graph_find_value(g, name);
  g_assert_cmpint(v, >=, 0);
  const QhTensor *t = qh_graph_value(g, v)->initializer;
  g_assert_nonnull(t);
  g_assert_cmpint(t->dtype, ==, QH_DTYPE_F32);
  g_assert_cmpint(qh_tensor_numel(t), ==, n);
  return t->data;
}

static void test_strip(Fixture *f, gconstpointer data) {
  (void)data;
  const QhHostApi *api = qh_host_api_get();
  g_assert_null(api->artifact_write_model(&f->art, "sub/d.onnx", f->view, QH_MODEL_STRIP_QDQ));
  g_assert_cmpint(qh_qdq_count(f->graph), ==, 7); /* the caller's graph is untouched */
  char *path = g_build_filename(f->dir, "sub", "d.onnx", NULL);
  QhGraph *d = qh_onnx_load(path, NULL);
  g_assert_nonnull(d);
  g_assert_cmpint(qh_qdq_count(d), ==, 0);
  g_assert_cmpint(qh_graph_count_live_nodes(d), ==, 2); /* Gemm, and the Identity naming y_dq */
  const float *w = floats_of(d, "w_dq", 6);
  for (int i = 0; i < 6; i++)
    g_assert_cmpfloat(w[i], ==, 0.5f * (float)w_int[i]);
  /* 0.375 / 0.25 = 1.5 rounds half to even (2); 1000 / 0.25 saturates at 127 */
  const float *b = floats_of(d, "b_dq", 2);
  g_assert_cmpfloat(b[0], ==, 0.5f);
  g_assert_cmpfloat(b[1], ==, 127 * 0.25f);
  /* the integers, scales and zero points went with their Q/DQ nodes */
  static const char *const gone[] = {"w_int", "b_f", "s", "b_s", "z"};
  for (gsize i = 0; i < G_N_ELEMENTS(gone); i++) {
    int v = qh_graph_find_value(d, gone[i]);
    g_assert_true(v < 0 || qh_graph_value(d, v)->initializer == NULL);
  }
  g_assert_cmpuint(d->outputs->len, ==, 1);
  g_assert_cmpstr(qh_graph_value(d, g_array_index(d->outputs, int, 0))->name, ==, "y_dq");
  g_assert_cmpuint(d->inputs->len, ==, 1);
  g_assert_cmpstr(qh_graph_value(d, g_array_index(d->inputs, int, 0))->name, ==, "x");
  qh_graph_free(d);
  g_free(path);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add("/deploy_model/refusals", Fixture, NULL, setup, test_refusals, teardown);
  g_test_add("/deploy_model/as_is", Fixture, NULL, setup, test_as_is, teardown);
  g_test_add("/deploy_model/strip", Fixture, NULL, setup, test_strip, teardown);
  return g_test_run();
}
