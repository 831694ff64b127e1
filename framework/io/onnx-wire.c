/* A pre-scan of ONNX's protobuf wire format that bounds message nesting before
 * protobuf-c unpacks anything. protobuf-c recurses once per nested message with no
 * limit, so a file whose subgraph attributes nest 100,000 deep would exhaust the
 * stack; this walk follows the same generated descriptors (so it knows which fields
 * are messages), recurses at most max_depth times, and checks every tag, varint and
 * length against the end of the buffer, so unpacking only ever sees bounded input. */
#include "io/onnx-private.h"

#include "core/error.h"

typedef struct {
  const guint8 *base;
  int max_depth;
  GError **error;
} Scan;

static gboolean fail(Scan *s, const guint8 *at, const char *what) {
  g_set_error(s->error, QH_ERROR, QH_ERROR_PARSE,
              "not a valid ONNX model (protobuf parse failed: %s at byte %td)", what, at - s->base);
  return FALSE;
}

/* Reads a varint of at most 10 bytes; NULL when it runs past end or is too long. */
static const guint8 *read_varint(const guint8 *p, const guint8 *end, guint64 *out) {
  guint64 v = 0;
  for (int shift = 0; shift < 70 && p < end; shift += 7) {
    guint8 b = *p++;
    if (shift == 63 && (b & 0x7e) != 0)
      return NULL; /* more than 64 bits */
    v |= (guint64)(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return p;
    }
  }
  return NULL;
}

static gboolean scan_message(Scan *s, const guint8 *p, const guint8 *end,
                             const ProtobufCMessageDescriptor *desc, int depth) {
  if (depth > s->max_depth) {
    g_set_error(s->error, QH_ERROR, QH_ERROR_LIMIT,
                "message nesting deeper than %d levels (%s at byte %td)", s->max_depth,
                desc ? desc->short_name : "message", p - s->base);
    return FALSE;
  }
  while (p < end) {
    const guint8 *field_start = p;
    guint64 tag;
    p = read_varint(p, end, &tag);
    if (p == NULL)
      return fail(s, field_start, "truncated field tag");
    guint64 number = tag >> 3;
    if (number == 0 || number > 0x1fffffff)
      return fail(s, field_start, "invalid field number");
    switch (tag & 7) {
    case PROTOBUF_C_WIRE_TYPE_VARINT: {
      guint64 v;
      p = read_varint(p, end, &v);
      if (p == NULL)
        return fail(s, field_start, "truncated varint");
      break;
    }
    case PROTOBUF_C_WIRE_TYPE_64BIT:
      if (end - p < 8)
        return fail(s, field_start, "truncated 64-bit field");
      p += 8;
      break;
    case PROTOBUF_C_WIRE_TYPE_32BIT:
      if (end - p < 4)
        return fail(s, field_start, "truncated 32-bit field");
      p += 4;
      break;
    case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
      guint64 n;
      p = read_varint(p, end, &n);
      if (p == NULL)
        return fail(s, field_start, "truncated length");
      if (n > (guint64)(end - p))
        return fail(s, field_start, "length runs past the end of the data");
      const ProtobufCFieldDescriptor *f =
          desc ? protobuf_c_message_descriptor_get_field(desc, (unsigned)number) : NULL;
      if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
          !scan_message(s, p, p + n, f->descriptor, depth + 1))
        return FALSE;
      p += n;
      break;
    }
    default: /* groups (3, 4) are deprecated and protobuf-c refuses them too */
      return fail(s, field_start, "unsupported wire type");
    }
  }
  return TRUE;
}

gboolean qh_onnx_wire_check(const guint8 *data, gsize len, const ProtobufCMessageDescriptor *desc,
                            int max_depth, GError **error) {
  Scan s = {data, max_depth, error};
  return scan_message(&s, data, data + len, desc, 1);
}
