/* Sigmoid and expf over float arrays: the scalar formulas and their AVX-512 twins (same bits).
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

/* y[i] = expf(x[i]) for i < n, the same bits as glibc's expf: AVX-512 where the host has
 * it (Softmax's exponentials), the scalar loop elsewhere. x and y may be the same array. */
void qh_expf_f32(const float *x, float *y, int64_t n);
/* The scalar loop, for the tests. */
void qh_expf_f32_scalar(const float *x, float *y, int64_t n);

#endif
