/* qhost.h: the embedding API of libqhost, in plain C11.
 *
 * An application includes this one header and links -lqhost (pkg-config `qhost`, CMake
 * `find_package(QHost)` then `QHost::qhost`) to load ONNX models, quantize them with a
 * backend plugin, calibrate in shards and merge them, run models on tensors in memory
 * (on the host's reference kernels or on a backend's int8 kernels), time them, write a
 * backend's deploy package, and list and check plugins. The `qhost` runner is a thin
 * shell over exactly these calls. docs/embedding.md has a complete example.
 *
 * Names: everything public is qhost_* / Qhost* / QHOST_*, distinct from the plugin SDK's
 * qh_* / Qh* / QH_* (<qhost/qhost-plugin.h>), so one file may include both. Nothing here
 * needs GLib or any other header beyond <stddef.h> and <stdint.h>.
 *
 * Errors. A function that can fail returns a QhostStatus *: NULL on success, otherwise a
 * status the caller owns and frees with qhost_status_free(), carrying a code
 * (QhostStatusCode) and a one-line message that names the file, plugin or input at
 * fault ("model.onnx: node 'conv1': ..."). On failure no output argument is set (they
 * are left as they were) and no output file is left behind, whole or partial.
 *
 * Ownership. A function named *_new, *_load, *_read or returning an object through an
 * `out` pointer gives the caller an object to free with the matching *_free. Strings
 * returned through `char **` are the caller's, freed with qhost_string_free(). Every
 * `const` pointer argument is borrowed for the call only, unless the function says
 * otherwise. *_free(NULL) is a no-op. Passing NULL where an object is required returns
 * QHOST_STATUS_INVALID_ARGUMENT (it never crashes); using an object after its *_free
 * is undefined behaviour, as for free(3).
 *
 * Closing. qhost_model_close() and qhost_session_close() release an object's memory and
 * plugin early but keep the handle valid: later calls on it return
 * QHOST_STATUS_CLOSED. The handle is still freed with *_free.
 *
 * Threading. Every function may be called from any thread. One object (model, session,
 * options, values) must not be used by two threads at once unless its functions say so;
 * distinct objects may be used concurrently (two sessions run in parallel on two
 * threads). A model may be shared by sessions on several threads once loaded: sessions
 * read it only while they are created. qhost_set_log_level() is process-wide.
 *
 * Versioning (the rules of the plugin ABI, sdk/docs/ABI_RULES.md, applied to this API;
 * SQLite's C API and ONNX Runtime's OrtApi are the models):
 *   - QHOST_API_VERSION is MAJOR * 1000 + MINOR. A release that only adds raises MINOR;
 *     qhost_api_version() says what the loaded library implements, so an application
 *     built against a newer header can check before it calls something new.
 *   - Append only within a major version: functions are added, never removed, renamed,
 *     or given other parameters or meanings; enumerations gain values at the end and
 *     never renumber (a caller must accept codes it does not know); the structs below
 *     (QhostTensor, QhostTensorInfo) are frozen: new data comes through new functions.
 *   - Options are set through functions on an opaque QhostOptions, never a struct, so
 *     new settings are new setters and old binaries keep working.
 *   - libqhost exports nothing but the functions declared here (an export map), and
 *     its soname changes only with MAJOR.
 */
#ifndef QHOST_H
#define QHOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(QHOST_BUILDING_LIBRARY) && defined(__GNUC__)
#define QHOST_API __attribute__((visibility("default")))
#else
#define QHOST_API
#endif

/* ---- version ---- */

#define QHOST_API_VERSION_MAJOR 1
#define QHOST_API_VERSION_MINOR 1
#define QHOST_API_VERSION (QHOST_API_VERSION_MAJOR * 1000 + QHOST_API_VERSION_MINOR)

/* The API version the loaded library implements (QHOST_API_VERSION of its header). */
QHOST_API int qhost_api_version(void);
/* The release, e.g. "0.1.0". Static string; never freed. */
QHOST_API const char *qhost_version_string(void);

/* ---- status ---- */

