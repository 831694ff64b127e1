/* The packed-GEMM side of the fbgemm plugin, in portable C: packing the weights once into
 * the micro-kernels' panels (FBGEMM's PackBMatrix idea: 16 output channels by groups of
 * 4 reduction bytes, with the column offsets and padded requantization arrays), the plain
 * C micro-kernel over that layout, and the driver that splits a convolution into blocks
 * of output rows, builds each block's im2col rows in the worker's own slice of the
 * workspace just before its GEMM (PackAWithIm2Col's idea, fused per block so the rows are
 * still in cache), and hands the blocks to the ISA's micro-kernel. 1x1 unpadded
 * convolutions (strided ones through row pointers on AVX-512 VNNI, else one output row
 * at a time) and linear layers read their input in place; on AVX-512 VNNI larger
 * kernels read a padded copy of the input, a tap (channels a multiple of 4) or a kernel
 * row (fb_pack_kernel_rows: first layers) at a time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

static void *alloc64(size_t n) {
  size_t sz = (n + 63) / 64 * 64;
  return aligned_alloc(64, sz ? sz : 64);
}

void fb_pack_free(FbPacked *p) {
  if (!p)
    return;
  free(p->b);
  free(p->zcol);
  free(p->nzcol);
  free(p->nzbias);
  free(p->bias);
  free(p->mult);
  p->b = NULL, p->zcol = p->nzcol = p->nzbias = NULL, p->bias = p->mult = NULL;
}

int fb_pack(FbPacked *p, const int8_t *w, int64_t n, int64_t k, const FbRequant *rq) {
  return fb_pack_for(FB_ISA_PACKED_C, p, w, n, k, rq);
}

int fb_pack_for(FbIsa isa, FbPacked *p, const int8_t *w, int64_t n, int64_t k, const FbRequant *rq) {
  memset(p, 0, sizeof *p);
  int64_t kalign = isa == FB_ISA_AMX ? 64 : 4;
  p->n = n, p->k = k, p->kp = (k + kalign - 1) / kalign * kalign, p->npanel = (n + FB_NR - 1) / FB_NR;
  p->mq = isa == FB_ISA_AMX ? 32 : 12;
  size_t cols = (size_t)(p->npanel * FB_NR);
  p->b = alloc64((size_t)p->npanel * (size_t)p->kp * FB_NR);
  p->zcol = alloc64(cols * sizeof *p->zcol);
  p->nzcol = alloc64(cols * sizeof *p->nzcol);
  p->nzbias = alloc64(cols * sizeof *p->nzbias);
  p->bias = alloc64(cols * sizeof *p->bias);
  p->mult = alloc64(cols * sizeof *p->mult);
  if (!p->b || !p->zcol || !p->nzcol || !p->nzbias || !p->bias || !p->mult) {
    fb_pack_free(p);
    return -1;
  }
  memset(p->b, 0, (size_t)p->npanel * (size_t)p->kp * FB_NR);
  int64_t k4n = p->kp / 4;
  p->int_bias = 1;
  for (int64_t c = 0; c < (int64_t)cols; c++) {
    int64_t pan = c / FB_NR, j = c % FB_NR;
    int32_t sum = 0;
    double abs_sum = 0;
    if (c < n)
      for (int64_t kk = 0; kk < k; kk++) {
        int8_t v = w[c * k + kk];
        p->b[((pan * k4n + kk / 4) * FB_NR + j) * 4 + kk % 4] = v;
        sum += v;
        abs_sum += v < 0 ? -v : v;
      }
    p->zcol[c] = rq->zx * sum;
    p->nzcol[c] = -p->zcol[c];
    p->bias[c] = c < n ? rq->bias[c] : 0.0f;
    p->mult[c] = c < n ? rq->mult[c] : 0.0f;
    /* kernels.h's conditions for the short epilogue; |x - zx| <= 255 for any uint8 */
    float bias = p->bias[c], mult = p->mult[c];
    int exact = bias == rintf(bias) && 255.0 * abs_sum + fabs((double)bias) <= FB_INT_BIAS_MAX &&
                isfinite(mult) && fabsf(mult) <= 64.0f;
    p->int_bias &= exact;
    p->nzbias[c] = exact ? (int32_t)bias - p->zcol[c] : 0;
  }
  p->lo = (float)(rq->lo - rq->zo);
  p->hi = (float)(rq->hi - rq->zo);
  p->zx = rq->zx, p->zo = rq->zo;
  return 0;
}

