/* Models and value lists of the embedding API: loading, closing, the declared inputs and
 * outputs, inspect, and the .npy/.npz files that hold a model's inputs and outputs. */
#include <string.h>

#include "api/api-private.h"
#include "core/error.h"
#include "io/npy.h"

/* ---- values ---- */

QhostValues *qh_api_values_new(void) {
  QhostValues *v = g_new0(QhostValues, 1);
  v->names = g_ptr_array_new_with_free_func(g_free);
  v->tensors = g_ptr_array_new_with_free_func((GDestroyNotify)qh_tensor_free);
  return v;
}

void qh_api_values_add(QhostValues *v, const char *name, QhTensor *tensor) {
  g_ptr_array_add(v->names, g_strdup(name));
  g_ptr_array_add(v->tensors, tensor);
}

size_t qhost_values_count(const QhostValues *values) { return values ? values->tensors->len : 0; }

QhostStatus *qhost_values_get(const QhostValues *values, size_t index, QhostTensor *out) {
  QhostStatus *st = qh_api_need(values, "values");
  if (st || (st = qh_api_need(out, "out")))
    return st;
  if (index >= values->tensors->len)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "value %zu: there are %u", index, values->tensors->len);
  QhTensor *t = values->tensors->pdata[index];
  out->name = values->names->pdata[index];
  out->dtype = (int32_t)t->dtype;
  out->rank = t->shape.rank;
  out->shape = t->shape.dims;
  out->data = t->data;
  out->nbytes = t->nbytes;
  return NULL;
}

void qhost_values_free(QhostValues *values) {
  if (values == NULL)
    return;
  g_ptr_array_unref(values->names);
  g_ptr_array_unref(values->tensors);
  g_free(values);
}

QhostStatus *qhost_values_read_file(const char *path, QhostValues **out) {
  QhostStatus *st = qh_api_need(path, "path");
  if (st || (st = qh_api_need(out, "out")))
    return st;
  GError *error = NULL;
  QhostValues *v = qh_api_values_new();
  if (g_str_has_suffix(path, ".npz")) {
    GPtrArray *members = qh_npz_read(path, &error);
    if (members == NULL) {
      qhost_values_free(v);
      return qh_api_status_from_error(error);
    }
    for (guint i = 0; i < members->len; i++) {
      QhNamedTensor *nt = members->pdata[i];
      qh_api_values_add(v, nt->name, nt->tensor);
      nt->tensor = NULL;
    }
    g_ptr_array_unref(members);
  } else {
    QhTensor *t = qh_npy_read(path, &error);
    if (t == NULL) {
      qhost_values_free(v);
      return qh_api_status_from_error(error);
    }
    qh_api_values_add(v, NULL, t);
  }
  *out = v;
  return NULL;
}

QhostStatus *qhost_values_write_file(const QhostValues *values, const char *path) {
  QhostStatus *st = qh_api_need(values, "values");
  if (st || (st = qh_api_need(path, "path")))
    return st;
  GError *error = NULL;
  int n = (int)values->tensors->len;
  gboolean ok;
  if (g_str_has_suffix(path, ".npz")) {
    for (int i = 0; i < n; i++)
      if (values->names->pdata[i] == NULL)
        return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "%s: value %d has no name to store it under",
                             path, i);
    ok = qh_npz_write(path, (const char *const *)values->names->pdata,
                      (const QhTensor *const *)values->tensors->pdata, n, &error);
  } else if (n != 1) {
    return qh_api_status(QHOST_STATUS_MISMATCH, values->model_outputs
                             ? "%s: the model has %d outputs; name an .npz file to get all of them"
                             : "%s: %d arrays; name an .npz file to get all of them", path, n);
  } else {
    ok = qh_npy_write(values->tensors->pdata[0], path, &error);
  }
  return ok ? NULL : qh_api_status_from_error(error);
}

/* ---- models ---- */

QhostStatus *qhost_model_load(const char *path, QhostModel **out) {
  QhostStatus *st = qh_api_need(path, "path");
  if (st || (st = qh_api_need(out, "out")))
    return st;
  GError *error = NULL;
  QhGraph *graph = qh_load_model(path, &error);
  if (graph == NULL)
    return qh_api_status_from_error(error);
  /* Sessions plan again from these bytes when input shapes change (lowering rewrites the
   * graph it lowers), so a file replaced after loading never changes what runs. */
  gchar *data = NULL;
  gsize len = 0;
  if (!g_file_get_contents(path, &data, &len, &error)) {
    qh_graph_free(graph);
    QhostStatus *io = qh_api_status(QHOST_STATUS_IO, "%s: cannot read: %s", path, error->message);
    g_error_free(error);
    return io;
  }
  QhostModel *m = g_new0(QhostModel, 1);
  m->path = g_strdup(path);
  m->graph = graph;
  m->bytes = g_bytes_new_take(data, len);
  *out = m;
  return NULL;
}

