/* NumPy .npy files: a strict parser for the preamble and the Python-dict header, the
 * readers built on it (whole image in memory, whole file, rows of a file through
 * pread) and the atomic writer. Every byte count comes from an untrusted file, so
 * the header is validated completely (dtype, order, bounded element count) and the
 * data length compared with the file's size before any data buffer is allocated. */
#include "io/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/npy-private.h"

/* '<' data is used in place and native data is written as '<'. */
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "qhost's .npy code assumes a little-endian host"
#endif

static const guint8 npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Longest key or dtype string accepted; real ones are at most 13 characters. */
#define MAX_TOKEN 32

gboolean qh_npy_parse_preamble(const guint8 *buf, gsize len, guint64 total_len,
                               gsize *preamble_len, gsize *header_len, int *major,
                               GError **error) {
  if (len < sizeof npy_magic || memcmp(buf, npy_magic, sizeof npy_magic) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "not a .npy file (bad magic)");
    return FALSE;
  }
  if (len < 8) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "truncated .npy preamble");
    return FALSE;
  }
  int maj = buf[6], min = buf[7];
  if (maj < 1 || maj > 3 || min != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "unsupported .npy format version %d.%d (qhost reads 1.0, 2.0 and 3.0)", maj, min);
    return FALSE;
  }
  gsize pre = maj == 1 ? 10 : 12;
  if (len < pre) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "truncated .npy preamble");
    return FALSE;
  }
  guint64 hlen = maj == 1 ? (guint64)buf[8] | (guint64)buf[9] << 8
                          : (guint64)buf[8] | (guint64)buf[9] << 8 | (guint64)buf[10] << 16 |
                                (guint64)buf[11] << 24;
  if (hlen > QH_NPY_MAX_HEADER) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT,
                "header length %" G_GUINT64_FORMAT " exceeds the limit of %d bytes", hlen,
                QH_NPY_MAX_HEADER);
    return FALSE;
  }
  if (pre + hlen > total_len) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "header length %" G_GUINT64_FORMAT " runs past the end of the file (%"
                G_GUINT64_FORMAT " bytes in all)", hlen, total_len);
    return FALSE;
  }
  *preamble_len = pre;
  *header_len = (gsize)hlen;
  *major = maj;
  return TRUE;
}

/* ---- the header dict: a tiny, strict subset of Python literal syntax ---- */

typedef struct {
  const char *start, *p, *end;
  int major;
} Lexer;

static gboolean syntax_error(Lexer *lx, GError **error, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static gboolean syntax_error(Lexer *lx, GError **error, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "malformed .npy header at byte %d: %s",
              (int)(lx->p - lx->start), what);
  g_free(what);
  return FALSE;
}

static void skip_space(Lexer *lx) {
  while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r'))
    lx->p++;
}

static gboolean at(const Lexer *lx, char c) { return lx->p < lx->end && *lx->p == c; }

static gboolean is_digit(const Lexer *lx) {
  return lx->p < lx->end && *lx->p >= '0' && *lx->p <= '9';
}

/* A quoted string of printable ASCII without escapes (all keys and dtype strings). */
static gboolean parse_string(Lexer *lx, char *buf, const char *what, GError **error) {
  if (!at(lx, '\'') && !at(lx, '"'))
    return syntax_error(lx, error, "expected a quoted string for %s", what);
  char quote = *lx->p++;
  size_t n = 0;
  while (lx->p < lx->end && *lx->p != quote) {
    unsigned char c = (unsigned char)*lx->p;
    if (c < 0x20 || c >= 0x7f || c == '\\')
      return syntax_error(lx, error, "unsupported character in %s", what);
    if (n + 1 >= MAX_TOKEN)
      return syntax_error(lx, error, "%s is too long", what);
    buf[n++] = (char)c;
    lx->p++;
  }
  if (lx->p >= lx->end)
    return syntax_error(lx, error, "unterminated string in %s", what);
  lx->p++;
  buf[n] = '\0';
  return TRUE;
}

