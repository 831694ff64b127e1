/* The scalar int8 test plugin: a lowering-only backend whose kernels are plain C loops
 * with integer accumulation, so the host's lowering driver can be tested end to end
 * (matching, accept/decline, create/reshape/run/destroy, the host thread pool) and its
 * results compared bit for bit with the host's int8 reference twin under the QNNPACK
 * requantization rule. Patterns: linear (Gemm transB=1, MatMul with a constant [K, N]
 * weight) and conv (NHWC, any groups) with optional fused Relu, and same-shape add with
 * optional Relu; uint8 activations, int8 weights per tensor or per output channel,
 * optional int32 or float bias. Options inject failures (fail, fail_node) and declines
 * (decline; max_batch in accept and reshape_max_batch in reshape, by the planned
 * shapes) so the host's error paths can be exercised, and plant numeric bugs (bug: the
 * output zero point one off, floor for round, or truncation toward zero for round) that
 * plugin-check must catch; the plugin declares no reference_numerics, so only the host's
 * reference can catch them. decline=* declines every unit: kernels that never run.
 *
 * Built with SHARED_SCALE_NPU it is shared_scale_npu, a backend for an imaginary NPU
 * whose Add takes both inputs on one grid (the same scale and zero point; accept
 * declines others) and which says so in its BackendConfig (ABI 1.2's
 * shared_inputs_mask), with int32 biases at input x weight scale: plugin-check's
 * built-in uint8 Add graphs (inputs on different scales) are declined, the graphs it
 * generates from the plugin's own patterns and BackendConfig are not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <qhost/qhost-plugin.h>

typedef volatile float vf32; /* keeps every float step a separately rounded f32 */

enum { FAIL_NONE, FAIL_CREATE, FAIL_RESHAPE, FAIL_RUN };
enum { K_LINEAR, K_CONV, K_ADD };
enum { BUG_NONE, BUG_ZERO_POINT, BUG_FLOOR, BUG_TRUNCATE };

#define OPT_MAX 256
typedef struct {
  int fail, bug;
  char fail_node[OPT_MAX];
  char decline[OPT_MAX];
  int64_t max_batch;         /* accept: decline units whose input 0 has a larger dim 0 (0: any) */
  int64_t reshape_max_batch; /* reshape: refuse a larger dim 0 (0: any) */
} Instance;

/* Everything accept and create learn about a unit. */
typedef struct {
  int kind;
  int relu;
  int matmul;
  int64_t n, k;                /* linear: output channels, reduction length */
  int64_t co, ci, kh, kw, grp; /* conv: weight [co, ci/grp, kh, kw]; ci = all input channels */
  int64_t stride[2], pad[4];
  uint32_t w_value, b_value;
  const QhQParams *xq, *x2q, *wq, *bq, *yq;
} Info;

typedef struct {
  int kind, relu, fail, matmul;
  int64_t reshape_max_batch;
  int64_t n, k;
  int64_t co, ci, kh, kw, grp, stride[2], pad[4];
  int16_t *w;  /* linear [n][k], conv [co][kh][kw][ci/grp]: w - zw */
  int32_t *bq; /* per output channel */
  float *mult; /* per output channel */
  int32_t zx, zo, lo, hi;
  int floor_rounding; /* the planted bug=floor (1) or bug=truncate (2) */
  float sa, sb, so; int32_t za, zb; /* add */
  int32_t reshaped, in_rank;
  int64_t in_dims[QH_MAX_RANK];
  int64_t rows, oh, ow, h, wd; /* from reshape */
} Kernel;

static int32_t clamp32(int64_t v, int32_t lo, int32_t hi) {
  return v < lo ? lo : v > hi ? hi : (int32_t)v;
}

static int32_t round_add_clamp(float v, int32_t zp, int32_t lo, int32_t hi, int floor_rounding) {
  float r = floor_rounding == 1 ? floorf(v) : floor_rounding == 2 ? truncf(v) : rintf(v);
  if (isnan(r))
    r = 0.0f;
  if (r > 0x1p40f)
    r = 0x1p40f;
  if (r < -0x1p40f)
    r = -0x1p40f;
  return clamp32((int64_t)r + zp, lo, hi);
}

static int qparams_sane(const QhQParams *q) {
  if (!q || q->struct_size < sizeof(QhQParams) || q->count < 1 || !q->scale || !q->zero_point)
    return 0;
  for (size_t i = 0; i < q->count; i++)
    if (!(q->scale[i] > 0.0f) || !isfinite(q->scale[i]))
      return 0;
  return 1;
}

/* A uint8 per-tensor activation; else the reason. */
static const char *act_problem(const QhQParams *q, const char *what) {
  static const char *const msgs[][3] = {
      {"input without quantization parameters", "int8 input activation is not supported (uint8 only)",
       "per-channel input activation is not supported"},
      {"float output is not supported", "int8 output activation is not supported (uint8 only)",
       "per-channel output activation is not supported"}};
  int o = strcmp(what, "output") == 0;
  if (!qparams_sane(q))
    return msgs[o][0];
  if (q->dtype != QH_DTYPE_UINT8)
    return msgs[o][1];
  if (q->count != 1 || q->zero_point[0] < 0 || q->zero_point[0] > 255)
    return msgs[o][2];
  return NULL;
}

static int op_is(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *op) {
  const char *t = host->node_op_type(g, node);
  return t && strcmp(t, op) == 0;
}

