/* One small plugin, compiled many times by tests/abi/CMakeLists.txt: without a BROKEN_*
 * switch it is a well-formed plugin (a backend option and an instance), and each
 * switch breaks exactly one rule of the ABI the way a real vendor mistake would, so
 * that every loader refusal is exercised by a real shared object rather than by a
 * hand-made descriptor in the host's own tests. PLUGIN_NAME and PLUGIN_VERSION let
 * the same source appear under several names (duplicates, name mismatches).
 *
 * Switches: BROKEN_INIT_FAILS, BROKEN_ABI_MAJOR2, BROKEN_ABI_MINOR_NEWER, BROKEN_SHRUNK,
 * BROKEN_MINIMAL, BROKEN_SIZE_SMALL, BROKEN_SIZE_LARGE, BROKEN_NULL_CALLBACK,
 * BROKEN_BAD_NAME, BROKEN_BAD_UTF8, BROKEN_SEGV, BROKEN_HANG, BROKEN_NEEDS_DEP (links a
 * library that is not on the loader's path), BROKEN_BIAS_DERIVATION, BROKEN_EMPTY_PASSES,
 * BROKEN_OPAQUE_PARTITIONS, BROKEN_PARTITIONS_NO_CLAIM
 * (ABI 1.2). */
#include <qhost/qhost-plugin.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "good"
#endif
#ifndef PLUGIN_VERSION
#define PLUGIN_VERSION "1.0.0"
#endif

/* DESC_NAME may also come from the build, to differ from the file name */
#if defined(BROKEN_BAD_NAME)
#define DESC_NAME "Bad-Name"
#elif !defined(DESC_NAME)
#define DESC_NAME PLUGIN_NAME
#endif

#if defined(BROKEN_BAD_UTF8)
/* a lone continuation byte and an overlong encoding: never valid UTF-8 */
#define DESC_TEXT "test plugin \x80\xc0\xaf"
#else
#define DESC_TEXT "qhost ABI test plugin (" PLUGIN_NAME ")"
#endif

/* The version the descriptor claims: set by hand where the test wants a mismatch. */
#if defined(BROKEN_ABI_MAJOR2)
#define DESC_ABI (2u << 16 | 0u)
#elif defined(BROKEN_ABI_MINOR_NEWER)
#define DESC_ABI (1u << 16 | (QH_ABI_MINOR + 1u)) /* one minor beyond the host */
#else
#define DESC_ABI QH_ABI_VERSION
#endif

/* The struct_size it claims. The shrunk descriptor stops before `lowering`, as a
 * plugin built against an older 1.x SDK would; what lies beyond is poison the host
 * must never read. */
#if defined(BROKEN_SHRUNK)
#define DESC_SIZE ((uint32_t)offsetof(QhPluginDesc, lowering))
#elif defined(BROKEN_SIZE_SMALL)
#define DESC_SIZE 8u
#elif defined(BROKEN_SIZE_LARGE)
#define DESC_SIZE ((uint32_t)sizeof(QhPluginDesc) + 64u)
#else
#define DESC_SIZE ((uint32_t)sizeof(QhPluginDesc))
#endif

#if !defined(BROKEN_MINIMAL)
typedef struct {
  int64_t level;
} Instance;

static const QhOptionDecl opt_level = {
    QH_STRUCT_HEADER(QhOptionDecl), "level", QH_OPTION_INT, 0, "2", "how hard to try", NULL, 0, 9,
};
static const QhOptionDecl *const options[] = {&opt_level};

static QhStatus *instance_create(const QhHostApi *host, const QhInstanceInfo *info,
                                 const QhOption *opts, size_t n_opts, void **out_instance) {
  (void)info;
  if (n_opts != 1)
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "expected 1 option, got %zu", n_opts);
  Instance *inst = malloc(sizeof *inst);
  if (inst == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  inst->level = strtoll(opts[0].value, NULL, 10);
  *out_instance = inst;
  return NULL;
}

