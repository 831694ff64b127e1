/* The fast LSTM and GRU (exec/kernels/rnn-fast.c) against their naive twins (rnn.c) on
 * one-node graphs covering what the fast path treats apart: forward, reverse and
 * bidirectional; biases or none; initial states; per-batch sequence_lens (0, short,
 * full); peepholes; clip; GRU's linear_before_reset 0 and 1; gate widths that are and
 * are not multiples of the vector lanes; and a sequence long enough that the input
 * projection is computed in several chunks. Each runs on a 1- and a 2-thread pool.
 * Tolerance: max |fast - naive| <= 2e-6 max |naive| per output (the GEMM sums in its
 * own order and tanh is not glibc's; measured below 5e-7). Then the two helpers on their
 * own: the vector tanh against tanhf over a sweep, and the vector-times-matrix product
 * against a double-precision sum. ctest runs this again with AVX-512 and with AVX2
 * hidden (QHOST_CPU_DISABLE), so every ISA branch is compared. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "exec/kernels/rnn-private.h"
#include "exec/plan.h"

static guint32 seed = 4242;

static float rnd(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int constant(QhGraph *g, const char *name, int rank, const int64_t *dims, float scale) {
  QhShape s = {.rank = rank};
  memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  for (size_t i = 0; i < t->nbytes / sizeof(float); i++)
    ((float *)t->data)[i] = rnd() * scale;
  QhValue *v = qh_graph_add_value(g, name, NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

static void output(QhGraph *g, int v) {
  qh_graph_value(g, v)->is_output = TRUE;
  g_array_append_val(g->outputs, v);
}

typedef struct {
  const char *name;
  const char *op;
  const char *direction;
  int64_t seq, batch, input, hidden;
  gboolean bias, states, lens, peepholes, lbr;
  float clip;
} Case;

static QhGraph *make_graph(const Case *c) {
  const gboolean lstm = strcmp(c->op, "LSTM") == 0;
  const int64_t dirs = strcmp(c->direction, "bidirectional") == 0 ? 2 : 1;
  const int64_t G = (lstm ? 4 : 3) * c->hidden, H = c->hidden, B = c->batch;
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = (QhShape){.rank = 3, .dims = {c->seq, B, c->input}};
  g_array_append_val(g->inputs, x->id);
  /* weights of about 1/sqrt(fan-in), as nn.LSTM initialises them */
  const float ws = 1.0f / sqrtf((float)H);
  int ins[8] = {x->id, -1, -1, -1, -1, -1, -1, -1};
  ins[1] = constant(g, "W", 3, (int64_t[]){dirs, G, c->input}, ws);
  ins[2] = constant(g, "R", 3, (int64_t[]){dirs, G, H}, ws);
  if (c->bias)
    ins[3] = constant(g, "B", 2, (int64_t[]){dirs, 2 * G}, ws);
  if (c->lens) {
    QhShape s = {.rank = 1, .dims = {B}};
    QhTensor *t = qh_tensor_new(QH_DTYPE_S32, &s, NULL);
    for (int64_t b = 0; b < B; b++) /* full, zero, then shorter and shorter */
      ((int32_t *)t->data)[b] = b == 0 ? (int32_t)c->seq : b == 1 ? 0 : (int32_t)(c->seq - b);
    QhValue *v = qh_graph_add_value(g, "lens", NULL);
    qh_value_set_initializer(v, t);
    ins[4] = v->id;
  }
  if (c->states) {
    ins[5] = constant(g, "h0", 3, (int64_t[]){dirs, B, H}, 0.5f);
    if (lstm)
      ins[6] = constant(g, "c0", 3, (int64_t[]){dirs, B, H}, 0.5f);
  }
  if (c->peepholes)
    ins[7] = constant(g, "P", 2, (int64_t[]){dirs, 3 * H}, 0.5f);
  int n_in = 8;
  while (n_in > 3 && ins[n_in - 1] < 0)
    n_in--;
  int outs[3] = {qh_graph_add_value(g, "y", NULL)->id, qh_graph_add_value(g, "yh", NULL)->id,
                 lstm ? qh_graph_add_value(g, "yc", NULL)->id : -1};
  const int n_out = lstm ? 3 : 2;
  QhNode *n = qh_graph_add_node(g, "rnn", c->op, "", n_in, ins, n_out, outs, NULL);
  qh_node_set_attr_int(n, "hidden_size", H);
  qh_node_set_attr_string(n, "direction", c->direction);
  if (c->lbr)
    qh_node_set_attr_int(n, "linear_before_reset", 1);
  if (c->clip > 0.0f)
    qh_node_set_attr_float(n, "clip", c->clip);
  for (int o = 0; o < n_out; o++)
    output(g, outs[o]);
  return g;
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
    g_assert_true(isfinite(x[i]));
    diff = MAX(diff, fabs((double)x[i] - (double)y[i]));
    mag = MAX(mag, fabs((double)y[i]));
  }
  return diff / mag;
}

