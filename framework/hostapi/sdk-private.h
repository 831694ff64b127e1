/* How host code includes the plugin SDK.
 *
 * The SDK defines its constants as macros with ONNX's and the host's own values
 * (QH_DTYPE_*, QH_ATTR_*, QH_LOG_*), and some share names with the host's enums.
 * Including the host headers first declares the enums before the macros exist; the
 * macros then expand to the same numbers, which the assertions below pin down. Every
 * host file that needs the SDK includes this header instead of the SDK directly. */
#ifndef QH_HOSTAPI_SDK_PRIVATE_H
#define QH_HOSTAPI_SDK_PRIVATE_H

#include "core/dtype.h"
#include "core/error.h"
#include "core/graph.h"
#include "core/log.h"
#include "core/tensor.h"

#include "qhost/qhost-plugin.h"

_Static_assert(QH_DTYPE_FLOAT == 1 && QH_DTYPE_UINT8 == 2 && QH_DTYPE_INT8 == 3 &&
                   QH_DTYPE_INT32 == 6 && QH_DTYPE_INT64 == 7 && QH_DTYPE_FLOAT16 == 10,
               "SDK dtype codes are ONNX's");
_Static_assert(QH_LOG_ERROR == 0 && QH_LOG_WARNING == 1 && QH_LOG_INFO == 2 && QH_LOG_DEBUG == 3,
               "SDK log levels are the host's");
_Static_assert(QH_ATTR_INT == 2 && QH_ATTR_INTS == 7 && QH_ATTR_STRINGS == 8,
               "SDK attribute types are ONNX's");

#endif