static gboolean parse_word(Lexer *lx, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(lx->end - lx->p) < n || memcmp(lx->p, word, n) != 0)
    return FALSE;
  const char *q = lx->p + n;
  if (q < lx->end && (g_ascii_isalnum(*q) || *q == '_'))
    return FALSE;
  lx->p = q;
  return TRUE;
}

static gboolean parse_bool(Lexer *lx, gboolean *out, GError **error) {
  if (parse_word(lx, "True"))
    *out = TRUE;
  else if (parse_word(lx, "False"))
    *out = FALSE;
  else
    return syntax_error(lx, error, "'fortran_order' must be True or False");
  return TRUE;
}

static gboolean parse_dim(Lexer *lx, int64_t *out, GError **error) {
  if (at(lx, '-')) {
    const char *q = lx->p + 1;
    while (q < lx->end && *q >= '0' && *q <= '9' && q - lx->p < 20)
      q++;
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "negative dimension %.*s in the header's 'shape'",
                (int)(q - lx->p), lx->p);
    return FALSE;
  }
  if (!is_digit(lx))
    return syntax_error(lx, error, "expected a non-negative integer in 'shape'");
  if (*lx->p == '0' && lx->p + 1 < lx->end && lx->p[1] >= '0' && lx->p[1] <= '9')
    return syntax_error(lx, error, "integer with a leading zero in 'shape'");
  int64_t v = 0;
  while (is_digit(lx)) {
    int d = *lx->p - '0';
    if (v > (INT64_MAX - d) / 10) {
      g_set_error(error, QH_ERROR, QH_ERROR_LIMIT, "a dimension in the header's 'shape' is too large");
      return FALSE;
    }
    v = v * 10 + d;
    lx->p++;
  }
  /* Python 2 wrote longs as 5L; numpy still accepts them in 1.0 and 2.0 headers. */
  if (lx->major <= 2 && at(lx, 'L'))
    lx->p++;
  *out = v;
  return TRUE;
}

static gboolean parse_shape(Lexer *lx, QhShape *shape, GError **error) {
  if (!at(lx, '('))
    return syntax_error(lx, error, "'shape' must be a tuple");
  lx->p++;
  skip_space(lx);
  int n = 0;
  gboolean trailing_comma = FALSE;
  while (!at(lx, ')')) {
    int64_t d = 0;
    if (!parse_dim(lx, &d, error))
      return FALSE;
    if (n < QH_MAX_RANK)
      shape->dims[n] = d;
    n++;
    skip_space(lx);
    trailing_comma = FALSE;
    if (at(lx, ',')) {
      lx->p++;
      trailing_comma = TRUE;
      skip_space(lx);
    } else if (!at(lx, ')')) {
      return syntax_error(lx, error, "expected ',' or ')' in 'shape'");
    }
  }
  lx->p++;
  if (n == 1 && !trailing_comma)
    return syntax_error(lx, error, "'shape' is a parenthesised integer, not a tuple (write (N,))");
  if (n > QH_MAX_RANK) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "array rank %d exceeds the maximum of %d", n,
                QH_MAX_RANK);
    return FALSE;
  }
  shape->rank = n;
  return TRUE;
}

