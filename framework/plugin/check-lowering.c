/* plugin-check's lowering checks: the plugin's int8 kernels against the host's
 * reference path. Small QDQ graphs of the units patterns typically match (Conv and
 * Gemm with optional Relu, MatMul with a constant weight, Add of two activations,
 * Relu, pools, Concat, Sigmoid; uint8 activations with zero points such as 128 and
 * small offsets, int8 weights per channel, int32 bias) are each built twice: one copy
 * runs on the host's reference path, the other is lowered with the plugin and runs
 * three times (again with the same packed weights, then on a 2-thread pool) on the
 * same seeded inputs. Every output element must be within one output quantization
 * step of the reference, since integer requantization and the reference's fp32 math
 * may round one step apart but no further. A graph nobody claims gives no line; a
 * pattern that claims nothing is a SKIP so a vendor knows it went untested. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "exec/plan.h"
#include "lower/lowering.h"
#include "plugin/check-private.h"

#define SEED 20261122u
#define RUNS 3 /* the second reuses the packed weights, the third runs on 2 threads */

/* ---- building QDQ graphs ---- */

typedef struct {
  QhGraph *g;
  GRand *rng;
  float out_scale; /* the output's quantization step */
} Builder;

static int tensor_value(Builder *b, const char *name, QhDType dt, int rank, const int64_t *dims,
                        const void *data) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(dt, &s, NULL);
  memcpy(t->data, data, t->nbytes);
  QhValue *v = qh_graph_add_value(b->g, name, NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

static int new_value(Builder *b, const char *name) { return qh_graph_add_value(b->g, name, NULL)->id; }

static QhNode *add_node(Builder *b, const char *name, const char *op, int n_in, const int *in, int out) {
  return qh_graph_add_node(b->g, name, op, "", n_in, in, 1, &out, NULL);
}

/* A QuantizeLinear then DequantizeLinear of v to uint8 (scale, zp); returns the DQ
 * output. */
static int qdq(Builder *b, const char *base, int v, float scale, int zp) {
  char *n[4] = {g_strdup_printf("%s_scale", base), g_strdup_printf("%s_zero_point", base),
                g_strdup_printf("%s_quantized", base), g_strdup_printf("%s_dequantized", base)};
  uint8_t z = (uint8_t)zp;
  int s = tensor_value(b, n[0], QH_DTYPE_F32, 0, NULL, &scale);
  int zv = tensor_value(b, n[1], QH_DTYPE_U8, 0, NULL, &z);
  int q = new_value(b, n[2]), d = new_value(b, n[3]);
  add_node(b, n[2], "QuantizeLinear", 3, (int[]){v, s, zv}, q);
  add_node(b, n[3], "DequantizeLinear", 3, (int[]){q, s, zv}, d);
  for (int i = 0; i < 4; i++)
    g_free(n[i]);
  return d;
}

static int input(Builder *b, const char *name, int rank, const int64_t *dims, float scale, int zp) {
  QhValue *v = qh_graph_add_value(b->g, name, NULL);
  v->dtype = QH_DTYPE_F32;
  v->shape = qh_shape_make(rank, dims);
  v->is_input = TRUE;
  g_array_append_val(b->g->inputs, v->id);
  return qdq(b, name, v->id, scale, zp);
}

static void output(Builder *b, int v, float scale, int zp) {
  int d = qdq(b, "y", v, scale, zp);
  qh_graph_value(b->g, d)->is_output = TRUE;
  g_array_append_val(b->g->outputs, d);
  b->out_scale = scale;
}

/* A DequantizeLinear of random int8 weights [dims], symmetric (zero point 0), per
 * channel on axis when per_axis >= 0 (scales written to scales[channels]). */
static int weight(Builder *b, const char *base, int rank, const int64_t *dims, int per_axis,
                  float *scales) {
  int64_t numel = 1, count = per_axis >= 0 ? dims[per_axis] : 1;
  for (int i = 0; i < rank; i++)
    numel *= dims[i];
  int8_t *w = g_new(int8_t, numel), *z = g_new0(int8_t, count);
  for (int64_t i = 0; i < numel; i++)
    w[i] = (int8_t)g_rand_int_range(b->rng, -127, 128);
  for (int64_t c = 0; c < count; c++)
    scales[c] = (float)g_rand_double_range(b->rng, 0.004, 0.012);
  char *n[4] = {g_strdup_printf("%s_quantized", base), g_strdup_printf("%s_scale", base),
                g_strdup_printf("%s_zero_point", base), g_strdup_printf("%s_dequantized", base)};
  int q = tensor_value(b, n[0], QH_DTYPE_S8, rank, dims, w);
  int s = tensor_value(b, n[1], QH_DTYPE_F32, per_axis >= 0, &count, scales);
  int zv = tensor_value(b, n[2], QH_DTYPE_S8, per_axis >= 0, &count, z);
  int d = new_value(b, n[3]);
  QhNode *node = add_node(b, n[3], "DequantizeLinear", 3, (int[]){q, s, zv}, d);
  if (per_axis >= 0)
    qh_node_set_attr_int(node, "axis", per_axis);
  for (int i = 0; i < 4; i++)
    g_free(n[i]);
  g_free(w);
  g_free(z);
  return d;
}

/* An int32 bias [n] dequantized with scale x_scale * w_scale[c] (zero point 0), as
 * quantizers write it. */
static int bias(Builder *b, const char *base, int64_t n, float x_scale, const float *w_scales,
                gboolean per_channel) {
  int32_t *q = g_new(int32_t, n), *z = g_new0(int32_t, n);
  float *s = g_new(float, n);
  for (int64_t c = 0; c < n; c++) {
    s[c] = x_scale * w_scales[per_channel ? c : 0];
    q[c] = g_rand_int_range(b->rng, -3000, 3000);
  }
  char *nm[4] = {g_strdup_printf("%s_quantized", base), g_strdup_printf("%s_scale", base),
                 g_strdup_printf("%s_zero_point", base), g_strdup_printf("%s_dequantized", base)};
  int64_t one = per_channel ? n : 1;
  int qv = tensor_value(b, nm[0], QH_DTYPE_S32, 1, &n, q);
  int sv = tensor_value(b, nm[1], QH_DTYPE_F32, per_channel, &one, s);
  int zv = tensor_value(b, nm[2], QH_DTYPE_S32, per_channel, &one, z);
  int d = new_value(b, nm[3]);
  QhNode *node = add_node(b, nm[3], "DequantizeLinear", 3, (int[]){qv, sv, zv}, d);
  if (per_channel)
    qh_node_set_attr_int(node, "axis", 0);
  for (int i = 0; i < 4; i++)
    g_free(nm[i]);
  g_free(q);
  g_free(z);
  g_free(s);
  return d;
}

static int relu(Builder *b, int v) {
  int r = new_value(b, "relu_out");
  add_node(b, "relu", "Relu", 1, &v, r);
  return r;
}

static const int64_t image[4] = {1, 3, 8, 8}, fmap[4] = {1, 4, 8, 8}, rows[2] = {2, 16};

static void conv(Builder *b, gboolean with_relu, int64_t stride) {
  float sx = 0.02f, sw[4];
  int x = input(b, "x", 4, image, sx, 128);
  static const int64_t wd[4] = {4, 3, 3, 3};
  int w = weight(b, "conv_weight", 4, wd, 0, sw);
  int bi = bias(b, "conv_bias", 4, sx, sw, TRUE);
  int c = new_value(b, "conv_out");
  QhNode *n = add_node(b, "conv", "Conv", 3, (int[]){x, w, bi}, c);
  static const int64_t pads[4] = {1, 1, 1, 1}, ks[2] = {3, 3};
  int64_t strides[2] = {stride, stride};
  qh_node_set_attr_ints(n, "pads", 4, pads);
  qh_node_set_attr_ints(n, "kernel_shape", 2, ks);
  qh_node_set_attr_ints(n, "strides", 2, strides);
  if (with_relu)
    output(b, relu(b, c), 0.08f, 5);
  else
    output(b, c, 0.05f, 128);
}
static void g_conv_relu(Builder *b) { conv(b, TRUE, 1); }
static void g_conv(Builder *b) { conv(b, FALSE, 2); }

static void gemm(Builder *b, gboolean with_relu) {
  float sx = 0.016f, sw[1];
  int x = input(b, "x", 2, rows, sx, 120);
  static const int64_t wd[2] = {8, 16};
  int w = weight(b, "fc_weight", 2, wd, -1, sw);
  int bi = bias(b, "fc_bias", 8, sx, sw, FALSE);
  int y = new_value(b, "fc_out");
  QhNode *n = add_node(b, "fc", "Gemm", 3, (int[]){x, w, bi}, y);
  qh_node_set_attr_int(n, "transB", 1);
  if (with_relu)
    output(b, relu(b, y), 0.04f, 3);
  else
    output(b, y, 0.03f, 128);
}
static void g_gemm_relu(Builder *b) { gemm(b, TRUE); }
static void g_gemm(Builder *b) { gemm(b, FALSE); }

static void g_matmul(Builder *b) {
  float sw[1];
  int x = input(b, "x", 2, rows, 0.016f, 128);
  static const int64_t wd[2] = {16, 8};
  int w = weight(b, "matmul_weight", 2, wd, -1, sw);
  int y = new_value(b, "matmul_out");
  add_node(b, "matmul", "MatMul", 2, (int[]){x, w}, y);
  output(b, y, 0.05f, 131);
}

static void add(Builder *b, gboolean with_relu) {
  static const int64_t d[4] = {1, 4, 4, 4};
  int x1 = input(b, "a", 4, d, 0.016f, 128), x2 = input(b, "b", 4, d, 0.02f, 100);
  int s = new_value(b, "add_out");
  add_node(b, "add", "Add", 2, (int[]){x1, x2}, s);
  if (with_relu)
    output(b, relu(b, s), 0.02f, 7);
  else
    output(b, s, 0.03f, 125);
}
static void g_add_relu(Builder *b) { add(b, TRUE); }
static void g_add(Builder *b) { add(b, FALSE); }

/* Ops whose quantizers share the input's qparams (same_params) or give their own. */
static void unary(Builder *b, const char *op, float out_scale, int out_zp) {
  const float sx = 0.016f;
  const int zx = 128;
  int x = input(b, "x", 4, fmap, sx, zx);
  int y = new_value(b, "op_out");
  QhNode *n = add_node(b, "op", op, 1, &x, y);
  static const int64_t k2[2] = {2, 2};
  if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0) {
    qh_node_set_attr_ints(n, "kernel_shape", 2, k2);
    qh_node_set_attr_ints(n, "strides", 2, k2);
  }
  output(b, y, out_scale > 0 ? out_scale : sx, out_scale > 0 ? out_zp : zx);
}
static void g_relu(Builder *b) { unary(b, "Relu", 0, 0); }
static void g_maxpool(Builder *b) { unary(b, "MaxPool", 0, 0); }
static void g_avgpool(Builder *b) { unary(b, "AveragePool", 0.012f, 130); }
static void g_gap(Builder *b) { unary(b, "GlobalAveragePool", 0.004f, 126); }
static void g_sigmoid(Builder *b) { unary(b, "Sigmoid", 1.0f / 256.0f, 0); }

