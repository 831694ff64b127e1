/* plugin-check's per-pattern graphs: for each lowering pattern the plugin declares, a
 * small float graph of that pattern's op chain, quantized by `qhost quantize`'s own flow
 * (qh_quantize: the plugin's transform, BackendConfig and annotate, its observers over
 * seeded calibration samples, refine and the 1.2 passes, convert) into a QDQ file that
 * check-lowering.c lowers and compares with the host's reference. So the qparams, the
 * bias form and the input-sharing rules are the plugin's own, not another vendor's
 * conventions. An op with operands from outside the chain (Add, Mul, Concat, Clip's
 * bounds) comes in variants: the extra operand a second graph input (a residual
 * Add), a constant (a bias, a factor), or an activation of the chain input
 * (x * sigmoid(x)); and an op that shares its input's quantization (Reshape, Pad,
 * Slice) is quantized only behind an op with its own (a 1x1 Conv), and one whose
 * output the plugin's config leaves float (x86's Pad) only where its consumer quantizes
 * its input (another 1x1 Conv, run on the host). The caller tries the
 * variants in turn until the pattern's kernel runs. */
#include <glib/gstdio.h>
#include <string.h>

#include "conformance/check-private.h"
#include "core/log.h"
#include "io/npy.h"
#include "io/onnx.h"
#include "quant/dynamic.h"
#include "quant/flow.h"

#define CALIB_SAMPLES 4
#define CALIB_SEED 20261127u

/* The variants of an extra operand (see the file comment). */
enum { EXTRA_INPUT, EXTRA_CONSTANT, EXTRA_ACTIVATION, BEHIND_CONV, BETWEEN_CONVS, GROUPED_CONV, N_VARIANTS };
static const char *const variant_names[N_VARIANTS] = {"second input", "constant operand",
                                                      "x * act(x), x a Conv's output",
                                                      "behind a Conv", "between two Convs",
                                                      "grouped Conv, group 2"};

typedef struct {
  QhGraph *g;
  GRand *rng;
  int variant;
  int n_made; /* for unique names */
  gboolean used_extra; /* the variant's own form of an extra operand was built */
  char *unsupported;   /* the first op this generator has no graph for */
} Gen;

static char *fresh(Gen *gen, const char *base) { return g_strdup_printf("%s_%d", base, gen->n_made++); }

static int value(Gen *gen, const char *base, int rank, const int64_t *dims) {
  char *name = fresh(gen, base);
  QhValue *v = qh_graph_add_value(gen->g, name, NULL);
  g_free(name);
  if (rank >= 0) {
    v->dtype = QH_DTYPE_F32;
    v->shape = qh_shape_make(rank, dims);
  }
  return v->id;
}

static int graph_input(Gen *gen, int rank, const int64_t *dims) {
  int id = value(gen, "x", rank, dims);
  QhValue *v = qh_graph_value(gen->g, id);
  v->is_input = TRUE;
  g_array_append_val(gen->g->inputs, id);
  return id;
}

/* A float constant of dims filled with seeded values in [lo, hi]. */
static int constant(Gen *gen, const char *base, int rank, const int64_t *dims, double lo, double hi) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  float *d = t->data;
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    d[i] = (float)g_rand_double_range(gen->rng, lo, hi);
  char *name = fresh(gen, base);
  QhValue *v = qh_graph_add_value(gen->g, name, NULL);
  g_free(name);
  qh_value_set_initializer(v, t);
  return v->id;
}

static int int64_constant(Gen *gen, const char *base, int64_t n, const int64_t *data) {
  QhShape s = qh_shape_make(1, &n);
  QhTensor *t = qh_tensor_new(QH_DTYPE_S64, &s, NULL);
  memcpy(t->data, data, (size_t)n * sizeof *data);
  char *name = fresh(gen, base);
  QhValue *v = qh_graph_add_value(gen->g, name, NULL);
  g_free(name);
  qh_value_set_initializer(v, t);
  return v->id;
}

