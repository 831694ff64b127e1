/* The fast fp32 engine for Conv: oneDNN's fp32 convolution primitives (JIT code for the
 * ISA found at run time: AVX-512, AVX2 or SSE4.1), with the weights reordered once into
 * the primitive's own blocked layout and kept, per node, in the execution context.
 * OpenBLAS's speed depends on OPENBLAS_CORETYPE, which some machines force to Haswell,
 * and its sgemm repacks the weights on every call after an im2col pass; oneDNN chooses
 * its kernels from the CPU (capped to what QHOST_CPU_DISABLE leaves, like the x86
 * plugin). Where the plan's layout plan (exec/layout.c) keeps a value channels-last, the
 * conv reads or writes it as NHWC and runs oneDNN's NHWC kernels; elsewhere the tensors
 * are NCHW: pointwise convs run on them in place; the others let oneDNN pick its layout
 * (NHWC or channel blocks for its direct kernels) and the activations are reordered into
 * it and back around each call, in the context's scratch. A primitive whose best
 * implementation is oneDNN's
 * reference C loop, or a weight that is not a plan constant, declines, and conv.c runs
 * its OpenBLAS path. Why oneDNN and not a packed sgemm of our own: docs/design.md. */
#include <oneapi/dnnl/dnnl.h>
#include <string.h>

#include "exec/kernels/common.h"
#include "exec/kernels/conv-private.h"
#include "exec/onednn.h"

#define ALIGN_UP(x) (((x) + 63) & ~(size_t)63)
/* Weights sampled for the fingerprint that guards a cached entry. */
#define FINGERPRINT_SAMPLES 64

typedef struct {
  /* key: what the cached primitive was built for */
  int64_t x_dims[QH_MAX_RANK];
  int rank;
  int threads;
  gboolean has_bias;
  const void *w_data;
  guint64 w_fingerprint;
  gboolean src_nhwc, dst_nhwc; /* the plan keeps that side channels-last (layout.c) */
  QhPostOpKind post_op;        /* the plan's fused activation (fusion.c) */
  float post_alpha, post_beta;
  /* the entry */
  gboolean declined; /* oneDNN has only its reference loop for this conv */
  dnnl_primitive_t conv;
  dnnl_primitive_t src_reorder, dst_reorder; /* NULL when the primitive takes NCHW */
  dnnl_memory_desc_t user_src_md, user_dst_md, src_md, dst_md, bias_md, scratch_md;
  dnnl_memory_t weights; /* reordered, owned by oneDNN */
  size_t src_bytes, dst_bytes, scratch_bytes;
} ConvEntry;

/* qh_onednn_engine(), set on the first call of qh_conv_onednn */
static dnnl_engine_t engine;

struct QhConvCache {
  GHashTable *entries; /* const QhNode * -> ConvEntry * */
  dnnl_stream_t stream;
};

static void entry_free(gpointer p) {
  ConvEntry *e = p;
  if (e == NULL)
    return;
  if (e->conv)
    dnnl_primitive_destroy(e->conv);
  if (e->src_reorder)
    dnnl_primitive_destroy(e->src_reorder);
  if (e->dst_reorder)
    dnnl_primitive_destroy(e->dst_reorder);
  if (e->weights)
    dnnl_memory_destroy(e->weights);
  g_free(e);
}

void qh_conv_cache_free(QhConvCache *cache) {
  if (cache == NULL)
    return;
  g_hash_table_destroy(cache->entries);
  if (cache->stream)
    dnnl_stream_destroy(cache->stream);
  g_free(cache);
}

int qh_conv_cache_engine_entries(const QhConvCache *cache) {
  if (cache == NULL)
    return 0;
  int n = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init(&it, cache->entries);
  while (g_hash_table_iter_next(&it, NULL, &v))
    n += !((const ConvEntry *)v)->declined;
  return n;
}

