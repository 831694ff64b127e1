/* One plugin kernel in a lowered plan: its lifecycle (created -> reshaped -> run,
 * destroyed once) enforced by the host, and the checks around each call (output
 * dtype, layout and shape against the QDQ graph's, workspace cap, canaries in the
 * slack after every output and the workspace).
 *
 * Ownership: a QhKernelNode owns the plugin's kernel object (destroyed by
 * qh_kernel_node_free) and borrows the unit, the backend (the gateway every call
 * goes through) and the names, which the lowering keeps alive. Threading: one inference at a time. */
#ifndef QH_LOWER_KERNEL_NODE_H
#define QH_LOWER_KERNEL_NODE_H

#include <glib.h>

#include "backend/backend.h"
#include "exec/plan.h"
#include "lower/qdq-units.h"

G_BEGIN_DECLS

/* The largest workspace a kernel may ask for. */
#define QH_KERNEL_MAX_WORKSPACE ((size_t)1 << 30)

typedef enum { QH_KERNEL_CREATED = 1, QH_KERNEL_RESHAPED = 2 } QhKernelState;

typedef struct {
  QhBackend *backend;       /* borrowed: the plugin's gateway */
  const char *node_name;    /* borrowed: the unit's first op node */
  const QhKernelOps *ops;   /* borrowed from the plugin */
  const QhQdqUnit *unit;    /* borrowed */
  void *kernel;             /* the plugin's object; owned */
  QhKernelState state;
  int32_t *input_layouts;   /* per unit input: the layout of the tensor the host passes */
  int32_t output_layout;    /* the layout the host expects back */
  QhDType output_dtype;     /* from the QDQ graph */
  QhShape output_shape;     /* in output_layout's dimension order */
  size_t workspace;         /* from reshape */
  int64_t macs;
} QhKernelNode;

/* Create the plugin's kernel for unit (graph view borrowed for the call). On error
 * nothing is kept and the message names plugin, kernel and node. */
QhKernelNode *qh_kernel_node_create(QhBackend *backend, const char *node_name,
                                    const QhKernelOps *ops, const QhQdqUnit *unit,
                                    const QhGraphView *view, GError **error);
void qh_kernel_node_free(QhKernelNode *k);

/* QhPlanKernel callbacks (data is the QhKernelNode). */
gboolean qh_kernel_node_infer(gpointer data, const QhNode *node, const QhTensor *const *inputs,
                              int n_inputs, QhTensor *outputs, int n_outputs, GError **error);
gboolean qh_kernel_node_run(gpointer data, QhExecContext *ctx, const QhNode *node,
                            const QhTensor *const *inputs, int n_inputs,
                            QhTensor *const *outputs, int n_outputs, GError **error);

G_END_DECLS

#endif
