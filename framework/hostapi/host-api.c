/* The QhHostApi table: the only way plugins reach the host. This file fills the
 * frozen base (status creation, logging) and the functions that are not about
 * graphs: statuses, reports, host facts, buffers, deploy artefacts and threads;
 * host-graph.c and host-quant.c fill the graph slots. Every function checks
 * the handles a plugin passes (magic numbers) before using them. */
#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>
#include <sys/stat.h>


#include "core/cpu.h"
#include "hostapi/graph-view.h"
#include "hostapi/host-api-private.h"
#include "hostapi/host-private.h"
#include "hostapi/status-private.h"

static _Thread_local const char *current_plugin;
static _Thread_local QhReportSink *report_sink;

const char *qh_plugin_current(void) { return current_plugin; }

const char *qh_plugin_set_current(const char *name) {
  const char *prev = current_plugin;
  current_plugin = name;
  return prev;
}

QhReportSink *qh_plugin_set_report_sink(QhReportSink *sink) {
  QhReportSink *prev = report_sink;
  report_sink = sink;
  return prev;
}

/* ---- statuses ---- */

static QhStatus *api_status_new(int32_t code, const char *message) {
  return qh_status_new(code, "%s", message ? message : "(no message)");
}

static void api_status_free(QhStatus *status) { qh_status_free(status); }

static int32_t api_status_code(const QhStatus *status) {
  if (status == NULL)
    return QH_OK;
  return qh_status_is_valid(status) ? status->code : QH_ERR_INTERNAL;
}

static const char *api_status_message(const QhStatus *status) {
  if (status == NULL)
    return "";
  return qh_status_is_valid(status) ? status->message : "(invalid status)";
}

/* ---- log and report ---- */

static const char *const level_words[] = {"error", "warning", "info", "debug"};

static int clamp_level(int32_t level) {
  return level < QH_LOG_ERROR ? QH_LOG_ERROR : level > QH_LOG_DEBUG ? QH_LOG_DEBUG : level;
}

static char *plugin_text(const char *message) {
  char *line = g_utf8_make_valid(message ? message : "(no message)", -1);
  for (char *p = line; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  return line;
}

static void api_log(int32_t level, const char *message) {
  char *line = plugin_text(message);
  /* plugin-check captures stderr to catch plugins that print; log lines go to its sink */
  if (report_sink)
    g_ptr_array_add(report_sink->findings,
                    g_strdup_printf("log %s: %s", level_words[clamp_level(level)], line));
  else
    qh_log(clamp_level(level), "plugin %s: %s", current_plugin ? current_plugin : "?", line);
  g_free(line);
}

static void api_report(int32_t level, const char *message) {
  char *line = plugin_text(message);
  if (report_sink)
    g_ptr_array_add(report_sink->findings, g_strdup_printf("%s: %s", level_words[clamp_level(level)], line));
  else
    qh_log(clamp_level(level), "plugin %s: %s", current_plugin ? current_plugin : "?", line);
  g_free(line);
}


/* An invalid view or node id is ignored: the status still carries the message. */
static QhStatus *api_status_new_for_node(const QhGraphView *graph, uint32_t node, int32_t code,
                                         const char *message) {
  const QhNode *n = qh_graph_view_is_valid(graph) ? qh_graph_view_node(graph, node) : NULL;
  return qh_status_new_for_node(n, code, "%s", message ? message : "(no message)");
}

/* ---- host facts ---- */

static const char *api_host_version(void) { return QHOST_VERSION; }

static uint64_t api_cpu_features(void) { return qh_cpu_features(); }

/* ---- buffers ---- */

void qh_buffer_init(QhBuffer *buffer, gsize limit) {
  buffer->magic = QH_BUFFER_MAGIC;
  buffer->bytes = g_byte_array_new();
  buffer->limit = limit;
}

void qh_buffer_clear(QhBuffer *buffer) {
  if (buffer->bytes)
    g_byte_array_unref(buffer->bytes);
  buffer->bytes = NULL;
  buffer->magic = 0;
}

static QhStatus *api_buffer_append(QhBuffer *buffer, const void *data, size_t size) {
  if (buffer == NULL || buffer->magic != QH_BUFFER_MAGIC)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "buffer_append: not a buffer the host handed out");
  if (size == 0)
    return NULL;
  if (data == NULL)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "buffer_append: data is NULL");
  if (size > buffer->limit || buffer->bytes->len > buffer->limit - size)
    return qh_status_new(QH_ERR_OUT_OF_MEMORY, "buffer_append: more than %" G_GSIZE_FORMAT
                         " bytes in one buffer", buffer->limit);
  g_byte_array_append(buffer->bytes, data, (guint)size);
  return NULL;
}

