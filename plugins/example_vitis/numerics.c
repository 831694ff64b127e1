/* How the DPU rounds, in one place: the observer's position search, the quantize
 * report's error figures (reference_numerics) and the deploy step all use these
 * helpers. Activations round half up (x.5 goes toward +infinity, vai_q_pytorch's
 * method 2, what the DPU's shifters do); weights, bias and network inputs round half
 * away from zero (C's round(), method 3, what the offline quantizer does); the host
 * stores the QDQ file's integer weights and biases with fake_quantize below, so they are
 * the DPU's. ONNX's QuantizeLinear rounds activations half to even, so an ONNX runtime
 * running our QDQ file differs from the DPU only on exact ties, by one step. */
#include <math.h>

#include "vitis.h"

double vitis_round(double x, VitisRounding mode) {
  return mode == VITIS_ROUND_HALF_UP ? floor(x + 0.5) : round(x);
}

static double clamp_q(double q) {
  return q < VITIS_QMIN ? VITIS_QMIN : q > VITIS_QMAX ? VITIS_QMAX : q;
}

double vitis_fake_quant(double x, int pos, VitisRounding mode) {
  /* x * 2^pos is exact in double, so the only rounding is the DPU's own */
  return ldexp(clamp_q(vitis_round(ldexp(x, pos), mode)), -pos);
}

VitisRounding vitis_role_rounding(VitisRole role) {
  return role == VITIS_ROLE_ACTIVATION ? VITIS_ROUND_HALF_UP : VITIS_ROUND_HALF_AWAY;
}

int vitis_scale_pos(float scale, int *pos) {
  int e;
  if (!(scale > 0) || !isfinite(scale) || frexpf(scale, &e) != 0.5f)
    return 0;
  *pos = 1 - e; /* scale = 0.5 * 2^e = 2^(e-1) = 2^-pos */
  return 1;
}

/* reference_numerics.fake_quantize: the host's quantize report measures each tensor's
 * error with the DPU's rounding instead of ONNX's. Any per-tensor scale is accepted
 * (the rounding rule does not need a power of two), so the report stays truthful even
 * for an edge refine could not fix. */
static QhStatus *fake_quantize(void *instance, const QhHostApi *host, int32_t role,
                               const QhQParams *qp, const QhTensorView *in, QhTensorView *out) {
  (void)instance;
  if (!qp || !in || !out || !qp->scale || !qp->zero_point || qp->count < 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "fake_quantize: missing qparams or tensors");
  if (in->dtype != QH_DTYPE_FLOAT || out->dtype != QH_DTYPE_FLOAT || in->nbytes != out->nbytes ||
      (in->nbytes && (!in->data || !out->data)))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "fake_quantize: want two float tensors of one size");
  if (qp->count != 1)
    return host->status_new(QH_ERR_UNSUPPORTED, "fake_quantize: the DPU quantizes per tensor only");
  double scale = qp->scale[0];
  if (!(scale > 0) || !isfinite(scale))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "fake_quantize: scale is not positive and finite");
  VitisRounding mode = role == QH_ROLE_ACTIVATION ? VITIS_ROUND_HALF_UP : VITIS_ROUND_HALF_AWAY;
  double lo = qp->quant_min, hi = qp->quant_max, zp = qp->zero_point[0];
  const float *x = in->data;
  float *y = out->data;
  for (size_t i = 0; i < in->nbytes / sizeof(float); i++) {
    double q = vitis_round((double)x[i] / scale, mode) + zp;
    q = q < lo ? lo : q > hi ? hi : q;
    y[i] = (float)((q - zp) * scale);
  }
  return NULL;
}

const QhReferenceNumericsOps vitis_numerics = {
    QH_STRUCT_HEADER(QhReferenceNumericsOps),
    .description = "activations round half up, weights, bias and inputs half away from zero",
    .fake_quantize = fake_quantize,
};
