/* The fbgemm plugin's grouped convolutions (conv-grouped.h): packing for the three paths,
 * the portable C row of the direct path, and the drivers that split the work over the
 * caller's pool. The GEMM path reuses gemm.c's packed panels and micro-kernels per group
 * with an im2col of its own that reads one group's channels; the multiplier path widens
 * the input and reuses dw.c's depthwise kernels. The ISA rows of the direct path are in
 * conv-grouped-avx512vnni.c, conv-grouped-avxvnni.c and conv-grouped-avx2.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv-grouped.h"

const char *fb_group_path_name(FbGroupPath path) {
  switch (path) {
  case FB_GROUP_GEMM:
    return "gemm";
  case FB_GROUP_DIRECT:
    return "direct";
  case FB_GROUP_MULTIPLIER:
    return "multiplier";
  }
  return "?";
}

static void *alloc64(size_t n) {
  size_t sz = (n + 63) / 64 * 64;
  return aligned_alloc(64, sz ? sz : 64);
}

int64_t fb_group_lanes(FbIsa isa) { return isa == FB_ISA_AVXVNNI || isa == FB_ISA_AVX2 ? 8 : 16; }

/* The first input dword group g's channels touch, and how many they touch. */
static int64_t first_dword(int64_t g, int64_t cg) { return g * cg / 4; }
static int64_t dwords_of(int64_t g, int64_t cg) { return ((g + 1) * cg - 1) / 4 - first_dword(g, cg) + 1; }

int fb_group_direct_fits(FbIsa isa, int64_t ic, int64_t oc, int64_t groups, int64_t taps) {
  if (groups < 1 || ic % groups || oc % groups || taps > FB_GROUP_MAX_TAPS)
    return 0;
  int64_t lanes = fb_group_lanes(isa), cg = ic / groups, og = oc / groups;
  for (int64_t o0 = 0; o0 < oc; o0 += lanes) {
    int64_t last = (o0 + lanes < oc ? o0 + lanes : oc) - 1, ga = o0 / og, gb = last / og;
    if (first_dword(gb, cg) + dwords_of(gb, cg) - first_dword(ga, cg) > lanes)
      return 0;
  }
  return 1;
}

FbGroupPath fb_group_pick(FbIsa isa, int64_t ic, int64_t oc, int64_t groups, int64_t kh, int64_t kw) {
  int64_t cg = groups > 0 ? ic / groups : 0;
  if (cg == 1 && kh <= 5 && kw <= 5)
    return FB_GROUP_MULTIPLIER;
  /* qhost-fbgemm-grouped-bench (docs/fbgemm.md): on zmm the direct rows beat the GEMM
   * path on every regnet and resnext shape (1.2-66x); with AVX-VNNI up to 24 channels per
   * group (32: 0.81x); on AVX2, whose exact dot product costs two vpmaddubsw, only up to
   * 8 (resnext's first two stages) */
  int64_t most = isa == FB_ISA_AVX512VNNI || isa == FB_ISA_AMX ? INT64_MAX : isa == FB_ISA_AVXVNNI ? 24 : 8;
  if (cg <= most && fb_group_direct_fits(isa, ic, oc, groups, kh * kw))
    return FB_GROUP_DIRECT;
  return FB_GROUP_GEMM;
}

void fb_group_pack_free(FbGroupPacked *p) {
  if (!p)
    return;
  if (p->pk)
    for (int64_t g = 0; g < p->groups; g++)
      fb_pack_free(&p->pk[g]);
  free(p->pk);
  fb_dw_pack_free(&p->dw);
  free(p->base), free(p->span), free(p->idx), free(p->zsum), free(p->w), free(p->bias), free(p->mult);
  p->pk = NULL, p->base = p->span = p->idx = p->zsum = NULL, p->w = NULL, p->bias = p->mult = NULL;
}

