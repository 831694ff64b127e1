/* The ABI 1.2 passes test backend: the BackendConfig tutorial's patterns (conv-relu and
 * linear on quint8 activations, qint8 weights, and an int32 bias the host derives at
 * input scale x weight scale: QH_BIAS_INT32_INPUT_TIMES_WEIGHT; an Add whose inputs
 * share one scale: shared_inputs_mask) plus the passes a power-of-two NPU would
 * run, and a deploy step that writes back what quantize left it (and a plain Conv pattern,
 * so the digits example's third conv is quantized too).
 *   post_calibration  every per-tensor activation scale rounded up to a power of two
 *                     (qparams_set, with a reason), the Gemm weights whose magnitude is
 *                     below 1e-3 set to 0 (constant_set), the count of snapped scales
 *                     attached as metadata "snapped";
 *   post_convert      the number of Q/DQ nodes and the Gemm output's scale, read through
 *                     qparams_get on the QDQ graph, attached as "qdq_nodes" and
 *                     "gemm_out_scale";
 *   deploy            plugin_data.txt: those metadata values (none for a model it did
 *                     not quantize), then one line per node output the QDQ model
 *                     quantizes, "output NODE SCALE ZERO_POINT", from qparams_get (the
 *                     plugin parses no Q/DQ node).
 * The option `mode` plants the faults the host must refuse: bad_scale (a zero scale,
 * status returned), swallow (the same, status dropped), bad_weight (a NaN weight),
 * break_qdq (post_convert points a DequantizeLinear at a zero scale). Built for tests
 * only, from the SDK's headers (tests/quant/CMakeLists.txt). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <qhost/qhost-plugin.h>

enum { MODE_POW2, MODE_BAD_SCALE, MODE_SWALLOW, MODE_BAD_WEIGHT, MODE_BREAK_QDQ };
static const char *const mode_names[] = {"pow2", "bad_scale", "swallow", "bad_weight", "break_qdq"};

typedef struct {
  int mode;
} Instance;

/* ---- the BackendConfig (as tests/quant/plugins/my_backend.c) ---- */

static const QhDTypeConstraint quint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8};
static const QhDTypeConstraint qint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT8};
static const QhDTypeConstraint qint32 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT32};
/* ABI 1.2: the bias is int32 at input scale x weight scale, derived again after
 * post_calibration moved the input scales */
static const QhDTypeConfig weighted = {QH_STRUCT_HEADER(QhDTypeConfig), .name = "weighted_int8",
                                       .input = &quint8, .output = &quint8, .weight = &qint8,
                                       .bias = &qint32, .bias_derivation = QH_BIAS_INT32_INPUT_TIMES_WEIGHT};
static const QhDTypeConfig *const dtype_configs[] = {&weighted};

#define PATTERN(id, fused, ...)                                                                    \
  static const char *const id##_ops[] = {__VA_ARGS__};                                             \
  static const QhBackendPatternConfig id = {                                                       \
      QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = id##_ops,                                   \
      .n_ops = sizeof id##_ops / sizeof id##_ops[0],                                               \
      .observation_type = QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT,                           \
      .dtype_configs = dtype_configs, .n_dtype_configs = 1, .fuser = QH_FUSER_NONE,                \
      .fused_name = fused}

PATTERN(linear_config, "Linear", "Gemm");
PATTERN(conv_relu_config, "ConvReLU2d", "Conv", "Relu");
PATTERN(conv_config, "Conv2d", "Conv");
/* an NPU's Add: both inputs on one grid (ABI 1.2's shared_inputs_mask) */
static const QhDTypeConfig unweighted = {QH_STRUCT_HEADER(QhDTypeConfig), .name = "unweighted_uint8",
                                         .input = &quint8, .output = &quint8};
static const QhDTypeConfig *const unweighted_configs[] = {&unweighted};
static const char *const add_ops[] = {"Add"};
static const QhBackendPatternConfig add_config = {
    QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = add_ops, .n_ops = 1,
    .observation_type = QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT,
    .dtype_configs = unweighted_configs, .n_dtype_configs = 1, .fuser = QH_FUSER_NONE,
    .fused_name = "Add", .shared_inputs_mask = 0x3};
static const QhBackendPatternConfig *const patterns[] = {&linear_config, &conv_relu_config, &conv_config,
                                                          &add_config};
/* the global qconfig: quint8 MinMaxObserver activations, PyTorch's default weights */
static const QhQuantSpec activation = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                       .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
                                       .ch_axis = -1, .observer = "MinMaxObserver"};
static const QhQConfigEntry global = {QH_STRUCT_HEADER(QhQConfigEntry), .match = QH_QCONFIG_MATCH_GLOBAL,
                                      .activation = &activation};
