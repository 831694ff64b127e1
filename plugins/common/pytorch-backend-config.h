/* PyTorch 1.13's native BackendConfig building blocks (backend_config/
 * _common_operator_config_utils.py) written over ONNX ops, shared by the fbgemm and
 * qnnpack plugins, which compile pytorch-backend-config.c in. The pattern list is one
 * X-macro, QH_PT_PATTERNS, so both backends carry the same patterns and differ only in
 * the dtype configs of each op family and in their default qconfig mapping, exactly as
 * fbgemm.py and qnnpack.py differ. docs/backend-config.md maps each row to PyTorch's
 * patterns and lists what is left out.
 *
 * A backend's .c defines one `dcs_<family>` array of dtype configs per family (conv,
 * linear, binary, default, fixed_0to1, fixed_neg1to1, share), then writes
 *   QH_PT_PATTERNS(QH_PT_DEFINE_PATTERN)
 *   static const QhBackendPatternConfig *const patterns[] = {QH_PT_PATTERNS(QH_PT_REF_PATTERN)};
 * Plugin code: includes only the SDK and this directory. */
#ifndef QH_PLUGINS_PYTORCH_BACKEND_CONFIG_H
#define QH_PLUGINS_PYTORCH_BACKEND_CONFIG_H

#include <qhost/qhost-plugin.h>

/* ---- DTypeWithConstraints ---- */
extern const QhDTypeConstraint qh_pt_quint8;
extern const QhDTypeConstraint qh_pt_qint8;
extern const QhDTypeConstraint qh_pt_float;
extern const QhDTypeConstraint qh_pt_float16;
/* qnnpack.py: qint8 activations with scale >= 2^-12; qint8 weights in [-127, 127]. */
extern const QhDTypeConstraint qh_pt_qint8_scale_min_2_neg_12;
extern const QhDTypeConstraint qh_pt_qint8_neg_127_to_127_scale_min_2_neg_12;
/* Upstream's _FIXED_QPARAM_OP_0TO1_CONSTRAINTS / _NEG1TO1_CONSTRAINTS: quint8 [0, 255]
 * with scale 1/256, zero point 0 (sigmoid, hardsigmoid, softmax) or 2/256, 128 (tanh). */
extern const QhDTypeConstraint qh_pt_quint8_fixed_0to1;
extern const QhDTypeConstraint qh_pt_quint8_fixed_neg1to1;

/* ---- observers of the default qconfig mappings (qconfig.py, observer.py) ---- */
extern const QhQuantSpec qh_pt_default_weight_observer;             /* MinMax qint8 per-tensor symmetric */
extern const QhQuantSpec qh_pt_default_per_channel_weight_observer; /* PerChannelMinMax qint8 symmetric */
extern const QhQuantSpec qh_pt_fixed_qparams_0to1_observer;         /* FixedQParams 1/256, 0 */
extern const QhQuantSpec qh_pt_fixed_qparams_neg1to1_observer;      /* FixedQParams 2/256, 128 */
extern const QhQuantSpec qh_pt_reuse_input_observer;                /* ReuseInputObserver */

/* ---- input roles of ops with parameter inputs (shape, axes, min/max, BN stats) ---- */
extern const int32_t qh_pt_roles_p1[2];
extern const int32_t qh_pt_roles_p2[3];
extern const int32_t qh_pt_roles_p3[4];
extern const int32_t qh_pt_roles_p4[5];
#define qh_pt_roles_none NULL
#define QH_PT_N_ROLES_none 0
#define QH_PT_N_ROLES_p1 2
#define QH_PT_N_ROLES_p2 3
#define QH_PT_N_ROLES_p3 4
#define QH_PT_N_ROLES_p4 5

/* X(id, family, observation, by_tensor_args, roles, fuser, fused_name, ops...), ops in
 * forward order. by_tensor_args YES: PyTorch's _num_tensor_args_to_observation_type of
 * binary ops (0 tensor args: own output observer, 1: share with the input, 2: own). */