/* ---- artefacts ---- */

static gboolean relative_path_is_safe(const char *path) {
  if (path == NULL || *path == '\0' || path[0] == '/' || strlen(path) > 1024 ||
      !g_utf8_validate(path, -1, NULL))
    return FALSE;
  char **parts = g_strsplit(path, "/", -1);
  gboolean ok = TRUE;
  for (char **p = parts; *p; p++)
    if (**p == '\0' || strcmp(*p, ".") == 0 || strcmp(*p, "..") == 0)
      ok = FALSE;
  g_strfreev(parts);
  return ok;
}

static QhStatus *api_artifact_write(QhArtifact *artifact, const char *relative_path,
                                    const void *data, size_t size) {
  if (artifact == NULL || artifact->magic != QH_ARTIFACT_MAGIC)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "artifact_write: not an artefact the host handed out");
  if (!relative_path_is_safe(relative_path))
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "artifact_write: '%s' is not a relative path inside the artefact",
                         relative_path ? relative_path : "(null)");
  if (size > 0 && data == NULL)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "artifact_write: data is NULL");
  if (size > artifact->limit || artifact->written > artifact->limit - size)
    return qh_status_new(QH_ERR_OUT_OF_MEMORY, "artifact_write: the artefact exceeds %" G_GSIZE_FORMAT
                         " bytes", artifact->limit);
  char *path = g_build_filename(artifact->dir, relative_path, NULL);
  char *parent = g_path_get_dirname(path);
  QhStatus *st = NULL;
  GError *error = NULL;
  if (g_mkdir_with_parents(parent, 0755) != 0)
    st = qh_status_new(QH_ERR_IO, "%s: %s", parent, g_strerror(errno));
  else if (!g_file_set_contents(path, data ? data : "", (gssize)size, &error))
    st = qh_status_new(QH_ERR_IO, "%s", error->message);
  else
    artifact->written += size;
  g_clear_error(&error);
  g_free(parent);
  g_free(path);
  return st;
}

void qh_artifact_remove_tree(const char *path) {
  GDir *d = g_dir_open(path, 0, NULL);
  if (d) {
    const char *name;
    while ((name = g_dir_read_name(d)) != NULL) {
      char *child = g_build_filename(path, name, NULL);
      if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
        qh_artifact_remove_tree(child);
      else
        g_unlink(child);
      g_free(child);
    }
    g_dir_close(d);
  }
  g_rmdir(path);
}

/* The flags of artifact_write_model this host knows. */
#define MODEL_FLAGS QH_MODEL_STRIP_QDQ

static QhStatus *api_artifact_write_model(QhArtifact *artifact, const char *relative_path,
                                          const QhGraphView *graph, uint32_t flags) {
  if (artifact == NULL || artifact->magic != QH_ARTIFACT_MAGIC)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "artifact_write_model: not an artefact the host handed out");
  if (flags & ~MODEL_FLAGS)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "artifact_write_model: unknown flag bits 0x%x",
                         (unsigned)(flags & ~MODEL_FLAGS));
  if (!relative_path_is_safe(relative_path))
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "artifact_write_model: '%s' is not a relative path inside the artefact",
                         relative_path ? relative_path : "(null)");
  if (!qh_graph_view_is_valid(graph))
    return qh_status_new(QH_ERR_INVALID_ARGUMENT,
                         "artifact_write_model: not a graph handle the host handed out");
  char *path = g_build_filename(artifact->dir, relative_path, NULL);
  char *parent = g_path_get_dirname(path);
  QhStatus *st = NULL;
  GError *error = NULL;
  gsize bytes = 0;
  if (g_file_test(path, G_FILE_TEST_IS_DIR))
    st = qh_status_new(QH_ERR_INVALID_ARGUMENT, "artifact_write_model: '%s' is a directory",
                       relative_path);
  else if (artifact->write_model == NULL)
    st = qh_status_new(QH_ERR_UNSUPPORTED, "artifact_write_model: this host writes no models here");
  else if (g_mkdir_with_parents(parent, 0755) != 0)
    st = qh_status_new(QH_ERR_IO, "%s: %s", parent, g_strerror(errno));
  else if (!artifact->write_model(graph->graph, path, (flags & QH_MODEL_STRIP_QDQ) != 0, &bytes, &error))
    st = qh_status_from_gerror(error);
  else if (bytes > artifact->limit || artifact->written > artifact->limit - bytes) {
    g_unlink(path); /* the artefact stays within its limit: the file is not kept */
    st = qh_status_new(QH_ERR_OUT_OF_MEMORY, "artifact_write_model: the artefact exceeds %" G_GSIZE_FORMAT
                       " bytes", artifact->limit);
  } else
    artifact->written += bytes;
  g_free(parent);
  g_free(path);
  return st;
}

