/* qhost quantize --dynamic (dynamic.h): finds the Linears of a float model (a Gemm or MatMul
 * reading a constant 2-D float weight), quantizes each weight once as PyTorch 1.13's
 * quantize_dynamic does (the host's bit-exact MinMax observers and PyTorch's rounding), and
 * rewrites the node into ONNX Runtime's dynamic pattern, so the written file runs unchanged on
 * ONNX Runtime and on the host's DynamicQuantizeLinear and MatMulInteger kernels. One
 * DynamicQuantizeLinear serves every Linear reading the same activation (attention's Q, K and
 * V projections): the same tensor gives the same qparams, as PyTorch computes them per call. */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "core/error.h"
#include "core/json-text.h"
#include "io/onnx.h"
#include "quant/const-fold.h"
#include "quant/dynamic.h"
#include "quant/observer.h"
#include "quant/quantize.h"

/* Which qparams observers the weights get: default_dynamic_qconfig's and
 * per_channel_dynamic_qconfig's (torch/ao/quantization/qconfig.py, 1.13). */
#define QH_DYN_QSCHEME_TENSOR 2  /* torch.per_tensor_symmetric */
#define QH_DYN_QSCHEME_CHANNEL 3 /* torch.per_channel_symmetric */

/* One row of the report: a Gemm or MatMul and what became of it. */
typedef struct {
  char *node, *op, *weight, *reason; /* reason: NULL when quantized */
  QhQuantParams *q;
} DynRow;

typedef struct {
  const QhDynamicOptions *opt;
  QhGraph *g;
  GHashTable *dql; /* activation value id + 1 -> DQL node's first output id + 1 */
  GPtrArray *rows;
  int quantized;
  int linear_candidates; /* Gemm and MatMul nodes seen */
} Dyn;

static void row_free(gpointer p) {
  DynRow *r = p;
  g_free(r->node), g_free(r->op), g_free(r->weight), g_free(r->reason);
  qh_quant_params_free(r->q);
  g_free(r);
}

static DynRow *add_row(Dyn *d, const QhNode *n, const char *weight) {
  DynRow *r = g_new0(DynRow, 1);
  r->node = g_strdup(n->name);
  r->op = g_strdup(n->op_type);
  r->weight = g_strdup(weight);
  g_ptr_array_add(d->rows, r);
  return r;
}

/* A fresh value named base + suffix (then _1, _2, ... when taken). */
static int new_value(QhGraph *g, const char *base, const char *suffix, GError **error) {
  char *name = g_strconcat(base, suffix, NULL);
  for (int k = 1; qh_graph_find_value(g, name) >= 0; k++) {
    g_free(name);
    name = g_strdup_printf("%s%s_%d", base, suffix, k);
  }
  QhValue *v = qh_graph_add_value(g, name, error);
  g_free(name);
  return v ? v->id : -1;
}

static int new_constant(QhGraph *g, const char *base, const char *suffix, QhTensor *t, GError **error) {
  int id = new_value(g, base, suffix, error);
  if (id < 0)
    qh_tensor_free(t);
  else
    qh_value_set_initializer(qh_graph_value(g, id), t);
  return id;
}

/* ---- which nodes are Linears ---- */

typedef struct {
  int x, w, bias;     /* value ids (bias -1: none) */
  int out_axis;       /* the weight's output-channel axis */
} Linear;

/* Fills lin and returns NULL when node is a Linear 1.13's quantize_dynamic would quantize;
 * otherwise the reason it stays float (static string). */
