/* The data PyTorch's fbgemm and qnnpack backend configs share: the dtypes with
 * constraints of backend_config/qnnpack.py and upstream's fixed-qparams constraints,
 * the observers of the default qconfigs (qconfig.py, observer.py), and the input roles
 * of ops whose further inputs are parameters rather than activations. */
#include "pytorch-backend-config.h"

#define DTYPE(dt) {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = (dt), .flags = 0}

const QhDTypeConstraint qh_pt_quint8 = DTYPE(QH_DTYPE_UINT8);
const QhDTypeConstraint qh_pt_qint8 = DTYPE(QH_DTYPE_INT8);
const QhDTypeConstraint qh_pt_float = DTYPE(QH_DTYPE_FLOAT);
const QhDTypeConstraint qh_pt_float16 = DTYPE(QH_DTYPE_FLOAT16);

const QhDTypeConstraint qh_pt_qint8_scale_min_2_neg_12 = {
    QH_STRUCT_HEADER(QhDTypeConstraint),
    .dtype = QH_DTYPE_INT8,
    .flags = QH_CONSTRAINT_SCALE_MIN_LOWER_BOUND,
    .scale_min_lower_bound = 0x1p-12f,
};

const QhDTypeConstraint qh_pt_qint8_neg_127_to_127_scale_min_2_neg_12 = {
    QH_STRUCT_HEADER(QhDTypeConstraint),
    .dtype = QH_DTYPE_INT8,
    .flags = QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND | QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND |
             QH_CONSTRAINT_SCALE_MIN_LOWER_BOUND,
    .quant_min_lower_bound = -127,
    .quant_max_upper_bound = 127,
    .scale_min_lower_bound = 0x1p-12f,
};

#define FIXED(scale, zp)                                                                       \
  {                                                                                            \
    QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8,                              \
    .flags = QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND | QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND |       \
             QH_CONSTRAINT_SCALE_EXACT | QH_CONSTRAINT_ZERO_POINT_EXACT,                       \
    .quant_min_lower_bound = 0, .quant_max_upper_bound = 255, .scale_exact = (scale),          \
    .zero_point_exact = (zp),                                                                  \
  }

const QhDTypeConstraint qh_pt_quint8_fixed_0to1 = FIXED(1.0f / 256.0f, 0);
const QhDTypeConstraint qh_pt_quint8_fixed_neg1to1 = FIXED(2.0f / 256.0f, 128);

const QhQuantSpec qh_pt_default_weight_observer = {
    QH_STRUCT_HEADER(QhQuantSpec),
    .kind = QH_SPEC_QUANTIZE,
    .dtype = QH_DTYPE_INT8,
    .qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC,
    .ch_axis = -1,
    .observer = "MinMaxObserver",
};

const QhQuantSpec qh_pt_default_per_channel_weight_observer = {
    QH_STRUCT_HEADER(QhQuantSpec),
    .kind = QH_SPEC_QUANTIZE,
    .dtype = QH_DTYPE_INT8,
    .qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC,
    .ch_axis = 0,
    .observer = "PerChannelMinMaxObserver",
};

#define FIXED_OBSERVER(s, zp)                                                                  \
  {                                                                                            \
    QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_FIXED, .dtype = QH_DTYPE_UINT8,             \
    .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE, .flags = QH_SPEC_HAS_RANGE, .quant_min = 0,        \
    .quant_max = 255, .ch_axis = -1, .scale = (s), .zero_point = (zp),                         \
  }

const QhQuantSpec qh_pt_fixed_qparams_0to1_observer = FIXED_OBSERVER(1.0f / 256.0f, 0);
const QhQuantSpec qh_pt_fixed_qparams_neg1to1_observer = FIXED_OBSERVER(2.0f / 256.0f, 128);

const QhQuantSpec qh_pt_reuse_input_observer = {
    QH_STRUCT_HEADER(QhQuantSpec),
    .kind = QH_SPEC_SHARED,
    .dtype = QH_DTYPE_UINT8,
    .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
    .ch_axis = -1,
    .shared_with = {QH_INVALID_ID, 0, QH_EDGE_OUTPUT, 0},
};

const int32_t qh_pt_roles_p1[2] = {QH_ROLE_ACTIVATION, QH_ROLE_NOT_OBSERVED};
const int32_t qh_pt_roles_p2[3] = {QH_ROLE_ACTIVATION, QH_ROLE_NOT_OBSERVED, QH_ROLE_NOT_OBSERVED};
const int32_t qh_pt_roles_p3[4] = {QH_ROLE_ACTIVATION, QH_ROLE_NOT_OBSERVED, QH_ROLE_NOT_OBSERVED,
                                   QH_ROLE_NOT_OBSERVED};
const int32_t qh_pt_roles_p4[5] = {QH_ROLE_ACTIVATION, QH_ROLE_NOT_OBSERVED, QH_ROLE_NOT_OBSERVED,
                                   QH_ROLE_NOT_OBSERVED, QH_ROLE_NOT_OBSERVED};
