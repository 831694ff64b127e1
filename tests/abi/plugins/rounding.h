/* Rounding shared by the test plugins, compiled as a second translation unit of each
 * plugin. Because it has external linkage, only hidden visibility keeps it out of the
 * plugin's dynamic symbol table, which is what test_loader.py's "exports" case checks. */
#ifndef QH_ABI_TEST_ROUNDING_H
#define QH_ABI_TEST_ROUNDING_H

#include <stdint.h>

/* v rounded half away from zero, v clamped to [-1e9, 1e9] first (no libm needed). */
int32_t abi_test_round(float v);

#endif
