/* Unit tests of .npy and .npz I/O: round trips of every dtype and rank, hand-built
 * headers of each format version, files numpy wrote (values checked one by one),
 * row access through QhNpyReader, hostile inputs (each must fail with a specific
 * message and bounded memory) and writes that fail without leaving files behind. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "core/error.h"
#include "io/npy.h"

#define FIXTURES QH_SOURCE_DIR "/tests/unit/data/npy/"

static char *tmpdir;

static char *tmp_path(const char *name) { return g_build_filename(tmpdir, name, NULL); }

static int cmp_names(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of the scratch directory, to prove failed writes leave nothing. */
static char *dir_listing(void) {
  GDir *d = g_dir_open(tmpdir, 0, NULL);
  g_assert_nonnull(d);
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *n;
  while ((n = g_dir_read_name(d)) != NULL)
    g_ptr_array_add(names, g_strdup(n));
  g_dir_close(d);
  g_ptr_array_sort(names, cmp_names);
  g_ptr_array_add(names, NULL);
  char *s = g_strjoinv(",", (char **)names->pdata);
  g_ptr_array_unref(names);
  return s;
}

/* A .npy image: magic, version major.0, a header length field holding hlen (or the
 * dict's length when hlen < 0), the dict and then ndata bytes of data. */
static guint8 *build(int major, const char *dict, long hlen, const void *data, gsize ndata,
                     gsize *out_len) {
  gsize pre = major == 1 ? 10 : 12, dlen = strlen(dict);
  if (hlen < 0)
    hlen = (long)dlen;
  guint8 *img = g_malloc0(pre + dlen + ndata + 1);
  memcpy(img, "\x93NUMPY", 6);
  img[6] = (guint8)major;
  for (gsize i = 8; i < pre; i++)
    img[i] = (guint8)((unsigned long)hlen >> (8 * (i - 8)));
  memcpy(img + pre, dict, dlen);
  if (ndata > 0)
    memcpy(img + pre + dlen, data, ndata);
  *out_len = pre + dlen + ndata;
  return img;
}

static void assert_error(GError *error, int code, const char *prefix, const char *fragment) {
  g_assert_nonnull(error);
  if (!g_str_has_prefix(error->message, prefix) || strstr(error->message, fragment) == NULL ||
      strchr(error->message, '\n') != NULL)
    g_error("message '%s' lacks prefix '%s' or fragment '%s'", error->message, prefix, fragment);
  g_assert_error(error, QH_ERROR, code);
}

/* Parsing the image from memory and from a file must fail the same way. */
static void expect_bad(const guint8 *img, gsize len, int code, const char *fragment) {
  GError *error = NULL;
  g_assert_null(qh_npy_read_from_memory(img, len, "img.npy", &error));
  assert_error(error, code, "img.npy: ", fragment);
  g_clear_error(&error);

  char *path = tmp_path("bad.npy");
  g_assert_true(g_file_set_contents(path, (const char *)img, (gssize)len, NULL));
  char *prefix = g_strconcat(path, ": ", NULL);
  g_assert_null(qh_npy_read(path, &error));
  assert_error(error, code, prefix, fragment);
  g_clear_error(&error);
  g_assert_null(qh_npy_reader_open(path, &error));
  assert_error(error, code, prefix, fragment);
  g_clear_error(&error);
  unlink(path);
  g_free(prefix);
  g_free(path);
}

static void expect_bad_dict(const char *dict, int code, const char *fragment) {
  static const float data[6] = {0};
  gsize len;
  guint8 *img = build(1, dict, -1, data, sizeof data, &len);
  expect_bad(img, len, code, fragment);
  g_free(img);
}

