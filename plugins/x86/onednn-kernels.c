/* The x86 plugin's oneDNN 2.6 int8 kernels: NHWC convolution (any groups, strides, pads,
 * dilations; fused residual sum, Relu, Clip) and linear (matmul primitive, Gemm transB=1
 * or MatMul with a constant weight). create reads the unit's weights, bias and qparams and
 * computes the float bias and per-channel output scales once; reshape, where shapes are
 * known, builds the primitive and reorders the weights once into its preferred format;
 * run binds the host's buffers and executes. Numerics in onednn.h. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../common/unit-query.h"
#include "onednn.h"

typedef volatile float vf32; /* keeps every float step a separately rounded f32 */

typedef struct {
  X86Instance *inst;
  X86Info in;
  int8_t *w;     /* the unit's weights, as stored in the graph */
  float *bias;   /* in units of sx*sw[c], not rounded; NULL without bias */
  float *oscale; /* per output channel */
  int32_t zx, zo;
  int64_t nc;
  X86Prim p;
  int32_t zp_src_val, zp_dst_val;
  int reshaped, in_rank;
  int64_t in_dims[QH_MAX_RANK];
  size_t in_bytes, out_bytes;
} Kernel;

#define CK X86_CK

static void release(Kernel *k) {
  x86_prim_release(&k->p);
  k->reshaped = 0;
}

static void kernel_destroy(void *kernel) {
  Kernel *k = kernel;
  if (!k)
    return;
  release(k);
  free(k->w);
  free(k->bias);
  free(k->oscale);
  free(k);
}

/* The output scales, and the bias in units of sx*sw[c], not rounded: PyTorch's onednn
 * engine keeps the bias float, and rounding it to int32 shifted every output of a channel
 * by up to half a unit of sx*sw[c] (BN-folded depthwise weights make that ~0.02 output
 * steps: a trained mobilenet_v2 fell from 98.8% to 91.8% within one step of the host's
 * QDQ run). An int32 QDQ bias already in those units is exact up to 2^24. */
static QhStatus *prepare(Kernel *k, const QhHostApi *host, const QhGraphView *g) {
  const X86Info *in = &k->in;
  int64_t per = in->kind == K_CONV ? (in->ci / in->grp) * in->kh * in->kw : in->k;
  const void *w = NULL, *b = NULL;
  size_t wn = 0, bn = 0;
  QhStatus *st = host->value_data(g, in->w_value, &w, &wn);
  if (st)
    return st;
  if (!w || wn != (size_t)(k->nc * per))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "weight data size differs from its shape");
  if (in->b_value != QH_INVALID_ID) {
    if ((st = host->value_data(g, in->b_value, &b, &bn)))
      return st;
    if (!b || bn != (size_t)k->nc * 4)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "bias data size differs from its shape");
  }
  k->w = malloc(wn);
  k->oscale = malloc((size_t)k->nc * sizeof *k->oscale);
  k->bias = b ? malloc((size_t)k->nc * sizeof *k->bias) : NULL;
  if (!k->w || !k->oscale || (b && !k->bias))
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory packing weights");
  memcpy(k->w, w, wn);
  float sx = in->xq->scale[0], so = in->yq->scale[0];
  vf32 inv_so = 1.0f / so;
  for (int64_t c = 0; c < k->nc; c++) {
    vf32 sb = sx * in->wq->scale[in->wq->count == 1 ? 0 : c];
    vf32 m = sb * inv_so;
    k->oscale[c] = m;
    if (!b)
      continue;
    if (in->bq) {
      float bs = in->bq->scale[in->bq->count == 1 ? 0 : c];
      int32_t bi = ((const int32_t *)b)[c];
      if (bs == sb) { /* the usual QDQ bias: already in units of sx*sw[c] */
        k->bias[c] = (float)bi;
        continue;
      }
      vf32 bf = (float)bi * bs, q = bf / sb;
      k->bias[c] = q;
    } else {
      vf32 q = ((const float *)b)[c] / sb;
      k->bias[c] = q;
    }
  }
  return NULL;
}