typedef enum {
  QHOST_STATUS_OK = 0,               /* never carried by a status object: NULL means OK */
  QHOST_STATUS_FAILED = 1,           /* anything not covered below */
  QHOST_STATUS_IO = 2,               /* a file could not be opened, read, written or renamed */
  QHOST_STATUS_PARSE = 3,            /* a file is malformed (protobuf, .npy header, JSON) */
  QHOST_STATUS_INVALID = 4,          /* well-formed but inconsistent (model, qconfig, data) */
  QHOST_STATUS_UNSUPPORTED = 5,      /* valid but outside what qhost or the plugin does */
  QHOST_STATUS_LIMIT = 6,            /* a size bound was hit */
  QHOST_STATUS_NOMEM = 7,            /* an allocation failed */
  QHOST_STATUS_MISMATCH = 8,         /* data does not fit the model: dtype, shape, name */
  QHOST_STATUS_INVALID_ARGUMENT = 9, /* a NULL handle, a bad option value, a bad call */
  QHOST_STATUS_CLOSED = 10,          /* the model or session was closed */
} QhostStatusCode;

typedef struct QhostStatus QhostStatus;

/* The code and the one-line message (borrowed; valid until qhost_status_free). A NULL
 * status reads as QHOST_STATUS_OK and "". */
QHOST_API QhostStatusCode qhost_status_code(const QhostStatus *status);
QHOST_API const char *qhost_status_message(const QhostStatus *status);
QHOST_API void qhost_status_free(QhostStatus *status);

/* Strings the library returns through `char **`. */
QHOST_API void qhost_string_free(char *string);

/* ---- logging ---- */

typedef enum {
  QHOST_LOG_ERROR = 0,
  QHOST_LOG_WARNING = 1, /* the default */
  QHOST_LOG_INFO = 2,
  QHOST_LOG_DEBUG = 3,
} QhostLogLevel;

/* Messages above `level` are not printed. The library logs one line per message on
 * stderr ("qhost: warning: ..."). Process-wide; any thread. */
QHOST_API QhostStatus *qhost_set_log_level(QhostLogLevel level);

/* ---- tensors ---- */

/* Element types; the values are ONNX's TensorProto.DataType codes. */
typedef enum {
  QHOST_DTYPE_FLOAT32 = 1,
  QHOST_DTYPE_UINT8 = 2,
  QHOST_DTYPE_INT8 = 3,
  QHOST_DTYPE_INT32 = 6,
  QHOST_DTYPE_INT64 = 7,
  QHOST_DTYPE_BOOL = 9,
  QHOST_DTYPE_FLOAT16 = 10,
} QhostDType;

#define QHOST_MAX_RANK 8

/* A dense C-order tensor in the caller's memory (inputs) or the library's (outputs).
 * Frozen layout (see Versioning). name: a model input or output name, or NULL to mean
 * "by position"; shape: `rank` dimensions; nbytes must equal the element count times
 * the element size. */
typedef struct {
  const char *name;
  int32_t dtype;          /* a QhostDType */
  int32_t rank;
  const int64_t *shape;
  void *data;
  size_t nbytes;
} QhostTensor;

/* A model input or output as declared. dims[i] is -1 for a symbolic dimension; rank is
 * -1 when the model declares no shape. Frozen layout. */
typedef struct {
  const char *name;
  int32_t dtype;
  int32_t rank;
  int64_t dims[QHOST_MAX_RANK];
} QhostTensorInfo;

/* Size in bytes of one element (0 for an unknown code) and a lower-case name
 * ("float32", ...; "undefined" for an unknown code; static). */
QHOST_API size_t qhost_dtype_size(int32_t dtype);
QHOST_API const char *qhost_dtype_name(int32_t dtype);

/* ---- values: a list of named tensors the library owns ---- */

/* Run outputs and arrays read from files. */
typedef struct QhostValues QhostValues;

QHOST_API size_t qhost_values_count(const QhostValues *values);
/* Tensor i; its name, shape and data point into `values` (borrowed until
 * qhost_values_free). Data is 64-byte aligned. */