static void g_concat(Builder *b) {
  static const int64_t d1[4] = {1, 2, 4, 4}, d2[4] = {1, 3, 4, 4};
  int x1 = input(b, "a", 4, d1, 0.016f, 128), x2 = input(b, "b", 4, d2, 0.02f, 110);
  int y = new_value(b, "concat_out");
  QhNode *n = add_node(b, "concat", "Concat", 2, (int[]){x1, x2}, y);
  qh_node_set_attr_int(n, "axis", 1);
  output(b, y, 0.022f, 118);
}

typedef struct {
  const char *name;
  void (*build)(Builder *b);
} LoweringGraph;

static const LoweringGraph graphs[] = {
    {"conv_relu", g_conv_relu}, {"conv", g_conv},       {"gemm_relu", g_gemm_relu},
    {"gemm", g_gemm},           {"matmul", g_matmul},   {"add_relu", g_add_relu},
    {"add", g_add},             {"relu", g_relu},       {"maxpool", g_maxpool},
    {"avgpool", g_avgpool},     {"global_avgpool", g_gap}, {"concat", g_concat},
    {"sigmoid", g_sigmoid},
};

/* The graph with every value's dtype and shape filled in (as a loaded model's shape
 * inference leaves them), so the plugin's accept sees what it would on a real model.
 * NULL (error set) if the host cannot plan it. */
