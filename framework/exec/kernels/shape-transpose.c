/* Transpose for every element type. The fast path first simplifies the permutation
 * (size-1 dims vanish, input dims that stay adjacent merge, a trailing dim that
 * stays last becomes part of the copied element), which turns the common layouts
 * (NCHW<->NHWC, 2-D, attention's (0,2,1,3)) into a batched 2-D transpose done in
 * cache-sized tiles; anything else goes through an odometer loop copying the
 * merged elements. The naive twin maps each output element back to its input
 * element with full strides. */
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/kernels/shape-private.h"

#define TILE 32

static gboolean read_perm(const QhNode *node, int rank, int *perm, GError **error) {
  int64_t n;
  const int64_t *v;
  if (!qh_node_attr_get_ints(node, "perm", &n, &v, error))
    return FALSE;
  if (n < 0) {
    for (int i = 0; i < rank; i++)
      perm[i] = rank - 1 - i;
    return TRUE;
  }
  if (n != rank)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "perm has %" G_GINT64_FORMAT " entries for an input of rank %d", n, rank);
  gboolean seen[QH_MAX_RANK] = {0};
  for (int i = 0; i < rank; i++) {
    if (v[i] < 0 || v[i] >= rank || seen[v[i]])
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "perm is not a permutation of 0..%d", rank - 1);
    seen[v[i]] = TRUE;
    perm[i] = (int)v[i];
  }
  return TRUE;
}

gboolean qh_transpose_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  if (n_inputs < 1 || inputs[0] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input 0 is missing");
  const QhShape *in = &inputs[0]->shape;
  int perm[QH_MAX_RANK];
  if (!read_perm(node, in->rank, perm, error))
    return FALSE;
  QhShape out = {.rank = in->rank};
  for (int i = 0; i < in->rank; i++)
    out.dims[i] = in->dims[perm[i]];
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = out;
  return TRUE;
}

gboolean qh_transpose_run_naive(QhExecContext *ctx, const QhNode *node,
                                const QhTensor *const *inputs, int n_inputs,
                                QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_inputs, (void)n_outputs;
  const QhTensor *x = inputs[0];
  QhTensor *y = outputs[0];
  int perm[QH_MAX_RANK], rank = x->shape.rank;
  if (!read_perm(node, rank, perm, error))
    return FALSE;
  size_t es = qh_dtype_size(x->dtype);
  int64_t in_strides[QH_MAX_RANK], n = qh_tensor_numel(y);
  qh_shape_strides(&x->shape, in_strides);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, src = 0;
    for (int k = rank - 1; k >= 0; k--) {
      int64_t idx = rest % y->shape.dims[k];
      rest /= y->shape.dims[k];
      src += idx * in_strides[perm[k]];
    }
    memcpy((guint8 *)y->data + (size_t)i * es, (const guint8 *)x->data + (size_t)src * es, es);
  }
  return TRUE;
}

/* The permutation after dropping size-1 dims and merging input dims that stay
 * adjacent and in order in the output. */
typedef struct {
  int rank;
  int64_t dims[QH_MAX_RANK]; /* input dims */
  int perm[QH_MAX_RANK];
} Simplified;

static void simplify(const QhShape *in, const int *perm, Simplified *s) {
  int keep_idx[QH_MAX_RANK], p[QH_MAX_RANK], r = 0;
  for (int i = 0, k = 0; i < in->rank; i++)
    keep_idx[i] = in->dims[i] == 1 ? -1 : k++;
  for (int i = 0; i < in->rank; i++)
    if (keep_idx[perm[i]] >= 0)
      p[r++] = keep_idx[perm[i]];
  int64_t d[QH_MAX_RANK];
  for (int i = 0, k = 0; i < in->rank; i++)
    if (in->dims[i] != 1)
      d[k++] = in->dims[i];
  /* groups of consecutive output positions reading consecutive input dims */
  int first[QH_MAX_RANK], n_groups = 0;
  int64_t size[QH_MAX_RANK];
  for (int i = 0; i < r; i++) {
    if (i > 0 && p[i] == p[i - 1] + 1) {
      size[n_groups - 1] *= d[p[i]];
      continue;
    }
    first[n_groups] = p[i];
    size[n_groups++] = d[p[i]];
  }
  s->rank = n_groups;
  for (int g = 0; g < n_groups; g++) {
    int new_in = 0; /* the group's rank among groups by input position */
    for (int h = 0; h < n_groups; h++)
      new_in += first[h] < first[g];
    s->perm[g] = new_in;
    s->dims[new_in] = size[g];
  }
}

