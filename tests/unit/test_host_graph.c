/* Unit tests of the graph half of the host table (host-graph.c, host-quant.c, graph-view.c):
 * every query on a small conv -> relu -> add graph with a removed node, the invalid
 * id / NULL / foreign-handle / wrong-permission cases (out-parameters untouched),
 * the rewrites (checked with qh_graph_topo_order), annotation, qconfig and qparams
 * through a table filled by qh_host_api_fill_graph and qh_host_api_fill_quant. */
#include <math.h>
#include <string.h>

#include "hostapi/graph-view.h"
#include "hostapi/host-api-private.h"
#include "hostapi/status-private.h"

static QhHostApi api;

/* x -> Conv(w, bias omitted) -> c -> Relu -> r -> Add(b) -> y; Relu "dead" (r -> z)
 * removed. Value ids: x 0, w 1, c 2, r 3, b 4, y 5, z 6. Node ids: conv 0, relu 1,
 * dead 2, add 3. */
static const float w_data[6] = {1, 2, 3, 4, 5, 6};

static QhGraph *build(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = qh_shape_make(4, (int64_t[]){1, 3, -1, 4});
  g_array_append_val(g->inputs, x->id);
  QhValue *w = qh_graph_add_value(g, "w", NULL);
  QhShape ws = qh_shape_make(4, (int64_t[]){2, 3, 1, 1});
  QhTensor *wt = qh_tensor_new(QH_DTYPE_F32, &ws, NULL);
  memcpy(wt->data, w_data, sizeof w_data);
  qh_value_set_initializer(w, wt);
  const char *names[] = {"c", "r"};
  for (int i = 0; i < 2; i++) {
    QhValue *v = qh_graph_add_value(g, names[i], NULL);
    v->dtype = QH_DTYPE_F32;
    v->shape = qh_shape_make(4, (int64_t[]){1, 2, 4, 4});
  }
  QhValue *b = qh_graph_add_value(g, "b", NULL);
  QhShape bs = qh_shape_make(1, (int64_t[]){1});
  qh_value_set_initializer(b, qh_tensor_new(QH_DTYPE_F32, &bs, NULL));
  QhValue *y = qh_graph_add_value(g, "y", NULL);
  y->is_output = TRUE;
  g_array_append_val(g->outputs, y->id);
  qh_graph_add_value(g, "z", NULL);
  QhNode *conv = qh_graph_add_node(g, "conv", "Conv", "", 3, (int[]){0, 1, -1}, 1, (int[]){2}, NULL);
  qh_node_set_attr_ints(conv, "kernel_shape", 2, (int64_t[]){1, 1});
  qh_node_set_attr_int(conv, "group", 1);
  qh_node_set_attr_string(conv, "auto_pad", "NOTSET");
  qh_node_set_attr_float(conv, "alpha", 0.5f);
  qh_node_set_attr_floats(conv, "scales", 2, (float[]){1.5f, 2.5f});
  qh_graph_add_node(g, "relu", "Relu", "", 1, (int[]){2}, 1, (int[]){3}, NULL);
  qh_graph_add_node(g, "dead", "Relu", "", 1, (int[]){3}, 1, (int[]){6}, NULL);
  qh_graph_add_node(g, "add", "Add", "", 2, (int[]){3, 4}, 1, (int[]){5}, NULL);
  qh_graph_remove_node(g, 2);
  qh_graph_set_opset(g, "", 17);
  qh_graph_set_opset(g, "com.microsoft", 1);
  return g;
}

/* Checks st has code, contains text, names node (NULL: no node); frees it. */
static void expect(QhStatus *st, int32_t code, const char *text, const char *node) {
  g_assert_nonnull(st);
  if (st->code != code || !strstr(st->message, text))
    g_error("expected code %d with '%s', got %d: %s", code, text, st->code, st->message);
  g_assert_cmpstr(st->node, ==, node);
  qh_status_free(st);
}

static void assert_topo_ok(const QhGraph *g) {
  GArray *order = NULL;
  GError *error = NULL;
  g_assert_true(qh_graph_topo_order(g, &order, &error));
  g_assert_no_error(error);
  g_array_unref(order);
}

static void test_fill(void) {
  QhHostApi t;
  memset(&t, 0, sizeof t);
  qh_host_api_fill_graph(&t);
  qh_host_api_fill_quant(&t);
  /* Every slot from graph_node_count through qparams_set is set. */
  void **first = (void **)&t.graph_node_count, **last = (void **)&t.qparams_set;
  for (void **p = first; p <= last; p++)
    g_assert_nonnull(*p);
  g_assert_null(t.buffer_append);
  /* ABI 1.2's graph functions too */
  g_assert_true(t.constant_set && t.metadata_set && t.metadata_get);
}

/* The hook behind constant_set: stores the values (the view checked them). */
static int constant_calls;
static gboolean store_constant(gpointer data, QhGraph *graph, uint32_t value, const float *values,
                               size_t nbytes, const char *reason, GError **error) {
  (void)data, (void)reason, (void)error;
  memcpy(qh_graph_value(graph, (int)value)->initializer->data, values, nbytes);
  constant_calls++;
  return TRUE;
}

/* ABI 1.2: constant_set (post_calibration only: float constants of the same size, finite,
 * with a reason; a refusal is kept on a view that records them) and metadata_set/get
 * (the plugin's own "qhost.<plugin>." namespace, keys and values checked). */
static void test_passes_and_metadata(void) {
  QhGraph *graph = build();
  QhGraphView *g = qh_graph_view_new(graph, QH_VIEW_READ);
  g->plugin = "tp";
  float w[6] = {6, 5, 4, 3, 2, 1};
  expect(api.constant_set(g, 1, w, sizeof w, "why"), QH_ERR_INVALID_STATE,
         "constant_set may only be called from post_calibration", NULL);
  expect(api.metadata_set(g, "k", "v"), QH_ERR_INVALID_STATE,
         "metadata_set may only be called from annotate, refine, post_calibration and post_convert", NULL);
  qh_graph_view_set_permissions(g, QH_VIEW_READ | QH_VIEW_WEIGHTS_WRITE | QH_VIEW_METADATA_WRITE);
  qh_graph_view_set_constant_hook(g, store_constant, NULL);
  qh_graph_view_keep_refusals(g);
  expect(api.constant_set(g, 2, w, sizeof w, "why"), QH_ERR_INVALID_ARGUMENT, "value 'c' is not a constant",
         "node 'relu' (Relu)");
  g_assert_cmpstr(qh_graph_view_refusal(g), ==,
                  "node 'relu' (Relu): constant_set: value 'c' is not a constant");
  expect(api.constant_set(g, 1, w, 8, "why"), QH_ERR_INVALID_ARGUMENT, "8 bytes given, the constant has 24",
         "node 'conv' (Conv)");
  w[3] = NAN;
  expect(api.constant_set(g, 1, w, sizeof w, "why"), QH_ERR_INVALID_ARGUMENT, "element 3 is nan",
         "node 'conv' (Conv)");
  w[3] = 3;
  expect(api.constant_set(g, 1, w, sizeof w, ""), QH_ERR_INVALID_ARGUMENT, "one non-empty line", "node 'conv' (Conv)");
  g_assert_cmpint(constant_calls, ==, 0);
  g_assert_null(api.constant_set(g, 1, w, sizeof w, "reversed"));
  g_assert_cmpint(constant_calls, ==, 1);
  g_assert_cmpfloat(((const float *)qh_graph_value(graph, 1)->initializer->data)[0], ==, 6.0f);
  /* the first refusal stays the one recorded */
  g_assert_true(g_str_has_prefix(qh_graph_view_refusal(g), "node 'relu' (Relu)"));

  const char *v = "untouched";
  expect(api.metadata_get(g, "k", &v), QH_ERR_NOT_FOUND, "no entry 'qhost.tp.k'", NULL);
  g_assert_null(api.metadata_set(g, "k", "one"));
  g_assert_null(api.metadata_set(g, "k", "two"));
  g_assert_null(api.metadata_get(g, "k", &v));
  g_assert_cmpstr(v, ==, "two");
  g_assert_cmpstr(qh_graph_metadata(graph, "qhost.tp.k"), ==, "two");
  g_assert_cmpuint(graph->metadata->len, ==, 1);
  expect(api.metadata_set(g, "bad key", "x"), QH_ERR_INVALID_ARGUMENT, "outside [A-Za-z0-9_.-] at byte 3", NULL);
  expect(api.metadata_set(g, "", "x"), QH_ERR_INVALID_ARGUMENT, "1 to 128 bytes", NULL);
  expect(api.metadata_set(g, "k", "\xff"), QH_ERR_INVALID_ARGUMENT, "valid UTF-8", NULL);
  /* another plugin sees only its own namespace */
  g->plugin = "other";
  expect(api.metadata_get(g, "k", &v), QH_ERR_NOT_FOUND, "qhost.other.k", NULL);
  g_assert_cmpstr(v, ==, "two");
  qh_graph_view_free(g);
  qh_graph_free(graph);
}