static QhNode *node(Gen *gen, const char *op, int n_in, const int *in, int out) {
  char *name = fresh(gen, op);
  for (char *p = name; *p; p++)
    *p = g_ascii_tolower(*p);
  QhNode *n = qh_graph_add_node(gen->g, name, op, "", n_in, in, 1, &out, NULL);
  g_free(name);
  return n;
}

/* The shape the chain's first op wants for its input. */
static QhShape first_input_shape(const char *op, int variant) {
  static const int64_t image[4] = {1, 4, 8, 8}, row[2] = {1, 16}, rows[3] = {1, 4, 16};
  /* a MatMul of two activations, or a Linear's MatMul on a sequence (dynamic) */
  if ((strcmp(op, "MatMul") == 0 && variant == EXTRA_INPUT) || strcmp(op, "MatMulInteger") == 0)
    return qh_shape_make(3, rows);
  if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0)
    return qh_shape_make(2, row);
  return qh_shape_make(4, image);
}

/* The extra operand of a binary op on x (shape s): per the variant. */
static int extra_operand(Gen *gen, int x, const QhShape *s, gboolean chained) {
  if (gen->variant == EXTRA_CONSTANT) {
    gen->used_extra = TRUE;
    /* a bias over the last axis (MatMul + Add) or a per-channel factor (4-D) */
    int64_t d[4] = {1, 1, 1, 1};
    if (s->rank == 4)
      d[1] = s->dims[1];
    else
      d[s->rank - 1] = s->dims[s->rank - 1];
    return constant(gen, "operand", s->rank, d, 0.25, 0.75);
  }
  if (gen->variant == EXTRA_ACTIVATION && !chained) {
    gen->used_extra = TRUE;
    int y = value(gen, "act", s->rank, s->dims);
    node(gen, "Sigmoid", 1, &x, y);
    return y;
  }
  return graph_input(gen, s->rank, s->dims);
}

/* Appends op (the chain's op i) reading x of shape *s; updates *s; returns the output
 * value, or -1 (gen->unsupported set) for an op without a generator. */