static QhStatus *create_kind(void *instance, const QhHostApi *host, const QhGraphView *g,
                             const QhNodeUnit *u, void **out, int kind) {
  if (!out || !instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  Kernel *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  QhStatus *st = x86_analyze(instance, host, g, u, kind, &k->in);
  if (!st) {
    k->inst = instance;
    k->nc = kind == K_CONV ? k->in.co : k->in.n;
    k->zx = k->in.xq->zero_point[0];
    k->zo = k->in.yq->zero_point[0];
    st = prepare(k, host, g);
  }
  if (st) {
    kernel_destroy(k);
    return st;
  }
  *out = k;
  return NULL;
}

static QhStatus *create_conv(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u,
                             void **out) {
  return create_kind(i, h, g, u, out, K_CONV);
}

static QhStatus *create_linear(void *i, const QhHostApi *h, const QhGraphView *g,
                               const QhNodeUnit *u, void **out) {
  return create_kind(i, h, g, u, out, K_LINEAR);
}

/* ---- reshape: build the primitive and reorder the weights once ---- */

static QhStatus *make_attr(Kernel *k, const QhHostApi *host, dnnl_primitive_attr_t attr) {
  const X86Info *in = &k->in;
  float so = in->yq->scale[0];
  CK(dnnl_primitive_attr_set_output_scales(attr, k->nc, 1 << 1, k->oscale), "set_output_scales");
  const int32_t rt = DNNL_RUNTIME_S32_VAL;
  if (k->zx)
    CK(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &rt), "set_zero_points(src)");
  if (k->zo)
    CK(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &rt), "set_zero_points(dst)");
  if (!in->add && in->post == POST_NONE)
    return NULL;
  dnnl_post_ops_t po;
  CK(dnnl_post_ops_create(&po), "post_ops_create");
  dnnl_status_t s = dnnl_success;
  /* Everything after the output scale is in units of so: the residual enters as
   * (sr/so)*(r - zr), Relu and Clip commute with that positive scaling. */
  if (in->add)
    s = dnnl_post_ops_append_sum_v3(po, in->rq->scale[0] / so, in->rq->zero_point[0], dnnl_u8);
  if (s == dnnl_success && in->post == POST_RELU)
    s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
  if (s == dnnl_success && in->post == POST_CLIP) {
    float lo = isfinite(in->clip_lo) ? in->clip_lo / so : -FLT_MAX;
    float hi = isfinite(in->clip_hi) ? in->clip_hi / so : FLT_MAX;
    s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, lo, hi);
  }
  if (s == dnnl_success)
    s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  return x86_dnnl_status(host, s, "post-ops");
}

static QhStatus *mem(const QhHostApi *host, dnnl_engine_t eng, dnnl_memory_t *m, int nd,
                     const dnnl_dims_t dims, dnnl_data_type_t dt, dnnl_format_tag_t tag, void *handle) {
  dnnl_memory_desc_t md;
  CK(dnnl_memory_desc_init_by_tag(&md, nd, dims, dt, tag), "memory_desc_init");
  CK(dnnl_memory_create(m, &md, eng, handle), "memory_create");
  return NULL;
}

/* as_conv: the primitive is a convolution (a linear unit passes 1x1 descriptors). */
static QhStatus *build(Kernel *k, const QhHostApi *host, const dnnl_memory_desc_t *src,
                       const dnnl_memory_desc_t *wei_user, const dnnl_memory_desc_t *bia,
                       const dnnl_memory_desc_t *dst, int as_conv) {
  const X86Info *in = &k->in;
  dnnl_engine_t eng = k->inst->engine;
  dnnl_memory_desc_t wany;
  CK(dnnl_memory_desc_init_by_tag(&wany, wei_user->ndims, wei_user->dims, dnnl_s8, dnnl_format_tag_any),
     "memory_desc_init(weights)");
  union {
    dnnl_convolution_desc_t conv;
    dnnl_matmul_desc_t mm;
  } d;
  if (in->kind == K_CONV) {
    dnnl_dims_t strides = {in->stride[0], in->stride[1]}, dil = {in->dil[0] - 1, in->dil[1] - 1};
    dnnl_dims_t pl = {in->pad[0], in->pad[1]}, pr = {in->pad[2], in->pad[3]};
    CK(dnnl_dilated_convolution_forward_desc_init(&d.conv, dnnl_forward_inference, dnnl_convolution_direct,
                                                  src, &wany, bia, dst, strides, dil, pl, pr),
       "convolution_desc_init");
  } else if (as_conv) {
    dnnl_dims_t strides = {1, 1}, dil = {0, 0}, pad = {0, 0};
    CK(dnnl_dilated_convolution_forward_desc_init(&d.conv, dnnl_forward_inference, dnnl_convolution_direct,
                                                  src, &wany, bia, dst, strides, dil, pad, pad),
       "convolution_desc_init(linear)");
  } else
    CK(dnnl_matmul_desc_init(&d.mm, src, &wany, bia, dst), "matmul_desc_init");
  dnnl_primitive_attr_t attr;
  CK(dnnl_primitive_attr_create(&attr), "attr_create");
  QhStatus *st = make_attr(k, host, attr);
  dnnl_primitive_desc_t pd = NULL;
  if (!st)
    st = x86_dnnl_status(host, dnnl_primitive_desc_create(&pd, &d, attr, eng, NULL),
                         as_conv ? "int8 convolution" : "int8 matmul");
  dnnl_primitive_attr_destroy(attr);
  if (!st)
    st = x86_prim_create(k->inst, host, pd, wei_user, k->w, &k->p);
  if (!st && k->bias)
    st = x86_dnnl_status(host, dnnl_memory_create(&k->p.bia, bia, eng, k->bias), "memory_create");
  k->zp_src_val = k->zx, k->zp_dst_val = k->zo;
  dnnl_dims_t one = {1};
  if (!st && k->zx)
    st = mem(host, eng, &k->p.zp_src, 1, one, dnnl_s32, dnnl_a, &k->zp_src_val);
  if (!st && k->zo)
    st = mem(host, eng, &k->p.zp_dst, 1, one, dnnl_s32, dnnl_a, &k->zp_dst_val);
  if (pd)
    dnnl_primitive_desc_destroy(pd);
  return st;
}

