/* CPU feature detection shared by the host's kernels and the plugin table. */
#ifndef QH_CORE_CPU_H
#define QH_CORE_CPU_H

#include <stdint.h>


/* The QH_CPU_* bits (<qhost/host-api.h>) of this CPU, less those QHOST_CPU_DISABLE names
 * (a comma-separated list such as "avx512vnni,avxvnni"). Detected on the first call;
 * thread-safe; never fails (0 on a non-x86 CPU). */
uint64_t qh_cpu_features(void);

#endif