#define QH_PT_PATTERNS(X)                                                                       \
  /* _get_conv_configs */                                                                      \
  X(conv, conv, DIFF, NO, none, QH_FUSER_NONE, "Conv2d", "Conv")                                \
  X(conv_relu, conv, DIFF, NO, none, QH_FUSER_NONE, "ConvReLU2d", "Conv", "Relu")               \
  X(conv_bn, conv, DIFF, NO, none, QH_FUSER_FOLD_BATCHNORM, "ConvBn2d", "Conv",                 \
    "BatchNormalization")                                                                      \
  X(conv_bn_relu, conv, DIFF, NO, none, QH_FUSER_FOLD_BATCHNORM, "ConvBnReLU2d", "Conv",        \
    "BatchNormalization", "Relu")                                                              \
  X(conv_transpose, conv, DIFF, NO, none, QH_FUSER_NONE, "ConvTranspose2d", "ConvTranspose")    \
  X(conv_transpose_bn, conv, DIFF, NO, none, QH_FUSER_FOLD_BATCHNORM, "ConvTranspose2d",        \
    "ConvTranspose", "BatchNormalization")                                                     \
  /* _get_linear_configs: nn.Linear / F.linear export as Gemm, or MatMul + Add for N-d */      \
  X(gemm, linear, DIFF, NO, none, QH_FUSER_NONE, "Linear", "Gemm")                              \
  X(gemm_relu, linear, DIFF, NO, none, QH_FUSER_NONE, "LinearReLU", "Gemm", "Relu")             \
  X(gemm_bn, linear, DIFF, NO, none, QH_FUSER_FOLD_BATCHNORM, "LinearBn1d", "Gemm",             \
    "BatchNormalization")                                                                      \
  X(matmul_add, linear, DIFF, NO, none, QH_FUSER_NONE, "Linear", "MatMul", "Add")               \
  X(matmul_add_relu, linear, DIFF, NO, none, QH_FUSER_NONE, "LinearReLU", "MatMul", "Add",      \
    "Relu")                                                                                    \
  /* _get_binary_op_configs */                                                                 \
  X(add, binary, DIFF, YES, none, QH_FUSER_NONE, "add", "Add")                                  \
  X(add_relu, binary, DIFF, YES, none, QH_FUSER_NONE, "add_relu", "Add", "Relu")                \
  X(mul, binary, DIFF, YES, none, QH_FUSER_NONE, "mul", "Mul")                                  \
  X(mul_relu, binary, DIFF, YES, none, QH_FUSER_NONE, "mul_relu", "Mul", "Relu")                \
  X(matmul, binary, DIFF, NO, none, QH_FUSER_NONE, "matmul", "MatMul")                          \
  /* _get_cat_config */                                                                        \
  X(concat, default, SHARE, NO, none, QH_FUSER_NONE, "cat", "Concat")                           \
  /* _get_default_op_configs (ops with a qhost kernel) */                                      \
  X(leaky_relu, default, DIFF, NO, none, QH_FUSER_NONE, "LeakyReLU", "LeakyRelu")               \
  X(hardswish, default, DIFF, NO, none, QH_FUSER_NONE, "Hardswish", "HardSwish")                \
  X(dropout, default, DIFF, NO, p2, QH_FUSER_NONE, "Dropout", "Dropout")                        \
  /* _get_fixed_qparams_op_configs */                                                          \
  X(hardsigmoid, fixed_0to1, DIFF, NO, none, QH_FUSER_NONE, "Hardsigmoid", "HardSigmoid")       \
  X(sigmoid, fixed_0to1, DIFF, NO, none, QH_FUSER_NONE, "Sigmoid", "Sigmoid")                   \
  X(softmax, fixed_0to1, DIFF, NO, none, QH_FUSER_NONE, "Softmax", "Softmax")                   \
  X(tanh, fixed_neg1to1, DIFF, NO, none, QH_FUSER_NONE, "Tanh", "Tanh")                         \
  /* _get_share_qparams_op_configs */                                                          \
  X(average_pool, share, SHARE, NO, none, QH_FUSER_NONE, "AvgPool2d", "AveragePool")            \
  X(global_average_pool, share, SHARE, NO, none, QH_FUSER_NONE, "AdaptiveAvgPool2d",            \
    "GlobalAveragePool")                                                                       \
  X(clip, share, SHARE, NO, p2, QH_FUSER_NONE, "Hardtanh", "Clip")                              \
  X(identity, share, SHARE, NO, none, QH_FUSER_NONE, "Identity", "Identity")                    \
  X(max_pool, share, SHARE, NO, none, QH_FUSER_NONE, "MaxPool2d", "MaxPool")                    \
  X(relu, share, SHARE, NO, none, QH_FUSER_NONE, "ReLU", "Relu")                                \
  X(resize, share, SHARE, NO, p3, QH_FUSER_NONE, "interpolate", "Resize")                       \
  X(flatten, share, SHARE, NO, none, QH_FUSER_NONE, "flatten", "Flatten")                       \
  X(reduce_mean, share, SHARE, NO, p1, QH_FUSER_NONE, "mean", "ReduceMean")                     \
  X(transpose, share, SHARE, NO, none, QH_FUSER_NONE, "permute", "Transpose")                   \
  X(squeeze, share, SHARE, NO, p1, QH_FUSER_NONE, "squeeze", "Squeeze")                         \
  X(unsqueeze, share, SHARE, NO, p1, QH_FUSER_NONE, "unsqueeze", "Unsqueeze")                   \
  X(reshape, share, SHARE, NO, p1, QH_FUSER_NONE, "reshape", "Reshape")                         \
  /* "shape" / "size": upstream's _get_tensor_info_op_configs (not observed) */                \
  X(shape, share, NONE, NO, none, QH_FUSER_NONE, "shape", "Shape")                              \
  /* _get_bn_configs */                                                                        \
  X(batch_norm, default, DIFF, NO, p4, QH_FUSER_NONE, "BatchNorm2d", "BatchNormalization")      \
  X(batch_norm_relu, default, DIFF, NO, p4, QH_FUSER_NONE, "BNReLU2d", "BatchNormalization",    \
    "Relu")

