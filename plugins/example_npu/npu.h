/* example_npu's shared declarations: the instance (its claim option), the claim
 * callback (claim.c) and the partition engine (engine.c). */
#ifndef EXAMPLE_NPU_H
#define EXAMPLE_NPU_H

#include <qhost/qhost-plugin.h>

typedef struct NpuInstance {
  char *claims_spec; /* the "claims" option: "" (automatic) or "NAME:node,node;NAME:..." */
  /* The last claim's storage: the host copies it before the next callback. */
  QhPartitionClaim *claims;
  uint32_t *claim_nodes;
  char *claim_names;
  size_t n_claims;
} NpuInstance;

void npu_claims_clear(NpuInstance *inst);

QhStatus *npu_claim(void *instance, const QhHostApi *host, const QhGraphView *graph,
                    const QhNodeUnit *const *units, size_t n_units, const QhPartitionClaim **out_claims,
                    size_t *out_n_claims);
QhStatus *npu_compile(void *instance, const QhHostApi *host, const QhGraphView *graph,
                      const QhPartition *partition, void **out_compiled);
QhStatus *npu_reshape(void *compiled, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                      QhTensorView *outputs, size_t n_outputs, size_t *out_workspace_bytes);
QhStatus *npu_run(void *compiled, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                  size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                  size_t workspace_bytes);
void npu_destroy(void *compiled);

#endif