static int64_t attr_int(const QhHostApi *host, const QhGraphView *g, uint32_t node,
                        const char *name, int64_t def) {
  int64_t v = def;
  QhStatus *st = host->node_attr_int(g, node, name, &v);
  host->status_free(st);
  return st ? def : v;
}

static float attr_float(const QhHostApi *host, const QhGraphView *g, uint32_t node,
                        const char *name, float def) {
  float v = def;
  QhStatus *st = host->node_attr_float(g, node, name, &v);
  host->status_free(st);
  return st ? def : v;
}

/* n ints of attribute name into out (def when absent); 0 when present with another count. */
static int attr_ints(const QhHostApi *host, const QhGraphView *g, uint32_t node,
                     const char *name, size_t n, int64_t def, int64_t *out) {
  const int64_t *v = NULL;
  size_t count = 0;
  QhStatus *st = host->node_attr_ints(g, node, name, &v, &count);
  for (size_t i = 0; i < n; i++)
    out[i] = def;
  if (st) {
    host->status_free(st);
    return 1;
  }
  if (count != n || !v)
    return 0;
  memcpy(out, v, n * sizeof *out);
  return 1;
}

/* Shape of a value with every dim known, or rank -1. */
static int32_t known_shape(const QhHostApi *host, const QhGraphView *g, uint32_t v, int64_t *dims) {
  int32_t rank = -1;
  QhStatus *st = host->value_shape(g, v, dims, QH_MAX_RANK, &rank);
  if (st) {
    host->status_free(st);
    return -1;
  }
  if (rank < 0 || rank > QH_MAX_RANK)
    return -1;
  for (int32_t i = 0; i < rank; i++)
    if (dims[i] < 0)
      return -1;
  return rank;
}

/* Weight qparams: int8, per tensor or per channel on `axis` with `channels` entries. */
static const char *weight_problem(const QhQParams *q, int32_t axis, int64_t channels) {
  if (!qparams_sane(q))
    return "weight without valid quantization parameters";
  if (q->dtype != QH_DTYPE_INT8)
    return "weights other than int8 are not supported";
  for (size_t i = 0; i < q->count; i++)
    if (q->zero_point[i] < -128 || q->zero_point[i] > 127)
      return "weight zero point outside int8";
  if (q->count == 1)
    return NULL;
  if (q->ch_axis != axis || (int64_t)q->count != channels)
    return "per-channel weights on an axis other than the output channel";
  return NULL;
}

/* The bias input (may be absent): float constant [n] or int32 through a DQ. */
static const char *bias_problem(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                Info *in, int64_t n) {
  in->b_value = QH_INVALID_ID;
  in->bq = NULL;
  if (u->n_inputs < 3)
    return NULL;
  if (u->n_inputs > 3)
    return "unexpected extra inputs";
  if (u->input_roles[2] != QH_ROLE_BIAS)
    return "third input is not a bias";
  uint32_t v = u->inputs[2];
  if (!(host->value_flags(g, v) & QH_VALUE_CONSTANT))
    return "non-constant bias is not supported";
  int64_t dims[QH_MAX_RANK];
  int32_t rank = known_shape(host, g, v, dims);
  int64_t numel = 1;
  for (int32_t i = 0; i < rank; i++)
    numel *= dims[i];
  if (rank < 0 || numel != n)
    return "bias must have one element per output channel";
  int32_t dt = host->value_dtype(g, v);
  const QhQParams *q = u->input_qparams[2];
  if (!q) {
    if (dt != QH_DTYPE_FLOAT)
      return "unquantized bias must be float";
  } else {
    if (dt != QH_DTYPE_INT32 || !qparams_sane(q) || q->dtype != QH_DTYPE_INT32)
      return "quantized bias must be int32";
    if (q->count != 1 && (int64_t)q->count != n)
      return "int32 bias scales must be per tensor or per output channel";
    for (size_t i = 0; i < q->count; i++)
      if (q->zero_point[i] != 0)
        return "int32 bias with a non-zero zero point is not supported";
  }
  in->b_value = v;
  in->bq = q;
  return NULL;
}

static const char *unit_problem(const QhNodeUnit *u) {
  if (!u || u->struct_size < sizeof(QhNodeUnit))
    return "malformed node unit";
  if (u->n_nodes < 1 || u->n_nodes > QH_PATTERN_MAX_OPS || !u->nodes)
    return "malformed node unit (nodes)";
  if (u->n_inputs > 0 && (!u->inputs || !u->input_roles || !u->input_qparams))
    return "malformed node unit (inputs)";
  if (u->n_outputs != 1 || !u->outputs || !u->output_qparams)
    return "node unit must have exactly one output";
  return NULL;
}

static const char *relu_problem(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                Info *in) {
  in->relu = u->n_nodes == 2;
  if (u->n_nodes > 2 || (in->relu && !op_is(host, g, u->nodes[1], "Relu")))
    return "only a fused Relu may follow the op";
  return NULL;
}

/* ---- analysis: shared by accept and create ---- */

