/* uint8 helper kernels that more than one backend plugin can run between its int8
 * convolutions (the x86 plugin, and the fbgemm plugin for its per-channel Add): lookup
 * tables for the fixed-shape activations (Sigmoid, Tanh, HardSigmoid, HardSwish), Add / Mul
 * of two same-shape tensors and the per-channel broadcasting Add / Mul of
 * squeeze-excitation blocks, on channels-last uint8 tensors (pooling and data movement:
 * u8-layout.h). Each computes exactly what the host's DequantizeLinear -> float op ->
 * QuantizeLinear does (framework/exec/kernels/activation.c, elementwise.c, qdq.c), so
 * its bytes equal the reference run's. Every vectorised path has a scalar twin here
 * that plugins/common/tests/test_u8_kernels.c compares it with bit for bit.
 * Plugin code: includes only the SDK and this directory. */
#ifndef QH_PLUGINS_U8_KERNELS_H
#define QH_PLUGINS_U8_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The host's QuantizeLinear of one float to uint8 (framework/exec/kernels/qdq.c): exact
 * division by the scale, clamping to the integer bounds [lo, hi] = [-zo, 255 - zo]
 * before rounding (the same result as saturating after, since the bounds are integers),
 * round half to even through the 1.5 * 2^23 trick. */
#define QH_U8_ROUND_MAGIC 12582912.0f
static inline uint8_t qh_u8_quant(float v, float so, float lo, float hi, int32_t zo) {
  float r = v / so;
  r = r < lo ? lo : r;
  r = r > hi ? hi : r;
  r = (r + QH_U8_ROUND_MAGIC) - QH_U8_ROUND_MAGIC;
  return (uint8_t)((int32_t)r + zo);
}

/* ---- activation lookup tables ---- */
typedef enum { QH_U8_SIGMOID, QH_U8_TANH, QH_U8_HARDSIGMOID, QH_U8_HARDSWISH, QH_U8_N_ACTS } QhU8Act;

/* The activation named op_type (ONNX spelling), or -1. */
int qh_u8_act_from_name(const char *op_type);

/* lut[q] = Q_out(act(DQ_in(q))) with the host's float formula for act (HardSigmoid's
 * alpha and beta; ignored by the others). A uint8 input has 256 values, so the table
 * is the op, exactly. */
void qh_u8_act_lut(QhU8Act act, float alpha, float beta, float sx, int32_t zx, float so, int32_t zo,
                   uint8_t lut[256]);

/* y[i] = lut[x[i]] (x and y may be the same buffer). _vbmi is the AVX-512 VBMI path (64
 * bytes per step), for a CPU with QH_CPU_AVX512VBMI (and AVX-512 F and BW) only; the
 * first is its scalar twin. */
void qh_u8_lut_apply(const uint8_t lut[256], const uint8_t *x, uint8_t *y, size_t n);
void qh_u8_lut_apply_vbmi(const uint8_t lut[256], const uint8_t *x, uint8_t *y, size_t n);

/* ---- binary ops with a per-channel operand ---- */
typedef struct {
  int mul;         /* Mul, else Add */
  int relu;        /* followed by Relu */
  float sa, sb, so;
  int32_t za, zb, zo;
} QhU8Binary;

enum { QH_U8_ISA_SSE2, QH_U8_ISA_AVX2, QH_U8_ISA_AVX512, QH_U8_N_ISAS };

/* y[p * C + c] = Q(DQ_a(a[p * C + c]) op DQ_b(b[c])) for p < P, c < C: the squeeze-
 * excitation form, a [P, C] channels-last activation and a [C] vector. Add and Mul are
 * commutative in IEEE arithmetic, so the caller may swap the operands (and their
 * qparams). _ref is the scalar twin; the other is compiled per instruction set and runs
 * the clone for isa (QH_U8_ISA_*), which the caller picks from the host's CPU features. */
void qh_u8_binary_channels_ref(const QhU8Binary *p, const uint8_t *a, const uint8_t *b, uint8_t *y, size_t P,
                               size_t C);
void qh_u8_binary_channels(const QhU8Binary *p, int isa, const uint8_t *a, const uint8_t *b, uint8_t *y,
                           size_t P, size_t C);

/* ---- binary ops of two same-shape tensors ---- */
/* y[i] = Q(DQ_a(a[i]) op DQ_b(b[i])) for i < n. _ref is the scalar twin (kept scalar: the
 * loop the clones are held to); the other runs the clone for isa (QH_U8_ISA_*). */
void qh_u8_binary_same_ref(const QhU8Binary *p, const uint8_t *a, const uint8_t *b, uint8_t *y, size_t n);
void qh_u8_binary_same(const QhU8Binary *p, int isa, const uint8_t *a, const uint8_t *b, uint8_t *y, size_t n);

#endif