static const QhQConfigEntry *const qconfig[] = {&global};
static const QhBackendConfig backend_config = {QH_STRUCT_HEADER(QhBackendConfig), .name = "passes",
                                               .patterns = patterns, .n_patterns = 4,
                                               .default_qconfig = qconfig, .n_default_qconfig = 1};

/* ---- helpers ---- */

static int is_op(const QhHostApi *h, const QhGraphView *g, uint32_t n, const char *op) {
  const char *t = h->node_is_live(g, n) ? h->node_op_type(g, n) : NULL;
  return t && strcmp(t, op) == 0;
}

static uint32_t first_node(const QhHostApi *h, const QhGraphView *g, const char *op) {
  for (uint32_t n = 0; n < h->graph_node_count(g); n++)
    if (is_op(h, g, n, op))
      return n;
  return QH_INVALID_ID;
}

/* The qparams of an edge: 1 with *q filled (arrays borrowed), 0 if it is not quantized. */
static int edge_qparams(const QhHostApi *h, const QhGraphView *g, const QhEdgeRef *e, QhQParams *q) {
  *q = (QhQParams){QH_STRUCT_HEADER(QhQParams)};
  QhStatus *st = h->qparams_get(g, e, q);
  if (st) {
    h->status_free(st);
    return 0;
  }
  return 1;
}

static int output_qparams(const QhHostApi *h, const QhGraphView *g, uint32_t n, QhQParams *q) {
  QhEdgeRef e = {n, 0, QH_EDGE_OUTPUT, 0};
  return edge_qparams(h, g, &e, q);
}

/* ---- post_calibration ---- */

/* Activation edges: every node's output 0, and every input slot not fed by a constant. */
static QhStatus *snap_scales(const Instance *inst, const QhHostApi *h, QhGraphView *g, int *snapped) {
  for (uint32_t n = 0; n < h->graph_node_count(g); n++)
    for (uint32_t slot = 0; h->node_is_live(g, n) && slot <= h->node_input_count(g, n); slot++) {
      QhEdgeRef e = {n, slot == 0 ? 0 : slot - 1, slot == 0 ? QH_EDGE_OUTPUT : QH_EDGE_INPUT, 0};
      uint32_t v = slot == 0 ? QH_INVALID_ID : h->node_input(g, n, slot - 1);
      QhQParams q;
      if ((slot > 0 && (v == QH_INVALID_ID || (h->value_flags(g, v) & QH_VALUE_CONSTANT))) ||
          !edge_qparams(h, g, &e, &q) || q.count != 1)
        continue;
      float scale = exp2f(ceilf(log2f(q.scale[0])));
      int32_t zp = q.zero_point[0];
      if (inst->mode == MODE_BAD_SCALE || inst->mode == MODE_SWALLOW)
        scale = 0.0f;
      if (scale == q.scale[0])
        continue;
      QhQParams out = q;
      out.scale = &scale;
      out.zero_point = &zp;
      out.capacity = 1;
      QhStatus *st = h->qparams_set(g, &e, &out, "scale rounded up to a power of two");
      if (st && inst->mode == MODE_SWALLOW) {
        h->status_free(st); /* the host must still fail the job */
        return NULL;
      }
      if (st)
        return st;
      (*snapped)++;
    }
  return NULL;
}

static QhStatus *prune_gemm_weights(const Instance *inst, const QhHostApi *h, QhGraphView *g) {
  uint32_t gemm = first_node(h, g, "Gemm");
  uint32_t w = gemm == QH_INVALID_ID ? QH_INVALID_ID : h->node_input(g, gemm, 1);
  const void *data = NULL;
  size_t nbytes = 0;
  if (w == QH_INVALID_ID || h->value_dtype(g, w) != QH_DTYPE_FLOAT)
    return NULL;
  QhStatus *st = h->value_data(g, w, &data, &nbytes);
  if (st)
    return st;
  float *copy = malloc(nbytes ? nbytes : 1);
  if (!copy)
    return h->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  memcpy(copy, data, nbytes);
  for (size_t i = 0; i < nbytes / sizeof(float); i++)
    if (fabsf(copy[i]) < 1e-3f)
      copy[i] = 0.0f;
  if (inst->mode == MODE_BAD_WEIGHT && nbytes >= sizeof(float))
    copy[0] = NAN;
  st = h->constant_set(g, w, copy, nbytes, "weights below 1e-3 in magnitude pruned");
  free(copy);
  return st;
}

