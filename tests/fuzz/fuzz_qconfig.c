/* libFuzzer target for --config files: any byte string, layered over fbgemm-like
 * defaults, must either load (and then resolve on a small graph) or fail with one
 * GError, without crashing or leaking. The parser takes a path, so each input is
 * written to a per-process temporary file first. Built as a real fuzzer with clang
 * (-DQHOST_FUZZ=ON) and, everywhere, as a replay of the seed corpus. */
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "core/log.h"
#include "quant/qconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const QhQuantSpec act = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
                                .ch_axis = -1, .flags = QH_SPEC_REDUCE_RANGE,
                                .observer = "HistogramObserver"};
static const QhQuantSpec weight = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                   .dtype = QH_DTYPE_INT8, .qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC,
                                   .ch_axis = 0, .observer = "PerChannelMinMaxObserver"};
static const QhQConfigEntry global = {QH_STRUCT_HEADER(QhQConfigEntry), QH_QCONFIG_MATCH_GLOBAL, 0, NULL,
                                      &act, &weight};
static const QhQConfigEntry conv = {QH_STRUCT_HEADER(QhQConfigEntry), QH_QCONFIG_MATCH_OBJECT_TYPE, 0, "Conv",
                                    &act, &weight};
static const QhQConfigEntry *const entries[] = {&global, &conv};
static const QhBackendConfig backend = {QH_STRUCT_HEADER(QhBackendConfig), "fuzz", 0, NULL, 0, entries, 2};

static QhGraph *small_graph(void) {
  QhGraph *g = qh_graph_new();
  int x = qh_graph_add_value(g, "x", NULL)->id, y = qh_graph_add_value(g, "y", NULL)->id;
  int z = qh_graph_add_value(g, "z", NULL)->id;
  qh_graph_add_node(g, "conv1", "Conv", "", 1, &x, 1, &y, NULL);
  qh_graph_add_node(g, "/layer4/relu", "Relu", "", 1, &y, 1, &z, NULL);
  return g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  qh_log_set_level(QH_LOG_ERROR);
  static char *path;
  if (path == NULL)
    path = g_strdup_printf("%s/qhost-fuzz-qconfig-%d.json", g_get_tmp_dir(), (int)getpid());
  if (!g_file_set_contents(path, (const char *)data, (gssize)size, NULL))
    return 0;
  GError *error = NULL;
  QhQConfigMapping *m = qh_qconfig_mapping_new(&backend, NULL, &error);
  g_assert(m != NULL && error == NULL);
  if (qh_qconfig_mapping_load_file(m, path, &error)) {
    g_assert(error == NULL);
    QhGraph *g = small_graph();
    for (int i = 0; i < qh_graph_n_nodes(g); i++)
      (void)qh_qconfig_resolve(m, g, qh_graph_node(g, i));
    qh_graph_free(g);
  } else {
    g_assert(error != NULL && g_utf8_validate(error->message, -1, NULL));
    g_clear_error(&error);
  }
  qh_qconfig_mapping_free(m);
  unlink(path);
  return 0;
}
