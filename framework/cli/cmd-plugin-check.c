/* `qhost plugin-check NAME|PATH`: the conformance report a vendor runs first
 * (qhost_plugin_check); exit status 0 only when no check failed. */
#include "cli/cli.h"

int qh_cli_plugin_check(int argc, char **argv) {
  QhCliCommon common = {.uses_plugins = TRUE};
  gboolean json = FALSE;
  const GOptionEntry entries[] = {
      {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON (schema_version 1)", NULL},
      G_OPTION_ENTRY_NULL};
  if (!qh_cli_parse("plugin-check", "NAME|PATH",
                    "Load a plugin, validate its descriptor, run each callback group it supplies on\n"
                    "small built-in inputs and print a conformance report. Exit status 0 only if\n"
                    "it conforms. --backend-opt values are passed to its instance.",
                    entries, &common, &argc, &argv))
    return QH_EXIT_USAGE;
  if (argc != 2)
    return qh_cli_usage_error("plugin-check", argc < 2 ? "missing NAME or PATH" : "unexpected argument '%s'",
                              argc < 2 ? "" : argv[2]);
  QhostOptions *options = qh_cli_options(&common, NULL);
  char *report = NULL;
  int conforms = 0;
  QhostStatus *st = qhost_plugin_check(argv[1], options, json ? QHOST_FORMAT_JSON : QHOST_FORMAT_TEXT,
                                       &report, &conforms);
  qhost_options_free(options);
  if (st)
    return qh_cli_fail(st);
  qh_cli_print(report);
  return conforms ? QH_EXIT_OK : QH_EXIT_FAILURE;
}
