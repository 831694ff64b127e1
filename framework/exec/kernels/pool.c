/* Reference kernels of the pool family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_pool[] = {
    {NULL},
};
