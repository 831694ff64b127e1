/* The plugin descriptor and its callback groups.
 *
 * A plugin's entry point returns a pointer to a `static const QhPluginDesc`. The
 * descriptor names the plugin, declares its options, and points at the callback
 * groups it supplies; every group is optional (NULL = not supplied) and what
 * `qhost plugins` shows as "supplies" is derived from which groups are present.
 * Within a present group, callbacks marked "required" must be non-NULL; the host
 * refuses the plugin otherwise, naming the callback.
 *
 * Lifecycle: the entry point only describes (no allocation, no threads, no library
 * initialisation). When the plugin is chosen for a job, the host calls
 * instance_create once with the user's options; every other callback receives that
 * instance; instance_destroy is called once at the end. Callbacks of one instance
 * are called from one host thread, one at a time, except QhKernelOps.run, which may
 * run concurrently on different kernel objects (never on the same one).
 *
 * Errors: every fallible callback returns a status made with host->status_new (NULL
 * = success), leaves its out-parameters untouched on error, and never prints,
 * aborts or exits. The host prefixes the plugin's name (and the node, when it knows
 * it) and reports; destroy callbacks return void and must not fail.
 *
 * APPEND ONLY: every struct here starts with abi_version and struct_size and only
 * grows at the end. The host reads a member only when struct_size covers it;
 * otherwise the default written next to it applies.
 *
 * Since: ABI 1.0 */
#ifndef QHOST_PLUGIN_H
#define QHOST_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "qhost/abi.h"
#include "qhost/backend-config.h"
#include "qhost/host-api.h"
#include "qhost/status.h"
#include "qhost/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- What the host tells a new instance ---- */
typedef struct QhInstanceInfo {
  uint32_t abi_version;
  uint32_t struct_size;
  uint32_t n_threads; /* --threads: the size of the host's pool; kernels size theirs to it */
  uint32_t flags;     /* 0 */
  const char *plugin_path; /* absolute path of the plugin file; borrowed for the call */
} QhInstanceInfo;

/* ---- transform_for_annotation: graph rewrites before annotation ---- */
typedef struct QhTransformOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* Required. Rewrite `graph` in place through the host's graph_* / node_* rewrite
   * functions (BatchNorm folding, decompositions). graph: borrowed for the call.
   * The host re-checks the graph afterwards (topological order, shapes) and reports
   * the plugin when the rewrite broke it. */
  QhStatus *(*transform_for_annotation)(void *instance, const QhHostApi *host,
                                        QhGraphView *graph);
} QhTransformOps;

/* ---- Imperative annotation (PT2E's Quantizer.annotate) ---- */
typedef struct QhAnnotateOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* Required. Walk the graph through the host queries and set specs with
   * annotation_set_*; read the user's qconfig per node with qconfig_for_node. When the
   * plugin also has a backend_config, the host's declarative annotator runs first
   * and annotate sees (and may replace) its specs. graph: borrowed for the call. */
  QhStatus *(*annotate)(void *instance, const QhHostApi *host, QhGraphView *graph);
  /* Optional (NULL: nothing extra). PT2E's Quantizer.validate: check the complete
   * annotation after the host's own validation. */
  QhStatus *(*validate)(void *instance, const QhHostApi *host, const QhGraphView *graph);
} QhAnnotateOps;

/* ---- Custom observers ---- */
/* observer flags */
#define QH_OBSERVER_PER_CHANNEL 0x1u        /* accepts per-channel qschemes */
#define QH_OBSERVER_MERGE_IS_EXACT 0x2u     /* merging shards equals one pass (min/max-like) */