/* Map a dtype string to a QhDType, or explain why it is refused. */
static gboolean descr_to_dtype(const char *descr, QhDType *out, GError **error) {
  const char *p = descr;
  char order = '=';
  if (*p == '<' || *p == '>' || *p == '|' || *p == '=')
    order = *p++;
  char kind = *p ? *p++ : '\0';
  int size = 0;
  gboolean size_ok = *p != '\0';
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || size > 100000) {
      size_ok = FALSE;
      break;
    }
    size = size * 10 + (*p - '0');
  }
  QhDType dt = QH_DTYPE_UNDEFINED;
  if (size_ok) {
    if (kind == 'f' && size == 4)
      dt = QH_DTYPE_F32;
    else if (kind == 'u' && size == 1)
      dt = QH_DTYPE_U8;
    else if (kind == 'i' && size == 1)
      dt = QH_DTYPE_S8;
    else if (kind == 'u' && size == 2)
      dt = QH_DTYPE_U16;
    else if (kind == 'i' && size == 2)
      dt = QH_DTYPE_S16;
    else if (kind == 'i' && size == 4)
      dt = QH_DTYPE_S32;
    else if (kind == 'i' && size == 8)
      dt = QH_DTYPE_S64;
    else if (kind == 'b' && size == 1)
      dt = QH_DTYPE_BOOL;
  }
  if (dt != QH_DTYPE_UNDEFINED) {
    if (order == '>' && size > 1) {
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                  "big-endian dtype '%s' is not supported; save with .astype('<%c%d')", descr,
                  kind, size);
      return FALSE;
    }
    *out = dt;
    return TRUE;
  }
  if (kind == 'f' && size_ok)
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "dtype '%s' (float%d) is not supported; convert with .astype(np.float32)", descr,
                size * 8);
  else if (kind == 'c')
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "complex dtype '%s' is not supported", descr);
  else if (kind == 'U' || kind == 'S' || kind == 'a')
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "string dtype '%s' is not supported", descr);
  else if (kind == 'O')
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "object arrays (dtype '%s', Python pickles) are not supported", descr);
  else if (kind == 'V')
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "void/structured dtype '%s' is not supported",
                descr);
  else
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "dtype '%s' is not supported (qhost reads float32, uint8, int8, int32, int64 and bool)",
                descr);
  return FALSE;
}

gboolean qh_npy_parse_header(const char *text, gsize len, gsize preamble_len, int major,
                             QhNpyHeader *out, GError **error) {
  if (major == 3 && !g_utf8_validate_len(text, len, NULL)) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "format 3.0 header is not valid UTF-8");
    return FALSE;
  }
  Lexer lx = {text, text, text + len, major};
  char descr[MAX_TOKEN], key[MAX_TOKEN];
  gboolean fortran = FALSE, have_descr = FALSE, have_fortran = FALSE, have_shape = FALSE;
  QhShape shape = {0};
  if (!at(&lx, '{'))
    return syntax_error(&lx, error, "expected '{'");
  lx.p++;
  skip_space(&lx);
  while (!at(&lx, '}')) {
    if (!parse_string(&lx, key, "a key", error))
      return FALSE;
    skip_space(&lx);
    if (!at(&lx, ':'))
      return syntax_error(&lx, error, "expected ':' after key '%s'", key);
    lx.p++;
    skip_space(&lx);
    gboolean *seen;
    if (strcmp(key, "descr") == 0) {
      seen = &have_descr;
      if (at(&lx, '[')) {
        g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                    "structured dtypes (a list in 'descr') are not supported");
        return FALSE;
      }
      if (!*seen && !parse_string(&lx, descr, "'descr'", error))
        return FALSE;
    } else if (strcmp(key, "fortran_order") == 0) {
      seen = &have_fortran;
      if (!*seen && !parse_bool(&lx, &fortran, error))
        return FALSE;
    } else if (strcmp(key, "shape") == 0) {
      seen = &have_shape;
      if (!*seen && !parse_shape(&lx, &shape, error))
        return FALSE;
    } else {
      return syntax_error(&lx, error, "unexpected key '%s'", key);
    }
    if (*seen)
      return syntax_error(&lx, error, "key '%s' appears twice", key);
    *seen = TRUE;
    skip_space(&lx);
    if (at(&lx, ',')) {
      lx.p++;
      skip_space(&lx);
    } else if (!at(&lx, '}')) {
      return syntax_error(&lx, error, "expected ',' or '}'");
    }
  }
  lx.p++;
  skip_space(&lx);
  if (lx.p != lx.end)
    return syntax_error(&lx, error, "unexpected bytes after the dict");
  const char *missing = !have_descr ? "descr" : !have_fortran ? "fortran_order" : !have_shape ? "shape" : NULL;
  if (missing != NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "malformed .npy header: the '%s' key is missing",
                missing);
    return FALSE;
  }
  if (!descr_to_dtype(descr, &out->dtype, error))
    return FALSE;
  if (fortran) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "Fortran-order arrays are not supported; save with np.ascontiguousarray");
    return FALSE;
  }
  if (!qh_shape_numel(&shape, &out->numel, error))
    return FALSE;
  out->shape = shape;
  out->data_bytes = (guint64)out->numel * qh_dtype_size(out->dtype);
  out->data_offset = preamble_len + len;
  if (out->data_bytes > (guint64)G_MAXSIZE - QH_TENSOR_ALIGN) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT, "array of %" G_GUINT64_FORMAT
                " bytes does not fit this machine's address space", out->data_bytes);
    return FALSE;
  }
  return TRUE;
}

