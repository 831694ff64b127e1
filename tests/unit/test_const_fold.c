/* Unit tests of the constant folding before annotation (quant/const-fold.c): Identity
 * nodes of a shared initializer become per-consumer initializers under their own names
 * (a value read twice is split), ops on Constant nodes fold and the unread Constant
 * goes, the shared original loses its data, while Shape of a graph input, a node
 * writing a graph output, and any graph whose inputs declare no shape stay as they are. */
#include <string.h>

#include "core/error.h"
#include "quant/const-fold.h"

static QhValue *value(QhGraph *g, const char *name) {
  GError *error = NULL;
  QhValue *v = qh_graph_add_value(g, name, &error);
  g_assert_no_error(error);
  return v;
}

static QhTensor *vec4(float a, float b, float c, float d) {
  QhShape s = qh_shape_make(1, (int64_t[]){4});
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  float *p = t->data;
  p[0] = a, p[1] = b, p[2] = c, p[3] = d;
  return t;
}

static QhNode *node(QhGraph *g, const char *name, const char *op, int n_in, const int *in, int out) {
  GError *error = NULL;
  QhNode *n = qh_graph_add_node(g, name, op, "", n_in, in, 1, &out, &error);
  g_assert_no_error(error);
  return n;
}

static void assert_vec(const QhValue *v, const float *want) {
  g_assert_nonnull(v->initializer);
  g_assert_cmpint(qh_tensor_numel(v->initializer), ==, 4);
  g_assert_true(memcmp(v->initializer->data, want, 4 * sizeof(float)) == 0);
}

/* x[1,4] -> Add(vb1) -> Add(vb2) -> Add(vb2) -> Add(vn) -> y; vb1, vb2 = Identity(b);
 * vn = Mul(Constant, b2); s = Shape(x); z = Identity(b2) is a graph output. */
static void test_identity_and_constants(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = value(g, "x");
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = qh_shape_make(2, (int64_t[]){1, 4});
  g_array_append_val(g->inputs, x->id);
  QhValue *b = value(g, "b"), *b2 = value(g, "b2");
  qh_value_set_initializer(b, vec4(1, 2, 3, 4));
  qh_value_set_initializer(b2, vec4(5, 6, 7, 8));
  int vb1 = value(g, "vb1")->id, vb2 = value(g, "vb2")->id, vc = value(g, "vc")->id, vn = value(g, "vn")->id;
  int y1 = value(g, "y1")->id, y2 = value(g, "y2")->id, y3 = value(g, "y3")->id, y = value(g, "y")->id;
  int s = value(g, "s")->id, z = value(g, "z")->id;
  int bid = b->id, b2id = b2->id, xid = x->id;
  QhNode *id1 = node(g, "id1", "Identity", 1, &bid, vb1);
  QhNode *id2 = node(g, "id2", "Identity", 1, &bid, vb2);
  QhNode *c = node(g, "c", "Constant", 0, NULL, vc);
  qh_node_set_attr_tensor(c, "value", vec4(-1, -2, -3, -4));
  QhNode *mul = node(g, "mul", "Mul", 2, (int[]){vc, b2id}, vn);
  node(g, "add1", "Add", 2, (int[]){xid, vb1}, y1);
  QhNode *add2 = node(g, "add2", "Add", 2, (int[]){y1, vb2}, y2);
  QhNode *add3 = node(g, "add3", "Add", 2, (int[]){y2, vb2}, y3);
  node(g, "add4", "Add", 2, (int[]){y3, vn}, y);
  QhNode *shape = node(g, "shape", "Shape", 1, &xid, s);
  QhNode *out_id = node(g, "out_id", "Identity", 1, &b2id, z);
  qh_graph_value(g, y)->is_output = qh_graph_value(g, z)->is_output = TRUE;
  g_array_append_val(g->outputs, y);
  g_array_append_val(g->outputs, z);

  GError *error = NULL;
  int folded = -1;
  g_assert_true(qh_quant_fold_constants(g, &folded, &error));
  g_assert_no_error(error);
  g_assert_cmpint(folded, ==, 3);
  g_assert_true(id1->is_removed && id2->is_removed && mul->is_removed);
  g_assert_true(c->is_removed); /* nothing reads its output any more */
  g_assert_false(shape->is_removed || out_id->is_removed);
  const float one_to_four[4] = {1, 2, 3, 4}, product[4] = {-5, -12, -21, -32}; /* Constant * b2 */
  assert_vec(qh_graph_value(g, vb1), one_to_four);
  assert_vec(qh_graph_value(g, vb2), one_to_four);
  assert_vec(qh_graph_value(g, vn), product);
  g_assert_cmpint(qh_graph_value(g, vb1)->producer, ==, -1);
  /* vb2 had two readers: add2 keeps it, add3 gets its own copy */
  g_assert_cmpint(add2->inputs[1], ==, vb2);
  const QhValue *copy = qh_graph_value(g, add3->inputs[1]);
  g_assert_cmpstr(copy->name, ==, "vb2_1");
  assert_vec(copy, one_to_four);
  g_assert_true(copy->initializer != qh_graph_value(g, vb2)->initializer);
  /* the shared original is read by nobody: no data left to write */
  g_assert_null(qh_graph_value(g, bid)->initializer);
  g_assert_nonnull(qh_graph_value(g, b2id)->initializer);
  GArray *order = NULL;
  g_assert_true(qh_graph_topo_order(g, &order, &error));
  g_array_unref(order);
  qh_graph_free(g);
}

/* An input without a declared shape: nothing can be planned, nothing is folded. */
static void test_unplannable_left_alone(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = value(g, "x");
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  g_array_append_val(g->inputs, x->id);
  QhValue *b = value(g, "b");
  qh_value_set_initializer(b, vec4(1, 2, 3, 4));
  int vb = value(g, "vb")->id, y = value(g, "y")->id, bid = b->id, xid = x->id;
  QhNode *id = node(g, "id", "Identity", 1, &bid, vb);
  node(g, "add", "Add", 2, (int[]){xid, vb}, y);
  qh_graph_value(g, y)->is_output = TRUE;
  g_array_append_val(g->outputs, y);
  GError *error = NULL;
  int folded = -1;
  g_assert_true(qh_quant_fold_constants(g, &folded, &error));
  g_assert_no_error(error);
  g_assert_cmpint(folded, ==, 0);
  g_assert_false(id->is_removed);
  g_assert_nonnull(qh_graph_value(g, bid)->initializer);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/const-fold/identity-and-constants", test_identity_and_constants);
  g_test_add_func("/const-fold/unplannable-left-alone", test_unplannable_left_alone);
  return g_test_run();
}