int fb_pack_kernel_rows(FbIsa isa, FbPacked *p, const int8_t *w, int64_t n, int64_t kh, int64_t krow,
                        const FbRequant *rq) {
  int64_t kr4 = (krow + 3) / 4 * 4, k = kh * kr4;
  int8_t *wide = calloc((size_t)(n * k) + 1, 1);
  if (!wide) {
    memset(p, 0, sizeof *p);
    return -1;
  }
  for (int64_t c = 0; c < n; c++)
    for (int64_t ky = 0; ky < kh; ky++)
      memcpy(wide + c * k + ky * kr4, w + (c * kh + ky) * krow, (size_t)krow);
  int bad = fb_pack_for(isa, p, wide, n, k, rq);
  free(wide);
  if (!bad)
    p->krow = krow;
  return bad;
}

void fb_block_c(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                uint8_t *y, size_t ldy) {
  int64_t k4n = pk->kp / 4;
  for (int64_t r = 0; r < m; r++) {
    const uint8_t *ar = a + (size_t)r * lda;
    for (int64_t pan = p0; pan < p1; pan++) {
      const int8_t *bp = pk->b + pan * k4n * FB_NR * 4;
      int32_t acc[FB_NR] = {0};
      for (int64_t q = 0; q < k4n; q++)
        for (int j = 0; j < FB_NR; j++)
          for (int t = 0; t < 4; t++) {
            int64_t kk = q * 4 + t;
            /* bytes past k meet zero weights; skip them rather than read them */
            if (kk < pk->k)
              acc[j] += ar[kk] * bp[(q * FB_NR + j) * 4 + t];
          }
      for (int j = 0; j < FB_NR; j++) {
        int64_t c = pan * FB_NR + j;
        if (c < pk->n)
          y[(size_t)r * ldy + (size_t)c] =
              fb_requant_one(acc[j] - pk->zcol[c], pk->bias[c], pk->mult[c], pk->lo, pk->hi, pk->zo);
      }
    }
  }
}

/* Rows per block: a multiple of the micro-kernels' row tiles (pk->mq: 12 for the 6- and
 * 4-row vector kernels, 32 for AMX's two 16-row tiles), with at most ~384 KiB of im2col
 * rows (inside L2, next to the weight panels the block streams), and the rows spread
 * evenly over the blocks so that a small image (resnet18's 7x7 layer4, M = 49) is one
 * block rather than thin ones that each re-read all weights (at 256 KiB it was two, and
 * its 2.4 MiB of weights streamed twice: 75-76% of the peak against 80% as one block). */
static int64_t block_rows(const FbPacked *pk, int64_t m) {
  int64_t q = pk->mq > 0 ? pk->mq : 12;
  /* AMX: up to 512 KiB, so that layer4's 49 rows of K = 4608 are one block (32-row
   * multiples: 64 rows) and its weights stream once, not once per 32 rows */
  int64_t cap = (q == 32 ? 512 * 1024 : 384 * 1024) / pk->kp / q * q;
  cap = cap < q ? q : cap > 480 ? 480 / q * q : cap;
  int64_t blocks = (m + cap - 1) / cap;
  if (blocks < 1)
    blocks = 1;
  int64_t mb = ((m + blocks - 1) / blocks + q - 1) / q * q;
  return mb < q ? q : mb;
}

/* The input can be the GEMM's A as it is: a 1x1 stride-1 unpadded convolution whose rows
 * are no more than 3 bytes shorter than the packed reduction (the kernels' reads past a
 * row meet zero weights; the AMX layout's K padded to 64 needs im2col's zeroed rows). */
static int direct(const FbConv *c, const FbPacked *pk) {
  return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->pt == 0 && c->pl == 0 &&
         c->oh == c->ih && c->ow == c->iw && pk->kp - pk->k <= 3;
}

/* A strided 1x1 unpadded convolution (resnet's downsample shortcuts) reads its input in
 * place too: the rows of one output row are pixels sw * ic bytes apart, which is the
 * micro-kernels' lda, so each output row is one call and no im2col copy is made. Not
 * for an AMX pack (its K padded to 64 needs im2col's zeroed rows), nor where a bottom or
 * right pad would put a row's pixel outside the image, nor for output rows shorter than
 * FB_STRIDED_MIN_OW: their row tails leave the 6-row tiles mostly empty, which cost more
 * than the copy (qhost-fbgemm-shapes, resnet18's 14->7 downsample: 86% of the peak with
 * im2col, 72% in place; 56->28: 52% with im2col, 65% in place). */
