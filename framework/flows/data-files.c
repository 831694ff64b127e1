/* Model data in files: a model's inputs from an .npy or an .npz keyed by input name, its
 * outputs to an .npy or an .npz keyed by output name, and printing a JSON document.
 * Errors name the file and the input or output at fault. */
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/json-text.h"
#include "flows/flows.h"
#include "core/log.h"
#include "io/npy.h"
#include "io/onnx.h"

QhGraph *qh_load_model(const char *path, GError **error) {
  QhGraph *g = qh_onnx_load(path, error);
  if (g != NULL)
    qh_log(QH_LOG_INFO, "%s: %d nodes, %d values", path, qh_graph_count_live_nodes(g),
           qh_graph_n_values(g));
  return g;
}

QhTensor **qh_read_inputs(const QhGraph *graph, const char *path, GError **error) {
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
  qh_tensors_free(tensors, n);
  return NULL;
}

gboolean qh_write_outputs(const QhGraph *graph, QhTensor *const *outputs, const char *path,
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

void qh_json_print(FILE *out, JsonBuilder *builder) {
  char *text = qh_json_text(builder);
  fprintf(out, "%s\n", text);
  g_free(text);
}
