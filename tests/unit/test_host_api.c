/* Unit tests of the host table's non-graph parts: no NULL slot, the frozen base,
 * statuses (codes, one-line messages, foreign pointers), buffers and their limit,
 * artefact paths confined to the artefact, parallel_for covering every index once
 * under worker numbers that stay with their threads,
 * and the CPU features: every bit the host reports agrees with the flags Linux lists in
 * /proc/cpuinfo (AVX-VNNI included, which the host reads from CPUID itself), and
 * QHOST_CPU_DISABLE clears exactly the bits it names. */
#include <glib/gstdio.h>
#include <string.h>

#include "hostapi/host-api-private.h"
#include "hostapi/host-private.h"
#include "hostapi/status-private.h"

static void test_no_null_slot(void) {
  const QhHostApi *api = qh_host_api_get();
  g_assert_cmpuint(api->abi_version, ==, QH_ABI_VERSION);
  g_assert_cmpuint(api->struct_size, ==, sizeof(QhHostApi));
  /* every member after the two header words is a function pointer */
  const size_t first = offsetof(QhHostApi, status_new);
  g_assert_cmpuint((sizeof(QhHostApi) - first) % sizeof(void (*)(void)), ==, 0);
  for (size_t off = first; off < sizeof(QhHostApi); off += sizeof(void (*)(void))) {
    void (*fn)(void);
    memcpy(&fn, (const char *)api + off, sizeof fn);
    if (fn == NULL)
      g_error("host table slot at offset %zu is NULL", off);
  }
}

static void test_frozen_base(void) {
  /* The frozen base: these offsets hold in every ABI major. */
  g_assert_cmpuint(offsetof(QhHostApi, abi_version), ==, 0);
  g_assert_cmpuint(offsetof(QhHostApi, struct_size), ==, 4);
  g_assert_cmpuint(offsetof(QhHostApi, status_new), ==, 8);
  g_assert_cmpuint(offsetof(QhHostApi, status_free), ==, 8 + sizeof(void *));
  g_assert_cmpuint(offsetof(QhHostApi, log), ==, 8 + 2 * sizeof(void *));
  g_assert_cmpuint(offsetof(QhPluginDesc, abi_version), ==, 0);
  g_assert_cmpuint(offsetof(QhPluginDesc, struct_size), ==, 4);
}

static void test_status(void) {
  const QhHostApi *api = qh_host_api_get();
  QhStatus *st = api->status_new(QH_ERR_UNSUPPORTED, "first line\nsecond line");
  g_assert_cmpint(api->status_code(st), ==, QH_ERR_UNSUPPORTED);
  g_assert_cmpstr(api->status_message(st), ==, "first line");
  api->status_free(st);
  /* QH_OK and unknown codes are not success: they read as internal errors */
  st = api->status_new(QH_OK, NULL);
  g_assert_cmpint(api->status_code(st), ==, QH_ERR_INTERNAL);
  g_assert_cmpstr(api->status_message(st), ==, "(no message)");
  api->status_free(st);
  st = api->status_new(12345, "\xff\xfe bad utf-8");
  g_assert_cmpint(api->status_code(st), ==, QH_ERR_INTERNAL);
  g_assert_true(g_utf8_validate(api->status_message(st), -1, NULL));
  GError *error = NULL;
  g_assert_false(qh_status_to_gerror(st, "plugin 'x'", &error));
  g_assert_nonnull(strstr(error->message, "plugin 'x': "));
  g_clear_error(&error);
  /* a pointer the host did not make is reported, never dereferenced as a status */
  static uint64_t not_a_status[4];
  g_assert_false(qh_status_to_gerror((QhStatus *)not_a_status, "plugin 'x'", &error));
  g_assert_cmpstr(error->message, ==, "plugin 'x': returned an invalid status pointer");
  g_clear_error(&error);
  g_assert_cmpint(api->status_code(NULL), ==, QH_OK);
  api->status_free(NULL);
}

static void test_buffer(void) {
  const QhHostApi *api = qh_host_api_get();
  QhBuffer buf;
  qh_buffer_init(&buf, 8);
  g_assert_null(api->buffer_append(&buf, "abcd", 4));
  g_assert_null(api->buffer_append(&buf, "efgh", 4));
  QhStatus *st = api->buffer_append(&buf, "i", 1);
  g_assert_cmpint(api->status_code(st), ==, QH_ERR_OUT_OF_MEMORY);
  api->status_free(st);
  g_assert_cmpuint(buf.bytes->len, ==, 8);
  g_assert_cmpmem(buf.bytes->data, 8, "abcdefgh", 8);
  st = api->buffer_append((QhBuffer *)"junk", "x", 1);
  g_assert_cmpint(api->status_code(st), ==, QH_ERR_INVALID_ARGUMENT);
  api->status_free(st);
  qh_buffer_clear(&buf);
}

