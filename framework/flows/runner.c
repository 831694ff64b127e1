/* Running a model on the data a user gives. Data that fits the model's inputs runs
 * in one pass. Data with one more leading axis than a model input, or N rows where
 * the model fixes the batch at 1, runs one sample at a time, and the outputs are
 * stacked (along a new axis, or along the batch axis) — but only when every input
 * agrees on that reading; anything else is a shape error naming the input. */
#include <string.h>

#include "flows/flows.h"
#include "core/error.h"
#include "lower/lowering.h"

typedef enum { FIT_DIRECT, FIT_NEW_AXIS, FIT_BATCH_ONE, FIT_NONE } Fit;

struct QhRunner {
  const QhGraph *graph;
  QhTensor *const *inputs;
  QhPlan *plan;            /* owned unless lowering */
  QhLowering *lowering;    /* owns the plan when set */
  QhExecContext ctx;
  Fit mode;
  int64_t n_rows;
};

static gboolean dims_fit(const QhShape *declared, const int64_t *dims, int rank) {
  if (declared->rank < 0)
    return TRUE;
  if (declared->rank != rank)
    return FALSE;
  for (int i = 0; i < rank; i++)
    if (declared->dims[i] >= 0 && declared->dims[i] != dims[i])
      return FALSE;
  return TRUE;
}

static Fit classify(const QhValue *v, const QhShape *s) {
  if (dims_fit(&v->shape, s->dims, s->rank))
    return FIT_DIRECT;
  if (v->shape.rank >= 0 && s->rank == v->shape.rank + 1 && dims_fit(&v->shape, s->dims + 1, s->rank - 1))
    return FIT_NEW_AXIS;
  if (v->shape.rank >= 1 && s->rank == v->shape.rank && v->shape.dims[0] == 1) {
    QhShape one = *s;
    one.dims[0] = 1;
    if (dims_fit(&v->shape, one.dims, one.rank))
      return FIT_BATCH_ONE;
  }
  return FIT_NONE;
}

static QhShape sample_shape(Fit mode, const QhShape *s) {
  QhShape r = *s;
  if (mode == FIT_NEW_AXIS) {
    r.rank = s->rank - 1;
    memmove(r.dims, s->dims + 1, sizeof(int64_t) * (size_t)r.rank);
  } else if (mode == FIT_BATCH_ONE) {
    r.dims[0] = 1;
  }
  return r;
}

void qh_runner_free(QhRunner *r) {
  if (r == NULL)
    return;
  if (r->lowering)
    qh_lowering_free(r->lowering);
  else
    qh_plan_free(r->plan);
  qh_exec_context_clear(&r->ctx);
  if (r->ctx.pool)
    qh_thread_pool_free(r->ctx.pool);
  g_free(r);
}

QhRunner *qh_runner_new(QhGraph *graph, QhTensor *const *inputs, int threads, QhBackend *backend,
                        GError **error) {
  int n = (int)graph->inputs->len;
  QhRunner *r = g_new0(QhRunner, 1);
  r->graph = graph;
  r->inputs = inputs;
  r->mode = FIT_DIRECT;
  QhShape *shapes = g_new0(QhShape, (gsize)n + 1);
  /* Direct fit wins when every input fits; otherwise all must agree on one
   * per-sample reading with one row count. */
  gboolean all_direct = TRUE;
  for (int i = 0; i < n; i++)
    all_direct &= classify(qh_graph_value(graph, g_array_index(graph->inputs, int, i)),
                           &inputs[i]->shape) == FIT_DIRECT;
  if (!all_direct) {
    Fit mode = FIT_NONE;
    int64_t rows = -1;
    for (int i = 0; i < n && r->mode != FIT_NONE; i++) {
      const QhValue *v = qh_graph_value(graph, g_array_index(graph->inputs, int, i));
      Fit f = classify(v, &inputs[i]->shape);
      if (f == FIT_DIRECT && v->shape.rank >= 1 && v->shape.dims[0] == 1)
        f = FIT_BATCH_ONE; /* one row of a batch-1 input */
      if (f == FIT_NONE || f == FIT_DIRECT || (mode != FIT_NONE && f != mode) ||
          (rows >= 0 && inputs[i]->shape.dims[0] != rows)) {
        char *want = qh_shape_to_string(&v->shape), *got = qh_shape_to_string(&inputs[i]->shape);
        g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                    "input '%s': data of shape %s does not fit the model's %s%s", v->name, got,
                    want, n > 1 ? " (or disagrees with the other inputs on the sample count)" : "");
        g_free(want);
        g_free(got);
        r->mode = FIT_NONE;
        break;
      }
      mode = f;
      rows = inputs[i]->shape.dims[0];
    }
    if (r->mode == FIT_NONE) {
      g_free(shapes);
      qh_runner_free(r);
      return NULL;
    }
    r->mode = mode;
    r->n_rows = rows;
  }
  for (int i = 0; i < n; i++)
    shapes[i] = sample_shape(r->mode, &inputs[i]->shape);
  if (backend != NULL) {
    r->lowering = qh_lowering_new(graph, backend, shapes, QH_LOWERING_DEFAULT, error);
    if (r->lowering && qh_lowering_build(r->lowering, error))
      r->plan = qh_lowering_plan(r->lowering);
  } else {
    r->plan = qh_plan_new(graph, shapes, FALSE, error);
  }
  g_free(shapes);
  if (r->plan == NULL) {
    qh_runner_free(r);
    return NULL;
  }
  r->ctx.pool = qh_thread_pool_new(threads);
  return r;
}

