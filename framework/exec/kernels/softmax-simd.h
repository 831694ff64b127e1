/* Softmax along the last axis, 16 float lanes wide with AVX-512 (softmax-simd.c), and the
 * single-precision exp it is built on. Pure functions of their input; safe from any thread;
 * x and y may be the same array but must not otherwise overlap. No errors: NaN anywhere in
 * a row makes the whole row NaN, as the scalar Softmax does. */
#ifndef QH_EXEC_SOFTMAX_SIMD_H
#define QH_EXEC_SOFTMAX_SIMD_H

#include <glib.h>
#include <stdint.h>

/* Softmax of each of the rows rows of n floats: row r is x[r * n .. r * n + n). Returns
 * FALSE, writing nothing, where the host lacks AVX-512F (or QHOST_CPU_DISABLE hides it):
 * the caller then takes its scalar loop. Within 2 ulp of the scalar Softmax's exponentials
 * and a reordered float sum (see softmax-simd.c). */
gboolean qh_softmax_rows_simd(const float *x, float *y, int64_t rows, int64_t n);
/* y[i] = exp(x[i]) for i < n from the single-precision polynomial, for x <= 0 (Softmax's
 * arguments; x below -104 gives 0, NaN gives NaN): within 2 ulp of the exact exp. Returns
 * FALSE, writing nothing, without AVX-512F. For the tests. */
gboolean qh_expf_f32_single(const float *x, float *y, int64_t n);

#endif
