/* The planner and executor of the host's reference path. Planning binds input
 * shapes, infers every value's dtype and shape node by node, folds nodes whose
 * inputs are all constant (and Shape, whose output depends only on shapes), picks a
 * kernel per node and gives every intermediate value a place in one arena, sharing
 * space between values whose lifetimes do not overlap. The arena is allocated once
 * per plan and reused by every run, so a run does no allocation or page faulting
 * beyond the graph outputs it hands to the caller. */
#include "exec/plan.h"

#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "core/error.h"
#include "core/log.h"
#include "exec/fusion.h"
#include "exec/layout.h"

/* Largest constant the planner computes at load time (64 MiB). */
#define QH_PLAN_MAX_FOLD_BYTES ((size_t)64 << 20)

struct QhPlan {
  const QhGraph *graph;
  int n_values;
  QhTensor *infos;          /* per value: dtype, shape, data when constant */
  gboolean *owns_data;      /* per value: infos[v].data was folded here */
  gboolean *is_known;       /* per value: infos[v] has been inferred */
  GArray *order;            /* all live nodes, topological */
  GArray *run_order;        /* live nodes not folded */
  const QhOpDef **defs;     /* per node id */
  gboolean *is_folded;      /* per node id */
  int64_t *macs;            /* per node id */
  int *last_use;            /* per value: index in run_order of its last consumer, or -1 */
  size_t *arena_offset;     /* per value: byte offset in the arena, or SIZE_MAX if not there */
  size_t arena_size;
  void *arena;              /* allocated at the first run */
  QhPlanKernel *ext;        /* per node id: external kernel (ext[id].run != NULL) */
  QhPlanResolveFn resolve;
  gpointer resolve_data;
  gboolean profiling;
  int64_t *time_ns;         /* per node id, while profiling */
  gboolean shapes_only;
  gboolean use_naive;
  QhPlanValueFn value_hook;
  gpointer value_hook_data;
  gboolean *nhwc;           /* per value: kept channels-last (layout.c) unless a hook watches */
  QhFusedStep *fused;       /* per step of run_order: Conv post-op groups (fusion.c), with nhwc */
};

static gboolean node_fail(GError **error, const QhNode *node, QhErrorCode code, const char *fmt,
                          ...) G_GNUC_PRINTF(4, 5);

static gboolean node_fail(GError **error, const QhNode *node, QhErrorCode code, const char *fmt,
                          ...) {
  va_list ap;
  va_start(ap, fmt);
  char *cause = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QH_ERROR, code, "node '%s' (%s): %s", node->name, node->op_type, cause);
  g_free(cause);
  return FALSE;
}

void qh_plan_free(QhPlan *plan) {
  if (plan == NULL)
    return;
  for (int v = 0; v < plan->n_values; v++)
    if (plan->owns_data[v])
      qh_aligned_free(plan->infos[v].data);
  g_free(plan->infos);
  g_free(plan->owns_data);
  g_free(plan->is_known);
  if (plan->order)
    g_array_unref(plan->order);
  if (plan->run_order)
    g_array_unref(plan->run_order);
  g_free(plan->defs);
  g_free(plan->is_folded);
  g_free(plan->macs);
  g_free(plan->ext);
  g_free(plan->time_ns);
  g_free(plan->last_use);
  g_free(plan->arena_offset);
  g_free(plan->nhwc);
  g_free(plan->fused);
  qh_aligned_free(plan->arena);
  g_free(plan);
}

static gboolean bind_input(QhPlan *plan, const QhValue *v, const QhShape *given, GError **error) {
  QhTensor *info = &plan->infos[v->id];
  if (!qh_dtype_is_supported(v->dtype)) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "input '%s' has no supported element type",
                v->name);
    return FALSE;
  }
  info->dtype = v->dtype;
  if (given != NULL) {
    if (v->shape.rank >= 0) {
      gboolean fits = given->rank == v->shape.rank;
      for (int i = 0; fits && i < given->rank; i++)
        fits = v->shape.dims[i] < 0 || v->shape.dims[i] == given->dims[i];
      if (!fits) {
        char *want = qh_shape_to_string(&v->shape), *got = qh_shape_to_string(given);
        g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                    "input '%s' has shape %s but the model expects %s", v->name, got, want);
        g_free(want);
        g_free(got);
        return FALSE;
      }
    }
    info->shape = *given;
  } else {
    if (v->shape.rank < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                  "input '%s' declares no shape; give data to bind one", v->name);
      return FALSE;
    }
    info->shape = v->shape;
    for (int i = 0; i < info->shape.rank; i++)
      if (info->shape.dims[i] < 0)
        info->shape.dims[i] = 1;
  }
  int64_t n;
  if (!qh_shape_numel(&info->shape, &n, error)) {
    g_prefix_error(error, "input '%s': ", v->name);
    return FALSE;
  }
  plan->is_known[v->id] = TRUE;
  return TRUE;
}