static const char *analyze_linear(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                  Info *in) {
  const char *p;
  uint32_t node = u->nodes[0];
  in->kind = K_LINEAR;
  in->matmul = op_is(host, g, node, "MatMul");
  if (!in->matmul && !op_is(host, g, node, "Gemm"))
    return "linear pattern on an op other than Gemm or MatMul";
  if ((p = relu_problem(host, g, u, in)))
    return p;
  if (u->n_inputs < 2 || u->input_roles[0] != QH_ROLE_ACTIVATION || u->input_roles[1] != QH_ROLE_WEIGHT)
    return "expected an activation and a weight input";
  if ((p = act_problem(u->input_qparams[0], "input")) || (p = act_problem(u->output_qparams[0], "output")))
    return p;
  if (in->matmul && u->n_inputs != 2)
    return "MatMul with extra inputs";
  if (!in->matmul) {
    if (attr_int(host, g, node, "transA", 0) != 0)
      return "Gemm with transA=1 is not supported";
    if (attr_int(host, g, node, "transB", 0) != 1)
      return "Gemm with transB=0 is not supported (weight must be [N, K])";
    if (attr_float(host, g, node, "alpha", 1.0f) != 1.0f || attr_float(host, g, node, "beta", 1.0f) != 1.0f)
      return "Gemm with alpha or beta other than 1 is not supported";
  }
  uint32_t w = u->inputs[1];
  if (!(host->value_flags(g, w) & QH_VALUE_CONSTANT))
    return in->matmul ? "MatMul with a non-constant B is not supported" : "non-constant Gemm weight";
  if (!u->input_qparams[1])
    return "float weights are not supported";
  int64_t d[QH_MAX_RANK];
  if (known_shape(host, g, w, d) != 2 || d[0] < 1 || d[1] < 1)
    return "weight must be a 2-D constant";
  if (host->value_dtype(g, w) != QH_DTYPE_INT8)
    return "weights other than int8 are not supported";
  in->n = in->matmul ? d[1] : d[0];
  in->k = in->matmul ? d[0] : d[1];
  if ((p = weight_problem(u->input_qparams[1], in->matmul ? 1 : 0, in->n)))
    return p;
  in->w_value = w;
  in->xq = u->input_qparams[0];
  in->wq = u->input_qparams[1];
  in->yq = u->output_qparams[0];
  return bias_problem(host, g, u, in, in->n);
}

static const char *analyze_conv(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                                Info *in) {
  const char *p;
  uint32_t node = u->nodes[0];
  in->kind = K_CONV;
  if (!op_is(host, g, node, "Conv"))
    return "conv pattern on an op other than Conv";
  if ((p = relu_problem(host, g, u, in)))
    return p;
  if (u->n_inputs < 2 || u->input_roles[0] != QH_ROLE_ACTIVATION || u->input_roles[1] != QH_ROLE_WEIGHT)
    return "expected an activation and a weight input";
  if ((p = act_problem(u->input_qparams[0], "input")) || (p = act_problem(u->output_qparams[0], "output")))
    return p;
  uint32_t w = u->inputs[1];
  int64_t d[QH_MAX_RANK];
  if (!(host->value_flags(g, w) & QH_VALUE_CONSTANT) || !u->input_qparams[1])
    return "conv weight must be a quantized constant";
  if (known_shape(host, g, w, d) != 4)
    return "only 2-D convolution is supported";
  if (host->value_dtype(g, w) != QH_DTYPE_INT8)
    return "weights other than int8 are not supported";
  int64_t dil[2], ks[2];
  if (!attr_ints(host, g, node, "dilations", 2, 1, dil))
    return "malformed dilations";
  if (dil[0] != 1 || dil[1] != 1)
    return "dilated convolution is not supported";
  const char *auto_pad = NULL;
  QhStatus *st = host->node_attr_string(g, node, "auto_pad", &auto_pad);
  if (st)
    host->status_free(st);
  else if (auto_pad && strcmp(auto_pad, "NOTSET") != 0 && strcmp(auto_pad, "VALID") != 0)
    return "auto_pad SAME is not supported";
  if (!attr_ints(host, g, node, "strides", 2, 1, in->stride) ||
      !attr_ints(host, g, node, "pads", 4, 0, in->pad) ||
      !attr_ints(host, g, node, "kernel_shape", 2, -1, ks))
    return "malformed strides, pads or kernel_shape";
  in->co = d[0], in->kh = d[2], in->kw = d[3];
  in->grp = attr_int(host, g, node, "group", 1);
  if ((ks[0] >= 0 && ks[0] != in->kh) || (ks[1] >= 0 && ks[1] != in->kw))
    return "kernel_shape differs from the weight";
  if (in->stride[0] < 1 || in->stride[1] < 1 || in->pad[0] < 0 || in->pad[1] < 0 || in->pad[2] < 0 ||
      in->pad[3] < 0 || in->grp < 1 || d[0] < 1 || d[1] < 1 || d[2] < 1 || d[3] < 1 ||
      in->co % in->grp != 0)
    return "invalid convolution geometry";
  in->ci = d[1] * in->grp;
  int64_t xd[QH_MAX_RANK];
  int32_t xr = known_shape(host, g, u->inputs[0], xd);
  if (xr >= 0 && (xr != 4 || xd[1] != in->ci))
    return "input channels differ from the weight's";
  if ((p = weight_problem(u->input_qparams[1], 0, in->co)))
    return p;
  in->w_value = w;
  in->xq = u->input_qparams[0];
  in->wq = u->input_qparams[1];
  in->yq = u->output_qparams[0];
  return bias_problem(host, g, u, in, in->co);
}

