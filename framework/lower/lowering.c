/* The lowering driver: asks a plugin which node units of a QDQ graph it takes,
 * creates its kernels, and turns the graph into one where every claimed unit is a
 * single node of the qhost.lowered domain reading and writing integer tensors. The
 * Q/DQ pairs between two claimed units disappear with the units (the DequantizeLinear
 * feeding a unit is removed once nothing else reads it), which is what keeps int8
 * between consecutive kernels. Channels-last kernels get their activations through
 * Transpose nodes placed only where the producer or consumer is not itself a
 * channels-last kernel. */
#include "lower/lowering.h"

#include <string.h>

#include "core/error.h"
#include "lower/qdq-units.h"
#include "lower/kernel-node.h"
#include "lower/prepare.h"
#include "lower/partition.h"
#include "lower/partition-node.h"
#include "hostapi/graph-view.h"

struct QhLowering {
  QhGraph *graph;
  QhBackend *backend;     /* borrowed: every plugin call goes through it */
  char *plugin_name;
  QhPlan *shape_plan;     /* the QDQ graph's shapes (original ids), planned once by qh_lower_prepare */
  GPtrArray *units;       /* QhQdqUnit*, accepted, topological */
  GHashTable *declines;   /* first node id -> GString of "pattern: reason; ..." */
  GPtrArray *rows;        /* QhLoweringRow* */
  GPtrArray *kernels;     /* QhKernelNode*, parallel to units (strict: once built) */
  GHashTable *node_kernel; /* lowered node id -> QhKernelNode* */
  GHashTable *node_row;    /* lowered node id -> QhLoweringRow* */
  QhGraphView *view;
  QhPlan *plan;
  gboolean build_tried;
  gboolean strict;        /* QH_LOWERING_STRICT: no trial at accept */
  QhPartitionSet *partitions; /* ABI 1.2: claimed and compiled before the patterns */
  GPtrArray *partition_nodes; /* QhPartitionNode*, one per compiled partition once built */
  GHashTable *node_partition; /* lowered node id -> QhPartitionNode* */
};

static void row_free(gpointer p) {
  QhLoweringRow *r = p;
  g_free(r->name);
  g_free(r->ops);
  g_array_unref(r->nodes);
  g_free(r->pattern);
  g_free(r->kernel);
  g_free(r->reason);
  g_free(r->partition);
  g_free(r);
}

static void string_free(gpointer p) { g_string_free(p, TRUE); }

void qh_lowering_free(QhLowering *l) {
  if (l == NULL)
    return;
  qh_plan_free(l->plan);
  if (l->partition_nodes)
    g_ptr_array_unref(l->partition_nodes);
  if (l->node_partition)
    g_hash_table_destroy(l->node_partition);
  qh_partitions_free(l->partitions); /* after the plan: its kernels borrow the partitions */
  if (l->units)
    g_ptr_array_unref(l->units);
  if (l->kernels)
    g_ptr_array_unref(l->kernels);
  if (l->rows)
    g_ptr_array_unref(l->rows);
  g_hash_table_destroy(l->declines);
  g_hash_table_destroy(l->node_kernel);
  g_hash_table_destroy(l->node_row);
  qh_graph_view_free(l->view);
  qh_plan_free(l->shape_plan);
  g_free(l->plugin_name);
  g_free(l);
}

static int rank_of(const QhLowering *l, int value) {
  const QhTensor *t = qh_plan_value_info(l->shape_plan, value);
  return t ? t->shape.rank : -1;
}

static void permute_to_nhwc(QhShape *s) {
  int64_t c = s->dims[1];
  s->dims[1] = s->dims[2];
  s->dims[2] = s->dims[3];
  s->dims[3] = c;
}

/* Whether the host hands unit input i to the kernel as the channels-last twin of an
 * NCHW activation: the rule rewrite_unit applies, which the trial must repeat. */
static gboolean input_is_nhwc(const QhLowering *l, const QhQdqUnit *u, int i) {
  const QhQdqUnitInput *in = &g_array_index(u->inputs, QhQdqUnitInput, i);
  return in->role == QH_ROLE_ACTIVATION && qh_graph_value(l->graph, in->value)->initializer == NULL &&
         u->pattern->kernel->input_layout == QH_LAYOUT_NHWC && rank_of(l, in->value) == 4;
}

