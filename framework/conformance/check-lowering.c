/* plugin-check's lowering checks: the plugin's int8 kernels against the host's
 * reference path, on three sets of small QDQ graphs. First the plugin's own: for each
 * declared pattern, a float graph of its op chain quantized by `qhost quantize`'s flow
 * with the plugin (check-patterns.c), lowered with that pattern alone, so its kernels
 * meet the qparams, bias form and shared grids its own quantizer makes. Then the uint8
 * built-in family (check-graphs-u8.c: zero points such as 128, int8 weights per channel,
 * int32 bias, arbitrary scales), always; and the int8 power-of-two one of DPU-like
 * backends (check-graphs-pow2.c), for the patterns nothing else claimed.
 * Each graph is loaded or built twice: one copy runs on the host's reference path, the
 * other is lowered with the plugin and runs three times (again with the same packed
 * weights, then on a 2-thread pool) on the same seeded inputs. Every output element must
 * equal the reference's, or be one output quantization step from it where the
 * reference's value before rounding lies at a tie (within TIE_STEPS, 2^-10 of a step, of
 * a half step): integer requantization and the reference's fp32 math may round a tie
 * apart (ONNX rounds half to even, a DPU half up, an fp32 order differs in the last
 * bits) but an honest kernel differs nowhere else, so a kernel a step off away from ties
 * (a zero point shifted by one, truncation for rounding) fails. Where the reference's
 * fp32 math is exact (the power-of-two built-in graphs, and generated graphs
 * check-exact.c finds exact) and the plugin supplies reference_numerics, its kernels
 * must also give bit for bit what its own fake_quantize makes of the value the output
 * quantizer reads, when a kernel writes that value: the one-step bar cannot see a
 * kernel that rounds ties the wrong way. A graph nobody claims gives no line; a declared
 * pattern whose kernel never completed a run on any graph is a FAIL, listed in the
 * report, so a plugin whose kernels never run does not conform. */
#include <glib/gstdio.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "exec/plan.h"
#include "io/onnx.h"
#include "lower/lowering.h"
#include "conformance/check-private.h"

#define SEED 20261122u
/* How far from a half step (in output steps) the reference's value before rounding may
 * be where a kernel rounds it the other way: 2^-10 of a step. fp32 evaluation orders
 * move a value by about 1e-4 steps on these graphs; a kernel that is wrong by a zero
 * point or a rounding mode (truncation for rounding) is off on about half the elements,
 * most of them far from any tie. */
#define TIE_STEPS (1.0 / 1024.0)
#define RUNS 3 /* the second reuses the packed weights, the third runs on 2 threads */

typedef QhCheckBuilder Builder;

/* Every value's dtype and shape filled in (as a loaded model's shape inference leaves
 * them), so the plugin's accept sees what it would on a real model. FALSE (error set) if
 * the host cannot plan the graph. */
static gboolean fill_shapes(QhGraph *g, GError **error) {
  QhPlan *shapes = qh_plan_new(g, NULL, TRUE, error);
  if (shapes == NULL)
    return FALSE;
  for (int i = 0; i < qh_graph_n_values(g); i++) {
    QhValue *v = qh_graph_value(g, i);
    const QhTensor *info = qh_plan_value_info(shapes, i);
    if (v && info && v->shape.rank < 0) {
      v->dtype = info->dtype;
      v->shape = info->shape;
    }
  }
  qh_plan_free(shapes);
  return TRUE;
}

/* A built-in graph, shapes filled in; NULL (error set) if the host cannot plan it. */
static QhGraph *build_graph(const QhCheckGraph *lg, Builder *info, GError **error) {
  Builder b = {qh_graph_new(), g_rand_new_with_seed(SEED), 0, 0, 0, -1, 0};
  qh_graph_set_opset(b.g, "", 13);
  lg->build(&b);
  g_rand_free(b.rng);
  b.rng = NULL;
  *info = b;
  if (!fill_shapes(b.g, error)) {
    qh_graph_free(b.g);
    return NULL;
  }
  return b.g;
}

/* The initializer of node input slot, or NULL. */
static const QhTensor *input_constant(const QhGraph *g, const QhNode *n, int slot) {
  int id = qh_node_input(n, slot);
  return id >= 0 ? qh_graph_value(g, id)->initializer : NULL;
}

