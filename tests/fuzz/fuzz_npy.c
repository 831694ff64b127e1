/* libFuzzer target for the .npy parser: any byte string must either parse into a
 * tensor whose byte count matches its shape or fail with a GError, without crashing,
 * leaking or allocating more than the data could justify. Built as a real fuzzer
 * with clang (-DQHOST_FUZZ=ON) and, everywhere, as a replay of the seed corpus. */
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "io/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  GError *error = NULL;
  qh_log_set_level(QH_LOG_ERROR);
  QhTensor *tensor = qh_npy_read_from_memory(data, size, "fuzz", &error);
  if (tensor == NULL) {
    g_assert(error != NULL);
    g_clear_error(&error);
    return 0;
  }
  g_assert(error == NULL);
  int64_t numel = qh_tensor_numel(tensor);
  /* The data must account for every element: a parser that believed a short file
   * would leave this tensor larger than its input. */
  g_assert(tensor->nbytes == (size_t)numel * qh_dtype_size(tensor->dtype));
  g_assert(tensor->nbytes <= size);
  qh_tensor_free(tensor);
  return 0;
}
