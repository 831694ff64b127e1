/* The fbgemm plugin's int8 convolution / GEMM kernels, free of the host: plain data in,
 * plain data out, so tests/test_kernels.c can build them without qhost.
 *
 * Numerics (FBGEMM's ReQuantizeOutput with a float bias, as PyTorch 1.13's fbgemm engine
 * calls it): uint8 NHWC activations x with zero point zx, int8 weights w symmetric per
 * output channel (or per tensor), int32 accumulation
 *   acc[m][c] = sum_k (x[m][k] - zx) * w[c][k]
 * which the packed paths compute as sum_k x*w - zx * colsum[c] (FBGEMM's column offsets;
 * the row offsets multiply the weight zero point, 0 here), padding taps reading zx; then
 *   v = ((float)acc + bias[c]) * mult[c], y = clamp(rint(v) + zo, lo, hi)
 * where bias[c] is the float bias in accumulator units (bias / (sx*sw[c]), FBGEMM's
 * _mm256_div_ps) and mult[c] = (sx*sw[c]) / so, both precomputed in float by the
 * caller; rint rounds half to even; lo..hi is the output's quantized range, lo raised
 * to zo for a fused Relu. Every path gives the same bytes: the float steps are the same
 * IEEE operations in the same order (no FMA), and clamping before rounding at integer
 * bounds equals clamping after. */
#ifndef QH_FBGEMM_KERNELS_H
#define QH_FBGEMM_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  FB_ISA_REF,       /* the scalar twin: direct convolution, the oracle */
  FB_ISA_PACKED_C,  /* the packed-GEMM driver with a plain C micro-kernel (exact, any CPU) */
  FB_ISA_AVX2,      /* vpmaddubsw + vpmaddwd; blocks with bytes > 127 take an exact variant */
  FB_ISA_AVXVNNI,   /* vpdpbusd on ymm (AVX-VNNI without AVX-512): exact for any uint8 */
  FB_ISA_AVX512VNNI, /* vpdpbusd on zmm: exact for any uint8 */
  FB_ISA_AMX         /* tdpbusd on AMX tiles (with AVX-512 for the requantization): exact;
                      * depthwise and the rest run the AVX-512 VNNI paths */
} FbIsa;

const char *fb_isa_name(FbIsa isa);

/* A 2-D convolution over NHWC uint8 (groups = 1); a linear layer is the 1x1 case with
 * n = M rows, ih = iw = 1. */
typedef struct {
  int64_t n, ih, iw, ic;
  int64_t oc, kh, kw;
  int64_t sh, sw, dh, dw;
  int64_t pt, pl; /* top and left padding; bottom and right follow from oh and ow */
  int64_t oh, ow;
} FbConv;

/* Output rule shared by every path (see the top of this file). bias and mult: oc entries. */
typedef struct {
  int32_t zx, zo, lo, hi;
  const float *bias;
  const float *mult;
} FbRequant;

static inline uint8_t fb_requant_one(int32_t acc, float bias, float mult, float lo, float hi,
                                     int32_t zo) {
  float v = ((float)acc + bias) * mult;
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return (uint8_t)((int32_t)rintf(v) + zo);
}

/* The scalar twin. w: [oc][kh][kw][ic]; x: [n][ih][iw][ic]; y: [n][oh][ow][oc]. */
void fb_conv_ref(const FbConv *c, const uint8_t *x, const int8_t *w, const FbRequant *rq, uint8_t *y);

