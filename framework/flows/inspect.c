/* Inspect (qhost_model_inspect, `qhost inspect`): what a model holds: inputs and outputs, one line per node with
 * its output shapes, parameter count, MACs, opsets, producer, the ops qhost cannot
 * run, and for a QDQ model its quantization parameters. Text or JSON. Shapes are
 * inferred with symbolic dimensions bound to 1. */
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "flows/coverage.h"
#include "flows/flows.h"
#include "core/error.h"
#include "exec/op.h"

typedef struct {
  const QhGraph *graph;
  QhPlan *plan;          /* NULL when shape inference failed */
  char *plan_error;
  int64_t n_params;
  int64_t param_bytes;
  int64_t macs;
  int n_quantize;
  int n_dequantize;
  int n_dynamic_quantize; /* DynamicQuantizeLinear: qhost quantize --dynamic's format */
  int n_matmul_integer;
  GPtrArray *unsupported; /* op type strings, borrowed, unique */
  const char *backend;    /* --backend: the plugin's name */
  QhLowering *lowering;   /* its decisions, or NULL */
} Summary;

static char *dims_string(const QhValue *v) {
  if (v->shape.rank < 0)
    return g_strdup("(unknown)");
  GString *s = g_string_new("[");
  for (int i = 0; i < v->shape.rank; i++) {
    if (i)
      g_string_append(s, ", ");
    if (v->shape.dims[i] >= 0)
      g_string_append_printf(s, "%" G_GINT64_FORMAT, v->shape.dims[i]);
    else
      g_string_append(s, v->dim_params && v->dim_params[i] ? v->dim_params[i] : "?");
  }
  g_string_append_c(s, ']');
  return g_string_free(s, FALSE);
}

static const QhTensor *value_data(const Summary *sm, int vid) {
  if (vid < 0)
    return NULL;
  const QhValue *v = qh_graph_value(sm->graph, vid);
  if (v->initializer)
    return v->initializer;
  const QhTensor *t = sm->plan ? qh_plan_value_info(sm->plan, vid) : NULL;
  return t && t->data ? t : NULL;
}

static double element_as_double(const QhTensor *t, int64_t i) {
  switch (t->dtype) {
  case QH_DTYPE_F32: return ((const float *)t->data)[i];
  case QH_DTYPE_U8: return ((const guint8 *)t->data)[i];
  case QH_DTYPE_S8: return ((const gint8 *)t->data)[i];
  case QH_DTYPE_U4: return ((const guint8 *)t->data)[i]; /* 4-bit: one per byte */
  case QH_DTYPE_S4: return ((const gint8 *)t->data)[i];
  case QH_DTYPE_U16: return ((const guint16 *)t->data)[i];
  case QH_DTYPE_S16: return ((const gint16 *)t->data)[i];
  case QH_DTYPE_S32: return ((const gint32 *)t->data)[i];
  case QH_DTYPE_S64: return (double)((const gint64 *)t->data)[i];
  case QH_DTYPE_F16: return qh_f16_to_f32(((const guint16 *)t->data)[i]);
  default: return 0.0;
  }
}

static void summarise(Summary *sm) {
  const QhGraph *g = sm->graph;
  sm->unsupported = g_ptr_array_new();
  for (int v = 0; v < qh_graph_n_values(g); v++) {
    const QhTensor *t = qh_graph_value(g, v)->initializer;
    /* int64 initializers are shape and index data, not parameters. */
    if (t != NULL && t->dtype != QH_DTYPE_S64) {
      sm->n_params += qh_tensor_numel(t);
      sm->param_bytes += (int64_t)t->nbytes;
    }
  }
  for (int id = 0; id < qh_graph_n_nodes(g); id++) {
    const QhNode *n = qh_graph_node(g, id);
    if (n->is_removed)
      continue;
    sm->n_quantize += strcmp(n->op_type, "QuantizeLinear") == 0;
    sm->n_dequantize += strcmp(n->op_type, "DequantizeLinear") == 0;
    sm->n_dynamic_quantize += strcmp(n->op_type, "DynamicQuantizeLinear") == 0;
    sm->n_matmul_integer += strcmp(n->op_type, "MatMulInteger") == 0;
    if (qh_op_find(n->domain, n->op_type) == NULL) {
      gboolean seen = FALSE;
      for (guint k = 0; k < sm->unsupported->len; k++)
        seen |= strcmp(g_ptr_array_index(sm->unsupported, k), n->op_type) == 0;
      if (!seen)
        g_ptr_array_add(sm->unsupported, n->op_type);
    }
    if (sm->plan)
      sm->macs += qh_plan_node_macs(sm->plan, id);
  }
}