static const char *analyze_add(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                               Info *in) {
  const char *p;
  in->kind = K_ADD;
  if (!op_is(host, g, u->nodes[0], "Add"))
    return "add pattern on an op other than Add";
  if ((p = relu_problem(host, g, u, in)))
    return p;
  if (u->n_inputs != 2)
    return "Add needs exactly two inputs";
  if ((p = act_problem(u->input_qparams[0], "input")) || (p = act_problem(u->input_qparams[1], "input")) ||
      (p = act_problem(u->output_qparams[0], "output")))
    return p;
  int64_t a[QH_MAX_RANK], b[QH_MAX_RANK];
  int32_t ra = known_shape(host, g, u->inputs[0], a), rb = known_shape(host, g, u->inputs[1], b);
  if (ra >= 0 && rb >= 0 && (ra != rb || memcmp(a, b, (size_t)ra * sizeof *a) != 0))
    return "broadcasting add is not supported";
#ifdef SHARED_SCALE_NPU
  if (u->input_qparams[0]->scale[0] != u->input_qparams[1]->scale[0] ||
      u->input_qparams[0]->zero_point[0] != u->input_qparams[1]->zero_point[0])
    return "the NPU's Add takes both inputs on one grid (one scale and zero point)";
#endif
  in->xq = u->input_qparams[0];
  in->x2q = u->input_qparams[1];
  in->yq = u->output_qparams[0];
  return NULL;
}

static QhStatus *analyze(void *instance, const QhHostApi *host, const QhGraphView *g,
                         const QhNodeUnit *u, int kind, Info *in) {
  const Instance *inst = instance;
  const char *p = unit_problem(u);
  if (p)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, p);
  memset(in, 0, sizeof *in);
  if (inst && inst->decline[0] && u->pattern_id &&
      (strcmp(inst->decline, u->pattern_id) == 0 || strcmp(inst->decline, "*") == 0))
    return qh_status_newf(host, QH_ERR_UNSUPPORTED, "declined by option decline=%s", inst->decline);
  if (inst && inst->max_batch > 0) {
    /* ABI 1.2: accept sees the planned tensors; the reason spells out what it saw */
    if (!QH_HAS_FIELD(u, QhNodeUnit, output_tensors) || !u->input_tensors || !u->output_tensors)
      return host->status_new(QH_ERR_UNSUPPORTED, "the host gives accept no shapes");
    const QhTensorView *x = &u->input_tensors[0], *y = &u->output_tensors[0];
    if (x->rank >= 1 && x->dims[0] > inst->max_batch) {
      char xs[160] = "", ys[160] = "";
      for (int32_t d = 0, n = 0; d < x->rank; d++)
        n += snprintf(xs + n, sizeof xs - (size_t)n, "%s%lld", d ? "," : "", (long long)x->dims[d]);
      for (int32_t d = 0, n = 0; d < y->rank; d++)
        n += snprintf(ys + n, sizeof ys - (size_t)n, "%s%lld", d ? "," : "", (long long)y->dims[d]);
      return qh_status_newf(host, QH_ERR_UNSUPPORTED,
                            "batch %lld is above max_batch=%lld (input dtype %d layout %d [%s], "
                            "output dtype %d layout %d [%s])",
                            (long long)x->dims[0], (long long)inst->max_batch, (int)x->dtype,
                            (int)x->layout, xs, (int)y->dtype, (int)y->layout, ys);
    }
  }
  p = kind == K_LINEAR ? analyze_linear(host, g, u, in)
      : kind == K_CONV ? analyze_conv(host, g, u, in)
                       : analyze_add(host, g, u, in);
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

#define ACCEPT(name, kind)                                                                    \
  static QhStatus *name(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u) { \
    Info in;                                                                                  \
    return analyze(i, h, g, u, kind, &in);                                                    \
  }
ACCEPT(accept_linear, K_LINEAR)
ACCEPT(accept_conv, K_CONV)
ACCEPT(accept_add, K_ADD)

/* ---- create: pack weights and requantization constants once ---- */

static void kernel_destroy(void *kernel) {
  Kernel *k = kernel;
  if (!k)
    return;
  free(k->w);
  free(k->bq);
  free(k->mult);
  free(k);
}

/* Float bias of channel c (0 without bias); b_data is the constant's bytes. */
static float bias_at(const Info *in, const void *b_data, int64_t c) {
  if (!b_data)
    return 0.0f;
  if (!in->bq)
    return ((const float *)b_data)[c];
  float s = in->bq->scale[in->bq->count == 1 ? 0 : c];
  vf32 b = (float)((const int32_t *)b_data)[c] * s;
  return b;
}

