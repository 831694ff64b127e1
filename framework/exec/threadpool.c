/* The kernels' thread pool, on the OpenMP runtime that oneDNN uses. The host's fp32
 * convolutions (oneDNN) and its own loops alternate unit by unit; with a pool of its own
 * beside libgomp's team the two sets of idle workers competed for the same cores, and
 * a worker that sleeps between loops is woken once per loop, which on a VM takes as long
 * as a small unit (fbgemm's resnet18 ran slower on 2 threads than on 1). One team serves
 * both, and waits between loops as the process's OpenMP settings say (the qhost runner
 * chooses GOMP_SPINCOUNT from the machine's load: framework/cli/spin-policy.c). Chunks are
 * handed out dynamically, as before; a loop inside an OpenMP region (a nested call, or a
 * plugin's own parallel region calling the host) runs inline on the calling thread. */
#include "exec/threadpool.h"

#include <omp.h>

struct QhThreadPool {
  int n_threads;
};

QhThreadPool *qh_thread_pool_new(int n_threads) {
  QhThreadPool *p = g_new0(QhThreadPool, 1);
  p->n_threads = n_threads < 1 ? 1 : n_threads;
  return p;
}

void qh_thread_pool_free(QhThreadPool *p) { g_free(p); }

int qh_thread_pool_size(const QhThreadPool *p) { return p->n_threads; }

/* Both loops: fn, or wfn with the thread's number in the team. */
static void parallel_for(QhThreadPool *p, int64_t n, int64_t min_chunk, QhParallelFn fn, QhParallelWorkerFn wfn,
                         void *arg) {
  if (n <= 0)
    return;
  if (min_chunk < 1)
    min_chunk = 1;
  /* A few chunks per thread balance uneven work without much claiming. */
  const int64_t chunk = MAX(min_chunk, (n + (int64_t)p->n_threads * 4 - 1) / ((int64_t)p->n_threads * 4));
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  if (p->n_threads == 1 || n_chunks == 1 || omp_in_parallel()) {
    if (wfn)
      wfn(arg, 0, n, 0);
    else
      fn(arg, 0, n);
    return;
  }
  const int team = (int)MIN((int64_t)p->n_threads, n_chunks);
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
  for (int64_t c = 0; c < n_chunks; c++) {
    if (wfn)
      wfn(arg, c * chunk, MIN(n, (c + 1) * chunk), omp_get_thread_num());
    else
      fn(arg, c * chunk, MIN(n, (c + 1) * chunk));
  }
}

void qh_thread_pool_parallel_for(QhThreadPool *p, int64_t n, int64_t min_chunk, QhParallelFn fn, void *arg) {
  parallel_for(p, n, min_chunk, fn, NULL, arg);
}

void qh_thread_pool_parallel_for_workers(QhThreadPool *p, int64_t n, int64_t min_chunk, QhParallelWorkerFn fn,
                                         void *arg) {
  parallel_for(p, n, min_chunk, NULL, fn, arg);
}