/* Deterministic contents per dtype, computed independently of the code under test. */
static void fill(QhTensor *t) {
  int64_t n = qh_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    switch (t->dtype) {
    case QH_DTYPE_F32: ((float *)t->data)[i] = (float)i * 0.5f - 3.25f; break;
    case QH_DTYPE_U8: ((guint8 *)t->data)[i] = (guint8)(i * 37 + 200); break;
    case QH_DTYPE_S8: ((gint8 *)t->data)[i] = (gint8)(i * 37 - 128); break;
    case QH_DTYPE_S32: ((gint32 *)t->data)[i] = (gint32)(i * 1000003 - 2000000000); break;
    case QH_DTYPE_S64: ((gint64 *)t->data)[i] = i * INT64_C(1000000000007) - (INT64_C(1) << 62); break;
    case QH_DTYPE_BOOL: ((guint8 *)t->data)[i] = (guint8)(i % 3 == 0); break;
    default: g_assert_not_reached();
    }
  }
}

static void assert_same(const QhTensor *a, const QhTensor *b) {
  g_assert_cmpint(a->dtype, ==, b->dtype);
  g_assert_true(qh_shape_equal(&a->shape, &b->shape));
  g_assert_cmpuint(a->nbytes, ==, b->nbytes);
  if (a->nbytes > 0)
    g_assert_cmpmem(a->data, a->nbytes, b->data, b->nbytes);
}

static void test_round_trip(void) {
  static const QhDType dtypes[] = {QH_DTYPE_F32, QH_DTYPE_U8, QH_DTYPE_S8,
                                   QH_DTYPE_S32, QH_DTYPE_S64, QH_DTYPE_BOOL};
  static const int64_t dims[] = {2, 3, 1, 4};
  char *path = tmp_path("rt.npy");
  for (gsize k = 0; k < G_N_ELEMENTS(dtypes); k++) {
    for (int rank = 0; rank <= 5; rank++) {
      /* rank 5 stands for a zero-size array of shape (3, 0) */
      QhShape shape = rank < 5 ? qh_shape_make(rank, dims) : qh_shape_make(2, (int64_t[]){3, 0});
      GError *error = NULL;
      QhTensor *t = qh_tensor_new(dtypes[k], &shape, &error);
      g_assert_no_error(error);
      fill(t);
      g_assert_true(qh_npy_write(t, path, &error));
      g_assert_no_error(error);

      gchar *bytes;
      gsize len;
      g_assert_true(g_file_get_contents(path, &bytes, &len, NULL));
      guint8 *b = (guint8 *)bytes;
      g_assert_cmpint(b[6], ==, 1);
      gsize hlen = b[8] | (gsize)b[9] << 8;
      g_assert_cmpuint((10 + hlen) % 64, ==, 0);
      g_assert_cmpint(b[10 + hlen - 1], ==, '\n');
      g_assert_cmpuint(len, ==, 10 + hlen + t->nbytes);

      QhTensor *u = qh_npy_read(path, &error);
      g_assert_no_error(error);
      assert_same(t, u);
      qh_tensor_free(u);
      u = qh_npy_read_from_memory(b, len, "mem", &error);
      g_assert_no_error(error);
      assert_same(t, u);
      qh_tensor_free(u);
      g_free(bytes);
      qh_tensor_free(t);
    }
  }
  g_free(path);
}

/* qhost's header must be byte for byte what numpy writes for the same array. */
static void test_same_bytes_as_numpy(void) {
  const char *fixtures[] = {"f32_2x3.npy", "u8.npy", "i64.npy", "scalar_f32.npy", "bool.npy"};
  char *path = tmp_path("same.npy");
  for (gsize i = 0; i < G_N_ELEMENTS(fixtures); i++) {
    char *src = g_strconcat(FIXTURES, fixtures[i], NULL);
    GError *error = NULL;
    QhTensor *t = qh_npy_read(src, &error);
    g_assert_no_error(error);
    g_assert_true(qh_npy_write(t, path, &error));
    gchar *a, *b;
    gsize na, nb;
    g_assert_true(g_file_get_contents(src, &a, &na, NULL));
    g_assert_true(g_file_get_contents(path, &b, &nb, NULL));
    g_assert_cmpmem(a, na, b, nb);
    g_free(a);
    g_free(b);
    qh_tensor_free(t);
    g_free(src);
  }
  g_free(path);
}

