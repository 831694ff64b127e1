/* The QhHostApi table the host hands to plugins, assembled from the files that
 * implement its parts.
 *
 * host-api.c owns the table and fills the frozen base, statuses, logging, reports,
 * host facts, buffers, artefacts and threads; host-graph.c fills the graph queries,
 * rewrites, annotation, qconfig and qparams functions. No slot is ever NULL (a test
 * checks every slot). */
#ifndef QH_HOSTAPI_HOST_API_PRIVATE_H
#define QH_HOSTAPI_HOST_API_PRIVATE_H

#include "hostapi/sdk-private.h"

/* The process-wide table (built on first use; thread-safe). */
const QhHostApi *qh_host_api_get(void);

/* Fill the graph, annotation, qconfig and qparams slots of api (host-graph.c). */
void qh_host_api_fill_graph(QhHostApi *api);

#endif
