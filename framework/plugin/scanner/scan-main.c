/* qhost-plugin-scan: loads one plugin file, runs its entry point, validates the
 * descriptor and prints a JSON description on stdout (or {"error": "..."} with exit
 * status 1). It is a separate program so that a plugin that crashes or hangs while
 * loading takes down only this process (framework/plugin/scan.c spawns it). Whatever
 * the plugin writes to stdout or stderr while loading is captured and counted, so it
 * cannot corrupt the JSON and plugin-check can report it.
 * Usage: qhost-plugin-scan PATH [EXPECTED_NAME] */
#include <json-glib/json-glib.h>
#include <stdio.h>

#include "plugin/capture-private.h"
#include "plugin/plugin.h"

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: qhost-plugin-scan PATH [EXPECTED_NAME]\n");
    return 2;
  }
  QhOutputCapture capture;
  qh_output_capture_begin(&capture);
  GError *error = NULL;
  QhPluginInfo *info = qh_plugin_describe_file(argv[1], argc == 3 ? argv[2] : NULL, &error);
  long written = qh_output_capture_end(&capture);

  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  if (info) {
    info->entry_output_bytes = written;
    qh_plugin_info_to_json(info, b);
  } else {
    json_builder_set_member_name(b, "error");
    json_builder_add_string_value(b, error->message);
  }
  json_builder_end_object(b);
  JsonGenerator *gen = json_generator_new();
  JsonNode *root = json_builder_get_root(b);
  json_generator_set_root(gen, root);
  char *text = json_generator_to_data(gen, NULL);
  puts(text);
  g_free(text);
  json_node_unref(root);
  g_object_unref(gen);
  g_object_unref(b);
  int status = info ? 0 : 1;
  qh_plugin_info_free(info);
  g_clear_error(&error);
  return status;
}
