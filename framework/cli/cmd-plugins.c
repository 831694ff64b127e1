/* `qhost plugins`: every plugin the search finds (qhost_plugins_list); broken files and
 * shadowed duplicates are one warning line each on stderr, and the listing goes on. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int qh_cli_plugins(int argc, char **argv) {
  QhCliCommon common = {.uses_plugins = TRUE};
  gboolean json = FALSE;
  const GOptionEntry entries[] = {
      {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON (schema_version 1)", NULL},
      G_OPTION_ENTRY_NULL};
  if (!qh_cli_parse("plugins", "",
                    "List the backend plugins found in --plugin, --plugin-dir, QHOST_PLUGIN_PATH and\n"
                    "the installed plugin directory, in that order (the first of a name wins).",
                    entries, &common, &argc, &argv))
    return QH_EXIT_USAGE;
  if (argc > 1)
    return qh_cli_usage_error("plugins", "unexpected argument '%s'", argv[1]);
  QhostOptions *options = qh_cli_options(&common, NULL);
  char *report = NULL, *warnings = NULL;
  QhostStatus *st = qhost_plugins_list(options, json ? QHOST_FORMAT_JSON : QHOST_FORMAT_TEXT, &report,
                                       &warnings);
  qhost_options_free(options);
  if (st)
    return qh_cli_fail(st);
  for (char *line = warnings, *end; line && *line; line = end + 1) {
    end = strchr(line, '\n');
    fprintf(stderr, "qhost: warning: %.*s\n", (int)(end - line), line);
  }
  qhost_string_free(warnings);
  qh_cli_print(report);
  return QH_EXIT_OK;
}
