/* QhHostApi: the table of host functions handed to a plugin's entry point.
 *
 * The plugin reaches the host only through this table (it links no host symbol), so a
 * plugin built against SDK 1.N runs in every 1.M host with M >= N. The table lives as
 * long as the process; the plugin may keep the pointer.
 *
 * APPEND ONLY. Never remove, reorder or retype a member. The first five members are
 * the frozen base: their offsets are the same in every ABI major, so a plugin can
 * always report "built for ABI X, host is Y" (tests/abi/frozen-layout.c asserts them).
 * A retired function keeps its slot and returns QH_ERR_DEPRECATED; no slot is NULL.
 *
 * Conventions for every function below:
 *  - Functions returning QhStatus * return NULL on success. On error they leave every
 *    out-parameter untouched and return a status the caller owns (free it with
 *    status_free, or return it to the host from a callback).
 *  - `graph` is a handle the host passed to the current callback. It is borrowed: it
 *    and every pointer obtained from it (names, attribute arrays, constant data) are
 *    valid only until that callback returns. Never cache them.
 *  - Node and value ids are uint32_t indices below graph_node_count /
 *    graph_value_count. An id out of range, or a removed node, gives
 *    QH_ERR_INVALID_ARGUMENT (or QH_INVALID_ID / NULL from the query functions).
 *  - Threading: unless a function says "any thread", call it only on the thread that
 *    called the current callback.
 *
 * Since: ABI 1.0. Members added later sit under an "Added in ABI 1.N" marker; a plugin
 * that also runs in older hosts checks QH_HAS_FIELD(host, QhHostApi, member) first. */
#ifndef QHOST_HOST_API_H
#define QHOST_HOST_API_H

#include <stddef.h>
#include <stdint.h>

#include "qhost/abi.h"
#include "qhost/status.h"
#include "qhost/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A graph as a plugin sees it: opaque, checked by the host on every call. */
typedef struct QhGraphView QhGraphView;
/* A growable byte buffer owned by the host (observer state, deploy blobs). */
typedef struct QhBuffer QhBuffer;
/* The output directory of a deploy step, owned by the host. */
typedef struct QhArtifact QhArtifact;
/* The execution context of one kernel run (thread pool), owned by the host. */
typedef struct QhRunContext QhRunContext;

/* value_flags bits */
#define QH_VALUE_GRAPH_INPUT 0x1u  /* fed by the caller */
#define QH_VALUE_GRAPH_OUTPUT 0x2u /* a model output */
#define QH_VALUE_CONSTANT 0x4u     /* an initializer: value_data gives its bytes */

/* node attribute types (ONNX AttributeProto.AttributeType), from node_attr_type */
#define QH_ATTR_NONE 0
#define QH_ATTR_FLOAT 1
#define QH_ATTR_INT 2
#define QH_ATTR_STRING 3
#define QH_ATTR_TENSOR 4
#define QH_ATTR_FLOATS 6
#define QH_ATTR_INTS 7
#define QH_ATTR_STRINGS 8

/* annotation node flags (annotation_set_node_flags) */
#define QH_ANNOTATION_ANNOTATED 0x1u        /* PT2E's _annotated: later annotators skip it */
#define QH_ANNOTATION_NO_IMPLICIT_SHARING 0x2u /* PT2E's allow_implicit_sharing = False */

/* where a resolved qconfig came from (qconfig_for_node) */
#define QH_QCONFIG_BACKEND_DEFAULT 1 /* the backend's default mapping */
#define QH_QCONFIG_USER 2            /* an entry of the user's --config */
#define QH_QCONFIG_EXCLUDED 3        /* the user mapped this node to null: leave it float */

