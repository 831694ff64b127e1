/* QhPluginInfo: what a scan learned about a plugin file, as plain host-owned data, and
 * its JSON form, which is how the scanner program reports to the runner. The JSON
 * parser is strict: the scanner is ours, but its output crosses a process boundary
 * that a crashing plugin could have garbled. */
#include <string.h>

#include "plugin/plugin.h"
#include "hostapi/sdk-private.h"

void qh_plugin_option_info_free(gpointer p) {
  QhPluginOptionInfo *o = p;
  g_free(o->name);
  g_free(o->default_value);
  g_free(o->help);
  g_free(o->choices);
  g_free(o);
}

QhPluginInfo *qh_plugin_info_new(void) {
  QhPluginInfo *info = g_new0(QhPluginInfo, 1);
  info->supplies = g_ptr_array_new_with_free_func(g_free);
  info->options = g_ptr_array_new_with_free_func(qh_plugin_option_info_free);
  info->observers = g_ptr_array_new_with_free_func(g_free);
  info->kernels = g_ptr_array_new_with_free_func(g_free);
  return info;
}

void qh_plugin_info_free(QhPluginInfo *info) {
  if (info == NULL)
    return;
  g_free(info->path);
  g_free(info->name);
  g_free(info->version);
  g_free(info->description);
  g_free(info->backend_config);
  if (info->supplies) g_ptr_array_unref(info->supplies);
  if (info->options) g_ptr_array_unref(info->options);
  if (info->observers) g_ptr_array_unref(info->observers);
  if (info->kernels) g_ptr_array_unref(info->kernels);
  g_free(info);
}

static const char *const option_types[] = {NULL, "bool", "int", "float", "string", "enum"};

static void add_strings(JsonBuilder *b, const char *member, GPtrArray *list) {
  json_builder_set_member_name(b, member);
  json_builder_begin_array(b);
  for (guint i = 0; i < list->len; i++)
    json_builder_add_string_value(b, list->pdata[i]);
  json_builder_end_array(b);
}

void qh_plugin_info_to_json(const QhPluginInfo *info, JsonBuilder *b) {
  json_builder_set_member_name(b, "name");
  json_builder_add_string_value(b, info->name);
  json_builder_set_member_name(b, "version");
  json_builder_add_string_value(b, info->version);
  json_builder_set_member_name(b, "abi");
  char *abi = g_strdup_printf("%u.%u", QH_ABI_VERSION_MAJOR(info->abi_version),
                              QH_ABI_VERSION_MINOR(info->abi_version));
  json_builder_add_string_value(b, abi);
  g_free(abi);
  json_builder_set_member_name(b, "struct_size");
  json_builder_add_int_value(b, info->struct_size);
  json_builder_set_member_name(b, "file");
  json_builder_add_string_value(b, info->path);
  json_builder_set_member_name(b, "description");
  json_builder_add_string_value(b, info->description);
  add_strings(b, "supplies", info->supplies);
  json_builder_set_member_name(b, "options");
  json_builder_begin_array(b);
  for (guint i = 0; i < info->options->len; i++) {
    const QhPluginOptionInfo *o = info->options->pdata[i];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, o->name);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, option_types[o->type]);
    json_builder_set_member_name(b, "default");
    json_builder_add_string_value(b, o->default_value);
    json_builder_set_member_name(b, "help");
    json_builder_add_string_value(b, o->help);
    if (o->choices) {
      json_builder_set_member_name(b, "choices");
      json_builder_add_string_value(b, o->choices);
    }
    if (o->type == QH_OPTION_INT && o->min <= o->max) {
      json_builder_set_member_name(b, "min");
      json_builder_add_int_value(b, o->min);
      json_builder_set_member_name(b, "max");
      json_builder_add_int_value(b, o->max);
    }
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  add_strings(b, "observers", info->observers);
  add_strings(b, "kernels", info->kernels);
  if (info->backend_config) {
    json_builder_set_member_name(b, "backend_config");
    json_builder_add_string_value(b, info->backend_config);
  }
  json_builder_set_member_name(b, "entry_output_bytes");
  json_builder_add_int_value(b, info->entry_output_bytes);
}

/* ---- strict reading ---- */

static gboolean bad(GError **error, const char *what) {
  g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "malformed scanner output (%s)", what);
  return FALSE;
}

static gboolean get_string(JsonObject *o, const char *member, gboolean required, char **out,
                           GError **error) {
  JsonNode *n = json_object_get_member(o, member);
  if (n == NULL) {
    if (required)
      return bad(error, member);
    return TRUE;
  }
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
    return bad(error, member);
  *out = g_strdup(json_node_get_string(n));
  return TRUE;
}

