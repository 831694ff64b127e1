/* The fbgemm plugin's depthwise convolution (group = channels, one output channel per
 * input channel; square 3x3 and 5x5 in the lowering, any size here): weights packed once
 * tap-major into int32 rows of the padded channel count, so the AVX2 path
 * (plugins/fbgemm/dw-avx2.c) loads one vector of channels per tap, and in dwords of 4
 * kernel rows for vpdpbusd (plugins/fbgemm/dw-avx512vnni.c, dw-avxvnni.c), and for 3x3 a
 * lane-ordered copy for dw-avx512vnni-3x3.c; the portable C path; and the driver that
 * splits output rows (and, for small 3x3 maps, blocks of channels) over the caller's pool,
 * for 3x3 as one home range of them per worker (kept from call to call, so each core
 * finds its rows in its own caches) that the others claim from when done. Every path
 * accumulates (x - zx) * w over the taps inside the image in int32 (a
 * padding tap would add (zx - zx) * w = 0, so skipping it is exact) and requantizes with
 * kernels.h's output rule, so each is bit-exact with the scalar twin, fb_dw_ref (ref.c).
 * No row buffer, no im2col: FBGEMM's depthwise kernels are direct too. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* The AVX-512 VNNI 3x3 path's copies (kernels.h), lane-ordered in blocks and pieces, from
 * p->zsum (already filled) and the caller's weights. */
static int pack_3x3(FbDwPacked *p, const int8_t *w, const FbRequant *rq) {
  const int64_t cq = p->cq, ch = p->c;
  for (int s = 0; s < 2; s++)
    p->w3[s] = aligned_alloc(64, (size_t)(3 * cq) * 4);
  p->zsum3 = aligned_alloc(64, (size_t)cq * sizeof *p->zsum3);
  p->bias3 = aligned_alloc(64, (size_t)cq * sizeof *p->bias3);
  p->mult3 = aligned_alloc(64, (size_t)cq * sizeof *p->mult3);
  if (!p->w3[0] || !p->w3[1] || !p->zsum3 || !p->bias3 || !p->mult3)
    return -1;
  const int64_t full = ch / 64 * 64; /* the tail block's pieces: fb_dw3_tail_channel */
  for (int64_t pos = 0; pos < cq; pos++) {
    int64_t c = pos < full ? pos / 64 * 64 + fb_dw_lane_channel(pos % 64) : full + fb_dw3_tail_channel(pos - full, ch - full);
    int in = c < ch;
    p->zsum3[pos] = in ? p->zsum[c] : 0;
    p->bias3[pos] = in ? rq->bias[c] : 0.0f;
    p->mult3[pos] = in ? rq->mult[c] : 0.0f;
    for (int64_t kx = 0; kx < 3; kx++)
      for (int t = 0; t < 4; t++) {
        /* byte t of the dword: kernel row t for the upper output row, t - 1 for the lower */
        p->w3[0][(kx * cq + pos) * 4 + t] = in && t < 3 ? w[c * 9 + t * 3 + kx] : 0;
        p->w3[1][(kx * cq + pos) * 4 + t] = in && t > 0 ? w[c * 9 + (t - 1) * 3 + kx] : 0;
      }
  }
  return 0;
}

/* kernels.h's int_bias3 and nzb3 (lane order as pack_3x3's zsum3) when every bias
 * qualifies; nzb3 stays NULL otherwise. */
static int pack_int_bias3(FbDwPacked *p, const FbRequant *rq) {
  const int64_t cq = p->cq, ch = p->c, full = ch / 64 * 64;
  for (int64_t c = 0; c < ch; c++) {
    float b = rq->bias[c];
    if (!(b == rintf(b) && fabs((double)b) + 9.0 * 255.0 * 128.0 < FB_DW3_INT_BIAS_MAX))
      return 0;
  }
  p->nzb3 = aligned_alloc(64, (size_t)cq * sizeof *p->nzb3);
  if (!p->nzb3)
    return -1;
  for (int64_t pos = 0; pos < cq; pos++) {
    int64_t c = pos < full ? pos / 64 * 64 + fb_dw_lane_channel(pos % 64) : full + fb_dw3_tail_channel(pos - full, ch - full);
    p->nzb3[pos] = FB_DW3_MAGIC + (c < ch ? (int32_t)rq->bias[c] - p->zsum[c] : 0);
  }
  p->int_bias3 = 1;
  return 0;
}

