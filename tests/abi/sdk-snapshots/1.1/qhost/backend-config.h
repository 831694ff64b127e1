/* Declarative backend configuration: PyTorch's BackendConfig as static C data.
 *
 * A plugin that describes its backend this way lets the host's annotator do the work:
 * the host matches the patterns against the graph, picks the first dtype config the
 * user's resolved qconfig satisfies (PyTorch's rule: same dtypes, quant range inside
 * the bounds, observer eps >= scale_min_lower_bound, fixed scale / zero point exactly
 * as given) and annotates the match; a match no dtype config accepts stays float and
 * the report names the constraint that failed.
 *
 * Everything here is `static const` data owned by the plugin for as long as it is
 * loaded; the host reads it (and copies what it keeps) after the entry point returns,
 * and validates it once at load: pattern lengths 1..QH_PATTERN_MAX_OPS, non-empty op
 * names, roles and observation types known, no two patterns with the same op
 * sequence, ranges inside each dtype.
 *
 * Every struct here starts with abi_version and struct_size (QH_STRUCT_HEADER) and
 * only grows at the end. Arrays are arrays of pointers, so each element is versioned
 * on its own.
 *
 * Since: ABI 1.0 */
#ifndef QHOST_BACKEND_CONFIG_H
#define QHOST_BACKEND_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "qhost/abi.h"
#include "qhost/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Observation types (PyTorch's ObservationType), int32_t ---- */
/* The output gets its own observer (conv, linear, add, softmax, ...). */
#define QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT 0
/* The output shares the input's observer (maxpool, reshape, cat: all inputs and the
 * output share one). */
#define QH_OBS_OUTPUT_SHARE_OBSERVER_WITH_INPUT 1
/* Neither inputs nor output are observed (shape and size queries). */
#define QH_OBS_INPUT_OUTPUT_NOT_OBSERVED 2

/* ---- DTypeWithConstraints ---- */
#define QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND 0x1u
#define QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND 0x2u
#define QH_CONSTRAINT_SCALE_MIN_LOWER_BOUND 0x4u
#define QH_CONSTRAINT_SCALE_MAX_UPPER_BOUND 0x8u /* recorded; PyTorch 1.13 never checks it */
#define QH_CONSTRAINT_SCALE_EXACT 0x10u          /* fixed-qparams ops: this exact scale */
#define QH_CONSTRAINT_ZERO_POINT_EXACT 0x20u     /* fixed-qparams ops: this exact zero point */

typedef struct QhDTypeConstraint {
  uint32_t abi_version;
  uint32_t struct_size;
  int32_t dtype;   /* QH_DTYPE_UINT8, INT8, INT32, FLOAT (float bias), ... */
  uint32_t flags;  /* QH_CONSTRAINT_* bits saying which bounds below are set */
  int32_t quant_min_lower_bound;
  int32_t quant_max_upper_bound;
  float scale_min_lower_bound; /* compared with the observer's eps, as PyTorch does */
  float scale_max_upper_bound;
  float scale_exact;
  int32_t zero_point_exact;
} QhDTypeConstraint;

/* dtype config flags */
#define QH_DTYPE_CONFIG_IS_DYNAMIC 0x1u /* dynamic quantization: reported unsupported by 1.0 hosts */

/* One DTypeConfig: the dtypes (with constraints) of a pattern's input activation,
 * output, weight and bias. NULL members mean "no such tensor" (an op without weight)
 * or, for bias, "float". */
typedef struct QhDTypeConfig {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *name; /* for reports ("weighted_op_quint8"); may be NULL */
  uint32_t flags;   /* QH_DTYPE_CONFIG_* */
  const QhDTypeConstraint *input;
  const QhDTypeConstraint *output;
  const QhDTypeConstraint *weight;
  const QhDTypeConstraint *bias;
} QhDTypeConfig;

