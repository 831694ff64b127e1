/* x86's BackendConfig: PyTorch's backend_config/x86.py over ONNX ops (the shared
 * pattern table of ../common/pytorch-backend-config.h with x86.py's dtype configs:
 * quint8 activations, qint8 weights, float bias, no constraints; in 1.13 these equal
 * fbgemm.py's, "X86 aligns with FBGEMM for now") and, as default qconfig mapping,
 * get_default_qconfig_mapping("onednn"): HistogramObserver quint8 over the full
 * [0, 255] (no reduce_range), PerChannelMinMaxObserver qint8 symmetric weights and the
 * fixed-qparams entries. One deliberate difference, ConvTranspose's per-tensor weights,
 * is explained at its entry and in docs/backend-config.md. */
#include "backend-config.h"

#include "../common/pytorch-backend-config.h"

QH_PT_DTYPE_CONFIG(x86_weighted_op_int8,
                   &qh_pt_quint8, &qh_pt_quint8, &qh_pt_qint8, &qh_pt_float, 0);
QH_PT_DTYPE_CONFIG(x86_default_op_quint8, &qh_pt_quint8, &qh_pt_quint8, NULL, NULL, 0);
QH_PT_DTYPE_CONFIG(x86_default_dynamic_int8,
                   &qh_pt_quint8, &qh_pt_float, &qh_pt_qint8, &qh_pt_float,
                   QH_DTYPE_CONFIG_IS_DYNAMIC);
QH_PT_DTYPE_CONFIG(x86_default_dynamic_float16, &qh_pt_float16, &qh_pt_float, &qh_pt_float16,
                   &qh_pt_float, QH_DTYPE_CONFIG_IS_DYNAMIC);
/* x86_weighted_op_int8 under upstream's _add_fixed_qparams_to_dtype_configs. */
QH_PT_DTYPE_CONFIG(x86_weighted_op_int8_fixed_0to1,
                   &qh_pt_quint8_fixed_0to1, &qh_pt_quint8_fixed_0to1,
                   &qh_pt_qint8, &qh_pt_float, 0);
QH_PT_DTYPE_CONFIG(x86_weighted_op_int8_fixed_neg1to1, &qh_pt_quint8_fixed_neg1to1,
                   &qh_pt_quint8_fixed_neg1to1, &qh_pt_qint8, &qh_pt_float, 0);

static const QhDTypeConfig *const dcs_conv[] = {&x86_weighted_op_int8};
static const QhDTypeConfig *const dcs_linear[] = {&x86_weighted_op_int8, &x86_default_dynamic_int8,
                                                   &x86_default_dynamic_float16};
static const QhDTypeConfig *const dcs_binary[] = {&x86_weighted_op_int8};
static const QhDTypeConfig *const dcs_default[] = {&x86_default_op_quint8};
static const QhDTypeConfig *const dcs_fixed_0to1[] = {&x86_weighted_op_int8_fixed_0to1};
static const QhDTypeConfig *const dcs_fixed_neg1to1[] = {&x86_weighted_op_int8_fixed_neg1to1};
static const QhDTypeConfig *const dcs_share[] = {&x86_default_op_quint8};

QH_PT_PATTERNS(QH_PT_DEFINE_PATTERN)
static const QhBackendPatternConfig *const patterns[] = {QH_PT_PATTERNS(QH_PT_REF_PATTERN)};

/* get_default_qconfig("onednn"): HistogramObserver(reduce_range=False), quint8 [0, 255]. */
static const QhQuantSpec histogram_full_range = {
    QH_STRUCT_HEADER(QhQuantSpec),
    .kind = QH_SPEC_QUANTIZE,
    .dtype = QH_DTYPE_UINT8,
    .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
    .flags = 0,
    .ch_axis = -1,
    .observer = "HistogramObserver",
};

#define GLOBAL_ACT &histogram_full_range
#define GLOBAL_W &qh_pt_default_per_channel_weight_observer
#define TYPE QH_QCONFIG_MATCH_OBJECT_TYPE

/* Entries that use the global qconfig point at the global's very objects, so a user's
 * global replaces them all, as in PyTorch's mapping. */
QH_PT_QCONFIG_ENTRY(q_global, QH_QCONFIG_MATCH_GLOBAL, NULL, GLOBAL_ACT, GLOBAL_W);
QH_PT_QCONFIG_ENTRY(q_conv, TYPE, "Conv", GLOBAL_ACT, GLOBAL_W);
/* 1.13's onednn mapping gives ConvTranspose the global per-channel weight observer,
 * which 1.13's own prepare_fx rejects (assert_valid_qconfig: "Per channel weight
 * observer is not supported yet for ConvTranspose{n}d"). PyTorch 2.x's x86 mapping
 * uses a per-tensor MinMaxObserver there (pytorch/pytorch#47535); so does qhost. */
QH_PT_QCONFIG_ENTRY(q_conv_transpose, TYPE, "ConvTranspose", GLOBAL_ACT,
                    &qh_pt_default_weight_observer);
QH_PT_QCONFIG_ENTRY(q_gemm, TYPE, "Gemm", GLOBAL_ACT, GLOBAL_W);
QH_PT_QCONFIG_ENTRY(q_relu, TYPE, "Relu", GLOBAL_ACT, GLOBAL_W);
QH_PT_QCONFIG_ENTRY(q_batch_norm, TYPE, "BatchNormalization", GLOBAL_ACT, GLOBAL_W);
QH_PT_COMMON_QCONFIG_ENTRIES;

static const QhQConfigEntry *const default_qconfig[] = {
    &q_global, &q_reshape, &q_conv, &q_conv_transpose, &q_gemm, &q_relu,
    &q_batch_norm, &q_hardsigmoid, &q_sigmoid, &q_softmax, &q_tanh,
};

const QhBackendConfig qh_x86_backend_config = {
    QH_STRUCT_HEADER(QhBackendConfig),
    .name = "x86",
    .flags = 0,
    .patterns = patterns,
    .n_patterns = QH_PT_COUNT(patterns),
    .default_qconfig = default_qconfig,
    .n_default_qconfig = QH_PT_COUNT(default_qconfig),
};
