/* Reference kernels of the reduce family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_reduce[] = {
    {NULL},
};