static const char *as_linear(const QhGraph *g, const QhNode *n, Linear *lin) {
  lin->x = qh_node_input(n, 0);
  lin->w = qh_node_input(n, 1);
  lin->bias = strcmp(n->op_type, "Gemm") == 0 ? qh_node_input(n, 2) : -1;
  lin->out_axis = 1;
  const QhValue *w = lin->w >= 0 ? qh_graph_value(g, lin->w) : NULL;
  if (w == NULL || w->initializer == NULL)
    return "its weight (input 1) is not a constant: a MatMul between activations, which quantize_dynamic "
           "leaves float";
  if (w->initializer->dtype != QH_DTYPE_F32 || w->initializer->shape.rank != 2)
    return "its weight is not a 2-D float32 tensor";
  const QhValue *x = lin->x >= 0 ? qh_graph_value(g, lin->x) : NULL;
  if (x == NULL || (x->dtype != QH_DTYPE_UNDEFINED && x->dtype != QH_DTYPE_F32))
    return "its input is not float32";
  if (x->initializer != NULL)
    return "its input is a constant too";
  if (strcmp(n->op_type, "Gemm") == 0) {
    const QhAttr *a;
    if ((a = qh_node_attr(n, "transA")) && a->i != 0)
      return "Gemm with transA=1 is not an nn.Linear";
    if ((a = qh_node_attr(n, "alpha")) && a->f != 1.0f)
      return "Gemm with alpha != 1 is not an nn.Linear";
    if ((a = qh_node_attr(n, "beta")) && a->f != 1.0f && lin->bias >= 0)
      return "Gemm with beta != 1 is not an nn.Linear";
    if ((a = qh_node_attr(n, "transB")) && a->i != 0)
      lin->out_axis = 0;
  }
  return NULL;
}

/* ---- the weight ---- */

/* PyTorch's qparams for w (observer as the qconfig says) and its int8 values as a [K, N]
 * tensor for MatMulInteger. */
static QhTensor *quantize_weight(const Dyn *d, const QhTensor *w, int out_axis, QhQuantParams **out_q,
                                 GError **error) {
  QhObserverConfig *cfg = qh_observer_config_new(d->opt->per_channel ? "PerChannelMinMaxObserver"
                                                                     : "MinMaxObserver");
  cfg->dtype = QH_DTYPE_S8;
  cfg->qscheme = d->opt->per_channel ? QH_DYN_QSCHEME_CHANNEL : QH_DYN_QSCHEME_TENSOR;
  cfg->ch_axis = out_axis;
  QhObserver *obs = qh_observer_config_check(cfg, error)
                        ? qh_observer_new(cfg, w->shape.rank, w->shape.dims, error)
                        : NULL;
  qh_observer_config_free(cfg);
  QhQuantParams *q = obs && qh_observer_observe(obs, w, error) ? qh_observer_compute(obs, error) : NULL;
  qh_observer_free(obs);
  if (q == NULL)
    return NULL;
  int64_t rows = w->shape.dims[0], cols = w->shape.dims[1];
  int8_t *values = g_new(int8_t, (gsize)(rows * cols));
  if (q->n > 1)
    qh_quant_quantize_per_channel(w->data, 2, w->shape.dims, q, values);
  else
    qh_quant_quantize(w->data, (size_t)(rows * cols), q->scale[0], q->zero_point[0], QH_DTYPE_S8, values);
  /* MatMulInteger wants [K, N]: a weight stored [N, K] (Gemm transB=1) is transposed */
  int64_t kn[2] = {out_axis == 0 ? cols : rows, out_axis == 0 ? rows : cols};
  QhShape shape = qh_shape_make(2, kn);
  QhTensor *t = qh_tensor_new(QH_DTYPE_S8, &shape, error);
  if (t) {
    int8_t *dst = t->data;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++)
        dst[out_axis == 0 ? c * rows + r : r * cols + c] = values[r * cols + c];
  }
  g_free(values);
  if (t == NULL)
    qh_quant_params_free(q);
  else
    *out_q = q;
  return t;
}

/* ---- the rewrite ---- */

static QhNode *add_node(QhGraph *g, const char *name, const char *op, int n_in, const int *in, int n_out,
                        const int *out, GError **error) {
  return qh_graph_add_node(g, name, op, "", n_in, in, n_out, out, error);
}