/* Weights packed once for the micro-kernels: panels of FB_NR = 16 output channels, the
 * reduction in groups of 4 (vpdpbusd's dword): byte (p, k4, j, t) at
 * ((p * kp / 4 + k4) * 16 + j) * 4 + t is w[p*16 + j][k4*4 + t], zero beyond n or k.
 * One 64-byte row is one zmm, or two ymm of 8 channels for AVX2; 16 rows (64 reduction
 * bytes) are one AMX B tile as tdpbusd reads it, so for AMX kp is padded to a multiple of
 * 64. The requantization arrays are padded to the panels; zcol[c] = zx * sum_k w[c][k],
 * nzcol[c] = -zcol[c] (the AVX-512 kernel starts its accumulators there: a load instead
 * of a subtraction per output vector). mq: rows per GEMM block are a multiple of it (the
 * micro-kernels' row tiles).
 * The short epilogue (fb_pack_for sets int_bias when it is exact for every channel): each
 * bias is an integer and 255 * sum_k |w[c][k]| + |bias[c]| <= 2^24, so the accumulator,
 * the bias and their sum are integers a float holds exactly and (float)acc + bias equals
 * (float)(acc + bias); and every multiplier is finite and at most 64, so the product stays
 * far inside int32 and the clamp can be done on the narrowed bytes. The AVX-512 kernel
 * then starts its accumulators at nzbias[c] = bias[c] - zcol[c] and drops the float add
 * and min (short K: 1x1 convolutions with K = 24..128, where the epilogue is as long as
 * the multiply-adds), and the byte clamps too where lo..hi is 0..255 (its saturating
 * packs clamp there). nzbias is allocated either way (zeros when int_bias is 0). */
#define FB_NR 16
#define FB_INT_BIAS_MAX 16777216.0 /* 2^24: integers up to it are exact in a float */
typedef struct {
  int64_t n, k, kp, npanel, mq;
  int8_t *b;
  int32_t *zcol, *nzcol, *nzbias;
  float *bias, *mult;
  float lo, hi; /* clamp bounds relative to zo */
  int32_t zx, zo;
  int int_bias;
  /* 0: the reduction is (ky, kx, ci) packed tight; else fb_pack_kernel_rows's layout:
   * kernel rows of krow = kw * ic bytes, each padded with zero weights to a multiple of
   * 4 (k = kh * that) */
  int64_t krow;
} FbPacked;

/* w: [n][k] row-major (k in the twin's (ky, kx, ci) order). 0 on success, -1 when out of
 * memory. fb_pack_free(NULL-initialised or packed) is always safe. */
int fb_pack(FbPacked *p, const int8_t *w, int64_t n, int64_t k, const FbRequant *rq);
/* The same for isa's micro-kernel: FB_ISA_AMX pads kp to 64 and blocks rows by 32; every
 * other path gets fb_pack's layout. Every path but FB_ISA_REF runs on either layout. */
int fb_pack_for(FbIsa isa, FbPacked *p, const int8_t *w, int64_t n, int64_t k, const FbRequant *rq);
void fb_pack_free(FbPacked *p);
/* fb_pack_for with each kernel row (krow = kw * ic bytes of the (ky, kx, ci) reduction,
 * kh rows) padded with zero weights to a multiple of 4, so that a kernel row starts a
 * vpdpbusd group: the AVX-512 VNNI kernel then reads a convolution whose channels are
 * not a multiple of 4 (first layers: 3 channels) a kernel row at a time straight from a
 * padded copy of its input, without im2col (fb_conv_packed); every other path builds
 * im2col rows with the same gaps. Same errors and ownership as fb_pack_for. */
int fb_pack_kernel_rows(FbIsa isa, FbPacked *p, const int8_t *w, int64_t n, int64_t kh, int64_t krow,
                        const FbRequant *rq);
/* Whether fb_pack_kernel_rows's layout pays on isa for a dense convolution: AVX-512 VNNI,
 * a kernel larger than 1x1, undilated along x (a kernel row is adjacent pixels), channels
 * not a multiple of 4 (else the tap path reads each tap's channels as they are). Pure. */
static inline int fb_kernel_rows_pay(FbIsa isa, int64_t ic, int64_t kh, int64_t kw, int64_t dw) {
  return isa == FB_ISA_AVX512VNNI && ic % 4 != 0 && kh * kw > 1 && dw == 1;
}

