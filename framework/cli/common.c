/* Shared plumbing of the runner's subcommands: option parsing with the exit-status
 * contract, the API options the common options describe, and one-line error reports. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

/* The strings GOption allocates for the common options live until exit (commands
 * return through many paths; one process parses once). */
static QhCliCommon parsed_common;

static void free_common(void) {
  g_strfreev(parsed_common.plugin_paths);
  g_free(parsed_common.plugin_dir);
  g_strfreev(parsed_common.backend_opts);
}

gboolean qh_cli_parse(const char *name, const char *params, const char *description,
                      const GOptionEntry *entries, QhCliCommon *common, int *argc, char ***argv) {
  const GOptionEntry common_entries[] = {
      {"plugin", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &common->plugin_paths,
       "Load this plugin file (repeatable; searched first)", "PATH"},
      {"plugin-dir", 0, 0, G_OPTION_ARG_FILENAME, &common->plugin_dir,
       "Look for libqhost-NAME.so plugins in DIR (before QHOST_PLUGIN_PATH and the installed ones)", "DIR"},
      {"backend-opt", 0, 0, G_OPTION_ARG_STRING_ARRAY, &common->backend_opts,
       "Option for the backend plugin (repeatable; 'qhost plugins' lists each plugin's keys)", "KEY=VALUE"},
      {"threads", 0, 0, G_OPTION_ARG_INT, &common->threads, "Worker threads (default 1)", "N"},
      {"verbose", 'v', 0, G_OPTION_ARG_NONE, &common->verbose, "Print more about what happens", NULL},
      {"quiet", 0, 0, G_OPTION_ARG_NONE, &common->quiet, "Print only errors", NULL},
      G_OPTION_ENTRY_NULL};
  common->threads = 1;
  char *prgname = g_strdup_printf("qhost %s", name);
  g_set_prgname(prgname);
  GOptionContext *ctx = g_option_context_new(params);
  g_option_context_set_summary(ctx, description);
  if (entries != NULL)
    g_option_context_add_main_entries(ctx, entries, NULL);
  GOptionGroup *group = g_option_group_new("common", "Options of every command:",
                                           "Show the options every command takes", NULL, NULL);
  g_option_group_add_entries(group, common_entries);
  g_option_context_add_group(ctx, group);
  GError *error = NULL;
  gboolean ok = g_option_context_parse(ctx, argc, argv, &error);
  parsed_common = *common;
  atexit(free_common);
  if (!ok) {
    fprintf(stderr, "qhost %s: %s\nTry 'qhost %s --help'.\n", name, error->message, name);
    g_error_free(error);
  } else if (common->threads < 1 || common->threads > 256) {
    fprintf(stderr, "qhost %s: --threads must be between 1 and 256\n", name);
    ok = FALSE;
  } else if (!common->uses_plugins &&
             (common->plugin_paths || common->plugin_dir || common->backend_opts)) {
    fprintf(stderr, "qhost %s: --plugin, --plugin-dir and --backend-opt select a backend, which "
                    "this command does not use yet\n", name);
    ok = FALSE;
  } else if (common->verbose && common->quiet) {
    fprintf(stderr, "qhost %s: --verbose and --quiet exclude each other\n", name);
    ok = FALSE;
  }
  if (ok)
    qhost_status_free(qhost_set_log_level(common->quiet ? QHOST_LOG_ERROR
                                          : common->verbose ? QHOST_LOG_INFO : QHOST_LOG_WARNING));
  g_option_context_free(ctx);
  g_free(prgname);
  return ok;
}

int qh_cli_usage_error(const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  fprintf(stderr, "qhost %s: %s\nTry 'qhost %s --help'.\n", name, msg, name);
  g_free(msg);
  return QH_EXIT_USAGE;
}

int qh_cli_fail(QhostStatus *status) {
  fprintf(stderr, "qhost: %s\n", qhost_status_message(status));
  qhost_status_free(status);
  return QH_EXIT_FAILURE;
}

void qh_cli_print(char *text) {
  fputs(text, stdout);
  qhost_string_free(text);
}

QhostOptions *qh_cli_options(const QhCliCommon *common, const char *backend) {
  /* the values were checked while parsing, so no setter fails here */
  QhostOptions *o = NULL;
  qhost_status_free(qhost_options_new(&o));
  if (backend)
    qhost_status_free(qhost_options_set_backend(o, backend));
  for (char **p = common->plugin_paths; p && *p; p++)
    qhost_status_free(qhost_options_add_plugin_path(o, *p));
  if (common->plugin_dir)
    qhost_status_free(qhost_options_set_plugin_dir(o, common->plugin_dir));
  for (char **p = common->backend_opts; p && *p; p++)
    qhost_status_free(qhost_options_add_backend_option(o, *p));
  qhost_status_free(qhost_options_set_threads(o, common->threads));
  return o;
}

gboolean qh_cli_is_tty(void) { return isatty(STDERR_FILENO); }

