/* A test backend for an imaginary NPU whose Add takes both inputs on one grid. It meets
 * that rule the accuracy-friendly way: its post_convert requantizes (DequantizeLinear ->
 * QuantizeLinear) an Add input that arrives on another grid just before the Add, and it
 * declares a requantize pattern (QH_PATTERN_OP_REQUANTIZE, ABI 1.2) beside its Add, so
 * the step runs on its kernel instead of the host's path. Built from the installed SDK
 * headers only. The requantize kernel precomputes, per channel, the output of every
 * 8-bit input value with the host's own formula (so it is bit-exact with the host's
 * reference, which the tests use as the slow twin); the option bug=truncate plants a
 * rounding bug (truncation instead of round half to even) that the tests must catch. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qhost/qhost-plugin.h>

typedef struct {
  int truncate; /* bug=truncate */
  int no_add;   /* add=false: only the requantize pattern */
} Instance;

/* ---- shared helpers ---- */

static int dtype_range(int32_t dtype, int32_t *lo, int32_t *hi) {
  if (dtype == QH_DTYPE_UINT8) {
    *lo = 0;
    *hi = 255;
  } else if (dtype == QH_DTYPE_INT8) {
    *lo = -128;
    *hi = 127;
  } else {
    *lo = *hi = 0;
    return 0;
  }
  return 1;
}

static int32_t load8(const void *data, int32_t dtype, int64_t i) {
  return dtype == QH_DTYPE_UINT8 ? (int32_t)((const uint8_t *)data)[i] : (int32_t)((const int8_t *)data)[i];
}

static void store8(void *data, int32_t dtype, int64_t i, int32_t v) {
  if (dtype == QH_DTYPE_UINT8)
    ((uint8_t *)data)[i] = (uint8_t)v;
  else
    ((int8_t *)data)[i] = (int8_t)v;
}

/* ONNX QuantizeLinear as the host computes it: round_half_even(x / s) + z, saturated
 * to the dtype (the planted bug truncates instead). */
static int32_t quantize(float x, float s, int32_t z, int32_t lo, int32_t hi, int truncate) {
  float q = (truncate ? truncf(x / s) : nearbyintf(x / s)) + (float)z;
  if (isnan(q))
    return z;
  return (int32_t)(q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q);
}

static int64_t numel(const QhTensorView *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; d++)
    n *= t->dims[d];
  return n;
}

/* ---- the requantize kernel ---- */

typedef struct {
  int truncate;
  int32_t in_dtype, out_dtype;
  int axis;          /* the per-channel axis of either side (used when channels > 1) */
  size_t channels;   /* entries of the table's channel dimension (1: per tensor) */
  float *in_scale, *out_scale;
  int32_t *in_zp, *out_zp;
  size_t in_count, out_count;
  int64_t inner;     /* elements per channel step along axis (reshape) */
  uint8_t *table;    /* channels x 256 outputs, indexed by input - input dtype min */
} Requant;

static void requant_destroy(void *kernel) {
  Requant *k = kernel;
  if (k == NULL)
    return;
  free(k->in_scale);
  free(k->out_scale);
  free(k->in_zp);
  free(k->out_zp);
  free(k->table);
  free(k);
}

static int copy_qparams(const QhQParams *q, float **scale, int32_t **zp, size_t *count) {
  *scale = malloc(q->count * sizeof **scale);
  *zp = malloc(q->count * sizeof **zp);
  if (*scale == NULL || *zp == NULL)
    return 0;
  memcpy(*scale, q->scale, q->count * sizeof **scale);
  memcpy(*zp, q->zero_point, q->count * sizeof **zp);
  *count = q->count;
  return 1;
}

/* Why this kernel cannot run the unit, or NULL. */
static const char *requant_unsupported(const QhNodeUnit *unit) {
  if (unit->n_inputs != 1 || unit->n_outputs != 1 || unit->input_qparams[0] == NULL ||
      unit->output_qparams[0] == NULL)
    return "one quantized input and output expected";
  const QhQParams *in = unit->input_qparams[0], *out = unit->output_qparams[0];
  int32_t lo, hi;
  if (!dtype_range(in->dtype, &lo, &hi) || !dtype_range(out->dtype, &lo, &hi))
    return "only int8 and uint8 tensors";
  if (in->count > 1 && out->count > 1 && (in->ch_axis != out->ch_axis || in->count != out->count))
    return "per-channel qparams on two different axes";
  return NULL;
}

static QhStatus *requant_accept(void *instance, const QhHostApi *host, const QhGraphView *graph,
                                const QhNodeUnit *unit) {
  (void)instance;
  (void)graph;
  const char *why = requant_unsupported(unit);
  return why ? host->status_new(QH_ERR_UNSUPPORTED, why) : NULL;
}