typedef struct QhObserverOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* The name users give in --config ("observer": NAME) and specs give in
   * QhQuantSpec.observer; [A-Za-z][A-Za-z0-9_]*, unique, not a PyTorch observer name. */
  const char *name;
  const char *description; /* one line */
  uint32_t flags;          /* QH_OBSERVER_* */
  /* Required. A new observer state for one quantization point. spec: borrowed, the
   * resolved spec (dtype, qscheme, range, eps, arguments); rank and dims: the observed
   * tensor's shape (borrowed). *out_state owned by the plugin until destroy. */
  QhStatus *(*create)(void *instance, const QhHostApi *host, const QhQuantSpec *spec,
                      int32_t rank, const int64_t *dims, void **out_state);
  /* Required. Record one float tensor (borrowed for the call), in calibration order. */
  QhStatus *(*observe)(void *state, const QhHostApi *host, const QhTensorView *tensor);
  /* Required. Write the qparams: out has capacity and arrays set by the host (capacity
   * = channel count, 1 per-tensor); set count, scale[], zero_point[], and the
   * dtype/qscheme/quant_min/quant_max/ch_axis members. */
  QhStatus *(*compute_qparams)(void *state, const QhHostApi *host, QhQParams *out);
  /* Optional (NULL: the observer cannot be sharded; `qhost calibrate --shard` refuses
   * it). Fold `other` (a state of the same observer and spec, borrowed) into state. */
  QhStatus *(*merge)(void *state, const QhHostApi *host, const void *other);
  /* Optional, with load (both or neither; NULL: not saveable). Append the state to
   * `out` with host->buffer_append, in a versioned format of the plugin's choosing. */
  QhStatus *(*save)(const void *state, const QhHostApi *host, QhBuffer *out);
  /* Create a state from bytes written by save (data borrowed). Must reject bytes it
   * did not write (wrong version, truncation) with QH_ERR_INVALID_ARGUMENT. */
  QhStatus *(*load)(void *instance, const QhHostApi *host, const QhQuantSpec *spec,
                    int32_t rank, const int64_t *dims, const void *data, size_t size,
                    void **out_state);
  /* Required. Free a state; NULL is a no-op. */
  void (*destroy)(void *state);
} QhObserverOps;

/* ---- Post-calibration refinement against hardware rules ---- */
typedef struct QhRefineOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* Required. Called after qparams are computed, before conversion. Read qparams with
   * host->qparams_get and change them with host->qparams_set (each change gets a
   * reason the report shows). graph: borrowed for the call. */
  QhStatus *(*refine)(void *instance, const QhHostApi *host, QhGraphView *graph);
} QhRefineOps;

/* ---- The backend's own reference numerics (its fake-quant) ---- */
typedef struct QhReferenceNumericsOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* One line saying how this backend rounds where it differs from ONNX's
   * round-half-to-even ("activations half-up, weights half-away-from-zero"). */
  const char *description;
  /* Required. Quantize then dequantize `in` (float, borrowed) with `qparams` the way
   * the hardware does, into `out` (float, same shape, host-allocated). role is
   * QH_ROLE_ACTIVATION, WEIGHT or BIAS. The quantize report uses it to measure error
   * instead of ONNX's rounding. */
  QhStatus *(*fake_quantize)(void *instance, const QhHostApi *host, int32_t role,
                             const QhQParams *qparams, const QhTensorView *in, QhTensorView *out);
} QhReferenceNumericsOps;

/* ---- Lowering: node units of the QDQ graph to plugin kernels ---- */