typedef struct {
  const guint8 *src;
  guint8 *dst;
  size_t es; /* bytes of one moved element */
  int64_t rows, cols, row_blocks;
} Tiles;

#define TILE_LOOP(T)                                                                   \
  for (int64_t r = r0; r < r1; r++)                                                    \
    for (int64_t c = c0; c < c1; c++)                                                  \
      ((T *)dst)[c * t->rows + r] = ((const T *)src)[r * t->cols + c];

/* One task is a band of TILE rows of one matrix of the batch. */
static void tiles_task(void *arg, int64_t begin, int64_t end) {
  const Tiles *t = arg;
  for (int64_t task = begin; task < end; task++) {
    int64_t b = task / t->row_blocks, r0 = task % t->row_blocks * TILE;
    int64_t r1 = MIN(r0 + TILE, t->rows);
    const guint8 *src = t->src + (size_t)(b * t->rows * t->cols) * t->es;
    guint8 *dst = t->dst + (size_t)(b * t->rows * t->cols) * t->es;
    for (int64_t c0 = 0; c0 < t->cols; c0 += TILE) {
      int64_t c1 = MIN(c0 + TILE, t->cols);
      switch (t->es) {
      case 1: TILE_LOOP(guint8); break;
      case 2: TILE_LOOP(guint16); break;
      case 4: TILE_LOOP(guint32); break;
      case 8: TILE_LOOP(guint64); break;
      default:
        for (int64_t r = r0; r < r1; r++)
          for (int64_t c = c0; c < c1; c++)
            memcpy(dst + (size_t)(c * t->rows + r) * t->es, src + (size_t)(r * t->cols + c) * t->es,
                   t->es);
      }
    }
  }
}

/* A matrix of a few rows (an image's NCHW -> NHWC with 3 or 4 channels): tiles would be
 * 3 x 32 with every store 3 bytes from the last and one task for the whole image, so
 * each task interleaves a band of columns instead, with the row count a constant for
 * the common cases so the compiler unrolls it. */
#define NARROW_ROWS 8
#define BAND 4096
/* A task moves at least this many bytes: waking a worker for less costs more than the
 * copy (the zoo's GRU classifier ran 2.7x slower on 2 threads than on 1 for its three
 * small Transposes). */
#define MIN_TASK_BYTES ((size_t)32 << 10)

/* min_chunk for tasks of item_bytes each. */
static int64_t min_items(size_t item_bytes) {
  return item_bytes >= MIN_TASK_BYTES ? 1 : (int64_t)(MIN_TASK_BYTES / (item_bytes ? item_bytes : 1));
}

#define NARROW_LOOP(T, R)                                                              \
  for (int64_t c = c0; c < c1; c++)                                                    \
    for (int64_t r = 0; r < (R); r++)                                                  \
      ((T *)dst)[c * (R) + r] = ((const T *)src)[r * t->cols + c];

