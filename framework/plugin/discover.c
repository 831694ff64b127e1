/* Where plugins are looked for, in order: --plugin PATH (each), --plugin-dir DIR,
 * the non-empty entries of QHOST_PLUGIN_PATH, then the installed plugin directory.
 * Never the current directory implicitly: every candidate is made absolute, an empty
 * QHOST_PLUGIN_PATH entry is skipped rather than read as ".", and directory entries
 * count only when named libqhost-<name>.so. The installed directory and the scanner
 * program are found relative to libqhost itself, so an installed tree can be moved;
 * a libqhost in the build tree uses the build tree's plugins and scanner. */
#define _GNU_SOURCE 1 /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/plugin.h"
#include "plugin/validate-private.h"

char *qh_plugin_name_from_file(const char *path) {
  char *base = g_path_get_basename(path);
  char *name = NULL;
  size_t n = strlen(base);
  if (g_str_has_prefix(base, "libqhost-") && g_str_has_suffix(base, ".so") && n > 12) {
    name = g_strndup(base + 9, n - 12);
    if (!qh_plugin_name_is_valid(name)) {
      g_free(name);
      name = NULL;
    }
  }
  g_free(base);
  return name;
}

static void candidate_free(gpointer p) {
  QhPluginCandidate *c = p;
  g_free(c->path);
  g_free(c->name);
  g_free(c->origin);
  g_free(c);
}

static char *absolute(const char *path) {
  if (g_path_is_absolute(path))
    return g_strdup(path);
  char *cwd = g_get_current_dir();
  char *abs = g_build_filename(cwd, path, NULL);
  g_free(cwd);
  return abs;
}

static void add_candidate(GPtrArray *out, const char *path, char *name, const char *origin) {
  QhPluginCandidate *c = g_new0(QhPluginCandidate, 1);
  c->path = absolute(path);
  c->name = name;
  c->origin = g_strdup(origin);
  g_ptr_array_add(out, c);
}

static gint compare_strings(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_directory(GPtrArray *out, const char *dir, const char *origin) {
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d == NULL)
    return;
  GPtrArray *files = g_ptr_array_new_with_free_func(g_free);
  const char *entry;
  while ((entry = g_dir_read_name(d)) != NULL)
    g_ptr_array_add(files, g_strdup(entry));
  g_dir_close(d);
  g_ptr_array_sort(files, compare_strings); /* readdir order is not stable */
  for (guint i = 0; i < files->len; i++) {
    char *path = g_build_filename(dir, files->pdata[i], NULL);
    char *name = qh_plugin_name_from_file(path);
    if (name)
      add_candidate(out, path, name, origin);
    g_free(path);
  }
  g_ptr_array_unref(files);
}

GPtrArray *qh_plugin_candidates(const QhPluginSearch *search) {
  GPtrArray *out = g_ptr_array_new_with_free_func(candidate_free);
  for (int i = 0; search->paths && search->paths[i]; i++)
    add_candidate(out, search->paths[i], NULL, "--plugin");
  if (search->dir)
    add_directory(out, search->dir, "--plugin-dir");
  const char *env = search->no_env ? NULL : g_getenv("QHOST_PLUGIN_PATH");
  if (env) {
    char **dirs = g_strsplit(env, ":", -1);
    for (char **p = dirs; *p; p++)
      if (**p != '\0')
        add_directory(out, *p, "QHOST_PLUGIN_PATH");
    g_strfreev(dirs);
  }
  if (!search->no_installed) {
    char *dir = qh_plugin_default_dir();
    add_directory(out, dir, "installed");
    g_free(dir);
  }
  return out;
}

/* ---- locations relative to libqhost ---- */

/* The directory holding this libqhost, resolved. */
static char *library_dir(void) {
  Dl_info dl;
  if (dladdr((void *)qh_plugin_default_dir, &dl) == 0 || dl.dli_fname == NULL)
    return NULL;
  char *real = realpath(dl.dli_fname, NULL);
  if (real == NULL)
    return NULL;
  char *dir = g_path_get_dirname(real);
  free(real);
  return dir;
}

static gboolean running_from_build_tree(const char *libdir) {
#ifdef QH_DISCOVER_BUILD_TREE
  /* the internal static library: linked only into the build tree's tests and tools */
  (void)libdir;
  return TRUE;
#endif
  char *build = realpath(QH_BUILD_LIB_DIR, NULL);
  gboolean same = build && libdir && strcmp(build, libdir) == 0;
  free(build);
  return same;
}

/* The install prefix: libdir minus the components of the relative CMAKE_INSTALL_LIBDIR. */
static char *install_prefix(const char *libdir) {
  char *prefix = g_strdup(libdir);
  char **parts = g_strsplit(QH_INSTALL_LIBDIR, "/", -1);
  for (char **p = parts; *p; p++) {
    if (**p == '\0')
      continue;
    char *up = g_path_get_dirname(prefix);
    g_free(prefix);
    prefix = up;
  }
  g_strfreev(parts);
  return prefix;
}

static char *relative_to_install(const char *rel) {
  char *libdir = library_dir();
  char *result;
  if (libdir == NULL) {
    result = g_build_filename(QH_INSTALL_PREFIX, rel, NULL);
  } else {
    char *prefix = install_prefix(libdir);
    result = g_build_filename(prefix, rel, NULL);
    g_free(prefix);
  }
  g_free(libdir);
  return result;
}

char *qh_plugin_default_dir(void) {
  char *libdir = library_dir();
  gboolean build = running_from_build_tree(libdir);
  g_free(libdir);
  if (build)
    return g_strdup(QH_BUILD_PLUGIN_DIR);
  return relative_to_install(QH_INSTALL_PLUGIN_DIR);
}

char *qh_plugin_scanner_path(void) {
  const char *env = g_getenv("QHOST_PLUGIN_SCANNER");
  if (env && *env)
    return g_strdup(env);
  char *libdir = library_dir();
  gboolean build = running_from_build_tree(libdir);
  g_free(libdir);
  if (build)
    return g_strdup(QH_BUILD_SCANNER);
  char *dir = relative_to_install(QH_INSTALL_SCANNER_DIR);
  char *path = g_build_filename(dir, "qhost-plugin-scan", NULL);
  g_free(dir);
  return path;
}
