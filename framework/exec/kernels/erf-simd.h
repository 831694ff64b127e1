/* Erf over float arrays: a double-precision piecewise polynomial, in a scalar loop and its
 * AVX-512 and AVX2 twins (the same bits), within 1 ulp of glibc's erff; and a cheaper
 * single-precision one for the fused GELU (AVX-512 only, within 2.3 ulp of erf).
 * Pure functions of their input; safe from any thread; x and y may be the same array
 * but must not otherwise overlap. No errors: NaN gives NaN, +-Inf gives +-1. */
#ifndef QH_EXEC_ERF_SIMD_H
#define QH_EXEC_ERF_SIMD_H

#include <glib.h>
#include <stdint.h>

/* erf(x) from the polynomials (erf-simd.c), computed with fma() lane by lane. */
float qh_erf_poly(float x);
/* y[i] = qh_erf_poly(x[i]) for i < n: AVX-512F where the host has it, AVX2 with FMA
 * below that (QHOST_CPU_DISABLE can hide either), glibc's erff loop on older CPUs. */
void qh_erf_f32(const float *x, float *y, int64_t n);
/* The scalar qh_erf_poly loop, for the tests. */
void qh_erf_f32_scalar(const float *x, float *y, int64_t n);

/* y[i] = erf(x[i]) for i < n from the single-precision polynomials (within 2.3 ulp of the
 * exact erf; +-1 from |x| >= 4; NaN stays NaN), 16 lanes wide. Returns FALSE, writing
 * nothing, where the host lacks AVX-512F (or QHOST_CPU_DISABLE hides it): the caller then
 * takes qh_erf_f32. */
gboolean qh_erf_f32_single(const float *x, float *y, int64_t n);

/* The fused GELU's float steps around the Erf. */
typedef struct {
  float k_in;          /* the Erf's argument is x * k_in */
  float k_add;         /* added to the Erf (1) */
  float k_half;        /* the other factor (0.5) */
  gboolean half_first; /* (x * k_half) * (erf + k_add), else (x * (erf + k_add)) * k_half */
} QhGeluSteps;
/* y[i] = GELU(x[i]) for i < n in one pass with qh_erf_f32_single's Erf, the other steps
 * as s says, in that order. Returns FALSE, writing nothing, without AVX-512F. */
gboolean qh_gelu_f32_single(const QhGeluSteps *s, const float *x, float *y, int64_t n);

#endif
