/* Unit tests of ONNX load and save: graphs built through the QhGraph API round-trip
 * through a file unchanged, and hostile inputs (built here byte by byte with a tiny
 * protobuf writer, so the tests need no Python and no generated code) fail with
 * specific messages instead of crashing or allocating what the file claims. */
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/graph.h"
#include "io/onnx.h"

/* ---- a minimal protobuf writer ------------------------------------------------------ */

typedef GByteArray Pb;

static Pb *pb_new(void) { return g_byte_array_new(); }

static void pb_varint(Pb *b, guint64 v) {
  do {
    guint8 c = (v & 0x7f) | (v > 0x7f ? 0x80 : 0);
    g_byte_array_append(b, &c, 1);
    v >>= 7;
  } while (v);
}

static void pb_tag(Pb *b, int field, int wire) { pb_varint(b, ((guint64)field << 3) | (guint64)wire); }
static void pb_int(Pb *b, int field, gint64 v) { pb_tag(b, field, 0); pb_varint(b, (guint64)v); }
static void pb_float(Pb *b, int field, float f) {
  pb_tag(b, field, 5);
  g_byte_array_append(b, (const guint8 *)&f, 4);
}
static void pb_bytes(Pb *b, int field, const void *data, gsize len) {
  pb_tag(b, field, 2);
  pb_varint(b, len);
  g_byte_array_append(b, data, (guint)len);
}
static void pb_str(Pb *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
/* Appends sub as a nested message and frees it. */
static void pb_msg(Pb *b, int field, Pb *sub) {
  pb_bytes(b, field, sub->data, sub->len);
  g_byte_array_unref(sub);
}

/* ---- ONNX messages (field numbers from onnx.proto) ---------------------------------- */

enum { F32 = 1, U8 = 2, S8 = 3, S32 = 6, S64 = 7, BOOL = 9, F16 = 10, DOUBLE = 11 };

static Pb *value_info(const char *name, int elem, int rank, const gint64 *dims) {
  Pb *tt = pb_new(), *type = pb_new(), *vi = pb_new();
  pb_int(tt, 1, elem);
  if (rank >= 0) {
    Pb *shape = pb_new();
    for (int i = 0; i < rank; i++) {
      Pb *d = pb_new();
      if (dims[i] >= 0)
        pb_int(d, 1, dims[i]);
      else
        pb_str(d, 2, "N");
      pb_msg(shape, 1, d);
    }
    pb_msg(tt, 2, shape);
  }
  pb_msg(type, 1, tt);
  pb_str(vi, 1, name);
  pb_msg(vi, 2, type);
  return vi;
}

/* ins/outs are NULL-terminated; attr may be NULL. */
static Pb *node(const char *name, const char *op, const char *const *ins, const char *const *outs,
                Pb *attr) {
  Pb *n = pb_new();
  for (int i = 0; ins && ins[i]; i++)
    pb_str(n, 1, ins[i]);
  for (int i = 0; outs && outs[i]; i++)
    pb_str(n, 2, outs[i]);
  if (name)
    pb_str(n, 3, name);
  pb_str(n, 4, op);
  if (attr)
    pb_msg(n, 5, attr);
  return n;
}

static Pb *tensor(const char *name, int dtype, int rank, const gint64 *dims) {
  Pb *t = pb_new();
  for (int i = 0; i < rank; i++)
    pb_int(t, 1, dims[i]);
  pb_int(t, 2, dtype);
  pb_str(t, 8, name);
  return t;
}

static Pb *model(gint64 opset, Pb *graph) {
  Pb *m = pb_new(), *os = pb_new();
  pb_int(m, 1, 8);
  pb_str(os, 1, "");
  pb_int(os, 2, opset);
  pb_msg(m, 8, os);
  pb_msg(m, 7, graph); /* last, so a truncated model lacks or cuts the graph */
  return m;
}

/* x:f32[1,4] -> op -> y, with the op's node given. */
static Pb *one_node_graph(Pb *n) {
  static const gint64 dims[] = {1, 4};
  Pb *g = pb_new();
  pb_msg(g, 1, n);
  pb_str(g, 2, "g");
  pb_msg(g, 11, value_info("x", F32, 2, dims));
  pb_msg(g, 12, value_info("y", F32, 2, dims));
  return g;
}

static const char *const X[] = {"x", NULL}, *const Y[] = {"y", NULL};

/* The Relu model with one more message (an initializer, input, ...) in its graph. */
static Pb *relu_with(int field, Pb *extra) {
  Pb *g = one_node_graph(node("n", "Relu", X, Y, NULL));
  pb_msg(g, field, extra);
  return model(13, g);
}

static QhGraph *load_pb(Pb *m, const char *base_dir, GError **error) {
  QhGraph *g = qh_onnx_load_from_memory(m->data, m->len, "test.onnx", base_dir, error);
  g_byte_array_unref(m);
  return g;
}

static const QhTensor *init_of(const QhGraph *g, const char *name) {
  int id = qh_graph_find_value(g, name);
  g_assert_cmpint(id, >=, 0);
  return qh_graph_value(g, id)->initializer;
}

/* Loading fails with code and a message that names the file and holds fragment. */
static void expect_fail(Pb *m, const char *base_dir, int code, const char *fragment) {
  GError *error = NULL;
  QhGraph *g = load_pb(m, base_dir, &error);
  g_assert_null(g);
  g_assert_nonnull(error);
  if (strstr(error->message, fragment) == NULL || !g_str_has_prefix(error->message, "test.onnx: "))
    g_error("message '%s' lacks '%s'", error->message, fragment);
  g_assert_error(error, QH_ERROR, code);
  g_error_free(error);
}

static QhGraph *expect_load(Pb *m, const char *base_dir) {
  GError *error = NULL;
  QhGraph *g = load_pb(m, base_dir, &error);
  g_assert_no_error(error);
  g_assert_nonnull(g);
  return g;
}

/* Removes a test directory with its files and subdirectories (one level deep). */
static void rm_tree(const char *dir) {
  GDir *d = g_dir_open(dir, 0, NULL);
  for (const char *e; d != NULL && (e = g_dir_read_name(d)) != NULL;) {
    char *p = g_build_filename(dir, e, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
      rm_tree(p);
    else
      g_unlink(p);
    g_free(p);
  }
  if (d != NULL)
    g_dir_close(d);
  g_rmdir(dir);
}

/* ---- round trip through the QhGraph API ---------------------------------------------- */

static QhTensor *filled(QhDType dtype, int rank, const int64_t *dims) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(dtype, &s, NULL);
  for (size_t i = 0; i < t->nbytes; i++)
    ((guint8 *)t->data)[i] = (guint8)(i * 37 + dtype);
  if (dtype == QH_DTYPE_BOOL)
    for (size_t i = 0; i < t->nbytes; i++)
      ((guint8 *)t->data)[i] &= 1;
  return t;
}

static const QhDType all_dtypes[] = {QH_DTYPE_F32, QH_DTYPE_U8, QH_DTYPE_S8, QH_DTYPE_S32,
                                     QH_DTYPE_S64, QH_DTYPE_BOOL, QH_DTYPE_F16};

static QhGraph *rich_graph(void) {
  QhGraph *g = qh_graph_new();
  g->name = g_strdup("rich");
  g->doc_string = g_strdup("a doc");
  g->producer_name = g_strdup("unit-test");
  g->producer_version = g_strdup("9.9");
  g->model_domain = g_strdup("org.example");
  g->ir_version = 7;
  g->model_version = 42;
  qh_graph_set_opset(g, "", 13);
  qh_graph_set_opset(g, "com.example", 2);
  QhMetadataEntry e = {g_strdup("author"), g_strdup("me")};
  g_array_append_val(g->metadata, e);

  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  int64_t xd[] = {-1, 3, 8};
  x->shape = qh_shape_make(3, xd);
  x->dim_params = g_new0(char *, 4);
  x->dim_params[0] = g_strdup("batch");
  g_array_append_val(g->inputs, x->id);
  int64_t wd[] = {2, 3};
  for (gsize i = 0; i < G_N_ELEMENTS(all_dtypes); i++) {
    char *name = g_strdup_printf("w_%s", qh_dtype_name(all_dtypes[i]));
    qh_value_set_initializer(qh_graph_add_value(g, name, NULL), filled(all_dtypes[i], 2, wd));
    g_free(name);
  }
  int w = qh_graph_find_value(g, "w_float32");
  int a = qh_graph_add_value(g, "a", NULL)->id, y = qh_graph_add_value(g, "y", NULL)->id;
  int in1[] = {a, -1, w}, out1[] = {y};
  QhNode *n1 = qh_graph_add_node(g, "second", "Custom", "com.example", 3, in1, 1, out1, NULL);
  int in0[] = {x->id}, out0[] = {a};
  QhNode *n0 = qh_graph_add_node(g, "first", "Relu", "", 1, in0, 1, out0, NULL);
  g_assert_nonnull(n0);
  qh_node_set_attr_float(n1, "f", 0.25f);
  qh_node_set_attr_int(n1, "i", -7);
  qh_node_set_attr_string(n1, "s", "hello");
  int64_t td[] = {3};
  qh_node_set_attr_tensor(n1, "t", filled(QH_DTYPE_S64, 1, td));
  float fs[] = {1.5f, -2.0f};
  qh_node_set_attr_floats(n1, "fs", 2, fs);
  int64_t is[] = {1, -2, 3000000000LL};
  qh_node_set_attr_ints(n1, "is", 3, is);
  const char *ss[] = {"a", "", "ccc"};
  qh_node_set_attr_strings(n1, "ss", 3, ss);
  qh_node_set_attr_ints(n1, "empty", 0, NULL);
  QhValue *yv = qh_graph_value(g, y);
  yv->is_output = TRUE;
  yv->dtype = QH_DTYPE_F32;
  g_array_append_val(g->outputs, y);
  qh_graph_value(g, a)->dtype = QH_DTYPE_F32; /* intermediate value_info */
  qh_graph_value(g, a)->shape = x->shape;
  return g;
}

static void assert_tensors_equal(const QhTensor *a, const QhTensor *b) {
  g_assert_cmpint(a->dtype, ==, b->dtype);
  g_assert_true(qh_shape_equal(&a->shape, &b->shape));
  g_assert_cmpuint(a->nbytes, ==, b->nbytes);
  g_assert_cmpmem(a->data, a->nbytes, b->data, b->nbytes);
}

static void test_round_trip(void) {
  g_autofree char *dir = g_dir_make_tmp("qh-onnx-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "model.onnx", NULL);
  QhGraph *g = rich_graph();
  GError *error = NULL;
  g_assert_true(qh_onnx_save(g, path, &error));
  g_assert_no_error(error);
  QhGraph *h = qh_onnx_load(path, &error);
  g_assert_no_error(error);

  g_assert_cmpstr(h->name, ==, "rich");
  g_assert_cmpstr(h->doc_string, ==, "a doc");
  g_assert_cmpstr(h->producer_name, ==, "unit-test");
  g_assert_cmpstr(h->producer_version, ==, "9.9");
  g_assert_cmpstr(h->model_domain, ==, "org.example");
  g_assert_cmpint(h->ir_version, ==, 7);
  g_assert_cmpint(h->model_version, ==, 42);
  g_assert_cmpint(qh_graph_opset(h, ""), ==, 13);
  g_assert_cmpint(qh_graph_opset(h, "com.example"), ==, 2);
  g_assert_cmpuint(h->metadata->len, ==, 1);
  g_assert_cmpstr(g_array_index(h->metadata, QhMetadataEntry, 0).key, ==, "author");
  g_assert_cmpstr(g_array_index(h->metadata, QhMetadataEntry, 0).value, ==, "me");

  g_assert_cmpuint(h->inputs->len, ==, 1);
  const QhValue *x = qh_graph_value(h, g_array_index(h->inputs, int, 0));
  g_assert_cmpstr(x->name, ==, "x");
  g_assert_cmpint(x->dtype, ==, QH_DTYPE_F32);
  g_assert_cmpint(x->shape.rank, ==, 3);
  g_assert_cmpint(x->shape.dims[0], ==, -1);
  g_assert_cmpint(x->shape.dims[2], ==, 8);
  g_assert_cmpstr(x->dim_params[0], ==, "batch");
  g_assert_null(x->dim_params[1]);
  const QhValue *y = qh_graph_value(h, g_array_index(h->outputs, int, 0));
  g_assert_cmpstr(y->name, ==, "y");
  g_assert_true(y->is_output);
  g_assert_cmpint(y->shape.rank, ==, -1);
  const QhValue *a = qh_graph_value(h, qh_graph_find_value(h, "a"));
  g_assert_cmpint(a->dtype, ==, QH_DTYPE_F32);
  g_assert_cmpint(a->shape.rank, ==, 3);

  for (gsize i = 0; i < G_N_ELEMENTS(all_dtypes); i++) {
    char *name = g_strdup_printf("w_%s", qh_dtype_name(all_dtypes[i]));
    assert_tensors_equal(init_of(g, name), init_of(h, name));
    g_free(name);
  }

  /* saved in topological order: Relu first */
  g_assert_cmpint(qh_graph_n_nodes(h), ==, 2);
  const QhNode *n0 = qh_graph_node(h, 0), *n1 = qh_graph_node(h, 1);
  g_assert_cmpstr(n0->name, ==, "first");
  g_assert_cmpstr(n0->op_type, ==, "Relu");
  g_assert_cmpstr(n1->name, ==, "second");
  g_assert_cmpstr(n1->domain, ==, "com.example");
  g_assert_cmpint(n1->n_inputs, ==, 3);
  g_assert_cmpint(n1->inputs[1], ==, -1);
  g_assert_cmpstr(qh_graph_value(h, n1->inputs[2])->name, ==, "w_float32");
  g_assert_cmpint(n1->n_attrs, ==, 8);
  g_assert_cmpfloat(qh_node_attr(n1, "f")->f, ==, 0.25f);
  g_assert_cmpint(qh_node_attr(n1, "i")->i, ==, -7);
  g_assert_cmpstr(qh_node_attr(n1, "s")->s, ==, "hello");
  assert_tensors_equal(qh_node_attr(qh_graph_node(g, 0), "t")->t, qh_node_attr(n1, "t")->t);
  const QhAttr *at = qh_node_attr(n1, "fs");
  g_assert_cmpint(at->type, ==, QH_ATTR_FLOATS);
  g_assert_cmpint(at->n, ==, 2);
  g_assert_cmpfloat(at->floats[1], ==, -2.0f);
  at = qh_node_attr(n1, "is");
  g_assert_cmpint(at->n, ==, 3);
  g_assert_cmpint(at->ints[2], ==, 3000000000LL);
  at = qh_node_attr(n1, "ss");
  g_assert_cmpint(at->type, ==, QH_ATTR_STRINGS);
  g_assert_cmpint(at->n, ==, 3);
  g_assert_cmpstr(at->strings[1], ==, "");
  g_assert_cmpstr(at->strings[2], ==, "ccc");
  at = qh_node_attr(n1, "empty");
  g_assert_cmpint(at->type, ==, QH_ATTR_INTS);
  g_assert_cmpint(at->n, ==, 0);

  /* the atomic write leaves nothing but the model in the directory */
  GDir *d = g_dir_open(dir, 0, NULL);
  g_assert_cmpstr(g_dir_read_name(d), ==, "model.onnx");
  g_assert_null(g_dir_read_name(d));
  g_dir_close(d);

  /* saving a loaded graph again gives the same bytes */
  g_autofree char *path2 = g_build_filename(dir, "again.onnx", NULL);
  g_assert_true(qh_onnx_save(h, path2, &error));
  char *b1, *b2;
  gsize l1, l2;
  g_assert_true(g_file_get_contents(path, &b1, &l1, NULL));
  g_assert_true(g_file_get_contents(path2, &b2, &l2, NULL));
  g_assert_cmpmem(b1, l1, b2, l2);
  g_free(b1);
  g_free(b2);

  rm_tree(dir);
  qh_graph_free(g);
  qh_graph_free(h);
}

static void test_save_defaults_and_failure(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  g_array_append_val(g->inputs, x->id);
  int y = qh_graph_add_value(g, "y", NULL)->id;
  qh_graph_add_node(g, "", "Relu", "", 1, &x->id, 1, &y, NULL);
  qh_graph_value(g, y)->is_output = TRUE;
  g_array_append_val(g->outputs, y);
  g_autofree char *dir = g_dir_make_tmp("qh-onnx-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "m.onnx", NULL);
  GError *error = NULL;
  g_assert_true(qh_onnx_save(g, path, &error));
  QhGraph *h = qh_onnx_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpstr(h->producer_name, ==, "qhost");
  g_assert_cmpint(h->ir_version, ==, 8);
  g_assert_cmpint(qh_graph_opset(h, ""), ==, QH_ONNX_MAX_OPSET);
  g_assert_cmpstr(qh_graph_node(h, 0)->name, ==, "Relu_0"); /* unnamed: named on load */
  qh_graph_free(h);

  /* a directory that does not exist: an error naming the path, no file */
  g_autofree char *bad = g_build_filename(dir, "missing", "m.onnx", NULL);
  g_assert_false(qh_onnx_save(g, bad, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_IO);
  g_assert_true(g_str_has_prefix(error->message, bad));
  g_clear_error(&error);
  /* a graph with a dangling input is refused and leaves the old file alone */
  int ghost = qh_graph_add_value(g, "ghost", NULL)->id, z = qh_graph_add_value(g, "z", NULL)->id;
  qh_graph_add_node(g, "bad", "Relu", "", 1, &ghost, 1, &z, NULL);
  g_assert_false(qh_onnx_save(g, path, &error));
  g_assert_nonnull(strstr(error->message, "ghost"));
  g_clear_error(&error);
  h = qh_onnx_load(path, &error);
  g_assert_no_error(error);
  qh_graph_free(h);
  g_assert_null(qh_onnx_load(bad, &error));
  g_assert_true(g_str_has_prefix(error->message, bad));
  g_assert_nonnull(strstr(error->message, "cannot open"));
  g_clear_error(&error);
  /* the rename fails onto a directory: the temporary file is removed, the directory kept */
  qh_graph_remove_node(g, 1);
  g_autofree char *sub = g_build_filename(dir, "sub", NULL);
  g_mkdir(sub, 0755);
  g_assert_false(qh_onnx_save(g, sub, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_IO);
  g_assert_true(g_str_has_prefix(error->message, sub));
  g_clear_error(&error);
  g_assert_true(g_file_test(sub, G_FILE_TEST_IS_DIR));
  GDir *d = g_dir_open(dir, 0, NULL);
  int n_entries = 0;
  while (g_dir_read_name(d) != NULL)
    n_entries++;
  g_dir_close(d);
  g_assert_cmpint(n_entries, ==, 2); /* m.onnx and sub */
  g_rmdir(sub);
  /* empty and oversized files are refused by their size (the big one is sparse) */
  g_autofree char *empty = g_build_filename(dir, "empty.onnx", NULL);
  g_assert_true(g_file_set_contents(empty, "", 0, NULL));
  g_assert_null(qh_onnx_load(empty, &error));
  g_assert_true(g_str_has_prefix(error->message, empty));
  g_assert_nonnull(strstr(error->message, "the file is empty"));
  g_clear_error(&error);
  FILE *f = fopen(empty, "w");
  if (f != NULL && ftruncate(fileno(f), ((off_t)2 << 30) + 1) == 0) {
    fclose(f);
    g_assert_null(qh_onnx_load(empty, &error));
    g_assert_error(error, QH_ERROR, QH_ERROR_LIMIT);
    g_assert_nonnull(strstr(error->message, "limited to 2 GiB"));
    g_clear_error(&error);
  } else if (f != NULL) {
    fclose(f);
  }
  rm_tree(dir);
  qh_graph_free(g);
}

/* ---- hand-built models ---------------------------------------------------------------- */

static void test_typed_fields_and_quirks(void) {
  static const gint64 d4[] = {4}, d14[] = {1, 4};
  Pb *g = one_node_graph(node(NULL, "Relu", X, Y, NULL));
  /* typed data fields instead of raw_data, one per carrier */
  Pb *t = tensor("f", F32, 1, d4);
  for (int i = 0; i < 4; i++)
    pb_float(t, 4, (float)i + 0.5f);
  pb_msg(g, 5, t);
  int dts[] = {U8, S8, BOOL, F16, S32};
  for (gsize k = 0; k < G_N_ELEMENTS(dts); k++) {
    char name[8];
    g_snprintf(name, sizeof name, "i%d", dts[k]);
    t = tensor(name, dts[k], 1, d4);
    for (int i = 0; i < 4; i++)
      pb_int(t, 5, dts[k] == S8 ? -i : dts[k] == F16 ? 0x3c00 : i); /* f16 1.0 = 0x3c00 */
    pb_msg(g, 5, t);
  }
  t = tensor("l", S64, 1, d4);
  for (int i = 0; i < 4; i++)
    pb_int(t, 7, -((gint64)1 << 40) * i);
  pb_msg(g, 5, t);
  /* an initializer listed as a graph input too, as old exporters do */
  pb_msg(g, 11, value_info("f", F32, 1, d4));
  pb_msg(g, 13, value_info("y", F32, 2, d14));
  QhGraph *q = expect_load(model(13, g), NULL);
  g_assert_cmpuint(q->inputs->len, ==, 1);
  g_assert_cmpstr(qh_graph_node(q, 0)->name, ==, "Relu_0");
  g_assert_cmpfloat(((float *)init_of(q, "f")->data)[3], ==, 3.5f);
  g_assert_cmpint(((gint8 *)init_of(q, "i3")->data)[3], ==, -3);
  g_assert_cmpint(init_of(q, "i10")->dtype, ==, QH_DTYPE_F16);
  g_assert_cmpfloat(qh_f16_to_f32(((guint16 *)init_of(q, "i10")->data)[2]), ==, 1.0f);
  g_assert_cmpint(((guint8 *)init_of(q, "i9")->data)[2], ==, 1);
  g_assert_cmpint(((gint64 *)init_of(q, "l")->data)[3], ==, -((gint64)3 << 40));
  qh_graph_free(q);

  /* attribute without a type: inferred when only one field is set, else refused */
  for (int ambiguous = 0; ambiguous < 2; ambiguous++) {
    Pb *a = pb_new();
    pb_str(a, 1, "alpha");
    pb_int(a, 3, 5);
    if (ambiguous)
      pb_float(a, 2, 1.0f);
    Pb *am = model(13, one_node_graph(node("n", "LeakyRelu", X, Y, a)));
    if (ambiguous) {
      expect_fail(am, NULL, QH_ERROR_INVALID, "node 'n' (LeakyRelu): attribute 'alpha' has no type");
      break;
    }
    q = expect_load(am, NULL);
    g_assert_cmpint(qh_node_attr(qh_graph_node(q, 0), "alpha")->type, ==, QH_ATTR_INT);
    qh_graph_free(q);
  }

  /* model-local functions are ignored; other domains' opsets are kept */
  Pb *m = model(13, one_node_graph(node(NULL, "Relu", X, Y, NULL)));
  Pb *fn = pb_new(), *os = pb_new();
  pb_str(fn, 1, "MyFn");
  pb_msg(fn, 7, node(NULL, "Relu", X, Y, NULL));
  pb_msg(m, 25, fn);
  pb_str(os, 1, "com.microsoft");
  pb_int(os, 2, 1);
  pb_msg(m, 8, os);
  q = expect_load(m, NULL);
  g_assert_cmpint(qh_graph_opset(q, "com.microsoft"), ==, 1);
  qh_graph_free(q);
}

static void test_bad_graphs(void) {
  static const gint64 d4[] = {4}, d14[] = {1, 4}, d9[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  static const char *const G[] = {"ghost", NULL}, *const A[] = {"a", NULL}, *const B[] = {"b", NULL};
  expect_fail(model(13, one_node_graph(node("n", "Relu", G, Y, NULL))), NULL, QH_ERROR_INVALID,
              "node 'n' (Relu): input 'ghost' is not produced");
  Pb *g = pb_new();
  pb_msg(g, 1, node("n0", "Relu", B, A, NULL));
  pb_msg(g, 1, node("n1", "Relu", A, B, NULL));
  pb_msg(g, 12, value_info("b", F32, -1, NULL));
  expect_fail(model(13, g), NULL, QH_ERROR_INVALID, "cycle");
  expect_fail(relu_with(12, value_info("nowhere", F32, 1, d4)), NULL, QH_ERROR_INVALID,
              "graph output 'nowhere' is not produced by any node, initializer or graph input");
  expect_fail(relu_with(11, value_info("d", DOUBLE, 1, d4)), NULL, QH_ERROR_UNSUPPORTED,
              "graph input 'd' has unsupported type double");
  expect_fail(relu_with(11, value_info("big", F32, 9, d9)), NULL, QH_ERROR_UNSUPPORTED,
              "graph input 'big' has rank 9");
  expect_fail(relu_with(15, pb_new()), NULL, QH_ERROR_UNSUPPORTED,
              "sparse initializers are not supported");
  Pb *t = tensor("w", DOUBLE, 1, d4);
  pb_bytes(t, 9, "0123456789abcdef0123456789abcdef", 32);
  expect_fail(relu_with(5, t), NULL, QH_ERROR_UNSUPPORTED,
              "initializer 'w' has unsupported type double");
  /* a node writing a graph input */
  g = pb_new();
  pb_msg(g, 1, node("n", "Relu", Y, X, NULL));
  pb_msg(g, 11, value_info("x", F32, 2, d14));
  pb_msg(g, 11, value_info("y", F32, 2, d14));
  expect_fail(model(13, g), NULL, QH_ERROR_INVALID, "output 'x' is already defined");
  Pb *a = pb_new();
  pb_str(a, 1, "ts");
  pb_int(a, 20, 9);
  pb_msg(a, 10, tensor("t0", F32, 1, d4));
  expect_fail(model(13, one_node_graph(node("n", "Relu", X, Y, a))), NULL, QH_ERROR_UNSUPPORTED,
              "node 'n' (Relu): attribute 'ts' is a list of tensors, which is not supported");
  expect_fail(pb_new(), NULL, QH_ERROR_PARSE, "not a valid ONNX model (the file is empty)");
  Pb *m = pb_new();
  pb_int(m, 1, 8);
  expect_fail(m, NULL, QH_ERROR_PARSE, "has no graph");
}

static void test_sizes(void) {
  static const gint64 huge[] = {(gint64)1 << 40}, big[] = {(gint64)1 << 33},
                      overflow[] = {(gint64)1 << 62, (gint64)1 << 62, 4}, neg[] = {2, -3};
  Pb *t = tensor("w", F32, 1, huge);
  pb_bytes(t, 9, "abcd", 4);
  expect_fail(relu_with(5, t), NULL, QH_ERROR_LIMIT,
              "initializer 'w': shape's element count exceeds");
  t = tensor("w", U8, 1, big); /* under the element limit: the byte count must refuse it */
  pb_bytes(t, 9, "abcd", 4);
  expect_fail(relu_with(5, t), NULL, QH_ERROR_INVALID,
              "initializer 'w' has 4 bytes of raw data but its shape [8589934592] of uint8 needs");
  t = tensor("w", F32, 3, overflow);
  pb_bytes(t, 9, "abcd", 4);
  expect_fail(relu_with(5, t), NULL, QH_ERROR_LIMIT, "exceeds the limit");
  t = tensor("w", F32, 2, neg);
  expect_fail(relu_with(5, t), NULL, QH_ERROR_INVALID,
              "initializer 'w' has negative dimension -3");
  t = tensor("w", F32, 1, big);
  pb_float(t, 4, 1.0f);
  expect_fail(relu_with(5, t), NULL, QH_ERROR_INVALID,
              "initializer 'w' has 1 values in float_data but its shape needs 8589934592");
  /* a tensor attribute goes through the same checks */
  Pb *a = pb_new();
  pb_str(a, 1, "value");
  pb_int(a, 20, 4);
  t = tensor("", F32, 1, huge);
  pb_msg(a, 5, t);
  expect_fail(model(13, one_node_graph(node("c", "Constant", NULL, Y, a))), NULL, QH_ERROR_LIMIT,
              "node 'c' (Constant): attribute 'value': shape's element count exceeds");
}

static void test_opsets(void) {
  expect_fail(model(11, one_node_graph(node("n", "Relu", X, Y, NULL))), NULL, QH_ERROR_UNSUPPORTED,
              "opset 11 is not supported; qhost reads opsets 13 to 17");
  expect_fail(model(24, one_node_graph(node("n", "Relu", X, Y, NULL))), NULL, QH_ERROR_UNSUPPORTED,
              "opset 24 is unknown to qhost; it reads opsets 13 to 17, and up to 23");
  expect_fail(model(23, one_node_graph(node("p", "Pad", X, Y, NULL))), NULL, QH_ERROR_UNSUPPORTED,
              "node 'p' (Pad): Pad changed in opset 23");
  expect_fail(model(23, one_node_graph(node("q", "QuantizeLinear", X, Y, NULL))), NULL, QH_ERROR_UNSUPPORTED,
              "node 'q' (QuantizeLinear): QuantizeLinear changed in opset 23");
  /* changes from 19 to 21 that keep the meaning (docs/qconfig.md, "Opset 21") */
  qh_graph_free(expect_load(model(20, one_node_graph(node("rm", "ReduceMax", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(21, one_node_graph(node("p", "Pad", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(21, one_node_graph(node("q", "QuantizeLinear", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(21, one_node_graph(node("d", "DequantizeLinear", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(21, one_node_graph(node("f", "Flatten", X, Y, NULL))), NULL));
  /* opset 18's forms of these are what the kernels implement (axes as an input, ...) */
  qh_graph_free(expect_load(model(18, one_node_graph(node("rm", "ReduceMean", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(19, one_node_graph(node("rm", "ReduceMax", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(18, one_node_graph(node("s", "Split", X, Y, NULL))), NULL));
  expect_fail(model(22, one_node_graph(node("c", "Conv", X, Y, NULL))), NULL, QH_ERROR_UNSUPPORTED,
              "node 'c' (Conv): Conv changed in opset 22");
  expect_fail(model(18, one_node_graph(node("e", "Celu", X, Y, NULL))), NULL, QH_ERROR_UNSUPPORTED,
              "node 'e' (Celu): the model imports opset 18 and Celu is not known to be unchanged");
  qh_graph_free(expect_load(model(23, one_node_graph(node("e", "Erf", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(18, one_node_graph(node("r", "Relu", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(21, one_node_graph(node("c", "Conv", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(23, one_node_graph(node("g", "Gemm", X, Y, NULL))), NULL));
  qh_graph_free(expect_load(model(17, one_node_graph(node("e", "Erf", X, Y, NULL))), NULL));
  /* non-default domains are the planner's business */
  Pb *n = node("m", "Mystery", X, Y, NULL);
  pb_str(n, 7, "com.example");
  qh_graph_free(expect_load(model(19, one_node_graph(n)), NULL));
  /* no default-domain import at all */
  Pb *m = pb_new(), *os = pb_new();
  pb_str(os, 1, "com.example");
  pb_int(os, 2, 1);
  pb_msg(m, 8, os);
  pb_msg(m, 7, one_node_graph(node("n", "Relu", X, Y, NULL)));
  expect_fail(m, NULL, QH_ERROR_UNSUPPORTED, "imports no default-domain");

  g_assert_true(qh_onnx_op_unchanged_since_17("Relu", 23));
  g_assert_false(qh_onnx_op_unchanged_since_17("Pad", 18));
  g_assert_false(qh_onnx_op_unchanged_since_17("Resize", 20));
  g_assert_true(qh_onnx_op_unchanged_since_17("AveragePool", 18));
  g_assert_false(qh_onnx_op_unchanged_since_17("AveragePool", 19));
  g_assert_false(qh_onnx_op_unchanged_since_17("Flatten", 21));
  g_assert_true(qh_onnx_op_unchanged_since_17("QuantizeLinear", 18));
  g_assert_false(qh_onnx_op_unchanged_since_17("QuantizeLinear", 19));
  g_assert_false(qh_onnx_op_unchanged_since_17("Relu", 24));
  g_assert_false(qh_onnx_op_unchanged_since_17("NoSuchOp", 18));
  /* the transformer and recurrent ops (onnx/defs/operator_sets.h up to opset 23) */
  g_assert_true(qh_onnx_op_unchanged_since_17("Einsum", 23));
  g_assert_true(qh_onnx_op_unchanged_since_17("TopK", 23));
  g_assert_true(qh_onnx_op_unchanged_since_17("Equal", 18));
  g_assert_false(qh_onnx_op_unchanged_since_17("Equal", 19));
  g_assert_false(qh_onnx_op_unchanged_since_17("Split", 18));
  g_assert_false(qh_onnx_op_unchanged_since_17("ReduceMax", 18));
  g_assert_true(qh_onnx_op_unchanged_since_17("ReduceSum", 23));
  g_assert_true(qh_onnx_op_unchanged_since_17("LSTM", 21));
  g_assert_false(qh_onnx_op_unchanged_since_17("GRU", 22));
  g_assert_false(qh_onnx_op_unchanged_since_17("ConstantOfShape", 20));
  g_assert_false(qh_onnx_op_unchanged_since_17("Cast", 19));
}

/* A model whose graph holds `levels` nested Loop bodies (graph attributes), written
 * back to front into one buffer so 100,000 levels cost linear time. The innermost
 * graph sits at message depth 2 + 3 * levels. */
static Pb *nested_model(int levels) {
  gsize cap = (gsize)levels * 64 + 1024, start = cap;
  guint8 *buf = g_malloc(cap);
  Pb *tmp = pb_new();
#define PREPEND(pb)                                                                  \
  do {                                                                               \
    start -= (pb)->len;                                                              \
    memcpy(buf + start, (pb)->data, (pb)->len);                                      \
    g_byte_array_set_size((pb), 0);                                                  \
  } while (0)
  for (int i = 0; i < levels; i++) {
    /* graph inside attribute g (6); attribute inside node (5); node inside graph (1) */
    pb_tag(tmp, 6, 2);
    pb_varint(tmp, cap - start);
    PREPEND(tmp);
    pb_str(tmp, 1, "body");
    pb_int(tmp, 20, 5);
    PREPEND(tmp);
    gsize attr_len = cap - start;
    pb_str(tmp, 4, "Loop");
    pb_tag(tmp, 5, 2);
    pb_varint(tmp, attr_len);
    PREPEND(tmp);
    pb_tag(tmp, 1, 2);
    pb_varint(tmp, cap - start);
    PREPEND(tmp);
  }
  Pb *os = pb_new();
  pb_int(os, 2, 13);
  pb_int(tmp, 1, 8);
  pb_msg(tmp, 8, os);
  pb_tag(tmp, 7, 2);
  pb_varint(tmp, cap - start);
  PREPEND(tmp);
#undef PREPEND
  g_byte_array_unref(tmp);
  Pb *m = pb_new();
  g_byte_array_append(m, buf + start, (guint)(cap - start));
  g_free(buf);
  return m;
}

static void test_subgraphs_and_nesting(void) {
  /* one level of subgraph: parsed, then refused as unsupported */
  Pb *a = pb_new();
  pb_str(a, 1, "then_branch");
  pb_int(a, 20, 5);
  pb_msg(a, 6, pb_new());
  expect_fail(model(13, one_node_graph(node("if", "If", X, Y, a))), NULL, QH_ERROR_UNSUPPORTED,
              "node 'if' (If): attribute 'then_branch' holds a subgraph; subgraph attributes are "
              "not supported");

  /* the innermost graph at depth 2 + 3 * 10 = 32 passes the pre-scan; one more does not */
  expect_fail(nested_model(10), NULL, QH_ERROR_UNSUPPORTED, "subgraph attributes are not supported");
  expect_fail(nested_model(11), NULL, QH_ERROR_LIMIT, "message nesting deeper than 32 levels (");
  expect_fail(nested_model(100000), NULL, QH_ERROR_LIMIT, "message nesting deeper than 32 levels (");
}

static Pb *valid_model_bytes(void) {
  static const gint64 d4[] = {4};
  Pb *g = one_node_graph(node("n", "Add", (const char *const[]){"x", "w", NULL}, Y, NULL));
  Pb *t = tensor("w", F32, 1, d4);
  pb_bytes(t, 9, "0123456789abcdef", 16);
  pb_msg(g, 5, t);
  return model(13, g);
}

static void test_garbage(void) {
  /* every truncation of a valid model fails cleanly */
  Pb *m = valid_model_bytes();
  qh_graph_free(expect_load(g_byte_array_ref(m), NULL));
  for (guint len = 1; len < m->len; len++) {
    GError *error = NULL;
    g_assert_null(qh_onnx_load_from_memory(m->data, len, "test.onnx", NULL, &error));
    g_assert_nonnull(error);
    g_assert_true(g_str_has_prefix(error->message, "test.onnx: "));
    g_error_free(error);
  }
  Pb *cut = pb_new();
  g_byte_array_append(cut, m->data, m->len - 3);
  expect_fail(cut, NULL, QH_ERROR_PARSE, "not a valid ONNX model (protobuf parse failed");

  /* random bytes and random bit flips of the valid model never crash */
  GRand *rand = g_rand_new_with_seed(20240611);
  for (int iter = 0; iter < 2000; iter++) {
    gboolean flip = iter % 2;
    guint len = flip ? m->len : (guint)g_rand_int_range(rand, 1, 600);
    guint8 *data = flip ? g_memdup2(m->data, m->len) : g_malloc(len);
    if (flip)
      for (int k = g_rand_int_range(rand, 1, 4); k > 0; k--)
        data[g_rand_int_range(rand, 0, (gint32)len)] ^= (guint8)(1u << g_rand_int_range(rand, 0, 8));
    else
      for (guint i = 0; i < len; i++)
        data[i] = (guint8)g_rand_int(rand);
    GError *error = NULL;
    QhGraph *g = qh_onnx_load_from_memory(data, len, "test.onnx", NULL, &error);
    g_assert_true((g == NULL) != (error == NULL));
    if (error != NULL)
      g_assert_true(g_str_has_prefix(error->message, "test.onnx: "));
    if (!flip)
      g_assert_null(g); /* random bytes carry no opset import and no graph */
    g_clear_error(&error);
    qh_graph_free(g);
    g_free(data);
  }
  g_rand_free(rand);
  g_byte_array_unref(m);
}

/* A model whose initializer 'w' (f32[4]) lives in external data. */
static Pb *external_model(const char *location, const char *offset, const char *length) {
  static const gint64 d4[] = {4};
  Pb *g = one_node_graph(node("n", "Add", (const char *const[]){"x", "w", NULL}, Y, NULL));
  Pb *t = tensor("w", F32, 1, d4);
  const char *kv[][2] = {{"location", location}, {"offset", offset}, {"length", length}};
  for (int i = 0; i < 3; i++) {
    if (kv[i][1] == NULL)
      continue;
    Pb *e = pb_new();
    pb_str(e, 1, kv[i][0]);
    pb_str(e, 2, kv[i][1]);
    pb_msg(t, 13, e);
  }
  pb_int(t, 14, 1);
  pb_msg(g, 5, t);
  return model(13, g);
}

static void test_external_data(void) {
  g_autofree char *dir = g_dir_make_tmp("qh-onnx-XXXXXX", NULL);
  g_autofree char *sub = g_build_filename(dir, "sub", NULL);
  g_mkdir(sub, 0755);
  float w[6] = {-1.0f, 1.0f, 2.0f, 3.0f, 4.0f, -2.0f};
  g_autofree char *bin = g_build_filename(sub, "weights.bin", NULL);
  g_assert_true(g_file_set_contents(bin, (const char *)w, sizeof w, NULL));

  /* a legitimate file beside the model, through qh_onnx_load and a path */
  Pb *m = external_model("sub/weights.bin", "4", "16");
  g_autofree char *path = g_build_filename(dir, "model.onnx", NULL);
  g_assert_true(g_file_set_contents(path, (const char *)m->data, m->len, NULL));
  g_byte_array_unref(m);
  GError *error = NULL;
  QhGraph *g = qh_onnx_load(path, &error);
  g_assert_no_error(error);
  g_assert_cmpmem(init_of(g, "w")->data, init_of(g, "w")->nbytes, w + 1, 16);
  qh_graph_free(g);
  qh_graph_free(expect_load(external_model("./sub/weights.bin", "8", NULL), dir));

  expect_fail(external_model("/etc/passwd", NULL, NULL), dir, QH_ERROR_INVALID,
              "initializer 'w': external data location '/etc/passwd' is an absolute path");
  expect_fail(external_model("../../x", NULL, NULL), dir, QH_ERROR_INVALID,
              "initializer 'w': external data location '../../x' contains '..'");
  expect_fail(external_model("sub/weights.bin", "0", "16"), NULL, QH_ERROR_UNSUPPORTED,
              "initializer 'w': external data 'sub/weights.bin' needs the model's directory");
  expect_fail(external_model("sub/weights.bin", "0", "20"), dir, QH_ERROR_INVALID,
              "holds 20 bytes but the shape needs 16");
  expect_fail(external_model("sub/weights.bin", "16", "16"), dir, QH_ERROR_INVALID,
              "runs past the end of the file");
  expect_fail(external_model("sub/weights.bin", "-1", "16"), dir, QH_ERROR_INVALID,
              "invalid external data offset '-1'");
  expect_fail(external_model("nothere.bin", NULL, "16"), dir, QH_ERROR_IO,
              "initializer 'w': external data 'nothere.bin': No such file or directory");
  expect_fail(external_model("sub", NULL, "16"), dir, QH_ERROR_INVALID, "is not a regular file");
  /* a symlink inside the directory may not lead out of it */
  g_autofree char *link = g_build_filename(dir, "escape.bin", NULL);
  g_assert_cmpint(symlink("/etc/passwd", link), ==, 0);
  expect_fail(external_model("escape.bin", NULL, "16"), dir, QH_ERROR_INVALID,
              "initializer 'w': external data location 'escape.bin' resolves outside the model's "
              "directory");
  /* loading from the sub directory: the model directory is sub, so dir is outside */
  expect_fail(external_model("../escape.bin", NULL, "16"), sub, QH_ERROR_INVALID, "contains '..'");

  rm_tree(dir);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/onnx/round-trip", test_round_trip);
  g_test_add_func("/onnx/save-defaults-and-failure", test_save_defaults_and_failure);
  g_test_add_func("/onnx/typed-fields-and-quirks", test_typed_fields_and_quirks);
  g_test_add_func("/onnx/bad-graphs", test_bad_graphs);
  g_test_add_func("/onnx/sizes", test_sizes);
  g_test_add_func("/onnx/opsets", test_opsets);
  g_test_add_func("/onnx/subgraphs-and-nesting", test_subgraphs_and_nesting);
  g_test_add_func("/onnx/garbage", test_garbage);
  g_test_add_func("/onnx/external-data", test_external_data);
  return g_test_run();
}
