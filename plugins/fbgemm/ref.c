/* The scalar twins of the fbgemm plugin's convolutions (dense, depthwise and grouped): direct
 * loops over output pixels, channels and the taps that fall inside the image,
 * accumulating (x - zx) * w in int32, then kernels.h's output rule. They share nothing
 * with the fast paths (no packing, no column offsets, no im2col, the weights in ONNX's
 * order), so tests/test_kernels.c can hold every fast path to them bit for bit; on a CPU
 * without AVX2 the plugin runs the portable C paths, never these. */
#include "conv-grouped.h"
#include "kernels.h"

const char *fb_isa_name(FbIsa isa) {
  switch (isa) {
  case FB_ISA_REF:
    return "ref";
  case FB_ISA_PACKED_C:
    return "packed_c";
  case FB_ISA_AVX2:
    return "avx2";
  case FB_ISA_AVXVNNI:
    return "avxvnni";
  case FB_ISA_AVX512VNNI:
    return "avx512vnni";
  case FB_ISA_AMX:
    return "amx";
  }
  return "?";
}

void fb_conv_ref(const FbConv *c, const uint8_t *x, const int8_t *w, const FbRequant *rq, uint8_t *y) {
  const float lo = (float)(rq->lo - rq->zo), hi = (float)(rq->hi - rq->zo);
  for (int64_t b = 0; b < c->n; b++)
    for (int64_t oy = 0; oy < c->oh; oy++)
      for (int64_t ox = 0; ox < c->ow; ox++) {
        uint8_t *out = y + ((b * c->oh + oy) * c->ow + ox) * c->oc;
        for (int64_t o = 0; o < c->oc; o++) {
          int32_t acc = 0;
          for (int64_t ky = 0; ky < c->kh; ky++) {
            int64_t iy = oy * c->sh - c->pt + ky * c->dh;
            if (iy < 0 || iy >= c->ih)
              continue;
            for (int64_t kx = 0; kx < c->kw; kx++) {
              int64_t ix = ox * c->sw - c->pl + kx * c->dw;
              if (ix < 0 || ix >= c->iw)
                continue;
              const uint8_t *xp = x + ((b * c->ih + iy) * c->iw + ix) * c->ic;
              const int8_t *wp = w + ((o * c->kh + ky) * c->kw + kx) * c->ic;
              for (int64_t i = 0; i < c->ic; i++)
                acc += ((int32_t)xp[i] - rq->zx) * wp[i];
            }
          }
          out[o] = fb_requant_one(acc, rq->bias[o], rq->mult[o], lo, hi, rq->zo);
        }
      }
}

void fb_dw_ref(const FbConv *c, const uint8_t *x, const int8_t *w, const FbRequant *rq, uint8_t *y) {
  const float lo = (float)(rq->lo - rq->zo), hi = (float)(rq->hi - rq->zo);
  for (int64_t b = 0; b < c->n; b++)
    for (int64_t oy = 0; oy < c->oh; oy++)
      for (int64_t ox = 0; ox < c->ow; ox++)
        for (int64_t o = 0; o < c->oc; o++) {
          int32_t acc = 0;
          for (int64_t ky = 0; ky < c->kh; ky++)
            for (int64_t kx = 0; kx < c->kw; kx++) {
              int64_t iy = oy * c->sh - c->pt + ky * c->dh, ix = ox * c->sw - c->pl + kx * c->dw;
              if (iy < 0 || iy >= c->ih || ix < 0 || ix >= c->iw)
                continue;
              acc += ((int32_t)x[((b * c->ih + iy) * c->iw + ix) * c->ic + o] - rq->zx) *
                     w[(o * c->kh + ky) * c->kw + kx];
            }
          y[((b * c->oh + oy) * c->ow + ox) * c->oc + o] =
              fb_requant_one(acc, rq->bias[o], rq->mult[o], lo, hi, rq->zo);
        }
}

/* The grouped twin (conv-grouped.h): output channel o belongs to group o / (oc / groups)
 * and reads that group's ic / groups input channels; weights in ONNX's [oc][ic / groups]
 * [kh][kw] order. Depthwise with a channel multiplier is the case ic / groups = 1. */
void fb_group_ref(const FbConv *c, int64_t groups, const uint8_t *x, const int8_t *w, const FbRequant *rq,
                  uint8_t *y) {
  const float lo = (float)(rq->lo - rq->zo), hi = (float)(rq->hi - rq->zo);
  const int64_t cg = c->ic / groups, og = c->oc / groups;
  for (int64_t b = 0; b < c->n; b++)
    for (int64_t oy = 0; oy < c->oh; oy++)
      for (int64_t ox = 0; ox < c->ow; ox++)
        for (int64_t o = 0; o < c->oc; o++) {
          int64_t g = o / og;
          int32_t acc = 0;
          for (int64_t i = 0; i < cg; i++)
            for (int64_t ky = 0; ky < c->kh; ky++)
              for (int64_t kx = 0; kx < c->kw; kx++) {
                int64_t iy = oy * c->sh - c->pt + ky * c->dh, ix = ox * c->sw - c->pl + kx * c->dw;
                if (iy < 0 || iy >= c->ih || ix < 0 || ix >= c->iw)
                  continue;
                acc += ((int32_t)x[((b * c->ih + iy) * c->iw + ix) * c->ic + g * cg + i] - rq->zx) *
                       w[((o * cg + i) * c->kh + ky) * c->kw + kx];
              }
          y[((b * c->oh + oy) * c->ow + ox) * c->oc + o] =
              fb_requant_one(acc, rq->bias[o], rq->mult[o], lo, hi, rq->zo);
        }
}