/* cpu_features bits */
#define QH_CPU_SSE41 (1ull << 0)
#define QH_CPU_AVX2 (1ull << 1)
#define QH_CPU_FMA (1ull << 2)
#define QH_CPU_AVX512F (1ull << 3)
#define QH_CPU_AVX512BW (1ull << 4)
#define QH_CPU_AVX512VL (1ull << 5)
#define QH_CPU_AVX512VNNI (1ull << 6)
#define QH_CPU_AVXVNNI (1ull << 7)
#define QH_CPU_AVX512VBMI (1ull << 8) /* vpermi2b: byte tables (Added in ABI 1.2) */
/* AMX-TILE and AMX-INT8 (tdpbusd on tiles), set only where the OS also granted this process
 * the tile data state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, which the host requests once
 * at detection). The tile configuration (ldtilecfg) is per thread: a plugin loads its own
 * on every worker thread that uses tiles, as other code in the process (oneDNN) may have
 * loaded another. (Added in ABI 1.2) */
#define QH_CPU_AMXINT8 (1ull << 9)

/* artifact_write_model flags (Added in ABI 1.1) */
#define QH_MODEL_STRIP_QDQ 0x1u /* the deploy model: Q/DQ removed, weights dequantized */

/* A task of parallel_for: called once per index in [0, n) on some worker. */
typedef void (*QhParallelTaskFn)(void *user_data, size_t index, uint32_t worker);