/* One group's weights as gemm.c wants them: [og][ky][kx][ci] (im2col's order). */
static int pack_gemm(FbGroupPacked *p, const int8_t *w, const FbRequant *rq) {
  int64_t taps = p->kh * p->kw, k = taps * p->cg;
  int8_t *wr = malloc((size_t)(p->og * k));
  p->pk = calloc((size_t)p->groups, sizeof *p->pk);
  if (!wr || !p->pk) {
    free(wr);
    return -1;
  }
  /* AMX's tiles waste most of each tdpbusd below 64 reduction bytes (kernels.h) */
  FbIsa isa = p->isa == FB_ISA_AMX && k < FB_AMX_MIN_K ? FB_ISA_AVX512VNNI : p->isa;
  p->isa = isa;
  for (int64_t g = 0; g < p->groups; g++) {
    for (int64_t o = 0; o < p->og; o++)
      for (int64_t t = 0; t < taps; t++)
        for (int64_t ci = 0; ci < p->cg; ci++)
          wr[o * k + t * p->cg + ci] = w[((g * p->og + o) * p->cg + ci) * taps + t];
    FbRequant gq = *rq;
    gq.bias = rq->bias + g * p->og, gq.mult = rq->mult + g * p->og;
    if (fb_pack_for(isa, &p->pk[g], wr, p->og, k, &gq)) {
      free(wr);
      return -1;
    }
  }
  free(wr);
  return 0;
}

static int pack_direct(FbGroupPacked *p, const int8_t *w, const FbRequant *rq) {
  int64_t lanes = p->lanes, taps = p->kh * p->kw, cg = p->cg, og = p->og;
  p->nblk = (p->oc + lanes - 1) / lanes;
  p->nq = 1;
  for (int64_t g = 0; g < p->groups; g++)
    p->nq = dwords_of(g, cg) > p->nq ? dwords_of(g, cg) : p->nq;
  size_t nl = (size_t)(p->nblk * lanes);
  p->base = malloc((size_t)p->nblk * sizeof *p->base);
  p->span = malloc((size_t)p->nblk * sizeof *p->span);
  p->idx = alloc64(nl * (size_t)p->nq * sizeof *p->idx);
  p->w = alloc64(nl * (size_t)(taps * p->nq) * 4);
  p->zsum = alloc64(nl * sizeof *p->zsum);
  p->bias = alloc64(nl * sizeof *p->bias);
  p->mult = alloc64(nl * sizeof *p->mult);
  if (!p->base || !p->span || !p->idx || !p->w || !p->zsum || !p->bias || !p->mult)
    return -1;
  memset(p->w, 0, nl * (size_t)(taps * p->nq) * 4);
  for (int64_t b = 0; b < p->nblk; b++) {
    int64_t o0 = b * lanes, base = first_dword(o0 / og, cg), top = 0;
    p->base[b] = (int32_t)base;
    for (int64_t j = 0; j < lanes; j++) {
      int64_t o = o0 + j, g = o / og, d0 = first_dword(g, cg);
      for (int64_t q = 0; q < p->nq; q++) {
        /* a padding lane, or a chunk past its group's last dword, reads dword 0 against
         * zero weights */
        int live = o < p->oc && q < dwords_of(g, cg);
        p->idx[(b * p->nq + q) * lanes + j] = live ? (int32_t)(d0 + q - base) : 0;
        if (live)
          top = d0 + q - base + 1 > top ? d0 + q - base + 1 : top;
        for (int64_t t = 0; live && t < taps; t++)
          for (int64_t tt = 0; tt < 4; tt++) {
            int64_t rel = 4 * (d0 + q) + tt - g * cg;
            if (rel >= 0 && rel < cg)
              p->w[(((b * taps + t) * p->nq + q) * lanes + j) * 4 + tt] = w[(o * cg + rel) * taps + t];
          }
      }
      int32_t sum = 0;
      for (int64_t i = 0; o < p->oc && i < cg * taps; i++)
        sum += w[o * cg * taps + i];
      p->zsum[o0 + j] = rq->zx * sum;
      p->bias[o0 + j] = o < p->oc ? rq->bias[o] : 0.0f;
      p->mult[o0 + j] = o < p->oc ? rq->mult[o] : 0.0f;
    }
    p->span[b] = (int32_t)top;
  }
  return 0;
}