QHOST_API QhostStatus *qhost_values_get(const QhostValues *values, size_t index, QhostTensor *out);
QHOST_API void qhost_values_free(QhostValues *values);

/* Read an .npy file (one array, named after nothing: its name is NULL) or an .npz (one
 * array per member, named after it). */
QHOST_API QhostStatus *qhost_values_read_file(const char *path, QhostValues **out);
/* Write values to path: an .npz keyed by name when path ends in ".npz" (every tensor
 * needs a name), else an .npy (exactly one tensor). Atomic: written to a temporary file
 * and renamed. */
QHOST_API QhostStatus *qhost_values_write_file(const QhostValues *values, const char *path);

/* ---- options: the settings every flow reads (opaque; set through functions) ---- */

typedef struct QhostOptions QhostOptions;

QHOST_API QhostStatus *qhost_options_new(QhostOptions **out);
QHOST_API void qhost_options_free(QhostOptions *options);

/* Plugin search and backend (quantize, calibrate, sessions, bench, deploy, plugins,
 * plugin check). The backend is a plugin name or a path containing '/'. Plugins are
 * searched in the paths added here, then in the directory set here, then in
 * QHOST_PLUGIN_PATH, then in the installed directory. Strings are copied. */
QHOST_API QhostStatus *qhost_options_set_backend(QhostOptions *options, const char *name_or_path);
QHOST_API QhostStatus *qhost_options_add_plugin_path(QhostOptions *options, const char *path);
QHOST_API QhostStatus *qhost_options_set_plugin_dir(QhostOptions *options, const char *dir);
/* "KEY=VALUE", validated against the plugin's declared options when it is loaded. */
QHOST_API QhostStatus *qhost_options_add_backend_option(QhostOptions *options, const char *key_value);
/* Worker threads, 1 to 256 (default 1). */
QHOST_API QhostStatus *qhost_options_set_threads(QhostOptions *options, int threads);
/* Draw a progress bar on stderr while calibrating or timing (default off). */
QHOST_API QhostStatus *qhost_options_set_progress(QhostOptions *options, int on);

/* Quantization (quantize, calibrate). Calibration data is a file (.npy with samples
 * along the first axis, a directory of .npy files, or an .npz keyed by input name) or
 * arrays in memory (one per model input, samples along the first axis, named after the
 * input or NULL for a single-input model); setting one clears the other. The arrays are
 * copied. The qconfig (PyTorch's QConfigMapping in JSON, docs/qconfig.md) is a file or
 * a JSON text, layered over the backend's default. */
QHOST_API QhostStatus *qhost_options_set_calibration_file(QhostOptions *options, const char *path);
QHOST_API QhostStatus *qhost_options_set_calibration_tensors(QhostOptions *options,
                                                             const QhostTensor *arrays, size_t count);
QHOST_API QhostStatus *qhost_options_set_qconfig_file(QhostOptions *options, const char *path);
QHOST_API QhostStatus *qhost_options_set_qconfig_json(QhostOptions *options, const char *json);
/* The SQNR probe: an input file (default: the first calibration sample). */
QHOST_API QhostStatus *qhost_options_set_probe_file(QhostOptions *options, const char *path);
/* quantize: write the QDQ model at this default-domain opset (13 to 21; 0, the default:
 * the model's, raised to 21 when an activation or weight is 16-bit). An opset that cannot
 * hold the model's types fails at quantize with a message naming the node. */
QHOST_API QhostStatus *qhost_options_set_opset(QhostOptions *options, int opset);
/* Also write the quantize report as JSON to this file. */
QHOST_API QhostStatus *qhost_options_set_report_file(QhostOptions *options, const char *path);
/* calibrate: only block `index` of `count` contiguous blocks of samples (0 <= index <
 * count <= 100000). count 0 means all samples. */
QHOST_API QhostStatus *qhost_options_set_shard(QhostOptions *options, int index, int count);
/* quantize: merge these calibrate statistics files instead of calibrating. */
QHOST_API QhostStatus *qhost_options_add_stats_file(QhostOptions *options, const char *path);