static void test_queries(void) {
  QhGraph *graph = build();
  QhGraphView *g = qh_graph_view_new(graph, 0);
  g_assert_cmpuint(api.graph_node_count(g), ==, 4);
  g_assert_cmpuint(api.graph_value_count(g), ==, 7);
  g_assert_cmpuint(api.graph_input_count(g), ==, 1);
  g_assert_cmpuint(api.graph_input(g, 0), ==, 0);
  g_assert_cmpuint(api.graph_input(g, 1), ==, QH_INVALID_ID);
  g_assert_cmpuint(api.graph_output_count(g), ==, 1);
  g_assert_cmpuint(api.graph_output(g, 0), ==, 5);
  g_assert_cmpuint(api.graph_output(g, 1), ==, QH_INVALID_ID);
  g_assert_cmpint(api.graph_opset(g, ""), ==, 17);
  g_assert_cmpint(api.graph_opset(g, "com.microsoft"), ==, 1);
  g_assert_cmpint(api.graph_opset(g, "org.none"), ==, -1);
  g_assert_cmpint(api.graph_opset(g, NULL), ==, -1);

  const int32_t live[] = {1, 1, 0, 1};
  for (uint32_t i = 0; i < 4; i++)
    g_assert_cmpint(api.node_is_live(g, i), ==, live[i]);
  g_assert_cmpint(api.node_is_live(g, 4), ==, 0);
  g_assert_cmpint(api.node_is_live(g, QH_INVALID_ID), ==, 0);
  g_assert_cmpstr(api.node_op_type(g, 0), ==, "Conv");
  g_assert_cmpstr(api.node_domain(g, 0), ==, "");
  g_assert_cmpstr(api.node_name(g, 3), ==, "add");
  g_assert_null(api.node_name(g, 2));
  g_assert_null(api.node_op_type(g, 9));
  g_assert_null(api.node_domain(g, QH_INVALID_ID));
  g_assert_cmpuint(api.node_find(g, "relu"), ==, 1);
  g_assert_cmpuint(api.node_find(g, "dead"), ==, QH_INVALID_ID);
  g_assert_cmpuint(api.node_find(g, NULL), ==, QH_INVALID_ID);
  g_assert_cmpuint(api.node_input_count(g, 0), ==, 3);
  g_assert_cmpuint(api.node_input_count(g, 2), ==, 0);
  g_assert_cmpuint(api.node_input(g, 0, 1), ==, 1);
  g_assert_cmpuint(api.node_input(g, 0, 2), ==, QH_INVALID_ID);
  g_assert_cmpuint(api.node_input(g, 0, 3), ==, QH_INVALID_ID);
  g_assert_cmpuint(api.node_input(g, 2, 0), ==, QH_INVALID_ID);
  g_assert_cmpuint(api.node_output_count(g, 3), ==, 1);
  g_assert_cmpuint(api.node_output(g, 3, 0), ==, 5);
  g_assert_cmpuint(api.node_output(g, 3, 1), ==, QH_INVALID_ID);

  g_assert_cmpint(api.node_attr_type(g, 0, "group"), ==, QH_ATTR_INT);
  g_assert_cmpint(api.node_attr_type(g, 0, "kernel_shape"), ==, QH_ATTR_INTS);
  g_assert_cmpint(api.node_attr_type(g, 0, "missing"), ==, QH_ATTR_NONE);
  g_assert_cmpint(api.node_attr_type(g, 0, NULL), ==, QH_ATTR_NONE);
  g_assert_cmpint(api.node_attr_type(g, 2, "group"), ==, QH_ATTR_NONE);
  int64_t i64 = 0;
  float f = 0;
  const char *s = NULL;
  const int64_t *ints = NULL;
  const float *floats = NULL;
  size_t n = 0;
  g_assert_null(api.node_attr_int(g, 0, "group", &i64));
  g_assert_cmpint(i64, ==, 1);
  g_assert_null(api.node_attr_float(g, 0, "alpha", &f));
  g_assert_cmpfloat(f, ==, 0.5f);
  g_assert_null(api.node_attr_string(g, 0, "auto_pad", &s));
  g_assert_cmpstr(s, ==, "NOTSET");
  g_assert_null(api.node_attr_ints(g, 0, "kernel_shape", &ints, &n));
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpint(ints[0], ==, 1);
  g_assert_null(api.node_attr_floats(g, 0, "scales", &floats, &n));
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpfloat(floats[1], ==, 2.5f);

  g_assert_cmpuint(api.value_find(g, "r"), ==, 3);
  g_assert_cmpuint(api.value_find(g, "nope"), ==, QH_INVALID_ID);
  g_assert_cmpuint(api.value_find(g, NULL), ==, QH_INVALID_ID);
  g_assert_cmpstr(api.value_name(g, 4), ==, "b");
  g_assert_null(api.value_name(g, 7));
  g_assert_cmpint(api.value_dtype(g, 1), ==, QH_DTYPE_FLOAT);
  g_assert_cmpint(api.value_dtype(g, 6), ==, QH_DTYPE_UNDEFINED);
  g_assert_cmpint(api.value_dtype(g, 99), ==, QH_DTYPE_UNDEFINED);
  int64_t dims[4] = {7, 7, 7, 7};
  int32_t rank = 99;
  g_assert_null(api.value_shape(g, 0, dims, 2, &rank));
  g_assert_cmpint(rank, ==, 4);
  g_assert_cmpint(dims[0], ==, 1);
  g_assert_cmpint(dims[1], ==, 3);
  g_assert_cmpint(dims[2], ==, 7); /* beyond capacity: untouched */
  g_assert_null(api.value_shape(g, 0, dims, 4, &rank));
  g_assert_cmpint(dims[2], ==, -1); /* symbolic */
  g_assert_null(api.value_shape(g, 6, NULL, 0, &rank));
  g_assert_cmpint(rank, ==, -1);
  g_assert_cmpuint(api.value_flags(g, 0), ==, QH_VALUE_GRAPH_INPUT);
  g_assert_cmpuint(api.value_flags(g, 1), ==, QH_VALUE_CONSTANT);
  g_assert_cmpuint(api.value_flags(g, 5), ==, QH_VALUE_GRAPH_OUTPUT);
  g_assert_cmpuint(api.value_flags(g, 3), ==, 0);
  g_assert_cmpuint(api.value_flags(g, 70), ==, 0);
  g_assert_cmpuint(api.value_producer(g, 3), ==, 1);
  g_assert_cmpuint(api.value_producer(g, 0), ==, QH_INVALID_ID);
  g_assert_cmpuint(api.value_producer(g, 6), ==, QH_INVALID_ID); /* producer removed */
  g_assert_cmpuint(api.value_producer(g, 1), ==, QH_INVALID_ID);
  /* r is read by add (slot 0) and by the removed node, which does not count. */
  g_assert_cmpuint(api.value_consumer_count(g, 3), ==, 1);
  uint32_t cn = 42, cs = 42;
  g_assert_null(api.value_consumer(g, 3, 0, &cn, &cs));
  g_assert_cmpuint(cn, ==, 3);
  g_assert_cmpuint(cs, ==, 0);
  g_assert_null(api.value_consumer(g, 4, 0, &cn, &cs));
  g_assert_cmpuint(cn, ==, 3);
  g_assert_cmpuint(cs, ==, 1);
  g_assert_cmpuint(api.value_consumer_count(g, 5), ==, 0);
  g_assert_cmpuint(api.value_consumer_count(g, 700), ==, 0);
  const void *data = NULL;
  size_t nbytes = 0;
  g_assert_null(api.value_data(g, 1, &data, &nbytes));
  g_assert_cmpuint(nbytes, ==, sizeof w_data);
  g_assert_cmpmem(data, nbytes, w_data, sizeof w_data);
  qh_graph_view_free(g);
  qh_graph_free(graph);
}

