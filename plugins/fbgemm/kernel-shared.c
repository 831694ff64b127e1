/* What the weighted kernels (kernel.c: dense, depthwise, linear; conv-grouped-kernel.c)
 * share: at creation the unit's weight and bias data, checked against the shapes, and
 * the requantization as PyTorch 1.13's fbgemm engine sets it up (the per-channel
 * multiplier and bias in accumulator units, and the output clamp from the unit's range,
 * Relu and Clip); at run the pool that hands their tasks to the host's parallel_for. */
#include <math.h>

#include "fbgemm.h"

/* PyTorch's fbgemm engine (1.13, PackedConvWeight / PackedLinearWeight::apply_impl): in
 * float, act_times_w_scale[c] = sx * sw[c], multiplier[c] = act_times_w_scale[c] / so;
 * FBGEMM adds the float bias as bias[c] / act_times_w_scale[c] per channel and
 * bias * (1 / act_times_w_scale) per tensor. An int32 QDQ bias already in units of
 * act_times_w_scale is added as it is; with another scale it is made float first. */
static void requant_arrays(const FbInfo *in, const void *b, int64_t nc, float *bias, float *mult) {
  float sx = in->xq->scale[0], so = in->yq->scale[0];
  for (int64_t c = 0; c < nc; c++) {
    float atws = sx * in->wq->scale[in->wq->count == 1 ? 0 : c];
    mult[c] = atws / so;
    bias[c] = 0.0f;
    if (!b)
      continue;
    float bf;
    if (in->bq) {
      float bs = in->bq->scale[in->bq->count == 1 ? 0 : c];
      int32_t bi = ((const int32_t *)b)[c];
      if (bs == atws) {
        bias[c] = (float)bi;
        continue;
      }
      bf = (float)bi * bs;
    } else {
      bf = ((const float *)b)[c];
    }
    if (in->wq->count == 1) {
      float rcp = 1.0f / atws;
      bias[c] = bf * rcp;
    } else {
      bias[c] = bf / atws;
    }
  }
}

/* QuantizeLinear of a Clip bound as the host computes it: nearbyint(v / s) + z,
 * saturated to uint8; infinities saturate too. */
static int32_t quantize_bound(float v, float s, int32_t z) {
  float q = nearbyintf(v / s) + (float)z;
  return q < 0.0f ? 0 : q > 255.0f ? 255 : (int32_t)q;
}

FbRequant fb_requant_setup(const FbInstance *inst, const FbInfo *in, const void *b, int64_t nc, float *bias,
                           float *mult) {
  requant_arrays(in, b, nc, bias, mult);
  const QhQParams *yq = in->yq;
  int32_t zo = yq->zero_point[0];
  FbRequant rq = {.zx = in->xq->zero_point[0], .zo = zo, .lo = in->relu && zo > yq->quant_min ? zo : yq->quant_min,
                  .hi = inst->clamp_to_dtype ? 255 : yq->quant_max, .bias = bias, .mult = mult};
  if (in->clip) {
    /* the host's QuantizeLinear of the bounds (lowering.c: Clip on the shared grid) */
    int32_t qlo = quantize_bound(in->clip_lo, yq->scale[0], zo), qhi = quantize_bound(in->clip_hi, yq->scale[0], zo);
    rq.lo = qlo > rq.lo ? qlo : rq.lo;
    rq.hi = qhi < rq.hi ? qhi : rq.hi;
    rq.hi = rq.hi < rq.lo ? rq.lo : rq.hi; /* Clip entirely below the range clamp: the host's Q(lo) */
  }
  return rq;
}

QhStatus *fb_weight_data(const QhHostApi *host, const QhGraphView *g, const FbInfo *in, int64_t nc, int64_t kk,
                         const void **w, const void **b) {
  size_t wn = 0, bn = 0;
  QhStatus *st = host->value_data(g, in->w_value, w, &wn);
  if (st)
    return st;
  if (!*w || wn != (size_t)(nc * kk))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "weight data size differs from its shape");
  if (in->b_value != QH_INVALID_ID) {
    if ((st = host->value_data(g, in->b_value, b, &bn)))
      return st;
    if (!*b || bn != (size_t)nc * 4)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "bias data size differs from its shape");
  }
  return NULL;
}

void fb_pool_run(void *runner, size_t n, FbTaskFn task, void *user) {
  FbRunner *r = runner;
  QhStatus *st = r->host->parallel_for(r->ctx, n, task, user);
  if (st && !r->status)
    r->status = st;
  else
    r->host->status_free(st);
}
