/* The declarative annotator: applies a plugin's BackendConfig (patterns, observation
 * types, dtype configs with constraints, fixed-qparams ops, fusions, roots and input
 * roles) together with the resolved qconfig mapping to a float graph, deciding what to
 * observe exactly as PyTorch 1.13's prepare_fx does, and writes PT2E-style specs into
 * an annotation set. Every node gets a decision in the report: quantized with its
 * pattern, or float with the reason (no pattern; the qconfig violates a named
 * constraint of every dtype config; excluded by the user).
 *
 * Threading: one thread. Errors: GError for broken inputs only; a node that cannot be
 * quantized is a report entry, not an error. */
#ifndef QH_QUANT_BACKEND_ANNOTATE_H
#define QH_QUANT_BACKEND_ANNOTATE_H

#include <glib.h>

#include "core/graph.h"
#include "hostapi/sdk-private.h"
#include "hostapi/annotation.h"
#include "quant/qconfig.h"
#include "quant/report.h"

G_BEGIN_DECLS

/* Before annotation: the fusions the backend declares that change the graph (BatchNorm
 * folded into the preceding Conv / ConvTranspose / Gemm with PyTorch's arithmetic,
 * docs/numerics.md §9), applied where a QH_FUSER_FOLD_BATCHNORM pattern matches. Node
 * names of the surviving ops are kept. */
gboolean qh_backend_fold_batchnorm(const QhBackendConfig *bc, QhGraph *graph, GError **error);

/* Annotate graph into set following bc and mapping; record every node's decision in
 * report. Values on integer shape subgraphs are never observed. */
gboolean qh_backend_annotate(const QhBackendConfig *bc, QhGraph *graph,
                             const QhQConfigMapping *mapping, QhAnnotationSet *set,
                             QhQuantReport *report, GError **error);

G_END_DECLS

#endif
