/* The float layout plan (exec/layout.c): which values a plan keeps channels-last, and
 * that a run with them gives the numbers of the all-NCHW run (a value hook turns the
 * plan off) and of the naive kernels. The first graph: Conv 3x3 -> Relu -> Conv 1x1 -> Add
 * (residual) -> HardSwish -> depthwise Conv -> MaxPool -> output, plus a Conv whose
 * output is a graph output. The second has the ops with channels-last loops of their own
 * (MaxPool with ceil_mode, channel Concat, BatchNormalization, AveragePool counting the
 * padding, Pad, the squeeze-excitation GlobalAveragePool and broadcast Mul, a per-channel
 * constant Mul) and a Conv fused with each activation exec/fusion.c takes (Relu, Clip,
 * x * HardSigmoid(x), SiLU, HardSwish): the all-NCHW run with the hook runs every node on
 * its own, the slow twin of the fused convolutions. Tolerance: max |a - b| <= 1e-5 max |b|
 * (the engines sum in their own orders; measured below 1e-6). Under
 * QHOST_FP32_ENGINE=openblas no value may be channels-last. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "exec/onednn.h"
#include "exec/plan.h"

static guint32 seed = 12345;

static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int constant(QhGraph *g, const char *name, int rank, const int64_t *dims) {
  QhShape s = {.rank = rank};
  memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  for (size_t i = 0; i < t->nbytes / sizeof(float); i++)
    ((float *)t->data)[i] = rnd() * 0.3f;
  QhValue *v = qh_graph_add_value(g, name, NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

static int value(QhGraph *g, const char *name) { return qh_graph_add_value(g, name, NULL)->id; }

static QhNode *conv(QhGraph *g, const char *name, int x, int w, int b, int y, int64_t k, int64_t group) {
  int ins[3] = {x, w, b};
  QhNode *n = qh_graph_add_node(g, name, "Conv", "", b >= 0 ? 3 : 2, ins, 1, &y, NULL);
  int64_t pad = k / 2;
  qh_node_set_attr_ints(n, "kernel_shape", 2, (int64_t[]){k, k});
  qh_node_set_attr_ints(n, "pads", 4, (int64_t[]){pad, pad, pad, pad});
  qh_node_set_attr_int(n, "group", group);
  return n;
}

static void output(QhGraph *g, int v) {
  qh_graph_value(g, v)->is_output = TRUE;
  g_array_append_val(g->outputs, v);
}

static QhGraph *make_graph(int *ids) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = (QhShape){.rank = 4, .dims = {1, 8, 9, 11}};
  g_array_append_val(g->inputs, x->id);
  int w1 = constant(g, "w1", 4, (int64_t[]){16, 8, 3, 3}), b1 = constant(g, "b1", 1, (int64_t[]){16});
  int w2 = constant(g, "w2", 4, (int64_t[]){16, 16, 1, 1});
  int w3 = constant(g, "w3", 4, (int64_t[]){16, 1, 3, 3}), b3 = constant(g, "b3", 1, (int64_t[]){16});
  int w4 = constant(g, "w4", 4, (int64_t[]){5, 16, 1, 1});
  int c1 = value(g, "c1"), r1 = value(g, "r1"), c2 = value(g, "c2"), s = value(g, "s"), h = value(g, "h");
  int c3 = value(g, "c3"), y = value(g, "y"), z = value(g, "z");
  conv(g, "conv1", x->id, w1, b1, c1, 3, 1);
  qh_graph_add_node(g, "relu", "Relu", "", 1, &c1, 1, &r1, NULL);
  conv(g, "conv2", r1, w2, -1, c2, 1, 1);
  qh_graph_add_node(g, "add", "Add", "", 2, (int[]){c2, r1}, 1, &s, NULL);
  qh_graph_add_node(g, "hswish", "HardSwish", "", 1, &s, 1, &h, NULL);
  conv(g, "dw", h, w3, b3, c3, 3, 16);
  QhNode *mp = qh_graph_add_node(g, "pool", "MaxPool", "", 1, &c3, 1, &y, NULL);
  qh_node_set_attr_ints(mp, "kernel_shape", 2, (int64_t[]){2, 2});
  qh_node_set_attr_ints(mp, "strides", 2, (int64_t[]){2, 2});
  conv(g, "head", h, w4, -1, z, 1, 1);
  output(g, y);
  output(g, z);
  int want[] = {c1, r1, c2, s, h, c3, y, z};
  memcpy(ids, want, sizeof want);
  return g;
}

static QhNode *pool(QhGraph *g, const char *name, const char *op, int x, int y, int64_t k,
                     int64_t stride, int64_t pad) {
  QhNode *n = qh_graph_add_node(g, name, op, "", 1, &x, 1, &y, NULL);
  qh_node_set_attr_ints(n, "kernel_shape", 2, (int64_t[]){k, k});
  qh_node_set_attr_ints(n, "strides", 2, (int64_t[]){stride, stride});
  qh_node_set_attr_ints(n, "pads", 4, (int64_t[]){pad, pad, pad, pad});
  return n;
}

static QhGraph *make_pool_graph(int *ids) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = (QhShape){.rank = 4, .dims = {1, 8, 10, 12}};
  g_array_append_val(g->inputs, x->id);
  int w1 = constant(g, "w1", 4, (int64_t[]){16, 8, 3, 3}), b1 = constant(g, "b1", 1, (int64_t[]){16});
  int wa = constant(g, "wa", 4, (int64_t[]){8, 16, 1, 1}), wb = constant(g, "wb", 4, (int64_t[]){12, 16, 3, 3});
  int w2 = constant(g, "w2", 4, (int64_t[]){16, 20, 1, 1}), ws = constant(g, "ws", 4, (int64_t[]){16, 16, 1, 1});
  int k = constant(g, "k", 3, (int64_t[]){16, 1, 1}), wh = constant(g, "wh", 4, (int64_t[]){5, 16, 1, 1});
  int c1 = value(g, "c1"), r1 = value(g, "r1"), p1 = value(g, "p1"), ca = value(g, "ca");
  int cb = value(g, "cb"), cc = value(g, "cc"), ap = value(g, "ap"), c2 = value(g, "c2");
  int sg = value(g, "sg"), silu = value(g, "silu"), gp = value(g, "gp"), cs = value(g, "cs");
  int hs = value(g, "hs"), m = value(g, "m"), m2 = value(g, "m2"), z = value(g, "z");
  int pd = value(g, "pd"), ca0 = value(g, "ca0"), cb0 = value(g, "cb0"), hb = value(g, "hb");
  int c3 = value(g, "c3"), hsw = value(g, "hsw"), cn = value(g, "cn");
  int bn[5] = {-1};
  for (int i = 1; i < 5; i++)
    bn[i] = constant(g, (const char *[]){"", "bn_scale", "bn_b", "bn_mean", "bn_var"}[i], 1,
                     (int64_t[]){20});
  float *var = qh_graph_value(g, bn[4])->initializer->data;
  for (int i = 0; i < 20; i++)
    var[i] = fabsf(var[i]) + 0.5f;
  int w3 = constant(g, "w3", 4, (int64_t[]){16, 16, 1, 1});
  int lo = constant(g, "lo", 0, (int64_t[]){1}), hi = constant(g, "hi", 0, (int64_t[]){1});
  *(float *)qh_graph_value(g, lo)->initializer->data = 0.0f;
  *(float *)qh_graph_value(g, hi)->initializer->data = 0.25f;
  QhTensor *pads = qh_tensor_new(QH_DTYPE_S64, &(QhShape){.rank = 1, .dims = {8}}, NULL);
  memcpy(pads->data, (int64_t[]){0, 0, 1, 0, 0, 0, 0, 2}, 8 * sizeof(int64_t));
  QhValue *pads_v = qh_graph_add_value(g, "pads", NULL);
  qh_value_set_initializer(pads_v, pads);
  conv(g, "conv1", x->id, w1, b1, c1, 3, 1);
  qh_graph_add_node(g, "relu", "Relu", "", 1, &c1, 1, &r1, NULL);
  qh_node_set_attr_int(pool(g, "maxpool", "MaxPool", r1, p1, 3, 2, 0), "ceil_mode", 1);
  conv(g, "conv_a", p1, wa, -1, ca0, 1, 1);
  qh_graph_add_node(g, "clip", "Clip", "", 3, (int[]){ca0, lo, hi}, 1, &ca, NULL);
  conv(g, "conv_b", p1, wb, -1, cb0, 3, 1);
  QhNode *hsg = qh_graph_add_node(g, "hsig_b", "HardSigmoid", "", 1, &cb0, 1, &hb, NULL);
  qh_node_set_attr_float(hsg, "alpha", 1.0f / 6.0f);
  qh_graph_add_node(g, "hswish_b", "Mul", "", 2, (int[]){hb, cb0}, 1, &cb, NULL);
  qh_node_set_attr_int(qh_graph_add_node(g, "concat", "Concat", "", 2, (int[]){ca, cb}, 1, &cc, NULL),
                       "axis", 1);
  bn[0] = cc;
  qh_graph_add_node(g, "bn", "BatchNormalization", "", 5, bn, 1, &cn, NULL);
  qh_node_set_attr_int(pool(g, "avgpool", "AveragePool", cn, ap, 3, 1, 1), "count_include_pad", 1);
  qh_graph_add_node(g, "pad", "Pad", "", 2, (int[]){ap, pads_v->id}, 1, &pd, NULL);
  conv(g, "conv2", pd, w2, -1, c2, 1, 1);
  qh_graph_add_node(g, "sigmoid", "Sigmoid", "", 1, &c2, 1, &sg, NULL);
  qh_graph_add_node(g, "silu", "Mul", "", 2, (int[]){c2, sg}, 1, &silu, NULL);
  qh_graph_add_node(g, "gap", "GlobalAveragePool", "", 1, &silu, 1, &gp, NULL);
  conv(g, "conv_se", gp, ws, -1, cs, 1, 1);
  qh_graph_add_node(g, "hsig", "HardSigmoid", "", 1, &cs, 1, &hs, NULL);
  qh_graph_add_node(g, "scale", "Mul", "", 2, (int[]){silu, hs}, 1, &m, NULL);
  qh_graph_add_node(g, "scale_k", "Mul", "", 2, (int[]){k, m}, 1, &m2, NULL);
  conv(g, "conv3", m2, w3, -1, c3, 1, 1);
  qh_graph_add_node(g, "hswish", "HardSwish", "", 1, &c3, 1, &hsw, NULL);
  conv(g, "head", hsw, wh, -1, z, 1, 1);
  output(g, z);
  output(g, hs);
  int want[] = {r1, p1, ca, cb, cc, cn, ap, pd, c2, sg, silu, m, m2, gp, cs, hs, z};
  memcpy(ids, want, sizeof want);
  return g;
}

static gboolean watch(gpointer data, int value_id, const QhTensor *v, GError **error) {
  (void)value_id, (void)v, (void)error;
  (*(int *)data)++;
  return TRUE;
}

static QhTensor **run(QhPlan *plan, QhExecContext *ctx, const QhTensor *x) {
  QhTensor **outs = NULL;
  GError *error = NULL;
  g_assert_true(qh_plan_run(plan, ctx, (const QhTensor *const *)&x, &outs, &error));
  g_assert_no_error(error);
  return outs;
}

static double rel_diff(const QhTensor *a, const QhTensor *b) {
  double diff = 0.0, mag = 1e-30;
  const float *x = a->data, *y = b->data;
  g_assert_cmpuint(a->nbytes, ==, b->nbytes);
  for (size_t i = 0; i < a->nbytes / sizeof(float); i++) {
    diff = MAX(diff, fabs((double)x[i] - (double)y[i]));
    mag = MAX(mag, fabs((double)y[i]));
  }
  return diff / mag;
}

static void free_outs(QhTensor **outs) {
  for (int i = 0; i < 2; i++)
    qh_tensor_free(outs[i]);
  g_free(outs);
}

/* The plan's flags are want[i] for ids[i]; its runs agree with the NCHW and naive runs. */
static void check_plan(QhGraph *g, const int *ids, const gboolean *want, int n_ids, int fused) {
  GError *error = NULL;
  QhPlan *plan = qh_plan_new(g, NULL, FALSE, &error);
  g_assert_no_error(error);
  const gboolean on = qh_onednn_enabled();
  for (int i = 0; i < n_ids; i++)
    g_assert_cmpint(qh_plan_value_is_nhwc(plan, ids[i]), ==, on && want[i]);
  g_assert_cmpint(qh_plan_fused_convs(plan), ==, on ? fused : 0);

  const QhTensor *xi = qh_plan_value_info(plan, qh_graph_find_value(g, "x"));
  QhTensor *x = qh_tensor_new(QH_DTYPE_F32, &xi->shape, NULL);
  for (size_t i = 0; i < x->nbytes / sizeof(float); i++)
    ((float *)x->data)[i] = rnd();
  QhThreadPool *pools[] = {qh_thread_pool_new(1), qh_thread_pool_new(2)};
  for (int p = 0; p < 2; p++) {
    QhExecContext ctx = {.pool = pools[p]};
    QhTensor **fast = run(plan, &ctx, x), **again = run(plan, &ctx, x);
    int seen = 0;
    qh_plan_set_value_hook(plan, watch, &seen);
    QhTensor **nchw = run(plan, &ctx, x);
    g_assert_cmpint(seen, >, 0);
    qh_plan_set_value_hook(plan, NULL, NULL);
    qh_plan_use_naive_kernels(plan, TRUE);
    QhTensor **naive = run(plan, &ctx, x);
    qh_plan_use_naive_kernels(plan, FALSE);
    for (int o = 0; o < 2; o++) {
      g_assert_cmpmem(fast[o]->data, fast[o]->nbytes, again[o]->data, again[o]->nbytes);
      g_assert_cmpfloat(rel_diff(fast[o], nchw[o]), <=, 1e-5);
      g_assert_cmpfloat(rel_diff(fast[o], naive[o]), <=, 1e-5);
    }
    free_outs(fast);
    free_outs(again);
    free_outs(nchw);
    free_outs(naive);
    qh_exec_context_clear(&ctx);
  }
  for (int p = 0; p < 2; p++)
    qh_thread_pool_free(pools[p]);
  qh_tensor_free(x);
  qh_plan_free(plan);
}

static void test_layout_plan(void) {
  int ids[8];
  QhGraph *g = make_graph(ids);
  /* c1, r1, c2, s, h channels-last; c3 (read by MaxPool, whose output is the graph's)
   * and the outputs NCHW */
  const gboolean want[8] = {TRUE, TRUE, TRUE, TRUE, TRUE, FALSE, FALSE, FALSE};
  check_plan(g, ids, want, 8, 1); /* conv1 + Relu */
  qh_graph_free(g);
}

static void test_pool_concat_se(void) {
  int ids[17];
  QhGraph *g = make_pool_graph(ids);
  /* everything up to the head channels-last but the values with one spatial position
   * (the pooled squeeze-excitation branch) and the outputs */
  gboolean want[17];
  for (int i = 0; i < 17; i++)
    want[i] = i < 13;
  /* conv1 + Relu, conv_a + Clip, conv_b + x * HardSigmoid(x), conv2 + SiLU, conv3 + HardSwish */
  check_plan(g, ids, want, 17, 5);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/layout_plan/nhwc_region", test_layout_plan);
  g_test_add_func("/layout_plan/pool_concat_se", test_pool_concat_se);
  return g_test_run();
}