static QhGraph *build_graph(const LoweringGraph *lg, float *out_scale, GError **error) {
  Builder b = {qh_graph_new(), g_rand_new_with_seed(SEED), 0};
  qh_graph_set_opset(b.g, "", 13);
  lg->build(&b);
  g_rand_free(b.rng);
  *out_scale = b.out_scale;
  QhPlan *shapes = qh_plan_new(b.g, NULL, TRUE, error);
  if (shapes == NULL) {
    qh_graph_free(b.g);
    return NULL;
  }
  for (int i = 0; i < qh_graph_n_values(b.g); i++) {
    QhValue *v = qh_graph_value(b.g, i);
    const QhTensor *info = qh_plan_value_info(shapes, i);
    if (v && info && v->shape.rank < 0) {
      v->dtype = info->dtype;
      v->shape = info->shape;
    }
  }
  qh_plan_free(shapes);
  return b.g;
}

/* ---- running and comparing ---- */

/* Seeded inputs somewhat wider than what the input quantizers cover, so both ends
 * saturate too. */
static QhTensor **make_inputs(const QhGraph *g) {
  GRand *rng = g_rand_new_with_seed(SEED + 1);
  QhTensor **in = g_new0(QhTensor *, g->inputs->len + 1);
  for (guint i = 0; i < g->inputs->len; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(g->inputs, int, i));
    in[i] = qh_tensor_new(QH_DTYPE_F32, &v->shape, NULL);
    float *d = in[i]->data;
    for (int64_t k = 0; k < qh_tensor_numel(in[i]); k++)
      d[k] = (float)g_rand_double_range(rng, -2.3, 2.9);
  }
  g_rand_free(rng);
  return in;
}

