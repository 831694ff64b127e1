/* Lowering: a QDQ graph run with a plugin's int8 kernels.
 *
 * qh_lowering_new matches the plugin's QhLoweringPatterns against the graph (node
 * units: DequantizeLinear inputs -> op chain -> QuantizeLinear), offers each unit to
 * the pattern's accept, then checks the claim by creating the kernel (weights packed
 * once) and reshaping it with the unit's static shapes; on a decline or a refusal it
 * tries the next pattern at the same node. The decisions (which kernel, or why the
 * host keeps a node) are then final (`qhost inspect --backend` shows the ones `run`
 * makes). qh_lowering_build rewrites the graph so that each claimed unit is one
 * node reading the integer tensors before its DequantizeLinears and writing the
 * integer tensor after its QuantizeLinear (so consecutive claimed units pass int8
 * directly), inserts layout transposes only where a channels-last kernel meets the
 * host, and plans it: reshape runs at plan time (output dtype, layout and shape
 * checked against the QDQ graph's), run in every inference, destroy at free. Every
 * other node runs on the host's reference path with ONNX's QDQ semantics.
 *
 * Ownership: the lowering borrows the backend (the gateway to the plugin) and the
 * graph, which it rewrites in place (qh_lowering_new normalises it with
 * qh_lower_prepare: no-op Casts dropped, constant subgraphs frozen; qh_lowering_build
 * replaces the units); both must outlive it.
 * Threading: one thread. Errors: GError naming plugin, kernel and node, e.g.
 * "plugin 'x': kernel 'add_qu8' (node 'add1'): run: cause". */
#ifndef QH_LOWER_LOWERING_H
#define QH_LOWER_LOWERING_H

#include <glib.h>

#include "core/graph.h"
#include "exec/plan.h"
#include "backend/backend.h"

G_BEGIN_DECLS

typedef struct QhLowering QhLowering;

/* One row of the decision table: a claimed unit, or one op node the host runs. */
typedef struct {
  char *name;         /* the first op node's name */
  char *ops;          /* op types joined by '+' ("Conv+Relu") */
  GArray *nodes;      /* int ids of the unit's op nodes in the original graph */
  char *pattern;      /* the accepted pattern id; NULL on the host */
  char *kernel;       /* the plugin's kernel id; NULL on the host */
  char *reason;       /* host rows: why ("conv_relu: dilated convolution is not supported; ..."
                       * or "no lowering pattern matches"); NULL for claimed units */
  int lowered_node;   /* after qh_lowering_build: the node running it, or -1 */
  int64_t macs;       /* multiply-accumulates of one run (original graph's ops) */
  char *partition;    /* ABI 1.2: the partition's name when the row is a compiled
                       * partition (kernel is the partitions group's id, pattern NULL) */
} QhLoweringRow;

typedef enum {
  QH_LOWERING_DEFAULT = 0,
  /* No plan-time trial: kernels are first created by qh_lowering_build, and a kernel
   * that refuses its unit in create or reshape fails the build. For plugin-check,
   * where such a refusal is the plugin's bug to report. */
  QH_LOWERING_STRICT = 1 << 0,
} QhLoweringFlags;

/* Match and ask the plugin. Unless flags has QH_LOWERING_STRICT, every unit the
 * plugin accepts is checked at once the way the plan will use it: its kernel is
 * created and reshaped with the unit's static shapes (input_shapes as qh_plan_new,
 * NULL: declared shapes) and layouts; a kernel that fails either call, or reports
 * an output other than the graph's, leaves the unit to the host (the next pattern is
 * tried at the node) with "kernel 'ID' cannot run this unit: CAUSE" as its reason,
 * and the created kernels are kept for qh_lowering_build. Errors: the plugin has no
 * lowering group; accept failing with anything but QH_ERR_UNSUPPORTED; malformed Q/DQ
 * parameters. */
QhLowering *qh_lowering_new(QhGraph *graph, QhBackend *backend, const QhShape *input_shapes,
                            QhLoweringFlags flags, GError **error);
void qh_lowering_free(QhLowering *lowering);

/* The decision table (QhLoweringRow*), in the original graph's topological order.
 * Constant-folded nodes and Q/DQ nodes are not rows. Borrowed. */
const GPtrArray *qh_lowering_rows(const QhLowering *lowering);

/* Create the kernels, rewrite the graph and plan it. After success the plan (owned
 * by the lowering) runs the lowered graph. Fails at most once; call it once. */
gboolean qh_lowering_build(QhLowering *lowering, GError **error);
QhPlan *qh_lowering_plan(const QhLowering *lowering);

/* What ran a node of the lowered graph: the kernel id for a plugin kernel node,
 * NULL for host nodes. */
const char *qh_lowering_node_kernel(const QhLowering *lowering, int node_id);

/* The node's row (claimed unit or host op) for a node of the lowered graph, or NULL
 * for nodes that are no row (Q/DQ, layout transposes). */
const QhLoweringRow *qh_lowering_node_row(const QhLowering *lowering, int node_id);

/* The domain of the nodes that run plugin kernels in a lowered graph. */
#define QH_LOWERED_DOMAIN "qhost.lowered"

G_END_DECLS

#endif
