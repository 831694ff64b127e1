/* Deploy (qhost_deploy, `qhost deploy --backend NAME MODEL.qdq.onnx -o DIR`): hand a QDQ model to a backend's
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

#include "flows/flows.h"
#include "core/error.h"
#include "hostapi/graph-view.h"
#include "hostapi/host-private.h"
#include "hostapi/qdq-qparams.h"
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
  /* ABI 1.2: the plugin reads the model's qparams through the host (qparams_get) and
   * what it attached while quantizing (metadata_get), never by parsing Q/DQ itself */
  QhGraphView *view = qh_graph_view_new(graph, QH_VIEW_READ | QH_VIEW_QPARAMS_READ);
  QhQdqReader *reader = qh_qdq_reader_new();
  qh_qdq_reader_attach(reader, view);
  gboolean deployed = qh_backend_deploy_graph(plugin, view, &artifact, error);
  qh_graph_view_free(view);
  qh_qdq_reader_free(reader);
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

gboolean qh_deploy(const char *model_path, const QhBackendChoice *backend, const char *dir,
                   gboolean force, gsize *written, char **backend_name, GError **error) {
  QhGraph *graph = NULL;
  QhBackend *plugin = NULL;
  gboolean ok = (graph = qh_load_model(model_path, error)) != NULL &&
                (plugin = qh_backend_choice_load(backend, error)) != NULL &&
                deploy(plugin, graph, model_path, dir, force, written, error);
  if (ok && backend_name)
    *backend_name = g_strdup(qh_backend_name(plugin));
  qh_backend_free(plugin);
  qh_graph_free(graph);
  return ok;
}
