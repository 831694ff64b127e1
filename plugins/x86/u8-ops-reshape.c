/* The x86 plugin's uint8 units, part 2 (u8-ops.h): reshape, which sees every shape the
 * analysis could not: the output's shape and layout (channels-last 4-D, or Flatten's and
 * a squeezed ReduceMean's 2-D), the per-channel form of a broadcasting Add / Mul either
 * way round, ONNX's pooling output sizes (ceil_mode as the host's conv-window.c), the
 * channel shuffle's and Slice's resolved constants. No workspace. */
#include <string.h>

#include "../common/unit-query.h"
#include "u8-ops.h"

QhStatus *x86_u8op_reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  U8Op *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != k->n_in || !outputs || n_outputs != 1 || !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(x) || y->struct_size < sizeof(QhTensorView))
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: %s input must be a uint8 tensor",
                          x86_u8op_name(k->op));
  k->reshaped = 0;
  y->dtype = QH_DTYPE_UINT8;
  y->rank = x->rank;
  y->layout = x->layout;
  memcpy(y->dims, x->dims, sizeof y->dims);
  k->bcast = 0;
  if (IS_BINARY(k->op)) {
    const QhTensorView *b = &inputs[1];
    if (!uq_u8_view_ok(b))
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: %s input must be a uint8 tensor",
                            x86_u8op_name(k->op));
    memcpy(k->bdims, b->dims, sizeof k->bdims);
    if (b->rank != x->rank || b->layout != x->layout ||
        memcmp(b->dims, x->dims, (size_t)x->rank * sizeof *x->dims) != 0) {
      /* The per-channel form, channels last: [N, H, W, C] with [N or 1, 1, 1, C] either way round */
      int64_t xd[4], bd[4];
      int nhwc = x->rank == 4 && b->rank == 4 && x->layout == QH_LAYOUT_NHWC && b->layout == QH_LAYOUT_NHWC;
      if (nhwc) {
        int64_t t[4] = {x->dims[0], x->dims[3], x->dims[1], x->dims[2]}, u[4] = {b->dims[0], b->dims[3],
                                                                                   b->dims[1], b->dims[2]};
        memcpy(xd, t, sizeof xd), memcpy(bd, u, sizeof bd);
      }
      if (nhwc && uq_channel_operand(bd, xd))
        k->bcast = 1;
      else if (nhwc && uq_channel_operand(xd, bd))
        k->bcast = 2;
      else
        return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT,
                              "reshape: %s inputs differ in shape or layout other than per channel "
                              "([N,H,W,C] with [N or 1,1,1,C], channels last)",
                              x86_u8op_name(k->op));
      const QhTensorView *full = k->bcast == 1 ? x : b, *vec = k->bcast == 1 ? b : x;
      y->layout = full->layout;
      memcpy(y->dims, full->dims, sizeof y->dims);
      k->n = full->dims[0], k->h = full->dims[1], k->w = full->dims[2], k->c = full->dims[3];
      k->bn = vec->dims[0];
    }
  } else if (k->op == U_SHUFFLE) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: channel shuffle input must be 4-D NHWC");
    int64_t nchw[4] = {x->dims[0], x->dims[3], x->dims[1], x->dims[2]}, r0[5], r2[4];
    if (!uq_resolve_shape(nchw, 4, k->shape0, 5, r0) || r0[0] != nchw[0] || r0[3] != nchw[2] || r0[4] != nchw[3] ||
        r0[1] < 1 || r0[1] * r0[2] != nchw[1])
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: channel shuffle: the first Reshape is not [N, groups, C/groups, H, W]");
    int64_t t[5] = {r0[0], r0[2], r0[1], r0[3], r0[4]};
    if (!uq_resolve_shape(t, 5, k->shape2, 4, r2) || memcmp(r2, nchw, sizeof r2) != 0)
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: channel shuffle: the second Reshape does not restore [N, C, H, W]");
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
    k->kh = r0[1]; /* groups */
  } else if (k->op == U_SLICE) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Slice input must be 4-D NHWC");
    /* ONNX's clamping: negative from the end, then into [0, C] */
    int64_t C = x->dims[3], a = k->s_start < 0 ? k->s_start + C : k->s_start, b = k->s_end < 0 ? k->s_end + C : k->s_end;
    a = a < 0 ? 0 : a > C ? C : a;
    b = b < 0 ? 0 : b > C ? C : b;
    k->s_c0 = a, k->s_c1 = b > a ? b : a;
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = C;
    y->dims[3] = k->s_c1 - k->s_c0;
  } else if (k->op == U_PAD) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Pad input must be 4-D NHWC");
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
    k->oh = k->h + k->pad[0] + k->pad[2], k->ow = k->w + k->pad[1] + k->pad[3];
    y->dims[1] = k->oh, y->dims[2] = k->ow;
  } else if (k->op == U_BN) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC || x->dims[3] != k->bn_c)
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: BatchNormalization input must be 4-D NHWC with one channel per parameter");
    k->c = x->dims[3];
  } else if (!IS_POINTWISE(k->op) && k->op != U_FLATTEN) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: %s input must be 4-D NHWC", x86_u8op_name(k->op));
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
    if (k->op == U_GAP) {
      k->oh = k->ow = 1;
      if (k->squeeze) /* [N, 1, 1, C] and [N, C] have the same bytes */
        y->rank = 2, y->dims[1] = k->c;
    } else {
      int64_t eh = k->h + k->pad[0] + k->pad[2] - k->kh, ew = k->w + k->pad[1] + k->pad[3] - k->kw;
      if (eh < 0 || ew < 0)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: pooling input smaller than the window");
      if (k->ceil_mode) {
        /* ONNX's ceil_mode (the host's conv-window.c): one more window where the stride
         * does not divide, dropped when it would start in the end padding (ONNX and
         * PyTorch require the last window to start inside the input or the left padding) */
        k->oh = (eh + k->sh - 1) / k->sh + 1, k->ow = (ew + k->sw - 1) / k->sw + 1;
        if ((k->oh - 1) * k->sh >= k->h + k->pad[0])
          k->oh--;
        if ((k->ow - 1) * k->sw >= k->w + k->pad[1])
          k->ow--;
      } else {
        k->oh = eh / k->sh + 1, k->ow = ew / k->sw + 1;
      }
    }
    if (!k->squeeze)
      y->dims[1] = k->oh, y->dims[2] = k->ow;
  } else if (k->op == U_FLATTEN) {
    /* Flatten's bytes are the input's in NCHW order, whatever the axis */
    int64_t nchw[QH_MAX_RANK];
    memcpy(nchw, x->dims, sizeof nchw);
    k->n = 0; /* a plain copy */
    if (x->rank == 4 && x->layout == QH_LAYOUT_NHWC) {
      k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2], k->c = x->dims[3];
      nchw[1] = k->c, nchw[2] = k->h, nchw[3] = k->w;
    }
    if (k->axis > x->rank)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Flatten axis out of range");
    int64_t outer = 1, inner = 1;
    for (int32_t i = 0; i < x->rank; i++)
      *(i < k->axis ? &outer : &inner) *= nchw[i];
    y->rank = 2, y->dims[0] = outer, y->dims[1] = inner;
  }
  if (y->rank != 4)
    y->layout = QH_LAYOUT_ANY;
  k->rank = x->rank;
  memcpy(k->dims, x->dims, sizeof k->dims);
  k->in_bytes = uq_numel(x);
  k->out_bytes = uq_numel(y);
  k->bin_bytes = IS_BINARY(k->op) ? uq_numel(&inputs[1]) : k->in_bytes;
  k->reshaped = 1;
  *out_workspace = 0;
  return NULL;
}