/* TRUE when no present output has an element: running the kernel could only spin
 * over dimensions of a shape like [2^34, 0] without writing anything. */
static gboolean outputs_empty(const QhNode *node, QhTensor *const *outs) {
  for (int o = 0; o < node->n_outputs; o++)
    if (outs[o] != NULL && outs[o]->nbytes > 0)
      return FALSE;
  return TRUE;
}

/* Run a node on constant inputs at plan time; its outputs become constants. */
static gboolean fold_node(QhPlan *plan, const QhNode *node, const QhTensor *const *inputs,
                          GError **error) {
  QhTensor **outs = g_new0(QhTensor *, (gsize)node->n_outputs + 1);
  gboolean ok = TRUE;
  for (int o = 0; o < node->n_outputs && ok; o++) {
    int vid = node->outputs[o];
    if (vid < 0)
      continue;
    outs[o] = qh_tensor_new(plan->infos[vid].dtype, &plan->infos[vid].shape, error);
    ok = outs[o] != NULL;
  }
  if (ok && !outputs_empty(node, outs)) {
    QhThreadPool *pool = qh_thread_pool_new(1);
    QhExecContext ctx = {.pool = pool};
    ok = plan->defs[node->id]->run(&ctx, node, inputs, node->n_inputs, outs, node->n_outputs, error);
    qh_exec_context_clear(&ctx);
    qh_thread_pool_free(pool);
  }
  for (int o = 0; o < node->n_outputs; o++) {
    int vid = node->outputs[o];
    if (outs[o] == NULL)
      continue;
    if (ok && vid >= 0) {
      plan->infos[vid].data = outs[o]->data;
      plan->infos[vid].nbytes = outs[o]->nbytes;
      plan->owns_data[vid] = TRUE;
      g_free(outs[o]);
    } else {
      qh_tensor_free(outs[o]);
    }
  }
  g_free(outs);
  return ok;
}

/* Infer an external kernel's outputs; the kernel is never folded. */
static gboolean plan_external(QhPlan *plan, const QhNode *node, GError **error) {
  const QhPlanKernel *k = &plan->ext[node->id];
  const QhTensor **inputs = g_new0(const QhTensor *, (gsize)node->n_inputs + 1);
  QhTensor *outs = g_new0(QhTensor, (gsize)node->n_outputs + 1);
  gboolean ok = TRUE;
  for (int i = 0; i < node->n_inputs && ok; i++) {
    int vid = node->inputs[i];
    if (vid < 0)
      continue;
    if (!plan->is_known[vid])
      ok = node_fail(error, node, QH_ERROR_INVALID, "input '%s' has no known shape",
                     qh_graph_value(plan->graph, vid)->name);
    inputs[i] = &plan->infos[vid];
  }
  for (int o = 0; o < node->n_outputs; o++)
    outs[o].shape.rank = -1;
  ok = ok && k->infer(k->data, node, inputs, node->n_inputs, outs, node->n_outputs, error);
  for (int o = 0; ok && o < node->n_outputs; o++) {
    int vid = node->outputs[o];
    int64_t n;
    if (vid < 0)
      continue;
    if (!qh_shape_numel(&outs[o].shape, &n, error)) {
      g_prefix_error(error, "node '%s': output %d: ", node->name, o);
      ok = FALSE;
      break;
    }
    plan->infos[vid].dtype = outs[o].dtype;
    plan->infos[vid].shape = outs[o].shape;
    plan->infos[vid].nbytes = (size_t)n * qh_dtype_size(outs[o].dtype);
    plan->is_known[vid] = TRUE;
  }
  plan->macs[node->id] = k->macs;
  g_free(outs);
  g_free(inputs);
  return ok;
}

/* The other op types of g without a host kernel, after the one node has, each once in
 * graph order ("Erf, LSTM"): so that one error names every op a model needs. */
static char *other_unsupported(const QhGraph *g, const QhNode *node) {
  GString *s = g_string_new(NULL);
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  g_hash_table_add(seen, (gpointer)node->op_type);
  for (guint i = 0; i < g->nodes->len; i++) {
    const QhNode *n = g_ptr_array_index(g->nodes, i);
    if (qh_op_find(n->domain, n->op_type) == NULL && !g_hash_table_contains(seen, n->op_type)) {
      g_hash_table_add(seen, (gpointer)n->op_type);
      g_string_append_printf(s, "%s%s%s%s", s->len ? ", " : "", *n->domain ? n->domain : "",
                             *n->domain ? "." : "", n->op_type);
    }
  }
  g_hash_table_destroy(seen);
  return g_string_free(s, FALSE);
}

