/* Plugin observers (QhObserverOps) behind the host's QhObserver interface, so that
 * calibration, merging, saving and qparams treat them like host observers. The host
 * checks everything the plugin returns: statuses, counts within capacity, scales
 * positive and finite, zero points inside the range.
 *
 * Ownership: the observer owns the plugin's state and destroys it through the ops.
 * The ops, the instance and the plugin must outlive the observer. Threading: one
 * thread. Errors name the plugin observer ("plugin observer 'vitis_pos': ..."). */
#ifndef QH_QUANT_PLUGIN_OBSERVER_H
#define QH_QUANT_PLUGIN_OBSERVER_H

#include "hostapi/sdk-private.h"
#include "quant/observer.h"

G_BEGIN_DECLS

/* A plugin observer for one quantization point; spec is the resolved spec (borrowed). */
QhObserver *qh_plugin_observer_new(const QhObserverOps *ops, void *instance, const QhQuantSpec *spec,
                                   int rank, const int64_t *dims, GError **error);
/* The same, from bytes its save wrote (the plugin's load checks them). */
QhObserver *qh_plugin_observer_load(const QhObserverOps *ops, void *instance, const QhQuantSpec *spec,
                                    int rank, const int64_t *dims, const guint8 *data, gsize size,
                                    GError **error);

/* The host observer config a spec describes (observer name defaulted by qscheme). */
QhObserverConfig *qh_observer_config_from_spec(const QhQuantSpec *spec);

G_END_DECLS

#endif