#define QH_PT_OBS_DIFF QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT
#define QH_PT_OBS_SHARE QH_OBS_OUTPUT_SHARE_OBSERVER_WITH_INPUT
#define QH_PT_OBS_NONE QH_OBS_INPUT_OUTPUT_NOT_OBSERVED
#define QH_PT_BY_ARGS_NO .flags = 0
#define QH_PT_BY_ARGS_YES                                                                       \
  .flags = QH_PATTERN_OBS_BY_TENSOR_ARGS,                                                       \
  .observation_type_by_tensor_args = {QH_PT_OBS_DIFF, QH_PT_OBS_SHARE, QH_PT_OBS_DIFF}
#define QH_PT_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define QH_PT_DEFINE_PATTERN(id, family, obs, by_args, roles, fuser_, fused, ...)               \
  static const char *const qh_pt_ops_##id[] = {__VA_ARGS__};                                    \
  static const QhBackendPatternConfig qh_pt_pattern_##id = {                                    \
      QH_STRUCT_HEADER(QhBackendPatternConfig),                                                 \
      .ops = qh_pt_ops_##id,                                                                    \
      .n_ops = QH_PT_COUNT(qh_pt_ops_##id),                                                     \
      .extra_inputs_mask = 0,                                                                   \
      .root_index = 0,                                                                          \
      .input_roles = qh_pt_roles_##roles,                                                       \
      .n_input_roles = QH_PT_N_ROLES_##roles,                                                   \
      .observation_type = QH_PT_OBS_##obs,                                                      \
      QH_PT_BY_ARGS_##by_args,                                                                  \
      .dtype_configs = dcs_##family,                                                            \
      .n_dtype_configs = QH_PT_COUNT(dcs_##family),                                             \
      .fuser = fuser_,                                                                          \
      .fused_name = fused,                                                                      \
  };
#define QH_PT_REF_PATTERN(id, ...) &qh_pt_pattern_##id,

/* ---- writing a backend's tables ---- */
/* One static dtype config named after its identifier. */
#define QH_PT_DTYPE_CONFIG(id, in, out, w, b, fl)                                              \
  static const QhDTypeConfig id = {QH_STRUCT_HEADER(QhDTypeConfig), .name = #id, .flags = (fl), \
                                   .input = (in), .output = (out), .weight = (w), .bias = (b)}
/* One static default-qconfig entry; the activation and weight observers come last, as
 * two arguments or one macro that expands to both (a backend's global qconfig). */
#define QH_PT_QCONFIG_ENTRY(id, match_, key_, ...)                                             \
  static const QhQConfigEntry id = {QH_STRUCT_HEADER(QhQConfigEntry), .match = (match_),       \
                                    .flags = 0, .key = (key_), QH_PT_OBSERVERS_(__VA_ARGS__)}
#define QH_PT_OBSERVERS_(act, w) .activation = (act), .weight = (w)
/* The entries of 1.13's default mappings that do not use the global qconfig and are the
 * same in every backend: Reshape reuses its input's observer (q_reshape), and the
 * fixed-qparams ops (q_hardsigmoid, q_sigmoid, q_softmax, q_tanh). */
#define QH_PT_COMMON_QCONFIG_ENTRIES                                                           \
  QH_PT_QCONFIG_ENTRY(q_reshape, QH_QCONFIG_MATCH_OBJECT_TYPE, "Reshape", &qh_pt_reuse_input_observer, \
                      NULL);                                                                   \
  QH_PT_QCONFIG_ENTRY(q_hardsigmoid, QH_QCONFIG_MATCH_OBJECT_TYPE, "HardSigmoid",              \
                      &qh_pt_fixed_qparams_0to1_observer, &qh_pt_default_weight_observer);    \
  QH_PT_QCONFIG_ENTRY(q_sigmoid, QH_QCONFIG_MATCH_OBJECT_TYPE, "Sigmoid",                      \
                      &qh_pt_fixed_qparams_0to1_observer, &qh_pt_default_weight_observer);    \
  QH_PT_QCONFIG_ENTRY(q_softmax, QH_QCONFIG_MATCH_OBJECT_TYPE, "Softmax",                      \
                      &qh_pt_fixed_qparams_0to1_observer, &qh_pt_default_weight_observer);    \
  QH_PT_QCONFIG_ENTRY(q_tanh, QH_QCONFIG_MATCH_OBJECT_TYPE, "Tanh",                            \
                      &qh_pt_fixed_qparams_neg1to1_observer, &qh_pt_default_weight_observer)

/* The two backends (plugins/fbgemm/backend-config.c, plugins/qnnpack/backend-config.c). */
extern const QhBackendConfig qh_pt_fbgemm_backend_config;
extern const QhBackendConfig qh_pt_qnnpack_backend_config;

#endif
