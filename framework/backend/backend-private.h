/* The gateway's own state, shared by backend.c (lifecycle, quantization-side calls),
 * backend-observer.c and backend-lowering.c; nothing outside backend/ includes it. */
#ifndef QH_BACKEND_BACKEND_PRIVATE_H
#define QH_BACKEND_BACKEND_PRIVATE_H

#include "backend/backend.h"

struct QhBackend {
  QhPlugin *plugin;         /* owned */
  const QhPluginDesc *desc; /* borrowed from the plugin */
  const char *name;         /* borrowed from the plugin's info: tags calls, names errors */
  void *instance;           /* the plugin's; destroyed by qh_backend_free */
  gboolean has_instance;
  /* qh_backend_restrict_lowering: one of the plugin's patterns offered alone (or none),
   * and whether its partitions are hidden */
  QhLoweringOps one_pattern;
  gboolean restricted;
  gboolean hide_partitions;
};

#endif
