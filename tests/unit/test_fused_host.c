/* The executor's host groups (exec/fusion.c, kernels/fused-host.c) against the nodes they
 * replace: GELU exported as x / sqrt(2) -> Erf -> + 1 -> * x -> * 0.5 (PyTorch) and as
 * (x * 0.5) * (1 + Erf(x * 1/sqrt(2))) (HF's order), and LayerNorm's opset-13
 * decomposition, on shapes whose sizes are no multiple of any vector width, with 1 and
 * 2 threads, and DequantizeLinear -> Transpose | Reshape | Slice -> Reshape ->
 * QuantizeLinear chains on 8-bit data, and attention's Softmax(scores * | / k + mask) with
 * masks of several broadcasts. The plan forms the expected number of groups; the
 * fused run agrees with the run with a value hook (which runs every node on its own, the
 * slow twin) within 1e-6 of each row's largest value (AVX-512's reordered sums and
 * single-precision Erf; the bits without AVX-512, ctest unit/test_fused_host/noavx512),
 * the naive kernels (glibc's erff) within 2e-6 of the largest value; the 8-bit chains
 * give the bits. Groups are not
 * formed when a value inside is a graph output or is read outside the group. */
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/graph.h"
#include "exec/kernels/fused-host.h"
#include "exec/plan.h"
#include "fused-check.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

static guint32 seed = 4242;