/* k's expected output (dtype, layout, shape in that layout) from the QDQ graph. */
static gboolean expect_output(const QhLowering *l, const QhQdqUnit *u, QhKernelNode *k,
                              GError **error) {
  const QhTensor *info = qh_plan_value_info(l->shape_plan, u->output);
  if (info == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node '%s': the shape of unit output '%s' is unknown",
                qh_graph_node(l->graph, u->nodes[0])->name, qh_graph_value(l->graph, u->output)->name);
    return FALSE;
  }
  k->output_dtype = info->dtype;
  k->output_shape = info->shape;
  k->output_layout = info->shape.rank == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY;
  if (u->pattern->kernel->output_layout == QH_LAYOUT_NHWC && info->shape.rank == 4) {
    k->output_layout = QH_LAYOUT_NHWC;
    permute_to_nhwc(&k->output_shape);
  }
  return TRUE;
}

/* The plan-time check of a claim: create the unit's kernel and reshape it with the
 * unit's static shapes and the layouts the lowered graph will pass, with the same
 * checks the plan makes. A plugin's accept sees only the unit; its kernel may still
 * refuse what accept took (x86's Mul takes a squeeze-excitation Mul whose inputs
 * broadcast, and its reshape wants equal shapes). Such a unit stays on the host with
 * the kernel's words as the reason instead of failing the whole run later. Returns
 * the created (and reshaped) kernel, or NULL with *why set. */
static QhKernelNode *trial_kernel(QhLowering *l, const QhQdqUnit *u, char **why) {
  const QhNode *first = qh_graph_node(l->graph, u->nodes[0]);
  const QhKernelOps *ops = u->pattern->kernel;
  GError *err = NULL;
  int n_in = (int)u->inputs->len;
  QhTensor *ins = g_new0(QhTensor, (gsize)n_in + 1);
  const QhTensor **in_ptrs = g_new0(const QhTensor *, (gsize)n_in + 1);
  QhKernelNode *k = qh_kernel_node_create(l->backend, first->name, ops, u, l->view, &err);
  gboolean ok = k != NULL && expect_output(l, u, k, &err);
  for (int i = 0; ok && i < n_in; i++) {
    int v = g_array_index(u->inputs, QhQdqUnitInput, i).value;
    const QhTensor *t = qh_plan_value_info(l->shape_plan, v);
    if (t == NULL) {
      g_set_error(&err, QH_ERROR, QH_ERROR_INVALID, "the shape of unit input '%s' is unknown",
                  qh_graph_value(l->graph, v)->name);
      ok = FALSE;
      break;
    }
    ins[i] = (QhTensor){.dtype = t->dtype, .shape = t->shape, .nbytes = t->nbytes};
    k->input_layouts[i] = t->shape.rank == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY;
    if (input_is_nhwc(l, u, i)) {
      permute_to_nhwc(&ins[i].shape);
      k->input_layouts[i] = QH_LAYOUT_NHWC;
    }
    in_ptrs[i] = &ins[i];
  }
  QhTensor out = {.shape.rank = -1};
  ok = ok && qh_kernel_node_infer(k, first, in_ptrs, n_in, &out, 1, &err);
  g_free(in_ptrs);
  g_free(ins);
  if (ok)
    return k;
  /* The message names plugin, kernel and node; the row already says the node. */
  char *prefix = g_strdup_printf("plugin '%s': kernel '%s' (node '%s'): ", l->plugin_name, ops->id,
                                 first->name);
  const char *cause = g_str_has_prefix(err->message, prefix) ? err->message + strlen(prefix) : err->message;
  *why = g_strdup_printf("kernel '%s' cannot run this unit: %s", ops->id, cause);
  g_free(prefix);
  g_error_free(err);
  qh_kernel_node_free(k);
  return NULL;
}

/* One of the unit's tensors as the plan will hand it to the kernel (QhNodeUnit's
 * input_tensors / output_tensors): the planned dtype and shape, in NHWC order when
 * the host passes the channels-last twin; rank -1 when the plan has no shape. */
