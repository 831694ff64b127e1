/* The qnnpack plugin's descriptor and instance: PyTorch's qnnpack backend semantics (mobile:
 * uint8 activations, per-tensor weights). Its BackendConfig (backend-config.c,
 * ../common/pytorch-backend-config.c) drives the host's annotator; its lowering (lowering.c,
 * xnn-kernels.c, xnn-u8ops.c, xnn-concat.c) runs Conv, Linear, Add, MaxPool, AveragePool,
 * GlobalAveragePool, Sigmoid, Tanh, LeakyRelu and Concat units on XNNPACK's operators. The instance owns
 * one pthreadpool sized by --threads, the only threads XNNPACK uses; xnn_initialize runs
 * once per process, its answer kept so that accept can decline when it failed. */
#include <pthread.h>
#include <stdlib.h>

#include "../common/pytorch-backend-config.h"
#include "qnnpack.h"

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/qnnpack/CMakeLists.txt)"
#endif

static pthread_once_t xnn_once = PTHREAD_ONCE_INIT;
static enum xnn_status xnn_init_status = xnn_status_uninitialized;

/* XNNPACK picks its micro-kernels from CPUID here, whatever the host reports. Never
 * deinitialized: the plugin may be loaded by several instances in one process. */
static void xnn_init_once(void) { xnn_init_status = xnn_initialize(NULL); }

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info, const QhOption *options,
                                 size_t n_options, void **out) {
  (void)options, (void)n_options;
  QnInstance *inst = calloc(1, sizeof *inst);
  if (!inst)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  inst->n_threads = info && info->struct_size >= sizeof *info && info->n_threads > 0 ? info->n_threads : 1;
  pthread_once(&xnn_once, xnn_init_once);
  inst->xnn_init = xnn_init_status;
  /* one thread: no pool, XNNPACK runs on the calling thread */
  if (inst->n_threads > 1 && !(inst->pool = pthreadpool_create(inst->n_threads))) {
    free(inst);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "pthreadpool_create failed");
  }
  *out = inst;
  return NULL;
}

static void instance_destroy(void *instance) {
  QnInstance *inst = instance;
  if (!inst)
    return;
  if (inst->pool)
    pthreadpool_destroy(inst->pool);
  free(inst);
}

static const QhPluginDesc qnnpack_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "qnnpack",
    .version = QHOST_PLUGIN_VERSION,
    .description = "PyTorch qnnpack semantics (mobile); BackendConfig; Conv, Linear, Add, pooling, "
                   "activation and Concat units on XNNPACK's operators",
    .flags = 0,
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .backend_config = &qh_pt_qnnpack_backend_config,
    .lowering = &qn_lowering,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &qnnpack_desc;
  return NULL;
}
