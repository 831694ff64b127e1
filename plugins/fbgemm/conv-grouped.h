/* Grouped convolutions for the fbgemm plugin (1 < group < input channels, e.g. resnext's
 * and regnet's 3x3 convolutions) and depthwise ones with a channel multiplier (group =
 * input channels, k output channels each), free of the host like kernels.h: plain data
 * in, plain data out, the same numerics (kernels.h's top comment), so
 * tests/test_grouped.c can hold every path to the scalar twin bit for bit.
 *
 * Three paths, one packed object (FbGroupPacked) built once at kernel creation:
 * - FB_GROUP_GEMM: one packed GEMM per group (gemm.c's panels and micro-kernels, every
 *   ISA), im2col of the group's channels per block of output rows; for groups with many
 *   channels, where the 16-channel panels are full.
 * - FB_GROUP_DIRECT: a direct convolution whose vector lanes are output channels (16 on
 *   zmm, 8 on ymm) and whose input is the pixel's channels, one vector load per tap,
 *   permuted per lane (vpermd) so each lane sees its own group's 4-byte chunk (or, with
 *   every lane in one group, each chunk broadcast), then one vpdpbusd per chunk: FBGEMM's groupwise convolution's idea for few channels per group
 *   (GroupwiseConv.cc), in a layout of our own. Needs the dwords a block of lanes reads
 *   to fit one vector (fb_group_direct_fits).
 * - FB_GROUP_MULTIPLIER: depthwise with a channel multiplier k: the input is widened once
 *   (channel c copied k times) and dw.c's depthwise kernels run on it with C * k channels.
 *
 * Weights are given in ONNX's order, [oc][ic / groups][kh][kw]. Inputs must have 3
 * readable bytes past their end (the host's buffers have 64): a direct path's last
 * 4-byte chunk may reach past the last pixel's channels (those bytes meet zero weights).
 * Nothing here allocates while running; every function is safe to call from any thread
 * on distinct outputs; packing returns -1 when out of memory (the object is then freed). */
#ifndef QH_FBGEMM_CONV_GROUPED_H
#define QH_FBGEMM_CONV_GROUPED_H

#include "kernels.h"

/* The scalar twin: direct loops, (x - zx) * w over the in-image taps of the output
 * channel's group, kernels.h's output rule. c->ic and c->oc are the totals. */
void fb_group_ref(const FbConv *c, int64_t groups, const uint8_t *x, const int8_t *w, const FbRequant *rq,
                  uint8_t *y);

typedef enum { FB_GROUP_GEMM, FB_GROUP_DIRECT, FB_GROUP_MULTIPLIER } FbGroupPath;
const char *fb_group_path_name(FbGroupPath path);

typedef struct {
  FbGroupPath path;
  FbIsa isa;       /* the ISA the weights were packed for (the direct path's lane count) */
  int64_t groups, cg, og, ic, oc, kh, kw;
  FbPacked *pk;    /* GEMM: one per group */
  FbDwPacked dw;   /* MULTIPLIER: C * k channels */
  /* DIRECT: blocks of `lanes` output channels; block b reads the input dwords
   * [base[b], base[b] + span[b]) of a pixel, lane j's chunk q is dword idx[(b * nq + q) *
   * lanes + j] of them, against the 4 weight bytes at w[(((b * taps + t) * nq + q) *
   * lanes + j) * 4] (zero for input bytes outside the lane's group); zsum = zx * sum of
   * the channel's weights; bias, mult, zsum padded to nblk * lanes. */
  int64_t lanes, nblk, nq;
  int32_t *base, *span, *idx, *zsum;
  int8_t *w;
  float *bias, *mult;
  float lo, hi; /* clamp bounds relative to zo */
  int32_t zx, zo;
} FbGroupPacked;

/* Taps (kh * kw) the direct path takes at most (its per-row table of input pointers). */
#define FB_GROUP_MAX_TAPS 64
/* Lanes of isa's direct path: 16 (AVX-512 VNNI, AMX, portable C), 8 (AVX-VNNI, AVX2). */
int64_t fb_group_lanes(FbIsa isa);
/* 1 when the direct path on isa can take the shape: every block of lanes reads at most
 * `lanes` input dwords of a pixel, and at most FB_GROUP_MAX_TAPS taps. */
int fb_group_direct_fits(FbIsa isa, int64_t ic, int64_t oc, int64_t groups, int64_t taps);
/* The path the plugin takes: MULTIPLIER for one input channel per group and kernels up
 * to 5x5; DIRECT where it fits (fb_group_direct_fits) on AVX-512 VNNI and AMX, with
 * AVX-VNNI for up to 24 input channels per group, on AVX2 and plain C up to 8; GEMM
 * otherwise. */
FbGroupPath fb_group_pick(FbIsa isa, int64_t ic, int64_t oc, int64_t groups, int64_t kh, int64_t kw);
/* Packs w ([oc][ic / groups][kh][kw]) for path on isa; rq's bias and mult have oc
 * entries. 0 on success, -1 out of memory, -2 when path cannot take the shape. p is
 * always left safe for fb_group_pack_free. */
int fb_group_pack(FbGroupPacked *p, FbIsa isa, FbGroupPath path, const int8_t *w, int64_t ic, int64_t oc,
                  int64_t groups, int64_t kh, int64_t kw, const FbRequant *rq);
void fb_group_pack_free(FbGroupPacked *p);
/* Workspace bytes fb_group_run needs on n_workers workers (64-byte multiples). */
size_t fb_group_workspace(const FbConv *c, const FbGroupPacked *p, uint32_t n_workers);
/* The convolution on p's path with the ISA p was packed for (FB_ISA_AMX: tiles for the
 * GEMM path with K >= 64, AVX-512 VNNI otherwise); tasks on pool (NULL: in order on
 * worker 0; at most pool->n_workers workers, the count ws was sized for). ws: 64-byte
 * aligned. */
void fb_group_run(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, uint8_t *y, void *ws,
                  const FbPool *pool);

/* One output row (image b, row oy) of the direct path, all output channels. */
typedef void (*FbGroupRowFn)(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                             uint8_t *y);
void fb_group_row_c(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y);
void fb_group_row_avx512vnni(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                             uint8_t *y);
void fb_group_row_avxvnni(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                          uint8_t *y);
void fb_group_row_avx2(const FbConv *c, const FbGroupPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                       uint8_t *y);

#endif
