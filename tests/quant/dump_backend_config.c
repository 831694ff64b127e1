/* Prints a plugin's BackendConfig as JSON (patterns, observation types, roles, dtype
 * configs with constraints, default qconfig entries, and whether an entry's observers
 * are the global entry's objects), so check_backend_tables.py can compare the C tables
 * with PyTorch's own configs. Usage: qh-dump-backend-config PLUGIN.so */
#include <stdio.h>

#include <json-glib/json-glib.h>

#include "plugin/plugin.h"
#include "hostapi/sdk-private.h"

static void constraint(JsonBuilder *b, const char *member, const QhDTypeConstraint *k) {
  json_builder_set_member_name(b, member);
  if (k == NULL) {
    json_builder_add_null_value(b);
    return;
  }
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "dtype");
  json_builder_add_int_value(b, k->dtype);
  if (k->flags & QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND) {
    json_builder_set_member_name(b, "quant_min_lower_bound");
    json_builder_add_int_value(b, k->quant_min_lower_bound);
  }
  if (k->flags & QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND) {
    json_builder_set_member_name(b, "quant_max_upper_bound");
    json_builder_add_int_value(b, k->quant_max_upper_bound);
  }
  if (k->flags & QH_CONSTRAINT_SCALE_MIN_LOWER_BOUND) {
    json_builder_set_member_name(b, "scale_min_lower_bound");
    json_builder_add_double_value(b, k->scale_min_lower_bound);
  }
  if (k->flags & QH_CONSTRAINT_SCALE_EXACT) {
    json_builder_set_member_name(b, "scale_exact");
    json_builder_add_double_value(b, k->scale_exact);
  }
  if (k->flags & QH_CONSTRAINT_ZERO_POINT_EXACT) {
    json_builder_set_member_name(b, "zero_point_exact");
    json_builder_add_int_value(b, k->zero_point_exact);
  }
  json_builder_end_object(b);
}

static void spec(JsonBuilder *b, const char *member, const QhQuantSpec *s) {
  json_builder_set_member_name(b, member);
  if (s == NULL) {
    json_builder_add_null_value(b);
    return;
  }
  json_builder_begin_object(b);
  static const char *const kinds[] = {"?", "quantize", "shared", "fixed", "derived", "float"};
  json_builder_set_member_name(b, "kind");
  json_builder_add_string_value(b, s->kind >= 1 && s->kind <= 5 ? kinds[s->kind] : "?");
  json_builder_set_member_name(b, "dtype");
  json_builder_add_int_value(b, s->dtype);
  json_builder_set_member_name(b, "qscheme");
  json_builder_add_int_value(b, s->qscheme);
  json_builder_set_member_name(b, "reduce_range");
  json_builder_add_boolean_value(b, (s->flags & QH_SPEC_REDUCE_RANGE) != 0);
  if (s->flags & QH_SPEC_HAS_RANGE) {
    json_builder_set_member_name(b, "quant_min");
    json_builder_add_int_value(b, s->quant_min);
    json_builder_set_member_name(b, "quant_max");
    json_builder_add_int_value(b, s->quant_max);
  }
  json_builder_set_member_name(b, "ch_axis");
  json_builder_add_int_value(b, s->ch_axis);
  json_builder_set_member_name(b, "observer");
  json_builder_add_string_value(b, s->observer);
  if (s->kind == QH_SPEC_FIXED) {
    json_builder_set_member_name(b, "scale");
    json_builder_add_double_value(b, s->scale);
    json_builder_set_member_name(b, "zero_point");
    json_builder_add_int_value(b, s->zero_point);
  }
  json_builder_end_object(b);
}

