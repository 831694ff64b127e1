/* Unit tests of the annotation set (hostapi/annotation.c): deep copies, whole-annotation
 * validation (shared targets, derived sources, sharing cycles, float roots), the
 * implicit sharing of an unannotated input edge with its producer's output, resolve,
 * and graph-order iteration. */
#include <string.h>

#include "core/error.h"
#include "hostapi/annotation.h"

/* x -> a (Relu) -> b (Relu) -> c (Relu) -> d (Add c, x); node ids 0..3, value ids
 * x 0, va 1, vb 2, vc 3, vd 4. Nodes are added out of order (d first) so graph
 * order differs from id order. */
static QhGraph *chain(void) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  x->is_input = TRUE;
  g_array_append_val(g->inputs, x->id);
  const char *names[] = {"va", "vb", "vc", "vd"};
  for (int i = 0; i < 4; i++) {
    QhValue *v = qh_graph_add_value(g, names[i], NULL);
    v->shape = qh_shape_make(2, (int64_t[]){1, 8});
  }
  qh_graph_add_node(g, "d", "Add", "", 2, (int[]){3, 0}, 1, (int[]){4}, NULL);
  qh_graph_add_node(g, "a", "Relu", "", 1, (int[]){0}, 1, (int[]){1}, NULL);
  qh_graph_add_node(g, "b", "Relu", "", 1, (int[]){1}, 1, (int[]){2}, NULL);
  qh_graph_add_node(g, "c", "Relu", "", 1, (int[]){2}, 1, (int[]){3}, NULL);
  return g;
}

enum { D, A, B, C };

static QhEdgeRef in(uint32_t node, uint32_t slot) { return (QhEdgeRef){node, slot, QH_EDGE_INPUT, 0}; }
static QhEdgeRef out(uint32_t node) { return (QhEdgeRef){node, 0, QH_EDGE_OUTPUT, 0}; }

static QhQuantSpec quantize(void) {
  return (QhQuantSpec){QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                       .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
                       .ch_axis = -1};
}

static QhQuantSpec shared(QhEdgeRef target) {
  return (QhQuantSpec){QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_SHARED, .shared_with = target};
}

static void set_ok(QhAnnotationSet *set, const QhGraph *g, QhEdgeRef e, QhQuantSpec s) {
  GError *error = NULL;
  g_assert_true(qh_annotation_set_spec(set, g, &e, &s, &error));
  g_assert_no_error(error);
}