static void check_versions_and_dicts(int major, const char *dict, int rank, int64_t d0, int numel) {
  static const float data[2] = {1.5f, -2.0f};
  gsize len;
  gsize ndata = (gsize)numel * 4;
  guint8 *img = build(major, dict, -1, data, ndata, &len);
  GError *error = NULL;
  QhTensor *t = qh_npy_read_from_memory(img, len, "v", &error);
  if (error != NULL)
    g_error("v%d header %s: %s", major, dict, error->message);
  g_assert_cmpint(t->dtype, ==, QH_DTYPE_F32);
  g_assert_cmpint(t->shape.rank, ==, rank);
  if (rank > 0)
    g_assert_cmpint(t->shape.dims[0], ==, d0);
  g_assert_cmpmem(t->data, t->nbytes, data, ndata);
  qh_tensor_free(t);
  g_free(img);
}

static void test_header_variants(void) {
  for (int major = 1; major <= 3; major++) {
    check_versions_and_dicts(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, 2, 2);
    check_versions_and_dicts(major, "{\"shape\":(2,),\"descr\":\"<f4\",\"fortran_order\":False}\n", 1, 2, 2);
    check_versions_and_dicts(major, "{'fortran_order': False, 'shape': (), 'descr': '<f4'}      \n", 0, 0, 1);
    check_versions_and_dicts(major, "{ 'descr' : '<f4' ,\n 'fortran_order' : False ,\n 'shape' : ( 1 , 2 , ) , }", 2, 1, 2);
  }
  check_versions_and_dicts(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }", 1, 2, 2);
  check_versions_and_dicts(1, "{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }", 1, 2, 2);

  /* byte order is irrelevant for one-byte types */
  static const guint8 bytes[3] = {0, 200, 255};
  const char *descrs[] = {"|u1", "<u1", ">u1", "=u1"};
  for (gsize i = 0; i < G_N_ELEMENTS(descrs); i++) {
    char *dict = g_strdup_printf("{'descr': '%s', 'fortran_order': False, 'shape': (3,), }", descrs[i]);
    gsize len;
    guint8 *img = build(1, dict, -1, bytes, 3, &len);
    GError *error = NULL;
    QhTensor *t = qh_npy_read_from_memory(img, len, "u", &error);
    g_assert_no_error(error);
    g_assert_cmpint(t->dtype, ==, QH_DTYPE_U8);
    g_assert_cmpmem(t->data, 3, bytes, 3);
    qh_tensor_free(t);
    g_free(img);
    g_free(dict);
  }

  /* bools other than 0/1 are normalised */
  gsize len;
  guint8 *img = build(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", -1, bytes, 3, &len);
  QhTensor *t = qh_npy_read_from_memory(img, len, "b", NULL);
  g_assert_nonnull(t);
  g_assert_cmpmem(t->data, 3, ((guint8[]){0, 1, 1}), 3);
  qh_tensor_free(t);
  g_free(img);
}

static QhTensor *read_fixture(const char *name, QhDType dtype, int rank, const int64_t *dims) {
  char *path = g_strconcat(FIXTURES, name, NULL);
  GError *error = NULL;
  QhTensor *t = qh_npy_read(path, &error);
  g_assert_no_error(error);
  g_assert_cmpint(t->dtype, ==, dtype);
  QhShape want = qh_shape_make(rank, dims);
  g_assert_true(qh_shape_equal(&t->shape, &want));
  g_free(path);
  return t;
}

static void test_numpy_fixtures(void) {
  QhTensor *t = read_fixture("f32_2x3.npy", QH_DTYPE_F32, 2, (int64_t[]){2, 3});
  const float f[] = {-0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.75f};
  g_assert_cmpmem(t->data, t->nbytes, f, sizeof f);
  qh_tensor_free(t);

  t = read_fixture("u8.npy", QH_DTYPE_U8, 1, (int64_t[]){5});
  g_assert_cmpmem(t->data, t->nbytes, ((guint8[]){0, 1, 127, 128, 255}), 5);
  qh_tensor_free(t);

  t = read_fixture("i8.npy", QH_DTYPE_S8, 1, (int64_t[]){5});
  g_assert_cmpmem(t->data, t->nbytes, ((gint8[]){-128, -1, 0, 1, 127}), 5);
  qh_tensor_free(t);

  t = read_fixture("i32.npy", QH_DTYPE_S32, 2, (int64_t[]){2, 2});
  const gint32 i32[] = {G_MININT32, -1, 0, G_MAXINT32};
  g_assert_cmpmem(t->data, t->nbytes, i32, sizeof i32);
  qh_tensor_free(t);

  t = read_fixture("i64.npy", QH_DTYPE_S64, 1, (int64_t[]){4});
  const gint64 i64[] = {G_MININT64, -1, 0, G_MAXINT64};
  g_assert_cmpmem(t->data, t->nbytes, i64, sizeof i64);
  qh_tensor_free(t);

  t = read_fixture("bool.npy", QH_DTYPE_BOOL, 1, (int64_t[]){3});
  g_assert_cmpmem(t->data, t->nbytes, ((guint8[]){1, 0, 1}), 3);
  qh_tensor_free(t);

  t = read_fixture("scalar_f32.npy", QH_DTYPE_F32, 0, NULL);
  g_assert_cmpfloat(((float *)t->data)[0], ==, 3.5f);
  qh_tensor_free(t);

  gchar *raw;
  gsize len;
  g_assert_true(g_file_get_contents(FIXTURES "v2_f32.npy", &raw, &len, NULL));
  g_assert_cmpint(raw[6], ==, 2); /* numpy really wrote format 2.0 */
  g_free(raw);
  t = read_fixture("v2_f32.npy", QH_DTYPE_F32, 2, (int64_t[]){2, 2});
  const float v2[] = {1.5f, -2.0f, 0.25f, 8.0f};
  g_assert_cmpmem(t->data, t->nbytes, v2, sizeof v2);
  qh_tensor_free(t);
}

static void check_member(GPtrArray *arr, guint i, const char *name, QhDType dtype, int rank,
                         const int64_t *dims, const void *data, gsize n) {
  QhNamedTensor *nt = g_ptr_array_index(arr, i);
  g_assert_cmpstr(nt->name, ==, name);
  g_assert_cmpint(nt->tensor->dtype, ==, dtype);
  QhShape want = qh_shape_make(rank, dims);
  g_assert_true(qh_shape_equal(&nt->tensor->shape, &want));
  g_assert_cmpmem(nt->tensor->data, nt->tensor->nbytes, data, n);
}

static void test_npz_fixtures(void) {
  GError *error = NULL;
  GPtrArray *arr = qh_npz_read(FIXTURES "two.npz", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(arr->len, ==, 2);
  check_member(arr, 0, "weights", QH_DTYPE_S32, 1, (int64_t[]){3}, (gint32[]){1, 2, 3}, 12);
  check_member(arr, 1, "x", QH_DTYPE_F32, 2, (int64_t[]){2, 1}, (float[]){0.5f, -0.5f}, 8);
  g_ptr_array_unref(arr);

  arr = qh_npz_read(FIXTURES "compressed.npz", &error);
  g_assert_no_error(error);
  g_assert_cmpuint(arr->len, ==, 2);
  guint8 sevens[16];
  memset(sevens, 7, sizeof sevens);
  check_member(arr, 0, "a", QH_DTYPE_U8, 2, (int64_t[]){4, 4}, sevens, 16);
  check_member(arr, 1, "b", QH_DTYPE_S64, 1, (int64_t[]){3}, (gint64[]){-1, 2, -3}, 24);
  g_ptr_array_unref(arr);
}

static void test_npz_round_trip(void) {
  GError *error = NULL;
  QhShape s0 = qh_shape_make(2, (int64_t[]){2, 2}), s1 = qh_shape_make(0, NULL),
          s2 = qh_shape_make(1, (int64_t[]){0});
  QhTensor *t[3] = {qh_tensor_new(QH_DTYPE_F32, &s0, NULL), qh_tensor_new(QH_DTYPE_U8, &s1, NULL),
                    qh_tensor_new(QH_DTYPE_S64, &s2, NULL)};
  for (int i = 0; i < 3; i++)
    fill(t[i]);
  const char *names[3] = {"input.1", "zz", "empty"};
  char *path = tmp_path("rt.npz");
  g_assert_true(qh_npz_write(path, names, (const QhTensor *const *)t, 3, &error));
  g_assert_no_error(error);
  GPtrArray *arr = qh_npz_read(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(arr->len, ==, 3);
  for (int i = 0; i < 3; i++) {
    QhNamedTensor *nt = g_ptr_array_index(arr, i);
    g_assert_cmpstr(nt->name, ==, names[i]);
    assert_same(nt->tensor, t[i]);
  }
  g_ptr_array_unref(arr);

  /* an archive without arrays */
  g_assert_true(qh_npz_write(path, NULL, NULL, 0, &error));
  arr = qh_npz_read(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(arr->len, ==, 0);
  g_ptr_array_unref(arr);

  /* duplicate names are refused and write nothing */
  char *before = dir_listing();
  char *dup = tmp_path("dup.npz");
  const char *dupnames[2] = {"a", "a"};
  g_assert_false(qh_npz_write(dup, dupnames, (const QhTensor *const *)t, 2, &error));
  assert_error(error, QH_ERROR_INVALID, dup, "appears twice");
  g_clear_error(&error);
  char *after = dir_listing();
  g_assert_cmpstr(before, ==, after);
  g_free(before);
  g_free(after);
  g_free(dup);
  for (int i = 0; i < 3; i++)
    qh_tensor_free(t[i]);
  g_free(path);
}

static void test_reader(void) {
  QhShape s = qh_shape_make(2, (int64_t[]){5, 3});
  QhTensor *t = qh_tensor_new(QH_DTYPE_S32, &s, NULL);
  for (int i = 0; i < 15; i++)
    ((gint32 *)t->data)[i] = i * 10;
  char *path = tmp_path("rows.npy");
  GError *error = NULL;
  g_assert_true(qh_npy_write(t, path, &error));
  QhNpyReader *rd = qh_npy_reader_open(path, &error);
  g_assert_no_error(error);
  g_assert_cmpint(qh_npy_reader_dtype(rd), ==, QH_DTYPE_S32);
  g_assert_true(qh_shape_equal(qh_npy_reader_shape(rd), &s));

  QhTensor *r = qh_npy_reader_read_rows(rd, 1, 2, &error);
  g_assert_no_error(error);
  g_assert_cmpint(r->shape.rank, ==, 2);
  g_assert_cmpint(r->shape.dims[0], ==, 2);
  g_assert_cmpint(r->shape.dims[1], ==, 3);
  g_assert_cmpmem(r->data, r->nbytes, ((gint32[]){30, 40, 50, 60, 70, 80}), 24);
  qh_tensor_free(r);
  r = qh_npy_reader_read_rows(rd, 4, 1, &error);
  g_assert_cmpmem(r->data, r->nbytes, ((gint32[]){120, 130, 140}), 12);
  qh_tensor_free(r);
  r = qh_npy_reader_read_rows(rd, 5, 0, &error);
  g_assert_no_error(error);
  g_assert_cmpint(r->shape.dims[0], ==, 0);
  g_assert_cmpuint(r->nbytes, ==, 0);
  qh_tensor_free(r);
  /* the slow twin: all rows equal the whole-file read */
  r = qh_npy_reader_read_rows(rd, 0, 5, &error);
  assert_same(r, t);
  qh_tensor_free(r);

  const int64_t bad[][2] = {{4, 2}, {-1, 1}, {0, -1}, {6, 0}, {1, INT64_MAX}};
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_assert_null(qh_npy_reader_read_rows(rd, bad[i][0], bad[i][1], &error));
    assert_error(error, QH_ERROR_INVALID, path, "the array has 5 rows");
    g_clear_error(&error);
  }
  qh_npy_reader_close(rd);

  rd = qh_npy_reader_open(FIXTURES "i32.npy", &error);
  g_assert_no_error(error);
  r = qh_npy_reader_read_rows(rd, 1, 1, &error);
  g_assert_cmpmem(r->data, r->nbytes, ((gint32[]){0, G_MAXINT32}), 8);
  qh_tensor_free(r);
  qh_npy_reader_close(rd);

  rd = qh_npy_reader_open(FIXTURES "scalar_f32.npy", &error);
  g_assert_null(qh_npy_reader_read_rows(rd, 0, 1, &error));
  assert_error(error, QH_ERROR_INVALID, FIXTURES "scalar_f32.npy", "no rows");
  g_clear_error(&error);
  qh_npy_reader_close(rd);
  qh_tensor_free(t);
  g_free(path);
}

static void test_hostile_preamble(void) {
  static const float data[6] = {0};
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  gsize len;
  guint8 *img = build(1, dict, -1, data, sizeof data, &len);
  img[5] = 'Z';
  expect_bad(img, len, QH_ERROR_PARSE, "bad magic");
  expect_bad(img, 3, QH_ERROR_PARSE, "bad magic");
  img[5] = 'Y';
  expect_bad(img, 9, QH_ERROR_PARSE, "truncated .npy preamble");
  img[6] = 4;
  expect_bad(img, len, QH_ERROR_UNSUPPORTED, "version 4.0");
  img[6] = 1;
  img[7] = 1;
  expect_bad(img, len, QH_ERROR_UNSUPPORTED, "version 1.1");
  g_free(img);

  img = build(2, dict, 100000, data, sizeof data, &len);
  expect_bad(img, len, QH_ERROR_LIMIT, "header length 100000 exceeds the limit of 65536");
  g_free(img);
  img = build(2, dict, 0xffffffffL, data, sizeof data, &len);
  expect_bad(img, len, QH_ERROR_LIMIT, "exceeds the limit");
  g_free(img);
  img = build(1, dict, 1000, data, sizeof data, &len);
  expect_bad(img, len, QH_ERROR_PARSE, "header length 1000 runs past the end of the file");
  g_free(img);

  /* truncated data, with the exact message */
  img = build(1, dict, -1, data, 20, &len);
  expect_bad(img, len, QH_ERROR_PARSE, "truncated data: expected 24 bytes after the header, found 20");
  GError *error = NULL;
  g_assert_null(qh_npy_read_from_memory(img, len, "img.npy", &error));
  g_assert_cmpstr(error->message, ==, "img.npy: truncated data: expected 24 bytes after the header, found 20");
  g_clear_error(&error);
  g_free(img);
  img = build(1, dict, -1, data, 0, &len);
  expect_bad(img, len, QH_ERROR_PARSE, "expected 24 bytes after the header, found 0");
  g_free(img);
  guint8 more[28] = {0};
  img = build(1, dict, -1, more, sizeof more, &len);
  expect_bad(img, len, QH_ERROR_PARSE, "4 trailing bytes after the data");
  g_free(img);

  /* version 3.0 headers must be UTF-8 */
  img = build(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\xff", -1, data, 8, &len);
  expect_bad(img, len, QH_ERROR_PARSE, "UTF-8");
  g_free(img);
}

static void test_hostile_dicts(void) {
  /* 2^40 elements: refused from the header alone, nothing allocated */
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }",
                  QH_ERROR_LIMIT, "2^34");
  expect_bad_dict("{'descr': '|u1', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
                  QH_ERROR_LIMIT, "2^34");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                  QH_ERROR_LIMIT, "too large");
  expect_bad_dict("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }",
                  QH_ERROR_UNSUPPORTED, "complex dtype '<c8'");
  expect_bad_dict("{'descr': '<U5', 'fortran_order': False, 'shape': (2, 3), }",
                  QH_ERROR_UNSUPPORTED, "'<U5'");
  expect_bad_dict("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }",
                  QH_ERROR_UNSUPPORTED, "object arrays");
  expect_bad_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
                  QH_ERROR_UNSUPPORTED, "'<f8' (float64) is not supported; convert with .astype(np.float32)");
  expect_bad_dict("{'descr': '<u4', 'fortran_order': False, 'shape': (2, 3), }",
                  QH_ERROR_UNSUPPORTED, "dtype '<u4' is not supported");
  expect_bad_dict("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
                  QH_ERROR_UNSUPPORTED, "big-endian dtype '>f4'");
  expect_bad_dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }",
                  QH_ERROR_UNSUPPORTED, "structured");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                  QH_ERROR_UNSUPPORTED,
                  "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }",
                  QH_ERROR_INVALID, "negative dimension -1");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }",
                  QH_ERROR_UNSUPPORTED, "rank 9");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, }", QH_ERROR_PARSE, "'shape' key is missing");
  expect_bad_dict("{'descr': '<f4', 'shape': (2, 3), }", QH_ERROR_PARSE, "'fortran_order' key is missing");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", QH_ERROR_PARSE,
                  "expected ',' or ')'");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", QH_ERROR_PARSE,
                  "not a tuple");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", QH_ERROR_PARSE,
                  "must be a tuple");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", QH_ERROR_PARSE,
                  "expected ',' or ')'");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 03), }", QH_ERROR_PARSE,
                  "leading zero");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (6,)}",
                  QH_ERROR_PARSE, "'shape' appears twice");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",
                  QH_ERROR_PARSE, "unexpected key 'extra'");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", QH_ERROR_PARSE,
                  "after the dict");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", QH_ERROR_PARSE,
                  "expected ',' or '}'");
  expect_bad_dict("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }", QH_ERROR_PARSE,
                  "expected ',' or '}'");
  expect_bad_dict("{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3), }", QH_ERROR_PARSE,
                  "expected ':' after key 'descr'");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }", QH_ERROR_PARSE,
                  "True or False");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3), }", QH_ERROR_PARSE,
                  "True or False");
  expect_bad_dict("  {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", QH_ERROR_PARSE,
                  "expected '{'");
  expect_bad_dict("{'descr': '<f4\n', 'fortran_order': False, 'shape': (2, 3), }", QH_ERROR_PARSE,
                  "unsupported character");
  expect_bad_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\v", QH_ERROR_PARSE,
                  "after the dict");
  expect_bad_dict("", QH_ERROR_PARSE, "expected '{'");
  expect_bad_dict("{'descr': 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'}", QH_ERROR_PARSE,
                  "too long");
}