/* "scale 0.0123 zero_point 128 (uint8)" or a per-axis summary. */
static char *qparams_text(const Summary *sm, const QhNode *n) {
  const QhTensor *scale = value_data(sm, qh_node_input(n, 1));
  const QhTensor *zp = value_data(sm, qh_node_input(n, 2));
  if (scale == NULL)
    return g_strdup("scale not constant");
  int64_t ns = qh_tensor_numel(scale);
  const char *zdt = zp ? qh_dtype_name(zp->dtype) : "uint8";
  if (ns == 1)
    return g_strdup_printf("scale %.9g zero_point %.0f (%s)", element_as_double(scale, 0),
                           zp ? element_as_double(zp, 0) : 0.0, zdt);
  double lo = element_as_double(scale, 0), hi = lo, zlo = 0, zhi = 0;
  for (int64_t i = 0; i < ns; i++) {
    double s = element_as_double(scale, i);
    lo = MIN(lo, s);
    hi = MAX(hi, s);
  }
  if (zp) {
    zlo = zhi = element_as_double(zp, 0);
    for (int64_t i = 0; i < qh_tensor_numel(zp); i++) {
      zlo = MIN(zlo, element_as_double(zp, i));
      zhi = MAX(zhi, element_as_double(zp, i));
    }
  }
  int64_t axis = 1;
  qh_node_attr_get_int(n, "axis", 1, &axis, NULL);
  return g_strdup_printf("per-axis (axis %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                         " scales in [%.9g, %.9g], zero points in [%.0f, %.0f]) (%s)",
                         axis, ns, lo, hi, zlo, zhi, zdt);
}

static char *inferred_shape(const Summary *sm, int vid) {
  const QhTensor *t = sm->plan ? qh_plan_value_info(sm->plan, vid) : NULL;
  return t ? qh_shape_to_string(&t->shape) : g_strdup("?");
}

