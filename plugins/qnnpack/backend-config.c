/* qnnpack's BackendConfig: PyTorch 1.13's get_qnnpack_backend_config() over ONNX ops
 * (backend_config/qnnpack.py: every family accepts the qint8-symmetric config with
 * scale >= 2^-12 and weights in [-127, 127] first, then plain quint8) and
 * get_default_qconfig_mapping("qnnpack") (HistogramObserver quint8 [0, 255], per-tensor
 * symmetric weights everywhere). */
#include "../common/pytorch-backend-config.h"

QH_PT_DTYPE_CONFIG(weighted_op_qint8_symmetric, &qh_pt_qint8_scale_min_2_neg_12,
                   &qh_pt_qint8_scale_min_2_neg_12, &qh_pt_qint8_neg_127_to_127_scale_min_2_neg_12,
                   &qh_pt_float, 0);
QH_PT_DTYPE_CONFIG(default_op_qint8_symmetric, &qh_pt_qint8_scale_min_2_neg_12,
                   &qh_pt_qint8_scale_min_2_neg_12, NULL, NULL, 0);
QH_PT_DTYPE_CONFIG(weighted_op_quint8, &qh_pt_quint8, &qh_pt_quint8, &qh_pt_qint8, &qh_pt_float, 0);
QH_PT_DTYPE_CONFIG(default_op_quint8, &qh_pt_quint8, &qh_pt_quint8, NULL, NULL, 0);
QH_PT_DTYPE_CONFIG(default_dynamic_int8, &qh_pt_quint8, &qh_pt_float, &qh_pt_qint8, &qh_pt_float,
                   QH_DTYPE_CONFIG_IS_DYNAMIC);
QH_PT_DTYPE_CONFIG(default_dynamic_float16,
                   &qh_pt_float16, &qh_pt_float, &qh_pt_float16, &qh_pt_float,
                   QH_DTYPE_CONFIG_IS_DYNAMIC);
/* Upstream's _add_fixed_qparams_to_dtype_configs changes only the quint8 config. */
QH_PT_DTYPE_CONFIG(weighted_op_quint8_fixed_0to1,
                   &qh_pt_quint8_fixed_0to1, &qh_pt_quint8_fixed_0to1,
                   &qh_pt_qint8, &qh_pt_float, 0);
QH_PT_DTYPE_CONFIG(weighted_op_quint8_fixed_neg1to1, &qh_pt_quint8_fixed_neg1to1,
                   &qh_pt_quint8_fixed_neg1to1, &qh_pt_qint8, &qh_pt_float, 0);

static const QhDTypeConfig *const dcs_conv[] = {&weighted_op_qint8_symmetric, &weighted_op_quint8};
static const QhDTypeConfig *const dcs_linear[] = {&weighted_op_qint8_symmetric, &weighted_op_quint8,
                                                   &default_dynamic_int8, &default_dynamic_float16};
static const QhDTypeConfig *const dcs_binary[] = {&weighted_op_qint8_symmetric, &weighted_op_quint8};
static const QhDTypeConfig *const dcs_default[] = {&default_op_qint8_symmetric, &default_op_quint8};
static const QhDTypeConfig *const dcs_fixed_0to1[] = {&weighted_op_qint8_symmetric,
                                                       &weighted_op_quint8_fixed_0to1};
static const QhDTypeConfig *const dcs_fixed_neg1to1[] = {&weighted_op_qint8_symmetric,
                                                          &weighted_op_quint8_fixed_neg1to1};
static const QhDTypeConfig *const dcs_share[] = {&default_op_qint8_symmetric, &default_op_quint8};

QH_PT_PATTERNS(QH_PT_DEFINE_PATTERN)
static const QhBackendPatternConfig *const patterns[] = {QH_PT_PATTERNS(QH_PT_REF_PATTERN)};

/* get_default_qconfig("qnnpack"): HistogramObserver(reduce_range=False), quint8 [0, 255]. */
static const QhQuantSpec histogram = {
    QH_STRUCT_HEADER(QhQuantSpec),
    .kind = QH_SPEC_QUANTIZE,
    .dtype = QH_DTYPE_UINT8,
    .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
    .flags = 0,
    .ch_axis = -1,
    .observer = "HistogramObserver",
};

#define GLOBAL_QCONFIG &histogram, &qh_pt_default_weight_observer
#define TYPE QH_QCONFIG_MATCH_OBJECT_TYPE

/* Entries that use the global qconfig point at the same objects, as in PyTorch. */
QH_PT_QCONFIG_ENTRY(q_global, QH_QCONFIG_MATCH_GLOBAL, NULL, GLOBAL_QCONFIG);
QH_PT_QCONFIG_ENTRY(q_conv, TYPE, "Conv", GLOBAL_QCONFIG);
QH_PT_QCONFIG_ENTRY(q_conv_transpose, TYPE, "ConvTranspose", GLOBAL_QCONFIG);
QH_PT_QCONFIG_ENTRY(q_gemm, TYPE, "Gemm", GLOBAL_QCONFIG);
QH_PT_QCONFIG_ENTRY(q_relu, TYPE, "Relu", GLOBAL_QCONFIG);
QH_PT_QCONFIG_ENTRY(q_batch_norm, TYPE, "BatchNormalization", GLOBAL_QCONFIG);
QH_PT_COMMON_QCONFIG_ENTRIES;

static const QhQConfigEntry *const default_qconfig[] = {
    &q_global, &q_reshape, &q_conv, &q_conv_transpose, &q_gemm, &q_relu,
    &q_batch_norm, &q_hardsigmoid, &q_sigmoid, &q_softmax, &q_tanh,
};

const QhBackendConfig qh_pt_qnnpack_backend_config = {
    QH_STRUCT_HEADER(QhBackendConfig),
    .name = "qnnpack",
    .flags = 0,
    .patterns = patterns,
    .n_patterns = QH_PT_COUNT(patterns),
    .default_qconfig = default_qconfig,
    .n_default_qconfig = QH_PT_COUNT(default_qconfig),
};
