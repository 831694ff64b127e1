/* The gateway's partition calls (ABI 1.2): a plugin's claim over the offered units,
 * and a compiled partition's compile, reshape, run and destroy, each with the plugin
 * tagged (run happens on the pool's workers) and errors naming plugin, partition and
 * callback. lower/partition.c checks the claims and lower/partition-node.c what
 * reshape and run report. */
#include "backend/backend-private.h"

#include "hostapi/host-api-private.h"
#include "hostapi/status-private.h"

#define GROUP(b, field) (QH_HAS_FIELD((b)->desc, QhPluginDesc, field) ? (b)->desc->field : NULL)

const QhPartitionOps *qh_backend_partitions(const QhBackend *b) {
  return b->hide_partitions ? NULL : GROUP(b, partitions);
}

static gboolean partition_checked(const QhBackend *b, const char *partition_name, QhStatus *st,
                                  const char *callback, GError **error) {
  if (st == NULL)
    return TRUE;
  char *what = g_strdup_printf("partition '%s': %s", partition_name, callback);
  qh_backend_fail(b, st, what, error);
  g_free(what);
  return FALSE;
}

gboolean qh_backend_partition_claim(QhBackend *b, const QhGraphView *view, const QhNodeUnit *const *units,
                                    size_t n_units, const QhPartitionClaim **out_claims,
                                    size_t *out_n_claims, GError **error) {
  const QhPartitionOps *ops = qh_backend_partitions(b);
  *out_claims = NULL;
  *out_n_claims = 0;
  if (ops == NULL)
    return TRUE;
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->claim(b->instance, qh_host_api_get(), view, units, n_units, out_claims, out_n_claims);
  qh_plugin_set_current(prev);
  if (st == NULL)
    return TRUE;
  char *what = g_strdup_printf("partitions '%s': claim", ops->id);
  qh_backend_fail(b, st, what, error);
  g_free(what);
  *out_claims = NULL;
  *out_n_claims = 0;
  return FALSE;
}

int qh_backend_partition_compile(QhBackend *b, const QhGraphView *view, const QhPartition *partition,
                                 void **out_compiled, char **out_reason, GError **error) {
  const QhPartitionOps *ops = qh_backend_partitions(b);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->compile(b->instance, qh_host_api_get(), view, partition, out_compiled);
  qh_plugin_set_current(prev);
  if (st == NULL)
    return 1;
  if (qh_status_is_valid(st) && st->code == QH_ERR_UNSUPPORTED) {
    *out_reason = g_strdup(st->message);
    qh_status_free(st);
    return 0;
  }
  partition_checked(b, partition->name, st, "compile", error);
  return -1;
}

gboolean qh_backend_partition_reshape(QhBackend *b, const char *partition_name, void *compiled,
                                      const QhTensorView *inputs, size_t n_inputs, QhTensorView *outputs,
                                      size_t n_outputs, size_t *out_workspace_bytes, GError **error) {
  const QhPartitionOps *ops = GROUP(b, partitions);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->reshape(compiled, qh_host_api_get(), inputs, n_inputs, outputs, n_outputs,
                              out_workspace_bytes);
  qh_plugin_set_current(prev);
  return partition_checked(b, partition_name, st, "reshape", error);
}

gboolean qh_backend_partition_run(QhBackend *b, const char *partition_name, void *compiled,
                                  const QhRunContext *ctx, const QhTensorView *inputs, size_t n_inputs,
                                  QhTensorView *outputs, size_t n_outputs, void *workspace,
                                  size_t workspace_bytes, GError **error) {
  const QhPartitionOps *ops = GROUP(b, partitions);
  const char *prev = qh_plugin_set_current(b->name);
  QhStatus *st = ops->run(compiled, qh_host_api_get(), ctx, inputs, n_inputs, outputs, n_outputs, workspace,
                          workspace_bytes);
  qh_plugin_set_current(prev);
  return partition_checked(b, partition_name, st, "run", error);
}

void qh_backend_partition_destroy(QhBackend *b, void *compiled) {
  if (compiled == NULL)
    return;
  const char *prev = qh_plugin_set_current(b->name);
  GROUP(b, partitions)->destroy(compiled);
  qh_plugin_set_current(prev);
}
