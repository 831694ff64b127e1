/* The lowering group (lowering.c) and the deploy group (deploy.c) the descriptor points
 * at, and the positions the integer kernels take. */
#ifndef EXAMPLE_VITIS_LOWERING_H
#define EXAMPLE_VITIS_LOWERING_H

#include "vitis.h"

extern const QhLoweringOps example_vitis_lowering;
extern const QhDeployOps example_vitis_deploy;

/* Positions a tensor may have on the DPU's kernels and in a deploy package (scale
 * 2^-pos); the observer's search range (vitis.h) is wider. */
#define VITIS_KERNEL_POS_MIN (-32)
#define VITIS_KERNEL_POS_MAX 48

/* 1 and *pos when scale is exactly 2^-pos with pos in the kernels' range, else 0. */
int vitis_kernel_pos(float scale, int *pos);

#endif
