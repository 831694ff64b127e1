/* plugin-check's partition checks (ABI 1.2): for a plugin with QhPartitionOps, small
 * float graphs of the subgraphs NPUs offload whole (a residual block: conv -> relu ->
 * conv -> add with the skip edge -> relu behind a conv stem; and a chain of convs and
 * relus) are quantized by `qhost quantize`'s flow with the plugin itself (its
 * BackendConfig, annotate and observers) as the per-pattern graphs are
 * (check-patterns.c), or, for a plugin that cannot quantize and so lowers QDQ files
 * others made, built as ONNX Runtime's tool and PyTorch's x86 config write them; then
 * lowered with the plugin's partitions alone (its lowering patterns hidden, so
 * what runs is the partition) and compared with the host's reference path by the
 * lowering checks' rules (check-lowering.c: every element within one output step, and
 * different only at ties). A plugin that declares partitions conforms only when at
 * least one partition ran; a graph its claim left alone is a SKIP naming why, one whose
 * compiled partition refused the shapes compile accepted a FAIL. */
#include <glib/gstdio.h>
#include <string.h>

#include "conformance/check-private.h"
#include "core/log.h"
#include "io/npy.h"
#include "io/onnx.h"
#include "quant/flow.h"

#define SEED 20261127u
#define CHANNELS 4
#define MAX_VALUES 256
/* lower/partition.c's reason for a compiled partition whose reshape failed */
#define SHAPES_REFUSED "partition: cannot run these shapes: "

/* One graph's builder: the float graph quantize starts from, or (qdq) the QDQ graph
 * other producers write, for a plugin that cannot quantize: uint8 activations (zero
 * point 128 before a Relu, 0 after), int8 per-channel weights, int32 biases at
 * input x weight scale, a Q/DQ pair on every value a Conv, Add or the output reads
 * (none between a Conv and its Relu), as ONNX Runtime's tool and PyTorch's x86 config
 * place them. */
typedef struct {
  QhCheckBuilder b;
  gboolean qdq;
  int n_made;               /* for unique names */
  float scale[MAX_VALUES];  /* qdq: the step of each DequantizeLinear's output */
} Gen;

static const int64_t image[4] = {1, CHANNELS, 8, 8};

static char *fresh(Gen *gen, const char *base) { return g_strdup_printf("%s_%d", base, gen->n_made++); }

static int value(Gen *gen, const char *base) {
  char *name = fresh(gen, base);
  QhValue *v = qh_graph_add_value(gen->b.g, name, NULL);
  v->dtype = QH_DTYPE_F32;
  v->shape = qh_shape_make(4, image);
  g_free(name);
  return v->id;
}

static int constant(Gen *gen, const char *base, int rank, const int64_t *dims, double lo, double hi) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  float *d = t->data;
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    d[i] = (float)g_rand_double_range(gen->b.rng, lo, hi);
  char *name = fresh(gen, base);
  QhValue *v = qh_graph_add_value(gen->b.g, name, NULL);
  qh_value_set_initializer(v, t);
  g_free(name);
  return v->id;
}

static int op(Gen *gen, const char *op_type, const char *name, int n_in, const int *in) {
  int y = value(gen, name);
  qh_graph_add_node(gen->b.g, name, op_type, "", n_in, in, 1, &y, NULL);
  return y;
}

/* Where the model quantizes v (uint8, scale, zero point): a Q/DQ pair in a QDQ graph,
 * nothing in a float one (the plugin's quantizer decides). */
static int quantized(Gen *gen, int v, float scale, int zero_point) {
  if (!gen->qdq)
    return v;
  char *base = fresh(gen, qh_graph_value(gen->b.g, v)->name);
  int d = qh_check_builder_qdq(&gen->b, base, v, scale, FALSE, zero_point);
  g_free(base);
  if (d < MAX_VALUES)
    gen->scale[d] = scale;
  return d;
}

