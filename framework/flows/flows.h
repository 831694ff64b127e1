/* The flows the embedding API (qhost.h) and the runner offer beyond quantization
 * (quant/flow.h): running a model on the data a user gives (sample by sample when the
 * shapes say so), timing it, writing a backend's deploy package, describing a model, and
 * the plugin listing and conformance reports. Reports are written to a FILE* (the API
 * captures them into strings); nothing here prints to stdout by itself.
 *
 * Ownership: the caller's, as each function says. Threading: one flow per thread;
 * distinct runners may run on distinct threads. Errors: GError, one line naming the file,
 * plugin or input. */
#ifndef QH_FLOWS_FLOWS_H
#define QH_FLOWS_FLOWS_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>

#include "core/graph.h"
#include "core/tensor.h"
#include "exec/plan.h"
#include "lower/lowering.h"
#include "backend/backend.h"
#include "plugin/plugin.h"

G_BEGIN_DECLS

/* The backend a flow uses: where to look for it, which, and its instance's settings. */
typedef struct {
  QhPluginSearch search;
  const char *name;          /* name or path; NULL: the host's reference path */
  char *const *options;      /* KEY=VALUE, NULL-terminated, may be NULL */
  int threads;
} QhBackendChoice;

/* Find the plugin choice->name, load it and create its instance. */
QhBackend *qh_backend_choice_load(const QhBackendChoice *choice, GError **error);

/* Free n tensors and the array holding them (NULL is a no-op). */
void qh_tensors_free(QhTensor **tensors, int n);

/* ---- data files (data-files.c) ---- */

/* Load an ONNX model (errors name the file); logs its size at info level. */
QhGraph *qh_load_model(const char *path, GError **error);

/* Input tensors for the graph inputs, in graph->inputs order, from an .npy (single-input
 * models) or an .npz keyed by input name. A new array of n tensors + NULL. */
QhTensor **qh_read_inputs(const QhGraph *graph, const char *path, GError **error);
/* Write the graph outputs: an .npz keyed by output name when path ends in .npz, else
 * an .npy (which requires a single output). */
gboolean qh_write_outputs(const QhGraph *graph, QhTensor *const *outputs, const char *path,
                          GError **error);
/* Print the builder's finished document, pretty, and a newline to out; frees builder. */
void qh_json_print(FILE *out, JsonBuilder *builder);

/* ---- the batched runner (runner.c) ---- */

/* A runner for a model on data that may hold several samples along the first axis of a
 * model whose inputs are fixed at batch 1 (or have no batch axis): it then runs once per
 * sample and stacks the outputs. Borrows graph and inputs (their shapes decide the plan;
 * later runs take inputs of the same shapes). With a backend (loaded with its instance)
 * the graph is lowered to the backend's kernels and rewritten in place. */
typedef struct QhRunner QhRunner;
QhRunner *qh_runner_new(QhGraph *graph, QhTensor *const *inputs, int threads, QhBackend *backend,
                        GError **error);
/* Run on the inputs given to qh_runner_new, or (qh_runner_run_on) on others of the same
 * shapes. *outputs: a new array of one tensor per graph output. */
gboolean qh_runner_run(QhRunner *runner, QhTensor ***outputs, GError **error);
gboolean qh_runner_run_on(QhRunner *runner, QhTensor *const *inputs, QhTensor ***outputs,
                          GError **error);
/* The runner's lowering (NULL without a backend) and plan; borrowed. */
QhLowering *qh_runner_lowering(const QhRunner *runner);
QhPlan *qh_runner_plan(const QhRunner *runner);
void qh_runner_free(QhRunner *runner);

/* ---- bench (bench.c) ---- */

typedef struct {
  const char *model_path;
  QhBackendChoice backend;   /* name NULL: host reference */
  const char *input_path;    /* NULL: seeded random data at the declared shapes */
  int warmup, runs;
  gboolean no_fp32;          /* do not time the fp32 twin */
  gboolean json;
  gboolean progress;         /* progress on stderr */
} QhBenchOptions;

/* Time the model and write the report (text or JSON) to out. */
gboolean qh_bench(const QhBenchOptions *options, FILE *out, GError **error);

/* ---- deploy (deploy.c) ---- */

/* Hand the QDQ model at model_path to the backend's deploy step, writing dir whole or
 * not at all (force: replace an existing dir once the new one is complete). *written:
 * bytes the plugin wrote; *backend_name (may be NULL): a copy of the plugin's name. */
gboolean qh_deploy(const char *model_path, const QhBackendChoice *backend, const char *dir,
                   gboolean force, gsize *written, char **backend_name, GError **error);

/* ---- inspect (inspect.c) ---- */

/* Describe graph (loaded from path) on out, text or JSON; with backend->name, the units
 * that backend claims (the model is loaded again from path to be lowered). */
gboolean qh_inspect(const char *path, QhGraph *graph, const QhBackendChoice *backend,
                    gboolean json, FILE *out, GError **error);

/* ---- plugins (plugins-report.c, check-report.c) ---- */

/* The registry search finds, on out (text or JSON); its problem lines, each followed by
 * a newline, are appended to problems. */
void qh_plugins_report(const QhPluginSearch *search, gboolean json, FILE *out, GString *problems);
/* plugin-check's report on out; *conforms TRUE when no check failed. FALSE with error
 * only when the plugin cannot be found or loaded for checking. */
gboolean qh_plugin_check_report(const QhPluginSearch *search, const char *name_or_path,
                                char *const *backend_opts, gboolean json, FILE *out,
                                gboolean *conforms, GError **error);

G_END_DECLS

#endif
