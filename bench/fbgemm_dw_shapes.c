/* qhost-fbgemm-dw: the fbgemm plugin's depthwise kernel (plugins/fbgemm/dw*.c, on the path
 * the plugin would take: AVX-512 VNNI, else AVX-VNNI, else AVX2; QHOST_CPU_DISABLE hides
 * features as it does for qhost) against oneDNN's int8 depthwise convolution (the x86
 * plugin's engine: u8 NHWC in and out, s8 weights, per-channel output scales, runtime
 * zero points, ReLU6 as a clip post-op, as the x86 plugin builds it) on mobilenet_v2's
 * 17 depthwise 3x3 layers and efficientnet_b0's 5x5 ones, so that issue 19's bar
 * ("depthwise 3x3 >= 2x oneDNN's on the same shapes") is a ratio from one run. Each
 * shape alternates the two libraries over ROUNDS rounds of a timed batch of calls
 * (weights hot, as consecutive calls see them), and keeps each one's best batch, so
 * preemption on a shared machine hits both alike. QHOST_CPU_DISABLE=amxint8 caps oneDNN
 * at avx512_core_vnni (as the x86 plugin does); hiding avx512vnni caps it at avx512_core,
 * hiding avx512f at avx2. Threads: both run on OpenMP with --threads N; the fbgemm pool
 * hands tasks out dynamically, one at a time (the host's parallel_for does the same when,
 * as for the depthwise 3x3 path, there are no more tasks than workers).
 * Usage: qhost-fbgemm-dw [--threads N] [--rounds R] [NAME-PART]. Output: the CPU name
 * and the load average, one line per shape (GOPS of each, fbgemm / oneDNN speed), the
 * totals of each model's layers (each layer once, as a model runs them), and one JSON
 * object. Exit 77 without AVX2. Not installed. */
#define _DEFAULT_SOURCE 1 /* clock_gettime and strncasecmp in peak-loops.h */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "peak-loops.h"

typedef struct {
  const char *model;
  int64_t h, c, k, stride, count; /* count: how many of the model's layers have this shape */
} Shape;

/* mobilenet_v2 (224x224 input): the expansion blocks' depthwise layers in order, 17 in
 * all; efficientnet_b0's 5x5 layers (stages 3, 5 and 6), 7 in all. */
