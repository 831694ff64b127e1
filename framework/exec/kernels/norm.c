/* Reference kernels of the norm family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_norm[] = {
    {NULL},
};