static void narrow_task(void *arg, int64_t begin, int64_t end) {
  const Tiles *t = arg;
  const int64_t bands = (t->cols + BAND - 1) / BAND;
  for (int64_t task = begin; task < end; task++) {
    int64_t b = task / bands, c0 = task % bands * BAND, c1 = MIN(c0 + BAND, t->cols);
    const guint8 *src = t->src + (size_t)(b * t->rows * t->cols) * t->es;
    guint8 *dst = t->dst + (size_t)(b * t->rows * t->cols) * t->es;
    if (t->es == 1 && t->rows == 3) {
      NARROW_LOOP(guint8, 3);
    } else if (t->es == 1 && t->rows == 4) {
      NARROW_LOOP(guint8, 4);
    } else if (t->es == 4 && t->rows == 3) {
      NARROW_LOOP(guint32, 3);
    } else {
      for (int64_t c = c0; c < c1; c++)
        for (int64_t r = 0; r < t->rows; r++)
          memcpy(dst + (size_t)(c * t->rows + r) * t->es, src + (size_t)(r * t->cols + c) * t->es, t->es);
    }
  }
}

/* Output-order walk with an odometer over the simplified dims. */
static void odometer_copy(const Simplified *s, size_t es, const guint8 *src, guint8 *dst) {
  int64_t in_strides[QH_MAX_RANK], out_dims[QH_MAX_RANK], idx[QH_MAX_RANK] = {0}, n = 1;
  QhShape in = qh_shape_make(s->rank, s->dims);
  qh_shape_strides(&in, in_strides);
  for (int k = 0; k < s->rank; k++) {
    out_dims[k] = s->dims[s->perm[k]];
    n *= out_dims[k];
  }
  int64_t off = 0;
  for (int64_t i = 0; i < n; i++) {
    memcpy(dst + (size_t)i * es, src + (size_t)off * es, es);
    for (int k = s->rank - 1; k >= 0; k--) {
      off += in_strides[s->perm[k]];
      if (++idx[k] < out_dims[k])
        break;
      off -= idx[k] * in_strides[s->perm[k]];
      idx[k] = 0;
    }
  }
}

gboolean qh_transpose_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                          int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)n_inputs, (void)n_outputs;
  const QhTensor *x = inputs[0];
  QhTensor *y = outputs[0];
  int perm[QH_MAX_RANK];
  if (!read_perm(node, x->shape.rank, perm, error))
    return FALSE;
  if (y->nbytes == 0)
    return TRUE;
  Simplified s;
  simplify(&x->shape, perm, &s);
  size_t es = qh_dtype_size(x->dtype);
  if (s.rank > 0 && s.perm[s.rank - 1] == s.rank - 1) {
    es *= (size_t)s.dims[s.rank - 1];
    s.rank--;
  }
  if (s.rank <= 1) { /* the permutation only moved size-1 dims */
    memcpy(y->data, x->data, y->nbytes);
    return TRUE;
  }
  gboolean batched_2d = s.perm[s.rank - 1] == s.rank - 2 && s.perm[s.rank - 2] == s.rank - 1;
  for (int k = 0; batched_2d && k < s.rank - 2; k++)
    batched_2d = s.perm[k] == k;
  if (!batched_2d) {
    odometer_copy(&s, es, x->data, y->data);
    return TRUE;
  }
  Tiles t = {.src = x->data, .dst = y->data, .es = es, .rows = s.dims[s.rank - 2],
             .cols = s.dims[s.rank - 1]};
  int64_t batch = 1;
  for (int k = 0; k < s.rank - 2; k++)
    batch *= s.dims[k];
  if (t.rows <= NARROW_ROWS && t.cols >= BAND) {
    qh_thread_pool_parallel_for(ctx->pool, batch * ((t.cols + BAND - 1) / BAND),
                                min_items(t.es * (size_t)(t.rows * BAND)), narrow_task, &t);
    return TRUE;
  }
  t.row_blocks = (t.rows + TILE - 1) / TILE;
  qh_thread_pool_parallel_for(ctx->pool, batch * t.row_blocks,
                              min_items(t.es * (size_t)(MIN(t.rows, TILE) * t.cols)), tiles_task, &t);
  return TRUE;
}
