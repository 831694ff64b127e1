/* Element types of tensors and values. The numeric values are ONNX's
 * TensorProto.DataType codes, so converting from and to ONNX is the identity for the
 * types qhost supports. */
#ifndef QH_CORE_DTYPE_H
#define QH_CORE_DTYPE_H

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

typedef enum {
  QH_DTYPE_UNDEFINED = 0,
  QH_DTYPE_F32 = 1,
  QH_DTYPE_U8 = 2,
  QH_DTYPE_S8 = 3,
  QH_DTYPE_U16 = 4,
  QH_DTYPE_S16 = 5,
  QH_DTYPE_S32 = 6,
  QH_DTYPE_S64 = 7,
  QH_DTYPE_BOOL = 9,
  QH_DTYPE_F16 = 10,
  /* 4-bit integers (opset 21): held unpacked in memory, one element per byte (int4
   * sign-extended), so kernels index them like 8-bit data; the ONNX file packs two per
   * byte, low nibble first (qh_int4_pack / qh_int4_unpack). */
  QH_DTYPE_U4 = 21,
  QH_DTYPE_S4 = 22,
} QhDType;

/* Size of one element in memory in bytes (1 for the 4-bit types); 0 for
 * QH_DTYPE_UNDEFINED or an unknown code. */
size_t qh_dtype_size(QhDType dtype);

/* Lower-case name ("float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "bool",
 * "float16");
 * "undefined" for anything else. The returned string is static. */
const char *qh_dtype_name(QhDType dtype);

/* TRUE when code is one of the supported QhDType values. */
gboolean qh_dtype_is_supported(int code);

/* TRUE for QH_DTYPE_U4 and QH_DTYPE_S4. */
gboolean qh_dtype_is_4bit(QhDType dtype);

/* Pack n unpacked 4-bit elements (one per byte) into (n + 1) / 2 bytes, low nibble first
 * (ONNX's layout; the last high nibble is 0 when n is odd). */
void qh_int4_pack(const guint8 *unpacked, size_t n, guint8 *packed);

/* The inverse: n elements of dtype (U4 or S4, which is sign-extended) from packed. */
void qh_int4_unpack(const guint8 *packed, size_t n, QhDType dtype, guint8 *unpacked);

/* Convert between IEEE half and single precision (round to nearest even). */
float qh_f16_to_f32(guint16 h);
guint16 qh_f32_to_f16(float f);

G_END_DECLS

#endif
