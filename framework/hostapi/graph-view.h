/* QhGraphView: the object behind the SDK's opaque graph handle. It wraps a host graph
 * with what the current callback may do to it (permissions), the annotation set an
 * annotate callback writes, and hooks through which the quantization stages answer
 * qconfig_for_node and qparams_get/set.
 *
 * The host creates one view per job (or per callback), narrows its permissions
 * between callbacks with qh_graph_view_set_permissions, and frees it after the last
 * callback. Every host-table function checks the magic first, so a NULL, foreign or
 * freed-and-reused pointer gives an error instead of a crash where the memory is
 * readable.
 *
 * Ownership: the view borrows the graph, the annotation set and the hooks' user
 * data; it owns only its consumer index. Threading: like the graph, not
 * synchronised; used on the thread running the callback. */
#ifndef QH_HOSTAPI_GRAPH_VIEW_H
#define QH_HOSTAPI_GRAPH_VIEW_H

#include <glib.h>

#include "hostapi/sdk-private.h"
#include "hostapi/annotation.h"

G_BEGIN_DECLS

#define QH_GRAPH_VIEW_MAGIC 0x51484756u /* "QHGV" */

/* Permission bits: which host-table groups the current callback may use. */
#define QH_VIEW_READ 0x1u           /* graph queries; always granted */
#define QH_VIEW_REWRITE 0x2u        /* graph_add_*, node_remove, node_set_*, value_replace_uses */
#define QH_VIEW_ANNOTATE 0x4u       /* annotation_set_*, qconfig_for_node */
#define QH_VIEW_QPARAMS_READ 0x8u   /* qparams_get (refine, lowering) */
#define QH_VIEW_QPARAMS_WRITE 0x10u /* qparams_set (refine, post_calibration) */
#define QH_VIEW_WEIGHTS_WRITE 0x20u /* constant_set (post_calibration) */
#define QH_VIEW_METADATA_WRITE 0x40u /* metadata_set (annotate, refine, the passes) */
#define QH_VIEW_ALL 0x7fu

/* Resolves the user's qconfig for `node` and `role` (QH_ROLE_ACTIVATION or
 * QH_ROLE_WEIGHT; the view has checked both). On TRUE, *out_source is QH_QCONFIG_*,
 * or 0 when the mapping has no entry (the plugin then gets QH_ERR_NOT_FOUND); unless
 * it is 0 or QH_QCONFIG_EXCLUDED, *out_spec (host-sized, zeroed by the view) is
 * filled, its strings and arrays owned by the hook's side and valid until the
 * current callback returns. On FALSE, error is set and becomes the plugin's status
 * (QH_ERROR_UNSUPPORTED -> QH_ERR_UNSUPPORTED, other codes -> INVALID_ARGUMENT or
 * INTERNAL as qh_status_from_gerror maps them). */
typedef gboolean (*QhGraphViewQConfigFn)(gpointer user_data, const QhGraph *graph, uint32_t node,
                                         int32_t role, QhQuantSpec *out_spec,
                                         int32_t *out_source, GError **error);

/* The qparams computed for a checked edge. On TRUE with *out_found, *out
 * (host-sized, zeroed by the view) has the scalars, count, and scale/zero_point
 * arrays owned by the hook's side, valid until the current callback returns; with
 * !*out_found the plugin gets QH_ERR_NOT_FOUND. FALSE: error set. */
typedef gboolean (*QhGraphViewQParamsGetFn)(gpointer user_data, const QhGraph *graph,
                                            const QhEdgeRef *edge, QhQParams *out,
                                            gboolean *out_found, GError **error);

/* Replace the qparams of a checked edge. qparams is host-sized and already checked
 * by the view (struct, dtype, qscheme, ranges, count and arrays, every scale > 0 and
 * finite, zero points in range, per-channel count equal to the channel dimension
 * when the shape is known); its arrays and reason are borrowed for the call (copy
 * them). The hook checks what needs the quantization state (the edge is quantized,
 * edges sharing the observer change together) and records the change with reason.
 * FALSE: error set (QH_ERROR_INVALID -> QH_ERR_INVALID_ARGUMENT; no edge quantized
 * there should use QH_ERROR_MISMATCH, also mapped to INVALID_ARGUMENT). */
typedef gboolean (*QhGraphViewQParamsSetFn)(gpointer user_data, QhGraph *graph,
                                            const QhEdgeRef *edge, const QhQParams *qparams,
                                            const char *reason, GError **error);

/* Replace the data of float constant `value` (checked by the view: a float
 * initializer, nbytes equal to its size, every element finite, a non-empty UTF-8
 * reason); data and reason are borrowed for the call. The hook stores the values and
 * records the change with the reason. FALSE: error set. */
typedef gboolean (*QhGraphViewConstantSetFn)(gpointer user_data, QhGraph *graph, uint32_t value,
                                             const float *data, size_t nbytes, const char *reason,
                                             GError **error);

/* One use of a value: input `slot` of `node`. */
typedef struct {
  uint32_t node;
  uint32_t slot;
} QhGraphViewUse;