/* A QDQ file qhost quantize wrote, loaded with shapes filled in, and *info describing
 * its first output's quantization (pre_quant -1 when the output is not the
 * DequantizeLinear of a per-tensor QuantizeLinear). NULL with error set. */
static QhGraph *load_qdq(const char *path, Builder *info, GError **error) {
  QhGraph *g = qh_onnx_load(path, error);
  if (g == NULL || !fill_shapes(g, error)) {
    qh_graph_free(g);
    return NULL;
  }
  *info = (Builder){g, NULL, 1.0f, 0, 0, -1, 0};
  const QhValue *out = g->outputs->len ? qh_graph_value(g, g_array_index(g->outputs, int, 0)) : NULL;
  const QhNode *dq = out && out->producer >= 0 ? qh_graph_node(g, out->producer) : NULL;
  const QhValue *qv = dq && strcmp(dq->op_type, "DequantizeLinear") == 0 ? qh_graph_value(g, qh_node_input(dq, 0))
                                                                           : NULL;
  const QhNode *q = qv && qv->producer >= 0 ? qh_graph_node(g, qv->producer) : NULL;
  if (q == NULL || strcmp(q->op_type, "QuantizeLinear") != 0)
    return g;
  const QhTensor *scale = input_constant(g, q, 1), *zp = input_constant(g, q, 2);
  if (scale == NULL || scale->dtype != QH_DTYPE_F32 || qh_tensor_numel(scale) != 1 || zp == NULL ||
      qh_tensor_numel(zp) != 1 || (zp->dtype != QH_DTYPE_S8 && zp->dtype != QH_DTYPE_U8))
    return g;
  info->out_scale = *(const float *)scale->data;
  info->out_signed = zp->dtype == QH_DTYPE_S8;
  info->out_zero_point = info->out_signed ? *(const int8_t *)zp->data : *(const uint8_t *)zp->data;
  info->pre_quant = qh_node_input(q, 0);
  return g;
}

/* ---- running and comparing ---- */

/* A family of built-in graphs: check names carry the prefix, PASS lines the label. */
typedef struct {
  const char *prefix; /* "" or "int8_pow2 " */
  const char *label; /* NULL: the uint8 family, whose lines keep their first form */
  const QhCheckGraph *graphs;
  size_t n;
} Family;

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

/* The worst element over all outputs, in output steps; *where describes it. *same and
 * *total count the elements bit-identical to the reference and all elements. */
/* Whether g has a node of op. */
static gboolean has_op(const QhGraph *g, const char *op) {
  for (guint i = 0; i < g->nodes->len; i++)
    if (strcmp(qh_graph_node(g, (int)i)->op_type, op) == 0)
      return TRUE;
  return FALSE;
}

/* The step a float output is compared in: 8 units in the last place of float32 at the
 * output's largest magnitude (the rescale by x_scale * w_scale may be multiplied in
 * another order than the host's). */
static float float_output_step(const QhTensor *ref) {
  const float *r = ref->data;
  float top = 0;
  for (int64_t i = 0; i < qh_tensor_numel(ref); i++)
    top = fmaxf(top, fabsf(r[i]));
  return top > 0 ? top * 0x1p-20f : FLT_MIN;
}

static double worst_steps(const QhGraph *g, QhTensor **ref, QhTensor **low, float step, char **where,
                          int64_t *same, int64_t *total) {
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
      *same += memcmp(&l[i], &r[i], sizeof *l) == 0;
      (*total)++;
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

/* Where the kernel's output low differs from the reference ref at an element whose
 * value before rounding (pre, in the reference) is not at a tie: the first such element
 * described, NULL when every difference sits at a tie. *tie_max is the largest distance
 * from a half step over the differing elements. */
static char *off_tie(const QhTensor *low, const QhTensor *ref, const QhTensor *pre, float step,
                     const char *name, double *tie_max) {
  const float *l = low->data, *r = ref->data, *p = pre->data;
  for (int64_t i = 0; i < qh_tensor_numel(ref); i++) {
    if (memcmp(&l[i], &r[i], sizeof *l) == 0)
      continue;
    double v = (double)p[i] / step, tie = fabs(v - floor(v) - 0.5);
    *tie_max = MAX(*tie_max, tie);
    if (tie > TIE_STEPS)
      return g_strdup_printf("output '%s' element %" G_GINT64_FORMAT " is %.6g, the host's %.6g, where the "
                             "value before rounding (%.6g, %.4f steps) is %.3f steps from a tie: an honest "
                             "kernel differs from the host only at ties",
                             name, i, (double)l[i], (double)r[i], (double)p[i], v, tie);
  }
  return NULL;
}

/* "unit 'conv' (conv_relu -> conv2d_nhwc)" for every claimed unit, joined. */
static char *claimed_units(const QhLowering *l) {
  GString *s = g_string_new(NULL);
  const GPtrArray *rows = qh_lowering_rows(l);
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = rows->pdata[i];
    if (r->kernel && r->partition)
      g_string_append_printf(s, "%spartition '%s' (%s, kernel %s)", s->len ? ", " : "", r->partition, r->ops,
                             r->kernel);
    else if (r->kernel)
      g_string_append_printf(s, "%sunit '%s' (%s, pattern %s, kernel %s)", s->len ? ", " : "", r->name,
                             r->ops, r->pattern, r->kernel);
  }
  return g_string_free(s, FALSE);
}

