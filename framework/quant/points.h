/* Quantization points: the sharing groups of an annotation, each with what decides its
 * qparams (an observer, fixed values, or a derivation from other points) and the
 * values it observes. Built once from a validated annotation set ("prepare"); fed
 * tensors during calibration; asked for qparams at conversion.
 *
 * Ownership: the points own their observers and qparams; they borrow the graph and
 * the annotation set, which must outlive them. Threading: one thread. */
#ifndef QH_QUANT_POINTS_H
#define QH_QUANT_POINTS_H

#include <glib.h>

#include "core/graph.h"
#include "exec/plan.h"
#include "backend/backend.h"
#include "hostapi/sdk-private.h"
#include "hostapi/annotation.h"
#include "quant/observer.h"

G_BEGIN_DECLS

/* Makes the observer for a QUANTIZE spec (host or plugin observer). */
typedef QhObserver *(*QhObserverFactory)(gpointer user_data, const QhQuantSpec *spec, int rank,
                                         const int64_t *dims, GError **error);

typedef struct {
  int index;
  QhEdgeRef root;             /* the group's root edge */
  const QhQuantSpec *spec;    /* the root's spec (borrowed from the set): QUANTIZE, FIXED or DERIVED */
  GArray *edges;              /* QhEdgeRef: every edge of the group, root included */
  GArray *values;             /* int value ids on those edges, distinct, in first-seen order */
  gboolean is_constant;       /* every value is an initializer (a weight) */
  QhObserver *observer;       /* QUANTIZE: owned */
  QhQuantParams *qparams;     /* after qh_quant_points_compute */
  char *name;                 /* the first value's name, for reports */
} QhQuantPoint;

typedef struct {
  QhGraph *graph;
  const QhAnnotationSet *set;
  GPtrArray *points;          /* QhQuantPoint*, in graph order of their first edge */
  GHashTable *by_edge;        /* packed QhEdgeRef -> QhQuantPoint* */
  GHashTable *by_value;       /* value id -> GPtrArray of QhQuantPoint* observing it (not owned) */
  QhBackend *backend;         /* borrowed: the gateway derive callbacks run through; NULL: untagged */
} QhQuantPoints;

/* Build the points of a validated annotation. Observers are made by factory with the
 * shape the plan inferred for the group's first value; constant values (weights, and
 * values the plan folded) are observed here, once. plan is borrowed for the call. */
QhQuantPoints *qh_quant_points_new(QhGraph *graph, const QhAnnotationSet *set, const QhPlan *plan,
                                   QhObserverFactory factory, gpointer factory_data, GError **error);
void qh_quant_points_free(QhQuantPoints *points);

/* The point an edge belongs to (following implicit sharing), or NULL. */
QhQuantPoint *qh_quant_points_for_edge(const QhQuantPoints *points, const QhEdgeRef *edge);

/* Feed one computed value to every observer watching it (the plan's value hook). */
gboolean qh_quant_points_observe(gpointer points, int value_id, const QhTensor *value, GError **error);

/* Compute every point's qparams: observers first, fixed specs, then derived ones in
 * dependency order (their derive callback gets the sources' qparams). */
gboolean qh_quant_points_compute(QhQuantPoints *points, GError **error);
/* Compute every derived spec's qparams again from its sources (after a plugin pass
 * changed qparams, so an int32 bias follows its input's new scale). */
gboolean qh_quant_points_rederive(QhQuantPoints *points, GError **error);

static inline guint64 qh_edge_key(const QhEdgeRef *e) {
  return ((guint64)e->node << 32) | ((guint64)e->slot << 1) | (guint64)(e->kind & 1);
}

G_END_DECLS

#endif
