/* The coverage table of `qhost bench --backend` and `qhost inspect --backend`: for
 * every node unit, the kernel that ran it (the plugin's kernel id, or
 * host:reference with the reason the plugin did not take it), its time and its
 * multiply-accumulates, and the share of time and of MACs that ran in the plugin's
 * int8 kernels. Q/DQ nodes and layout transposes the host runs are summed on their
 * own lines, and the Q/DQ nodes sitting between two plugin kernels are counted: a
 * well-lowered graph has none. */
#include <stdio.h>
#include <string.h>

#include "flows/coverage.h"

static gboolean is_op(const QhNode *n, const char *op) {
  return !n->is_removed && (!*n->domain || strcmp(n->domain, "ai.onnx") == 0) &&
         strcmp(n->op_type, op) == 0;
}

static gboolean is_glue(const QhNode *n) {
  return is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear") || is_op(n, "Transpose");
}

static gboolean is_kernel(const QhNode *n) {
  return !n->is_removed && strcmp(n->domain, QH_LOWERED_DOMAIN) == 0;
}

/* Whether a plugin kernel feeds node n through Q/DQ/Transpose nodes only. */
static gboolean kernel_upstream(const QhGraph *g, const QhNode *n, int depth) {
  if (depth > 8 || n->n_inputs < 1 || n->inputs[0] < 0)
    return FALSE;
  int p = qh_graph_value(g, n->inputs[0])->producer;
  if (p < 0)
    return FALSE;
  const QhNode *pn = qh_graph_node(g, p);
  return is_kernel(pn) || (is_glue(pn) && kernel_upstream(g, pn, depth + 1));
}

/* Whether value v reaches a plugin kernel through Q/DQ/Transpose nodes only. */
static gboolean kernel_downstream(const QhGraph *g, int v, int depth) {
  if (depth > 8)
    return FALSE;
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *n = qh_graph_node(g, i);
    for (int s = 0; !n->is_removed && s < n->n_inputs; s++) {
      if (n->inputs[s] != v)
        continue;
      if (is_kernel(n) || (is_glue(n) && n->n_outputs > 0 && n->outputs[0] >= 0 &&
                           kernel_downstream(g, n->outputs[0], depth + 1)))
        return TRUE;
    }
  }
  return FALSE;
}

void qh_coverage_compute(const QhLowering *l, const QhGraph *g, const QhPlan *plan, int runs,
                             QhCoverage *c) {
  memset(c, 0, sizeof(*c));
  const GPtrArray *rows = qh_lowering_rows(l);
  double per_run = runs > 0 ? 1e-6 / runs : 0.0; /* ns totals -> ms per run */
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = g_ptr_array_index(rows, i);
    c->units++;
    c->total_macs += r->macs;
    if (r->kernel) {
      c->plugin_units++;
      c->plugin_macs += r->macs;
    }
  }
  if (plan == NULL)
    return;
  const GArray *order = qh_plan_order(plan);
  for (guint i = 0; i < order->len; i++) {
    int id = g_array_index(order, int, i);
    if (qh_plan_node_is_folded(plan, id))
      continue;
    const QhNode *n = qh_graph_node(g, id);
    double ms = (double)qh_plan_node_time_ns(plan, id) * per_run;
    c->total_ms += ms;
    if (qh_lowering_node_kernel(l, id))
      c->plugin_ms += ms;
    if (qh_lowering_node_row(l, id) == NULL) {
      if (is_op(n, "Transpose")) {
        c->layout_nodes++;
        c->layout_ms += ms;
      } else {
        c->qdq_nodes++;
        c->qdq_ms += ms;
        if (n->n_outputs > 0 && n->outputs[0] >= 0 && kernel_upstream(g, n, 0) &&
            kernel_downstream(g, n->outputs[0], 0))
          c->qdq_between_kernels++;
      }
    }
  }
}