/* Whether a plugin's unit holds node id (the node writing the value the output's
 * QuantizeLinear reads): else the host rounds the output, not the plugin. */
static gboolean claimed_node(const QhLowering *l, int id) {
  const GPtrArray *rows = qh_lowering_rows(l);
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = rows->pdata[i];
    for (guint k = 0; r->kernel && k < r->nodes->len; k++)
      if (g_array_index(r->nodes, int, k) == id)
        return TRUE;
  }
  return FALSE;
}

/* The plugin's own rounding (reference_numerics.fake_quantize) of pre, the value the
 * output's QuantizeLinear reads in the reference: on an exact graph what its kernel must
 * give. NULL with *why when the plugin has no numerics or refuses these qparams. */
static QhTensor *own_numerics(QhCheckRun *run, const Builder *info, const QhTensor *pre, char **why) {
  const QhPluginDesc *d = run->desc;
  if (!QH_HAS_FIELD(d, QhPluginDesc, reference_numerics) || d->reference_numerics == NULL)
    return NULL;
  float scale = info->out_scale;
  int32_t zp = info->out_zero_point;
  QhQParams q = {QH_STRUCT_HEADER(QhQParams), .ch_axis = -1, .count = 1, .capacity = 1,
                 .scale = &scale, .zero_point = &zp};
  q.dtype = info->out_signed ? QH_DTYPE_INT8 : QH_DTYPE_UINT8;
  q.qscheme = info->out_signed && zp == 0 ? QH_QSCHEME_PER_TENSOR_SYMMETRIC : QH_QSCHEME_PER_TENSOR_AFFINE;
  q.quant_min = info->out_signed ? -128 : 0;
  q.quant_max = info->out_signed ? 127 : 255;
  QhTensor *out = qh_tensor_new(QH_DTYPE_F32, &pre->shape, NULL);
  QhTensorView views[2];
  for (int i = 0; i < 2; i++) {
    const QhTensor *t = i ? out : pre;
    views[i] = (QhTensorView){QH_STRUCT_HEADER(QhTensorView), .dtype = QH_DTYPE_FLOAT,
                              .layout = QH_LAYOUT_ANY, .rank = t->shape.rank, .data = t->data,
                              .nbytes = t->nbytes};
    memcpy(views[i].dims, t->shape.dims, (size_t)t->shape.rank * sizeof(int64_t));
  }
  QhStatus *st = qh_backend_call_fake_quantize(run->backend, QH_ROLE_ACTIVATION, &q, &views[0], &views[1]);
  if (st) {
    char *text = qh_check_status_text(st);
    *why = g_strdup_printf("its reference_numerics refused the output's qparams: %s", text);
    g_free(text);
    qh_tensor_free(out);
    return NULL;
  }
  return out;
}

/* Where the kernel's output low first differs from own (the plugin's fake_quantize of
 * pre); NULL when they agree. */
static char *own_mismatch(const QhTensor *low, const QhTensor *own, const QhTensor *pre, float step,
                          const char *name) {
  const float *l = low->data, *e = own->data, *p = pre->data;
  for (int64_t i = 0; i < qh_tensor_numel(own); i++)
    if (!(fabs((double)l[i] - e[i]) <= 1e-3 * step))
      return g_strdup_printf("output '%s' element %" G_GINT64_FORMAT " is %.6g where the plugin's own "
                             "fake_quantize of the reference's %.6g gives %.6g",
                             name, i, (double)l[i], (double)p[i], (double)e[i]);
  return NULL;
}

