/* Unit tests of the graph IR: ids, attributes, topological order, cycles and
 * dangling inputs. */
#include <string.h>

#include "core/error.h"
#include "core/graph.h"

static QhGraph *chain(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  g_array_append_val(g->inputs, x->id);
  int a = qh_graph_add_value(g, "a", NULL)->id;
  int b = qh_graph_add_value(g, "b", NULL)->id;
  /* added out of order on purpose: the consumer first */
  int in1[] = {a}, out1[] = {b};
  g_assert_nonnull(qh_graph_add_node(g, "second", "Relu", "", 1, in1, 1, out1, NULL));
  int in0[] = {x->id}, out0[] = {a};
  g_assert_nonnull(qh_graph_add_node(g, "first", "Relu", "", 1, in0, 1, out0, NULL));
  g_array_append_val(g->outputs, b);
  return g;
}

static void test_topo_order(void) {
  QhGraph *g = chain();
  GArray *order = NULL;
  GError *error = NULL;
  g_assert_true(qh_graph_topo_order(g, &order, &error));
  g_assert_no_error(error);
  g_assert_cmpint(order->len, ==, 2);
  g_assert_cmpint(g_array_index(order, int, 0), ==, 1);
  g_assert_cmpint(g_array_index(order, int, 1), ==, 0);
  g_array_unref(order);
  qh_graph_free(g);
}

static void test_cycle(void) {
  QhGraph *g = qh_graph_new();
  int a = qh_graph_add_value(g, "a", NULL)->id;
  int b = qh_graph_add_value(g, "b", NULL)->id;
  int ia[] = {b}, oa[] = {a}, ib[] = {a}, ob[] = {b};
  qh_graph_add_node(g, "n0", "Relu", "", 1, ia, 1, oa, NULL);
  qh_graph_add_node(g, "n1", "Relu", "", 1, ib, 1, ob, NULL);
  GArray *order = NULL;
  GError *error = NULL;
  g_assert_false(qh_graph_topo_order(g, &order, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "cycle"));
  g_error_free(error);
  qh_graph_free(g);
}

static void test_dangling_input(void) {
  QhGraph *g = qh_graph_new();
  int a = qh_graph_add_value(g, "ghost", NULL)->id;
  int b = qh_graph_add_value(g, "b", NULL)->id;
  int in[] = {a}, out[] = {b};
  qh_graph_add_node(g, "n0", "Relu", "", 1, in, 1, out, NULL);
  GArray *order = NULL;
  GError *error = NULL;
  g_assert_false(qh_graph_topo_order(g, &order, &error));
  g_assert_nonnull(strstr(error->message, "'ghost' is not produced"));
  g_error_free(error);
  qh_graph_free(g);
}

static void test_duplicate_producer(void) {
  QhGraph *g = chain();
  int in[] = {0}, out[] = {qh_graph_find_value(g, "b")};
  GError *error = NULL;
  g_assert_null(qh_graph_add_node(g, "again", "Relu", "", 1, in, 1, out, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_error_free(error);
  qh_graph_free(g);
}

static void test_attrs_and_removal(void) {
  QhGraph *g = chain();
  QhNode *n = qh_graph_node(g, 0);
  int64_t pads[] = {1, 1, 1, 1};
  qh_node_set_attr_ints(n, "pads", 4, pads);
  qh_node_set_attr_float(n, "alpha", 0.5f);
  qh_node_set_attr_float(n, "alpha", 0.25f); /* replaces */
  int64_t np;
  const int64_t *pv;
  float alpha;
  g_assert_true(qh_node_attr_get_ints(n, "pads", &np, &pv, NULL));
  g_assert_cmpint(np, ==, 4);
  g_assert_true(qh_node_attr_get_float(n, "alpha", 1.0f, &alpha, NULL));
  g_assert_cmpfloat(alpha, ==, 0.25f);
  g_assert_cmpint(n->n_attrs, ==, 2);
  GError *error = NULL;
  int64_t iv;
  g_assert_false(qh_node_attr_get_int(n, "alpha", 0, &iv, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_error_free(error);

  qh_graph_remove_node(g, 1);
  g_assert_cmpint(qh_graph_value(g, qh_graph_find_value(g, "a"))->producer, ==, -1);
  g_assert_cmpint(qh_graph_count_live_nodes(g), ==, 1);
  g_assert_true(qh_graph_node(g, 1)->is_removed);
  qh_graph_free(g);
}

static void test_shape_limits(void) {
  QhShape s = {.rank = 3, .dims = {1 << 20, 1 << 20, 1 << 20}};
  int64_t n;
  GError *error = NULL;
  g_assert_false(qh_shape_numel(&s, &n, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_LIMIT);
  g_clear_error(&error);
  QhShape big = {.rank = 2, .dims = {INT64_MAX, 3}};
  g_assert_false(qh_shape_numel(&big, &n, &error));
  g_clear_error(&error);
  QhShape ok = {.rank = 0};
  g_assert_true(qh_shape_numel(&ok, &n, NULL));
  g_assert_cmpint(n, ==, 1);
}

static void test_f16(void) {
  float vals[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f};
  for (size_t i = 0; i < G_N_ELEMENTS(vals); i++)
    g_assert_cmpfloat(qh_f16_to_f32(qh_f32_to_f16(vals[i])), ==, vals[i]);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/graph/topo_order", test_topo_order);
  g_test_add_func("/graph/cycle", test_cycle);
  g_test_add_func("/graph/dangling_input", test_dangling_input);
  g_test_add_func("/graph/duplicate_producer", test_duplicate_producer);
  g_test_add_func("/graph/attrs_and_removal", test_attrs_and_removal);
  g_test_add_func("/tensor/shape_limits", test_shape_limits);
  g_test_add_func("/dtype/f16", test_f16);
  return g_test_run();
}
