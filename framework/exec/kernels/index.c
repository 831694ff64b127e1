/* Reference kernels of the index family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_index[] = {
    {NULL},
};
