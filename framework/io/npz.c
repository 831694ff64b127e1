/* NumPy .npz archives through libzip: reading every NAME.npy member (stored, as
 * np.savez writes them, or deflated, as np.savez_compressed does) and writing
 * stored archives atomically. A member is streamed: its preamble and header are
 * read and validated first, the declared sizes are checked against the archive's
 * size and deflate's maximum ratio, and only then is the tensor allocated and the
 * data read straight into it, so a hostile archive cannot make qhost allocate far
 * more than the data it really holds. */
#include "io/npy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

#include "core/error.h"
#include "io/npy-private.h"

/* The largest .npy a member may hold: QH_MAX_ELEMENTS 8-byte elements and a header. */
#define MEMBER_MAX_BYTES \
  ((guint64)QH_MAX_ELEMENTS * 8 + QH_NPY_PREAMBLE_MAX + QH_NPY_MAX_HEADER)
/* Deflate cannot expand by more than 1032:1 (a 258-byte match in 2 bits); the slack
 * covers block and stream overheads of tiny members. */
#define DEFLATE_MAX_RATIO 1032
#define DEFLATE_SLACK 4096
/* 1980-01-01 12:00 UTC: the DOS epoch in every time zone, so archives are reproducible. */
#define FIXED_MTIME ((time_t)315576000)

void qh_named_tensor_free(QhNamedTensor *nt) {
  if (nt == NULL)
    return;
  g_free(nt->name);
  qh_tensor_free(nt->tensor);
  g_free(nt);
}

static void named_tensor_free(gpointer p) { qh_named_tensor_free(p); }

static gboolean zread_full(zip_file_t *zf, void *buf, guint64 n, GError **error) {
  guint8 *p = buf;
  while (n > 0) {
    zip_uint64_t chunk = n > (1u << 30) ? (1u << 30) : n;
    zip_int64_t r = zip_fread(zf, p, chunk);
    if (r < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "cannot read: %s", zip_file_strerror(zf));
      return FALSE;
    }
    if (r == 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "data ends before its declared size");
      return FALSE;
    }
    p += r;
    n -= (guint64)r;
  }
  return TRUE;
}

/* Refuse sizes that cannot be honest before anything is read or allocated. */
static gboolean check_member_sizes(const zip_stat_t *st, guint64 archive_size, GError **error) {
  if (st->comp_method != ZIP_CM_STORE && st->comp_method != ZIP_CM_DEFLATE) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "compression method %d is not supported (only stored and deflated)",
                (int)st->comp_method);
    return FALSE;
  }
  if ((st->valid & ZIP_STAT_ENCRYPTION_METHOD) && st->encryption_method != ZIP_EM_NONE) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "encrypted members are not supported");
    return FALSE;
  }
  if (st->size > MEMBER_MAX_BYTES) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT,
                "uncompressed size of %" G_GUINT64_FORMAT " bytes exceeds the limit of %"
                G_GUINT64_FORMAT, (guint64)st->size, MEMBER_MAX_BYTES);
    return FALSE;
  }
  if (st->comp_size > archive_size ||
      (st->comp_method == ZIP_CM_STORE && st->size != st->comp_size) ||
      (st->comp_method == ZIP_CM_DEFLATE &&
       st->size > st->comp_size * DEFLATE_MAX_RATIO + DEFLATE_SLACK)) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "implausible sizes (%" G_GUINT64_FORMAT " bytes from %" G_GUINT64_FORMAT
                " compressed in a %" G_GUINT64_FORMAT "-byte archive)",
                (guint64)st->size, (guint64)st->comp_size, archive_size);
    return FALSE;
  }
  return TRUE;
}