#define FB_STRIDED_MIN_OW 16
static int strided_any(const FbConv *c, const FbPacked *pk) {
  return c->kh == 1 && c->kw == 1 && c->pt == 0 && c->pl == 0 && !direct(c, pk) && pk->kp - pk->k <= 3 &&
         pk->mq != 32 && (c->oh - 1) * c->sh < c->ih && (c->ow - 1) * c->sw < c->iw;
}
static int strided_direct(const FbConv *c, const FbPacked *pk) {
  return strided_any(c, pk) && c->ow >= FB_STRIDED_MIN_OW;
}
/* The AVX-512 VNNI kernel takes its rows as pointers (fb_block_avx512vnni_rows), so its
 * tiles run across output rows and the short ones read in place too (resnet18's 28->14
 * and 14->7 downsample: no im2col, and no tile tail per output row). */
static int strided_rows(FbIsa isa, const FbConv *c, const FbPacked *pk) {
  return isa == FB_ISA_AVX512VNNI && strided_any(c, pk);
}

/* AMX's gathered path: a stride-1 undilated convolution whose channels are a multiple of
 * 64, so each 64-byte chunk of the reduction lies within one tap. The tiles read the
 * rows straight from a padded copy of the input (fb_block_amx_gather), which is written
 * once (ph * pw pixels per image) instead of kh * kw times by im2col: at AMX's speed
 * im2col took more than half of a 3x3 convolution's time (bench/README.md). */
static int gathered(const FbConv *c, const FbPacked *pk) {
  return pk->mq == 32 && c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1 && c->ic % 64 == 0 &&
         c->kh * c->kw > 1 && pk->kp == pk->k;
}

/* The AVX-512 VNNI tap path: a convolution larger than 1x1 whose channels are a multiple
 * of 4 (each tap's ic bytes are whole reduction groups) and whose output rows have 16
 * pixels or more reads its rows straight from a padded copy of the input, one run of ic
 * bytes per tap (fb_block_avx512vnni_rows_runs), any stride and dilation: the copy writes each
 * input pixel once where im2col writes it kh * kw / (sh * sw) times. Not for an AMX pack
 * (its K is padded to 64), nor for short output rows (the row tails, as strided_direct). */
static int tap_path(const FbConv *c, const FbPacked *pk) {
  return pk->mq != 32 && c->kh * c->kw > 1 && c->ic % 4 == 0 && pk->kp == pk->k && c->ow >= FB_STRIDED_MIN_OW &&
         !pk->krow;
}
/* The kernel-row path (AVX-512 VNNI on fb_pack_kernel_rows's layout): the rows of A are
 * read from the same padded copy as the tap path's, one run of kw * ic bytes (padded to
 * 4) per kernel row, the rows as pointers so that tiles run across output rows. For
 * first layers (3 channels), where im2col cost more than the GEMM: its padded copy
 * writes each input pixel once where im2col writes it kh * kw / (sh * sw) times, in
 * pieces of 9 or 21 bytes. */
static int kernel_row_path(FbIsa isa, const FbConv *c, const FbPacked *pk) {
  return isa == FB_ISA_AVX512VNNI && pk->krow == c->kw * c->ic && pk->k == c->kh * ((pk->krow + 3) / 4 * 4) &&
         pk->kp == pk->k && c->dw == 1;
}
/* Bytes the kernel rows may read past the padded copy's last pixel (the zero weights' 3
 * bytes), as whole pixels. */
static int64_t krow_slack(const FbConv *c) { return (3 + c->ic - 1) / c->ic; }
/* The padded input the tap path reads: every pixel a tap reaches, padding included. */
static int64_t tap_ph(const FbConv *c) { return (c->oh - 1) * c->sh + (c->kh - 1) * c->dh + 1; }
static int64_t tap_pw(const FbConv *c) { return (c->ow - 1) * c->sw + (c->kw - 1) * c->dw + 1; }
static size_t toff_bytes(const FbConv *c) { return ((size_t)(c->kh * c->kw) * sizeof(int64_t) + 63) / 64 * 64; }
static size_t tap_bytes(const FbConv *c) {
  return toff_bytes(c) + (size_t)((c->n * tap_ph(c) * tap_pw(c) + krow_slack(c)) * c->ic);
}