/* Bench: untimed runs (default 3), timed runs (1 to 100000, default 20), whether the
 * fp32 twin of a QDQ model is timed in the same run (default 1), input data file
 * (default: seeded random data at the declared shapes). */
QHOST_API QhostStatus *qhost_options_set_bench_runs(QhostOptions *options, int warmup, int runs);
QHOST_API QhostStatus *qhost_options_set_bench_fp32(QhostOptions *options, int on);
QHOST_API QhostStatus *qhost_options_set_input_file(QhostOptions *options, const char *path);

/* Dynamic quantization (quantize; API 1.1): qhost_quantize writes ONNX Runtime's dynamic
 * format (DynamicQuantizeLinear + MatMulInteger + the float rescale and bias) for every
 * Gemm or MatMul with a constant weight, as PyTorch 1.13's quantize_dynamic with its
 * default qconfig: activations uint8 [0,255] per call, weights int8 symmetric, per tensor
 * (default) or per output channel (per_channel on). No calibration data, statistics,
 * qconfig or probe may be set; the backend is optional ("x86", "fbgemm" or "qnnpack"; the
 * file computes what the qnnpack engine computes, see docs/dynamic.md). Default off. */
QHOST_API QhostStatus *qhost_options_set_dynamic(QhostOptions *options, int on);
QHOST_API QhostStatus *qhost_options_set_dynamic_per_channel(QhostOptions *options, int on);

/* ---- models ---- */

typedef struct QhostModel QhostModel;

/* Load an ONNX model (opsets 13 to 17; external data inside the model's directory).
 * The model keeps the file's bytes for its sessions (the file is read once here).
 * Errors name the file. */
QHOST_API QhostStatus *qhost_model_load(const char *path, QhostModel **out);
/* Release the model's memory now; later calls on it return QHOST_STATUS_CLOSED. Sessions
 * already made from it keep working (they hold their own copy). */
QHOST_API QhostStatus *qhost_model_close(QhostModel *model);
QHOST_API void qhost_model_free(QhostModel *model);

QHOST_API QhostStatus *qhost_model_input_count(const QhostModel *model, size_t *out);
QHOST_API QhostStatus *qhost_model_output_count(const QhostModel *model, size_t *out);
/* The declared input or output `index`; out->name is borrowed from the model (valid
 * until it is closed or freed). */
QHOST_API QhostStatus *qhost_model_input_info(const QhostModel *model, size_t index, QhostTensorInfo *out);
QHOST_API QhostStatus *qhost_model_output_info(const QhostModel *model, size_t index, QhostTensorInfo *out);

typedef enum { QHOST_FORMAT_TEXT = 0, QHOST_FORMAT_JSON = 1 } QhostFormat;

/* What `qhost inspect` prints: inputs, outputs, nodes with inferred shapes, parameters,
 * MACs, opsets, unsupported ops, qparams; with a backend in options (may be NULL), the
 * units it claims. Text or JSON (schema_version 1). */
QHOST_API QhostStatus *qhost_model_inspect(const QhostModel *model, const QhostOptions *options,
                                           QhostFormat format, char **out_text);

/* Read the inputs for `model` from a file: an .npy for a single-input model, or an .npz
 * keyed by input name (every input present, nothing else, dtypes as declared). The
 * result holds one tensor per model input, in the model's order, named after it. */
QHOST_API QhostStatus *qhost_model_read_inputs(const QhostModel *model, const char *path,
                                               QhostValues **out);

/* ---- quantization ---- */

/* Quantize `model_path` for options' backend and write the QDQ model to `output_path`:
 * annotate (the backend's BackendConfig with the qconfig, or its own annotate),
 * calibrate (or merge the stats files), compute PyTorch 1.13's qparams, let the plugin
 * refine them, convert. out_report_json and out_report_text (each may be NULL) receive
 * the report: what was quantized, what stayed float and why, every tensor's qparams and
 * SQNR. The model file is read by path because the statistics and the report name it.
 * Blocking; runs on options' threads. */
