/* Shared declarations of the x86 plugin's oneDNN lowering: the instance (engine, stream,
 * thread count, VNNI), the unit analysis that accept and create share, and the kernels.
 *
 * Numerics (oneDNN 2.6, output-scale API): the primitive computes
 *   v = (f32(acc) + b[c]) * M[c]  (then post-ops: sum, eltwise), out = sat_u8(rint(v + zo))
 * with b[c] = f32(bias / sb[c]) the float bias in units of sb[c] = f32(sx*sw[c]), not
 * rounded (PyTorch's onednn engine keeps the bias float), and M[c] = f32(sb * f32(1/so)).
 * This is the float QDQ graph's arithmetic up to fp32 rounding and the order of the
 * scaling; the host's int8 twin (int8-reference.h's QNNPACK rule) rounds the bias to
 * int32 instead, and oneDNN adds the zero point in float before rounding, so a unit can
 * differ from either by one step near a tie. */
#ifndef QH_X86_ONEDNN_H
#define QH_X86_ONEDNN_H

#include <pthread.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>
#include <qhost/qhost-plugin.h>

enum { RR_AUTO, RR_ON, RR_OFF };

typedef struct {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  /* oneDNN's OpenMP runtime already uses every thread for one primitive, so concurrent
   * run() calls are serialised instead of oversubscribing the cores. */
  pthread_mutex_t lock;
  int n_threads;
  int vnni;
  int reduce_range; /* resolved: 1 = guard against vpmaddubsw saturation */
} X86Instance;

enum { K_CONV, K_LINEAR };
enum { POST_NONE, POST_RELU, POST_CLIP };

/* Everything accept and create learn about a unit. */
typedef struct {
  int kind;
  int post;             /* POST_* after the (optional) residual add */
  int add;              /* conv + Add(residual) */
  float clip_lo, clip_hi;
  int matmul;           /* linear: MatMul ([K, N] weight) rather than Gemm transB=1 */
  int bias_add;         /* linear: MatMul -> Add(bias), nn.Linear on N-d inputs */
  int64_t n, k;         /* linear */
  int64_t co, ci, kh, kw, grp, stride[2], pad[4], dil[2];
  uint32_t w_value, b_value;
  size_t res_input;     /* index of the residual input in the unit */
  const QhQParams *xq, *wq, *bq, *rq, *yq;
} X86Info;

/* Runs task(user, i, worker) for every i in [0, n) on the OpenMP team that runs
 * oneDNN's primitives (inline when the instance has one thread or n is 1). One team
 * for the whole lowered model: the worker that just finished a convolution is still
 * waiting when the next uint8 loop starts, instead of a second pool's sleeping thread
 * being woken for every unit. Threading: call from the thread that runs the kernel. */
void x86_parallel_for(const X86Instance *inst, size_t n, QhParallelTaskFn task, void *user);

QhStatus *x86_analyze(void *instance, const QhHostApi *host, const QhGraphView *g,
                      const QhNodeUnit *u, int kind, X86Info *in);

/* Message for a failed oneDNN call, NULL on success. */
QhStatus *x86_dnnl_status(const QhHostApi *host, dnnl_status_t s, const char *what);

/* Returns the message of a failed oneDNN call from the enclosing function (which has a
 * `host` in scope and returns QhStatus *). */
#define X86_CK(call, what)                                 \
  do {                                                     \
    QhStatus *x86_ck_ = x86_dnnl_status(host, (call), what); \
    if (x86_ck_)                                           \
      return x86_ck_;                                      \
  } while (0)

/* onednn-prim.c: a primitive and the memories it runs on; members NULL when absent.
 * Owned by the kernel that holds it; one kernel's run at a time (the instance lock). */
typedef struct {
  dnnl_primitive_t prim;
  dnnl_memory_t src, wei, bia, dst, zp_src, zp_dst;
} X86Prim;

/* Creates p->prim from pd (borrowed; the caller destroys it), and memories for src and
 * dst of pd's formats whose buffers run binds. Weights: with wei_user, wei_data (laid
 * out as *wei_user, borrowed for the call) is reordered once into pd's preferred format
 * (constant weights); without, p->wei is bound at run too. bia, zp_src and zp_dst are
 * the caller's to create. On error p is released and the status names the call. */
QhStatus *x86_prim_create(const X86Instance *inst, const QhHostApi *host, const_dnnl_primitive_desc_t pd,
                          const dnnl_memory_desc_t *wei_user, void *wei_data, X86Prim *p);