/* A matched node unit, built by the host. Everything is borrowed for the call. */
typedef struct QhNodeUnit {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *pattern_id;    /* the QhLoweringPattern.id that matched */
  const uint32_t *nodes;     /* the float ops of the unit, in pattern order */
  size_t n_nodes;
  /* Values entering the unit: for a quantized input, the integer tensor before its
   * DequantizeLinear; for a float input (e.g. a float bias), the value itself. */
  const uint32_t *inputs;
  size_t n_inputs;
  const int32_t *input_roles;            /* QH_ROLE_* per input */
  const QhQParams *const *input_qparams; /* per input; NULL for float inputs */
  /* Values leaving the unit: the integer tensor after the QuantizeLinear, or a float
   * value for a unit with a float output. */
  const uint32_t *outputs;
  size_t n_outputs;
  const QhQParams *const *output_qparams; /* per output; NULL for float outputs */
  /* Added in ABI 1.2 */
  /* The tensors the unit is planned for, one per entry of inputs and of outputs, as the
   * kernel's reshape will see them at plan time: dtype, layout (QH_LAYOUT_NHWC for the
   * 4-D activations of a channels-last kernel, QH_LAYOUT_NCHW for other 4-D tensors,
   * QH_LAYOUT_ANY otherwise), rank and dims in that layout's order, qparams as in
   * input_qparams / output_qparams; data NULL and nbytes 0. The shapes are the ones the
   * plan binds: a symbolic dimension takes the size of the data being run (1 where
   * there is no data: `qhost inspect`, plugin-check). rank is -1 (dims unset) when the
   * host cannot infer a shape. A 1.2 host always sets both arrays; a plugin that also
   * runs in older hosts checks QH_HAS_FIELD(unit, QhNodeUnit, output_tensors) first.
   * When a run brings other shapes (a session's symbolic batch changes), the host
   * plans again and asks accept again with the new shapes (PLUGIN_GUIDE.md, "Shapes at
   * accept"). */
  const QhTensorView *input_tensors;
  const QhTensorView *output_tensors;
} QhNodeUnit;

/* kernel flags */
#define QH_KERNEL_INPLACE_OK 0x1u /* output 0 may alias input 0 */

typedef struct QhKernelOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* Kernel id in XNNPACK's style ("conv2d_nhwc_qu8_qs8w"); shown in bench coverage. */
  const char *id;
  int32_t input_layout;  /* QH_LAYOUT_* of activation inputs */
  int32_t output_layout; /* QH_LAYOUT_* of outputs */
  uint32_t flags;        /* QH_KERNEL_* */
  /* Required. Build a kernel for `unit`: read weights and qparams through the host
   * (graph borrowed for the call), pack weights once. *out_kernel owned by the plugin
   * until destroy. */
  QhStatus *(*create)(void *instance, const QhHostApi *host, const QhGraphView *graph,
                      const QhNodeUnit *unit, void **out_kernel);
  /* Required. Input shapes are known: fill each output's dtype, layout, rank and dims
   * (outputs[i] has abi_version/struct_size set and data NULL) and the workspace size
   * in bytes. The host checks the shapes against the graph's and the workspace
   * against its cap. inputs: borrowed, data NULL. */
  QhStatus *(*reshape)(void *kernel, const QhHostApi *host, const QhTensorView *inputs,
                       size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                       size_t *out_workspace_bytes);
  /* Required. Compute. Buffers are host-owned, 64-byte aligned, with 64 bytes of
   * readable slack after each; workspace has the size reshape asked for. Called only
   * after a successful reshape. May run concurrently with run() of other kernels. */
  QhStatus *(*run)(void *kernel, const QhHostApi *host, const QhRunContext *ctx,
                   const QhTensorView *inputs, size_t n_inputs, QhTensorView *outputs,
                   size_t n_outputs, void *workspace, size_t workspace_bytes);
  /* Required. Free the kernel; NULL is a no-op. */
  void (*destroy)(void *kernel);
  /* Required when a layout is QH_LAYOUT_OPAQUE (NULL otherwise): convert one tensor
   * between NCHW and the kernel's layout; out is host-allocated with the size reshape
   * reported. */
  QhStatus *(*reorder_to_nchw)(void *kernel, const QhHostApi *host, const QhTensorView *in,
                               QhTensorView *out);
  QhStatus *(*reorder_from_nchw)(void *kernel, const QhHostApi *host, const QhTensorView *in,
                                 QhTensorView *out);
} QhKernelOps;