QHOST_API QhostStatus *qhost_quantize(const char *model_path, const QhostOptions *options,
                                      const char *output_path, char **out_report_json,
                                      char **out_report_text);

/* Calibrate one shard (qhost_options_set_shard) and save its observers' statistics to
 * `stats_path`, for qhost_options_add_stats_file + qhost_quantize to merge. out_samples
 * and out_points (may be NULL): samples seen and quantization points saved. */
QHOST_API QhostStatus *qhost_calibrate(const char *model_path, const QhostOptions *options,
                                       const char *stats_path, int64_t *out_samples,
                                       int64_t *out_points);

/* ---- sessions: running a model ---- */

typedef struct QhostSession QhostSession;

/* A session runs `model` on the host's reference kernels or, when options name a
 * backend, with the QDQ units the backend claims on its int8 kernels (options may be
 * NULL: host, one thread; the backend is loaded here, its options checked here). The
 * session keeps its own reference to the model's bytes as qhost_model_load read them,
 * so the model may be closed or freed afterwards and the file may change or go away.
 * It is planned for the input shapes of its first run; a run with other shapes plans
 * again from those bytes (lowering rewrites the graph it lowers); only external data
 * files, if the model has any, are read again from the model's directory. A session runs on one thread at a time; sessions on different
 * threads run concurrently. */
QHOST_API QhostStatus *qhost_session_new(const QhostModel *model, const QhostOptions *options,
                                         QhostSession **out);
/* Run on `n_inputs` tensors: one per model input, by name, or in the model's order when
 * names are NULL. Each input's dtype must be the declared one and its shape must fit;
 * data with one more leading axis, or N rows where the model fixes the batch at 1, runs
 * sample by sample and the outputs are stacked. Inputs are read in place (no copy; they
 * must stay unchanged during the call). The outputs, one per model output in order, are
 * new values the caller frees. */
QHOST_API QhostStatus *qhost_session_run(QhostSession *session, const QhostTensor *inputs,
                                         size_t n_inputs, QhostValues **out_outputs);
QHOST_API QhostStatus *qhost_session_close(QhostSession *session);
QHOST_API void qhost_session_free(QhostSession *session);

/* ---- bench, deploy ---- */

/* Time `model_path` as `qhost bench` does (options: backend, threads, bench runs, fp32
 * twin, input file, progress) and return its report: text, or JSON (schema_version 1:
 * median/min/max ms, the fp32 twin, with a backend the coverage). */
QHOST_API QhostStatus *qhost_bench(const char *model_path, const QhostOptions *options,
                                   QhostFormat format, char **out_report);

/* Write options' backend's deploy package for the QDQ model `model_path` into `dir`,
 * whole or not at all: an existing dir is refused unless `force`, which replaces it only
 * once the new package is complete. out_bytes (may be NULL): bytes the plugin wrote;
 * out_backend (may be NULL): the plugin's name (free with qhost_string_free). */
QHOST_API QhostStatus *qhost_deploy(const char *model_path, const QhostOptions *options,
                                    const char *dir, int force, uint64_t *out_bytes,
                                    char **out_backend);

/* ---- plugins ---- */

/* Every plugin options' search finds (each scanned in the scanner program): text as
 * `qhost plugins` prints it, or JSON (schema_version 1: plugins, problems).
 * out_warnings (may be NULL) receives the problems, one line each ("" when none):
 * broken files and shadowed duplicates. Never fails for a broken plugin file. */
QHOST_API QhostStatus *qhost_plugins_list(const QhostOptions *options, QhostFormat format,
                                          char **out_report, char **out_warnings);

/* Load plugin `name_or_path`, validate it, run each callback group on built-in inputs
 * (options' backend options go to its instance), and report. out_conforms: 1 when no
 * check failed. Fails (a status) only when the plugin cannot be found. */
QHOST_API QhostStatus *qhost_plugin_check(const char *name_or_path, const QhostOptions *options,
                                          QhostFormat format, char **out_report, int *out_conforms);

#ifdef __cplusplus
}
#endif

#endif