static QhStatus *reshape_conv(Kernel *k, const QhHostApi *host, const QhTensorView *x, QhTensorView *y) {
  const X86Info *in = &k->in;
  if (x->rank != 4 || x->layout != QH_LAYOUT_NHWC || x->dims[3] != in->ci)
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: conv input must be NHWC with %lld channels",
                          (long long)in->ci);
  int64_t eh = x->dims[1] + in->pad[0] + in->pad[2] - ((in->kh - 1) * in->dil[0] + 1);
  int64_t ew = x->dims[2] + in->pad[1] + in->pad[3] - ((in->kw - 1) * in->dil[1] + 1);
  if (eh < 0 || ew < 0)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: conv input smaller than the kernel");
  int64_t oh = eh / in->stride[0] + 1, ow = ew / in->stride[1] + 1;
  y->rank = 4;
  y->layout = QH_LAYOUT_NHWC;
  y->dims[0] = x->dims[0], y->dims[1] = oh, y->dims[2] = ow, y->dims[3] = in->co;
  dnnl_memory_desc_t src, wu, bia, dst;
  dnnl_dims_t sd = {x->dims[0], in->ci, x->dims[1], x->dims[2]}, dd = {x->dims[0], in->co, oh, ow};
  dnnl_dims_t bd = {in->co};
  CK(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_u8, dnnl_nhwc), "memory_desc_init(src)");
  CK(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_u8, dnnl_nhwc), "memory_desc_init(dst)");
  if (in->grp > 1) {
    dnnl_dims_t wd = {in->grp, in->co / in->grp, in->ci / in->grp, in->kh, in->kw};
    CK(dnnl_memory_desc_init_by_tag(&wu, 5, wd, dnnl_s8, dnnl_goihw), "memory_desc_init(weights)");
  } else {
    dnnl_dims_t wd = {in->co, in->ci, in->kh, in->kw};
    CK(dnnl_memory_desc_init_by_tag(&wu, 4, wd, dnnl_s8, dnnl_oihw), "memory_desc_init(weights)");
  }
  CK(dnnl_memory_desc_init_by_tag(&bia, 1, bd, dnnl_f32, dnnl_a), "memory_desc_init(bias)");
  return build(k, host, &src, &wu, k->bias ? &bia : NULL, &dst, 1);
}