static double share(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

void qh_coverage_print(FILE *out, const QhLowering *l, const QhPlan *plan, const QhCoverage *c,
                           int runs, gboolean with_time) {
  const GPtrArray *rows = qh_lowering_rows(l);
  double per_run = runs > 0 ? 1e-6 / runs : 0.0;
  fprintf(out, "coverage: %d of %d node units on the plugin's int8 kernels; %.1f%% of MACs",
         c->plugin_units, c->units, 100.0 * share((double)c->plugin_macs, (double)c->total_macs));
  if (with_time)
    fprintf(out, ", %.1f%% of time", 100.0 * share(c->plugin_ms, c->total_ms));
  fprintf(out, "\n");
  fprintf(out, "  %-28s %-22s %-26s %10s %9s%s\n", "unit", "ops", "kernel", "MMAC", "MAC %",
         with_time ? "   time ms  time %" : "");
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = g_ptr_array_index(rows, i);
    fprintf(out, "  %-28s %-22s %-26s %10.3f %8.1f%%", r->name, r->ops,
           r->kernel ? r->kernel : "host:reference", (double)r->macs / 1e6,
           100.0 * share((double)r->macs, (double)c->total_macs));
    if (with_time && plan && r->lowered_node >= 0) {
      double ms = (double)qh_plan_node_time_ns(plan, r->lowered_node) * per_run;
      fprintf(out, " %9.3f %6.1f%%", ms, 100.0 * share(ms, c->total_ms));
    }
    if (r->reason)
      fprintf(out, "  (%s)", r->reason);
    if (r->partition)
      fprintf(out, "  (partition '%s', %u ops)", r->partition, r->nodes->len);
    fprintf(out, "\n");
  }
  if (with_time) {
    fprintf(out, "  host Q/DQ: %d nodes, %.3f ms (%.1f%%); %d between plugin kernels\n", c->qdq_nodes,
           c->qdq_ms, 100.0 * share(c->qdq_ms, c->total_ms), c->qdq_between_kernels);
    if (c->layout_nodes)
      fprintf(out, "  layout transposes: %d nodes, %.3f ms (%.1f%%)\n", c->layout_nodes, c->layout_ms,
             100.0 * share(c->layout_ms, c->total_ms));
  }
  if (share((double)c->plugin_macs, (double)c->total_macs) < 0.5)
    fprintf(out, "note: most of this model's multiply-accumulates run on the host's float reference "
           "path, not on the plugin's int8 kernels\n");
}

void qh_coverage_json(const QhLowering *l, const QhPlan *plan, const QhCoverage *c,
                          int runs, gboolean with_time, JsonBuilder *b) {
  const GPtrArray *rows = qh_lowering_rows(l);
  double per_run = runs > 0 ? 1e-6 / runs : 0.0;
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "units");
  json_builder_begin_array(b);
  for (guint i = 0; i < rows->len; i++) {
    const QhLoweringRow *r = g_ptr_array_index(rows, i);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, r->name);
    json_builder_set_member_name(b, "ops");
    json_builder_add_string_value(b, r->ops);
    json_builder_set_member_name(b, "kernel");
    json_builder_add_string_value(b, r->kernel ? r->kernel : "host:reference");
    if (r->pattern) {
      json_builder_set_member_name(b, "pattern");
      json_builder_add_string_value(b, r->pattern);
    }
    if (r->partition) {
      json_builder_set_member_name(b, "partition");
      json_builder_add_string_value(b, r->partition);
    }
    if (r->reason) {
      json_builder_set_member_name(b, "reason");
      json_builder_add_string_value(b, r->reason);
    }
    json_builder_set_member_name(b, "macs");
    json_builder_add_int_value(b, r->macs);
    if (with_time && plan && r->lowered_node >= 0) {
      json_builder_set_member_name(b, "time_ms");
      json_builder_add_double_value(b, (double)qh_plan_node_time_ns(plan, r->lowered_node) * per_run);
    }
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "plugin_units");
  json_builder_add_int_value(b, c->plugin_units);
  json_builder_set_member_name(b, "plugin_mac_share");
  json_builder_add_double_value(b, share((double)c->plugin_macs, (double)c->total_macs));
  if (with_time) {
    json_builder_set_member_name(b, "plugin_time_share");
    json_builder_add_double_value(b, share(c->plugin_ms, c->total_ms));
    json_builder_set_member_name(b, "host_qdq_nodes");
    json_builder_add_int_value(b, c->qdq_nodes);
    json_builder_set_member_name(b, "host_qdq_ms");
    json_builder_add_double_value(b, c->qdq_ms);
    json_builder_set_member_name(b, "qdq_between_kernels");
    json_builder_add_int_value(b, c->qdq_between_kernels);
    json_builder_set_member_name(b, "layout_transposes");
    json_builder_add_int_value(b, c->layout_nodes);
    json_builder_set_member_name(b, "layout_ms");
    json_builder_add_double_value(b, c->layout_ms);
  }
  json_builder_end_object(b);
}
