/* Loading a plugin into this process: realpath, dlopen(RTLD_NOW | RTLD_LOCAL), the one
 * entry symbol, the entry call with the host table, validation of the descriptor,
 * and the user's backend options checked against its declarations (the instance is
 * the gateway's: backend/backend.h). The scanner program runs the
 * same code on every candidate first, so a plugin that crashes here has already been
 * reported by the scan. A library is closed only when it failed to load (before any
 * pointer from it escaped) or when its QhPlugin is freed. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hostapi/host-api-private.h"
#include "hostapi/host-private.h"
#include "plugin/plugin.h"
#include "hostapi/status-private.h"
#include "plugin/validate-private.h"

struct QhPlugin {
  QhPluginInfo *info;
  void *library;
  const QhPluginDesc *desc;
};

typedef QhStatus *(*EntryFn)(const QhHostApi *host, const QhPluginDesc **out_desc);

/* dlopen + entry + validation; on success the library stays open in *out_library. */
static QhPluginInfo *open_plugin(const char *path, const char *expected_name, void **out_library,
                                 const QhPluginDesc **out_desc, GError **error) {
  if (path == NULL || *path == '\0') {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "empty plugin path");
    return NULL;
  }
  if (strlen(path) >= PATH_MAX) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "plugin path longer than %d bytes", PATH_MAX);
    return NULL;
  }
  char *real = realpath(path, NULL);
  if (real == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot open plugin: %s", path, g_strerror(errno));
    return NULL;
  }
  dlerror();
  void *library = dlopen(real, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    const char *why = dlerror();
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot load plugin: %s", path,
                why ? why : "unknown dlopen error");
    free(real);
    return NULL;
  }
  EntryFn entry;
  void *sym = dlsym(library, QH_PLUGIN_ENTRY_SYMBOL);
  memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, as POSIX allows */
  if (entry == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: no symbol " QH_PLUGIN_ENTRY_SYMBOL ": not a qhost plugin", path);
    dlclose(library);
    free(real);
    return NULL;
  }
  const QhPluginDesc *desc = NULL;
  char *base = g_path_get_basename(path);
  const char *prev = qh_plugin_set_current(base);
  QhStatus *st = entry(qh_host_api_get(), &desc);
  qh_plugin_set_current(prev);
  g_free(base);
  QhPluginInfo *info = NULL;
  if (st != NULL) {
    if (qh_status_is_valid(st) && st->code == QH_ERR_ABI_MISMATCH) {
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s: %s", path, st->message);
      qh_status_free(st);
    } else {
      char *prefix = g_strdup_printf("%s: initialisation failed", path);
      qh_status_to_gerror(st, prefix, error);
      g_free(prefix);
    }
  } else {
    info = qh_plugin_validate_desc(desc, path, expected_name, error);
  }
  if (info == NULL) {
    dlclose(library);
    free(real);
    return NULL;
  }
  g_free(info->path);
  info->path = g_strdup(real);
  free(real);
  *out_library = library;
  *out_desc = desc;
  return info;
}

QhPluginInfo *qh_plugin_describe_file(const char *path, const char *expected_name, GError **error) {
  void *library = NULL;
  const QhPluginDesc *desc = NULL;
  QhPluginInfo *info = open_plugin(path, expected_name, &library, &desc, error);
  if (info)
    dlclose(library);
  return info;
}

QhPlugin *qh_plugin_load(const char *path, const char *expected_name, GError **error) {
  QhPlugin *plugin = g_new0(QhPlugin, 1);
  plugin->info = open_plugin(path, expected_name, &plugin->library, &plugin->desc, error);
  if (plugin->info == NULL) {
    g_free(plugin);
    return NULL;
  }
  return plugin;
}

const QhPluginInfo *qh_plugin_info(const QhPlugin *plugin) { return plugin->info; }
const void *qh_plugin_desc(const QhPlugin *plugin) { return plugin->desc; }

void qh_plugin_free(QhPlugin *plugin) {
  if (plugin == NULL)
    return;
  /* ASan's leak report needs the plugin's symbols: keep the library mapped there. */
  if (g_getenv("QHOST_PLUGIN_NO_DLCLOSE") == NULL)
    dlclose(plugin->library);
  qh_plugin_info_free(plugin->info);
  g_free(plugin);
}

/* ---- options ---- */

static char *valid_keys(const QhPluginInfo *info) {
  if (info->options->len == 0)
    return g_strdup("it declares no options");
  GString *s = g_string_new("valid: ");
  for (guint i = 0; i < info->options->len; i++)
    g_string_append_printf(s, "%s%s", i ? ", " : "",
                           ((const QhPluginOptionInfo *)info->options->pdata[i])->name);
  return g_string_free(s, FALSE);
}

/* The value for each declared option, in declaration order (user's or default). */
static char **resolve_options(const QhPluginInfo *info, char *const *key_values, GError **error) {
  guint n = info->options->len;
  char **values = g_new0(char *, n + 1);
  for (int i = 0; key_values && key_values[i]; i++) {
    const char *kv = key_values[i];
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "--backend-opt '%s': want KEY=VALUE", kv);
      goto fail;
    }
    char *key = g_strndup(kv, (gsize)(eq - kv));
    guint k = 0;
    while (k < n && strcmp(((const QhPluginOptionInfo *)info->options->pdata[k])->name, key) != 0)
      k++;
    if (k == n) {
      char *keys = valid_keys(info);
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "plugin '%s' has no option '%s' (%s)",
                  info->name, key, keys);
      g_free(keys);
      g_free(key);
      goto fail;
    }
    const QhPluginOptionInfo *opt = info->options->pdata[k];
    char *reason = NULL;
    if (values[k] != NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "option '%s' of plugin '%s' is given twice",
                  key, info->name);
    } else if (!qh_plugin_option_value_ok(opt, eq + 1, &reason)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "option '%s' of plugin '%s': '%s' is invalid (%s)",
                  key, info->name, eq + 1, reason);
      g_free(reason);
    } else {
      values[k] = g_strdup(eq + 1);
    }
    g_free(key);
    if (values[k] == NULL || (error && *error))
      goto fail;
  }
  for (guint k = 0; k < n; k++)
    if (values[k] == NULL)
      values[k] = g_strdup(((const QhPluginOptionInfo *)info->options->pdata[k])->default_value);
  return values;
fail:
  for (guint k = 0; k < n; k++)
    g_free(values[k]);
  g_free(values);
  return NULL;
}

char **qh_plugin_resolve_options(const QhPlugin *plugin, char *const *key_values, GError **error) {
  return resolve_options(plugin->info, key_values, error);
}