/* ---- Fusions (what happens to a matched pattern before annotation), int32_t ---- */
#define QH_FUSER_NONE 0 /* quantize the pattern as one unit: no Q/DQ between its ops */
/* Fold a BatchNormalization that follows Conv / ConvTranspose / Gemm into the weights
 * and bias (PyTorch's fuse_conv_bn_weights), then quantize the rest as one unit. */
#define QH_FUSER_FOLD_BATCHNORM 1

#define QH_PATTERN_MAX_OPS 3

/* pattern flags */
/* observation_type_by_tensor_args applies (binary ops with a constant operand). */
#define QH_PATTERN_OBS_BY_TENSOR_ARGS 0x1u

/* One BackendPatternConfig. `ops` lists ONNX op types in forward (execution) order;
 * op i > 0 consumes op i-1's output (through any input slot). "domain:Op" names an op
 * of another domain. */
typedef struct QhBackendPatternConfig {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *const *ops; /* n_ops op types, 1..QH_PATTERN_MAX_OPS */
  size_t n_ops;
  /* DAG patterns: bit i set means op i may read inputs from outside the pattern besides
   * its chain input; they are observed as activations (conv -> add(x) -> relu sets bit
   * 1, and x becomes an extra input of the fused unit). */
  uint32_t extra_inputs_mask;
  /* The op the roles below describe (the conv of conv -> bn -> relu). */
  uint32_t root_index;
  /* QH_ROLE_* of each input slot of the root op (BackendConfig's input_type_to_index).
   * NULL: input 0 is the activation; Conv/ConvTranspose/Gemm/MatMul slots 1 and 2
   * are weight and bias; other ops' further inputs are activations. */
  const int32_t *input_roles;
  size_t n_input_roles;
  int32_t observation_type; /* QH_OBS_* */
  uint32_t flags;           /* QH_PATTERN_* */
  /* With QH_PATTERN_OBS_BY_TENSOR_ARGS: the observation type for 0, 1 and 2
   * non-constant inputs of the root op (PyTorch's _num_tensor_args_to_observation_type). */
  int32_t observation_type_by_tensor_args[3];
  const QhDTypeConfig *const *dtype_configs; /* any one may match; first match wins */
  size_t n_dtype_configs;
  int32_t fuser;          /* QH_FUSER_* */
  const char *fused_name; /* for reports and lowering ("ConvReLU2d"); may be NULL */
} QhBackendPatternConfig;

/* ---- The default qconfig mapping (PyTorch's get_default_qconfig_mapping) ---- */
#define QH_QCONFIG_MATCH_GLOBAL 0
#define QH_QCONFIG_MATCH_OBJECT_TYPE 1 /* key: ONNX op type */
#define QH_QCONFIG_MATCH_NODE_NAME 2   /* key: node name, exact or glob (*, ?) */

/* entry flags */
#define QH_QCONFIG_ENTRY_NONE 0x1u /* maps to null: leave matching nodes float */

typedef struct QhQConfigEntry {
  uint32_t abi_version;
  uint32_t struct_size;
  int32_t match;   /* QH_QCONFIG_MATCH_* */
  uint32_t flags;  /* QH_QCONFIG_ENTRY_* */
  const char *key; /* NULL for GLOBAL */
  /* The activation and weight observers, as QhQuantSpec (QUANTIZE with an observer,
   * FIXED for FixedQParamsObserver, SHARED without target for ReuseInputObserver).
   * NULL weight: PyTorch's default_weight_observer. Ignored with ENTRY_NONE. */
  const QhQuantSpec *activation;
  const QhQuantSpec *weight;
} QhQConfigEntry;

typedef struct QhBackendConfig {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *name; /* "fbgemm" */
  uint32_t flags;   /* 0 */
  const QhBackendPatternConfig *const *patterns;
  size_t n_patterns;
  /* Later entries of the same match kind and key are refused (no silent overwrite). */
  const QhQConfigEntry *const *default_qconfig;
  size_t n_default_qconfig;
} QhBackendConfig;

#ifdef __cplusplus
}
#endif

#endif
