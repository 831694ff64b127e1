/* example_vitis's integer kernels, the arithmetic a DPU does: int8 tensors whose scale
 * is 2^-pos (the "fix position"), int32/int64 accumulators, and requantization by a
 * shift with the DPU's rounding, round half up (x.5 goes toward +inf):
 *
 *   out = saturate_int8(floor(acc * 2^-shift + 1/2))
 *
 * Conv and linear: the products sum at position ipos + wpos; the bias (int8 with its own
 * position bpos, or int32) is added at P = max(ipos + wpos, bpos): shifted left when
 * it is coarser, and when it is finer (the DPU's negative shift_bias) the sum is
 * shifted left instead, so no bit of the bias is lost and the kernel computes what the
 * QDQ graph says; then shift = P - opos.
 * Activations are NCHW (ONNX's own layout), so the host never inserts transposes.
 * These functions know nothing about the host: they take plain arrays, so the plugin's
 * tests compare them against scalar twins without a graph. */
#ifndef EXAMPLE_VITIS_KERNELS_H
#define EXAMPLE_VITIS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Shifts every kernel supports: left shifts up to 16 (a finer output than the
 * accumulator) and right shifts up to 31. */
#define VITIS_SHIFT_MIN (-16)
#define VITIS_SHIFT_MAX 31

/* Fused activation after the accumulator. Clip (ReLU6 and the like) clamps the
 * accumulator to bounds on its own grid, so the clamp is exact and the output rounds
 * once, as Conv -> Clip -> QuantizeLinear does in the QDQ graph. */
enum { VITIS_ACT_NONE, VITIS_ACT_RELU, VITIS_ACT_LEAKY, VITIS_ACT_CLIP };
/* LeakyRelu's slope as the DPU has it: alpha = leaky_num / 256 (26 on the DPU). */
#define VITIS_LEAKY_DEN_SHIFT 8

/* floor(acc * 2^-shift + 1/2) saturated to [-128, 127]; shift in [MIN, MAX]. */
int8_t vitis_requant(int64_t acc, int shift);
/* floor(v * 2^-shift + 1/2) without saturation (shift < 0 shifts left). */
int64_t vitis_shift_round(int64_t v, int shift);
/* The activation applied to an accumulator: relu clamps at 0; leaky multiplies the
 * negative side by leaky_num and the positive side by 256, so the caller adds
 * VITIS_LEAKY_DEN_SHIFT to the shift. */
int64_t vitis_activate(int64_t acc, int act, int leaky_num);
/* acc clamped to [lo, hi] (accumulator units). */
int64_t vitis_clip(int64_t acc, int64_t lo, int64_t hi);

typedef struct VitisConv {
  int64_t n, ci, h, w;      /* input NCHW */
  int64_t co, kh, kw, group; /* weight [co][ci/group][kh][kw] */
  int64_t oh, ow;           /* output spatial size (vitis_conv_out_size) */
  int64_t stride[2], pad[4], dil[2]; /* pads: top, left, bottom, right (ONNX order) */
  int acc_lshift;           /* P - (ipos + wpos): the bias's finer bits */
  int shift;                /* P - opos (+8 with a fused leaky relu) */
  int act, leaky_num;
  int64_t clip_lo, clip_hi; /* VITIS_ACT_CLIP's bounds in accumulator units */
} VitisConv;

/* Output size of one spatial dim; <= 0 when the window does not fit. */
int64_t vitis_conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad_begin,
                            int64_t pad_end, int64_t dil);
/* One output plane (batch b, output channel oc) of a conv. bias: per output channel,
 * already at P (vitis_shift_round(bias, bpos - P), a left shift); NULL = 0. */
void vitis_conv_plane(const VitisConv *p, const int8_t *x, const int8_t *w,
                      const int64_t *bias, int8_t *y, int64_t b, int64_t oc);

typedef struct VitisLinear {
  int64_t k, n; /* y[row][n] = sum_k x[row][k] * w[n][k] */
  int acc_lshift, shift; /* as VitisConv's */
  int act, leaky_num;
  int64_t clip_lo, clip_hi; /* as VitisConv's */
} VitisLinear;
/* One row of a linear layer; w is [n][k] (Gemm transB=1 order). */
void vitis_linear_row(const VitisLinear *p, const int8_t *x, const int8_t *w,
                      const int64_t *bias, int8_t *y, int64_t row);

/* Element-wise binary ops with numpy broadcasting: out dims, and each input's strides
 * in elements over the output dims (0 where the input is broadcast). */
enum { VITIS_BINARY_ADD, VITIS_BINARY_MUL };
typedef struct VitisBinary {
  int op, rank;
  int64_t dims[8];
  int64_t a_stride[8], b_stride[8];
  /* Add: both inputs aligned to the finer position P = max(apos, bpos) by left shifts
   * a_lshift = P - apos, b_lshift = P - bpos; then shift = P - opos.
   * Mul: product at apos + bpos, shift = apos + bpos - opos. */
  int a_lshift, b_lshift, shift;
  int relu;
} VitisBinary;
void vitis_binary(const VitisBinary *p, const int8_t *a, const int8_t *b, int8_t *y,
                  size_t start, size_t end);

/* Pooling over NCHW planes. Max: the max, then requantized by shift = ipos - opos.
 * Average: sum * mult / (count * 2^mult_shift) rounded half up, where mult/2^mult_shift
 * is the factor the graph multiplies the average by (the DPU's k/2^n correction, 1 when
 * there is none) and count the window size (without padding when count_include_pad
 * is 0, as ONNX says). For a full window this is exactly the DPU's sum*K >> n. */
typedef struct VitisPool {
  int is_max;
  int64_t n, c, h, w, oh, ow, kh, kw;
  int64_t stride[2], pad[4];
  int count_include_pad;
  int64_t mult;
  int mult_shift;
  int shift; /* ipos - opos */
} VitisPool;
void vitis_pool_plane(const VitisPool *p, const int8_t *x, int8_t *y, int64_t plane);

/* Concat of n inputs along an axis: input i is outer x (mid[i] * inner) elements,
 * requantized by shift[i] = ipos_i - opos. */
void vitis_concat(size_t n_inputs, const int8_t *const *inputs, const int64_t *mid,
                  const int *shift, int64_t outer, int64_t inner, int8_t *y);

/* Unary ops over n elements: requantize by shift after the activation (relu, leaky with
 * the shift already including VITIS_LEAKY_DEN_SHIFT, or none for Flatten/Identity). */
void vitis_unary(const int8_t *x, int8_t *y, size_t n, int shift, int act, int leaky_num);

#endif