/* The gathered path's workspace: the chunk offsets, then the padded images and kw pixels
 * of slack (the last rows' taps reach past the last image). */
static size_t koff_bytes(const FbPacked *pk) { return ((size_t)(pk->kp / 64) * sizeof(int64_t) + 63) / 64 * 64; }
static size_t padded_bytes(const FbConv *c) {
  return (size_t)((c->n * (c->oh + c->kh - 1) * (c->ow + c->kw - 1) + c->kw) * c->ic);
}

size_t fb_conv_workspace(const FbConv *c, const FbPacked *pk, uint32_t n_workers) {
  if (direct(c, pk) || strided_direct(c, pk))
    return 0;
  size_t rows = (size_t)(n_workers ? n_workers : 1) * (size_t)(block_rows(pk, c->n * c->oh * c->ow) * pk->kp);
  /* an AMX pack may also run on a vector path (kernels.h), which takes the im2col rows */
  if (gathered(c, pk) && koff_bytes(pk) + padded_bytes(c) > rows)
    return koff_bytes(pk) + padded_bytes(c);
  /* the tap and kernel-row paths run on AVX-512 VNNI only; the other paths take the
   * im2col rows */
  if ((tap_path(c, pk) || kernel_row_path(FB_ISA_AVX512VNNI, c, pk)) && tap_bytes(c) > rows)
    return tap_bytes(c);
  return rows;
}

typedef struct {
  const FbConv *c;
  const FbPacked *pk;
  const uint8_t *x;
  uint8_t *y;
  uint8_t *ws;
  FbBlockFn block;
  int64_t m, mb, nsplit;
  int strided; /* strided_direct: one call per output row, read in place */
  int strided_rows; /* strided_rows: the block's input pixels as row pointers */
  /* the tap and kernel-row paths: row pointers into the padded input tpad (tph x tpw
   * pixels per image), the reduction in nruns runs at toff[] from a row's pixel */
  int padded_rows;
  const uint8_t *tpad;
  const int64_t *toff;
  int64_t tph, tpw, nruns;
  size_t slot;
  /* the gathered path (AMX): the padded input, the chunk offsets and the output map */
  const uint8_t *padded;
  const int64_t *koff;
  FbRowMap map;
} Job;

/* memset and memcpy for the few bytes of a kernel row of a thin input (the first layer's
 * 3 channels: 9 bytes), where a libc call per piece cost more than the GEMM after it
 * (mobilenet_v2's first convolution, 12544 rows). */
static inline void fill_bytes(uint8_t *d, uint8_t v, int64_t n) {
  if (n > 32) {
    memset(d, v, (size_t)n);
    return;
  }
  if (n >= 8) { /* two (or four) 8-byte stores that may overlap: no byte past n */
    uint64_t p = 0x0101010101010101ull * v;
    memcpy(d, &p, 8);
    memcpy(d + n - 8, &p, 8);
    if (n > 16) {
      memcpy(d + 8, &p, 8);
      memcpy(d + n - 16, &p, 8);
    }
    return;
  }
  for (int64_t i = 0; i < n; i++)
    d[i] = v;
}

/* The same for copies: the first and last 8 (or 16) bytes, overlapping in the middle,
 * so a 9-byte kernel row is two moves instead of nine. */
