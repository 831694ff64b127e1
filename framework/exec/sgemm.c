/* GEMM split over the host's thread pool, each block on single-threaded OpenBLAS
 * (see sgemm.h for why). */
#include "exec/sgemm-private.h"

/* Below this many multiply-adds a split costs more than it saves. */
#define MIN_PARALLEL_MACS (INT64_C(1) << 18)
/* Column blocks are multiples of this (OpenBLAS's widest register block). */
#define COLUMN_ALIGN 16

typedef struct {
  CBLAS_TRANSPOSE ta, tb;
  int m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const float *a, *b;
  float *c;
  gboolean by_columns;
  int64_t block;
} Job;

static void gemm_block(void *arg, int64_t begin, int64_t end) {
  const Job *j = arg;
  int64_t lo = begin * j->block;
  int64_t hi = MIN(end * j->block, j->by_columns ? (int64_t)j->n : (int64_t)j->m);
  if (hi <= lo)
    return;
  if (j->by_columns) {
    const float *b = j->tb == CblasNoTrans ? j->b + lo : j->b + lo * j->ldb;
    cblas_sgemm(CblasRowMajor, j->ta, j->tb, j->m, (int)(hi - lo), j->k, j->alpha, j->a, j->lda,
                b, j->ldb, j->beta, j->c + lo, j->ldc);
  } else {
    const float *a = j->ta == CblasNoTrans ? j->a + lo * j->lda : j->a + lo;
    cblas_sgemm(CblasRowMajor, j->ta, j->tb, (int)(hi - lo), j->n, j->k, j->alpha, a, j->lda,
                j->b, j->ldb, j->beta, j->c + lo * j->ldc, j->ldc);
  }
}

void qh_sgemm(QhThreadPool *pool, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n,
              int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta,
              float *c, int ldc) {
  int threads = qh_thread_pool_size(pool);
  int64_t macs = (int64_t)m * n * k;
  if (threads == 1 || macs < MIN_PARALLEL_MACS || (n < 2 * COLUMN_ALIGN && m < 2 * threads)) {
    cblas_sgemm(CblasRowMajor, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  Job j = {trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c, FALSE, 0};
  j.by_columns = n >= 2 * COLUMN_ALIGN;
  int64_t extent = j.by_columns ? n : m;
  int64_t block = (extent + threads - 1) / threads;
  if (j.by_columns)
    block = (block + COLUMN_ALIGN - 1) / COLUMN_ALIGN * COLUMN_ALIGN;
  j.block = block;
  qh_thread_pool_parallel_for(pool, (extent + block - 1) / block, 1, gemm_block, &j);
}
