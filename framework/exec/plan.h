/* Execution plans: a graph bound to concrete input shapes, with every value's dtype
 * and shape inferred, constant subgraphs folded, a kernel chosen for every node,
 * and buffers released after their last use.
 *
 * Ownership: a plan borrows its graph, which must outlive it and stay unchanged.
 * Outputs returned by qh_plan_run belong to the caller. Threading: a plan runs one
 * inference at a time. Errors: GErrors naming the node ("node 'x' (Conv): ...");
 * an op without a host kernel is QH_ERROR_UNSUPPORTED naming node and op. */
#ifndef QH_EXEC_PLAN_H
#define QH_EXEC_PLAN_H

#include <glib.h>

#include "core/graph.h"
#include "exec/op.h"

G_BEGIN_DECLS

typedef struct QhPlan QhPlan;

/* Plan graph for inputs of the given shapes: input_shapes has one entry per graph
 * input (graph->inputs order); NULL uses the declared shapes, with symbolic
 * dimensions bound to 1. A given shape must agree with every numeric dimension the
 * model declares (QH_ERROR_MISMATCH naming the input otherwise). When
 * shapes_only is TRUE, kernels are not required (inspect uses this on models with
 * ops qhost cannot run); run then fails. */
QhPlan *qh_plan_new(const QhGraph *graph, const QhShape *input_shapes, gboolean shapes_only,
                    GError **error);

/* A kernel that is not one of the host's op definitions (a plugin's lowered
 * kernel): the same contract as QhOpDef's infer and run (op.h), with the kernel's
 * own data. Such nodes are never constant-folded. */
typedef struct {
  gboolean (*infer)(gpointer data, const QhNode *node, const QhTensor *const *inputs,
                    int n_inputs, QhTensor *outputs, int n_outputs, GError **error);
  gboolean (*run)(gpointer data, QhExecContext *ctx, const QhNode *node,
                  const QhTensor *const *inputs, int n_inputs, QhTensor *const *outputs,
                  int n_outputs, GError **error);
  int64_t macs;  /* multiply-accumulates of one run, for coverage figures */
  gpointer data; /* borrowed; must outlive the plan */
} QhPlanKernel;

/* Called once per live node while planning: return TRUE and fill *out to run node
 * with an external kernel, FALSE to use the host's op definition. */
typedef gboolean (*QhPlanResolveFn)(gpointer user_data, const QhNode *node, QhPlanKernel *out);

/* qh_plan_new with a resolver for external kernels (resolve NULL: none). */
QhPlan *qh_plan_new_with_kernels(const QhGraph *graph, const QhShape *input_shapes,
                                 QhPlanResolveFn resolve, gpointer resolve_data, GError **error);
void qh_plan_free(QhPlan *plan);

/* The inferred description of a value (dtype, shape, and data when the value is
 * constant), or NULL for an id the plan never reached. Borrowed from the plan. */
const QhTensor *qh_plan_value_info(const QhPlan *plan, int value_id);

/* Live nodes in topological order, constant-folded ones included (borrowed array of
 * int node ids; qh_plan_node_is_folded tells which ran at plan time). */
const GArray *qh_plan_order(const QhPlan *plan);

/* Whether node_id was folded into a constant at plan time. */
gboolean qh_plan_node_is_folded(const QhPlan *plan, int node_id);

/* Multiply-accumulates of one run of node_id (0 for ops that do none). */
int64_t qh_plan_node_macs(const QhPlan *plan, int node_id);

/* Run the plan. inputs has one tensor per graph input, with the planned dtype and
 * shape (checked). On success *outputs is a new array of one new tensor per graph
 * output, freed with qh_tensor_free each and g_free for the array. On x86, unless
 * ctx->bit_compatible or a value hook is set, the calling thread computes with
 * subnormal floats flushed to zero (MXCSR FTZ and DAZ, restored before returning). */
gboolean qh_plan_run(QhPlan *plan, QhExecContext *ctx, const QhTensor *const *inputs,
                     QhTensor ***outputs, GError **error);

/* TRUE when runs without a value hook and without the naive kernels keep this value
 * channels-last (the layout plan, exec/layout.c); FALSE for any other id. */
gboolean qh_plan_value_is_nhwc(const QhPlan *plan, int value_id);

/* Called during qh_plan_run with every graph input and every value a node computes,
 * right after it is computed and before its buffer can be reused (calibration
 * observes activations this way). value is borrowed for the call. Returning FALSE
 * (with error set) stops the run with that error. Constant-folded values are not
 * reported. */
typedef gboolean (*QhPlanValueFn)(gpointer user_data, int value_id, const QhTensor *value,
                                  GError **error);
/* Install (fn non-NULL) or remove the value hook. */
void qh_plan_set_value_hook(QhPlan *plan, QhPlanValueFn fn, gpointer user_data);

/* Accumulate the wall time of every node over the runs that follow (profiling off
 * by default; turning it on resets the totals). */
void qh_plan_set_profiling(QhPlan *plan, gboolean on);
/* Nanoseconds node_id has taken over the profiled runs (0 if it never ran). */
int64_t qh_plan_node_time_ns(const QhPlan *plan, int node_id);

/* How many Convs run with the element-wise nodes after them fused (exec/fusion.c), in
 * the runs without a value hook or the naive kernels; for tests and reports. */
int qh_plan_fused_convs(const QhPlan *plan);
/* How many host-op groups of the given kind (exec/fusion.c: GELU, LayerNorm) run as one
 * fused kernel in those runs; for tests and reports. */
int qh_plan_fused_host_groups(const QhPlan *plan, int kind);

/* Whether node_id runs on an external kernel (qh_plan_new_with_kernels). */
gboolean qh_plan_node_is_external(const QhPlan *plan, int node_id);

/* Run every node whose op has a naive twin with the twin instead (for tests that
 * compare the fast path with the obviously-correct one on whole models). */
void qh_plan_use_naive_kernels(QhPlan *plan, gboolean use_naive);

G_END_DECLS

#endif
