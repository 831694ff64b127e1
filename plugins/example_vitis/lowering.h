/* What example_vitis's files share beyond the kernels: the lowering group (lowering.c),
 * the deploy group (deploy.c), and the power-of-two reading of a scale both need. */
#ifndef EXAMPLE_VITIS_LOWERING_H
#define EXAMPLE_VITIS_LOWERING_H

#include <qhost/qhost-plugin.h>

extern const QhLoweringOps example_vitis_lowering;
extern const QhDeployOps example_vitis_deploy;

/* Positions a tensor may have (scale 2^-pos). */
#define VITIS_POS_MIN (-32)
#define VITIS_POS_MAX 48

/* 1 and *pos when scale is exactly 2^-pos with pos in range, else 0. */
int vitis_scale_pos(double scale, int *pos);

#endif