static void print_text(FILE *out, const char *path, const Summary *sm) {
  const QhGraph *g = sm->graph;
  fprintf(out, "model: %s\n", path);
  fprintf(out, "producer: %s %s\n", g->producer_name ? g->producer_name : "(none)",
         g->producer_version ? g->producer_version : "");
  fprintf(out, "ir_version: %" G_GINT64_FORMAT "\nopsets:", g->ir_version);
  for (guint i = 0; i < g->opsets->len; i++) {
    const QhOpsetImport *o = &g_array_index(g->opsets, QhOpsetImport, i);
    fprintf(out, " %s %" G_GINT64_FORMAT, *o->domain ? o->domain : "ai.onnx", o->version);
  }
  fprintf(out, "\ninputs:\n");
  for (guint i = 0; i < g->inputs->len; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(g->inputs, int, i));
    char *d = dims_string(v);
    fprintf(out, "  %s  %s %s\n", v->name, qh_dtype_name(v->dtype), d);
    g_free(d);
  }
  fprintf(out, "outputs:\n");
  for (guint i = 0; i < g->outputs->len; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(g->outputs, int, i));
    char *d = dims_string(v);
    fprintf(out, "  %s  %s %s\n", v->name, qh_dtype_name(v->dtype), d);
    g_free(d);
  }
  fprintf(out, "nodes: %d\n", qh_graph_count_live_nodes(g));
  GArray *order = NULL;
  if (!qh_graph_topo_order(g, &order, NULL))
    return;
  for (guint i = 0; i < order->len; i++) {
    const QhNode *n = qh_graph_node(g, g_array_index(order, int, i));
    GString *line = g_string_new(NULL);
    g_string_append_printf(line, "  %s  %s%s%s  ", n->name, *n->domain ? n->domain : "",
                           *n->domain ? "." : "", n->op_type);
    for (int k = 0; k < n->n_inputs; k++)
      g_string_append_printf(line, "%s%s", k ? ", " : "",
                             n->inputs[k] >= 0 ? qh_graph_value(g, n->inputs[k])->name : "(none)");
    g_string_append(line, " -> ");
    for (int k = 0; k < n->n_outputs; k++) {
      if (n->outputs[k] < 0)
        continue;
      char *s = inferred_shape(sm, n->outputs[k]);
      g_string_append_printf(line, "%s%s %s", k ? ", " : "", qh_graph_value(g, n->outputs[k])->name, s);
      g_free(s);
    }
    if (strcmp(n->op_type, "QuantizeLinear") == 0 || strcmp(n->op_type, "DequantizeLinear") == 0) {
      char *q = qparams_text(sm, n);
      g_string_append_printf(line, "  [%s]", q);
      g_free(q);
    }
    fprintf(out, "%s\n", line->str);
    g_string_free(line, TRUE);
  }
  g_array_unref(order);
  fprintf(out, "parameters: %" G_GINT64_FORMAT " (%" G_GINT64_FORMAT " bytes)\n", sm->n_params,
         sm->param_bytes);
  if (sm->plan)
    fprintf(out, "MACs: %" G_GINT64_FORMAT " (symbolic dimensions bound to 1)\n", sm->macs);
  else
    fprintf(out, "MACs: unknown (shape inference failed: %s)\n", sm->plan_error);
  if (sm->n_quantize + sm->n_dequantize > 0)
    fprintf(out, "quantized: yes (%d QuantizeLinear, %d DequantizeLinear)\n", sm->n_quantize,
           sm->n_dequantize);
  else if (sm->n_dynamic_quantize > 0)
    fprintf(out, "quantized: dynamic (%d DynamicQuantizeLinear, %d MatMulInteger)\n", sm->n_dynamic_quantize,
            sm->n_matmul_integer);
  else
    fprintf(out, "quantized: no (no QuantizeLinear/DequantizeLinear nodes)\n");
  if (sm->unsupported->len > 0) {
    fprintf(out, "unsupported ops:");
    for (guint k = 0; k < sm->unsupported->len; k++)
      fprintf(out, " %s", (const char *)g_ptr_array_index(sm->unsupported, k));
    fprintf(out, "\n");
  }
}

