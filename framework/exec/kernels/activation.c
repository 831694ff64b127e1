/* Reference kernels of the activation family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_activation[] = {
    {NULL},
};