/* One node-unit pattern over the QDQ graph: DequantizeLinear on the inputs, the ops
 * in forward order, QuantizeLinear on the output (conv + relu, conv + add(x) + relu,
 * add, pooling, concat, fixed-qparams activations). */

/* QhLoweringPattern.flags. Added in ABI 1.1.
 * QH_PATTERN_THROUGH_SHARED_QDQ: between two consecutive ops of the pattern the host
 * also matches a QuantizeLinear -> DequantizeLinear pair whose qparams (dtype, scale,
 * zero point, axis, range) equal the unit's output qparams, when nothing else reads
 * the pair's tensors. This is how PyTorch's x86 BackendConfig quantizes Conv -> ReLU6:
 * the Clip shares its input's qparams, so the conv's output is quantized, dequantized
 * and clipped on the same grid. The unit's nodes are the float ops only; the pair is
 * removed with the unit. Use it only for ops whose result is unchanged when the
 * rounding in between is dropped (Relu, Clip: round() is monotonic, so clamping before
 * or after one rounding on the same grid gives the same integer); the kernel then
 * rounds once, at the end. A plugin built against ABI 1.0 may not set it. */
#define QH_PATTERN_THROUGH_SHARED_QDQ 0x1u
/* QH_PATTERN_FLOAT_EXTRA_INPUTS (ABI 1.2): the extra inputs of the pattern's later ops
 * (extra_inputs_mask) may be computed float values that no DequantizeLinear produces;
 * they enter the unit as they are, role QH_ROLE_NOT_OBSERVED, input_qparams NULL. Without
 * the flag such an input makes the chain no QDQ unit. For units of ONNX Runtime's dynamic
 * format (MatMulInteger -> Cast -> Mul by the scale DynamicQuantizeLinear computed), whose
 * root inputs are declared QH_ROLE_NOT_OBSERVED in input_roles for the same reason. */
#define QH_PATTERN_FLOAT_EXTRA_INPUTS 0x2u
/* QH_PATTERN_OP_REQUANTIZE (ABI 1.2): the pseudo-op of a requantize pattern, whose ops
 * are this one name (n_ops 1, no flags, no extra inputs). It matches no float op but a
 * DequantizeLinear -> QuantizeLinear step that moves a tensor from one grid to another
 * (the requantize a plugin inserts in post_convert, or the Q/DQ an edge gets when it
 * needs another grid than its producer's output, e.g. an input of an Add whose inputs
 * share one scale). The unit: nodes[0] the QuantizeLinear; inputs[0] the integer tensor
 * before the DequantizeLinear, input_qparams[0] the DequantizeLinear's, role
 * QH_ROLE_ACTIVATION; outputs[0] the QuantizeLinear's integer output with its qparams.
 * The two qparams may differ in dtype, scale, zero point and axis (either side per
 * tensor or per channel); the kernel declines (accept or create) what it cannot run.
 * The host's reference computes y = saturate(round_half_even(f32(f32(x - zx) * sx) / sy)
 * + zy); a kernel computing exactly that is bit-exact. Hosts older than this name never
 * match it: the step runs on the host's path. */
#define QH_PATTERN_OP_REQUANTIZE "qhost:Requantize"

/* The longest lowering pattern (Added in ABI 1.2): a pattern whose abi_version is 1.2 or
 * later may have up to four ops, so that a kernel can claim ONNX Runtime's dynamic unit
 * with its bias (MatMulInteger -> Cast -> Mul -> Add). Patterns built against 1.0 or 1.1
 * keep QH_PATTERN_MAX_OPS (3); the host refuses longer ones at load. Declarative
 * BackendConfig patterns (backend-config.h) stay at QH_PATTERN_MAX_OPS. QhNodeUnit.nodes
 * holds n_nodes entries either way. */
#define QH_LOWERING_PATTERN_MAX_OPS 4