/* The DynamicQuantizeLinear of activation x (made once); outs: quantized, scale, zero point. */
static gboolean activation_dql(Dyn *d, int x, int outs[3], GError **error) {
  gpointer hit = g_hash_table_lookup(d->dql, GINT_TO_POINTER(x + 1));
  if (hit) {
    int first = GPOINTER_TO_INT(hit) - 1;
    for (int i = 0; i < 3; i++)
      outs[i] = first + i;
    return TRUE;
  }
  char *base = g_strdup(qh_graph_value(d->g, x)->name);
  static const char *const suffix[3] = {"_quantized", "_scale", "_zero_point"};
  gboolean ok = TRUE;
  for (int i = 0; i < 3 && ok; i++)
    ok = (outs[i] = new_value(d->g, base, suffix[i], error)) >= 0;
  char *name = g_strconcat(base, "_DynamicQuantizeLinear", NULL);
  ok = ok && add_node(d->g, name, "DynamicQuantizeLinear", 1, &x, 3, outs, error) != NULL;
  g_free(name);
  g_free(base);
  if (ok) /* new_value gives consecutive ids */
    g_hash_table_insert(d->dql, GINT_TO_POINTER(x + 1), GINT_TO_POINTER(outs[0] + 1));
  return ok;
}

static QhTensor *scalar_or_vector(QhDType dtype, int n, GError **error) {
  int64_t dims[1] = {n};
  QhShape shape = qh_shape_make(n > 1 ? 1 : 0, dims);
  return qh_tensor_new(dtype, &shape, error);
}

/* Replace Linear node (id) by DQL -> MatMulInteger -> Cast -> Mul (-> Add bias). */
static gboolean rewrite(Dyn *d, int id, const Linear *lin, DynRow *row, GError **error) {
  QhGraph *g = d->g;
  QhNode *n = qh_graph_node(g, id);
  char *name = g_strdup(n->name);
  int y = qh_node_output(n, 0);
  const QhValue *w = qh_graph_value(g, lin->w);
  char *wname = g_strdup(w->name);
  QhTensor *wq = quantize_weight(d, w->initializer, lin->out_axis, &row->q, error);
  gboolean ok = wq != NULL;
  int xq[3] = {-1, -1, -1}, wq_id = -1, wzp_id = -1, ws_id = -1;
  if (ok)
    ok = (wq_id = new_constant(g, wname, "_quantized", wq, error)) >= 0;
  QhTensor *zp = ok ? scalar_or_vector(QH_DTYPE_S8, 1, error) : NULL; /* symmetric: all zero */
  ok = ok && zp && (wzp_id = new_constant(g, wname, "_zero_point", zp, error)) >= 0;
  QhTensor *ws = ok ? scalar_or_vector(QH_DTYPE_F32, row->q->n, error) : NULL;
  if (ws)
    memcpy(ws->data, row->q->scale, sizeof(float) * (size_t)row->q->n);
  ok = ok && ws && (ws_id = new_constant(g, wname, "_scale", ws, error)) >= 0;
  ok = ok && activation_dql(d, lin->x, xq, error);
  int acc = -1, accf = -1, scale = -1, prod = y;
  ok = ok && (acc = new_value(g, name, "_MatMulInteger_out", error)) >= 0 &&
       (accf = new_value(g, name, "_cast_out", error)) >= 0 &&
       (scale = new_value(g, name, "_rescale", error)) >= 0 &&
       (lin->bias < 0 || (prod = new_value(g, name, "_rescaled", error)) >= 0);
  if (ok) {
    qh_graph_remove_node(g, id); /* frees y's producer slot for the last new node */
    int mmi_in[4] = {xq[0], wq_id, xq[2], wzp_id}, scale_in[2] = {xq[1], ws_id}, mul_in[2] = {accf, scale};
    char *nm[5] = {g_strconcat(name, "_MatMulInteger", NULL), g_strconcat(name, "_cast", NULL),
                   g_strconcat(name, "_scale_mul", NULL), g_strconcat(name, "_output_mul", NULL),
                   g_strconcat(name, "_bias_add", NULL)};
    QhNode *cast = NULL;
    ok = add_node(g, nm[0], "MatMulInteger", 4, mmi_in, 1, &acc, error) &&
         (cast = add_node(g, nm[1], "Cast", 1, &acc, 1, &accf, error)) &&
         add_node(g, nm[2], "Mul", 2, scale_in, 1, &scale, error) &&
         add_node(g, nm[3], "Mul", 2, mul_in, 1, &prod, error);
    if (ok && cast)
      qh_node_set_attr_int(cast, "to", QH_DTYPE_F32);
    int add_in[2] = {prod, lin->bias};
    ok = ok && (lin->bias < 0 || add_node(g, nm[4], "Add", 2, add_in, 1, &y, error));
    for (int i = 0; i < 5; i++)
      g_free(nm[i]);
  }
  g_free(name);
  g_free(wname);
  return ok;
}

