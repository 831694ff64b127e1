/* Unit tests of the dense reference kernels (Conv, ConvTranspose, Gemm, MatMul,
 * MaxPool, AveragePool, GlobalAveragePool): small hand-computed cases that pin the
 * naive twins down, sweeps comparing the fast paths (on 1 and 2 threads) with the
 * naive twins, pools against a padded-buffer reference written here, attribute and
 * shape errors, and an informational GFLOP/s figure for a ResNet-sized 3x3 conv. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "core/tensor.h"
#include "exec/blas.h"
#include "exec/kernels/conv-private.h"
#include "exec/onednn.h"
#include "exec/op.h"
#include "exec/threadpool.h"
#include "core/cpu.h"
#include "qhost/host-api.h" /* the QH_CPU_* bits */

static QhThreadPool *pool1, *pool2;

/* ---- helpers ---- */

typedef struct {
  QhGraph *g;
  QhNode *node;
  QhTensor *in[3];
  int n_in;
} Case;

/* A graph with one node of op reading n_in fresh values and writing n_out. */
static Case *case_new(const char *op, int n_in, int n_out) {
  Case *c = g_new0(Case, 1);
  c->g = qh_graph_new();
  c->n_in = n_in;
  int ins[3], outs[2];
  for (int i = 0; i < n_in; i++) {
    char *name = g_strdup_printf("in%d", i);
    ins[i] = qh_graph_add_value(c->g, name, NULL)->id;
    g_free(name);
  }
  for (int i = 0; i < n_out; i++) {
    char *name = g_strdup_printf("out%d", i);
    outs[i] = qh_graph_add_value(c->g, name, NULL)->id;
    g_free(name);
  }
  c->node = qh_graph_add_node(c->g, "node0", op, "", n_in, ins, n_out, outs, NULL);
  g_assert_nonnull(c->node);
  return c;
}

static void case_free(Case *c) {
  for (int i = 0; i < 3; i++)
    qh_tensor_free(c->in[i]);
  qh_graph_free(c->g);
  g_free(c);
}

static QhTensor *tensor(int rank, const int64_t *dims) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  g_assert_nonnull(t);
  return t;
}

static guint32 seed_counter = 1;

static QhTensor *rand_tensor(int rank, const int64_t *dims) {
  QhTensor *t = tensor(rank, dims);
  GRand *r = g_rand_new_with_seed(seed_counter++);
  float *v = t->data;
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    v[i] = (float)g_rand_double_range(r, -1.0, 1.0);
  g_rand_free(r);
  return t;
}

static QhTensor *values_tensor(int rank, const int64_t *dims, const float *v) {
  QhTensor *t = tensor(rank, dims);
  memcpy(t->data, v, t->nbytes);
  return t;
}

static const QhOpDef *def_of(const QhNode *node) {
  const QhOpDef *def = qh_op_find("", node->op_type);
  g_assert_nonnull(def);
  return def;
}

