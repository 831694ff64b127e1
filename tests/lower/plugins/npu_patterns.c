/* A test plugin with both ABI 1.2 partitions and a per-unit lowering pattern, to
 * check the order the host lowers them in: example_npu's claim and partition engine
 * (compiled from plugins/example_npu) plus a one-op "Conv" pattern whose kernel is
 * the same engine run on a one-op partition. Options: claims (as example_npu's),
 * decline_compile (compile answers QH_ERR_UNSUPPORTED, so the claimed nodes go back
 * to the pattern), reshape_max_batch (a partition's reshape refuses a larger batch, as
 * an NPU compiled for one batch does: the host must run those shapes without it) and
 * bug=zero_point (a partition's outputs one step off everywhere) or bug=reshape (a
 * partition's reshape fails whatever the shapes), which plugin-check must catch. Built with NPU_QUANT it is npu_quant, which also quantizes (a
 * BackendConfig for Conv[+Relu] and Add[+Relu], uint8 activations, int8 weights, int32
 * bias): plugin-check quantizes its partition graphs with it. */
#include <stdlib.h>
#include <string.h>

#include "npu.h"

typedef struct {
  NpuInstance npu; /* first: claim.c and engine.c see an NpuInstance */
  int decline_compile;
  int64_t reshape_max_batch; /* 0: any */
  int bug_zero_point, bug_reshape;
} Instance;

/* A compiled partition: the engine's program and the options its reshape and run obey. */
typedef struct {
  void *program;
  int64_t reshape_max_batch;
  int bug_zero_point, bug_reshape;
} Compiled;

static QhStatus *compile_or_decline(void *instance, const QhHostApi *host, const QhGraphView *graph,
                                    const QhPartition *partition, void **out_compiled) {
  Instance *inst = instance;
  if (inst->decline_compile)
    return host->status_new(QH_ERR_UNSUPPORTED, "compile declined on request (decline_compile)");
  Compiled *c = calloc(1, sizeof *c);
  if (c == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory");
  QhStatus *st = npu_compile(instance, host, graph, partition, &c->program);
  if (st) {
    free(c);
    return st;
  }
  c->reshape_max_batch = inst->reshape_max_batch;
  c->bug_zero_point = inst->bug_zero_point;
  c->bug_reshape = inst->bug_reshape;
  *out_compiled = c;
  return NULL;
}

static QhStatus *partition_reshape(void *compiled, const QhHostApi *host, const QhTensorView *inputs,
                                   size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                                   size_t *out_workspace_bytes) {
  const Compiled *c = compiled;
  if (c->bug_reshape)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "planted reshape failure (bug=reshape)");
  for (size_t i = 0; i < n_inputs && c->reshape_max_batch > 0; i++)
    if (inputs[i].rank >= 1 && inputs[i].dims[0] > c->reshape_max_batch)
      return qh_status_newf(host, QH_ERR_UNSUPPORTED, "batch %lld is above reshape_max_batch=%lld",
                            (long long)inputs[i].dims[0], (long long)c->reshape_max_batch);
  return npu_reshape(c->program, host, inputs, n_inputs, outputs, n_outputs, out_workspace_bytes);
}

/* The planted bug: every output value one integer step up (saturating). */
static void shift_up(QhTensorView *t) {
  size_t n = t->dtype == QH_DTYPE_UINT8 || t->dtype == QH_DTYPE_INT8 ? t->nbytes : 0;
  for (size_t i = 0; i < n; i++) {
    if (t->dtype == QH_DTYPE_UINT8 && ((uint8_t *)t->data)[i] < 255)
      ((uint8_t *)t->data)[i]++;
    else if (t->dtype == QH_DTYPE_INT8 && ((int8_t *)t->data)[i] < 127)
      ((int8_t *)t->data)[i]++;
  }
}

static QhStatus *partition_run(void *compiled, const QhHostApi *host, const QhRunContext *ctx,
                               const QhTensorView *inputs, size_t n_inputs, QhTensorView *outputs,
                               size_t n_outputs, void *workspace, size_t workspace_bytes) {
  const Compiled *c = compiled;
  QhStatus *st = npu_run(c->program, host, ctx, inputs, n_inputs, outputs, n_outputs, workspace, workspace_bytes);
  for (size_t i = 0; st == NULL && c->bug_zero_point && i < n_outputs; i++)
    shift_up(&outputs[i]);
  return st;
}

static void partition_destroy(void *compiled) {
  Compiled *c = compiled;
  if (c)
    npu_destroy(c->program);
  free(c);
}

