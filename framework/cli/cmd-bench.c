/* `qhost bench`: warm-up, then timed runs of a model on the host's reference path or a
 * backend's int8 kernels, against its fp32 twin in the same run (qhost_bench). */
#include "cli/cli.h"

int qh_cli_bench(int argc, char **argv) {
  char *input = NULL, *backend = NULL;
  int warmup = 3, runs = 20;
  gboolean as_json = FALSE, no_fp32 = FALSE;
  QhCliCommon common = {.uses_plugins = TRUE};
  const GOptionEntry entries[] = {
      {"input", 'i', 0, G_OPTION_ARG_FILENAME, &input,
       "Input data (default: seeded random values at the declared shapes)", "X.npy|X.npz"},
      {"warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "Untimed runs first (default 3)", "N"},
      {"runs", 0, 0, G_OPTION_ARG_INT, &runs, "Timed runs (default 20)", "N"},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend,
       "Run the units this backend plugin claims on its int8 kernels and show the coverage", "NAME"},
      {"no-fp32", 0, 0, G_OPTION_ARG_NONE, &no_fp32,
       "Do not time the fp32 twin (the model with its Q/DQ dropped)", NULL},
      {"json", 0, 0, G_OPTION_ARG_NONE, &as_json, "Print JSON (schema_version 1)", NULL},
      G_OPTION_ENTRY_NULL};
  int status = QH_EXIT_USAGE;
  if (!qh_cli_parse("bench", "MODEL.onnx",
                    "Time MODEL.onnx on the host's reference kernels, or with --backend on a plugin's "
                    "int8 kernels for the QDQ units it claims. A QDQ model (or any model with "
                    "--backend) is timed against its fp32 twin in the same run.",
                    entries, &common, &argc, &argv))
    goto out;
  if (argc != 2) {
    status = qh_cli_usage_error("bench", argc < 2 ? "missing MODEL.onnx" : "more than one model given");
    goto out;
  }
  if (warmup < 0 || runs < 1 || runs > 100000) {
    status = qh_cli_usage_error("bench", "--warmup must be >= 0 and --runs between 1 and 100000");
    goto out;
  }
  QhostOptions *options = qh_cli_options(&common, backend);
  qhost_status_free(qhost_options_set_bench_runs(options, warmup, runs));
  qhost_status_free(qhost_options_set_bench_fp32(options, !no_fp32));
  qhost_status_free(qhost_options_set_progress(options, qh_cli_is_tty()));
  if (input)
    qhost_status_free(qhost_options_set_input_file(options, input));
  char *report = NULL;
  QhostStatus *st = qhost_bench(argv[1], options, as_json ? QHOST_FORMAT_JSON : QHOST_FORMAT_TEXT, &report);
  qhost_options_free(options);
  if (st) {
    status = qh_cli_fail(st);
    goto out;
  }
  qh_cli_print(report);
  status = QH_EXIT_OK;
out:
  g_free(input);
  g_free(backend);
  return status;
}
