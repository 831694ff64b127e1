/* The host's side of a compiled partition at run time: reshape at plan time with the
 * partition's boundary tensors, run in every inference. What the plugin reports is
 * checked against the partition's planned outputs (the QDQ graph's dtype and shape,
 * in the declared io_layout), so a plugin bug shows as one error naming plugin and
 * partition rather than a wrong tensor downstream; the 64 bytes after every output
 * and after the workspace are filled with a pattern and checked after each run. */
#include "lower/partition-node.h"

#include <string.h>

#include "core/error.h"
#include "hostapi/host-private.h"
#include "lower/kernel-node.h"

#define CANARY_BYTE 0xA5

static gboolean fail(const QhPartitionNode *k, GError **error, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean fail(const QhPartitionNode *k, GError **error, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *cause = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "plugin '%s': partition '%s': %s", qh_backend_name(k->backend),
              k->part->name, cause);
  g_free(cause);
  return FALSE;
}

QhPartitionNode *qh_partition_node_new(QhBackend *backend, const QhClaimedPartition *part) {
  QhPartitionNode *k = g_new0(QhPartitionNode, 1);
  k->backend = backend;
  k->part = part;
  const QhPartitionOps *ops = qh_backend_partitions(backend);
  k->io_layout = ops && ops->io_layout == QH_LAYOUT_NHWC ? QH_LAYOUT_NHWC : QH_LAYOUT_NCHW;
  return k;
}

void qh_partition_node_free(QhPartitionNode *k) { g_free(k); }

static void view_of(const QhPartitionNode *k, const QhTensor *t, const QhQParams *q, QhTensorView *v) {
  *v = (QhTensorView){QH_STRUCT_HEADER(QhTensorView)};
  v->dtype = (int32_t)t->dtype;
  v->layout = t->shape.rank == 4 ? k->io_layout : QH_LAYOUT_ANY;
  v->rank = t->shape.rank;
  memcpy(v->dims, t->shape.dims, sizeof(int64_t) * (size_t)MAX(t->shape.rank, 0));
  v->data = t->data;
  v->nbytes = t->nbytes;
  v->qparams = q;
}

/* Reshape with the boundary tensors ins (data NULL) and check every output the plugin
 * reports against the partition's planned one, and the workspace against the cap. */
static gboolean reshape_checked(QhPartitionNode *k, const QhTensorView *ins, GError **error) {
  const QhPartition *p = &k->part->abi;
  QhTensorView *outs = g_new0(QhTensorView, p->n_outputs + 1);
  for (size_t i = 0; i < p->n_outputs; i++)
    outs[i] = (QhTensorView){QH_STRUCT_HEADER(QhTensorView)};
  size_t workspace = 0;
  gboolean ok = qh_backend_partition_reshape(k->backend, k->part->name, k->part->compiled, ins, p->n_inputs,
                                             outs, p->n_outputs, &workspace, error);
  for (size_t i = 0; ok && i < p->n_outputs; i++) {
    const QhTensorView *want = &p->output_tensors[i], *got = &outs[i];
    gboolean same = got->dtype == want->dtype && got->rank == want->rank &&
                    (got->layout == want->layout || (want->layout != QH_LAYOUT_NHWC && got->layout == QH_LAYOUT_ANY));
    for (int d = 0; same && d < want->rank; d++)
      same = got->dims[d] == want->dims[d];
    if (!same)
      ok = fail(k, error, "reshape reported output %zu as dtype %d, layout %d, rank %d; the graph needs dtype %d, "
                          "layout %d, rank %d with the planned dimensions",
                i, got->dtype, got->layout, got->rank, want->dtype, want->layout, want->rank);
  }
  if (ok && workspace > QH_KERNEL_MAX_WORKSPACE)
    ok = fail(k, error, "reshape asked for %zu bytes of workspace (the limit is %zu)", workspace,
              QH_KERNEL_MAX_WORKSPACE);
  g_free(outs);
  if (ok) {
    k->workspace = workspace;
    k->reshaped = TRUE;
  }
  return ok;
}