/* bench's work count: every step's input and recurrent products, per direction */
static void check_macs(const Case *c, QhPlan *plan, QhGraph *g) {
  const QhOpDef *def = qh_op_find("", c->op);
  g_assert_nonnull(def);
  g_assert_nonnull(def->macs);
  const QhNode *node = g_ptr_array_index(g->nodes, 0);
  const QhTensor *in[3];
  for (int i = 0; i < 3; i++)
    in[i] = qh_plan_value_info(plan, node->inputs[i]);
  const int64_t dirs = strcmp(c->direction, "bidirectional") == 0 ? 2 : 1;
  const int64_t gates = strcmp(c->op, "LSTM") == 0 ? 4 : 3;
  g_assert_cmpint(def->macs(node, in, node->n_inputs, NULL, node->n_outputs), ==,
                  c->seq * c->batch * dirs * gates * c->hidden * (c->input + c->hidden));
}

static void check_case(gconstpointer data) {
  const Case *c = data;
  QhGraph *g = make_graph(c);
  GError *error = NULL;
  QhPlan *plan = qh_plan_new(g, NULL, FALSE, &error);
  g_assert_no_error(error);
  const QhTensor *xi = qh_plan_value_info(plan, qh_graph_find_value(g, "x"));
  QhTensor *x = qh_tensor_new(QH_DTYPE_F32, &xi->shape, NULL);
  for (size_t i = 0; i < x->nbytes / sizeof(float); i++)
    ((float *)x->data)[i] = rnd() * 2.0f;
  const int n_out = (int)g->outputs->len;
  QhThreadPool *pools[] = {qh_thread_pool_new(1), qh_thread_pool_new(2)};
  double worst = 0.0;
  for (int p = 0; p < 2; p++) {
    QhExecContext ctx = {.pool = pools[p]};
    QhTensor **fast = run(plan, &ctx, x), **again = run(plan, &ctx, x);
    qh_plan_use_naive_kernels(plan, TRUE);
    QhTensor **naive = run(plan, &ctx, x);
    qh_plan_use_naive_kernels(plan, FALSE);
    for (int o = 0; o < n_out; o++) {
      g_assert_cmpmem(fast[o]->data, fast[o]->nbytes, again[o]->data, again[o]->nbytes);
      double d = rel_diff(fast[o], naive[o]);
      worst = MAX(worst, d);
      if (d > 2e-6)
        g_error("%s: output %d differs from the naive kernel by %.3g of its max", c->name, o, d);
    }
    for (int o = 0; o < n_out; o++) {
      qh_tensor_free(fast[o]);
      qh_tensor_free(again[o]);
      qh_tensor_free(naive[o]);
    }
    g_free(fast);
    g_free(again);
    g_free(naive);
    qh_exec_context_clear(&ctx);
  }
  if (g_test_verbose())
    g_printerr("%s: max |fast - naive| / max |naive| = %.3g\n", c->name, worst);
  check_macs(c, plan, g);
  for (int p = 0; p < 2; p++)
    qh_thread_pool_free(pools[p]);
  qh_tensor_free(x);
  qh_plan_free(plan);
  qh_graph_free(g);
}

