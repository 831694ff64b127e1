/* The host's test switch for the plugins' host-free kernel tests: QHOST_CPU_DISABLE
 * names CPU features (comma-separated) that the tests must treat as missing, so every
 * ISA path can be forced on one machine. Header-only; reads the environment each call. */
#ifndef QH_PLUGINS_COMMON_TESTS_CPU_DISABLE_H
#define QH_PLUGINS_COMMON_TESTS_CPU_DISABLE_H

#include <stdlib.h>
#include <string.h>

/* name is in the comma-separated QHOST_CPU_DISABLE list. */
static inline int disabled(const char *name) {
  const char *m = getenv("QHOST_CPU_DISABLE");
  size_t n = strlen(name);
  for (const char *p = m; p && *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0)
      return 1;
    p = e ? e + 1 : NULL;
  }
  return 0;
}

#endif