typedef struct QhLoweringPattern {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *id;         /* unique within the plugin ("conv_relu") */
  const char *const *ops; /* ONNX op types, 1..QH_PATTERN_MAX_OPS (1..QH_LOWERING_PATTERN_MAX_OPS since ABI 1.2) */
  size_t n_ops;
  uint32_t extra_inputs_mask; /* as QhBackendPatternConfig.extra_inputs_mask */
  const int32_t *input_roles; /* roles of the first op's input slots; NULL as in backend-config.h */
  size_t n_input_roles;
  uint32_t flags;             /* QH_PATTERN_THROUGH_SHARED_QDQ (ABI 1.1), QH_PATTERN_FLOAT_EXTRA_INPUTS (1.2) or 0 */
  const QhKernelOps *kernel;  /* required */
  /* Optional (NULL: accept every match). Accept the unit (return NULL) or decline it
   * with QH_ERR_UNSUPPORTED and the reason (shown by inspect and bench); any other
   * error stops the job. graph and unit: borrowed for the call. */
  QhStatus *(*accept)(void *instance, const QhHostApi *host, const QhGraphView *graph,
                      const QhNodeUnit *unit);
} QhLoweringPattern;

typedef struct QhLoweringOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* Tried in order; the first pattern that matches and accepts a unit wins. */
  const QhLoweringPattern *const *patterns;
  size_t n_patterns;
} QhLoweringOps;

/* ---- Deploy: the backend's own artefact ---- */
typedef struct QhDeployOps {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *description; /* one line: what the artefact is */
  /* Required. Write the artefact for the QDQ `graph` (borrowed) through
   * host->artifact_write (and, since ABI 1.1, artifact_write_model and
   * artifact_source_digest); the host renames the directory into place on success and
   * removes it on error. Since ABI 1.2 the graph's qparams are read with
   * host->qparams_get (the host reads the Q/DQ nodes) and the data the plugin attached
   * while quantizing with host->metadata_get. */
  QhStatus *(*deploy)(void *instance, const QhHostApi *host, const QhGraphView *graph,
                      QhArtifact *artifact);
} QhDeployOps;

/* ---- Passes after calibration and after conversion (Added in ABI 1.2) ---- */
typedef struct QhPassOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* Optional (NULL: no such pass). Called by `qhost quantize` after the observers'
   * shards are merged, the qparams computed and refine has run, before conversion.
   * graph: the float graph, borrowed for the call. May read and change qparams
   * (host->qparams_get / qparams_set), replace float weights and biases
   * (host->constant_set) and attach data for deploy (host->metadata_set). Every change
   * is validated as it is made, like an annotation; a refused change fails the
   * quantize with one error naming the plugin and the node, even when the plugin drops
   * the status it got. Accepted changes are listed in the quantize report with the
   * plugin's reason. */
  QhStatus *(*post_calibration)(void *instance, const QhHostApi *host, QhGraphView *graph);
  /* Optional (NULL: no such pass). Called once the model is converted to Q/DQ form,
   * before the report and the file are written. graph: the QDQ graph, borrowed. May
   * read qparams (from the Q/DQ nodes, host->qparams_get), rewrite the graph with the
   * graph_* / node_* rewrite functions (insert a requantize step, fold a pair) and
   * attach metadata. Afterwards the host checks the graph: topological order, the same
   * graph inputs and outputs (names, dtypes, shapes), every QuantizeLinear and
   * DequantizeLinear with constant, positive, finite scales and a zero point of an
   * integer type, and shapes inferable for every node; a failure names the plugin and
   * the node, and nothing is written. */
  QhStatus *(*post_convert)(void *instance, const QhHostApi *host, QhGraphView *graph);
} QhPassOps;