static guint64 fingerprint(const QhTensor *w) {
  const float *v = qh_f32(w);
  size_t n = w->nbytes / sizeof(float);
  guint64 h = 1469598103934665603ull ^ n;
  for (size_t i = 0; i < FINGERPRINT_SAMPLES && n > 0; i++) {
    uint32_t bits;
    memcpy(&bits, &v[i * (n - 1) / (FINGERPRINT_SAMPLES - 1)], sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

static gboolean key_matches(const ConvEntry *e, const QhConvGeometry *g, int threads, guint64 fp) {
  const QhTensor *x = g->x, *w = g->wt;
  const gboolean has_bias = g->b != NULL;
  return e->src_nhwc == g->src_nhwc && e->dst_nhwc == g->dst_nhwc && e->post_op == g->post_op &&
         e->post_alpha == g->post_alpha && e->post_beta == g->post_beta && e->rank == x->shape.rank &&
         memcmp(e->x_dims, x->shape.dims, sizeof(int64_t) * (size_t)x->shape.rank) == 0 &&
         e->threads == threads && e->has_bias == has_bias && e->w_data == w->data &&
         e->w_fingerprint == fp;
}

static dnnl_format_tag_t plain_tag(int rank) {
  return rank == 3 ? dnnl_ncw : rank == 4 ? dnnl_nchw : dnnl_ncdhw;
}

static dnnl_format_tag_t weights_tag(int rank, gboolean grouped) {
  if (grouped)
    return rank == 3 ? dnnl_goiw : rank == 4 ? dnnl_goihw : dnnl_goidhw;
  return rank == 3 ? dnnl_oiw : rank == 4 ? dnnl_oihw : dnnl_oidhw;
}

static gboolean make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                             dnnl_primitive_t *out) {
  dnnl_primitive_desc_t pd;
  if (dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, NULL) != dnnl_success)
    return FALSE;
  gboolean ok = dnnl_primitive_create(out, pd) == dnnl_success;
  dnnl_primitive_desc_destroy(pd);
  return ok;
}

/* The fused activation as an eltwise post-op (none for QH_POST_NONE). */
static gboolean set_post_op(dnnl_primitive_attr_t attr, const ConvEntry *e) {
  dnnl_alg_kind_t alg;
  float alpha = 0.0f, beta = 0.0f;
  switch (e->post_op) {
  case QH_POST_NONE: return TRUE;
  case QH_POST_RELU: alg = dnnl_eltwise_relu; break;
  case QH_POST_CLIP: alg = dnnl_eltwise_clip, alpha = e->post_alpha, beta = e->post_beta; break;
  case QH_POST_SWISH: alg = dnnl_eltwise_swish, alpha = 1.0f; break;
  case QH_POST_HARDSWISH: alg = dnnl_eltwise_hardswish; break;
  default: return FALSE;
  }
  dnnl_post_ops_t po;
  if (dnnl_post_ops_create(&po) != dnnl_success)
    return FALSE;
  gboolean ok = dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, beta) == dnnl_success &&
                dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  dnnl_post_ops_destroy(po);
  return ok;
}

/* Build the primitive for this geometry; FALSE with e->declined when oneDNN offers only
 * its reference implementation, FALSE without it on an oneDNN error. */