static const char *api_artifact_source_digest(const QhArtifact *artifact) {
  if (artifact == NULL || artifact->magic != QH_ARTIFACT_MAGIC)
    return NULL;
  return artifact->source_digest;
}

/* ---- threads ---- */

static uint32_t api_run_thread_count(const QhRunContext *ctx) {
  if (ctx == NULL || ctx->magic != QH_RUNCTX_MAGIC || ctx->pool == NULL)
    return 1;
  return (uint32_t)qh_thread_pool_size(ctx->pool);
}

typedef struct {
  QhParallelTaskFn task;
  void *user_data;
} TaskRun;

static void run_chunk(void *arg, int64_t begin, int64_t end, int worker) {
  TaskRun *run = arg;
  /* the team's thread number: the same thread gets the same number on every call, so a
   * plugin that gives a worker the same share each call (fbgemm's depthwise home ranges)
   * finds it in that core's cache; a chunk counter moved the numbers from call to call */
  for (int64_t i = begin; i < end; i++)
    run->task(run->user_data, (size_t)i, (uint32_t)worker);
}

static QhStatus *api_parallel_for(const QhRunContext *ctx, size_t n, QhParallelTaskFn task,
                                  void *user_data) {
  if (ctx == NULL || ctx->magic != QH_RUNCTX_MAGIC)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "parallel_for: not a run context the host handed out");
  if (task == NULL)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "parallel_for: task is NULL");
  if (n > (size_t)INT64_MAX)
    return qh_status_new(QH_ERR_INVALID_ARGUMENT, "parallel_for: n is too large");
  int workers = ctx->pool ? qh_thread_pool_size(ctx->pool) : 1;
  if (workers <= 1 || n <= 1) {
    for (size_t i = 0; i < n; i++)
      task(user_data, i, 0);
    return NULL;
  }
  TaskRun run = {task, user_data};
  int64_t chunk = ((int64_t)n + workers - 1) / workers;
  qh_thread_pool_parallel_for_workers(ctx->pool, (int64_t)n, chunk, run_chunk, &run);
  return NULL;
}

/* ---- the table ---- */

static QhHostApi table;

const QhHostApi *qh_host_api_get(void) {
  static gsize once;
  if (g_once_init_enter(&once)) {
    table.abi_version = QH_ABI_VERSION;
    table.struct_size = (uint32_t)sizeof(QhHostApi);
    table.status_new = api_status_new;
    table.status_free = api_status_free;
    table.log = api_log;
    table.status_code = api_status_code;
    table.status_message = api_status_message;
    table.report = api_report;
    table.host_version = api_host_version;
    table.cpu_features = api_cpu_features;
    table.buffer_append = api_buffer_append;
    table.artifact_write = api_artifact_write;
    table.run_thread_count = api_run_thread_count;
    table.parallel_for = api_parallel_for;
    table.status_new_for_node = api_status_new_for_node;
    table.artifact_write_model = api_artifact_write_model;
    table.artifact_source_digest = api_artifact_source_digest;
    qh_host_api_fill_graph(&table);
    qh_host_api_fill_quant(&table);
    g_once_init_leave(&once, 1);
  }
  return &table;
}