static void planned_tensor(const QhLowering *l, int value, gboolean nhwc, QhTensorView *t) {
  const QhTensor *info = qh_plan_value_info(l->shape_plan, value);
  if (info == NULL || info->shape.rank < 0) {
    t->rank = -1;
    return;
  }
  QhShape shape = info->shape;
  t->dtype = (int32_t)info->dtype;
  t->layout = shape.rank == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY;
  if (nhwc && shape.rank == 4) {
    permute_to_nhwc(&shape);
    t->layout = QH_LAYOUT_NHWC;
  }
  t->rank = shape.rank;
  memcpy(t->dims, shape.dims, sizeof(int64_t) * (size_t)shape.rank);
}

/* Fill the unit's ABI tensors with the shapes this lowering plans for, so accept
 * sees what reshape will see. */
static void describe_unit(const QhLowering *l, const QhQdqUnit *u) {
  for (guint i = 0; i < u->inputs->len; i++)
    planned_tensor(l, g_array_index(u->inputs, QhQdqUnitInput, i).value, input_is_nhwc(l, u, (int)i),
                   &u->abi_input_tensors[i]);
  planned_tensor(l, u->output, u->pattern->kernel->output_layout == QH_LAYOUT_NHWC, u->abi_output_tensor);
}

static int accept_unit(gpointer user, const QhQdqUnit *u, GError **error) {
  QhLowering *l = user;
  const QhLoweringPattern *pat = u->pattern;
  const QhNode *first = qh_graph_node(l->graph, u->nodes[0]);
  const QhKernelOps *ops = pat->kernel;
  char *reason = NULL;
  for (int i = 0; i < u->n_nodes; i++)
    if (qh_partitions_of_node(l->partitions, u->nodes[i]))
      return 0; /* a compiled partition holds the node: partitions come first */
  describe_unit(l, u);
  if (ops->input_layout == QH_LAYOUT_OPAQUE || ops->output_layout == QH_LAYOUT_OPAQUE) {
    reason = g_strdup_printf("kernel '%s' uses an opaque layout, which this host cannot run yet", ops->id);
  } else if (pat->accept) {
    QhNodeUnit abi;
    qh_qdq_unit_to_abi(u, &abi);
    if (qh_backend_accept(l->backend, pat, l->view, &abi, first->name, &reason, error) < 0)
      return -1;
  }
  if (reason == NULL && !l->strict) {
    QhKernelNode *k = trial_kernel(l, u, &reason);
    if (k)
      g_ptr_array_add(l->kernels, k); /* the matcher takes u next: kernels stay parallel to units */
  }
  if (reason == NULL)
    return 1;
  GString *s = g_hash_table_lookup(l->declines, GINT_TO_POINTER(first->id));
  if (s == NULL) {
    s = g_string_new(NULL);
    g_hash_table_insert(l->declines, GINT_TO_POINTER(first->id), s);
  } else {
    g_string_append(s, "; ");
  }
  g_string_append_printf(s, "%s: %s", pat->id, reason);
  g_free(reason);
  return 0;
}

static gboolean is_qdq(const QhNode *n) {
  return (!*n->domain || strcmp(n->domain, "ai.onnx") == 0) &&
         (strcmp(n->op_type, "QuantizeLinear") == 0 || strcmp(n->op_type, "DequantizeLinear") == 0);
}

static QhLoweringRow *row_new(const char *name) {
  QhLoweringRow *r = g_new0(QhLoweringRow, 1);
  r->name = g_strdup(name);
  r->nodes = g_array_new(FALSE, FALSE, sizeof(int));
  r->lowered_node = -1;
  return r;
}

/* The row of a compiled partition: one claimed unit made of all its ops. */
static QhLoweringRow *partition_row(const QhLowering *l, const QhClaimedPartition *p) {
  QhLoweringRow *r = row_new(qh_graph_node(l->graph, g_array_index(p->nodes, int, 0))->name);
  GString *ops = g_string_new(NULL);
  for (guint k = 0; k < p->nodes->len; k++) {
    int id = g_array_index(p->nodes, int, k);
    g_string_append_printf(ops, "%s%s", k ? "+" : "", qh_graph_node(l->graph, id)->op_type);
    g_array_append_val(r->nodes, id);
  }
  r->ops = g_string_free(ops, FALSE);
  r->macs = p->macs;
  r->kernel = g_strdup(qh_backend_partitions(l->backend)->id);
  r->partition = g_strdup(p->name);
  return r;
}

