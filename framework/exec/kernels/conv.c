/* Reference kernels of the conv family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_conv[] = {
    {NULL},
};