QhLowering *qh_runner_lowering(const QhRunner *r) { return r->lowering; }
QhPlan *qh_runner_plan(const QhRunner *r) { return r->plan; }

QhBackend *qh_backend_choice_load(const QhBackendChoice *choice, GError **error) {
  return qh_backend_open(&choice->search, choice->name, choice->options, choice->threads, error);
}

void qh_tensors_free(QhTensor **tensors, int n) {
  if (tensors == NULL)
    return;
  for (int i = 0; i < n; i++)
    qh_tensor_free(tensors[i]);
  g_free(tensors);
}

/* A view of row i of t (no copy). */
static QhTensor row_view(Fit mode, const QhTensor *t, int64_t i) {
  QhTensor v = *t;
  v.shape = sample_shape(mode, &t->shape);
  size_t row_bytes = t->shape.dims[0] ? t->nbytes / (size_t)t->shape.dims[0] : 0;
  v.data = (char *)t->data + row_bytes * (size_t)i;
  v.nbytes = row_bytes;
  return v;
}

gboolean qh_runner_run(QhRunner *r, QhTensor ***outputs, GError **error) {
  return qh_runner_run_on(r, r->inputs, outputs, error);
}

gboolean qh_runner_run_on(QhRunner *r, QhTensor *const *inputs, QhTensor ***outputs, GError **error) {
  int n_in = (int)r->graph->inputs->len;
  int n_out = (int)r->graph->outputs->len;
  if (r->mode == FIT_DIRECT)
    return qh_plan_run(r->plan, &r->ctx, (const QhTensor *const *)inputs, outputs, error);

  QhTensor *views = g_new0(QhTensor, (gsize)n_in + 1);
  const QhTensor **view_ptrs = g_new0(const QhTensor *, (gsize)n_in + 1);
  QhTensor **stacked = g_new0(QhTensor *, (gsize)n_out + 1);
  gboolean ok = TRUE;
  for (int64_t row = 0; row < r->n_rows && ok; row++) {
    for (int i = 0; i < n_in; i++) {
      views[i] = row_view(r->mode, inputs[i], row);
      view_ptrs[i] = &views[i];
    }
    QhTensor **outs = NULL;
    ok = qh_plan_run(r->plan, &r->ctx, view_ptrs, &outs, error);
    for (int o = 0; ok && o < n_out; o++) {
      if (stacked[o] == NULL) {
        QhShape s = outs[o]->shape;
        if (r->mode == FIT_NEW_AXIS) {
          if (s.rank == QH_MAX_RANK) {
            g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "output rank too high to stack samples");
            ok = FALSE;
            break;
          }
          memmove(s.dims + 1, s.dims, sizeof(int64_t) * (size_t)s.rank);
          s.rank++;
        } else if (s.rank < 1 || s.dims[0] != 1) {
          g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                      "output '%s' has no batch axis of 1 to stack %" G_GINT64_FORMAT " samples along",
                      qh_graph_value(r->graph, g_array_index(r->graph->outputs, int, o))->name,
                      r->n_rows);
          ok = FALSE;
          break;
        }
        s.dims[0] = r->n_rows;
        stacked[o] = qh_tensor_new(outs[o]->dtype, &s, error);
        ok = stacked[o] != NULL;
      }
      if (ok)
        memcpy((char *)stacked[o]->data + outs[o]->nbytes * (size_t)row, outs[o]->data,
               outs[o]->nbytes);
    }
    if (outs)
      qh_tensors_free(outs, n_out);
  }
  g_free(views);
  g_free(view_ptrs);
  if (!ok) {
    qh_tensors_free(stacked, n_out);
    return FALSE;
  }
  *outputs = stacked;
  return TRUE;
}