/* Float weights nothing reads any more are not written. */
static void drop_unread_initializers(QhGraph *g) {
  int nv = qh_graph_n_values(g);
  gboolean *read = g_new0(gboolean, (gsize)nv);
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *n = qh_graph_node(g, i);
    for (int k = 0; k < n->n_inputs && !n->is_removed; k++)
      if (n->inputs[k] >= 0)
        read[n->inputs[k]] = TRUE;
  }
  for (int v = 0; v < nv; v++) {
    QhValue *val = qh_graph_value(g, v);
    if (val->initializer && !read[v] && !val->is_output && !val->is_input)
      g_clear_pointer(&val->initializer, qh_tensor_free);
  }
  g_free(read);
}

static gboolean quantize_linears(Dyn *d, GError **error) {
  GArray *order = NULL;
  if (!qh_graph_topo_order(d->g, &order, error))
    return FALSE;
  gboolean ok = TRUE;
  for (guint i = 0; i < order->len && ok; i++) {
    int id = g_array_index(order, int, i);
    const QhNode *n = qh_graph_node(d->g, id);
    if (strcmp(n->op_type, "LSTM") == 0 || strcmp(n->op_type, "GRU") == 0) {
      add_row(d, n, NULL)->reason = g_strdup(
          "1.13 quantizes recurrent weights dynamically with the input and hidden state quantized per time "
          "step inside the cell, which ONNX's LSTM/GRU cannot express: left float");
      continue;
    }
    if (strcmp(n->op_type, "Gemm") != 0 && strcmp(n->op_type, "MatMul") != 0)
      continue;
    d->linear_candidates++;
    Linear lin;
    const char *why = as_linear(d->g, n, &lin);
    DynRow *row = add_row(d, n, lin.w >= 0 ? qh_graph_value(d->g, lin.w)->name : NULL);
    if (why) {
      row->reason = g_strdup(why);
      continue;
    }
    ok = rewrite(d, id, &lin, row, error);
    d->quantized += ok;
  }
  g_array_unref(order);
  return ok;
}

/* ---- the report ---- */

static const char *engine_note(const char *backend) {
  if (backend && strcmp(backend, "qnnpack") != 0)
    return "PyTorch 1.13's fbgemm and x86 engines quantize activations to [0,127] (reduce_range); "
           "DynamicQuantizeLinear can only express [0,255], so this model computes what the qnnpack "
           "engine computes";
  return "activations quantized to uint8 [0,255] on every call, as PyTorch 1.13's qnnpack engine does";
}

static char *report_json(const Dyn *d) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "schema_version");
  json_builder_add_int_value(b, 1);
  json_builder_set_member_name(b, "mode");
  json_builder_add_string_value(b, "dynamic");
  json_builder_set_member_name(b, "model");
  json_builder_add_string_value(b, d->opt->model_path);
  json_builder_set_member_name(b, "backend");
  json_builder_add_string_value(b, d->opt->backend ? d->opt->backend : "qnnpack");
  json_builder_set_member_name(b, "activation_range");
  json_builder_begin_array(b);
  json_builder_add_int_value(b, 0);
  json_builder_add_int_value(b, 255);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "weight_qscheme");
  json_builder_add_string_value(b, d->opt->per_channel ? "per_channel_symmetric" : "per_tensor_symmetric");
  json_builder_set_member_name(b, "note");
  json_builder_add_string_value(b, engine_note(d->opt->backend));
  json_builder_set_member_name(b, "nodes");
  json_builder_begin_array(b);
  for (guint i = 0; i < d->rows->len; i++) {
    const DynRow *r = g_ptr_array_index(d->rows, i);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, r->node);
    json_builder_set_member_name(b, "op");
    json_builder_add_string_value(b, r->op);
    json_builder_set_member_name(b, "quantized");
    json_builder_add_boolean_value(b, r->reason == NULL);
    if (r->reason) {
      json_builder_set_member_name(b, "reason");
      json_builder_add_string_value(b, r->reason);
    }
    if (r->q) {
      json_builder_set_member_name(b, "weight");
      json_builder_add_string_value(b, r->weight);
      json_builder_set_member_name(b, "weight_scale");
      json_builder_begin_array(b);
      for (int k = 0; k < r->q->n; k++)
        json_builder_add_double_value(b, r->q->scale[k]);
      json_builder_end_array(b);
    }
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
  return qh_json_text(b);
}

