/* Value types shared by the host API and the plugin callbacks: element types,
 * quantization schemes, edges, quantization specs and parameters, tensors, options.
 *
 * Ownership words used throughout the SDK:
 *   borrowed - valid for the duration of the call only; copy it to keep it.
 *   copied   - the receiver copies it before returning; the giver keeps ownership.
 *   owned    - by the host until the event named, or by the plugin until its destroy
 *              callback.
 *
 * Since: ABI 1.0 */
#ifndef QHOST_TYPES_H
#define QHOST_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "qhost/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Element types: ONNX TensorProto.DataType codes (int32_t) ---- */
#define QH_DTYPE_UNDEFINED 0
#define QH_DTYPE_FLOAT 1
#define QH_DTYPE_UINT8 2
#define QH_DTYPE_INT8 3
#define QH_DTYPE_UINT16 4
#define QH_DTYPE_INT16 5
#define QH_DTYPE_INT32 6
#define QH_DTYPE_INT64 7
#define QH_DTYPE_BOOL 9
#define QH_DTYPE_FLOAT16 10
/* Added in ABI 1.2: 4-bit integers (opset 21; weights). Tensors a plugin sees hold them
 * one element per byte (int4 sign-extended); the ONNX file packs two per byte. */
#define QH_DTYPE_UINT4 21
#define QH_DTYPE_INT4 22

/* ---- Quantization schemes (PyTorch's torch.qscheme), int32_t ---- */
#define QH_QSCHEME_PER_TENSOR_AFFINE 0
#define QH_QSCHEME_PER_CHANNEL_AFFINE 1
#define QH_QSCHEME_PER_TENSOR_SYMMETRIC 2
#define QH_QSCHEME_PER_CHANNEL_SYMMETRIC 3
#define QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS 4

/* ---- Roles of a node's inputs (BackendConfig's input_type_to_index), int32_t ---- */
#define QH_ROLE_ACTIVATION 0   /* observed and quantized as an activation */
#define QH_ROLE_WEIGHT 1       /* a constant weight: quantized with the weight qconfig */
#define QH_ROLE_BIAS 2         /* bias: float, or int32 derived from input and weight scales */
#define QH_ROLE_NOT_OBSERVED 3 /* left alone (shapes, indices, axes) */

/* ---- Tensor layouts a kernel declares, int32_t ---- */
#define QH_LAYOUT_ANY 0    /* layout does not matter (1-D, 2-D [N, C], scalars) */
#define QH_LAYOUT_NCHW 1   /* ONNX's own layout */
#define QH_LAYOUT_NHWC 2   /* channels last */
#define QH_LAYOUT_OPAQUE 3 /* plugin-private; the kernel group supplies reorders to/from NCHW */

/* Dimensions a tensor may have. */
#define QH_MAX_RANK 8

/* ---- An edge of the graph: a node's input slot, or a node's output slot ---- */
#define QH_EDGE_INPUT 0  /* (node, slot) is input `slot` of `node`: the edge into it */
#define QH_EDGE_OUTPUT 1 /* (node, slot) is output `slot` of `node` (the value it produces) */
typedef struct QhEdgeRef {
  uint32_t node; /* node id in the graph handle the call is about */
  uint32_t slot; /* input or output index of that node */
  int32_t kind;  /* QH_EDGE_INPUT or QH_EDGE_OUTPUT */
  uint32_t reserved; /* 0 */
} QhEdgeRef; /* plain data, not versioned: this layout is frozen forever */

/* ---- A string key/value pair (backend options, observer arguments) ---- */
typedef struct QhOption {
  const char *key;   /* UTF-8, NUL-terminated */
  const char *value; /* UTF-8, NUL-terminated */
} QhOption; /* plain data, not versioned: this layout is frozen forever */

/* ---- Quantization parameters of one tensor ----
 * Per-tensor parameters have count 1. Per-channel parameters have one scale and zero
 * point per index of dimension ch_axis. When the host hands QhQParams to a plugin,
 * the arrays are borrowed for the call. When a plugin fills QhQParams for the host,
 * the host has set capacity and the arrays, and the plugin writes count <= capacity
 * entries (the host checks). */
typedef struct QhQParams {
  uint32_t abi_version;
  uint32_t struct_size;
  int32_t dtype;       /* QH_DTYPE_UINT8, INT8, INT16, INT32, ... */
  int32_t qscheme;     /* QH_QSCHEME_* */
  int32_t quant_min;   /* the quantized range; quant_min <= zero_point <= quant_max */
  int32_t quant_max;
  int32_t ch_axis;     /* per-channel axis; -1 for per-tensor */
  uint32_t flags;      /* 0 */
  size_t count;        /* entries in scale[] and zero_point[] */
  size_t capacity;     /* size of the arrays when the plugin writes them */
  float *scale;        /* > 0 and finite, every entry */
  int32_t *zero_point;
} QhQParams;

/* ---- A quantization spec: what to do with one edge or output ----
 * PyTorch's QuantizationSpec, SharedQuantizationSpec, FixedQParamsQuantizationSpec and
 * DerivedQuantizationSpec in one struct, told apart by `kind`. In a qconfig (the
 * backend's default mapping, or the user's resolved qconfig) the same struct
 * describes an observer: QH_SPEC_QUANTIZE with an observer name and arguments,
 * QH_SPEC_FIXED for FixedQParamsObserver, QH_SPEC_SHARED with no target for
 * ReuseInputObserver (the output reuses the input's qparams).
 * All pointers are borrowed by the call that receives the spec; the host copies what
 * it keeps. */
