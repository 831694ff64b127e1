/* Reference kernels of the shape family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_shape[] = {
    {NULL},
};
