/* The x86 plugin's uint8 units between its oneDNN convs (Add and Mul (+Relu; same shapes,
 * or per channel as in squeeze-excitation), Relu, Clip (ReLU6), Sigmoid, Tanh,
 * HardSigmoid, HardSwish, standalone BatchNormalization (+Relu), Pad (constant, H and W),
 * ReduceMean over H and W, ShuffleNet's channel shuffle and channel Slice, MaxPool,
 * AveragePool (ceil_mode, any pads), GlobalAveragePool and Flatten), channels-last, so
 * that a ResNet or a MobileNetV3 runs conv -> add -> pool -> conv without leaving NHWC
 * int8. They are plain C rather than oneDNN primitives because they are memory-bound and
 * because oneDNN 2.6 binary and pooling cannot reproduce the host's QDQ numerics: each
 * computes exactly what the host's DequantizeLinear -> float op -> QuantizeLinear does,
 * so its output is identical to the reference run's. Split by purpose:
 * u8-ops-analyze.c (what a unit is, accept, create: the parameters and the 256-entry
 * tables), u8-ops-reshape.c (shapes), u8-ops-run.c (the parallel tasks); the kernels they
 * call are plugins/common's (u8-kernels.c, u8-layout.c), shared with the fbgemm plugin.
 * Private to the x86 plugin. */
#ifndef QH_X86_U8_OPS_H
#define QH_X86_U8_OPS_H

#include "onednn.h"

enum { U_ADD, U_RELU, U_MAXPOOL, U_AVGPOOL, U_GAP, U_FLATTEN, U_CLIP, U_MUL,
       U_SIGMOID, U_TANH, U_HSIGMOID, U_HSWISH, /* U_SIGMOID.. in QhU8Act order */
       U_BN, U_PAD, U_SHUFFLE, U_SLICE, U_N_OPS };
#define IS_ACT(op) ((op) >= U_SIGMOID && (op) <= U_HSWISH)
#define IS_POINTWISE(op) ((op) == U_RELU || (op) == U_CLIP || IS_ACT(op))
#define IS_BINARY(op) ((op) == U_ADD || (op) == U_MUL)

#define CHUNK 65536 /* Add / Relu elements per parallel task */

typedef struct {
  const X86Instance *inst; /* its team runs the loops */
  int op;
  int relu;        /* Add followed by Relu */
  int include_pad; /* AveragePool count_include_pad */
  int identity;    /* lut is the identity: MaxPool / Flatten with shared qparams */
  int clamp;       /* lut[q] == min(max(q, lut[0]), lut[255]): Relu / Clip with shared qparams */
  int64_t axis;    /* Flatten */
  int ceil_mode;   /* pools: ONNX's ceil_mode=1 output size */
  int squeeze;     /* ReduceMean with keepdims=0: the output is [N, C] */
  float alpha, beta; /* HardSigmoid */
  int bcast;       /* Add / Mul: 0 equal shapes, 1 b is per channel, 2 a is per channel */
  int isa;         /* QH_U8_ISA_* of plugins/common's clones */
  int vbmi;        /* table lookups with AVX-512 VBMI (the host reports QH_CPU_AVX512VBMI) */
  int gate;        /* Mul of act(x) by x: x's input slot, and lut is the whole Mul; else -1 */
  size_t n_in;     /* the unit's inputs (Clip: x, then its constant min and max) */
  float clip_lo, clip_hi;
  int64_t kh, kw, sh, sw, pad[4];
  float sa, sb, so;
  int32_t za, zb, zo;
  float dq[256]; /* the first input's dequantized values */
  uint8_t *bn_lut; /* BatchNormalization: one table of 256 per channel, [C][256] */
  int64_t bn_c;
  uint8_t pad_code; /* Pad: the quantized constant_value */
  int64_t shape0[5], shape2[4]; /* channel shuffle: the two Reshapes' shape constants */
  int64_t s_start, s_end, s_c0, s_c1; /* Slice over channels: as given, then resolved */
  uint8_t lut[256];
  /* set by reshape */
  int reshaped, rank;
  int64_t dims[QH_MAX_RANK], bdims[QH_MAX_RANK]; /* bdims: the second input's (Add / Mul) */
  int64_t n, h, w, c, oh, ow, bn;                /* bn: the per-channel operand's batch */
  size_t in_bytes, out_bytes, bin_bytes; /* bin_bytes: the second input's (Add / Mul) */
} U8Op;


/* The op's ONNX name (error messages). */
const char *x86_u8op_name(int op);
/* u8-ops-analyze.c, u8-ops-reshape.c, u8-ops-run.c: the kernel callbacks (QhKernelOps). */
QhStatus *x86_u8op_create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                          void **out);
void x86_u8op_destroy(void *kernel);
QhStatus *x86_u8op_reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                           QhTensorView *outputs, size_t n_outputs, size_t *out_workspace);

#endif