static void free_tensors(QhTensor **t, guint n) {
  if (t == NULL)
    return;
  for (guint i = 0; i < n; i++)
    qh_tensor_free(t[i]);
  g_free(t);
}

static QhTensor **run_plan(QhPlan *plan, int threads, QhTensor **inputs, GError **error) {
  QhExecContext ctx = {.pool = qh_thread_pool_new(threads)};
  QhTensor **out = NULL;
  if (!qh_plan_run(plan, &ctx, (const QhTensor *const *)inputs, &out, error))
    out = NULL;
  qh_exec_context_clear(&ctx);
  qh_thread_pool_free(ctx.pool);
  return out;
}

/* The worst element over all outputs, in output steps; *where describes it. */
static double worst_steps(const QhGraph *g, QhTensor **ref, QhTensor **low, float step, char **where) {
  double worst = -1;
  for (guint o = 0; o < g->outputs->len; o++) {
    const char *name = qh_graph_value(g, g_array_index(g->outputs, int, o))->name;
    if (low[o]->dtype != QH_DTYPE_F32 || low[o]->nbytes != ref[o]->nbytes) {
      g_free(*where);
      *where = g_strdup_printf("output '%s' has dtype %s and %zu bytes, the host's %s and %zu", name,
                               qh_dtype_name(low[o]->dtype), low[o]->nbytes,
                               qh_dtype_name(ref[o]->dtype), ref[o]->nbytes);
      return INFINITY;
    }
    const float *r = ref[o]->data, *l = low[o]->data;
    for (int64_t i = 0; i < qh_tensor_numel(ref[o]); i++) {
      double d = isfinite(l[i]) ? fabs((double)l[i] - r[i]) / step : INFINITY;
      if (d > worst) {
        worst = d;
        g_free(*where);
        *where = g_strdup_printf("output '%s' element %" G_GINT64_FORMAT " is %.6g, the host's %.6g",
                                 name, i, (double)l[i], (double)r[i]);
      }
    }
  }
  return worst;
}

/* "unit 'conv' (conv_relu -> conv2d_nhwc)" for every claimed unit, joined. */
static char *claimed_units(const QhLowering *l) {
  GString *s = g_string_new(NULL);
  const GPtrArray *rows = qh_lowering_rows(l);
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = rows->pdata[i];
    if (r->kernel)
      g_string_append_printf(s, "%sunit '%s' (%s, pattern %s, kernel %s)", s->len ? ", " : "", r->name,
                             r->ops, r->pattern, r->kernel);
  }
  return g_string_free(s, FALSE);
}

static const char *const run_names[RUNS] = {"first run", "second run (packed weights reused)",
                                            "run on 2 threads"};

/* Lower one graph and compare it with the reference; claims[pattern] collects what
 * each pattern claimed, declines the host rows' reasons. */