static void test_artifact(void) {
  const QhHostApi *api = qh_host_api_get();
  char *dir = g_dir_make_tmp("qh-artifact-XXXXXX", NULL);
  QhArtifact art = {QH_ARTIFACT_MAGIC, dir, 100, 0, NULL, NULL}; /* writes files, not models */
  g_assert_null(api->artifact_write(&art, "meta/info.txt", "hello", 5));
  char *path = g_build_filename(dir, "meta", "info.txt", NULL);
  char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_assert_cmpstr(text, ==, "hello");
  g_free(text);
  static const char *const bad[] = {"../escape", "/etc/passwd", "a/../../b", "", "a//b", "./a"};
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    QhStatus *st = api->artifact_write(&art, bad[i], "x", 1);
    g_assert_cmpint(api->status_code(st), ==, QH_ERR_INVALID_ARGUMENT);
    api->status_free(st);
  }
  static const char big[96];
  QhStatus *st = api->artifact_write(&art, "big", big, sizeof big);
  g_assert_cmpint(api->status_code(st), ==, QH_ERR_OUT_OF_MEMORY);
  api->status_free(st);
  g_unlink(path);
  char *meta = g_build_filename(dir, "meta", NULL);
  g_rmdir(meta);
  g_rmdir(dir);
  g_free(meta);
  g_free(path);
  g_free(dir);
}

typedef struct {
  gint hits[1000];
  uint32_t max_worker;
} Counts;

static void count(void *data, size_t i, uint32_t worker) {
  Counts *c = data;
  g_atomic_int_inc(&c->hits[i]);
  if (worker > c->max_worker)
    c->max_worker = worker; /* racy max: only checked against an upper bound */
}

static void test_parallel_for(void) {
  const QhHostApi *api = qh_host_api_get();
  for (int threads = 1; threads <= 3; threads++) {
    QhThreadPool *pool = qh_thread_pool_new(threads);
    QhRunContext ctx = {QH_RUNCTX_MAGIC, pool};
    g_assert_cmpuint(api->run_thread_count(&ctx), ==, (uint32_t)threads);
    Counts c = {{0}, 0};
    g_assert_null(api->parallel_for(&ctx, 1000, count, &c));
    for (int i = 0; i < 1000; i++)
      g_assert_cmpint(c.hits[i], ==, 1);
    g_assert_cmpuint(c.max_worker, <, (uint32_t)threads);
    qh_thread_pool_free(pool);
  }
  QhStatus *st = api->parallel_for(NULL, 10, count, NULL);
  g_assert_cmpint(api->status_code(st), ==, QH_ERR_INVALID_ARGUMENT);
  api->status_free(st);
}

/* Which thread ran under each worker number, over many calls, and whether two tasks
 * ever ran under one number at once. */
typedef struct {
  gpointer thread[4];
  gint busy[4];
  gint clash, moved;
} Owners;

static void note_owner(void *data, size_t i, uint32_t worker) {
  (void)i;
  Owners *o = data;
  if (g_atomic_int_add(&o->busy[worker], 1) != 0)
    g_atomic_int_set(&o->clash, 1);
  gpointer self = g_thread_self();
  if (!g_atomic_pointer_compare_and_exchange(&o->thread[worker], NULL, self) &&
      g_atomic_pointer_get(&o->thread[worker]) != self)
    g_atomic_int_set(&o->moved, 1);
  for (volatile int spin = 0; spin < 2000; spin++) /* long enough for the tasks to overlap */
    ;
  g_atomic_int_add(&o->busy[worker], -1);
}

/* Never two tasks under one worker number at once; and the number is the pool thread's,
 * so with two threads (one team size: every call of two tasks or more splits in two)
 * the same thread has the same number on every call (fbgemm's depthwise kernel keeps a
 * share of the rows per worker in that core's cache). With three, libgomp may hand the
 * top number to another thread when the team's size changes between calls. */
static void test_parallel_for_workers(void) {
  const QhHostApi *api = qh_host_api_get();
  for (int threads = 2; threads <= 3; threads++) {
    QhThreadPool *pool = qh_thread_pool_new(threads);
    QhRunContext ctx = {QH_RUNCTX_MAGIC, pool};
    Owners o = {{NULL}, {0}, 0, 0};
    for (int call = 0; call < 200; call++)
      g_assert_null(api->parallel_for(&ctx, (size_t)(2 + call % 7), note_owner, &o));
    g_assert_cmpint(o.clash, ==, 0);
    if (threads == 2)
      g_assert_cmpint(o.moved, ==, 0);
    qh_thread_pool_free(pool);
  }
}