static void test_hostile_npz(void) {
  GError *error = NULL;
  g_assert_null(qh_npz_read(FIXTURES "u8.npy", &error));
  assert_error(error, QH_ERROR_PARSE, FIXTURES "u8.npy: ", "not a readable .npz (zip) archive");
  g_clear_error(&error);
  g_assert_null(qh_npz_read(FIXTURES "missing.npz", &error));
  assert_error(error, QH_ERROR_IO, FIXTURES "missing.npz: ", "cannot open");
  g_clear_error(&error);
  g_assert_null(qh_npz_read(FIXTURES "not_npy_member.npz", &error));
  assert_error(error, QH_ERROR_PARSE, FIXTURES "not_npy_member.npz: ",
               "member 'readme.txt' is not a .npy file");
  g_clear_error(&error);
  g_assert_null(qh_npz_read(FIXTURES "duplicate_member.npz", &error));
  assert_error(error, QH_ERROR_PARSE, FIXTURES "duplicate_member.npz: ", "two members have the same name");
  g_clear_error(&error);
  g_assert_null(qh_npz_read(FIXTURES "truncated_member.npz", &error));
  assert_error(error, QH_ERROR_PARSE, FIXTURES "truncated_member.npz: ",
               "member 't.npy': truncated data: expected 1 bytes after the header, found 0");
  g_clear_error(&error);

  /* a corrupted byte in a stored member's data trips libzip's CRC check */
  gchar *raw;
  gsize len;
  g_assert_true(g_file_get_contents(FIXTURES "two.npz", &raw, &len, NULL));
  static const char one_two[] = {1, 0, 0, 0, 2, 0, 0, 0, 3};
  gsize hit = 0;
  while (hit + sizeof one_two <= len && memcmp(raw + hit, one_two, sizeof one_two) != 0)
    hit++;
  g_assert_cmpuint(hit + sizeof one_two, <=, len);
  raw[hit + 4] = 5;
  char *path = tmp_path("crc.npz");
  g_assert_true(g_file_set_contents(path, raw, (gssize)len, NULL));
  g_assert_null(qh_npz_read(path, &error));
  assert_error(error, QH_ERROR_PARSE, path, "member 'weights.npy': CRC");
  g_clear_error(&error);
  unlink(path);
  g_free(path);
  g_free(raw);
}

