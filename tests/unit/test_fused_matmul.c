/* The executor's MatMul-through-Transposes group (exec/fusion.c, kernels/fused-matmul.c)
 * against the nodes it replaces: nn.MultiheadAttention's export (Reshape -> Transpose
 * [1,0,2] -> Div by sqrt(d) for Q, Transpose [1,2,0] for K, [1,0,2] for V and for the
 * merged heads), rank-4 operands with batch perms and both operands stored transposed
 * (trans flags on A and B) and a transposed result, sizes no multiple of any register
 * block, and the attention sizes of BERT, ViT and swin_t (large enough to split over 2
 * threads), on oneDNN's sgemm and on OpenBLAS's (bit-compatible runs). The plan forms
 * the expected number of groups. The fused run agrees with the run with a value hook
 * (every node on its own: the Transposes copy, the MatMul runs the same GEMMs on the
 * copies) and with the naive kernels (double sums) within the MatMul tests' 1e-5 of the
 * largest value, not bit for bit: both libraries pick their kernel by the trans flags,
 * and some sum in another order for a stored-transposed operand (oneDNN 2.6 for B when
 * M < 16; OpenBLAS at 49x49x32), so the group changes a few last bits. A Transpose
 * with a second reader, a Transpose that moves the unit-stride axis out of the matrix,
 * broadcast batch dims and a result Transpose that swaps the last two axes are not fused
 * (the rest of the group still is where it can be), with the same numbers. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "exec/kernels/fused-host.h"
#include "exec/plan.h"
#include "fused-check.h"

static guint32 seed = 777;

static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int value(QhGraph *g) { return qh_graph_add_value(g, fresh("v"), NULL)->id; }

static int input(QhGraph *g, int rank, const int64_t *dims) {
  QhValue *v = qh_graph_add_value(g, fresh("in"), NULL);
  v->is_input = TRUE;
  v->dtype = QH_DTYPE_F32;
  v->shape = (QhShape){.rank = rank};
  memcpy(v->shape.dims, dims, sizeof(int64_t) * (size_t)rank);
  g_array_append_val(g->inputs, v->id);
  return v->id;
}

static int op2(QhGraph *g, const char *op, int a, int b) {
  int y = value(g);
  qh_graph_add_node(g, fresh(op), op, "", 2, (int[]){a, b}, 1, &y, NULL);
  return y;
}

static int op1(QhGraph *g, const char *op, int a) {
  int y = value(g);
  qh_graph_add_node(g, fresh(op), op, "", 1, &a, 1, &y, NULL);
  return y;
}

static int transpose(QhGraph *g, int x, int rank, const int64_t *perm) {
  int y = value(g);
  QhNode *t = qh_graph_add_node(g, fresh("Transpose"), "Transpose", "", 1, &x, 1, &y, NULL);
  qh_node_set_attr_ints(t, "perm", rank, perm);
  return y;
}

/* The plan forms n_groups MatMul groups; with 1 and 2 threads, on oneDNN and on
 * OpenBLAS, the fused run agrees with the hooked and the naive runs within 1e-5. */
static void check(QhGraph *g, int n_groups) {
  GError *error = NULL;
  QhPlan *plan = qh_plan_new(g, NULL, FALSE, &error);
  g_assert_no_error(error);
  g_assert_cmpint(qh_plan_fused_host_groups(plan, QH_HOST_GROUP_TMATMUL), ==, n_groups);
  const int n_in = (int)g->inputs->len, n_out = (int)g->outputs->len;
  QhTensor **x = g_new0(QhTensor *, n_in + 1);
  for (int i = 0; i < n_in; i++) {
    const QhTensor *info = qh_plan_value_info(plan, g_array_index(g->inputs, int, i));
    x[i] = qh_tensor_new(info->dtype, &info->shape, NULL);
    for (size_t e = 0; e < x[i]->nbytes / sizeof(float); e++)
      ((float *)x[i]->data)[e] = rnd() * 2.0f;
  }
  QhThreadPool *pools[] = {qh_thread_pool_new(1), qh_thread_pool_new(2)};
  for (int p = 0; p < 4; p++) {
    QhExecContext ctx = {.pool = pools[p % 2], .bit_compatible = p >= 2};
    QhTensor **fast, **each, **naive;
    run_three_ways(plan, &ctx, x, &fast, &each, &naive);
    for (int o = 0; o < n_out; o++) {
      g_assert_cmpfloat(rel_diff(fast[o], each[o]), <=, 1e-5);
      g_assert_cmpfloat(rel_diff(fast[o], naive[o]), <=, 1e-5);
    }
    free_outs(fast, n_out);
    free_outs(each, n_out);
    free_outs(naive, n_out);
    qh_exec_context_clear(&ctx);
  }
  for (int p = 0; p < 2; p++)
    qh_thread_pool_free(pools[p]);
  for (int i = 0; i < n_in; i++)
    qh_tensor_free(x[i]);
  g_free(x);
  qh_plan_free(plan);
}