/* A host row's reason when a partition holding it declined at compile. */
static const char *partition_decline(const QhLowering *l, int node_id) {
  for (guint i = 0; l->partitions && i < qh_partitions_count(l->partitions); i++) {
    const QhClaimedPartition *p = qh_partitions_get(l->partitions, i);
    for (guint k = 0; p->decline && k < p->nodes->len; k++)
      if (g_array_index(p->nodes, int, k) == node_id)
        return p->decline;
  }
  return NULL;
}

static void make_rows(QhLowering *l) {
  int n_nodes = qh_graph_n_nodes(l->graph);
  const QhQdqUnit **unit_of = g_new0(const QhQdqUnit *, n_nodes + 1);
  for (guint i = 0; i < l->units->len; i++) {
    const QhQdqUnit *u = g_ptr_array_index(l->units, i);
    for (int k = 0; k < u->n_nodes; k++)
      unit_of[u->nodes[k]] = u;
  }
  l->rows = g_ptr_array_new_with_free_func(row_free);
  /* the prepared graph's own order (the shape plan's still lists what prepare removed);
   * the plan made it from this graph, so it cannot fail here */
  GArray *order = NULL;
  if (!qh_graph_topo_order(l->graph, &order, NULL))
    order = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < order->len; i++) {
    int id = g_array_index(order, int, i);
    const QhNode *n = qh_graph_node(l->graph, id);
    const QhQdqUnit *u = unit_of[id];
    const QhClaimedPartition *part = qh_partitions_of_node(l->partitions, id);
    if (part) {
      if (g_array_index(part->nodes, int, 0) == id)
        g_ptr_array_add(l->rows, partition_row(l, part));
      continue;
    }
    /* A Q/DQ node is glue, summed apart, unless it is a requantize unit's
     * QuantizeLinear: taken (a kernel's row) or declined (a host row with the reason). */
    gboolean requantize_row = u || g_hash_table_contains(l->declines, GINT_TO_POINTER(id));
    if ((is_qdq(n) && !requantize_row) || qh_plan_node_is_folded(l->shape_plan, id) || (u && u->nodes[0] != id))
      continue;
    QhLoweringRow *r = row_new(n->name);
    GString *ops = g_string_new(NULL);
    if (u) {
      for (int k = 0; k < u->n_nodes; k++) {
        const QhNode *op = qh_graph_node(l->graph, u->nodes[k]);
        g_string_append_printf(ops, "%s%s", k ? "+" : "", op->op_type);
        g_array_append_val(r->nodes, u->nodes[k]);
        r->macs += qh_plan_node_macs(l->shape_plan, u->nodes[k]);
      }
      r->pattern = g_strdup(u->pattern->id);
      r->kernel = g_strdup(u->pattern->kernel->id);
    } else {
      g_string_append(ops, n->op_type);
      g_array_append_val(r->nodes, id);
      r->macs = qh_plan_node_macs(l->shape_plan, id);
      GString *why = g_hash_table_lookup(l->declines, GINT_TO_POINTER(id));
      const char *declined = partition_decline(l, id);
      if (declined && why)
        r->reason = g_strdup_printf("partition: %s; %s", declined, why->str);
      else if (declined)
        r->reason = g_strdup_printf("partition: %s", declined);
      else
        r->reason = g_strdup(why ? why->str : "no lowering pattern matches");
    }
    if (is_qdq(n)) /* the pseudo-op's name, not the QuantizeLinear's: a DQ -> Q step */
      g_string_assign(ops, "Requantize");
    r->ops = g_string_free(ops, FALSE);
    g_ptr_array_add(l->rows, r);
  }
  g_array_unref(order);
  g_free(unit_of);
}

