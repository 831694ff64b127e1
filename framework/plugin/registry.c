/* The set of plugins a search finds: every candidate scanned out of process, broken
 * files turned into one-line problems, duplicates resolved first-wins with a warning
 * naming both files; and finding one plugin by name (or path) and loading it into
 * this process for a job. */
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "plugin/plugin.h"

QhPluginRegistry *qh_plugin_registry_scan(const QhPluginSearch *search) {
  QhPluginRegistry *reg = g_new0(QhPluginRegistry, 1);
  reg->plugins = g_ptr_array_new_with_free_func((GDestroyNotify)qh_plugin_info_free);
  reg->problems = g_ptr_array_new_with_free_func(g_free);
  GPtrArray *candidates = qh_plugin_candidates(search);
  for (guint i = 0; i < candidates->len; i++) {
    const QhPluginCandidate *c = candidates->pdata[i];
    GError *error = NULL;
    QhPluginInfo *info = qh_plugin_scan(c->path, c->name, &error);
    if (info == NULL) {
      g_ptr_array_add(reg->problems, g_strdup_printf("%s; skipped", error->message));
      g_error_free(error);
      continue;
    }
    const QhPluginInfo *first = NULL;
    for (guint k = 0; k < reg->plugins->len && !first; k++)
      if (strcmp(((const QhPluginInfo *)reg->plugins->pdata[k])->name, info->name) == 0)
        first = reg->plugins->pdata[k];
    if (first) {
      g_ptr_array_add(reg->problems,
                      g_strdup_printf("plugin '%s' in %s is shadowed by %s (the first in search order wins)",
                                      info->name, info->path, first->path));
      qh_plugin_info_free(info);
      continue;
    }
    g_ptr_array_add(reg->plugins, info);
  }
  g_ptr_array_unref(candidates);
  return reg;
}

void qh_plugin_registry_free(QhPluginRegistry *registry) {
  if (registry == NULL)
    return;
  g_ptr_array_unref(registry->plugins);
  g_ptr_array_unref(registry->problems);
  g_free(registry);
}

static QhPlugin *scan_then_load(const char *path, const char *expected_name, GError **error) {
  QhPluginInfo *info = qh_plugin_scan(path, expected_name, error);
  if (info == NULL)
    return NULL;
  qh_plugin_info_free(info);
  return qh_plugin_load(path, expected_name, error);
}

static char *searched_places(const QhPluginSearch *search) {
  GString *s = g_string_new(NULL);
  for (int i = 0; search->paths && search->paths[i]; i++)
    g_string_append_printf(s, "%s--plugin %s", s->len ? ", " : "", search->paths[i]);
  if (search->dir)
    g_string_append_printf(s, "%s--plugin-dir %s", s->len ? ", " : "", search->dir);
  const char *env = search->no_env ? NULL : g_getenv("QHOST_PLUGIN_PATH");
  if (env && *env)
    g_string_append_printf(s, "%sQHOST_PLUGIN_PATH=%s", s->len ? ", " : "", env);
  if (!search->no_installed) {
    char *dir = qh_plugin_default_dir();
    g_string_append_printf(s, "%s%s", s->len ? ", " : "", dir);
    g_free(dir);
  }
  return g_string_free(s, FALSE);
}

QhPlugin *qh_plugin_find_and_load(const QhPluginSearch *search, const char *name_or_path,
                                  GError **error) {
  if (strchr(name_or_path, '/') != NULL) /* explicit: not held to the file-name pattern */
    return scan_then_load(name_or_path, NULL, error);
  GPtrArray *candidates = qh_plugin_candidates(search);
  QhPlugin *plugin = NULL;
  GError *first_failure = NULL;
  for (guint i = 0; i < candidates->len && plugin == NULL; i++) {
    const QhPluginCandidate *c = candidates->pdata[i];
    if (c->name && strcmp(c->name, name_or_path) != 0)
      continue;
    GError *local = NULL;
    if (c->name == NULL) {
      /* an explicit --plugin file: its descriptor says which plugin it is */
      QhPluginInfo *info = qh_plugin_scan(c->path, NULL, &local);
      gboolean match = info && strcmp(info->name, name_or_path) == 0;
      qh_plugin_info_free(info);
      if (!match) {
        g_clear_error(&local);
        continue;
      }
    }
    plugin = scan_then_load(c->path, c->name, &local);
    if (plugin == NULL) {
      if (first_failure == NULL)
        first_failure = local;
      else
        g_error_free(local);
    }
  }
  g_ptr_array_unref(candidates);
  if (plugin) {
    if (first_failure) {
      qh_log(QH_LOG_WARNING, "%s; skipped", first_failure->message);
      g_error_free(first_failure);
    }
    return plugin;
  }
  if (first_failure) {
    g_propagate_error(error, first_failure);
    return NULL;
  }
  char *places = searched_places(search);
  g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
              "no plugin named '%s' (searched %s); 'qhost plugins' lists what is found", name_or_path,
              places);
  g_free(places);
  return NULL;
}
