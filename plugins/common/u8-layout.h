/* uint8 pooling and data-movement kernels that more than one backend plugin runs between
 * its int8 convolutions, on channels-last (NHWC) tensors: MaxPool, AveragePool and
 * GlobalAveragePool rows, NHWC to ONNX's NCHW order (Flatten, Reshape), constant Pad
 * over H and W, a channel Slice and ShuffleNet's channel shuffle. Each gives the bytes of
 * the host's reference run of the same QDQ unit (framework/exec/kernels/pool.c, qdq.c):
 * averages sum the dequantized taps in double in the host's order and divide by the tap
 * count, then QuantizeLinear (u8-kernels.h's qh_u8_quant); requantization on another grid
 * is a 256-entry table the caller builds. Host-free, no state, any thread; every function
 * reads and writes only the bytes its arguments describe. Plugin code: includes only the
 * SDK and this directory. */
#ifndef QH_PLUGINS_U8_LAYOUT_H
#define QH_PLUGINS_U8_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* ---- pooling ---- */
typedef enum { QH_U8_POOL_MAX, QH_U8_POOL_AVG, QH_U8_POOL_GLOBAL } QhU8PoolKind;

typedef struct {
  int kind;                       /* QH_U8_POOL_* */
  int64_t h, w, c, oh, ow;        /* input and output of one image */
  int64_t kh, kw, sh, sw, pad[4]; /* window (not GLOBAL): pads top, left, bottom, right */
  int include_pad;                /* AVG: count_include_pad */
  int plain;                      /* MAX: the scalar twin instead of SSE2 */
  const uint8_t *lut;             /* MAX: requantization of the max, NULL on a shared grid */
  const float *dq;                /* AVG, GLOBAL: the input's 256 dequantized values */
  float so;                       /* AVG, GLOBAL: output qparams */
  int32_t zo;
} QhU8Pool;

/* Output row oy (all ow pixels, c channels each) of one image at img into yrow. A window
 * with no input tap gives the host's result: MaxPool 0 (its max is -FLT_MAX, quantized to
 * 0), averages 0.0 quantized. GLOBAL: oh = ow = 1, the whole image. */
void qh_u8_pool_row(const QhU8Pool *p, const uint8_t *img, int64_t oy, uint8_t *yrow);

/* The GLOBAL kind of qh_u8_pool_row for one image, the same bytes, 64 channels per step
 * with AVX-512 VBMI (plugins/common/u8-gap.c): for a CPU with QH_CPU_AVX512VBMI (and
 * AVX-512 F and BW) only. Returns 0, writing nothing, where its exact integer form does
 * not apply (2^21 pixels or more, a scale that is not a normal float); the caller then
 * runs qh_u8_pool_row. */
int qh_u8_global_avg_vbmi(const QhU8Pool *p, const uint8_t *img, uint8_t *y);
/* Its first half: sums[c] (p->c of them) = the twin's double sum of dq over channel c's
 * pixels, exactly; 0 where it does not apply. */
int qh_u8_global_sums_vbmi(const QhU8Pool *p, const uint8_t *img, double *sums);

/* ---- data movement ---- */
/* One image [hw, c] (NHWC) into ONNX's order [c, hw]: y[c * hw + p] = x[p * c + c],
 * through lut when it is not NULL. */
void qh_u8_nhwc_to_nchw(const uint8_t *x, uint8_t *y, size_t hw, size_t c, const uint8_t *lut);

/* One output row of a constant Pad over H and W: w input pixels of c channels (x, NULL
 * when the row lies in the padding) between left and right pixels of code; the inside
 * through lut when it is not NULL. */
void qh_u8_pad_row(const uint8_t *x, uint8_t *y, size_t w, size_t c, size_t left, size_t right, uint8_t code,
                   const uint8_t *lut);

/* Channels [c0, c1) of n pixels of c channels each, through lut when it is not NULL. */
void qh_u8_slice_channels(const uint8_t *x, uint8_t *y, size_t n, size_t c, size_t c0, size_t c1,
                          const uint8_t *lut);

/* ShuffleNet's channel shuffle of n pixels (groups g, c a multiple of g): output channel
 * i * g + j is input channel j * (c / g) + i, through lut (required; the identity on a
 * shared grid). */
void qh_u8_channel_shuffle(const uint8_t *x, uint8_t *y, size_t n, size_t c, size_t g, const uint8_t lut[256]);

#endif
