/* The QhHostApi table the host hands to plugins, assembled from the files that
 * implement its parts.
 *
 * host-api.c owns the table and fills the frozen base, statuses, logging, reports,
 * host facts, buffers, artefacts and threads; host-graph.c fills the graph queries and
 * rewrites, host-quant.c the annotation, qconfig, qparams, weight and metadata
 * functions. No slot is ever NULL (a test checks every slot). */
#ifndef QH_HOSTAPI_HOST_API_PRIVATE_H
#define QH_HOSTAPI_HOST_API_PRIVATE_H

#include "hostapi/sdk-private.h"

/* The process-wide table (built on first use; thread-safe). */
const QhHostApi *qh_host_api_get(void);

/* Fill the graph query and rewrite slots of api (host-graph.c). */
void qh_host_api_fill_graph(QhHostApi *api);

/* Fill the annotation, qconfig, qparams, weight and metadata slots of api (host-quant.c). */
void qh_host_api_fill_quant(QhHostApi *api);

#endif