static const Shape shapes[] = {
    {"mobilenet_v2", 112, 32, 3, 1, 1}, {"mobilenet_v2", 112, 96, 3, 2, 1}, {"mobilenet_v2", 56, 144, 3, 1, 1},
    {"mobilenet_v2", 56, 144, 3, 2, 1}, {"mobilenet_v2", 28, 192, 3, 1, 2}, {"mobilenet_v2", 28, 192, 3, 2, 1},
    {"mobilenet_v2", 14, 384, 3, 1, 4}, {"mobilenet_v2", 14, 576, 3, 1, 2}, {"mobilenet_v2", 14, 576, 3, 2, 1},
    {"mobilenet_v2", 7, 960, 3, 1, 3},  {"efficientnet_b0", 56, 144, 5, 2, 1}, {"efficientnet_b0", 28, 240, 5, 1, 1},
    {"efficientnet_b0", 14, 480, 5, 1, 1}, {"efficientnet_b0", 14, 672, 5, 1, 1},
    {"efficientnet_b0", 14, 672, 5, 2, 1}, {"efficientnet_b0", 7, 1152, 5, 1, 2},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

#define DK(call, what)                                                                                             \
  do {                                                                                                             \
    dnnl_status_t s_ = (call);                                                                                     \
    if (s_ != dnnl_success) {                                                                                      \
      fprintf(stderr, "qhost-fbgemm-dw: oneDNN %s failed (status %d)\n", what, (int)s_);                          \
      exit(1);                                                                                                     \
    }                                                                                                              \
  } while (0)

/* __builtin_cpu_supports takes only a literal */
#define cpu_has(gcc_name, qhost_name) (__builtin_cpu_supports(gcc_name) && !qh_peak_cpu_disabled(qhost_name))

/* The plugin's choice of depthwise path (plugin.c: AVX-512 VNNI, AVX-VNNI, AVX2). */
static FbIsa plugin_isa(void) {
  if (cpu_has("avx512f", "avx512f") && cpu_has("avx512bw", "avx512bw") && cpu_has("avx512vl", "avx512vl") &&
      cpu_has("avx512vnni", "avx512vnni"))
    return FB_ISA_AVX512VNNI;
  if (cpu_has("avxvnni", "avxvnni") && cpu_has("avx2", "avx2"))
    return FB_ISA_AVXVNNI;
  return cpu_has("avx2", "avx2") ? FB_ISA_AVX2 : FB_ISA_REF;
}

/* oneDNN capped as the x86 plugin caps it (onednn-instance.c). */
static void cap_onednn(FbIsa isa) {
  if (isa == FB_ISA_AVX512VNNI) {
    if (qh_peak_cpu_disabled("amxint8"))
      (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_vnni);
  } else if (cpu_has("avx512f", "avx512f") && cpu_has("avx512bw", "avx512bw") && cpu_has("avx512vl", "avx512vl")) {
    (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core);
  } else {
    (void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
  }
}

/* Worker numbers: OpenMP's thread numbers, as the host's parallel_for gives them
 * (framework/hostapi/host-api.c): the same thread has the same number from call to call. */
static void omp_pool_run(void *runner, size_t n, FbTaskFn task, void *user) {
  (void)runner;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < n; i++)
    task(user, i, (uint32_t)omp_get_thread_num());
}

typedef struct {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  dnnl_primitive_t prim;
  dnnl_memory_t src, wei, bia, dst, zsrc, zdst;
  char impl[96];
} OneDnnDw;

static void onednn_create(OneDnnDw *d, const FbConv *c, const int8_t *w, const float *bias, const float *scales,
                          int32_t *zx, int32_t *zo, float clip_hi, uint8_t *x, uint8_t *y) {
  DK(dnnl_engine_create(&d->eng, dnnl_cpu, 0), "engine_create");
  DK(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags), "stream_create");
  dnnl_memory_desc_t src, dst, wu, wany, bia;
  dnnl_dims_t sd = {c->n, c->ic, c->ih, c->iw}, dd = {c->n, c->oc, c->oh, c->ow};
  dnnl_dims_t wd = {c->oc, 1, 1, c->kh, c->kw}, bd = {c->oc};
  DK(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_u8, dnnl_nhwc), "md(src)");
  DK(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_u8, dnnl_nhwc), "md(dst)");
  DK(dnnl_memory_desc_init_by_tag(&wu, 5, wd, dnnl_s8, dnnl_goihw), "md(weights)");
  DK(dnnl_memory_desc_init_by_tag(&wany, 5, wd, dnnl_s8, dnnl_format_tag_any), "md(weights any)");
  DK(dnnl_memory_desc_init_by_tag(&bia, 1, bd, dnnl_f32, dnnl_a), "md(bias)");
  int64_t pb = (c->oh - 1) * c->sh + c->kh - c->ih - c->pt, pr = (c->ow - 1) * c->sw + c->kw - c->iw - c->pl;
  dnnl_dims_t strides = {c->sh, c->sw}, dil = {0, 0}, pl = {c->pt, c->pl}, pr2 = {pb, pr};
  dnnl_convolution_desc_t cd;
  DK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wany,
                                                &bia, &dst, strides, dil, pl, pr2),
     "convolution_desc_init");
  dnnl_primitive_attr_t attr;
  DK(dnnl_primitive_attr_create(&attr), "attr_create");
  DK(dnnl_primitive_attr_set_output_scales(attr, c->oc, 1 << 1, scales), "output_scales");
  const int32_t rt = DNNL_RUNTIME_S32_VAL;
  DK(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &rt), "zero_points(src)");
  DK(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &rt), "zero_points(dst)");
  dnnl_post_ops_t po;
  DK(dnnl_post_ops_create(&po), "post_ops_create");
  DK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, clip_hi), "clip post-op");
  DK(dnnl_primitive_attr_set_post_ops(attr, po), "set_post_ops");
  dnnl_post_ops_destroy(po);
  dnnl_primitive_desc_t pd;
  DK(dnnl_primitive_desc_create(&pd, &cd, attr, d->eng, NULL), "int8 depthwise convolution");
  dnnl_primitive_attr_destroy(attr);
  const char *impl = NULL;
  DK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl), "impl_info_str");
  snprintf(d->impl, sizeof d->impl, "%s", impl ? impl : "?");
  const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  dnnl_memory_t from;
  dnnl_primitive_desc_t rpd;
  dnnl_primitive_t r;
  DK(dnnl_memory_create(&from, &wu, d->eng, (void *)w), "memory(weights user)");
  DK(dnnl_memory_create(&d->wei, want, d->eng, DNNL_MEMORY_ALLOCATE), "memory(weights)");
  DK(dnnl_reorder_primitive_desc_create(&rpd, &wu, d->eng, want, d->eng, NULL), "reorder pd");
  DK(dnnl_primitive_create(&r, rpd), "reorder");
  dnnl_exec_arg_t rargs[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, d->wei}};
  DK(dnnl_primitive_execute(r, d->stream, 2, rargs), "reorder execute");
  DK(dnnl_stream_wait(d->stream), "stream_wait");
  dnnl_primitive_destroy(r), dnnl_primitive_desc_destroy(rpd), dnnl_memory_destroy(from);
  DK(dnnl_primitive_create(&d->prim, pd), "primitive_create");
  DK(dnnl_memory_create(&d->src, &src, d->eng, x), "memory(src)");
  DK(dnnl_memory_create(&d->dst, &dst, d->eng, y), "memory(dst)");
  DK(dnnl_memory_create(&d->bia, &bia, d->eng, (void *)bias), "memory(bias)");
  dnnl_memory_desc_t one;
  dnnl_dims_t od = {1};
  DK(dnnl_memory_desc_init_by_tag(&one, 1, od, dnnl_s32, dnnl_a), "md(zero point)");
  DK(dnnl_memory_create(&d->zsrc, &one, d->eng, zx), "memory(zx)");
  DK(dnnl_memory_create(&d->zdst, &one, d->eng, zo), "memory(zo)");
  dnnl_primitive_desc_destroy(pd);
}