static QhStatus *pack_weighted(Kernel *k, const QhHostApi *host, const QhGraphView *g,
                               const Info *in) {
  const void *w = NULL, *b = NULL;
  size_t wn = 0, bn = 0;
  int64_t nc = in->kind == K_LINEAR ? in->n : in->co;
  int64_t per = in->kind == K_LINEAR ? in->k : (in->ci / in->grp) * in->kh * in->kw;
  QhStatus *st = host->value_data(g, in->w_value, &w, &wn);
  if (st)
    return st;
  if (!w || wn != (size_t)(nc * per))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "weight data size differs from its shape");
  if (in->b_value != QH_INVALID_ID) {
    if ((st = host->value_data(g, in->b_value, &b, &bn)))
      return st;
    if (!b || bn != (size_t)nc * 4)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "bias data size differs from its shape");
  }
  k->w = malloc((size_t)(nc * per) * sizeof *k->w);
  k->bq = malloc((size_t)nc * sizeof *k->bq);
  k->mult = malloc((size_t)nc * sizeof *k->mult);
  if (!k->w || !k->bq || !k->mult)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory packing weights");
  const int8_t *wq = w;
  float sx = in->xq->scale[0], so = in->yq->scale[0];
  for (int64_t c = 0; c < nc; c++) {
    size_t qi = in->wq->count == 1 ? 0 : (size_t)c;
    int32_t zw = in->wq->zero_point[qi];
    if (in->kind == K_LINEAR)
      for (int64_t j = 0; j < in->k; j++)
        k->w[c * in->k + j] = (int16_t)(wq[in->matmul ? j * in->n + c : c * in->k + j] - zw);
    else { /* OIHW -> [co][kh][kw][cig] */
      int64_t cig = in->ci / in->grp;
      for (int64_t i = 0; i < cig; i++)
        for (int64_t y = 0; y < in->kh; y++)
          for (int64_t x = 0; x < in->kw; x++)
            k->w[((c * in->kh + y) * in->kw + x) * cig + i] =
                (int16_t)(wq[((c * cig + i) * in->kh + y) * in->kw + x] - zw);
    }
    vf32 sb = sx * in->wq->scale[qi];
    vf32 inv = 1.0f / sb;
    vf32 bs = bias_at(in, b, c) * inv;
    k->bq[c] = round_add_clamp(bs, 0, INT32_MIN, INT32_MAX, 0);
    vf32 inv_so = 1.0f / so;
    vf32 m = sb * inv_so;
    k->mult[c] = m;
  }
  return NULL;
}

static QhStatus *create_kind(void *instance, const QhHostApi *host, const QhGraphView *g,
                             const QhNodeUnit *u, void **out, int kind) {
  const Instance *inst = instance;
  Info in;
  if (!out)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: NULL out_kernel");
  QhStatus *st = analyze(instance, host, g, u, kind, &in);
  if (st)
    return st;
  int fail = FAIL_NONE;
  if (inst && inst->fail != FAIL_NONE) {
    const char *name = host->node_name(g, u->nodes[0]);
    if (!inst->fail_node[0] || (name && strcmp(name, inst->fail_node) == 0))
      fail = inst->fail;
  }
  if (fail == FAIL_CREATE)
    return host->status_new(QH_ERR_INTERNAL, "injected failure in create");
  Kernel *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->kind = kind, k->relu = in.relu, k->fail = fail, k->matmul = in.matmul;
  k->reshape_max_batch = inst ? inst->reshape_max_batch : 0;
  k->n = in.n, k->k = in.k, k->co = in.co, k->ci = in.ci, k->kh = in.kh, k->kw = in.kw;
  k->grp = in.grp;
  memcpy(k->stride, in.stride, sizeof k->stride);
  memcpy(k->pad, in.pad, sizeof k->pad);
  k->zx = in.xq->zero_point[0];
  k->zo = in.yq->zero_point[0];
  k->so = in.yq->scale[0];
  k->lo = in.relu ? k->zo : 0;
  if (inst && inst->bug == BUG_ZERO_POINT)
    k->zo += 1; /* the relu floor stays the true zero point: only the offset is wrong */
  k->floor_rounding = !inst ? 0 : inst->bug == BUG_FLOOR ? 1 : inst->bug == BUG_TRUNCATE ? 2 : 0;
  k->hi = 255;
  if (kind == K_ADD) {
    k->sa = in.xq->scale[0], k->za = in.xq->zero_point[0];
    k->sb = in.x2q->scale[0], k->zb = in.x2q->zero_point[0];
  } else if ((st = pack_weighted(k, host, g, &in))) {
    kernel_destroy(k);
    return st;
  }
  *out = k;
  return NULL;
}

#define CREATE(name, kind)                                                                  \
  static QhStatus *name(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u, \
                        void **out) {                                                       \
    return create_kind(i, h, g, u, out, kind);                                              \
  }
CREATE(create_linear, K_LINEAR)
CREATE(create_conv, K_CONV)
CREATE(create_add, K_ADD)

/* ---- reshape ---- */

