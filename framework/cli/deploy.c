/* qhost deploy --backend NAME MODEL.qdq.onnx -o DIR: hand a QDQ model to a backend's
 * deploy step (QhDeployOps), which writes the backend's own artefact through
 * host->artifact_write. The files go to a temporary directory next to DIR, which is
 * renamed to DIR only when the plugin succeeds, so DIR either holds a whole artefact
 * or does not exist: a failed deploy leaves nothing behind. An existing DIR is refused
 * unless --force, which replaces it only after the new artefact is complete. The
 * SHA-256 of the model file is handed to the plugin (artifact_source_digest) for its
 * manifest. */
#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>

#include "cli/cli.h"
#include "core/error.h"
#include "hostapi/graph-view.h"
#include "hostapi/host-private.h"
#include "lower/deploy-model.h"

/* What one artefact may hold: deploy packages are weights plus metadata. */
#define ARTIFACT_LIMIT ((gsize)4 << 30)

/* Move the finished temporary directory to dir (replacing an old one with force). */
static gboolean put_in_place(const char *tmp, const char *dir, gboolean force, GError **error) {
  char *old = NULL;
  if (force && g_file_test(dir, G_FILE_TEST_EXISTS)) {
    old = g_strdup_printf("%s.old-%u", dir, (unsigned)g_random_int());
    if (g_rename(dir, old) != 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot move the old directory aside: %s", dir,
                  g_strerror(errno));
      g_free(old);
      return FALSE;
    }
  }
  if (g_rename(tmp, dir) != 0) {
    int e = errno;
    if (old)
      g_rename(old, dir);
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: %s", dir, g_strerror(e));
    g_free(old);
    return FALSE;
  }
  if (old)
    qh_artifact_remove_tree(old);
  g_free(old);
  return TRUE;
}

/* Lower-case hex SHA-256 of the file at path (mapped, not read into memory). */
static char *file_sha256(const char *path, GError **error) {
  GError *local = NULL;
  GMappedFile *map = g_mapped_file_new(path, FALSE, &local);
  if (map == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return NULL;
  }
  GChecksum *sum = g_checksum_new(G_CHECKSUM_SHA256);
  const guchar *data = (const guchar *)g_mapped_file_get_contents(map);
  gsize len = g_mapped_file_get_length(map);
  /* g_checksum_update takes a gssize: feed huge files in pieces */
  for (gsize off = 0; off < len; off += (gsize)1 << 30)
    g_checksum_update(sum, data + off, (gssize)MIN(len - off, (gsize)1 << 30));
  char *hex = g_strdup(g_checksum_get_string(sum));
  g_checksum_free(sum);
  g_mapped_file_unref(map);
  return hex;
}

/* Run the plugin's deploy into a temporary sibling of dir; returns the bytes written. */
static gboolean deploy(QhBackend *plugin, QhGraph *graph, const char *model, const char *dir,
                       gboolean force, gsize *written, GError **error) {
  const char *name = qh_backend_name(plugin);
  if (qh_backend_deploy_ops(plugin) == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "plugin '%s' has no deploy step", name);
    return FALSE;
  }
  if (g_file_test(dir, G_FILE_TEST_EXISTS) && !force) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s already exists (use --force to replace it)", dir);
    return FALSE;
  }
  char *digest = file_sha256(model, error);
  if (digest == NULL)
    return FALSE;
  char *parent = g_path_get_dirname(dir), *base = g_path_get_basename(dir);
  char *tmp = g_strdup_printf("%s%s.%s.tmp-XXXXXX", parent, G_DIR_SEPARATOR_S, base);
  gboolean ok = FALSE;
  if (g_mkdtemp(tmp) == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot make a directory in %s: %s", dir, parent,
                g_strerror(errno));
    goto out;
  }
  QhArtifact artifact = {QH_ARTIFACT_MAGIC, tmp, ARTIFACT_LIMIT, 0, digest, qh_deploy_model_save};
  QhGraphView *view = qh_graph_view_new(graph, QH_VIEW_READ);
  gboolean deployed = qh_backend_deploy_graph(plugin, view, &artifact, error);
  qh_graph_view_free(view);
  artifact.magic = 0;
  if (!deployed) {
    g_prefix_error(error, "%s: ", model);
  } else if (put_in_place(tmp, dir, force, error)) {
    *written = artifact.written;
    ok = TRUE;
  }
  if (!ok)
    qh_artifact_remove_tree(tmp);
out:
  g_free(digest);
  g_free(tmp);
  g_free(parent);
  g_free(base);
  return ok;
}

int qh_cli_deploy(int argc, char **argv) {
  char *output = NULL, *backend = NULL;
  gboolean force = FALSE;
  QhCliCommon common = {.uses_plugins = TRUE};
  const GOptionEntry entries[] = {
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend, "The backend plugin whose deploy step runs",
       "NAME"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "The artefact directory to create", "DIR"},
      {"force", 0, 0, G_OPTION_ARG_NONE, &force,
       "Replace DIR if it exists (only once the new artefact is complete)", NULL},
      G_OPTION_ENTRY_NULL};
  int status = QH_EXIT_USAGE;
  QhGraph *graph = NULL;
  QhBackend *plugin = NULL;
  GError *error = NULL;
  gsize written = 0;
  if (!qh_cli_parse("deploy", "MODEL.qdq.onnx",
                    "Write the backend's deployable artefact for a QDQ model into DIR: the plugin's\n"
                    "deploy step decides what it holds. DIR is created whole or not at all.",
                    entries, &common, &argc, &argv))
    goto out;
  if (argc != 2) {
    status = qh_cli_usage_error("deploy", argc < 2 ? "missing MODEL.qdq.onnx" : "more than one model given");
    goto out;
  }
  if (backend == NULL || output == NULL) {
    status = qh_cli_usage_error("deploy", backend == NULL ? "missing --backend" : "missing -o DIR");
    goto out;
  }
  status = QH_EXIT_FAILURE;
  if ((graph = qh_cli_load_model(argv[1], &error)) == NULL ||
      (plugin = qh_cli_load_backend(&common, backend, &error)) == NULL ||
      !deploy(plugin, graph, argv[1], output, force, &written, &error)) {
    status = qh_cli_report(error);
    goto out;
  }
  if (!common.quiet)
    printf("deploy: %s: %" G_GSIZE_FORMAT " bytes written by plugin '%s'\n", output, written,
           qh_backend_name(plugin));
  status = QH_EXIT_OK;
out:
  qh_backend_free(plugin);
  qh_graph_free(graph);
  g_free(backend);
  g_free(output);
  return status;
}
