/* The example_vitis plugin's descriptor: an example vendor backend in the style of
 * AMD's Vitis AI flow for its DPU (power-of-two scales, its own observer, shift-based
 * kernels, a deploy step writing a vendor package). It is built only from the installed
 * SDK, so it shows what a vendor's plugin looks like. This file holds what the plugin
 * claims to be, its one option, and the pointers to its groups:
 *   transform.c    what the DPU computes differently, written into the graph as ONNX
 *   annotate.c     which edges are quantized (int8, per tensor, 2^-pos), PT2E style
 *   observer.c     DpuPosObserver, the position search
 *   constraints.c  refine: the DPU compiler's shift rules after calibration
 *   numerics.c     the DPU's rounding (reference_numerics)
 *   lowering.c     which node units the integer kernels (kernels.c) take
 *   deploy.c       the vendor package `qhost deploy` writes */
#include <stdlib.h>
#include <string.h>

#include "lowering.h"
#include "vitis.h"

#ifndef EXAMPLE_VITIS_VERSION
#error "EXAMPLE_VITIS_VERSION must be defined by the build (plugins/example_vitis/CMakeLists.txt)"
#endif

static const QhOptionDecl opt_candidates = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "candidates", .type = QH_OPTION_INT, .default_value = "5",
    .help = "positions the observer tries from the overflow-free one (Vitis AI and MQBench use 5; "
            "network inputs always try 1)",
    .min = 1, .max = 16};
static const QhOptionDecl *const vitis_options[] = {&opt_candidates};

QhStatus *vitis_instance_create(const QhHostApi *host, const QhInstanceInfo *info, const QhOption *options,
                                size_t n_options, void **out_instance) {
  (void)info;
  if (!out_instance || (n_options && !options))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "instance_create: bad arguments");
  VitisInstance *inst = calloc(1, sizeof *inst);
  if (!inst)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  inst->candidates = 5;
  for (size_t i = 0; i < n_options; i++)
    if (options[i].key && options[i].value && strcmp(options[i].key, "candidates") == 0)
      inst->candidates = atoi(options[i].value); /* the host checked the declared bounds */
  if (inst->candidates < 1 || inst->candidates > 16) {
    free(inst);
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "candidates must be in [1, 16]");
  }
  *out_instance = inst;
  return NULL;
}

void vitis_instance_destroy(void *instance) { free(instance); }

static const QhObserverOps *const vitis_observers[] = {&vitis_observer};

static const QhPluginDesc example_vitis_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "example_vitis",
    .version = EXAMPLE_VITIS_VERSION,
    .description = "Example DPU vendor backend (Vitis AI style): int8 power-of-two scales, "
                   "position-search observer, DPU shift rules",
    .flags = 0,
    .options = vitis_options,
    .n_options = sizeof vitis_options / sizeof *vitis_options,
    .instance_create = vitis_instance_create,
    .instance_destroy = vitis_instance_destroy,
    .transform = &vitis_transform,
    .annotate = &vitis_annotate,
    .observers = vitis_observers,
    .n_observers = sizeof vitis_observers / sizeof *vitis_observers,
    .refine = &vitis_refine,
    .reference_numerics = &vitis_numerics,
    .lowering = &example_vitis_lowering,
    .deploy = &example_vitis_deploy,
};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &example_vitis_desc;
  return NULL;
}
