/* GEMM split over the host's thread pool, each block on a single-threaded call of
 * oneDNN's sgemm, or of OpenBLAS's in bit-compatible runs (see sgemm-private.h). */
#include "exec/sgemm-private.h"

#include "exec/onednn.h"

/* Below this many multiply-adds a split costs more than it saves. */
#define MIN_PARALLEL_MACS (INT64_C(1) << 18)
/* Column blocks are multiples of this (the widest register block of both libraries). */
#define COLUMN_ALIGN 16

typedef struct {
  CBLAS_TRANSPOSE ta, tb;
  int m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const float *a, *b;
  float *c;
  gboolean by_columns;
  gboolean openblas;
  int64_t block;
} Job;

static void gemm_call(const Job *j, int m, int n, const float *a, const float *b, float *c) {
  if (j->openblas) {
    cblas_sgemm(CblasRowMajor, j->ta, j->tb, m, n, j->k, j->alpha, a, j->lda, b, j->ldb, j->beta, c,
                j->ldc);
    return;
  }
  /* one thread per block: the pool is the only parallelism */
  int previous = qh_onednn_threads_set(1);
  dnnl_status_t s = dnnl_sgemm(j->ta == CblasTrans ? 'T' : 'N', j->tb == CblasTrans ? 'T' : 'N', m, n,
                               j->k, j->alpha, a, j->lda, b, j->ldb, j->beta, c, j->ldc);
  qh_onednn_threads_restore(previous);
  if (s != dnnl_success) /* only on arguments qh_sgemm's callers never pass */
    cblas_sgemm(CblasRowMajor, j->ta, j->tb, m, n, j->k, j->alpha, a, j->lda, b, j->ldb, j->beta, c,
                j->ldc);
}

static void gemm_block(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  int64_t lo = begin * j->block;
  int64_t hi = MIN(end * j->block, j->by_columns ? (int64_t)j->n : (int64_t)j->m);
  if (hi <= lo)
    return;
  if (j->by_columns) {
    const float *b = j->tb == CblasNoTrans ? j->b + lo : j->b + lo * j->ldb;
    gemm_call(j, j->m, (int)(hi - lo), j->a, b, j->c + lo);
  } else {
    const float *a = j->ta == CblasNoTrans ? j->a + lo * j->lda : j->a + lo;
    gemm_call(j, (int)(hi - lo), j->n, a, j->b, j->c + lo * j->ldc);
  }
}

void qh_sgemm(QhExecContext *ctx, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n,
              int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc) {
  QhThreadPool *pool = ctx->pool;
  int threads = qh_thread_pool_size(pool);
  int64_t macs = (int64_t)m * n * k;
  Job j = {trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c, FALSE, FALSE, 0};
  j.openblas = ctx->bit_compatible || !qh_onednn_enabled();
  if (threads == 1 || macs < MIN_PARALLEL_MACS || (n < 2 * COLUMN_ALIGN && m < 2 * threads)) {
    gemm_call(&j, m, n, a, b, c);
    return;
  }
  j.by_columns = n >= 2 * COLUMN_ALIGN;
  int64_t extent = j.by_columns ? n : m;
  int64_t block = (extent + threads - 1) / threads;
  if (j.by_columns)
    block = (block + COLUMN_ALIGN - 1) / COLUMN_ALIGN * COLUMN_ALIGN;
  j.block = block;
  qh_thread_pool_parallel_for(pool, (extent + block - 1) / block, 1, gemm_block, &j);
}
