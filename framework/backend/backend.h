/* QhBackend: the one gateway between the host and a loaded plugin. A backend is a
 * loaded plugin (plugin/plugin.h) with its instance, and it is the only code in the
 * host that calls a plugin's callbacks. Every call does the same ritual, written
 * once here: the callback group is read only when the descriptor's struct_size
 * covers it (QH_HAS_FIELD), the plugin's name tags what it logs and reports while
 * it runs (qh_plugin_set_current), a graph callback gets exactly the view
 * permissions its stage allows, and a failed status becomes one GError naming the
 * plugin and the callback ("plugin 'x86': annotate: node 'conv' (Conv): ...").
 *
 * Two tiers:
 *  - checked calls (gboolean + GError): what quantization, lowering, deploy and the
 *    runner use;
 *  - status calls (qh_backend_call_*, returning the plugin's QhStatus unchanged,
 *    NULL on success, owned by the caller): for the conformance check, which must see
 *    the plugin's own codes and messages, and for the checked calls themselves.
 *
 * Permissions (QH_VIEW_*) each graph callback gets: transform_for_annotation READ |
 * REWRITE; annotate READ | ANNOTATE | METADATA_WRITE; validate READ; refine READ |
 * QPARAMS_READ | QPARAMS_WRITE | METADATA_WRITE; post_calibration those of refine and
 * WEIGHTS_WRITE; post_convert READ | REWRITE | QPARAMS_READ | METADATA_WRITE; deploy,
 * accept and kernel create what their caller's view has (const views).
 *
 * Ownership: a backend owns its plugin and instance; qh_backend_free destroys the
 * instance, then unloads. Everything a backend hands out (ops, names, descriptor)
 * is borrowed until then. Threading: calls may come from any thread (kernel runs
 * come from the thread pool's workers; the plugin tag is per thread); creating and
 * freeing a backend happen on one thread. Errors: QH_ERROR codes mapped from the
 * plugin's QH_ERR_* (hostapi/status-private.h). */
#ifndef QH_BACKEND_BACKEND_H
#define QH_BACKEND_BACKEND_H

#include <glib.h>

#include "hostapi/graph-view.h"
#include "hostapi/host-private.h"
#include "hostapi/sdk-private.h"
#include "plugin/plugin.h"

G_BEGIN_DECLS

typedef struct QhBackend QhBackend;

/* ---- lifecycle ---- */

/* Find `name_or_path` (plugin/plugin.h's search), load it, validate options
 * (KEY=VALUE, NULL-terminated, may be NULL) and create its instance with n_threads.
 * Errors: those of qh_plugin_find_and_load, option errors, "plugin 'x':
 * instance_create: ...". */
QhBackend *qh_backend_open(const QhPluginSearch *search, const char *name_or_path,
                           char *const *options, int n_threads, GError **error);
/* The same for one plugin file (expected_name may be NULL). */
QhBackend *qh_backend_load(const char *path, const char *expected_name, char *const *options,
                           int n_threads, GError **error);
/* The same for a plugin already loaded; takes plugin (freed on failure too). */
QhBackend *qh_backend_new(QhPlugin *plugin, char *const *options, int n_threads, GError **error);
/* Destroys the instance (tagged), then unloads the plugin. NULL is a no-op. */
void qh_backend_free(QhBackend *backend);

const char *qh_backend_name(const QhBackend *backend);
const QhPluginInfo *qh_backend_info(const QhBackend *backend);
/* The descriptor, for its data (names, declarations); its callbacks are called
 * through the functions below only. */
const QhPluginDesc *qh_backend_desc(const QhBackend *backend);
/* The plugin's instance (NULL when it has no instance_create). For unit tests that
 * drive a plugin's kernels directly; host code goes through the calls below. */
void *qh_backend_instance(const QhBackend *backend);

/* ---- callback groups: NULL when not supplied or beyond the descriptor's size ---- */

const QhBackendConfig *qh_backend_config(const QhBackend *backend);
const QhTransformOps *qh_backend_transform_ops(const QhBackend *backend);
const QhAnnotateOps *qh_backend_annotate_ops(const QhBackend *backend);
const QhRefineOps *qh_backend_refine_ops(const QhBackend *backend);
const QhReferenceNumericsOps *qh_backend_reference_numerics(const QhBackend *backend);
const QhLoweringOps *qh_backend_lowering(const QhBackend *backend);
/* What lowerings are offered from now on (plugin-check): with `index` < n_patterns
 * qh_backend_lowering offers only the plugin's pattern `index` and
 * qh_backend_partitions NULL, so a lowering claims units with that pattern alone;
 * QH_BACKEND_ALL_PATTERNS offers every pattern and no partitions;
 * QH_BACKEND_NO_PATTERNS the partitions and no pattern; SIZE_MAX everything again.
 * Change it only while no lowering of this backend is alive. */