/* Each QH_CPU_* bit and the flag Linux lists for it in /proc/cpuinfo. */
static const struct {
  uint64_t bit;
  const char *flag;
} cpu_flags[] = {
    {QH_CPU_SSE41, "sse4_1"},     {QH_CPU_AVX2, "avx2"},         {QH_CPU_FMA, "fma"},
    {QH_CPU_AVX512F, "avx512f"},  {QH_CPU_AVX512BW, "avx512bw"}, {QH_CPU_AVX512VL, "avx512vl"},
    {QH_CPU_AVX512VNNI, "avx512_vnni"}, {QH_CPU_AVXVNNI, "avx_vnni"}, {QH_CPU_AVX512VBMI, "avx512vbmi"},
    /* Linux lists amx_int8 only where it supports the tile state, and grants the
     * permission the host asks for wherever it does */
    {QH_CPU_AMXINT8, "amx_int8"},
};

/* The QH_CPU_* bits /proc/cpuinfo's first "flags" line lists; FALSE where it cannot be
 * read or the CPU is not x86 (the host reports no bits there). */
static gboolean cpuinfo_bits(uint64_t *out) {
#if defined(__x86_64__) || defined(__i386__)
  gchar *text = NULL;
  if (!g_file_get_contents("/proc/cpuinfo", &text, NULL, NULL))
    return FALSE;
  gboolean found = FALSE;
  *out = 0;
  gchar **lines = g_strsplit(text, "\n", -1);
  for (gchar **l = lines; *l && !found; l++) {
    if (!g_str_has_prefix(*l, "flags"))
      continue;
    const char *colon = strchr(*l, ':');
    gchar **words = g_strsplit(colon ? colon + 1 : "", " ", -1);
    for (gchar **w = words; *w; w++)
      for (gsize i = 0; i < G_N_ELEMENTS(cpu_flags); i++)
        if (strcmp(*w, cpu_flags[i].flag) == 0)
          *out |= cpu_flags[i].bit;
    g_strfreev(words);
    found = TRUE;
  }
  g_strfreev(lines);
  g_free(text);
  return found;
#else
  (void)out;
  return FALSE;
#endif
}

static void assert_bits(uint64_t got, uint64_t want) {
  for (gsize i = 0; i < G_N_ELEMENTS(cpu_flags); i++)
    if ((got & cpu_flags[i].bit) != (want & cpu_flags[i].bit))
      g_error("cpu_features: %s is %s, /proc/cpuinfo %s it", cpu_flags[i].flag,
              got & cpu_flags[i].bit ? "set" : "clear", want & cpu_flags[i].bit ? "lists" : "does not list");
}

/* The features are read once per process, so each environment runs in a subprocess. */
static void test_cpu_detect(void) {
  uint64_t listed;
  if (!cpuinfo_bits(&listed)) {
    g_test_skip("no /proc/cpuinfo flags line (not Linux on x86)");
    return;
  }
  if (g_test_subprocess()) {
    g_unsetenv("QHOST_CPU_DISABLE");
    assert_bits(qh_host_api_get()->cpu_features(), listed);
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  if (!(listed & QH_CPU_AVXVNNI))
    g_test_message("this CPU has no AVX-VNNI: only its absence was checked");
}

static void test_cpu_mask(void) {
  uint64_t listed;
  gboolean have = cpuinfo_bits(&listed);
  if (g_test_subprocess()) {
    /* names are matched without case, around spaces */
    g_setenv("QHOST_CPU_DISABLE", "avx2, avx512vnni,AVXVNNI,avx512vbmi,amxint8", TRUE);
    const uint64_t hidden = QH_CPU_AVX2 | QH_CPU_AVX512VNNI | QH_CPU_AVXVNNI | QH_CPU_AVX512VBMI | QH_CPU_AMXINT8;
    uint64_t f = qh_host_api_get()->cpu_features();
    g_assert_cmpuint(f & hidden, ==, 0);
    if (have) /* and only those */
      assert_bits(f, listed & ~hidden);
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/host_api/no_null_slot", test_no_null_slot);
  g_test_add_func("/host_api/frozen_base", test_frozen_base);
  g_test_add_func("/host_api/status", test_status);
  g_test_add_func("/host_api/buffer", test_buffer);
  g_test_add_func("/host_api/artifact", test_artifact);
  g_test_add_func("/host_api/parallel_for", test_parallel_for);
  g_test_add_func("/host_api/parallel_for_workers", test_parallel_for_workers);
  g_test_add_func("/host_api/cpu_detect", test_cpu_detect);
  g_test_add_func("/host_api/cpu_mask", test_cpu_mask);
  return g_test_run();
}
