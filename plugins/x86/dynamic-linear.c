/* The x86 plugin's unit for ONNX Runtime's dynamic format (what `qhost quantize
 * --dynamic` writes): MatMulInteger(x_q, W, x_zero_point, W_zero_point) -> Cast(float)
 * -> Mul(scale) (-> Add(bias), pattern dynamic_linear_bias), where x_q, x_zero_point and
 * the scale x_scale * W_scale come from the host's DynamicQuantizeLinear and scale Mul
 * (pattern flag QH_PATTERN_FLOAT_EXTRA_INPUTS).
 * The weight is a constant int8 [K, N] with zero points 0 (symmetric, per tensor or per
 * column), packed once (by oneDNN, or for the own GEMMs below).
 *
 * Exact, not just close: oneDNN's u8 x s8 -> s32 matmul of x_q and W (no zero point),
 * then acc - x_zero_point * colsum(W)[n] in int32 is MatMulInteger's int32 result, and
 * f32(that) * scale[n] is the host's Cast and Mul, bit for bit. Only with VNNI
 * (vpdpbusd) is oneDNN's s32 accumulator exact: without it, vpmaddubsw's int16 pair sums
 * saturate for full-range x_q (every DynamicQuantizeLinear output is [0, 255]) once two
 * weights of a column exceed 128 in |w| together; such units are declined with that
 * reason where they would run on oneDNN (the own GEMMs below are exact: AMX with VNNI
 * hidden keeps them). The bias Add is the epilogue's last step, f32(y) + b[n] as the
 * host's Add rounds it (a separate add after the multiply, never a fused multiply-add).
 *
 * The s32 matrix is written into the float output itself (both are 4 bytes an element)
 * and the epilogue turns each element into its float in place: one [M, N] buffer passes
 * through the cache instead of a workspace and the output (3 MiB for BERT's feed-forward,
 * more than a core's L2). Column blocks, each with its own primitive, were measured
 * slower on BERT (more oneDNN calls); oneDNN 2.6's own f32 output is no option either: a
 * run-time scale or source zero point sends its matmul to the slow gemm:jit path.
 *
 * Where the host reports AMX-INT8, or AVX-512 VNNI, the unit skips oneDNN: its own GEMM
 * (dynamic-gemm-amx.c: tdpbusd; dynamic-gemm-avx512vnni.c: vpdpbusd) on weights packed
 * once at create applies the same epilogue to each output tile while it is in L1 or in
 * registers, and one OpenMP team packs A and then splits the columns (and the rows when
 * the columns are too few). Same integers, same float steps: the same bytes. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h> /* SSE2 (x86-64's baseline); AVX-512F chosen at run time */

#include "../common/unit-query.h"
#include "dynamic-gemm.h"
#include "onednn.h"

/* One row of the epilogue: MatMulInteger's int32 result acc - zc (wrapping modulo 2^32 as
 * its accumulators do), then the host's Cast (cvtdq2ps rounds to nearest even, as the C
 * conversion does), Mul by scale[c] (scale[0] unless per_column) and Add of bias[c] (when
 * not NULL); each step rounds to float as the host's node does (separate instructions,
 * never a fused multiply-add). acc and y may be the same memory: each element is read
 * before it is written, and never read again. */
typedef void RowFn(const int32_t *acc, const int32_t *zc, const float *scale, int per_column, const float *bias,
                   float *y, size_t n);

/* The scalar tail of both widths: volatile keeps the product rounded before the add. */
static void row_tail(const int32_t *acc, const int32_t *zc, const float *scale, int per_column, const float *bias,
                     float *y, size_t c, size_t n) {
  for (; c < n; c++) {
    volatile float p = (float)(int32_t)((uint32_t)acc[c] - (uint32_t)zc[c]) * scale[per_column ? c : 0];
    y[c] = bias ? p + bias[c] : p;
  }
}

