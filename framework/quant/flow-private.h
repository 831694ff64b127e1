/* The state of one quantization flow, shared by flow.c (the stages) and flow-report.c
 * (the probe run and the report). */
#ifndef QH_QUANT_FLOW_PRIVATE_H
#define QH_QUANT_FLOW_PRIVATE_H

#include "backend/backend.h"
#include "exec/plan.h"
#include "exec/threadpool.h"
#include "hostapi/sdk-private.h"
#include "hostapi/annotation.h"
#include "quant/calib-data.h"
#include "quant/flow.h"
#include "quant/points.h"
#include "quant/qconfig.h"
#include "quant/report.h"
#include "quant/stats.h"

typedef struct {
  const QhQuantizeOptions *opt;
  QhBackend *backend;             /* the gateway to the plugin: every call goes through it */
  const char *name;               /* the plugin's name (borrowed from its info) */
  const QhBackendConfig *bc;      /* or NULL */
  const QhAnnotateOps *annotate;  /* or NULL */
  QhGraph *graph;                 /* float, then QDQ after convert */
  QhQConfigMapping *mapping;
  QhAnnotationSet *set;
  QhQuantReport *report;
  QhPlan *plan;                   /* float plan for calibration */
  QhThreadPool *pool;
  QhCalibSource *calib;
  QhQuantPoints *points;
  QhStatsOrigin origin;
  int64_t samples;
  /* probe (flow-report.c) */
  QhTensor **probe_inputs;        /* one per graph input, or NULL when there is no probe */
  int n_probe_inputs;
  GHashTable *float_values;       /* value name -> QhTensor* (the float run's activations) */
  GPtrArray *float_outputs;       /* QhTensor*, graph output order */
  GHashTable *sqnr;               /* value name -> double* (dB) */
  GPtrArray *output_sqnr;         /* double*, graph output order */
  GHashTable *weight_sqnr;        /* value name -> double* (dB) */
  const char *stage; /* the plugin stage changing qparams: "refine" or "post_calibration" */
} QhFlow;

/* The calibration source the options name: arrays in memory or the calib_path file. */
QhCalibSource *qh_flow_open_calib(const QhFlow *f, GError **error);
/* Before a plugin's annotate: each live node's annotation state (its ANNOTATED mark
 * and whether each edge resolves to a quantizing spec), indexed by node id (NULL for
 * removed nodes). Owned by the caller (g_ptr_array_unref). */
GPtrArray *qh_flow_report_snapshot(const QhFlow *f);
/* After it: record a decision for every node the annotate left undecided, and
 * replace the declarative decision of every node whose state differs from before's
 * (NULL: every node counts as changed). */
void qh_flow_report_imperative(QhFlow *f, const GPtrArray *before);
/* Before convert: run the probe on the float graph, keeping the activations the points
 * observe and the outputs; compute each weight's SQNR once qparams exist (called after
 * refine). */
gboolean qh_flow_probe_float(QhFlow *f, GError **error);
void qh_flow_weight_sqnr(QhFlow *f);
/* The backend's fake-quantize of a constant into dq (t's element count); FALSE (with a
 * report note) when the plugin fails, and the caller then uses PyTorch's rounding. */
gboolean qh_flow_plugin_fake_quantize(QhFlow *f, const QhTensor *t,
                                      const QhQuantParams *q, float *dq);
/* After convert: run the probe on the QDQ graph and compute the SQNRs. */
gboolean qh_flow_probe_quantized(QhFlow *f, GError **error);
void qh_flow_probe_free(QhFlow *f);
/* Print the report (unless quiet, or into report_text_out) and write --report JSON (and
 * report_json_out). */
gboolean qh_flow_report(QhFlow *f, GError **error);

#endif
