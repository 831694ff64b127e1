/* The host's side of whole-partition offload: it describes every op of the QDQ graph
 * to the plugin as a one-op unit, copies the plugin's claims and checks them before
 * anything is compiled, because a partition that is not convex cannot be scheduled
 * as one kernel (its output would be needed before its input exists), one that
 * overlaps another would run a node twice, and one that reads or writes a float value
 * across its boundary has no integer tensor to hand over. Q/DQ nodes are transparent
 * to the checks: a QuantizeLinear -> DequantizeLinear pair between two claimed ops is
 * inside the partition. */
#include "lower/partition.h"

#include <string.h>

#include "core/error.h"
#include "hostapi/annotation.h"
#include "hostapi/qdq-qparams.h"
#include "lower/partition-node.h"

/* One op offered to the plugin, with the storage its QhNodeUnit points into. */
typedef struct {
  int node;
  uint32_t abi_node;
  int n_in, n_out;
  int *in_dq;            /* per input slot: the DequantizeLinear, or -1 */
  int *out_q;            /* per output: the one QuantizeLinear reading it, or -1 */
  uint32_t *in_values, *out_values;
  int32_t *roles;
  QhQParams *in_q, *out_q_params; /* owned arrays inside */
  const QhQParams **in_qp, **out_qp;
  QhTensorView *in_t, *out_t;
  QhNodeUnit abi;
} Offered;

struct QhPartitionSet {
  QhGraph *graph;
  QhBackend *backend;
  const QhPlan *plan;
  QhGraphView *view;
  GArray **readers;      /* per value: int node ids of live readers, or NULL */
  Offered **offered;     /* per node id, or NULL */
  GPtrArray *units;      /* Offered*, topological */
  int *owner;            /* per node id: index into parts, or -1 */
  GPtrArray *parts;      /* QhClaimedPartition* */
  int32_t io_layout;
  int n_nodes, n_values; /* the graph's when offered: the lowering adds nodes and values later */
};