static int append_op(Gen *gen, const QhLoweringPattern *p, size_t i, int x, QhShape *s) {
  const char *op = p->ops[i];
  const char *next = i + 1 < p->n_ops ? p->ops[i + 1] : NULL;
  gboolean chained = i > 0;
  QhShape out = *s;
  int in[5] = {x, -1, -1, -1, -1}, n_in = 1;
  int64_t c = s->rank >= 2 ? s->dims[1] : 1;
  QhNode *n = NULL;
  int y = -1;
#define EMIT(name_)                                                       \
  do {                                                                    \
    y = value(gen, "t", out.rank, out.dims);                              \
    n = node(gen, name_, n_in, in, y);                                    \
  } while (0)
  if (strcmp(op, "Conv") == 0 && s->rank == 4) {
    /* the grouped variant: two groups of c / 2 input and 4 output channels (resnext's
     * form), for patterns that claim only grouped convolutions */
    int grouped = gen->variant == GROUPED_CONV && i == 0 && c % 2 == 0;
    const int64_t w[4] = {8, grouped ? c / 2 : c, 3, 3}, b[1] = {8};
    in[1] = constant(gen, "weight", 4, w, -0.3, 0.3);
    in[2] = constant(gen, "bias", 1, b, -0.2, 0.2);
    n_in = 3;
    out.dims[1] = 8;
    EMIT(op);
    if (grouped) {
      qh_node_set_attr_int(n, "group", 2);
      gen->used_extra = TRUE;
    }
    static const int64_t pads[4] = {1, 1, 1, 1}, k[2] = {3, 3};
    qh_node_set_attr_ints(n, "pads", 4, pads);
    qh_node_set_attr_ints(n, "kernel_shape", 2, k);
  } else if (strcmp(op, "Gemm") == 0 && s->rank == 2) {
    const int64_t w[2] = {8, s->dims[1]}, b[1] = {8};
    in[1] = constant(gen, "weight", 2, w, -0.3, 0.3);
    in[2] = constant(gen, "bias", 1, b, -0.2, 0.2);
    n_in = 3;
    out.dims[1] = 8;
    EMIT(op);
    qh_node_set_attr_int(n, "transB", 1);
  } else if (strcmp(op, "MatMul") == 0 && s->rank == 3 && gen->variant == EXTRA_INPUT && i == 0) {
    /* two activations (attention's scores and context): the right one [1, K, 8] */
    const int64_t w[3] = {1, s->dims[2], 8};
    in[1] = graph_input(gen, 3, w);
    n_in = 2;
    out.dims[2] = 8;
    EMIT(op);
  } else if (strcmp(op, "MatMul") == 0 && s->rank >= 2) {
    const int64_t w[2] = {s->dims[s->rank - 1], 8};
    in[1] = constant(gen, "weight", 2, w, -0.3, 0.3);
    gen->used_extra = gen->used_extra || gen->variant == EXTRA_CONSTANT;
    n_in = 2;
    out.dims[s->rank - 1] = 8;
    EMIT(op);
  } else if (strcmp(op, "Add") == 0 || strcmp(op, "Mul") == 0 || strcmp(op, "Sub") == 0) {
    in[1] = extra_operand(gen, x, s, chained);
    n_in = 2;
    EMIT(op);
  } else if (strcmp(op, "Concat") == 0) {
    in[1] = extra_operand(gen, x, s, chained);
    n_in = 2;
    out.dims[1] = 2 * c;
    EMIT(op);
    qh_node_set_attr_int(n, "axis", 1);
  } else if (strcmp(op, "Relu") == 0 || strcmp(op, "Sigmoid") == 0 || strcmp(op, "Tanh") == 0 ||
             strcmp(op, "HardSigmoid") == 0 || strcmp(op, "HardSwish") == 0 || strcmp(op, "Softmax") == 0) {
    EMIT(op);
  } else if (strcmp(op, "LeakyRelu") == 0) {
    EMIT(op);
    qh_node_set_attr_float(n, "alpha", 0.1015625f); /* 26/256: what fixed-point hardware takes */
  } else if (strcmp(op, "Clip") == 0) {
    in[1] = constant(gen, "clip_min", 0, NULL, 0.0, 0.0);
    in[2] = constant(gen, "clip_max", 0, NULL, 1.5, 1.5);
    n_in = 3;
    EMIT(op);
  } else if ((strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0) && s->rank == 4) {
    out.dims[2] = s->dims[2] / 2;
    out.dims[3] = s->dims[3] / 2;
    EMIT(op);
    static const int64_t k[2] = {2, 2};
    qh_node_set_attr_ints(n, "kernel_shape", 2, k);
    qh_node_set_attr_ints(n, "strides", 2, k);
  } else if (strcmp(op, "GlobalAveragePool") == 0 && s->rank == 4) {
    out.dims[2] = out.dims[3] = 1;
    EMIT(op);
  } else if (strcmp(op, "ReduceMean") == 0 && s->rank == 4) {
    out.dims[2] = out.dims[3] = 1;
    EMIT(op);
    static const int64_t axes[2] = {2, 3};
    qh_node_set_attr_ints(n, "axes", 2, axes);
    qh_node_set_attr_int(n, "keepdims", 1);
  } else if (strcmp(op, "Flatten") == 0) {
    int64_t numel = 1;
    for (int d = 1; d < s->rank; d++)
      numel *= s->dims[d];
    out = qh_shape_make(2, (int64_t[]){s->dims[0], numel});
    EMIT(op);
    qh_node_set_attr_int(n, "axis", 1);
  } else if (strcmp(op, "Reshape") == 0 && s->rank == 4 && next && strcmp(next, "Transpose") == 0) {
    /* a channel shuffle: [N, C, H, W] -> [N, 2, C/2, H, W] */
    int64_t d[5] = {s->dims[0], 2, c / 2, s->dims[2], s->dims[3]};
    in[1] = int64_constant(gen, "shape", 5, d);
    n_in = 2;
    out = qh_shape_make(5, d);
    EMIT(op);
  } else if (strcmp(op, "Reshape") == 0 && s->rank == 5) {
    int64_t d[4] = {s->dims[0], s->dims[1] * s->dims[2], s->dims[3], s->dims[4]};
    in[1] = int64_constant(gen, "shape", 4, d);
    n_in = 2;
    out = qh_shape_make(4, d);
    EMIT(op);
  } else if (strcmp(op, "Reshape") == 0 && s->rank == 4) {
    int64_t d[2] = {s->dims[0], c * s->dims[2] * s->dims[3]};
    in[1] = int64_constant(gen, "shape", 2, d);
    n_in = 2;
    out = qh_shape_make(2, d);
    EMIT(op);
  } else if (strcmp(op, "Transpose") == 0 && s->rank == 5) {
    static const int64_t perm[5] = {0, 2, 1, 3, 4};
    for (int d = 0; d < 5; d++)
      out.dims[d] = s->dims[perm[d]];
    EMIT(op);
    qh_node_set_attr_ints(n, "perm", 5, perm);
  } else if (strcmp(op, "Slice") == 0 && s->rank == 4) {
    static const int64_t starts[1] = {0}, ends[1] = {2}, axes[1] = {1};
    in[1] = int64_constant(gen, "starts", 1, starts);
    in[2] = int64_constant(gen, "ends", 1, ends);
    in[3] = int64_constant(gen, "axes", 1, axes);
    n_in = 4;
    out.dims[1] = 2;
    EMIT(op);
  } else if (strcmp(op, "Pad") == 0 && s->rank == 4) {
    static const int64_t pads[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    in[1] = int64_constant(gen, "pads", 8, pads);
    n_in = 2;
    out.dims[2] += 2;
    out.dims[3] += 2;
    EMIT(op);
  } else if (strcmp(op, "BatchNormalization") == 0 && s->rank == 4) {
    const int64_t d[1] = {c};
    in[1] = constant(gen, "bn_scale", 1, d, 0.5, 1.5);
    in[2] = constant(gen, "bn_bias", 1, d, -0.2, 0.2);
    in[3] = constant(gen, "bn_mean", 1, d, -0.1, 0.1);
    in[4] = constant(gen, "bn_var", 1, d, 0.5, 1.5);
    n_in = 5;
    EMIT(op);
  } else {
    gen->unsupported = g_strdup_printf("no generated graph for op %s after a rank-%d value", op, s->rank);
    return -1;
  }
#undef EMIT
  *s = out;
  return y;
}

/* A 1x1 Conv over x ([N, C, H, W]) keeping its shape. */
static int conv_1x1(Gen *gen, int x, const QhShape *s) {
  const int64_t w[4] = {s->dims[1], s->dims[1], 1, 1}, b[1] = {s->dims[1]};
  int in[3] = {x, constant(gen, "weight", 4, w, -0.5, 0.5), constant(gen, "bias", 1, b, -0.2, 0.2)};
  int y = value(gen, "t", s->rank, s->dims);
  node(gen, "Conv", 3, in, y);
  return y;
}

/* The Linear a dynamic pattern claims once quantized: MatMul by a constant weight, and its
 * bias Add when the pattern ends in Add (MatMulInteger -> Cast -> Mul -> Add). */
static int dynamic_linear(Gen *gen, const QhLoweringPattern *p, int x, QhShape *s) {
  const int64_t w[2] = {s->dims[2], 8}, b[1] = {8};
  int in[2] = {x, constant(gen, "weight", 2, w, -0.3, 0.3)};
  s->dims[2] = 8;
  x = value(gen, "t", 3, s->dims);
  node(gen, "MatMul", 2, in, x);
  if (p->n_ops < 2 || strcmp(p->ops[p->n_ops - 1], "Add") != 0)
    return x;
  int add_in[2] = {x, constant(gen, "bias", 1, b, -0.2, 0.2)};
  int y = value(gen, "t", 3, s->dims);
  node(gen, "Add", 2, add_in, y);
  return y;
}

/* The float graph of pattern p (variant v), or NULL with *why. */
/* A pattern that starts at MatMulInteger claims ONNX Runtime's dynamic format: its graph
 * is a Linear's MatMul, quantized by `quantize --dynamic` (*dynamic set). */
static QhGraph *pattern_graph(const QhLoweringPattern *p, int variant, gboolean *used_extra, gboolean *dynamic,
                              char **why) {
  Gen gen = {qh_graph_new(), g_rand_new_with_seed(CALIB_SEED), variant, 0, FALSE, NULL};
  qh_graph_set_opset(gen.g, "", 13);
  QhShape s = first_input_shape(p->ops[0], variant);
  int x = graph_input(&gen, s.rank, s.dims);
  /* x * act(x) behind a Conv, as SiLU sits in a network: a graph input read by two ops
   * gets one quantizer per reader (PyTorch's input observers) */
  if ((variant == BEHIND_CONV || variant == BETWEEN_CONVS || variant == EXTRA_ACTIVATION) && s.rank == 4) {
    x = conv_1x1(&gen, x, &s);
    gen.used_extra = variant != EXTRA_ACTIVATION;
  }
  *dynamic = strcmp(p->ops[0], "MatMulInteger") == 0;
  if (*dynamic)
    x = dynamic_linear(&gen, p, x, &s);
  for (size_t i = 0; i < p->n_ops && x >= 0 && !*dynamic; i++)
    x = append_op(&gen, p, i, x, &s);
  if (variant == BETWEEN_CONVS && x >= 0 && s.rank == 4 && gen.used_extra)
    x = conv_1x1(&gen, x, &s);
  else if (variant == BETWEEN_CONVS)
    gen.used_extra = FALSE;
  g_rand_free(gen.rng);
  *used_extra = gen.used_extra;
  if (x < 0) {
    *why = gen.unsupported;
    qh_graph_free(gen.g);
    return NULL;
  }
  QhValue *y = qh_graph_value(gen.g, x);
  y->is_output = TRUE;
  g_array_append_val(gen.g->outputs, x);
  return gen.g;
}

/* CALIB_SAMPLES seeded samples per graph input, along a first axis that replaces the
 * batch axis of 1. */
static GPtrArray *calibration(const QhGraph *g) {
  GPtrArray *arrays = g_ptr_array_new_with_free_func((GDestroyNotify)qh_named_tensor_free);
  GRand *rng = g_rand_new_with_seed(CALIB_SEED + 1);
  for (guint i = 0; i < g->inputs->len; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(g->inputs, int, i));
    QhShape s = v->shape;
    s.dims[0] = CALIB_SAMPLES;
    QhNamedTensor *nt = g_new0(QhNamedTensor, 1);
    nt->name = g_strdup(v->name);
    nt->tensor = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
    float *d = nt->tensor->data;
    for (int64_t k = 0; k < qh_tensor_numel(nt->tensor); k++)
      d[k] = (float)g_rand_double_range(rng, -2.0, 2.5);
    g_ptr_array_add(arrays, nt);
  }
  g_rand_free(rng);
  return arrays;
}