static QhStatus *requant_create(void *instance, const QhHostApi *host, const QhGraphView *graph,
                                const QhNodeUnit *unit, void **out_kernel) {
  (void)graph;
  const char *why = requant_unsupported(unit);
  if (why)
    return host->status_new(QH_ERR_UNSUPPORTED, why);
  const QhQParams *in = unit->input_qparams[0], *out = unit->output_qparams[0];
  Requant *k = calloc(1, sizeof *k);
  if (k == NULL || !copy_qparams(in, &k->in_scale, &k->in_zp, &k->in_count) ||
      !copy_qparams(out, &k->out_scale, &k->out_zp, &k->out_count)) {
    requant_destroy(k);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the requantize kernel");
  }
  k->truncate = ((const Instance *)instance)->truncate;
  k->in_dtype = in->dtype;
  k->out_dtype = out->dtype;
  k->axis = in->count > 1 ? in->ch_axis : out->count > 1 ? out->ch_axis : -1;
  k->channels = in->count > out->count ? in->count : out->count;
  k->table = malloc(k->channels * 256);
  if (k->table == NULL) {
    requant_destroy(k);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the requantize table");
  }
  int32_t in_lo, in_hi, out_lo, out_hi;
  dtype_range(k->in_dtype, &in_lo, &in_hi);
  dtype_range(k->out_dtype, &out_lo, &out_hi);
  for (size_t c = 0; c < k->channels; c++) {
    size_t ci = k->in_count > 1 ? c : 0, co = k->out_count > 1 ? c : 0;
    for (int32_t q = in_lo; q <= in_hi; q++) {
      /* the host's DequantizeLinear, then its QuantizeLinear */
      float x = (float)(q - k->in_zp[ci]) * k->in_scale[ci];
      int32_t y = quantize(x, k->out_scale[co], k->out_zp[co], out_lo, out_hi, k->truncate);
      k->table[c * 256 + (size_t)(q - in_lo)] = (uint8_t)(y & 0xff);
    }
  }
  *out_kernel = k;
  return NULL;
}

static QhStatus *requant_reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                                 QhTensorView *outputs, size_t n_outputs, size_t *out_workspace_bytes) {
  Requant *k = kernel;
  if (n_inputs != 1 || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "one input and one output expected");
  const QhTensorView *x = &inputs[0];
  if (x->dtype != k->in_dtype)
    return host->status_new(QH_ERR_UNSUPPORTED, "the input's dtype is not the DequantizeLinear's");
  k->inner = 1;
  if (k->channels > 1) {
    int axis = k->axis < 0 ? k->axis + x->rank : k->axis;
    if (axis < 0 || axis >= x->rank || x->dims[axis] != (int64_t)k->channels)
      return qh_status_newf(host, QH_ERR_UNSUPPORTED, "per-channel axis %d does not have %zu entries", axis,
                            k->channels);
    for (int32_t d = axis + 1; d < x->rank; d++)
      k->inner *= x->dims[d];
  }
  outputs[0].dtype = k->out_dtype;
  outputs[0].layout = x->layout;
  outputs[0].rank = x->rank;
  memcpy(outputs[0].dims, x->dims, sizeof x->dims);
  *out_workspace_bytes = 0;
  return NULL;
}

static QhStatus *requant_run(void *kernel, const QhHostApi *host, const QhRunContext *ctx,
                             const QhTensorView *inputs, size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                             void *workspace, size_t workspace_bytes) {
  (void)host;
  (void)ctx;
  (void)n_inputs;
  (void)n_outputs;
  (void)workspace;
  (void)workspace_bytes;
  const Requant *k = kernel;
  int32_t in_lo, in_hi;
  dtype_range(k->in_dtype, &in_lo, &in_hi);
  int64_t n = numel(&inputs[0]);
  for (int64_t i = 0; i < n; i++) {
    size_t c = k->channels > 1 ? (size_t)((i / k->inner) % (int64_t)k->channels) : 0;
    uint8_t y = k->table[c * 256 + (size_t)(load8(inputs[0].data, k->in_dtype, i) - in_lo)];
    ((uint8_t *)outputs[0].data)[i] = y; /* both 8-bit types: the byte is the value */
  }
  return NULL;
}

static const QhKernelOps requant_kernel = {QH_STRUCT_HEADER(QhKernelOps),
                                           .id = "npu_requantize_8bit",
                                           .input_layout = QH_LAYOUT_NCHW,
                                           .output_layout = QH_LAYOUT_NCHW,
                                           .create = requant_create,
                                           .reshape = requant_reshape,
                                           .run = requant_run,
                                           .destroy = requant_destroy};

