/* Reference kernel of ONNX Resize (opset 11-18 without the opset-18 additions):
 * "nearest" for every element type and N-D "linear" for float32, with the
 * coordinate transformation modes half_pixel, asymmetric, align_corners,
 * pytorch_half_pixel and tf_half_pixel_for_nearest. Coordinates are computed in
 * float as ONNX Runtime does, so the picked neighbours and the output sizes match it
 * at ties. The fast path precomputes per-axis tables (and runs bilinear over planes
 * when only the last two axes interpolate); the naive twin recomputes every
 * coordinate per output element. Cubic and tf_crop_and_resize are not implemented. */
#include <math.h>
#include <string.h>

#include "exec/kernels/common.h"

typedef enum { MODE_NEAREST, MODE_LINEAR } Mode;
typedef enum {
  CT_HALF_PIXEL,
  CT_PYTORCH_HALF_PIXEL,
  CT_ALIGN_CORNERS,
  CT_ASYMMETRIC,
  CT_TF_NEAREST
} Coord;
typedef enum { NR_PREFER_FLOOR, NR_PREFER_CEIL, NR_FLOOR, NR_CEIL } Nearest;

typedef struct {
  Mode mode;
  Coord coord;
  Nearest nearest;
  float scale[QH_MAX_RANK];
  QhShape out;
} Params;

static gboolean pick(const QhNode *node, const char *attr, const char *dflt,
                     const char *const *names, int n, int *out, GError **error) {
  const char *v;
  if (!qh_node_attr_get_string(node, attr, dflt, &v, error))
    return FALSE;
  for (int i = 0; i < n; i++)
    if (strcmp(v, names[i]) == 0) {
      *out = i;
      return TRUE;
    }
  return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "%s '%s' is not supported", attr, v);
}

static gboolean read_modes(const QhNode *node, Params *p, GError **error) {
  static const char *const modes[] = {"nearest", "linear"};
  static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                       "asymmetric", "tf_half_pixel_for_nearest"};
  static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                         "ceil"};
  int m = 0, c = 0, n = 0;
  int64_t antialias;
  const char *policy;
  if (!pick(node, "mode", "nearest", modes, 2, &m, error) ||
      !pick(node, "coordinate_transformation_mode", "half_pixel", coords, 5, &c, error) ||
      !pick(node, "nearest_mode", "round_prefer_floor", nearests, 4, &n, error) ||
      !qh_node_attr_get_int(node, "antialias", 0, &antialias, error) ||
      !qh_node_attr_get_string(node, "keep_aspect_ratio_policy", "stretch", &policy, error))
    return FALSE;
  if (antialias != 0 || qh_node_attr(node, "axes") != NULL || strcmp(policy, "stretch") != 0)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "opset 18's antialias, axes and keep_aspect_ratio_policy are not "
                          "supported");
  p->mode = (Mode)m;
  p->coord = (Coord)c;
  p->nearest = (Nearest)n;
  return TRUE;
}

static gboolean is_empty(const QhTensor *t) {
  if (t == NULL)
    return TRUE;
  for (int i = 0; i < t->shape.rank; i++)
    if (t->shape.dims[i] == 0)
      return TRUE;
  return FALSE;
}