/* A 3x3 convolution keeping [1, C, 8, 8]. */
static int conv(Gen *gen, const char *name, int x) {
  static const int64_t w[4] = {CHANNELS, CHANNELS, 3, 3}, b[1] = {CHANNELS};
  static const int64_t pads[4] = {1, 1, 1, 1}, k[2] = {3, 3};
  int in[3] = {x, -1, -1};
  if (gen->qdq) {
    float sw[CHANNELS];
    char *wn = fresh(gen, "weight"), *bn = fresh(gen, "bias");
    in[1] = qh_check_builder_weight(&gen->b, wn, 4, w, 0, sw);
    in[2] = qh_check_builder_bias(&gen->b, bn, CHANNELS, x < MAX_VALUES ? gen->scale[x] : 1.0f, sw, TRUE);
    g_free(wn);
    g_free(bn);
  } else {
    in[1] = constant(gen, "weight", 4, w, -0.3, 0.3);
    in[2] = constant(gen, "bias", 1, b, -0.2, 0.2);
  }
  int y = op(gen, "Conv", name, 3, in);
  QhNode *n = qh_graph_node(gen->b.g, qh_graph_value(gen->b.g, y)->producer);
  qh_node_set_attr_ints(n, "pads", 4, pads);
  qh_node_set_attr_ints(n, "kernel_shape", 2, k);
  return y;
}

static int relu(Gen *gen, const char *name, int x) { return op(gen, "Relu", name, 1, &x); }

/* conv0 -> relu0 -> conv1 -> relu1 -> conv2 -> add (+ relu0, the skip edge) -> relu2 */
static int residual_block(Gen *gen, int x) {
  int stem = quantized(gen, relu(gen, "relu0", conv(gen, "conv0", x)), 0.08f, 0);
  int y = quantized(gen, conv(gen, "conv2", quantized(gen, relu(gen, "relu1", conv(gen, "conv1", stem)), 0.1f, 0)),
                    0.2f, 128);
  return relu(gen, "relu2", op(gen, "Add", "add", 2, (int[]){y, stem}));
}

/* conv0 -> relu0 -> conv1 -> relu1 -> conv2 */
static int chain(Gen *gen, int x) {
  int y = quantized(gen, relu(gen, "relu0", conv(gen, "conv0", x)), 0.08f, 0);
  y = quantized(gen, relu(gen, "relu1", conv(gen, "conv1", y)), 0.1f, 0);
  return conv(gen, "conv2", y);
}

typedef struct {
  const char *name;
  int (*build)(Gen *gen, int x);
  float out_scale; /* the output's quantization in the QDQ form */
  int out_zero_point;
} PartitionGraph;

static const PartitionGraph graphs[] = {{"residual_block", residual_block, 0.15f, 0},
                                        {"chain", chain, 0.2f, 128}};

/* pg's float graph, or with qdq its QDQ graph. */
static QhGraph *build(const PartitionGraph *pg, gboolean qdq) {
  Gen gen = {.b = {qh_graph_new(), g_rand_new_with_seed(SEED), 0, 0, 0, -1, 0}, .qdq = qdq};
  qh_graph_set_opset(gen.b.g, "", 13);
  int x = value(&gen, "x");
  qh_graph_value(gen.b.g, x)->is_input = TRUE;
  g_array_append_val(gen.b.g->inputs, x);
  int y = pg->build(&gen, quantized(&gen, x, 0.02f, 128));
  if (qdq) {
    qh_check_builder_output(&gen.b, y, quantized(&gen, y, pg->out_scale, pg->out_zero_point), pg->out_scale,
                            FALSE, pg->out_zero_point);
  } else {
    qh_graph_value(gen.b.g, y)->is_output = TRUE;
    g_array_append_val(gen.b.g->outputs, y);
  }
  g_rand_free(gen.b.rng);
  return gen.b.g;
}

/* g quantized with the plugin by qh_quantize into dir: the QDQ file's path (g_free; the
 * caller removes it), or NULL with *why (g_free). */
static char *quantize(QhCheckRun *run, const QhGraph *g, const char *dir, const char *stem, char **why) {
  char *model = g_strdup_printf("%s/partition-%s.onnx", dir, stem);
  char *qdq = g_strdup_printf("%s/partition-%s.qdq.onnx", dir, stem);
  if (!qh_check_quantize_graph(run, g, model, qdq, FALSE, why))
    g_clear_pointer(&qdq, g_free);
  g_free(model);
  return qdq;
}

/* The hand-built QDQ graph g saved into dir: its path, or NULL with *why. */
static char *written(const QhGraph *g, const char *dir, const char *stem, char **why) {
  char *qdq = g_strdup_printf("%s/partition-%s.qdq.onnx", dir, stem);
  GError *error = NULL;
  if (!qh_onnx_save(g, qdq, &error)) {
    *why = g_strdup_printf("cannot write its QDQ graph: %s", error->message);
    g_error_free(error);
    g_clear_pointer(&qdq, g_free);
  }
  return qdq;
}

