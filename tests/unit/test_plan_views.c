/* The planner's shared slots for views (exec/plan.c): a Reshape, Flatten, Squeeze,
 * Unsqueeze, Identity or Dropout whose input dies at it takes the input's place in the
 * arena instead of a copy. The graph chains views after a Relu, computes large values
 * while the chain's last view is still alive (they must not land on its bytes), branches
 * a view whose input lives on (it must keep its own slot or share safely), and ends in
 * a view that is a graph output (its own buffer). Every output is checked against values
 * computed here, in runs with the fast kernels, the naive ones and a value hook, on 1 and
 * 2 threads; and a run with subnormal inputs keeps them (hooked) or flushes them to zero
 * (plain run), as exec/plan.h says. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "exec/plan.h"

enum { N = 6 * 35 }; /* x is [6, 35] */

static int value(QhGraph *g, const char *name) { return qh_graph_add_value(g, name, NULL)->id; }

static int shape_const(QhGraph *g, const char *name, int n, const int64_t *dims) {
  QhShape s = {.rank = 1, .dims = {n}};
  QhTensor *t = qh_tensor_new(QH_DTYPE_S64, &s, NULL);
  memcpy(t->data, dims, sizeof(int64_t) * (size_t)n);
  QhValue *v = qh_graph_add_value(g, name, NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

static void output(QhGraph *g, int v) {
  qh_graph_value(g, v)->is_output = TRUE;
  g_array_append_val(g->outputs, v);
}

static void node(QhGraph *g, const char *op, int n_in, const int *ins, int out) {
  qh_graph_add_node(g, op, op, "", n_in, ins, 1, &out, NULL);
}

/* r = Relu(x); a = Reshape(r, [35, 6]); b = Flatten(a); c = Unsqueeze(b, 0) ... a chain
 * of views; big = Neg(x), big2 = Abs(big), big3 = Exp(big2 * 0) computed while the chain
 * lives; y1 = Add(Reshape(chain, [6, 35]), big3); y2 = Identity(Dropout(Relu(x) again));
 * keep = Reshape(r2) with r2 also read by y3 = Add(r2, keep'). */
static QhGraph *make_graph(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = (QhShape){.rank = 2, .dims = {6, 35}};
  g_array_append_val(g->inputs, x->id);
  int s35x6 = shape_const(g, "s35x6", 2, (int64_t[]){35, 6});
  int s6x35 = shape_const(g, "s6x35", 2, (int64_t[]){6, 35});
  int axes0 = shape_const(g, "axes0", 1, (int64_t[]){0});
  int r = value(g, "r"), a = value(g, "a"), b = value(g, "b"), c = value(g, "c"), d = value(g, "d");
  int e = value(g, "e"), big = value(g, "big"), big2 = value(g, "big2"), y1 = value(g, "y1");
  int r2 = value(g, "r2"), dr = value(g, "dr"), y2 = value(g, "y2"), keep = value(g, "keep");
  int back = value(g, "back"), y3 = value(g, "y3");
  node(g, "Relu", 1, &x->id, r);
  node(g, "Reshape", 2, (int[]){r, s35x6}, a);
  node(g, "Flatten", 1, &a, b);                   /* [35, 6] */
  node(g, "Unsqueeze", 2, (int[]){b, axes0}, c); /* [1, 35, 6] */
  node(g, "Squeeze", 2, (int[]){c, axes0}, d);   /* [35, 6] */
  node(g, "Neg", 1, &x->id, big);
  node(g, "Abs", 1, &big, big2);
  node(g, "Reshape", 2, (int[]){d, s6x35}, e);
  node(g, "Add", 2, (int[]){e, big2}, y1); /* relu(x) + |x| */
  node(g, "Relu", 1, &x->id, r2);
  node(g, "Dropout", 1, &r2, dr);
  node(g, "Identity", 1, &dr, y2); /* a view that is a graph output */
  node(g, "Reshape", 2, (int[]){r2, s35x6}, keep);
  node(g, "Reshape", 2, (int[]){keep, s6x35}, back);
  node(g, "Add", 2, (int[]){back, r2}, y3); /* 2 relu(x); r2 read after its views */
  output(g, y1);
  output(g, y2);
  output(g, y3);
  return g;
}

/* Where each value's bytes were during a hooked run. */
typedef struct {
  const QhGraph *g;
  const void *where[64];
  int seen;
} Places;

static gboolean record_place(gpointer data, int value_id, const QhTensor *v, GError **error) {
  (void)error;
  Places *p = data;
  g_assert_cmpint(value_id, <, 64);
  p->where[value_id] = v->data;
  p->seen++;
  return TRUE;
}

static const void *at(const Places *p, const char *name) {
  int id = qh_graph_find_value(p->g, name);
  g_assert_cmpint(id, >=, 0);
  g_assert_nonnull(p->where[id]);
  return p->where[id];
}

/* The chain r -> a -> b -> c -> d -> e shares r's bytes; so does back with keep (keep dies
 * at it); dr and keep do not take r2's (r2 is read later); the values computed while the
 * chain is alive are elsewhere. */
static void check_places(const Places *p) {
  const char *chain[] = {"a", "b", "c", "d", "e"};
  for (size_t i = 0; i < G_N_ELEMENTS(chain); i++)
    g_assert_true(at(p, chain[i]) == at(p, "r"));
  g_assert_true(at(p, "back") == at(p, "keep"));
  g_assert_true(at(p, "keep") != at(p, "r2"));
  g_assert_true(at(p, "dr") != at(p, "r2"));
  g_assert_true(at(p, "big") != at(p, "r") && at(p, "big2") != at(p, "r"));
}

/* flushed: subnormal x read as zero by arithmetic (y1, y3 are sums); y2 only moves
 * bits (Relu's vector max, reading x as zero, may hand back x itself), so any value of
 * magnitude below FLT_MIN is right for it there. */
static void check_outputs(QhTensor **outs, const float *x, gboolean flushed) {
  for (int i = 0; i < N; i++) {
    gboolean sub = x[i] != 0.0f && fabsf(x[i]) < 1.17549435e-38f;
    float xi = flushed && sub ? 0.0f : x[i];
    float relu = xi > 0.0f ? xi : 0.0f;
    g_assert_cmpfloat(((float *)outs[0]->data)[i], ==, relu + fabsf(xi));
    float y2 = ((float *)outs[1]->data)[i];
    if (flushed && sub)
      g_assert_cmpfloat(fabsf(y2), <, 1.17549435e-38f);
    else
      g_assert_cmpfloat(y2, ==, relu);
    g_assert_cmpfloat(((float *)outs[2]->data)[i], ==, relu + relu);
  }
}

static void run_and_check(QhPlan *plan, QhExecContext *ctx, const QhTensor *x, gboolean flushed) {
  QhTensor **outs = NULL;
  GError *error = NULL;
  g_assert_true(qh_plan_run(plan, ctx, &x, &outs, &error));
  g_assert_no_error(error);
  check_outputs(outs, x->data, flushed);
  for (int o = 0; o < 3; o++)
    qh_tensor_free(outs[o]);
  g_free(outs);
}

static void test_views(void) {
  QhGraph *g = make_graph();
  GError *error = NULL;
  QhPlan *plan = qh_plan_new(g, NULL, FALSE, &error);
  g_assert_no_error(error);
  QhShape s = {.rank = 2, .dims = {6, 35}};
  QhTensor *x = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  float *xd = x->data;
  for (int i = 0; i < N; i++)
    xd[i] = (float)((i * 37) % 23 - 11) * 0.25f;
  QhThreadPool *pools[] = {qh_thread_pool_new(1), qh_thread_pool_new(2)};
  for (int p = 0; p < 2; p++) {
    QhExecContext ctx = {.pool = pools[p]};
    run_and_check(plan, &ctx, x, FALSE);
    run_and_check(plan, &ctx, x, FALSE); /* the arena reused */
    qh_plan_use_naive_kernels(plan, TRUE);
    run_and_check(plan, &ctx, x, FALSE);
    qh_plan_use_naive_kernels(plan, FALSE);
    Places places = {.g = g};
    qh_plan_set_value_hook(plan, record_place, &places);
    run_and_check(plan, &ctx, x, FALSE);
    g_assert_cmpint(places.seen, >, 10);
    check_places(&places);
    qh_plan_set_value_hook(plan, NULL, NULL);
    qh_exec_context_clear(&ctx);
  }
  /* subnormal inputs: flushed in a plain run, kept when a hook observes the values */
  for (int i = 0; i < N; i += 3)
    xd[i] = (i % 2 ? -1.0f : 1.0f) * 1e-40f * (float)(i + 1);
  QhExecContext ctx = {.pool = pools[0]};
#if defined(__x86_64__) || defined(__i386__)
  run_and_check(plan, &ctx, x, TRUE);
#endif
  Places places = {.g = g};
  qh_plan_set_value_hook(plan, record_place, &places);
  run_and_check(plan, &ctx, x, FALSE);
  qh_plan_set_value_hook(plan, NULL, NULL);
  qh_exec_context_clear(&ctx);
  for (int p = 0; p < 2; p++)
    qh_thread_pool_free(pools[p]);
  qh_tensor_free(x);
  qh_plan_free(plan);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/views_share_slots", test_views);
  return g_test_run();
}