static gboolean read_params(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                            Params *p, GError **error) {
  if (n_inputs < 1 || inputs[0] == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "input 0 is missing");
  if (!read_modes(node, p, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  const QhTensor *scales = n_inputs > 2 ? inputs[2] : NULL;
  const QhTensor *sizes = n_inputs > 3 ? inputs[3] : NULL;
  int rank = x->shape.rank;
  if (p->mode == MODE_LINEAR && x->dtype != QH_DTYPE_F32)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "linear mode supports float32 only, not %s", qh_dtype_name(x->dtype));
  if (is_empty(scales) == is_empty(sizes))
    return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                          "exactly one of 'scales' and 'sizes' must be given");
  p->out = x->shape;
  if (!is_empty(scales)) {
    if (scales->data == NULL)
      return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                            "input 'scales' must be a constant (an initializer or computable at "
                            "load time)");
    if (scales->dtype != QH_DTYPE_F32 || scales->shape.rank != 1 || scales->shape.dims[0] != rank)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "'scales' must be float32 with one entry per axis (%d)", rank);
    for (int a = 0; a < rank; a++) {
      float s = ((const float *)scales->data)[a];
      if (!(s > 0.0f) || !isfinite(s))
        return qh_kernel_fail(error, node, QH_ERROR_INVALID, "scale %g on axis %d is not positive",
                              (double)s, a);
      /* float product, as ONNX Runtime computes it, not the spec's real one */
      float d = s * (float)x->shape.dims[a];
      if (!(d < (float)QH_MAX_ELEMENTS))
        return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "output axis %d is too large", a);
      p->scale[a] = s;
      p->out.dims[a] = (int64_t)floorf(d);
    }
  } else {
    int64_t *v, n;
    if (!qh_kernel_const_ints(node, sizes, "sizes", &v, &n, error))
      return FALSE;
    gboolean ok = n == rank;
    if (!ok)
      qh_kernel_fail(error, node, QH_ERROR_INVALID, "'sizes' must have one entry per axis (%d)",
                     rank);
    for (int a = 0; ok && a < rank; a++) {
      int64_t in = x->shape.dims[a];
      if (v[a] < 0 || v[a] > QH_MAX_ELEMENTS || (in == 0 && v[a] > 0))
        ok = qh_kernel_fail(error, node, QH_ERROR_INVALID,
                            "size %" G_GINT64_FORMAT " on axis %d is invalid for input size "
                            "%" G_GINT64_FORMAT,
                            v[a], a, in);
      else {
        p->out.dims[a] = v[a];
        p->scale[a] = in > 0 ? (float)v[a] / (float)in : 1.0f;
      }
    }
    g_free(v);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

static gboolean resize_infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                             QhTensor *outputs, int n_outputs, GError **error) {
  (void)n_outputs;
  Params p;
  int64_t n;
  GError *e = NULL;
  if (!read_params(node, inputs, n_inputs, &p, error))
    return FALSE;
  if (!qh_shape_numel(&p.out, &n, &e)) {
    qh_kernel_fail(error, node, (QhErrorCode)e->code, "%s", e->message);
    g_error_free(e);
    return FALSE;
  }
  outputs[0].dtype = inputs[0]->dtype;
  outputs[0].shape = p.out;
  return TRUE;
}

/* Output coordinate -> input coordinate along one axis. */
static float original(const Params *p, int a, int64_t o, int64_t in) {
  float x = (float)o, s = p->scale[a];
  int64_t out = p->out.dims[a];
  switch (p->coord) {
  case CT_HALF_PIXEL: return (x + 0.5f) / s - 0.5f;
  case CT_PYTORCH_HALF_PIXEL: return out > 1 ? (x + 0.5f) / s - 0.5f : 0.0f;
  case CT_ALIGN_CORNERS: return out == 1 ? 0.0f : x * (float)(in - 1) / (float)(out - 1);
  case CT_ASYMMETRIC: return x / s;
  default: return (x + 0.5f) / s;
  }
}

static int64_t nearest_index(const Params *p, int a, int64_t o, int64_t in) {
  float x = original(p, a, o, in), f = floorf(x);
  switch (p->nearest) {
  case NR_PREFER_FLOOR: x = x - f == 0.5f ? f : floorf(x + 0.5f); break;
  case NR_PREFER_CEIL: x = x - f == 0.5f ? f + 1.0f : floorf(x + 0.5f); break;
  case NR_FLOOR: x = f; break;
  default: x = ceilf(x); break;
  }
  if (!(x > 0.0f)) /* also maps NaN to 0 */
    return 0;
  return x >= (float)(in - 1) ? in - 1 : (int64_t)x;
}

/* The two linear neighbours and the weight of the upper one. */
static void linear_coeffs(const Params *p, int a, int64_t o, int64_t in, int64_t *i0, int64_t *i1,
                          float *l) {
  float x = original(p, a, o, in);
  x = x > 0.0f ? x : 0.0f;
  x = x < (float)(in - 1) ? x : (float)(in - 1);
  *i0 = (int64_t)x;
  *i1 = *i0 + 1 < in ? *i0 + 1 : *i0;
  *l = *i1 == *i0 ? 0.0f : x - (float)*i0;
}

