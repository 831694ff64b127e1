/* The host's reference int8 kernels (int8-reference.h): naive loops over quantized
 * linear, NCHW conv2d and add that apply docs/numerics.md §7's requantization rules one
 * float32 rounding at a time, so that plugin kernels have a twin to be compared with bit
 * for bit. Speed is irrelevant here; every expression is written in the spec's order and
 * the file is compiled without FMA contraction, which would fuse a rounding away. */
#pragma GCC optimize("fp-contract=off")

#include "exec/int8-reference.h"

#include <math.h>

#include "core/error.h"

/* Keep the compiler from evaluating float expressions in wider precision (x87) or
 * folding two roundings into one; every assignment to a float rounds to binary32. */
typedef volatile float vf32;

static gboolean dtype_range(QhDType dt, int32_t *lo, int32_t *hi) {
  if (dt == QH_DTYPE_U8) {
    *lo = 0;
    *hi = 255;
    return TRUE;
  }
  if (dt == QH_DTYPE_S8) {
    *lo = -128;
    *hi = 127;
    return TRUE;
  }
  return FALSE;
}

static int32_t load(const void *p, QhDType dt, int64_t i) {
  return dt == QH_DTYPE_U8 ? (int32_t)((const uint8_t *)p)[i] : (int32_t)((const int8_t *)p)[i];
}

static void store(void *p, QhDType dt, int64_t i, int32_t v) {
  if (dt == QH_DTYPE_U8)
    ((uint8_t *)p)[i] = (uint8_t)v;
  else
    ((int8_t *)p)[i] = (int8_t)v;
}

static int32_t clamp32(int64_t v, int32_t lo, int32_t hi) {
  return v < lo ? lo : v > hi ? hi : (int32_t)v;
}

/* rint(v) + zp, clamped to [lo, hi]; v is clamped first so the integer conversion is
 * defined for any finite or infinite v (2^40 is far outside the int32 range). */
static int32_t round_add_clamp(float v, int32_t zp, int32_t lo, int32_t hi) {
  float r = rintf(v);
  if (isnan(r))
    r = 0.0f;
  if (r > 0x1p40f)
    r = 0x1p40f;
  if (r < -0x1p40f)
    r = -0x1p40f;
  return clamp32((int64_t)r + zp, lo, hi);
}

int32_t qh_int8_quantize_one(float x, float scale, int32_t zero_point, QhDType dtype) {
  int32_t lo = 0, hi = 0;
  if (!dtype_range(dtype, &lo, &hi))
    return 0;
  vf32 inv = 1.0f / scale;
  vf32 v = x * inv;
  return round_add_clamp(v, zero_point, lo, hi);
}

void qh_int8_params_set_clamp(QhInt8Params *p, gboolean relu) {
  int32_t lo = 0, hi = 0;
  dtype_range(p->y.dtype, &lo, &hi);
  p->lo = relu ? clamp32(p->y.zero_point, lo, hi) : lo;
  p->hi = hi;
}

static gboolean check_quant(const QhInt8Quant *q, const char *what, GError **error) {
  int32_t lo = 0, hi = 0;
  if (!dtype_range(q->dtype, &lo, &hi)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "int8 reference: %s dtype %d is not u8 or s8",
                what, (int)q->dtype);
    return FALSE;
  }
  if (!(isfinite(q->scale) && q->scale > 0.0f)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "int8 reference: %s scale %g is not positive",
                what, (double)q->scale);
    return FALSE;
  }
  if (q->zero_point < lo || q->zero_point > hi) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "int8 reference: %s zero point %d outside [%d, %d]", what, q->zero_point, lo, hi);
    return FALSE;
  }
  return TRUE;
}

static gboolean check_params(const QhInt8Params *p, int64_t n_out, GError **error) {
  if (p == NULL || p->w.scales == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "int8 reference: missing parameters");
    return FALSE;
  }
  if (p->rule != QH_REQUANT_QNNPACK && p->rule != QH_REQUANT_ONEDNN &&
      p->rule != QH_REQUANT_REFERENCE) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "int8 reference: unknown rule %d",
                (int)p->rule);
    return FALSE;
  }
  if (!check_quant(&p->x, "input", error) || !check_quant(&p->y, "output", error))
    return FALSE;
  int64_t nc = p->w.per_channel ? n_out : 1;
  for (int64_t c = 0; c < nc; c++) {
    QhInt8Quant wq = {QH_DTYPE_S8, p->w.scales[c], p->w.zero_points ? p->w.zero_points[c] : 0};
    if (!check_quant(&wq, "weight", error))
      return FALSE;
  }
  int32_t lo = 0, hi = 0;
  dtype_range(p->y.dtype, &lo, &hi);
  if (p->lo > p->hi || p->lo < lo || p->hi > hi) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "int8 reference: clamp [%d, %d] is empty or outside [%d, %d]", p->lo, p->hi, lo,
                hi);
    return FALSE;
  }
  return TRUE;
}

/* Per-output-channel constants of the rule, computed once per channel as a real kernel
 * would prepack them. */