static QhTensor *infer_alloc(const Case *c) {
  const QhOpDef *def = def_of(c->node);
  QhTensor info[2] = {{0}};
  GError *error = NULL;
  gboolean ok = def->infer(c->node, (const QhTensor *const *)c->in, c->n_in, info,
                           c->node->n_outputs, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  QhTensor *t = qh_tensor_new(info[0].dtype, &info[0].shape, &error);
  g_assert_no_error(error);
  /* outputs arrive uninitialised: NaN catches elements a kernel never writes */
  float *v = t->data;
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    v[i] = NAN;
  return t;
}

/* How a fast run sees its context: as in a plan whose weights are constants (Conv may
 * take oneDNN), with every input computed (OpenBLAS), or bit-compatible (OpenBLAS). */
typedef enum { ENGINE_AUTO, ENGINE_NONCONST, ENGINE_BITCOMPAT } EngineMode;

/* Run fn; returns how many Conv nodes ran on oneDNN (0 or 1 here). */
static int run_mode(const Case *c, QhOpRunFn fn, QhThreadPool *pool, QhTensor *out, EngineMode mode) {
  QhExecContext ctx = {.pool = pool};
  ctx.constant_inputs = mode == ENGINE_NONCONST ? 0 : ~(guint64)1; /* every input but X */
  ctx.bit_compatible = mode == ENGINE_BITCOMPAT;
  GError *error = NULL;
  QhTensor *outs[1] = {out};
  gboolean ok = fn(&ctx, c->node, (const QhTensor *const *)c->in, c->n_in, outs, 1, &error);
  int engine = qh_conv_cache_engine_entries(ctx.conv_cache);
  qh_exec_context_clear(&ctx);
  g_assert_no_error(error);
  g_assert_true(ok);
  return engine;
}

static void run_with(const Case *c, QhOpRunFn fn, QhThreadPool *pool, QhTensor *out) {
  (void)run_mode(c, fn, pool, out, ENGINE_AUTO);
}

/* Conv nodes the sweeps ran on oneDNN, and all Conv nodes they ran. */
static int conv_on_engine, conv_total;

/* max |a - b| / max |ref|, with ref = a */
static double rel_diff(const QhTensor *a, const QhTensor *b) {
  g_assert_true(qh_shape_equal(&a->shape, &b->shape));
  const float *x = a->data, *y = b->data;
  double diff = 0.0, mag = 1e-30;
  for (int64_t i = 0; i < qh_tensor_numel(a); i++) {
    g_assert_false(isnan(x[i]) || isnan(y[i]));
    diff = MAX(diff, fabs((double)x[i] - (double)y[i]));
    mag = MAX(mag, fabs((double)x[i]));
  }
  return diff / mag;
}

/* Infer, run the naive twin (or run, when there is none) and the fast path on 1 and
 * 2 threads, check they agree; returns the reference output (caller frees). Conv's fast
 * path runs three ways: on oneDNN's convolution (constant weights), on oneDNN's sgemm
 * (computed weights) and on OpenBLAS (bit-compatible mode); ConvTranspose, Gemm and
 * MatMul on oneDNN's sgemm and on OpenBLAS. The tolerance, max |fast - naive| <= 1e-5 max |naive|:
 * the naive twin sums in double, the fast paths in float in their own order (blocked,
 * FMA); with at most a few hundred products of values in [-1, 1] per output the float
 * rounding stays within a few 1e-7 of the largest output (measured: below 1e-6). */
static QhTensor *check_case(const Case *c) {
  const QhOpDef *def = def_of(c->node);
  QhTensor *ref = infer_alloc(c);
  run_with(c, def->run_naive != NULL ? def->run_naive : def->run, pool1, ref);
  QhThreadPool *pools[] = {pool1, pool2};
  gboolean is_conv = strcmp(c->node->op_type, "Conv") == 0;
  /* every op on sgemm has a bit-compatible (OpenBLAS) run too */
  gboolean three_ways = is_conv || strcmp(c->node->op_type, "ConvTranspose") == 0 ||
                        strcmp(c->node->op_type, "Gemm") == 0 || strcmp(c->node->op_type, "MatMul") == 0;
  const EngineMode modes[] = {ENGINE_AUTO, ENGINE_NONCONST, ENGINE_BITCOMPAT};
  for (int i = 0; i < 2; i++)
    for (int m = 0; m < (three_ways ? 3 : 1); m++) {
      QhTensor *out = infer_alloc(c);
      int engine = run_mode(c, def->run, pools[i], out, modes[m]);
      if (modes[m] != ENGINE_AUTO || !is_conv)
        g_assert_cmpint(engine, ==, 0);
      else if (is_conv && i == 0) {
        conv_on_engine += engine;
        conv_total++;
      }
      double d = rel_diff(ref, out);
      if (d > 1e-5) {
        char *s = qh_shape_to_string(&ref->shape);
        g_test_message("%s output %s (mode %d): fast vs naive relative diff %g", c->node->op_type, s,
                       (int)modes[m], d);
        g_free(s);
      }
      g_assert_cmpfloat(d, <=, 1e-5);
      qh_tensor_free(out);
    }
  return ref;
}

static void assert_values(const QhTensor *t, int rank, const int64_t *dims, const float *want) {
  QhShape s = qh_shape_make(rank, dims);
  g_assert_true(qh_shape_equal(&t->shape, &s));
  const float *v = t->data;
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    g_assert_cmpfloat_with_epsilon(v[i], want[i], 1e-5);
}

static void check_and_free(Case *c) {
  qh_tensor_free(check_case(c));
  case_free(c);
}

/* Expect infer to fail with code and a message containing frag. */
static void expect_error(const Case *c, QhErrorCode code, const char *frag) {
  const QhOpDef *def = def_of(c->node);
  QhTensor info[2] = {{0}};
  GError *error = NULL;
  g_assert_false(def->infer(c->node, (const QhTensor *const *)c->in, c->n_in, info,
                            c->node->n_outputs, &error));
  g_assert_error(error, QH_ERROR, (gint)code);
  if (strstr(error->message, frag) == NULL || strstr(error->message, "node 'node0'") == NULL)
    g_error("message '%s' lacks '%s'", error->message, frag);
  g_error_free(error);
}

/* ---- Conv ---- */

typedef struct {
  int64_t n, c, m, group;
  int nsp;
  int64_t in[3], k[3], s[3], d[3];
  const int64_t *pads; /* 2 * nsp values, or NULL */
  const char *auto_pad;
  gboolean bias;
} ConvSpec;

static Case *conv_case(const char *op, const ConvSpec *p) {
  Case *c = case_new(op, p->bias ? 3 : 2, 1);
  int64_t xd[5] = {p->n, p->c}, wd[5];
  gboolean transpose = strcmp(op, "ConvTranspose") == 0;
  wd[0] = transpose ? p->c : p->m;
  wd[1] = transpose ? p->m / p->group : p->c / p->group;
  for (int i = 0; i < p->nsp; i++) {
    xd[2 + i] = p->in[i];
    wd[2 + i] = p->k[i];
  }
  c->in[0] = rand_tensor(p->nsp + 2, xd);
  c->in[1] = rand_tensor(p->nsp + 2, wd);
  if (p->bias)
    c->in[2] = rand_tensor(1, (int64_t[]){p->m});
  qh_node_set_attr_int(c->node, "group", p->group);
  qh_node_set_attr_ints(c->node, "strides", p->nsp, p->s);
  qh_node_set_attr_ints(c->node, "dilations", p->nsp, p->d);
  if (p->pads != NULL)
    qh_node_set_attr_ints(c->node, "pads", 2 * p->nsp, p->pads);
  if (p->auto_pad != NULL)
    qh_node_set_attr_string(c->node, "auto_pad", p->auto_pad);
  return c;
}

static void test_conv_exact(void) {
  /* 2-D: x 3x3 = 1..9, w = [[1, 0], [0, 1]], bias 0.5: x[i][j] + x[i+1][j+1] + 0.5 */
  Case *c = case_new("Conv", 3, 1);
  c->in[0] = values_tensor(4, (int64_t[]){1, 1, 3, 3}, (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
  c->in[1] = values_tensor(4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 0, 0, 1});
  c->in[2] = values_tensor(1, (int64_t[]){1}, (float[]){0.5f});
  QhTensor *y = check_case(c);
  assert_values(y, 4, (int64_t[]){1, 1, 2, 2}, (float[]){6.5f, 8.5f, 12.5f, 14.5f});
  const QhOpDef *def = def_of(c->node);
  g_assert_cmpint(def->macs(c->node, (const QhTensor *const *)c->in, 3, y, 1), ==, 4 * 4);
  qh_tensor_free(y);
  case_free(c);

  /* 1-D: x = 1..5, w = [1, 2, 3], pads 1, stride 2: windows [0 1 2], [2 3 4], [4 5 0] */
  c = case_new("Conv", 2, 1);
  c->in[0] = values_tensor(3, (int64_t[]){1, 1, 5}, (float[]){1, 2, 3, 4, 5});
  c->in[1] = values_tensor(3, (int64_t[]){1, 1, 3}, (float[]){1, 2, 3});
  qh_node_set_attr_ints(c->node, "pads", 2, (int64_t[]){1, 1});
  qh_node_set_attr_ints(c->node, "strides", 1, (int64_t[]){2});
  y = check_case(c);
  assert_values(y, 3, (int64_t[]){1, 1, 3}, (float[]){8, 20, 14});
  qh_tensor_free(y);
  case_free(c);

  /* auto_pad with an odd total padding: SAME_UPPER pads the end, SAME_LOWER the start */
  for (int upper = 0; upper < 2; upper++) {
    c = case_new("Conv", 2, 1);
    c->in[0] = values_tensor(3, (int64_t[]){1, 1, 4}, (float[]){1, 2, 3, 4});
    c->in[1] = values_tensor(3, (int64_t[]){1, 1, 2}, (float[]){1, 1});
    qh_node_set_attr_string(c->node, "auto_pad", upper ? "SAME_UPPER" : "SAME_LOWER");
    y = check_case(c);
    assert_values(y, 3, (int64_t[]){1, 1, 4}, upper ? (float[]){3, 5, 7, 4} : (float[]){1, 3, 5, 7});
    qh_tensor_free(y);
    case_free(c);
  }

  /* depthwise 3x3 of ones, pad 1, on a 2-channel 3x3 image: neighbourhood sums */
  c = case_new("Conv", 2, 1);
  float x[18], ones[18];
  for (int i = 0; i < 18; i++) {
    x[i] = (float)(i % 9 + 1) * (i < 9 ? 1.0f : -1.0f);
    ones[i] = 1.0f;
  }
  c->in[0] = values_tensor(4, (int64_t[]){1, 2, 3, 3}, x);
  c->in[1] = values_tensor(4, (int64_t[]){2, 1, 3, 3}, ones);
  qh_node_set_attr_int(c->node, "group", 2);
  qh_node_set_attr_ints(c->node, "pads", 4, (int64_t[]){1, 1, 1, 1});
  y = check_case(c);
  assert_values(y, 4, (int64_t[]){1, 2, 3, 3},
                (float[]){12, 21, 16, 27, 45, 33, 24, 39, 28,
                          -12, -21, -16, -27, -45, -33, -24, -39, -28});
  qh_tensor_free(y);
  case_free(c);
}

static void test_conv_sweep(void) {
  static const int64_t p1111[] = {1, 1, 1, 1}, pasym[] = {0, 1, 2, 0}, p2[] = {2, 2, 2, 2};
  static const int64_t p1d[] = {2, 1}, p3d[] = {1, 0, 1, 1, 1, 0};
  const ConvSpec specs[] = {
      /* n, c, m, group, nsp, in, k, s, d, pads, auto_pad, bias */
      {1, 3, 4, 1, 2, {5, 6}, {3, 3}, {1, 1}, {1, 1}, p1111, NULL, TRUE},
      {2, 4, 6, 1, 2, {7, 5}, {3, 3}, {2, 2}, {1, 1}, pasym, NULL, FALSE},
      {1, 4, 6, 2, 2, {6, 6}, {3, 2}, {1, 2}, {1, 1}, p1111, NULL, TRUE},
      {2, 6, 4, 2, 2, {9, 8}, {3, 3}, {1, 1}, {2, 2}, p2, NULL, TRUE},
      {1, 5, 7, 1, 2, {4, 5}, {1, 1}, {1, 1}, {1, 1}, NULL, NULL, TRUE},   /* pointwise */
      {2, 6, 9, 3, 2, {4, 5}, {1, 1}, {1, 1}, {1, 1}, NULL, NULL, FALSE},  /* grouped 1x1 */
      {1, 4, 8, 1, 2, {7, 7}, {1, 1}, {2, 2}, {1, 1}, NULL, NULL, TRUE},   /* strided 1x1 */
      {1, 3, 4, 1, 2, {7, 6}, {3, 3}, {2, 2}, {1, 1}, NULL, "SAME_UPPER", TRUE},
      {1, 3, 4, 1, 2, {7, 6}, {4, 3}, {2, 1}, {1, 1}, NULL, "SAME_LOWER", TRUE},
      {1, 3, 4, 1, 2, {7, 6}, {3, 3}, {2, 2}, {1, 1}, NULL, "VALID", FALSE},
      {1, 3, 2, 1, 2, {8, 8}, {7, 7}, {2, 2}, {1, 1}, (const int64_t[]){3, 3, 3, 3}, NULL, TRUE},
      /* depthwise: interiors, borders, 3x3 s1/s2, other sizes, dilation */
      {2, 5, 5, 5, 2, {9, 11}, {3, 3}, {1, 1}, {1, 1}, p1111, NULL, TRUE},
      {1, 5, 5, 5, 2, {9, 11}, {3, 3}, {2, 2}, {1, 1}, p1111, NULL, TRUE},
      {1, 5, 5, 5, 2, {10, 12}, {3, 3}, {2, 2}, {1, 1}, pasym, NULL, FALSE},
      {1, 3, 3, 3, 2, {12, 10}, {5, 5}, {1, 2}, {1, 1}, p2, NULL, TRUE},
      {1, 3, 3, 3, 2, {12, 10}, {3, 3}, {1, 1}, {2, 2}, p2, NULL, TRUE},
      {1, 3, 3, 3, 2, {3, 3}, {3, 3}, {1, 1}, {1, 1}, NULL, NULL, TRUE},
      {1, 4, 4, 4, 2, {6, 7}, {3, 3}, {2, 2}, {1, 1}, NULL, "SAME_UPPER", TRUE},
      {1, 3, 6, 3, 2, {6, 7}, {3, 3}, {1, 1}, {1, 1}, p1111, NULL, TRUE}, /* multiplier 2 */
      /* 1-D and 3-D */
      {2, 3, 4, 1, 1, {10}, {3}, {2}, {1}, p1d, NULL, TRUE},
      {1, 4, 4, 4, 1, {10}, {3}, {1}, {2}, p1d, NULL, TRUE},
      {1, 4, 6, 2, 1, {9}, {4}, {3}, {1}, NULL, "SAME_LOWER", FALSE},
      {1, 2, 3, 1, 3, {4, 5, 4}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, p3d, NULL, TRUE},
      {2, 4, 4, 4, 3, {3, 4, 5}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, p3d, NULL, TRUE},
  };
  conv_on_engine = conv_total = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(specs); i++)
    check_and_free(conv_case("Conv", &specs[i]));
  /* oneDNN has JIT kernels for every 1-D, 2-D and 3-D form above; a decline would hide
   * the engine behind the OpenBLAS path */
  g_test_message("%s: %d of %d convs on oneDNN", qh_blas_describe(), conv_on_engine, conv_total);
  if (g_strcmp0(g_getenv("QH_EXPECT_ISA"), "off") == 0)
    g_assert_cmpint(conv_on_engine, ==, 0);
  else
    g_assert_cmpint(conv_on_engine, ==, conv_total);
}

/* oneDNN dispatches within the features the host reports: QH_EXPECT_ISA (set by
 * CMake next to QHOST_CPU_DISABLE) names the ISA family it must use. Skipped (77) when
 * the CPU lacks that ISA for real. */
static void test_engine_isa(void) {
  const char *want = g_getenv("QH_EXPECT_ISA");
  const char *desc = qh_onednn_describe();
  uint64_t f = qh_cpu_features();
  g_test_message("%s (host features 0x%" G_GINT64_MODIFIER "x)", desc, (guint64)f);
  g_assert_nonnull(qh_onednn_engine());
  if (want == NULL || strcmp(want, "native") == 0)
    return;
  if (strcmp(want, "off") == 0) { /* QHOST_FP32_ENGINE=openblas */
    g_assert_false(qh_onednn_enabled());
    g_assert_nonnull(strstr(desc, "oneDNN off"));
    return;
  }
  if (strcmp(want, "avx2") == 0) {
    g_assert_nonnull(strstr(desc, "ISA avx2"));
  } else {
    g_assert_cmpstr(want, ==, "sse41");
    g_assert_nonnull(strstr(desc, "ISA sse41"));
  }
}

/* The cache follows the node: new weights at the same address, a new input shape and
 * a new thread count each rebuild the entry, and the result follows the naive twin. */
static void test_conv_engine_cache(void) {
  if (!qh_onednn_enabled()) {
    g_test_skip("QHOST_FP32_ENGINE=openblas");
    return;
  }
  static const int64_t p1111[] = {1, 1, 1, 1};
  const ConvSpec p = {1, 8, 16, 1, 2, {9, 9}, {3, 3}, {1, 1}, {1, 1}, p1111, NULL, TRUE};
  Case *c = conv_case("Conv", &p);
  const QhOpDef *def = def_of(c->node);
  QhExecContext ctx = {.pool = pool1, .constant_inputs = ~(guint64)1};
  for (int step = 0; step < 4; step++) {
    if (step == 1) { /* same buffer, new values */
      float *w = c->in[1]->data;
      for (int64_t i = 0; i < qh_tensor_numel(c->in[1]); i++)
        w[i] = -0.5f * w[i] + 0.25f;
    } else if (step == 2) { /* a larger image on the same node */
      qh_tensor_free(c->in[0]);
      c->in[0] = rand_tensor(4, (int64_t[]){1, 8, 13, 11});
    } else if (step == 3) {
      ctx.pool = pool2;
    }
    QhTensor *ref = infer_alloc(c), *out = infer_alloc(c);
    run_with(c, def->run_naive, pool1, ref);
    GError *error = NULL;
    QhTensor *outs[1] = {out};
    g_assert_true(def->run(&ctx, c->node, (const QhTensor *const *)c->in, 3, outs, 1, &error));
    g_assert_no_error(error);
    g_assert_cmpint(qh_conv_cache_engine_entries(ctx.conv_cache), ==, 1);
    g_assert_cmpfloat(rel_diff(ref, out), <=, 1e-5);
    qh_tensor_free(ref);
    qh_tensor_free(out);
  }
  qh_exec_context_clear(&ctx);
  g_assert_null(ctx.conv_cache);
  case_free(c);
}

static void test_conv_transpose(void) {
  /* x = [[1, 2], [3, 4]], w = ones 2x2: stride 2 expands pixels to blocks, stride 1 overlaps */
  for (int stride = 1; stride <= 2; stride++) {
    Case *c = case_new("ConvTranspose", 2, 1);
    c->in[0] = values_tensor(4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 2, 3, 4});
    c->in[1] = values_tensor(4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 1, 1, 1});
    qh_node_set_attr_ints(c->node, "strides", 2, (int64_t[]){stride, stride});
    QhTensor *y = check_case(c);
    if (stride == 2)
      assert_values(y, 4, (int64_t[]){1, 1, 4, 4},
                    (float[]){1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
    else
      assert_values(y, 4, (int64_t[]){1, 1, 3, 3}, (float[]){1, 3, 2, 4, 10, 6, 3, 7, 4});
    qh_tensor_free(y);
    case_free(c);
  }

  /* 1-D x = [1, 2], w = [1, 1, 1], stride 2 scatters to [1, 1, 3, 2, 2]; cropping it
   * to 4 drops the end for SAME_UPPER, the start for SAME_LOWER and output_shape */
  for (int mode = 0; mode < 4; mode++) {
    Case *c = case_new("ConvTranspose", 2, 1);
    c->in[0] = values_tensor(3, (int64_t[]){1, 1, 2}, (float[]){1, 2});
    c->in[1] = values_tensor(3, (int64_t[]){1, 1, 3}, (float[]){1, 1, 1});
    qh_node_set_attr_ints(c->node, "strides", 1, (int64_t[]){2});
    if (mode == 1)
      qh_node_set_attr_string(c->node, "auto_pad", "SAME_UPPER");
    if (mode == 2)
      qh_node_set_attr_string(c->node, "auto_pad", "SAME_LOWER");
    if (mode == 3)
      qh_node_set_attr_ints(c->node, "output_shape", 1, (int64_t[]){4});
    QhTensor *y = check_case(c);
    if (mode == 0)
      assert_values(y, 3, (int64_t[]){1, 1, 5}, (float[]){1, 1, 3, 2, 2});
    else
      assert_values(y, 3, (int64_t[]){1, 1, 4},
                    mode == 1 ? (float[]){1, 1, 3, 2} : (float[]){1, 3, 2, 2});
    qh_tensor_free(y);
    case_free(c);
  }

  static const int64_t p1111[] = {1, 1, 1, 1}, pasym[] = {0, 1, 1, 0};
  const ConvSpec specs[] = {
      {1, 3, 4, 1, 2, {4, 5}, {3, 3}, {2, 2}, {1, 1}, p1111, NULL, TRUE},
      {2, 4, 6, 2, 2, {3, 4}, {3, 2}, {2, 1}, {1, 1}, pasym, NULL, TRUE},
      {1, 4, 4, 4, 2, {5, 5}, {3, 3}, {1, 1}, {2, 2}, p1111, NULL, FALSE},
      {1, 2, 3, 1, 2, {3, 4}, {3, 3}, {2, 2}, {1, 1}, NULL, "SAME_UPPER", TRUE},
      {1, 2, 3, 1, 2, {3, 4}, {3, 3}, {2, 2}, {1, 1}, NULL, "SAME_LOWER", TRUE},
      {1, 3, 2, 1, 1, {6}, {4}, {3}, {1}, (const int64_t[]){1, 2}, NULL, TRUE},
      {1, 2, 2, 1, 3, {2, 3, 2}, {2, 2, 3}, {2, 1, 2}, {1, 1, 1}, NULL, NULL, TRUE},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(specs); i++)
    check_and_free(conv_case("ConvTranspose", &specs[i]));

  /* output_padding: stride 2, 3x3, pads 1 -> 2*(4-1) + 1 + 3 - 2 = 8 */
  Case *c = conv_case("ConvTranspose", &specs[1]);
  qh_node_set_attr_ints(c->node, "pads", 4, p1111);
  qh_node_set_attr_ints(c->node, "output_padding", 2, (int64_t[]){1, 0});
  QhTensor *y = check_case(c);
  g_assert_cmpint(y->shape.dims[2], ==, 2 * (3 - 1) + 1 + 3 - 2);
  g_assert_cmpint(y->shape.dims[3], ==, 1 * (4 - 1) + 0 + 2 - 2);
  qh_tensor_free(y);
  case_free(c);

  /* output_shape: total padding 2*(4-1)+3-8 = 1, split as the spec says (extra at start) */
  c = conv_case("ConvTranspose", &specs[0]);
  qh_node_set_attr_ints(c->node, "output_shape", 2, (int64_t[]){8, 10});
  y = check_case(c);
  g_assert_cmpint(y->shape.dims[2], ==, 8);
  g_assert_cmpint(y->shape.dims[3], ==, 10);
  qh_tensor_free(y);
  case_free(c);
}

static void test_conv_errors(void) {
  ConvSpec p = {1, 4, 2, 1, 2, {5, 5}, {3, 3}, {1, 1}, {1, 1}, NULL, NULL, TRUE};
  Case *c = conv_case("Conv", &p);
  qh_tensor_free(c->in[1]);
  c->in[1] = rand_tensor(4, (int64_t[]){2, 3, 3, 3});
  expect_error(c, QH_ERROR_INVALID, "weight has 3 input channels per group");
  qh_node_set_attr_int(c->node, "group", 3);
  expect_error(c, QH_ERROR_INVALID, "group 3 does not divide the 4 input channels");
  qh_node_set_attr_int(c->node, "group", 1);
  qh_tensor_free(c->in[1]);
  c->in[1] = NULL;
  expect_error(c, QH_ERROR_INVALID, "input 1 is missing");
  c->in[1] = rand_tensor(4, (int64_t[]){2, 4, 3, 3});
  qh_node_set_attr_ints(c->node, "pads", 2, (int64_t[]){1, 1});
  expect_error(c, QH_ERROR_INVALID, "attribute pads has 2 values; expected 4");
  qh_node_set_attr_ints(c->node, "pads", 4, (int64_t[]){0, 0, 0, 0});
  qh_node_set_attr_ints(c->node, "kernel_shape", 2, (int64_t[]){3, 2});
  expect_error(c, QH_ERROR_INVALID, "disagrees with the weight");
  qh_node_set_attr_ints(c->node, "kernel_shape", 2, (int64_t[]){3, 3});
  qh_node_set_attr_ints(c->node, "strides", 2, (int64_t[]){0, 1});
  expect_error(c, QH_ERROR_INVALID, "strides[0] = 0 is out of range");
  qh_node_set_attr_ints(c->node, "strides", 2, (int64_t[]){1, 1});
  qh_node_set_attr_ints(c->node, "dilations", 2, (int64_t[]){3, 1});
  expect_error(c, QH_ERROR_INVALID, "larger than the padded input");
  qh_node_set_attr_ints(c->node, "dilations", 2, (int64_t[]){1, 1});
  qh_node_set_attr_string(c->node, "auto_pad", "SAME");
  expect_error(c, QH_ERROR_INVALID, "unknown auto_pad 'SAME'");
  qh_node_set_attr_string(c->node, "auto_pad", "NOTSET");
  qh_tensor_free(c->in[2]);
  c->in[2] = rand_tensor(1, (int64_t[]){3});
  expect_error(c, QH_ERROR_INVALID, "bias has shape [3]; expected [2]");
  qh_tensor_free(c->in[0]);
  QhShape s8 = qh_shape_make(4, (int64_t[]){1, 4, 5, 5});
  c->in[0] = qh_tensor_new(QH_DTYPE_S8, &s8, NULL);
  expect_error(c, QH_ERROR_UNSUPPORTED, "input 0 has type int8; supported: float32");
  case_free(c);

  ConvSpec t = {1, 4, 2, 2, 2, {3, 3}, {3, 3}, {1, 1}, {1, 1}, NULL, NULL, FALSE};
  c = conv_case("ConvTranspose", &t);
  qh_tensor_free(c->in[1]);
  c->in[1] = rand_tensor(4, (int64_t[]){3, 1, 3, 3});
  expect_error(c, QH_ERROR_INVALID, "weight has 3 input channels; the input has 4");
  case_free(c);

  /* hostile sizes: inference needs shapes only, so no data is allocated */
  c = case_new("ConvTranspose", 2, 1);
  QhTensor x = {.dtype = QH_DTYPE_F32, .shape = qh_shape_make(3, (int64_t[]){1, 1, 1 << 20})};
  QhTensor w = {.dtype = QH_DTYPE_F32, .shape = qh_shape_make(3, (int64_t[]){1, 1, 3})};
  c->in[0] = &x;
  c->in[1] = &w;
  qh_node_set_attr_ints(c->node, "strides", 1, (int64_t[]){INT64_C(1) << 30});
  expect_error(c, QH_ERROR_LIMIT, "exceed the element limit");
  qh_node_set_attr_ints(c->node, "strides", 1, (int64_t[]){INT64_C(1) << 40});
  expect_error(c, QH_ERROR_INVALID, "strides[0] = 1099511627776 is out of range");
  c->in[0] = c->in[1] = NULL;
  case_free(c);
}

/* ---- Gemm and MatMul ---- */

static void test_gemm(void) {
  /* [[1 2 3], [4 5 6]] x [[1 2], [3 4], [5 6]] = [[22 28], [49 64]]; 2 * that + [1, -1] */
  Case *c = case_new("Gemm", 3, 1);
  c->in[0] = values_tensor(2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, 6});
  c->in[1] = values_tensor(2, (int64_t[]){3, 2}, (float[]){1, 2, 3, 4, 5, 6});
  c->in[2] = values_tensor(1, (int64_t[]){2}, (float[]){1, -1});
  qh_node_set_attr_float(c->node, "alpha", 2.0f);
  QhTensor *y = check_case(c);
  assert_values(y, 2, (int64_t[]){2, 2}, (float[]){45, 55, 99, 127});
  g_assert_cmpint(def_of(c->node)->macs(c->node, (const QhTensor *const *)c->in, 3, y, 1), ==, 12);
  qh_tensor_free(y);
  case_free(c);

  const int64_t M = 5, N = 7, K = 6;
  const struct { int rank; int64_t dims[2]; } cshapes[] = {
      {-1, {0}}, {1, {N}}, {2, {M, N}}, {2, {1, N}}, {2, {M, 1}}, {0, {0}}, {1, {1}},
  };
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (size_t ci = 0; ci < G_N_ELEMENTS(cshapes); ci++) {
        gboolean has_c = cshapes[ci].rank >= 0;
        c = case_new("Gemm", has_c ? 3 : 2, 1);
        c->in[0] = rand_tensor(2, ta ? (int64_t[]){K, M} : (int64_t[]){M, K});
        c->in[1] = rand_tensor(2, tb ? (int64_t[]){N, K} : (int64_t[]){K, N});
        if (has_c)
          c->in[2] = rand_tensor(cshapes[ci].rank, cshapes[ci].dims);
        qh_node_set_attr_int(c->node, "transA", ta);
        qh_node_set_attr_int(c->node, "transB", tb);
        qh_node_set_attr_float(c->node, "alpha", 0.5f);
        qh_node_set_attr_float(c->node, "beta", 2.0f);
        check_and_free(c);
      }

  c = case_new("Gemm", 3, 1);
  c->in[0] = rand_tensor(2, (int64_t[]){2, 3});
  c->in[1] = rand_tensor(2, (int64_t[]){4, 3});
  c->in[2] = rand_tensor(1, (int64_t[]){2});
  expect_error(c, QH_ERROR_INVALID, "inner dimensions differ");
  qh_node_set_attr_int(c->node, "transB", 1);
  expect_error(c, QH_ERROR_INVALID, "C has shape [2], which does not broadcast to [2, 4]");
  case_free(c);
}

