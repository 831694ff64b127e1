/* Unit tests of the planner and executor: shape binding, constant folding (Constant,
 * Shape and the nodes fed only by them), unsupported ops, input checks, outputs that
 * are constants or inputs, and buffer release. */
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "exec/plan.h"

static int add_value(QhGraph *g, const char *name) { return qh_graph_add_value(g, name, NULL)->id; }

/* x[batch, 6] -> Reshape(x, Concat(Constant[-1], Gather(Shape(x), 1)... simplified:
 * shape = Concat(Constant[2], Constant[-1])) -> Identity -> y; also outputs the
 * folded shape tensor directly. */
static QhGraph *make_graph(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = (QhShape){.rank = 2, .dims = {-1, 6}};
  g_array_append_val(g->inputs, x->id);
  int c0 = add_value(g, "c0"), c1 = add_value(g, "c1"), shape = add_value(g, "shape");
  int r = add_value(g, "r"), y = add_value(g, "y"), xs = add_value(g, "xs");
  QhNode *n = qh_graph_add_node(g, "const0", "Constant", "", 0, NULL, 1, &c0, NULL);
  qh_node_set_attr_ints(n, "value_ints", 1, (int64_t[]){2});
  n = qh_graph_add_node(g, "const1", "Constant", "", 0, NULL, 1, &c1, NULL);
  qh_node_set_attr_ints(n, "value_ints", 1, (int64_t[]){-1});
  n = qh_graph_add_node(g, "cat", "Concat", "", 2, (int[]){c0, c1}, 1, &shape, NULL);
  qh_node_set_attr_int(n, "axis", 0);
  qh_graph_add_node(g, "reshape", "Reshape", "", 2, (int[]){x->id, shape}, 1, &r, NULL);
  qh_graph_add_node(g, "id", "Identity", "", 1, &r, 1, &y, NULL);
  qh_graph_add_node(g, "shape_of_x", "Shape", "", 1, &x->id, 1, &xs, NULL);
  for (int v = 0; v < qh_graph_n_values(g); v++)
    if (v == y || v == xs) {
      qh_graph_value(g, v)->is_output = TRUE;
      g_array_append_val(g->outputs, v);
    }
  return g;
}

static void test_fold_and_run(void) {
  QhGraph *g = make_graph();
  GError *error = NULL;
  QhShape in_shape = {.rank = 2, .dims = {3, 6}};
  QhPlan *plan = qh_plan_new(g, &in_shape, FALSE, &error);
  g_assert_no_error(error);
  g_assert_nonnull(plan);
  /* Constant, Concat and Shape fold; Reshape and Identity run. */
  for (int id = 0; id < qh_graph_n_nodes(g); id++) {
    const char *op = qh_graph_node(g, id)->op_type;
    gboolean expect = strcmp(op, "Reshape") != 0 && strcmp(op, "Identity") != 0;
    g_assert_cmpint(qh_plan_node_is_folded(plan, id), ==, expect);
  }
  const QhTensor *r = qh_plan_value_info(plan, qh_graph_find_value(g, "r"));
  g_assert_cmpint(r->shape.rank, ==, 2);
  g_assert_cmpint(r->shape.dims[0], ==, 2);
  g_assert_cmpint(r->shape.dims[1], ==, 9);

  QhTensor *x = qh_tensor_new(QH_DTYPE_F32, &in_shape, NULL);
  for (int i = 0; i < 18; i++)
    ((float *)x->data)[i] = (float)i;
  QhThreadPool *pool = qh_thread_pool_new(2);
  QhExecContext ctx = {.pool = pool};
  QhTensor **outs = NULL;
  for (int round = 0; round < 2; round++) { /* a plan runs more than once */
    g_assert_true(qh_plan_run(plan, &ctx, (const QhTensor *const *)&x, &outs, &error));
    g_assert_no_error(error);
    g_assert_cmpint(outs[0]->shape.dims[1], ==, 9);
    for (int i = 0; i < 18; i++)
      g_assert_cmpfloat(((float *)outs[0]->data)[i], ==, (float)i);
    g_assert_cmpint(outs[1]->dtype, ==, QH_DTYPE_S64);
    g_assert_cmpint(((int64_t *)outs[1]->data)[0], ==, 3);
    g_assert_cmpint(((int64_t *)outs[1]->data)[1], ==, 6);
    qh_tensor_free(outs[0]);
    qh_tensor_free(outs[1]);
    g_free(outs);
  }

  /* A tensor of the wrong shape is refused, naming the input. */
  QhShape other = {.rank = 2, .dims = {2, 6}};
  QhTensor *bad = qh_tensor_new(QH_DTYPE_F32, &other, NULL);
  g_assert_false(qh_plan_run(plan, &ctx, (const QhTensor *const *)&bad, &outs, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_MISMATCH);
  g_assert_nonnull(strstr(error->message, "input 'x'"));
  g_clear_error(&error);

  qh_tensor_free(bad);
  qh_tensor_free(x);
  qh_exec_context_clear(&ctx);
  qh_thread_pool_free(pool);
  qh_plan_free(plan);
  qh_graph_free(g);
}

static void test_bind_mismatch(void) {
  QhGraph *g = make_graph();
  GError *error = NULL;
  QhShape wrong = {.rank = 2, .dims = {3, 7}};
  g_assert_null(qh_plan_new(g, &wrong, FALSE, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_MISMATCH);
  g_assert_nonnull(strstr(error->message, "[3, 7]"));
  g_clear_error(&error);
  /* Without shapes, the symbolic batch binds to 1. */
  QhPlan *plan = qh_plan_new(g, NULL, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(qh_plan_value_info(plan, 0)->shape.dims[0], ==, 1);
  qh_plan_free(plan);
  qh_graph_free(g);
}

static void test_unsupported_op(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = (QhShape){.rank = 1, .dims = {4}};
  g_array_append_val(g->inputs, x->id);
  int y = add_value(g, "y"), z = add_value(g, "z");
  qh_graph_add_node(g, "weird", "Celu", "", 1, &x->id, 1, &y, NULL);
  qh_graph_add_node(g, "after", "Relu", "", 1, &y, 1, &z, NULL);
  qh_graph_value(g, z)->is_output = TRUE;
  g_array_append_val(g->outputs, z);
  GError *error = NULL;
  g_assert_null(qh_plan_new(g, NULL, FALSE, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED);
  g_assert_cmpstr(error->message, ==,
                  "node 'weird' (Celu): operator Celu is not supported by qhost's reference kernels");
  g_clear_error(&error);
  /* Shapes-only plans (inspect) go on and leave the unknown part unknown. */
  QhPlan *plan = qh_plan_new(g, NULL, TRUE, &error);
  g_assert_no_error(error);
  g_assert_null(qh_plan_value_info(plan, z));
  g_assert_nonnull(qh_plan_value_info(plan, x->id));
  qh_plan_free(plan);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/fold_and_run", test_fold_and_run);
  g_test_add_func("/plan/bind_mismatch", test_bind_mismatch);
  g_test_add_func("/plan/unsupported_op", test_unsupported_op);
  return g_test_run();
}