static void instance_destroy(void *instance) { free(instance); }

/* ABI 1.2 members a host must check: an unknown bias_derivation, a passes group with
 * neither callback. */
#if defined(BROKEN_BIAS_DERIVATION)
static const QhDTypeConstraint bd_u8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_UINT8};
static const QhDTypeConstraint bd_s8 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT8};
static const QhDTypeConstraint bd_s32 = {QH_STRUCT_HEADER(QhDTypeConstraint), .dtype = QH_DTYPE_INT32};
static const QhDTypeConfig bd_config = {QH_STRUCT_HEADER(QhDTypeConfig), .name = "bad_bias",
                                        .input = &bd_u8, .output = &bd_u8, .weight = &bd_s8,
                                        .bias = &bd_s32, .bias_derivation = 7};
static const QhDTypeConfig *const bd_configs[] = {&bd_config};
static const char *const bd_ops[] = {"Conv"};
static const QhBackendPatternConfig bd_pattern = {QH_STRUCT_HEADER(QhBackendPatternConfig), .ops = bd_ops,
                                                  .n_ops = 1, .dtype_configs = bd_configs,
                                                  .n_dtype_configs = 1};
static const QhBackendPatternConfig *const bd_patterns[] = {&bd_pattern};
static const QhBackendConfig bd_backend = {QH_STRUCT_HEADER(QhBackendConfig), .name = "bad_bias",
                                           .patterns = bd_patterns, .n_patterns = 1};
#define BACKEND_CONFIG (&bd_backend)
#else
#define BACKEND_CONFIG NULL
#endif
#if defined(BROKEN_EMPTY_PASSES)
static const QhPassOps empty_passes = {QH_STRUCT_HEADER(QhPassOps)};
#define PASSES (&empty_passes)
#else
#define PASSES NULL
#endif
#if defined(BROKEN_OPAQUE_PARTITIONS) || defined(BROKEN_PARTITIONS_NO_CLAIM)
static QhStatus *pt_compile(void *instance, const QhHostApi *host, const QhGraphView *graph,
                            const QhPartition *partition, void **out_compiled) {
  (void)instance, (void)graph, (void)partition, (void)out_compiled;
  return host->status_new(QH_ERR_UNSUPPORTED, "never");
}
static QhStatus *pt_reshape(void *compiled, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                            QhTensorView *outputs, size_t n_outputs, size_t *out_workspace_bytes) {
  (void)compiled, (void)inputs, (void)n_inputs, (void)outputs, (void)n_outputs, (void)out_workspace_bytes;
  return host->status_new(QH_ERR_INTERNAL, "never");
}
static QhStatus *pt_run(void *compiled, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                        size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                        size_t workspace_bytes) {
  (void)compiled, (void)ctx, (void)inputs, (void)n_inputs, (void)outputs, (void)n_outputs, (void)workspace,
      (void)workspace_bytes;
  return host->status_new(QH_ERR_INTERNAL, "never");
}
static void pt_destroy(void *compiled) { (void)compiled; }
#if defined(BROKEN_OPAQUE_PARTITIONS)
static QhStatus *pt_claim(void *instance, const QhHostApi *host, const QhGraphView *graph,
                          const QhNodeUnit *const *units, size_t n_units, const QhPartitionClaim **out_claims,
                          size_t *out_n_claims) {
  (void)instance, (void)host, (void)graph, (void)units, (void)n_units, (void)out_claims;
  *out_n_claims = 0;
  return NULL;
}
#endif
static const QhPartitionOps bad_partitions = {
    QH_STRUCT_HEADER(QhPartitionOps), .id = "bad_partitions",
#if defined(BROKEN_OPAQUE_PARTITIONS)
    .io_layout = QH_LAYOUT_OPAQUE, .claim = pt_claim,
#else
    .io_layout = QH_LAYOUT_NCHW, .claim = NULL,
#endif
    .compile = pt_compile, .reshape = pt_reshape, .run = pt_run, .destroy = pt_destroy};
