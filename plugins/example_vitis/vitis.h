/* example_vitis's internal header for its quantization semantics: the instance the
 * options configure, the callback groups the descriptor points at, and the few helpers
 * the annotator, observer, constraints and numerics share. Everything a DPU fixes
 * lives here once: int8, per tensor, zero point 0, scale = 2^-pos. */
#ifndef EXAMPLE_VITIS_H
#define EXAMPLE_VITIS_H

#include <qhost/qhost-plugin.h>

/* The DPU's one quantized type: int8, symmetric, full range. */
#define VITIS_QMIN (-128)
#define VITIS_QMAX 127
/* Positions the observer can choose: scale 2^-pos for pos in [VITIS_POS_MIN, MAX].
 * Far wider than any real tensor needs; a bound keeps the state a fixed-size table. */
#define VITIS_POS_MIN (-64)
#define VITIS_POS_MAX 64
#define VITIS_POS_SPAN (VITIS_POS_MAX - VITIS_POS_MIN + 1)
/* The registered observer's name (--config "observer": "DpuPosObserver"). */
#define VITIS_OBSERVER_NAME "DpuPosObserver"

/* What an observed tensor is: it decides the rounding and the number of candidates
 * (observer_args {"role": ...}). */
typedef enum {
  VITIS_ROLE_ACTIVATION = 0, /* a computed tensor: half-up rounding, n candidates */
  VITIS_ROLE_INPUT = 1,      /* a network input: round-half-away, one candidate (MQBench) */
  VITIS_ROLE_WEIGHT = 2,     /* round-half-away, n candidates */
  VITIS_ROLE_BIAS = 3,       /* int8 bias with its own position, like a weight */
} VitisRole;

/* Rounding modes of vai_q_pytorch's fix kernels (method 2 and 3). */
typedef enum { VITIS_ROUND_HALF_UP, VITIS_ROUND_HALF_AWAY } VitisRounding;

typedef struct {
  int candidates; /* positions the search tries after the overflow-free one (option) */
} VitisInstance;

/* plugin.c: the instance the options configure */
QhStatus *vitis_instance_create(const QhHostApi *host, const QhInstanceInfo *info,
                                const QhOption *options, size_t n_options, void **out_instance);
void vitis_instance_destroy(void *instance);

/* The callback groups. */
extern const QhTransformOps vitis_transform;
extern const QhAnnotateOps vitis_annotate;
extern const QhObserverOps vitis_observer;
extern const QhRefineOps vitis_refine;
extern const QhReferenceNumericsOps vitis_numerics;

/* numerics.c: the DPU's rounding of one value to an integer in [qmin, qmax]. */
double vitis_round(double x, VitisRounding mode);
/* Quantize then dequantize x with scale 2^-pos (the fake-quant the search measures). */
double vitis_fake_quant(double x, int pos, VitisRounding mode);
/* The rounding a role uses. */
VitisRounding vitis_role_rounding(VitisRole role);
/* The position of a power-of-two scale: 1 with *pos set when scale == 2^-pos exactly. */
int vitis_scale_pos(float scale, int *pos);

/* observer.c: the position search on one tensor, exported for the unit test.
 * Returns 0 and leaves *pos alone when the tensor has no non-zero finite value. */
int vitis_search_pos(const float *x, size_t n, VitisRole role, int candidates, int *pos);

/* The AveragePool factor the DPU applies instead of 1/(kh*kw): the rescale multiplier
 * m (the DPU multiplies the window sum by k/2^n = m/(kh*kw)); transform.c. */
double vitis_avgpool_factor(int64_t kh, int64_t kw);

#endif