static void test_matmul(void) {
  /* [1 2 3] x [[1 2], [3 4], [5 6]] = [22 28], the vector's unit dim dropped */
  Case *c = case_new("MatMul", 2, 1);
  c->in[0] = values_tensor(1, (int64_t[]){3}, (float[]){1, 2, 3});
  c->in[1] = values_tensor(2, (int64_t[]){3, 2}, (float[]){1, 2, 3, 4, 5, 6});
  QhTensor *y = check_case(c);
  assert_values(y, 1, (int64_t[]){2}, (float[]){22, 28});
  qh_tensor_free(y);
  case_free(c);

  const struct { int ra; int64_t a[4]; int rb; int64_t b[4]; int ry; int64_t y[4]; } cases[] = {
      {2, {4, 3}, 1, {3}, 1, {4}},
      {1, {3}, 1, {3}, 0, {0}},
      {2, {4, 3}, 2, {3, 5}, 2, {4, 5}},
      {4, {2, 1, 3, 4}, 3, {5, 4, 6}, 4, {2, 5, 3, 6}},
      {4, {2, 5, 3, 4}, 2, {4, 6}, 4, {2, 5, 3, 6}}, /* Linear on a 4-D input */
      {3, {1, 3, 4}, 3, {2, 4, 5}, 3, {2, 3, 5}},
      {1, {4}, 3, {2, 4, 3}, 2, {2, 3}},
      {3, {2, 3, 4}, 1, {4}, 2, {2, 3}},
      {2, {3, 4}, 4, {2, 2, 4, 5}, 4, {2, 2, 3, 5}},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    c = case_new("MatMul", 2, 1);
    c->in[0] = rand_tensor(cases[i].ra, cases[i].a);
    c->in[1] = rand_tensor(cases[i].rb, cases[i].b);
    y = check_case(c);
    QhShape want = qh_shape_make(cases[i].ry, cases[i].y);
    g_assert_true(qh_shape_equal(&y->shape, &want));
    int64_t k = cases[i].a[cases[i].ra - 1];
    g_assert_cmpint(def_of(c->node)->macs(c->node, (const QhTensor *const *)c->in, 2, y, 1), ==,
                    qh_tensor_numel(y) * k);
    qh_tensor_free(y);
    case_free(c);
  }

  c = case_new("MatMul", 2, 1);
  c->in[0] = rand_tensor(2, (int64_t[]){2, 3});
  c->in[1] = rand_tensor(2, (int64_t[]){4, 2});
  expect_error(c, QH_ERROR_INVALID, "do not multiply");
  qh_tensor_free(c->in[0]);
  qh_tensor_free(c->in[1]);
  c->in[0] = rand_tensor(3, (int64_t[]){2, 2, 3});
  c->in[1] = rand_tensor(3, (int64_t[]){3, 3, 2});
  expect_error(c, QH_ERROR_INVALID, "do not broadcast");
  case_free(c);
}