static void validate_fails(const QhAnnotationSet *set, const QhGraph *g, const char *const *parts) {
  GError *error = NULL;
  g_assert_false(qh_annotation_set_validate(set, g, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  for (; *parts; parts++)
    if (!strstr(error->message, *parts))
      g_error("'%s' lacks '%s'", error->message, *parts);
  g_error_free(error);
}

static QhStatus *derive_nothing(void *user_data, const QhHostApi *host,
                                const QhQParams *const *sources, size_t n_sources, QhQParams *o) {
  (void)user_data, (void)host, (void)sources, (void)n_sources, (void)o;
  return NULL;
}

static void test_deep_copy(void) {
  QhGraph *g = chain();
  QhAnnotationSet *set = qh_annotation_set_new();
  char observer[] = "HistogramObserver";
  char key[] = "bins", value[] = "2048";
  QhOption args[] = {{key, value}};
  QhQuantSpec s = quantize();
  s.observer = observer, s.observer_args = args, s.n_observer_args = 1;
  s.derived_from = (const QhEdgeRef *)args; /* not a DERIVED spec: must be dropped */
  set_ok(set, g, out(A), s);
  observer[0] = 'X', key[0] = 'X', value[0] = '9';
  args[0].key = NULL;
  s.kind = QH_SPEC_FLOAT;
  QhEdgeRef e = out(A);
  const QhQuantSpec *stored = qh_annotation_set_lookup(set, &e);
  g_assert_nonnull(stored);
  g_assert_cmpint(stored->kind, ==, QH_SPEC_QUANTIZE);
  g_assert_cmpstr(stored->observer, ==, "HistogramObserver");
  g_assert_true(stored->observer != observer);
  g_assert_cmpuint(stored->n_observer_args, ==, 1);
  g_assert_cmpstr(stored->observer_args[0].key, ==, "bins");
  g_assert_cmpstr(stored->observer_args[0].value, ==, "2048");
  g_assert_null(stored->derived_from);
  g_assert_cmpuint(stored->struct_size, ==, sizeof(QhQuantSpec));

  QhEdgeRef sources[] = {out(A), in(B, 0)};
  QhQuantSpec d = quantize();
  d.kind = QH_SPEC_DERIVED, d.dtype = QH_DTYPE_INT32, d.derived_from = sources;
  d.n_derived_from = 2, d.derive = derive_nothing, d.observer = observer; /* dropped */
  set_ok(set, g, out(B), d);
  sources[1] = out(D);
  e = out(B);
  stored = qh_annotation_set_lookup(set, &e);
  g_assert_cmpuint(stored->derived_from[1].node, ==, B);
  g_assert_cmpint(stored->derived_from[1].kind, ==, QH_EDGE_INPUT);
  g_assert_null(stored->observer);
  g_assert_true(stored->derive == derive_nothing);
  /* Replacing frees the old copy (ASan checks); removing drops it. */
  set_ok(set, g, out(B), quantize());
  g_assert_cmpint(qh_annotation_set_lookup(set, &e)->kind, ==, QH_SPEC_QUANTIZE);
  qh_annotation_set_remove(set, &e);
  g_assert_null(qh_annotation_set_lookup(set, &e));
  g_assert_cmpuint(qh_annotation_set_n_specs(set), ==, 1);
  qh_annotation_set_free(set);
  qh_graph_free(g);
}

static void test_sharing_cycle(void) {
  QhGraph *g = chain();
  QhAnnotationSet *set = qh_annotation_set_new();
  set_ok(set, g, out(A), shared(out(B)));
  set_ok(set, g, out(B), shared(out(C)));
  set_ok(set, g, out(C), shared(out(A)));
  validate_fails(set, g, (const char *const[]){"sharing forms a cycle", "node 'a' (Relu)",
                                               "node 'b' (Relu)", "node 'c' (Relu)", NULL});
  QhEdgeRef e = out(A), root;
  const QhQuantSpec *rs = NULL;
  g_assert_false(qh_annotation_set_resolve(set, g, &e, &root, &rs));
  g_assert_null(rs);
  /* Breaking the cycle at c makes a valid group rooted at c. */
  set_ok(set, g, out(C), quantize());
  GError *error = NULL;
  g_assert_true(qh_annotation_set_validate(set, g, &error));
  g_assert_no_error(error);
  g_assert_true(qh_annotation_set_resolve(set, g, &e, &root, &rs));
  g_assert_cmpuint(root.node, ==, C);
  g_assert_cmpint(root.kind, ==, QH_EDGE_OUTPUT);
  g_assert_cmpint(rs->kind, ==, QH_SPEC_QUANTIZE);
  /* A self-share is a cycle of one. */
  set_ok(set, g, out(D), shared(out(D)));
  validate_fails(set, g, (const char *const[]){"cycle", "output 0 of node 'd' (Add)", NULL});
  qh_annotation_set_free(set);
  qh_graph_free(g);
}

static void test_unannotated_targets(void) {
  QhGraph *g = chain();
  QhAnnotationSet *set = qh_annotation_set_new();
  /* b's input edge has no spec and a's output has none either. */
  set_ok(set, g, out(C), shared(in(B, 0)));
  validate_fails(set, g, (const char *const[]){"output 0 of node 'c' (Relu)", "spec.shared_with",
                                               "input 0 of node 'b' (Relu) is not annotated", NULL});
  /* With a's output annotated, b's input edge carries it (implicit sharing). */
  set_ok(set, g, out(A), quantize());
  GError *error = NULL;
  g_assert_true(qh_annotation_set_validate(set, g, &error));
  g_assert_no_error(error);
  QhEdgeRef e = out(C), root;
  const QhQuantSpec *rs;
  g_assert_true(qh_annotation_set_resolve(set, g, &e, &root, &rs));
  g_assert_cmpuint(root.node, ==, A);
  /* The graph input x feeds d's input 1: nothing upstream can annotate it. */
  set_ok(set, g, out(B), shared(in(D, 1)));
  validate_fails(set, g, (const char *const[]){"input 1 of node 'd' (Add) is not annotated", NULL});
  set_ok(set, g, out(B), quantize());

  /* A derived spec whose source lost its annotation. */
  QhEdgeRef sources[] = {out(A), in(D, 1)};
  QhQuantSpec d = quantize();
  d.kind = QH_SPEC_DERIVED, d.dtype = QH_DTYPE_INT32, d.derived_from = sources;
  d.n_derived_from = 2, d.derive = derive_nothing;
  set_ok(set, g, out(D), d);
  validate_fails(set, g, (const char *const[]){"output 0 of node 'd' (Add)", "spec.derived_from[1]",
                                               "input 1 of node 'd' (Add) is not annotated", NULL});
  QhQuantSpec f = quantize();
  f.kind = QH_SPEC_FLOAT, f.dtype = QH_DTYPE_FLOAT;
  set_ok(set, g, in(D, 1), f);
  g_assert_true(qh_annotation_set_validate(set, g, &error));
  /* Sharing with a float edge has no qparams to share. */
  set_ok(set, g, out(C), shared(in(D, 1)));
  validate_fails(set, g, (const char *const[]){"which is not quantized (QH_SPEC_FLOAT)", NULL});
  /* A derived source pointing at a missing edge is refused at once. */
  sources[1] = (QhEdgeRef){A, 3, QH_EDGE_OUTPUT, 0};
  QhEdgeRef target = out(D);
  g_assert_false(qh_annotation_set_spec(set, g, &target, &d, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_assert_cmpstr(error->message, ==,
                  "spec.derived_from[1].slot 3 is out of range: node 'a' (Relu) has 1 outputs");
  g_clear_error(&error);
  g_assert_cmpuint(qh_annotation_set_lookup(set, &target)->n_derived_from, ==, 2);
  g_assert_cmpuint(qh_annotation_set_lookup(set, &target)->derived_from[1].node, ==, D);
  qh_annotation_set_free(set);
  qh_graph_free(g);
}

static void test_removed_node(void) {
  QhGraph *g = chain();
  QhAnnotationSet *set = qh_annotation_set_new();
  set_ok(set, g, out(A), quantize());
  set_ok(set, g, out(B), shared(out(A)));
  qh_graph_remove_node(g, A);
  GError *error = NULL;
  QhEdgeRef e = out(A);
  QhQuantSpec s = quantize();
  g_assert_false(qh_annotation_set_spec(set, g, &e, &s, &error));
  g_assert_cmpstr(error->message, ==, "edge.node 1 (node 'a' (Relu)) was removed");
  g_clear_error(&error);
  validate_fails(set, g, (const char *const[]){"annotated edge.node 1", "was removed", NULL});
  g_assert_false(qh_annotation_set_node_flags(set, g, A, QH_ANNOTATION_ANNOTATED, &error));
  g_clear_error(&error);
  g_assert_true(qh_annotation_set_node_flags(set, g, B, QH_ANNOTATION_NO_IMPLICIT_SHARING, NULL));
  g_assert_cmpuint(qh_annotation_node_flags(set, B), ==, QH_ANNOTATION_NO_IMPLICIT_SHARING);
  g_assert_true(qh_annotation_set_node_flags(set, g, B, 0, NULL));
  g_assert_cmpuint(qh_annotation_node_flags(set, B), ==, 0);
  g_assert_cmpuint(qh_annotation_node_flags(set, QH_INVALID_ID), ==, 0);
  qh_annotation_set_free(set);
  qh_graph_free(g);
}

static gboolean collect(gpointer user_data, const QhEdgeRef *edge, const QhQuantSpec *spec,
                        GError **error) {
  (void)error;
  g_string_append_printf(user_data, "%u%c%u:%d ", edge->node, edge->kind ? 'o' : 'i', edge->slot,
                         spec->kind);
  return TRUE;
}

static gboolean stop_at_second(gpointer user_data, const QhEdgeRef *edge, const QhQuantSpec *spec,
                               GError **error) {
  (void)edge, (void)spec;
  if (++*(int *)user_data == 2) {
    g_set_error(error, QH_ERROR, QH_ERROR_FAILED, "stop");
    return FALSE;
  }
  return TRUE;
}

static void test_foreach_order(void) {
  QhGraph *g = chain();
  QhAnnotationSet *set = qh_annotation_set_new();
  set_ok(set, g, out(D), quantize());
  set_ok(set, g, in(D, 1), quantize());
  set_ok(set, g, in(D, 0), shared(out(C)));
  set_ok(set, g, out(C), quantize());
  set_ok(set, g, in(A, 0), quantize());
  /* Graph order is a, b, c, d (ids 1, 2, 3, 0); inputs before outputs. */
  GString *seen = g_string_new("");
  GError *error = NULL;
  g_assert_true(qh_annotation_set_foreach(set, g, collect, seen, &error));
  g_assert_cmpstr(seen->str, ==, "1i0:1 3o0:1 0i0:2 0i1:1 0o0:1 ");
  g_string_free(seen, TRUE);
  int calls = 0;
  g_assert_false(qh_annotation_set_foreach(set, g, stop_at_second, &calls, &error));
  g_assert_cmpint(calls, ==, 2);
  g_assert_error(error, QH_ERROR, QH_ERROR_FAILED);
  g_clear_error(&error);
  g_assert_true(qh_annotation_set_validate(set, g, &error));
  qh_annotation_set_free(set);
  qh_graph_free(g);
}

static void test_dtype_ranges(void) {
  const struct {
    int32_t dtype;
    int64_t lo, hi;
    const char *name;
  } cases[] = {{QH_DTYPE_UINT8, 0, 255, "uint8"},       {QH_DTYPE_INT8, -128, 127, "int8"},
               {QH_DTYPE_UINT16, 0, 65535, "uint16"},   {QH_DTYPE_INT16, -32768, 32767, "int16"},
               {QH_DTYPE_INT32, INT32_MIN, INT32_MAX, "int32"}};
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    int64_t lo = 1, hi = 1;
    const char *name = NULL;
    g_assert_true(qh_quant_dtype_range(cases[i].dtype, &lo, &hi, &name));
    g_assert_cmpint(lo, ==, cases[i].lo);
    g_assert_cmpint(hi, ==, cases[i].hi);
    g_assert_cmpstr(name, ==, cases[i].name);
  }
  int64_t lo = 7, hi = 7;
  const char *name = "kept";
  g_assert_false(qh_quant_dtype_range(QH_DTYPE_FLOAT, &lo, &hi, &name));
  g_assert_false(qh_quant_dtype_range(QH_DTYPE_INT64, &lo, &hi, &name));
  g_assert_true(lo == 7 && hi == 7 && strcmp(name, "kept") == 0);
  /* int16 with a custom range inside the type is fine; int32 takes its full range. */
  QhGraph *g = chain();
  QhAnnotationSet *set = qh_annotation_set_new();
  QhQuantSpec s = quantize();
  s.dtype = QH_DTYPE_INT16, s.flags = QH_SPEC_HAS_RANGE, s.quant_min = -32768, s.quant_max = 32767;
  set_ok(set, g, out(A), s);
  s.dtype = QH_DTYPE_INT32, s.quant_min = INT32_MIN, s.quant_max = INT32_MAX;
  set_ok(set, g, out(B), s);
  s.dtype = QH_DTYPE_UINT16, s.quant_min = -1;
  QhEdgeRef e = out(C);
  GError *error = NULL;
  g_assert_false(qh_annotation_set_spec(set, g, &e, &s, &error));
  g_assert_cmpstr(error->message, ==, "spec.quant_min -1 is outside the range of uint16 [0, 65535]");
  g_clear_error(&error);
  qh_annotation_set_free(set);
  qh_graph_free(g);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/annotation/deep-copy", test_deep_copy);
  g_test_add_func("/annotation/sharing-cycle", test_sharing_cycle);
  g_test_add_func("/annotation/unannotated-targets", test_unannotated_targets);
  g_test_add_func("/annotation/removed-node", test_removed_node);
  g_test_add_func("/annotation/foreach-order", test_foreach_order);
  g_test_add_func("/annotation/dtype-ranges", test_dtype_ranges);
  return g_test_run();
}