static QhTensor *read_member_data(zip_file_t *zf, const zip_stat_t *st, GError **error) {
  guint64 size = st->size;
  /* Version 1.0 has a 10-byte preamble, 2.0 and 3.0 a 12-byte one: read 10 first so
   * no header byte is consumed before its length is known. */
  guint8 pre[QH_NPY_PREAMBLE_MAX];
  gsize n = size < 10 ? (gsize)size : 10, pre_len, hlen;
  int major;
  if (!zread_full(zf, pre, n, error))
    return NULL;
  if (n == 10 && (pre[6] == 2 || pre[6] == 3) && size >= 12) {
    if (!zread_full(zf, pre + 10, 2, error))
      return NULL;
    n = 12;
  }
  if (!qh_npy_parse_preamble(pre, n, size, &pre_len, &hlen, &major, error))
    return NULL;
  char *text = g_malloc(hlen + 1);
  QhNpyHeader hdr;
  gboolean ok = zread_full(zf, text, hlen, error) &&
                qh_npy_parse_header(text, hlen, pre_len, major, &hdr, error) &&
                qh_npy_check_data_length(&hdr, size - hdr.data_offset, error);
  g_free(text);
  if (!ok)
    return NULL;
  QhTensor *t = qh_tensor_new(hdr.dtype, &hdr.shape, error);
  if (t == NULL)
    return NULL;
  /* Reading past the end makes libzip verify the CRC. */
  guint8 extra;
  zip_int64_t r = -2;
  if (!zread_full(zf, t->data, t->nbytes, error) || (r = zip_fread(zf, &extra, 1)) != 0) {
    if (r == -1)
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s", zip_file_strerror(zf));
    else if (r > 0)
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "data runs past its declared size");
    qh_tensor_free(t);
    return NULL;
  }
  qh_npy_normalize_bools(t);
  return t;
}

static QhTensor *read_member(zip_t *za, zip_uint64_t index, const zip_stat_t *st,
                             guint64 archive_size, GError **error) {
  if (!check_member_sizes(st, archive_size, error))
    return NULL;
  zip_file_t *zf = zip_fopen_index(za, index, 0);
  if (zf == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "cannot open: %s", zip_strerror(za));
    return NULL;
  }
  QhTensor *t = read_member_data(zf, st, error);
  int rc = zip_fclose(zf);
  if (t != NULL && rc != 0) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, rc);
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
    qh_tensor_free(t);
    t = NULL;
  }
  return t;
}

/* Read the members in archive order; names and duplicates are checked here. */
static gboolean read_members(zip_t *za, const char *path, guint64 archive_size, GPtrArray *out,
                             GError **error) {
  zip_int64_t count = zip_get_num_entries(za, 0);
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  gboolean ok = TRUE;
  for (zip_int64_t i = 0; ok && i < count; i++) {
    zip_stat_t st;
    zip_uint64_t need = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) != 0 || (st.valid & need) != need) {
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: cannot read entry %" G_GINT64_FORMAT
                  " of the archive: %s", path, (gint64)i, zip_strerror(za));
      ok = FALSE;
      break;
    }
    char *shown = g_strescape(st.name, NULL);
    size_t len = strlen(st.name);
    if (len <= 4 || strcmp(st.name + len - 4, ".npy") != 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: member '%s' is not a .npy file", path, shown);
      ok = FALSE;
    } else if (g_hash_table_contains(seen, st.name)) {
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: member '%s' appears twice", path, shown);
      ok = FALSE;
    } else {
      QhTensor *t = read_member(za, (zip_uint64_t)i, &st, archive_size, error);
      if (t == NULL) {
        g_prefix_error(error, "%s: member '%s': ", path, shown);
        ok = FALSE;
      } else {
        QhNamedTensor *nt = g_new0(QhNamedTensor, 1);
        nt->name = g_strndup(st.name, len - 4);
        nt->tensor = t;
        g_ptr_array_add(out, nt);
        g_hash_table_add(seen, g_strdup(st.name));
      }
    }
    g_free(shown);
  }
  g_hash_table_destroy(seen);
  return ok;
}

GPtrArray *qh_npz_read(const char *path, GError **error) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot open: %s", path, g_strerror(errno));
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: not a regular file", path);
    return NULL;
  }
  int zerr = 0;
  zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
  if (za == NULL && zerr == ZIP_ER_EXISTS) {
    /* libzip's name for a duplicated member name ("File already exists") misleads */
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: two members have the same name", path);
    return NULL;
  }
  if (za == NULL) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, zerr);
    g_set_error(error, QH_ERROR, zerr == ZIP_ER_OPEN || zerr == ZIP_ER_READ ? QH_ERROR_IO : QH_ERROR_PARSE,
                "%s: not a readable .npz (zip) archive: %s", path, zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return NULL;
  }
  GPtrArray *out = g_ptr_array_new_with_free_func(named_tensor_free);
  if (!read_members(za, path, (guint64)sb.st_size, out, error)) {
    g_ptr_array_unref(out);
    out = NULL;
  }
  zip_discard(za);
  return out;
}

static gboolean has_control_char(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      return TRUE;
  return FALSE;
}