int fb_dw_pack(FbDwPacked *p, const int8_t *w, int64_t ch, int64_t kh, int64_t kw, const FbRequant *rq) {
  memset(p, 0, sizeof *p);
  int64_t cp = (ch + FB_DW_NR - 1) / FB_DW_NR * FB_DW_NR, taps = kh * kw, groups = (kh + 3) / 4;
  int64_t cq = (ch + 63) / 64 * 64;
  p->c = ch, p->cp = cp, p->cq = cq, p->taps = taps, p->kh = kh, p->kw = kw, p->groups = groups;
  /* 64-byte aligned so that whole rows load as aligned vectors; aligned_alloc wants a
   * multiple of the alignment, which cp * 4 bytes (cp a multiple of 16) is */
  p->w = aligned_alloc(64, (size_t)(taps * cp) * sizeof *p->w);
  p->w4 = aligned_alloc(64, (size_t)(groups * kw * cp) * 4);
  p->zsum = aligned_alloc(64, (size_t)cp * sizeof *p->zsum);
  p->bias = aligned_alloc(64, (size_t)cp * sizeof *p->bias);
  p->mult = aligned_alloc(64, (size_t)cp * sizeof *p->mult);
  if (!p->w || !p->w4 || !p->zsum || !p->bias || !p->mult) {
    fb_dw_pack_free(p);
    return -1;
  }
  for (int64_t t = 0; t < taps; t++)
    for (int64_t c = 0; c < cp; c++)
      p->w[t * cp + c] = c < ch ? w[c * taps + t] : 0;
  for (int64_t g = 0; g < groups; g++)
    for (int64_t kx = 0; kx < kw; kx++)
      for (int64_t c = 0; c < cp; c++)
        for (int64_t t = 0; t < 4; t++) {
          int64_t ky = 4 * g + t;
          p->w4[((g * kw + kx) * cp + c) * 4 + t] = c < ch && ky < kh ? w[c * taps + ky * kw + kx] : 0;
        }
  for (int64_t c = 0; c < cp; c++) {
    int32_t sum = 0;
    for (int64_t t = 0; c < ch && t < taps; t++)
      sum += w[c * taps + t];
    p->zsum[c] = rq->zx * sum;
  }
  for (int64_t c = 0; c < cp; c++) {
    p->bias[c] = c < ch ? rq->bias[c] : 0.0f;
    p->mult[c] = c < ch ? rq->mult[c] : 0.0f;
  }
  if (kh == 3 && kw == 3 && pack_3x3(p, w, rq) != 0) {
    fb_dw_pack_free(p);
    return -1;
  }
  p->lo = (float)(rq->lo - rq->zo);
  p->hi = (float)(rq->hi - rq->zo);
  p->hi8 = (uint8_t)rq->hi;
  /* |acc| <= 9 * 255 * 128 for a 3x3 window; 2e9 leaves room below 2^31 for the float
   * roundings of the sum and the product (and a NaN or infinity fails the test) */
  p->byte_hi = kh == 3 && kw == 3;
  for (int64_t c = 0; c < ch && p->byte_hi; c++)
    p->byte_hi = (9.0 * 255.0 * 128.0 + fabs((double)rq->bias[c])) * fabs((double)rq->mult[c]) < 2e9;
  if (p->byte_hi && pack_int_bias3(p, rq) != 0) {
    fb_dw_pack_free(p);
    return -1;
  }
  p->zx = rq->zx, p->zo = rq->zo;
  return 0;
}