void qh_check_partitions(QhCheckRun *run) {
  const QhPluginDesc *d = run->desc;
  const QhPartitionOps *ops = d->partitions;
  /* a plugin that cannot quantize lowers QDQ files others made: the hand-built form */
  gboolean quantizes = (QH_HAS_FIELD(d, QhPluginDesc, backend_config) && d->backend_config) ||
                       (QH_HAS_FIELD(d, QhPluginDesc, annotate) && d->annotate);
  GError *error = NULL;
  char *dir = g_dir_make_tmp("qhost-plugin-check-XXXXXX", &error);
  if (dir == NULL) {
    qh_check_add(run, QH_CHECK_FAIL, "partitions", "cannot make a temporary directory: %s", error->message);
    g_error_free(error);
    return;
  }
  /* the partitions alone: a pattern's kernel taking a node the claim left would be
   * compared here as if it were the partition */
  qh_backend_restrict_lowering(run->backend, QH_BACKEND_NO_PATTERNS);
  int runs = 0, n_claimed = 0;
  GString *unclaimed = g_string_new(NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(graphs); i++) {
    char *name = g_strdup_printf("partition graph %s", graphs[i].name);
    char *check = g_strdup_printf("lowering on %s", name);
    QhGraph *g = build(&graphs[i], !quantizes);
    char *why = NULL, *declines = NULL;
    char *qdq = quantizes ? quantize(run, g, dir, graphs[i].name, &why) : written(g, dir, graphs[i].name, &why);
    qh_graph_free(g);
    int graph_runs = 0;
    guint lines = run->report->results->len;
    if (qdq && qh_check_lowered_file(run, name, qdq, &graph_runs, &declines)) {
      n_claimed++;
      runs += graph_runs;
    } else if (qdq && run->report->results->len > lines) {
      /* the lowering failed (a refused claim, a failed compile) or its output was left
       * float: its line says why */
      const QhCheckResult *last = run->report->results->pdata[run->report->results->len - 1];
      g_string_append_printf(unclaimed, "%s%s: %s", unclaimed->len ? "; " : "", graphs[i].name,
                             last->verdict == QH_CHECK_FAIL ? "failed" : "skipped");
    } else if (qdq && strstr(declines, SHAPES_REFUSED)) {
      /* the shapes compile just accepted: the plugin contradicts itself (decline in compile) */
      qh_check_add(run, QH_CHECK_FAIL, check, "a compiled partition's reshape refused its planned shapes: %s",
                   declines);
      g_string_append_printf(unclaimed, "%s%s: failed", unclaimed->len ? "; " : "", graphs[i].name);
    } else if (qdq) {
      why = g_strdup_printf("no partition claimed: %s", *declines ? declines : "the claim took none of its ops");
    }
    if (why) {
      qh_check_add(run, QH_CHECK_SKIP, check, "%s", why);
      g_string_append_printf(unclaimed, "%s%s: %s", unclaimed->len ? "; " : "", graphs[i].name, why);
    }
    if (qdq)
      g_unlink(qdq);
    g_free(qdq);
    g_free(why);
    g_free(declines);
    g_free(check);
    g_free(name);
  }
  qh_backend_restrict_lowering(run->backend, SIZE_MAX);
  g_rmdir(dir);
  g_free(dir);
  const char *layout = ops->io_layout == QH_LAYOUT_NHWC ? "NHWC" : "NCHW";
  if (runs > 0)
    qh_check_add(run, QH_CHECK_PASS, "partitions", "'%s' (%s boundary): %d partition runs on %d of %zu graphs%s%s",
                 ops->id, layout, runs, n_claimed, G_N_ELEMENTS(graphs), unclaimed->len ? "; " : "",
                 unclaimed->str);
  else {
    qh_check_add(run, QH_CHECK_FAIL, "partitions",
                 "'%s': no partition completed a run on the %zu partition graphs (a plugin that declares "
                 "partitions conforms only when one runs)%s%s",
                 ops->id, G_N_ELEMENTS(graphs), unclaimed->len ? ": " : "", unclaimed->str);
    g_ptr_array_add(run->report->unrun_patterns, g_strdup_printf("partitions '%s'", ops->id));
  }
  g_string_free(unclaimed, TRUE);
}
