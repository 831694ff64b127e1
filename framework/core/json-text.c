/* One place that turns a finished json-glib builder into indented text: the quantize
 * reports (static and dynamic) and the runner's JSON listings all print the same way. */
#include "core/json-text.h"

char *qh_json_text(JsonBuilder *builder) {
  JsonGenerator *gen = json_generator_new();
  JsonNode *root = json_builder_get_root(builder);
  json_generator_set_root(gen, root);
  json_generator_set_pretty(gen, TRUE);
  char *text = json_generator_to_data(gen, NULL);
  json_node_unref(root);
  g_object_unref(gen);
  g_object_unref(builder);
  return text;
}
