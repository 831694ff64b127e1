/* The plugin listing (qhost_plugins_list, `qhost plugins`): every plugin the search
 * finds, each scanned in the scanner program, with name, version, ABI, file,
 * description, what it supplies (derived from the callback groups present) and its
 * backend options. Broken files and shadowed duplicates are one problem line each, and
 * the listing goes on. */
#include <stdio.h>

#include "flows/flows.h"
#include "hostapi/sdk-private.h"

static const char *const type_names[] = {"?", "bool", "int", "float", "string", "enum"};

static void print_text(FILE *out, const QhPluginRegistry *reg) {
  if (reg->plugins->len == 0) {
    fprintf(out, "No plugins found.\n");
    return;
  }
  for (guint i = 0; i < reg->plugins->len; i++) {
    const QhPluginInfo *p = reg->plugins->pdata[i];
    char *supplies = qh_plugin_info_supplies_text(p);
    fprintf(out, "%s %s (ABI %u.%u)\n", p->name, p->version, QH_ABI_VERSION_MAJOR(p->abi_version),
           QH_ABI_VERSION_MINOR(p->abi_version));
    fprintf(out, "  %s\n", p->description);
    fprintf(out, "  file:     %s\n", p->path);
    fprintf(out, "  supplies: %s\n", supplies);
    g_free(supplies);
    if (p->backend_config)
      fprintf(out, "  backend config: %s\n", p->backend_config);
    for (guint k = 0; k < p->observers->len; k++)
      fprintf(out, "  observer: %s\n", (const char *)p->observers->pdata[k]);
    for (guint k = 0; k < p->kernels->len; k++)
      fprintf(out, "  kernel:   %s\n", (const char *)p->kernels->pdata[k]);
    for (guint k = 0; k < p->options->len; k++) {
      const QhPluginOptionInfo *o = p->options->pdata[k];
      fprintf(out, "  --backend-opt %s=%s  (%s", o->name, o->default_value, type_names[o->type]);
      if (o->choices)
        fprintf(out, ": %s", o->choices);
      if (o->type == QH_OPTION_INT && o->min <= o->max)
        fprintf(out, " in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", o->min, o->max);
      fprintf(out, ") %s\n", o->help);
    }
    if (i + 1 < reg->plugins->len)
      fprintf(out, "\n");
  }
}

static void print_json(FILE *out, const QhPluginRegistry *reg) {
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
  qh_json_print(out, b);
}

void qh_plugins_report(const QhPluginSearch *search, gboolean json, FILE *out, GString *problems) {
  QhPluginRegistry *reg = qh_plugin_registry_scan(search);
  for (guint i = 0; i < reg->problems->len; i++)
    g_string_append_printf(problems, "%s\n", (const char *)reg->problems->pdata[i]);
  if (json)
    print_json(out, reg);
  else
    print_text(out, reg);
  qh_plugin_registry_free(reg);
}
