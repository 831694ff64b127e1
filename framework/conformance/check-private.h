/* What the plugin-check files share: the state of one run, the graph-based checks
 * (check-graphs.c), the lowering checks (check-lowering.c), the partition checks
 * (check-partitions.c) and the builder of their small QDQ graphs (check-builder.c),
 * whose built-in families live in check-graphs-u8.c and check-graphs-pow2.c. */
#ifndef QH_CONFORMANCE_CHECK_PRIVATE_H
#define QH_CONFORMANCE_CHECK_PRIVATE_H

#include "conformance/check.h"
#include "backend/backend.h"
#include "hostapi/sdk-private.h"

typedef struct {
  QhCheckReport *report;
  QhBackend *backend;       /* the gateway: every call into the plugin goes through it */
  const QhPluginDesc *desc; /* its descriptor, for the groups' data */
  const QhPluginSearch *search; /* where quantize finds the plugin again (per-pattern graphs) */
  char *const *backend_opts;    /* the user's options, for that instance too */
} QhCheckRun;

void qh_check_add(QhCheckRun *run, QhCheckVerdict verdict, const char *name, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
/* The status's message (with its node), freeing the status. */
char *qh_check_status_text(QhStatus *status);

void qh_check_transform(QhCheckRun *run);
void qh_check_annotate(QhCheckRun *run);
void qh_check_refine(QhCheckRun *run);
void qh_check_deploy(QhCheckRun *run);
void qh_check_lowering(QhCheckRun *run);
/* ABI 1.2 partitions (check-partitions.c); the backend's partitions group must exist. */
void qh_check_partitions(QhCheckRun *run);

/* Load the QDQ file qdq twice, lower one copy with what the backend offers now (see
 * qh_backend_restrict_lowering) and compare its runs with the host's reference run of
 * the other, adding one line "lowering on NAME" when something was claimed or the
 * lowering failed. *partition_runs counts the completed runs of compiled partitions,
 * *declines (g_free) joins the host rows' reasons ("" when none). TRUE when a unit or
 * partition was claimed. */
gboolean qh_check_lowered_file(QhCheckRun *run, const char *name, const char *qdq, int *partition_runs,
                               char **declines);

/* ---- building the lowering checks' QDQ graphs ---- */

typedef struct {
  QhGraph *g;
  GRand *rng;      /* seeded: every build of a graph gives the same constants */
  float out_scale; /* the output's quantization step */
  int out_signed;  /* int8 output (else uint8) */
  int out_zero_point;
  int pre_quant;   /* the value the output's QuantizeLinear reads */
  /* a dynamic graph's float output (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul):
   * compared in float32 rounding steps at the output's range, not quantization steps */
  int float_output;
} QhCheckBuilder;

typedef struct {
  const char *name;
  void (*build)(QhCheckBuilder *b);
  /* every fp32 op of the reference is exact on this graph's grid, so the plugin's own
   * fake_quantize of the value before the output's QuantizeLinear is what its kernel
   * must give bit for bit */
  gboolean exact;
} QhCheckGraph;

/* A constant (initializer) value holding a copy of data; returns its id. */
int qh_check_builder_constant(QhCheckBuilder *b, const char *name, QhDType dt, int rank,
                              const int64_t *dims, const void *data);
/* A value without shape (filled in later); returns its id. */
int qh_check_builder_value(QhCheckBuilder *b, const char *name);
QhNode *qh_check_builder_node(QhCheckBuilder *b, const char *name, const char *op, int n_in,
                              const int *in, int out);
/* QuantizeLinear then DequantizeLinear of v (names "<base>_scale", ...), to int8 when
 * is_signed else uint8, per tensor; returns the DequantizeLinear's output. */
int qh_check_builder_qdq(QhCheckBuilder *b, const char *base, int v, float scale, int is_signed,
                         int zero_point);
/* A DequantizeLinear of seeded random int8 weights [dims], symmetric (zero point 0),
 * per channel on axis per_axis when >= 0 (the scales written to scales[channels], else
 * scales[0]); returns its output. */
int qh_check_builder_weight(QhCheckBuilder *b, const char *base, int rank, const int64_t *dims, int per_axis,
                            float *scales);
/* A DequantizeLinear of a seeded int32 bias [n] at scale x_scale * w_scales[c] (per
 * channel, or w_scales[0]), zero point 0, as quantizers write it; returns its output. */
int qh_check_builder_bias(QhCheckBuilder *b, const char *base, int64_t n, float x_scale, const float *w_scales,
                          gboolean per_channel);
/* A graph input of float dims; returns its id. */
int qh_check_builder_input(QhCheckBuilder *b, const char *name, int rank, const int64_t *dims);
/* Marks out, the DequantizeLinear of pre's quantization (int8 when is_signed) with
 * scale and zero_point, as the graph's output. */
void qh_check_builder_output(QhCheckBuilder *b, int pre, int out, float scale, int is_signed,
                             int zero_point);

/* Pattern p's float graph (variant `variant` of its extra operands) quantized by
 * qh_quantize with the plugin, as `qhost quantize` does, into a QDQ file in dir: the
 * file's path (g_free; the caller removes the file), with *label naming the graph. NULL
 * when the variant is variant 0's graph again (*why NULL: the pattern has no operand it
 * changes) or could not be made (*why says why, g_free; *label NULL when the pattern's
 * ops have no generated graph at all). Variants are 0 .. qh_check_pattern_n_variants()-1. */
int qh_check_pattern_n_variants(void);
/* Saves the float graph g to model, quantizes it with the plugin under check (static, on
 * seeded calibration samples, or dynamic with qh_quantize_dynamic) into qdq and removes
 * model. FALSE with *why (g_free) when saving or quantizing fails. */
gboolean qh_check_quantize_graph(QhCheckRun *run, const QhGraph *g, const char *model, const char *qdq,
                                 gboolean dynamic, char **why);
char *qh_check_pattern_quantize(QhCheckRun *run, const QhLoweringPattern *p, int variant, const char *dir,
                                char **label, char **why);

/* Whether the host's reference computes QDQ graph g exactly in float32 (check-exact.c:
 * power-of-two scales, ops that only add, multiply or move values on those grids
 * within float32's significand), so a kernel can be held bit for bit to the plugin's
 * own fake_quantize of the value its output QuantizeLinear reads. */
gboolean qh_check_graph_is_exact(const QhGraph *g);

/* The uint8 family (check-graphs-u8.c), which every plugin meets: uint8 activations with
 * zero points, int8 per-channel weights, int32 bias, scales that are not powers of two. */
const QhCheckGraph *qh_check_u8_graphs(size_t *n);

/* The int8 power-of-two family (check-graphs-pow2.c): symmetric int8, zero point 0,
 * scale 2^-pos for activations, weights and bias, with DPU-legal positions. */
const QhCheckGraph *qh_check_pow2_graphs(size_t *n);

#endif