int fb_group_pack(FbGroupPacked *p, FbIsa isa, FbGroupPath path, const int8_t *w, int64_t ic, int64_t oc,
                  int64_t groups, int64_t kh, int64_t kw, const FbRequant *rq) {
  memset(p, 0, sizeof *p);
  if (groups < 1 || ic % groups || oc % groups || kh < 1 || kw < 1)
    return -2;
  p->path = path, p->isa = isa, p->groups = groups, p->ic = ic, p->oc = oc, p->kh = kh, p->kw = kw;
  p->cg = ic / groups, p->og = oc / groups, p->lanes = fb_group_lanes(isa);
  p->lo = (float)(rq->lo - rq->zo), p->hi = (float)(rq->hi - rq->zo);
  p->zx = rq->zx, p->zo = rq->zo;
  int bad;
  if (path == FB_GROUP_MULTIPLIER) {
    if (p->cg != 1)
      return -2;
    /* ONNX's [C * k][1][kh][kw] is already dw.c's [channel][ky][kx] */
    bad = fb_dw_pack(&p->dw, w, oc, kh, kw, rq);
  } else if (path == FB_GROUP_DIRECT) {
    if (!fb_group_direct_fits(isa, ic, oc, groups, kh * kw))
      return -2;
    bad = pack_direct(p, w, rq);
  } else {
    bad = pack_gemm(p, w, rq);
  }
  if (bad)
    fb_group_pack_free(p);
  return bad ? -1 : 0;
}

/* Rows per GEMM block: a multiple of the micro-kernel's row tile, about 128 KiB of im2col
 * rows (a group's panels are small, so the rows are most of what stays in cache). */
static int64_t block_rows(const FbGroupPacked *p, int64_t m) {
  const FbPacked *pk = &p->pk[0];
  int64_t q = pk->mq > 0 ? pk->mq : 12, cap = 128 * 1024 / pk->kp / q * q;
  cap = cap < q ? q : cap > 480 ? 480 / q * q : cap;
  int64_t blocks = (m + cap - 1) / cap;
  int64_t mb = ((m + blocks - 1) / blocks + q - 1) / q * q;
  return mb < q ? q : mb;
}

static size_t widened_bytes(const FbConv *c) { return (size_t)(c->n * c->ih * c->iw * c->oc + 63) / 64 * 64; }

size_t fb_group_workspace(const FbConv *c, const FbGroupPacked *p, uint32_t n_workers) {
  uint32_t w = n_workers ? n_workers : 1;
  if (p->path == FB_GROUP_MULTIPLIER) {
    FbConv wide = *c;
    wide.ic = c->oc;
    return widened_bytes(c) + fb_dw_workspace(p->isa, &wide, &p->dw, w);
  }
  if (p->path == FB_GROUP_DIRECT)
    return 0;
  return (size_t)w * (size_t)(block_rows(p, c->n * c->oh * c->ow) * p->pk[0].kp);
}

/* ---- the GEMM path ---- */

typedef struct {
  const FbConv *c;
  const FbGroupPacked *p;
  const uint8_t *x;
  uint8_t *y, *ws;
  FbBlockFn block;
  int64_t m, mb, mblocks;
  size_t slot;
} GemmJob;

/* Rows [m0, m0 + mr) of group g's im2col matrix, kp bytes each, taps in (ky, kx, ci)
 * order; taps outside the image read zx, which the column offsets cancel. */
