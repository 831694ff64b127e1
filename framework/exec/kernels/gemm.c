/* Reference kernels of the gemm family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_gemm[] = {
    {NULL},
};