static gboolean resize_run_naive(QhExecContext *ctx, const QhNode *node,
                                 const QhTensor *const *inputs, int n_inputs,
                                 QhTensor *const *outputs, int n_outputs, GError **error) {
  (void)ctx, (void)n_outputs;
  Params p;
  if (!read_params(node, inputs, n_inputs, &p, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  QhTensor *y = outputs[0];
  int rank = x->shape.rank;
  size_t es = qh_dtype_size(x->dtype);
  int64_t strides[QH_MAX_RANK], n = qh_tensor_numel(y), idx[QH_MAX_RANK];
  qh_shape_strides(&x->shape, strides);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i;
    for (int k = rank - 1; k >= 0; k--) {
      idx[k] = rest % p.out.dims[k];
      rest /= p.out.dims[k];
    }
    if (p.mode == MODE_NEAREST) {
      int64_t src = 0;
      for (int k = 0; k < rank; k++)
        src += nearest_index(&p, k, idx[k], x->shape.dims[k]) * strides[k];
      memcpy((guint8 *)y->data + (size_t)i * es, (const guint8 *)x->data + (size_t)src * es, es);
      continue;
    }
    int64_t lo[QH_MAX_RANK], hi[QH_MAX_RANK];
    float l[QH_MAX_RANK], acc = 0.0f;
    for (int k = 0; k < rank; k++)
      linear_coeffs(&p, k, idx[k], x->shape.dims[k], &lo[k], &hi[k], &l[k]);
    for (int corner = 0; corner < (1 << rank); corner++) {
      float w = 1.0f;
      int64_t src = 0;
      for (int k = 0; k < rank; k++) {
        gboolean up = (corner >> k) & 1;
        w *= up ? l[k] : 1.0f - l[k];
        src += (up ? hi[k] : lo[k]) * strides[k];
      }
      acc += w * qh_f32(x)[src];
    }
    qh_f32(y)[i] = acc;
  }
  return TRUE;
}

/* Per-axis tables; src_off holds each output coordinate's input offset (index
 * times stride) of the lower neighbour, hi_off the upper one's. */
typedef struct {
  const Params *p;
  const QhTensor *x;
  QhTensor *y;
  int64_t *lo_off[QH_MAX_RANK], *hi_off[QH_MAX_RANK];
  float *l[QH_MAX_RANK];
  gboolean active[QH_MAX_RANK]; /* some output coordinate interpolates */
} Tables;

static void nearest_rows(void *arg, int64_t begin, int64_t end) {
  Tables *t = arg;
  int rank = t->y->shape.rank, last = rank - 1;
  int64_t len = t->y->shape.dims[last];
  size_t es = qh_dtype_size(t->x->dtype);
  const int64_t *cols = t->lo_off[last];
  for (int64_t r = begin; r < end; r++) {
    int64_t rest = r, base = 0;
    for (int k = last - 1; k >= 0; k--) {
      base += t->lo_off[k][rest % t->y->shape.dims[k]];
      rest /= t->y->shape.dims[k];
    }
    guint8 *dst = (guint8 *)t->y->data + (size_t)(r * len) * es;
    const guint8 *src = (const guint8 *)t->x->data + (size_t)base * es;
    if (es == 4)
      for (int64_t j = 0; j < len; j++)
        ((guint32 *)dst)[j] = ((const guint32 *)src)[cols[j]];
    else if (es == 1)
      for (int64_t j = 0; j < len; j++)
        dst[j] = src[cols[j]];
    else
      for (int64_t j = 0; j < len; j++)
        memcpy(dst + (size_t)j * es, src + (size_t)cols[j] * es, es);
  }
}

/* Bilinear over the last two axes of each plane; the leading axes only pick planes. */
static void bilinear_planes(void *arg, int64_t begin, int64_t end) {
  Tables *t = arg;
  int rank = t->y->shape.rank, H = rank - 2, W = rank - 1;
  int64_t oh_n = t->y->shape.dims[H], ow_n = t->y->shape.dims[W];
  for (int64_t plane = begin; plane < end; plane++) {
    int64_t rest = plane, base = 0;
    for (int k = H - 1; k >= 0; k--) {
      base += t->lo_off[k][rest % t->y->shape.dims[k]];
      rest /= t->y->shape.dims[k];
    }
    const float *src = qh_f32(t->x) + base;
    float *dst = qh_f32(t->y) + plane * oh_n * ow_n;
    for (int64_t oh = 0; oh < oh_n; oh++) {
      const float *r0 = src + t->lo_off[H][oh], *r1 = src + t->hi_off[H][oh];
      float lh = t->l[H][oh];
      for (int64_t ow = 0; ow < ow_n; ow++) {
        int64_t w0 = t->lo_off[W][ow], w1 = t->hi_off[W][ow];
        float lw = t->l[W][ow];
        float top = (1.0f - lw) * r0[w0] + lw * r0[w1], bottom = (1.0f - lw) * r1[w0] + lw * r1[w1];
        *dst++ = (1.0f - lh) * top + lh * bottom;
      }
    }
  }
}

/* Any other linear case: the corners of the interpolating axes only. */
static void linear_generic(Tables *t) {
  int rank = t->y->shape.rank, act[QH_MAX_RANK], n_act = 0;
  for (int k = 0; k < rank; k++)
    if (t->active[k])
      act[n_act++] = k;
  int64_t n = qh_tensor_numel(t->y), idx[QH_MAX_RANK];
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, base = 0;
    for (int k = rank - 1; k >= 0; k--) {
      idx[k] = rest % t->y->shape.dims[k];
      rest /= t->y->shape.dims[k];
      if (!t->active[k])
        base += t->lo_off[k][idx[k]];
    }
    float acc = 0.0f;
    for (int corner = 0; corner < (1 << n_act); corner++) {
      float w = 1.0f;
      int64_t src = base;
      for (int j = 0; j < n_act; j++) {
        int k = act[j];
        gboolean up = (corner >> j) & 1;
        w *= up ? t->l[k][idx[k]] : 1.0f - t->l[k][idx[k]];
        src += up ? t->hi_off[k][idx[k]] : t->lo_off[k][idx[k]];
      }
      acc += w * qh_f32(t->x)[src];
    }
    qh_f32(t->y)[i] = acc;
  }
}