/* Four columns per SSE2 instruction (x86-64's baseline). */
static void row_sse2(const int32_t *acc, const int32_t *zc, const float *scale, int per_column, const float *bias,
                     float *y, size_t n) {
  const __m128 s1 = _mm_set1_ps(scale[0]);
  size_t c = 0;
  for (; c + 4 <= n; c += 4) {
    __m128i v = _mm_sub_epi32(_mm_loadu_si128((const __m128i *)(acc + c)), _mm_loadu_si128((const __m128i *)(zc + c)));
    __m128 p = _mm_mul_ps(_mm_cvtepi32_ps(v), per_column ? _mm_loadu_ps(scale + c) : s1);
    if (bias)
      p = _mm_add_ps(p, _mm_loadu_ps(bias + c));
    _mm_storeu_ps(y + c, p);
  }
  row_tail(acc, zc, scale, per_column, bias, y, c, n);
}

/* The same instructions sixteen columns wide (vcvtdq2ps, vmulps, vaddps round as their
 * SSE2 forms do), where the host reports AVX-512F. */
__attribute__((target("avx512f"))) static void row_avx512(const int32_t *acc, const int32_t *zc,
                                                          const float *scale, int per_column,
                                                          const float *bias, float *y, size_t n) {
  const __m512 s1 = _mm512_set1_ps(scale[0]);
  size_t c = 0;
  for (; c + 16 <= n; c += 16) {
    __m512i v = _mm512_sub_epi32(_mm512_loadu_si512(acc + c), _mm512_loadu_si512(zc + c));
    __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(v), per_column ? _mm512_loadu_ps(scale + c) : s1);
    if (bias)
      p = _mm512_add_ps(p, _mm512_loadu_ps(bias + c));
    _mm512_storeu_ps(y + c, p);
  }
  row_sse2(acc + c, zc + c, per_column ? scale + c : scale, per_column, bias ? bias + c : NULL, y + c, n - c);
}

typedef void DynBlockFn(const uint8_t *ap, int64_t m, const DynPacked *pk, int64_t p0, int64_t p1,
                        const DynEpilogue *e, float *y, size_t ldy);

/* The unit's own GEMM for the CPU features the host reports (NULL: oneDNN's) and the
 * panels its block walks together (*unit). AMX's tdpbusd is exact for any uint8 x int8
 * and needs no VNNI (its epilogue is AVX-512F, its A and weight packing plain C), so it
 * runs wherever the host reports AMX-INT8 with AVX-512F/BW/VL, VNNI hidden or not. */
static DynBlockFn *own_gemm(uint64_t cpu, int64_t *unit) {
  const uint64_t avx512 = QH_CPU_AVX512F | QH_CPU_AVX512BW | QH_CPU_AVX512VL;
  if ((cpu & (avx512 | QH_CPU_AMXINT8)) == (avx512 | QH_CPU_AMXINT8))
    return *unit = 2, dyn_amx_block;
  if ((cpu & (avx512 | QH_CPU_AVX512VNNI)) == (avx512 | QH_CPU_AVX512VNNI))
    return *unit = 4, dyn_vnni_block;
  return *unit = 0, NULL;
}

typedef struct {
  X86Instance *inst;
  int64_t k, n;
  int8_t *w;       /* [K, N] as stored in the graph */
  int32_t *colsum; /* per column of W */
  int32_t *zc;     /* x_zero_point * colsum, per run (run holds the instance lock) */
  float *bias;     /* [N], or NULL without the bias Add */
  RowFn *row;      /* the epilogue's width, chosen at create */
  DynBlockFn *own; /* the plugin's own GEMM on pw (NULL: oneDNN, w kept for its reorder) */
  int64_t own_unit; /* panels its block walks together: a group of tasks holds whole units */
  DynPacked pw;
  /* set by reshape */
  int reshaped, in_rank;
  int64_t m, in_dims[QH_MAX_RANK];
  size_t scale_count;
  X86Prim p;
} DynLinear;

enum { IN_X, IN_W, IN_XZP, IN_WZP, IN_SCALE, IN_BIAS };

/* Without VNNI: the vpmaddubsw pair sums x0 w0 + x1 w1 stay below 2^15 for x in [0, 255]
 * when the two largest |w| of each column add up to at most 128 (255 * 128 = 32640). */
static int pairs_may_saturate(const int8_t *w, int64_t k, int64_t n) {
  for (int64_t c = 0; c < n; c++) {
    int a = 0, b = 0;
    for (int64_t j = 0; j < k; j++) {
      int v = abs(w[j * n + c]);
      if (v > a)
        b = a, a = v;
      else if (v > b)
        b = v;
    }
    if (a + b > 128)
      return 1;
  }
  return 0;
}