QhLowering *qh_lowering_new(QhGraph *graph, QhBackend *backend, const QhShape *input_shapes,
                            QhLoweringFlags flags, GError **error) {
  const char *name = qh_backend_name(backend);
  const QhLoweringOps *lo = qh_backend_lowering(backend);
  if ((lo == NULL || lo->n_patterns == 0) && qh_backend_partitions(backend) == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "plugin '%s' supplies no lowering patterns: it has no int8 kernels to run", name);
    return NULL;
  }
  QhLowering *l = g_new0(QhLowering, 1);
  l->graph = graph;
  l->backend = backend;
  l->plugin_name = g_strdup(name);
  l->strict = (flags & QH_LOWERING_STRICT) != 0;
  l->kernels = g_ptr_array_new_with_free_func((GDestroyNotify)qh_kernel_node_free);
  l->declines = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, string_free);
  l->node_kernel = g_hash_table_new(g_direct_hash, g_direct_equal);
  l->node_row = g_hash_table_new(g_direct_hash, g_direct_equal);
  l->view = qh_graph_view_new(graph, QH_VIEW_READ);
  l->node_partition = g_hash_table_new(g_direct_hash, g_direct_equal);
  l->partition_nodes = g_ptr_array_new_with_free_func((GDestroyNotify)qh_partition_node_free);
  if ((l->shape_plan = qh_lower_prepare(graph, input_shapes, error)) == NULL)
    goto fail;
  /* Partitions are claimed, checked and compiled before any pattern is tried. */
  if ((l->partitions = qh_partitions_new(graph, backend, l->shape_plan, l->view, error)) == NULL)
    goto fail;
  l->units = qh_qdq_match_units_with(graph, lo ? lo->patterns : NULL, lo ? lo->n_patterns : 0, accept_unit, l,
                                     error);
  if (l->units == NULL)
    goto fail;
  make_rows(l);
  return l;
fail:
  qh_lowering_free(l);
  return NULL;
}

const GPtrArray *qh_lowering_rows(const QhLowering *l) { return l->rows; }
QhPlan *qh_lowering_plan(const QhLowering *l) { return l->plan; }

const char *qh_lowering_node_kernel(const QhLowering *l, int node_id) {
  if (g_hash_table_contains(l->node_partition, GINT_TO_POINTER(node_id)))
    return qh_backend_partitions(l->backend)->id;
  const QhKernelNode *k = g_hash_table_lookup(l->node_kernel, GINT_TO_POINTER(node_id));
  return k ? k->ops->id : NULL;
}

const QhLoweringRow *qh_lowering_node_row(const QhLowering *l, int node_id) {
  return g_hash_table_lookup(l->node_row, GINT_TO_POINTER(node_id));
}

/* ---- rewriting ---- */

static QhValue *new_value(QhGraph *g, const char *base, const char *suffix, GError **error) {
  char *name = g_strdup_printf("%s%s", base, suffix);
  for (int i = 1; qh_graph_find_value(g, name) >= 0; i++) {
    g_free(name);
    name = g_strdup_printf("%s%s_%d", base, suffix, i);
  }
  QhValue *v = qh_graph_add_value(g, name, error);
  g_free(name);
  return v;
}

static QhNode *add_transpose(QhGraph *g, int from, int to, gboolean to_nhwc, GError **error) {
  static const int64_t nchw_to_nhwc[4] = {0, 2, 3, 1}, nhwc_to_nchw[4] = {0, 3, 1, 2};
  char *name = g_strdup_printf("%s/%s", qh_graph_value(g, from)->name,
                               to_nhwc ? "to_nhwc" : "to_nchw");
  QhNode *n = qh_graph_add_node(g, name, "Transpose", "", 1, &from, 1, &to, error);
  g_free(name);
  if (n)
    qh_node_set_attr_ints(n, "perm", 4, to_nhwc ? nchw_to_nhwc : nhwc_to_nchw);
  return n;
}

/* The channels-last twin of value v, made by one Transpose shared by all readers. */
static int nhwc_twin(QhLowering *l, GHashTable *nhwc_of, int v, GError **error) {
  gpointer hit;
  if (g_hash_table_lookup_extended(nhwc_of, GINT_TO_POINTER(v), NULL, &hit))
    return GPOINTER_TO_INT(hit);
  QhValue *t = new_value(l->graph, qh_graph_value(l->graph, v)->name, "/nhwc", error);
  if (t == NULL || add_transpose(l->graph, v, t->id, TRUE, error) == NULL)
    return -1;
  g_hash_table_insert(nhwc_of, GINT_TO_POINTER(v), GINT_TO_POINTER(t->id));
  return t->id;
}