static QhStatus *reshape_linear(Kernel *k, const QhHostApi *host, const QhTensorView *x, QhTensorView *y) {
  const X86Info *in = &k->in;
  if (x->rank < 1 || (!in->matmul && x->rank != 2) || x->dims[x->rank - 1] != in->k)
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: linear input must end in K=%lld%s",
                          (long long)in->k, in->matmul ? "" : " and be 2-D");
  int64_t m = 1;
  for (int32_t i = 0; i + 1 < x->rank; i++)
    m *= x->dims[i];
  y->rank = x->rank;
  memcpy(y->dims, x->dims, sizeof y->dims);
  y->dims[x->rank - 1] = in->n;
  y->layout = x->layout;
  /* Without VNNI oneDNN 2.6 runs an int8 matmul as gemm:jit on unpacked weights,
   * packing them at every call (mobilenet_v2's classifier: 0.28 ms). As a 1x1
   * convolution over an image of 1 x M pixels (the same bytes: M rows of K, M rows of
   * N) it gets the jit 1x1 kernel on weights reordered once (0.05 ms), with identical
   * results. With VNNI the matmul is brgemm on packed weights, as fast.
   * matmul: src [M, K], weights [K, N] (MatMul ab, Gemm transB ba), bias [1, N], dst [M, N];
   * conv:   src [1, K, 1, M] nhwc, weights [N, K, 1, 1] (hwio, oihw), bias [N], dst [1, N, 1, M]. */
  const int conv = !k->inst->vnni;
  const int nd = conv ? 4 : 2;
  dnnl_dims_t sd = {conv ? 1 : m, in->k, 1, m}, dd = {conv ? 1 : m, in->n, 1, m};
  dnnl_dims_t wd = {conv ? in->n : in->k, conv ? in->k : in->n, 1, 1}, bd = {conv ? in->n : 1, in->n};
  dnnl_format_tag_t act = conv ? dnnl_nhwc : dnnl_ab;
  dnnl_format_tag_t wtag = conv ? (in->matmul ? dnnl_hwio : dnnl_oihw) : (in->matmul ? dnnl_ab : dnnl_ba);
  dnnl_memory_desc_t src, wu, bia, dst;
  CK(dnnl_memory_desc_init_by_tag(&src, nd, sd, dnnl_u8, act), "memory_desc_init(src)");
  CK(dnnl_memory_desc_init_by_tag(&dst, nd, dd, dnnl_u8, act), "memory_desc_init(dst)");
  CK(dnnl_memory_desc_init_by_tag(&wu, nd, wd, dnnl_s8, wtag), "memory_desc_init(weights)");
  CK(dnnl_memory_desc_init_by_tag(&bia, conv ? 1 : 2, bd, dnnl_f32, conv ? dnnl_a : dnnl_ab),
     "memory_desc_init(bias)");
  return build(k, host, &src, &wu, k->bias ? &bia : NULL, &dst, conv);
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  Kernel *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs < (k->in.add ? k->in.res_input + 1 : 1) || !outputs || n_outputs != 1 ||
      !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(x))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: input must be a uint8 tensor");
  if (y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: output view too small");
  release(k); /* the host reshapes once per plan; a new shape builds anew */
  y->dtype = QH_DTYPE_UINT8;
  QhStatus *st = k->in.kind == K_CONV ? reshape_conv(k, host, x, y) : reshape_linear(k, host, x, y);
  if (st) {
    release(k);
    return st;
  }
  if (k->in.add) {
    const QhTensorView *r = &inputs[k->in.res_input];
    if (!uq_u8_view_ok(r) || r->rank != y->rank || r->layout != y->layout ||
        memcmp(r->dims, y->dims, (size_t)y->rank * sizeof *y->dims) != 0) {
      release(k);
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: residual differs from the output");
    }
  }
  k->in_rank = x->rank;
  memcpy(k->in_dims, x->dims, sizeof k->in_dims);
  k->in_bytes = uq_numel(x);
  k->out_bytes = uq_numel(y);
  k->reshaped = 1;
  *out_workspace = 0;
  return NULL;
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  (void)ctx, (void)workspace, (void)workspace_bytes;
  Kernel *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || !outputs || n_outputs != 1 || n_inputs < (k->in.add ? k->in.res_input + 1 : 1))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  const QhTensorView *x = &inputs[0];
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(x) || x->rank != k->in_rank ||
      memcmp(x->dims, k->in_dims, (size_t)x->rank * sizeof *x->dims) || x->nbytes != k->in_bytes ||
      (k->in_bytes && !x->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  if (!uq_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  if (k->in.add) { /* the sum post-op accumulates into dst: start it as the residual */
    const QhTensorView *r = &inputs[k->in.res_input];
    if (r->nbytes != k->out_bytes || !r->data)
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: residual differs from reshape's");
    if (r->data != y->data)
      memcpy(y->data, r->data, k->out_bytes);
  }
  X86Instance *inst = k->inst;
  pthread_mutex_lock(&inst->lock);
  /* The OpenMP thread count is per calling thread: set it on the thread that runs. */
  omp_set_num_threads(inst->n_threads);
  dnnl_status_t s = x86_prim_execute(inst, &k->p, x->data, NULL, y->data);
  pthread_mutex_unlock(&inst->lock);
  return x86_dnnl_status(host, s, "execute");
}

const QhKernelOps x86_conv_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "onednn_conv2d_nhwc_qu8_qs8w", .input_layout = QH_LAYOUT_NHWC,
    .output_layout = QH_LAYOUT_NHWC, .create = create_conv, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};
const QhKernelOps x86_linear_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "onednn_linear_qu8_qs8w", .input_layout = QH_LAYOUT_ANY,
    .output_layout = QH_LAYOUT_ANY, .create = create_linear, .reshape = reshape, .run = run,
    .destroy = kernel_destroy};
