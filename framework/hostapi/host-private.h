/* Host-side objects behind the SDK's opaque buffer, artefact and run-context handles,
 * and the per-thread "current plugin" that tags what plugins log and report.
 *
 * Threading: the current-plugin and report sink are thread-local, set by the host
 * around each call into a plugin. */
#ifndef QH_HOSTAPI_HOST_PRIVATE_H
#define QH_HOSTAPI_HOST_PRIVATE_H

#include "exec/threadpool.h"
#include "hostapi/sdk-private.h"

struct QhBuffer {
  uint32_t magic;
  GByteArray *bytes;
  gsize limit; /* appends beyond this many bytes fail with QH_ERR_OUT_OF_MEMORY */
};

/* Writes graph to path as ONNX, atomically, as it is or (strip_qdq) as its deploy
 * model, setting *out_bytes; lowering supplies it (lower/deploy-model.h), so this
 * folder needs nothing from the folders above it. */
typedef gboolean (*QhArtifactModelWriter)(const QhGraph *graph, const char *path, gboolean strip_qdq,
                                          gsize *out_bytes, GError **error);

struct QhArtifact {
  uint32_t magic;
  char *dir;   /* the temporary directory files go to */
  gsize limit; /* total bytes allowed */
  gsize written;
  const char *source_digest; /* borrowed: hex SHA-256 of the source model file, or NULL */
  QhArtifactModelWriter write_model; /* artifact_write_model's writer; NULL: refused */
};

struct QhRunContext {
  uint32_t magic;
  QhThreadPool *pool; /* borrowed; NULL runs tasks inline */
};

#define QH_BUFFER_MAGIC 0x51484246u   /* "QHBF" */
#define QH_ARTIFACT_MAGIC 0x51484146u /* "QHAF" */
#define QH_RUNCTX_MAGIC 0x51485243u   /* "QHRC" */

void qh_buffer_init(QhBuffer *buffer, gsize limit);
void qh_buffer_clear(QhBuffer *buffer);

/* Remove an artefact directory and everything under it (symlinks are unlinked, not
 * followed); errors are ignored: used to take back a failed or temporary artefact. */
void qh_artifact_remove_tree(const char *path);

/* What a plugin's host->report calls produce while a sink is installed: one string
 * per finding, "warning: ..." / "info: ..." (level words as in the log). */
typedef struct {
  GPtrArray *findings; /* char* */
} QhReportSink;

/* Set the plugin name that tags log lines and reports on this thread (NULL: none);
 * returns the previous one so calls can nest. name is borrowed while set. */
const char *qh_plugin_set_current(const char *name);
/* The plugin tagged on this thread, or NULL (borrowed). */
const char *qh_plugin_current(void);

/* Install a report sink on this thread (NULL: reports go to the log); returns the
 * previous one. */
QhReportSink *qh_plugin_set_report_sink(QhReportSink *sink);

#endif