/* ---- the Add kernel: both inputs on one grid, the NPU's rule ---- */

typedef struct {
  int32_t dtype;
  float scale, out_scale;
  int32_t zp, out_zp;
} AddKernel;

static const char *add_unsupported(const QhNodeUnit *unit) {
  if (unit->n_inputs != 2 || unit->n_outputs != 1 || unit->input_qparams[0] == NULL ||
      unit->input_qparams[1] == NULL || unit->output_qparams[0] == NULL)
    return "two quantized inputs and a quantized output expected";
  const QhQParams *a = unit->input_qparams[0], *b = unit->input_qparams[1], *o = unit->output_qparams[0];
  int32_t lo, hi;
  if (a->count != 1 || b->count != 1 || o->count != 1 || !dtype_range(a->dtype, &lo, &hi) ||
      a->dtype != o->dtype)
    return "per-tensor int8 or uint8 inputs and output of one dtype only";
  if (a->dtype != b->dtype || a->scale[0] != b->scale[0] || a->zero_point[0] != b->zero_point[0])
    return "the inputs are on two grids (this NPU's Add takes one: requantize one input)";
  return NULL;
}

static QhStatus *add_accept(void *instance, const QhHostApi *host, const QhGraphView *graph,
                            const QhNodeUnit *unit) {
  (void)graph;
  if (((const Instance *)instance)->no_add)
    return host->status_new(QH_ERR_UNSUPPORTED, "declined by option add=false");
  const char *why = add_unsupported(unit);
  return why ? host->status_new(QH_ERR_UNSUPPORTED, why) : NULL;
}

static QhStatus *add_create(void *instance, const QhHostApi *host, const QhGraphView *graph,
                            const QhNodeUnit *unit, void **out_kernel) {
  (void)instance;
  (void)graph;
  const char *why = add_unsupported(unit);
  if (why)
    return host->status_new(QH_ERR_UNSUPPORTED, why);
  AddKernel *k = calloc(1, sizeof *k);
  if (k == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the add kernel");
  k->dtype = unit->input_qparams[0]->dtype;
  k->scale = unit->input_qparams[0]->scale[0];
  k->zp = unit->input_qparams[0]->zero_point[0];
  k->out_scale = unit->output_qparams[0]->scale[0];
  k->out_zp = unit->output_qparams[0]->zero_point[0];
  *out_kernel = k;
  return NULL;
}

static QhStatus *add_reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                             QhTensorView *outputs, size_t n_outputs, size_t *out_workspace_bytes) {
  const AddKernel *k = kernel;
  if (n_inputs != 2 || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "two inputs and one output expected");
  if (inputs[0].rank != inputs[1].rank ||
      memcmp(inputs[0].dims, inputs[1].dims, sizeof(int64_t) * (size_t)inputs[0].rank) != 0)
    return host->status_new(QH_ERR_UNSUPPORTED, "inputs of one shape only (no broadcast)");
  outputs[0].dtype = k->dtype;
  outputs[0].layout = inputs[0].layout;
  outputs[0].rank = inputs[0].rank;
  memcpy(outputs[0].dims, inputs[0].dims, sizeof inputs[0].dims);
  *out_workspace_bytes = 0;
  return NULL;
}

static QhStatus *add_run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                         size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                         size_t workspace_bytes) {
  (void)host;
  (void)ctx;
  (void)n_inputs;
  (void)n_outputs;
  (void)workspace;
  (void)workspace_bytes;
  const AddKernel *k = kernel;
  int32_t lo, hi;
  dtype_range(k->dtype, &lo, &hi);
  int64_t n = numel(&inputs[0]);
  for (int64_t i = 0; i < n; i++) {
    /* the host's two DequantizeLinears, its float Add and its QuantizeLinear */
    float a = (float)(load8(inputs[0].data, k->dtype, i) - k->zp) * k->scale;
    float b = (float)(load8(inputs[1].data, k->dtype, i) - k->zp) * k->scale;
    store8(outputs[0].data, k->dtype, i, quantize(a + b, k->out_scale, k->out_zp, lo, hi, 0));
  }
  return NULL;
}

static const QhKernelOps add_kernel = {QH_STRUCT_HEADER(QhKernelOps),
                                       .id = "npu_add_one_grid",
                                       .input_layout = QH_LAYOUT_NCHW,
                                       .output_layout = QH_LAYOUT_NCHW,
                                       .create = add_create,
                                       .reshape = add_reshape,
                                       .run = add_run,
                                       .destroy = free};

