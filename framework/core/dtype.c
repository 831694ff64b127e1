/* Element type table and the float16 conversions that loading f16 initializers needs. */
#include "core/dtype.h"

#include <string.h>

size_t qh_dtype_size(QhDType dtype) {
  switch (dtype) {
  case QH_DTYPE_F32: return 4;
  case QH_DTYPE_U8: return 1;
  case QH_DTYPE_S8: return 1;
  case QH_DTYPE_U16: return 2;
  case QH_DTYPE_S16: return 2;
  case QH_DTYPE_S32: return 4;
  case QH_DTYPE_S64: return 8;
  case QH_DTYPE_BOOL: return 1;
  case QH_DTYPE_F16: return 2;
  case QH_DTYPE_U4: return 1;
  case QH_DTYPE_S4: return 1;
  default: return 0;
  }
}

const char *qh_dtype_name(QhDType dtype) {
  switch (dtype) {
  case QH_DTYPE_F32: return "float32";
  case QH_DTYPE_U8: return "uint8";
  case QH_DTYPE_S8: return "int8";
  case QH_DTYPE_U16: return "uint16";
  case QH_DTYPE_S16: return "int16";
  case QH_DTYPE_S32: return "int32";
  case QH_DTYPE_S64: return "int64";
  case QH_DTYPE_BOOL: return "bool";
  case QH_DTYPE_F16: return "float16";
  case QH_DTYPE_U4: return "uint4";
  case QH_DTYPE_S4: return "int4";
  default: return "undefined";
  }
}

gboolean qh_dtype_is_supported(int code) {
  return code != QH_DTYPE_UNDEFINED && qh_dtype_size((QhDType)code) != 0;
}

gboolean qh_dtype_is_4bit(QhDType dtype) { return dtype == QH_DTYPE_U4 || dtype == QH_DTYPE_S4; }

void qh_int4_pack(const guint8 *unpacked, size_t n, guint8 *packed) {
  for (size_t i = 0; i < n; i += 2) {
    guint8 lo = unpacked[i] & 0xF, hi = i + 1 < n ? unpacked[i + 1] & 0xF : 0;
    packed[i / 2] = (guint8)(lo | (hi << 4));
  }
}

void qh_int4_unpack(const guint8 *packed, size_t n, QhDType dtype, guint8 *unpacked) {
  for (size_t i = 0; i < n; i++) {
    guint8 v = (packed[i / 2] >> (4 * (i & 1))) & 0xF;
    unpacked[i] = dtype == QH_DTYPE_S4 && v >= 8 ? (guint8)(v | 0xF0) : v; /* sign-extend */
  }
}

float qh_f16_to_f32(guint16 h) {
  guint32 sign = (guint32)(h & 0x8000) << 16;
  guint32 exp = (h >> 10) & 0x1f;
  guint32 mant = h & 0x3ff;
  guint32 bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: renormalise */
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        exp--;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

guint16 qh_f32_to_f16(float f) {
  guint32 x;
  memcpy(&x, &f, sizeof x);
  guint32 sign = (x >> 16) & 0x8000;
  gint32 exp = (gint32)((x >> 23) & 0xff) - 127 + 15;
  guint32 mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) /* inf or nan */
    return (guint16)(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 0x1f)
    return (guint16)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10)
      return (guint16)sign;
    mant |= 0x800000;
    guint32 shift = (guint32)(14 - exp);
    guint32 half = 1u << (shift - 1);
    guint32 rounded = (mant + half - 1 + ((mant >> shift) & 1)) >> shift;
    return (guint16)(sign | rounded);
  }
  guint32 rounded = mant + 0xfff + ((mant >> 13) & 1);
  if (rounded & 0x800000) {
    rounded = 0;
    exp++;
    if (exp >= 0x1f)
      return (guint16)(sign | 0x7c00);
  }
  return (guint16)(sign | ((guint32)exp << 10) | (rounded >> 13));
}