/* Binds src, wei (unless NULL: the reordered weights stay) and dst, executes with every
 * memory p has, and waits. The caller holds inst->lock and has set the OpenMP thread
 * count on this thread. */
dnnl_status_t x86_prim_execute(const X86Instance *inst, X86Prim *p, const void *src, void *wei, void *dst);
/* Destroys the primitive and every memory; p may be partly built. */
void x86_prim_release(X86Prim *p);

extern const QhKernelOps x86_conv_kernel, x86_linear_kernel;

/* lowering.c's analysis helpers, shared with u8-ops-*.c and u8-concat.c. */
const char *x86_act_problem(const QhQParams *q, int output);
int64_t x86_attr_int(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name,
                     int64_t def);
int x86_attr_ints(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name, size_t n,
                  int64_t def, int64_t *out);
int32_t x86_known_shape(const QhHostApi *host, const QhGraphView *g, uint32_t v, int64_t *dims);

/* u8-ops-*.c (u8-ops.h): the uint8 units between the convs (Add and Mul (+Relu), Relu,
 * Clip, the activation tables, BatchNormalization, Pad, ReduceMean, channel shuffle and
 * Slice, MaxPool, AveragePool, GlobalAveragePool, Flatten), channels-last, bit-exact with
 * the host's QDQ run. */
QhStatus *x86_accept_u8op(void *instance, const QhHostApi *host, const QhGraphView *g,
                          const QhNodeUnit *u);
/* A Mul (+Relu) of act(x) by x (SiLU, opset-13 HardSwish), run as one table over x; other
 * Muls are declined here and go to the plain Mul. */
QhStatus *x86_accept_act_mul(void *instance, const QhHostApi *host, const QhGraphView *g,
                             const QhNodeUnit *u);
extern const QhKernelOps x86_add_kernel, x86_mul_kernel, x86_act_mul_kernel, x86_relu_kernel, x86_clip_kernel,
    x86_maxpool_kernel, x86_avgpool_kernel, x86_gap_kernel, x86_flatten_kernel, x86_sigmoid_kernel,
    x86_tanh_kernel, x86_hardsigmoid_kernel, x86_hardswish_kernel, x86_batchnorm_kernel, x86_pad_kernel,
    x86_reducemean_kernel, x86_shuffle_kernel, x86_slice_kernel;

/* act-matmul.c: int8 MatMul between two uint8 activations (attention), exact: oneDNN's
 * u8 x s8 matmul with VNNI, an fp32 matmul of small integers without it. */
QhStatus *x86_accept_act_matmul(void *instance, const QhHostApi *host, const QhGraphView *g,
                                const QhNodeUnit *u);
extern const QhKernelOps x86_act_matmul_kernel;

/* dynamic-linear.c: ONNX Runtime's dynamic format, MatMulInteger -> Cast -> Mul(scale) with a
 * constant symmetric int8 weight, float output bit-exact with the host's nodes (VNNI only). */
QhStatus *x86_accept_dynamic_linear(void *instance, const QhHostApi *host, const QhGraphView *g,
                                    const QhNodeUnit *u);
extern const QhKernelOps x86_dynamic_linear_kernel;

/* u8-concat.c: uint8 Concat along any axis, bit-exact with the host's QDQ run. */
QhStatus *x86_accept_concat(void *instance, const QhHostApi *host, const QhGraphView *g,
                            const QhNodeUnit *u);
extern const QhKernelOps x86_concat_kernel;

/* The host's QuantizeLinear of one float to uint8 (framework qdq.c's quantize_fast_one):
 * exact division by the scale, clamping before rounding to the integer bounds (the same
 * result as saturating after), round half to even through the 1.5 * 2^23 trick. */
#define X86_ROUND_MAGIC 12582912.0f
static inline uint8_t x86_quant_u8(float v, float so, float lo, float hi, int32_t zo) {
  float r = v / so;
  r = r < lo ? lo : r;
  r = r > hi ? hi : r;
  r = (r + X86_ROUND_MAGIC) - X86_ROUND_MAGIC;
  return (uint8_t)((int32_t)r + zo);
}

QhStatus *x86_instance_create(const QhHostApi *host, const QhInstanceInfo *info,
                              const QhOption *options, size_t n_options, void **out);
void x86_instance_destroy(void *instance);
extern const QhLoweringOps x86_lowering;

#endif