gboolean qh_check_quantize_graph(QhCheckRun *run, const QhGraph *g, const char *model, const char *qdq,
                                 gboolean dynamic, char **why) {
  GError *error = NULL;
  GPtrArray *arrays = calibration(g);
  char *report_text = NULL;
  gboolean ok = qh_onnx_save(g, model, &error);
  if (ok && dynamic) {
    QhDynamicOptions opt = {.model_path = model, .output_path = qdq, .report_text_out = &report_text};
    ok = qh_quantize_dynamic(&opt, &error);
  } else if (ok) {
    QhQuantizeOptions opt = {.model_path = model,
                             .backend = run->report->info->path,
                             .search = *run->search,
                             .backend_opts = run->backend_opts,
                             .calib_path = "plugin-check's seeded samples",
                             .output_path = qdq,
                             .threads = 1,
                             .quiet = TRUE,
                             .calib_arrays = arrays,
                             .report_text_out = &report_text};
    /* the flow's warnings go to the report; on stderr they would read as the plugin's */
    QhLogLevel level = qh_log_get_level();
    qh_log_set_level(QH_LOG_ERROR);
    ok = qh_quantize(&opt, &error);
    qh_log_set_level(level);
  }
  if (!ok) {
    *why = g_strdup_printf("qhost quantize of its float graph failed: %s", error->message);
    g_error_free(error);
  }
  g_free(report_text);
  g_ptr_array_unref(arrays);
  g_unlink(model);
  return ok;
}

