/* qhost plugin-check NAME|PATH: the conformance report a vendor runs first. Every check
 * prints its verdict and one line of detail; the exit status is 0 only when no check
 * failed. With --json the same report is printed as JSON (schema_version 1). */
#include <stdio.h>

#include "cli/cli.h"
#include "conformance/check.h"
#include "hostapi/sdk-private.h"

static const char *const verdicts[] = {"PASS", "FAIL", "SKIP"};

static void print_json(const QhCheckReport *report, gboolean conforms) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "schema_version");
  json_builder_add_int_value(b, 1);
  if (report->info) {
    json_builder_set_member_name(b, "plugin");
    json_builder_begin_object(b);
    qh_plugin_info_to_json(report->info, b);
    json_builder_end_object(b);
  }
  json_builder_set_member_name(b, "checks");
  json_builder_begin_array(b);
  for (guint i = 0; i < report->results->len; i++) {
    const QhCheckResult *r = report->results->pdata[i];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, r->name);
    json_builder_set_member_name(b, "verdict");
    json_builder_add_string_value(b, verdicts[r->verdict]);
    json_builder_set_member_name(b, "detail");
    json_builder_add_string_value(b, r->detail);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "plugin_messages");
  json_builder_begin_array(b);
  for (guint i = 0; i < report->findings->len; i++)
    json_builder_add_string_value(b, report->findings->pdata[i]);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "conforms");
  json_builder_add_boolean_value(b, conforms);
  json_builder_end_object(b);
  qh_cli_print_json(b);
}

static void print_text(const QhCheckReport *report, gboolean conforms) {
  if (report->info)
    printf("plugin-check: %s %s (ABI %u.%u) %s\n", report->info->name, report->info->version,
           QH_ABI_VERSION_MAJOR(report->info->abi_version),
           QH_ABI_VERSION_MINOR(report->info->abi_version), report->info->path);
  int counts[3] = {0, 0, 0};
  for (guint i = 0; i < report->results->len; i++) {
    const QhCheckResult *r = report->results->pdata[i];
    counts[r->verdict]++;
    printf("  %s  %s: %s\n", verdicts[r->verdict], r->name, r->detail);
  }
  for (guint i = 0; i < report->findings->len; i++)
    printf("  plugin said: %s\n", (const char *)report->findings->pdata[i]);
  printf("conforms: %s (%d passed, %d failed, %d skipped)\n", conforms ? "yes" : "no", counts[0],
         counts[1], counts[2]);
}

int qh_cli_plugin_check(int argc, char **argv) {
  QhCliCommon common = {.uses_plugins = TRUE};
  gboolean json = FALSE;
  const GOptionEntry entries[] = {
      {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print JSON (schema_version 1)", NULL},
      G_OPTION_ENTRY_NULL};
  if (!qh_cli_parse("plugin-check", "NAME|PATH",
                    "Load a plugin, validate its descriptor, run each callback group it supplies on\n"
                    "small built-in inputs and print a conformance report. Exit status 0 only if\n"
                    "it conforms. --backend-opt values are passed to its instance.",
                    entries, &common, &argc, &argv))
    return QH_EXIT_USAGE;
  if (argc != 2)
    return qh_cli_usage_error("plugin-check", argc < 2 ? "missing NAME or PATH" : "unexpected argument '%s'",
                              argc < 2 ? "" : argv[2]);
  QhPluginSearch search;
  qh_cli_plugin_search(&common, &search);
  GError *error = NULL;
  QhCheckReport *report = qh_plugin_check(&search, argv[1], common.backend_opts, &error);
  if (report == NULL)
    return qh_cli_report(error);
  gboolean conforms = qh_check_report_conforms(report);
  if (json)
    print_json(report, conforms);
  else
    print_text(report, conforms);
  qh_check_report_free(report);
  return conforms ? QH_EXIT_OK : QH_EXIT_FAILURE;
}