/* nn.MultiheadAttention as PyTorch 1.13 exports it: sequence l, heads h of width d, in
 * [l, h * d] (batch 1 folded into the heads). K's split comes first, so its Reshape's
 * slot would be free for Q's values if the group did not keep it alive to the MatMul. */
static void attention(int64_t l, int64_t h, int64_t d) {
  QhGraph *g = qh_graph_new();
  const int64_t split[] = {l, h, d}, merged[] = {l, h * d};
  int qx = input(g, 2, merged), kx = input(g, 2, merged), vx = input(g, 2, merged);
  int k = transpose(g, op2(g, "Reshape", kx, ints(g, 3, split)), 3, (int64_t[]){1, 2, 0});
  int q = transpose(g, op2(g, "Reshape", qx, ints(g, 3, split)), 3, (int64_t[]){1, 0, 2});
  int v = transpose(g, op2(g, "Reshape", vx, ints(g, 3, split)), 3, (int64_t[]){1, 0, 2});
  q = op2(g, "Div", q, scalar(g, sqrtf((float)d)));
  int p = op1(g, "Softmax", op2(g, "MatMul", q, k));
  int y = transpose(g, op2(g, "MatMul", p, v), 3, (int64_t[]){1, 0, 2});
  output(g, op2(g, "Reshape", y, ints(g, 2, merged)));
  check(g, 2);
  qh_graph_free(g);
}

static void test_attention(void) {
  attention(13, 3, 11); /* Q / sqrt(11): a pass over Q */
  attention(7, 2, 1);
  attention(128, 2, 64); /* BERT's heads, Q / 8 as alpha; 1M multiply-adds per GEMM: split */
  attention(197, 1, 64); /* vit_b_16 */
  attention(49, 3, 32);  /* swin_t's windows */
}

/* Rank 4, batch axes permuted, A and B both stored transposed (trans flags), scaled by
 * Muls with the constant first (A's run as a pass, B's a power of two), the result's
 * batch and row axes permuted. */
static void test_batch_perms_both_transposed(void) {
  QhGraph *g = qh_graph_new();
  int xa = input(g, 4, (int64_t[]){3, 2, 5, 7}), xb = input(g, 4, (int64_t[]){9, 2, 3, 5});
  int a = transpose(g, xa, 4, (int64_t[]){1, 0, 3, 2}); /* [2, 3, 7, 5] */
  a = op2(g, "Mul", scalar(g, 0.37f), a);
  int b = transpose(g, xb, 4, (int64_t[]){1, 2, 3, 0}); /* [2, 3, 5, 9] */
  b = op2(g, "Mul", scalar(g, 0.25f), b);              /* a power of two: the GEMM's alpha */
  int y = op2(g, "MatMul", a, b);                      /* [2, 3, 7, 9] */
  output(g, transpose(g, y, 4, (int64_t[]){2, 0, 1, 3}));
  check(g, 1);
  qh_graph_free(g);
}

/* Only B's Transpose fuses: A's has a second reader (a graph output through Neg). Then a
 * MatMul whose Transposes all stay: A's moves the unit-stride axis out of the matrix, the
 * result's swaps the last two axes; and one with broadcast batch dims. */
static void test_not_fused(void) {
  QhGraph *g = qh_graph_new();
  int xa = input(g, 3, (int64_t[]){4, 6, 5}), xb = input(g, 3, (int64_t[]){6, 3, 5});
  int a = transpose(g, xa, 3, (int64_t[]){1, 0, 2}); /* [6, 4, 5] */
  output(g, op1(g, "Neg", a));
  int b = transpose(g, xb, 3, (int64_t[]){0, 2, 1}); /* [6, 5, 3] */
  output(g, op2(g, "MatMul", a, b));                 /* [6, 4, 3] */
  check(g, 1);
  qh_graph_free(g);

  g = qh_graph_new();
  int xc = input(g, 3, (int64_t[]){5, 4, 6}), xd = input(g, 3, (int64_t[]){6, 4, 3});
  int c = transpose(g, xc, 3, (int64_t[]){2, 0, 1}); /* [6, 5, 4]: its matrix strides 24 and 6 */
  int y = op2(g, "MatMul", c, xd);                   /* [6, 5, 3] */
  output(g, transpose(g, y, 3, (int64_t[]){0, 2, 1}));
  int e = transpose(g, input(g, 3, (int64_t[]){1, 5, 3}), 3, (int64_t[]){0, 2, 1}); /* [1, 3, 5] */
  output(g, op2(g, "MatMul", input(g, 3, (int64_t[]){4, 2, 3}), e));                 /* broadcast */
  check(g, 0);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/fused_matmul/attention", test_attention);
  g_test_add_func("/fused_matmul/batch_perms_both_transposed", test_batch_perms_both_transposed);
  g_test_add_func("/fused_matmul/not_fused", test_not_fused);
  return g_test_run();
}
