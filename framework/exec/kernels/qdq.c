/* Reference kernels of the qdq family (placeholder table until the kernels land). */
#include "exec/op.h"

const QhOpDef qh_ops_qdq[] = {
    {NULL},
};
