/* The embedding API of libqhost: what an application includes to load models, run
 * them, and find and load backend plugins, without the runner.
 *
 * This is the host's own GLib-typed interface (GError, GPtrArray), distinct from the
 * plugin SDK (<qhost/qhost-plugin.h>), which is plain C and the only thing plugins see.
 * Include as "qhost.h" with -I<prefix>/include/qhost and the flags of
 * `pkg-config --cflags glib-2.0 json-glib-1.0`; link with -lqhost. Each header
 * documents ownership, threading and errors. */
#ifndef QHOST_EMBEDDING_H
#define QHOST_EMBEDDING_H

#include "core/error.h"
#include "core/graph.h"
#include "core/log.h"
#include "core/tensor.h"
#include "exec/plan.h"
#include "io/npy.h"
#include "io/onnx.h"
#include "plugin/plugin.h"

#endif
