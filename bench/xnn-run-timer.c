/* A measuring shim for bench/bench_qnnpack_vs_torch.py, loaded with LD_PRELOAD into a
 * `qhost bench --backend qnnpack` process: it stands in for XNNPACK's xnn_run_operator,
 * forwards every call to the real one in the already loaded libXNNPACK, and records each
 * call's duration (CLOCK_MONOTONIC). At exit it writes them, one nanosecond count per
 * line in call order, to the file named by QH_XNN_RUN_TIMES, so that the script can tell
 * how much of a run is spent outside XNNPACK's operators (the adapter's own work, setup
 * calls and the host). Not part of qhost: a benchmark tool only. Calls from several
 * threads at once are recorded too (one lock around the append). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <xnnpack.h>

#define MAX_CALLS (1u << 22)

typedef enum xnn_status (*RunFn)(xnn_operator_t, pthreadpool_t);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *durations;
static size_t n_calls;
static int overflow;

static RunFn real_run(void) {
  static RunFn fn;
  if (!fn) {
    /* the plugin loads libXNNPACK with RTLD_LOCAL, where RTLD_NEXT does not look */
    void *lib = dlopen("libXNNPACK.so.0", RTLD_NOW | RTLD_NOLOAD);
    fn = lib ? (RunFn)dlsym(lib, "xnn_run_operator") : NULL;
    if (!fn) {
      fprintf(stderr, "xnn-run-timer: libXNNPACK's xnn_run_operator not found\n");
      abort();
    }
  }
  return fn;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

enum xnn_status xnn_run_operator(xnn_operator_t op, pthreadpool_t pool) {
  RunFn fn = real_run();
  uint64_t t0 = now_ns();
  enum xnn_status s = fn(op, pool);
  uint64_t dt = now_ns() - t0;
  pthread_mutex_lock(&lock);
  if (!durations)
    durations = malloc(MAX_CALLS * sizeof *durations);
  if (durations && n_calls < MAX_CALLS)
    durations[n_calls++] = dt;
  else
    overflow = 1;
  pthread_mutex_unlock(&lock);
  return s;
}

__attribute__((destructor)) static void write_times(void) {
  const char *path = getenv("QH_XNN_RUN_TIMES");
  if (!path)
    return;
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "xnn-run-timer: cannot write %s\n", path);
    return;
  }
  if (overflow)
    fprintf(f, "overflow\n");
  for (size_t i = 0; i < n_calls; i++)
    fprintf(f, "%llu\n", (unsigned long long)durations[i]);
  fclose(f);
  free(durations);
}