static void test_invalid_queries(void) {
  QhGraph *graph = build();
  QhGraphView *g = qh_graph_view_new(graph, 0);
  /* A foreign pointer: readable memory without the magic. */
  uint32_t foreign_mem[32] = {0xdeadbeef};
  const QhGraphView *foreign = (const QhGraphView *)foreign_mem;
  const QhGraphView *bad[] = {NULL, foreign};
  for (int k = 0; k < 2; k++) {
    const QhGraphView *b = bad[k];
    g_assert_cmpuint(api.graph_node_count(b), ==, 0);
    g_assert_cmpuint(api.graph_value_count(b), ==, 0);
    g_assert_cmpuint(api.graph_input_count(b), ==, 0);
    g_assert_cmpuint(api.graph_input(b, 0), ==, QH_INVALID_ID);
    g_assert_cmpuint(api.graph_output_count(b), ==, 0);
    g_assert_cmpuint(api.graph_output(b, 0), ==, QH_INVALID_ID);
    g_assert_cmpint(api.graph_opset(b, ""), ==, -1);
    g_assert_cmpint(api.node_is_live(b, 0), ==, 0);
    g_assert_null(api.node_op_type(b, 0));
    g_assert_null(api.node_name(b, 0));
    g_assert_cmpuint(api.node_find(b, "conv"), ==, QH_INVALID_ID);
    g_assert_cmpuint(api.node_input_count(b, 0), ==, 0);
    g_assert_cmpuint(api.node_input(b, 0, 0), ==, QH_INVALID_ID);
    g_assert_cmpuint(api.node_output(b, 0, 0), ==, QH_INVALID_ID);
    g_assert_cmpint(api.node_attr_type(b, 0, "group"), ==, QH_ATTR_NONE);
    g_assert_cmpuint(api.value_find(b, "x"), ==, QH_INVALID_ID);
    g_assert_null(api.value_name(b, 0));
    g_assert_cmpint(api.value_dtype(b, 0), ==, QH_DTYPE_UNDEFINED);
    g_assert_cmpuint(api.value_flags(b, 0), ==, 0);
    g_assert_cmpuint(api.value_producer(b, 3), ==, QH_INVALID_ID);
    g_assert_cmpuint(api.value_consumer_count(b, 3), ==, 0);
    g_assert_cmpuint(api.annotation_node_flags(b, 0), ==, 0);
    int64_t i64 = -7;
    expect(api.node_attr_int(b, 0, "group", &i64), QH_ERR_INVALID_ARGUMENT,
           "node_attr_int: graph is not a graph handle", NULL);
    g_assert_cmpint(i64, ==, -7);
  }

  int64_t i64 = -7;
  float f = -7;
  const char *s = "sentinel";
  const int64_t *ints = (const int64_t *)&i64;
  const float *floats = &f;
  size_t n = 77;
  expect(api.node_attr_int(g, 0, "missing", &i64), QH_ERR_NOT_FOUND, "no attribute 'missing'",
         "node 'conv' (Conv)");
  expect(api.node_attr_int(g, 0, "alpha", &i64), QH_ERR_INVALID_ARGUMENT,
         "attribute 'alpha' is a float, not an int", "node 'conv' (Conv)");
  expect(api.node_attr_int(g, 2, "group", &i64), QH_ERR_INVALID_ARGUMENT, "node 2 was removed",
         "node 'dead' (Relu)");
  expect(api.node_attr_int(g, 4, "group", &i64), QH_ERR_INVALID_ARGUMENT, "node 4 is not a node id",
         NULL);
  expect(api.node_attr_int(g, 0, NULL, &i64), QH_ERR_INVALID_ARGUMENT, "name is NULL", NULL);
  expect(api.node_attr_int(g, 0, "group", NULL), QH_ERR_INVALID_ARGUMENT, "NULL", NULL);
  expect(api.node_attr_float(g, 0, "group", &f), QH_ERR_INVALID_ARGUMENT, "not a float",
         "node 'conv' (Conv)");
  expect(api.node_attr_string(g, 0, "group", &s), QH_ERR_INVALID_ARGUMENT, "not a string",
         "node 'conv' (Conv)");
  expect(api.node_attr_ints(g, 0, "group", &ints, &n), QH_ERR_INVALID_ARGUMENT, "not a list of ints",
         "node 'conv' (Conv)");
  expect(api.node_attr_ints(g, 0, "kernel_shape", &ints, NULL), QH_ERR_INVALID_ARGUMENT, "NULL",
         NULL);
  expect(api.node_attr_floats(g, 0, "nope", &floats, &n), QH_ERR_NOT_FOUND, "no attribute",
         "node 'conv' (Conv)");
  g_assert_cmpint(i64, ==, -7);
  g_assert_cmpfloat(f, ==, -7);
  g_assert_cmpstr(s, ==, "sentinel");
  g_assert_true(ints == (const int64_t *)&i64 && floats == &f && n == 77);

  int64_t dims[2] = {5, 5};
  int32_t rank = 5;
  expect(api.value_shape(g, 7, dims, 2, &rank), QH_ERR_INVALID_ARGUMENT, "value 7 is not a value id",
         NULL);
  expect(api.value_shape(g, 0, dims, 2, NULL), QH_ERR_INVALID_ARGUMENT, "out_rank is NULL", NULL);
  expect(api.value_shape(g, 0, NULL, 2, &rank), QH_ERR_INVALID_ARGUMENT, "out_dims", NULL);
  expect(api.value_shape(NULL, 0, dims, 2, &rank), QH_ERR_INVALID_ARGUMENT, "value_shape", NULL);
  g_assert_true(dims[0] == 5 && dims[1] == 5 && rank == 5);
  uint32_t cn = 9, cs = 9;
  expect(api.value_consumer(g, 3, 1, &cn, &cs), QH_ERR_INVALID_ARGUMENT,
         "index 1 is out of range: value 'r' has 1 consumers", NULL);
  expect(api.value_consumer(g, 3, 0, NULL, &cs), QH_ERR_INVALID_ARGUMENT, "out_node is NULL", NULL);
  expect(api.value_consumer(g, 99, 0, &cn, &cs), QH_ERR_INVALID_ARGUMENT, "not a value id", NULL);
  g_assert_true(cn == 9 && cs == 9);
  const void *data = &n;
  size_t nbytes = 3;
  expect(api.value_data(g, 2, &data, &nbytes), QH_ERR_INVALID_ARGUMENT, "value 'c' is not a constant",
         NULL);
  expect(api.value_data(g, 1, NULL, &nbytes), QH_ERR_INVALID_ARGUMENT, "out_data is NULL", NULL);
  g_assert_true(data == &n && nbytes == 3);

  /* Read-only view: every writer refuses with the function and its callback named. */
  uint32_t out = 12345;
  expect(api.graph_add_node(g, "Relu", "", NULL, (uint32_t[]){3}, 1, (uint32_t[]){6}, 1, &out),
         QH_ERR_INVALID_STATE, "graph_add_node may only be called from transform_for_annotation and post_convert",
         NULL);
  expect(api.graph_add_value(g, "v", &out), QH_ERR_INVALID_STATE,
         "graph_add_value may only be called from transform_for_annotation and post_convert", NULL);
  expect(api.node_remove(g, 0), QH_ERR_INVALID_STATE, "node_remove may only", NULL);
  expect(api.node_set_attr_int(g, 0, "group", 2), QH_ERR_INVALID_STATE, "node_set_attr_int", NULL);
  expect(api.value_replace_uses(g, 3, 2), QH_ERR_INVALID_STATE, "value_replace_uses may only",
         NULL);
  QhQuantSpec spec = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_FLOAT, .ch_axis = -1};
  expect(api.annotation_set_input_spec(g, 0, 0, &spec), QH_ERR_INVALID_STATE,
         "annotation_set_input_spec may only be called from annotate", NULL);
  QhEdgeRef edge = {0, 0, QH_EDGE_INPUT, 0};
  QhQParams qp = {QH_STRUCT_HEADER(QhQParams), .dtype = QH_DTYPE_UINT8};
  expect(api.qparams_get(g, &edge, &qp), QH_ERR_INVALID_STATE,
         "qparams_get may only be called from refine, post_calibration, post_convert, deploy and the lowering callbacks", NULL);
  expect(api.qparams_set(g, &edge, &qp, "why"), QH_ERR_INVALID_STATE,
         "qparams_set may only be called from refine", NULL);
  int32_t source = -5;
  expect(api.qconfig_for_node(g, 0, QH_ROLE_ACTIVATION, &spec, &source), QH_ERR_INVALID_STATE,
         "qconfig_for_node may only be called from annotate", NULL);
  g_assert_cmpuint(out, ==, 12345);
  g_assert_cmpint(source, ==, -5);
  g_assert_cmpuint(graph->nodes->len, ==, 4);
  g_assert_cmpuint(graph->values->len, ==, 7);
  qh_graph_view_free(g);
  qh_graph_free(graph);
}

