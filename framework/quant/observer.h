/* Observers: the statistics a calibration run collects for one quantization point and
 * the qparams computed from them, bit-exact with PyTorch 1.13 where PyTorch is
 * deterministic (docs/numerics.md §1-§3, §6).
 *
 * Host observers: MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver,
 * MovingAveragePerChannelMinMaxObserver, HistogramObserver, FixedQParamsObserver,
 * PlaceholderObserver, and beyond PyTorch PercentileObserver, EntropyObserver (ONNX
 * Runtime's definitions) and MSEObserver. Plugin observers (QhObserverOps) are wrapped
 * into the same QhObserver interface by quant/plugin-observer.c.
 *
 * Ownership: configs and observers belong to the caller (_free). Threading: an
 * observer is used from one thread at a time. Errors: GError (QH_ERROR); messages
 * name the observer and the argument ("HistogramObserver: bins must be >= 1"). */
#ifndef QH_QUANT_OBSERVER_H
#define QH_QUANT_OBSERVER_H

#include <glib.h>
#include <stdint.h>

#include "core/tensor.h"

G_BEGIN_DECLS

/* An observer argument as written by the user or a plugin ("bins" = "2048"). */
typedef struct {
  char *key;
  char *value;
} QhObserverArg;

/* What to observe and how: PyTorch's observer constructor arguments. */
typedef struct {
  char *name;          /* "MinMaxObserver", ..., or a plugin observer's name */
  int32_t dtype;       /* QH_DTYPE_UINT8 (quint8), INT8 (qint8), UINT16 (quint16), INT16 (qint16),
                        * UINT4 (quint4), INT4 (qint4), INT32 (qint32) */
  int32_t qscheme;     /* QH_QSCHEME_* */
  gboolean has_range;  /* quant_min and quant_max were given (PyTorch's "custom" range) */
  int32_t quant_min;
  int32_t quant_max;
  gboolean reduce_range;
  gboolean has_eps;
  float eps;           /* when has_eps; else 2^-23 (torch.finfo(float32).eps) */
  int ch_axis;         /* per-channel observers; PyTorch's default 0 */
  GPtrArray *args;     /* QhObserverArg*: observer-specific arguments, in the order given */
} QhObserverConfig;

QhObserverConfig *qh_observer_config_new(const char *name);
QhObserverConfig *qh_observer_config_copy(const QhObserverConfig *cfg);
void qh_observer_config_free(QhObserverConfig *cfg);
/* Append an argument (copied). */
void qh_observer_config_add_arg(QhObserverConfig *cfg, const char *key, const char *value);
/* The argument's value, or NULL. */
const char *qh_observer_config_arg(const QhObserverConfig *cfg, const char *key);

/* TRUE when name is one of the host's observers. */
gboolean qh_observer_is_host(const char *name);
/* NULL-terminated list of the host's observer names (static). */
const char *const *qh_observer_host_names(void);

/* Check a config for a host observer the way PyTorch's constructor would: the name,
 * every argument (known to that observer, well-formed, in range), the dtype the
 * observer can produce, the qscheme it supports (per-tensor vs per-channel), and the
 * quant range rules of docs/numerics.md §1 (quant_min <= 0 <= quant_max, quant_min <
 * quant_max, span within the dtype; symmetric + reduce_range + quint8 refused). */
gboolean qh_observer_config_check(const QhObserverConfig *cfg, GError **error);

/* The effective (qmin, qmax) of docs/numerics.md §1 (reduce_range and custom ranges). */
void qh_observer_config_range(const QhObserverConfig *cfg, int32_t *out_qmin, int32_t *out_qmax);

/* Computed quantization parameters of one point (per-tensor: n == 1, ch_axis -1). */
typedef struct {
  int32_t dtype;
  int32_t qscheme;
  int32_t quant_min;
  int32_t quant_max;
  int ch_axis;
  int n;
  float *scale;        /* n entries, > 0 and finite */
  int32_t *zero_point; /* n entries, inside [quant_min, quant_max] */
} QhQuantParams;

QhQuantParams *qh_quant_params_new(int n);
QhQuantParams *qh_quant_params_copy(const QhQuantParams *q);
void qh_quant_params_free(QhQuantParams *q);

typedef struct QhObserver QhObserver;

/* A host observer for a tensor of the given shape (per-channel observers size their
 * state from dims[ch_axis]; the shape of later tensors must agree). cfg is copied. */
QhObserver *qh_observer_new(const QhObserverConfig *cfg, int rank, const int64_t *dims,
                            GError **error);
/* Record one float32 tensor. NaN or Inf in the data is an error (PyTorch would fail
 * later with an assertion); the caller prefixes which tensor. */
gboolean qh_observer_observe(QhObserver *obs, const QhTensor *x, GError **error);
/* The qparams from what was observed (PyTorch's calculate_qparams; an observer that
 * saw nothing gives scale 1, zero point 0 as PyTorch does, with a warning logged). */
QhQuantParams *qh_observer_compute(QhObserver *obs, GError **error);
/* Fold other (same observer, same config, same shape) into obs. */
gboolean qh_observer_merge(QhObserver *obs, const QhObserver *other, GError **error);
/* TRUE when merging shards gives the same qparams as one pass (min/max observers). */
gboolean qh_observer_merge_is_exact(const QhObserver *obs);
/* Append the state to out in a versioned binary form; load checks the version, the
 * observer name and every size, and refuses anything it did not write. */
gboolean qh_observer_save(const QhObserver *obs, GByteArray *out, GError **error);
QhObserver *qh_observer_load(const QhObserverConfig *cfg, int rank, const int64_t *dims,
                             const guint8 *data, gsize size, GError **error);
const QhObserverConfig *qh_observer_config(const QhObserver *obs);
void qh_observer_free(QhObserver *obs);

G_END_DECLS

#endif