/* A block of m rows of A (row r at a + r * lda, k bytes; reads may run up to 3 bytes past
 * the row's end, which meet zero weights) times panels [p0, p1), requantized into
 * y + r * ldy (column c of the panels at y[c]). One per ISA. */
typedef void (*FbBlockFn)(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0,
                          int64_t p1, uint8_t *y, size_t ldy);
void fb_block_c(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                uint8_t *y, size_t ldy);
void fb_block_avx2(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                   uint8_t *y, size_t ldy);
void fb_block_avx2_exact(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0,
                         int64_t p1, uint8_t *y, size_t ldy);
/* 1 when one of the first k bytes of m rows is above 127 (AVX2). */
int fb_rows_above_127(const uint8_t *a, size_t lda, int64_t m, int64_t k);
void fb_block_avxvnni(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                      uint8_t *y, size_t ldy);
void fb_block_avx512vnni(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0,
                         int64_t p1, uint8_t *y, size_t ldy);
/* The AVX-512 VNNI kernel takes a reduction of more than 2 * FB_VNNI_KC groups of 4 bytes
 * over more than 6 rows in chunks of about FB_VNNI_KC groups (every row tile of the block
 * per chunk, so that the chunk's weights are reused from L1), the partial sums kept in
 * int32 between chunks: the result is the same bits. */
#define FB_VNNI_KC 96
/* The AVX-512 VNNI kernel on m rows of A anywhere in memory: row r at rows[r] (kp
 * readable bytes, or k and up to 3 more that meet zero weights), output row r at
 * y + r * ldy. gemm.c's strided 1x1 path hands it the input pixels of a strided
 * convolution's output pixels, any number of output rows per call. */
void fb_block_avx512vnni_rows(const uint8_t *const *rows, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                              uint8_t *y, size_t ldy);
/* The same with the reduction in ntaps runs of k / ntaps bytes (a multiple of 4; needs
 * pk->kp == pk->k): run t of row r at rows[r] + toff[t], up to 3 bytes past each run
 * readable (they meet zero weights). gemm.c's tap path (one run of ic bytes per kernel
 * tap, channels a multiple of 4) and kernel-row path (one run per kernel row) read a
 * convolution's rows this way straight from a padded copy of its input, without im2col. */
void fb_block_avx512vnni_rows_runs(const uint8_t *const *rows, const int64_t *toff, int64_t ntaps, int64_t m,
                                   const FbPacked *pk, int64_t p0, int64_t p1, uint8_t *y, size_t ldy);
/* AMX: 32 rows by 2 panels per step (4 int32 accumulator tiles), tdpbusd per 64 reduction
 * bytes; needs pk->kp % 64 == 0 (fb_pack_for(FB_ISA_AMX, ...)) and rows of kp readable
 * bytes. Loads its own tile configuration on entry and releases the tiles on return, so it
 * runs on any thread in any state (the process must hold the Linux XTILEDATA permission,
 * which the host requests; fb_amx_request_permission for host-free callers). */
void fb_block_amx(const uint8_t *a, size_t lda, int64_t m, const FbPacked *pk, int64_t p0, int64_t p1,
                  uint8_t *y, size_t ldy);
/* The AMX kernel reading A straight from a padded copy of the input (gemm.c's gathered
 * path for stride-1 convolutions with channels a multiple of 64, no im2col): row g of
 * the GEMM is padded pixel g (images of plane = ph * pw pixels, the padded width pw),
 * chunk q of its reduction at a + g * lda + koff[q] (tap (ky, kx): (ky * pw + kx) * ic,
 * plus the chunk's channel offset). Row g is output pixel (oy, ox) = (g % plane / pw,
 * g % pw) of image g / plane when oy < oh and ox < ow; the other rows are computed and
 * dropped. a and row0: the block's first row; y: the whole output. */
typedef struct {
  int64_t plane, pw, oh, ow;
} FbRowMap;
void fb_block_amx_gather(const uint8_t *a, size_t lda, const int64_t *koff, int64_t m, const FbPacked *pk,
                         int64_t p0, int64_t p1, uint8_t *y, size_t ldy, const FbRowMap *map, int64_t row0);
