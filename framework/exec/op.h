/* The contract between the executor and the host's reference kernels: one QhOpDef
 * per ONNX operator, with shape inference, a fast run function, and (for ops whose
 * fast path is not obviously correct) a naive twin that tests compare it with.
 *
 * Conventions for every function here:
 * - `inputs` has n_inputs entries, NULL for an omitted optional input. During
 *   inference an input's `data` is non-NULL only when its value is a constant
 *   (initializer or folded at plan time); ops whose output shape depends on an
 *   input's contents (Reshape's shape, Slice's starts, ...) fail with
 *   QH_ERROR_UNSUPPORTED when that input is not constant.
 * - infer fills dtype and shape of each of the n_outputs entries of `outputs`
 *   (whose data stays NULL) and validates attributes and input dtypes/shapes.
 * - run reads inputs and writes the outputs, which the executor has allocated with
 *   the inferred dtype and shape (contents undefined; NULL for an omitted optional
 *   output). run never allocates outputs and never keeps pointers past the call.
 * - Errors name the node: "node 'NAME' (OP): cause".
 * Threading: infer and run may be called from any thread, but never concurrently on
 * one node; run may use ctx's thread pool. */
#ifndef QH_EXEC_OP_H
#define QH_EXEC_OP_H

#include <glib.h>

#include "core/graph.h"
#include "core/tensor.h"
#include "exec/threadpool.h"

G_BEGIN_DECLS

typedef struct QhConvCache QhConvCache;

/* An element-wise function a Conv applies to its result before writing it (exec/fusion.c). */
typedef enum {
  QH_POST_NONE,
  QH_POST_RELU,
  QH_POST_CLIP,      /* alpha, beta: the bounds, alpha <= beta */
  QH_POST_SWISH,     /* x * sigmoid(x) */
  QH_POST_HARDSWISH, /* x * clip(x / 6 + 1/2, 0, 1) */
} QhPostOpKind;

typedef struct {
  QhThreadPool *pool; /* never NULL; may have a single thread */
  void *scratch;      /* owned; see qh_exec_scratch */
  size_t scratch_size;
  /* TRUE: Conv runs OpenBLAS (im2col + sgemm), the path the PyTorch parity of
   * calibration was established on, instead of the oneDNN engine (kernels/conv-onednn.c). */
  gboolean bit_compatible;
  /* Set by the plan before each run call: bit k when input k is a plan constant
   * (initializer or folded), whose data stays the same for the context's lifetime. */
  guint64 constant_inputs;
  /* Set by the plan before each run call: bit k when input k (nhwc_inputs) or output k
   * (nhwc_outputs) holds its 4-D activation channels-last (N, H, W, C) rather than NCHW.
   * Only Conv on the oneDNN engine and element-wise ops (whose operands then all share
   * the layout) are ever given such values (plan.c's layout plan); zero everywhere else. */
  guint64 nhwc_inputs, nhwc_outputs;
  /* Set by the plan before each run call: for a Conv whose channels-last result the
   * plan's fusion (exec/fusion.c) passes through element-wise nodes, the function to
   * apply (then its output tensor is the group's last value); QH_POST_NONE elsewhere. */
  QhPostOpKind post_op;
  float post_alpha, post_beta;
  QhConvCache *conv_cache; /* owned; oneDNN primitives and packed weights per Conv node */
} QhExecContext;

/* A scratch buffer of at least size bytes (64-byte aligned, contents undefined)
 * that stays valid until the next call on ctx; kernels use it for temporaries such
 * as im2col columns so that repeated runs allocate nothing. NULL when memory runs
 * out. Threading: only the thread that runs the node may call it. */
void *qh_exec_scratch(QhExecContext *ctx, size_t size);

/* Free ctx's scratch buffer and conv cache (not the pool). */
void qh_exec_context_clear(QhExecContext *ctx);

typedef gboolean (*QhOpInferFn)(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                                QhTensor *outputs, int n_outputs, GError **error);
typedef gboolean (*QhOpRunFn)(QhExecContext *ctx, const QhNode *node,
                              const QhTensor *const *inputs, int n_inputs,
                              QhTensor *const *outputs, int n_outputs, GError **error);
/* Multiply-accumulate count of one run, from inferred shapes (data may be NULL). */
typedef int64_t (*QhOpMacsFn)(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                              const QhTensor *outputs, int n_outputs);

typedef struct {
  const char *op_type;  /* default ONNX domain */
  int min_inputs;
  int max_inputs;
  int min_outputs;
  int max_outputs;
  QhOpInferFn infer;
  QhOpRunFn run;        /* the fast path */
  QhOpRunFn run_naive;  /* obviously-correct twin; NULL when run is itself the naive loop */
  QhOpMacsFn macs;      /* NULL: the op does no multiply-accumulates worth counting */
} QhOpDef;

/* The definition for (domain, op_type), or NULL when qhost has no kernel for it.
 * domain "" and "ai.onnx" are the default domain. */
const QhOpDef *qh_op_find(const char *domain, const char *op_type);

/* All definitions, for listings and tests: a NULL-terminated array (static). */
const QhOpDef *const *qh_op_all(void);

/* Op families: each kernels/<family>.c defines one table ending in {NULL}. */
extern const QhOpDef qh_ops_conv[];        /* Conv, ConvTranspose */
extern const QhOpDef qh_ops_gemm[];        /* Gemm, MatMul */
extern const QhOpDef qh_ops_pool[];        /* MaxPool, AveragePool, GlobalAveragePool */
extern const QhOpDef qh_ops_elementwise[]; /* Add, Sub, Mul, Div */
extern const QhOpDef qh_ops_activation[];  /* Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Softmax */
extern const QhOpDef qh_ops_norm[];        /* BatchNormalization */
extern const QhOpDef qh_ops_reduce[];      /* ReduceMean, ReduceSum/Max/Min/Prod/L2, ArgMax */
extern const QhOpDef qh_ops_qdq[];         /* QuantizeLinear, DequantizeLinear */
extern const QhOpDef qh_ops_shape[];       /* Shape, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity, Dropout, Constant, Concat */
extern const QhOpDef qh_ops_index[];       /* Gather, Slice, Pad */
extern const QhOpDef qh_ops_resize[];      /* Resize */
extern const QhOpDef qh_ops_cast[];        /* Cast, ConstantOfShape */
extern const QhOpDef qh_ops_rnn[];         /* LSTM, GRU */
extern const QhOpDef qh_ops_layernorm[];   /* LayerNormalization */
extern const QhOpDef qh_ops_index_build[]; /* Range, ScatterND */
extern const QhOpDef qh_ops_math[];        /* Sqrt, Erf, Exp, Neg, Log, Reciprocal, Abs, Not, Pow, Mod, Equal,
                                              Less, Greater, And, Where, Expand, Min, Max */
extern const QhOpDef qh_ops_tile_split[];    /* Tile, Split */
extern const QhOpDef qh_ops_instancenorm[];   /* InstanceNormalization */
extern const QhOpDef qh_ops_index_elements[]; /* GatherElements, Trilu, CumSum */
extern const QhOpDef qh_ops_topk[];           /* TopK */
extern const QhOpDef qh_ops_einsum[];         /* Einsum */
extern const QhOpDef qh_ops_dynamic_quant[];  /* DynamicQuantizeLinear, MatMulInteger */

G_END_DECLS

#endif