/* ---- post_convert: the NPU's one-grid rule met with requantize steps ----
 * Each Add whose two inputs arrive on different per-tensor grids of one dtype gets its
 * inputs moved onto one grid: the wider of the two when it covers the other's range,
 * else a grid covering both; an input not already on it gets DequantizeLinear's output
 * -> QuantizeLinear -> DequantizeLinear on that grid. The producers keep their own
 * grids for their other readers (the accuracy-friendly way; a shared_inputs_mask would
 * put the producers themselves on one grid). */

/* The per-tensor 8-bit grid of an Add input: 1 with *q filled (arrays borrowed), else 0. */
static int input_grid(const QhHostApi *h, const QhGraphView *g, uint32_t node, uint32_t slot, QhQParams *q) {
  QhEdgeRef e = {node, slot, QH_EDGE_INPUT, 0};
  *q = (QhQParams){QH_STRUCT_HEADER(QhQParams)};
  QhStatus *st = h->qparams_get(g, &e, q);
  if (st) {
    h->status_free(st);
    return 0;
  }
  int32_t lo, hi;
  return q->count == 1 && dtype_range(q->dtype, &lo, &hi);
}

static float grid_lo(const QhQParams *q) { return (float)(q->quant_min - q->zero_point[0]) * q->scale[0]; }
static float grid_hi(const QhQParams *q) { return (float)(q->quant_max - q->zero_point[0]) * q->scale[0]; }

/* value -> QuantizeLinear -> DequantizeLinear on (scale, zp); *out the float result. */
static QhStatus *add_requantize(const QhHostApi *h, QhGraphView *g, const char *name, uint32_t value,
                                uint32_t scale, uint32_t zp, uint32_t *out) {
  uint32_t q, f, node;
  QhStatus *st = h->graph_add_value(g, NULL, &q);
  if (!st)
    st = h->graph_add_value(g, NULL, &f);
  uint32_t q_in[3] = {value, scale, zp}, dq_in[3] = {q, scale, zp};
  if (!st)
    st = h->graph_add_node(g, "QuantizeLinear", "", name, q_in, 3, &q, 1, &node);
  if (!st)
    st = h->graph_add_node(g, "DequantizeLinear", "", NULL, dq_in, 3, &f, 1, &node);
  *out = f;
  return st;
}

static QhStatus *one_grid_for_add(const QhHostApi *h, QhGraphView *g, uint32_t add) {
  QhQParams a, b;
  if (!input_grid(h, g, add, 0, &a) || !input_grid(h, g, add, 1, &b) || a.dtype != b.dtype)
    return NULL;
  if (a.scale[0] == b.scale[0] && a.zero_point[0] == b.zero_point[0])
    return NULL;
  const QhQParams *in[2] = {&a, &b};
  float lo = fminf(grid_lo(&a), grid_lo(&b)), hi = fmaxf(grid_hi(&a), grid_hi(&b));
  float scale = (hi - lo) / (float)(a.quant_max - a.quant_min);
  int32_t zp = a.quant_min + (int32_t)lrintf(-lo / scale);
  int keep = -1; /* an input whose grid covers both ranges stays as it is */
  for (int i = 0; i < 2 && keep < 0; i++)
    if (grid_lo(in[i]) <= lo && grid_hi(in[i]) >= hi) {
      keep = i;
      scale = in[i]->scale[0];
      zp = in[i]->zero_point[0];
    }
  zp = zp < a.quant_min ? a.quant_min : zp > a.quant_max ? a.quant_max : zp;
  uint8_t zp_byte = (uint8_t)(zp & 0xff);
  uint32_t scale_v, zp_v;
  QhStatus *st = h->graph_add_constant(g, NULL, QH_DTYPE_FLOAT, 0, NULL, &scale, sizeof scale, &scale_v);
  if (!st)
    st = h->graph_add_constant(g, NULL, a.dtype, 0, NULL, &zp_byte, 1, &zp_v);
  for (uint32_t i = 0; i < 2 && !st; i++) {
    if ((int)i == keep)
      continue;
    char name[256];
    snprintf(name, sizeof name, "%s/requantize_%u", h->node_name(g, add), i);
    uint32_t f;
    st = add_requantize(h, g, name, h->node_input(g, add, i), scale_v, zp_v, &f);
    if (!st)
      st = h->node_set_input(g, add, i, f);
  }
  return st;
}

