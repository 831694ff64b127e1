/* Helpers for the fbgemm plugin's host-free kernel tests: a random generator, pools that
 * run tasks in reverse on fake workers and on two real threads, and the ISA check that
 * honours QHOST_CPU_DISABLE as the host does, for tests/test_kernels.c and
 * tests/test_grouped.c. Static functions: one copy per test program, single-threaded use
 * except the pools. */
#ifndef QH_FBGEMM_TEST_HELPERS_H
#define QH_FBGEMM_TEST_HELPERS_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/tests/cpu-disable.h"
#include "../kernels.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}
static inline int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint32_t)(hi - lo + 1)); }

/* A pool that runs tasks from the last to the first, on fake workers 0..2, so the result
 * cannot depend on the order tasks run in or on which worker's workspace slice is used. */
static inline void reverse_pool(void *runner, size_t n, FbTaskFn task, void *user) {
  (void)runner;
  for (size_t i = n; i-- > 0;)
    task(user, i, (uint32_t)(i % 3));
}

/* Two real threads: a second thread runs the odd tasks as worker 1 while the caller runs
 * the even ones as worker 0. */
typedef struct {
  size_t n;
  FbTaskFn task;
  void *user;
} OddTasks;

static inline void *run_odd(void *arg) {
  OddTasks *o = arg;
  for (size_t i = 1; i < o->n; i += 2)
    o->task(o->user, i, 1);
  return NULL;
}

static inline void two_thread_pool(void *runner, size_t n, FbTaskFn task, void *user) {
  (void)runner;
  OddTasks o = {n, task, user};
  pthread_t t;
  int started = pthread_create(&t, NULL, run_odd, &o) == 0;
  for (size_t i = 0; i < n; i += 2)
    task(user, i, 0);
  if (started)
    pthread_join(t, NULL);
  else
    run_odd(&o);
}

/* __builtin_cpu_supports takes only a literal */
#define has(name) (!disabled(name) && __builtin_cpu_supports(name))

static inline int isa_available(FbIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
  case FB_ISA_AVX2:
    return has("avx2");
  case FB_ISA_AVXVNNI:
    return has("avx2") && has("avxvnni");
  case FB_ISA_AVX512VNNI:
    return has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512vnni");
  case FB_ISA_AMX: /* the host's name for the feature; the OS must grant the tile state */
    return has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512vnni") && !disabled("amxint8") &&
           __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
           fb_amx_request_permission() == 0;
  default:
    return 1;
  }
}

/* Cases AMX runs on its gathered path (gemm.c: stride 1, no dilation, ic % 64 == 0, a
 * kernel larger than 1x1), reported so that a change of the generator cannot drop them. */

#endif