#define PARTITIONS (&bad_partitions)
#else
#define PARTITIONS NULL
#endif

#if defined(BROKEN_NULL_CALLBACK)
static QhStatus *obs_create(void *instance, const QhHostApi *host, const QhQuantSpec *spec,
                            int32_t rank, const int64_t *dims, void **out_state) {
  (void)instance, (void)spec, (void)rank, (void)dims;
  *out_state = NULL;
  return host->status_new(QH_ERR_UNSUPPORTED, "never called");
}
static QhStatus *obs_qparams(void *state, const QhHostApi *host, QhQParams *out) {
  (void)state, (void)out;
  return host->status_new(QH_ERR_UNSUPPORTED, "never called");
}
static void obs_destroy(void *state) { (void)state; }
static const QhObserverOps observer = {
    QH_STRUCT_HEADER(QhObserverOps), "HalfObserver", "an observer that forgot observe", 0,
    obs_create, NULL /* observe: required */, obs_qparams, NULL, NULL, NULL, obs_destroy,
};
static const QhObserverOps *const observers[] = {&observer};
#define N_OBSERVERS 1
#else
#define observers NULL
#define N_OBSERVERS 0
#endif

#endif

#if defined(BROKEN_MINIMAL)
/* Only the members every 1.x descriptor has (QH_PLUGIN_DESC_MIN_SIZE): the object
 * really ends there, so a host that reads further reads past it (ASan sees that). */
typedef struct {
  uint32_t abi_version;
  uint32_t struct_size;
  const char *name;
  const char *version;
  const char *description;
  uint32_t flags;
} MinimalDesc;
static const MinimalDesc minimal = {
    QH_ABI_VERSION, (uint32_t)QH_PLUGIN_DESC_MIN_SIZE, DESC_NAME, PLUGIN_VERSION, DESC_TEXT, 0,
};
#define THE_DESC ((const QhPluginDesc *)(const void *)&minimal)
#else
static const QhPluginDesc desc = {
    DESC_ABI,
    DESC_SIZE,
    DESC_NAME,
    PLUGIN_VERSION,
    DESC_TEXT,
    0,
    options,
    1,
    instance_create,
    instance_destroy,
    NULL, /* transform */
    BACKEND_CONFIG,
    NULL, /* annotate */
    observers,
    N_OBSERVERS,
    NULL, /* refine */
    NULL, /* reference_numerics */
#if defined(BROKEN_SHRUNK)
    /* past struct_size: a host that reads these follows wild pointers */
    (const QhLoweringOps *)(uintptr_t)0x10,
    (const QhDeployOps *)(uintptr_t)0x18,
    (const QhPassOps *)(uintptr_t)0x20,
    (const QhPartitionOps *)(uintptr_t)0x28,
#else
    NULL, /* lowering */
    NULL, /* deploy */
    PASSES,
    PARTITIONS,
#endif
};
#define THE_DESC (&desc)
#endif

#if defined(BROKEN_NEEDS_DEP)
int qh_abi_dep_value(void);
#endif

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
#if defined(BROKEN_NEEDS_DEP)
  if (qh_abi_dep_value() != 42)
    return host->status_new(QH_ERR_INTERNAL, "dependency answered wrongly");
#endif
#if defined(BROKEN_SEGV)
  /* a wild store, not a null one, so UBSan's null check does not get there first;
   * the address is read at run time so the compiler cannot see it coming */
  static volatile uintptr_t wild = 16;
  *(volatile int *)wild = 1;
#endif
#if defined(BROKEN_HANG)
  for (;;)
    pause();
#endif
#if defined(BROKEN_INIT_FAILS)
  return host->status_new(QH_ERR_INTERNAL, "broken!");
#endif
#if !defined(BROKEN_ABI_MAJOR2)
  /* the version check every plugin does; the ABI 2.0 variant skips it so that the
   * host's own check of the descriptor is what refuses it */
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
#else
  (void)host;
#endif
  *out_desc = THE_DESC;
  return NULL;
}