static void onednn_run(OneDnnDw *d) {
  dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, d->src},
                            {DNNL_ARG_WEIGHTS, d->wei},
                            {DNNL_ARG_BIAS, d->bia},
                            {DNNL_ARG_DST, d->dst},
                            {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, d->zsrc},
                            {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, d->zdst}};
  DK(dnnl_primitive_execute(d->prim, d->stream, 6, args), "execute");
  DK(dnnl_stream_wait(d->stream), "stream_wait");
}

static void onednn_destroy(OneDnnDw *d) {
  dnnl_primitive_destroy(d->prim);
  dnnl_memory_destroy(d->src), dnnl_memory_destroy(d->wei), dnnl_memory_destroy(d->bia);
  dnnl_memory_destroy(d->dst), dnnl_memory_destroy(d->zsrc), dnnl_memory_destroy(d->zdst);
  dnnl_stream_destroy(d->stream), dnnl_engine_destroy(d->eng);
}

/* One shape: the best batch time per call of each library (seconds), and whether their
 * outputs agree within one step (they round differently: oneDNN folds the scales). */
static int run_shape(const Shape *sh, FbIsa isa, int threads, int rounds, double *t_fb, double *t_dnnl,
                     int *max_diff, char *impl, size_t impl_size) {
  int64_t pad = sh->k / 2, o = (sh->h + 2 * pad - sh->k) / sh->stride + 1;
  FbConv c = {1, sh->h, sh->h, sh->c, sh->c, sh->k, sh->k, sh->stride, sh->stride, 1, 1, pad, pad, o, o};
  int64_t taps = sh->k * sh->k, xn = sh->h * sh->h * sh->c, yn = o * o * sh->c;
  int8_t *w = malloc((size_t)(sh->c * taps));
  float *bias = malloc((size_t)sh->c * sizeof *bias), *mult = malloc((size_t)sh->c * sizeof *mult);
  float *scales = malloc((size_t)sh->c * sizeof *scales), *dbias = malloc((size_t)sh->c * sizeof *dbias);
  uint8_t *x = malloc((size_t)xn), *y = malloc((size_t)yn), *yd = malloc((size_t)yn);
  if (!w || !bias || !mult || !scales || !dbias || !x || !y || !yd)
    return 1;
  srand(1);
  for (int64_t i = 0; i < sh->c * taps; i++)
    w[i] = (int8_t)(rand() % 255 - 127);
  for (int64_t i = 0; i < xn; i++)
    x[i] = (uint8_t)(rand() % 128);
  int32_t zx = 64, zo = 3;
  for (int64_t i = 0; i < sh->c; i++) {
    mult[i] = scales[i] = 0.002f + 0.0001f * (float)(i % 7);
    bias[i] = (float)(rand() % 2001 - 1000);
    dbias[i] = bias[i]; /* oneDNN adds the bias before the output scale, as fbgemm's rule does */
  }
  /* ReLU6 fused: outputs clamp to [zo, zo + 100] (clip in units of the output step) */
  FbRequant rq = {zx, zo, zo, zo + 100, bias, mult};
  FbDwPacked pk;
  if (fb_dw_pack(&pk, w, sh->c, sh->k, sh->k, &rq) != 0)
    return 1;
  FbPool pool = {.run = omp_pool_run, .runner = NULL, .n_workers = (uint32_t)threads};
  size_t wsn = fb_dw_workspace(isa, &c, &pk, (uint32_t)threads);
  void *ws = wsn ? aligned_alloc(64, (wsn + 63) / 64 * 64) : NULL;
  OneDnnDw d = {0};
  onednn_create(&d, &c, w, dbias, scales, &zx, &zo, 100.0f, x, yd);
  snprintf(impl, impl_size, "%s", d.impl);
  double ops = 2.0 * (double)(yn * taps);
  /* a batch of about 2 ms at 50 GOPS */
  int batch = (int)(1e8 / ops) + 1;
  double bf = 1e30, bd = 1e30;
  for (int r = 0; r < rounds + 1; r++) {
    double t = qh_peak_now_s();
    for (int i = 0; i < batch; i++)
      fb_dw_run(isa, &c, &pk, x, y, ws, threads > 1 ? &pool : NULL);
    t = (qh_peak_now_s() - t) / batch;
    bf = r > 0 && t < bf ? t : bf;
    t = qh_peak_now_s();
    for (int i = 0; i < batch; i++)
      onednn_run(&d);
    t = (qh_peak_now_s() - t) / batch;
    bd = r > 0 && t < bd ? t : bd;
  }
  *t_fb = bf, *t_dnnl = bd;
  int md = 0;
  for (int64_t i = 0; i < yn; i++) {
    int dlt = abs((int)y[i] - (int)yd[i]);
    md = dlt > md ? dlt : md;
  }
  *max_diff = md;
  onednn_destroy(&d);
  fb_dw_pack_free(&pk);
  free(ws), free(w), free(bias), free(mult), free(scales), free(dbias), free(x), free(y), free(yd);
  return 0;
}