/* The bias Add's constant: float, one per column of the output ([N]), so the Add keeps
 * the shape and adds b[c] to column c. *b gets its data (borrowed). */
static const char *bias_problem(const QhHostApi *host, const QhGraphView *g, uint32_t bv, int64_t n,
                                const float **b) {
  int64_t d[QH_MAX_RANK];
  if (!(host->value_flags(g, bv) & QH_VALUE_CONSTANT) || host->value_dtype(g, bv) != QH_DTYPE_FLOAT)
    return "the bias Add's other input is not a float constant";
  if (uq_known_shape(host, g, bv, d) != 1 || d[0] != n)
    return "the bias Add's constant is not one float per output column";
  const void *bd = NULL;
  size_t bn = 0;
  QhStatus *st = host->value_data(g, bv, &bd, &bn);
  if (st) {
    host->status_free(st);
    return "the bias Add's constant cannot be read";
  }
  if (!bd || bn != (size_t)n * sizeof(float))
    return "the bias Add's constant differs from its shape";
  *b = bd;
  return NULL;
}

/* The checks accept and create share; *w gets the weight bytes, *b the bias or NULL
 * (both borrowed). */
static const char *analyze(const X86Instance *inst, const QhHostApi *host, const QhGraphView *g,
                           const QhNodeUnit *u, int64_t *k, int64_t *n, const int8_t **w, const float **b) {
  if (u->n_nodes < 3 || u->n_nodes > 4 || !uq_op_is(host, g, u->nodes[0], "MatMulInteger") ||
      !uq_op_is(host, g, u->nodes[1], "Cast") || !uq_op_is(host, g, u->nodes[2], "Mul") ||
      (u->n_nodes == 4 && !uq_op_is(host, g, u->nodes[3], "Add")))
    return "dynamic linear pattern on ops other than MatMulInteger -> Cast -> Mul (-> Add)";
  if (uq_attr_int(host, g, u->nodes[1], "to", 0) != QH_DTYPE_FLOAT)
    return "Cast to other than float";
  size_t n_in = u->n_nodes == 4 ? IN_BIAS + 1 : IN_SCALE + 1;
  if (u->n_inputs != n_in)
    return "MatMulInteger without both zero points, or a Mul or Add with more inputs";
  for (size_t i = 0; i < n_in; i++)
    if (u->input_qparams[i])
      return "an input comes through DequantizeLinear: not the dynamic format";
  if (u->output_qparams[0])
    return "the Mul's output is quantized: not the dynamic format";
  uint32_t wv = u->inputs[IN_W], zv = u->inputs[IN_WZP];
  if (!(host->value_flags(g, wv) & QH_VALUE_CONSTANT) || !(host->value_flags(g, zv) & QH_VALUE_CONSTANT))
    return "MatMulInteger's B and its zero point must be constants";
  int64_t d[QH_MAX_RANK];
  if (uq_known_shape(host, g, wv, d) != 2 || d[0] < 1 || d[1] < 1)
    return "MatMulInteger's B must be a 2-D constant";
  if (host->value_dtype(g, wv) != QH_DTYPE_INT8 || host->value_dtype(g, zv) != QH_DTYPE_INT8)
    return "MatMulInteger's B must be int8 with an int8 zero point";
  *k = d[0], *n = d[1];
  const void *wd = NULL, *zd = NULL;
  size_t wn = 0, zn = 0;
  QhStatus *st = host->value_data(g, wv, &wd, &wn);
  if (!st)
    st = host->value_data(g, zv, &zd, &zn);
  if (st) {
    host->status_free(st);
    return "MatMulInteger's B cannot be read";
  }
  if (!wd || wn != (size_t)(*k * *n) || !zd || (zn != 1 && zn != (size_t)*n))
    return "MatMulInteger's B or its zero point differs from its shape";
  for (size_t i = 0; i < zn; i++)
    if (((const int8_t *)zd)[i] != 0)
      return "asymmetric weights (non-zero B zero point) are not supported";
  *w = wd;
  *b = NULL;
  const char *bp = u->n_nodes == 4 ? bias_problem(host, g, u->inputs[IN_BIAS], *n, b) : NULL;
  if (bp)
    return bp;
  /* only oneDNN's u8 x s8 without VNNI can saturate: both own GEMMs are exact */
  int64_t unit;
  if (inst && !inst->vnni && !own_gemm(host->cpu_features(), &unit) && pairs_may_saturate(wd, *k, *n))
    return "without VNNI oneDNN's u8*s8 int16 pair sums may saturate for these weights "
           "(DynamicQuantizeLinear's activations use all of [0, 255])";
  return NULL;
}