static gboolean is_op(const QhNode *n, const char *op) {
  return (!*n->domain || strcmp(n->domain, "ai.onnx") == 0) && strcmp(n->op_type, op) == 0;
}
static gboolean is_qdq(const QhNode *n) { return is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear"); }

static const GArray *readers_of(const QhPartitionSet *s, int v) {
  static const GArray none = {NULL, 0};
  return v >= 0 && s->readers[v] ? s->readers[v] : &none;
}
#define READER(arr, i) g_array_index((GArray *)(arr), int, i)

static void offered_free(Offered *o) {
  for (int i = 0; i < o->n_in; i++)
    qh_qdq_qparams_clear(&o->in_q[i]);
  for (int i = 0; i < o->n_out; i++)
    qh_qdq_qparams_clear(&o->out_q_params[i]);
  g_free(o->in_dq);
  g_free(o->out_q);
  g_free(o->in_values);
  g_free(o->out_values);
  g_free(o->roles);
  g_free(o->in_q);
  g_free(o->out_q_params);
  g_free(o->in_qp);
  g_free(o->out_qp);
  g_free(o->in_t);
  g_free(o->out_t);
  g_free(o);
}

static void permute_to_nhwc(int64_t *dims) {
  int64_t c = dims[1];
  dims[1] = dims[2];
  dims[2] = dims[3];
  dims[3] = c;
}

/* A value as the plan knows it, in NHWC order when asked and 4-D; rank -1 unknown. */
static void planned(const QhPartitionSet *s, int v, gboolean nhwc, const QhQParams *q, QhTensorView *t) {
  *t = (QhTensorView){QH_STRUCT_HEADER(QhTensorView)};
  t->qparams = q;
  const QhTensor *info = qh_plan_value_info(s->plan, v);
  if (info == NULL || info->shape.rank < 0) {
    t->rank = -1;
    return;
  }
  t->dtype = (int32_t)info->dtype;
  t->rank = info->shape.rank;
  t->layout = t->rank == 4 ? QH_LAYOUT_NCHW : QH_LAYOUT_ANY;
  memcpy(t->dims, info->shape.dims, sizeof(int64_t) * (size_t)t->rank);
  if (nhwc && t->rank == 4) {
    permute_to_nhwc(t->dims);
    t->layout = QH_LAYOUT_NHWC;
  }
}

/* The unit for op node n: inputs behind their DQ, outputs behind their single Q. */
static Offered *offer(QhPartitionSet *s, const QhNode *n, GError **error) {
  Offered *o = g_new0(Offered, 1);
  o->node = n->id;
  o->abi_node = (uint32_t)n->id;
  o->n_in = n->n_inputs;
  o->n_out = n->n_outputs;
  int ni = MAX(o->n_in, 1), no = MAX(o->n_out, 1);
  o->in_dq = g_new0(int, ni);
  o->out_q = g_new0(int, no);
  o->in_values = g_new0(uint32_t, ni);
  o->out_values = g_new0(uint32_t, no);
  o->roles = g_new0(int32_t, ni);
  o->in_q = g_new0(QhQParams, ni);
  o->out_q_params = g_new0(QhQParams, no);
  o->in_qp = g_new0(const QhQParams *, ni);
  o->out_qp = g_new0(const QhQParams *, no);
  o->in_t = g_new0(QhTensorView, ni);
  o->out_t = g_new0(QhTensorView, no);
  for (int i = 0; i < o->n_in; i++) {
    int v = n->inputs[i];
    o->in_dq[i] = -1;
    o->roles[i] = qh_annotation_default_role(n->op_type, i);
    o->in_values[i] = v >= 0 ? (uint32_t)v : QH_INVALID_ID;
    const QhValue *val = v >= 0 ? qh_graph_value(s->graph, v) : NULL;
    const QhNode *p = val && val->producer >= 0 ? qh_graph_node(s->graph, val->producer) : NULL;
    if (p && is_op(p, "DequantizeLinear") && p->n_inputs > 0 && p->inputs[0] >= 0) {
      int r = qh_qdq_read_qparams(s->graph, p, p->inputs[0], &o->in_q[i], error);
      if (r < 0) {
        offered_free(o);
        return NULL;
      }
      if (r == 1) {
        o->in_dq[i] = p->id;
        o->in_values[i] = (uint32_t)p->inputs[0];
        o->in_qp[i] = &o->in_q[i];
      }
    }
    if (o->in_values[i] != QH_INVALID_ID)
      planned(s, (int)o->in_values[i], FALSE, o->in_qp[i], &o->in_t[i]);
  }
  for (int i = 0; i < o->n_out; i++) {
    int v = n->outputs[i];
    o->out_q[i] = -1;
    o->out_values[i] = v >= 0 ? (uint32_t)v : QH_INVALID_ID;
    const GArray *rd = readers_of(s, v);
    if (v >= 0 && rd->len == 1 && !qh_graph_value(s->graph, v)->is_output) {
      const QhNode *q = qh_graph_node(s->graph, READER(rd, 0));
      if (is_op(q, "QuantizeLinear") && q->inputs[0] == v && q->n_outputs > 0 && q->outputs[0] >= 0) {
        int r = qh_qdq_read_qparams(s->graph, q, q->outputs[0], &o->out_q_params[i], error);
        if (r < 0) {
          offered_free(o);
          return NULL;
        }
        if (r == 1) {
          o->out_q[i] = q->id;
          o->out_values[i] = (uint32_t)q->outputs[0];
          o->out_qp[i] = &o->out_q_params[i];
        }
      }
    }
    if (o->out_values[i] != QH_INVALID_ID)
      planned(s, (int)o->out_values[i], FALSE, o->out_qp[i], &o->out_t[i]);
  }
  o->abi = (QhNodeUnit){QH_STRUCT_HEADER(QhNodeUnit)};
  o->abi.pattern_id = NULL;
  o->abi.nodes = &o->abi_node;
  o->abi.n_nodes = 1;
  o->abi.inputs = o->in_values;
  o->abi.n_inputs = (size_t)o->n_in;
  o->abi.input_roles = o->roles;
  o->abi.input_qparams = o->in_qp;
  o->abi.outputs = o->out_values;
  o->abi.n_outputs = (size_t)o->n_out;
  o->abi.output_qparams = o->out_qp;
  o->abi.input_tensors = o->in_t;
  o->abi.output_tensors = o->out_t;
  return o;
}

static void part_free(gpointer p) {
  QhClaimedPartition *c = p;
  g_free(c->name);
  g_array_unref(c->nodes);
  g_array_unref(c->q_nodes);
  g_array_unref(c->inputs);
  g_array_unref(c->outputs);
  g_free(c->input_tensors);
  g_free(c->output_tensors);
  g_free((gpointer)c->abi.units);
  g_free(c->decline);
  g_free(c);
}

void qh_partitions_free(QhPartitionSet *s) {
  if (s == NULL)
    return;
  if (s->parts) {
    for (guint i = 0; i < s->parts->len; i++) {
      QhClaimedPartition *c = g_ptr_array_index(s->parts, i);
      qh_backend_partition_destroy(s->backend, c->compiled);
    }
    g_ptr_array_unref(s->parts);
  }
  if (s->units)
    g_ptr_array_unref(s->units);
  for (int v = 0; s->readers && v < s->n_values; v++)
    if (s->readers[v])
      g_array_unref(s->readers[v]);
  g_free(s->readers);
  g_free(s->offered);
  g_free(s->owner);
  g_free(s);
}

guint qh_partitions_count(const QhPartitionSet *s) { return s->parts->len; }
QhClaimedPartition *qh_partitions_get(const QhPartitionSet *s, guint i) { return g_ptr_array_index(s->parts, i); }

const QhClaimedPartition *qh_partitions_of_node(const QhPartitionSet *s, int node_id) {
  if (node_id < 0 || node_id >= s->n_nodes || s->owner[node_id] < 0)
    return NULL;
  const QhClaimedPartition *c = g_ptr_array_index(s->parts, s->owner[node_id]);
  return c->compiled ? c : NULL;
}

/* ---- checking one claim ---- */

typedef struct {
  QhPartitionSet *s;
  const char *plugin;
  int index;       /* the claim's position */
  const char *name;
  GError **error;
} Claim;

static gboolean refuse(const Claim *c, int node, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean refuse(const Claim *c, int node, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *cause = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  GString *m = g_string_new(NULL);
  g_string_append_printf(m, "plugin '%s': partition %d ('%s'): ", c->plugin, c->index, c->name ? c->name : "?");
  if (node >= 0)
    g_string_append_printf(m, "node '%s': ", qh_graph_node(c->s->graph, node)->name);
  g_string_append_printf(m, "%s; the claim is refused", cause);
  g_set_error_literal(c->error, QH_ERROR, QH_ERROR_INVALID, m->str);
  g_string_free(m, TRUE);
  g_free(cause);
  return FALSE;
}

static gboolean in_part(const QhPartitionSet *s, int node, int part) {
  return node >= 0 && s->owner[node] == part;
}

static void add_unique(GArray *a, int v) {
  for (guint i = 0; i < a->len; i++)
    if (g_array_index(a, int, i) == v)
      return;
  g_array_append_val(a, v);
}

/* Whether value q (a claimed Q's output) is needed outside the partition: a graph
 * output, read by anything but a DequantizeLinear, or by a DQ read outside. */
static gboolean leaves(const QhPartitionSet *s, int q, int part) {
  if (qh_graph_value(s->graph, q)->is_output)
    return TRUE;
  const GArray *rd = readers_of(s, q);
  for (guint i = 0; i < rd->len; i++) {
    const QhNode *r = qh_graph_node(s->graph, READER(rd, i));
    if (!is_op(r, "DequantizeLinear") || r->outputs[0] < 0 || qh_graph_value(s->graph, r->outputs[0])->is_output)
      return TRUE;
    const GArray *rr = readers_of(s, r->outputs[0]);
    for (guint k = 0; k < rr->len; k++)
      if (!in_part(s, READER(rr, k), part))
        return TRUE;
  }
  return FALSE;
}

/* The quantized boundary: inputs through DQ (or internal, or constant), outputs
 * through Q (or internal). Collects inputs, outputs and the Q nodes. */
static gboolean check_boundary(const Claim *c, QhClaimedPartition *p) {
  QhPartitionSet *s = c->s;
  QhGraph *g = s->graph;
  for (guint k = 0; k < p->nodes->len; k++) {
    int id = g_array_index(p->nodes, int, k);
    const QhNode *n = qh_graph_node(g, id);
    const Offered *o = s->offered[id];
    for (int i = 0; i < n->n_inputs; i++) {
      int v = n->inputs[i];
      if (v < 0)
        continue;
      const QhValue *val = qh_graph_value(g, v);
      if (in_part(s, val->producer, p->index) || val->initializer)
        continue;
      if (o->in_dq[i] < 0)
        return refuse(c, id, "reads float value '%s' from outside the partition (no DequantizeLinear): "
                             "a partition holds quantized units only", val->name);
      const QhValue *x = qh_graph_value(g, (int)o->in_values[i]);
      if (x->initializer)
        continue; /* a weight or bias: compile reads it */
      const QhNode *xq = x->producer >= 0 ? qh_graph_node(g, x->producer) : NULL;
      if (xq && is_op(xq, "QuantizeLinear") && xq->inputs[0] >= 0 &&
          in_part(s, qh_graph_value(g, xq->inputs[0])->producer, p->index))
        continue; /* a Q -> DQ pair between two claimed ops */
      add_unique(p->inputs, x->id);
    }
    for (int i = 0; i < n->n_outputs; i++) {
      int v = n->outputs[i];
      if (v < 0)
        continue;
      const QhValue *val = qh_graph_value(g, v);
      const GArray *rd = readers_of(s, v);
      for (guint r = 0; r < rd->len; r++) {
        int rid = READER(rd, r);
        if (in_part(s, rid, p->index))
          continue;
        if (rid != o->out_q[i])
          return refuse(c, id, "writes float value '%s' that node '%s' reads outside the partition "
                               "(no QuantizeLinear): a partition holds quantized units only",
                        val->name, qh_graph_node(g, rid)->name);
        add_unique(p->q_nodes, rid);
        if (leaves(s, (int)o->out_values[i], p->index))
          add_unique(p->outputs, (int)o->out_values[i]);
      }
      if (val->is_output)
        return refuse(c, id, "writes graph output '%s' without a QuantizeLinear: a partition holds "
                             "quantized units only", val->name);
    }
  }
  if (p->outputs->len == 0)
    return refuse(c, g_array_index(p->nodes, int, 0), "nothing the partition computes is read outside it");
  return TRUE;
}

/* The ops that read what op m writes, directly or through a Q -> DQ pair. */
static void successors(const QhPartitionSet *s, int m, GArray *out) {
  const QhNode *n = qh_graph_node(s->graph, m);
  g_array_set_size(out, 0);
  for (int i = 0; i < n->n_outputs; i++) {
    const GArray *rd = readers_of(s, n->outputs[i]);
    for (guint r = 0; r < rd->len; r++)
      g_array_append_val(out, READER(rd, r));
  }
}

static int find_root(int *parent, int x) {
  while (parent[x] != x)
    x = parent[x] = parent[parent[x]];
  return x;
}

/* Connected through the claim's own edges (undirected; Q/DQ transparent). */
static gboolean check_connected(const Claim *c, const QhClaimedPartition *p) {
  QhPartitionSet *s = c->s;
  int nn = qh_graph_n_nodes(s->graph);
  /* union-find over node ids, joining along every edge whose ends are claimed ops,
   * walking through Q/DQ nodes */
  int *parent = g_new(int, nn);
  for (int i = 0; i < nn; i++)
    parent[i] = i;
  GArray *succ = g_array_new(FALSE, FALSE, sizeof(int)), *stack = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint k = 0; k < p->nodes->len; k++) {
    int a = g_array_index(p->nodes, int, k);
    g_array_set_size(stack, 0);
    g_array_append_val(stack, a);
    while (stack->len) {
      int m = g_array_index(stack, int, stack->len - 1);
      g_array_set_size(stack, stack->len - 1);
      successors(s, m, succ);
      for (guint i = 0; i < succ->len; i++) {
        int b = g_array_index(succ, int, i);
        const QhNode *bn = qh_graph_node(s->graph, b);
        if (in_part(s, b, p->index))
          parent[find_root(parent, b)] = find_root(parent, a);
        else if (is_qdq(bn) && b != a)
          g_array_append_val(stack, b);
      }
    }
  }
  int root = find_root(parent, g_array_index(p->nodes, int, 0)), stray = -1;
  for (guint k = 1; k < p->nodes->len && stray < 0; k++)
    if (find_root(parent, g_array_index(p->nodes, int, k)) != root)
      stray = g_array_index(p->nodes, int, k);
  g_free(parent);
  g_array_unref(succ);
  g_array_unref(stack);
  if (stray >= 0)
    return refuse(c, stray, "not connected to node '%s' through the partition's own edges",
                  qh_graph_node(s->graph, g_array_index(p->nodes, int, 0))->name);
  return TRUE;
}

/* Convex: no path from a claimed op through an op outside back into the claim. A
 * walk from the claim's successors, where `left` records the first outside op
 * (Q/DQ nodes do not count), meets a claimed op only while left is unset. */
static gboolean check_convex(const Claim *c, const QhClaimedPartition *p) {
  QhPartitionSet *s = c->s;
  int nn = qh_graph_n_nodes(s->graph);
  int *via = g_new(int, nn); /* visited with an outside op on the path: that op; else -2 */
  guint8 *seen = g_new0(guint8, nn); /* bit 0: reached inside-only, bit 1: reached having left */
  for (int i = 0; i < nn; i++)
    via[i] = -2;
  GArray *succ = g_array_new(FALSE, FALSE, sizeof(int)), *queue = g_array_new(FALSE, FALSE, sizeof(int) * 2);
  int bad = -1, bad_via = -1;
  for (guint k = 0; k < p->nodes->len; k++) {
    int pair[2] = {g_array_index(p->nodes, int, k), -1};
    g_array_append_val(queue, pair);
  }
  for (guint q = 0; q < queue->len && bad < 0; q++) {
    int m = ((int *)queue->data)[2 * q], left = ((int *)queue->data)[2 * q + 1];
    successors(s, m, succ);
    for (guint i = 0; i < succ->len && bad < 0; i++) {
      int b = g_array_index(succ, int, i);
      const QhNode *bn = qh_graph_node(s->graph, b);
      if (in_part(s, b, p->index)) {
        if (left >= 0) {
          bad = b;
          bad_via = left;
        }
        continue;
      }
      int l = left >= 0 ? left : (is_qdq(bn) ? -1 : b);
      guint8 bit = l >= 0 ? 2 : 1;
      if (seen[b] & bit)
        continue;
      seen[b] |= bit;
      if (l >= 0)
        via[b] = l;
      int pair[2] = {b, l};
      g_array_append_val(queue, pair);
    }
  }
  g_free(via);
  g_free(seen);
  g_array_unref(succ);
  g_array_unref(queue);
  if (bad >= 0)
    return refuse(c, bad, "not convex: a path leaves the partition through node '%s' and re-enters it here",
                  qh_graph_node(s->graph, bad_via)->name);
  return TRUE;
}

static gboolean name_ok(const char *n) {
  if (n == NULL)
    return FALSE;
  size_t len = strnlen(n, 65);
  if (len < 1 || len > 64)
    return FALSE;
  for (size_t i = 0; i < len; i++)
    if (n[i] < 0x20 || n[i] > 0x7e)
      return FALSE;
  return TRUE;
}

/* Copy and check claim i; on success the partition is appended to s->parts. */
static gboolean take_claim(QhPartitionSet *s, const QhPartitionClaim *cl, int i, GError **error) {
  Claim c = {s, qh_backend_name(s->backend), i, NULL, error};
  if (cl == NULL || cl->struct_size < offsetof(QhPartitionClaim, n_nodes) + sizeof(size_t))
    return refuse(&c, -1, "the claim is NULL or its struct_size is too small");
  if (!name_ok(cl->name))
    return refuse(&c, -1, "the name must be 1 to 64 printable ASCII characters");
  c.name = cl->name;
  for (guint k = 0; k < s->parts->len; k++)
    if (strcmp(((QhClaimedPartition *)g_ptr_array_index(s->parts, k))->name, cl->name) == 0)
      return refuse(&c, -1, "the name is used by partition %u", k);
  if (cl->n_nodes == 0 || cl->nodes == NULL)
    return refuse(&c, -1, "it claims no nodes");
  int nn = qh_graph_n_nodes(s->graph);
  for (size_t k = 0; k < cl->n_nodes; k++) {
    uint32_t id = cl->nodes[k];
    if (id >= (uint32_t)nn)
      return refuse(&c, -1, "node id %u is not a node of the graph", id);
    if (s->offered[id] == NULL)
      return refuse(&c, (int)id, "this %s node was not offered: claim the graph's op nodes (the host takes "
                                 "the Q/DQ nodes between them)", qh_graph_node(s->graph, (int)id)->op_type);
    if (s->owner[id] == i)
      return refuse(&c, (int)id, "claimed twice");
    if (s->owner[id] >= 0) {
      const QhClaimedPartition *o = g_ptr_array_index(s->parts, s->owner[id]);
      return refuse(&c, (int)id, "overlaps partition %d ('%s'), which claimed this node already", o->index, o->name);
    }
    s->owner[id] = i;
  }
  QhClaimedPartition *p = g_new0(QhClaimedPartition, 1);
  p->name = g_strdup(cl->name);
  p->index = i;
  p->nodes = g_array_new(FALSE, FALSE, sizeof(int));
  p->q_nodes = g_array_new(FALSE, FALSE, sizeof(int));
  p->inputs = g_array_new(FALSE, FALSE, sizeof(int));
  p->outputs = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint u = 0; u < s->units->len; u++) { /* topological */
    const Offered *o = g_ptr_array_index(s->units, u);
    if (s->owner[o->node] == i) {
      g_array_append_val(p->nodes, o->node);
      p->macs += qh_plan_node_macs(s->plan, o->node);
    }
  }
  g_ptr_array_add(s->parts, p);
  return check_boundary(&c, p) && check_connected(&c, p) && check_convex(&c, p);
}