/* Reductions shorter than this stay on AVX-512 VNNI on an AMX CPU: padded to a 64-byte
 * tile they waste most of each tdpbusd (qhost-fbgemm-shapes, bench/README.md: K = 24
 * and 32 ran slower on tiles, K = 64 faster). */
#define FB_AMX_MIN_K 64
/* Linux: asks for the AMX tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM); 0 when
 * granted (or already held), -1 otherwise. For host-free callers (tests, benches). */
int fb_amx_request_permission(void);

/* The caller's thread pool: run(runner, n, task, user) calls task(user, i, worker) for
 * every i < n with worker < n_workers; run NULL runs the tasks in order on worker 0. */
typedef void (*FbTaskFn)(void *user, size_t i, uint32_t worker);
typedef struct {
  void (*run)(void *runner, size_t n, FbTaskFn task, void *user);
  void *runner;
  uint32_t n_workers;
} FbPool;

/* Workspace bytes fb_conv_packed needs with n_workers workers (0 when the input is read
 * in place: 1x1 unpadded convolutions, strided ones too except on an AMX pack, and
 * linear layers). */
size_t fb_conv_workspace(const FbConv *c, const FbPacked *pk, uint32_t n_workers);
/* The convolution on packed weights with isa's micro-kernel (not FB_ISA_REF): im2col of
 * one block of rows at a time into the worker's slice of ws, then the block's GEMM
 * (FB_ISA_AMX: blocks of fewer than 16 rows, e.g. M = 1, take the AVX-512 VNNI kernel).
 * x must have 3 readable bytes after its end (the host's buffers have 64). */
void fb_conv_packed(FbIsa isa, const FbConv *c, const FbPacked *pk, const uint8_t *x, uint8_t *y,
                    void *ws, const FbPool *pool);

/* Depthwise convolution: group = channels, one output channel per input channel
 * (c->ic == c->oc), weights w[c][ky][kx]. The scalar twin, the oracle of every path. */
void fb_dw_ref(const FbConv *c, const uint8_t *x, const int8_t *w, const FbRequant *rq, uint8_t *y);

/* Depthwise weights packed once (dw.c), 64-byte aligned for the vector loads:
 * - w: int32, tap-major, w[t * cp + c] for tap t = ky * kw + kx, channels padded to cp (a
 *   multiple of FB_DW_NR) with zero weights (the AVX2 and portable C paths);
 * - w4: for vpdpbusd (the VNNI paths), the kernel's rows in groups of 4: the dword
 *   [(g * kw + kx) * cp + c] holds w[c][4g + t][kx] in byte t (0 past kh), and
 *   zsum[c] = zx * sum of channel c's weights, which takes out the input zero point;
 * bias and multiplier padded like w;
 * - for 3x3 kernels only (NULL otherwise), the AVX-512 VNNI 3x3 path's copies
 *   (dw-avx512vnni-3x3.c), channels padded to cq (a multiple of 64), each full block of 64
 *   in lane order (fb_dw_lane_channel), the channels after the last full block in pieces
 *   of 32 in 256-bit lane order and a last piece of up to 16 in order
 *   (fb_dw3_tail_channel): w3[0] the dwords (w[c][0][kx], w[c][1][kx], w[c][2][kx], 0) at
 *   [kx * cq + position], serving the output row whose taps start at the row buffer's
 *   first row, w3[1] the same shifted up one byte (0, w0, w1, w2), serving the row below
 *   it; zsum3, bias3 and mult3 permuted the same way; nzb3 (int_bias3 only, else NULL)
 *   the accumulators' start, FB_DW3_MAGIC + bias - zsum, permuted the same way. */