QhStatus *x86_accept_dynamic_linear(void *instance, const QhHostApi *host, const QhGraphView *g,
                                    const QhNodeUnit *u) {
  int64_t k, n;
  const int8_t *w;
  const float *b;
  const char *p = analyze(instance, host, g, u, &k, &n, &w, &b);
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

/* The unit's inputs: MatMulInteger's four, the scale, and the bias when there is one. */
static size_t unit_inputs(const DynLinear *k) { return k->bias ? IN_BIAS + 1 : IN_SCALE + 1; }

static void release(DynLinear *k) {
  x86_prim_release(&k->p);
  k->reshaped = 0;
}

static void destroy(void *kernel) {
  DynLinear *k = kernel;
  if (!k)
    return;
  release(k);
  free(k->w);
  dyn_unpack_w(&k->pw);
  free(k->colsum);
  free(k->zc);
  free(k->bias);
  free(k);
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  if (!out || !u)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  int64_t kd = 0, nd = 0;
  const int8_t *w = NULL;
  const float *b = NULL;
  const char *p = analyze(instance, host, g, u, &kd, &nd, &w, &b);
  if (p)
    return host->status_new(QH_ERR_UNSUPPORTED, p);
  DynLinear *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->inst = instance, k->k = kd, k->n = nd;
  uint64_t cpu = host->cpu_features();
  k->row = cpu & QH_CPU_AVX512F ? row_avx512 : row_sse2;
  k->own = own_gemm(cpu, &k->own_unit);
  k->w = k->own ? NULL : malloc((size_t)(kd * nd));
  k->colsum = calloc((size_t)nd, sizeof *k->colsum);
  k->zc = calloc((size_t)nd, sizeof *k->zc);
  k->bias = b ? malloc((size_t)nd * sizeof *k->bias) : NULL;
  if ((!k->own && !k->w) || (k->own && dyn_pack_w(w, kd, nd, &k->pw)) || !k->colsum || !k->zc ||
      (b && !k->bias)) {
    destroy(k);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory packing weights");
  }
  if (k->w)
    memcpy(k->w, w, (size_t)(kd * nd));
  if (b)
    memcpy(k->bias, b, (size_t)nd * sizeof *k->bias);
  for (int64_t j = 0; j < kd; j++)
    for (int64_t c = 0; c < nd; c++)
      k->colsum[c] += w[j * nd + c];
  *out = k;
  return NULL;
}

/* The primitive for [M, K] x [K, N] -> s32 and the weights reordered once into its format. */
static QhStatus *build(DynLinear *k, const QhHostApi *host) {
  dnnl_dims_t sd = {k->m, k->k}, wd = {k->k, k->n}, dd = {k->m, k->n};
  dnnl_memory_desc_t src, wany, wuser, dst;
  X86_CK(dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_u8, dnnl_ab), "memory_desc_init(src)");
  X86_CK(dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_s8, dnnl_format_tag_any), "memory_desc_init(weights)");
  X86_CK(dnnl_memory_desc_init_by_tag(&wuser, 2, wd, dnnl_s8, dnnl_ab), "memory_desc_init(weights)");
  X86_CK(dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_s32, dnnl_ab), "memory_desc_init(dst)");
  dnnl_matmul_desc_t md;
  X86_CK(dnnl_matmul_desc_init(&md, &src, &wany, NULL, &dst), "matmul_desc_init");
  dnnl_primitive_desc_t pd = NULL;
  X86_CK(dnnl_primitive_desc_create(&pd, &md, NULL, k->inst->engine, NULL), "u8 x s8 matmul");
  QhStatus *st = x86_prim_create(k->inst, host, pd, &wuser, k->w, &k->p);
  dnnl_primitive_desc_destroy(pd);
  return st;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  DynLinear *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != unit_inputs(k) || !outputs || n_outputs != 1 || !out_workspace)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  const QhTensorView *x = &inputs[IN_X], *xzp = &inputs[IN_XZP], *sc = &inputs[IN_SCALE];
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(x) || x->rank < 1 || x->dims[x->rank - 1] != k->k || x->layout == QH_LAYOUT_NHWC)
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "reshape: A must be a uint8 tensor ending in K=%lld",
                          (long long)k->k);
  if (xzp->dtype != QH_DTYPE_UINT8 || uq_numel(xzp) != 1)
    return host->status_new(QH_ERR_UNSUPPORTED, "reshape: A's zero point must be one uint8 (per tensor)");
  size_t ns = uq_numel(sc);
  if (sc->dtype != QH_DTYPE_FLOAT || (ns != 1 && (ns != (size_t)k->n || sc->dims[sc->rank - 1] != k->n)))
    return host->status_new(QH_ERR_UNSUPPORTED, "reshape: the scale must be one float or one per column");
  if (y->struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: output view too small");
  release(k);
  int64_t m = 1;
  for (int32_t i = 0; i + 1 < x->rank; i++)
    m *= x->dims[i];
  y->dtype = QH_DTYPE_FLOAT;
  y->rank = x->rank;
  memcpy(y->dims, x->dims, sizeof y->dims);
  y->dims[x->rank - 1] = k->n;
  y->layout = x->layout;
  k->m = m;
  k->scale_count = ns;
  k->in_rank = x->rank;
  memcpy(k->in_dims, x->dims, sizeof k->in_dims);
  /* the own GEMMs pack A into the workspace on every run */
  *out_workspace = k->own ? dyn_a_bytes(m, k->pw.kp) : 0;
  if (m > 0 && !k->own) {
    QhStatus *st = build(k, host);
    if (st) {
      release(k);
      return st;
    }
  }
  k->reshaped = 1;
  return NULL;
}