/* ---- pools ---- */

/* The pools computed over an explicitly padded buffer, the way the ONNX test
 * generator does: pads[] are explicit; taps beyond in + pb + pe (ceil_mode) are
 * neither data nor padding. */
static void ref_pool(const QhTensor *x, int nsp, const int64_t *k, const int64_t *s,
                     const int64_t *d, const int64_t *pads, gboolean ceil_mode, gboolean is_max,
                     gboolean include_pad, QhTensor **out) {
  int64_t in[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, ss[3] = {1, 1, 1}, dd[3] = {1, 1, 1};
  int64_t pb[3] = {0}, pe[3] = {0}, o[3] = {1, 1, 1};
  int64_t ydims[5] = {x->shape.dims[0], x->shape.dims[1]};
  for (int i = 0; i < nsp; i++) {
    int j = 3 - nsp + i;
    in[j] = x->shape.dims[2 + i];
    kk[j] = k[i], ss[j] = s[i], dd[j] = d[i], pb[j] = pads[i], pe[j] = pads[nsp + i];
    int64_t span = in[j] + pb[j] + pe[j] - (kk[j] - 1) * dd[j] - 1;
    o[j] = ceil_mode ? (span + ss[j] - 1) / ss[j] + 1 : span / ss[j] + 1;
    if (ceil_mode && (o[j] - 1) * ss[j] >= in[j] + pb[j])
      o[j]--;
    ydims[2 + i] = o[j];
  }
  QhTensor *y = tensor(nsp + 2, ydims);
  const float *xv = x->data;
  float *yv = y->data;
  int64_t planes = ydims[0] * ydims[1], e = 0;
  for (int64_t p = 0; p < planes; p++)
    for (int64_t a = 0; a < o[0]; a++)
      for (int64_t b = 0; b < o[1]; b++)
        for (int64_t c = 0; c < o[2]; c++) {
          double best = -INFINITY, sum = 0.0;
          int64_t n_data = 0, n_padded = 0;
          for (int64_t i = 0; i < kk[0]; i++)
            for (int64_t j = 0; j < kk[1]; j++)
              for (int64_t l = 0; l < kk[2]; l++) {
                /* coordinates in the padded buffer */
                int64_t q[3] = {a * ss[0] + i * dd[0], b * ss[1] + j * dd[1], c * ss[2] + l * dd[2]};
                gboolean data = TRUE, padded = TRUE;
                for (int m = 0; m < 3; m++) {
                  data = data && q[m] >= pb[m] && q[m] < pb[m] + in[m];
                  padded = padded && q[m] < pb[m] + in[m] + pe[m];
                }
                n_padded += padded;
                if (!data)
                  continue;
                double v = xv[((p * in[0] + q[0] - pb[0]) * in[1] + q[1] - pb[1]) * in[2] + q[2] - pb[2]];
                best = MAX(best, v);
                sum += v;
                n_data++;
              }
          yv[e++] = (float)(is_max ? best : sum / (double)(include_pad ? n_padded : n_data));
        }
  *out = y;
}

static void test_pool_exact(void) {
  float x25[25];
  for (int i = 0; i < 25; i++)
    x25[i] = (float)(i + 1);
  /* MaxPool 2x2 s2 with ceil_mode on 5x5: the last row/column windows are partial */
  Case *c = case_new("MaxPool", 1, 1);
  c->in[0] = values_tensor(4, (int64_t[]){1, 1, 5, 5}, x25);
  qh_node_set_attr_ints(c->node, "kernel_shape", 2, (int64_t[]){2, 2});
  qh_node_set_attr_ints(c->node, "strides", 2, (int64_t[]){2, 2});
  qh_node_set_attr_int(c->node, "ceil_mode", 1);
  QhTensor *y = check_case(c);
  assert_values(y, 4, (int64_t[]){1, 1, 3, 3}, (float[]){7, 9, 10, 17, 19, 20, 22, 24, 25});
  qh_tensor_free(y);
  case_free(c);

  /* AveragePool 2x2 s2 pads 1 on 3x3 = 1..9, without and with the pads counted */
  for (int include = 0; include < 2; include++) {
    c = case_new("AveragePool", 1, 1);
    c->in[0] = values_tensor(4, (int64_t[]){1, 1, 3, 3}, x25);
    qh_node_set_attr_ints(c->node, "kernel_shape", 2, (int64_t[]){2, 2});
    qh_node_set_attr_ints(c->node, "strides", 2, (int64_t[]){2, 2});
    qh_node_set_attr_ints(c->node, "pads", 4, (int64_t[]){1, 1, 1, 1});
    qh_node_set_attr_int(c->node, "count_include_pad", include);
    y = check_case(c);
    if (include)
      assert_values(y, 4, (int64_t[]){1, 1, 2, 2}, (float[]){0.25f, 1.25f, 2.75f, 7});
    else
      assert_values(y, 4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 2.5f, 5.5f, 7});
    qh_tensor_free(y);
    case_free(c);
  }

  /* ceil_mode's last window must start inside the input or left padding: 1-D, in 4,
   * k 2, s 2, pads [0, 1] gives 2 outputs, not 3 */
  c = case_new("MaxPool", 1, 1);
  c->in[0] = values_tensor(3, (int64_t[]){1, 1, 4}, x25);
  qh_node_set_attr_ints(c->node, "kernel_shape", 1, (int64_t[]){2});
  qh_node_set_attr_ints(c->node, "strides", 1, (int64_t[]){2});
  qh_node_set_attr_ints(c->node, "pads", 2, (int64_t[]){0, 1});
  qh_node_set_attr_int(c->node, "ceil_mode", 1);
  y = check_case(c);
  assert_values(y, 3, (int64_t[]){1, 1, 2}, (float[]){2, 4});
  qh_tensor_free(y);
  case_free(c);

  /* AveragePool, ceil_mode, count_include_pad: the window hanging past the input
   * counts only its taps inside the (unpadded) input: [1.5, 3.5, 5] */
  c = case_new("AveragePool", 1, 1);
  c->in[0] = values_tensor(3, (int64_t[]){1, 1, 5}, x25);
  qh_node_set_attr_ints(c->node, "kernel_shape", 1, (int64_t[]){2});
  qh_node_set_attr_ints(c->node, "strides", 1, (int64_t[]){2});
  qh_node_set_attr_int(c->node, "ceil_mode", 1);
  qh_node_set_attr_int(c->node, "count_include_pad", 1);
  y = check_case(c);
  assert_values(y, 3, (int64_t[]){1, 1, 3}, (float[]){1.5f, 3.5f, 5});
  qh_tensor_free(y);
  case_free(c);

  c = case_new("GlobalAveragePool", 1, 1);
  c->in[0] = values_tensor(4, (int64_t[]){1, 2, 2, 2}, x25);
  y = check_case(c);
  assert_values(y, 4, (int64_t[]){1, 2, 1, 1}, (float[]){2.5f, 6.5f});
  qh_tensor_free(y);
  case_free(c);
}