int qh_check_pattern_n_variants(void) { return N_VARIANTS; }

/* ---- the requantize pattern's graphs (QH_PATTERN_OP_REQUANTIZE) ----
 * A requantize step is made by a plugin's post_convert or an edge needing another grid,
 * not by quantizing a float op, so its graph is written in Q/DQ form directly:
 * x -> QuantizeLinear(a) -> DequantizeLinear(a) -> QuantizeLinear(b) ->
 * DequantizeLinear(b) -> y, the step moving between two unrelated grids (scales in a
 * ratio that is no power of two, different zero points) that both cover the checker's
 * inputs. Variants: uint8 -> uint8, int8 -> int8, int8 -> uint8, and a per-channel
 * uint8 grid (axis 1) -> uint8; the output grid stays per tensor, as the comparison
 * reads it. */
typedef struct {
  const char *label;
  QhDType in_dtype, out_dtype;
  gboolean per_channel;
} RequantizeVariant;

static const RequantizeVariant requantize_variants[] = {
    {"uint8 -> uint8", QH_DTYPE_U8, QH_DTYPE_U8, FALSE},
    {"int8 -> int8", QH_DTYPE_S8, QH_DTYPE_S8, FALSE},
    {"int8 -> uint8", QH_DTYPE_S8, QH_DTYPE_U8, FALSE},
    {"per-channel uint8 -> uint8", QH_DTYPE_U8, QH_DTYPE_U8, TRUE},
};