static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* A fresh name: prefix and a counter (the graph copies names). */
static int tensor_constant(QhGraph *g, const char *name, int rank, const int64_t *dims, float base) {
  QhShape s = {.rank = rank};
  memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  for (size_t i = 0; i < t->nbytes / sizeof(float); i++)
    ((float *)t->data)[i] = base + rnd() * 0.5f;
  QhValue *v = qh_graph_add_value(g, name, NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

static int value(QhGraph *g, const char *name) { return qh_graph_add_value(g, name, NULL)->id; }

static void node2(QhGraph *g, const char *name, const char *op, int a, int b, int y) {
  qh_graph_add_node(g, name, op, "", 2, (int[]){a, b}, 1, &y, NULL);
}

static void node1(QhGraph *g, const char *name, const char *op, int a, int y) {
  qh_graph_add_node(g, name, op, "", 1, &a, 1, &y, NULL);
}

static QhGraph *new_graph(int *x, int64_t width) {
  QhGraph *g = qh_graph_new();
  QhValue *v = qh_graph_add_value(g, "x", NULL);
  v->is_input = TRUE;
  v->dtype = QH_DTYPE_F32;
  v->shape = (QhShape){.rank = 3, .dims = {3, 7, width}};
  g_array_append_val(g->inputs, v->id);
  *x = v->id;
  return g;
}

/* GELU of x into a new value; hf: HF's order. Values are named p0 (the scaled input),
 * p1 (Erf's result), p2, p3, p4 (the result). */
static int gelu(QhGraph *g, const char *p, int x, gboolean hf) {
  int v[5];
  for (int i = 0; i < 5; i++) {
    char name[32];
    g_snprintf(name, sizeof name, "%s%d", p, i);
    v[i] = value(g, name);
  }
  const int u = v[0], e = v[1], a = v[2], m = v[3], y = v[4];
  if (hf) {
    node2(g, fresh("mul_half"), "Mul", x, scalar(g, 0.5f), m);
    node2(g, fresh("mul_rsqrt2"), "Mul", scalar(g, 0.70710677f), x, u); /* constant first */
  } else {
    node2(g, fresh("div_sqrt2"), "Div", x, scalar(g, 1.4142135f), u);
  }
  node1(g, fresh("erf"), "Erf", u, e);
  node2(g, fresh("add_one"), "Add", scalar(g, 1.0f), e, a);
  if (hf) {
    node2(g, fresh("mul"), "Mul", m, a, y);
  } else {
    node2(g, fresh("mul"), "Mul", x, a, m);
    node2(g, fresh("mul_half"), "Mul", m, scalar(g, 0.5f), y);
  }
  return y;
}

static QhNode *mean(QhGraph *g, int x, int y) {
  QhNode *n = qh_graph_add_node(g, fresh("mean"), "ReduceMean", "", 1, &x, 1, &y, NULL);
  qh_node_set_attr_ints(n, "axes", 1, (int64_t[]){-1});
  return n;
}

/* LayerNorm of x over its last axis (width) into a new value; *d: the deviation. */
static int layernorm(QhGraph *g, int x, int64_t width, int *d) {
  int m = value(g, "ln_mean"), p = value(g, "ln_sq"), v = value(g, "ln_var"), ve = value(g, "ln_ve");
  int s = value(g, "ln_std"), q = value(g, "ln_norm"), w = value(g, "ln_scaled"), y = value(g, "ln_y");
  *d = value(g, "ln_dev");
  mean(g, x, m);
  node2(g, "ln_sub", "Sub", x, m, *d);
  node2(g, "ln_pow", "Pow", *d, scalar(g, 2.0f), p);
  mean(g, p, v);
  node2(g, "ln_add", "Add", v, scalar(g, 1e-5f), ve);
  node1(g, "ln_sqrt", "Sqrt", ve, s);
  node2(g, "ln_div", "Div", *d, s, q);
  node2(g, "ln_mul", "Mul", q, tensor_constant(g, fresh("gamma"), 1, (int64_t[]){width}, 1.0f), w);
  node2(g, "ln_bias", "Add", tensor_constant(g, fresh("beta"), 1, (int64_t[]){width}, 0.0f), w, y);
  return y;
}

/* The plan fuses n_gelu GELUs, n_ln LayerNorms and n_qmove Q/DQ chains; the fused run
 * gives the hooked run's floats within 1e-6 of each row's largest value (its bits
 * without AVX-512, its bytes), the naive run its floats within 2e-6. */
static void check(QhGraph *g, int n_gelu, int n_ln, int n_qmove, int n_softmax) {
  GError *error = NULL;
  QhPlan *plan = qh_plan_new(g, NULL, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(qh_plan_fused_host_groups(plan, QH_HOST_GROUP_GELU), ==, n_gelu);
  g_assert_cmpint(qh_plan_fused_host_groups(plan, QH_HOST_GROUP_LAYERNORM), ==, n_ln);
  g_assert_cmpint(qh_plan_fused_host_groups(plan, QH_HOST_GROUP_QMOVE), ==, n_qmove);
  g_assert_cmpint(qh_plan_fused_host_groups(plan, QH_HOST_GROUP_SOFTMAX), ==, n_softmax);
  const QhTensor *xi = qh_plan_value_info(plan, qh_graph_find_value(g, "x"));
  QhTensor *x = qh_tensor_new(xi->dtype, &xi->shape, NULL);
  if (x->dtype == QH_DTYPE_F32)
    for (size_t i = 0; i < x->nbytes / sizeof(float); i++) /* GELU's whole range, Erf's saturation */
      ((float *)x->data)[i] = rnd() * (i % 7 == 0 ? 6.0f : 2.5f);
  else
    for (size_t i = 0; i < x->nbytes; i++) /* every byte value */
      ((uint8_t *)x->data)[i] = (uint8_t)(i * 37 + 11);
  const int n_out = (int)g->outputs->len;
  QhThreadPool *pools[] = {qh_thread_pool_new(1), qh_thread_pool_new(2)};
  for (int p = 0; p < 2; p++) {
    QhExecContext ctx = {.pool = pools[p]};
    QhTensor **fast, **each, **naive;
    run_three_ways(plan, &ctx, &x, &fast, &each, &naive);
    const gboolean exact = !(qh_cpu_features() & QH_CPU_AVX512F);
    for (int o = 0; o < n_out; o++) {
      if (fast[o]->dtype == QH_DTYPE_F32 && !exact) {
        g_assert_cmpfloat(row_rel_diff(fast[o], each[o]), <=, 1e-6);
        g_assert_cmpfloat(rel_diff(fast[o], naive[o]), <=, 2e-6);
      } else {
        g_assert_cmpmem(fast[o]->data, fast[o]->nbytes, each[o]->data, each[o]->nbytes);
        if (fast[o]->dtype == QH_DTYPE_F32)
          g_assert_cmpfloat(rel_diff(fast[o], naive[o]), <=, 2e-6);
        else
          g_assert_cmpmem(fast[o]->data, fast[o]->nbytes, naive[o]->data, naive[o]->nbytes);
      }
    }
    free_outs(fast, n_out);
    free_outs(each, n_out);
    free_outs(naive, n_out);
    qh_exec_context_clear(&ctx);
  }
  for (int p = 0; p < 2; p++)
    qh_thread_pool_free(pools[p]);
  qh_tensor_free(x);
  qh_plan_free(plan);
}

static void test_gelu(void) {
  int x;
  QhGraph *g = new_graph(&x, 53);
  output(g, gelu(g, "a", x, FALSE));
  check(g, 1, 0, 0, 0);
  qh_graph_free(g);
  g = new_graph(&x, 53);
  output(g, gelu(g, "b", x, TRUE));
  check(g, 1, 0, 0, 0);
  qh_graph_free(g);
}

static void test_layernorm_then_gelu(void) {
  int x, d;
  QhGraph *g = new_graph(&x, 77);
  int y = layernorm(g, x, 77, &d);
  output(g, gelu(g, "g", y, FALSE));
  check(g, 1, 1, 0, 0);
  qh_graph_free(g);
}

/* A value inside a group read outside it, or a graph output: no group, same numbers. */
static void test_not_fused(void) {
  int x, d;
  QhGraph *g = new_graph(&x, 40);
  int y = layernorm(g, x, 40, &d);
  output(g, gelu(g, "g", y, FALSE));
  output(g, qh_graph_find_value(g, "g1")); /* GELU's Erf output */
  int z = value(g, "z");
  node1(g, "dev_reader", "Neg", d, z); /* LayerNorm's deviation read elsewhere */
  output(g, z);
  check(g, 0, 0, 0, 0);
  qh_graph_free(g);
}

/* Attention's Softmax((x * k) + mask) or Softmax((x / k) + mask) over the last axis, the
 * mask a constant (with -inf at masked places) of shape mask_dims, broadcast into x's;
 * a second Softmax whose scaled scores are also read elsewhere stays unfused. */
static void test_masked_softmax(void) {
  const int64_t masks[][3] = {{3, 1, 45}, {45, 0, 0}, {1, 7, 45}, {3, 7, 45}};
  const int ranks[] = {3, 1, 3, 3};
  for (int m = 0; m < 4; m++) {
    int x;
    QhGraph *g = new_graph(&x, 45);
    const int mask = tensor_constant(g, fresh("mask"), ranks[m], masks[m], 0.0f);
    QhTensor *mt = qh_graph_value(g, mask)->initializer;
    for (size_t i = 0; i < mt->nbytes / sizeof(float); i += 4)
      ((float *)mt->data)[i] = -INFINITY;
    const int s = value(g, fresh("scaled")), a = value(g, fresh("masked")), y = value(g, fresh("probs"));
    node2(g, fresh("scale"), m % 2 ? "Div" : "Mul", x, scalar(g, m % 2 ? 8.0f : 0.3535534f), s);
    node2(g, fresh("add_mask"), "Add", m == 2 ? mask : s, m == 2 ? s : mask, a);
    node1(g, fresh("softmax"), "Softmax", a, y);
    output(g, y);
    if (m == 3) { /* the same chain on another input, its scaled scores read twice */
      const int s2 = value(g, fresh("scaled")), a2 = value(g, fresh("masked")), y2 = value(g, fresh("probs"));
      node2(g, fresh("scale"), "Mul", y, scalar(g, 30.0f), s2);
      node2(g, fresh("add_mask"), "Add", s2, mask, a2);
      node1(g, fresh("softmax"), "Softmax", a2, y2);
      output(g, y2);
      output(g, s2);
    }
    check(g, 0, 0, 0, 1);
    qh_graph_free(g);
  }
}

static int byte_scalar(QhGraph *g, QhDType dt, int value) {
  QhTensor *t = qh_tensor_new(dt, &(QhShape){.rank = 0}, NULL);
  *(uint8_t *)t->data = (uint8_t)value;
  QhValue *v = qh_graph_add_value(g, fresh("zp"), NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

/* DequantizeLinear (scale s_in, zero point zp_in) of q, then move, then QuantizeLinear
 * (s_out, zp_out of dtype out_dt) into a new graph output. */
static void qdq_chain(QhGraph *g, int q, const char *move, float s_in, int zp_in, float s_out, int zp_out,
                      QhDType out_dt) {
  const QhDType in_dt = qh_graph_value(g, q)->dtype;
  int d = value(g, fresh("dq")), m = value(g, fresh("moved")), y = value(g, fresh("y"));
  qh_graph_add_node(g, fresh("dq"), "DequantizeLinear", "", 3,
                    (int[]){q, scalar(g, s_in), byte_scalar(g, in_dt, zp_in)}, 1, &d, NULL);
  if (strcmp(move, "Transpose") == 0) {
    QhNode *t = qh_graph_add_node(g, fresh("t"), "Transpose", "", 1, &d, 1, &m, NULL);
    qh_node_set_attr_ints(t, "perm", 3, (int64_t[]){0, 2, 1});
  } else if (strcmp(move, "Reshape") == 0) {
    node2(g, fresh("r"), "Reshape", d, ints(g, 2, (int64_t[]){21, -1}), m);
  } else { /* Slice of the last axis, then Reshape */
    int sl = value(g, fresh("sliced"));
    qh_graph_add_node(g, fresh("s"), "Slice", "", 4,
                      (int[]){d, ints(g, 1, (int64_t[]){5}), ints(g, 1, (int64_t[]){30}), ints(g, 1, (int64_t[]){-1})},
                      1, &sl, NULL);
    node2(g, fresh("r"), "Reshape", sl, ints(g, 2, (int64_t[]){-1, 25}), m);
  }
  qh_graph_add_node(g, fresh("q"), "QuantizeLinear", "", 3,
                    (int[]){m, scalar(g, s_out), byte_scalar(g, out_dt, zp_out)}, 1, &y, NULL);
  output(g, y);
}

/* The Q/DQ chains around data movement of a QDQ file, with equal and with different
 * scales and zero points (the table is then no identity, and saturates) */
static void test_qdq_chains(void) {
  QhGraph *g = qh_graph_new();
  QhValue *v = qh_graph_add_value(g, "x", NULL);
  v->is_input = TRUE;
  v->dtype = QH_DTYPE_U8;
  v->shape = (QhShape){.rank = 3, .dims = {3, 7, 41}};
  g_array_append_val(g->inputs, v->id);
  qdq_chain(g, v->id, "Transpose", 0.05f, 128, 0.05f, 128, QH_DTYPE_U8);
  qdq_chain(g, v->id, "Reshape", 0.05f, 128, 0.031f, 100, QH_DTYPE_U8);
  qdq_chain(g, v->id, "Slice", 0.05f, 128, 0.07f, -3, QH_DTYPE_S8);
  check(g, 0, 0, 3, 0);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/fused_host/gelu", test_gelu);
  g_test_add_func("/fused_host/layernorm_then_gelu", test_layernorm_then_gelu);
  g_test_add_func("/fused_host/not_fused", test_not_fused);
  g_test_add_func("/fused_host/qdq_chains", test_qdq_chains);
  g_test_add_func("/fused_host/masked_softmax", test_masked_softmax);
  return g_test_run();
}
