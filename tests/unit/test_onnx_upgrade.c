/* Unit tests of qh_onnx_upgrade_opset (framework/io/onnx-upgrade.c): opset 13 -> 21
 * moves Reduce* axes from the attribute to an int64 initializer input and gives a
 * Split without a split input num_outputs; the result saves and loads back with the
 * same nodes; an op the change table does not know is refused by name with the graph
 * left as it was; a lower or too new target is refused. And the 4-bit types opset 21
 * brings: packed two per byte, low nibble first, on save, unpacked (int4 sign-extended)
 * on load, odd lengths included. */
#include <glib/gstdio.h>
#include <string.h>

#include "core/error.h"
#include "io/onnx.h"

static QhGraph *sample(gboolean with_unknown) {
  QhGraph *g = qh_graph_new();
  const char *names[] = {"x", "m", "a", "b", "y", "c"};
  for (int i = 0; i < 6; i++)
    g_assert_nonnull(qh_graph_add_value(g, names[i], NULL));
  QhValue *x = qh_graph_value(g, 0);
  x->dtype = QH_DTYPE_F32;
  x->shape = qh_shape_make(4, (int64_t[]){1, 4, 3, 3});
  x->is_input = TRUE;
  g_array_append_val(g->inputs, x->id);
  QhNode *rm = qh_graph_add_node(g, "mean", "ReduceMean", "", 1, (int[]){0}, 1, (int[]){1}, NULL);
  qh_node_set_attr_ints(rm, "axes", 2, (int64_t[]){2, 3});
  QhNode *sp = qh_graph_add_node(g, "split", "Split", "", 1, (int[]){1}, 2, (int[]){2, 3}, NULL);
  qh_node_set_attr_int(sp, "axis", 1);
  qh_graph_add_node(g, "add", "Add", "", 2, (int[]){2, 3}, 1, (int[]){4}, NULL);
  int out = 4;
  if (with_unknown) {
    qh_graph_add_node(g, "celu", "Celu", "", 1, (int[]){4}, 1, (int[]){5}, NULL);
    out = 5;
  }
  qh_graph_value(g, out)->is_output = TRUE;
  g_array_append_val(g->outputs, out);
  qh_graph_set_opset(g, "", 13);
  return g;
}

static const QhNode *node_named(const QhGraph *g, const char *name) {
  for (int i = 0; i < qh_graph_n_nodes(g); i++)
    if (strcmp(qh_graph_node(g, i)->name, name) == 0)
      return qh_graph_node(g, i);
  g_error("no node %s", name);
  return NULL;
}

static void check_upgraded(const QhGraph *g) {
  g_assert_cmpint(qh_graph_opset(g, ""), ==, 21);
  const QhNode *rm = node_named(g, "mean");
  g_assert_null(qh_node_attr(rm, "axes"));
  g_assert_cmpint(rm->n_inputs, ==, 2);
  const QhTensor *axes = qh_graph_value(g, rm->inputs[1])->initializer;
  g_assert_nonnull(axes);
  g_assert_cmpint(axes->dtype, ==, QH_DTYPE_S64);
  g_assert_cmpint(qh_tensor_numel(axes), ==, 2);
  g_assert_cmpint(((const int64_t *)axes->data)[0], ==, 2);
  g_assert_cmpint(((const int64_t *)axes->data)[1], ==, 3);
  int64_t num = 0;
  g_assert_true(qh_node_attr_get_int(node_named(g, "split"), "num_outputs", 0, &num, NULL));
  g_assert_cmpint(num, ==, 2);
}

static void test_rewrites_and_reads_back(void) {
  QhGraph *g = sample(FALSE);
  GError *error = NULL;
  g_assert_true(qh_onnx_upgrade_opset(g, 21, &error));
  g_assert_no_error(error);
  check_upgraded(g);
  char *dir = g_dir_make_tmp("qh-upgrade-XXXXXX", NULL);
  char *path = g_build_filename(dir, "m.onnx", NULL);
  g_assert_true(qh_onnx_save(g, path, &error));
  g_assert_no_error(error);
  QhGraph *back = qh_onnx_load(path, &error);
  g_assert_no_error(error);
  check_upgraded(back);
  qh_graph_free(back);
  g_unlink(path);
  g_rmdir(dir);
  g_free(path);
  g_free(dir);
  /* already there: nothing to do */
  g_assert_true(qh_onnx_upgrade_opset(g, 21, &error));
  qh_graph_free(g);
}