void fb_dw_pack_free(FbDwPacked *p) {
  if (!p)
    return;
  free(p->w), free(p->w4), free(p->zsum), free(p->bias), free(p->mult);
  free(p->w3[0]), free(p->w3[1]), free(p->zsum3), free(p->bias3), free(p->mult3), free(p->nzb3);
  p->w = NULL, p->w4 = NULL, p->zsum = NULL, p->bias = p->mult = NULL;
  p->w3[0] = p->w3[1] = NULL, p->zsum3 = NULL, p->bias3 = p->mult3 = NULL, p->nzb3 = NULL;
  p->int_bias3 = 0;
}

void fb_dw_pixel_c(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy, int64_t ox,
                   int64_t c0, int64_t c1, uint8_t *y) {
  int64_t ky0, ky1, kx0, kx1;
  fb_dw_range(oy * c->sh - c->pt, c->ih, c->kh, c->dh, &ky0, &ky1);
  fb_dw_range(ox * c->sw - c->pl, c->iw, c->kw, c->dw, &kx0, &kx1);
  int32_t acc[FB_DW_NR];
  for (int64_t cb = c0; cb < c1; cb += FB_DW_NR) {
    int64_t n = c1 - cb < FB_DW_NR ? c1 - cb : FB_DW_NR;
    memset(acc, 0, sizeof acc);
    for (int64_t ky = ky0; ky < ky1; ky++)
      for (int64_t kx = kx0; kx < kx1; kx++) {
        int64_t iy = oy * c->sh - c->pt + ky * c->dh, ix = ox * c->sw - c->pl + kx * c->dw;
        const uint8_t *xp = x + ((b * c->ih + iy) * c->iw + ix) * c->ic + cb;
        const int32_t *wp = p->w + (ky * c->kw + kx) * p->cp + cb;
        for (int64_t j = 0; j < n; j++)
          acc[j] += ((int32_t)xp[j] - p->zx) * wp[j];
      }
    uint8_t *out = y + ((b * c->oh + oy) * c->ow + ox) * c->oc + cb;
    for (int64_t j = 0; j < n; j++)
      out[j] = fb_requant_one(acc[j], p->bias[cb + j], p->mult[cb + j], p->lo, p->hi, p->zo);
  }
}

void fb_dw_row_c(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y,
                 void *ws) {
  (void)ws;
  for (int64_t ox = 0; ox < c->ow; ox++)
    fb_dw_pixel_c(c, p, x, b, oy, ox, 0, c->oc, y);
}

/* A home range of the 3x3 path's units on several workers: [lo, hi) in one word (lo in
 * the low 32 bits), so that its owner takes units from the front and other workers from
 * the back with one compare-and-swap each; a cache line of its own, as each owner writes
 * its own range all the time. */
#define FB_DW_MAX_HOMES 64
typedef struct {
  _Alignas(64) _Atomic uint64_t range;
} DwHome;

static void fb_dw_home_init(DwHome *h, int64_t lo, int64_t hi) {
  atomic_init(&h->range, (uint64_t)hi << 32 | (uint64_t)lo);
}

/* The unit taken from h's front (back 0) or back (1), or -1 when h is empty. Relaxed
 * order: the units' data are disjoint, and the pool's return orders every write. */
static int64_t fb_dw_claim(DwHome *h, int back) {
  uint64_t r = atomic_load_explicit(&h->range, memory_order_relaxed);
  for (;;) {
    uint64_t lo = r & 0xFFFFFFFFu, hi = r >> 32;
    if (lo >= hi)
      return -1;
    uint64_t next = back ? (hi - 1) << 32 | lo : r + 1;
    if (atomic_compare_exchange_weak_explicit(&h->range, &r, next, memory_order_relaxed, memory_order_relaxed))
      return (int64_t)(back ? hi - 1 : lo);
  }
}

/* Output rows [oy0, oy1) of image b, with a workspace slice ws. */
typedef void (*DwRowsFn)(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy0,
                         int64_t oy1, uint8_t *y, void *ws);

