/* Placeholder until the graph, annotation and qparams slots of the host table land
 * (host-graph.c, being written alongside); removed in the same merge. */
#include "plugin/host-api-private.h"
void qh_host_api_fill_graph(QhHostApi *api) { (void)api; }