/* ---- Partitions: whole-subgraph offload (Added in ABI 1.2) ----
 *
 * ONNX Runtime's GetCapability/Compile and TFLite's delegate partitions for qhost.
 * The host offers the plugin the quantized graph as units of one op each (QhNodeUnit:
 * nodes[0] the op, its inputs before their DequantizeLinears, its outputs after their
 * QuantizeLinears, tensors with planned shapes and qparams; pattern_id NULL). The
 * plugin claims partitions: sets of op nodes that are connected (through their own
 * edges, a Q -> DQ pair between two of them included), convex (no path leaves the set
 * and re-enters it) and quantized at the boundary (every computed value entering comes
 * through a DequantizeLinear, every value leaving goes through a QuantizeLinear). The
 * host checks every claim and refuses the whole lowering on the first bad one with one
 * error naming plugin, partition and node. Each accepted partition is compiled once
 * and run as one kernel on its integer inputs and outputs; the Q/DQ pairs inside are
 * the plugin's business (it may keep opaque layouts and any precision inside). Claimed
 * nodes are taken before the per-unit lowering patterns are tried; the patterns see
 * the rest of the graph. */

/* One claim, written by QhPartitionOps.claim. */
typedef struct QhPartitionClaim {
  uint32_t abi_version;
  uint32_t struct_size;
  /* 1..64 printable ASCII characters, unique among the claims; shown in inspect,
   * bench coverage and every error about the partition. Copied by the host. */
  const char *name;
  /* The op nodes (ids of the graph claim received; any order, no Q/DQ nodes: the host
   * takes the Q/DQ nodes between claimed ops with them). Copied by the host. */
  const uint32_t *nodes;
  size_t n_nodes;
} QhPartitionClaim;

/* An accepted partition as compile sees it. Everything is borrowed for the call. */
typedef struct QhPartition {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *name;  /* the claim's name */
  uint32_t index;    /* its position among the accepted claims */
  uint32_t flags;    /* 0 */
  /* The claimed op nodes in topological order, and the unit offered for each. */
  const uint32_t *nodes;
  const QhNodeUnit *const *units;
  size_t n_nodes;
  /* The integer values entering the partition (each before its DequantizeLinear; a
   * value read by several claimed nodes appears once), in the order run receives them,
   * and their tensors: dtype, layout (QhPartitionOps.io_layout for 4-D tensors,
   * QH_LAYOUT_ANY otherwise), rank, dims in that layout's order, qparams; data NULL.
   * Weights and biases are not inputs: read them with host->value_data. */
  const uint32_t *inputs;
  const QhTensorView *input_tensors;
  size_t n_inputs;
  /* The integer values leaving it (each written by a QuantizeLinear of a claimed node's
   * output and read outside the partition or a graph output), in the order run writes
   * them, with their tensors as above. */
  const uint32_t *outputs;
  const QhTensorView *output_tensors;
  size_t n_outputs;
} QhPartition;

