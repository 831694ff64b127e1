/* The class behind QhObserver, so that host observers (quant/observers/) and plugin
 * observers (quant/plugin-observer.c) share one interface. Every observer object
 * starts with QhObserver as its first member. */
#ifndef QH_QUANT_OBSERVER_PRIVATE_H
#define QH_QUANT_OBSERVER_PRIVATE_H

#include "quant/observer.h"

typedef struct {
  const char *name;
  gboolean merge_is_exact;
  gboolean (*observe)(QhObserver *obs, const QhTensor *x, GError **error);
  QhQuantParams *(*compute)(QhObserver *obs, GError **error);
  gboolean (*merge)(QhObserver *obs, const QhObserver *other, GError **error); /* NULL: cannot */
  gboolean (*save)(const QhObserver *obs, GByteArray *out, GError **error);  /* NULL: cannot */
  void (*free)(QhObserver *obs);
} QhObserverClass;

struct QhObserver {
  const QhObserverClass *klass;
  QhObserverConfig *config; /* owned */
  int rank;
  int64_t dims[8];
};

/* Initialise the base part of a new observer (copies cfg and the shape). */
void qh_observer_init_base(QhObserver *obs, const QhObserverClass *klass,
                           const QhObserverConfig *cfg, int rank, const int64_t *dims);
/* Free the base part (the class's free calls it last). */
void qh_observer_clear_base(QhObserver *obs);

#endif
