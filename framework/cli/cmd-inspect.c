/* `qhost inspect`: what a model holds (qhost_model_inspect), as text or JSON. */
#include "cli/cli.h"

int qh_cli_inspect(int argc, char **argv) {
  gboolean as_json = FALSE;
  char *backend = NULL;
  QhCliCommon common = {.uses_plugins = TRUE};
  const GOptionEntry entries[] = {
      {"json", 0, 0, G_OPTION_ARG_NONE, &as_json, "Print JSON (schema_version 1)", NULL},
      {"backend", 0, 0, G_OPTION_ARG_STRING, &backend,
       "Show which QDQ node units this backend plugin would run on its int8 kernels", "NAME"},
      G_OPTION_ENTRY_NULL};
  if (!qh_cli_parse("inspect", "MODEL.onnx",
                    "Show MODEL.onnx's inputs, outputs, nodes with their output shapes, "
                    "parameters, MACs, opsets, producer and quantization parameters; with "
                    "--backend, which node units the plugin claims and why it declines the others.",
                    entries, &common, &argc, &argv))
    return QH_EXIT_USAGE;
  if (argc != 2) {
    g_free(backend);
    return qh_cli_usage_error("inspect", argc < 2 ? "missing MODEL.onnx" : "more than one model given");
  }
  QhostModel *model = NULL;
  QhostOptions *options = qh_cli_options(&common, backend);
  char *text = NULL;
  QhostStatus *st = qhost_model_load(argv[1], &model);
  if (st == NULL)
    st = qhost_model_inspect(model, options, as_json ? QHOST_FORMAT_JSON : QHOST_FORMAT_TEXT, &text);
  int status = st ? qh_cli_fail(st) : QH_EXIT_OK;
  if (text)
    qh_cli_print(text);
  qhost_model_free(model);
  qhost_options_free(options);
  g_free(backend);
  return status;
}