static void test_rewrites(void) {
  QhGraph *graph = build();
  QhGraphView *g = qh_graph_view_new(graph, QH_VIEW_REWRITE);
  g_assert_cmpuint(api.value_consumer_count(g, 3), ==, 1); /* builds the index */
  /* r * scale -> m, then Add reads m: the fx-style insert-after. */
  const float scale = 2.0f;
  uint32_t k = QH_INVALID_ID, m = QH_INVALID_ID, mul = QH_INVALID_ID;
  g_assert_null(api.graph_add_constant(g, "scale", QH_DTYPE_FLOAT, 0, NULL, &scale, 4, &k));
  g_assert_cmpuint(k, ==, 7);
  g_assert_cmpuint(api.value_flags(g, k), ==, QH_VALUE_CONSTANT);
  const void *data;
  size_t nbytes;
  g_assert_null(api.value_data(g, k, &data, &nbytes));
  g_assert_cmpfloat(*(const float *)data, ==, 2.0f);
  g_assert_null(api.graph_add_value(g, NULL, &m));
  g_assert_null(api.graph_add_node(g, "Mul", NULL, NULL, (uint32_t[]){3, k}, 2, &m, 1, &mul));
  g_assert_cmpuint(mul, ==, 4);
  g_assert_cmpstr(api.node_domain(g, mul), ==, "");
  g_assert_cmpuint(api.value_producer(g, m), ==, mul);
  g_assert_cmpuint(api.value_consumer_count(g, 3), ==, 2); /* index rebuilt */
  g_assert_null(api.value_replace_uses(g, 3, m));
  g_assert_cmpuint(api.node_input(g, 3, 0), ==, m);
  g_assert_cmpuint(api.node_input(g, mul, 0), ==, m); /* fx semantics: point it back */
  g_assert_null(api.node_set_input(g, mul, 0, 3));
  g_assert_cmpuint(api.value_consumer_count(g, 3), ==, 1);
  g_assert_cmpuint(api.value_consumer_count(g, m), ==, 1);
  assert_topo_ok(graph);

  /* Replace a graph output: y -> Identity -> y2. */
  uint32_t y2, ident;
  g_assert_null(api.graph_add_value(g, "y2", &y2));
  g_assert_null(api.graph_add_node(g, "Identity", "", "ident", (uint32_t[]){5}, 1, &y2, 1, &ident));
  g_assert_null(api.value_replace_uses(g, 5, y2));
  g_assert_cmpuint(api.graph_output(g, 0), ==, y2);
  g_assert_cmpuint(api.value_flags(g, y2), ==, QH_VALUE_GRAPH_OUTPUT);
  g_assert_cmpuint(api.value_flags(g, 5), ==, 0);
  g_assert_null(api.node_set_input(g, ident, 0, 5));
  assert_topo_ok(graph);
  g_assert_null(api.value_replace_uses(g, 5, 5)); /* no-op */

  /* A generated node name is unique and a removed node's name is free again. */
  uint32_t v1, v2, spare;
  g_assert_null(api.graph_add_value(g, NULL, &v1));
  g_assert_null(api.graph_add_value(g, NULL, &v2));
  g_assert_cmpstr(api.value_name(g, v1), !=, api.value_name(g, v2));
  g_assert_null(api.graph_add_node(g, "Relu", "", "dead", (uint32_t[]){3}, 1, &v1, 1, &spare));
  g_assert_cmpuint(api.node_find(g, "dead"), ==, spare);
  uint32_t unnamed;
  g_assert_null(api.graph_add_node(g, "Relu", "", NULL, (uint32_t[]){3}, 1, &v2, 1, &unnamed));
  g_assert_cmpstr(api.node_name(g, unnamed), !=, "");
  g_assert_cmpuint(api.node_find(g, api.node_name(g, unnamed)), ==, unnamed);
  g_assert_null(api.node_remove(g, unnamed));
  g_assert_cmpint(api.node_is_live(g, unnamed), ==, 0);
  g_assert_cmpuint(api.value_producer(g, v2), ==, QH_INVALID_ID);
  char *described = qh_node_describe(qh_graph_node(graph, (int)unnamed));
  expect(api.node_remove(g, unnamed), QH_ERR_INVALID_ARGUMENT, "was removed", described);
  g_free(described);
  g_assert_null(api.node_set_attr_int(g, 0, "group", 2));
  int64_t grp;
  g_assert_null(api.node_attr_int(g, 0, "group", &grp));
  g_assert_cmpint(grp, ==, 2);
  g_assert_null(api.node_set_attr_string(g, 0, "auto_pad", "VALID"));
  g_assert_null(api.node_set_attr_ints(g, 0, "pads", (int64_t[]){0, 0, 0, 0}, 4));
  g_assert_null(api.node_set_attr_floats(g, 0, "empty", NULL, 0));
  g_assert_null(api.node_set_attr_float(g, 0, "alpha", 1.0f));
  assert_topo_ok(graph);

  /* Failures change nothing and leave out-parameters alone. */
  guint n_values = graph->values->len, n_nodes = graph->nodes->len;
  uint32_t out = 4242;
  const uint8_t bytes[8] = {0};
  expect(api.graph_add_constant(g, "k2", QH_DTYPE_FLOAT, 1, (int64_t[]){3}, bytes, 8, &out),
         QH_ERR_INVALID_ARGUMENT, "nbytes 8 does not match 3 elements of float32 (12 bytes)", NULL);
  expect(api.graph_add_constant(g, "k2", QH_DTYPE_FLOAT, 9, (int64_t[9]){0}, bytes, 0, &out),
         QH_ERR_INVALID_ARGUMENT, "rank 9 is outside [0, 8]", NULL);
  expect(api.graph_add_constant(g, "k2", QH_DTYPE_FLOAT, 1, (int64_t[]){-2}, bytes, 0, &out),
         QH_ERR_INVALID_ARGUMENT, "dims[0] is -2", NULL);
  expect(api.graph_add_constant(g, "k2", QH_DTYPE_UINT8, 3,
                                (int64_t[]){INT64_C(1) << 21, INT64_C(1) << 21, INT64_C(1) << 21},
                                bytes, 8, &out),
         QH_ERR_INVALID_ARGUMENT, "graph_add_constant", NULL);
  expect(api.graph_add_constant(g, "k2", QH_DTYPE_UINT8, 1, (int64_t[]){8}, NULL, 8, &out),
         QH_ERR_INVALID_ARGUMENT, "data is NULL", NULL);
  expect(api.graph_add_constant(g, "k2", 99, 1, (int64_t[]){4}, bytes, 8, &out),
         QH_ERR_INVALID_ARGUMENT, "dtype 99", NULL);
  expect(api.graph_add_constant(g, "w", QH_DTYPE_UINT8, 1, (int64_t[]){8}, bytes, 8, &out),
         QH_ERR_INVALID_ARGUMENT, "value 'w' already exists", NULL);
  expect(api.graph_add_constant(g, "k2", QH_DTYPE_UINT8, 1, (int64_t[]){8}, bytes, 8, NULL),
         QH_ERR_INVALID_ARGUMENT, "out_value is NULL", NULL);
  expect(api.graph_add_value(g, "x", &out), QH_ERR_INVALID_ARGUMENT, "value 'x' already exists",
         NULL);
  expect(api.graph_add_value(g, "", &out), QH_ERR_INVALID_ARGUMENT, "non-empty UTF-8", NULL);
  expect(api.graph_add_value(g, "\xff", &out), QH_ERR_INVALID_ARGUMENT, "UTF-8", NULL);
  uint32_t fresh = v2; /* no producer since its node was removed */
  expect(api.graph_add_node(g, "Relu", "", NULL, (uint32_t[]){3}, 1, (uint32_t[]){2}, 1, &out),
         QH_ERR_INVALID_ARGUMENT, "outputs[0] 'c' already has a producer", NULL);
  expect(api.graph_add_node(g, "Relu", "", NULL, (uint32_t[]){3}, 1, (uint32_t[]){1}, 1, &out),
         QH_ERR_INVALID_ARGUMENT, "is a constant or graph input", NULL);
  expect(api.graph_add_node(g, "Add", "", NULL, (uint32_t[]){3, 3}, 2, (uint32_t[]){fresh, fresh},
                            2, &out),
         QH_ERR_INVALID_ARGUMENT, "listed twice", NULL);
  expect(api.graph_add_node(g, "Relu", "", NULL, (uint32_t[]){500}, 1, &fresh, 1, &out),
         QH_ERR_INVALID_ARGUMENT, "inputs[0] 500 is not a value id", NULL);
  expect(api.graph_add_node(g, "Relu", "", NULL, (uint32_t[]){3}, 1, (uint32_t[]){QH_INVALID_ID},
                            1, &out),
         QH_ERR_INVALID_ARGUMENT, "is not a value id", NULL);
  expect(api.graph_add_node(g, NULL, "", NULL, (uint32_t[]){3}, 1, &fresh, 1, &out),
         QH_ERR_INVALID_ARGUMENT, "op_type", NULL);
  expect(api.graph_add_node(g, "Relu", "", "relu", (uint32_t[]){3}, 1, &fresh, 1, &out),
         QH_ERR_INVALID_ARGUMENT, "a node named 'relu' already exists", NULL);
  expect(api.graph_add_node(g, "Relu", "", NULL, NULL, 1, &fresh, 1, &out),
         QH_ERR_INVALID_ARGUMENT, "inputs is NULL", NULL);
  expect(api.graph_add_node(g, "Relu", "", NULL, (uint32_t[]){3}, 1, NULL, 0, &out),
         QH_ERR_INVALID_ARGUMENT, "at least one output", NULL);
  expect(api.node_set_input(g, 1, 1, 3), QH_ERR_INVALID_ARGUMENT, "slot 1 is out of range",
         "node 'relu' (Relu)");
  expect(api.node_set_input(g, 1, 0, 900), QH_ERR_INVALID_ARGUMENT, "value 900 is not a value id",
         "node 'relu' (Relu)");
  expect(api.node_set_input(g, 1, 0, 3), QH_ERR_INVALID_ARGUMENT, "output of the node itself",
         "node 'relu' (Relu)");
  expect(api.node_set_input(g, 2, 0, 3), QH_ERR_INVALID_ARGUMENT, "node 2 was removed",
         "node 'dead' (Relu)");
  expect(api.value_replace_uses(g, 3, QH_INVALID_ID), QH_ERR_INVALID_ARGUMENT,
         "new_value 4294967295 is not a value id", NULL);
  expect(api.node_set_attr_int(g, 0, NULL, 1), QH_ERR_INVALID_ARGUMENT, "name must be", NULL);
  expect(api.node_set_attr_int(g, 0, "", 1), QH_ERR_INVALID_ARGUMENT, "name must be", NULL);
  expect(api.node_set_attr_string(g, 0, "s", NULL), QH_ERR_INVALID_ARGUMENT, "value is NULL", NULL);
  expect(api.node_set_attr_ints(g, 0, "p", NULL, 2), QH_ERR_INVALID_ARGUMENT, "values", NULL);
  g_assert_cmpuint(out, ==, 4242);
  g_assert_cmpuint(graph->values->len, ==, n_values);
  g_assert_cmpuint(graph->nodes->len, ==, n_nodes);
  g_assert_cmpuint(api.node_input(g, 1, 0), ==, 2);
  assert_topo_ok(graph);
  /* 16-bit constants (int16 activations' zero points) are held since issue 22 */
  g_assert_null(api.graph_add_constant(g, "k16", QH_DTYPE_INT16, 1, (int64_t[]){4}, bytes, 8, &out));
  g_assert_cmpint(qh_graph_value(graph, (int)out)->initializer->dtype, ==, QH_DTYPE_S16);
  /* Narrowed between callbacks: the same view may no longer rewrite. */
  qh_graph_view_set_permissions(g, QH_VIEW_ANNOTATE);
  expect(api.node_remove(g, 0), QH_ERR_INVALID_STATE, "transform_for_annotation", NULL);
  qh_graph_view_free(g);
  qh_graph_free(graph);
}

