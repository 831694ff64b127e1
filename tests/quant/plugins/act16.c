/* A test backend for 16-bit activations and 4-bit weights: the "16x8" scheme of TFLite
 * and ONNX Runtime (int16 activations, int8 weights, float bias) next to the usual 8-bit
 * one (quint8 activations) and quint8 activations with int4 or uint4 weights, so that one
 * plugin quantizes a model every way and the qconfig alone picks the scheme. Its patterns are those of PyTorch's fbgemm table that the digits
 * example needs: Conv, Conv-Relu, Gemm, Add, Add-Relu, and MaxPool, Relu and Flatten
 * sharing their input's observer. It has no kernels: the QDQ file runs on the host's
 * reference path and in ONNX Runtime. Built for tests only (tests/quant/CMakeLists.txt;
 * tests/quant/test_int16.py drives it). */
#include <qhost/qhost-plugin.h>

static const QhDTypeConstraint qint16 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT16};
static const QhDTypeConstraint quint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8};
static const QhDTypeConstraint qint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT8};
static const QhDTypeConstraint qint4 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT4};
static const QhDTypeConstraint quint4 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT4};
static const QhDTypeConstraint float32 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_FLOAT};

static const QhDTypeConfig weighted_16x8 = {
    QH_STRUCT_HEADER(QhDTypeConfig), .name = "weighted_int16_act_int8_weight",
    .input = &qint16, .output = &qint16, .weight = &qint8, .bias = &float32,
};
static const QhDTypeConfig weighted_8x8 = {
    QH_STRUCT_HEADER(QhDTypeConfig), .name = "weighted_quint8_act_int8_weight",
    .input = &quint8, .output = &quint8, .weight = &qint8, .bias = &float32,
};
static const QhDTypeConfig weighted_8x4 = {
    QH_STRUCT_HEADER(QhDTypeConfig), .name = "weighted_quint8_act_int4_weight",
    .input = &quint8, .output = &quint8, .weight = &qint4, .bias = &float32,
};
static const QhDTypeConfig weighted_8xu4 = {
    QH_STRUCT_HEADER(QhDTypeConfig), .name = "weighted_quint8_act_uint4_weight",
    .input = &quint8, .output = &quint8, .weight = &quint4, .bias = &float32,
};
static const QhDTypeConfig plain_16 = {
    QH_STRUCT_HEADER(QhDTypeConfig), .name = "int16_act", .input = &qint16, .output = &qint16,
};
static const QhDTypeConfig plain_8 = {
    QH_STRUCT_HEADER(QhDTypeConfig), .name = "quint8_act", .input = &quint8, .output = &quint8,
};
static const QhDTypeConfig *const weighted[] = {&weighted_16x8, &weighted_8x8, &weighted_8x4, &weighted_8xu4};
static const QhDTypeConfig *const plain[] = {&plain_16, &plain_8};

#define PATTERN(id, obs, configs, fused, ...)                                                  \
  static const char *const id##_ops[] = {__VA_ARGS__};                                         \
  static const QhBackendPatternConfig id = {                                                   \
      QH_STRUCT_HEADER(QhBackendPatternConfig),                                                \
      .ops = id##_ops,                                                                         \
      .n_ops = sizeof id##_ops / sizeof id##_ops[0],                                           \
      .observation_type = obs,                                                                 \
      .dtype_configs = configs,                                                                \
      .n_dtype_configs = sizeof configs / sizeof configs[0],                                   \
      .fuser = QH_FUSER_NONE,                                                                  \
      .fused_name = fused,                                                                     \
  }
#define DIFF QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
#define SHARE QH_OBS_OUTPUT_SHARE_OBSERVER_WITH_INPUT

PATTERN(conv, DIFF, weighted, "Conv2d", "Conv");
PATTERN(conv_relu, DIFF, weighted, "ConvReLU2d", "Conv", "Relu");
PATTERN(gemm, DIFF, weighted, "Linear", "Gemm");
PATTERN(add, DIFF, plain, "add", "Add");
PATTERN(add_relu, DIFF, plain, "add_relu", "Add", "Relu");
PATTERN(max_pool, SHARE, plain, "MaxPool2d", "MaxPool");
PATTERN(relu, SHARE, plain, "ReLU", "Relu");
PATTERN(flatten, SHARE, plain, "flatten", "Flatten");

static const QhBackendPatternConfig *const patterns[] = {&conv_relu, &conv,     &gemm,  &add_relu,
                                                          &add,       &max_pool, &relu, &flatten};

static const QhBackendConfig backend_config = {
    QH_STRUCT_HEADER(QhBackendConfig),
    .name = "act16",
    .patterns = patterns,
    .n_patterns = sizeof patterns / sizeof patterns[0],
};

static const QhPluginDesc act16_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "act16",
    .version = "1.0.0",
    .description = "test backend: int16 activations with int8 weights (16x8); quint8 activations with int8, "
                   "int4 or uint4 weights",
    .backend_config = &backend_config,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &act16_desc;
  return NULL;
}
