/* Plugins as the host sees them: what a scan learns about a plugin file
 * (QhPluginInfo, plain copied data), a plugin loaded into this process (QhPlugin),
 * discovery of candidate files, the out-of-process scan, and backend options.
 *
 * Flow: qh_plugin_search_* lists candidate files in search order; qh_plugin_scan runs
 * each one's entry point in the helper program qhost-plugin-scan (a crash or a hang
 * there costs one line, not the runner); only the plugin chosen for the job is then
 * loaded in-process with qh_plugin_load. Its instance, and every call of its callbacks,
 * belong to the gateway (backend/backend.h): nothing here calls a descriptor callback.
 *
 * Ownership: every object here is owned by the caller and freed with its _free
 * function. Threading: use from one thread. Errors: GError (QH_ERROR), one line
 * starting with the plugin file's path. */
#ifndef QH_PLUGIN_PLUGIN_H
#define QH_PLUGIN_PLUGIN_H

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* One declared backend option (copied from the descriptor). type: QH_OPTION_*. */
typedef struct {
  char *name;
  int type;
  char *default_value;
  char *help;
  char *choices; /* "a|b|c" or NULL */
  int64_t min, max;
} QhPluginOptionInfo;

/* What a plugin file declares, validated. */
typedef struct {
  char *path;        /* absolute (realpath) */
  char *name;
  char *version;
  char *description;
  uint32_t abi_version;
  uint32_t struct_size;
  GPtrArray *supplies;  /* char*: callback groups present, in descriptor order */
  GPtrArray *options;   /* QhPluginOptionInfo* */
  GPtrArray *observers; /* char*: observer names */
  GPtrArray *kernels;   /* char*: "pattern_id -> kernel_id" */
  char *backend_config; /* summary ("fbgemm: 183 patterns, 12 qconfig entries") or NULL */
  int64_t entry_output_bytes; /* bytes the plugin wrote to stdout/stderr while loading (scan) */
} QhPluginInfo;

/* An empty info with its arrays allocated. */
QhPluginInfo *qh_plugin_info_new(void);
void qh_plugin_info_free(QhPluginInfo *info);
void qh_plugin_option_info_free(gpointer option);
/* Add the info as a JSON object's members (builder is inside begin_object). */
void qh_plugin_info_to_json(const QhPluginInfo *info, JsonBuilder *builder);
/* Parse what qh_plugin_info_to_json wrote; strict about types. */
QhPluginInfo *qh_plugin_info_from_json(JsonNode *node, GError **error);

/* A comma-separated list of info->supplies ("observers, lowering"), or "descriptor only". */
char *qh_plugin_info_supplies_text(const QhPluginInfo *info);

/* ---- discovery ---- */

typedef struct {
  char *path;     /* as found (made absolute) */
  char *name;     /* from the file name libqhost-<name>.so; NULL for --plugin paths */
  char *origin;   /* "--plugin", "--plugin-dir", "QHOST_PLUGIN_PATH", "installed" */
} QhPluginCandidate;

typedef struct {
  char **paths;      /* --plugin PATH (NULL-terminated, may be NULL) */
  char *dir;         /* --plugin-dir DIR, or NULL */
  gboolean no_env;   /* ignore QHOST_PLUGIN_PATH (tests) */
  gboolean no_installed; /* skip the installed directory (tests) */
} QhPluginSearch;

/* Candidate files in search order: --plugin paths, --plugin-dir, each non-empty entry
 * of QHOST_PLUGIN_PATH, then the installed plugin directory. Directory entries that
 * do not match libqhost-<name>.so are skipped; unreadable directories and missing
 * --plugin files are not errors here (the scan reports them). Returns a GPtrArray of
 * QhPluginCandidate* owning its elements. */
GPtrArray *qh_plugin_candidates(const QhPluginSearch *search);

/* The installed plugin directory for this libqhost (relocatable: derived from where
 * libqhost.so lives), or the build tree's when running from the build tree. */
char *qh_plugin_default_dir(void);

/* The scanner program: $QHOST_PLUGIN_SCANNER, else the build tree's or the installed
 * one next to this libqhost. */
char *qh_plugin_scanner_path(void);

/* The name a plugin file must carry ("libqhost-NAME.so" gives NAME), or NULL. */
char *qh_plugin_name_from_file(const char *path);

/* ---- scanning ---- */

/* Describe a plugin file by running its entry point in the scanner program with a
 * time limit (QHOST_PLUGIN_SCAN_TIMEOUT seconds, default 10). expected_name: the
 * name the descriptor must carry, or NULL. QHOST_SCAN_SUBPROCESS=0 scans in-process
 * (for debuggers). Errors: the scanner's one-line message, "crashed while loading
 * (SIGSEGV)", "did not answer within 10 s". */
QhPluginInfo *qh_plugin_scan(const char *path, const char *expected_name, GError **error);

/* In-process: dlopen, call the entry point, validate. The scanner's core. */
QhPluginInfo *qh_plugin_describe_file(const char *path, const char *expected_name, GError **error);

/* ---- a plugin loaded in this process ---- */

typedef struct QhPlugin QhPlugin;

/* Load a plugin in-process (after a successful scan) and validate it again. */
QhPlugin *qh_plugin_load(const char *path, const char *expected_name, GError **error);
const QhPluginInfo *qh_plugin_info(const QhPlugin *plugin);
/* The descriptor (borrowed from the library; valid until qh_plugin_free). The
 * returned pointer is `const QhPluginDesc *`; void here to keep SDK types out. */
const void *qh_plugin_desc(const QhPlugin *plugin);
/* Unloads (the backend holding it has destroyed its instance first). NULL is a no-op. */
void qh_plugin_free(QhPlugin *plugin);

/* Validate KEY=VALUE strings (NULL-terminated, may be NULL) against the plugin's
 * declarations: the value of every declared option in declaration order (user value
 * or default), NULL-terminated, g_strfreev. Errors: an unknown key lists the valid
 * ones; a bad value names the type/choices; a key given twice. */
char **qh_plugin_resolve_options(const QhPlugin *plugin, char *const *key_values, GError **error);

/* ---- registry: every candidate scanned ---- */

typedef struct {
  GPtrArray *plugins;  /* QhPluginInfo*: loadable plugins, first of each name */
  GPtrArray *problems; /* char*: one line per broken file or shadowed duplicate */
} QhPluginRegistry;

/* Scan all candidates (each in the scanner program). Never fails: broken files become
 * problem lines; duplicates keep the first in search order and add a warning naming
 * both paths. */
QhPluginRegistry *qh_plugin_registry_scan(const QhPluginSearch *search);
void qh_plugin_registry_free(QhPluginRegistry *registry);

/* Find the plugin `name_or_path` (a name, or a path containing '/'), scan it, and load
 * it in-process. Errors name what was searched when nothing matches. */
QhPlugin *qh_plugin_find_and_load(const QhPluginSearch *search, const char *name_or_path,
                                  GError **error);

G_END_DECLS

#endif