typedef struct {
  const DynLinear *k;
  const int32_t *acc, *zc; /* zc[c] = x_zero_point * colsum(W)[c] (wrapping) */
  const float *scale;
  const float *bias; /* or NULL */
  float *y;
  size_t rows_per_task;
} Job;

static void finish_task(void *user, size_t t, uint32_t worker) {
  (void)worker;
  const Job *j = user;
  const DynLinear *k = j->k;
  size_t n = (size_t)k->n, r0 = t * j->rows_per_task, r1 = r0 + j->rows_per_task;
  if (r1 > (size_t)k->m)
    r1 = (size_t)k->m;
  for (size_t r = r0; r < r1; r++)
    k->row(j->acc + r * n, j->zc, j->scale, k->scale_count != 1, j->bias, j->y + r * n, n);
}

/* The own GEMM's tasks: A's row blocks packed, then groups of panel units (groups of
 * whole units, as even as they divide) by row ranges (row range t / groups, group t %
 * groups). */
typedef struct {
  const DynLinear *k;
  const uint8_t *x;
  uint8_t *ap; /* A packed (the workspace) */
  DynEpilogue e;
  float *y;
  int64_t units, groups, rows_per_range;
} OwnJob;

static void pack_task(const OwnJob *j, int64_t t) {
  const DynLinear *k = j->k;
  dyn_pack_a(j->x, (size_t)k->k, k->m, k->k, k->pw.kp, t, t + 1, j->ap);
}

static void gemm_task(const OwnJob *j, int64_t t) {
  const DynLinear *k = j->k;
  int64_t g = t % j->groups, r0 = t / j->groups * j->rows_per_range;
  int64_t rows = k->m - r0 < j->rows_per_range ? k->m - r0 : j->rows_per_range;
  int64_t p0 = g * j->units / j->groups * k->own_unit, p1 = (g + 1) * j->units / j->groups * k->own_unit;
  if (p1 > k->pw.panels)
    p1 = k->pw.panels;
  k->own(j->ap + (size_t)(r0 / DYN_MB) * (size_t)(k->pw.kp * DYN_MB), rows, &k->pw, p0, p1, &j->e,
         j->y + (size_t)r0 * (size_t)k->n, (size_t)k->n);
}

