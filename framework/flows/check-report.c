/* The plugin-check report (qhost_plugin_check, `qhost plugin-check NAME|PATH`), the
 * conformance report a vendor runs first: every check's verdict and one line of detail,
 * and whether the plugin conforms (no check failed); text or JSON (schema_version 1). */
#include <stdio.h>

#include "flows/flows.h"
#include "conformance/check.h"
#include "hostapi/sdk-private.h"

static const char *const verdicts[] = {"PASS", "FAIL", "SKIP"};

static void print_json(FILE *out, const QhCheckReport *report, gboolean conforms) {
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
  json_builder_set_member_name(b, "patterns_never_ran");
  json_builder_begin_array(b);
  for (guint i = 0; i < report->unrun_patterns->len; i++)
    json_builder_add_string_value(b, report->unrun_patterns->pdata[i]);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "conforms");
  json_builder_add_boolean_value(b, conforms);
  json_builder_end_object(b);
  qh_json_print(out, b);
}

static void print_text(FILE *out, const QhCheckReport *report, gboolean conforms) {
  if (report->info)
    fprintf(out, "plugin-check: %s %s (ABI %u.%u) %s\n", report->info->name, report->info->version,
           QH_ABI_VERSION_MAJOR(report->info->abi_version),
           QH_ABI_VERSION_MINOR(report->info->abi_version), report->info->path);
  int counts[3] = {0, 0, 0};
  for (guint i = 0; i < report->results->len; i++) {
    const QhCheckResult *r = report->results->pdata[i];
    counts[r->verdict]++;
    fprintf(out, "  %s  %s: %s\n", verdicts[r->verdict], r->name, r->detail);
  }
  for (guint i = 0; i < report->findings->len; i++)
    fprintf(out, "  plugin said: %s\n", (const char *)report->findings->pdata[i]);
  if (report->unrun_patterns->len > 0) {
    GString *names = g_string_new(NULL);
    for (guint i = 0; i < report->unrun_patterns->len; i++)
      g_string_append_printf(names, "%s%s", i ? ", " : "", (const char *)report->unrun_patterns->pdata[i]);
    fprintf(out, "lowering patterns whose kernel never ran: %s\n", names->str);
    g_string_free(names, TRUE);
  }
  fprintf(out, "conforms: %s (%d passed, %d failed, %d skipped)\n", conforms ? "yes" : "no", counts[0],
         counts[1], counts[2]);
}

gboolean qh_plugin_check_report(const QhPluginSearch *search, const char *name_or_path,
                                char *const *backend_opts, gboolean json, FILE *out,
                                gboolean *conforms, GError **error) {
  QhCheckReport *report = qh_plugin_check(search, name_or_path, backend_opts, error);
  if (report == NULL)
    return FALSE;
  *conforms = qh_check_report_conforms(report);
  if (json)
    print_json(out, report, *conforms);
  else
    print_text(out, report, *conforms);
  qh_check_report_free(report);
  return TRUE;
}