typedef struct {
  float sw;
  int32_t zw;
  int32_t bq;  /* QNNPACK */
  float mult;  /* QNNPACK: M; oneDNN: sb */
  float bias;  /* oneDNN and reference */
} Chan;

static Chan chan_consts(const QhInt8Params *p, const float *bias, int64_t c) {
  int64_t i = p->w.per_channel ? c : 0;
  Chan k = {.sw = p->w.scales[i], .zw = p->w.zero_points ? p->w.zero_points[i] : 0};
  k.bias = bias ? bias[c] : 0.0f;
  vf32 sb = p->x.scale * k.sw;
  if (p->rule == QH_REQUANT_QNNPACK) {
    vf32 inv = 1.0f / sb;
    vf32 bs = k.bias * inv;
    k.bq = round_add_clamp(bs, 0, INT32_MIN, INT32_MAX);
    vf32 inv_so = 1.0f / p->y.scale;
    vf32 m = sb * inv_so;
    k.mult = m;
  } else {
    k.mult = sb;
  }
  return k;
}

/* The integer rules' requantization of one exact accumulator. */
static int32_t requant_int(const QhInt8Params *p, const Chan *k, int64_t acc) {
  if (p->rule == QH_REQUANT_QNNPACK) {
    int32_t a = clamp32(clamp32(acc, INT32_MIN, INT32_MAX) + (int64_t)k->bq, INT32_MIN,
                        INT32_MAX);
    vf32 af = (float)a;
    vf32 v = af * k->mult;
    return round_add_clamp(v, p->y.zero_point, p->lo, p->hi);
  }
  vf32 af = (float)clamp32(acc, INT32_MIN, INT32_MAX);
  vf32 t = af * k->mult;
  vf32 y = t + k->bias;
  vf32 inv = 1.0f / p->y.scale;
  vf32 v = y * inv;
  return round_add_clamp(v, p->y.zero_point, p->lo, p->hi);
}

/* The reference model's last step: float bias, then §4.1 quantize, then the clamp. */
static int32_t requant_float(const QhInt8Params *p, const Chan *k, float sum) {
  vf32 y = sum + k->bias;
  vf32 inv = 1.0f / p->y.scale;
  vf32 v = y * inv;
  return round_add_clamp(v, p->y.zero_point, p->lo, p->hi);
}

/* One reference-model term: f32(DQ(xq) * DQ(wq)). */
static float ref_term(const QhInt8Params *p, const Chan *k, int32_t xq, int32_t wq) {
  vf32 xf = (float)(xq - p->x.zero_point) * p->x.scale;
  vf32 wf = (float)(wq - k->zw) * k->sw;
  vf32 t = xf * wf;
  return t;
}

static gboolean mul_ok(int64_t a, int64_t b, int64_t *r) {
  if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / 4 / a))
    return FALSE;
  *r = a * b;
  return TRUE;
}

gboolean qh_int8_linear_ref(const void *x, const int8_t *w, const float *bias, int64_t m,
                            int64_t n, int64_t k, const QhInt8Params *p, void *y,
                            GError **error) {
  int64_t xs, ws;
  if (m < 0 || n < 1 || k < 1 || !mul_ok(m, k, &xs) || !mul_ok(n, k, &ws) || !mul_ok(m, n, &xs)) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT,
                "int8 reference linear: bad sizes m=%" G_GINT64_FORMAT " n=%" G_GINT64_FORMAT
                " k=%" G_GINT64_FORMAT,
                m, n, k);
    return FALSE;
  }
  if ((m > 0 && (x == NULL || y == NULL)) || w == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "int8 reference linear: NULL data");
    return FALSE;
  }
  if (!check_params(p, n, error))
    return FALSE;
  for (int64_t c = 0; c < n; c++) {
    Chan kc = chan_consts(p, bias, c);
    for (int64_t r = 0; r < m; r++) {
      int64_t acc = 0;
      float sum = 0.0f;
      for (int64_t i = 0; i < k; i++) {
        int32_t xq = load(x, p->x.dtype, r * k + i), wq = w[c * k + i];
        if (p->rule == QH_REQUANT_REFERENCE) {
          vf32 s = sum + ref_term(p, &kc, xq, wq);
          sum = s;
        } else {
          acc += (int64_t)(xq - p->x.zero_point) * (wq - kc.zw);
        }
      }
      int32_t q = p->rule == QH_REQUANT_REFERENCE ? requant_float(p, &kc, sum)
                                                   : requant_int(p, &kc, acc);
      store(y, p->y.dtype, r * n + c, q);
    }
  }
  return TRUE;
}

