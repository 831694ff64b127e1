/* qhost plugins: every plugin the search finds, each scanned in the scanner program,
 * with name, version, ABI, file, description, what it supplies (derived from the
 * callback groups present) and its backend options. Broken files and shadowed
 * duplicates are one warning line each on stderr; the listing goes on. */
#include <stdio.h>

#include "cli/cli.h"
#include "hostapi/sdk-private.h"

static const char *const type_names[] = {"?", "bool", "int", "float", "string", "enum"};

static void print_text(const QhPluginRegistry *reg) {
  if (reg->plugins->len == 0) {
    printf("No plugins found.\n");
    return;
  }
  for (guint i = 0; i < reg->plugins->len; i++) {
    const QhPluginInfo *p = reg->plugins->pdata[i];
    char *supplies = qh_plugin_info_supplies_text(p);
    printf("%s %s (ABI %u.%u)\n", p->name, p->version, QH_ABI_VERSION_MAJOR(p->abi_version),
           QH_ABI_VERSION_MINOR(p->abi_version));
    printf("  %s\n", p->description);
    printf("  file:     %s\n", p->path);
    printf("  supplies: %s\n", supplies);
    g_free(supplies);
    if (p->backend_config)
      printf("  backend config: %s\n", p->backend_config);
    for (guint k = 0; k < p->observers->len; k++)
      printf("  observer: %s\n", (const char *)p->observers->pdata[k]);
    for (guint k = 0; k < p->kernels->len; k++)
      printf("  kernel:   %s\n", (const char *)p->kernels->pdata[k]);
    for (guint k = 0; k < p->options->len; k++) {
      const QhPluginOptionInfo *o = p->options->pdata[k];
      printf("  --backend-opt %s=%s  (%s", o->name, o->default_value, type_names[o->type]);
      if (o->choices)
        printf(": %s", o->choices);
      if (o->type == QH_OPTION_INT && o->min <= o->max)
        printf(" in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", o->min, o->max);
      printf(") %s\n", o->help);
    }
    if (i + 1 < reg->plugins->len)
      printf("\n");
  }
}

static void print_json(const QhPluginRegistry *reg) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "schema_version");
  json_builder_add_int_value(b, 1);
  json_builder_set_member_name(b, "plugins");
  json_builder_begin_array(b);
  for (guint i = 0; i < reg->plugins->len; i++) {
    json_builder_begin_object(b);
    qh_plugin_info_to_json(reg->plugins->pdata[i], b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "problems");
  json_builder_begin_array(b);
  for (guint i = 0; i < reg->problems->len; i++)
    json_builder_add_string_value(b, reg->problems->pdata[i]);
  json_builder_end_array(b);
  json_builder_end_object(b);
  qh_cli_print_json(b);
}

int qh_cli_plugins(int argc, char **argv) {
  QhCliCommon common = {.uses_plugins = TRUE};
  gboolean json = FALSE;
  const GOptionEntry entries[] = {
      {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON (schema_version 1)", NULL},
      G_OPTION_ENTRY_NULL};
  if (!qh_cli_parse("plugins", "",
                    "List the backend plugins found in --plugin, --plugin-dir, QHOST_PLUGIN_PATH and\n"
                    "the installed plugin directory, in that order (the first of a name wins).",
                    entries, &common, &argc, &argv))
    return QH_EXIT_USAGE;
  if (argc > 1)
    return qh_cli_usage_error("plugins", "unexpected argument '%s'", argv[1]);
  QhPluginSearch search;
  qh_cli_plugin_search(&common, &search);
  QhPluginRegistry *reg = qh_plugin_registry_scan(&search);
  for (guint i = 0; i < reg->problems->len; i++)
    fprintf(stderr, "qhost: warning: %s\n", (const char *)reg->problems->pdata[i]);
  if (json)
    print_json(reg);
  else
    print_text(reg);
  qh_plugin_registry_free(reg);
  return QH_EXIT_OK;
}