static gboolean entry_build(ConvEntry *e, const QhConvGeometry *g, const QhTensor *w) {
  const QhWindow *win = g->w;
  const int rank = g->x->shape.rank, nsp = rank - 2, off = QH_WINDOW_DIMS - nsp;
  const gboolean grouped = g->group > 1;
  dnnl_dims_t src_dims = {0}, dst_dims = {0}, w_dims = {0}, b_dims = {g->m};
  dnnl_dims_t strides = {0}, dilates = {0}, pad_l = {0}, pad_r = {0};
  src_dims[0] = dst_dims[0] = g->n;
  src_dims[1] = g->c;
  dst_dims[1] = g->m;
  int wr = 0;
  if (grouped)
    w_dims[wr++] = g->group;
  w_dims[wr++] = g->m / g->group;
  w_dims[wr++] = g->c / g->group;
  for (int i = 0; i < nsp; i++) {
    src_dims[2 + i] = win->in[off + i];
    dst_dims[2 + i] = win->out[off + i];
    w_dims[wr + i] = win->k[off + i];
    strides[i] = win->s[off + i];
    dilates[i] = win->d[off + i] - 1;
    pad_l[i] = win->pb[off + i];
    pad_r[i] = win->pe[off + i];
  }
  const int w_rank = wr + nsp;
  dnnl_memory_desc_t any_src, any_dst, any_w, user_w;
  const gboolean channels_last = e->src_nhwc || e->dst_nhwc;
  if (dnnl_memory_desc_init_by_tag(&e->user_src_md, rank, src_dims, dnnl_f32,
                                   e->src_nhwc ? dnnl_nhwc : plain_tag(rank)) ||
      dnnl_memory_desc_init_by_tag(&e->user_dst_md, rank, dst_dims, dnnl_f32,
                                   e->dst_nhwc ? dnnl_nhwc : plain_tag(rank)) ||
      dnnl_memory_desc_init_by_tag(&user_w, w_rank, w_dims, dnnl_f32, weights_tag(rank, grouped)) ||
      dnnl_memory_desc_init_by_tag(&any_src, rank, src_dims, dnnl_f32, dnnl_format_tag_any) ||
      dnnl_memory_desc_init_by_tag(&any_dst, rank, dst_dims, dnnl_f32, dnnl_format_tag_any) ||
      dnnl_memory_desc_init_by_tag(&any_w, w_rank, w_dims, dnnl_f32, dnnl_format_tag_any) ||
      dnnl_memory_desc_init_by_tag(&e->bias_md, 1, b_dims, dnnl_f32, dnnl_x))
    return FALSE;
  /* A pointwise conv on NCHW is one GEMM per image, which oneDNN runs in place (its
   * gemm implementation); other shapes pick oneDNN's preferred layout and pay two
   * activation reorders. Measured per run (CPU time, 1 thread): resnet50 80.0 -> 76.4 ms,
   * mobilenet_v3_large 12.9 -> 12.2, efficientnet_b0 66.5 -> 62.6 against `any` for all. */
  if (channels_last) {
    /* a conv inside the layout plan's channels-last region works on NHWC on both sides
     * (brgconv), converting only the side that the plan leaves NCHW */
    if (dnnl_memory_desc_init_by_tag(&any_src, rank, src_dims, dnnl_f32, dnnl_nhwc) ||
        dnnl_memory_desc_init_by_tag(&any_dst, rank, dst_dims, dnnl_f32, dnnl_nhwc))
      return FALSE;
  } else if (qh_window_k_size(win) == 1) {
    any_src = e->user_src_md;
    any_dst = e->user_dst_md;
  }
  dnnl_convolution_desc_t cd;
  if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                 &any_src, &any_w, e->has_bias ? &e->bias_md : NULL,
                                                 &any_dst, strides, dilates, pad_l, pad_r))
    return FALSE;
  dnnl_primitive_attr_t attr;
  if (dnnl_primitive_attr_create(&attr))
    return FALSE;
  dnnl_primitive_desc_t pd = NULL;
  gboolean ok = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
                set_post_op(attr, e) &&
                dnnl_primitive_desc_create(&pd, &cd, attr, engine, NULL) == dnnl_success;
  dnnl_primitive_attr_destroy(attr);
  if (!ok)
    return FALSE;
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || impl == NULL ||
      (strncmp(impl, "ref", 3) == 0 && !channels_last)) {
    e->declined = TRUE;
    dnnl_primitive_desc_destroy(pd);
    return FALSE;
  }
  e->src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  e->dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  e->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  const dnnl_memory_desc_t w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  e->scratch_bytes = dnnl_memory_desc_get_size(&e->scratch_md);
  ok = dnnl_primitive_create(&e->conv, pd) == dnnl_success;
  dnnl_primitive_desc_destroy(pd);
  if (!ok)
    return FALSE;
  if (!dnnl_memory_desc_equal(&e->src_md, &e->user_src_md)) {
    if (!make_reorder(&e->user_src_md, &e->src_md, &e->src_reorder))
      return FALSE;
    e->src_bytes = dnnl_memory_desc_get_size(&e->src_md);
  }
  if (!dnnl_memory_desc_equal(&e->dst_md, &e->user_dst_md)) {
    if (!make_reorder(&e->dst_md, &e->user_dst_md, &e->dst_reorder))
      return FALSE;
    e->dst_bytes = dnnl_memory_desc_get_size(&e->dst_md);
  }
  /* the weights, once, into the primitive's layout */
  dnnl_memory_t user_mem = NULL;
  dnnl_primitive_t w_reorder = NULL;
  ok = dnnl_memory_create(&e->weights, &w_md, engine, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
       dnnl_memory_create(&user_mem, &user_w, engine, w->data) == dnnl_success &&
       make_reorder(&user_w, &w_md, &w_reorder);
  if (ok) {
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, user_mem}, {DNNL_ARG_TO, e->weights}};
    dnnl_stream_t s = NULL;
    ok = dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success &&
         dnnl_primitive_execute(w_reorder, s, 2, args) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
    if (s)
      dnnl_stream_destroy(s);
  }
  if (w_reorder)
    dnnl_primitive_destroy(w_reorder);
  if (user_mem)
    dnnl_memory_destroy(user_mem);
  return ok;
}

