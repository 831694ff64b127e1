/* The qnnpack plugin's units between its convolutions, on XNNPACK: Add (+Relu) on
 * xnn_create_add_nd_qu8 and Mul (+Relu) on xnn_create_multiply_nd_qu8 (same shapes, or
 * numpy broadcasting between equal ranks, which XNNPACK does), Relu and Clip on their
 * input's grid on xnn_create_clamp_nc_u8 (a clamp of the bytes at the host's
 * QuantizeLinear of the bounds), MaxPool on xnn_create_max_pooling2d_nhwc_u8,
 * GlobalAveragePool (and ReduceMean over H and W) on
 * xnn_create_global_average_pooling_nwc_qu8 and AveragePool on
 * xnn_create_average_pooling2d_nhwc_qu8, channels-last, so that a ResNet's residual
 * blocks stay in NHWC uint8; Sigmoid, Tanh and LeakyRelu on XNNPACK's qu8 lookup-table
 * operators (element-wise: 4-D tensors channels-last like the rest, others as they are).
 * The tables are built in float by XNNPACK (f(dequantized input) * (1 / output scale),
 * rounded to nearest even), so they differ from the host's float math only near ties;
 * Sigmoid and Tanh take only PyTorch's fixed output qparams (1/256 with zero point 0,
 * 1/128 with 128), anything else is refused at create. Add requantizes both inputs onto
 * the output's grid in XNNPACK's fixed point, Mul the product of the centred inputs in
 * fp32, the global pool its mean: within one step of the host's float QDQ math, not
 * bit-identical. MaxPool only picks bytes, so it is exact, and is claimed only where the
 * input and output share qparams (XNNPACK's u8 max pooling does not requantize); with
 * ceil_mode the windows hanging past the input become extra end padding. XNNPACK refuses
 * some scale ratios at create; accept creates the operator (with one channel: the checks
 * do not depend on it) and declines what it refuses. The pools' operators need the
 * channel count, which intermediate shapes often leave unknown until reshape: they are
 * created at kernel create when the graph knows it (and no ceil_mode padding waits for
 * the input's size), else at the first reshape (no weights to pack), and recreated only if
 * the channel count or that padding changes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qnnpack.h"

enum { U_ADD, U_MUL, U_MAXPOOL, U_GAP, U_AVGPOOL, U_SIGMOID, U_TANH, U_LEAKY, U_CLAMP };
#define IS_UNARY(op) ((op) >= U_SIGMOID)
#define IS_BINARY(op) ((op) == U_ADD || (op) == U_MUL)

typedef struct {
  const QnInstance *inst;
  int op, relu;
  float alpha;    /* LeakyRelu's slope */
  uint8_t lo, hi; /* the output's byte range (a fused Relu; Relu and Clip units) */
  int64_t kh, kw, sh, sw, dh, dw, pad[4];
  int ceil;         /* MaxPool's ceil_mode: the last windows hang past the input */
  int flatten_mean; /* a ReduceMean over H and W with keepdims=0: the global pool's [N, C] */
  int64_t xpad[2];  /* ... as extra bottom and right padding, which XNNPACK's max skips */
  const QhQParams *aq, *bq, *yq;
  xnn_operator_t xop;
  int64_t channels; /* the pools' operator was made for this many; -1: none yet */
  int reshaped, rank;
  int64_t dims[QH_MAX_RANK], bdims[QH_MAX_RANK]; /* Add / Mul: the second input's, same rank */
  size_t b_bytes;
  int64_t n, h, w; /* pools: the NHWC input's */
  size_t in_bytes, out_bytes;
  const void *set_a, *set_b; /* the buffers of the last setup; NULL after reshape */
  void *set_y;
} U8Op;

static const char *pool_window(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k) {
  int64_t ks[2], s[2], d[2];
  const char *why = uq_window_2d(host, g, node, "only 2-D pooling is supported (kernel_shape, strides, pads, dilations of 2)", ks, s, k->pad, d);
  if (why)
    return why;
  k->ceil = uq_attr_int(host, g, node, "ceil_mode", 0) != 0;
  if (uq_attr_int(host, g, node, "storage_order", 0) != 0)
    return "storage_order=1 is not supported";
  k->kh = ks[0], k->kw = ks[1], k->sh = s[0], k->sw = s[1], k->dh = d[0], k->dw = d[1];
  if (k->kh < 1 || k->kw < 1 || k->sh < 1 || k->sw < 1 || k->dh < 1 || k->dw < 1 || k->kh * k->kw < 2)
    return "invalid pooling window (XNNPACK needs at least two taps)";
  /* pads smaller than the dilated window: no window lies entirely in the padding */
  for (int i = 0; i < 4; i++)
    if (k->pad[i] < 0 || k->pad[i] >= (i % 2 ? (k->kw - 1) * k->dw + 1 : (k->kh - 1) * k->dh + 1))
      return "pads must be smaller than the pooling window";
  return NULL;
}