typedef struct {
  int nsp;
  int64_t in[3], k[3], s[3], d[3], pads[6];
  int ceil_mode;
  const char *auto_pad; /* NULL: explicit pads */
} PoolSpec;

static void test_pool_sweep(void) {
  const PoolSpec specs[] = {
      {2, {7, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, NULL},
      {2, {7, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
      {2, {8, 7}, {2, 3}, {2, 2}, {1, 1}, {0, 1, 2, 0}, 1, NULL},
      {2, {9, 9}, {3, 2}, {1, 2}, {2, 2}, {2, 1, 2, 1}, 0, NULL},
      {2, {9, 10}, {3, 3}, {3, 3}, {2, 1}, {0, 0, 2, 1}, 1, NULL},
      {2, {7, 6}, {3, 3}, {2, 2}, {1, 1}, {0}, 0, "SAME_UPPER"},
      {2, {7, 6}, {3, 2}, {2, 2}, {1, 1}, {0}, 0, "SAME_LOWER"},
      {2, {7, 6}, {3, 3}, {2, 2}, {1, 1}, {0}, 0, "VALID"},
      {1, {11}, {3}, {2}, {1}, {1, 2}, 1, NULL},
      {3, {5, 6, 4}, {2, 3, 2}, {2, 2, 1}, {1, 1, 2}, {1, 0, 0, 0, 1, 1}, 1, NULL},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(specs); i++)
    for (int op = 0; op < 3; op++) {
      const PoolSpec *p = &specs[i];
      gboolean is_max = op == 0, include = op == 2;
      Case *c = case_new(is_max ? "MaxPool" : "AveragePool", 1, 1);
      int64_t xd[5] = {2, 3};
      memcpy(xd + 2, p->in, sizeof(int64_t) * (size_t)p->nsp);
      c->in[0] = rand_tensor(p->nsp + 2, xd);
      qh_node_set_attr_ints(c->node, "kernel_shape", p->nsp, p->k);
      qh_node_set_attr_ints(c->node, "strides", p->nsp, p->s);
      qh_node_set_attr_ints(c->node, "dilations", p->nsp, p->d);
      qh_node_set_attr_int(c->node, "ceil_mode", p->ceil_mode);
      if (!is_max)
        qh_node_set_attr_int(c->node, "count_include_pad", include);
      int64_t pads[6];
      memcpy(pads, p->pads, sizeof(pads));
      if (p->auto_pad != NULL) {
        qh_node_set_attr_string(c->node, "auto_pad", p->auto_pad);
        for (int j = 0; j < p->nsp; j++) {
          gboolean same = strcmp(p->auto_pad, "VALID") != 0;
          int64_t out = (p->in[j] + p->s[j] - 1) / p->s[j];
          int64_t total = same ? MAX(0, (out - 1) * p->s[j] + (p->k[j] - 1) * p->d[j] + 1 - p->in[j]) : 0;
          pads[j] = strcmp(p->auto_pad, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
          pads[p->nsp + j] = total - pads[j];
        }
      } else {
        qh_node_set_attr_ints(c->node, "pads", 2 * p->nsp, p->pads);
      }
      QhTensor *y = check_case(c), *want;
      /* the fast loops keep the reference's comparisons and double sums: the same bits */
      QhTensor *fast = infer_alloc(c), *naive = infer_alloc(c);
      run_with(c, def_of(c->node)->run, pool2, fast);
      run_with(c, def_of(c->node)->run_naive, pool1, naive);
      g_assert_cmpmem(fast->data, fast->nbytes, naive->data, naive->nbytes);
      qh_tensor_free(fast);
      qh_tensor_free(naive);
      ref_pool(c->in[0], p->nsp, p->k, p->s, p->d, pads, p->ceil_mode, is_max, include, &want);
      g_assert_cmpfloat(rel_diff(want, y), <=, 1e-6);
      qh_tensor_free(want);
      qh_tensor_free(y);
      case_free(c);
    }
}

static void test_pool_errors(void) {
  Case *c = case_new("MaxPool", 1, 2);
  c->in[0] = rand_tensor(4, (int64_t[]){1, 2, 4, 4});
  expect_error(c, QH_ERROR_INVALID, "kernel_shape is required");
  qh_node_set_attr_ints(c->node, "kernel_shape", 2, (int64_t[]){2, 2});
  expect_error(c, QH_ERROR_UNSUPPORTED, "the Indices output is not supported");
  case_free(c);
  c = case_new("MaxPool", 1, 1);
  c->in[0] = rand_tensor(4, (int64_t[]){1, 2, 4, 4});
  qh_node_set_attr_ints(c->node, "kernel_shape", 1, (int64_t[]){2});
  expect_error(c, QH_ERROR_INVALID, "kernel_shape has 1 values; the input has 2 spatial");
  qh_node_set_attr_ints(c->node, "kernel_shape", 2, (int64_t[]){2, 2});
  qh_node_set_attr_int(c->node, "storage_order", 1);
  expect_error(c, QH_ERROR_UNSUPPORTED, "storage_order 1");
  case_free(c);
  c = case_new("GlobalAveragePool", 1, 1);
  c->in[0] = rand_tensor(2, (int64_t[]){2, 4});
  expect_error(c, QH_ERROR_UNSUPPORTED, "input has rank 2");
  case_free(c);
}

/* ---- speed (informational) ---- */

static void time_conv(const ConvSpec *p, const char *what) {
  Case *c = conv_case("Conv", p);
  QhTensor *y = infer_alloc(c);
  const QhOpDef *def = def_of(c->node);
  double flops = 2.0 * (double)def->macs(c->node, (const QhTensor *const *)c->in, 3, y, 1);
  for (int threads = 1; threads <= 2; threads++) {
    QhThreadPool *pool = qh_thread_pool_new(threads);
    /* one context, as in a plan's runs: the first run builds oneDNN's primitive */
    QhExecContext ctx = {.pool = pool, .constant_inputs = ~(guint64)1};
    QhTensor *outs[1] = {y};
    g_assert_true(def->run(&ctx, c->node, (const QhTensor *const *)c->in, 3, outs, 1, NULL));
    /* the best of a few runs: the machine is shared, the minimum is the kernel's speed */
    double sec = INFINITY;
    for (int i = 0; i < 8; i++) {
      gint64 t0 = g_get_monotonic_time();
      g_assert_true(def->run(&ctx, c->node, (const QhTensor *const *)c->in, 3, outs, 1, NULL));
      sec = MIN(sec, (double)(g_get_monotonic_time() - t0) / 1e6);
    }
    qh_exec_context_clear(&ctx);
    g_test_message("%s: %.3f ms, %.1f GFLOP/s on %d thread(s)", what, sec * 1e3,
                   flops / sec / 1e9, threads);
    qh_thread_pool_free(pool);
  }
  qh_tensor_free(y);
  case_free(c);
}

static void test_conv_speed(void) {
  static const int64_t p1111[] = {1, 1, 1, 1};
  const ConvSpec resnet = {1, 64, 64, 1, 2, {56, 56}, {3, 3}, {1, 1}, {1, 1}, p1111, NULL, TRUE};
  const ConvSpec dw = {1, 96, 96, 96, 2, {56, 56}, {3, 3}, {1, 1}, {1, 1}, p1111, NULL, TRUE};
  time_conv(&dw, "depthwise 96 3x3 56x56");
  time_conv(&resnet, "conv 64->64 3x3 56x56");
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  const char *want = g_getenv("QH_EXPECT_ISA");
  if (want != NULL && strcmp(want, "avx2") == 0 && !__builtin_cpu_supports("avx2")) {
    g_print("SKIP: this CPU has no AVX2\n");
    return 77;
  }
  pool1 = qh_thread_pool_new(1);
  pool2 = qh_thread_pool_new(2);
  g_test_add_func("/kernels/dense/engine_isa", test_engine_isa);
  g_test_add_func("/kernels/dense/conv/exact", test_conv_exact);
  g_test_add_func("/kernels/dense/conv/sweep", test_conv_sweep);
  g_test_add_func("/kernels/dense/conv/engine_cache", test_conv_engine_cache);
  g_test_add_func("/kernels/dense/conv/transpose", test_conv_transpose);
  g_test_add_func("/kernels/dense/conv/errors", test_conv_errors);
  g_test_add_func("/kernels/dense/gemm", test_gemm);
  g_test_add_func("/kernels/dense/matmul", test_matmul);
  g_test_add_func("/kernels/dense/pool/exact", test_pool_exact);
  g_test_add_func("/kernels/dense/pool/sweep", test_pool_sweep);
  g_test_add_func("/kernels/dense/pool/errors", test_pool_errors);
  g_test_add_func("/kernels/dense/conv/speed", test_conv_speed);
  int rc = g_test_run();
  qh_thread_pool_free(pool1);
  qh_thread_pool_free(pool2);
  return rc;
}