/* The QhPartition compile sees (arrays owned by p and its set). */
static void describe(QhPartitionSet *s, QhClaimedPartition *p) {
  gboolean nhwc = s->io_layout == QH_LAYOUT_NHWC;
  const QhNodeUnit **units = g_new0(const QhNodeUnit *, p->nodes->len);
  for (guint k = 0; k < p->nodes->len; k++)
    units[k] = &s->offered[g_array_index(p->nodes, int, k)]->abi;
  p->input_tensors = g_new0(QhTensorView, MAX(p->inputs->len, 1));
  for (guint k = 0; k < p->inputs->len; k++) {
    int x = g_array_index(p->inputs, int, k);
    const QhQParams *q = NULL; /* from the first claimed op reading x through its DQ */
    for (guint j = 0; j < p->nodes->len && q == NULL; j++) {
      const Offered *o = s->offered[g_array_index(p->nodes, int, j)];
      for (int i = 0; i < o->n_in && q == NULL; i++)
        if (o->in_qp[i] && o->in_values[i] == (uint32_t)x)
          q = o->in_qp[i];
    }
    planned(s, x, nhwc, q, &p->input_tensors[k]);
  }
  p->output_tensors = g_new0(QhTensorView, MAX(p->outputs->len, 1));
  for (guint k = 0; k < p->outputs->len; k++) {
    int y = g_array_index(p->outputs, int, k);
    const QhQParams *q = NULL;
    for (guint j = 0; j < p->nodes->len && q == NULL; j++) {
      const Offered *o = s->offered[g_array_index(p->nodes, int, j)];
      for (int i = 0; i < o->n_out && q == NULL; i++)
        if (o->out_qp[i] && o->out_values[i] == (uint32_t)y)
          q = o->out_qp[i];
    }
    planned(s, y, nhwc, q, &p->output_tensors[k]);
  }
  p->abi = (QhPartition){QH_STRUCT_HEADER(QhPartition)};
  p->abi.name = p->name;
  p->abi.index = (uint32_t)p->index;
  p->abi.nodes = (const uint32_t *)p->nodes->data; /* int and uint32_t: same size, ids >= 0 */
  p->abi.units = units;
  p->abi.n_nodes = p->nodes->len;
  p->abi.inputs = (const uint32_t *)p->inputs->data;
  p->abi.input_tensors = p->input_tensors;
  p->abi.n_inputs = p->inputs->len;
  p->abi.outputs = (const uint32_t *)p->outputs->data;
  p->abi.output_tensors = p->output_tensors;
  p->abi.n_outputs = p->outputs->len;
}

