/* Which BLAS kernels the fp32 path runs on, for benchmark reports.
 *
 * OpenBLAS picks its kernel set from the CPU when it loads, unless the environment
 * variable OPENBLAS_CORETYPE names one; a machine that sets it (some do, to keep
 * results comparable) may run slower kernels than the CPU supports, so benchmarks
 * print the set in use. Threading: may be called from any thread. */
#ifndef QH_EXEC_BLAS_H
#define QH_EXEC_BLAS_H

#include <glib.h>

G_BEGIN_DECLS

/* "OpenBLAS Cooperlake kernels", plus " (OPENBLAS_CORETYPE=X)" when the environment
 * chose them, then "; " and the convolution engine (qh_conv_engine_describe: oneDNN's
 * version and ISA); static storage, computed once. */
const char *qh_blas_describe(void);

G_END_DECLS

#endif