static gboolean plan_node(QhPlan *plan, const QhNode *node, GError **error) {
  if (plan->resolve && plan->resolve(plan->resolve_data, node, &plan->ext[node->id])) {
    if (plan->ext[node->id].infer == NULL || plan->ext[node->id].run == NULL)
      return node_fail(error, node, QH_ERROR_FAILED, "external kernel without infer or run");
    return plan_external(plan, node, error);
  }
  const QhOpDef *def = qh_op_find(node->domain, node->op_type);
  if (def == NULL) {
    if (plan->shapes_only)
      return TRUE; /* outputs stay unknown; consumers are skipped too */
    char *others = other_unsupported(plan->graph, node);
    gboolean ok = node_fail(error, node, QH_ERROR_UNSUPPORTED,
                            "operator %s%s%s is not supported by qhost's reference kernels%s%s",
                            *node->domain ? node->domain : "", *node->domain ? "." : "", node->op_type,
                            *others ? "; nor are " : "", others);
    g_free(others);
    return ok;
  }
  plan->defs[node->id] = def;
  if (node->n_inputs < def->min_inputs || node->n_inputs > def->max_inputs)
    return node_fail(error, node, QH_ERROR_INVALID, "has %d inputs; %s takes %d to %d",
                     node->n_inputs, node->op_type, def->min_inputs, def->max_inputs);
  if (node->n_outputs < def->min_outputs || node->n_outputs > def->max_outputs)
    return node_fail(error, node, QH_ERROR_INVALID, "has %d outputs; %s produces %d to %d",
                     node->n_outputs, node->op_type, def->min_outputs, def->max_outputs);
  for (int o = 0; o < def->min_outputs; o++)
    if (node->outputs[o] < 0)
      return node_fail(error, node, QH_ERROR_INVALID, "required output %d has no name", o);

  const QhTensor **inputs = g_new0(const QhTensor *, (gsize)node->n_inputs + 1);
  gboolean all_const = TRUE;
  for (int i = 0; i < node->n_inputs; i++) {
    int vid = node->inputs[i];
    if (vid < 0)
      continue;
    if (!plan->is_known[vid]) {
      g_free(inputs);
      if (plan->shapes_only)
        return TRUE;
      return node_fail(error, node, QH_ERROR_INVALID, "input '%s' has no known shape",
                       qh_graph_value(plan->graph, vid)->name);
    }
    inputs[i] = &plan->infos[vid];
    all_const = all_const && plan->infos[vid].data != NULL;
  }
  QhTensor *outs = g_new0(QhTensor, (gsize)node->n_outputs + 1);
  for (int o = 0; o < node->n_outputs; o++)
    outs[o].shape.rank = -1;
  gboolean ok = def->infer(node, inputs, node->n_inputs, outs, node->n_outputs, error);
  for (int o = 0; ok && o < node->n_outputs; o++) {
    int vid = node->outputs[o];
    if (vid < 0)
      continue;
    int64_t n;
    if (!qh_dtype_is_supported(outs[o].dtype) || outs[o].shape.rank < 0) {
      ok = node_fail(error, node, QH_ERROR_FAILED, "shape inference left output %d unknown", o);
    } else if (!qh_shape_numel(&outs[o].shape, &n, error)) {
      g_prefix_error(error, "node '%s' (%s): output '%s': ", node->name, node->op_type,
                     qh_graph_value(plan->graph, vid)->name);
      ok = FALSE;
    } else {
      plan->infos[vid].dtype = outs[o].dtype;
      plan->infos[vid].shape = outs[o].shape;
      plan->infos[vid].nbytes = (size_t)n * qh_dtype_size(outs[o].dtype);
      plan->is_known[vid] = TRUE;
    }
  }
  if (ok && def->macs)
    plan->macs[node->id] = def->macs(node, inputs, node->n_inputs, outs, node->n_outputs);
  /* Folding runs at load time, also for `qhost inspect`: cap what it may allocate so
   * a few hundred bytes of model cannot make it build gigabytes of constants;
   * larger results are computed at run time like any other value. */
  size_t fold_bytes = 0;
  for (int o = 0; ok && o < node->n_outputs; o++)
    if (node->outputs[o] >= 0)
      fold_bytes += plan->infos[node->outputs[o]].nbytes;
  gboolean foldable = (all_const || strcmp(node->op_type, "Shape") == 0) &&
                      fold_bytes <= QH_PLAN_MAX_FOLD_BYTES;
  if (ok && foldable) {
    ok = fold_node(plan, node, inputs, error);
    plan->is_folded[node->id] = ok;
  }
  g_free(outs);
  g_free(inputs);
  return ok;
}

