/* QhAnnotationSet: the quantization specs an annotator (the host's declarative one or
 * a plugin's imperative annotate) puts on the edges of a graph, and node flags. It sits
 * with the host table (hostapi/) because the table's annotation_* functions write it;
 * the quantization stages (quant/) read it.
 *
 * Specs are keyed by QhEdgeRef (node, slot, kind) and stored as deep copies: every
 * string and array of a QhQuantSpec is copied, so a plugin's memory is never kept.
 * qh_annotation_set_spec checks what can be checked at once (ids, dtype, qscheme,
 * ranges, scale, ch_axis, observer name); qh_annotation_set_validate checks what needs
 * the whole annotation (shared targets and derived sources annotated, no sharing
 * cycle, every sharing group rooted at a quantized spec).
 *
 * "Annotated" for a target or source edge: an output edge is annotated when it has a
 * spec; an input edge is annotated when it has a spec of its own, or when it has none
 * and the producer's output feeding it has one (the value on that edge is the
 * producer's output; PT2E shares them implicitly). Following SHARED specs (and such
 * unannotated input edges to the producer's output) must end at a QUANTIZE, FIXED or
 * DERIVED spec: that spec is the group's root, and the whole group uses its qparams.
 *
 * Messages: qh_annotation_set_spec and qh_annotation_set_node_flags name the field
 * ("spec.quant_min -200 is outside the range of uint8 [0, 255]") but not the node the
 * caller named, which the caller adds (host-graph.c as the status' node, host code
 * with qh_error_prefix); edges a spec refers to are named in full. Validation names
 * every node it concerns. Error codes: QH_ERROR_INVALID, or QH_ERROR_UNSUPPORTED for
 * dynamic quantization.
 *
 * Ownership: the set owns its copies; specs returned are borrowed until the spec is
 * replaced or the set is freed. The set refers to nodes by id and never to the graph,
 * which every call that needs it receives. Threading: not synchronised. */
#ifndef QH_HOSTAPI_ANNOTATION_H
#define QH_HOSTAPI_ANNOTATION_H

#include <glib.h>

#include "hostapi/sdk-private.h"

G_BEGIN_DECLS

typedef struct QhAnnotationSet QhAnnotationSet;

/* The 1.0 size of QhQuantSpec: the smallest struct_size a writer may give. */
#define QH_QUANT_SPEC_SIZE_1_0 \
  (offsetof(QhQuantSpec, derive_user_data) + sizeof(((QhQuantSpec *)0)->derive_user_data))

/* The full range of a quantized dtype (QH_DTYPE_UINT8, INT8, UINT16, INT16, UINT4, INT4, INT32)
 * and its name ("uint8"); FALSE, outputs untouched, for any other dtype. */
gboolean qh_quant_dtype_range(int32_t dtype, int64_t *out_min, int64_t *out_max,
                              const char **out_name);

/* TRUE for the per-channel qschemes (affine, symmetric, affine with float qparams). */
gboolean qh_quant_qscheme_is_per_channel(int32_t qscheme);

/* The observer a spec or qconfig without an observer name gets: PyTorch's
 * PerChannelMinMaxObserver for per-channel qschemes, else MinMaxObserver (static). */
const char *qh_quant_default_observer(int32_t qscheme);

QhAnnotationSet *qh_annotation_set_new(void);
void qh_annotation_set_free(QhAnnotationSet *set);

/* Make an observer name known besides PyTorch's six (MinMaxObserver,
 * HistogramObserver, PerChannelMinMaxObserver, MovingAverageMinMaxObserver,
 * MovingAveragePerChannelMinMaxObserver, PlaceholderObserver), e.g. one a plugin
 * registers. name copied. */
void qh_annotation_set_add_observer(QhAnnotationSet *set, const char *name);
gboolean qh_annotation_set_observer_is_known(const QhAnnotationSet *set, const char *name);

/* TRUE when edge names a live node of graph, a slot in range, a known kind and
 * reserved 0, and (for an input) a slot that is not omitted. On FALSE the message
 * reads "<what> ...", e.g. "spec.shared_with: node 7 was removed". */
gboolean qh_annotation_check_edge(const QhGraph *graph, const QhEdgeRef *edge, const char *what,
                                  GError **error);

/* Check spec against graph and store a deep copy on edge, replacing any spec there.
 * On error the set is unchanged. */
gboolean qh_annotation_set_spec(QhAnnotationSet *set, const QhGraph *graph,
                                const QhEdgeRef *edge, const QhQuantSpec *spec, GError **error);

/* The spec stored on edge (borrowed; struct_size is the host's), or NULL. */
const QhQuantSpec *qh_annotation_set_lookup(const QhAnnotationSet *set, const QhEdgeRef *edge);

/* Drop the spec of edge, if any. */
void qh_annotation_set_remove(QhAnnotationSet *set, const QhEdgeRef *edge);

/* Number of stored specs. */
guint qh_annotation_set_n_specs(const QhAnnotationSet *set);

/* Replace a node's QH_ANNOTATION_* flags; unknown bits and invalid nodes refused. */
gboolean qh_annotation_set_node_flags(QhAnnotationSet *set, const QhGraph *graph, uint32_t node,
                                      uint32_t flags, GError **error);
/* Flags of a node; 0 when it has none. */
uint32_t qh_annotation_node_flags(const QhAnnotationSet *set, uint32_t node);

/* The whole-annotation checks, after annotate returns. The first problem found is
 * reported; a sharing cycle names every edge and node in it. */
gboolean qh_annotation_set_validate(const QhAnnotationSet *set, const QhGraph *graph,
                                    GError **error);

/* The root of edge's sharing group: follows SHARED specs, and input edges without a
 * spec to the producer's output, until a spec of another kind. *out_root is that
 * edge and *out_spec its spec (borrowed). FALSE (outputs untouched) when edge has no
 * annotation reachable this way, or the chain is broken or cyclic (validate reports
 * why). */
gboolean qh_annotation_set_resolve(const QhAnnotationSet *set, const QhGraph *graph,
                                   const QhEdgeRef *edge, QhEdgeRef *out_root,
                                   const QhQuantSpec **out_spec);

/* Called for every stored spec; spec borrowed for the call. Return FALSE (with error
 * set) to stop. */
typedef gboolean (*QhAnnotationSpecFn)(gpointer user_data, const QhEdgeRef *edge,
                                       const QhQuantSpec *spec, GError **error);

/* Visit the specs of live nodes in graph order (qh_graph_topo_order), and within a
 * node its input specs by slot, then its output specs by slot. Specs on removed
 * nodes are skipped. Fails when the graph has no topological order or fn fails. */
gboolean qh_annotation_set_foreach(const QhAnnotationSet *set, const QhGraph *graph,
                                   QhAnnotationSpecFn fn, gpointer user_data, GError **error);

/* "input 0 of node 'conv' (Conv)" / "output 1 of node ..." for messages; node must be
 * a valid id. The caller g_free()s it. */
char *qh_annotation_describe_edge(const QhGraph *graph, const QhEdgeRef *edge);

/* Default role of an input slot of an op when a pattern gives none (backend-config.h):
 * slot 0 activation; Conv/ConvTranspose/Gemm/MatMul slots 1 and 2 weight and bias;
 * everything else activation. Shared by the unit matcher and the quantize report. */
int32_t qh_annotation_default_role(const char *op_type, int slot);

G_END_DECLS

#endif