/* What each declared pattern did over every graph: the units it claimed and how often
 * its kernels ran; and the reasons units were declined. */
typedef struct {
  GString *claims; /* "graph (unit 'u')", joined */
  int runs;        /* lowered runs of the plans holding its units, one per unit */
  char *untried;   /* why its generated graph could not be made or quantized, or NULL */
} PatternTally;

typedef struct {
  GHashTable *patterns; /* id -> PatternTally* */
  GHashTable *declines; /* the host rows' reasons */
  int partition_runs;   /* completed runs of compiled partitions */
} Tally;

static void pattern_tally_free(gpointer p) {
  PatternTally *t = p;
  g_string_free(t->claims, TRUE);
  g_free(t->untried);
  g_free(t);
}

static PatternTally *tally_of(Tally *tally, const char *id) {
  PatternTally *t = g_hash_table_lookup(tally->patterns, id);
  if (t == NULL) {
    t = g_new0(PatternTally, 1);
    t->claims = g_string_new(NULL);
    g_hash_table_insert(tally->patterns, g_strdup(id), t);
  }
  return t;
}

/* A run of l's plan completed: every claimed unit's kernel ran once. */
static void count_runs(Tally *tally, const QhLowering *l) {
  const GPtrArray *rows = qh_lowering_rows(l);
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = rows->pdata[i];
    if (r->kernel && r->pattern)
      tally_of(tally, r->pattern)->runs++;
    tally->partition_runs += r->partition != NULL;
  }
}

static const char *const run_names[RUNS] = {"first run", "second run (packed weights reused)",
                                            "run on 2 threads"};

/* Lower one graph (low_graph; ref_graph is the same graph for the reference, both
 * taken; NULL with error set when they could not be made) and compare it with the
 * reference. name names the graph, label (or NULL) the family in PASS lines; exact
 * says the reference's fp32 math is exact on it. A graph whose units are all claimed
 * by patterns in covered is left alone. Returns TRUE when a unit was claimed. */