#define FB_DW_NR 16
/* The bits of the float 1.5 * 2^23: for an integer t with |t| < 2^22, the bits
 * FB_DW3_MAGIC + t are the float 1.5 * 2^23 + t exactly, so subtracting 1.5 * 2^23 in float
 * gives t as a float without a conversion (the 3x3 path's int_bias3 epilogue). */
#define FB_DW3_MAGIC 0x4B400000
#define FB_DW3_MAGIC_F 12582912.0f
/* |bias| + 9 * 255 * 128 (the largest |acc| of a 3x3 window) must stay below this for
 * int_bias3: 2^22, the magic number's exact range. */
#define FB_DW3_INT_BIAS_MAX 4194304.0
typedef struct {
  int64_t c, cp, cq, taps, kh, kw, groups;
  int32_t *w;
  int8_t *w4;
  int32_t *zsum;
  float *bias, *mult;
  int8_t *w3[2];
  int32_t *zsum3;
  float *bias3, *mult3;
  float lo, hi; /* clamp bounds relative to zo */
  int32_t zx, zo;
  /* 3x3 only: 1 when every channel's (acc + bias) * mult is bounded below 2^31 in
   * magnitude for any input (fb_dw_pack), so vcvtps2dq rounds it exactly and the upper
   * clamp can follow the rounding as a byte minimum with hi8 (hi8 = zo + hi) */
  int byte_hi;
  uint8_t hi8;
  /* 3x3 only: 1 when byte_hi holds and every bias is an integer with |bias| + 9 * 255 *
   * 128 < FB_DW3_INT_BIAS_MAX (int32 QDQ biases in accumulator units are): then acc + bias
   * is an integer below 2^22, the same float as (float)acc + bias, and the full blocks and
   * pieces of 32 start their accumulators at nzb3 (bias and magic number folded in) and
   * requantize with a float subtraction, multiply and rounding per vector, no conversion
   * from int32 and no bias add */
  int int_bias3;
  int32_t *nzb3;
} FbDwPacked;

/* The channel (within its block of 64) at position pos of a lane-ordered block: the
 * order in which byte and word unpacks of 4 input rows leave 64 consecutive channels
 * (dword vector k, 128-bit lane L, element e holds channel 16L + 4k + e, at position
 * 16k + 4L + e), and in which saturating packs of the 4 result vectors give the bytes back
 * in channel order. An involution: swapping the two 2-bit fields twice is the identity. */
static inline int64_t fb_dw_lane_channel(int64_t pos) {
  return ((pos >> 2) & 3) << 4 | ((pos >> 4) & 3) << 2 | (pos & 3);
}

/* w: [c][kh][kw]. 0 on success, -1 when out of memory (p is then freed). */
int fb_dw_pack(FbDwPacked *p, const int8_t *w, int64_t ch, int64_t kh, int64_t kw, const FbRequant *rq);
void fb_dw_pack_free(FbDwPacked *p);
/* The taps [*k0, *k1) of a k-tap window starting at input index i0 (dilation d) that fall
 * inside [0, n). Inline and division-free away from the borders: it runs once per output
 * row and once per output pixel. */
static inline void fb_dw_range(int64_t i0, int64_t n, int64_t k, int64_t d, int64_t *k0, int64_t *k1) {
  if (i0 >= 0 && i0 + (k - 1) * d < n) {
    *k0 = 0, *k1 = k;
    return;
  }
  /* the first tap at or past 0, and one past the last tap before n */
  int64_t a = i0 >= 0 ? 0 : (-i0 + d - 1) / d, b = n - i0 <= 0 ? 0 : (n - i0 + d - 1) / d;
  b = b > k ? k : b;
  *k0 = a > b ? b : a, *k1 = b;
}
/* Output channels [c0, c1) of one pixel in plain C (the SIMD paths' channel tail). */
void fb_dw_pixel_c(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy, int64_t ox,
                   int64_t c0, int64_t c1, uint8_t *y);
/* One output row (image b, row oy), all channels. One per ISA; ws is the worker's slice of
 * fb_dw_workspace (unused by the paths that need none). */