/* The pattern's kernel: the unit as a one-op partition of the engine. */
static QhStatus *conv_create(void *instance, const QhHostApi *host, const QhGraphView *graph,
                             const QhNodeUnit *unit, void **out_kernel) {
  if (unit->n_nodes != 1 || unit->n_outputs != 1 || unit->input_qparams[0] == NULL)
    return host->status_new(QH_ERR_UNSUPPORTED, "one quantized Conv expected");
  QhPartition p = {QH_STRUCT_HEADER(QhPartition)};
  p.name = "conv_unit";
  p.nodes = unit->nodes;
  p.units = &unit;
  p.n_nodes = 1;
  p.inputs = unit->inputs;
  p.input_tensors = unit->input_tensors;
  p.n_inputs = 1;
  p.outputs = unit->outputs;
  p.output_tensors = unit->output_tensors;
  p.n_outputs = 1;
  return npu_compile(instance, host, graph, &p, out_kernel);
}

static QhStatus *conv_reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                              QhTensorView *outputs, size_t n_outputs, size_t *out_workspace_bytes) {
  (void)n_inputs; /* weights and bias are in the program */
  return npu_reshape(kernel, host, inputs, 1, outputs, n_outputs, out_workspace_bytes);
}

static QhStatus *conv_run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                          size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                          size_t workspace_bytes) {
  (void)n_inputs; /* weights and bias are in the program */
  return npu_run(kernel, host, ctx, inputs, 1, outputs, n_outputs, workspace, workspace_bytes);
}

/* The kernel takes quantized Convs only: one whose output goes on float (into a Relu
 * the unit does not hold) stays on the host. */
static QhStatus *conv_accept(void *instance, const QhHostApi *host, const QhGraphView *graph,
                             const QhNodeUnit *unit) {
  (void)instance;
  (void)graph;
  if (unit->n_outputs != 1 || unit->output_qparams[0] == NULL || unit->input_qparams[0] == NULL)
    return host->status_new(QH_ERR_UNSUPPORTED, "a quantized Conv output expected (this one goes on float)");
  return NULL;
}

static const QhKernelOps conv_kernel = {
    QH_STRUCT_HEADER(QhKernelOps),
    .id = "npu_conv_unit",
    .input_layout = QH_LAYOUT_NCHW,
    .output_layout = QH_LAYOUT_NCHW,
    .create = conv_create,
    .reshape = conv_reshape,
    .run = conv_run,
    .destroy = npu_destroy,
};
static const char *const conv_ops[] = {"Conv"};
static const QhLoweringPattern conv_pattern = {
    QH_STRUCT_HEADER(QhLoweringPattern),
    .id = "conv",
    .ops = conv_ops,
    .n_ops = 1,
    .kernel = &conv_kernel,
    .accept = conv_accept,
};
static const QhLoweringPattern *const patterns[] = {&conv_pattern};
static const QhLoweringOps lowering = {QH_STRUCT_HEADER(QhLoweringOps), .patterns = patterns, .n_patterns = 1};

static const QhOptionDecl claims_option = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "claims", .type = QH_OPTION_STRING, .default_value = "",
    .help = "as example_npu's"};
static const QhOptionDecl decline_option = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "decline_compile", .type = QH_OPTION_BOOL, .default_value = "false",
    .help = "partition compile answers QH_ERR_UNSUPPORTED"};
static const QhOptionDecl reshape_max_batch_option = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "reshape_max_batch", .type = QH_OPTION_INT, .default_value = "0",
    .min = 0, .max = 1 << 20, .help = "a partition's reshape refuses a larger batch (0: any)"};
static const QhOptionDecl bug_option = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "bug", .type = QH_OPTION_ENUM, .choices = "none|zero_point|reshape",
    .default_value = "none", .help = "zero_point: partition outputs one step off; reshape: reshape fails (for plugin-check)"};
static const QhOptionDecl *const options[] = {&claims_option, &decline_option, &reshape_max_batch_option,
                                              &bug_option};

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info, const QhOption *opts,
                                 size_t n_opts, void **out_instance) {
  (void)info;
  Instance *inst = calloc(1, sizeof *inst);
  const char *spec = n_opts > 0 ? opts[0].value : "";
  if (inst == NULL || (inst->npu.claims_spec = malloc(strlen(spec) + 1)) == NULL) {
    free(inst);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory");
  }
  strcpy(inst->npu.claims_spec, spec);
  inst->decline_compile = n_opts > 1 && (strcmp(opts[1].value, "true") == 0 || strcmp(opts[1].value, "1") == 0 ||
                                         strcmp(opts[1].value, "yes") == 0);
  inst->reshape_max_batch = n_opts > 2 ? strtoll(opts[2].value, NULL, 10) : 0;
  inst->bug_zero_point = n_opts > 3 && strcmp(opts[3].value, "zero_point") == 0;
  inst->bug_reshape = n_opts > 3 && strcmp(opts[3].value, "reshape") == 0;
  *out_instance = inst;
  return NULL;
}

