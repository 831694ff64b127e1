/* The x86 plugin's quantizer side (inductor.c): the `quantizer` and `reduce_range`
 * options, the instance that carries their resolved values, and the imperative
 * annotate that either applies X86InductorQuantizer's recipe (quantizer=inductor) or,
 * after the host's declarative pass over the FX BackendConfig (quantizer=fx), narrows
 * its default activations to PyTorch's reduce_range on CPUs without VNNI. Plugin code:
 * SDK only. */
#ifndef QH_PLUGINS_X86_INDUCTOR_H
#define QH_PLUGINS_X86_INDUCTOR_H

#include "onednn.h"

enum { X86_QUANTIZER_FX, X86_QUANTIZER_INDUCTOR };

/* The instance every callback receives. base comes first so that the lowering, which
 * knows only X86Instance, reads it through the same pointer. */
typedef struct {
  X86Instance base;
  int quantizer; /* X86_QUANTIZER_* */
} X86PluginInstance;

#define X86_PLUGIN_N_OPTIONS 2
/* The options, whose reduce_range help says what auto means with and without VNNI. */
extern const QhOptionDecl *const x86_options_vnni[X86_PLUGIN_N_OPTIONS];
extern const QhOptionDecl *const x86_options_no_vnni[X86_PLUGIN_N_OPTIONS];
int x86_cpu_has_vnni(const QhHostApi *host);

extern const QhAnnotateOps x86_annotate;

#endif