typedef void (*FbDwRowFn)(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                          uint8_t *y, void *ws);
void fb_dw_row_c(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y,
                 void *ws);
void fb_dw_row_avx2(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy, uint8_t *y,
                    void *ws);
void fb_dw_row_avxvnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                       uint8_t *y, void *ws);
void fb_dw_row_avx512vnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy,
                          uint8_t *y, void *ws);
/* Output rows [oy0, oy1) of image b on AVX-512 VNNI: with stride 1, dilation 1 and kh <= 4
 * each row's buffer is rolled from the previous one (one new input row per output row). */
void fb_dw_rows_avx512vnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy0,
                           int64_t oy1, uint8_t *y, void *ws);
/* The channel (relative to the tail's first) at offset off of a tail block of n < 64
 * channels: pieces of 32 while more than 16 remain, each in the order 256-bit unpacks
 * leave them (dword vector k, lane L, element e: channel 16L + 4k + e at 8k + 4L + e),
 * then up to 16 in channel order (128-bit unpacks keep it). */
static inline int64_t fb_dw3_tail_channel(int64_t off, int64_t n) {
  int64_t ps = off / 32 * 32, q = off - ps;
  return n - ps > 16 ? ps + (((q >> 2) & 1) << 4 | (q >> 3) << 2 | (q & 3)) : off;
}
/* Output rows [oy0, oy1), channels [c0, c1) (c0 a multiple of 64, c1 one too or c->ic) of
 * image b on AVX-512 VNNI for 3x3 kernels (any stride and dilation; dw-avx512vnni-3x3.c):
 * 4 input rows interleaved per dword by byte and word unpacks, 64 lane-ordered channels
 * at a time; with stride 1 and dilation 1 one buffer serves two output rows (w3[0] and
 * w3[1]). ws: the calling worker's slice of fb_dw_workspace (FB_ISA_AVX512VNNI), which no
 * other thread may use meanwhile; p is only read. Reads nothing past x's end; no errors. */
void fb_dw3_rows_avx512vnni(const FbConv *c, const FbDwPacked *p, const uint8_t *x, int64_t b, int64_t oy0,
                            int64_t oy1, int64_t c0, int64_t c1, uint8_t *y, void *ws);
/* Columns of the VNNI paths' row buffer: every input column an output row's taps reach,
 * padding included. */
static inline int64_t fb_dw_cols(const FbConv *c) { return (c->ow - 1) * c->sw + (c->kw - 1) * c->dw + 1; }
/* Bytes of the VNNI paths' row buffer: the input rows one output row reads, 4 kernel
 * rows interleaved per dword (cq channels per column, enough for every path), a
 * multiple of 64. */
static inline size_t fb_dw_row_bytes(const FbConv *c, const FbDwPacked *p) {
  return ((size_t)(p->groups * fb_dw_cols(c) * p->cq) * 4 + 63) / 64 * 64;
}
/* Workspace bytes fb_dw_run needs with isa on n_workers workers: per worker, the VNNI
 * paths' row buffer and a line of ic zx bytes after it (64-byte multiples); 0 for the
 * others. */
size_t fb_dw_workspace(FbIsa isa, const FbConv *c, const FbDwPacked *p, uint32_t n_workers);
/* The depthwise convolution with isa's row function (FB_ISA_PACKED_C: plain C;
 * FB_ISA_AVX2: vpmulld; FB_ISA_AVXVNNI / FB_ISA_AVX512VNNI: vpdpbusd on ymm / zmm), output rows as tasks on pool
 * (NULL: in order; at most n_workers workers); ws: fb_dw_workspace(isa, c, p, workers)
 * bytes, 64-byte aligned (NULL when that is 0). Reads nothing past x's end. */
void fb_dw_run(FbIsa isa, const FbConv *c, const FbDwPacked *p, const uint8_t *x, uint8_t *y, void *ws,
               const FbPool *pool);

#endif