static void im2col_group(const GemmJob *j, int64_t g, int64_t m0, int64_t mr, uint8_t *dst) {
  const FbConv *c = j->c;
  const FbPacked *pk = &j->p->pk[g];
  int64_t cg = j->p->cg;
  const uint8_t *xg = j->x + g * cg;
  for (int64_t r = 0; r < mr; r++) {
    int64_t m = m0 + r, ox = m % c->ow, oy = (m / c->ow) % c->oh, b = m / (c->ow * c->oh);
    uint8_t *d = dst + r * pk->kp;
    for (int64_t ky = 0; ky < c->kh; ky++) {
      int64_t iy = oy * c->sh - c->pt + ky * c->dh;
      for (int64_t kx = 0; kx < c->kw; kx++, d += cg) {
        int64_t ix = ox * c->sw - c->pl + kx * c->dw;
        if (iy < 0 || iy >= c->ih || ix < 0 || ix >= c->iw)
          memset(d, pk->zx, (size_t)cg);
        else
          memcpy(d, xg + ((b * c->ih + iy) * c->iw + ix) * c->ic, (size_t)cg);
      }
    }
    memset(d, 0, (size_t)(pk->kp - pk->k));
  }
}

static void gemm_task(void *user, size_t i, uint32_t worker) {
  const GemmJob *j = user;
  int64_t g = (int64_t)i % j->p->groups, mbi = (int64_t)i / j->p->groups;
  int64_t m0 = mbi * j->mb, mr = j->m - m0 < j->mb ? j->m - m0 : j->mb;
  const FbPacked *pk = &j->p->pk[g];
  uint8_t *a = j->ws + j->slot * worker;
  im2col_group(j, g, m0, mr, a);
  FbBlockFn fn = j->block;
  /* vpmaddubsw's pair sums are exact only for bytes <= 127 (gemm.c does the same) */
  if (fn == fb_block_avx2 && fb_rows_above_127(a, (size_t)pk->kp, mr, pk->k))
    fn = fb_block_avx2_exact;
  if (fn == fb_block_amx && mr < 16)
    fn = fb_block_avx512vnni;
  fn(a, (size_t)pk->kp, mr, pk, 0, pk->npanel, j->y + m0 * j->c->oc + g * j->p->og, (size_t)j->c->oc);
}

static void run_tasks(const FbPool *pool, size_t n, FbTaskFn task, void *user) {
  if (pool && pool->run && pool->n_workers > 1 && n > 1)
    pool->run(pool->runner, n, task, user);
  else
    for (size_t i = 0; i < n; i++)
      task(user, i, 0);
}

static void run_gemm(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, uint8_t *y, void *ws,
                     const FbPool *pool) {
  FbIsa isa = p->isa;
  GemmJob j = {.c = c, .p = p, .x = x, .y = y, .ws = ws, .m = c->n * c->oh * c->ow};
  j.block = isa == FB_ISA_AMX          ? fb_block_amx
            : isa == FB_ISA_AVX512VNNI ? fb_block_avx512vnni
            : isa == FB_ISA_AVXVNNI    ? fb_block_avxvnni
            : isa == FB_ISA_AVX2       ? fb_block_avx2
                                       : fb_block_c;
  j.mb = block_rows(p, j.m);
  j.mblocks = (j.m + j.mb - 1) / j.mb;
  j.slot = (size_t)(j.mb * p->pk[0].kp);
  run_tasks(pool, (size_t)(j.mblocks * p->groups), gemm_task, &j);
}

/* ---- the direct path ---- */

typedef struct {
  const FbConv *c;
  const FbGroupPacked *p;
  const uint8_t *x;
  uint8_t *y;
  FbGroupRowFn row;
} RowJob;

static void row_task(void *user, size_t i, uint32_t worker) {
  (void)worker;
  const RowJob *j = user;
  int64_t b = (int64_t)i / j->c->oh, oy = (int64_t)i % j->c->oh;
  j->row(j->c, j->p, j->x, b, oy, j->y);
}