static int view_ok(const QhTensorView *t) {
  if (t->struct_size < sizeof(QhTensorView) || t->rank < 0 || t->rank > QH_MAX_RANK)
    return 0;
  for (int32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0)
      return 0;
  return 1;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs,
                         size_t n_inputs, QhTensorView *outputs, size_t n_outputs,
                         size_t *out_workspace) {
  Kernel *k = kernel;
  if (!host)
    return NULL;
  size_t need = k && k->kind == K_ADD ? 2 : 1;
  if (!k || !inputs || n_inputs < need || !outputs || n_outputs != 1 || !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  if (k->fail == FAIL_RESHAPE)
    return host->status_new(QH_ERR_INTERNAL, "injected failure in reshape");
  const QhTensorView *x = &inputs[0];
  if (k->reshape_max_batch > 0 && x->rank >= 1 && x->dims[0] > k->reshape_max_batch)
    return qh_status_newf(host, QH_ERR_UNSUPPORTED, "batch %lld is above reshape_max_batch=%lld",
                          (long long)x->dims[0], (long long)k->reshape_max_batch);
  for (size_t i = 0; i < need; i++)
    if (!view_ok(&inputs[i]) || inputs[i].dtype != QH_DTYPE_UINT8)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: input must be a uint8 tensor");
  QhTensorView *y = &outputs[0];
  if (y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: output view too small");
  y->dtype = QH_DTYPE_UINT8;
  y->rank = x->rank;
  memcpy(y->dims, x->dims, sizeof y->dims);
  if (k->kind == K_LINEAR) {
    if (x->rank < 1 || (!k->matmul && x->rank != 2) || x->dims[x->rank - 1] != k->k)
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT,
                            "reshape: linear input must end in K=%lld%s", (long long)k->k,
                            k->matmul ? "" : " and be 2-D");
    k->rows = 1;
    for (int32_t i = 0; i + 1 < x->rank; i++)
      k->rows *= x->dims[i];
    y->dims[x->rank - 1] = k->n;
    y->layout = x->layout;
  } else if (k->kind == K_CONV) {
    if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC || x->dims[3] != k->ci)
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT,
                            "reshape: conv input must be NHWC with %lld channels", (long long)k->ci);
    k->h = x->dims[1], k->wd = x->dims[2];
    int64_t eh = k->h + k->pad[0] + k->pad[2] - k->kh, ew = k->wd + k->pad[1] + k->pad[3] - k->kw;
    if (eh < 0 || ew < 0)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: conv input smaller than the kernel");
    k->oh = eh / k->stride[0] + 1, k->ow = ew / k->stride[1] + 1;
    k->rows = x->dims[0] * k->oh;
    y->dims[1] = k->oh, y->dims[2] = k->ow, y->dims[3] = k->co;
    y->layout = QH_LAYOUT_NHWC;
  } else {
    const QhTensorView *b = &inputs[1];
    if (b->rank != x->rank || memcmp(b->dims, x->dims, (size_t)x->rank * sizeof *x->dims) != 0)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: add inputs differ in shape");
    if (b->layout != x->layout)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: add inputs differ in layout");
    k->rows = 1;
    for (int32_t i = 0; i < x->rank; i++)
      k->rows *= x->dims[i];
    y->layout = x->layout;
  }
  k->in_rank = x->rank;
  memcpy(k->in_dims, x->dims, sizeof k->in_dims);
  k->reshaped = 1;
  *out_workspace = 0;
  return NULL;
}

/* ---- run ---- */

typedef struct {
  const Kernel *k;
  const uint8_t *x, *x2;
  uint8_t *y;
} Job;

static int32_t requant(const Kernel *k, int64_t acc, int64_t c) {
  int32_t a = clamp32(clamp32(acc, INT32_MIN, INT32_MAX) + (int64_t)k->bq[c], INT32_MIN, INT32_MAX);
  vf32 af = (float)a;
  vf32 v = af * k->mult[c];
  return round_add_clamp(v, k->zo, k->lo, k->hi, k->floor_rounding);
}

static void linear_row(void *user, size_t r, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const Kernel *k = j->k;
  const uint8_t *x = j->x + (int64_t)r * k->k;
  for (int64_t c = 0; c < k->n; c++) {
    const int16_t *w = k->w + c * k->k;
    int64_t acc = 0;
    for (int64_t i = 0; i < k->k; i++)
      acc += (int64_t)((int32_t)x[i] - k->zx) * w[i];
    j->y[(int64_t)r * k->n + c] = (uint8_t)requant(k, acc, c);
  }
}

/* One output row (batch b, output row oy) of an NHWC conv. */
static void conv_row(void *user, size_t r, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const Kernel *k = j->k;
  int64_t b = (int64_t)r / k->oh, oy = (int64_t)r % k->oh;
  int64_t cig = k->ci / k->grp, cog = k->co / k->grp;
  uint8_t *y = j->y + (int64_t)r * k->ow * k->co;
  for (int64_t ox = 0; ox < k->ow; ox++)
    for (int64_t c = 0; c < k->co; c++) {
      int64_t g0 = (c / cog) * cig, acc = 0;
      for (int64_t ky = 0; ky < k->kh; ky++) {
        int64_t iy = oy * k->stride[0] - k->pad[0] + ky;
        if (iy < 0 || iy >= k->h)
          continue; /* padding holds the zero point: contributes 0 */
        for (int64_t kx = 0; kx < k->kw; kx++) {
          int64_t ix = ox * k->stride[1] - k->pad[1] + kx;
          if (ix < 0 || ix >= k->wd)
            continue;
          const uint8_t *xp = j->x + ((b * k->h + iy) * k->wd + ix) * k->ci + g0;
          const int16_t *w = k->w + ((c * k->kh + ky) * k->kw + kx) * cig;
          for (int64_t i = 0; i < cig; i++)
            acc += (int64_t)((int32_t)xp[i] - k->zx) * w[i];
        }
      }
      y[ox * k->co + c] = (uint8_t)requant(k, acc, c);
    }
}

#define ADD_BLOCK 4096

static void add_block(void *user, size_t blk, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const Kernel *k = j->k;
  int64_t start = (int64_t)blk * ADD_BLOCK, end = start + ADD_BLOCK;
  if (end > k->rows)
    end = k->rows;
  vf32 inv = 1.0f / k->so;
  for (int64_t i = start; i < end; i++) {
    vf32 a = (float)((int32_t)j->x[i] - k->za) * k->sa;
    vf32 b = (float)((int32_t)j->x2[i] - k->zb) * k->sb;
    vf32 s = a + b;
    float v = s;
    if (k->relu && !(v > 0.0f))
      v = 0.0f;
    vf32 q = v * inv;
    j->y[i] = (uint8_t)round_add_clamp(q, k->zo, 0, 255, k->floor_rounding);
  }
}