/* A scale and zero point of dtype dt covering [-2.4, 3.0] with `scale`, n entries. */
static void requantize_qparams(Gen *gen, QhDType dt, float scale, int n, int *scale_id, int *zp_id) {
  int64_t dims[1] = {n};
  QhShape s = qh_shape_make(n > 1 ? 1 : 0, dims);
  QhTensor *st = qh_tensor_new(QH_DTYPE_F32, &s, NULL), *zt = qh_tensor_new(dt, &s, NULL);
  for (int c = 0; c < n; c++) {
    float sc = scale * (1.0f + 0.125f * (float)c);
    int32_t lo = dt == QH_DTYPE_U8 ? 0 : -128;
    int32_t z = lo + (int32_t)(2.4f / sc + 0.5f);
    ((float *)st->data)[c] = sc;
    if (dt == QH_DTYPE_U8)
      ((uint8_t *)zt->data)[c] = (uint8_t)z;
    else
      ((int8_t *)zt->data)[c] = (int8_t)z;
  }
  char *name = fresh(gen, "scale");
  QhValue *v = qh_graph_add_value(gen->g, name, NULL);
  g_free(name);
  qh_value_set_initializer(v, st);
  *scale_id = v->id;
  name = fresh(gen, "zero_point");
  v = qh_graph_add_value(gen->g, name, NULL);
  g_free(name);
  qh_value_set_initializer(v, zt);
  *zp_id = v->id;
}

