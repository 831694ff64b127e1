/* What the qhost runner's subcommands share: the common options, the exit-status
 * contract (0 ok, 1 the work failed, 2 the command line did not parse), reading a
 * model and its input files, and the one-line error report. */
#ifndef QH_CLI_H
#define QH_CLI_H

#include <glib.h>
#include <json-glib/json-glib.h>

#include "core/graph.h"
#include "core/tensor.h"
#include "exec/plan.h"
#include "lower/lowering.h"
#include "backend/backend.h"
#include "plugin/plugin.h"

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

/* The plugin search the common options describe (borrowed strings). */
void qh_cli_plugin_search(const QhCliCommon *common, QhPluginSearch *out);

/* Print a usage error ("qhost NAME: message") and return QH_EXIT_USAGE. */
int qh_cli_usage_error(const char *name, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Print error's message as the one line "qhost: message", free it, return 1. */
int qh_cli_report(GError *error);

/* Load an ONNX model; errors name the file. */
QhGraph *qh_cli_load_model(const char *path, GError **error);

/* Input tensors for the model's graph inputs, in graph->inputs order, from an .npy
 * (single-input models) or an .npz keyed by input name. Returns a new NULL-terminated
 * array (free with qh_cli_free_tensors). */
QhTensor **qh_cli_read_inputs(const QhGraph *graph, const char *path, GError **error);
void qh_cli_free_tensors(QhTensor **tensors, int n);

/* Write the graph outputs to path: .npz keyed by output name when path ends in
 * .npz, else .npy (which requires a single output). */
gboolean qh_cli_write_outputs(const QhGraph *graph, QhTensor *const *outputs, const char *path,
                              GError **error);

/* A runner for a model on data that may hold several samples along the first axis
 * of a model whose inputs are fixed at batch 1 (or have no batch axis): it then
 * runs once per sample and stacks the outputs. */
typedef struct QhCliRunner QhCliRunner;
/* With a backend (non-NULL, loaded with its instance) the graph is lowered to the
 * backend's kernels and rewritten in place (lower/lowering.h); the runner then owns
 * the lowering (qh_cli_runner_lowering). */
QhCliRunner *qh_cli_runner_new(QhGraph *graph, QhTensor *const *inputs, int threads,
                               QhBackend *backend, GError **error);
/* The runner's lowering, or NULL without a backend. Borrowed. */
QhLowering *qh_cli_runner_lowering(const QhCliRunner *runner);
/* The plan the runner runs (borrowed), for profiling. */
QhPlan *qh_cli_runner_plan(const QhCliRunner *runner);

/* Find the backend plugin `name` (name or path) the common options' search
 * describes, load it and create its instance with --backend-opt and --threads. */
QhBackend *qh_cli_load_backend(const QhCliCommon *common, const char *name, GError **error);
gboolean qh_cli_runner_run(QhCliRunner *runner, QhTensor ***outputs, GError **error);
void qh_cli_runner_free(QhCliRunner *runner);

/* Print the builder's finished document on stdout, pretty, and free the builder. */
void qh_cli_print_json(JsonBuilder *builder);

/* TRUE when stderr is a terminal (progress display). */
gboolean qh_cli_is_tty(void);

/* The element type names in messages: "float32 [1, 3, 224, 224]". g_free() it. */
char *qh_cli_describe(QhDType dtype, const QhShape *shape);

G_END_DECLS

#endif