static inline void copy_bytes(uint8_t *restrict d, const uint8_t *restrict s, int64_t n) {
  if (n > 32) {
    memcpy(d, s, (size_t)n);
    return;
  }
  if (n >= 16) {
    uint8_t a[16], b[16];
    memcpy(a, s, 16);
    memcpy(b, s + n - 16, 16);
    memcpy(d, a, 16);
    memcpy(d + n - 16, b, 16);
    return;
  }
  if (n >= 8) {
    uint64_t a, b;
    memcpy(&a, s, 8);
    memcpy(&b, s + n - 8, 8);
    memcpy(d, &a, 8);
    memcpy(d + n - 8, &b, 8);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    d[i] = s[i];
}

/* Rows [m0, m0 + mr) of the im2col matrix, kp bytes each; taps outside the image read zx
 * (FBGEMM pads with the activation zero point, which the column offsets cancel). */
static void im2col(const Job *j, int64_t m0, int64_t mr, uint8_t *dst) {
  const FbConv *c = j->c;
  const FbPacked *pk = j->pk;
  /* the first row's pixel, then stepped: three divisions per row cost more than a thin
   * layer's GEMM row (K = 27: 14 vpdpbusd) */
  int64_t ox = m0 % c->ow, oy = (m0 / c->ow) % c->oh, b = m0 / (c->ow * c->oh);
  int64_t gap = pk->krow ? (pk->krow + 3) / 4 * 4 - pk->krow : 0;
  for (int64_t r = 0; r < mr; r++, ox++) {
    if (ox == c->ow) {
      ox = 0;
      if (++oy == c->oh)
        oy = 0, b++;
    }
    uint8_t *d = dst + r * pk->kp;
    for (int64_t ky = 0; ky < c->kh; ky++, d += gap) {
      fill_bytes(d + c->kw * c->ic, 0, gap); /* fb_pack_kernel_rows's zero weights */
      int64_t iy = oy * c->sh - c->pt + ky * c->dh;
      if (iy < 0 || iy >= c->ih) {
        fill_bytes(d, (uint8_t)pk->zx, c->kw * c->ic);
        d += c->kw * c->ic;
        continue;
      }
      const uint8_t *row = j->x + (b * c->ih + iy) * c->iw * c->ic;
      int64_t ix0 = ox * c->sw - c->pl;
      if (c->dw == 1) { /* the taps of one kernel row are adjacent pixels: one copy */
        int64_t lo = ix0 < 0 ? -ix0 : 0, hi = c->iw - ix0;
        lo = lo > c->kw ? c->kw : lo;
        hi = hi > c->kw ? c->kw : hi < lo ? lo : hi;
        fill_bytes(d, (uint8_t)pk->zx, lo * c->ic);
        if (hi > lo)
          copy_bytes(d + lo * c->ic, row + (ix0 + lo) * c->ic, (hi - lo) * c->ic);
        fill_bytes(d + hi * c->ic, (uint8_t)pk->zx, (c->kw - hi) * c->ic);
        d += c->kw * c->ic;
        continue;
      }
      for (int64_t kx = 0; kx < c->kw; kx++, d += c->ic) {
        int64_t ix = ix0 + kx * c->dw;
        if (ix < 0 || ix >= c->iw)
          fill_bytes(d, (uint8_t)pk->zx, c->ic);
        else
          copy_bytes(d, row + ix * c->ic, c->ic);
      }
    }
    fill_bytes(d, 0, pk->kp - pk->k);
  }
}

/* The gathered and tap paths' copy of the input: n images of ph x pw pixels, the padding
 * zx, then slack pixels of zx. */
static void pad_input(const FbConv *c, const uint8_t *x, uint8_t zx, uint8_t *pad, int64_t ph, int64_t pw,
                      int64_t slack) {
  int64_t ic = c->ic;
  int64_t cols = c->iw < pw - c->pl ? c->iw : pw - c->pl; /* input columns inside */
  for (int64_t b = 0; b < c->n; b++)
    for (int64_t py = 0; py < ph; py++) {
      uint8_t *d = pad + (b * ph + py) * pw * ic;
      int64_t iy = py - c->pt;
      if (iy < 0 || iy >= c->ih || cols <= 0) {
        memset(d, zx, (size_t)(pw * ic));
        continue;
      }
      memset(d, zx, (size_t)(c->pl * ic));
      memcpy(d + c->pl * ic, x + (b * c->ih + iy) * c->iw * ic, (size_t)(cols * ic));
      memset(d + (c->pl + cols) * ic, zx, (size_t)((pw - c->pl - cols) * ic));
    }
  memset(pad + c->n * ph * pw * ic, zx, (size_t)(slack * ic));
}

static void task(void *user, size_t i, uint32_t worker) {
  const Job *j = user;
  int64_t mbi = (int64_t)i / j->nsplit, ns = (int64_t)i % j->nsplit;
  int64_t m0 = mbi * j->mb, mr = j->m - m0 < j->mb ? j->m - m0 : j->mb;
  int64_t np = j->pk->npanel, p0 = ns * np / j->nsplit, p1 = (ns + 1) * np / j->nsplit;
  if (p0 == p1)
    return;
  if (j->padded) {
    size_t ic = (size_t)j->c->ic;
    fb_block_amx_gather(j->padded + (size_t)m0 * ic, ic, j->koff, mr, j->pk, p0, p1, j->y, (size_t)j->pk->n,
                        &j->map, m0);
    return;
  }
  if (j->strided_rows || j->padded_rows) {
    const FbConv *c = j->c;
    const uint8_t *rows[256];
    /* strided 1x1: the input itself; taps and kernel rows: the padded copy (the runs'
     * offsets from a window's top left pixel). The tiles run across output rows, so
     * there is no tile tail per output row. */
    const uint8_t *src = j->padded_rows ? j->tpad : j->x;
    int64_t sh_ = j->padded_rows ? j->tph : c->ih, sw_ = j->padded_rows ? j->tpw : c->iw;
    int64_t ox = m0 % c->ow, rest = m0 / c->ow, oy = rest % c->oh, b = rest / c->oh;
    size_t step = (size_t)(c->sw * c->ic);
    const uint8_t *p = src + ((b * sh_ + oy * c->sh) * sw_ + ox * c->sw) * c->ic;
    for (int64_t m = m0, end = m0 + mr; m < end;) {
      int64_t n = end - m < 256 ? end - m : 256;
      for (int64_t r = 0; r < n; r++) { /* stepped: a multiply only per output row */
        rows[r] = p;
        p += step;
        if (++ox == c->ow) {
          ox = 0;
          if (++oy == c->oh)
            oy = 0, b++;
          p = src + (b * sh_ + oy * c->sh) * sw_ * c->ic;
        }
      }
      if (j->padded_rows)
        fb_block_avx512vnni_rows_runs(rows, j->toff, j->nruns, n, j->pk, p0, p1, j->y + m * j->pk->n,
                                      (size_t)j->pk->n);
      else
        fb_block_avx512vnni_rows(rows, n, j->pk, p0, p1, j->y + m * j->pk->n, (size_t)j->pk->n);
      m += n;
    }
    return;
  }
  if (j->strided) {
    const FbConv *c = j->c;
    for (int64_t m = m0, end = m0 + mr; m < end;) {
      int64_t ox = m % c->ow, rest = m / c->ow, oy = rest % c->oh, b = rest / c->oh;
      int64_t len = c->ow - ox < end - m ? c->ow - ox : end - m;
      const uint8_t *a = j->x + ((b * c->ih + oy * c->sh) * c->iw + ox * c->sw) * c->ic;
      size_t lda = (size_t)(c->sw * c->ic);
      FbBlockFn fn = j->block;
      if (fn == fb_block_avx2 && fb_rows_above_127(a, lda, len, j->pk->k))
        fn = fb_block_avx2_exact;
      fn(a, lda, len, j->pk, p0, p1, j->y + m * j->pk->n, (size_t)j->pk->n);
      m += len;
    }
    return;
  }
  const uint8_t *a;
  size_t lda;
  if (j->ws) {
    uint8_t *buf = j->ws + j->slot * worker;
    im2col(j, m0, mr, buf);
    a = buf, lda = (size_t)j->pk->kp;
  } else {
    a = j->x + m0 * j->c->ic, lda = (size_t)j->c->ic;
  }
  FbBlockFn fn = j->block;
  /* vpmaddubsw's pair sums are exact only for bytes <= 127, whatever the file promises */
  if (fn == fb_block_avx2 && fb_rows_above_127(a, lda, mr, j->pk->k))
    fn = fb_block_avx2_exact;
  /* a 16-row tile would be mostly empty (M = 1 linear layers); the VNNI kernel reads the
   * same panels, and rows of kp bytes are there either way */
  if (fn == fb_block_amx && mr < 16)
    fn = fb_block_avx512vnni;
  fn(a, lda, mr, j->pk, p0, p1, j->y + m0 * j->pk->n, (size_t)j->pk->n);
}

void fb_conv_packed(FbIsa isa, const FbConv *c, const FbPacked *pk, const uint8_t *x, uint8_t *y,
                    void *ws, const FbPool *pool) {
  Job j = {.c = c, .pk = pk, .x = x, .y = y, .m = c->n * c->oh * c->ow};
  j.mb = block_rows(pk, j.m);
  j.block = isa == FB_ISA_AMX          ? fb_block_amx
            : isa == FB_ISA_AVX512VNNI ? fb_block_avx512vnni
            : isa == FB_ISA_AVXVNNI  ? fb_block_avxvnni
            : isa == FB_ISA_AVX2     ? fb_block_avx2
                                     : fb_block_c;
  if (j.m == 0 || pk->n == 0)
    return;
  uint32_t workers = pool && pool->run && pool->n_workers > 1 ? pool->n_workers : 1;
  if (isa == FB_ISA_AMX && gathered(c, pk)) {
    pad_input(c, x, (uint8_t)pk->zx, (uint8_t *)ws + koff_bytes(pk), c->oh + c->kh - 1, c->ow + c->kw - 1, c->kw);
    int64_t *koff = ws, chunks = c->ic / 64, pw = c->ow + c->kw - 1, ph = c->oh + c->kh - 1;
    for (int64_t q = 0; q < pk->kp / 64; q++) { /* reduction order (ky, kx, ci), as packed */
      int64_t tap = q / chunks, ky = tap / c->kw, kx = tap % c->kw;
      koff[q] = (ky * pw + kx) * c->ic + q % chunks * 64;
    }
    j.padded = (const uint8_t *)ws + koff_bytes(pk), j.koff = koff;
    j.map = (FbRowMap){.plane = ph * pw, .pw = pw, .oh = c->oh, .ow = c->ow};
    /* the rows up to the last image's last output row; the other images' last kh - 1
     * rows and every row's last kw - 1 pixels are computed and dropped */
    j.m = (c->n - 1) * ph * pw + c->oh * pw;
    j.mb = block_rows(pk, j.m);
  } else if (isa == FB_ISA_AVX512VNNI && tap_path(c, pk)) {
    j.tph = tap_ph(c), j.tpw = tap_pw(c);
    pad_input(c, x, (uint8_t)pk->zx, (uint8_t *)ws + toff_bytes(c), j.tph, j.tpw, 0);
    int64_t *toff = ws;
    for (int64_t ky = 0; ky < c->kh; ky++) /* reduction order (ky, kx, ci), as packed */
      for (int64_t kx = 0; kx < c->kw; kx++)
        toff[ky * c->kw + kx] = (ky * c->dh * j.tpw + kx * c->dw) * c->ic;
    j.toff = toff, j.tpad = (const uint8_t *)ws + toff_bytes(c);
    j.padded_rows = 1, j.nruns = c->kh * c->kw;
  } else if (kernel_row_path(isa, c, pk)) {
    j.tph = tap_ph(c), j.tpw = tap_pw(c);
    pad_input(c, x, (uint8_t)pk->zx, (uint8_t *)ws + toff_bytes(c), j.tph, j.tpw, krow_slack(c));
    int64_t *toff = ws;
    for (int64_t ky = 0; ky < c->kh; ky++) /* one run per kernel row: kw pixels, adjacent */
      toff[ky] = ky * c->dh * j.tpw * c->ic;
    j.toff = toff, j.tpad = (const uint8_t *)ws + toff_bytes(c);
    j.padded_rows = 1, j.nruns = c->kh;
  } else if (strided_rows(isa, c, pk)) {
    j.strided_rows = 1;
  } else if (strided_direct(c, pk)) {
    /* blocks of whole output rows, so that no call gets a row's ragged end */
    j.strided = 1;
    j.mb = (j.mb + c->ow - 1) / c->ow * c->ow;
  } else if (!direct(c, pk)) {
    j.ws = ws, j.slot = (size_t)(j.mb * pk->kp);
  }
  int64_t mblocks = (j.m + j.mb - 1) / j.mb;
  /* Few row blocks (M = 1, small images): split the output channels too, so every
   * worker gets work; each such task builds its own copy of the block's rows. One
   * worker gains nothing from it and would build a block's im2col rows twice. */
  j.nsplit = 1;
  if (workers > 1 && mblocks < 2 * (int64_t)workers) {
    j.nsplit = (2 * (int64_t)workers + mblocks - 1) / mblocks;
    if (j.nsplit > pk->npanel)
      j.nsplit = pk->npanel;
  }
  size_t n = (size_t)(mblocks * j.nsplit);
  if (workers > 1 && n > 1)
    pool->run(pool->runner, n, task, &j);
  else
    for (size_t i = 0; i < n; i++)
      task(&j, i, 0);
}