#define QH_BACKEND_ALL_PATTERNS (SIZE_MAX - 1)
#define QH_BACKEND_NO_PATTERNS (SIZE_MAX - 2)
void qh_backend_restrict_lowering(QhBackend *backend, size_t index);
const QhDeployOps *qh_backend_deploy_ops(const QhBackend *backend);
/* ABI 1.2: post_calibration / post_convert (NULL when absent or beyond the size). */
const QhPassOps *qh_backend_passes(const QhBackend *backend);
size_t qh_backend_n_observers(const QhBackend *backend);
/* Observer i (< qh_backend_n_observers), or the one named name (NULL if none). */
const QhObserverOps *qh_backend_observer(const QhBackend *backend, size_t i);
const QhObserverOps *qh_backend_find_observer(const QhBackend *backend, const char *name);

/* ---- status calls: the plugin's status as it returned it (NULL: success) ---- */

QhStatus *qh_backend_call_transform(QhBackend *backend, QhGraphView *view);
QhStatus *qh_backend_call_annotate(QhBackend *backend, QhGraphView *view);
/* NULL (nothing to check) when the plugin has no validate. */
QhStatus *qh_backend_call_validate(QhBackend *backend, QhGraphView *view);
QhStatus *qh_backend_call_refine(QhBackend *backend, QhGraphView *view);
QhStatus *qh_backend_call_fake_quantize(QhBackend *backend, int32_t role, const QhQParams *qparams,
                                        const QhTensorView *in, QhTensorView *out);
QhStatus *qh_backend_call_deploy(QhBackend *backend, const QhGraphView *view, QhArtifact *artifact);

QhStatus *qh_backend_call_observer_create(QhBackend *backend, const QhObserverOps *ops,
                                          const QhQuantSpec *spec, int32_t rank, const int64_t *dims,
                                          void **out_state);
QhStatus *qh_backend_call_observer_observe(QhBackend *backend, const QhObserverOps *ops, void *state,
                                           const QhTensorView *tensor);
QhStatus *qh_backend_call_observer_compute(QhBackend *backend, const QhObserverOps *ops, void *state,
                                           QhQParams *out);
/* merge and save/load are optional: QH_ERR_UNSUPPORTED status when missing. */
QhStatus *qh_backend_call_observer_merge(QhBackend *backend, const QhObserverOps *ops, void *state,
                                         const void *other);
QhStatus *qh_backend_call_observer_save(QhBackend *backend, const QhObserverOps *ops, const void *state,
                                        QhBuffer *out);
QhStatus *qh_backend_call_observer_load(QhBackend *backend, const QhObserverOps *ops,
                                        const QhQuantSpec *spec, int32_t rank, const int64_t *dims,
                                        const void *data, size_t size, void **out_state);
/* NULL state is a no-op. */
void qh_backend_observer_destroy(QhBackend *backend, const QhObserverOps *ops, void *state);

/* A derived spec's qparams (QhQuantSpec.derive, which annotate may set). backend may
 * be NULL (a spec the host made): the call is then not tagged. */
QhStatus *qh_backend_call_derive(QhBackend *backend, const QhQuantSpec *spec,
                                 const QhQParams *const *sources, size_t n_sources, QhQParams *out);

/* NULL (accepted) when the pattern has no accept. */
QhStatus *qh_backend_call_accept(QhBackend *backend, const QhLoweringPattern *pattern,
                                 const QhGraphView *view, const QhNodeUnit *unit);
QhStatus *qh_backend_call_kernel_create(QhBackend *backend, const QhKernelOps *ops,
                                        const QhGraphView *view, const QhNodeUnit *unit,
                                        void **out_kernel);
QhStatus *qh_backend_call_kernel_reshape(QhBackend *backend, const QhKernelOps *ops, void *kernel,
                                         const QhTensorView *inputs, size_t n_inputs,
                                         QhTensorView *outputs, size_t n_outputs,
                                         size_t *out_workspace_bytes);
QhStatus *qh_backend_call_kernel_run(QhBackend *backend, const QhKernelOps *ops, void *kernel,
                                     const QhRunContext *ctx, const QhTensorView *inputs,
                                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                                     void *workspace, size_t workspace_bytes);
/* NULL kernel is a no-op. */
void qh_backend_kernel_destroy(QhBackend *backend, const QhKernelOps *ops, void *kernel);

/* ---- checked calls: TRUE, or FALSE with "plugin 'NAME': CALLBACK: message" ---- */

/* Turn a status a call returned into that error (takes status; always FALSE).
 * callback: what to name after the plugin ("annotate", "kernel 'k' (node 'n'): run"). */
gboolean qh_backend_fail(const QhBackend *backend, QhStatus *status, const char *callback,
                         GError **error);

gboolean qh_backend_transform_graph(QhBackend *backend, QhGraphView *view, GError **error);
gboolean qh_backend_annotate_graph(QhBackend *backend, QhGraphView *view, GError **error);
gboolean qh_backend_validate_graph(QhBackend *backend, QhGraphView *view, GError **error);
gboolean qh_backend_refine_graph(QhBackend *backend, QhGraphView *view, GError **error);
/* The 1.2 passes; TRUE (nothing to do) when the plugin has no such callback. A change
 * the host refused during the call (qparams_set, constant_set: graph-view.h's
 * refusals, recorded on the view) fails the call even when the plugin returned NULL. */