typedef struct {
  int vid;
  size_t size;
  int first, last; /* run_order steps, inclusive */
  size_t offset;
} Slot;

static gint compare_slots(gconstpointer a, gconstpointer b) {
  const Slot *x = a, *y = b;
  if (x->size != y->size)
    return x->size > y->size ? -1 : 1;
  return x->first - y->first;
}

static gint compare_offsets(gconstpointer a, gconstpointer b) {
  const Slot *x = *(const Slot *const *)a, *y = *(const Slot *const *)b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Whether node only re-labels its first input's bytes (ONNX's view ops, on the host's
 * kernels, which copy them): its output may then take the input's place in the arena. */
static gboolean is_view_node(const QhPlan *plan, const QhNode *node) {
  static const char *const views[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"};
  const QhOpDef *def = plan->defs[node->id];
  if (def == NULL || plan->ext[node->id].run != NULL || node->n_inputs < 1 || node->inputs[0] < 0 ||
      node->n_outputs < 1 || node->outputs[0] < 0)
    return FALSE;
  for (int o = 1; o < node->n_outputs; o++) /* Dropout's mask */
    if (node->outputs[o] >= 0)
      return FALSE;
  for (size_t i = 0; i < G_N_ELEMENTS(views); i++)
    if (strcmp(def->op_type, views[i]) == 0)
      return def == qh_op_find("", views[i]);
  return FALSE;
}

/* Place every intermediate value in the arena: largest first, each at the lowest
 * offset not used by a value alive at an overlapping step. Lifetimes are
 * inclusive, so a node's output never shares bytes with its own inputs, except a
 * view's (Reshape, Squeeze, ...) whose input dies at that node: the two share one
 * slot and the view's copy becomes nothing (swin_t: 3% of the run in Reshape copies). */
static void plan_arena(QhPlan *plan) {
  const QhGraph *g = plan->graph;
  plan->arena_offset = g_new(size_t, plan->n_values + 1);
  for (int v = 0; v < plan->n_values; v++)
    plan->arena_offset[v] = SIZE_MAX;
  /* a fused group's result is written by its Conv, at the head's step */
  int *born = g_new(int, plan->n_values + 1);
  for (int v = 0; v < plan->n_values; v++)
    born[v] = G_MAXINT;
  for (guint step = 0; plan->fused && step < plan->run_order->len; step++)
    if (plan->fused[step].kind != QH_POST_NONE || plan->fused[step].host.kind != QH_HOST_GROUP_NONE)
      born[plan->fused[step].out_value] = (int)step;
  /* slot_of[v]: index in slots (before sorting) of the slot v lives in, or -1; root[v]:
   * the value that slot was made for (v itself but for views) */
  int *slot_of = g_new(int, plan->n_values + 1), *root = g_new(int, plan->n_values + 1);
  for (int v = 0; v < plan->n_values; v++) {
    slot_of[v] = -1;
    root[v] = v;
  }
  GArray *slots = g_array_new(FALSE, FALSE, sizeof(Slot));
  for (guint step = 0; step < plan->run_order->len; step++) {
    const QhNode *node = qh_graph_node(g, g_array_index(plan->run_order, int, step));
    if ((plan->fused == NULL || !plan->fused[step].absorbed) && is_view_node(plan, node)) {
      int in = node->inputs[0], out = node->outputs[0];
      if (slot_of[in] >= 0 && plan->last_use[in] == (int)step && !qh_graph_value(g, out)->is_output &&
          born[out] == G_MAXINT && plan->infos[out].nbytes == plan->infos[in].nbytes) {
        Slot *shared = &g_array_index(slots, Slot, slot_of[in]);
        shared->last = MAX(shared->last, MAX((int)step, plan->last_use[out]));
        slot_of[out] = slot_of[in];
        root[out] = shared->vid;
        continue;
      }
    }
    for (int o = 0; o < node->n_outputs; o++) {
      int vid = node->outputs[o];
      if (vid < 0 || qh_graph_value(g, vid)->is_output)
        continue;
      /* Every slot has QH_TENSOR_ALIGN bytes of slack after its data, as plugin
       * kernels are promised (vector loads past the end; canaries live there). */
      size_t size = (plan->infos[vid].nbytes + 2 * QH_TENSOR_ALIGN - 1) / QH_TENSOR_ALIGN * QH_TENSOR_ALIGN;
      Slot s = {vid, size, MIN((int)step, born[vid]), MAX((int)step, plan->last_use[vid]), 0};
      slot_of[vid] = (int)slots->len;
      g_array_append_val(slots, s);
    }
  }
  g_array_sort(slots, compare_slots);
  GPtrArray *placed = g_ptr_array_new();
  GPtrArray *overlapping = g_ptr_array_new();
  size_t end = 0;
  for (guint i = 0; i < slots->len; i++) {
    Slot *s = &g_array_index(slots, Slot, i);
    g_ptr_array_set_size(overlapping, 0);
    for (guint k = 0; k < placed->len; k++) {
      const Slot *p = g_ptr_array_index(placed, k);
      if (p->first <= s->last && s->first <= p->last)
        g_ptr_array_add(overlapping, (gpointer)p);
    }
    g_ptr_array_sort(overlapping, compare_offsets);
    size_t offset = 0;
    for (guint k = 0; k < overlapping->len; k++) {
      const Slot *p = g_ptr_array_index(overlapping, k);
      if (p->offset >= offset + s->size)
        break;
      offset = MAX(offset, p->offset + p->size);
    }
    s->offset = offset;
    plan->arena_offset[s->vid] = offset;
    end = MAX(end, offset + s->size);
    g_ptr_array_add(placed, s);
  }
  plan->arena_size = end;
  for (int v = 0; v < plan->n_values; v++) /* the views, placed with their inputs */
    if (root[v] != v)
      plan->arena_offset[v] = plan->arena_offset[root[v]];
  g_free(slot_of);
  g_free(root);
  g_free(born);
  g_ptr_array_free(overlapping, TRUE);
  g_ptr_array_free(placed, TRUE);
  g_array_free(slots, TRUE);
}

static QhPlan *plan_new(const QhGraph *graph, const QhShape *input_shapes, gboolean shapes_only,
                        QhPlanResolveFn resolve, gpointer resolve_data, GError **error) {
  QhPlan *plan = g_new0(QhPlan, 1);
  plan->graph = graph;
  plan->shapes_only = shapes_only;
  plan->resolve = resolve;
  plan->resolve_data = resolve_data;
  plan->n_values = qh_graph_n_values(graph);
  int n_nodes = qh_graph_n_nodes(graph);
  plan->infos = g_new0(QhTensor, plan->n_values + 1);
  plan->owns_data = g_new0(gboolean, plan->n_values + 1);
  plan->is_known = g_new0(gboolean, plan->n_values + 1);
  plan->defs = g_new0(const QhOpDef *, n_nodes + 1);
  plan->is_folded = g_new0(gboolean, n_nodes + 1);
  plan->macs = g_new0(int64_t, n_nodes + 1);
  plan->ext = g_new0(QhPlanKernel, n_nodes + 1);
  plan->time_ns = g_new0(int64_t, n_nodes + 1);
  plan->last_use = g_new(int, plan->n_values + 1);
  for (int v = 0; v < plan->n_values; v++) {
    plan->infos[v].shape.rank = -1;
    plan->last_use[v] = -1;
  }

  if (!qh_graph_topo_order(graph, &plan->order, error))
    goto fail;
  for (int v = 0; v < plan->n_values; v++) {
    const QhValue *val = qh_graph_value(graph, v);
    if (val->initializer != NULL) {
      plan->infos[v] = *val->initializer; /* data borrowed from the graph */
      plan->is_known[v] = TRUE;
    }
  }
  for (guint i = 0; i < graph->inputs->len; i++) {
    const QhValue *v = qh_graph_value(graph, g_array_index(graph->inputs, int, i));
    if (!bind_input(plan, v, input_shapes ? &input_shapes[i] : NULL, error))
      goto fail;
  }
  plan->run_order = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < plan->order->len; i++) {
    const QhNode *node = qh_graph_node(graph, g_array_index(plan->order, int, i));
    if (!plan_node(plan, node, error))
      goto fail;
    if (!plan->is_folded[node->id])
      g_array_append_val(plan->run_order, node->id);
  }
  for (guint i = 0; i < plan->run_order->len; i++) {
    const QhNode *node = qh_graph_node(graph, g_array_index(plan->run_order, int, i));
    for (int k = 0; k < node->n_inputs; k++)
      if (node->inputs[k] >= 0)
        plan->last_use[node->inputs[k]] = (int)i;
  }
  if (!shapes_only) {
    gboolean *external = g_new0(gboolean, n_nodes + 1);
    for (int id = 0; id < n_nodes; id++)
      external[id] = plan->ext[id].run != NULL;
    plan->nhwc = qh_layout_plan_nhwc(graph, plan->run_order, plan->infos, plan->is_known,
                                     (const QhOpDef *const *)plan->defs, external, plan->n_values);
    plan->fused = qh_fusion_plan(graph, plan->run_order, plan->infos, (const QhOpDef *const *)plan->defs,
                                 external, plan->nhwc, plan->n_values);
    g_free(external);
    for (guint step = 0; step < plan->run_order->len; step++) {
      int reads[2];
      const int n_reads = qh_fusion_group_reads(&plan->fused[step], reads);
      for (int k = 0; k < n_reads; k++)
        plan->last_use[reads[k]] = MAX(plan->last_use[reads[k]], (int)step);
    }
  }
  plan_arena(plan);
  if (!shapes_only) {
    for (guint i = 0; i < graph->outputs->len; i++) {
      const QhValue *v = qh_graph_value(graph, g_array_index(graph->outputs, int, i));
      if (!plan->is_known[v->id]) {
        g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "output '%s' is never computed", v->name);
        goto fail;
      }
    }
  }
  return plan;