static QhStatus *post_calibration(void *instance, const QhHostApi *h, QhGraphView *g) {
  const Instance *inst = instance;
  int snapped = 0;
  QhStatus *st = snap_scales(inst, h, g, &snapped);
  if (!st)
    st = prune_gemm_weights(inst, h, g);
  if (st)
    return st;
  char text[32];
  snprintf(text, sizeof text, "%d", snapped);
  return h->metadata_set(g, "snapped", text);
}

/* ---- post_convert ---- */

static QhStatus *post_convert(void *instance, const QhHostApi *h, QhGraphView *g) {
  const Instance *inst = instance;
  int qdq = 0;
  for (uint32_t n = 0; n < h->graph_node_count(g); n++)
    qdq += is_op(h, g, n, "QuantizeLinear") || is_op(h, g, n, "DequantizeLinear");
  if (inst->mode == MODE_BREAK_QDQ) {
    uint32_t dq = first_node(h, g, "DequantizeLinear"), zero = QH_INVALID_ID;
    float z = 0.0f;
    QhStatus *st = h->graph_add_constant(g, NULL, QH_DTYPE_FLOAT, 0, NULL, &z, sizeof z, &zero);
    return st ? st : h->node_set_input(g, dq, 1, zero);
  }
  char text[64];
  snprintf(text, sizeof text, "%d", qdq);
  QhStatus *st = h->metadata_set(g, "qdq_nodes", text);
  QhQParams q;
  uint32_t gemm = first_node(h, g, "Gemm");
  if (!st && gemm != QH_INVALID_ID && output_qparams(h, g, gemm, &q)) {
    snprintf(text, sizeof text, "%.9g", (double)q.scale[0]);
    st = h->metadata_set(g, "gemm_out_scale", text);
  }
  return st;
}

/* ---- deploy ---- */

static QhStatus *deploy(void *instance, const QhHostApi *h, const QhGraphView *g, QhArtifact *artifact) {
  (void)instance;
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  if (!text)
    return h->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  static const char *const keys[] = {"snapped", "qdq_nodes", "gemm_out_scale"};
  for (int k = 0; k < 3; k++) {
    const char *v = NULL;
    QhStatus *st = h->metadata_get(g, keys[k], &v);
    if (st && h->status_code(st) == QH_ERR_NOT_FOUND) {
      /* a model this plugin did not quantize (plugin-check's built-in graphs): no data */
      h->status_free(st);
      continue;
    }
    if (st) {
      free(text);
      return st;
    }
    len += (size_t)snprintf(text + len, cap - len, "%s=%s\n", keys[k], v);
  }
  for (uint32_t n = 0; n < h->graph_node_count(g) && len + 512 < cap; n++) {
    QhQParams q;
    if (!h->node_is_live(g, n) || is_op(h, g, n, "QuantizeLinear") || is_op(h, g, n, "DequantizeLinear") ||
        !output_qparams(h, g, n, &q))
      continue;
    len += (size_t)snprintf(text + len, cap - len, "output %s %.9g %d\n", h->node_name(g, n),
                            (double)q.scale[0], (int)q.zero_point[0]);
  }
  QhStatus *st = h->artifact_write(artifact, "plugin_data.txt", text, len);
  free(text);
  return st;
}

/* ---- the descriptor ---- */

static const QhPassOps passes = {QH_STRUCT_HEADER(QhPassOps), .post_calibration = post_calibration,
                                 .post_convert = post_convert};
static const QhDeployOps deploy_ops = {QH_STRUCT_HEADER(QhDeployOps),
                                       .description = "plugin_data.txt: what quantize attached, and the qparams",
                                       .deploy = deploy};
static const QhOptionDecl opt_mode = {QH_STRUCT_HEADER(QhOptionDecl), .name = "mode", .type = QH_OPTION_ENUM,
                                      .default_value = "pow2", .help = "the passes' behaviour, or a planted fault",
                                      .choices = "pow2|bad_scale|swallow|bad_weight|break_qdq"};
static const QhOptionDecl *const options[] = {&opt_mode};

static QhStatus *instance_create(const QhHostApi *h, const QhInstanceInfo *info, const QhOption *opts,
                                 size_t n_opts, void **out) {
  (void)info;
  Instance *inst = calloc(1, sizeof *inst);
  if (!inst)
    return h->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < n_opts; i++)
    for (int m = 0; m < 5; m++)
      if (strcmp(opts[i].key, "mode") == 0 && strcmp(opts[i].value, mode_names[m]) == 0)
        inst->mode = m;
  *out = inst;
  return NULL;
}

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc), .name = "passes", .version = "1.0.0",
    .description = "test backend: post_calibration, post_convert and deploy over plugin data",
    .options = options, .n_options = 1, .instance_create = instance_create, .instance_destroy = free,
    .backend_config = &backend_config, .deploy = &deploy_ops, .passes = &passes};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