static size_t numel(const QhTensorView *t) {
  size_t n = 1;
  for (int32_t i = 0; i < t->rank; i++)
    n *= (size_t)t->dims[i];
  return n;
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx,
                     const QhTensorView *inputs, size_t n_inputs, QhTensorView *outputs,
                     size_t n_outputs, void *workspace, size_t workspace_bytes) {
  (void)workspace, (void)workspace_bytes;
  Kernel *k = kernel;
  if (!host)
    return NULL;
  size_t need = k && k->kind == K_ADD ? 2 : 1;
  if (!k || !inputs || n_inputs < need || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  if (k->fail == FAIL_RUN)
    return host->status_new(QH_ERR_INTERNAL, "injected failure in run");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  for (size_t i = 0; i < need; i++)
    if (!view_ok(&inputs[i]) || inputs[i].rank != k->in_rank ||
        memcmp(inputs[i].dims, k->in_dims, (size_t)k->in_rank * sizeof *k->in_dims) != 0 ||
        inputs[i].dtype != QH_DTYPE_UINT8 || inputs[i].nbytes != numel(&inputs[i]) ||
        (inputs[i].nbytes && !inputs[i].data))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  size_t out_n = k->kind == K_LINEAR ? (size_t)(k->rows * k->n)
                 : k->kind == K_CONV ? (size_t)(k->rows * k->ow * k->co)
                                     : (size_t)k->rows;
  if (!view_ok(y) || y->dtype != QH_DTYPE_UINT8 || y->nbytes != out_n || (out_n && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (out_n == 0)
    return NULL;
  Job job = {k, x->data, need > 1 ? inputs[1].data : NULL, y->data};
  if (k->kind == K_ADD)
    return host->parallel_for(ctx, (size_t)((k->rows + ADD_BLOCK - 1) / ADD_BLOCK), add_block, &job);
  return host->parallel_for(ctx, (size_t)k->rows, k->kind == K_LINEAR ? linear_row : conv_row, &job);
}

/* ---- the descriptor ---- */

static const QhKernelOps linear_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "linear_qu8_qs8w", .input_layout = QH_LAYOUT_ANY,
    .output_layout = QH_LAYOUT_ANY, .create = create_linear, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};
static const QhKernelOps conv_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "conv2d_nhwc_qu8_qs8w", .input_layout = QH_LAYOUT_NHWC,
    .output_layout = QH_LAYOUT_NHWC, .create = create_conv, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};
static const QhKernelOps add_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "add_qu8", .input_layout = QH_LAYOUT_ANY,
    .output_layout = QH_LAYOUT_ANY, .create = create_add, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};

static const char *const gemm_relu_ops[] = {"Gemm", "Relu"}, *const gemm_ops[] = {"Gemm"},
                  *const matmul_ops[] = {"MatMul"}, *const conv_relu_ops[] = {"Conv", "Relu"},
                  *const conv_ops[] = {"Conv"}, *const add_relu_ops[] = {"Add", "Relu"},
                  *const add_ops[] = {"Add"};

#define PATTERN(name, list, kern, acc)                                                        \
  static const QhLoweringPattern name = {QH_STRUCT_HEADER(QhLoweringPattern), .id = #name,   \
                                         .ops = list, .n_ops = sizeof list / sizeof list[0], \
                                         .kernel = &kern, .accept = acc}
PATTERN(linear_relu, gemm_relu_ops, linear_kernel, accept_linear);
PATTERN(linear, gemm_ops, linear_kernel, accept_linear);
PATTERN(matmul, matmul_ops, linear_kernel, accept_linear);
PATTERN(conv_relu, conv_relu_ops, conv_kernel, accept_conv);
PATTERN(conv, conv_ops, conv_kernel, accept_conv);
PATTERN(add_relu, add_relu_ops, add_kernel, accept_add);
PATTERN(add, add_ops, add_kernel, accept_add);

/* Fused patterns first: the first pattern that matches and accepts wins. */
static const QhLoweringPattern *const patterns[] = {&linear_relu, &linear, &matmul, &conv_relu,
                                                    &conv, &add_relu, &add};
static const QhLoweringOps lowering = {QH_STRUCT_HEADER(QhLoweringOps), patterns,
                                       sizeof patterns / sizeof patterns[0]};

static const QhOptionDecl opt_fail = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "fail", .type = QH_OPTION_ENUM, .default_value = "none",
    .help = "inject a failure into this kernel callback", .choices = "none|create|reshape|run"};
static const QhOptionDecl opt_fail_node = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "fail_node", .type = QH_OPTION_STRING,
    .default_value = "", .help = "only fail the unit whose first node has this name (empty: every unit)"};
static const QhOptionDecl opt_decline = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "decline", .type = QH_OPTION_STRING,
    .default_value = "", .help = "decline every unit of this pattern id (*: of every pattern)"};
static const QhOptionDecl opt_bug = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "bug", .type = QH_OPTION_ENUM, .default_value = "none",
    .help = "plant a numeric bug: the output zero point one off, floor or truncation instead of round half to even",
    .choices = "none|zero_point|floor|truncate"};
static const QhOptionDecl opt_max_batch = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "max_batch", .type = QH_OPTION_INT, .default_value = "0",
    .help = "accept declines units whose input 0 has a larger first dimension (0: any)", .min = 0,
    .max = 1 << 30};
static const QhOptionDecl opt_reshape_max_batch = {
    QH_STRUCT_HEADER(QhOptionDecl), .name = "reshape_max_batch", .type = QH_OPTION_INT,
    .default_value = "0", .help = "reshape refuses a larger first input dimension (0: any)", .min = 0,
    .max = 1 << 30};
static const QhOptionDecl *const options[] = {&opt_fail, &opt_fail_node, &opt_decline, &opt_bug,
                                              &opt_max_batch, &opt_reshape_max_batch};

