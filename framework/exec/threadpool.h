/* A fixed number of threads for data-parallel loops inside one kernel.
 *
 * The pool is a size: its loops run on an OpenMP team of that many threads (the
 * runtime oneDNN uses), the calling thread among them; idle workers wait as the
 * process's OpenMP settings say (GOMP_SPINCOUNT, OMP_WAIT_POLICY).
 * Ownership: the caller owns the pool and frees it with qh_thread_pool_free.
 * Threading: any thread may call qh_thread_pool_parallel_for, also concurrently; a call
 * from inside an OpenMP region (one of its own tasks, or an application's region) runs
 * the whole loop on the calling thread. */
#ifndef QH_EXEC_THREADPOOL_H
#define QH_EXEC_THREADPOOL_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct QhThreadPool QhThreadPool;

/* fn processes the half-open range [begin, end) of the loop. */
typedef void (*QhParallelFn)(void *arg, int64_t begin, int64_t end);

/* A pool of n_threads threads in all (the caller counts as one); n_threads < 1 means 1.
 * GEMMs are split over this pool too (exec/sgemm-private.h). Never fails. */
QhThreadPool *qh_thread_pool_new(int n_threads);
void qh_thread_pool_free(QhThreadPool *pool);
int qh_thread_pool_size(const QhThreadPool *pool);

/* Split [0, n) into contiguous chunks of at least min_chunk items and run fn over
 * them on the pool; returns when all are done. */
void qh_thread_pool_parallel_for(QhThreadPool *pool, int64_t n, int64_t min_chunk,
                                 QhParallelFn fn, void *arg);

/* fn as QhParallelFn, also told which of the team's threads runs the chunk: 0 (the
 * calling thread) to the pool's size - 1, no two chunks under one number at once, and
 * normally the same thread under the same number on every call (libgomp may hand a
 * number to another thread when the team's size changes between calls). */
typedef void (*QhParallelWorkerFn)(void *arg, int64_t begin, int64_t end, int worker);

/* qh_thread_pool_parallel_for with the worker number: a caller that gives a worker the
 * same share of the work on every call finds that share's data in the same core's cache
 * (the host's parallel_for, framework/hostapi/host-api.c). Run inline (one chunk, or
 * inside an OpenMP region), the one call gets worker 0. */
void qh_thread_pool_parallel_for_workers(QhThreadPool *pool, int64_t n, int64_t min_chunk,
                                         QhParallelWorkerFn fn, void *arg);

G_END_DECLS

#endif
