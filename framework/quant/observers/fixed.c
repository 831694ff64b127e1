/* Observers without statistics: FixedQParamsObserver (PyTorch's observer for sigmoid,
 * tanh, hardsigmoid and softmax outputs: the qparams are its arguments, docs/numerics.md
 * §5) and PlaceholderObserver (a value that stays float or is quantized dynamically:
 * it records nothing and has no qparams, as PyTorch's raises in calculate_qparams). */
#include "core/error.h"
#include "quant/observers/host-observers.h"

#define STATE_VERSION 1u

typedef struct {
  QhObserver base;
  float scale;
  int32_t zero_point;
} Fixed;

static gboolean fixed_observe(QhObserver *obs, const QhTensor *x, GError **error) {
  float mn, mx;
  /* Nothing to record, but the data is checked like every observer's. */
  return qh_obs_scan(obs, x->data, (size_t)qh_tensor_numel(x), &mn, &mx, error);
}

static QhQuantParams *fixed_compute(QhObserver *obs, GError **error) {
  (void)error;
  Fixed *f = (Fixed *)obs;
  QhQuantParams *q = qh_obs_params_new(obs, 1, -1);
  q->scale[0] = f->scale;
  q->zero_point[0] = f->zero_point;
  return q;
}

static QhQuantParams *placeholder_compute(QhObserver *obs, GError **error) {
  g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
              "%s: has no qparams (it marks a value that is not statically quantized)",
              obs->config->name);
  return NULL;
}

static gboolean stateless_merge(QhObserver *obs, const QhObserver *other, GError **error) {
  (void)obs;
  (void)other;
  (void)error;
  return TRUE;
}

static gboolean stateless_save(const QhObserver *obs, GByteArray *out, GError **error) {
  (void)obs;
  (void)error;
  qh_obs_put_u32(out, STATE_VERSION);
  return TRUE;
}

gboolean qh_obs_stateless_load(QhObserver *obs, const guint8 *data, gsize size, GError **error) {
  QhObsReader r = {data, size, FALSE};
  uint32_t version = qh_obs_get_u32(&r);
  if (!r.bad && version != STATE_VERSION) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: saved state has version %u, expected %u",
                obs->config->name, version, STATE_VERSION);
    return FALSE;
  }
  return qh_obs_reader_done(&r, obs, error);
}

static void stateless_free(QhObserver *obs) {
  qh_observer_clear_base(obs);
  g_free(obs);
}

static const QhObserverClass fixed_class = {"FixedQParamsObserver", TRUE, fixed_observe,
                                            fixed_compute, stateless_merge, stateless_save,
                                            stateless_free};
static const QhObserverClass placeholder_class = {"PlaceholderObserver", TRUE, fixed_observe,
                                                  placeholder_compute, stateless_merge,
                                                  stateless_save, stateless_free};

QhObserver *qh_obs_fixed_new(const QhObsSetup *s, int rank, const int64_t *dims, GError **error) {
  (void)error;
  Fixed *f = g_new0(Fixed, 1);
  qh_observer_init_base(&f->base, &fixed_class, s->cfg, rank, dims);
  /* PyTorch stores torch.tensor([scale], dtype=torch.float): the double rounded once. */
  f->scale = (float)s->args[0];
  f->zero_point = (int32_t)s->args[1];
  return &f->base;
}

QhObserver *qh_obs_placeholder_new(const QhObsSetup *s, int rank, const int64_t *dims,
                                   GError **error) {
  (void)error;
  QhObserver *o = g_new0(QhObserver, 1);
  qh_observer_init_base(o, &placeholder_class, s->cfg, rank, dims);
  return o;
}
