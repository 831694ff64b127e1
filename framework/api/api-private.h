/* What the embedding API's files (framework/api/) share: the objects behind the opaque
 * handles of qhost.h and the conversions between the public and the internal types.
 * Never installed. */
#ifndef QH_API_PRIVATE_H
#define QH_API_PRIVATE_H

#include <glib.h>

#include "core/graph.h"
#include "core/tensor.h"
#include "flows/flows.h"
#include "qhost.h"

struct QhostStatus {
  QhostStatusCode code;
  char *message;
};

struct QhostOptions {
  char *backend;
  char **plugin_paths;       /* NULL-terminated or NULL */
  char *plugin_dir;
  char **backend_opts;       /* NULL-terminated or NULL */
  int threads;
  gboolean progress;
  char *calib_path;
  GPtrArray *calib_arrays;   /* QhNamedTensor*, or NULL */
  char *qconfig_path;
  char *qconfig_json;
  char *probe_path;
  char *report_path;
  int shard_index, shard_count;
  char **stats_paths;        /* NULL-terminated or NULL */
  int warmup, runs;
  gboolean fp32;
  char *input_path;
  gboolean dynamic;          /* quantize: dynamic quantization (no calibration) */
  gboolean dynamic_per_channel;
  int opset;                 /* quantize: 0 or 13..21 */
};

struct QhostModel {
  char *path;
  QhGraph *graph;            /* NULL once closed */
  GBytes *bytes;             /* the file as read at load, for sessions; NULL once closed */
};

/* Tensors the library owns, with their names (NULL for an unnamed .npy array). */
struct QhostValues {
  GPtrArray *names;          /* char* */
  GPtrArray *tensors;        /* QhTensor* */
  gboolean model_outputs;    /* a session's outputs (for the wording of errors) */
};

/* A new status: the code and a printf message, made one line. */
QhostStatus *qh_api_status(QhostStatusCode code, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* The status for error (freed), its code mapped from QH_ERROR's. */
QhostStatus *qh_api_status_from_error(GError *error);
/* INVALID_ARGUMENT "what: NULL" when p is NULL, else NULL. */
QhostStatus *qh_api_need(const void *p, const char *what);
/* CLOSED when model is closed; INVALID_ARGUMENT when it is NULL. */
QhostStatus *qh_api_model_ready(const QhostModel *model);

/* The default settings (threads 1, 3 warm-up and 20 timed runs, fp32 twin). */
void qh_api_options_defaults(QhostOptions *options);
/* The backend choice and plugin search options describe (borrowed; options may be NULL:
 * the defaults). */
void qh_api_backend_choice(const QhostOptions *options, QhBackendChoice *out);

/* A values object taking names (g_strdup'ed, may be NULL) and tensors (taken). */
QhostValues *qh_api_values_new(void);
void qh_api_values_add(QhostValues *values, const char *name, QhTensor *tensor);

/* Run fn(data, out, error) with out a memory stream, and return what it wrote. */
typedef gboolean (*QhApiPrintFn)(gpointer data, FILE *out, GError **error);
QhostStatus *qh_api_capture(QhApiPrintFn fn, gpointer data, char **out_text);

#endif