static gboolean check_pair(QhCheckRun *run, const char *name, const char *label, QhGraph *ref_graph,
                           QhGraph *low_graph, const Builder *infop, gboolean lg_exact, GError *error,
                           GHashTable *covered, Tally *tally) {
  char *check = g_strdup_printf("lowering on %s", name);
  Builder info = *infop;
  float step = info.out_scale;
  gboolean claimed = FALSE;
  QhPlan *ref_plan = NULL;
  QhLowering *l = NULL;
  QhTensor **inputs = NULL, **ref = NULL, *own = NULL;
  char *units = NULL, *own_why = NULL;
  /* the reference also hands out the value its output quantizer reads: differences must
   * sit at its ties, and on an exact graph the plugin's own fake_quantize of it is what
   * the kernel must give */
  gboolean has_pre = ref_graph && info.pre_quant >= 0;
  gboolean exact = lg_exact && has_pre;
  if (has_pre) {
    qh_graph_value(ref_graph, info.pre_quant)->is_output = TRUE;
    g_array_append_val(ref_graph->outputs, info.pre_quant);
  }
  if (ref_graph && info.pre_quant < 0 && !info.float_output) {
    qh_check_add(run, QH_CHECK_SKIP, check, "its output is not the DequantizeLinear of a per-tensor "
                 "QuantizeLinear: no quantization step to compare in");
    goto done;
  }
  if (low_graph == NULL || (ref_plan = qh_plan_new(ref_graph, NULL, FALSE, &error)) == NULL) {
    qh_check_add(run, QH_CHECK_FAIL, check, "the host cannot plan its own graph: %s", error->message);
    goto done;
  }
  l = qh_lowering_new(low_graph, run->backend, NULL, QH_LOWERING_STRICT, &error);
  if (l == NULL) {
    qh_check_add(run, QH_CHECK_FAIL, check, "%s", error->message);
    goto done;
  }
  const GPtrArray *rows = qh_lowering_rows(l);
  gboolean any = FALSE, all_covered = covered != NULL;
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = rows->pdata[i];
    if (r->pattern && !(covered && g_hash_table_contains(covered, r->pattern)))
      all_covered = FALSE;
  }
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = rows->pdata[i];
    if (r->pattern && all_covered) {
      continue; /* its patterns were checked on the uint8 family already */
    } else if (r->pattern) {
      any = TRUE;
      GString *s = tally_of(tally, r->pattern)->claims;
      g_string_append_printf(s, "%s%s (unit '%s')", s->len ? ", " : "", name, r->name);
    } else if (r->partition) {
      any = TRUE;
    } else if (r->reason && !g_hash_table_contains(tally->declines, r->reason)) {
      g_hash_table_add(tally->declines, g_strdup(r->reason));
    }
  }
  if (!any)
    goto done; /* nothing claimed: nothing of the plugin's to check */
  claimed = TRUE;
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
  guint n_out = low_graph->outputs->len;
  if (info.float_output)
    step = float_output_step(ref[0]);
  if (exact && claimed_node(l, qh_graph_value(ref_graph, info.pre_quant)->producer))
    own = own_numerics(run, &info, ref[n_out], &own_why);
  double worst = 0, tie_max = 0;
  int64_t same = 0, total = 0;
  for (int k = 0; k < RUNS; k++) {
    QhTensor **low = run_plan(qh_lowering_plan(l), k == RUNS - 1 ? 2 : 1, inputs, &error);
    if (low == NULL) {
      qh_check_add(run, QH_CHECK_FAIL, check, "%s: %s: %s", units, run_names[k], error->message);
      goto done;
    }
    count_runs(tally, l);
    char *where = NULL;
    double w = worst_steps(low_graph, ref, low, step, &where, &same, &total);
    const char *out0 = qh_graph_value(low_graph, g_array_index(low_graph->outputs, int, 0))->name;
    char *own_bad = own && w <= 1.0 + 1e-3 ? own_mismatch(low[0], own, ref[n_out], step, out0) : NULL;
    char *tie_bad = has_pre && w <= 1.0 + 1e-3 ? off_tie(low[0], ref[0], ref[n_out], step, out0, &tie_max) : NULL;
    free_tensors(low, n_out);
    if (w > 1.0 + 1e-3 || tie_bad) {
      if (tie_bad)
        qh_check_add(run, QH_CHECK_FAIL, check, "%s: %s: %s", units, run_names[k], tie_bad);
      else
        qh_check_add(run, QH_CHECK_FAIL, check, "%s: %s: %s: %.3g steps of %g from the host's reference",
                     units, run_names[k], where, w, (double)step);
      g_free(where);
      g_free(tie_bad);
      g_free(own_bad);
      goto done;
    }
    g_free(where);
    if (own_bad) {
      qh_check_add(run, QH_CHECK_FAIL, check, "%s: %s: %s (%s)", units, run_names[k], own_bad,
                   run->desc->reference_numerics->description);
      g_free(own_bad);
      goto done;
    }
    worst = MAX(worst, w);
  }
  char *also = own ? g_strdup_printf(", and bit for bit what the plugin's own fake_quantize gives (%s)",
                                     run->desc->reference_numerics->description)
               : own_why ? g_strdup_printf("; not held to its own numerics: %s", own_why)
                         : g_strdup("");
  /* worst 0 says every element is bit-identical; otherwise the others were held to ties */
  char *share = same == total ? g_strdup("")
                              : g_strdup_printf(", %.1f%% of elements bit-identical, the others at ties "
                                                "(within %.4f of a half step)",
                                                100.0 * (double)same / (double)total, tie_max);
  qh_check_add(run, QH_CHECK_PASS, check,
               "%s: %d runs (packed weights reused, one on 2 threads) within one step of the host's "
               "reference (worst %.2f steps of %g%s)%s%s%s",
               units, RUNS, worst, (double)step, share, also, label ? "; " : "", label ? label : "");
  g_free(share);
  g_free(also);
done:
  if (error)
    g_error_free(error);
  g_free(check);
  g_free(units);
  g_free(own_why);
  qh_tensor_free(own);
  if (ref_graph)
    free_tensors(ref, ref_graph->outputs->len);
  if (ref_graph)
    free_tensors(inputs, ref_graph->inputs->len);
  qh_lowering_free(l);
  qh_plan_free(ref_plan);
  qh_graph_free(low_graph);
  qh_graph_free(ref_graph);
  return claimed;
}