static const Case CASES[] = {
    {"lstm_plain", "LSTM", "forward", 7, 3, 5, 24, FALSE, FALSE, FALSE, FALSE, FALSE, 0.0f},
    {"lstm_bi_lens", "LSTM", "bidirectional", 9, 4, 16, 24, TRUE, TRUE, TRUE, FALSE, FALSE, 0.0f},
    {"lstm_reverse_peep_clip", "LSTM", "reverse", 6, 3, 7, 17, TRUE, TRUE, TRUE, TRUE, FALSE, 0.9f},
    {"lstm_peep_bi_odd", "LSTM", "bidirectional", 5, 2, 3, 5, TRUE, FALSE, FALSE, TRUE, FALSE, 0.0f},
    {"gru_plain", "GRU", "forward", 8, 2, 6, 13, TRUE, TRUE, FALSE, FALSE, FALSE, 0.0f},
    {"gru_bi_lbr_lens_clip", "GRU", "bidirectional", 7, 4, 9, 24, TRUE, TRUE, TRUE, FALSE, TRUE, 1.5f},
    {"gru_reverse_nobias", "GRU", "reverse", 5, 3, 4, 40, FALSE, FALSE, TRUE, FALSE, FALSE, 0.0f},
    /* 8 x 512 gates per step: the 1 MiB projection chunk holds 64 steps of 70 */
    {"lstm_chunked_bi", "LSTM", "bidirectional", 70, 8, 16, 128, TRUE, FALSE, TRUE, FALSE, FALSE, 0.0f},
    {"gru_chunked_lbr", "GRU", "reverse", 70, 8, 16, 176, TRUE, TRUE, TRUE, FALSE, TRUE, 0.0f},
};

/* The vector tanh against glibc's over every 1/64 of an exponent from 2^-30 to 2^5 and
 * both signs, and at the ends (0, +-inf). */
static void test_tanh(void) {
  enum { N = 35 * 64 * 2 + 3 };
  float *x = g_new(float, N), *y = g_new(float, N), *work = g_new(float, N);
  int n = 0;
  for (int e = -30; e < 5; e++)
    for (int m = 0; m < 64; m++) {
      float v = ldexpf(1.0f + (float)m / 64.0f, e);
      x[n++] = v;
      x[n++] = -v;
    }
  x[n++] = 0.0f;
  x[n++] = INFINITY;
  x[n++] = -INFINITY;
  g_assert_cmpint(n, ==, N);
  qh_rnn_tanh_f32(x, y, N, work);
  double worst = 0.0;
  for (int i = 0; i < N; i++) {
    double want = tanh((double)x[i]);
    double err = want == 0.0 ? fabs((double)y[i]) : fabs((double)y[i] - want) / fabs(want);
    worst = MAX(worst, err);
  }
  if (g_test_verbose())
    g_printerr("tanh: max relative error %.3g\n", worst);
  g_assert_cmpfloat(worst, <=, 1e-6);
  g_free(x);
  g_free(y);
  g_free(work);
}

/* Widths around the lane counts (8, 16) and the register blocks (32, 64), with a row
 * stride wider than the width. */
static void test_vecmat(void) {
  const int64_t widths[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 96, 130};
  for (size_t w = 0; w < G_N_ELEMENTS(widths); w++) {
    const int64_t n = widths[w], n_k = 11, ld = n + 3;
    float *v = g_new(float, n_k), *m = g_new(float, n_k * ld), *acc = g_new(float, n + 1);
    for (int64_t k = 0; k < n_k; k++)
      v[k] = rnd();
    for (int64_t i = 0; i < n_k * ld; i++)
      m[i] = rnd();
    for (int64_t j = 0; j <= n; j++)
      acc[j] = (float)j; /* acc[n] is a guard the product must not touch */
    qh_rnn_vecmat_f32(v, m, n_k, n, ld, acc);
    for (int64_t j = 0; j < n; j++) {
      double want = (double)j;
      for (int64_t k = 0; k < n_k; k++)
        want += (double)v[k] * (double)m[k * ld + j];
      g_assert_cmpfloat(fabs((double)acc[j] - want), <=, 1e-5 * (1.0 + fabs(want)));
    }
    g_assert_cmpfloat(acc[n], ==, (float)n);
    g_free(v);
    g_free(m);
    g_free(acc);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(CASES); i++) {
    char *path = g_strdup_printf("/rnn_fast/%s", CASES[i].name);
    g_test_add_data_func(path, &CASES[i], check_case);
    g_free(path);
  }
  g_test_add_func("/rnn_fast/tanh", test_tanh);
  g_test_add_func("/rnn_fast/vecmat", test_vecmat);
  return g_test_run();
}