static gboolean get_int(JsonObject *o, const char *member, gboolean required, int64_t *out,
                        GError **error) {
  JsonNode *n = json_object_get_member(o, member);
  if (n == NULL)
    return required ? bad(error, member) : TRUE;
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64)
    return bad(error, member);
  *out = json_node_get_int(n);
  return TRUE;
}

static gboolean get_strings(JsonObject *o, const char *member, GPtrArray *out, GError **error) {
  JsonNode *n = json_object_get_member(o, member);
  if (n == NULL || !JSON_NODE_HOLDS_ARRAY(n))
    return bad(error, member);
  JsonArray *a = json_node_get_array(n);
  for (guint i = 0; i < json_array_get_length(a); i++) {
    JsonNode *e = json_array_get_element(a, i);
    if (!JSON_NODE_HOLDS_VALUE(e) || json_node_get_value_type(e) != G_TYPE_STRING)
      return bad(error, member);
    g_ptr_array_add(out, g_strdup(json_node_get_string(e)));
  }
  return TRUE;
}

static gboolean get_options(JsonObject *o, GPtrArray *out, GError **error) {
  JsonNode *n = json_object_get_member(o, "options");
  if (n == NULL || !JSON_NODE_HOLDS_ARRAY(n))
    return bad(error, "options");
  JsonArray *a = json_node_get_array(n);
  for (guint i = 0; i < json_array_get_length(a); i++) {
    JsonNode *e = json_array_get_element(a, i);
    if (!JSON_NODE_HOLDS_OBJECT(e))
      return bad(error, "options");
    JsonObject *eo = json_node_get_object(e);
    QhPluginOptionInfo *opt = g_new0(QhPluginOptionInfo, 1);
    g_ptr_array_add(out, opt);
    char *type = NULL;
    opt->min = 1;
    opt->max = 0;
    gboolean ok = get_string(eo, "name", TRUE, &opt->name, error) &&
                  get_string(eo, "type", TRUE, &type, error) &&
                  get_string(eo, "default", TRUE, &opt->default_value, error) &&
                  get_string(eo, "help", TRUE, &opt->help, error) &&
                  get_string(eo, "choices", FALSE, &opt->choices, error) &&
                  get_int(eo, "min", FALSE, &opt->min, error) &&
                  get_int(eo, "max", FALSE, &opt->max, error);
    if (ok) {
      ok = FALSE;
      for (int t = QH_OPTION_BOOL; t <= QH_OPTION_ENUM; t++)
        if (strcmp(type, option_types[t]) == 0) {
          opt->type = t;
          ok = TRUE;
        }
      if (!ok)
        bad(error, "option type");
    }
    g_free(type);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

QhPluginInfo *qh_plugin_info_from_json(JsonNode *node, GError **error) {
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT(node)) {
    bad(error, "not an object");
    return NULL;
  }
  JsonObject *o = json_node_get_object(node);
  QhPluginInfo *info = qh_plugin_info_new();
  char *abi = NULL;
  int64_t struct_size = 0;
  gboolean ok = get_string(o, "name", TRUE, &info->name, error) &&
                get_string(o, "version", TRUE, &info->version, error) &&
                get_string(o, "abi", TRUE, &abi, error) &&
                get_int(o, "struct_size", TRUE, &struct_size, error) &&
                get_string(o, "file", TRUE, &info->path, error) &&
                get_string(o, "description", TRUE, &info->description, error) &&
                get_strings(o, "supplies", info->supplies, error) && get_options(o, info->options, error) &&
                get_strings(o, "observers", info->observers, error) &&
                get_strings(o, "kernels", info->kernels, error) &&
                get_string(o, "backend_config", FALSE, &info->backend_config, error) &&
                get_int(o, "entry_output_bytes", TRUE, &info->entry_output_bytes, error);
  if (ok) {
    unsigned major, minor;
    if (sscanf(abi, "%u.%u", &major, &minor) != 2 || major > 0xffff || minor > 0xffff ||
        struct_size < 0 || struct_size > UINT32_MAX)
      ok = bad(error, "abi");
    else {
      info->abi_version = (major << 16) | minor;
      info->struct_size = (uint32_t)struct_size;
    }
  }
  g_free(abi);
  if (!ok) {
    qh_plugin_info_free(info);
    return NULL;
  }
  return info;
}

char *qh_plugin_info_supplies_text(const QhPluginInfo *info) {
  if (info->supplies->len == 0)
    return g_strdup("descriptor only");
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < info->supplies->len; i++)
    g_string_append_printf(s, "%s%s", i ? ", " : "", (const char *)info->supplies->pdata[i]);
  return g_string_free(s, FALSE);
}
