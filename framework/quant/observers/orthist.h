/* The histogram collector of ONNX Runtime's calibrate.py (HistogramCollector), shared by
 * PercentileObserver, EntropyObserver and MSEObserver: a histogram of values over a range
 * symmetric around zero that grows by whole bins on both sides ("collect_value"), or of
 * absolute values that grows to the right ("collect_absolute_value", the percentile
 * method with a symmetric qscheme). Internal to quant/observers/. */
#ifndef QH_QUANT_ORTHIST_H
#define QH_QUANT_ORTHIST_H

#include "quant/observers/host-observers.h"

typedef enum { ORT_PERCENTILE, ORT_ENTROPY, ORT_MSE } QhOrtMethod;

typedef struct {
  QhObserver base;
  QhOrtMethod method;
  gboolean absval;  /* histogram of |x| (percentile, symmetric qscheme) */
  int first_bins;   /* num_bins: bins of the first batch */
  double arg;       /* percentile, num_quantized_bins or num_steps */
  gboolean seen;
  float min, max;   /* of the raw data */
  double threshold; /* collect_value: the range is [-threshold, threshold] (ORT's 5th item) */
  double lo, hi;    /* first and last bin edge */
  int n;            /* bins now */
  double *hist;
} QhOrtHist;

QhOrtHist *qh_orthist_new(const QhObsSetup *s, int rank, const int64_t *dims,
                          const QhObserverClass *klass, QhOrtMethod method, gboolean absval,
                          int first_bins, double arg);
/* Bin edge i (0..n), as ORT's float32 hist_edges. */
float qh_orthist_edge(const QhOrtHist *h, int i);

gboolean qh_orthist_observe(QhObserver *obs, const QhTensor *x, GError **error);
gboolean qh_orthist_merge(QhObserver *obs, const QhObserver *other, GError **error);
gboolean qh_orthist_save(const QhObserver *obs, GByteArray *out, GError **error);
void qh_orthist_free(QhObserver *obs);
/* The qparams of §3 for the range [lo, hi] with obs's config. */
QhQuantParams *qh_orthist_params(QhObserver *obs, float lo, float hi);

#endif
