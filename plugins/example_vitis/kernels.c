/* example_vitis's integer kernels (see kernels.h for the arithmetic): plain loops over
 * int8 NCHW tensors with 64-bit accumulators and shift requantization, written to be
 * read next to the DPU's description rather than to be fast. Nothing here uses floats. */
#include "kernels.h"

/* floor(v / 2^s) for s >= 0, without relying on >> of a negative number. */
static int64_t floor_shift(int64_t v, int s) {
  if (v >= 0)
    return v >> s;
  return -(int64_t)(((uint64_t)(-v) + (((uint64_t)1 << s) - 1)) >> s);
}

/* floor(num / den) for den > 0. */
static int64_t floor_div(int64_t num, int64_t den) {
  int64_t q = num / den;
  return (num % den != 0 && num < 0) ? q - 1 : q;
}

int64_t vitis_shift_round(int64_t v, int shift) {
  if (shift <= 0)
    return v * ((int64_t)1 << -shift);
  /* round half up: add half a step, then floor */
  return floor_shift(v + ((int64_t)1 << (shift - 1)), shift);
}

static int8_t sat8(int64_t v) {
  return (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
}

int8_t vitis_requant(int64_t acc, int shift) {
  return sat8(vitis_shift_round(acc, shift));
}

int64_t vitis_activate(int64_t acc, int act, int leaky_num) {
  if (act == VITIS_ACT_RELU)
    return acc < 0 ? 0 : acc;
  if (act == VITIS_ACT_LEAKY)
    return acc < 0 ? acc * leaky_num : acc * (1 << VITIS_LEAKY_DEN_SHIFT);
  return acc;
}

int64_t vitis_clip(int64_t acc, int64_t lo, int64_t hi) {
  return acc < lo ? lo : acc > hi ? hi : acc;
}

int64_t vitis_conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad_begin,
                            int64_t pad_end, int64_t dil) {
  int64_t span = (k - 1) * dil + 1;
  int64_t e = in + pad_begin + pad_end - span;
  return e < 0 ? 0 : e / stride + 1;
}

void vitis_conv_plane(const VitisConv *p, const int8_t *x, const int8_t *w,
                      const int64_t *bias, int8_t *y, int64_t b, int64_t oc) {
  int64_t cig = p->ci / p->group, cog = p->co / p->group;
  int64_t c0 = (oc / cog) * cig;
  const int8_t *wo = w + oc * cig * p->kh * p->kw;
  int8_t *yo = y + (b * p->co + oc) * p->oh * p->ow;
  for (int64_t oy = 0; oy < p->oh; oy++)
    for (int64_t ox = 0; ox < p->ow; ox++) {
      int64_t acc = 0;
      for (int64_t ic = 0; ic < cig; ic++) {
        const int8_t *xc = x + (b * p->ci + c0 + ic) * p->h * p->w;
        const int8_t *wc = wo + ic * p->kh * p->kw;
        for (int64_t ky = 0; ky < p->kh; ky++) {
          int64_t iy = oy * p->stride[0] - p->pad[0] + ky * p->dil[0];
          if (iy < 0 || iy >= p->h)
            continue; /* zero padding: zero point 0 contributes nothing */
          for (int64_t kx = 0; kx < p->kw; kx++) {
            int64_t ix = ox * p->stride[1] - p->pad[1] + kx * p->dil[1];
            if (ix >= 0 && ix < p->w)
              acc += (int32_t)xc[iy * p->w + ix] * (int32_t)wc[ky * p->kw + kx];
          }
        }
      }
      acc = acc * ((int64_t)1 << p->acc_lshift) + (bias ? bias[oc] : 0);
      acc = p->act == VITIS_ACT_CLIP ? vitis_clip(acc, p->clip_lo, p->clip_hi)
                                     : vitis_activate(acc, p->act, p->leaky_num);
      yo[oy * p->ow + ox] = vitis_requant(acc, p->shift);
    }
}

