/* Sessions of the embedding API: a model planned for the shapes of the data it is given,
 * on the host's reference kernels or lowered to a backend's, run on the caller's tensors
 * in place (flows/runner.c does the sample-by-sample runs and the stacking). A run with
 * new input shapes plans again, from a fresh graph parsed from the model's bytes as
 * qhost_model_load read them (lowering rewrites the graph it lowers): the model file is
 * not read again. */
#include <string.h>

#include "api/api-private.h"
#include "core/error.h"
#include "io/onnx.h"

struct QhostSession {
  char *path;
  char *dir;                 /* external data resolves here */
  GBytes *bytes;             /* the model file as loaded; NULL after close */
  QhPluginSearch search;     /* owned copies */
  char *backend;
  char **backend_opts;
  int threads;
  QhBackend *plugin;         /* loaded once, or NULL for the host path */
  QhGraph *graph;            /* what the runner runs; NULL after close */
  gboolean graph_used;       /* planned (maybe lowered) already: reload before planning again */
  QhRunner *runner;
  QhShape *shapes;           /* the input shapes the runner was made for */
  int n_inputs, n_outputs;
  gboolean closed;
};

static void release(QhostSession *s) {
  qh_runner_free(s->runner);
  s->runner = NULL;
  g_clear_pointer(&s->graph, qh_graph_free);
  g_clear_pointer(&s->plugin, qh_backend_free);
  g_clear_pointer(&s->shapes, g_free);
  g_clear_pointer(&s->bytes, g_bytes_unref);
}

static QhGraph *parse_graph(QhostSession *s, GError **error) {
  gsize len = 0;
  const guint8 *data = g_bytes_get_data(s->bytes, &len);
  return qh_onnx_load_from_memory(data, len, s->path, s->dir, error);
}

void qhost_session_free(QhostSession *s) {
  if (s == NULL)
    return;
  release(s);
  g_free(s->path);
  g_free(s->dir);
  g_strfreev(s->search.paths);
  g_free(s->search.dir);
  g_free(s->backend);
  g_strfreev(s->backend_opts);
  g_free(s);
}

QhostStatus *qhost_session_close(QhostSession *s) {
  QhostStatus *st = qh_api_need(s, "session");
  if (st)
    return st;
  if (s->closed)
    return qh_api_status(QHOST_STATUS_CLOSED, "%s: the session was closed", s->path);
  release(s);
  s->closed = TRUE;
  return NULL;
}

QhostStatus *qhost_session_new(const QhostModel *model, const QhostOptions *options, QhostSession **out) {
  QhostStatus *st = qh_api_model_ready(model);
  if (st || (st = qh_api_need(out, "out")))
    return st;
  QhBackendChoice choice;
  qh_api_backend_choice(options, &choice);
  QhostSession *s = g_new0(QhostSession, 1);
  s->path = g_strdup(model->path);
  s->dir = g_path_get_dirname(model->path);
  s->bytes = g_bytes_ref(model->bytes);
  s->search.paths = g_strdupv(choice.search.paths);
  s->search.dir = g_strdup(choice.search.dir);
  s->backend = g_strdup(choice.name);
  s->backend_opts = g_strdupv((char **)choice.options);
  s->threads = choice.threads;
  s->n_inputs = (int)model->graph->inputs->len;
  s->n_outputs = (int)model->graph->outputs->len;
  GError *error = NULL;
  gboolean ok = (s->graph = parse_graph(s, &error)) != NULL;
  if (ok && s->backend) {
    QhBackendChoice own = {s->search, s->backend, s->backend_opts, s->threads};
    ok = (s->plugin = qh_backend_choice_load(&own, &error)) != NULL;
  }
  if (!ok) {
    qhost_session_free(s);
    return qh_api_status_from_error(error);
  }
  *out = s;
  return NULL;
}

