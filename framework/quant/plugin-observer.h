/* Plugin observers (QhObserverOps) behind the host's QhObserver interface, so that
 * calibration, merging, saving and qparams treat them like host observers. The host
 * checks everything the plugin returns: statuses, counts within capacity, scales
 * positive and finite, zero points inside the range.
 *
 * Ownership: the observer owns the plugin's state and destroys it through the
 * gateway (backend/backend.h), which makes every call; the backend must outlive the
 * observer. Threading: one
 * thread. Errors of the plugin's calls name plugin and observer ("plugin 'example_vitis':
 * observer 'DpuPosObserver': create: ..."), the host's checks the observer ("plugin
 * observer 'DpuPosObserver': ..."). */
#ifndef QH_QUANT_PLUGIN_OBSERVER_H
#define QH_QUANT_PLUGIN_OBSERVER_H

#include "backend/backend.h"
#include "hostapi/sdk-private.h"
#include "quant/observer.h"

G_BEGIN_DECLS

/* A plugin observer for one quantization point; spec is the resolved spec (borrowed). */
QhObserver *qh_plugin_observer_new(QhBackend *backend, const QhObserverOps *ops, const QhQuantSpec *spec,
                                   int rank, const int64_t *dims, GError **error);
/* The same, from bytes its save wrote (the plugin's load checks them). */
QhObserver *qh_plugin_observer_load(QhBackend *backend, const QhObserverOps *ops, const QhQuantSpec *spec,
                                    int rank, const int64_t *dims, const guint8 *data, gsize size,
                                    GError **error);

/* The host observer config a spec describes (observer name defaulted by qscheme). */
QhObserverConfig *qh_observer_config_from_spec(const QhQuantSpec *spec);

G_END_DECLS

#endif
