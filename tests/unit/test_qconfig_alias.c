/* Unit tests of the PyTorch-name alias table behind qconfig object_type keys
 * (quant/qconfig-alias.c): each name against small graphs whose op, weight rank,
 * kernel_shape or constants make it match or not, as docs/qconfig.md's table says,
 * and which constant inputs count as PyTorch's non-tensor (scalar) arguments. */
#include <string.h>

#include "core/error.h"
#include "quant/qconfig-private.h"

static gboolean alias_on(const char *alias, const char *op, int in_rank, const int64_t *in_dims,
                         const QhTensor *w, const char *attr, int64_t n_attr) {
  QhGraph *g = qh_graph_new();
  QhValue *x = qh_graph_add_value(g, "x", NULL);
  if (in_rank >= 0)
    x->shape = qh_shape_make(in_rank, in_dims);
  int ins[2] = {x->id, -1};
  if (w != NULL) {
    QhValue *wv = qh_graph_add_value(g, "w", NULL);
    qh_value_set_initializer(wv, qh_tensor_copy(w, NULL));
    ins[1] = wv->id;
  }
  int out = qh_graph_add_value(g, "y", NULL)->id;
  QhNode *n = qh_graph_add_node(g, "n", op, "", w ? 2 : 1, ins, 1, &out, NULL);
  if (attr != NULL) {
    int64_t k[3] = {3, 3, 3};
    qh_node_set_attr_ints(n, attr, n_attr, k);
  }
  gboolean r = qh_qconfig_alias_matches(alias, g, n);
  qh_graph_free(g);
  return r;
}

static QhTensor *tensor(int rank, const int64_t *dims, float v) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(QH_DTYPE_F32, &s, NULL);
  for (int64_t i = 0; i < qh_tensor_numel(t); i++)
    ((float *)t->data)[i] = v;
  return t;
}

