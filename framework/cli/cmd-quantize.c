/* qhost quantize and qhost calibrate: the command-line side of the quantization flow
 * (qhost_quantize, qhost_calibrate): options, their combinations, the report and the
 * one-line error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static gboolean parse_shard(const char *text, int *index, int *count) {
  char *end = NULL;
  long i = strtol(text, &end, 10);
  if (end == text || *end != '/')
    return FALSE;
  const char *rest = end + 1;
  long n = strtol(rest, &end, 10);
  if (end == rest || *end != '\0' || n < 1 || n > 100000 || i < 0 || i >= n)
    return FALSE;
  *index = (int)i;
  *count = (int)n;
  return TRUE;
}

/* What quantize and calibrate share. */
static QhostOptions *quantize_options(const QhCliCommon *common, const char *backend, const char *calib,
                                      const char *config) {
  QhostOptions *options = qh_cli_options(common, backend);
  if (calib)
    qhost_status_free(qhost_options_set_calibration_file(options, calib));
  if (config)
    qhost_status_free(qhost_options_set_qconfig_file(options, config));
  qhost_status_free(qhost_options_set_progress(options, qh_cli_is_tty() && !common->quiet));
  return options;
}

int qh_cli_quantize(int argc, char **argv) {
  QhCliCommon common = {.uses_plugins = TRUE};
  char *backend = NULL, *calib = NULL, *output = NULL, *config = NULL, *report = NULL, *probe = NULL;
  char **stats = NULL;
  gboolean dynamic = FALSE, per_channel = FALSE;
  int opset = 0;
  const GOptionEntry entries[] = {
      {"dynamic", 0, 0, G_OPTION_ARG_NONE, &dynamic,
       "Dynamic quantization, no calibration: DynamicQuantizeLinear + MatMulInteger for every Linear", NULL},
      {"dynamic-per-channel", 0, 0, G_OPTION_ARG_NONE, &per_channel,
       "With --dynamic: one weight scale per output channel (default: per tensor)", NULL},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend, "Backend plugin (name or path)", "NAME"},
      {"calib", 0, 0, G_OPTION_ARG_FILENAME, &calib, "Calibration data: .npy (samples first), directory, .npz",
       "CALIB"},
      {"stats", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &stats,
       "Merge these shard statistics (qhost calibrate) instead of calibrating (repeatable)", "STATS"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "The QDQ ONNX model to write", "OUT.onnx"},
      {"config", 0, 0, G_OPTION_ARG_FILENAME, &config, "QConfig JSON layered over the backend's default",
       "QCONFIG.json"},
      {"report", 0, 0, G_OPTION_ARG_FILENAME, &report, "Also write the report as JSON", "R.json"},
      {"probe", 0, 0, G_OPTION_ARG_FILENAME, &probe,
       "Input for the SQNR report (default: the first calibration sample)", "X.npy"},
      {"opset", 0, 0, G_OPTION_ARG_INT, &opset,
       "Write the QDQ model at this opset, 13 to 21 (default: the model's; 21 for 16-bit types)", "N"},
      G_OPTION_ENTRY_NULL};
  int status = QH_EXIT_USAGE;
  if (!qh_cli_parse("quantize", "MODEL.onnx",
                    "Quantize MODEL.onnx for a backend: annotate, calibrate (or merge --stats), convert to a QDQ\n"
                    "ONNX model, and report what was quantized, what stayed float and why, and the error.\n"
                    "With --dynamic: no calibration; ONNX Runtime's dynamic format for every Linear.",
                    entries, &common, &argc, &argv))
    goto out;
  if (argc != 2) {
    status = qh_cli_usage_error("quantize", argc < 2 ? "missing MODEL.onnx" : "more than one model given");
    goto out;
  }
  if (per_channel && !dynamic) {
    status = qh_cli_usage_error("quantize", "--dynamic-per-channel needs --dynamic");
    goto out;
  }
  if (dynamic && (calib || stats || config || probe || opset)) {
    status = qh_cli_usage_error("quantize", "--dynamic takes no --calib, --stats, --config, --probe or --opset");
    goto out;
  }
  if (dynamic && output == NULL) {
    status = qh_cli_usage_error("quantize", "-o is required");
    goto out;
  }
  if (!dynamic && (backend == NULL || output == NULL || (calib == NULL && stats == NULL))) {
    status = qh_cli_usage_error("quantize", "--backend, -o and --calib (or --stats) are required");
    goto out;
  }
  QhostOptions *options = quantize_options(&common, backend, calib, config);
  qhost_status_free(qhost_options_set_dynamic(options, dynamic));
  qhost_status_free(qhost_options_set_dynamic_per_channel(options, per_channel));
  for (char **p = stats; p && *p; p++)
    qhost_status_free(qhost_options_add_stats_file(options, *p));
  if (report)
    qhost_status_free(qhost_options_set_report_file(options, report));
  if (probe)
    qhost_status_free(qhost_options_set_probe_file(options, probe));
  if (opset != 0) {
    QhostStatus *bad = qhost_options_set_opset(options, opset);
    if (bad) {
      qhost_options_free(options);
      status = qh_cli_fail(bad);
      goto out;
    }
  }
  char *text = NULL;
  QhostStatus *st = qhost_quantize(argv[1], options, output, NULL, common.quiet ? NULL : &text);
  qhost_options_free(options);
  status = st ? qh_cli_fail(st) : QH_EXIT_OK;
  if (text)
    qh_cli_print(text);