static int same_qparams(const QhQParams *a, const QhQParams *b) {
  return a->scale[0] == b->scale[0] && a->zero_point[0] == b->zero_point[0];
}

/* XNNPACK's qu8 global average pooling folds the pixel count into its requantization at
 * setup, without a check: the sum's bias (-pixels * zx) must fit int32 and the scale
 * sx / (so * pixels) stay within the [2^-32, 256) its fixed-point parameters take. */
static int gap_pixels_ok(const U8Op *k, int64_t pixels) {
  float scale = k->aq->scale[0] / (k->yq->scale[0] * (float)pixels);
  return pixels >= 1 && pixels <= INT32_MAX / 256 && scale >= 0x1.0p-32f && scale < 256.0f;
}

/* Equal ranks (NHWC permutes both alike) within XNNPACK's XNN_MAX_TENSOR_DIMS, each
 * dimension equal or 1 in one of them. */
static int broadcastable(const int64_t *a, int32_t ra, const int64_t *b, int32_t rb) {
  if (ra == rb && memcmp(a, b, (size_t)ra * sizeof *a) == 0)
    return 1; /* same shapes run as one flat dimension */
  if (ra != rb || ra > XNN_MAX_TENSOR_DIMS)
    return 0;
  for (int32_t i = 0; i < ra; i++)
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1)
      return 0;
  return 1;
}

/* A ReduceMean over the spatial axes of a 4-D tensor is a global average pool (mnasnet,
 * shufflenet); keepdims=0 drops them, which the pool's [N, C] bytes already are. */
static const char *reduce_mean_problem(const QhHostApi *host, const QhGraphView *g, uint32_t node, U8Op *k) {
  int64_t ax[2];
  if (host->node_input(g, node, 1) != QH_INVALID_ID)
    return "ReduceMean with its axes as an input is not supported";
  if (!uq_attr_ints(host, g, node, "axes", 2, -100, ax) || ax[0] == -100)
    return "only ReduceMean over the two spatial axes (2 and 3) is supported";
  for (int i = 0; i < 2; i++)
    ax[i] = ax[i] < 0 ? ax[i] + 4 : ax[i];
  if (!((ax[0] == 2 && ax[1] == 3) || (ax[0] == 3 && ax[1] == 2)))
    return "only ReduceMean over the two spatial axes (2 and 3) is supported";
  k->flatten_mean = uq_attr_int(host, g, node, "keepdims", 1) == 0;
  return NULL;
}