static void check_graph(QhCheckRun *run, const LoweringGraph *lg, GHashTable *claims,
                        GHashTable *declines, int *n_claimed) {
  char *check = g_strdup_printf("lowering on %s", lg->name);
  GError *error = NULL;
  float step = 0;
  QhGraph *ref_graph = build_graph(lg, &step, &error);
  QhGraph *low_graph = ref_graph ? build_graph(lg, &step, &error) : NULL;
  QhPlan *ref_plan = NULL;
  QhLowering *l = NULL;
  QhTensor **inputs = NULL, **ref = NULL;
  char *units = NULL;
  if (low_graph == NULL || (ref_plan = qh_plan_new(ref_graph, NULL, FALSE, &error)) == NULL) {
    qh_check_add(run, QH_CHECK_FAIL, check, "the host cannot plan its own graph: %s", error->message);
    goto done;
  }
  l = qh_lowering_new(low_graph, run->plugin, NULL, &error);
  if (l == NULL) {
    qh_check_add(run, QH_CHECK_FAIL, check, "%s", error->message);
    goto done;
  }
  const GPtrArray *rows = qh_lowering_rows(l);
  gboolean any = FALSE;
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = rows->pdata[i];
    if (r->pattern) {
      any = TRUE;
      GString *s = g_hash_table_lookup(claims, r->pattern);
      if (s == NULL)
        g_hash_table_insert(claims, g_strdup(r->pattern), s = g_string_new(NULL));
      g_string_append_printf(s, "%s%s (unit '%s')", s->len ? ", " : "", lg->name, r->name);
    } else if (r->reason && !g_hash_table_contains(declines, r->reason)) {
      g_hash_table_add(declines, g_strdup(r->reason));
    }
  }
  if (!any)
    goto done; /* nothing claimed: nothing of the plugin's to check */
  (*n_claimed)++;
  units = claimed_units(l);
  if (!qh_lowering_build(l, &error)) {
    qh_check_add(run, QH_CHECK_FAIL, check, "%s: %s", units, error->message);
    goto done;
  }
  inputs = make_inputs(ref_graph);
  if ((ref = run_plan(ref_plan, 1, inputs, &error)) == NULL) {
    qh_check_add(run, QH_CHECK_FAIL, check, "the host's reference run failed: %s", error->message);
    goto done;
  }
  double worst = 0;
  for (int k = 0; k < RUNS; k++) {
    QhTensor **low = run_plan(qh_lowering_plan(l), k == RUNS - 1 ? 2 : 1, inputs, &error);
    if (low == NULL) {
      qh_check_add(run, QH_CHECK_FAIL, check, "%s: %s: %s", units, run_names[k], error->message);
      goto done;
    }
    char *where = NULL;
    double w = worst_steps(ref_graph, ref, low, step, &where);
    free_tensors(low, ref_graph->outputs->len);
    if (w > 1.0 + 1e-3) {
      qh_check_add(run, QH_CHECK_FAIL, check, "%s: %s: %s: %.3g steps of %g from the host's reference",
                   units, run_names[k], where, w, (double)step);
      g_free(where);
      goto done;
    }
    g_free(where);
    worst = MAX(worst, w);
  }
  qh_check_add(run, QH_CHECK_PASS, check,
               "%s: %d runs (packed weights reused, one on 2 threads) within one step of the host's "
               "reference (worst %.2f steps of %g)",
               units, RUNS, worst, (double)step);
done:
  if (error)
    g_error_free(error);
  g_free(check);
  g_free(units);
  if (ref_graph)
    free_tensors(ref, ref_graph->outputs->len);
  if (ref_graph)
    free_tensors(inputs, ref_graph->inputs->len);
  qh_lowering_free(l);
  qh_plan_free(ref_plan);
  qh_graph_free(low_graph);
  qh_graph_free(ref_graph);
}

static void string_free(gpointer s) { g_string_free(s, TRUE); }

/* The reasons the plugin gave pattern id for declining built-in units ("id: why"). */
static char *declined_reasons(GHashTable *declines, const char *id) {
  GString *s = g_string_new(NULL);
  char *prefix = g_strdup_printf("%s: ", id);
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, declines);
  while (g_hash_table_iter_next(&it, &key, NULL)) {
    char **parts = g_strsplit(key, "; ", -1);
    for (char **p = parts; *p; p++)
      if (g_str_has_prefix(*p, prefix) && !strstr(s->str, *p + strlen(prefix)))
        g_string_append_printf(s, "%s%s", s->len ? "; " : "", *p + strlen(prefix));
    g_strfreev(parts);
  }
  g_free(prefix);
  return g_string_free(s, FALSE);
}

void qh_check_lowering(QhCheckRun *run) {
  const QhLoweringOps *lo = run->desc->lowering;
  GHashTable *claims = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, string_free);
  GHashTable *declines = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  int n_claimed = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(graphs); i++)
    check_graph(run, &graphs[i], claims, declines, &n_claimed);
  for (size_t i = 0; i < lo->n_patterns; i++) {
    const char *id = lo->patterns[i]->id;
    char *check = g_strdup_printf("lowering pattern %s", id);
    GString *s = g_hash_table_lookup(claims, id);
    if (s) {
      qh_check_add(run, QH_CHECK_PASS, check, "claimed %s", s->str);
    } else {
      char *why = declined_reasons(declines, id);
      qh_check_add(run, QH_CHECK_SKIP, check, "no built-in graph for pattern %s%s%s", id,
                   *why ? "; declined: " : "", why);
      g_free(why);
    }
    g_free(check);
  }
  qh_check_add(run, QH_CHECK_PASS, "lowering",
               "%zu patterns validated at load; %d of %zu built-in graphs claimed", lo->n_patterns,
               n_claimed, G_N_ELEMENTS(graphs));
  g_hash_table_destroy(claims);
  g_hash_table_destroy(declines);
}