struct QhGraphView {
  uint32_t magic;       /* QH_GRAPH_VIEW_MAGIC while alive */
  uint32_t permissions; /* QH_VIEW_* */
  QhGraph *graph;       /* borrowed */
  QhAnnotationSet *annotations; /* borrowed; NULL: no annotation stage */
  QhGraphViewQConfigFn qconfig_fn;
  gpointer qconfig_data;
  QhGraphViewQParamsGetFn qparams_get_fn;
  QhGraphViewQParamsSetFn qparams_set_fn;
  gpointer qparams_data;
  QhGraphViewConstantSetFn constant_set_fn;
  gpointer constant_data;
  /* The plugin whose metadata namespace metadata_set/get use ("qhost.<plugin>.");
   * borrowed; NULL: the plugin tagged on this thread. */
  const char *plugin;
  /* When set, the first qparams_set or constant_set the view refused, as a message
   * naming the node: the stage fails with it even when the plugin drops the status.
   * Owned by the view. */
  gboolean keep_refusals;
  char *refusal;
  /* Per value id: a GArray of QhGraphViewUse (live nodes, node id order), or NULL.
   * Built on the first consumer query, dropped by every rewrite. */
  GPtrArray *uses;
};

/* A view of graph (borrowed; must outlive the view). QH_VIEW_READ is always added. */
QhGraphView *qh_graph_view_new(QhGraph *graph, uint32_t permissions);
/* Free a view; NULL is a no-op. The magic is cleared first. */
void qh_graph_view_free(QhGraphView *view);
/* TRUE when view is non-NULL, carries the magic and a graph. */
gboolean qh_graph_view_is_valid(const QhGraphView *view);

/* Replace the permissions (QH_VIEW_READ stays set), e.g. before each callback. */
void qh_graph_view_set_permissions(QhGraphView *view, uint32_t permissions);
/* The annotation set annotation_* functions read and write (borrowed; NULL detaches). */
void qh_graph_view_set_annotations(QhGraphView *view, QhAnnotationSet *annotations);
void qh_graph_view_set_qconfig_hook(QhGraphView *view, QhGraphViewQConfigFn fn,
                                    gpointer user_data);
void qh_graph_view_set_qparams_hooks(QhGraphView *view, QhGraphViewQParamsGetFn get_fn,
                                     QhGraphViewQParamsSetFn set_fn, gpointer user_data);

void qh_graph_view_set_constant_hook(QhGraphView *view, QhGraphViewConstantSetFn fn,
                                     gpointer user_data);
/* Start recording refused changes (keep_refusals); the first refusal, or NULL. */
void qh_graph_view_keep_refusals(QhGraphView *view);
const char *qh_graph_view_refusal(const QhGraphView *view);

/* The live node `node` of a valid view, or NULL (invalid view, id out of range,
 * removed node). For status_new_for_node. */
const QhNode *qh_graph_view_node(const QhGraphView *view, uint32_t node);

/* Id of the live node named name (the first, if several), or -1. */
int qh_graph_view_find_node(const QhGraph *graph, const char *name);

/* Drop the consumer index; called by every rewrite (and by host code that changes
 * the graph behind the view's back). */
void qh_graph_view_invalidate(QhGraphView *view);

/* The uses of value id `value` (in range), building the index when needed; NULL
 * when the value has none. Borrowed until the next rewrite. */
const GArray *qh_graph_view_uses(QhGraphView *view, uint32_t value);

/* ---- Checked rewrites (host-graph.c adds the permission check and statuses) ----
 * Each validates everything first, changes nothing on error, and invalidates the
 * consumer index on success. Messages name the parameter, not the function. */
#define QH_GRAPH_VIEW_MAX_SLOTS 65536         /* inputs or outputs of one new node */
#define QH_GRAPH_VIEW_MAX_QPARAMS (1u << 24) /* entries of one QhQParams */

/* A new computed value; name NULL picks "qh_value_N"; a taken name is refused. */
QhValue *qh_graph_view_add_value(QhGraphView *view, const char *name, GError **error);
/* A new constant; data (nbytes = elements * element size) and dims copied. dtype must
 * be one the host's tensors hold (16-bit integers: QH_ERROR_UNSUPPORTED). */
QhValue *qh_graph_view_add_constant(QhGraphView *view, const char *name, int32_t dtype,
                                    int32_t rank, const int64_t *dims, const void *data,
                                    size_t nbytes, GError **error);
/* A new node; QH_INVALID_ID inputs are omitted; outputs must be existing values
 * without a producer (not constants, not graph inputs), each listed once; name NULL
 * picks "OP_qhN"; a name a live node has is refused; domain NULL reads as "". */
QhNode *qh_graph_view_add_node(QhGraphView *view, const char *op_type, const char *domain,
                               const char *name, const uint32_t *inputs, size_t n_inputs,
                               const uint32_t *outputs, size_t n_outputs, GError **error);
/* Remove a live node (its outputs lose their producer). */
void qh_graph_view_remove_node(QhGraphView *view, const QhNode *node);
/* Point input slot of a live node at value (QH_INVALID_ID: omitted). Refuses a slot
 * out of range, an unknown value and one of the node's own outputs. */
gboolean qh_graph_view_set_input(QhGraphView *view, QhNode *node, uint32_t slot, uint32_t value,
                                 GError **error);
/* Every live consumer of old_value, and every graph output entry, uses new_value;
 * is_output moves along. Consumers include new_value's own producer, as in
 * torch.fx's replace_all_uses_with: the caller points it back with set_input. */
void qh_graph_view_replace_uses(QhGraphView *view, QhValue *old_value, QhValue *new_value);

/* Check qparams a plugin gives for a checked edge (struct header, flags 0, dtype,
 * ordered range inside the dtype, qscheme, count and arrays, per-tensor count 1 and
 * ch_axis -1, per-channel ch_axis < rank and count = that dimension when known,
 * every scale > 0 and finite, zero points inside the range) and write a host-sized
 * copy to *out (arrays still borrowed). Messages name the field ("qparams.scale[2]"). */
gboolean qh_graph_view_check_qparams(const QhGraph *graph, const QhEdgeRef *edge,
                                     const QhQParams *qparams, QhQParams *out, GError **error);

G_END_DECLS

#endif