static QhStatus *post_convert(void *instance, const QhHostApi *h, QhGraphView *g) {
  (void)instance;
  uint32_t n_nodes = h->graph_node_count(g); /* the nodes this pass adds need no visit */
  QhStatus *st = NULL;
  for (uint32_t n = 0; n < n_nodes && !st; n++) {
    const char *domain = h->node_domain(g, n);
    if (h->node_is_live(g, n) && strcmp(h->node_op_type(g, n), "Add") == 0 && (!domain || !*domain) &&
        h->node_input_count(g, n) == 2)
      st = one_grid_for_add(h, g, n);
  }
  return st;
}

static const QhPassOps passes = {QH_STRUCT_HEADER(QhPassOps), .post_convert = post_convert};

/* ---- the descriptor ---- */

static const char *const requantize_ops[] = {QH_PATTERN_OP_REQUANTIZE}, *const add_ops[] = {"Add"};
static const QhLoweringPattern requantize = {QH_STRUCT_HEADER(QhLoweringPattern), .id = "requantize",
                                             .ops = requantize_ops, .n_ops = 1, .kernel = &requant_kernel,
                                             .accept = requant_accept};
static const QhLoweringPattern add = {QH_STRUCT_HEADER(QhLoweringPattern), .id = "add", .ops = add_ops,
                                      .n_ops = 1, .kernel = &add_kernel, .accept = add_accept};
static const QhLoweringPattern *const patterns[] = {&requantize, &add};
static const QhLoweringOps lowering = {QH_STRUCT_HEADER(QhLoweringOps), patterns, 2};

static const QhOptionDecl opt_bug = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "bug", .type = QH_OPTION_ENUM, .default_value = "none",
    .help = "plant a numeric bug: truncate instead of round half to even in the requantize kernel",
    .choices = "none|truncate"};
static const QhOptionDecl opt_add = {QH_STRUCT_HEADER(QhOptionDecl), .name = "add", .type = QH_OPTION_BOOL,
                                     .default_value = "true", .help = "lower Add units (false: requantize only)"};
static const QhOptionDecl *const options[] = {&opt_bug, &opt_add};

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info, const QhOption *opts,
                                 size_t n_opts, void **out) {
  (void)info;
  Instance *inst = calloc(1, sizeof *inst);
  if (inst == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the instance");
  for (size_t i = 0; i < n_opts; i++) {
    if (opts[i].key == NULL || opts[i].value == NULL)
      continue;
    if (strcmp(opts[i].key, "bug") == 0)
      inst->truncate = strcmp(opts[i].value, "truncate") == 0;
    else if (strcmp(opts[i].key, "add") == 0)
      inst->no_add = strcmp(opts[i].value, "false") == 0 || strcmp(opts[i].value, "0") == 0 ||
                     strcmp(opts[i].value, "no") == 0;
  }
  *out = inst;
  return NULL;
}

/* The NPU's quantization: uint8 activations, each Add input observed on its own (the
 * one-grid rule is met by post_convert's requantize steps). With a BackendConfig
 * plugin-check also runs its generated graphs. */
static const QhDTypeConstraint quint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8};
static const QhDTypeConfig add_dtypes = {QH_STRUCT_HEADER(QhDTypeConfig), .name = "npu_add",
                                         .input = &quint8, .output = &quint8};
static const QhDTypeConfig *const add_dtype_configs[] = {&add_dtypes};
static const char *const add_cfg_ops[] = {"Add"};
static const QhBackendPatternConfig add_cfg = {
    QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = add_cfg_ops, .n_ops = 1,
    .observation_type = QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT, .dtype_configs = add_dtype_configs,
    .n_dtype_configs = 1, .fuser = QH_FUSER_NONE};
static const QhBackendPatternConfig *const configs[] = {&add_cfg};
static const QhQuantSpec activation = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                       .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
                                       .ch_axis = -1, .observer = "MinMaxObserver"};
static const QhQConfigEntry global = {QH_STRUCT_HEADER(QhQConfigEntry), .match = QH_QCONFIG_MATCH_GLOBAL,
                                      .activation = &activation};
static const QhQConfigEntry *const qconfig[] = {&global};
static const QhBackendConfig backend_config = {QH_STRUCT_HEADER(QhBackendConfig), .name = "requant_npu",
                                               .patterns = configs, .n_patterns = 1,
                                               .default_qconfig = qconfig, .n_default_qconfig = 1};

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "requant_npu",
    .version = "1.0",
    .description = "test backend: an NPU whose Add takes one grid, with a requantize kernel (ABI 1.2)",
    .options = options,
    .n_options = 2,
    .instance_create = instance_create,
    .instance_destroy = free,
    .backend_config = &backend_config,
    .passes = &passes,
    .lowering = &lowering};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