gboolean qh_backend_post_calibration(QhBackend *backend, QhGraphView *view, GError **error);
gboolean qh_backend_post_convert(QhBackend *backend, QhGraphView *view, GError **error);
gboolean qh_backend_fake_quantize(QhBackend *backend, int32_t role, const QhQParams *qparams,
                                  const QhTensorView *in, QhTensorView *out, GError **error);
gboolean qh_backend_deploy_graph(QhBackend *backend, const QhGraphView *view, QhArtifact *artifact,
                           GError **error);

/* Observer calls; errors read "plugin 'NAME': observer 'OBS': create: ...". */
gboolean qh_backend_observer_create(QhBackend *backend, const QhObserverOps *ops,
                                    const QhQuantSpec *spec, int32_t rank, const int64_t *dims,
                                    void **out_state, GError **error);
gboolean qh_backend_observer_observe(QhBackend *backend, const QhObserverOps *ops, void *state,
                                     const QhTensorView *tensor, GError **error);
gboolean qh_backend_observer_compute(QhBackend *backend, const QhObserverOps *ops, void *state,
                                     QhQParams *out, GError **error);
gboolean qh_backend_observer_merge(QhBackend *backend, const QhObserverOps *ops, void *state,
                                   const void *other, GError **error);
gboolean qh_backend_observer_save(QhBackend *backend, const QhObserverOps *ops, const void *state,
                                  QhBuffer *out, GError **error);
gboolean qh_backend_observer_load(QhBackend *backend, const QhObserverOps *ops,
                                  const QhQuantSpec *spec, int32_t rank, const int64_t *dims,
                                  const void *data, size_t size, void **out_state, GError **error);

/* A pattern's verdict on a matched unit: 1 accepted, 0 declined (*out_reason set,
 * owned by the caller: the plugin's QH_ERR_UNSUPPORTED message), -1 any other
 * failure ("plugin 'NAME': pattern 'P' accept (node 'N'): ..."). node_name names the
 * unit's first node. */
int qh_backend_accept(QhBackend *backend, const QhLoweringPattern *pattern, const QhGraphView *view,
                      const QhNodeUnit *unit, const char *node_name, char **out_reason,
                      GError **error);
/* Kernel calls; errors read "plugin 'NAME': kernel 'K' (node 'N'): create: ...". */
gboolean qh_backend_kernel_create(QhBackend *backend, const QhKernelOps *ops, const char *node_name,
                                  const QhGraphView *view, const QhNodeUnit *unit, void **out_kernel,
                                  GError **error);
gboolean qh_backend_kernel_reshape(QhBackend *backend, const QhKernelOps *ops, const char *node_name,
                                   void *kernel, const QhTensorView *inputs, size_t n_inputs,
                                   QhTensorView *outputs, size_t n_outputs,
                                   size_t *out_workspace_bytes, GError **error);
gboolean qh_backend_kernel_run(QhBackend *backend, const QhKernelOps *ops, const char *node_name,
                               void *kernel, const QhRunContext *ctx, const QhTensorView *inputs,
                               size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                               void *workspace, size_t workspace_bytes, GError **error);

/* ---- ABI 1.2 partitions (backend-partition.c) ---- */
/* The partitions group, NULL when absent or beyond the descriptor's size. */
const QhPartitionOps *qh_backend_partitions(const QhBackend *backend);
/* claim: *out_claims borrowed from the plugin until its next callback (copy first).
 * Errors read "plugin 'NAME': partitions 'ID': claim: ...". */
gboolean qh_backend_partition_claim(QhBackend *backend, const QhGraphView *view,
                                    const QhNodeUnit *const *units, size_t n_units,
                                    const QhPartitionClaim **out_claims, size_t *out_n_claims,
                                    GError **error);
/* compile: 1 compiled, 0 declined (QH_ERR_UNSUPPORTED; *out_reason set, the caller's),
 * -1 any other failure ("plugin 'NAME': partition 'P': compile: ..."). */
int qh_backend_partition_compile(QhBackend *backend, const QhGraphView *view,
                                 const QhPartition *partition, void **out_compiled,
                                 char **out_reason, GError **error);
gboolean qh_backend_partition_reshape(QhBackend *backend, const char *partition_name, void *compiled,
                                      const QhTensorView *inputs, size_t n_inputs,
                                      QhTensorView *outputs, size_t n_outputs,
                                      size_t *out_workspace_bytes, GError **error);
gboolean qh_backend_partition_run(QhBackend *backend, const char *partition_name, void *compiled,
                                  const QhRunContext *ctx, const QhTensorView *inputs, size_t n_inputs,
                                  QhTensorView *outputs, size_t n_outputs, void *workspace,
                                  size_t workspace_bytes, GError **error);
void qh_backend_partition_destroy(QhBackend *backend, void *compiled);

G_END_DECLS

#endif