/* The own GEMM's run (the instance lock held: zc is the kernel's). A few groups per
 * thread, not a task per unit: the AMX path loads its tile configuration once a task;
 * too few units for the team split the rows as well. */
static void run_own(DynLinear *k, const uint8_t *x, float *y, const float *scale, void *workspace) {
  int64_t team = k->inst->n_threads > 1 ? k->inst->n_threads : 1;
  int64_t blocks = (k->m + DYN_MB - 1) / DYN_MB, want = team == 1 ? 1 : 4 * team;
  int64_t units = (k->pw.panels + k->own_unit - 1) / k->own_unit;
  OwnJob j = {k, x, workspace, {k->zc, scale, k->scale_count != 1, k->bias}, y, units, 1, k->m};
  j.groups = units < want ? units : want;
  int64_t ranges = 1;
  if (j.groups < want && blocks > 1) {
    ranges = (want + j.groups - 1) / j.groups;
    ranges = ranges < blocks ? ranges : blocks;
    j.rows_per_range = (blocks + ranges - 1) / ranges * DYN_MB;
    ranges = (k->m + j.rows_per_range - 1) / j.rows_per_range;
  }
  int64_t tasks = j.groups * ranges;
  if (team == 1) {
    for (int64_t t = 0; t < blocks; t++)
      pack_task(&j, t);
    for (int64_t t = 0; t < tasks; t++)
      gemm_task(&j, t);
    return;
  }
  /* one team for both loops (x86_parallel_for twice forked and joined twice, which shows
   * on BERT's small units at 2 threads): the packing's implicit barrier, then the GEMM */
#pragma omp parallel num_threads((int)team)
  {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < blocks; t++)
      pack_task(&j, t);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; t++)
      gemm_task(&j, t);
  }
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  (void)ctx;
  DynLinear *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != unit_inputs(k) || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  const QhTensorView *x = &inputs[IN_X], *xzp = &inputs[IN_XZP], *sc = &inputs[IN_SCALE];
  QhTensorView *y = &outputs[0];
  size_t mn = (size_t)(k->m * k->n);
  if (!uq_u8_view_ok(x) || x->rank != k->in_rank || memcmp(x->dims, k->in_dims, (size_t)x->rank * sizeof *x->dims) ||
      x->nbytes != (size_t)(k->m * k->k) || (x->nbytes && !x->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: A differs from reshape's");
  if (!xzp->data || xzp->nbytes < 1 || !sc->data || sc->nbytes != k->scale_count * sizeof(float))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: zero point or scale missing");
  if (y->dtype != QH_DTYPE_FLOAT || y->nbytes != mn * sizeof(float) || (mn && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output differs from reshape's");
  if (mn == 0)
    return NULL;
  if (k->own && (!workspace || workspace_bytes < dyn_a_bytes(k->m, k->pw.kp)))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: workspace smaller than reshape asked for");
  X86Instance *inst = k->inst;
  pthread_mutex_lock(&inst->lock);
  uint32_t zx = *(const uint8_t *)xzp->data;
  for (int64_t c = 0; c < k->n; c++)
    k->zc[c] = (int32_t)(zx * (uint32_t)k->colsum[c]);
  if (k->own) {
    run_own(k, x->data, y->data, sc->data, workspace);
    pthread_mutex_unlock(&inst->lock);
    return NULL;
  }
  omp_set_num_threads(inst->n_threads);
  dnnl_status_t s = x86_prim_execute(inst, &k->p, x->data, NULL, y->data);
  if (s == dnnl_success) {
    Job j = {k, y->data, k->zc, sc->data, k->bias, y->data, 16};
    x86_parallel_for(inst, ((size_t)k->m + j.rows_per_task - 1) / j.rows_per_task, finish_task, &j);
  }
  pthread_mutex_unlock(&inst->lock);
  return x86_dnnl_status(host, s, "execute");
}

const QhKernelOps x86_dynamic_linear_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "x86_dynamic_linear_qu8_qs8w", .input_layout = QH_LAYOUT_ANY,
    .output_layout = QH_LAYOUT_ANY, .create = create, .reshape = reshape, .run = run, .destroy = destroy};