typedef struct {
  FbDwRowFn row; /* one row per task (band 1) */
  DwRowsFn rows; /* bands of rows otherwise */
  const FbConv *c;
  const FbDwPacked *p;
  const uint8_t *x;
  uint8_t *y;
  uint8_t *ws;
  size_t slice;  /* workspace bytes per worker */
  int64_t band;  /* output rows per task (the AVX-512 VNNI paths; 1 otherwise) */
  int64_t bands; /* tasks per image */
  int64_t cgs, cg; /* the 3x3 path: channel groups per band and channels per group */
  DwHome *homes;   /* the 3x3 path on several workers: one home range of units per worker */
  int64_t n_homes, units;
} DwJob;

/* One unit of the 3x3 path: units run band-major, the channel groups of a band next to
 * each other, so that a home range (a run of consecutive units) is a band of whole rows
 * but at its two ends. */
static void dw3_unit(const DwJob *j, int64_t u, uint32_t worker) {
  int64_t g = u % j->cgs, r = u / j->cgs, b = r / j->bands, oy0 = r % j->bands * j->band;
  int64_t oy1 = oy0 + j->band < j->c->oh ? oy0 + j->band : j->c->oh;
  int64_t c0 = g * j->cg, c1 = c0 + j->cg < j->c->ic ? c0 + j->cg : j->c->ic;
  fb_dw3_rows_avx512vnni(j->c, j->p, j->x, b, oy0, oy1, c0, c1, j->y, j->ws + worker * j->slice);
}

/* A pool task of the 3x3 path: the units of the calling worker's home range from its
 * front, then the other ranges' from their backs (away from where their owners work)
 * until none is left. The home goes by worker, not by task index: a pool's worker
 * numbers are its threads (the team's thread numbers, in the host's parallel_for as in
 * the bench), while which thread takes which task index changes from call to call (task
 * 0 ran on the second thread in 10-35% of the calls, dw6). Every unit is claimed once
 * (fb_dw_claim), so the result does not depend on which task runs where or when; a task
 * that finds every range taken returns. */
static void dw3_home_task(void *user, size_t i, uint32_t worker) {
  (void)i;
  const DwJob *j = user;
  int64_t u, h = (int64_t)worker % j->n_homes;
  while ((u = fb_dw_claim(&j->homes[h], 0)) >= 0)
    dw3_unit(j, u, worker);
  for (int64_t k = 1; k < j->n_homes; k++)
    while ((u = fb_dw_claim(&j->homes[(h + k) % j->n_homes], 1)) >= 0)
      dw3_unit(j, u, worker);
}

static void dw_task(void *user, size_t i, uint32_t worker) {
  const DwJob *j = user;
  uint8_t *ws = j->ws ? j->ws + worker * j->slice : NULL;
  if (!j->rows) {
    j->row(j->c, j->p, j->x, (int64_t)i / j->c->oh, (int64_t)i % j->c->oh, j->y, ws);
    return;
  }
  int64_t b = (int64_t)i / j->bands, oy0 = (int64_t)i % j->bands * j->band;
  int64_t oy1 = oy0 + j->band < j->c->oh ? oy0 + j->band : j->c->oh;
  j->rows(j->c, j->p, j->x, b, oy0, oy1, j->y, ws);
}

size_t fb_dw_workspace(FbIsa isa, const FbConv *c, const FbDwPacked *p, uint32_t n_workers) {
  isa = isa == FB_ISA_AMX ? FB_ISA_AVX512VNNI : isa; /* no tiles for depthwise */
  if (isa != FB_ISA_AVX512VNNI && isa != FB_ISA_AVXVNNI)
    return 0;
  size_t slice = fb_dw_row_bytes(c, p) + ((size_t)c->ic + 63) / 64 * 64;
  return slice * (n_workers ? n_workers : 1);
}