static const char *analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, U8Op *k) {
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes < 1 || u->n_nodes > 2 || !u->nodes ||
      u->n_inputs < 1 || !u->inputs || !u->input_roles || !u->input_qparams || u->n_outputs != 1 ||
      !u->outputs || !u->output_qparams)
    return "malformed node unit";
  uint32_t node = u->nodes[0];
  if (uq_op_is(host, g, node, "Add"))
    k->op = U_ADD;
  else if (uq_op_is(host, g, node, "Mul"))
    k->op = U_MUL;
  else if (uq_op_is(host, g, node, "Relu") || uq_op_is(host, g, node, "Clip"))
    k->op = U_CLAMP;
  else if (uq_op_is(host, g, node, "MaxPool"))
    k->op = U_MAXPOOL;
  else if (uq_op_is(host, g, node, "GlobalAveragePool"))
    k->op = U_GAP;
  else if (uq_op_is(host, g, node, "ReduceMean")) {
    k->op = U_GAP;
    const char *p = reduce_mean_problem(host, g, node, k);
    if (p)
      return p;
  } else if (uq_op_is(host, g, node, "AveragePool"))
    k->op = U_AVGPOOL;
  else if (uq_op_is(host, g, node, "Sigmoid"))
    k->op = U_SIGMOID;
  else if (uq_op_is(host, g, node, "Tanh"))
    k->op = U_TANH;
  else if (uq_op_is(host, g, node, "LeakyRelu"))
    k->op = U_LEAKY;
  else
    return "op other than Add, Mul, Relu, Clip, MaxPool, GlobalAveragePool, ReduceMean, AveragePool, Sigmoid, "
           "Tanh or LeakyRelu";
  if (u->n_nodes == 2) {
    if (!IS_BINARY(k->op) || !uq_op_is(host, g, u->nodes[1], "Relu"))
      return "only Add and Mul fuse a following Relu";
    k->relu = 1;
  }
  size_t want = IS_BINARY(k->op) ? 2 : 1;
  /* a Clip unit also carries its constant bounds, read from the node */
  if (u->n_inputs != want && !(k->op == U_CLAMP && u->n_inputs >= 1))
    return IS_BINARY(k->op) ? "Add and Mul need exactly two inputs" : "expected exactly one input";
  const char *p;
  for (size_t i = 0; i < want; i++) {
    if (u->input_roles[i] != QH_ROLE_ACTIVATION || (host->value_flags(g, u->inputs[i]) & QH_VALUE_CONSTANT))
      return "constant inputs are not supported";
    if ((p = uq_act_problem(u->input_qparams[i], 0)))
      return p;
  }
  if ((p = uq_act_problem(u->output_qparams[0], 1)))
    return p;
  if (host->node_output(g, node, 1) != QH_INVALID_ID)
    return "a second output (MaxPool's Indices) is not supported";
  k->aq = u->input_qparams[0], k->bq = want == 2 ? u->input_qparams[1] : NULL, k->yq = u->output_qparams[0];
  int64_t d[QH_MAX_RANK], d2[QH_MAX_RANK];
  int32_t rank = uq_known_shape(host, g, u->inputs[0], d);
  k->channels = -1;
  if (k->op == U_LEAKY) {
    float alpha = 0.01f; /* ONNX's default */
    QhStatus *st = host->node_attr_float(g, node, "alpha", &alpha);
    k->alpha = st ? 0.01f : alpha;
    host->status_free(st);
  }
  if (k->op == U_CLAMP) {
    /* Relu and Clip share their input's qparams in PyTorch's qnnpack config: then the op is
     * a clamp of the bytes (XNNPACK's u8 clamp does not requantize) */
    if (!same_qparams(k->aq, k->yq))
      return "Relu or Clip with different input and output qparams (XNNPACK's u8 clamp does not requantize)";
    return qn_output_range(host, g, node, k->yq, &k->lo, &k->hi);
  }
  /* the host's QuantizeLinear saturates at the dtype's bounds; a fused Relu raises the floor */
  k->lo = (uint8_t)(k->relu ? k->yq->zero_point[0] : 0), k->hi = 255;
  if (IS_UNARY(k->op))
    return NULL;
  if (IS_BINARY(k->op)) {
    /* XNNPACK broadcasts numpy-style; with equal ranks NHWC permutes both shapes alike */
    int32_t r2 = uq_known_shape(host, g, u->inputs[1], d2);
    if (rank >= 0 && r2 >= 0 && !broadcastable(d, rank, d2, r2))
      return "broadcasting other than between equal ranks of at most 6 dimensions is not supported";
    return NULL;
  }
  if (rank >= 0 && rank != 4)
    return "only 2-D pooling is supported";
  if (rank == 4)
    k->channels = d[1];
  if (k->op == U_GAP && rank == 4 && !gap_pixels_ok(k, d[2] * d[3]))
    return "GlobalAveragePool over so many pixels, or with such scales, that XNNPACK's requantization "
           "would leave its range";
  if (k->op == U_MAXPOOL) {
    if (!same_qparams(k->aq, k->yq))
      return "MaxPool with different input and output qparams (XNNPACK's u8 max pooling does not requantize)";
    return pool_window(host, g, node, k);
  }
  if (k->op == U_AVGPOOL) {
    const char *p2 = pool_window(host, g, node, k);
    if (p2)
      return p2;
    if (k->dh != 1 || k->dw != 1)
      return "dilated AveragePool is not supported";
    if (k->ceil)
      return "AveragePool with ceil_mode=1 is not supported";
    /* XNNPACK's qu8 average pooling reads padding as the input zero point and always
     * divides by the window's size: ONNX's count_include_pad = 1 */
    int pads = k->pad[0] || k->pad[1] || k->pad[2] || k->pad[3];
    if (pads && uq_attr_int(host, g, node, "count_include_pad", 0) == 0)
      return "padded AveragePool with count_include_pad=0 (XNNPACK's qu8 average pooling counts the padding)";
  }
  return NULL;
}