fail:
  qh_plan_free(plan);
  return NULL;
}

QhPlan *qh_plan_new(const QhGraph *graph, const QhShape *input_shapes, gboolean shapes_only,
                    GError **error) {
  return plan_new(graph, input_shapes, shapes_only, NULL, NULL, error);
}

QhPlan *qh_plan_new_with_kernels(const QhGraph *graph, const QhShape *input_shapes,
                                 QhPlanResolveFn resolve, gpointer resolve_data, GError **error) {
  return plan_new(graph, input_shapes, FALSE, resolve, resolve_data, error);
}

void qh_plan_set_profiling(QhPlan *plan, gboolean on) {
  plan->profiling = on;
  memset(plan->time_ns, 0, sizeof(int64_t) * (size_t)qh_graph_n_nodes(plan->graph));
}

int64_t qh_plan_node_time_ns(const QhPlan *plan, int node_id) { return plan->time_ns[node_id]; }

int qh_plan_fused_convs(const QhPlan *plan) {
  int n = 0;
  for (guint i = 0; plan->fused && i < plan->run_order->len; i++)
    n += plan->fused[i].kind != QH_POST_NONE;
  return n;
}

int qh_plan_fused_host_groups(const QhPlan *plan, int kind) {
  int n = 0;
  for (guint i = 0; plan->fused && i < plan->run_order->len; i++)
    n += (int)plan->fused[i].host.kind == kind;
  return n;
}