/* Replace unit u by one kernel node; k gets its layouts and expected output. */
static gboolean rewrite_unit(QhLowering *l, const QhQdqUnit *u, QhKernelNode *k,
                             GHashTable *nhwc_of, GHashTable *kernel_outputs, GError **error) {
  QhGraph *g = l->graph;
  const QhKernelOps *ops = u->pattern->kernel;
  char *name = g_strdup(qh_graph_node(g, u->nodes[0])->name);
  int n_in = (int)u->inputs->len;
  int *ins = g_new0(int, n_in + 1);
  gboolean ok = TRUE;
  for (int i = 0; i < n_in && ok; i++) {
    const QhQdqUnitInput *in = &g_array_index(u->inputs, QhQdqUnitInput, i);
    ins[i] = in->value;
    k->input_layouts[i] = rank_of(l, in->value) == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY;
    if (input_is_nhwc(l, u, i)) {
      ins[i] = nhwc_twin(l, nhwc_of, in->value, error);
      ok = ins[i] >= 0;
      k->input_layouts[i] = QH_LAYOUT_NHWC;
    }
  }
  ok = ok && expect_output(l, u, k, error);
  int out = u->output;
  if (ok && k->output_layout == QH_LAYOUT_NHWC) {
    /* The kernel writes a channels-last twin; readers that want NCHW get it
     * through a Transpose added after every unit is in place. */
    QhValue *t = new_value(g, qh_graph_value(g, u->output)->name, "/nhwc", error);
    ok = t != NULL;
    if (ok) {
      out = t->id;
      g_hash_table_insert(nhwc_of, GINT_TO_POINTER(u->output), GINT_TO_POINTER(out));
    }
  }
  if (ok) {
    for (int i = 0; i < u->n_nodes; i++) {
      qh_graph_remove_node(g, u->nodes[i]);
      if (u->crossed_q[i] >= 0) { /* QH_PATTERN_THROUGH_SHARED_QDQ: the pair is inside */
        qh_graph_remove_node(g, u->crossed_q[i]);
        qh_graph_remove_node(g, u->crossed_dq[i]);
      }
    }
    if (u->q_node >= 0)
      qh_graph_remove_node(g, u->q_node);
    QhNode *kn = qh_graph_add_node(g, name, ops->id, QH_LOWERED_DOMAIN, n_in, ins, 1, &out, error);
    ok = kn != NULL;
    if (ok) {
      g_hash_table_insert(l->node_kernel, GINT_TO_POINTER(kn->id), k);
      g_hash_table_insert(kernel_outputs, GINT_TO_POINTER(out), k);
      for (guint r = 0; r < l->rows->len; r++) {
        QhLoweringRow *row = g_ptr_array_index(l->rows, r);
        if (row->kernel && g_array_index(row->nodes, int, 0) == u->nodes[0]) {
          row->lowered_node = kn->id;
          g_hash_table_insert(l->node_row, GINT_TO_POINTER(kn->id), row);
        }
      }
    }
  }
  g_free(ins);
  g_free(name);
  return ok;
}

/* Replace a compiled partition by one node reading its integer inputs and writing
 * its integer outputs, in the layout the plugin declared (Transposes at the boundary
 * for NHWC, as for a channels-last kernel). */