void fb_group_row_c(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y) {
  int64_t lanes = p->lanes, taps = c->kh * c->kw, nq = p->nq;
  for (int64_t ox = 0; ox < c->ow; ox++) {
    uint8_t *out = y + ((b * c->oh + oy) * c->ow + ox) * c->oc;
    for (int64_t blk = 0; blk < p->nblk; blk++) {
      int32_t acc[16] = {0};
      for (int64_t t = 0; t < taps; t++) {
        int64_t iy = oy * c->sh - c->pt + (t / c->kw) * c->dh, ix = ox * c->sw - c->pl + (t % c->kw) * c->dw;
        int in = iy >= 0 && iy < c->ih && ix >= 0 && ix < c->iw;
        const uint8_t *px = in ? x + ((b * c->ih + iy) * c->iw + ix) * c->ic : NULL;
        for (int64_t q = 0; q < nq; q++)
          for (int64_t j = 0; j < lanes; j++) {
            const int8_t *wv = p->w + (((blk * taps + t) * nq + q) * lanes + j) * 4;
            int64_t byte0 = 4 * (p->base[blk] + p->idx[(blk * nq + q) * lanes + j]);
            for (int64_t tt = 0; tt < 4; tt++)
              if (wv[tt]) /* bytes outside the lane's group meet zero weights */
                acc[j] += (px ? px[byte0 + tt] : p->zx) * wv[tt];
          }
      }
      for (int64_t j = 0; j < lanes && blk * lanes + j < c->oc; j++) {
        int64_t o = blk * lanes + j;
        out[o] = fb_requant_one(acc[j] - p->zsum[o], p->bias[o], p->mult[o], p->lo, p->hi, p->zo);
      }
    }
  }
}

static void run_direct(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, uint8_t *y, const FbPool *pool) {
  RowJob j = {.c = c, .p = p, .x = x, .y = y};
  j.row = p->isa == FB_ISA_AVX512VNNI || p->isa == FB_ISA_AMX ? fb_group_row_avx512vnni
          : p->isa == FB_ISA_AVXVNNI                           ? fb_group_row_avxvnni
          : p->isa == FB_ISA_AVX2                              ? fb_group_row_avx2
                                                               : fb_group_row_c;
  run_tasks(pool, (size_t)(c->n * c->oh), row_task, &j);
}

/* ---- the multiplier path ---- */

typedef struct {
  const FbConv *c;
  const uint8_t *x;
  uint8_t *wide;
  int64_t k;
} WidenJob;

/* One input row, each channel copied k times (channel c of the input feeds output
 * channels c * k .. c * k + k - 1). */
static void widen_task(void *user, size_t i, uint32_t worker) {
  (void)worker;
  const WidenJob *j = user;
  const FbConv *c = j->c;
  const uint8_t *s = j->x + (size_t)i * (size_t)(c->iw * c->ic);
  uint8_t *d = j->wide + (size_t)i * (size_t)(c->iw * c->oc);
  for (int64_t px = 0; px < c->iw * c->ic; px++, s++)
    for (int64_t r = 0; r < j->k; r++)
      *d++ = *s;
}

static void run_multiplier(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, uint8_t *y, void *ws,
                           const FbPool *pool) {
  WidenJob wj = {.c = c, .x = x, .wide = ws, .k = c->oc / c->ic};
  run_tasks(pool, (size_t)(c->n * c->ih), widen_task, &wj);
  FbConv wide = *c;
  wide.ic = c->oc;
  size_t dws = fb_dw_workspace(p->isa, &wide, &p->dw, 1);
  fb_dw_run(p->isa, &wide, &p->dw, wj.wide, y, dws ? (uint8_t *)ws + widened_bytes(c) : NULL, pool);
}

void fb_group_run(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, uint8_t *y, void *ws,
                  const FbPool *pool) {
  if (c->n * c->oh * c->ow == 0 || c->oc == 0)
    return;
  if (p->path == FB_GROUP_MULTIPLIER)
    run_multiplier(c, p, x, y, ws, pool);
  else if (p->path == FB_GROUP_DIRECT)
    run_direct(c, p, x, y, pool);
  else
    run_gemm(c, p, x, y, ws, pool);
}
