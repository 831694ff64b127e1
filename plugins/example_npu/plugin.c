/* example_npu: the descriptor of a backend for an imaginary NPU that runs whole
 * subgraphs. It has no per-op kernels: it claims partitions of Conv, Relu and Add
 * (claim.c) and compiles each into one program the host runs as a single kernel
 * (engine.c). Quantization itself is the host's default (PyTorch's x86 semantics);
 * the plugin only lowers. */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include <stdlib.h>
#include <string.h>

#include "npu.h"

static const QhOptionDecl claims_option = {
    QH_STRUCT_HEADER(QhOptionDecl),
    .name = "claims",
    .type = QH_OPTION_STRING,
    .help = "partitions to claim: empty claims every connected group of Conv/Relu/Add; "
                   "NAME:node,node;NAME:node,... claims those nodes (for experiments)",
    .default_value = "",
};
static const QhOptionDecl *const options[] = {&claims_option};

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info, const QhOption *opts,
                                 size_t n_opts, void **out_instance) {
  (void)info;
  NpuInstance *inst = calloc(1, sizeof *inst);
  if (inst == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the instance");
  const char *spec = n_opts > 0 && opts[0].value ? opts[0].value : "";
  inst->claims_spec = strdup(spec);
  if (inst->claims_spec == NULL) {
    free(inst);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the instance");
  }
  *out_instance = inst;
  return NULL;
}

static void instance_destroy(void *instance) {
  NpuInstance *inst = instance;
  if (inst == NULL)
    return;
  npu_claims_clear(inst);
  free(inst->claims_spec);
  free(inst);
}

static const QhPartitionOps partitions = {
    QH_STRUCT_HEADER(QhPartitionOps),
    .id = "npu_subgraph",
    .io_layout = QH_LAYOUT_NCHW,
    .flags = 0,
    .claim = npu_claim,
    .compile = npu_compile,
    .reshape = npu_reshape,
    .run = npu_run,
    .destroy = npu_destroy,
};

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "example_npu",
    .version = "1.0.0",
    .description = "example NPU backend: whole Conv/Relu/Add partitions as one kernel (ABI 1.2 partitions)",
    .options = options,
    .n_options = 1,
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .partitions = &partitions,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