gboolean qh_npy_check_data_length(const QhNpyHeader *hdr, guint64 available, GError **error) {
  if (available < hdr->data_bytes) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "truncated data: expected %" G_GUINT64_FORMAT " bytes after the header, found %"
                G_GUINT64_FORMAT, hdr->data_bytes, available);
    return FALSE;
  }
  if (available > hdr->data_bytes) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "%" G_GUINT64_FORMAT " trailing bytes after the data (expected %" G_GUINT64_FORMAT
                " bytes after the header, found %" G_GUINT64_FORMAT ")",
                available - hdr->data_bytes, hdr->data_bytes, available);
    return FALSE;
  }
  return TRUE;
}

void qh_npy_normalize_bools(QhTensor *tensor) {
  if (tensor->dtype != QH_DTYPE_BOOL)
    return;
  guint8 *b = tensor->data;
  for (size_t i = 0; i < tensor->nbytes; i++)
    b[i] = b[i] != 0;
}

/* ---- reading ---- */

static QhTensor *parse_image(const guint8 *data, gsize len, GError **error) {
  gsize pre, hlen;
  int major;
  QhNpyHeader hdr;
  if (!qh_npy_parse_preamble(data, len, len, &pre, &hlen, &major, error) ||
      !qh_npy_parse_header((const char *)data + pre, hlen, pre, major, &hdr, error) ||
      !qh_npy_check_data_length(&hdr, len - hdr.data_offset, error))
    return NULL;
  QhTensor *t = qh_tensor_new(hdr.dtype, &hdr.shape, error);
  if (t == NULL)
    return NULL;
  if (hdr.data_bytes > 0)
    memcpy(t->data, data + hdr.data_offset, (size_t)hdr.data_bytes);
  qh_npy_normalize_bools(t);
  return t;
}

QhTensor *qh_npy_read_from_memory(const guint8 *data, gsize len, const char *name,
                                  GError **error) {
  QhTensor *t = parse_image(data, len, error);
  if (t == NULL)
    qh_error_prefix(error, name != NULL ? name : "<memory>");
  return t;
}

struct QhNpyReader {
  int fd;
  char *path;
  QhNpyHeader hdr;
};

static gboolean pread_full(int fd, void *buf, guint64 n, guint64 offset, GError **error) {
  guint8 *p = buf;
  while (n > 0) {
    size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
    ssize_t r = pread(fd, p, chunk, (off_t)offset);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "read failed: %s", g_strerror(errno));
      return FALSE;
    }
    if (r == 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "file shrank while being read");
      return FALSE;
    }
    p += r;
    n -= (guint64)r;
    offset += (guint64)r;
  }
  return TRUE;
}