void vitis_linear_row(const VitisLinear *p, const int8_t *x, const int8_t *w,
                      const int64_t *bias, int8_t *y, int64_t row) {
  const int8_t *xr = x + row * p->k;
  for (int64_t j = 0; j < p->n; j++) {
    int64_t acc = 0;
    const int8_t *wj = w + j * p->k;
    for (int64_t i = 0; i < p->k; i++)
      acc += (int32_t)xr[i] * (int32_t)wj[i];
    acc = acc * ((int64_t)1 << p->acc_lshift) + (bias ? bias[j] : 0);
    acc = p->act == VITIS_ACT_CLIP ? vitis_clip(acc, p->clip_lo, p->clip_hi)
                                   : vitis_activate(acc, p->act, p->leaky_num);
    y[row * p->n + j] = vitis_requant(acc, p->shift);
  }
}

void vitis_binary(const VitisBinary *p, const int8_t *a, const int8_t *b, int8_t *y,
                  size_t start, size_t end) {
  for (size_t i = start; i < end; i++) {
    /* unravel i over the output dims, gather each input through its strides */
    int64_t rest = (int64_t)i, ai = 0, bi = 0;
    for (int d = p->rank - 1; d >= 0; d--) {
      int64_t idx = rest % p->dims[d];
      rest /= p->dims[d];
      ai += idx * p->a_stride[d];
      bi += idx * p->b_stride[d];
    }
    int64_t acc;
    if (p->op == VITIS_BINARY_ADD)
      acc = (int64_t)a[ai] * ((int64_t)1 << p->a_lshift) + (int64_t)b[bi] * ((int64_t)1 << p->b_lshift);
    else
      acc = (int64_t)a[ai] * b[bi];
    if (p->relu && acc < 0)
      acc = 0;
    y[i] = vitis_requant(acc, p->shift);
  }
}

void vitis_pool_plane(const VitisPool *p, const int8_t *x, int8_t *y, int64_t plane) {
  const int8_t *xp = x + plane * p->h * p->w;
  int8_t *yp = y + plane * p->oh * p->ow;
  for (int64_t oy = 0; oy < p->oh; oy++)
    for (int64_t ox = 0; ox < p->ow; ox++) {
      int64_t y0 = oy * p->stride[0] - p->pad[0], x0 = ox * p->stride[1] - p->pad[1];
      int64_t best = -129, sum = 0, count = 0, padded = 0;
      for (int64_t ky = 0; ky < p->kh; ky++)
        for (int64_t kx = 0; kx < p->kw; kx++) {
          int64_t iy = y0 + ky, ix = x0 + kx;
          if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w) {
            /* the window part over the pads (not past them) counts with count_include_pad */
            padded += iy < p->h + p->pad[2] && ix < p->w + p->pad[3];
            continue;
          }
          int64_t v = xp[iy * p->w + ix];
          best = v > best ? v : best;
          sum += v;
          count++;
        }
      if (p->is_max) {
        yp[oy * p->ow + ox] = vitis_requant(count ? best : 0, p->shift);
        continue;
      }
      if (p->count_include_pad)
        count += padded;
      if (count == 0) {
        yp[oy * p->ow + ox] = 0;
        continue;
      }
      /* sum * mult * 2^-shift / (count * 2^mult_shift), rounded half up */
      int64_t num = sum * p->mult, den = count << p->mult_shift;
      if (p->shift < 0)
        num *= (int64_t)1 << -p->shift;
      else
        den <<= p->shift;
      int64_t q = floor_div(2 * num + den, 2 * den);
      yp[oy * p->ow + ox] = sat8(q);
    }
}

void vitis_concat(size_t n_inputs, const int8_t *const *inputs, const int64_t *mid,
                  const int *shift, int64_t outer, int64_t inner, int8_t *y) {
  for (int64_t o = 0; o < outer; o++)
    for (size_t i = 0; i < n_inputs; i++) {
      int64_t len = mid[i] * inner;
      const int8_t *src = inputs[i] + o * len;
      for (int64_t e = 0; e < len; e++)
        *y++ = vitis_requant(src[e], shift[i]);
    }
}

void vitis_unary(const int8_t *x, int8_t *y, size_t n, int shift, int act, int leaky_num) {
  for (size_t i = 0; i < n; i++)
    y[i] = vitis_requant(vitis_activate(x[i], act, leaky_num), shift);
}
