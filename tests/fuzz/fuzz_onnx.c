/* libFuzzer target for the ONNX loader: any byte string must either load or fail
 * with a GError, never crash, leak or allocate without bound. A model that loads is
 * also planned for its declared shapes (shapes only, as `qhost inspect` does), since
 * shape inference and constant folding are the next code to trust the file's
 * contents. Built as a real fuzzer with clang (-DQHOST_FUZZ=ON) and, everywhere, as
 * a replay of the seed corpus through replay.c. */
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "exec/plan.h"
#include "io/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  GError *error = NULL;
  qh_log_set_level(QH_LOG_ERROR);
  QhGraph *graph = qh_onnx_load_from_memory(data, size, "fuzz", NULL, &error);
  if (graph == NULL) {
    g_assert(error != NULL);
    g_clear_error(&error);
    return 0;
  }
  g_assert(error == NULL);
  QhPlan *plan = qh_plan_new(graph, NULL, TRUE, &error);
  g_assert((plan == NULL) == (error != NULL));
  if (plan != NULL)
    qh_plan_free(plan);
  g_clear_error(&error);
  qh_graph_free(graph);
  return 0;
}
