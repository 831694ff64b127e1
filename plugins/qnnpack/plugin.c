/* The qnnpack plugin's descriptor and instance: PyTorch's qnnpack backend semantics (mobile:
 * uint8 activations, per-tensor weights). Its BackendConfig (backend-config.c,
 * ../common/pytorch-backend-config.c) drives the host's annotator; its lowering (lowering.c,
 * xnn-kernels.c, xnn-u8ops.c, xnn-concat.c, own-u8ops.c) runs Conv (+Relu, +Clip), Linear, Add,
 * Mul, Relu, Clip, the pools, Sigmoid, Tanh, LeakyRelu and Concat units on XNNPACK's
 * operators, HardSwish, HardSigmoid, Flatten and Reshape on its own kernels. The instance
 * owns one pthreadpool sized by --threads, the only threads XNNPACK uses, and the spin
 * option (whether its workers spin between units); xnn_initialize runs once per process,
 * its answer kept so that accept can decline when it failed. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/pytorch-backend-config.h"
#include "qnnpack.h"

#ifndef QHOST_PLUGIN_VERSION
#error "QHOST_PLUGIN_VERSION must be defined by the build (plugins/qnnpack/CMakeLists.txt)"
#endif

/* what --backend-opt spin takes when not given */
#define SPIN_DEFAULT "off"

static pthread_once_t xnn_once = PTHREAD_ONCE_INIT;
static enum xnn_status xnn_init_status = xnn_status_uninitialized;

/* XNNPACK picks its micro-kernels from CPUID here, whatever the host reports. Never
 * deinitialized: the plugin may be loaded by several instances in one process. */
static void xnn_init_once(void) { xnn_init_status = xnn_initialize(NULL); }

static const QhOptionDecl opt_spin = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "spin", .type = QH_OPTION_ENUM, .default_value = SPIN_DEFAULT,
    .help = "on: the pool's workers spin-wait for the next unit (pthreadpool's default); off: they sleep "
            "after each unit (XNN_FLAG_YIELD_WORKERS), which costs a wake-up per unit but leaves a busy "
            "machine's cores to others (docs/qnnpack.md, Threads)",
    .choices = "on|off"};
static const QhOptionDecl *const options_decl[] = {&opt_spin};

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info, const QhOption *options,
                                 size_t n_options, void **out) {
  if (!out || (n_options && !options))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "instance_create: bad arguments");
  int spin = strcmp(SPIN_DEFAULT, "on") == 0;
  for (size_t i = 0; i < n_options; i++)
    if (options[i].key && options[i].value && strcmp(options[i].key, "spin") == 0) {
      if (strcmp(options[i].value, "on") != 0 && strcmp(options[i].value, "off") != 0)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "spin must be on or off");
      spin = strcmp(options[i].value, "on") == 0;
    }
  QnInstance *inst = calloc(1, sizeof *inst);
  if (!inst)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  inst->xnn_flags = spin ? 0 : XNN_FLAG_YIELD_WORKERS;
  inst->pool_flags = spin ? 0 : PTHREADPOOL_FLAG_YIELD_WORKERS;
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
    .description = "PyTorch qnnpack semantics (mobile); BackendConfig; Conv, Linear, element-wise, pooling, "
                   "activation, Concat and shape units on XNNPACK's operators",
    .flags = 0,
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .backend_config = &qh_pt_qnnpack_backend_config,
    .lowering = &qn_lowering,
    .options = options_decl,
    .n_options = sizeof options_decl / sizeof options_decl[0],
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &qnnpack_desc;
  return NULL;
}
