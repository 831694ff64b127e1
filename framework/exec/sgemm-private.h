/* Single-precision GEMM for the host's kernels, split across the host's own
 * thread pool.
 *
 * Each block runs on oneDNN's sgemm (JIT code for the CPU's ISA, whatever
 * OPENBLAS_CORETYPE says; measured faster than OpenBLAS's on every shape tried, see
 * docs/design.md), single-threaded: the pool splits each GEMM into column (or row)
 * blocks and every worker computes its own block, so one pool does all the work of an
 * op at a time (a threaded BLAS's idle threads spin after each call and, on a 2-core
 * machine, fight the pool's workers in the element loops between GEMMs). When the
 * context is bit-compatible (QhExecContext.bit_compatible) the blocks run on
 * OpenBLAS's serial sgemm instead, qhost's GEMM before oneDNN.
 * Threading: as qh_thread_pool_parallel_for (one call at a time per pool). */
#ifndef QH_EXEC_SGEMM_PRIVATE_H
#define QH_EXEC_SGEMM_PRIVATE_H

#include <cblas.h>

#include "exec/op.h"

G_BEGIN_DECLS

/* C = alpha * op(A) * op(B) + beta * C, row-major, with cblas_sgemm's arguments. */
void qh_sgemm(QhExecContext *ctx, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n,
              int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc);

G_END_DECLS

#endif
