/* Shared plumbing of the runner's subcommands: option parsing with the exit-status
 * contract, one-line error reports, reading models and input files, writing
 * outputs, and the per-sample runner that feeds a batch-1 model one file row at a
 * time when the shapes say so unambiguously. */
#include <json-glib/json-glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/log.h"
#include "io/npy.h"
#include "io/onnx.h"

/* The strings GOption allocates for the common options live until exit (commands
 * return through many paths; one process parses once). */
static QhCliCommon parsed_common;

static void free_common(void) {
  g_strfreev(parsed_common.plugin_paths);
  g_free(parsed_common.plugin_dir);
  g_strfreev(parsed_common.backend_opts);
}

void qh_cli_plugin_search(const QhCliCommon *common, QhPluginSearch *out) {
  memset(out, 0, sizeof *out);
  out->paths = common->plugin_paths;
  out->dir = common->plugin_dir;
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
    qh_log_set_level(common->quiet ? QH_LOG_ERROR : common->verbose ? QH_LOG_INFO : QH_LOG_WARNING);
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

int qh_cli_report(GError *error) {
  /* One line, whatever the message holds. */
  for (char *p = error->message; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  fprintf(stderr, "qhost: %s\n", error->message);
  g_error_free(error);
  return QH_EXIT_FAILURE;
}

gboolean qh_cli_is_tty(void) { return isatty(STDERR_FILENO); }

char *qh_cli_describe(QhDType dtype, const QhShape *shape) {
  char *s = qh_shape_to_string(shape);
  char *r = g_strdup_printf("%s %s", qh_dtype_name(dtype), s);
  g_free(s);
  return r;
}

QhGraph *qh_cli_load_model(const char *path, GError **error) {
  QhGraph *g = qh_onnx_load(path, error);
  if (g != NULL)
    qh_log(QH_LOG_INFO, "%s: %d nodes, %d values", path, qh_graph_count_live_nodes(g),
           qh_graph_n_values(g));
  return g;
}

void qh_cli_free_tensors(QhTensor **tensors, int n) {
  if (tensors == NULL)
    return;
  for (int i = 0; i < n; i++)
    qh_tensor_free(tensors[i]);
  g_free(tensors);
}

QhTensor **qh_cli_read_inputs(const QhGraph *graph, const char *path, GError **error) {
  int n = (int)graph->inputs->len;
  QhTensor **tensors = g_new0(QhTensor *, (gsize)n + 1);
  if (g_str_has_suffix(path, ".npz")) {
    GPtrArray *arrays = qh_npz_read(path, error);
    if (arrays == NULL)
      goto fail;
    for (int i = 0; i < n; i++) {
      const QhValue *v = qh_graph_value(graph, g_array_index(graph->inputs, int, i));
      for (guint k = 0; k < arrays->len; k++) {
        QhNamedTensor *nt = g_ptr_array_index(arrays, k);
        if (nt->tensor != NULL && strcmp(nt->name, v->name) == 0) {
          tensors[i] = nt->tensor;
          nt->tensor = NULL;
        }
      }
      if (tensors[i] == NULL) {
        g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: no array named '%s' for model input '%s'",
                    path, v->name, v->name);
        g_ptr_array_unref(arrays);
        goto fail;
      }
    }
    for (guint k = 0; k < arrays->len; k++) {
      QhNamedTensor *nt = g_ptr_array_index(arrays, k);
      if (nt->tensor != NULL) {
        g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: array '%s' is not an input of the model",
                    path, nt->name);
        g_ptr_array_unref(arrays);
        goto fail;
      }
    }
    g_ptr_array_unref(arrays);
  } else {
    if (n != 1) {
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                  "%s: the model has %d inputs; give an .npz keyed by input name", path, n);
      goto fail;
    }
    tensors[0] = qh_npy_read(path, error);
    if (tensors[0] == NULL)
      goto fail;
  }
  for (int i = 0; i < n; i++) {
    const QhValue *v = qh_graph_value(graph, g_array_index(graph->inputs, int, i));
    if (tensors[i]->dtype != v->dtype) {
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: array for input '%s' is %s; the model expects %s",
                  path, v->name, qh_dtype_name(tensors[i]->dtype), qh_dtype_name(v->dtype));
      goto fail;
    }
  }
  return tensors;
fail:
  qh_cli_free_tensors(tensors, n);
  return NULL;
}

gboolean qh_cli_write_outputs(const QhGraph *graph, QhTensor *const *outputs, const char *path,
                              GError **error) {
  int n = (int)graph->outputs->len;
  if (g_str_has_suffix(path, ".npz")) {
    const char **names = g_new0(const char *, (gsize)n + 1);
    for (int i = 0; i < n; i++)
      names[i] = qh_graph_value(graph, g_array_index(graph->outputs, int, i))->name;
    gboolean ok = qh_npz_write(path, names, (const QhTensor *const *)outputs, n, error);
    g_free(names);
    return ok;
  }
  if (n != 1) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                "%s: the model has %d outputs; name an .npz file to get all of them", path, n);
    return FALSE;
  }
  return qh_npy_write(outputs[0], path, error);
}

void qh_cli_print_json(JsonBuilder *builder) {
  JsonGenerator *gen = json_generator_new();
  JsonNode *root = json_builder_get_root(builder);
  json_generator_set_root(gen, root);
  json_generator_set_pretty(gen, TRUE);
  char *text = json_generator_to_data(gen, NULL);
  printf("%s\n", text);
  g_free(text);
  json_node_unref(root);
  g_object_unref(gen);
  g_object_unref(builder);
}
