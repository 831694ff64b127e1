/* transform_for_annotation: writes into the float graph what the DPU computes
 * differently from ONNX, as ordinary ONNX, so that the QDQ file reproduces the DPU's
 * arithmetic in any ONNX runtime (up to rounding), calibration observes the tensors the
 * DPU will really produce, and the report lists every change:
 *  - LeakyRelu: the DPU multiplies by a 8-bit fraction, alpha -> round(alpha*256)/256
 *    (PyTorch's default 0.1 becomes 26/256 = 0.1015625);
 *  - HardSigmoid in PyTorch's form (alpha 1/6, beta 0.5): the DPU computes
 *    relu6(x + 3) * 2731/16384, i.e. alpha 2731/16384, beta 3 * 2731/16384;
 *  - AveragePool / GlobalAveragePool: the DPU divides by shifting, multiplying the
 *    window sum by k/2^n instead of 1/(kh*kw); a Mul by (kh*kw) * k/2^n after the pool
 *    makes ONNX's average the DPU's (3x3: 63/64). No Mul when the factor is 1
 *    (power-of-two windows). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vitis-graph.h"
#include "vitis.h"

#define HSIG_ALPHA (2731.0f / 16384.0f)
#define HSIG_BETA (3.0f * 2731.0f / 16384.0f)

/* vai_q_onnx/Quark simulate_dpu's table, else the k/2^n nearest 1/(kh*kw) with
 * n < 7 + ceil(log2(kh*kw)). */
double vitis_avgpool_factor(int64_t kh, int64_t kw) {
  if (kh == 3 && kw == 3)
    return 9.0 * 7.0 / 64.0;
  if (kh == 5 && kw == 5)
    return 25.0 * 10.0 / 256.0;
  if (kh == 6 && kw == 6)
    return 36.0 * 7.0 / 256.0;
  if (kh == 7 && kw == 7)
    return 49.0 * 21.0 / 1024.0;
  if (kh == 14 && kw == 14)
    return 196.0 * 21.0 / 4096.0;
  double rec = (double)kh * (double)kw, best = 1.0, best_diff = INFINITY;
  int n_max = 7 + (int)ceil(log2(rec));
  for (int n = 0; n < n_max && n < 60; n++) {
    double p = ldexp(1.0, n), k = nearbyint(p / rec), diff = fabs(k / p - 1.0 / rec);
    if (diff < best_diff) {
      best_diff = diff;
      best = k / p * rec;
    }
  }
  return best;
}

static float attr_float(const QhHostApi *h, const QhGraphView *g, uint32_t n, const char *name, float dflt) {
  float v = dflt;
  h->status_free(h->node_attr_float(g, n, name, &v));
  return v;
}

static void note(const QhHostApi *h, const QhGraphView *g, uint32_t n, const char *what) {
  char line[400];
  const char *name = h->node_name(g, n);
  snprintf(line, sizeof line, "dpu: node '%s' (%s): %s", name ? name : "?", h->node_op_type(g, n), what);
  h->report(QH_LOG_INFO, line);
}

static QhStatus *leaky_relu(const QhHostApi *h, QhGraphView *g, uint32_t n) {
  float alpha = attr_float(h, g, n, "alpha", 0.01f), dpu = (float)(nearbyint(alpha * 256.0) / 256.0);
  if (dpu == alpha)
    return NULL;
  char what[160];
  snprintf(what, sizeof what, "alpha %.9g -> %.9g (%d/256, the DPU's 8-bit slope)", (double)alpha, (double)dpu,
           (int)nearbyint(alpha * 256.0));
  note(h, g, n, what);
  return h->node_set_attr_float(g, n, "alpha", dpu);
}

static QhStatus *hard_sigmoid(const QhHostApi *h, QhGraphView *g, uint32_t n) {
  float alpha = attr_float(h, g, n, "alpha", 0.2f), beta = attr_float(h, g, n, "beta", 0.5f);
  if (fabsf(alpha - 1.0f / 6.0f) > 1e-6f || beta != 0.5f) {
    if (alpha != HSIG_ALPHA || beta != HSIG_BETA)
      note(h, g, n, "not PyTorch's hardsigmoid (alpha 1/6, beta 0.5): the DPU has no such op, it stays float");
    return NULL;
  }
  note(h, g, n, "alpha 1/6 -> 2731/16384, beta 0.5 -> 8193/16384 (the DPU's relu6(x+3)*2731/16384)");
  QhStatus *st = h->node_set_attr_float(g, n, "alpha", HSIG_ALPHA);
  return st ? st : h->node_set_attr_float(g, n, "beta", HSIG_BETA);
}

static QhStatus *average_pool(const QhHostApi *h, QhGraphView *g, uint32_t n) {
  int64_t kh, kw;
  if (!vg_pool_window(h, g, n, &kh, &kw)) {
    note(h, g, n, "window unknown (not 2-D or dynamic shape): the DPU factor cannot be applied, it stays float");
    return NULL;
  }
  double factor = vitis_avgpool_factor(kh, kw);
  if (factor == 1.0)
    return NULL;
  uint32_t out = h->node_output(g, n, 0);
  if (h->value_flags(g, out) & QH_VALUE_GRAPH_OUTPUT) {
    note(h, g, n, "output is a graph output: no DPU factor inserted (the output name would change)");
    return NULL;
  }
  const char *name = h->node_name(g, n);
  char cname[300], mname[300], vname[300];
  snprintf(cname, sizeof cname, "%s_dpu_factor", name ? name : "avgpool");
  snprintf(vname, sizeof vname, "%s_dpu_scaled", name ? name : "avgpool");
  snprintf(mname, sizeof mname, "%s_dpu_scale", name ? name : "avgpool");
  float f = (float)factor;
  uint32_t c, scaled, mul;
  /* rewire the consumers first, so that the new Mul itself keeps reading the pool */
  QhStatus *st = h->graph_add_constant(g, cname, QH_DTYPE_FLOAT, 0, NULL, &f, sizeof f, &c);
  if (!st)
    st = h->graph_add_value(g, vname, &scaled);
  if (!st)
    st = h->value_replace_uses(g, out, scaled);
  uint32_t ins[2] = {out, c};
  if (!st)
    st = h->graph_add_node(g, "Mul", "", mname, ins, 2, &scaled, 1, &mul);
  if (st)
    return st;
  char what[200];
  snprintf(what, sizeof what, "%lldx%lld window: Mul by %.9g after it (the DPU's sum*k/2^n instead of /%lld)",
           (long long)kh, (long long)kw, factor, (long long)(kh * kw));
  note(h, g, n, what);
  return NULL;
}

static QhStatus *transform(void *instance, const QhHostApi *h, QhGraphView *g) {
  (void)instance;
  uint32_t n_nodes = h->graph_node_count(g); /* nodes added below are not revisited */
  for (uint32_t n = 0; n < n_nodes; n++) {
    QhStatus *st = NULL;
    if (!h->node_is_live(g, n))
      continue;
    if (vg_is_op(h, g, n, "LeakyRelu"))
      st = leaky_relu(h, g, n);
    else if (vg_is_op(h, g, n, "HardSigmoid"))
      st = hard_sigmoid(h, g, n);
    else if (vg_is_op(h, g, n, "AveragePool") || vg_is_op(h, g, n, "GlobalAveragePool"))
      st = average_pool(h, g, n);
    if (st)
      return st;
  }
  return NULL;
}

const QhTransformOps vitis_transform = {QH_STRUCT_HEADER(QhTransformOps),
                                        .transform_for_annotation = transform};
