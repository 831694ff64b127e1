/* Checks shared by the graph functions of the QhHostApi table (host-graph.c,
 * host-quant.c). Each returns NULL when the check passes, otherwise a new status the
 * caller returns to the plugin (the caller owns it). fn names the API function in the
 * message. Called on the plugin's thread; they only read the view. */
#ifndef QH_HOSTAPI_HOST_GRAPH_CHECKS_H
#define QH_HOSTAPI_HOST_GRAPH_CHECKS_H

#include "hostapi/graph-view.h"
#include "hostapi/sdk-private.h"

/* TRUE when v is a live view handle the host passed to the current callback. */
gboolean qh_api_view_ok(const QhGraphView *v);
/* The view is valid and the current callback holds every permission bit in perm. */
QhStatus *qh_api_enter(const QhGraphView *v, uint32_t perm, const char *fn);
/* node is a live node id; *out receives it. */
QhStatus *qh_api_check_node(const QhGraphView *v, uint32_t node, const char *fn, const QhNode **out);
/* value is a value id; *out receives it. what names the argument in the message. */
QhStatus *qh_api_check_value(const QhGraphView *v, uint32_t value, const char *fn, const char *what,
                             QhValue **out);
/* "fn: what is NULL". */
QhStatus *qh_api_null_arg(const char *fn, const char *what);
/* "fn: message", naming node when non-NULL, with the status code of error's kind; frees error. */
QhStatus *qh_api_from_error(const QhNode *node, const char *fn, GError *error);

#endif
