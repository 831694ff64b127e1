/* Node units of a QDQ graph: the matching half of lowering.
 *
 * A node unit is what a plugin's QhLoweringPattern describes: a DequantizeLinear on
 * each quantized input, the pattern's op chain (every intermediate output read once,
 * by the next op, and not a graph output), and a QuantizeLinear on the chain's output.
 * Constant inputs may be float (a float bias) and are reported with NULL qparams;
 * computed inputs must arrive through a DequantizeLinear unless their role is
 * QH_ROLE_NOT_OBSERVED. A unit whose chain output is not followed by a QuantizeLinear
 * (a graph output, or read by non-Q consumers) is kept with a float output, marked.
 * A requantize pattern (ops QH_PATTERN_OP_REQUANTIZE) matches a QuantizeLinear whose
 * input a DequantizeLinear makes: nodes[0] is the QuantizeLinear, q_node -1, the one
 * input the DequantizeLinear's integer input, the output the QuantizeLinear's.
 *
 * Ownership: units and everything in them (qparams arrays, the ABI arrays) belong to
 * the unit; the pattern pointer and the graph are borrowed and must outlive it.
 * Threading: matching only reads the graph; units are not synchronised.
 * Errors: QH_ERROR_INVALID naming the node for malformed quantization parameters
 * (non-positive or non-finite scales, a zero point array not matching the scales,
 * an axis out of range); a pattern that does not fit is simply not a match. */
#ifndef QH_LOWER_QDQ_UNITS_H
#define QH_LOWER_QDQ_UNITS_H

#include <glib.h>

#include "core/graph.h"
#include "hostapi/sdk-private.h"

G_BEGIN_DECLS

typedef struct {
  int node;           /* the op node reading this input */
  int slot;           /* its input slot */
  int dq_node;        /* the DequantizeLinear node, or -1 for a float input */
  int value;          /* the integer value feeding the DQ, or the float value itself */
  int read_value;     /* the value the op reads (the DQ's output, or == value) */
  int32_t role;       /* QH_ROLE_* */
  gboolean quantized; /* qparams valid (dq_node >= 0) */
  QhQParams qparams;  /* scale/zero_point arrays owned by the unit */
} QhQdqUnitInput;

typedef struct {
  const QhLoweringPattern *pattern; /* borrowed */
  size_t pattern_index;             /* index into the patterns passed to the matcher */
  int n_nodes;
  int nodes[QH_LOWERING_PATTERN_MAX_OPS];    /* the op nodes, in pattern order */
  /* The QuantizeLinear/DequantizeLinear pair crossed before nodes[i]
   * (QH_PATTERN_THROUGH_SHARED_QDQ), or -1. */
  int crossed_q[QH_LOWERING_PATTERN_MAX_OPS];
  int crossed_dq[QH_LOWERING_PATTERN_MAX_OPS];
  GArray *inputs;                   /* QhQdqUnitInput: first op's slots, then extras */
  int chain_output;                 /* the float value the last op writes */
  int q_node;                       /* the QuantizeLinear, or -1 (float output) */
  int output;                       /* the Q's integer output, or chain_output */
  gboolean float_output;
  QhQParams output_qparams;         /* valid unless float_output */
  /* Storage for qh_qdq_unit_to_abi (built by the matcher). */
  uint32_t abi_nodes[QH_LOWERING_PATTERN_MAX_OPS];
  uint32_t *abi_inputs;
  int32_t *abi_roles;
  const QhQParams **abi_input_qparams;
  uint32_t abi_output;
  const QhQParams *abi_output_qparams;
  /* The unit's tensors for QhNodeUnit.input_tensors / output_tensors: the graph's
   * declared dtypes and shapes, which the lowering replaces with the plan's shapes and
   * the layouts the kernel gets (writable through a const unit: they describe, they
   * are not the match). */
  QhTensorView *abi_input_tensors;
  QhTensorView *abi_output_tensor; /* one */
} QhQdqUnit;

void qh_qdq_unit_free(QhQdqUnit *unit);

/* Match the patterns against g. Op nodes are visited in topological order; for each
 * one not yet in a unit, the patterns are tried in order and the first that matches
 * wins. Returns a new GPtrArray of QhQdqUnit* (freeing it frees the units), in the
 * topological order of each unit's first op; NULL with *error set on malformed
 * qparams or a graph that cannot be ordered. Patterns are trusted (validated at
 * plugin load); NULL entries are skipped. */
GPtrArray *qh_qdq_match_units(const QhGraph *g, const QhLoweringPattern *const *patterns,
                              size_t n, GError **error);

/* Asked about every matching unit before it is taken: return 1 to take it, 0 to
 * decline (the next pattern is tried at the same node), -1 with error set to stop
 * matching. unit is complete (qh_qdq_unit_to_abi works) but owned by the matcher. */
typedef int (*QhQdqAcceptFn)(gpointer user_data, const QhQdqUnit *unit, GError **error);

/* qh_qdq_match_units asking accept (NULL: take every match) about each unit. */
GPtrArray *qh_qdq_match_units_with(const QhGraph *g, const QhLoweringPattern *const *patterns,
                                   size_t n, QhQdqAcceptFn accept, gpointer user_data,
                                   GError **error);

/* Fill out (abi_version and struct_size included) for a plugin's accept/create. Every
 * pointer in out points into unit, valid while unit lives. */
void qh_qdq_unit_to_abi(const QhQdqUnit *unit, QhNodeUnit *out);

G_END_DECLS

#endif