/* Copies an option value into a fixed buffer; 0 when it does not fit. */
static int copy_opt(char *dst, const char *src) {
  size_t n = strlen(src);
  if (n >= OPT_MAX)
    return 0;
  memcpy(dst, src, n + 1);
  return 1;
}

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info,
                                 const QhOption *opts, size_t n_opts, void **out) {
  static const char *const modes[] = {"none", "create", "reshape", "run"};
  (void)info;
  if (!out || (n_opts && !opts))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "instance_create: bad arguments");
  Instance *inst = calloc(1, sizeof *inst);
  if (!inst)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  int ok = 1;
  for (size_t i = 0; i < n_opts && ok; i++) {
    const char *key = opts[i].key, *val = opts[i].value;
    if (!key || !val)
      continue;
    if (strcmp(key, "fail") == 0) {
      inst->fail = -1;
      for (int m = 0; m < 4; m++)
        if (strcmp(val, modes[m]) == 0)
          inst->fail = m;
      ok = inst->fail >= 0;
    } else if (strcmp(key, "fail_node") == 0)
      ok = copy_opt(inst->fail_node, val);
    else if (strcmp(key, "decline") == 0)
      ok = copy_opt(inst->decline, val);
    else if (strcmp(key, "max_batch") == 0)
      inst->max_batch = strtoll(val, NULL, 10);
    else if (strcmp(key, "reshape_max_batch") == 0)
      inst->reshape_max_batch = strtoll(val, NULL, 10);
    else if (strcmp(key, "bug") == 0) {
      static const char *const bugs[] = {"none", "zero_point", "floor", "truncate"};
      inst->bug = -1;
      for (int b = 0; b < 4; b++)
        if (strcmp(val, bugs[b]) == 0)
          inst->bug = b;
      ok = inst->bug >= 0;
    }
  }
  if (!ok) {
    free(inst);
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "bad value for option fail, fail_node, decline or bug");
  }
  *out = inst;
  return NULL;
}

#ifdef SHARED_SCALE_NPU
/* ---- the NPU's BackendConfig: its patterns, its Add's one grid, int32 biases ---- */
static const QhDTypeConstraint quint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8};
static const QhDTypeConstraint qint8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT8};
static const QhDTypeConstraint qint32 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT32};
static const QhDTypeConfig weighted = {QH_STRUCT_HEADER(QhDTypeConfig), .name = "npu_weighted",
                                       .input = &quint8, .output = &quint8, .weight = &qint8,
                                       .bias = &qint32, .bias_derivation = QH_BIAS_INT32_INPUT_TIMES_WEIGHT};
static const QhDTypeConfig unweighted = {QH_STRUCT_HEADER(QhDTypeConfig), .name = "npu_unweighted",
                                         .input = &quint8, .output = &quint8};
static const QhDTypeConfig *const weighted_configs[] = {&weighted}, *const unweighted_configs[] = {&unweighted};

#define CONFIG(id, configs, mask, ...)                                                             \
  static const char *const id##_cfg_ops[] = {__VA_ARGS__};                                         \
  static const QhBackendPatternConfig id##_cfg = {                                                 \
      QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = id##_cfg_ops,                               \
      .n_ops = sizeof id##_cfg_ops / sizeof id##_cfg_ops[0],                                       \
      .observation_type = QH_OBS_OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT, .dtype_configs = configs, \
      .n_dtype_configs = 1, .fuser = QH_FUSER_NONE, .shared_inputs_mask = mask}
CONFIG(linear_relu, weighted_configs, 0, "Gemm", "Relu");
CONFIG(linear, weighted_configs, 0, "Gemm");
CONFIG(matmul, weighted_configs, 0, "MatMul");
CONFIG(conv_relu, weighted_configs, 0, "Conv", "Relu");
CONFIG(conv, weighted_configs, 0, "Conv");
CONFIG(add_relu, unweighted_configs, 0x3, "Add", "Relu");
CONFIG(add, unweighted_configs, 0x3, "Add");
static const QhBackendPatternConfig *const configs[] = {&linear_relu_cfg, &linear_cfg, &matmul_cfg,
                                                        &conv_relu_cfg, &conv_cfg, &add_relu_cfg, &add_cfg};
static const QhQuantSpec activation = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                       .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
                                       .ch_axis = -1, .observer = "MinMaxObserver"};
static const QhQConfigEntry global = {QH_STRUCT_HEADER(QhQConfigEntry), .match = QH_QCONFIG_MATCH_GLOBAL,
                                      .activation = &activation};
static const QhQConfigEntry *const qconfig[] = {&global};
static const QhBackendConfig backend_config = {QH_STRUCT_HEADER(QhBackendConfig), .name = "shared_scale_npu",
                                               .patterns = configs, .n_patterns = sizeof configs / sizeof configs[0],
                                               .default_qconfig = qconfig, .n_default_qconfig = 1};
#endif

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
#ifdef SHARED_SCALE_NPU
    .name = "shared_scale_npu", .version = "1.0",
    .description = "test backend: an NPU whose Add takes both inputs on one grid (scalar int8 kernels)",
    .backend_config = &backend_config,
#else
    .name = "scalar_int8", .version = "1.0",
    .description = "test backend: scalar int8 linear, conv and add kernels with fault injection",
#endif
    .options = options, .n_options = sizeof options / sizeof options[0],
    .instance_create = instance_create, .instance_destroy = free,
    .lowering = &lowering};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