/* A compiled partition whose reshape cannot take the planned shapes (a symbolic
 * dimension that changed at run time: every plan of new shapes lowers again) gives its
 * nodes back as a declined compile does, so they run on the patterns or the host's
 * reference path for runs of these shapes; a kernel's unit does the same. */
static void try_shapes(QhBackend *backend, QhClaimedPartition *p) {
  GError *why = NULL;
  if (qh_partition_node_trial(backend, p, &why))
    return;
  qh_backend_partition_destroy(backend, p->compiled);
  p->compiled = NULL;
  p->decline = g_strdup_printf("cannot run these shapes: %s", why->message);
  g_error_free(why);
}

QhPartitionSet *qh_partitions_new(QhGraph *graph, QhBackend *backend, const QhPlan *shape_plan,
                                  QhGraphView *view, GError **error) {
  G_STATIC_ASSERT(sizeof(int) == sizeof(uint32_t));
  QhPartitionSet *s = g_new0(QhPartitionSet, 1);
  s->graph = graph;
  s->backend = backend;
  s->plan = shape_plan;
  s->view = view;
  s->parts = g_ptr_array_new_with_free_func(part_free);
  s->units = g_ptr_array_new_with_free_func((GDestroyNotify)offered_free);
  int nn = qh_graph_n_nodes(graph), nv = qh_graph_n_values(graph);
  s->n_nodes = nn;
  s->n_values = nv;
  s->owner = g_new(int, MAX(nn, 1));
  for (int i = 0; i < nn; i++)
    s->owner[i] = -1;
  s->offered = g_new0(Offered *, MAX(nn, 1));
  s->readers = g_new0(GArray *, MAX(nv, 1));
  const QhPartitionOps *ops = qh_backend_partitions(backend);
  if (ops == NULL)
    return s;
  s->io_layout = ops->io_layout;
  for (int i = 0; i < nn; i++) {
    const QhNode *n = qh_graph_node(graph, i);
    for (int k = 0; !n->is_removed && k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v < 0)
        continue;
      if (s->readers[v] == NULL)
        s->readers[v] = g_array_new(FALSE, FALSE, sizeof(int));
      add_unique(s->readers[v], i);
    }
  }
  GArray *order = NULL;
  if (!qh_graph_topo_order(graph, &order, error)) {
    qh_partitions_free(s);
    return NULL;
  }
  gboolean ok = TRUE;
  for (guint k = 0; k < order->len && ok; k++) {
    int id = g_array_index(order, int, k);
    const QhNode *n = qh_graph_node(graph, id);
    if (n->is_removed || is_qdq(n) || qh_plan_node_is_folded(shape_plan, id))
      continue;
    Offered *o = offer(s, n, error);
    ok = o != NULL;
    if (ok) {
      s->offered[id] = o;
      g_ptr_array_add(s->units, o);
    }
  }
  g_array_unref(order);
  const QhNodeUnit **units = g_new0(const QhNodeUnit *, MAX(s->units->len, 1));
  for (guint k = 0; k < s->units->len; k++)
    units[k] = &((Offered *)g_ptr_array_index(s->units, k))->abi;
  const QhPartitionClaim *claims = NULL;
  size_t n_claims = 0;
  qh_graph_view_set_permissions(view, QH_VIEW_READ);
  ok = ok && qh_backend_partition_claim(backend, view, units, s->units->len, &claims, &n_claims, error);
  g_free(units);
  /* The claims are the plugin's until its next callback: every one is copied and
   * checked before compile is called. */
  for (size_t i = 0; ok && i < n_claims; i++)
    ok = take_claim(s, &claims[i], (int)i, error);
  for (guint i = 0; ok && i < s->parts->len; i++) {
    QhClaimedPartition *p = g_ptr_array_index(s->parts, i);
    describe(s, p);
    int r = qh_backend_partition_compile(backend, view, &p->abi, &p->compiled, &p->decline, error);
    ok = r >= 0;
    if (ok && r == 1 && p->compiled == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_FAILED,
                  "plugin '%s': partition '%s': compile: succeeded without returning a compiled partition",
                  qh_backend_name(backend), p->name);
      ok = FALSE;
    }
    if (ok && p->compiled)
      try_shapes(backend, p);
  }
  if (!ok) {
    qh_partitions_free(s);
    return NULL;
  }
  return s;
}