static QhQuantSpec act_spec(void) {
  QhQuantSpec s = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                   .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE, .ch_axis = -1};
  return s;
}

static QhStatus *derive_nothing(void *user_data, const QhHostApi *host,
                                const QhQParams *const *sources, size_t n_sources, QhQParams *out) {
  (void)user_data, (void)host, (void)sources, (void)n_sources, (void)out;
  return NULL;
}

/* A spec refused by annotation_set_input_spec on conv's input `slot` with a message
 * containing text; the stored spec (if any) stays what it was. */
static void refused(QhGraphView *g, uint32_t slot, const QhQuantSpec *s, int32_t code,
                    const char *text) {
  QhEdgeRef e = {0, slot, QH_EDGE_INPUT, 0};
  int32_t before = api.annotation_spec_kind(g, &e);
  expect(api.annotation_set_input_spec(g, 0, slot, s), code, text, "node 'conv' (Conv)");
  g_assert_cmpint(api.annotation_spec_kind(g, &e), ==, before);
}

static void test_annotate(void) {
  QhGraph *graph = build();
  QhGraphView *g = qh_graph_view_new(graph, QH_VIEW_ANNOTATE);
  QhQuantSpec s = act_spec();
  expect(api.annotation_set_input_spec(g, 0, 0, &s), QH_ERR_INVALID_STATE,
         "no annotation is being collected", NULL);
  QhAnnotationSet *set = qh_annotation_set_new();
  qh_graph_view_set_annotations(g, set);
  g_assert_null(api.annotation_set_input_spec(g, 0, 0, &s));
  QhEdgeRef e00 = {0, 0, QH_EDGE_INPUT, 0};
  g_assert_cmpint(api.annotation_spec_kind(g, &e00), ==, QH_SPEC_QUANTIZE);
  g_assert_null(api.annotation_set_output_spec(g, 0, 0, &s));
  QhEdgeRef out0 = {0, 0, QH_EDGE_OUTPUT, 0};
  g_assert_cmpint(api.annotation_spec_kind(g, &out0), ==, QH_SPEC_QUANTIZE);
  g_assert_cmpint(api.annotation_spec_kind(g, NULL), ==, 0);
  QhEdgeRef bad_edge = {0, 0, 7, 0};
  g_assert_cmpint(api.annotation_spec_kind(g, &bad_edge), ==, 0);

  QhQuantSpec r = act_spec();
  r.flags = QH_SPEC_HAS_RANGE, r.quant_min = -200, r.quant_max = 100;
  QhStatus *st = api.annotation_set_input_spec(g, 0, 0, &r);
  g_assert_nonnull(st);
  g_assert_cmpstr(st->message, ==,
                  "annotation_set_input_spec: spec.quant_min -200 is outside the range of uint8 [0, 255]");
  g_assert_cmpstr(st->node, ==, "node 'conv' (Conv)");
  g_assert_cmpint(st->code, ==, QH_ERR_INVALID_ARGUMENT);
  qh_status_free(st);
  r.quant_min = 10, r.quant_max = 5;
  refused(g, 0, &r, QH_ERR_INVALID_ARGUMENT, "spec.quant_min 10 is greater than spec.quant_max 5");
  r.dtype = QH_DTYPE_INT8, r.quant_min = -128, r.quant_max = 128;
  refused(g, 0, &r, QH_ERR_INVALID_ARGUMENT, "spec.quant_max 128 is outside the range of int8");

  QhQuantSpec f = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_FIXED, .dtype = QH_DTYPE_UINT8,
                   .ch_axis = -1, .scale = 1.0f / 256.0f, .zero_point = 0};
  const float bad_scales[] = {0.0f, -1.0f, NAN, INFINITY, 1e-40f};
  for (gsize i = 0; i < G_N_ELEMENTS(bad_scales); i++) {
    f.scale = bad_scales[i];
    refused(g, 0, &f, QH_ERR_INVALID_ARGUMENT, "spec.scale");
  }
  f.scale = 0.5f, f.zero_point = 256;
  refused(g, 0, &f, QH_ERR_INVALID_ARGUMENT, "spec.zero_point 256 is outside the quantized range [0, 255]");
  f.flags = QH_SPEC_HAS_RANGE, f.quant_min = 0, f.quant_max = 127, f.zero_point = 128;
  refused(g, 0, &f, QH_ERR_INVALID_ARGUMENT, "spec.zero_point 128");
  f.zero_point = 64;
  g_assert_null(api.annotation_set_input_spec(g, 0, 0, &f)); /* replaces the QUANTIZE spec */
  g_assert_cmpint(api.annotation_spec_kind(g, &e00), ==, QH_SPEC_FIXED);

  QhQuantSpec w = act_spec();
  w.dtype = QH_DTYPE_INT8, w.qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC, w.ch_axis = 4;
  w.observer = "PerChannelMinMaxObserver";
  refused(g, 1, &w, QH_ERR_INVALID_ARGUMENT, "spec.ch_axis 4 is outside [0, 4) for value 'w'");
  w.ch_axis = -1;
  refused(g, 1, &w, QH_ERR_INVALID_ARGUMENT, "spec.ch_axis -1");
  w.ch_axis = 0, w.observer = "MinMaxObserver";
  refused(g, 1, &w, QH_ERR_INVALID_ARGUMENT, "does not match spec.qscheme");
  w.observer = "VendorObserver";
  refused(g, 1, &w, QH_ERR_INVALID_ARGUMENT, "spec.observer 'VendorObserver' is not a known observer");
  qh_annotation_set_add_observer(set, "VendorObserver");
  g_assert_null(api.annotation_set_input_spec(g, 0, 1, &w));
  QhQuantSpec pt = act_spec();
  pt.ch_axis = 0;
  refused(g, 0, &pt, QH_ERR_INVALID_ARGUMENT, "spec.ch_axis 0 must be -1 for a per-tensor qscheme");

  QhQuantSpec d = act_spec();
  d.flags = QH_SPEC_IS_DYNAMIC;
  refused(g, 0, &d, QH_ERR_UNSUPPORTED, "dynamic quantization is not supported");
  d.flags = 0x100;
  refused(g, 0, &d, QH_ERR_INVALID_ARGUMENT, "spec.flags 0x100 has unknown bits 0x100");
  d = act_spec();
  d.flags = QH_SPEC_HAS_EPS, d.eps = 0.0f;
  refused(g, 0, &d, QH_ERR_INVALID_ARGUMENT, "spec.eps 0 must be > 0 and finite");
  d = act_spec();
  d.struct_size = 8;
  refused(g, 0, &d, QH_ERR_INVALID_ARGUMENT, "spec.struct_size 8 is outside");
  d = act_spec();
  d.kind = 42;
  refused(g, 0, &d, QH_ERR_INVALID_ARGUMENT, "spec.kind 42 is not a QH_SPEC_* value");
  d = act_spec();
  d.dtype = QH_DTYPE_FLOAT;
  refused(g, 0, &d, QH_ERR_INVALID_ARGUMENT, "spec.dtype 1 is not a quantized type");
  d.qscheme = 9, d.dtype = QH_DTYPE_UINT8;
  refused(g, 0, &d, QH_ERR_INVALID_ARGUMENT, "spec.qscheme 9");
  refused(g, 0, NULL, QH_ERR_INVALID_ARGUMENT, "spec is NULL");
  refused(g, 2, &s, QH_ERR_INVALID_ARGUMENT, "input 2 of node 'conv' (Conv) is omitted");
  refused(g, 3, &s, QH_ERR_INVALID_ARGUMENT, "edge.slot 3 is out of range");
  expect(api.annotation_set_output_spec(g, 2, 0, &s), QH_ERR_INVALID_ARGUMENT, "node 2 was removed",
         "node 'dead' (Relu)");
  expect(api.annotation_set_output_spec(g, 9, 0, &s), QH_ERR_INVALID_ARGUMENT,
         "annotation_set_output_spec: node 9 is not a node id", NULL);
  expect(api.annotation_set_output_spec(NULL, 0, 0, &s), QH_ERR_INVALID_ARGUMENT,
         "graph is not a graph handle", NULL);

  QhQuantSpec sh = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_SHARED,
                    .shared_with = {9, 0, QH_EDGE_OUTPUT, 0}};
  refused(g, 0, &sh, QH_ERR_INVALID_ARGUMENT, "spec.shared_with.node 9 is not a node id");
  sh.shared_with = (QhEdgeRef){QH_INVALID_ID, 0, QH_EDGE_OUTPUT, 0};
  refused(g, 0, &sh, QH_ERR_INVALID_ARGUMENT, "QH_INVALID_ID");
  QhEdgeRef sources[] = {{0, 0, QH_EDGE_INPUT, 0}, {99, 0, QH_EDGE_OUTPUT, 0}};
  QhQuantSpec dv = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_DERIVED, .dtype = QH_DTYPE_INT32,
                    .ch_axis = -1, .derived_from = sources, .n_derived_from = 2,
                    .derive = derive_nothing};
  expect(api.annotation_set_output_spec(g, 3, 0, &dv), QH_ERR_INVALID_ARGUMENT,
         "spec.derived_from[1].node 99 is not a node id", "node 'add' (Add)");
  dv.n_derived_from = 1, dv.derive = NULL;
  expect(api.annotation_set_output_spec(g, 3, 0, &dv), QH_ERR_INVALID_ARGUMENT, "spec.derive is NULL",
         "node 'add' (Add)");
  dv.derive = derive_nothing;
  g_assert_null(api.annotation_set_output_spec(g, 3, 0, &dv));

  g_assert_null(api.annotation_set_node_flags(g, 1, QH_ANNOTATION_ANNOTATED));
  g_assert_cmpuint(api.annotation_node_flags(g, 1), ==, QH_ANNOTATION_ANNOTATED);
  g_assert_cmpuint(api.annotation_node_flags(g, 0), ==, 0);
  g_assert_cmpuint(api.annotation_node_flags(g, 77), ==, 0);
  expect(api.annotation_set_node_flags(g, 1, 0x8), QH_ERR_INVALID_ARGUMENT, "unknown bits 0x8",
         "node 'relu' (Relu)");
  g_assert_cmpuint(api.annotation_node_flags(g, 1), ==, QH_ANNOTATION_ANNOTATED);
  g_assert_cmpuint(qh_annotation_set_n_specs(set), ==, 4);
  /* Outside annotate the readers still answer; the writers refuse. */
  qh_graph_view_set_permissions(g, QH_VIEW_READ);
  g_assert_cmpint(api.annotation_spec_kind(g, &e00), ==, QH_SPEC_FIXED);
  expect(api.annotation_set_node_flags(g, 1, 0), QH_ERR_INVALID_STATE,
         "annotation_set_node_flags may only be called from annotate", NULL);
  qh_graph_view_free(g);
  qh_annotation_set_free(set);
  qh_graph_free(graph);
}