static void expect_refused(QhGraph *g, int64_t target, const char *fragment) {
  GError *error = NULL;
  g_assert_false(qh_onnx_upgrade_opset(g, target, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED);
  if (strstr(error->message, fragment) == NULL)
    g_error("message '%s' lacks '%s'", error->message, fragment);
  g_error_free(error);
}

static void test_refusals(void) {
  QhGraph *g = sample(TRUE);
  expect_refused(g, 21, "node 'celu' (Celu): Celu is not known to be unchanged from opset 13 to 21");
  /* refused before any rewrite: the graph is still opset 13's */
  g_assert_cmpint(qh_graph_opset(g, ""), ==, 13);
  g_assert_nonnull(qh_node_attr(node_named(g, "mean"), "axes"));
  g_assert_cmpint(node_named(g, "mean")->n_inputs, ==, 1);
  g_assert_null(qh_node_attr(node_named(g, "split"), "num_outputs"));
  expect_refused(g, 22, "opset 22 was asked for; qhost writes opsets 13 to 21");
  qh_graph_set_opset(g, "", 17);
  expect_refused(g, 13, "opset 13 was asked for but the model imports opset 17");
  /* up to 17 nothing changed its meaning for qhost: any op goes */
  qh_graph_set_opset(g, "", 13);
  g_assert_true(qh_onnx_upgrade_opset(g, 17, NULL));
  g_assert_cmpint(qh_graph_opset(g, ""), ==, 17);
  qh_graph_free(g);
}

static void test_int4_pack(void) {
  const gint8 s4[5] = {-8, 7, -1, 0, 3};
  guint8 packed[3];
  qh_int4_pack((const guint8 *)s4, 5, packed);
  g_assert_cmphex(packed[0], ==, 0x78); /* low nibble -8 (0x8), high 7 */
  g_assert_cmphex(packed[1], ==, 0x0F); /* -1, then 0 */
  g_assert_cmphex(packed[2], ==, 0x03); /* 3, and a zero pad nibble */
  gint8 back[5];
  qh_int4_unpack(packed, 5, QH_DTYPE_S4, (guint8 *)back);
  g_assert_cmpmem(back, 5, s4, 5);
  guint8 u[5];
  qh_int4_unpack(packed, 5, QH_DTYPE_U4, u);
  g_assert_cmpmem(u, 5, ((const guint8[]){8, 7, 15, 0, 3}), 5);

  /* through a file: a 3x3 int4 initializer behind a DequantizeLinear at opset 21 */
  QhGraph *g = qh_graph_new();
  QhValue *w = qh_graph_add_value(g, "w", NULL), *s = qh_graph_add_value(g, "s", NULL);
  QhValue *y = qh_graph_add_value(g, "y", NULL);
  QhShape shape = qh_shape_make(2, (int64_t[]){3, 3});
  QhTensor *wt = qh_tensor_new(QH_DTYPE_S4, &shape, NULL);
  for (int i = 0; i < 9; i++)
    ((gint8 *)wt->data)[i] = (gint8)(i - 8 + 2 * (i % 2));
  qh_value_set_initializer(w, wt);
  QhTensor *st = qh_tensor_new(QH_DTYPE_F32, &(QhShape){0}, NULL);
  *(float *)st->data = 0.5f;
  qh_value_set_initializer(s, st);
  qh_graph_add_node(g, "dq", "DequantizeLinear", "", 2, (int[]){w->id, s->id}, 1, (int[]){y->id}, NULL);
  y->is_output = TRUE;
  y->dtype = QH_DTYPE_F32;
  y->shape = shape;
  g_array_append_val(g->outputs, y->id);
  qh_graph_set_opset(g, "", 21);
  char *dir = g_dir_make_tmp("qh-int4-XXXXXX", NULL);
  char *path = g_build_filename(dir, "w.onnx", NULL);
  GError *error = NULL;
  g_assert_true(qh_onnx_save(g, path, &error));
  g_assert_no_error(error);
  QhGraph *back_g = qh_onnx_load(path, &error);
  g_assert_no_error(error);
  const QhTensor *bt = qh_graph_value(back_g, qh_graph_find_value(back_g, "w"))->initializer;
  g_assert_cmpint(bt->dtype, ==, QH_DTYPE_S4);
  g_assert_cmpmem(bt->data, 9, wt->data, 9);
  qh_graph_free(back_g);
  g_unlink(path);
  g_rmdir(dir);
  g_free(path);
  g_free(dir);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/onnx/upgrade/rewrites-and-reads-back", test_rewrites_and_reads_back);
  g_test_add_func("/onnx/upgrade/refusals", test_refusals);
  g_test_add_func("/onnx/int4/pack-save-load", test_int4_pack);
  return g_test_run();
}
