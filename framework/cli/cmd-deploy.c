/* `qhost deploy --backend NAME MODEL.qdq.onnx -o DIR`: the backend's deploy package,
 * written whole or not at all (qhost_deploy). */
#include <stdio.h>

#include "cli/cli.h"

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
  QhostOptions *options = qh_cli_options(&common, backend);
  uint64_t written = 0;
  char *name = NULL;
  QhostStatus *st = qhost_deploy(argv[1], options, output, force, &written, &name);
  qhost_options_free(options);
  if (st) {
    status = qh_cli_fail(st);
    goto out;
  }
  if (!common.quiet)
    printf("deploy: %s: %" G_GUINT64_FORMAT " bytes written by plugin '%s'\n", output, (guint64)written, name);
  qhost_string_free(name);
  status = QH_EXIT_OK;
out:
  g_free(backend);
  g_free(output);
  return status;
}