static void dump(JsonBuilder *b, const QhBackendConfig *bc) {
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "name");
  json_builder_add_string_value(b, bc->name);
  json_builder_set_member_name(b, "patterns");
  json_builder_begin_array(b);
  for (size_t i = 0; i < bc->n_patterns; i++) {
    const QhBackendPatternConfig *p = bc->patterns[i];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "ops");
    json_builder_begin_array(b);
    for (size_t j = 0; j < p->n_ops; j++)
      json_builder_add_string_value(b, p->ops[j]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "observation_type");
    json_builder_add_int_value(b, p->observation_type);
    json_builder_set_member_name(b, "by_tensor_args");
    if (p->flags & QH_PATTERN_OBS_BY_TENSOR_ARGS) {
      json_builder_begin_array(b);
      for (int j = 0; j < 3; j++)
        json_builder_add_int_value(b, p->observation_type_by_tensor_args[j]);
      json_builder_end_array(b);
    } else {
      json_builder_add_null_value(b);
    }
    json_builder_set_member_name(b, "fuser");
    json_builder_add_int_value(b, p->fuser);
    json_builder_set_member_name(b, "roles");
    json_builder_begin_array(b);
    for (size_t j = 0; j < p->n_input_roles; j++)
      json_builder_add_int_value(b, p->input_roles[j]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "dtype_configs");
    json_builder_begin_array(b);
    for (size_t j = 0; j < p->n_dtype_configs; j++) {
      const QhDTypeConfig *dc = p->dtype_configs[j];
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "name");
      json_builder_add_string_value(b, dc->name);
      json_builder_set_member_name(b, "is_dynamic");
      json_builder_add_boolean_value(b, (dc->flags & QH_DTYPE_CONFIG_IS_DYNAMIC) != 0);
      constraint(b, "input", dc->input);
      constraint(b, "output", dc->output);
      constraint(b, "weight", dc->weight);
      constraint(b, "bias", dc->bias);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  const QhQConfigEntry *global = NULL;
  for (size_t i = 0; i < bc->n_default_qconfig; i++)
    if (bc->default_qconfig[i]->match == QH_QCONFIG_MATCH_GLOBAL)
      global = bc->default_qconfig[i];
  json_builder_set_member_name(b, "default_qconfig");
  json_builder_begin_array(b);
  for (size_t i = 0; i < bc->n_default_qconfig; i++) {
    const QhQConfigEntry *e = bc->default_qconfig[i];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "match");
    json_builder_add_int_value(b, e->match);
    json_builder_set_member_name(b, "key");
    json_builder_add_string_value(b, e->key);
    json_builder_set_member_name(b, "none");
    json_builder_add_boolean_value(b, (e->flags & QH_QCONFIG_ENTRY_NONE) != 0);
    spec(b, "activation", e->activation);
    spec(b, "weight", e->weight);
    json_builder_set_member_name(b, "activation_is_global");
    json_builder_add_boolean_value(b, global && e->activation == global->activation);
    json_builder_set_member_name(b, "weight_is_global");
    json_builder_add_boolean_value(b, global && e->weight == global->weight);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
    return 2;
  }
  GError *error = NULL;
  QhPlugin *plugin = qh_plugin_load(argv[1], NULL, &error);
  if (plugin == NULL) {
    fprintf(stderr, "%s\n", error->message);
    g_error_free(error);
    return 1;
  }
  const QhPluginDesc *desc = qh_plugin_desc(plugin);
  if (desc->backend_config == NULL) {
    fprintf(stderr, "%s: no backend_config\n", argv[1]);
    qh_plugin_free(plugin);
    return 1;
  }
  JsonBuilder *b = json_builder_new();
  dump(b, desc->backend_config);
  JsonGenerator *gen = json_generator_new();
  JsonNode *root = json_builder_get_root(b);
  json_generator_set_root(gen, root);
  json_generator_set_pretty(gen, TRUE);
  char *text = json_generator_to_data(gen, NULL);
  puts(text);
  g_free(text);
  json_node_unref(root);
  g_object_unref(gen);
  g_object_unref(b);
  qh_plugin_free(plugin);
  return 0;
}