static char *report_text(const Dyn *d) {
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "%s: dynamic quantization (%s), %d of %d Gemm/MatMul nodes quantized, weights int8 %s\n",
                         d->opt->output_path, d->opt->backend ? d->opt->backend : "qnnpack", d->quantized,
                         d->linear_candidates, d->opt->per_channel ? "per-channel symmetric" : "per-tensor symmetric");
  g_string_append_printf(s, "note: %s\n", engine_note(d->opt->backend));
  for (guint i = 0; i < d->rows->len; i++) {
    const DynRow *r = g_ptr_array_index(d->rows, i);
    if (r->reason)
      g_string_append_printf(s, "  float      %-28s %-7s %s\n", r->node, r->op, r->reason);
    else if (r->q->n == 1)
      g_string_append_printf(s, "  dynamic    %-28s %-7s weight %s scale %.9g\n", r->node, r->op, r->weight,
                             (double)r->q->scale[0]);
    else
      g_string_append_printf(s, "  dynamic    %-28s %-7s weight %s %d channel scales\n", r->node, r->op,
                             r->weight, r->q->n);
  }
  return g_string_free(s, FALSE);
}

/* ---- the whole flow ---- */

static gboolean check_backend(const QhDynamicOptions *opt, GError **error) {
  const char *b = opt->backend;
  if (b == NULL || strcmp(b, "x86") == 0 || strcmp(b, "fbgemm") == 0 || strcmp(b, "qnnpack") == 0)
    return TRUE;
  g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
              "backend '%s': dynamic quantization follows PyTorch 1.13's quantize_dynamic, whose engines are x86, "
              "fbgemm and qnnpack", b);
  return FALSE;
}

gboolean qh_quantize_dynamic(const QhDynamicOptions *opt, GError **error) {
  if (!check_backend(opt, error))
    return FALSE;
  Dyn d = {.opt = opt, .dql = g_hash_table_new(NULL, NULL), .rows = g_ptr_array_new_with_free_func(row_free)};
  d.g = qh_onnx_load(opt->model_path, error);
  gboolean ok = d.g && qh_quant_fold_constants(d.g, NULL, error) && quantize_linears(&d, error);
  if (ok && d.quantized == 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "no Gemm or MatMul with a constant 2-D float weight (an nn.Linear) to quantize dynamically "
                "(%d Gemm/MatMul node%s, none with a constant weight)", d.linear_candidates,
                d.linear_candidates == 1 ? "" : "s");
    ok = FALSE;
  }
  GArray *order = NULL;
  if (ok) {
    drop_unread_initializers(d.g);
    ok = qh_graph_topo_order(d.g, &order, error);
  }
  if (order)
    g_array_unref(order);
  if (!ok && d.g)
    g_prefix_error(error, "%s: ", opt->model_path);
  char *json = ok ? report_json(&d) : NULL;
  if (ok && opt->report_path) {
    GError *local = NULL;
    if (!g_file_set_contents(opt->report_path, json, -1, &local)) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s", local->message);
      g_error_free(local);
      ok = FALSE;
    }
  }
  if (ok && !qh_onnx_save(d.g, opt->output_path, error)) {
    if (opt->report_path)
      g_unlink(opt->report_path);
    ok = FALSE;
  }
  if (ok && opt->report_json_out)
    *opt->report_json_out = g_strdup(json);
  if (ok && opt->report_text_out)
    *opt->report_text_out = report_text(&d);
  g_free(json);
  g_hash_table_unref(d.dql);
  g_ptr_array_unref(d.rows);
  if (d.g)
    qh_graph_free(d.g);
  return ok;
}