static void test_failed_writes(void) {
  QhShape s = qh_shape_make(1, (int64_t[]){4});
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  const QhTensor *ts[1] = {t};
  const char *names[1] = {"x"};
  GError *error = NULL;
  char *before = dir_listing();

  char *nodir = tmp_path("nope/x.npy");
  g_assert_false(qh_npy_write(t, nodir, &error));
  assert_error(error, QH_ERROR_IO, nodir, "No such file or directory");
  g_clear_error(&error);
  char *nodir_npz = tmp_path("nope/x.npz");
  g_assert_false(qh_npz_write(nodir_npz, names, ts, 1, &error));
  assert_error(error, QH_ERROR_IO, nodir_npz, "No such file or directory");
  g_clear_error(&error);

  char *dir = tmp_path("adir.npy");
  g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
  char *with_dir = dir_listing();
  g_assert_false(qh_npy_write(t, dir, &error));
  assert_error(error, QH_ERROR_IO, dir, "rename");
  g_clear_error(&error);
  g_assert_false(qh_npz_write(dir, names, ts, 1, &error));
  assert_error(error, QH_ERROR_IO, dir, "rename");
  g_clear_error(&error);
  char *after = dir_listing();
  g_assert_cmpstr(with_dir, ==, after);
  g_assert_true(g_file_test(dir, G_FILE_TEST_IS_DIR));
  g_rmdir(dir);
  g_free(after);
  after = dir_listing();
  g_assert_cmpstr(before, ==, after);

  /* an unwritable dtype keeps an existing file intact */
  char *keep = tmp_path("keep.npy");
  g_assert_true(qh_npy_write(t, keep, &error));
  gchar *old;
  gsize old_len;
  g_assert_true(g_file_get_contents(keep, &old, &old_len, NULL));
  QhTensor *h = qh_tensor_new(QH_DTYPE_F16, &s, NULL);
  g_assert_false(qh_npy_write(h, keep, &error));
  assert_error(error, QH_ERROR_UNSUPPORTED, keep, "cannot write float16");
  g_clear_error(&error);
  gchar *now;
  gsize now_len;
  g_assert_true(g_file_get_contents(keep, &now, &now_len, NULL));
  g_assert_cmpmem(old, old_len, now, now_len);
  unlink(keep);

  g_free(old);
  g_free(now);
  qh_tensor_free(h);
  g_free(keep);
  g_free(after);
  g_free(with_dir);
  g_free(before);
  g_free(dir);
  g_free(nodir);
  g_free(nodir_npz);
  qh_tensor_free(t);
}