static QhStatus *xnn_refused(const QhHostApi *host, enum xnn_status s, int op, const char *what) {
  static const char *const unsupported[] = {
      [U_SIGMOID] = "it takes only the output scale 1/256 with zero point 0",
      [U_TANH] = "it takes only the output scale 1/128 with zero point 128",
      [U_ADD] = "a scale ratio outside what it supports", [U_MAXPOOL] = "a parameter it does not support",
      [U_GAP] = "a scale ratio outside what it supports", [U_AVGPOOL] = "a scale ratio outside what it supports",
      [U_LEAKY] = "a scale ratio outside what it supports", [U_MUL] = "a scale ratio outside what it supports",
      [U_CLAMP] = "a parameter it does not support"};
  char msg[200];
  if (s == xnn_status_success)
    return NULL;
  if (s == xnn_status_out_of_memory)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "XNNPACK: out of memory creating the operator");
  if (s == xnn_status_uninitialized || s == xnn_status_unsupported_hardware)
    return host->status_new(QH_ERR_UNSUPPORTED, "XNNPACK did not initialize on this CPU");
  snprintf(msg, sizeof msg, "XNNPACK's %s refuses the unit's scales or range (%s)", what,
           s == xnn_status_unsupported_parameter ? unsupported[op] : "invalid parameter");
  return host->status_new(QH_ERR_UNSUPPORTED, msg);
}

static const char *op_what(int op) {
  static const char *const what[] = {[U_ADD] = "qu8 add",
                                     [U_MUL] = "qu8 multiply",
                                     [U_MAXPOOL] = "u8 max pooling",
                                     [U_GAP] = "qu8 global average pooling",
                                     [U_AVGPOOL] = "qu8 average pooling",
                                     [U_SIGMOID] = "qu8 sigmoid",
                                     [U_TANH] = "qu8 tanh",
                                     [U_LEAKY] = "qu8 leaky relu",
                                     [U_CLAMP] = "u8 clamp"};
  return what[op];
}

/* The operator for `channels` (the pools; ignored by Add). */
static QhStatus *make_op(const QhHostApi *host, U8Op *k, int64_t channels, xnn_operator_t *out) {
  *out = NULL;
  if (k->inst->xnn_init != xnn_status_success)
    return xnn_refused(host, k->inst->xnn_init, k->op, op_what(k->op));
  const QhQParams *a = k->aq, *y = k->yq;
  int32_t zo = y->zero_point[0];
  uint8_t lo = k->lo, hi = k->hi;
  size_t c = (size_t)channels;
  enum xnn_status s;
  switch (k->op) {
  case U_ADD:
    s = xnn_create_add_nd_qu8((uint8_t)a->zero_point[0], a->scale[0], (uint8_t)k->bq->zero_point[0],
                              k->bq->scale[0], (uint8_t)zo, y->scale[0], lo, hi, k->inst->xnn_flags, out);
    break;
  case U_MUL:
    s = xnn_create_multiply_nd_qu8((uint8_t)a->zero_point[0], a->scale[0], (uint8_t)k->bq->zero_point[0],
                                   k->bq->scale[0], (uint8_t)zo, y->scale[0], lo, hi, k->inst->xnn_flags, out);
    break;
  case U_CLAMP:
    s = xnn_create_clamp_nc_u8(1, 1, 1, lo, hi, k->inst->xnn_flags, out);
    break;
  case U_MAXPOOL:
    s = xnn_create_max_pooling2d_nhwc_u8((uint32_t)k->pad[0], (uint32_t)(k->pad[3] + k->xpad[1]),
                                         (uint32_t)(k->pad[2] + k->xpad[0]), (uint32_t)k->pad[1], (uint32_t)k->kh,
                                         (uint32_t)k->kw, (uint32_t)k->sh, (uint32_t)k->sw, (uint32_t)k->dh,
                                         (uint32_t)k->dw, c, c, c, lo, hi, k->inst->xnn_flags, out);
    break;
  case U_AVGPOOL:
    s = xnn_create_average_pooling2d_nhwc_qu8((uint32_t)k->pad[0], (uint32_t)k->pad[3], (uint32_t)k->pad[2],
                                              (uint32_t)k->pad[1], (uint32_t)k->kh, (uint32_t)k->kw, (uint32_t)k->sh,
                                              (uint32_t)k->sw, c, c, c, (uint8_t)a->zero_point[0], a->scale[0],
                                              (uint8_t)zo, y->scale[0], lo, hi, k->inst->xnn_flags, out);
    break;
  case U_SIGMOID:
    s = xnn_create_sigmoid_nc_qu8(1, 1, 1, (uint8_t)a->zero_point[0], a->scale[0], (uint8_t)zo, y->scale[0], lo,
                                  hi, k->inst->xnn_flags, out);
    break;
  case U_TANH:
    s = xnn_create_tanh_nc_qu8(1, 1, 1, (uint8_t)a->zero_point[0], a->scale[0], (uint8_t)zo, y->scale[0], lo, hi,
                               0, out);
    break;
  case U_LEAKY:
    s = xnn_create_leaky_relu_nc_qu8(1, 1, 1, k->alpha, (uint8_t)a->zero_point[0], a->scale[0], (uint8_t)zo,
                                     y->scale[0], lo, hi, k->inst->xnn_flags, out);
    break;
  default:
    s = xnn_create_global_average_pooling_nwc_qu8(c, c, c, (uint8_t)a->zero_point[0], a->scale[0], (uint8_t)zo,
                                                  y->scale[0], lo, hi, k->inst->xnn_flags, out);
    break;
  }
  if (s != xnn_status_success)
    *out = NULL;
  return xnn_refused(host, s, k->op, op_what(k->op));
}