gboolean qh_conv2d_geom_out(const QhConv2dGeom *g, int64_t *oh, int64_t *ow, GError **error) {
  const int64_t big = (int64_t)1 << 31;
  gboolean ok = g != NULL && g->n >= 0 && g->c_in > 0 && g->h > 0 && g->w > 0 && g->c_out > 0 &&
                g->kh > 0 && g->kw > 0 && g->groups > 0 && g->n < big && g->c_in < big &&
                g->h < big && g->w < big && g->c_out < big && g->kh < big && g->kw < big;
  for (int i = 0; ok && i < 2; i++)
    ok = g->stride[i] > 0 && g->dilation[i] > 0 && g->stride[i] < big && g->dilation[i] < big;
  for (int i = 0; ok && i < 4; i++)
    ok = g->pad[i] >= 0 && g->pad[i] < big;
  if (ok)
    ok = g->c_in % g->groups == 0 && g->c_out % g->groups == 0;
  if (ok) {
    *oh = (g->h + g->pad[0] + g->pad[2] - g->dilation[0] * (g->kh - 1) - 1) / g->stride[0] + 1;
    *ow = (g->w + g->pad[1] + g->pad[3] - g->dilation[1] * (g->kw - 1) - 1) / g->stride[1] + 1;
    ok = g->h + g->pad[0] + g->pad[2] >= g->dilation[0] * (g->kh - 1) + 1 &&
         g->w + g->pad[1] + g->pad[3] >= g->dilation[1] * (g->kw - 1) + 1;
  }
  if (!ok)
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "int8 reference conv2d: invalid geometry or empty output");
  return ok;
}

gboolean qh_int8_conv2d_ref(const void *x, const int8_t *w, const float *bias,
                            const QhConv2dGeom *g, const QhInt8Params *p, void *y,
                            GError **error) {
  int64_t oh, ow, t;
  if (!qh_conv2d_geom_out(g, &oh, &ow, error))
    return FALSE;
  int64_t cig = g->c_in / g->groups, cog = g->c_out / g->groups;
  if (!mul_ok(g->n, g->c_in, &t) || !mul_ok(t, g->h, &t) || !mul_ok(t, g->w, &t) ||
      !mul_ok(g->n, g->c_out, &t) || !mul_ok(t, oh, &t) || !mul_ok(t, ow, &t) ||
      !mul_ok(g->c_out, cig, &t) || !mul_ok(t, g->kh, &t) || !mul_ok(t, g->kw, &t)) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT, "int8 reference conv2d: sizes overflow");
    return FALSE;
  }
  if ((g->n > 0 && (x == NULL || y == NULL)) || w == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "int8 reference conv2d: NULL data");
    return FALSE;
  }
  if (!check_params(p, g->c_out, error))
    return FALSE;
  for (int64_t co = 0; co < g->c_out; co++) {
    Chan kc = chan_consts(p, bias, co);
    int64_t grp = co / cog;
    for (int64_t b = 0; b < g->n; b++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          int64_t acc = 0;
          float sum = 0.0f;
          for (int64_t ci = 0; ci < cig; ci++)
            for (int64_t ky = 0; ky < g->kh; ky++)
              for (int64_t kx = 0; kx < g->kw; kx++) {
                int64_t iy = oy * g->stride[0] - g->pad[0] + ky * g->dilation[0];
                int64_t ix = ox * g->stride[1] - g->pad[1] + kx * g->dilation[1];
                int32_t xq = p->x.zero_point;
                if (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w)
                  xq = load(x, p->x.dtype, ((b * g->c_in + grp * cig + ci) * g->h + iy) * g->w + ix);
                int32_t wq = w[((co * cig + ci) * g->kh + ky) * g->kw + kx];
                if (p->rule == QH_REQUANT_REFERENCE) {
                  vf32 s = sum + ref_term(p, &kc, xq, wq);
                  sum = s;
                } else {
                  acc += (int64_t)(xq - p->x.zero_point) * (wq - kc.zw);
                }
              }
          int32_t q = p->rule == QH_REQUANT_REFERENCE ? requant_float(p, &kc, sum)
                                                       : requant_int(p, &kc, acc);
          store(y, p->y.dtype, ((b * g->c_out + co) * oh + oy) * ow + ox, q);
        }
  }
  return TRUE;
}

gboolean qh_int8_add_ref(const void *a, const QhInt8Quant *qa, const void *b,
                         const QhInt8Quant *qb, size_t n, const QhInt8Quant *qy,
                         gboolean relu, void *out, GError **error) {
  if (qa == NULL || qb == NULL || qy == NULL || (n > 0 && (a == NULL || b == NULL || out == NULL))) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "int8 reference add: NULL argument");
    return FALSE;
  }
  if (!check_quant(qa, "add input a", error) || !check_quant(qb, "add input b", error) ||
      !check_quant(qy, "add output", error))
    return FALSE;
  for (size_t i = 0; i < n; i++) {
    vf32 fa = (float)(load(a, qa->dtype, (int64_t)i) - qa->zero_point) * qa->scale;
    vf32 fb = (float)(load(b, qb->dtype, (int64_t)i) - qb->zero_point) * qb->scale;
    vf32 s = fa + fb;
    float v = s;
    if (relu && !(v > 0.0f))
      v = 0.0f;
    store(out, qy->dtype, (int64_t)i, qh_int8_quantize_one(v, qy->scale, qy->zero_point, qy->dtype));
  }
  return TRUE;
}
