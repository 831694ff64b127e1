/* Sigmoid over float arrays: the scalar formula and its AVX-512 twin (same bits).
 * Pure functions of their input; safe from any thread; x and y may be the same array
 * but must not otherwise overlap. */
#ifndef QH_EXEC_SIGMOID_SIMD_H
#define QH_EXEC_SIGMOID_SIMD_H

#include <stdint.h>

/* 1 / (1 + expf(-x)) for x >= 0, e / (1 + e) with e = expf(x) otherwise (never overflows). */
float qh_sigmoid_scalar(float x);
/* y[i] = qh_sigmoid_scalar(x[i]) for i < n; AVX-512 where the host has it (and
 * QHOST_CPU_DISABLE does not hide it), the scalar loop elsewhere. */
void qh_sigmoid_f32(const float *x, float *y, int64_t n);
/* The scalar loop, for the tests. */
void qh_sigmoid_f32_scalar(const float *x, float *y, int64_t n);

#endif