gboolean qh_plan_node_is_external(const QhPlan *plan, int node_id) {
  return plan->ext[node_id].run != NULL;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const QhTensor *qh_plan_value_info(const QhPlan *plan, int value_id) {
  if (value_id < 0 || value_id >= plan->n_values || !plan->is_known[value_id])
    return NULL;
  return &plan->infos[value_id];
}

const GArray *qh_plan_order(const QhPlan *plan) { return plan->order; }

gboolean qh_plan_value_is_nhwc(const QhPlan *plan, int value_id) {
  return plan->nhwc != NULL && value_id >= 0 && value_id < plan->n_values && plan->nhwc[value_id];
}

gboolean qh_plan_node_is_folded(const QhPlan *plan, int node_id) {
  return plan->is_folded[node_id];
}

int64_t qh_plan_node_macs(const QhPlan *plan, int node_id) { return plan->macs[node_id]; }

void qh_plan_use_naive_kernels(QhPlan *plan, gboolean use_naive) { plan->use_naive = use_naive; }

void qh_plan_set_value_hook(QhPlan *plan, QhPlanValueFn fn, gpointer user_data) {
  plan->value_hook = fn;
  plan->value_hook_data = user_data;
}

/* Subnormal floats (below 2^-126) cost the CPU a microcode assist per operation: a
 * MatMul whose input is half subnormal ran 140x slower (ONNX Runtime's too). Softmax
 * writes them where an attention mask subtracts ~100 (swin_t's shifted windows: exp(-100)
 * = 3.7e-44), which made swin_t's attention-times-V products 12 ms of a 150 ms run. So a
 * run flushes them on its thread (MXCSR's flush-to-zero and denormals-are-zero, restored
 * after): no value the kernels compute changes by more than 2^-126 absolute. The pool's
 * workers keep the process's setting (the small per-batch GEMMs of attention run on this
 * thread). Runs that must match PyTorch bit for bit keep IEEE subnormals: bit-compatible
 * ones and those with a value hook (calibration observes every value). Returns the saved
 * setting. */
static unsigned int flush_subnormals_begin(const QhPlan *plan, const QhExecContext *ctx) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned int saved = _mm_getcsr();
  if (!ctx->bit_compatible && plan->value_hook == NULL)
    _mm_setcsr(saved | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
  return saved;
#else
  (void)plan, (void)ctx;
  return 0;
#endif
}

static void flush_subnormals_end(unsigned int saved) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(saved);
#else
  (void)saved;
#endif
}