out:
  g_free(backend);
  g_free(calib);
  g_free(output);
  g_free(config);
  g_free(report);
  g_free(probe);
  g_strfreev(stats);
  return status;
}

int qh_cli_calibrate(int argc, char **argv) {
  QhCliCommon common = {.uses_plugins = TRUE};
  char *backend = NULL, *calib = NULL, *output = NULL, *config = NULL, *shard = NULL;
  const GOptionEntry entries[] = {
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend, "Backend plugin (name or path)", "NAME"},
      {"calib", 0, 0, G_OPTION_ARG_FILENAME, &calib, "Calibration data: .npy (samples first), directory, .npz",
       "CALIB"},
      {"shard", 0, 0, G_OPTION_ARG_STRING, &shard, "Calibrate only shard I of N (contiguous blocks of samples)",
       "I/N"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "The statistics file to write", "STATS"},
      {"config", 0, 0, G_OPTION_ARG_FILENAME, &config, "QConfig JSON layered over the backend's default",
       "QCONFIG.json"},
      G_OPTION_ENTRY_NULL};
  int status = QH_EXIT_USAGE;
  if (!qh_cli_parse("calibrate", "MODEL.onnx",
                    "Calibrate MODEL.onnx for a backend and save the observers' statistics, for one shard of the\n"
                    "data; 'qhost quantize --stats S1 --stats S2 ...' merges shards and converts.",
                    entries, &common, &argc, &argv))
    goto out;
  if (argc != 2) {
    status = qh_cli_usage_error("calibrate", argc < 2 ? "missing MODEL.onnx" : "more than one model given");
    goto out;
  }
  if (backend == NULL || output == NULL || calib == NULL) {
    status = qh_cli_usage_error("calibrate", "--backend, --calib and -o are required");
    goto out;
  }
  int index = 0, count = 0;
  if (shard && !parse_shard(shard, &index, &count)) {
    status = qh_cli_usage_error("calibrate", "--shard wants I/N with 0 <= I < N");
    goto out;
  }
  QhostOptions *options = quantize_options(&common, backend, calib, config);
  qhost_status_free(qhost_options_set_shard(options, index, count));
  int64_t samples = 0, points = 0;
  QhostStatus *st = qhost_calibrate(argv[1], options, output, &samples, &points);
  qhost_options_free(options);
  status = st ? qh_cli_fail(st) : QH_EXIT_OK;
  if (st == NULL && !common.quiet)
    printf("%s: %" G_GINT64_FORMAT " samples, %" G_GINT64_FORMAT " quantization points\n", output, samples,
           points);
out:
  g_free(backend);
  g_free(calib);
  g_free(output);
  g_free(config);
  g_free(shard);
  return status;
}
