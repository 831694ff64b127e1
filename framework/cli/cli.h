/* What the qhost runner's subcommands share: the common options, the exit-status
 * contract (0 ok, 1 the work failed, 2 the command line did not parse) and the one-line
 * error report. The runner is a shell over the embedding API (qhost.h): each subcommand
 * (cmd-NAME.c) parses its arguments, makes one or two API calls and prints what they
 * return. */
#ifndef QH_CLI_H
#define QH_CLI_H

#include <glib.h>

#include "qhost.h"

G_BEGIN_DECLS

enum { QH_EXIT_OK = 0, QH_EXIT_FAILURE = 1, QH_EXIT_USAGE = 2 };

/* Options every subcommand takes. */
typedef struct {
  int threads;
  gboolean verbose;
  gboolean quiet;
  char **plugin_paths; /* --plugin PATH (repeatable) */
  char *plugin_dir;    /* --plugin-dir DIR */
  char **backend_opts; /* --backend-opt KEY=VALUE (repeatable) */
  gboolean uses_plugins; /* set before qh_cli_parse by commands that load plugins */
} QhCliCommon;

/* A subcommand: argv[0] is the subcommand's name. Returns the exit status. */
typedef int (*QhCliCommandFn)(int argc, char **argv);

int qh_cli_inspect(int argc, char **argv);
int qh_cli_run(int argc, char **argv);
int qh_cli_bench(int argc, char **argv);
int qh_cli_plugins(int argc, char **argv);
int qh_cli_quantize(int argc, char **argv);
int qh_cli_calibrate(int argc, char **argv);
int qh_cli_plugin_check(int argc, char **argv);
int qh_cli_deploy(int argc, char **argv);

/* Parse argv with `entries` plus the common options; on a parse error print
 * "qhost NAME: cause" and a hint to stderr and return FALSE (exit 2). Applies the
 * log level. `summary` and `description` go into --help. */
gboolean qh_cli_parse(const char *name, const char *params, const char *description,
                      const GOptionEntry *entries, QhCliCommon *common, int *argc, char ***argv);

/* The API options the common options describe, with `backend` (may be NULL). Free with
 * qhost_options_free. */
QhostOptions *qh_cli_options(const QhCliCommon *common, const char *backend);

/* Print a usage error ("qhost NAME: message") and return QH_EXIT_USAGE. */
int qh_cli_usage_error(const char *name, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Print the status's message as the one line "qhost: message", free it, return 1. */
int qh_cli_fail(QhostStatus *status);

/* Print text (a report the API returned) on stdout and free it. */
void qh_cli_print(char *text);

/* TRUE when stderr is a terminal (progress display). */
gboolean qh_cli_is_tty(void);

G_END_DECLS

#endif