/* Views of the caller's tensors in the model's input order, checked against the graph. */
static QhostStatus *bind_inputs(const QhostSession *s, const QhostTensor *inputs, size_t n, QhTensor *views) {
  if (n != (size_t)s->n_inputs)
    return qh_api_status(QHOST_STATUS_MISMATCH, "%s: %zu inputs given; the model has %d", s->path, n,
                         s->n_inputs);
  const QhGraph *g = s->graph;
  for (int i = 0; i < s->n_inputs; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(g->inputs, int, i));
    const QhostTensor *t = NULL;
    for (size_t k = 0; k < n && t == NULL; k++)
      if (inputs[k].name ? strcmp(inputs[k].name, v->name) == 0 : k == (size_t)i)
        t = &inputs[k];
    if (t == NULL)
      return qh_api_status(QHOST_STATUS_MISMATCH, "%s: no tensor given for input '%s'", s->path, v->name);
    if (t->dtype != (int32_t)v->dtype)
      return qh_api_status(QHOST_STATUS_MISMATCH, "%s: input '%s' is %s; the model expects %s", s->path,
                           v->name, qhost_dtype_name(t->dtype), qh_dtype_name(v->dtype));
    if (t->rank < 0 || t->rank > QHOST_MAX_RANK || (t->rank > 0 && t->shape == NULL))
      return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT, "%s: input '%s': rank %d (0 to %d, with a shape)",
                           s->path, v->name, (int)t->rank, QHOST_MAX_RANK);
    QhShape shape = qh_shape_make(t->rank, t->shape);
    int64_t numel = 0;
    GError *error = NULL;
    if (!qh_shape_numel(&shape, &numel, &error)) {
      g_prefix_error(&error, "%s: input '%s': ", s->path, v->name);
      return qh_api_status_from_error(error);
    }
    size_t want = (size_t)numel * qh_dtype_size(v->dtype);
    if (t->nbytes != want || (want > 0 && t->data == NULL))
      return qh_api_status(QHOST_STATUS_INVALID_ARGUMENT,
                           "%s: input '%s': %zu bytes given, its dtype and shape need %zu", s->path, v->name,
                           t->nbytes, want);
    views[i] = (QhTensor){.dtype = v->dtype, .shape = shape, .data = t->data, .nbytes = want};
  }
  return NULL;
}

static gboolean same_shapes(const QhostSession *s, const QhTensor *views) {
  for (int i = 0; i < s->n_inputs; i++)
    if (!qh_shape_equal(&s->shapes[i], &views[i].shape))
      return FALSE;
  return TRUE;
}

/* A runner for these inputs' shapes (the current one when they did not change). */
static gboolean prepare_runner(QhostSession *s, QhTensor *const *ptrs, const QhTensor *views, GError **error) {
  if (s->runner && same_shapes(s, views))
    return TRUE;
  qh_runner_free(s->runner);
  s->runner = NULL;
  if (s->graph_used) {
    qh_graph_free(s->graph);
    if ((s->graph = parse_graph(s, error)) == NULL)
      return FALSE;
  }
  s->graph_used = TRUE;
  if ((s->runner = qh_runner_new(s->graph, ptrs, s->threads, s->plugin, error)) == NULL)
    return FALSE;
  g_free(s->shapes);
  s->shapes = g_new0(QhShape, s->n_inputs + 1);
  for (int i = 0; i < s->n_inputs; i++)
    s->shapes[i] = views[i].shape;
  return TRUE;
}

QhostStatus *qhost_session_run(QhostSession *s, const QhostTensor *inputs, size_t n_inputs,
                               QhostValues **out_outputs) {
  QhostStatus *st = qh_api_need(s, "session");
  if (st || (st = qh_api_need(out_outputs, "out")))
    return st;
  if (s->closed)
    return qh_api_status(QHOST_STATUS_CLOSED, "%s: the session was closed", s->path);
  if (n_inputs > 0 && (st = qh_api_need(inputs, "inputs")))
    return st;
  QhTensor *views = g_new0(QhTensor, s->n_inputs + 1);
  QhTensor **ptrs = g_new0(QhTensor *, s->n_inputs + 1);
  for (int i = 0; i < s->n_inputs; i++)
    ptrs[i] = &views[i];
  st = bind_inputs(s, inputs, n_inputs, views);
  GError *error = NULL;
  QhTensor **outs = NULL;
  if (st == NULL) {
    if (!prepare_runner(s, ptrs, views, &error) || !qh_runner_run_on(s->runner, ptrs, &outs, &error)) {
      qh_error_prefix(&error, s->path);
      st = qh_api_status_from_error(error);
    }
  }
  if (st == NULL) {
    QhostValues *v = qh_api_values_new();
    v->model_outputs = TRUE;
    for (int o = 0; o < s->n_outputs; o++)
      qh_api_values_add(v, qh_graph_value(s->graph, g_array_index(s->graph->outputs, int, o))->name, outs[o]);
    g_free(outs);
    *out_outputs = v;
  }
  g_free(views);
  g_free(ptrs);
  return st;
}