static gboolean check_names(const char *path, const char *const *names,
                            const QhTensor *const *tensors, int n, GError **error) {
  GHashTable *seen = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean ok = TRUE;
  for (int i = 0; ok && i < n; i++) {
    const char *why = NULL;
    if (names[i] == NULL || names[i][0] == '\0')
      why = "is empty";
    else if (!g_utf8_validate(names[i], -1, NULL))
      why = "is not valid UTF-8";
    else if (has_control_char(names[i]))
      why = "contains a control character";
    else if (g_hash_table_contains(seen, names[i]))
      why = "appears twice";
    else if (tensors[i] == NULL)
      why = "has no tensor";
    if (why != NULL) {
      char *shown = g_strescape(names[i] != NULL ? names[i] : "", NULL);
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: array name '%s' %s", path, shown, why);
      g_free(shown);
      ok = FALSE;
    } else {
      g_hash_table_add(seen, (gpointer)names[i]);
    }
  }
  g_hash_table_destroy(seen);
  return ok;
}

/* Add every member to a new archive at tmp and close it (libzip writes the file only
 * in zip_close, through its own temporary next to tmp). */
static gboolean write_archive(const char *tmp, const char *const *names,
                              const QhTensor *const *tensors, guint8 **headers,
                              const gsize *header_lens, int n, GError **error) {
  int zerr = 0;
  zip_t *za = zip_open(tmp, ZIP_CREATE | ZIP_EXCL, &zerr);
  if (za == NULL) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, zerr);
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "cannot create the archive: %s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return FALSE;
  }
  for (int i = 0; i < n; i++) {
    zip_buffer_fragment_t frags[2] = {{headers[i], header_lens[i]},
                                      {tensors[i]->data, tensors[i]->nbytes}};
    zip_source_t *src = zip_source_buffer_fragment(za, frags, tensors[i]->nbytes > 0 ? 2 : 1, 0);
    char *member = g_strconcat(names[i], ".npy", NULL);
    zip_int64_t idx = src != NULL ? zip_file_add(za, member, src, ZIP_FL_ENC_UTF_8) : -1;
    g_free(member);
    if (idx < 0 || zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0 ||
        zip_file_set_mtime(za, (zip_uint64_t)idx, FIXED_MTIME, 0) != 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "cannot add member '%s.npy': %s", names[i],
                  zip_strerror(za));
      if (src != NULL && idx < 0)
        zip_source_free(src);
      zip_discard(za);
      return FALSE;
    }
  }
  if (zip_close(za) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "cannot write: %s", zip_strerror(za));
    zip_discard(za);
    return FALSE;
  }
  return TRUE;
}

gboolean qh_npz_write(const char *path, const char *const *names, const QhTensor *const *tensors,
                      int n, GError **error) {
  g_return_val_if_fail(n == 0 || (names != NULL && tensors != NULL), FALSE);
  if (n < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: negative array count %d", path, n);
    return FALSE;
  }
  if (!check_names(path, names, tensors, n, error))
    return FALSE;
  if (n == 0) {
    /* libzip deletes rather than writes an empty archive: write the bare end record. */
    static const guint8 empty_zip[22] = {'P', 'K', 5, 6};
    const void *parts[1] = {empty_zip};
    gsize sizes[1] = {sizeof empty_zip};
    return qh_npy_write_atomic(path, parts, sizes, 1, error);
  }
  guint8 **headers = g_new0(guint8 *, n);
  gsize *header_lens = g_new0(gsize, n);
  gboolean ok = TRUE;
  for (int i = 0; ok && i < n; i++) {
    headers[i] = qh_npy_format_header(tensors[i], &header_lens[i], error);
    if (headers[i] == NULL) {
      g_prefix_error(error, "%s: array '%s': ", path, names[i]);
      ok = FALSE;
    }
  }
  char *tmp = qh_npy_temp_path(path);
  if (ok) {
    ok = write_archive(tmp, names, tensors, headers, header_lens, n, error);
    if (ok && rename(tmp, path) != 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "cannot rename the temporary file into place: %s",
                  g_strerror(errno));
      ok = FALSE;
    }
    if (!ok) {
      unlink(tmp);
      qh_error_prefix(error, path);
    }
  }
  g_free(tmp);
  for (int i = 0; i < n; i++)
    g_free(headers[i]);
  g_free(headers);
  g_free(header_lens);
  return ok;
}
