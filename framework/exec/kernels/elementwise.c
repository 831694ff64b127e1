/* Reference kernels of the elementwise family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_elementwise[] = {
    {NULL},
};