gboolean qh_partition_node_trial(QhBackend *backend, const QhClaimedPartition *part, GError **error) {
  QhPartitionNode *k = qh_partition_node_new(backend, part);
  QhTensorView *ins = g_new0(QhTensorView, part->abi.n_inputs + 1);
  for (size_t i = 0; i < part->abi.n_inputs; i++) {
    ins[i] = part->abi.input_tensors[i];
    ins[i].data = NULL;
  }
  gboolean ok = reshape_checked(k, ins, error);
  g_free(ins);
  qh_partition_node_free(k);
  return ok;
}

gboolean qh_partition_node_infer(gpointer data, const QhNode *node, const QhTensor *const *inputs,
                                 int n_inputs, QhTensor *outputs, int n_outputs, GError **error) {
  QhPartitionNode *k = data;
  const QhPartition *p = &k->part->abi;
  if ((size_t)n_inputs != p->n_inputs || (size_t)n_outputs != p->n_outputs)
    return fail(k, error, "node '%s' does not fit its partition", node->name);
  QhTensorView *ins = g_new0(QhTensorView, (gsize)n_inputs + 1);
  for (int i = 0; i < n_inputs; i++) {
    view_of(k, inputs[i], p->input_tensors[i].qparams, &ins[i]);
    ins[i].data = NULL;
  }
  gboolean ok = reshape_checked(k, ins, error);
  for (int i = 0; ok && i < n_outputs; i++) {
    outputs[i].dtype = (QhDType)p->output_tensors[i].dtype;
    outputs[i].shape.rank = p->output_tensors[i].rank;
    memcpy(outputs[i].shape.dims, p->output_tensors[i].dims, sizeof(int64_t) * (size_t)p->output_tensors[i].rank);
  }
  g_free(ins);
  return ok;
}

static gboolean canary_intact(const void *end) {
  const unsigned char *c = end;
  for (int i = 0; i < QH_TENSOR_ALIGN; i++)
    if (c[i] != CANARY_BYTE)
      return FALSE;
  return TRUE;
}

gboolean qh_partition_node_run(gpointer data, QhExecContext *ctx, const QhNode *node,
                               const QhTensor *const *inputs, int n_inputs, QhTensor *const *outputs,
                               int n_outputs, GError **error) {
  QhPartitionNode *k = data;
  const QhPartition *p = &k->part->abi;
  (void)node;
  if (!k->reshaped)
    return fail(k, error, "run before a successful reshape");
  if ((size_t)n_inputs != p->n_inputs || (size_t)n_outputs != p->n_outputs)
    return fail(k, error, "node does not fit its partition");
  void *workspace = NULL;
  if (k->workspace > 0) {
    workspace = qh_exec_scratch(ctx, k->workspace + QH_TENSOR_ALIGN);
    if (workspace == NULL)
      return fail(k, error, "out of memory for %zu bytes of workspace", k->workspace);
    memset((char *)workspace + k->workspace, CANARY_BYTE, QH_TENSOR_ALIGN);
  }
  QhTensorView *ins = g_new0(QhTensorView, (gsize)n_inputs + 1);
  QhTensorView *outs = g_new0(QhTensorView, (gsize)n_outputs + 1);
  for (int i = 0; i < n_inputs; i++)
    view_of(k, inputs[i], p->input_tensors[i].qparams, &ins[i]);
  for (int i = 0; i < n_outputs; i++) {
    view_of(k, outputs[i], p->output_tensors[i].qparams, &outs[i]);
    if (outputs[i]->data)
      memset((char *)outputs[i]->data + outputs[i]->nbytes, CANARY_BYTE, QH_TENSOR_ALIGN);
  }
  QhRunContext rc = {.magic = QH_RUNCTX_MAGIC, .pool = ctx->pool};
  gboolean ok = qh_backend_partition_run(k->backend, k->part->name, k->part->compiled, &rc, ins, (size_t)n_inputs,
                                         outs, (size_t)n_outputs, workspace, k->workspace, error);
  g_free(ins);
  g_free(outs);
  for (int i = 0; ok && i < n_outputs; i++)
    if (outputs[i]->data && !canary_intact((char *)outputs[i]->data + outputs[i]->nbytes))
      ok = fail(k, error, "run wrote past the end of output %d (%zu bytes)", i, outputs[i]->nbytes);
  if (ok && workspace && !canary_intact((char *)workspace + k->workspace))
    ok = fail(k, error, "run wrote past the end of its workspace (%zu bytes)", k->workspace);
  return ok;
}