void fb_dw_run(FbIsa isa, const FbConv *c, const FbDwPacked *p, const uint8_t *x, uint8_t *y, void *ws,
               const FbPool *pool) {
  isa = isa == FB_ISA_AMX ? FB_ISA_AVX512VNNI : isa;
  DwJob j = {.row = isa == FB_ISA_AVX512VNNI ? fb_dw_row_avx512vnni
                    : isa == FB_ISA_AVXVNNI  ? fb_dw_row_avxvnni
                    : isa == FB_ISA_AVX2     ? fb_dw_row_avx2
                                             : fb_dw_row_c,
             .c = c, .p = p, .x = x, .y = y, .ws = ws, .slice = fb_dw_workspace(isa, c, p, 1)};
  size_t rows = (size_t)(c->n * c->oh);
  j.band = 1, j.bands = c->oh;
  uint32_t workers = pool && pool->run && pool->n_workers > 1 ? pool->n_workers : 1;
  if (isa == FB_ISA_AVX512VNNI && p->w3[0] && c->oh > 0 && c->ic > 0) {
    /* 3x3: with stride 1 and dilation 1 one row buffer serves a pair of output rows; with
     * several workers the blocks of 64 channels are split too, so that the few rows of
     * 14x14 and 7x7 maps still give every worker about 4 tasks of equal size */
    {   /* bands of rows (of pairs at stride 1), each sharing input rows down a chunk of columns;
         * about 8 per worker, so that the home ranges split the rows evenly (with 4, a 56x56
         * map's 7 bands split 4:3 over two workers) and a steal takes a small piece */
      int64_t want_bands = workers > 1 ? ((int64_t)workers * 8 + c->n - 1) / c->n : 1;
      j.band = (c->oh + want_bands - 1) / want_bands;
      j.band = c->sh == 1 && c->dh == 1 ? (j.band + 1) / 2 * 2 : j.band;
    }
    j.bands = (c->oh + j.band - 1) / j.band;
    int64_t blocks = (c->ic + 63) / 64, tasks = c->n * j.bands, want = (int64_t)workers * 4;
    j.cgs = workers > 1 && tasks < want ? (want + tasks - 1) / tasks : 1;
    j.cgs = j.cgs > blocks ? blocks : j.cgs;
    j.cg = (blocks + j.cgs - 1) / j.cgs * 64;
    j.cgs = (c->ic + j.cg - 1) / j.cg;
    j.units = tasks * j.cgs;
    /* one pool task per worker, each worker with a fixed home range of units: a worker
     * that runs the same layer again finds its input rows, weights and output lines in
     * its own caches, where units handed out one at a time moved between the cores from
     * call to call (14x14x384 gained nothing from a second worker: 9.9 us at one thread
     * and at two; 6.9 us with homes, dw6); a worker that finishes early claims the rest
     * of a late one's range */
    DwHome homes[FB_DW_MAX_HOMES];
    j.n_homes = workers < FB_DW_MAX_HOMES ? workers : FB_DW_MAX_HOMES;
    j.n_homes = j.n_homes < j.units ? j.n_homes : j.units;
    if (!pool || !pool->run || j.n_homes < 2 || j.units > (int64_t)UINT32_MAX) {
      for (int64_t u = 0; u < j.units; u++)
        dw3_unit(&j, u, 0);
      return;
    }
    for (int64_t h = 0; h < j.n_homes; h++)
      fb_dw_home_init(&homes[h], j.units * h / j.n_homes, j.units * (h + 1) / j.n_homes);
    j.homes = homes;
    pool->run(pool->runner, (size_t)j.n_homes, dw3_home_task, &j);
    return;
  } else if (isa == FB_ISA_AVX512VNNI && c->sh == 1 && c->dh == 1 && p->groups == 1 && c->oh > 0) {
    /* bands of rows, so that each task rolls its row buffer down; about 4 per worker */
    int64_t want = (int64_t)workers * 4;
    j.rows = fb_dw_rows_avx512vnni;
    j.band = (c->n * c->oh + want - 1) / want;
    j.band = j.band < 1 ? 1 : j.band > c->oh ? c->oh : j.band;
    j.bands = (c->oh + j.band - 1) / j.band;
    rows = (size_t)(c->n * j.bands);
  }
  /* with a row buffer, workers beyond the one the caller sized ws for must not run */
  if (pool && pool->run && rows > 1 && (!ws || pool->n_workers > 1)) {
    pool->run(pool->runner, rows, dw_task, &j);
    return;
  }
  for (size_t i = 0; i < rows; i++)
    dw_task(&j, i, 0);
}