static void remove_tree(const char *dir) {
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *n;
  while (d != NULL && (n = g_dir_read_name(d)) != NULL) {
    char *p = g_build_filename(dir, n, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_DIR))
      remove_tree(p);
    else
      unlink(p);
    g_free(p);
  }
  if (d != NULL)
    g_dir_close(d);
  g_rmdir(dir);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp("qh-npy-XXXXXX", NULL);
  g_assert_nonnull(tmpdir);
  g_test_add_func("/npy/round_trip", test_round_trip);
  g_test_add_func("/npy/same_bytes_as_numpy", test_same_bytes_as_numpy);
  g_test_add_func("/npy/header_variants", test_header_variants);
  g_test_add_func("/npy/numpy_fixtures", test_numpy_fixtures);
  g_test_add_func("/npy/reader", test_reader);
  g_test_add_func("/npy/hostile_preamble", test_hostile_preamble);
  g_test_add_func("/npy/hostile_dicts", test_hostile_dicts);
  g_test_add_func("/npy/failed_writes", test_failed_writes);
  g_test_add_func("/npz/fixtures", test_npz_fixtures);
  g_test_add_func("/npz/round_trip", test_npz_round_trip);
  g_test_add_func("/npz/hostile", test_hostile_npz);
  int rc = g_test_run();
  remove_tree(tmpdir);
  g_free(tmpdir);
  return rc;
}