static gboolean plan_run(QhPlan *plan, QhExecContext *ctx, const QhTensor *const *inputs,
                         QhTensor ***outputs, GError **error);

gboolean qh_plan_run(QhPlan *plan, QhExecContext *ctx, const QhTensor *const *inputs,
                     QhTensor ***outputs, GError **error) {
  unsigned int saved = flush_subnormals_begin(plan, ctx);
  gboolean ok = plan_run(plan, ctx, inputs, outputs, error);
  flush_subnormals_end(saved);
  return ok;
}

static gboolean plan_run(QhPlan *plan, QhExecContext *ctx, const QhTensor *const *inputs,
                         QhTensor ***outputs, GError **error) {
  const QhGraph *g = plan->graph;
  if (plan->shapes_only) {
    g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "this plan was made for shapes only");
    return FALSE;
  }
  if (plan->arena == NULL && plan->arena_size > 0) {
    plan->arena = qh_aligned_alloc0(plan->arena_size);
    if (plan->arena == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_NOMEM, "out of memory allocating %zu bytes of activations",
                  plan->arena_size);
      return FALSE;
    }
  }
  /* live[v]: where v's data is during this run; graph outputs get their own
   * buffers (owned[v]) since they are handed to the caller. */
  const QhTensor **live = g_new0(const QhTensor *, plan->n_values + 1);
  QhTensor **owned = g_new0(QhTensor *, plan->n_values + 1);
  QhTensor *views = g_new0(QhTensor, plan->n_values + 1);
  gboolean ok = TRUE;
  for (int v = 0; v < plan->n_values; v++) {
    if (plan->infos[v].data != NULL) {
      live[v] = &plan->infos[v];
    } else if (plan->arena_offset[v] != SIZE_MAX) {
      views[v] = plan->infos[v];
      views[v].data = (char *)plan->arena + plan->arena_offset[v];
      live[v] = &views[v];
    }
  }
  for (guint i = 0; i < g->inputs->len && ok; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(g->inputs, int, i));
    const QhTensor *want = &plan->infos[v->id];
    if (inputs[i] == NULL || inputs[i]->dtype != want->dtype ||
        !qh_shape_equal(&inputs[i]->shape, &want->shape)) {
      char *ws = qh_shape_to_string(&want->shape);
      char *gs = inputs[i] ? qh_shape_to_string(&inputs[i]->shape) : g_strdup("nothing");
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "input '%s': expected %s %s, got %s %s",
                  v->name, qh_dtype_name(want->dtype), ws,
                  inputs[i] ? qh_dtype_name(inputs[i]->dtype) : "", gs);
      g_free(ws);
      g_free(gs);
      ok = FALSE;
      break;
    }
    live[v->id] = inputs[i];
    if (plan->value_hook && !plan->value_hook(plan->value_hook_data, v->id, inputs[i], error))
      ok = FALSE;
  }

  /* the value hook and the naive kernels see every value in NCHW */
  const gboolean *nhwc = plan->value_hook == NULL && !plan->use_naive ? plan->nhwc : NULL;
  /* Conv post-ops with the region only; host groups whenever no hook watches */
  const QhFusedStep *fused = plan->value_hook == NULL && !plan->use_naive ? plan->fused : NULL;
  const QhTensor **ins = NULL;
  QhTensor **outs = NULL;
  for (guint step = 0; step < plan->run_order->len && ok; step++) {
    const QhNode *node = qh_graph_node(g, g_array_index(plan->run_order, int, step));
    const QhOpDef *def = plan->defs[node->id];
    if (fused && fused[step].absorbed)
      continue; /* an earlier Conv wrote its result */
    ins = g_renew(const QhTensor *, ins, (gsize)node->n_inputs + 1);
    outs = g_renew(QhTensor *, outs, (gsize)node->n_outputs + 1);
    for (int k = 0; k < node->n_inputs; k++)
      ins[k] = node->inputs[k] >= 0 ? live[node->inputs[k]] : NULL;
    for (int o = 0; o < node->n_outputs && ok; o++) {
      int vid = node->outputs[o];
      outs[o] = NULL;
      if (vid < 0)
        continue;
      if (qh_graph_value(g, vid)->is_output) {
        owned[vid] = qh_tensor_new(plan->infos[vid].dtype, &plan->infos[vid].shape, error);
        if (owned[vid] == NULL) {
          g_prefix_error(error, "node '%s' (%s): output '%s': ", node->name, node->op_type,
                         qh_graph_value(g, vid)->name);
          ok = FALSE;
        }
        live[vid] = owned[vid];
      }
      outs[o] = (QhTensor *)live[vid];
    }
    if (!ok)
      break;
    int64_t t0 = plan->profiling ? now_ns() : 0;
    const QhPlanKernel *ext = &plan->ext[node->id];
    if (fused && fused[step].host.kind != QH_HOST_GROUP_NONE) { /* a host group (fusion.c) */
      const QhHostGroup *h = &fused[step].host;
      const int out = fused[step].out_value;
      if (qh_graph_value(g, out)->is_output && owned[out] == NULL) { /* the group's last node's */
        owned[out] = qh_tensor_new(plan->infos[out].dtype, &plan->infos[out].shape, error);
        live[out] = owned[out];
      }
      ctx->constant_inputs = ctx->nhwc_inputs = ctx->nhwc_outputs = 0;
      ok = live[out] != NULL && qh_fused_host_run(ctx, h, live, (QhTensor *)live[out], error);
    } else if (ext->run != NULL) {
      ctx->nhwc_inputs = ctx->nhwc_outputs = 0;
      ok = ext->run(ext->data, ctx, node, ins, node->n_inputs, outs, node->n_outputs, error);
    } else if (!outputs_empty(node, outs)) {
      QhOpRunFn run = (plan->use_naive && def->run_naive) ? def->run_naive : def->run;
      ctx->constant_inputs = ctx->nhwc_inputs = ctx->nhwc_outputs = 0;
      for (int k = 0; k < node->n_inputs && k < 64; k++) {
        if (node->inputs[k] >= 0 && plan->infos[node->inputs[k]].data != NULL)
          ctx->constant_inputs |= G_GUINT64_CONSTANT(1) << k;
        if (nhwc && node->inputs[k] >= 0 && nhwc[node->inputs[k]])
          ctx->nhwc_inputs |= G_GUINT64_CONSTANT(1) << k;
      }
      for (int o = 0; o < node->n_outputs && o < 64 && nhwc; o++)
        if (node->outputs[o] >= 0 && nhwc[node->outputs[o]])
          ctx->nhwc_outputs |= G_GUINT64_CONSTANT(1) << o;
      if (fused && fused[step].kind != QH_POST_NONE) {
        ctx->post_op = fused[step].kind;
        ctx->post_alpha = fused[step].alpha;
        ctx->post_beta = fused[step].beta;
        outs[0] = (QhTensor *)live[fused[step].out_value];
      }
      ok = run(ctx, node, ins, node->n_inputs, outs, node->n_outputs, error);
      ctx->post_op = QH_POST_NONE;
    }
    if (plan->profiling)
      plan->time_ns[node->id] += now_ns() - t0;
    for (int o = 0; o < node->n_outputs && ok && plan->value_hook; o++)
      if (outs[o] != NULL)
        ok = plan->value_hook(plan->value_hook_data, node->outputs[o], outs[o], error);
  }
  g_free(ins);
  g_free(outs);
  ctx->nhwc_inputs = ctx->nhwc_outputs = 0;

  if (ok) {
    *outputs = g_new0(QhTensor *, g->outputs->len + 1);
    for (guint i = 0; i < g->outputs->len && ok; i++) {
      int vid = g_array_index(g->outputs, int, i);
      if (owned[vid] != NULL) {
        (*outputs)[i] = owned[vid];
        owned[vid] = NULL; /* a value listed twice as output is copied below */
      } else {
        (*outputs)[i] = qh_tensor_copy(live[vid], error);
        ok = (*outputs)[i] != NULL;
      }
      if (ok)
        live[vid] = (*outputs)[i];
    }
    if (!ok) {
      for (guint i = 0; i < g->outputs->len; i++)
        qh_tensor_free((*outputs)[i]);
      g_clear_pointer(outputs, g_free);
    }
  }
  for (int v = 0; v < plan->n_values; v++)
    qh_tensor_free(owned[v]);
  g_free(owned);
  g_free(views);
  g_free(live);
  return ok;
}