static void add_value_list(JsonBuilder *b, const QhGraph *g, const GArray *ids) {
  json_builder_begin_array(b);
  for (guint i = 0; i < ids->len; i++) {
    const QhValue *v = qh_graph_value(g, g_array_index(ids, int, i));
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, v->name);
    json_builder_set_member_name(b, "dtype");
    json_builder_add_string_value(b, qh_dtype_name(v->dtype));
    json_builder_set_member_name(b, "shape");
    if (v->shape.rank < 0) {
      json_builder_add_null_value(b);
    } else {
      json_builder_begin_array(b);
      for (int d = 0; d < v->shape.rank; d++) {
        if (v->shape.dims[d] >= 0)
          json_builder_add_int_value(b, v->shape.dims[d]);
        else if (v->dim_params && v->dim_params[d])
          json_builder_add_string_value(b, v->dim_params[d]);
        else
          json_builder_add_null_value(b);
      }
      json_builder_end_array(b);
    }
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

static void add_tensor_values(JsonBuilder *b, const QhTensor *t) {
  json_builder_begin_array(b);
  for (int64_t i = 0; t && i < qh_tensor_numel(t); i++)
    json_builder_add_double_value(b, element_as_double(t, i));
  json_builder_end_array(b);
}

static void add_lowering(JsonBuilder *b, const Summary *sm) {
  QhCoverage c;
  qh_coverage_compute(sm->lowering, NULL, NULL, 0, &c);
  json_builder_set_member_name(b, "backend");
  json_builder_add_string_value(b, sm->backend);
  json_builder_set_member_name(b, "coverage");
  qh_coverage_json(sm->lowering, NULL, &c, 0, FALSE, b);
}

static void print_json(FILE *out, const char *path, const Summary *sm) {
  const QhGraph *g = sm->graph;
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "schema_version");
  json_builder_add_int_value(b, 1);
  json_builder_set_member_name(b, "model");
  json_builder_add_string_value(b, path);
  json_builder_set_member_name(b, "producer_name");
  json_builder_add_string_value(b, g->producer_name ? g->producer_name : "");
  json_builder_set_member_name(b, "producer_version");
  json_builder_add_string_value(b, g->producer_version ? g->producer_version : "");
  json_builder_set_member_name(b, "ir_version");
  json_builder_add_int_value(b, g->ir_version);
  json_builder_set_member_name(b, "opsets");
  json_builder_begin_object(b);
  for (guint i = 0; i < g->opsets->len; i++) {
    const QhOpsetImport *o = &g_array_index(g->opsets, QhOpsetImport, i);
    json_builder_set_member_name(b, *o->domain ? o->domain : "ai.onnx");
    json_builder_add_int_value(b, o->version);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "inputs");
  add_value_list(b, g, g->inputs);
  json_builder_set_member_name(b, "outputs");
  add_value_list(b, g, g->outputs);
  json_builder_set_member_name(b, "nodes");
  json_builder_begin_array(b);
  GArray *order = NULL;
  if (qh_graph_topo_order(g, &order, NULL)) {
    for (guint i = 0; i < order->len; i++) {
      const QhNode *n = qh_graph_node(g, g_array_index(order, int, i));
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "name");
      json_builder_add_string_value(b, n->name);
      json_builder_set_member_name(b, "op_type");
      json_builder_add_string_value(b, n->op_type);
      json_builder_set_member_name(b, "domain");
      json_builder_add_string_value(b, n->domain);
      json_builder_set_member_name(b, "inputs");
      json_builder_begin_array(b);
      for (int k = 0; k < n->n_inputs; k++)
        json_builder_add_string_value(b, n->inputs[k] >= 0 ? qh_graph_value(g, n->inputs[k])->name : "");
      json_builder_end_array(b);
      json_builder_set_member_name(b, "outputs");
      json_builder_begin_array(b);
      for (int k = 0; k < n->n_outputs; k++) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, n->outputs[k] >= 0 ? qh_graph_value(g, n->outputs[k])->name : "");
        json_builder_set_member_name(b, "shape");
        const QhTensor *t = sm->plan && n->outputs[k] >= 0 ? qh_plan_value_info(sm->plan, n->outputs[k]) : NULL;
        if (t) {
          json_builder_begin_array(b);
          for (int d = 0; d < t->shape.rank; d++)
            json_builder_add_int_value(b, t->shape.dims[d]);
          json_builder_end_array(b);
        } else {
          json_builder_add_null_value(b);
        }
        json_builder_end_object(b);
      }
      json_builder_end_array(b);
      json_builder_set_member_name(b, "macs");
      json_builder_add_int_value(b, sm->plan ? qh_plan_node_macs(sm->plan, n->id) : 0);
      json_builder_set_member_name(b, "supported");
      json_builder_add_boolean_value(b, qh_op_find(n->domain, n->op_type) != NULL);
      if (strcmp(n->op_type, "QuantizeLinear") == 0 || strcmp(n->op_type, "DequantizeLinear") == 0) {
        const QhTensor *zp = value_data(sm, qh_node_input(n, 2));
        int64_t axis = 1;
        qh_node_attr_get_int(n, "axis", 1, &axis, NULL);
        json_builder_set_member_name(b, "qparams");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "axis");
        json_builder_add_int_value(b, axis);
        json_builder_set_member_name(b, "dtype");
        json_builder_add_string_value(b, zp ? qh_dtype_name(zp->dtype) : "uint8");
        json_builder_set_member_name(b, "scale");
        add_tensor_values(b, value_data(sm, qh_node_input(n, 1)));
        json_builder_set_member_name(b, "zero_point");
        add_tensor_values(b, zp);
        json_builder_end_object(b);
      }
      json_builder_end_object(b);
    }
    g_array_unref(order);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "parameters");
  json_builder_add_int_value(b, sm->n_params);
  json_builder_set_member_name(b, "parameter_bytes");
  json_builder_add_int_value(b, sm->param_bytes);
  json_builder_set_member_name(b, "macs");
  if (sm->plan)
    json_builder_add_int_value(b, sm->macs);
  else
    json_builder_add_null_value(b);
  json_builder_set_member_name(b, "shape_inference_error");
  if (sm->plan_error)
    json_builder_add_string_value(b, sm->plan_error);
  else
    json_builder_add_null_value(b);
  json_builder_set_member_name(b, "quantized");
  json_builder_add_boolean_value(b, sm->n_quantize + sm->n_dequantize > 0);
  json_builder_set_member_name(b, "n_quantize_linear");
  json_builder_add_int_value(b, sm->n_quantize);
  json_builder_set_member_name(b, "n_dequantize_linear");
  json_builder_add_int_value(b, sm->n_dequantize);
  json_builder_set_member_name(b, "n_dynamic_quantize_linear");
  json_builder_add_int_value(b, sm->n_dynamic_quantize);
  json_builder_set_member_name(b, "n_matmul_integer");
  json_builder_add_int_value(b, sm->n_matmul_integer);
  json_builder_set_member_name(b, "unsupported_ops");
  json_builder_begin_array(b);
  for (guint k = 0; k < sm->unsupported->len; k++)
    json_builder_add_string_value(b, g_ptr_array_index(sm->unsupported, k));
  json_builder_end_array(b);
  if (sm->lowering)
    add_lowering(b, sm);
  json_builder_end_object(b);
  qh_json_print(out, b);
}