static gboolean rewrite_partition(QhLowering *l, const QhClaimedPartition *p, GHashTable *nhwc_of,
                                  GHashTable *kernel_outputs, GError **error) {
  QhGraph *g = l->graph;
  QhPartitionNode *pn = qh_partition_node_new(l->backend, p);
  g_ptr_array_add(l->partition_nodes, pn);
  gboolean nhwc = pn->io_layout == QH_LAYOUT_NHWC, ok = TRUE;
  int n_in = (int)p->inputs->len, n_out = (int)p->outputs->len;
  int *ins = g_new0(int, n_in + 1), *outs = g_new0(int, n_out + 1);
  for (int i = 0; i < n_in && ok; i++) {
    ins[i] = g_array_index(p->inputs, int, i);
    if (nhwc && rank_of(l, ins[i]) == 4)
      ok = (ins[i] = nhwc_twin(l, nhwc_of, ins[i], error)) >= 0;
  }
  for (int i = 0; i < n_out && ok; i++) {
    outs[i] = g_array_index(p->outputs, int, i);
    if (nhwc && rank_of(l, outs[i]) == 4) {
      QhValue *t = new_value(g, qh_graph_value(g, outs[i])->name, "/nhwc", error);
      if ((ok = t != NULL)) {
        g_hash_table_insert(nhwc_of, GINT_TO_POINTER(outs[i]), GINT_TO_POINTER(t->id));
        outs[i] = t->id;
      }
    }
  }
  char *name = g_strdup(qh_graph_node(g, g_array_index(p->nodes, int, 0))->name);
  if (ok) {
    for (guint k = 0; k < p->nodes->len; k++)
      qh_graph_remove_node(g, g_array_index(p->nodes, int, k));
    for (guint k = 0; k < p->q_nodes->len; k++)
      qh_graph_remove_node(g, g_array_index(p->q_nodes, int, k));
    QhNode *kn = qh_graph_add_node(g, name, qh_backend_partitions(l->backend)->id, QH_LOWERED_DOMAIN, n_in, ins,
                                   n_out, outs, error);
    ok = kn != NULL;
    if (ok) {
      g_hash_table_insert(l->node_partition, GINT_TO_POINTER(kn->id), pn);
      for (int i = 0; i < n_out; i++)
        g_hash_table_insert(kernel_outputs, GINT_TO_POINTER(outs[i]), pn);
      for (guint r = 0; r < l->rows->len; r++) {
        QhLoweringRow *row = g_ptr_array_index(l->rows, r);
        if (row->partition && strcmp(row->partition, p->name) == 0) {
          row->lowered_node = kn->id;
          g_hash_table_insert(l->node_row, GINT_TO_POINTER(kn->id), row);
        }
      }
    }
  }
  g_free(name);
  g_free(ins);
  g_free(outs);
  return ok;
}

/* Readers of v among live nodes, plus whether v is a graph output. */
static int count_readers(const QhGraph *g, int v) {
  int n = qh_graph_value(g, v)->is_output ? 1 : 0;
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *nd = qh_graph_node(g, i);
    for (int s = 0; !nd->is_removed && s < nd->n_inputs; s++)
      n += nd->inputs[s] == v;
  }
  return n;
}

/* Give every channels-last kernel output that something else still reads in NCHW
 * (under its original name) a Transpose back, and drop DequantizeLinear nodes the
 * kernels made dead. */
static gboolean finish_graph(QhLowering *l, GHashTable *nhwc_of, GHashTable *kernel_outputs,
                             GError **error) {
  QhGraph *g = l->graph;
  GHashTableIter it;
  gpointer key, val;
  g_hash_table_iter_init(&it, nhwc_of);
  while (g_hash_table_iter_next(&it, &key, &val)) {
    int v = GPOINTER_TO_INT(key), twin = GPOINTER_TO_INT(val);
    if (!g_hash_table_contains(kernel_outputs, GINT_TO_POINTER(twin)))
      continue; /* a Transpose made the twin from a host value */
    if (qh_graph_value(g, v)->producer < 0 && count_readers(g, v) > 0 &&
        add_transpose(g, twin, v, FALSE, error) == NULL)
      return FALSE;
  }
  for (gboolean changed = TRUE; changed;) {
    changed = FALSE;
    for (int i = 0; i < qh_graph_n_nodes(g); i++) {
      const QhNode *nd = qh_graph_node(g, i);
      if (nd->is_removed || nd->n_outputs != 1 || nd->outputs[0] < 0 ||
          (strcmp(nd->op_type, "DequantizeLinear") != 0 && strcmp(nd->op_type, "Transpose") != 0))
        continue;
      if (count_readers(g, nd->outputs[0]) == 0) {
        qh_graph_remove_node(g, i);
        changed = TRUE;
      }
    }
  }
  return TRUE;
}