QhStatus *qn_accept_u8op(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  if (!instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "accept: no instance");
  U8Op k = {.inst = instance};
  const char *p = analyze(host, g, u, &k);
  if (p)
    return host->status_new(QH_ERR_UNSUPPORTED, p);
  xnn_operator_t op = NULL;
  QhStatus *st = make_op(host, &k, 1, &op);
  if (op)
    xnn_delete_operator(op);
  return st;
}

static void destroy(void *kernel) {
  U8Op *k = kernel;
  if (!k)
    return;
  if (k->xop)
    xnn_delete_operator(k->xop);
  free(k);
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  if (!out || !instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  U8Op *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->inst = instance;
  const char *p = analyze(host, g, u, k);
  QhStatus *st = p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
  /* element-wise operators run on one flat channel; the pools' need the real count */
  int flat = IS_BINARY(k->op) || IS_UNARY(k->op);
  /* ceil_mode's extra padding depends on the input's size: made at reshape */
  if (!st && (flat || (k->channels > 0 && !k->ceil)))
    st = make_op(host, k, flat ? 1 : k->channels, &k->xop);
  if (st) {
    destroy(k);
    return st;
  }
  *out = k;
  return NULL;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  U8Op *k = kernel;
  if (!host)
    return NULL;
  size_t want = k && IS_BINARY(k->op) ? 2 : 1;
  if (!k || !inputs || n_inputs < want || (n_inputs != want && k->op != U_CLAMP) || !outputs || n_outputs != 1 ||
      !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!qn_u8_view_ok(x) || y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: input must be a uint8 tensor");
  k->reshaped = 0;
  k->set_a = k->set_b = k->set_y = NULL;
  y->dtype = QH_DTYPE_UINT8;
  y->rank = x->rank;
  y->layout = x->layout;
  memcpy(y->dims, x->dims, sizeof y->dims);
  if (IS_UNARY(k->op)) {
    /* element-wise: any layout, the output in the input's */
  } else if (IS_BINARY(k->op)) {
    const QhTensorView *b = &inputs[1];
    if (!qn_u8_view_ok(b) || b->layout != x->layout || !broadcastable(x->dims, x->rank, b->dims, b->rank))
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: Add or Mul inputs differ in layout or do not broadcast at equal ranks");
    for (int32_t i = 0; i < x->rank; i++)
      y->dims[i] = x->dims[i] == 1 ? b->dims[i] : x->dims[i];
    memcpy(k->bdims, b->dims, sizeof k->bdims);
    k->b_bytes = qn_numel(b);
  } else {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: pooling input must be 4-D NHWC");
    k->n = x->dims[0], k->h = x->dims[1], k->w = x->dims[2];
    int64_t c = x->dims[3];
    if (k->op == U_GAP) {
      if (!gap_pixels_ok(k, k->h * k->w))
        return host->status_new(QH_ERR_UNSUPPORTED, "reshape: GlobalAveragePool over too many pixels for "
                                                    "XNNPACK's requantization");
      y->dims[1] = y->dims[2] = 1;
      if (k->flatten_mean) /* ReduceMean, keepdims=0: [N, C] */
        y->rank = 2, y->dims[1] = c, y->layout = QH_LAYOUT_ANY;
    } else {
      int64_t eh = k->h + k->pad[0] + k->pad[2] - ((k->kh - 1) * k->dh + 1);
      int64_t ew = k->w + k->pad[1] + k->pad[3] - ((k->kw - 1) * k->dw + 1);
      if (eh < 0 || ew < 0)
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: pooling input smaller than the window");
      y->dims[1] = eh / k->sh + 1, y->dims[2] = ew / k->sw + 1;
      if (k->ceil) {
        /* the host's (PyTorch's) rule: round up, but the last window starts inside the
         * input or the top/left padding */
        int64_t oh = (eh + k->sh - 1) / k->sh + 1, ow = (ew + k->sw - 1) / k->sw + 1;
        oh -= (oh - 1) * k->sh >= k->h + k->pad[0];
        ow -= (ow - 1) * k->sw >= k->w + k->pad[1];
        y->dims[1] = oh, y->dims[2] = ow;
      }
    }
    if (c < 1)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: pooling input without channels");
    int64_t xpad[2] = {0, 0};
    if (k->ceil) { /* the padding the last windows need beyond the declared one */
      xpad[0] = (y->dims[1] - 1) * k->sh + (k->kh - 1) * k->dh + 1 - (k->h + k->pad[0] + k->pad[2]);
      xpad[1] = (y->dims[2] - 1) * k->sw + (k->kw - 1) * k->dw + 1 - (k->w + k->pad[1] + k->pad[3]);
      xpad[0] = xpad[0] > 0 ? xpad[0] : 0, xpad[1] = xpad[1] > 0 ? xpad[1] : 0;
    }
    if (c != k->channels || !k->xop || xpad[0] != k->xpad[0] || xpad[1] != k->xpad[1]) {
      k->xpad[0] = xpad[0], k->xpad[1] = xpad[1];
      if (k->xop)
        xnn_delete_operator(k->xop);
      k->xop = NULL;
      QhStatus *st = make_op(host, k, c, &k->xop);
      if (st)
        return st;
      k->channels = c;
    }
  }
  k->rank = x->rank;
  memcpy(k->dims, x->dims, sizeof k->dims);
  k->in_bytes = qn_numel(x);
  k->out_bytes = qn_numel(y);
  k->reshaped = 1;
  *out_workspace = 0;
  return NULL;
}

/* xnn_setup_* of the unit's operator on these buffers and the instance's pool. */
static enum xnn_status setup(U8Op *k, const void *x, const void *b, void *y, pthreadpool_t pool) {
  enum xnn_status s;
  if (IS_BINARY(k->op)) {
    /* same shapes: one flat dimension; else the shapes, which XNNPACK broadcasts */
    size_t flat = k->in_bytes, da[XNN_MAX_TENSOR_DIMS], db[XNN_MAX_TENSOR_DIMS], n = (size_t)k->rank;
    int same = k->in_bytes == k->b_bytes && k->in_bytes == k->out_bytes;
    for (size_t i = 0; i < n; i++)
      da[i] = (size_t)k->dims[i], db[i] = (size_t)k->bdims[i];
    const size_t *sa = same ? &flat : da, *sb = same ? &flat : db;
    size_t na = same ? 1 : n;
    s = k->op == U_ADD ? xnn_setup_add_nd_qu8(k->xop, na, sa, na, sb, x, b, y, pool)
                       : xnn_setup_multiply_nd_qu8(k->xop, na, sa, na, sb, x, b, y, pool);
  } else if (k->op == U_CLAMP) {
    s = xnn_setup_clamp_nc_u8(k->xop, k->in_bytes, x, y, pool);
  } else if (k->op == U_MAXPOOL) {
    s = xnn_setup_max_pooling2d_nhwc_u8(k->xop, (size_t)k->n, (size_t)k->h, (size_t)k->w, x, y, pool);
  } else if (k->op == U_AVGPOOL) {
    s = xnn_setup_average_pooling2d_nhwc_qu8(k->xop, (size_t)k->n, (size_t)k->h, (size_t)k->w, x, y,
                                             pool);
  } else if (k->op == U_SIGMOID) {
    s = xnn_setup_sigmoid_nc_qu8(k->xop, k->in_bytes, x, y, pool);
  } else if (k->op == U_TANH) {
    s = xnn_setup_tanh_nc_qu8(k->xop, k->in_bytes, x, y, pool);
  } else if (k->op == U_LEAKY) {
    s = xnn_setup_leaky_relu_nc_qu8(k->xop, k->in_bytes, x, y, pool);
  } else {
    s = xnn_setup_global_average_pooling_nwc_qu8(k->xop, (size_t)k->n, (size_t)(k->h * k->w), x, y,
                                                 pool);
  }
  return s;
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  U8Op *k = kernel;
  (void)ctx, (void)workspace, (void)workspace_bytes;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < 1 || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped || !k->xop)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  size_t want = IS_BINARY(k->op) ? 2 : 1;
  if (n_inputs < want || (n_inputs != want && k->op != U_CLAMP))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  for (size_t i = 0; i < want; i++) {
    const QhTensorView *t = &inputs[i];
    const int64_t *dims = i ? k->bdims : k->dims;
    size_t bytes = i ? k->b_bytes : k->in_bytes;
    if (!qn_u8_view_ok(t) || t->rank != k->rank || memcmp(t->dims, dims, (size_t)t->rank * sizeof *t->dims) ||
        t->nbytes != bytes || (bytes && !t->data))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  }
  if (!qn_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  pthreadpool_t pool = k->inst->pool;
  const void *b = IS_BINARY(k->op) ? inputs[1].data : NULL;
  enum xnn_status s = xnn_status_success;
  /* set up only when a buffer moved: XNNPACK keeps a set-up operator ready between runs */
  if (x->data != k->set_a || b != k->set_b || y->data != k->set_y) {
    k->set_a = k->set_b = k->set_y = NULL;
    s = setup(k, x->data, b, y->data, pool);
    if (s == xnn_status_success)
      k->set_a = x->data, k->set_b = b, k->set_y = y->data;
  }
  if (s == xnn_status_success)
    s = xnn_run_operator(k->xop, pool);
  if (s != xnn_status_success) {
    char msg[96];
    snprintf(msg, sizeof msg, "XNNPACK: setup or run failed (status %d)", (int)s);
    return host->status_new(QH_ERR_INTERNAL, msg);
  }
  return NULL;
}

#define U8_KERNEL(name, kid, layout)                                                                         \
  const QhKernelOps name = {QH_STRUCT_HEADER(QhKernelOps), .id = kid, .input_layout = layout,              \
                            .output_layout = layout, .create = create, .reshape = reshape, .run = run,       \
                            .destroy = destroy}
U8_KERNEL(qn_add_kernel, "xnn_add_nd_qu8", QH_LAYOUT_NHWC);
U8_KERNEL(qn_mul_kernel, "xnn_multiply_nd_qu8", QH_LAYOUT_NHWC);
U8_KERNEL(qn_clamp_kernel, "xnn_clamp_nc_u8", QH_LAYOUT_NHWC);
U8_KERNEL(qn_maxpool_kernel, "xnn_max_pooling2d_nhwc_u8", QH_LAYOUT_NHWC);
U8_KERNEL(qn_gap_kernel, "xnn_global_average_pooling_nwc_qu8", QH_LAYOUT_NHWC);
U8_KERNEL(qn_avgpool_kernel, "xnn_average_pooling2d_nhwc_qu8", QH_LAYOUT_NHWC);
/* element-wise: channels-last like their neighbours, so no layout transpose sits between */
U8_KERNEL(qn_sigmoid_kernel, "xnn_sigmoid_nc_qu8", QH_LAYOUT_NHWC);
U8_KERNEL(qn_tanh_kernel, "xnn_tanh_nc_qu8", QH_LAYOUT_NHWC);
U8_KERNEL(qn_leaky_relu_kernel, "xnn_leaky_relu_nc_qu8", QH_LAYOUT_NHWC);
