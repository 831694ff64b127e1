/* Partitions (ABI 1.2): whole subgraphs of a QDQ graph handed to a plugin as one kernel.
 *
 * qh_partitions_new offers the plugin one unit per op node of the prepared QDQ graph
 * (QhNodeUnit: the op, its inputs before their DequantizeLinears, its outputs after
 * their QuantizeLinears, planned shapes and qparams), takes its claims and checks each:
 * every node an offered op, in no other claim, the claim connected through its own
 * edges (a Q -> DQ pair between two claimed ops counts as an edge), convex (no path
 * leaves it and re-enters it) and quantized at its boundary (computed values enter
 * through DequantizeLinear, values leave through QuantizeLinear). The first bad claim
 * fails the whole lowering with one error "plugin 'P': partition N ('NAME'): node 'X':
 * cause". Every good claim is compiled once; a compile declining with
 * QH_ERR_UNSUPPORTED, or a compiled partition whose reshape fails for (or misreports)
 * the planned shapes, gives the nodes back (the reason is kept for the report).
 *
 * Ownership: the set owns the partitions, their compiled objects (destroyed through
 * the backend by qh_partitions_free) and the offered units; it borrows the graph, the
 * backend, the shape plan and the view, which must outlive it. Threading: one thread.
 * Errors: GError as above, or the plugin's claim/compile error. */
#ifndef QH_LOWER_PARTITION_H
#define QH_LOWER_PARTITION_H

#include <glib.h>

#include "backend/backend.h"
#include "core/graph.h"
#include "exec/plan.h"
#include "hostapi/graph-view.h"

G_BEGIN_DECLS

typedef struct QhPartitionSet QhPartitionSet;

/* One accepted claim. The arrays are the ABI's (QhPartition points into them). */
typedef struct {
  char *name;
  int index;
  GArray *nodes;         /* int op node ids, topological */
  GArray *q_nodes;       /* int: the QuantizeLinear nodes on the claimed ops' outputs */
  GArray *inputs;        /* int integer values entering (before their DequantizeLinear) */
  GArray *outputs;       /* int integer values leaving (a claimed QuantizeLinear's output) */
  QhTensorView *input_tensors, *output_tensors; /* planned, in io_layout */
  QhPartition abi;
  void *compiled;        /* the plugin's, NULL when declined */
  char *decline;         /* compile's QH_ERR_UNSUPPORTED message, or NULL */
  int64_t macs;
} QhClaimedPartition;

/* Offer, claim, check, compile. Returns an empty set when the plugin has no
 * partitions group. */
QhPartitionSet *qh_partitions_new(QhGraph *graph, QhBackend *backend, const QhPlan *shape_plan,
                                  QhGraphView *view, GError **error);
void qh_partitions_free(QhPartitionSet *set);

guint qh_partitions_count(const QhPartitionSet *set);
QhClaimedPartition *qh_partitions_get(const QhPartitionSet *set, guint i);
/* The compiled partition holding op node id, or NULL. */
const QhClaimedPartition *qh_partitions_of_node(const QhPartitionSet *set, int node_id);

G_END_DECLS

#endif
