/* The quantization flow of docs/design.md, end to end: load the float model and the backend
 * plugin; transform_for_annotation; fold BatchNorm where the backend fuses it; annotate
 * (the backend's declarative BackendConfig with the qconfig mapping, then its
 * imperative annotate); prepare observers; calibrate sample by sample (or merge saved
 * shard statistics); compute qparams; let the plugin refine them; convert to QDQ; write
 * the model and the report.
 *
 * Threading: one flow per thread. Errors: GError, one line naming the file, plugin or
 * node; nothing is written on error (outputs are written atomically at the end). */
#ifndef QH_QUANT_FLOW_H
#define QH_QUANT_FLOW_H

#include <glib.h>

#include "plugin/plugin.h"

G_BEGIN_DECLS

typedef struct {
  const char *model_path;
  const char *backend;         /* plugin name or path */
  QhPluginSearch search;
  char *const *backend_opts;   /* KEY=VALUE, NULL-terminated, may be NULL */
  const char *config_path;     /* --config, or NULL */
  const char *calib_path;      /* --calib (NULL when stats_paths are given) */
  char *const *stats_paths;    /* quantize --stats (NULL-terminated), or NULL */
  const char *output_path;     /* QDQ model (quantize) or statistics (calibrate) */
  const char *report_path;     /* --report JSON, or NULL */
  const char *probe_path;      /* --probe .npy/.npz, or NULL: the first calibration sample */
  int threads;
  int shard_index;             /* calibrate --shard I/N: 0 <= I < N; N = 0 means no sharding */
  int shard_count;
  gboolean progress;           /* draw a progress bar on stderr */
  gboolean quiet;              /* no report on stdout */
  int opset;                   /* quantize --opset: 0 (the model's, or 21 for 16-bit) or 13..21 */
  /* for the embedding API (qhost.h): */
  const GPtrArray *calib_arrays; /* QhNamedTensor* in memory, used instead of reading
                                    calib_path (which then only names them), or NULL */
  const char *config_json;     /* a qconfig as JSON text (config_path names it), or NULL */
  char **report_json_out;      /* receives the report as JSON (g_free), or NULL */
  char **report_text_out;      /* receives the text report (g_free), or NULL */
  int64_t *samples_out;        /* calibrate: receives the samples seen, or NULL */
  int64_t *points_out;         /* calibrate: receives the points saved, or NULL */
} QhQuantizeOptions;

/* qhost quantize: write the QDQ model (and report). */
gboolean qh_quantize(const QhQuantizeOptions *options, GError **error);

/* qhost calibrate: write one shard's observer statistics. */
gboolean qh_calibrate(const QhQuantizeOptions *options, GError **error);

G_END_DECLS

#endif