static void test_alias_table(void) {
  const int64_t d5[] = {1, 3, 8, 8, 8}, d4[] = {1, 3, 8, 8}, d3[] = {1, 3, 8}, d2[] = {1, 3};
  QhTensor *w3 = tensor(3, d3, 1), *w4 = tensor(4, d4, 1), *w5 = tensor(5, d5, 1);
  QhTensor *w2 = tensor(2, d2, 1), *s0 = tensor(0, NULL, 0), *s6 = tensor(1, (int64_t[]){1}, 6);
  g_assert_true(alias_on("Conv1d", "Conv", -1, NULL, w3, NULL, 0));
  g_assert_false(alias_on("Conv2d", "Conv", -1, NULL, w3, NULL, 0));
  g_assert_true(alias_on("Conv2d", "Conv", -1, NULL, w4, NULL, 0));
  g_assert_true(alias_on("Conv3d", "Conv", -1, NULL, w5, NULL, 0));
  g_assert_false(alias_on("Conv2d", "ConvTranspose", -1, NULL, w4, NULL, 0));
  g_assert_true(alias_on("ConvTranspose2d", "ConvTranspose", -1, NULL, w4, NULL, 0));
  /* kernel_shape decides when it is there */
  g_assert_true(alias_on("Conv3d", "Conv", -1, NULL, NULL, "kernel_shape", 3));
  g_assert_true(alias_on("MaxPool2d", "MaxPool", 4, d4, NULL, "kernel_shape", 2));
  g_assert_false(alias_on("MaxPool1d", "MaxPool", 4, d4, NULL, "kernel_shape", 2));
  g_assert_true(alias_on("BatchNorm2d", "BatchNormalization", 4, d4, NULL, NULL, 0));
  g_assert_false(alias_on("BatchNorm2d", "BatchNormalization", 2, d2, NULL, NULL, 0));
  g_assert_true(alias_on("BatchNorm1d", "BatchNormalization", 2, d2, NULL, NULL, 0));
  g_assert_true(alias_on("BatchNorm1d", "BatchNormalization", 3, d3, NULL, NULL, 0));
  g_assert_true(alias_on("BatchNorm3d", "BatchNormalization", -1, NULL, NULL, NULL, 0));
  g_assert_true(alias_on("AdaptiveAvgPool2d", "GlobalAveragePool", 4, d4, NULL, NULL, 0));
  g_assert_false(alias_on("AdaptiveAvgPool1d", "GlobalAveragePool", 4, d4, NULL, NULL, 0));
  g_assert_true(alias_on("AdaptiveAvgPool2d", "AveragePool", 4, d4, NULL, "kernel_shape", 2));
  g_assert_true(alias_on("Linear", "MatMul", 2, d2, w2, NULL, 0));
  g_assert_false(alias_on("Linear", "MatMul", 2, d2, w3, NULL, 0));
  g_assert_false(alias_on("Linear", "MatMul", 2, d2, NULL, NULL, 0));
  g_assert_true(alias_on("Linear", "Gemm", 2, d2, NULL, NULL, 0));
  g_assert_true(alias_on("ReLU", "Relu", 2, d2, NULL, NULL, 0));
  g_assert_false(alias_on("ReLU", "Clip", 2, d2, NULL, NULL, 0));
  g_assert_true(alias_on("Hardswish", "HardSwish", 2, d2, NULL, NULL, 0));
  g_assert_true(alias_on("LeakyReLU", "LeakyRelu", 2, d2, NULL, NULL, 0));
  g_assert_true(alias_on("cat", "Concat", 2, d2, NULL, NULL, 0));
  g_assert_true(alias_on("flatten", "Flatten", 2, d2, NULL, NULL, 0));
  g_assert_false(alias_on("Sigmoid", "Sigmoid", 2, d2, NULL, NULL, 0)); /* an op type, not an alias */
  g_assert_true(qh_qconfig_alias_is_known("Linear"));
  g_assert_false(qh_qconfig_alias_is_known("Gemm"));

  /* ReLU6 is Clip(0, 6) from opset 11 inputs */
  QhGraph *g = qh_graph_new();
  int x = qh_graph_add_value(g, "x", NULL)->id, lo = qh_graph_add_value(g, "lo", NULL)->id;
  int hi = qh_graph_add_value(g, "hi", NULL)->id, y = qh_graph_add_value(g, "y", NULL)->id;
  int z = qh_graph_add_value(g, "z", NULL)->id;
  qh_value_set_initializer(qh_graph_value(g, lo), qh_tensor_copy(s0, NULL));
  qh_value_set_initializer(qh_graph_value(g, hi), tensor(0, NULL, 6));
  QhNode *clip = qh_graph_add_node(g, "clip", "Clip", "", 3, (int[]){x, lo, hi}, 1, &y, NULL);
  QhNode *clip2 = qh_graph_add_node(g, "clip2", "Clip", "", 3, (int[]){y, hi, hi}, 1, &z, NULL);
  g_assert_true(qh_qconfig_alias_matches("ReLU6", g, clip));
  g_assert_true(qh_qconfig_alias_matches("Hardtanh", g, clip));
  g_assert_false(qh_qconfig_alias_matches("ReLU6", g, clip2));
  /* a bias vector is a tensor argument; a one-element [1] constant is a scalar; an
   * input slot the node lacks is neither */
  int b = qh_graph_add_value(g, "b", NULL)->id, one = qh_graph_add_value(g, "one", NULL)->id;
  int u = qh_graph_add_value(g, "u", NULL)->id;
  qh_value_set_initializer(qh_graph_value(g, b), tensor(1, (int64_t[]){3}, 1));
  qh_value_set_initializer(qh_graph_value(g, one), qh_tensor_copy(s6, NULL));
  QhNode *add = qh_graph_add_node(g, "add", "Add", "", 3, (int[]){z, b, one}, 1, &u, NULL);
  g_assert_false(qh_qconfig_input_is_scalar(g, add, 1));
  g_assert_true(qh_qconfig_input_is_scalar(g, add, 2));
  g_assert_false(qh_qconfig_input_is_scalar(g, add, 7));
  /* Clip's bounds are scalars; its computed input is not a constant at all */
  g_assert_true(qh_qconfig_input_is_scalar(g, clip, 1));
  g_assert_false(qh_qconfig_input_is_scalar(g, clip, 0));
  g_assert_true(qh_qconfig_input_is_scalar(g, clip2, 1));
  qh_graph_free(g);
  qh_tensor_free(w2), qh_tensor_free(w3), qh_tensor_free(w4), qh_tensor_free(w5);
  qh_tensor_free(s0), qh_tensor_free(s6);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/qconfig-alias/table", test_alias_table);
  return g_test_run();
}