static gboolean reader_open(QhNpyReader *rd, const char *path, GError **error) {
  rd->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (rd->fd < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "cannot open: %s", g_strerror(errno));
    return FALSE;
  }
  struct stat st;
  if (fstat(rd->fd, &st) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "cannot stat: %s", g_strerror(errno));
    return FALSE;
  }
  if (!S_ISREG(st.st_mode)) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "not a regular file");
    return FALSE;
  }
  guint64 size = (guint64)st.st_size;
  guint8 pre[QH_NPY_PREAMBLE_MAX];
  gsize n = size < sizeof pre ? (gsize)size : sizeof pre, pre_len, hlen;
  int major;
  if (!pread_full(rd->fd, pre, n, 0, error) ||
      !qh_npy_parse_preamble(pre, n, size, &pre_len, &hlen, &major, error))
    return FALSE;
  char *text = g_malloc(hlen + 1);
  gboolean ok = pread_full(rd->fd, text, hlen, pre_len, error) &&
                qh_npy_parse_header(text, hlen, pre_len, major, &rd->hdr, error) &&
                qh_npy_check_data_length(&rd->hdr, size - rd->hdr.data_offset, error);
  g_free(text);
  return ok;
}

QhNpyReader *qh_npy_reader_open(const char *path, GError **error) {
  QhNpyReader *rd = g_new0(QhNpyReader, 1);
  rd->path = g_strdup(path);
  if (!reader_open(rd, path, error)) {
    qh_error_prefix(error, path);
    qh_npy_reader_close(rd);
    return NULL;
  }
  return rd;
}

QhDType qh_npy_reader_dtype(const QhNpyReader *reader) { return reader->hdr.dtype; }

const QhShape *qh_npy_reader_shape(const QhNpyReader *reader) { return &reader->hdr.shape; }

/* A tensor of `shape` filled from `nbytes` of the file at `offset`. */
static QhTensor *read_span(QhNpyReader *rd, const QhShape *shape, guint64 offset, GError **error) {
  QhTensor *t = qh_tensor_new(rd->hdr.dtype, shape, error);
  if (t != NULL && !pread_full(rd->fd, t->data, t->nbytes, offset, error)) {
    qh_tensor_free(t);
    t = NULL;
  }
  if (t == NULL) {
    qh_error_prefix(error, rd->path);
    return NULL;
  }
  qh_npy_normalize_bools(t);
  return t;
}

QhTensor *qh_npy_reader_read_rows(QhNpyReader *reader, int64_t start, int64_t count,
                                  GError **error) {
  const QhNpyHeader *h = &reader->hdr;
  if (h->shape.rank == 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: a rank-0 array has no rows", reader->path);
    return NULL;
  }
  int64_t rows = h->shape.dims[0];
  if (start < 0 || count < 0 || start > rows || count > rows - start) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: cannot read %" G_GINT64_FORMAT " rows from row %" G_GINT64_FORMAT
                ": the array has %" G_GINT64_FORMAT " rows", reader->path, count, start, rows);
    return NULL;
  }
  guint64 row_bytes = rows > 0 ? h->data_bytes / (guint64)rows : 0;
  QhShape shape = h->shape;
  shape.dims[0] = count;
  return read_span(reader, &shape, h->data_offset + (guint64)start * row_bytes, error);
}

void qh_npy_reader_close(QhNpyReader *reader) {
  if (reader == NULL)
    return;
  if (reader->fd >= 0)
    close(reader->fd);
  g_free(reader->path);
  g_free(reader);
}

QhTensor *qh_npy_read(const char *path, GError **error) {
  QhNpyReader *rd = qh_npy_reader_open(path, error);
  if (rd == NULL)
    return NULL;
  QhTensor *t = read_span(rd, &rd->hdr.shape, rd->hdr.data_offset, error);
  qh_npy_reader_close(rd);
  return t;
}

/* ---- writing ---- */

static const char *dtype_to_descr(QhDType dtype) {
  switch (dtype) {
  case QH_DTYPE_F32: return "<f4";
  case QH_DTYPE_U8: return "|u1";
  case QH_DTYPE_S8: return "|i1";
  case QH_DTYPE_U16: return "<u2";
  case QH_DTYPE_S16: return "<i2";
  case QH_DTYPE_S32: return "<i4";
  case QH_DTYPE_S64: return "<i8";
  case QH_DTYPE_BOOL: return "|b1";
  default: return NULL;
  }
}

