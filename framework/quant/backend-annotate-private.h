/* What the declarative annotator's files share: the graph facts they compute once
 * (consumers of each value, element types), pattern matching (pattern-match.c), and
 * the annotator's core with the qconfig lookup as a callback, so tests can feed
 * hand-made qconfigs without a mapping. */
#ifndef QH_QUANT_BACKEND_ANNOTATE_PRIVATE_H
#define QH_QUANT_BACKEND_ANNOTATE_PRIVATE_H

#include "quant/backend-annotate.h"

G_BEGIN_DECLS

/* Consumers of every value (live nodes only), counting a graph output as a use. */
typedef struct {
  const QhGraph *graph;
  GPtrArray *users;    /* per value id: GArray of int node ids (NULL: none) */
  gboolean *is_output; /* per value id */
  int32_t *dtype;      /* per value id: known or propagated element type (QH_DTYPE_*) */
} QhGraphFacts;

void qh_graph_facts_init(QhGraphFacts *facts, const QhGraph *graph);
void qh_graph_facts_clear(QhGraphFacts *facts);
/* Number of uses of a value (consumers, plus one when it is a graph output). */
int qh_graph_facts_n_uses(const QhGraphFacts *facts, int value_id);
/* TRUE when the value is a constant (an initializer or a Constant node's output). */
gboolean qh_graph_facts_is_const(const QhGraphFacts *facts, int value_id);
/* The data of a constant value: its initializer, or the tensor in its Constant node's
 * `value` attribute; NULL for any other value (Constant's scalar forms included).
 * Borrowed from the graph. */
const QhTensor *qh_graph_facts_const_tensor(const QhGraphFacts *facts, int value_id);
/* TRUE when the value holds float32 data (the only values that get specs). */
gboolean qh_graph_facts_is_float(const QhGraphFacts *facts, int value_id);

/* One match of a pattern: nodes[i] is the node of pattern op i, and chain_slot[i]
 * (i > 0) the input slot through which nodes[i] reads nodes[i - 1]'s output. */
typedef struct {
  const QhBackendPatternConfig *pattern;
  int n;
  int nodes[QH_PATTERN_MAX_OPS];
  int chain_slot[QH_PATTERN_MAX_OPS];
} QhPatternMatch;

/* Match bc's patterns over the live nodes as FX does: nodes visited from the last in
 * graph order to the first, longer patterns before shorter ones (table order among
 * equals), each node in at most one match; a node is the last op of a match only if
 * it is not taken yet. Intermediate outputs must have exactly one use; the other
 * inputs of a non-root op must be constants unless extra_inputs_mask allows them.
 * order: live nodes in graph order; excluded (per node id, may be NULL): nodes no
 * pattern may take (float regions). Returns a GArray of QhPatternMatch ordered by
 * the graph position of each match's last node; *out_node_match (per node id, -1 when
 * unmatched) indexes it. */
GArray *qh_pattern_match_all(const QhBackendConfig *bc, const QhGraphFacts *facts,
                             const GArray *order, const gboolean *excluded, int **out_node_match);

/* What stays float before any pattern is tried (float-regions.c): LayerNorm and GELU
 * decompositions, LayerNormalization / Gelu nodes, attention masks and the arithmetic
 * that applies them. reason[node id]: why the node stays float, or NULL; mask[value
 * id]: a float mask (from boolean/integer masks and constants, or a constant holding
 * -inf); tainted[value id]: data with a mask applied (may hold -inf). A Softmax reading
 * a tainted value is not in a region: its output is quantized, its input not observed. */
typedef struct {
  char **reason;
  int n_nodes;
  gboolean *mask;
  gboolean *tainted;
} QhFloatRegions;

/* Fill r (zeroed by the caller) for facts' graph; order: live nodes in graph order.
 * Release with qh_float_regions_clear. */
void qh_float_regions_find(QhFloatRegions *r, const QhGraphFacts *facts, const GArray *order);
void qh_float_regions_clear(QhFloatRegions *r);

/* "Conv -> Relu" for reports; g_free() it. */
char *qh_pattern_text(const QhBackendPatternConfig *p);

/* Which op a pattern op i of the node is (exact op type; "domain:Op" for others). */
gboolean qh_pattern_op_matches(const char *pattern_op, const QhNode *node);

/* The role of input slot `slot` of a pattern's root node. */
int32_t qh_pattern_input_role(const QhBackendPatternConfig *p, const QhNode *root, int slot);

/* The qconfig of a node, or NULL when none applies. */
typedef const QhQConfig *(*QhQConfigLookupFn)(gpointer user_data, const QhGraph *graph,
                                              const QhNode *node);

/* qh_backend_annotate with the qconfig lookup given as a callback. */
gboolean qh_backend_annotate_with(const QhBackendConfig *bc, QhGraph *graph,
                                  QhQConfigLookupFn lookup, gpointer user_data,
                                  QhAnnotationSet *set, QhQuantReport *report, GError **error);

/* Why a qconfig fails a dtype config, or NULL when it satisfies it (PyTorch 1.13's
 * _is_pattern_dtype_config_and_qconfig_supported_by_backend, with has_weight telling
 * whether the matched root has a weight tensor). g_free() the result. */
/* Whether dc asks for an int32 bias derived from input x weight scales (ABI 1.2). */
gboolean qh_dtype_config_derives_bias(const QhDTypeConfig *dc);
char *qh_dtype_config_violation(const QhDTypeConfig *dc, const QhQConfig *qconfig,
                                gboolean has_weight);

G_END_DECLS

#endif