typedef struct QhHostApi {
  /* ======== Frozen base: identical in every ABI major. ======== */
  uint32_t abi_version; /* the host's QH_ABI_VERSION */
  uint32_t struct_size; /* sizeof(QhHostApi) in the host */

  /* A new status with `code` (QH_ERR_*, not QH_OK) and a one-line UTF-8 message.
   *   message [in] copied; NULL reads as "(no message)"; invalid UTF-8 is replaced.
   * Ownership: the caller owns the result (return it from a callback, or status_free).
   * Threading: any thread. Errors: never fails; out of memory aborts the host. */
  QhStatus *(*status_new)(int32_t code, const char *message);
  /* Free a status; NULL is a no-op. Threading: any thread. */
  void (*status_free)(QhStatus *status);
  /* Log one line at QH_LOG_* level; the host tags it with the plugin's name and shows
   * it according to -v/--quiet. message [in] copied. Threading: any thread. */
  void (*log)(int32_t level, const char *message);
  /* ======== End of the frozen base. ======== */

  /* ---- Statuses ---- */
  /* The code of a status (QH_OK for NULL). Threading: any thread. */
  int32_t (*status_code)(const QhStatus *status);
  /* The message of a status ("" for NULL); borrowed until the status is freed.
   * Threading: any thread. */
  const char *(*status_message)(const QhStatus *status);
  /* Like status_new, and names a node of `graph`: the host prints "node 'NAME' (OP): "
   * before the message. An invalid node id is ignored. Threading: any thread. */
  QhStatus *(*status_new_for_node)(const QhGraphView *graph, uint32_t node, int32_t code,
                                   const char *message);
  /* Add a finding to the current report (quantize report, plugin-check) at QH_LOG_*
   * level, e.g. why a node was adjusted. message [in] copied. */
  void (*report)(int32_t level, const char *message);

  /* ---- Host facts ---- */
  /* The host's version string ("0.1.0"); static. Threading: any thread. */
  const char *(*host_version)(void);
  /* QH_CPU_* bits of the CPU the host runs on, minus any bits the user masked out with
   * QHOST_CPU_DISABLE (so kernel paths can be tested on one machine). Threading: any. */
  uint64_t (*cpu_features)(void);

  /* ---- Graph queries (any callback that receives a graph) ---- */
  /* Number of node ids; ids of removed nodes stay taken (node_is_live says 0). */
  uint32_t (*graph_node_count)(const QhGraphView *graph);
  /* Number of value ids. */
  uint32_t (*graph_value_count)(const QhGraphView *graph);
  /* Graph inputs (values fed by the caller, initializers excluded), in model order. */
  uint32_t (*graph_input_count)(const QhGraphView *graph);
  uint32_t (*graph_input)(const QhGraphView *graph, uint32_t index); /* QH_INVALID_ID if out of range */
  uint32_t (*graph_output_count)(const QhGraphView *graph);
  uint32_t (*graph_output)(const QhGraphView *graph, uint32_t index);
  /* Opset version imported for `domain` ("" = ONNX), or -1. */
  int64_t (*graph_opset)(const QhGraphView *graph, const char *domain);

  /* 1 when `node` is a node id in range that was not removed, else 0. */
  int32_t (*node_is_live)(const QhGraphView *graph, uint32_t node);
  /* Strings of a node; NULL for an invalid id. Borrowed (see conventions). */
  const char *(*node_op_type)(const QhGraphView *graph, uint32_t node);
  const char *(*node_domain)(const QhGraphView *graph, uint32_t node);
  const char *(*node_name)(const QhGraphView *graph, uint32_t node);
  /* Id of the live node with this name, or QH_INVALID_ID. */
  uint32_t (*node_find)(const QhGraphView *graph, const char *name);
  /* Input / output slots; node_input gives QH_INVALID_ID for an omitted optional input
   * or a slot out of range. */
  uint32_t (*node_input_count)(const QhGraphView *graph, uint32_t node);
  uint32_t (*node_input)(const QhGraphView *graph, uint32_t node, uint32_t slot);
  uint32_t (*node_output_count)(const QhGraphView *graph, uint32_t node);
  uint32_t (*node_output)(const QhGraphView *graph, uint32_t node, uint32_t slot);
  /* QH_ATTR_* type of the attribute `name`, QH_ATTR_NONE when absent. */
  int32_t (*node_attr_type)(const QhGraphView *graph, uint32_t node, const char *name);
  /* Typed attribute reads. Errors: QH_ERR_NOT_FOUND when absent,
   * QH_ERR_INVALID_ARGUMENT when of another type or the node id is invalid.
   * Arrays and strings are borrowed. */
  QhStatus *(*node_attr_int)(const QhGraphView *graph, uint32_t node, const char *name,
                             int64_t *out_value);
  QhStatus *(*node_attr_float)(const QhGraphView *graph, uint32_t node, const char *name,
                               float *out_value);
  QhStatus *(*node_attr_string)(const QhGraphView *graph, uint32_t node, const char *name,
                                const char **out_value);
  QhStatus *(*node_attr_ints)(const QhGraphView *graph, uint32_t node, const char *name,
                              const int64_t **out_values, size_t *out_count);
  QhStatus *(*node_attr_floats)(const QhGraphView *graph, uint32_t node, const char *name,
                                const float **out_values, size_t *out_count);

  /* Id of the value with this name, or QH_INVALID_ID. */
  uint32_t (*value_find)(const QhGraphView *graph, const char *name);
  /* Name (borrowed), or NULL for an invalid id. */
  const char *(*value_name)(const QhGraphView *graph, uint32_t value);
  /* QH_DTYPE_* (QH_DTYPE_UNDEFINED when unknown or the id is invalid). */
  int32_t (*value_dtype)(const QhGraphView *graph, uint32_t value);
  /* Shape: *out_rank = -1 when unknown, else the rank, and min(rank, capacity) dims
   * are written; a symbolic dimension reads -1. Errors: QH_ERR_INVALID_ARGUMENT for
   * an invalid id. */
  QhStatus *(*value_shape)(const QhGraphView *graph, uint32_t value, int64_t *out_dims,
                           size_t capacity, int32_t *out_rank);
  /* QH_VALUE_* bits; 0 for an invalid id. */
  uint32_t (*value_flags)(const QhGraphView *graph, uint32_t value);
  /* The node producing the value, or QH_INVALID_ID (graph input, constant). */
  uint32_t (*value_producer)(const QhGraphView *graph, uint32_t value);
  /* Consumers of a value: live nodes reading it, one entry per (node, input slot), in
   * node id order. */
  uint32_t (*value_consumer_count)(const QhGraphView *graph, uint32_t value);
  QhStatus *(*value_consumer)(const QhGraphView *graph, uint32_t value, uint32_t index,
                              uint32_t *out_node, uint32_t *out_slot);
  /* The bytes of a constant (little-endian, row-major, dtype value_dtype). Borrowed.
   * Errors: QH_ERR_INVALID_ARGUMENT when the value is not a constant. */
  QhStatus *(*value_data)(const QhGraphView *graph, uint32_t value, const void **out_data,
                          size_t *out_nbytes);

  /* ---- Graph rewrites (only inside QhTransformOps.transform_for_annotation;
   *      QH_ERR_INVALID_STATE elsewhere) ---- */
  /* A new computed value. name [in] copied; NULL picks a unique name. Errors:
   * QH_ERR_INVALID_ARGUMENT when the name is taken. */
  QhStatus *(*graph_add_value)(QhGraphView *graph, const char *name, uint32_t *out_value);
  /* A new constant (initializer). data [in] copied, nbytes must equal the element count
   * times the element size; dims [in] copied, rank <= QH_MAX_RANK. */
  QhStatus *(*graph_add_constant)(QhGraphView *graph, const char *name, int32_t dtype,
                                  int32_t rank, const int64_t *dims, const void *data,
                                  size_t nbytes, uint32_t *out_value);
  /* A new node. Strings and id arrays are copied; QH_INVALID_ID marks an omitted
   * optional input. Each output must be a value without a producer. name NULL picks
   * a unique name. */
  QhStatus *(*graph_add_node)(QhGraphView *graph, const char *op_type, const char *domain,
                              const char *name, const uint32_t *inputs, size_t n_inputs,
                              const uint32_t *outputs, size_t n_outputs, uint32_t *out_node);
  /* Remove a node; its outputs lose their producer. Its id stays taken. */
  QhStatus *(*node_remove)(QhGraphView *graph, uint32_t node);
  /* Point input `slot` of `node` at `value` (QH_INVALID_ID to omit it). */
  QhStatus *(*node_set_input)(QhGraphView *graph, uint32_t node, uint32_t slot, uint32_t value);
  /* Make every consumer of `old_value`, and the graph outputs, use `new_value`. */
  QhStatus *(*value_replace_uses)(QhGraphView *graph, uint32_t old_value, uint32_t new_value);
  /* Set or replace attributes; name and arrays are copied. */
  QhStatus *(*node_set_attr_int)(QhGraphView *graph, uint32_t node, const char *name,
                                 int64_t value);
  QhStatus *(*node_set_attr_float)(QhGraphView *graph, uint32_t node, const char *name,
                                   float value);
  QhStatus *(*node_set_attr_string)(QhGraphView *graph, uint32_t node, const char *name,
                                    const char *value);
  QhStatus *(*node_set_attr_ints)(QhGraphView *graph, uint32_t node, const char *name,
                                  const int64_t *values, size_t count);
  QhStatus *(*node_set_attr_floats)(QhGraphView *graph, uint32_t node, const char *name,
                                    const float *values, size_t count);

  /* ---- Annotation (only inside QhAnnotateOps.annotate; QH_ERR_INVALID_STATE elsewhere) ----
   * Setting a spec twice replaces it. The host validates the spec at once (ids in
   * range, known dtype/qscheme, quant_min <= quant_max inside the dtype's range,
   * zero point inside the range, scale > 0 and finite, ch_axis < rank, a known
   * observer name) and again after annotate returns (shared targets annotated, no
   * sharing cycle, derived sources annotated); errors name the node and the field. */
  /* The spec of input `slot` of `node` (the edge from the input's producer into node). */
  QhStatus *(*annotation_set_input_spec)(QhGraphView *graph, uint32_t node, uint32_t slot,
                                         const QhQuantSpec *spec);
  /* The spec of output `slot` of `node`. */
  QhStatus *(*annotation_set_output_spec)(QhGraphView *graph, uint32_t node, uint32_t slot,
                                          const QhQuantSpec *spec);
  /* Set QH_ANNOTATION_* flags on a node (replacing its flags). */
  QhStatus *(*annotation_set_node_flags)(QhGraphView *graph, uint32_t node, uint32_t flags);
  /* QH_ANNOTATION_* flags of a node; 0 when unannotated or invalid. */
  uint32_t (*annotation_node_flags)(const QhGraphView *graph, uint32_t node);
  /* QH_SPEC_* kind of the spec on an edge or output, 0 when there is none. */
  int32_t (*annotation_spec_kind)(const QhGraphView *graph, const QhEdgeRef *edge);
  /* The user's resolved qconfig for `node` (the backend default layered with --config,
   * as docs/design.md describes), so an imperative annotator honours exclusions and
   * overrides. role is QH_ROLE_ACTIVATION or QH_ROLE_WEIGHT. *out_spec [out]: the
   * caller sets abi_version and struct_size; the host fills the fields that size
   * covers; its strings and arrays are borrowed until the callback returns.
   * *out_source: QH_QCONFIG_*. With QH_QCONFIG_EXCLUDED, out_spec is untouched.
   * Errors: QH_ERR_NOT_FOUND when the mapping has no entry for the node or the role;
   * QH_ERR_INVALID_STATE outside annotate. */
  QhStatus *(*qconfig_for_node)(const QhGraphView *graph, uint32_t node, int32_t role,
                                QhQuantSpec *out_spec, int32_t *out_source);

  /* ---- Quantization parameters (inside QhRefineOps.refine and, since ABI 1.2,
   *      QhPassOps.post_calibration, QhPassOps.post_convert and QhDeployOps.deploy;
   *      QH_ERR_INVALID_STATE elsewhere) ---- */
  /* The qparams computed for an edge or output. *out [out]: caller sets abi_version
   * and struct_size; the host sets the scalars, count, and scale/zero_point to arrays
   * borrowed until the callback returns. Errors: QH_ERR_NOT_FOUND when that edge is
   * not quantized.
   * On a QDQ graph (post_convert, deploy) the host reads them from the model: for
   * input `slot` of a node, the DequantizeLinear producing that input; for output
   * `slot`, the QuantizeLinear reading that output (the first, in node order); the
   * range is the dtype's, or the narrower one `qhost quantize` recorded in the
   * file's metadata. A malformed Q/DQ (non-constant or non-positive scale) is
   * QH_ERR_INVALID_ARGUMENT naming the node. */
  QhStatus *(*qparams_get)(const QhGraphView *graph, const QhEdgeRef *edge, QhQParams *out);
  /* Replace the qparams of an edge or output (refine and post_calibration only). qparams [in] copied;
   * reason [in] copied, one line for the report. The host re-validates (dtype range,
   * scale > 0 and finite, count matching the channel dimension, every edge sharing the
   * same observer gets the same change) and reports every change with the reason. */
  QhStatus *(*qparams_set)(QhGraphView *graph, const QhEdgeRef *edge, const QhQParams *qparams,
                           const char *reason);

  /* ---- Buffers and artefacts ---- */
  /* Append `size` bytes (copied) to a host buffer handed to a callback. */
  QhStatus *(*buffer_append)(QhBuffer *buffer, const void *data, size_t size);
  /* Write a file of the deploy artefact. relative_path [in]: UTF-8, '/'-separated,
   * no "..", not absolute; parent directories are created. data [in] copied. The host
   * writes into a temporary directory renamed into place only when deploy succeeds. */
  QhStatus *(*artifact_write)(QhArtifact *artifact, const char *relative_path,
                              const void *data, size_t size);

  /* ---- Threads (inside QhKernelOps.run) ---- */
  /* Number of workers of the host's pool for this run (>= 1). */
  uint32_t (*run_thread_count)(const QhRunContext *ctx);
  /* Call task(user_data, i, worker) for every i in [0, n) on the host's pool and
   * return when all are done; worker < run_thread_count, and no two tasks run at
   * once under one worker number. worker is the number of the pool's thread, which
   * normally keeps it from call to call (the OpenMP runtime may renumber threads when
   * the team's size changes): work a plugin gives the same worker every call then stays
   * in one core's cache (a matter of speed; results must not depend on it). Tasks must
   * not call parallel_for themselves. A plugin that runs its own threads (OpenMP,
   * pthreadpool) does not use this and sizes its pool from run_thread_count. */
  QhStatus *(*parallel_for)(const QhRunContext *ctx, size_t n, QhParallelTaskFn task,
                            void *user_data);

  /* Added in ABI 1.1 */
  /* ---- Deploy (inside QhDeployOps.deploy: only it receives an artefact) ---- */
  /* Write `graph` as an ONNX model file of the artefact. relative_path [in]: the rules
   * of artifact_write (UTF-8, '/'-separated, no "..", not absolute); the file appears
   * whole or not at all, and counts towards the artefact's size limit. graph: the
   * handle deploy received (borrowed). flags:
   *   0                   the graph as it is (the QDQ model).
   *   QH_MODEL_STRIP_QDQ  the float deploy model a vendor compiler takes: every
   *                       QuantizeLinear -> DequantizeLinear pair on an activation is
   *                       removed (its consumers read the float tensor), and each
   *                       constant that reaches the graph through DequantizeLinear
   *                       (weights, biases) is replaced by its dequantized float values,
   *                       (q - zero_point) * scale: clipped to the quantized range and
   *                       rounded as the QDQ model has them. A Q -> DQ chain on a float
   *                       constant is folded the same way (QuantizeLinear rounds half to
   *                       even and saturates). Initializers nothing reads any more are
   *                       dropped; names of the remaining values and nodes are kept (a
   *                       removed DequantizeLinear that wrote a graph output becomes an
   *                       Identity, so outputs keep their names).
   * Errors: QH_ERR_INVALID_ARGUMENT for an artefact or graph handle the host did not
   * hand out, a bad path, or a flag bit not defined above; QH_ERR_OUT_OF_MEMORY when
   * the artefact would exceed its limit; QH_ERR_IO when the file cannot be written;
   * QH_ERR_INVALID_ARGUMENT or QH_ERR_UNSUPPORTED when the graph cannot be ordered,
   * folded or serialised (the message says why). */
  QhStatus *(*artifact_write_model)(QhArtifact *artifact, const char *relative_path,
                                    const QhGraphView *graph, uint32_t flags);
  /* Lower-case hex SHA-256 (64 characters) of the QDQ model file the deploy was started
   * from (`qhost deploy` hashes the bytes it read), for the package's manifest. NULL
   * when there is no such file (plugin-check's built-in graphs) or the artefact handle
   * is invalid. Borrowed: valid until deploy returns. */
  const char *(*artifact_source_digest)(const QhArtifact *artifact);

  /* Added in ABI 1.2 */
  /* ---- Weights (inside QhPassOps.post_calibration only) ---- */
  /* Replace the values of a float constant (a weight or a bias) before conversion
   * quantizes it. data [in] copied: nbytes must equal the constant's size (same dtype
   * QH_DTYPE_FLOAT and shape), every element finite. reason [in] copied, one non-empty
   * line the quantize report shows with the number of elements changed and the largest
   * change. The weight's qparams are not recomputed: set them with qparams_set when the
   * new values need it (conversion clamps to the quantized range). Errors:
   * QH_ERR_INVALID_ARGUMENT naming the node that reads the value (not a float
   * constant, a size mismatch, a NaN or infinity, no reason); QH_ERR_INVALID_STATE
   * outside post_calibration. A refused change also fails the quantize. */
  QhStatus *(*constant_set)(QhGraphView *graph, uint32_t value, const void *data, size_t nbytes,
                            const char *reason);
  /* ---- Plugin data in the QDQ file ---- */
  /* Attach `value` under `key` to the model being quantized (inside annotate, refine,
   * post_calibration and post_convert; QH_ERR_INVALID_STATE elsewhere). The QDQ file
   * stores it in ModelProto.metadata_props as "qhost.<plugin>.<key>", so `qhost deploy`
   * can hand it back (metadata_get). key [in] copied: 1..128 bytes of [A-Za-z0-9_.-];
   * value [in] copied: valid UTF-8 of at most 65536 bytes. Setting a key again
   * replaces its value. Errors: QH_ERR_INVALID_ARGUMENT for a bad key or value. */
  QhStatus *(*metadata_set)(QhGraphView *graph, const char *key, const char *value);
  /* The value this plugin stored under `key` ("qhost.<plugin>.<key>" in the model's
   * metadata_props; any callback that receives a graph, deploy included). *out_value
   * [out] borrowed until the callback returns. Errors: QH_ERR_NOT_FOUND when the model
   * has no such entry; QH_ERR_INVALID_ARGUMENT for a bad key. A plugin reads only its
   * own namespace. */
  QhStatus *(*metadata_get)(const QhGraphView *graph, const char *key, const char **out_value);
} QhHostApi;

#ifdef __cplusplus
}
#endif

#endif