/* conv: activation from the user, weight from the backend; relu excluded; add has
 * no entry; anything else fails. */
static const QhOption hist_args[] = {{"bins", "2048"}};

static gboolean qconfig_hook(gpointer user_data, const QhGraph *graph, uint32_t node, int32_t role,
                             QhQuantSpec *out, int32_t *out_source, GError **error) {
  (void)graph;
  *(int *)user_data += 1;
  switch (node) {
  case 0:
    *out = act_spec();
    out->observer = role == QH_ROLE_ACTIVATION ? "HistogramObserver" : "PerChannelMinMaxObserver";
    out->observer_args = hist_args;
    out->n_observer_args = 1;
    *out_source = role == QH_ROLE_ACTIVATION ? QH_QCONFIG_USER : QH_QCONFIG_BACKEND_DEFAULT;
    return TRUE;
  case 1: *out_source = QH_QCONFIG_EXCLUDED; return TRUE;
  case 3: *out_source = 0; return TRUE;
  default:
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "no such node in the mapping");
    return FALSE;
  }
}

static void test_qconfig(void) {
  QhGraph *graph = build();
  QhGraphView *g = qh_graph_view_new(graph, QH_VIEW_ANNOTATE);
  QhQuantSpec out = {QH_STRUCT_HEADER(QhQuantSpec), .kind = -9};
  int32_t source = -9;
  expect(api.qconfig_for_node(g, 0, QH_ROLE_ACTIVATION, &out, &source), QH_ERR_NOT_FOUND,
         "no qconfig mapping", "node 'conv' (Conv)");
  int calls = 0;
  qh_graph_view_set_qconfig_hook(g, qconfig_hook, &calls);
  g_assert_null(api.qconfig_for_node(g, 0, QH_ROLE_ACTIVATION, &out, &source));
  g_assert_cmpint(source, ==, QH_QCONFIG_USER);
  g_assert_cmpint(out.kind, ==, QH_SPEC_QUANTIZE);
  g_assert_cmpstr(out.observer, ==, "HistogramObserver");
  g_assert_cmpstr(out.observer_args[0].value, ==, "2048");
  g_assert_cmpuint(out.struct_size, ==, sizeof out);
  g_assert_null(api.qconfig_for_node(g, 0, QH_ROLE_WEIGHT, &out, &source));
  g_assert_cmpint(source, ==, QH_QCONFIG_BACKEND_DEFAULT);
  g_assert_cmpstr(out.observer, ==, "PerChannelMinMaxObserver");
  QhQuantSpec untouched = {QH_STRUCT_HEADER(QhQuantSpec), .kind = -9};
  g_assert_null(api.qconfig_for_node(g, 1, QH_ROLE_ACTIVATION, &untouched, &source));
  g_assert_cmpint(source, ==, QH_QCONFIG_EXCLUDED);
  g_assert_cmpint(untouched.kind, ==, -9);
  source = -9;
  expect(api.qconfig_for_node(g, 3, QH_ROLE_WEIGHT, &untouched, &source), QH_ERR_NOT_FOUND,
         "no weight entry", "node 'add' (Add)");
  g_assert_cmpint(calls, ==, 4);
  expect(api.qconfig_for_node(g, 2, QH_ROLE_WEIGHT, &untouched, &source), QH_ERR_INVALID_ARGUMENT,
         "node 2 was removed", "node 'dead' (Relu)");
  expect(api.qconfig_for_node(g, 0, QH_ROLE_BIAS, &untouched, &source), QH_ERR_INVALID_ARGUMENT,
         "role 2", NULL);
  expect(api.qconfig_for_node(g, 0, QH_ROLE_WEIGHT, NULL, &source), QH_ERR_INVALID_ARGUMENT,
         "out_spec is NULL", NULL);
  untouched.struct_size = 16;
  expect(api.qconfig_for_node(g, 0, QH_ROLE_WEIGHT, &untouched, &source), QH_ERR_INVALID_ARGUMENT,
         "out_spec.abi_version", NULL);
  g_assert_cmpint(calls, ==, 4); /* refused before the hook */
  qh_graph_view_free(g);
  qh_graph_free(graph);
}

