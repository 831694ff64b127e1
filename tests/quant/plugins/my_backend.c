/* The backend of PyTorch's BackendConfig tutorial (prototype/backend_config_tutorial):
 * two quantized ops, linear and conv-relu, whose activations must be quint8 within
 * [0, 255] with a minimum scale of 2^-12, weights qint8, bias float. nn.Linear exports
 * to ONNX as Gemm, or as MatMul followed by Add for inputs of rank > 2, so both forms
 * are declared; conv-relu is one fused unit. No BatchNorm fusion is declared, so a
 * conv-bn-relu stays float, as in the tutorial's second experiment. Built for tests
 * only (tests/quant/CMakeLists.txt). */
#include <qhost/qhost-plugin.h>

static const QhDTypeConstraint quint8_with_constraints = {
    QH_STRUCT_HEADER(QhDTypeConstraint),
    .dtype = QH_DTYPE_UINT8,
    .flags = QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND | QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND |
             QH_CONSTRAINT_SCALE_MIN_LOWER_BOUND,
    .quant_min_lower_bound = 0,
    .quant_max_upper_bound = 255,
    .scale_min_lower_bound = 0x1p-12f,
};
static const QhDTypeConstraint qint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT8};
static const QhDTypeConstraint float32 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_FLOAT};

static const QhDTypeConfig weighted_int8_dtype_config = {
    QH_STRUCT_HEADER(QhDTypeConfig),
    .name = "weighted_int8_dtype_config",
    .input = &quint8_with_constraints,
    .output = &quint8_with_constraints,
    .weight = &qint8,
    .bias = &float32,
};
static const QhDTypeConfig *const dtype_configs[] = {&weighted_int8_dtype_config};

#define PATTERN(id, fused, ...)                                                                \
  static const char *const id##_ops[] = {__VA_ARGS__};                                         \
  static const QhBackendPatternConfig id = {                                                   \
      QH_STRUCT_HEADER(QhBackendPatternConfig),                                                \
      .ops = id##_ops,                                                                         \
      .n_ops = sizeof id##_ops / sizeof id##_ops[0],                                           \
      .observation_type = QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT,                       \
      .dtype_configs = dtype_configs,                                                          \
      .n_dtype_configs = 1,                                                                    \
      .fuser = QH_FUSER_NONE,                                                                  \
      .fused_name = fused,                                                                     \
  }

PATTERN(linear_config, "Linear", "Gemm");
PATTERN(linear_nd_config, "Linear", "MatMul", "Add");
PATTERN(conv_relu_config, "ConvReLU2d", "Conv", "Relu");

static const QhBackendPatternConfig *const patterns[] = {&linear_config, &linear_nd_config,
                                                          &conv_relu_config};

static const QhBackendConfig backend_config = {
    QH_STRUCT_HEADER(QhBackendConfig),
    .name = "my_backend",
    .patterns = patterns,
    .n_patterns = sizeof patterns / sizeof patterns[0],
};

static const QhPluginDesc my_backend_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "my_backend",
    .version = "1.0.0",
    .description = "PyTorch's BackendConfig tutorial backend: quantized linear and conv-relu",
    .backend_config = &backend_config,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &my_backend_desc;
  return NULL;
}