guint8 *qh_npy_format_header(const QhTensor *tensor, gsize *out_len, GError **error) {
  const char *descr = dtype_to_descr(tensor->dtype);
  if (descr == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "cannot write %s tensors to .npy",
                qh_dtype_name(tensor->dtype));
    return NULL;
  }
  int64_t numel;
  if (!qh_shape_numel(&tensor->shape, &numel, error))
    return NULL;
  if ((guint64)numel * qh_dtype_size(tensor->dtype) != tensor->nbytes ||
      (tensor->data == NULL && tensor->nbytes > 0)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "tensor's buffer does not match its shape");
    return NULL;
  }
  GString *d = g_string_new(NULL);
  g_string_append_printf(d, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < tensor->shape.rank; i++)
    g_string_append_printf(d, "%s%" G_GINT64_FORMAT, i ? ", " : "", tensor->shape.dims[i]);
  g_string_append(d, tensor->shape.rank == 1 ? ",), }" : "), }");
  /* numpy's rule: pad with spaces and a final newline so the data is 64-byte aligned. */
  gsize pre = 10, total = (pre + d->len + 1 + 63) / 64 * 64;
  if (total - pre > 65535) {
    pre = 12;
    total = (pre + d->len + 1 + 63) / 64 * 64;
  }
  gsize hlen = total - pre;
  guint8 *buf = g_malloc(total);
  memcpy(buf, npy_magic, sizeof npy_magic);
  buf[6] = pre == 10 ? 1 : 2;
  buf[7] = 0;
  for (gsize i = 0; i < pre - 8; i++)
    buf[8 + i] = (guint8)(hlen >> (8 * i));
  memcpy(buf + pre, d->str, d->len);
  memset(buf + pre + d->len, ' ', hlen - d->len - 1);
  buf[total - 1] = '\n';
  g_string_free(d, TRUE);
  *out_len = total;
  return buf;
}

char *qh_npy_temp_path(const char *path) {
  return g_strdup_printf("%s.tmp-%d-%08x", path, (int)getpid(), g_random_int());
}

static gboolean write_full(int fd, const void *buf, gsize n, GError **error) {
  const guint8 *p = buf;
  while (n > 0) {
    size_t chunk = n > (1u << 30) ? (1u << 30) : n;
    ssize_t w = write(fd, p, chunk);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "write failed: %s", g_strerror(errno));
      return FALSE;
    }
    p += w;
    n -= (gsize)w;
  }
  return TRUE;
}

gboolean qh_npy_write_atomic(const char *path, const void *const *parts, const gsize *sizes,
                             int n, GError **error) {
  char *tmp = NULL;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
    g_free(tmp);
    tmp = qh_npy_temp_path(path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot create a temporary file next to it: %s",
                path, g_strerror(errno));
    g_free(tmp);
    return FALSE;
  }
  gboolean ok = TRUE;
  for (int i = 0; ok && i < n; i++)
    ok = write_full(fd, parts[i], sizes[i], error);
  if (ok && fsync(fd) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "fsync failed: %s", g_strerror(errno));
    ok = FALSE;
  }
  if (close(fd) != 0 && ok) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "close failed: %s", g_strerror(errno));
    ok = FALSE;
  }
  if (ok && rename(tmp, path) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "cannot rename the temporary file into place: %s",
                g_strerror(errno));
    ok = FALSE;
  }
  if (!ok) {
    unlink(tmp);
    qh_error_prefix(error, path);
  }
  g_free(tmp);
  return ok;
}

gboolean qh_npy_write(const QhTensor *tensor, const char *path, GError **error) {
  gsize hlen;
  guint8 *header = qh_npy_format_header(tensor, &hlen, error);
  if (header == NULL) {
    qh_error_prefix(error, path);
    return FALSE;
  }
  const void *parts[2] = {header, tensor->data};
  gsize sizes[2] = {hlen, tensor->nbytes};
  gboolean ok = qh_npy_write_atomic(path, parts, sizes, tensor->nbytes > 0 ? 2 : 1, error);
  g_free(header);
  return ok;
}
