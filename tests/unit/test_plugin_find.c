/* Unit tests of finding and loading one plugin for a job (qh_plugin_find_and_load):
 * by name through --plugin-dir, by explicit path (not held to the file-name pattern),
 * the first of two same-named plugins winning, options reaching the instance, and the
 * error naming every place searched. Uses the plugins tests/abi builds. */
#include <string.h>

#include "core/error.h"
#include "backend/backend.h"
#include "plugin/plugin.h"

static char *case_dir(const char *c) { return g_build_filename(QH_ABI_PLUGIN_DIR, c, NULL); }

static gboolean have_plugins(void) {
  char *good = g_build_filename(QH_ABI_PLUGIN_DIR, "good", "libqhost-good.so", NULL);
  gboolean ok = g_file_test(good, G_FILE_TEST_EXISTS);
  g_free(good);
  return ok;
}

static void test_by_name(void) {
  char *dir = case_dir("good");
  QhPluginSearch search = {.dir = dir, .no_env = TRUE, .no_installed = TRUE};
  GError *error = NULL;
  QhPlugin *p = qh_plugin_find_and_load(&search, "good", &error);
  g_assert_no_error(error);
  g_assert_cmpstr(qh_plugin_info(p)->name, ==, "good");
  char *opts[] = {"level=3", NULL};
  QhBackend *b = qh_backend_new(p, opts, 2, &error); /* takes p */
  g_assert_no_error(error);
  g_assert_nonnull(qh_backend_instance(b));
  qh_backend_free(b);

  p = qh_plugin_find_and_load(&search, "absent", &error);
  g_assert_null(p);
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "no plugin named 'absent' (searched --plugin-dir "));
  g_assert_nonnull(strstr(error->message, dir));
  g_clear_error(&error);
  g_free(dir);
}

static void test_bad_option(void) {
  char *dir = case_dir("good");
  QhPluginSearch search = {.dir = dir, .no_env = TRUE, .no_installed = TRUE};
  GError *error = NULL;
  QhPlugin *p = qh_plugin_find_and_load(&search, "good", &error);
  g_assert_no_error(error);
  char *opts[] = {"nosuch=1", NULL};
  g_assert_null(qh_backend_new(p, opts, 1, &error)); /* frees p */
  g_assert_cmpstr(error->message, ==, "plugin 'good' has no option 'nosuch' (valid: level)");
  g_clear_error(&error);
  g_free(dir);
}

static void test_explicit_path_and_first_wins(void) {
  char *wrong = g_build_filename(QH_ABI_PLUGIN_DIR, "name_mismatch", "libqhost-wrongname.so", NULL);
  GError *error = NULL;
  QhPluginSearch none = {.no_env = TRUE, .no_installed = TRUE};
  QhPlugin *p = qh_plugin_find_and_load(&none, wrong, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(qh_plugin_info(p)->name, ==, "rightname");
  qh_plugin_free(p);

  char *a = g_build_filename(QH_ABI_PLUGIN_DIR, "dup_a", "libqhost-dup.so", NULL);
  char *b = g_build_filename(QH_ABI_PLUGIN_DIR, "dup_b", "libqhost-dup.so", NULL);
  char *paths[] = {b, a, NULL};
  QhPluginSearch two = {.paths = paths, .no_env = TRUE, .no_installed = TRUE};
  p = qh_plugin_find_and_load(&two, "dup", &error);
  g_assert_no_error(error);
  g_assert_cmpstr(qh_plugin_info(p)->version, ==, "1.0.0-b");
  qh_plugin_free(p);
  g_free(a);
  g_free(b);
  g_free(wrong);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!have_plugins()) {
    g_printerr("test plugins of tests/abi are not built\n");
    return 77;
  }
  g_test_add_func("/plugin_find/by_name", test_by_name);
  g_test_add_func("/plugin_find/bad_option", test_bad_option);
  g_test_add_func("/plugin_find/explicit_path_and_first_wins", test_explicit_path_and_first_wins);
  return g_test_run();
}
