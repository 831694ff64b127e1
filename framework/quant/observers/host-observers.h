/* What the host observer families (the files of quant/observers/) share with the registry in
 * quant/observer.c: the parsed-argument table, one constructor and one state loader per
 * observer, the input scan every observe starts with, and a bounds-checked byte reader
 * and writer for the saved state. Internal to libqhost. */
#ifndef QH_QUANT_HOST_OBSERVERS_H
#define QH_QUANT_HOST_OBSERVERS_H

#include <glib.h>
#include <stdint.h>

#include "hostapi/sdk-private.h"
#include "quant/observer-private.h"

G_BEGIN_DECLS

/* One observer-specific argument: integer or real, its default, inclusive bounds. */
typedef struct {
  const char *key;
  gboolean is_int;
  gboolean required;
  double def;
  double min;
  double max;
  const char *doc; /* for docs and --help */
} QhObsArgSpec;

/* Everything a family constructor needs: the config (checked), the parsed arguments in
 * the order of the observer's QhObsArgSpec table, and the effective quant range. */
typedef struct {
  const QhObserverConfig *cfg;
  const double *args;
  int32_t qmin;
  int32_t qmax;
  float eps;
  int ch_axis; /* normalised to [0, rank) for per-channel observers, -1 otherwise */
} QhObsSetup;

typedef QhObserver *(*QhObsCreateFn)(const QhObsSetup *setup, int rank, const int64_t *dims,
                                     GError **error);
/* Restore the state written by the class's save into a fresh observer. */
typedef gboolean (*QhObsLoadFn)(QhObserver *obs, const guint8 *data, gsize size, GError **error);

/* Family constructors and loaders. */
QhObserver *qh_obs_minmax_new(const QhObsSetup *s, int rank, const int64_t *dims, GError **error);
QhObserver *qh_obs_moving_minmax_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                     GError **error);
QhObserver *qh_obs_per_channel_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                   GError **error);
QhObserver *qh_obs_moving_per_channel_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                          GError **error);
gboolean qh_obs_minmax_load(QhObserver *obs, const guint8 *data, gsize size, GError **error);

QhObserver *qh_obs_histogram_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                 GError **error);
gboolean qh_obs_histogram_load(QhObserver *obs, const guint8 *data, gsize size, GError **error);

QhObserver *qh_obs_fixed_new(const QhObsSetup *s, int rank, const int64_t *dims, GError **error);
QhObserver *qh_obs_placeholder_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                   GError **error);
gboolean qh_obs_stateless_load(QhObserver *obs, const guint8 *data, gsize size, GError **error);

QhObserver *qh_obs_percentile_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                  GError **error);
QhObserver *qh_obs_entropy_new(const QhObsSetup *s, int rank, const int64_t *dims,
                               GError **error);
QhObserver *qh_obs_mse_new(const QhObsSetup *s, int rank, const int64_t *dims, GError **error);
gboolean qh_obs_orthist_load(QhObserver *obs, const guint8 *data, gsize size, GError **error);

/* Scan n floats: FALSE (with an error naming the observer) when one is NaN or
 * infinite; else their min and max. n > 0. */
gboolean qh_obs_scan(const QhObserver *obs, const float *x, size_t n, float *out_min,
                     float *out_max, GError **error);
/* The qparams of the uninitialised observer (scale 1, zero point 0 for n entries), with
 * PyTorch's "must run observer" warning logged. */
QhQuantParams *qh_obs_default_params(const QhObserver *obs, int n);
/* A QhQuantParams for n entries filled from the config (dtype, qscheme, range, ch_axis). */
QhQuantParams *qh_obs_params_new(const QhObserver *obs, int n, int ch_axis);
/* The effective range and eps of obs's config. */
void qh_obs_range(const QhObserver *obs, int32_t *qmin, int32_t *qmax, float *eps);

/* Little-endian state serialisation. */
void qh_obs_put_u32(GByteArray *out, uint32_t v);
void qh_obs_put_u64(GByteArray *out, uint64_t v);
void qh_obs_put_f32(GByteArray *out, float v);
void qh_obs_put_f64(GByteArray *out, double v);
void qh_obs_put_f32s(GByteArray *out, const float *v, size_t n);

typedef struct {
  const guint8 *p;
  gsize left;
  gboolean bad; /* a read ran past the end */
} QhObsReader;

uint32_t qh_obs_get_u32(QhObsReader *r);
uint64_t qh_obs_get_u64(QhObsReader *r);
float qh_obs_get_f32(QhObsReader *r);
double qh_obs_get_f64(QhObsReader *r);
gboolean qh_obs_get_f32s(QhObsReader *r, float *v, size_t n);
/* TRUE when every read fit and nothing is left over; else sets a "truncated or
 * trailing bytes" error naming the observer. */
gboolean qh_obs_reader_done(const QhObsReader *r, const QhObserver *obs, GError **error);

/* float32 torch.sum order of docs/numerics.md §6.6 (torch-sum.c). */
float qh_torch_sum_f32(const float *a, size_t n);
/* The same numbers summed in double and rounded once: the fast twin, used by tests to
 * show how often the order matters. */
float qh_torch_sum_f32_double(const float *a, size_t n);

G_END_DECLS

#endif