typedef struct QhPartitionOps {
  uint32_t abi_version;
  uint32_t struct_size;
  /* The engine's id ("npu_subgraph"); shown in bench coverage as the kernel. */
  const char *id;
  /* The layout of the 4-D host buffers at the partition's boundary: QH_LAYOUT_NCHW
   * (or QH_LAYOUT_ANY, the same) or QH_LAYOUT_NHWC (the host transposes at the
   * boundary). QH_LAYOUT_OPAQUE is refused here: opaque layouts live inside. */
  int32_t io_layout;
  uint32_t flags; /* 0 */
  /* Required. Offer: units (one per op node of the QDQ graph the host may hand over,
   * topological order; borrowed for the call). Write the claims to *out_claims and
   * their count to *out_n_claims (0: claim nothing). The claims array and what it
   * points to belong to the plugin and must stay valid until the plugin's next
   * callback; the host copies them before making one. Errors: any status stops the
   * lowering with the plugin's message. */
  QhStatus *(*claim)(void *instance, const QhHostApi *host, const QhGraphView *graph,
                     const QhNodeUnit *const *units, size_t n_units,
                     const QhPartitionClaim **out_claims, size_t *out_n_claims);
  /* Required. Compile one accepted partition, once (graph borrowed for the call: read
   * weights, qparams and attributes now). *out_compiled owned by the plugin until
   * destroy. Errors: QH_ERR_UNSUPPORTED leaves the partition's nodes to the per-unit
   * patterns and the host (inspect shows the reason); any other status stops the
   * lowering. */
  QhStatus *(*compile)(void *instance, const QhHostApi *host, const QhGraphView *graph,
                       const QhPartition *partition, void **out_compiled);
  /* Required. As QhKernelOps.reshape for the partition's inputs and outputs: fill
   * every output's dtype, layout, rank and dims and the workspace size. The host checks
   * them against the graph's. Called right after compile with the planned shapes (an
   * error, or outputs other than the graph's, declines the partition for these shapes:
   * its nodes go back to the patterns and the host), at plan time and when shapes
   * change. */
  QhStatus *(*reshape)(void *compiled, const QhHostApi *host, const QhTensorView *inputs,
                       size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                       size_t *out_workspace_bytes);
  /* Required. Run the partition: inputs and outputs are host buffers (64-byte aligned,
   * 64 bytes of slack, checked) in io_layout, with qparams; workspace as reshape asked.
   * May run concurrently with other kernels and partitions, never with itself. */
  QhStatus *(*run)(void *compiled, const QhHostApi *host, const QhRunContext *ctx,
                   const QhTensorView *inputs, size_t n_inputs, QhTensorView *outputs,
                   size_t n_outputs, void *workspace, size_t workspace_bytes);
  /* Required. Free a compiled partition; NULL is a no-op. */
  void (*destroy)(void *compiled);
} QhPartitionOps;

/* ---- The descriptor ---- */
typedef struct QhPluginDesc {
  /* Frozen: the first two members are the same in every ABI major. */
  uint32_t abi_version; /* QH_ABI_VERSION of the SDK the plugin was built with */
  uint32_t struct_size; /* sizeof(QhPluginDesc) in that SDK */
  /* Required, static storage, UTF-8. The host copies them at load. */
  const char *name;        /* [a-z][a-z0-9_]{0,31}; the file is libqhost-<name>.so */
  const char *version;     /* the plugin's own version, 1..64 printable characters */
  const char *description; /* one line, 1..256 bytes */
  uint32_t flags;          /* 0 */
  /* ---- Members from here on may be missing in a shrunk descriptor; defaults: NULL/0 ---- */
  /* Backend options (--backend-opt KEY=VALUE). The host validates user values against
   * these declarations and passes every declared option (user value or default) to
   * instance_create. */
  const QhOptionDecl *const *options;
  size_t n_options;
  /* Optional, with instance_destroy (both or neither; NULL: the instance is NULL).
   * options: borrowed, one per declared option in declaration order. *out_instance
   * owned by the plugin until instance_destroy. Heavy set-up (engines, thread pools)
   * happens here, never in the entry point. */
  QhStatus *(*instance_create)(const QhHostApi *host, const QhInstanceInfo *info,
                               const QhOption *options, size_t n_options,
                               void **out_instance);
  void (*instance_destroy)(void *instance);
  /* Callback groups; NULL = not supplied. */
  const QhTransformOps *transform;
  const QhBackendConfig *backend_config;
  const QhAnnotateOps *annotate;
  const QhObserverOps *const *observers;
  size_t n_observers;
  const QhRefineOps *refine;
  const QhReferenceNumericsOps *reference_numerics;
  const QhLoweringOps *lowering;
  const QhDeployOps *deploy;
  /* Added in ABI 1.2 */
  const QhPassOps *passes; /* post_calibration and post_convert */
  const QhPartitionOps *partitions; /* whole-subgraph offload */
} QhPluginDesc;

/* The smallest struct_size the host accepts: everything up to and including flags. */
#define QH_PLUGIN_DESC_MIN_SIZE (offsetof(QhPluginDesc, flags) + sizeof(uint32_t))

#ifdef __cplusplus
}
#endif

#endif