static void instance_destroy(void *instance) {
  Instance *inst = instance;
  npu_claims_clear(&inst->npu);
  free(inst->npu.claims_spec);
  free(inst);
}

#ifdef NPU_QUANT
/* ---- npu_quant's BackendConfig ---- */
static const QhDTypeConstraint quint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8};
static const QhDTypeConstraint qint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT8};
static const QhDTypeConstraint qint32 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT32};
static const QhDTypeConfig weighted = {QH_STRUCT_HEADER(QhDTypeConfig), .name = "npu_weighted",
                                       .input = &quint8, .output = &quint8, .weight = &qint8,
                                       .bias = &qint32, .bias_derivation = QH_BIAS_INT32_INPUT_TIMES_WEIGHT};
static const QhDTypeConfig unweighted = {QH_STRUCT_HEADER(QhDTypeConfig), .name = "npu_unweighted",
                                         .input = &quint8, .output = &quint8};
static const QhDTypeConfig *const weighted_configs[] = {&weighted}, *const unweighted_configs[] = {&unweighted};
#define CONFIG(id, configs, ...)                                                                   \
  static const char *const id##_cfg_ops[] = {__VA_ARGS__};                                         \
  static const QhBackendPatternConfig id##_cfg = {                                                 \
      QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = id##_cfg_ops,                               \
      .n_ops = sizeof id##_cfg_ops / sizeof id##_cfg_ops[0],                                       \
      .observation_type = QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT, .dtype_configs = configs, \
      .n_dtype_configs = 1, .fuser = QH_FUSER_NONE}
CONFIG(conv_relu, weighted_configs, "Conv", "Relu");
CONFIG(conv, weighted_configs, "Conv");
CONFIG(add_relu, unweighted_configs, "Add", "Relu");
CONFIG(add, unweighted_configs, "Add");
static const QhBackendPatternConfig *const configs[] = {&conv_relu_cfg, &conv_cfg, &add_relu_cfg, &add_cfg};
static const QhQuantSpec activation = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                       .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
                                       .ch_axis = -1, .observer = "MinMaxObserver"};
static const QhQConfigEntry global = {QH_STRUCT_HEADER(QhQConfigEntry), .match = QH_QCONFIG_MATCH_GLOBAL,
                                      .activation = &activation};
static const QhQConfigEntry *const qconfig[] = {&global};
static const QhBackendConfig backend_config = {QH_STRUCT_HEADER(QhBackendConfig), .name = "npu_quant",
                                               .patterns = configs, .n_patterns = sizeof configs / sizeof configs[0],
                                               .default_qconfig = qconfig, .n_default_qconfig = 1};
#endif

/* Built three times: npu_patterns (NCHW boundary), with NPU_NHWC npu_nhwc, whose
 * partitions take channels-last host buffers (the host transposes at the boundary), and
 * with NPU_QUANT npu_quant (NCHW, with a BackendConfig). */
#if defined(NPU_NHWC)
#define PLUGIN_NAME "npu_nhwc"
#define IO_LAYOUT QH_LAYOUT_NHWC
#elif defined(NPU_QUANT)
#define PLUGIN_NAME "npu_quant"
#define IO_LAYOUT QH_LAYOUT_NCHW
#else
#define PLUGIN_NAME "npu_patterns"
#define IO_LAYOUT QH_LAYOUT_NCHW
#endif

static const QhPartitionOps partitions = {
    QH_STRUCT_HEADER(QhPartitionOps), .id = "npu_subgraph", .io_layout = IO_LAYOUT,
    .claim = npu_claim, .compile = compile_or_decline, .reshape = partition_reshape, .run = partition_run,
    .destroy = partition_destroy};

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = PLUGIN_NAME,
    .version = "1.0.0",
    .description = "test: example_npu's partitions plus a one-op Conv pattern",
    .options = options,
    .n_options = 4,
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .lowering = &lowering,
#ifdef NPU_QUANT
    .backend_config = &backend_config,
#endif
    .partitions = &partitions,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
