/* The float layout plan: which 4-D activations the plan keeps channels-last (NHWC)
 * between oneDNN convolutions. Pure function of the planned graph; no threads. */
#ifndef QH_EXEC_LAYOUT_H
#define QH_EXEC_LAYOUT_H

#include "core/graph.h"
#include "core/tensor.h"
#include "exec/op.h"

G_BEGIN_DECLS

/* A new array of n_values flags (caller g_free()s): TRUE for a value that can live
 * channels-last: a float 4-D intermediate (not a graph input, output or constant, and
 * with more than one spatial position) made and used only by host Convs on the oneDNN
 * engine (input 0 or output), by element-wise ops whose activation operands all have its
 * shape and all get the flag too (operands with one spatial position broadcast), and by
 * MaxPool, AveragePool, GlobalAveragePool, Pad, BatchNormalization and channel Concat,
 * whose 4-D operands then all share it. infos/is_known: the plan's value descriptions;
 * defs and is_external: per node id, the host kernel (NULL when none) and whether a
 * plugin runs it; run_order: node ids. All FALSE when oneDNN is disabled (QHOST_FP32_ENGINE=openblas). */
gboolean *qh_layout_plan_nhwc(const QhGraph *graph, const GArray *run_order, const QhTensor *infos,
                              const gboolean *is_known, const QhOpDef *const *defs,
                              const gboolean *is_external, int n_values);

G_END_DECLS

#endif
