/* The test plugins' one shared helper, in its own translation unit (see rounding.h). */
#include "rounding.h"

int32_t abi_test_round(float v) {
  if (v > 1e9f)
    v = 1e9f;
  if (v < -1e9f)
    v = -1e9f;
  return v >= 0 ? (int32_t)(v + 0.5f) : -(int32_t)(-v + 0.5f);
}
