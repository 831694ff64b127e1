/* Corpus replay without libFuzzer: a main() that feeds every file of the given
 * directories (and any files named directly) to the fuzz target it is linked with,
 * so an ordinary gcc build, plain or sanitized, keeps every seed and every input
 * the fuzzers ever found passing. An empty corpus is an error, so a wrong path
 * cannot pass silently. Memory is bounded as under libFuzzer: by RLIMIT_AS in a plain
 * build, by ASAN_OPTIONS (set by ctest) in a sanitized one, where ASan's shadow
 * mappings rule out an address-space limit. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>

#include <glib.h>

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

/* Address space a replay may use in a plain build: what -rss_limit_mb gives the
 * fuzzers, so an input that asks for tens of gigabytes fails cleanly instead of
 * being granted them. */
#define REPLAY_MEMORY_LIMIT (2048ULL << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int compare_names(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static gboolean replay_file(const char *path) {
  gchar *data = NULL;
  gsize len = 0;
  GError *error = NULL;
  if (!g_file_get_contents(path, &data, &len, &error)) {
    fprintf(stderr, "replay: %s\n", error->message);
    g_error_free(error);
    return FALSE;
  }
  /* A copy of exactly len bytes, so ASan catches reads past the input's end that
   * the NUL g_file_get_contents appends would hide. */
  uint8_t *copy = malloc(len ? len : 1);
  if (copy == NULL) {
    g_free(data);
    return FALSE;
  }
  memcpy(copy, data, len);
  g_free(data);
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, (size_t)len);
  LLVMFuzzerTestOneInput(copy, len);
  free(copy);
  return TRUE;
}

int main(int argc, char **argv) {
#ifndef SANITIZED
  struct rlimit limit = {REPLAY_MEMORY_LIMIT, REPLAY_MEMORY_LIMIT};
  if (setrlimit(RLIMIT_AS, &limit) != 0) {
    perror("replay: setrlimit");
    return 1;
  }
#endif
  int n = 0;
  for (int i = 1; i < argc; i++) {
    if (!g_file_test(argv[i], G_FILE_TEST_IS_DIR)) {
      if (!replay_file(argv[i]))
        return 1;
      n++;
      continue;
    }
    GError *error = NULL;
    GDir *dir = g_dir_open(argv[i], 0, &error);
    if (dir == NULL) {
      fprintf(stderr, "replay: %s\n", error->message);
      g_error_free(error);
      return 1;
    }
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *name;
    while ((name = g_dir_read_name(dir)) != NULL)
      g_ptr_array_add(names, g_build_filename(argv[i], name, NULL));
    g_dir_close(dir);
    g_ptr_array_sort(names, compare_names);
    for (guint k = 0; k < names->len; k++) {
      const char *path = g_ptr_array_index(names, k);
      if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
        continue;
      if (!replay_file(path)) {
        g_ptr_array_unref(names);
        return 1;
      }
      n++;
    }
    g_ptr_array_unref(names);
  }
  if (n == 0) {
    fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  printf("replay: %d inputs, no crash\n", n);
  return 0;
}