static gboolean resolve_kernel(gpointer user, const QhNode *node, QhPlanKernel *out) {
  QhLowering *l = user;
  QhPartitionNode *pn = g_hash_table_lookup(l->node_partition, GINT_TO_POINTER(node->id));
  if (pn) {
    *out = (QhPlanKernel){qh_partition_node_infer, qh_partition_node_run, pn->part->macs, pn};
    return TRUE;
  }
  QhKernelNode *k = g_hash_table_lookup(l->node_kernel, GINT_TO_POINTER(node->id));
  if (k == NULL)
    return FALSE;
  *out = (QhPlanKernel){qh_kernel_node_infer, qh_kernel_node_run, k->macs, k};
  return TRUE;
}

gboolean qh_lowering_build(QhLowering *l, GError **error) {
  if (l->build_tried) {
    g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "the lowering was built already");
    return FALSE;
  }
  l->build_tried = TRUE;
  /* Without QH_LOWERING_STRICT the kernels were created (and reshaped) when their
   * units were accepted; strict lowerings create them here and fail on a refusal. */
  for (guint i = l->kernels->len; i < l->units->len; i++) {
    const QhQdqUnit *u = g_ptr_array_index(l->units, i);
    const QhNode *first = qh_graph_node(l->graph, u->nodes[0]);
    QhKernelNode *k = qh_kernel_node_create(l->backend, first->name, u->pattern->kernel, u, l->view,
                                            error);
    if (k == NULL)
      return FALSE;
    g_ptr_array_add(l->kernels, k);
  }
  for (guint i = 0; i < l->units->len; i++) {
    const QhQdqUnit *u = g_ptr_array_index(l->units, i);
    QhKernelNode *k = g_ptr_array_index(l->kernels, i);
    for (int n = 0; n < u->n_nodes; n++)
      k->macs += qh_plan_node_macs(l->shape_plan, u->nodes[n]);
  }
  /* Kernels keep the node names alive: the graph's strings outlive the rewrite only
   * for nodes that stay, so each kernel gets the row's copy. */
  for (guint i = 0; i < l->kernels->len; i++) {
    QhKernelNode *k = g_ptr_array_index(l->kernels, i);
    for (guint r = 0; r < l->rows->len; r++) {
      const QhLoweringRow *row = g_ptr_array_index(l->rows, r);
      if (row->kernel && g_array_index(row->nodes, int, 0) == k->unit->nodes[0])
        k->node_name = row->name;
    }
  }
  GHashTable *nhwc_of = g_hash_table_new(g_direct_hash, g_direct_equal);
  GHashTable *kernel_outputs = g_hash_table_new(g_direct_hash, g_direct_equal);
  gboolean ok = TRUE;
  for (guint i = 0; i < qh_partitions_count(l->partitions) && ok; i++)
    if (qh_partitions_get(l->partitions, i)->compiled)
      ok = rewrite_partition(l, qh_partitions_get(l->partitions, i), nhwc_of, kernel_outputs, error);
  for (guint i = 0; i < l->units->len && ok; i++)
    ok = rewrite_unit(l, g_ptr_array_index(l->units, i), g_ptr_array_index(l->kernels, i), nhwc_of,
                      kernel_outputs, error);
  ok = ok && finish_graph(l, nhwc_of, kernel_outputs, error);
  g_hash_table_destroy(nhwc_of);
  g_hash_table_destroy(kernel_outputs);
  qh_graph_view_invalidate(l->view);
  if (!ok)
    return FALSE;
  for (guint r = 0; r < l->rows->len; r++) {
    QhLoweringRow *row = g_ptr_array_index(l->rows, r);
    if (row->kernel == NULL) {
      row->lowered_node = g_array_index(row->nodes, int, 0);
      g_hash_table_insert(l->node_row, GINT_TO_POINTER(row->lowered_node), row);
    }
  }
  QhShape *shapes = g_new0(QhShape, l->graph->inputs->len + 1);
  for (guint i = 0; i < l->graph->inputs->len; i++)
    shapes[i] = qh_plan_value_info(l->shape_plan, g_array_index(l->graph->inputs, int, i))->shape;
  l->plan = qh_plan_new_with_kernels(l->graph, shapes, resolve_kernel, l, error);
  g_free(shapes);
  return l->plan != NULL;
}