/* The quantization state of the qparams tests: conv's output is quantized. */
typedef struct {
  float scale[2];
  int32_t zero_point[2];
  size_t set_count;
  float set_scale0;
  char *reason;
} QState;

static gboolean qp_get(gpointer user_data, const QhGraph *graph, const QhEdgeRef *edge,
                       QhQParams *out, gboolean *out_found, GError **error) {
  (void)graph, (void)error;
  QState *q = user_data;
  *out_found = edge->node == 0 && edge->kind == QH_EDGE_OUTPUT;
  if (*out_found) {
    out->dtype = QH_DTYPE_UINT8, out->qscheme = QH_QSCHEME_PER_TENSOR_AFFINE;
    out->quant_min = 0, out->quant_max = 255, out->ch_axis = -1, out->count = 1;
    out->scale = q->scale, out->zero_point = q->zero_point;
  }
  return TRUE;
}

static gboolean qp_set(gpointer user_data, QhGraph *graph, const QhEdgeRef *edge,
                       const QhQParams *qparams, const char *reason, GError **error) {
  (void)graph, (void)edge, (void)error;
  QState *q = user_data;
  q->set_count = qparams->count;
  q->set_scale0 = qparams->scale[0];
  g_free(q->reason);
  q->reason = g_strdup(reason);
  return TRUE;
}