static void entry_set_key(ConvEntry *e, const QhConvGeometry *g, int threads, guint64 fp) {
  e->rank = g->x->shape.rank;
  memcpy(e->x_dims, g->x->shape.dims, sizeof(int64_t) * (size_t)e->rank);
  e->threads = threads;
  e->has_bias = g->b != NULL;
  e->w_data = g->wt->data;
  e->w_fingerprint = fp;
  e->src_nhwc = g->src_nhwc;
  e->dst_nhwc = g->dst_nhwc;
  e->post_op = g->post_op;
  e->post_alpha = g->post_alpha;
  e->post_beta = g->post_beta;
}

static ConvEntry *entry_get(QhConvCache *cache, const QhConvGeometry *g, int threads) {
  guint64 fp = fingerprint(g->wt);
  ConvEntry *e = g_hash_table_lookup(cache->entries, g->node);
  if (e != NULL && key_matches(e, g, threads, fp))
    return e;
  e = g_new0(ConvEntry, 1);
  entry_set_key(e, g, threads, fp);
  if (!entry_build(e, g, g->wt)) {
    /* keep only the key, marked declined, so that later runs go straight to OpenBLAS
     * (an oneDNN error here is treated as a decline too: the OpenBLAS path is exact) */
    entry_free(e);
    e = g_new0(ConvEntry, 1);
    entry_set_key(e, g, threads, fp);
    e->declined = TRUE;
  }
  g_hash_table_replace(cache->entries, (gpointer)g->node, e);
  return e;
}