QhostStatus *qhost_model_close(QhostModel *model) {
  QhostStatus *st = qh_api_model_ready(model);
  if (st)
    return st;
  g_clear_pointer(&model->graph, qh_graph_free);
  g_clear_pointer(&model->bytes, g_bytes_unref);
  return NULL;
}

void qhost_model_free(QhostModel *model) {
  if (model == NULL)
    return;
  qh_graph_free(model->graph);
  if (model->bytes)
    g_bytes_unref(model->bytes);
  g_free(model->path);
  g_free(model);
}

static QhostStatus *count(const QhostModel *model, gboolean inputs, size_t *out) {
  QhostStatus *st = qh_api_model_ready(model);
  if (st || (st = qh_api_need(out, "out")))
    return st;
  *out = (inputs ? model->graph->inputs : model->graph->outputs)->len;
  return NULL;
}

QhostStatus *qhost_model_input_count(const QhostModel *model, size_t *out) { return count(model, TRUE, out); }
QhostStatus *qhost_model_output_count(const QhostModel *model, size_t *out) { return count(model, FALSE, out); }

static QhostStatus *info(const QhostModel *model, gboolean inputs, size_t index, QhostTensorInfo *out) {
  QhostStatus *st = qh_api_model_ready(model);
  if (st || (st = qh_api_need(out, "out")))
    return st;
  const GArray *ids = inputs ? model->graph->inputs : model->graph->outputs;
  if (index >= ids->len)
    return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "%s: %s %zu: the model has %u", model->path,
                         inputs ? "input" : "output", index, ids->len);
  const QhValue *v = qh_graph_value(model->graph, g_array_index(ids, int, index));
  memset(out, 0, sizeof *out);
  out->name = v->name;
  out->dtype = (int32_t)v->dtype;
  out->rank = v->shape.rank;
  for (int i = 0; i < v->shape.rank && i < QHOST_MAX_RANK; i++)
    out->dims[i] = v->shape.dims[i];
  return NULL;
}

QhostStatus *qhost_model_input_info(const QhostModel *model, size_t index, QhostTensorInfo *out) {
  return info(model, TRUE, index, out);
}

QhostStatus *qhost_model_output_info(const QhostModel *model, size_t index, QhostTensorInfo *out) {
  return info(model, FALSE, index, out);
}

QhostStatus *qhost_model_read_inputs(const QhostModel *model, const char *path, QhostValues **out) {
  QhostStatus *st = qh_api_model_ready(model);
  if (st || (st = qh_api_need(path, "path")) || (st = qh_api_need(out, "out")))
    return st;
  GError *error = NULL;
  QhTensor **tensors = qh_read_inputs(model->graph, path, &error);
  if (tensors == NULL)
    return qh_api_status_from_error(error);
  QhostValues *v = qh_api_values_new();
  for (guint i = 0; i < model->graph->inputs->len; i++)
    qh_api_values_add(v, qh_graph_value(model->graph, g_array_index(model->graph->inputs, int, i))->name,
                      tensors[i]);
  g_free(tensors);
  *out = v;
  return NULL;
}

typedef struct {
  const QhostModel *model;
  QhBackendChoice backend;
  gboolean json;
} InspectJob;

static gboolean inspect_to(gpointer data, FILE *out, GError **error) {
  InspectJob *j = data;
  return qh_inspect(j->model->path, j->model->graph, &j->backend, j->json, out, error);
}

QhostStatus *qhost_model_inspect(const QhostModel *model, const QhostOptions *options, QhostFormat format,
                                 char **out_text) {
  QhostStatus *st = qh_api_model_ready(model);
  if (st || (st = qh_api_need(out_text, "out")))
    return st;
  InspectJob job = {.model = model, .json = format == QHOST_FORMAT_JSON};
  qh_api_backend_choice(options, &job.backend);
  return qh_api_capture(inspect_to, &job, out_text);
}