static void test_qparams(void) {
  QhGraph *graph = build();
  QhGraphView *g = qh_graph_view_new(graph, QH_VIEW_QPARAMS_READ | QH_VIEW_QPARAMS_WRITE);
  QState q = {{0.25f, 1.0f}, {128, 0}, 0, 0, NULL};
  QhEdgeRef conv_out = {0, 0, QH_EDGE_OUTPUT, 0}, weight = {0, 1, QH_EDGE_INPUT, 0};
  QhQParams got = {QH_STRUCT_HEADER(QhQParams), .dtype = -1};
  expect(api.qparams_get(g, &conv_out, &got), QH_ERR_NOT_FOUND, "output 0 of node 'conv' (Conv) is not quantized",
         "node 'conv' (Conv)");
  qh_graph_view_set_qparams_hooks(g, qp_get, qp_set, &q);
  g_assert_null(api.qparams_get(g, &conv_out, &got));
  g_assert_cmpint(got.dtype, ==, QH_DTYPE_UINT8);
  g_assert_cmpuint(got.count, ==, 1);
  g_assert_cmpfloat(got.scale[0], ==, 0.25f);
  g_assert_cmpint(got.zero_point[0], ==, 128);
  QhQParams miss = {QH_STRUCT_HEADER(QhQParams), .dtype = -1};
  expect(api.qparams_get(g, &weight, &miss), QH_ERR_NOT_FOUND, "input 1 of node 'conv' (Conv) is not quantized",
         "node 'conv' (Conv)");
  miss.struct_size = 4;
  expect(api.qparams_get(g, &conv_out, &miss), QH_ERR_INVALID_ARGUMENT, "out.abi_version", NULL);
  expect(api.qparams_get(g, &conv_out, NULL), QH_ERR_INVALID_ARGUMENT, "out is NULL", NULL);
  QhEdgeRef removed = {2, 0, QH_EDGE_OUTPUT, 0};
  expect(api.qparams_get(g, &removed, &miss), QH_ERR_INVALID_ARGUMENT, "edge.node 2", NULL);
  g_assert_cmpint(miss.dtype, ==, -1);

  float scales[3] = {0.5f, 0.25f, 0.125f};
  int32_t zps[3] = {0, 0, 0};
  QhQParams pc = {QH_STRUCT_HEADER(QhQParams), .dtype = QH_DTYPE_INT8,
                  .qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC, .quant_min = -127, .quant_max = 127,
                  .ch_axis = 0, .count = 2, .capacity = 2, .scale = scales, .zero_point = zps};
  g_assert_null(api.qparams_set(g, &weight, &pc, "weights must be symmetric"));
  g_assert_cmpuint(q.set_count, ==, 2);
  g_assert_cmpfloat(q.set_scale0, ==, 0.5f);
  g_assert_cmpstr(q.reason, ==, "weights must be symmetric");
  q.set_count = 0;
  pc.count = 3;
  expect(api.qparams_set(g, &weight, &pc, "r"), QH_ERR_INVALID_ARGUMENT,
         "qparams.count 3 does not match dimension 0 (2) of value 'w'", "node 'conv' (Conv)");
  pc.count = 2, scales[1] = NAN;
  expect(api.qparams_set(g, &weight, &pc, "r"), QH_ERR_INVALID_ARGUMENT,
         "qparams.scale[1] nan must be > 0 and finite", "node 'conv' (Conv)");
  scales[1] = -0.5f;
  expect(api.qparams_set(g, &weight, &pc, "r"), QH_ERR_INVALID_ARGUMENT, "qparams.scale[1]", "node 'conv' (Conv)");
  scales[1] = 0.25f, zps[1] = 200;
  expect(api.qparams_set(g, &weight, &pc, "r"), QH_ERR_INVALID_ARGUMENT,
         "qparams.zero_point[1] 200 is outside [-127, 127]", "node 'conv' (Conv)");
  zps[1] = 0, pc.ch_axis = 4;
  expect(api.qparams_set(g, &weight, &pc, "r"), QH_ERR_INVALID_ARGUMENT, "qparams.ch_axis 4", "node 'conv' (Conv)");
  pc.ch_axis = 0, pc.quant_min = -200;
  expect(api.qparams_set(g, &weight, &pc, "r"), QH_ERR_INVALID_ARGUMENT, "inside int8", "node 'conv' (Conv)");
  pc.quant_min = -127, pc.dtype = QH_DTYPE_FLOAT;
  expect(api.qparams_set(g, &weight, &pc, "r"), QH_ERR_INVALID_ARGUMENT, "qparams.dtype 1", "node 'conv' (Conv)");
  pc.dtype = QH_DTYPE_INT8, pc.scale = NULL;
  expect(api.qparams_set(g, &weight, &pc, "r"), QH_ERR_INVALID_ARGUMENT, "non-NULL scale", "node 'conv' (Conv)");
  pc.scale = scales;
  expect(api.qparams_set(g, &weight, &pc, NULL), QH_ERR_INVALID_ARGUMENT, "reason is NULL", NULL);
  QhQParams pt = {QH_STRUCT_HEADER(QhQParams), .dtype = QH_DTYPE_UINT8, .quant_max = 255,
                  .ch_axis = -1, .count = 2, .scale = scales, .zero_point = zps};
  expect(api.qparams_set(g, &conv_out, &pt, "r"), QH_ERR_INVALID_ARGUMENT,
         "must be 1 and -1 for a per-tensor qscheme", "node 'conv' (Conv)");
  g_assert_cmpuint(q.set_count, ==, 0);
  pt.count = 1;
  g_assert_null(api.qparams_set(g, &conv_out, &pt, "r"));
  g_assert_cmpuint(q.set_count, ==, 1);
  qh_graph_view_set_permissions(g, QH_VIEW_QPARAMS_READ);
  expect(api.qparams_set(g, &conv_out, &pt, "r"), QH_ERR_INVALID_STATE,
         "qparams_set may only be called from refine", NULL);
  g_free(q.reason);
  qh_graph_view_free(g);
  qh_graph_free(graph);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  qh_host_api_fill_graph(&api);
  qh_host_api_fill_quant(&api);
  g_test_add_func("/host-graph/fill", test_fill);
  g_test_add_func("/host-graph/queries", test_queries);
  g_test_add_func("/host-graph/invalid-queries", test_invalid_queries);
  g_test_add_func("/host-graph/rewrites", test_rewrites);
  g_test_add_func("/host-graph/annotate", test_annotate);
  g_test_add_func("/host-graph/qconfig", test_qconfig);
  g_test_add_func("/host-graph/qparams", test_qparams);
  g_test_add_func("/host-graph/passes-and-metadata", test_passes_and_metadata);
  return g_test_run();
}
