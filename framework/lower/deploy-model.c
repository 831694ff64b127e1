/* Turns a QDQ graph into its deploy model and writes either form as ONNX (see the
 * header). The constants are folded first, so that a Q -> DQ chain on a float weight
 * becomes its rounded, clipped floats instead of being stripped back to the raw
 * weight; then the activation pairs go (strip-qdq.c). The copy that is rewritten is
 * made by a round trip through the host's own ONNX writer and loader, so the file is
 * exactly what the loader reads back. */
#include "lower/deploy-model.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "exec/op.h"
#include "io/onnx.h"
#include "lower/strip-qdq.h"

static gboolean is_qdq(const QhNode *n) {
  return !n->is_removed && (!*n->domain || strcmp(n->domain, "ai.onnx") == 0) &&
         (strcmp(n->op_type, "QuantizeLinear") == 0 || strcmp(n->op_type, "DequantizeLinear") == 0);
}

/* A Q or DQ node whose inputs are all initializers and whose one output is not a
 * graph output (an initializer cannot stand for an output by name in every runtime). */
static gboolean foldable(const QhGraph *g, const QhNode *n) {
  if (!is_qdq(n) || n->n_inputs < 2 || n->n_inputs > 3 || n->n_outputs != 1 || n->outputs[0] < 0 ||
      qh_graph_value(g, n->outputs[0])->is_output)
    return FALSE;
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0 && qh_graph_value(g, n->inputs[i])->initializer == NULL)
      return FALSE;
  return n->inputs[0] >= 0;
}

/* Run the node with the host's kernel; its output becomes an initializer. */
static gboolean fold(QhGraph *g, QhNode *n, QhExecContext *ctx, GError **error) {
  const QhOpDef *def = qh_op_find(n->domain, n->op_type);
  const QhTensor *in[3] = {NULL, NULL, NULL};
  for (int i = 0; i < n->n_inputs; i++)
    in[i] = n->inputs[i] >= 0 ? qh_graph_value(g, n->inputs[i])->initializer : NULL;
  QhTensor info = {.shape.rank = -1};
  if (def == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "node '%s' (%s): no host kernel", n->name,
                n->op_type);
    return FALSE;
  }
  if (!def->infer(n, in, n->n_inputs, &info, 1, error))
    return FALSE;
  QhTensor *t = qh_tensor_new(info.dtype, &info.shape, error);
  if (t == NULL)
    return FALSE;
  QhTensor *const outs[1] = {t};
  if (!def->run(ctx, n, in, n->n_inputs, outs, 1, error)) {
    qh_tensor_free(t);
    return FALSE;
  }
  int y = n->outputs[0];
  qh_graph_remove_node(g, n->id);
  qh_value_set_initializer(qh_graph_value(g, y), t);
  return TRUE;
}

static gboolean fold_constants(QhGraph *g, GError **error) {
  GArray *order = NULL;
  if (!qh_graph_topo_order(g, &order, error))
    return FALSE;
  QhExecContext ctx = {.pool = qh_thread_pool_new(1)};
  gboolean ok = TRUE;
  for (guint i = 0; i < order->len && ok; i++) {
    QhNode *n = qh_graph_node(g, g_array_index(order, int, i));
    if (foldable(g, n))
      ok = fold(g, n, &ctx, error);
  }
  qh_exec_context_clear(&ctx);
  qh_thread_pool_free(ctx.pool);
  g_array_unref(order);
  return ok;
}

/* Per value id: TRUE when a live node reads it or it is a graph output. */
static gboolean *read_values(const QhGraph *g) {
  gboolean *read = g_new0(gboolean, (gsize)qh_graph_n_values(g) + 1);
  for (int v = 0; v < qh_graph_n_values(g); v++)
    read[v] = qh_graph_value(g, v)->is_output;
  for (int i = 0; i < qh_graph_n_nodes(g); i++) {
    const QhNode *n = qh_graph_node(g, i);
    for (int s = 0; !n->is_removed && s < n->n_inputs; s++)
      if (n->inputs[s] >= 0)
        read[n->inputs[s]] = TRUE;
  }
  return read;
}

/* Drop initializers nothing reads (the integers, scales and zero points of the
 * removed Q/DQ nodes), and the quantized-range metadata of integer tensors that are
 * gone with them. */
static void drop_unread(QhGraph *g) {
  gboolean *read = read_values(g);
  for (int v = 0; v < qh_graph_n_values(g); v++) {
    QhValue *val = qh_graph_value(g, v);
    if (val->initializer && !read[v])
      g_clear_pointer(&val->initializer, qh_tensor_free);
  }
  for (guint i = g->metadata->len; i-- > 0;) {
    QhMetadataEntry *e = &g_array_index(g->metadata, QhMetadataEntry, i);
    if (!g_str_has_prefix(e->key, QH_QUANT_RANGE_KEY_PREFIX))
      continue;
    int v = qh_graph_find_value(g, e->key + strlen(QH_QUANT_RANGE_KEY_PREFIX));
    if (v >= 0 && read[v])
      continue;
    g_free(e->key);
    g_free(e->value);
    g_array_remove_index(g->metadata, i);
  }
  g_free(read);
}

gboolean qh_deploy_model_make(QhGraph *graph, GError **error) {
  if (!fold_constants(graph, error) || !qh_qdq_strip(graph, NULL, error))
    return FALSE;
  drop_unread(graph);
  return TRUE;
}

/* A copy of graph, through a temporary file next to path. */
static QhGraph *copy_via(const QhGraph *graph, const char *path, GError **error) {
  char *tmp = g_strdup_printf("%s.qdq-XXXXXX", path);
  int fd = g_mkstemp(tmp);
  QhGraph *copy = NULL;
  if (fd < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot create a temporary file: %s", path,
                g_strerror(errno));
  } else {
    close(fd);
    if (qh_onnx_save(graph, tmp, error))
      copy = qh_onnx_load(tmp, error);
    g_unlink(tmp);
  }
  g_free(tmp);
  return copy;
}

gboolean qh_deploy_model_save(const QhGraph *graph, const char *path, gboolean strip_qdq,
                              gsize *out_bytes, GError **error) {
  QhGraph *copy = NULL;
  gboolean ok;
  if (!strip_qdq) {
    ok = qh_onnx_save(graph, path, error);
  } else {
    ok = (copy = copy_via(graph, path, error)) != NULL && qh_deploy_model_make(copy, error) &&
         qh_onnx_save(copy, path, error);
    if (!ok && error && *error && !g_str_has_prefix((*error)->message, path))
      g_prefix_error(error, "%s: ", path);
  }
  qh_graph_free(copy);
  GStatBuf st;
  if (ok && g_stat(path, &st) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: %s", path, g_strerror(errno));
    ok = FALSE;
  }
  if (ok && out_bytes)
    *out_bytes = (gsize)st.st_size;
  return ok;
}