gboolean qh_check_lowered_file(QhCheckRun *run, const char *name, const char *qdq, int *partition_runs,
                               char **declines) {
  Tally tally = {g_hash_table_new_full(g_str_hash, g_str_equal, g_free, pattern_tally_free),
                 g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL), 0};
  GError *error = NULL;
  Builder info = {0}, low_info = {0};
  QhGraph *ref_graph = load_qdq(qdq, &info, &error);
  QhGraph *low_graph = ref_graph ? load_qdq(qdq, &low_info, &error) : NULL;
  gboolean claimed = check_pair(run, name, NULL, ref_graph, low_graph, &info, FALSE, error, NULL, &tally);
  GString *why = g_string_new(NULL);
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, tally.declines);
  while (g_hash_table_iter_next(&it, &key, NULL))
    g_string_append_printf(why, "%s%s", why->len ? "; " : "", (const char *)key);
  *declines = g_string_free(why, FALSE);
  *partition_runs = tally.partition_runs;
  g_hash_table_destroy(tally.patterns);
  g_hash_table_destroy(tally.declines);
  return claimed;
}

/* A built-in graph of family fam, built twice. */
static void check_graph(QhCheckRun *run, const Family *fam, const QhCheckGraph *lg, GHashTable *covered,
                        Tally *tally, int *n_claimed) {
  GError *error = NULL;
  Builder info = {0};
  QhGraph *ref_graph = build_graph(lg, &info, &error);
  QhGraph *low_graph = ref_graph ? build_graph(lg, &info, &error) : NULL;
  char *name = g_strdup_printf("%s%s", fam->prefix, lg->name);
  if (check_pair(run, name, fam->label, ref_graph, low_graph, &info, lg->exact, error, covered, tally))
    (*n_claimed)++;
  g_free(name);
}

/* The reasons the plugin gave pattern id for declining units ("id: why"). */
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

/* Each declared pattern's generated graphs, variant after variant until one of them
 * claims a unit with that pattern. Returns how many graphs claimed something. */
static int check_generated(QhCheckRun *run, const char *dir, Tally *tally) {
  const QhLoweringOps *lo = run->desc->lowering;
  int n_claimed = 0;
  for (size_t i = 0; i < lo->n_patterns; i++) {
    const QhLoweringPattern *p = lo->patterns[i];
    for (int v = 0; v < qh_check_pattern_n_variants(); v++) {
      char *label = NULL, *why = NULL;
      char *qdq = qh_check_pattern_quantize(run, p, v, dir, &label, &why);
      if (qdq == NULL && why == NULL)
        continue; /* the same graph as variant 0 */
      PatternTally *t = tally_of(tally, p->id);
      if (qdq == NULL) {
        gboolean no_graph = label == NULL; /* no graph for its ops at all */
        if (t->untried == NULL)
          t->untried = g_strdup_printf("%s: %s", label ? label : "its generated graph", why);
        g_free(label);
        g_free(why);
        if (no_graph)
          break;
        continue;
      }
      GError *error = NULL;
      Builder info = {0};
      QhGraph *ref_graph = load_qdq(qdq, &info, &error);
      Builder low_info = {0};
      QhGraph *low_graph = ref_graph ? load_qdq(qdq, &low_info, &error) : NULL;
      g_unlink(qdq);
      g_free(qdq);
      if (ref_graph && info.pre_quant < 0 && has_op(ref_graph, "DynamicQuantizeLinear"))
        info.float_output = 1;
      if (ref_graph && info.pre_quant < 0 && !info.float_output) {
        /* the plugin left it float: not a graph of this pattern; the next variant */
        if (t->untried == NULL)
          t->untried = g_strdup_printf("%s: its quantization left the output float", label);
        qh_graph_free(ref_graph);
        qh_graph_free(low_graph);
        g_free(label);
        continue;
      }
      /* the pattern alone: the graph's other ops stay on the host, so what is compared
       * is this pattern's kernel (a tie rounded apart upstream would grow downstream) */
      qh_backend_restrict_lowering(run->backend, i);
      gboolean exact = ref_graph && qh_check_graph_is_exact(ref_graph);
      if (check_pair(run, label, NULL, ref_graph, low_graph, &info, exact, error, NULL, tally))
        n_claimed++;
      qh_backend_restrict_lowering(run->backend, QH_BACKEND_ALL_PATTERNS);
      g_free(label);
      if (tally_of(tally, p->id)->claims->len > 0)
        break;
    }
  }
  return n_claimed;
}

