/* Single-precision GEMM for the host's kernels, split across the host's own
 * thread pool.
 *
 * qhost links OpenBLAS's serial build: the threaded build's idle threads spin
 * (sched_yield) after each call and, on a 2-core machine, fight the pool's workers
 * for the cores in the element loops between GEMMs (measured: about 15% of
 * mobilenet_v2's time at 2 threads). Instead the pool splits each GEMM into column
 * (or row) blocks and every worker calls OpenBLAS on its own block, so one pool
 * does all the work of an op at a time.
 * Threading: as qh_thread_pool_parallel_for (one call at a time per pool). */
#ifndef QH_EXEC_SGEMM_PRIVATE_H
#define QH_EXEC_SGEMM_PRIVATE_H

#include <cblas.h>

#include "exec/threadpool.h"

G_BEGIN_DECLS

/* C = alpha * op(A) * op(B) + beta * C, row-major, with cblas_sgemm's arguments. */
void qh_sgemm(QhThreadPool *pool, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n,
              int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc);

G_END_DECLS

#endif