gboolean qh_inspect(const char *path, QhGraph *graph, const QhBackendChoice *backend,
                    gboolean json, FILE *out, GError **error) {
  QhBackend *plugin = NULL;
  Summary sm = {.graph = graph};
  QhGraph *lowered = NULL; /* lowering normalises its graph: keep the listing's intact */
  if (backend && backend->name) {
    if ((plugin = qh_backend_choice_load(backend, error)) == NULL ||
        (lowered = qh_load_model(path, error)) == NULL ||
        (sm.lowering = qh_lowering_new(lowered, plugin, NULL, QH_LOWERING_DEFAULT, error)) == NULL) {
      qh_error_prefix(error, path);
      qh_backend_free(plugin);
      qh_graph_free(lowered);
      return FALSE;
    }
    sm.backend = qh_backend_name(plugin);
  }
  GError *plan_error = NULL;
  sm.plan = qh_plan_new(graph, NULL, TRUE, &plan_error);
  if (sm.plan == NULL) {
    sm.plan_error = g_strdup(plan_error->message);
    g_clear_error(&plan_error);
  }
  summarise(&sm);
  if (json) {
    print_json(out, path, &sm);
  } else {
    print_text(out, path, &sm);
    if (sm.lowering) {
      QhCoverage c;
      qh_coverage_compute(sm.lowering, NULL, NULL, 0, &c);
      fprintf(out, "backend: %s\n", sm.backend);
      qh_coverage_print(out, sm.lowering, NULL, &c, 0, FALSE);
    }
  }
  g_ptr_array_unref(sm.unsupported);
  g_free(sm.plan_error);
  qh_plan_free(sm.plan);
  qh_lowering_free(sm.lowering);
  qh_graph_free(lowered);
  qh_backend_free(plugin);
  return TRUE;
}
