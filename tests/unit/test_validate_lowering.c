/* Unit tests of the loader's validation of lowering patterns' flags: a pattern built
 * against ABI 1.1 may set QH_PATTERN_THROUGH_SHARED_QDQ on a pattern of two or more
 * ops; a 1.0 pattern, a one-op pattern or an unknown bit is refused with one message
 * naming the pattern. Four-op patterns load when built against ABI 1.2, not 1.1; five
 * ops never. The requantize pseudo-op loads only as a 1.2 pattern's one op. */
#include <string.h>

#include "core/error.h"
#include "plugin/validate-private.h"

static QhStatus *k_create(void *i, const QhHostApi *h, const QhGraphView *g, const QhNodeUnit *u, void **out) {
  (void)i, (void)h, (void)g, (void)u, (void)out;
  return NULL;
}
static QhStatus *k_reshape(void *k, const QhHostApi *h, const QhTensorView *in, size_t n_in, QhTensorView *out,
                           size_t n_out, size_t *ws) {
  (void)k, (void)h, (void)in, (void)n_in, (void)out, (void)n_out, (void)ws;
  return NULL;
}
static QhStatus *k_run(void *k, const QhHostApi *h, const QhRunContext *c, const QhTensorView *in, size_t n_in,
                       QhTensorView *out, size_t n_out, void *ws, size_t n_ws) {
  (void)k, (void)h, (void)c, (void)in, (void)n_in, (void)out, (void)n_out, (void)ws, (void)n_ws;
  return NULL;
}
static void k_destroy(void *k) { (void)k; }

static const QhKernelOps kernel = {QH_STRUCT_HEADER(QhKernelOps), .id = "k", .input_layout = QH_LAYOUT_ANY,
                                   .output_layout = QH_LAYOUT_ANY, .create = k_create, .reshape = k_reshape,
                                   .run = k_run, .destroy = k_destroy};
static const char *const conv_clip[] = {"Conv", "Clip"}, *const conv_only[] = {"Conv"};

/* Validates a descriptor whose only pattern is p; returns the error message or NULL. */
static char *validate(const QhLoweringPattern *p) {
  const QhLoweringPattern *const patterns[] = {p};
  const QhLoweringOps lowering = {QH_STRUCT_HEADER(QhLoweringOps), patterns, 1};
  const QhPluginDesc desc = {QH_STRUCT_HEADER(QhPluginDesc), .name = "flags", .version = "1",
                             .description = "pattern flags", .lowering = &lowering};
  GError *error = NULL;
  QhPluginInfo *info = qh_plugin_validate_desc(&desc, "libqhost-flags.so", NULL, &error);
  if (info) {
    g_assert_no_error(error);
    qh_plugin_info_free(info);
    return NULL;
  }
  g_assert_nonnull(error);
  char *msg = g_strdup(error->message);
  g_error_free(error);
  return msg;
}

static void test_through_shared_qdq_flag(void) {
  QhLoweringPattern p = {QH_STRUCT_HEADER(QhLoweringPattern), .id = "conv_clip", .ops = conv_clip, .n_ops = 2,
                         .extra_inputs_mask = 0x2u, .flags = QH_PATTERN_THROUGH_SHARED_QDQ, .kernel = &kernel};
  g_assert_null(validate(&p));

  QhLoweringPattern old = p; /* a 1.0 pattern knows no flags */
  old.abi_version = QH_ABI_MAJOR << 16;
  char *msg = validate(&old);
  g_assert_nonnull(msg);
  g_assert_nonnull(strstr(msg, "lowering.patterns[0] 'conv_clip': unknown flags 0x1"));
  g_free(msg);

  QhLoweringPattern one = p;
  one.ops = conv_only, one.n_ops = 1, one.extra_inputs_mask = 0;
  msg = validate(&one);
  g_assert_nonnull(msg);
  g_assert_nonnull(strstr(msg, "QH_PATTERN_THROUGH_SHARED_QDQ needs two or more ops"));
  g_free(msg);

  QhLoweringPattern unknown = p;
  unknown.flags = QH_PATTERN_THROUGH_SHARED_QDQ | 0x4u;
  msg = validate(&unknown);
  g_assert_nonnull(msg);
  g_assert_nonnull(strstr(msg, "unknown flags 0x4"));
  g_free(msg);

  QhLoweringPattern none = p;
  none.flags = 0;
  g_assert_null(validate(&none));
}

static const char *const dyn_bias[] = {"MatMulInteger", "Cast", "Mul", "Add", "Relu"};

static void test_four_op_patterns(void) {
  QhLoweringPattern p = {QH_STRUCT_HEADER(QhLoweringPattern), .id = "dyn_bias", .ops = dyn_bias, .n_ops = 4,
                         .extra_inputs_mask = 0xcu, .flags = QH_PATTERN_FLOAT_EXTRA_INPUTS, .kernel = &kernel};
  g_assert_null(validate(&p));

  QhLoweringPattern old = p; /* a 1.1 pattern stops at three ops */
  old.abi_version = QH_ABI_MAJOR << 16 | 1u;
  old.flags = 0;
  char *msg = validate(&old);
  g_assert_nonnull(msg);
  g_assert_nonnull(strstr(msg, "lowering.patterns[0] 'dyn_bias': n_ops must be 1 to 3"));
  g_free(msg);
  old.n_ops = 3, old.extra_inputs_mask = 0x4u;
  g_assert_null(validate(&old));

  QhLoweringPattern five = p;
  five.n_ops = 5;
  msg = validate(&five);
  g_assert_nonnull(msg);
  g_assert_nonnull(strstr(msg, "n_ops must be 1 to 4"));
  g_free(msg);
}

static const char *const requantize[] = {QH_PATTERN_OP_REQUANTIZE};
static const char *const add_requantize[] = {"Add", QH_PATTERN_OP_REQUANTIZE};

static void test_requantize_pattern(void) {
  QhLoweringPattern p = {QH_STRUCT_HEADER(QhLoweringPattern), .id = "requant", .ops = requantize, .n_ops = 1,
                         .kernel = &kernel};
  g_assert_null(validate(&p));

  QhLoweringPattern chained = p, flagged = p, old = p;
  chained.ops = add_requantize, chained.n_ops = 2;
  flagged.flags = QH_PATTERN_FLOAT_EXTRA_INPUTS;
  old.abi_version = QH_ABI_MAJOR << 16 | 1u;
  const QhLoweringPattern *bad[] = {&chained, &flagged, &old};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    char *msg = validate(bad[i]);
    g_assert_nonnull(msg);
    g_assert_nonnull(strstr(msg, "lowering.patterns[0] 'requant': qhost:Requantize must be the pattern's only op"));
    g_free(msg);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/validate/lowering/through-shared-qdq-flag", test_through_shared_qdq_flag);
  g_test_add_func("/validate/lowering/four-op-patterns", test_four_op_patterns);
  g_test_add_func("/validate/lowering/requantize-pattern", test_requantize_pattern);
  return g_test_run();
}
