/* The kernels' thread pool: persistent workers that sleep on a condition variable
 * between parallel loops, so they cost nothing while BLAS or a plugin's library
 * runs its own threads. One loop at a time; the caller works as thread 0. */
#include "exec/threadpool.h"

#include <pthread.h>

struct QhThreadPool {
  int n_threads;
  GThread **workers;
  pthread_mutex_t lock;
  pthread_cond_t work_ready;
  pthread_cond_t work_done;
  guint64 generation;  /* bumped for each loop; workers wait for a new one */
  gboolean shutting_down;
  /* the current loop */
  QhParallelFn fn;
  void *arg;
  int64_t n;
  int64_t chunk;
  int64_t next;        /* next unclaimed index, under lock */
  int busy;            /* workers still inside the current loop */
  gboolean in_loop;
};

/* Claim chunks until none are left; returns with the lock released. */
static void work_loop(QhThreadPool *p) {
  for (;;) {
    pthread_mutex_lock(&p->lock);
    int64_t begin = p->next;
    if (begin >= p->n) {
      pthread_mutex_unlock(&p->lock);
      return;
    }
    int64_t end = MIN(begin + p->chunk, p->n);
    p->next = end;
    QhParallelFn fn = p->fn;
    void *arg = p->arg;
    pthread_mutex_unlock(&p->lock);
    fn(arg, begin, end);
  }
}

static gpointer worker_main(gpointer data) {
  QhThreadPool *p = data;
  guint64 seen = 0;
  for (;;) {
    pthread_mutex_lock(&p->lock);
    while (!p->shutting_down && p->generation == seen)
      pthread_cond_wait(&p->work_ready, &p->lock);
    if (p->shutting_down) {
      pthread_mutex_unlock(&p->lock);
      return NULL;
    }
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    work_loop(p);
    pthread_mutex_lock(&p->lock);
    if (--p->busy == 0)
      pthread_cond_signal(&p->work_done);
    pthread_mutex_unlock(&p->lock);
  }
}

QhThreadPool *qh_thread_pool_new(int n_threads) {
  QhThreadPool *p = g_new0(QhThreadPool, 1);
  p->n_threads = n_threads < 1 ? 1 : n_threads;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work_ready, NULL);
  pthread_cond_init(&p->work_done, NULL);
  p->workers = g_new0(GThread *, p->n_threads);
  for (int i = 1; i < p->n_threads; i++)
    p->workers[i] = g_thread_new("qh-worker", worker_main, p);
  return p;
}

void qh_thread_pool_free(QhThreadPool *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->lock);
  p->shutting_down = TRUE;
  pthread_cond_broadcast(&p->work_ready);
  pthread_mutex_unlock(&p->lock);
  for (int i = 1; i < p->n_threads; i++)
    g_thread_join(p->workers[i]);
  g_free(p->workers);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->work_ready);
  pthread_cond_destroy(&p->work_done);
  g_free(p);
}

int qh_thread_pool_size(const QhThreadPool *p) { return p->n_threads; }

void qh_thread_pool_parallel_for(QhThreadPool *p, int64_t n, int64_t min_chunk, QhParallelFn fn,
                                 void *arg) {
  if (n <= 0)
    return;
  if (min_chunk < 1)
    min_chunk = 1;
  /* A few chunks per thread balance uneven work without much locking. */
  int64_t chunk = MAX(min_chunk, (n + (int64_t)p->n_threads * 4 - 1) / ((int64_t)p->n_threads * 4));
  pthread_mutex_lock(&p->lock);
  gboolean inline_only = p->n_threads == 1 || p->in_loop || n <= chunk;
  if (inline_only) {
    pthread_mutex_unlock(&p->lock);
    fn(arg, 0, n);
    return;
  }
  p->in_loop = TRUE;
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  p->chunk = chunk;
  p->next = 0;
  p->busy = p->n_threads - 1;
  p->generation++;
  pthread_cond_broadcast(&p->work_ready);
  pthread_mutex_unlock(&p->lock);

  work_loop(p);

  pthread_mutex_lock(&p->lock);
  while (p->busy > 0)
    pthread_cond_wait(&p->work_done, &p->lock);
  p->in_loop = FALSE;
  pthread_mutex_unlock(&p->lock);
}