static void print_cpu_and_load(const char *when) {
  char line[256], name[256] = "?";
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      char *colon = strchr(line, ':');
      snprintf(name, sizeof name, "%s", colon ? colon + 2 : line);
      name[strcspn(name, "\n")] = 0;
      break;
    }
  if (f)
    fclose(f);
  double load[3] = {-1, -1, -1};
  if (getloadavg(load, 3) < 0)
    load[0] = -1;
  printf("CPU: %s; load average %s: %.2f %.2f %.2f\n", name, when, load[0], load[1], load[2]);
}

int main(int argc, char **argv) {
  int threads = 1, rounds = 15;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (argv[i][0] != '-')
      only = argv[i];
    else {
      fprintf(stderr, "usage: %s [--threads N] [--rounds R] [NAME-PART]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || rounds < 1) {
    fprintf(stderr, "qhost-fbgemm-dw: --threads and --rounds must be positive\n");
    return 2;
  }
  __builtin_cpu_init();
  FbIsa isa = plugin_isa();
  if (isa == FB_ISA_REF) {
    fprintf(stderr, "qhost-fbgemm-dw: this CPU has no AVX2 (or it is hidden)\n");
    return 77;
  }
  cap_onednn(isa);
  omp_set_num_threads(threads);
  print_cpu_and_load("before");
  printf("fbgemm path %s, %d thread%s, best of %d interleaved rounds, weights hot\n", fb_isa_name(isa), threads,
         threads > 1 ? "s" : "", rounds);
  double tf[N_SHAPES], td[N_SHAPES];
  int diff[N_SHAPES];
  char impl[N_SHAPES][96];
  for (size_t s = 0; s < N_SHAPES; s++) {
    tf[s] = -1;
    char name[96];
    const Shape *sh = &shapes[s];
    snprintf(name, sizeof name, "%s %lldx%lld %lldx%lldx%lld/%lld", sh->model, (long long)sh->k, (long long)sh->k,
             (long long)sh->h, (long long)sh->h, (long long)sh->c, (long long)sh->stride);
    if (only && !strstr(name, only))
      continue;
    if (run_shape(sh, isa, threads, rounds, &tf[s], &td[s], &diff[s], impl[s], sizeof impl[s]))
      return 1;
    int64_t o = (sh->h + 2 * (sh->k / 2) - sh->k) / sh->stride + 1;
    double ops = 2.0 * (double)(o * o * sh->c * sh->k * sh->k);
    printf("%-40s x%lld  fbgemm %7.1f GOPS %8.1f us  oneDNN %7.1f GOPS %8.1f us  fbgemm/oneDNN %5.2fx  "
           "max |diff| %d  (%s)\n",
           name, (long long)sh->count, ops / tf[s] / 1e9, tf[s] * 1e6, ops / td[s] / 1e9, td[s] * 1e6, td[s] / tf[s],
           diff[s], impl[s]);
  }
  const char *models[] = {"mobilenet_v2", "efficientnet_b0"};
  double sum_f[2] = {0}, sum_d[2] = {0};
  int layers[2] = {0};
  for (size_t s = 0; s < N_SHAPES; s++)
    for (int m = 0; m < 2; m++)
      if (tf[s] >= 0 && strcmp(shapes[s].model, models[m]) == 0)
        sum_f[m] += tf[s] * (double)shapes[s].count, sum_d[m] += td[s] * (double)shapes[s].count,
            layers[m] += (int)shapes[s].count;
  for (int m = 0; m < 2; m++)
    if (layers[m])
      printf("%s, its %d depthwise layers: fbgemm %.3f ms, oneDNN %.3f ms: fbgemm/oneDNN %.2fx\n", models[m],
             layers[m], sum_f[m] * 1e3, sum_d[m] * 1e3, sum_d[m] / sum_f[m]);
  print_cpu_and_load("after");
  printf("{\"isa\": \"%s\", \"threads\": %d, \"models\": [", fb_isa_name(isa), threads);
  for (int m = 0, first = 1; m < 2; m++)
    if (layers[m])
      printf("%s{\"model\": \"%s\", \"layers\": %d, \"fbgemm_ms\": %.4f, \"onednn_ms\": %.4f, \"ratio\": %.3f}",
             first ? "" : ", ", models[m], layers[m], sum_f[m] * 1e3, sum_d[m] * 1e3, sum_d[m] / sum_f[m]),
          first = 0;
  printf("]}\n");
  return 0;
}