static gboolean run_entry(const ConvEntry *e, QhConvCache *cache, void *scratch, const QhConvGeometry *g) {
  char *p = scratch;
  void *src = (void *)g->x->data, *dst = g->y;
  void *src_blk = NULL, *dst_blk = NULL, *pad = NULL;
  if (e->src_reorder) {
    src_blk = p;
    p += ALIGN_UP(e->src_bytes);
  }
  if (e->dst_reorder) {
    dst_blk = p;
    p += ALIGN_UP(e->dst_bytes);
  }
  if (e->scratch_bytes > 0)
    pad = p;
  dnnl_memory_t m_src = NULL, m_dst = NULL, m_src_blk = NULL, m_dst_blk = NULL, m_bias = NULL,
                m_pad = NULL;
  gboolean ok = dnnl_memory_create(&m_src, &e->user_src_md, engine, src) == dnnl_success &&
                dnnl_memory_create(&m_dst, &e->user_dst_md, engine, dst) == dnnl_success &&
                (!e->src_reorder || dnnl_memory_create(&m_src_blk, &e->src_md, engine, src_blk) == dnnl_success) &&
                (!e->dst_reorder || dnnl_memory_create(&m_dst_blk, &e->dst_md, engine, dst_blk) == dnnl_success) &&
                (!e->has_bias || dnnl_memory_create(&m_bias, &e->bias_md, engine, (void *)g->b) == dnnl_success) &&
                dnnl_memory_create(&m_pad, &e->scratch_md, engine, pad) == dnnl_success;
  if (ok && e->src_reorder) {
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, m_src}, {DNNL_ARG_TO, m_src_blk}};
    ok = dnnl_primitive_execute(e->src_reorder, cache->stream, 2, a) == dnnl_success;
  }
  if (ok) {
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, e->src_reorder ? m_src_blk : m_src},
                            {DNNL_ARG_WEIGHTS, e->weights},
                            {DNNL_ARG_DST, e->dst_reorder ? m_dst_blk : m_dst},
                            {DNNL_ARG_SCRATCHPAD, m_pad},
                            {DNNL_ARG_BIAS, m_bias}};
    ok = dnnl_primitive_execute(e->conv, cache->stream, e->has_bias ? 5 : 4, a) == dnnl_success;
  }
  if (ok && e->dst_reorder) {
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, m_dst_blk}, {DNNL_ARG_TO, m_dst}};
    ok = dnnl_primitive_execute(e->dst_reorder, cache->stream, 2, a) == dnnl_success;
  }
  ok = ok && dnnl_stream_wait(cache->stream) == dnnl_success;
  dnnl_memory_t all[] = {m_src, m_dst, m_src_blk, m_dst_blk, m_bias, m_pad};
  for (size_t i = 0; i < G_N_ELEMENTS(all); i++)
    if (all[i])
      dnnl_memory_destroy(all[i]);
  return ok;
}

QhConvEngineResult qh_conv_onednn(QhExecContext *ctx, const QhConvGeometry *g, GError **error) {
  const gboolean channels_last = g->src_nhwc || g->dst_nhwc;
  if (ctx->bit_compatible || !g->weights_constant || !qh_onednn_enabled()) {
    if (!channels_last)
      return QH_CONV_ENGINE_DECLINED;
    /* the layout plan gives NHWC values only to convs this engine takes */
    qh_kernel_fail(error, g->node, QH_ERROR_FAILED, "a channels-last conv needs the oneDNN engine");
    return QH_CONV_ENGINE_FAILED;
  }
  engine = qh_onednn_engine();
  if (ctx->conv_cache == NULL) {
    QhConvCache *c = g_new0(QhConvCache, 1);
    if (dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags) != dnnl_success) {
      g_free(c);
      return QH_CONV_ENGINE_DECLINED;
    }
    c->entries = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, entry_free);
    ctx->conv_cache = c;
  }
  /* oneDNN's OpenMP team gets the pool's thread count for this call only (the calling
   * thread's setting is put back: the x86 plugin keeps its own). */
  const int threads = qh_thread_pool_size(ctx->pool);
  const int saved = qh_onednn_threads_set(threads);
  QhConvEngineResult r = QH_CONV_ENGINE_DECLINED;
  const ConvEntry *e = entry_get(ctx->conv_cache, g, threads);
  if (e->declined && channels_last) {
    qh_kernel_fail(error, g->node, QH_ERROR_FAILED, "oneDNN has no channels-last fp32 convolution for it");
    r = QH_CONV_ENGINE_FAILED;
  } else if (!e->declined) {
    size_t need = ALIGN_UP(e->src_bytes) + ALIGN_UP(e->dst_bytes) + ALIGN_UP(e->scratch_bytes) + 64;
    void *scratch = qh_exec_scratch(ctx, need);
    if (scratch == NULL) {
      qh_kernel_fail(error, g->node, QH_ERROR_NOMEM, "cannot allocate %zu bytes for oneDNN", need);
      r = QH_CONV_ENGINE_FAILED;
    } else if (run_entry(e, ctx->conv_cache, scratch, g)) {
      r = QH_CONV_ENGINE_RAN;
    } else {
      qh_kernel_fail(error, g->node, QH_ERROR_FAILED, "oneDNN's fp32 convolution failed");
      r = QH_CONV_ENGINE_FAILED;
    }
  }
  qh_onednn_threads_restore(saved);
  return r;
}
