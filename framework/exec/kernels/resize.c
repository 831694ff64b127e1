/* Reference kernels of the resize family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_resize[] = {
    {NULL},
};