/* One Q or DQ node from x to a new value of dtype dt on the given grid. */
static int requantize_qdq_node(Gen *gen, const char *op, int x, QhDType dt, const QhShape *shape, int scale_id,
                               int zp_id, gboolean per_channel) {
  int y = value(gen, "t", shape->rank, shape->dims);
  qh_graph_value(gen->g, y)->dtype = dt;
  int in[3] = {x, scale_id, zp_id};
  QhNode *n = node(gen, op, 3, in, y);
  if (per_channel)
    qh_node_set_attr_int(n, "axis", 1);
  return y;
}

static char *requantize_qdq(const QhLoweringPattern *p, int variant, const char *dir, char **label,
                            char **why) {
  if (p->n_ops != 1) {
    *why = g_strdup_printf("a %s pattern has one op, not %zu", QH_PATTERN_OP_REQUANTIZE, p->n_ops);
    return NULL;
  }
  if ((size_t)variant >= G_N_ELEMENTS(requantize_variants))
    return NULL;
  const RequantizeVariant *rv = &requantize_variants[variant];
  Gen gen = {qh_graph_new(), NULL, variant, 0, FALSE, NULL};
  qh_graph_set_opset(gen.g, "", 13);
  static const int64_t dims[4] = {1, 4, 8, 8};
  QhShape s = qh_shape_make(4, dims);
  int x = graph_input(&gen, 4, dims);
  int sa, za, sb, zb;
  requantize_qparams(&gen, rv->in_dtype, 0.0213f, rv->per_channel ? 4 : 1, &sa, &za);
  requantize_qparams(&gen, rv->out_dtype, 0.0297f, 1, &sb, &zb);
  int q = requantize_qdq_node(&gen, "QuantizeLinear", x, rv->in_dtype, &s, sa, za, rv->per_channel);
  int f = requantize_qdq_node(&gen, "DequantizeLinear", q, QH_DTYPE_F32, &s, sa, za, rv->per_channel);
  int r = requantize_qdq_node(&gen, "QuantizeLinear", f, rv->out_dtype, &s, sb, zb, FALSE);
  int y = requantize_qdq_node(&gen, "DequantizeLinear", r, QH_DTYPE_F32, &s, sb, zb, FALSE);
  qh_graph_value(gen.g, y)->is_output = TRUE;
  g_array_append_val(gen.g->outputs, y);
  *label = g_strdup_printf("generated %s (%s)", p->id, rv->label);
  char *qdq = g_strdup_printf("%s/%s-%d.qdq.onnx", dir, p->id, variant);
  GError *error = NULL;
  if (!qh_onnx_save(gen.g, qdq, &error)) {
    *why = g_strdup_printf("writing its QDQ graph failed: %s", error->message);
    g_error_free(error);
    g_clear_pointer(&qdq, g_free);
  }
  qh_graph_free(gen.g);
  return qdq;
}

char *qh_check_pattern_quantize(QhCheckRun *run, const QhLoweringPattern *p, int variant, const char *dir,
                                char **label, char **why) {
  *label = NULL;
  *why = NULL;
  if (variant >= N_VARIANTS)
    return NULL;
  if (strcmp(p->ops[0], QH_PATTERN_OP_REQUANTIZE) == 0)
    return requantize_qdq(p, variant, dir, label, why);
  gboolean used_extra = FALSE, dynamic = FALSE;
  QhGraph *g = pattern_graph(p, variant, &used_extra, &dynamic, why);
  if (g == NULL || (variant > 0 && !used_extra)) {
    qh_graph_free(g);
    return NULL; /* the same graph as variant 0, or none */
  }
  *label = used_extra && variant > 0 ? g_strdup_printf("generated %s (%s)", p->id, variant_names[variant])
                      : g_strdup_printf("generated %s", p->id);
  char *model = g_strdup_printf("%s/%s-%d.onnx", dir, p->id, variant);
  char *qdq = g_strdup_printf("%s/%s-%d.qdq.onnx", dir, p->id, variant);
  if (!qh_check_quantize_graph(run, g, model, qdq, dynamic, why))
    g_clear_pointer(&qdq, g_free);
  g_free(model);
  qh_graph_free(g);
  return qdq;
}