void qh_check_lowering(QhCheckRun *run) {
  const QhLoweringOps *lo = run->desc->lowering;
  Tally tally = {g_hash_table_new_full(g_str_hash, g_str_equal, g_free, pattern_tally_free),
                 g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL), 0};
  GError *error = NULL;
  const QhPluginDesc *d = run->desc;
  gboolean quantizes = (QH_HAS_FIELD(d, QhPluginDesc, backend_config) && d->backend_config) ||
                       (QH_HAS_FIELD(d, QhPluginDesc, annotate) && d->annotate);
  char *dir = quantizes ? g_dir_make_tmp("qhost-plugin-check-XXXXXX", &error) : NULL;
  int n_generated = 0;
  qh_backend_restrict_lowering(run->backend, QH_BACKEND_ALL_PATTERNS); /* partitions: check-partitions.c */
  if (!quantizes) {
    /* a lowering-only plugin runs QDQ files others made: the built-in graphs only */
  } else if (dir == NULL) {
    qh_check_add(run, QH_CHECK_FAIL, "lowering", "cannot make a temporary directory: %s", error->message);
    g_clear_error(&error);
  } else {
    n_generated = check_generated(run, dir, &tally);
    g_rmdir(dir);
    g_free(dir);
  }
  /* The built-in families after: the uint8 one always (zero points, per-channel weights,
   * ties), the int8 power-of-two one only for patterns nothing else exercised. */
  Family fams[2] = {{"", NULL, NULL, 0},
                    {"int8_pow2 ", "int8 power-of-two family", NULL, 0}};
  fams[0].graphs = qh_check_u8_graphs(&fams[0].n);
  fams[1].graphs = qh_check_pow2_graphs(&fams[1].n);
  int n_claimed[2] = {0, 0};
  for (size_t i = 0; i < fams[0].n; i++)
    check_graph(run, &fams[0], &fams[0].graphs[i], NULL, &tally, &n_claimed[0]);
  GHashTable *covered = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  GHashTableIter it;
  gpointer key, val;
  g_hash_table_iter_init(&it, tally.patterns);
  while (g_hash_table_iter_next(&it, &key, &val))
    if (((PatternTally *)val)->claims->len > 0)
      g_hash_table_add(covered, g_strdup(key));
  for (size_t i = 0; i < fams[1].n; i++)
    check_graph(run, &fams[1], &fams[1].graphs[i], covered, &tally, &n_claimed[1]);
  g_hash_table_destroy(covered);
  qh_backend_restrict_lowering(run->backend, SIZE_MAX);
  for (size_t i = 0; i < lo->n_patterns; i++) {
    const char *id = lo->patterns[i]->id;
    char *check = g_strdup_printf("lowering pattern %s", id);
    PatternTally *t = tally_of(&tally, id);
    if (t->runs > 0) {
      qh_check_add(run, QH_CHECK_PASS, check, "%d kernel run%s; claimed %s", t->runs, t->runs == 1 ? "" : "s",
                   t->claims->str);
    } else {
      char *why = declined_reasons(tally.declines, id);
      qh_check_add(run, QH_CHECK_FAIL, check, "its kernel never ran: %s%s%s%s%s",
                   t->claims->len ? "it claimed " : "no generated or built-in graph it claimed",
                   t->claims->str, *why ? "; declined: " : "", why,
                   t->untried ? "; " : "");
      if (t->untried) {
        QhCheckResult *r = run->report->results->pdata[run->report->results->len - 1];
        char *detail = g_strconcat(r->detail, t->untried, NULL);
        g_free(r->detail);
        r->detail = detail;
      }
      g_ptr_array_add(run->report->unrun_patterns, g_strdup(id));
      g_free(why);
    }
    g_free(check);
  }
  char *generated = quantizes ? g_strdup_printf("%d generated graphs", n_generated)
                              : g_strdup("no generated graphs (without a backend_config or annotate it cannot "
                                         "quantize one)");
  qh_check_add(run, QH_CHECK_PASS, "lowering",
               "%zu patterns validated at load; %s, %d of %zu uint8 and %d of %zu int8 power-of-two built-in "
               "graphs checked",
               lo->n_patterns, generated, n_claimed[0], fams[0].n, n_claimed[1], fams[1].n);
  g_free(generated);
  g_hash_table_destroy(tally.patterns);
  g_hash_table_destroy(tally.declines);
}