static gboolean resize_run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                           int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  Params p;
  if (!read_params(node, inputs, n_inputs, &p, error))
    return FALSE;
  const QhTensor *x = inputs[0];
  QhTensor *y = outputs[0];
  int rank = x->shape.rank;
  if (y->nbytes == 0)
    return TRUE;
  if (rank == 0) {
    memcpy(y->data, x->data, y->nbytes);
    return TRUE;
  }
  int64_t total = 0, strides[QH_MAX_RANK];
  qh_shape_strides(&x->shape, strides);
  for (int k = 0; k < rank; k++)
    total += y->shape.dims[k];
  /* one allocation for all tables; sizes are bounded by the output's element count */
  int64_t *offs = g_try_new(int64_t, 2 * total);
  float *ls = g_try_new(float, total);
  if (offs == NULL || ls == NULL) {
    g_free(offs);
    g_free(ls);
    return qh_kernel_fail(error, node, QH_ERROR_NOMEM, "out of memory for resize tables");
  }
  Tables t = {.p = &p, .x = x, .y = y};
  int64_t at = 0;
  for (int k = 0; k < rank; at += y->shape.dims[k], k++) {
    t.lo_off[k] = offs + at;
    t.hi_off[k] = offs + total + at;
    t.l[k] = ls + at;
    for (int64_t o = 0; o < y->shape.dims[k]; o++) {
      int64_t i0, i1;
      float l = 0.0f;
      if (p.mode == MODE_NEAREST)
        i0 = i1 = nearest_index(&p, k, o, x->shape.dims[k]);
      else
        linear_coeffs(&p, k, o, x->shape.dims[k], &i0, &i1, &l);
      t.lo_off[k][o] = i0 * strides[k];
      t.hi_off[k][o] = i1 * strides[k];
      t.l[k][o] = l;
      t.active[k] |= l != 0.0f;
    }
  }
  int64_t outer = qh_tensor_numel(y) / y->shape.dims[rank - 1];
  if (p.mode == MODE_NEAREST) {
    qh_thread_pool_parallel_for(ctx->pool, outer, 16, nearest_rows, &t);
  } else {
    gboolean planes = rank >= 2;
    for (int k = 0; planes && k < rank - 2; k++)
      planes = !t.active[k];
    if (planes)
      qh_thread_pool_parallel_for(ctx->pool, outer / y->shape.dims[rank - 2], 1, bilinear_planes,
                                  &t);
    else
      linear_generic(&t);
  }
  (void)n_outputs;
  g_free(offs);
  g_free(ls);
  return TRUE;
}

const QhOpDef qh_ops_resize[] = {
    {"Resize", 1, 4, 1, 1, resize_infer, resize_run, resize_run_naive, NULL},
    {NULL},
};
