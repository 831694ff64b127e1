/* A minimal qhost backend plugin, to copy and rename: it describes itself, declares one
 * backend option (`verbose`) and keeps an instance that holds the parsed option. It
 * supplies no callback group, so qhost lists it as supplying nothing; sdk/docs (installed
 * as share/doc/qhost/PLUGIN_GUIDE.md) adds the groups one at a time.
 *
 * Build: see README.md (CMake with find_package(QHost), or pkg-config qhost-plugin + cc).
 * Check: qhost plugin-check ./libqhost-template.so */
#include <stdlib.h>
#include <string.h>

#include <qhost/qhost-plugin.h>

/* CMake passes the project's version; a plain `cc` build falls back to this one. */
#ifndef TEMPLATE_VERSION
#define TEMPLATE_VERSION "0.1.0"
#endif

/* What one instance remembers: the options it was created with. The host may keep
 * several plugins loaded but creates one instance per job; nothing here is global, so
 * two jobs in one process never share state. */
typedef struct {
  const QhHostApi *host; /* valid for the life of the process */
  int verbose;
} TemplateInstance;

/* Backend options are declared, never guessed: `qhost plugins` shows them, and the host
 * refuses `--backend-opt KEY=VALUE` with an unknown key or a malformed value before the
 * plugin sees it. Designated initialisers keep unset members zero (their documented
 * defaults) and stay correct when a later SDK appends members. */
static const QhOptionDecl verbose_option = {
    QH_STRUCT_HEADER(QhOptionDecl),
    .name = "verbose",
    .type = QH_OPTION_BOOL,
    .default_value = "false",
    .help = "log each step the backend takes through the host's log",
};
static const QhOptionDecl *const template_options[] = {&verbose_option};

/* The host has already checked the value against the declaration; reading it again
 * costs nothing and keeps the plugin correct if it is ever called another way. */
static int parse_bool(const char *value, int *out) {
  static const char *const yes[] = {"true", "1", "yes"};
  static const char *const no[] = {"false", "0", "no"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcmp(value, yes[i]) == 0) {
      *out = 1;
      return 0;
    }
    if (strcmp(value, no[i]) == 0) {
      *out = 0;
      return 0;
    }
  }
  return -1;
}

/* Called once when the plugin is chosen for a job, with every declared option (the
 * user's value or the default). Heavy set-up (engines, thread pools) belongs here, never
 * in qhost_plugin_init. On error: return a status and leave *out_instance untouched. */
static QhStatus *template_instance_create(const QhHostApi *host, const QhInstanceInfo *info,
                                          const QhOption *options, size_t n_options,
                                          void **out_instance) {
  (void)info; /* n_threads and the plugin's own path, when a backend needs them */
  int verbose = 0;
  for (size_t i = 0; i < n_options; i++) {
    const QhOption *option = &options[i];
    if (!option->key || strcmp(option->key, "verbose") != 0)
      continue;
    if (!option->value || parse_bool(option->value, &verbose) != 0)
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "option verbose: '%s' is not a boolean",
                            option->value ? option->value : "(null)");
  }
  TemplateInstance *instance = calloc(1, sizeof *instance);
  if (!instance)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory creating the instance");
  instance->host = host;
  instance->verbose = verbose;
  if (verbose)
    host->log(QH_LOG_INFO, "instance created (verbose)");
  *out_instance = instance;
  return NULL;
}

/* Called once at the end of the job; frees what instance_create made. Never fails. */
static void template_instance_destroy(void *data) {
  TemplateInstance *instance = data;
  if (!instance)
    return;
  if (instance->verbose)
    instance->host->log(QH_LOG_INFO, "instance destroyed");
  free(instance);
}

/* Static storage: the host reads the descriptor after qhost_plugin_init returns and
 * copies the strings it keeps. The callback groups (transform, backend_config, annotate,
 * observers, refine, reference_numerics, lowering, deploy) stay NULL: not supplied. */
static const QhPluginDesc template_desc = {
    QH_STRUCT_HEADER(QhPluginDesc),
    .name = "template", /* must match the file name libqhost-template.so */
    .version = TEMPLATE_VERSION,
    .description = "A minimal plugin to copy: one option, an instance, no callback groups",
    .options = template_options,
    .n_options = sizeof template_options / sizeof template_options[0],
    .instance_create = template_instance_create,
    .instance_destroy = template_instance_destroy,
};

/* The one exported symbol. It only describes: no allocation, no threads, no printing;
 * qhost also calls it just to list plugins, in a helper process. */
QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host,
                                             const QhPluginDesc **out_desc) {
  QhStatus *status = qh_plugin_check_host(host);
  if (status)
    return status;
  *out_desc = &template_desc;
  return NULL;
}
