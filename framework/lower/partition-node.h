/* One compiled partition in a lowered plan: the node of the qhost.lowered domain that
 * replaces a claimed subgraph, with the checks kernel-node.c makes for a kernel
 * (outputs' dtype, layout and shape against the QDQ graph's, workspace cap, canaries
 * after every output and the workspace), for any number of inputs and outputs.
 *
 * Ownership: borrows the partition (its compiled object stays owned by the partition
 * set) and the backend. Threading: one inference at a time. */
#ifndef QH_LOWER_PARTITION_NODE_H
#define QH_LOWER_PARTITION_NODE_H

#include <glib.h>

#include "backend/backend.h"
#include "exec/plan.h"
#include "lower/partition.h"

G_BEGIN_DECLS

typedef struct {
  QhBackend *backend;
  const QhClaimedPartition *part; /* borrowed */
  int32_t io_layout;              /* QH_LAYOUT_NCHW or QH_LAYOUT_NHWC */
  size_t workspace;               /* from reshape */
  gboolean reshaped;
} QhPartitionNode;

QhPartitionNode *qh_partition_node_new(QhBackend *backend, const QhClaimedPartition *part);
void qh_partition_node_free(QhPartitionNode *k);

/* Reshape the compiled partition with its planned boundary tensors and check what it
 * reports as the plan will (qh_partition_node_infer), before the partition replaces its
 * nodes. FALSE with error ("plugin 'P': partition 'NAME': reshape: ...") when it cannot
 * run these shapes. */
gboolean qh_partition_node_trial(QhBackend *backend, const QhClaimedPartition *part, GError **error);

/* QhPlanKernel callbacks (data is the QhPartitionNode). */
gboolean qh_partition_node_infer(gpointer data, const QhNode *node, const QhTensor *const *inputs,
                                 int n_inputs, QhTensor *outputs, int n_outputs, GError **error);
gboolean qh_partition_node_run(gpointer data, QhExecContext *ctx, const QhNode *node,
                               const QhTensor *const *inputs, int n_inputs, QhTensor *const *outputs,
                               int n_outputs, GError **error);

G_END_DECLS

#endif
