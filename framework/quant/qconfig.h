/* QConfig mappings: which observers quantize which node, as PyTorch's QConfigMapping,
 * built from a backend's default mapping (QhBackendConfig.default_qconfig) and layered
 * with the user's --config JSON exactly as docs/design.md ("QCONFIG.json")
 * describes: the file's `global` replaces the default global qconfig and every default
 * entry that used it (the same QhQuantSpec objects, as PyTorch's default mapping points
 * Conv/Linear/ReLU/... at one global object); fixed- and shared-qparams entries stay
 * unless the file names them; `"base": "none"` starts from an empty mapping; `null`
 * leaves that part float. Resolution per node: global < object_type (ONNX op type, with
 * PyTorch's names as aliases) < node_name (exact first, then the first glob in file
 * order).
 *
 * Ownership: mappings are the caller's; resolved qconfigs are borrowed from the
 * mapping until it is freed or a file is layered over it. Threading: read-only use
 * (resolve, the view hook) may be shared; load_file needs exclusive access. Errors: GError; a bad file is one
 * line naming the file and the key ("qconfig.json: object_type.Conv.activation.quant_min:
 * 300 is outside uint8 [0, 255]"). */
#ifndef QH_QUANT_QCONFIG_H
#define QH_QUANT_QCONFIG_H

#include <glib.h>

#include "core/graph.h"
#include "hostapi/sdk-private.h"
#include "quant/observer.h"

G_BEGIN_DECLS

/* One resolved qconfig. */
typedef struct {
  gboolean is_none;              /* mapped to null: the node stays float */
  QhObserverConfig *activation;  /* NULL when is_none */
  QhObserverConfig *weight;      /* NULL when is_none or when the entry has no weight part */
  int32_t source;                /* QH_QCONFIG_BACKEND_DEFAULT or QH_QCONFIG_USER */
  char *origin;                  /* for reports: "global", "object_type 'Conv'", "node_name '/l4/x*'" */
} QhQConfig;

typedef struct QhQConfigMapping QhQConfigMapping;

/* The backend's default mapping (bc may be NULL: an empty mapping). Plugin data is
 * checked here too (known observer names and arguments). known_observers: extra
 * observer names a plugin registered (NULL-terminated, may be NULL). */
QhQConfigMapping *qh_qconfig_mapping_new(const QhBackendConfig *bc,
                                         const char *const *known_observers, GError **error);
void qh_qconfig_mapping_free(QhQConfigMapping *mapping);

/* Layer a --config file over the mapping (see the file comment). On error the mapping
 * is unchanged. */
gboolean qh_qconfig_mapping_load_file(QhQConfigMapping *mapping, const char *path, GError **error);
/* The same from JSON text (data); label names it in errors. */
gboolean qh_qconfig_mapping_load_data(QhQConfigMapping *mapping, const char *label, const char *data,
                                      GError **error);

/* The qconfig for a node of graph, or NULL when the mapping has no entry for it (no
 * global and no matching entry). */
const QhQConfig *qh_qconfig_resolve(const QhQConfigMapping *mapping, const QhGraph *graph,
                                    const QhNode *node);

/* Describe a resolved observer config as a QhQuantSpec for a plugin (qconfig_for_node):
 * kind QUANTIZE (FIXED for FixedQParamsObserver, SHARED without target for
 * ReuseInputObserver), dtype, qscheme, range, eps, observer and its arguments. Strings
 * and the args array point into cfg and into *storage (freed with g_free). */
void qh_qconfig_to_spec(const QhObserverConfig *cfg, QhQuantSpec *out, QhOption **storage);

/* A QhGraphViewQConfigFn (hostapi/graph-view.h) over mapping (a QhQConfigMapping*):
 * qh_graph_view_set_qconfig_hook(view, qh_qconfig_view_hook, mapping). Source 0 when
 * no entry applies or the qconfig has no weight part for QH_ROLE_WEIGHT;
 * QH_QCONFIG_EXCLUDED for a node mapped to null (by the user or the backend). The
 * spec's strings and arrays stay valid until the mapping is freed or layered over. */
gboolean qh_qconfig_view_hook(gpointer mapping, const QhGraph *graph, uint32_t node, int32_t role,
                              QhQuantSpec *out_spec, int32_t *out_source, GError **error);

G_END_DECLS

#endif