#define QH_SPEC_QUANTIZE 1 /* observe, then quantize with the computed qparams */
#define QH_SPEC_SHARED 2   /* use the same qparams (one observer) as `shared_with` */
#define QH_SPEC_FIXED 3    /* fixed scale / zero_point, no observation */
#define QH_SPEC_DERIVED 4  /* qparams computed by `derive` from the edges in `derived_from` */
#define QH_SPEC_FLOAT 5    /* explicitly not quantized */

/* spec flags */
#define QH_SPEC_HAS_RANGE 0x1u    /* quant_min/quant_max are set; else the dtype's full range */
#define QH_SPEC_REDUCE_RANGE 0x2u /* PyTorch's reduce_range: one bit less of range */
#define QH_SPEC_IS_DYNAMIC 0x4u   /* dynamic quantization (refused by ABI 1.0 hosts with
                                   * QH_ERR_UNSUPPORTED) */
#define QH_SPEC_HAS_EPS 0x8u      /* eps is set; else the observer's default (2^-23) */

struct QhHostApi;

/* Computes a derived spec's qparams from the qparams of its sources.
 *   sources  [in]  one QhQParams per entry of derived_from, in that order; borrowed.
 *   out      [out] host-provided arrays (capacity set); the callback sets count and
 *                  fills the entries, and may change nothing else.
 * Threading: called on the host thread that converts the model, after calibration.
 * Errors: a status from host->status_new; the node is left float and reported. */
typedef struct QhStatus *(*QhDeriveQParamsFn)(void *user_data, const struct QhHostApi *host,
                                              const QhQParams *const *sources, size_t n_sources,
                                              QhQParams *out);

typedef struct QhQuantSpec {
  uint32_t abi_version;
  uint32_t struct_size;
  int32_t kind;        /* QH_SPEC_* */
  int32_t dtype;       /* QH_DTYPE_UINT8 / INT8 / INT16 / INT32 (QUANTIZE, FIXED, DERIVED) */
  int32_t qscheme;     /* QH_QSCHEME_* (QUANTIZE, DERIVED); FIXED is per-tensor affine */
  int32_t quant_min;   /* with QH_SPEC_HAS_RANGE */
  int32_t quant_max;
  int32_t ch_axis;     /* per-channel qschemes: the channel axis; otherwise -1 */
  uint32_t flags;      /* QH_SPEC_* flags */
  float eps;           /* with QH_SPEC_HAS_EPS: the observer's minimum scale */
  /* QUANTIZE: the observer by name: PyTorch's ("MinMaxObserver", "HistogramObserver",
   * "PerChannelMinMaxObserver", "MovingAverageMinMaxObserver",
   * "MovingAveragePerChannelMinMaxObserver", "PlaceholderObserver") or one a plugin
   * registers. NULL: MinMaxObserver (per-tensor) or PerChannelMinMaxObserver. */
  const char *observer;
  const QhOption *observer_args; /* e.g. {"bins", "2048"}; n_observer_args entries */
  size_t n_observer_args;
  /* FIXED */
  float scale;
  int32_t zero_point;
  /* SHARED: the edge or output whose qparams this one uses (PT2E's EdgeOrNode). For a
   * qconfig entry, shared_with.node == QH_INVALID_ID means "reuse the input's". */
  QhEdgeRef shared_with;
  /* DERIVED */
  const QhEdgeRef *derived_from; /* n_derived_from edges, each annotated elsewhere */
  size_t n_derived_from;
  QhDeriveQParamsFn derive;      /* required for DERIVED */
  void *derive_user_data;        /* passed to derive; must outlive the plugin instance */
} QhQuantSpec;

/* ---- A tensor handed to an observer or a kernel (a view of host-owned memory) ----
 * Built by the host. `data` points to 64-byte aligned memory followed by at least
 * 64 bytes of slack the callee may read but never write. */
typedef struct QhTensorView {
  uint32_t abi_version;
  uint32_t struct_size;
  int32_t dtype;   /* QH_DTYPE_* */
  int32_t layout;  /* QH_LAYOUT_*; dims are listed in this layout's order */
  int32_t rank;    /* 0..QH_MAX_RANK */
  uint32_t flags;  /* 0 */
  int64_t dims[QH_MAX_RANK];
  void *data;      /* borrowed; NULL only when the tensor has no elements */
  size_t nbytes;   /* size of data in bytes (elements * element size) */
  const QhQParams *qparams; /* borrowed; NULL for float tensors */
} QhTensorView;

/* ---- A backend option a plugin declares (descriptor.options) ---- */
#define QH_OPTION_BOOL 1   /* "true"/"false"/"1"/"0"/"yes"/"no" */
#define QH_OPTION_INT 2    /* decimal int64 within [min, max] of the declaration when set */
#define QH_OPTION_FLOAT 3  /* finite decimal double */
#define QH_OPTION_STRING 4 /* any UTF-8 text */
#define QH_OPTION_ENUM 5   /* one of `choices` ("a|b|c") */
typedef struct QhOptionDecl {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *name;          /* [a-z][a-z0-9_]*, unique within the plugin */
  int32_t type;              /* QH_OPTION_* */
  uint32_t flags;            /* 0 */
  const char *default_value; /* valid for the type; passed when the user gives none */
  const char *help;          /* one line */
  const char *choices;       /* QH_OPTION_ENUM: "a|b|c"; else NULL */
  int64_t min;               /* QH_OPTION_INT: inclusive bounds; ignored when min > max */
  int64_t max;
} QhOptionDecl;

#ifdef __cplusplus
}
#endif

#endif
