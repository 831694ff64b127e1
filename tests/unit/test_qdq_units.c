/* Unit tests of the QDQ node-unit matcher on small QDQ graphs built by hand (conv +
 * relu, conv -> add(x) -> relu, add, per-axis weights, shared intermediates, float
 * outputs, pattern priority, malformed qparams), plus a driver mode for the parity
 * scripts: `test_qdq_units --dump MODEL.onnx` prints the units a fixed pattern list
 * finds in a model as JSON. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "lower/qdq-units.h"
#include "lower/prepare.h"
#include "io/onnx.h"

#define PAT(name, mask, ...)                                                              \
  static const char *const name##_ops[] = {__VA_ARGS__};                                  \
  static const QhLoweringPattern name = {QH_STRUCT_HEADER(QhLoweringPattern), #name,      \
                                         name##_ops, G_N_ELEMENTS(name##_ops), mask, NULL, \
                                         0, 0, NULL, NULL}

#define PATF(name, mask, flags, ...)                                                      \
  static const char *const name##_ops[] = {__VA_ARGS__};                                  \
  static const QhLoweringPattern name = {QH_STRUCT_HEADER(QhLoweringPattern), #name,      \
                                         name##_ops, G_N_ELEMENTS(name##_ops), mask, NULL, \
                                         0, flags, NULL, NULL}

PAT(conv_add_relu, 0x2u, "Conv", "Add", "Relu");
PATF(conv_relu_through, 0, QH_PATTERN_THROUGH_SHARED_QDQ, "Conv", "Relu");
PAT(conv_relu, 0, "Conv", "Relu");
PAT(conv, 0, "Conv");
PAT(gemm_relu, 0, "Gemm", "Relu");
PAT(gemm, 0, "Gemm");
PAT(add_relu, 0, "Add", "Relu");
PAT(add, 0, "Add");
PAT(relu, 0, "Relu");
PAT(maxpool, 0, "MaxPool");
PAT(globalaveragepool, 0, "GlobalAveragePool");
PAT(flatten, 0, "Flatten");
PAT(reshape, 0, "Reshape");

/* ---- graph building ---- */

static int val(QhGraph *g, const char *name) { return qh_graph_ensure_value(g, name, NULL)->id; }

static int init(QhGraph *g, const char *name, QhDType dt, int rank, const int64_t *dims,
                const void *data) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(dt, &s, NULL);
  memcpy(t->data, data, t->nbytes);
  QhValue *v = qh_graph_add_value(g, name, NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

static int scalar_f(QhGraph *g, const char *name, float f) {
  return init(g, name, QH_DTYPE_F32, 0, NULL, &f);
}

static int scalar_u8(QhGraph *g, const char *name, uint8_t z) {
  return init(g, name, QH_DTYPE_U8, 0, NULL, &z);
}

static int node(QhGraph *g, const char *name, const char *op, int n_in, const int *in, int out) {
  QhNode *n = qh_graph_add_node(g, name, op, "", n_in, in, 1, &out, NULL);
  g_assert_nonnull(n);
  return n->id;
}

/* Q then DQ of float value v with per-tensor uint8 qparams: returns the DQ output. */
static int qdq(QhGraph *g, const char *base, int v, float scale, uint8_t zp) {
  char *s = g_strdup_printf("%s_scale", base), *z = g_strdup_printf("%s_zp", base);
  char *q = g_strdup_printf("%s_q", base), *d = g_strdup_printf("%s_dq", base);
  int sv = scalar_f(g, s, scale), zv = scalar_u8(g, z, zp);
  int qv = val(g, q), dv = val(g, d);
  node(g, q, "QuantizeLinear", 3, (int[]){v, sv, zv}, qv);
  node(g, d, "DequantizeLinear", 3, (int[]){qv, sv, zv}, dv);
  g_free(s), g_free(z), g_free(q), g_free(d);
  return dv;
}

static int input(QhGraph *g, const char *name) {
  QhValue *x = qh_graph_add_value(g, name, NULL);
  x->is_input = TRUE;
  x->dtype = QH_DTYPE_F32;
  x->shape = (QhShape){.rank = 4, .dims = {1, 2, 4, 4}};
  g_array_append_val(g->inputs, x->id);
  return x->id;
}

static void output(QhGraph *g, int v) {
  qh_graph_value(g, v)->is_output = TRUE;
  g_array_append_val(g->outputs, v);
}

/* The weight of a 2-channel conv as int8 per-axis (axis 0) through DequantizeLinear,
 * and a float bias: returns the DQ output; *bias the float bias. */
static int conv_weight(QhGraph *g, const char *base, int *bias) {
  int8_t w[2 * 2] = {1, -2, 3, -4};
  float sc[2] = {0.5f, 0.25f};
  int8_t zp[2] = {0, 0};
  float b[2] = {0.1f, -0.1f};
  char *names[4] = {g_strdup_printf("%s_w_q", base), g_strdup_printf("%s_w_scale", base),
                    g_strdup_printf("%s_w_zp", base), g_strdup_printf("%s_w", base)};
  int wq = init(g, names[0], QH_DTYPE_S8, 4, (int64_t[]){2, 2, 1, 1}, w);
  int ws = init(g, names[1], QH_DTYPE_F32, 1, (int64_t[]){2}, sc);
  int wz = init(g, names[2], QH_DTYPE_S8, 1, (int64_t[]){2}, zp);
  int wd = val(g, names[3]);
  char *dqn = g_strdup_printf("%s_w_dq", base), *bn = g_strdup_printf("%s_b", base);
  QhNode *dq = qh_graph_node(g, node(g, dqn, "DequantizeLinear", 3, (int[]){wq, ws, wz}, wd));
  qh_node_set_attr_int(dq, "axis", 0);
  *bias = init(g, bn, QH_DTYPE_F32, 1, (int64_t[]){2}, b);
  for (int i = 0; i < 4; i++)
    g_free(names[i]);
  g_free(dqn), g_free(bn);
  return wd;
}

static int conv_node(QhGraph *g, const char *name, int x_dq, int out) {
  int b, w = conv_weight(g, name, &b);
  return node(g, name, "Conv", 3, (int[]){x_dq, w, b}, out);
}

static GPtrArray *match(const QhGraph *g, const QhLoweringPattern *const *p, size_t n) {
  GError *error = NULL;
  GPtrArray *units = qh_qdq_match_units(g, p, n, &error);
  g_assert_no_error(error);
  g_assert_nonnull(units);
  return units;
}

static const QhQdqUnit *unit(GPtrArray *units, guint i) { return g_ptr_array_index(units, i); }
static const QhQdqUnitInput *uin(const QhQdqUnit *u, guint i) {
  return &g_array_index(u->inputs, QhQdqUnitInput, i);
}
static int nid(const QhGraph *g, const char *name) {
  for (int i = 0; i < qh_graph_n_nodes(g); i++)
    if (strcmp(qh_graph_node(g, i)->name, name) == 0)
      return i;
  g_assert_not_reached();
}

/* ---- tests ---- */

static QhGraph *conv_relu_graph(void);

/* x -> Q/DQ -> Conv -> Q/DQ(c: cscale, czp) -> Relu -> Q/DQ(r: 0.05, 3) -> y; with
 * extra_reader the conv's quantized output is also a graph output. */
static QhGraph *conv_qdq_relu_graph(float cscale, uint8_t czp, gboolean extra_reader) {
  QhGraph *g = qh_graph_new();
  int x = qdq(g, "x", input(g, "x"), 0.1f, 128);
  int c = val(g, "c"), r = val(g, "r");
  conv_node(g, "conv", x, c);
  int cd = qdq(g, "c", c, cscale, czp);
  if (extra_reader)
    output(g, qh_graph_find_value(g, "c_q"));
  node(g, "relu", "Relu", 1, &cd, r);
  output(g, qdq(g, "r", r, 0.05f, 3));
  return g;
}

/* QH_PATTERN_THROUGH_SHARED_QDQ: a Q -> DQ pair on the unit's output grid between the
 * ops is crossed and recorded; a different grid, another reader of the pair, or a
 * pattern without the flag is no match (conv and relu then stand alone). */
static void test_through_shared_qdq(void) {
  const QhLoweringPattern *p[] = {&conv_relu_through, &conv, &relu};
  QhGraph *g = conv_qdq_relu_graph(0.05f, 3, FALSE);
  GPtrArray *units = match(g, p, G_N_ELEMENTS(p));
  g_assert_cmpuint(units->len, ==, 1);
  const QhQdqUnit *u = unit(units, 0);
  g_assert_cmpstr(u->pattern->id, ==, "conv_relu_through");
  g_assert_cmpint(u->n_nodes, ==, 2);
  g_assert_cmpint(u->nodes[1], ==, nid(g, "relu"));
  g_assert_cmpint(u->crossed_q[0], ==, -1);
  g_assert_cmpint(u->crossed_q[1], ==, nid(g, "c_q"));
  g_assert_cmpint(u->crossed_dq[1], ==, nid(g, "c_dq"));
  g_assert_cmpint(u->q_node, ==, nid(g, "r_q"));
  g_assert_cmpuint(u->inputs->len, ==, 3); /* the crossed pair adds no input */
  g_ptr_array_unref(units);
  qh_graph_free(g);

  struct { float scale; uint8_t zp; gboolean extra; } bad[] = {
      {0.05f * 1.0001f, 3, FALSE}, {0.05f, 4, FALSE}, {0.05f, 3, TRUE}};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g = conv_qdq_relu_graph(bad[i].scale, bad[i].zp, bad[i].extra);
    units = match(g, p, G_N_ELEMENTS(p));
    g_assert_cmpuint(units->len, ==, 2);
    g_assert_cmpstr(unit(units, 0)->pattern->id, ==, "conv");
    g_assert_cmpstr(unit(units, 1)->pattern->id, ==, "relu");
    g_ptr_array_unref(units);
    qh_graph_free(g);
  }
  g = conv_qdq_relu_graph(0.05f, 3, FALSE);
  const QhLoweringPattern *plain[] = {&conv_relu, &conv, &relu};
  units = match(g, plain, G_N_ELEMENTS(plain));
  g_assert_cmpuint(units->len, ==, 2);
  g_assert_cmpstr(unit(units, 0)->pattern->id, ==, "conv");
  g_ptr_array_unref(units);
  qh_graph_free(g);

  /* Without a pair the flagged pattern matches as before. */
  g = conv_relu_graph();
  units = match(g, p, G_N_ELEMENTS(p));
  g_assert_cmpuint(units->len, ==, 1);
  g_assert_cmpstr(unit(units, 0)->pattern->id, ==, "conv_relu_through");
  g_assert_cmpint(unit(units, 0)->crossed_q[1], ==, -1);
  g_ptr_array_unref(units);
  qh_graph_free(g);
}

/* x -> Q/DQ -> Conv(w per-axis, float b) -> Relu -> Q/DQ -> y */
static QhGraph *conv_relu_graph(void) {
  QhGraph *g = qh_graph_new();
  int x = qdq(g, "x", input(g, "x"), 0.1f, 128);
  int c = val(g, "c"), r = val(g, "r");
  conv_node(g, "conv", x, c);
  node(g, "relu", "Relu", 1, &c, r);
  output(g, qdq(g, "r", r, 0.05f, 0));
  return g;
}

static void test_conv_relu(void) {
  QhGraph *g = conv_relu_graph();
  const QhLoweringPattern *p[] = {&conv_relu, &conv, &relu};
  GPtrArray *units = match(g, p, 3);
  g_assert_cmpuint(units->len, ==, 1);
  const QhQdqUnit *u = unit(units, 0);
  g_assert_cmpstr(u->pattern->id, ==, "conv_relu");
  g_assert_cmpint(u->n_nodes, ==, 2);
  g_assert_cmpint(u->nodes[0], ==, nid(g, "conv"));
  g_assert_cmpint(u->nodes[1], ==, nid(g, "relu"));
  g_assert_cmpuint(u->inputs->len, ==, 3);
  /* activation: uint8 per-tensor, the integer value before the DQ */
  g_assert_cmpint(uin(u, 0)->value, ==, qh_graph_find_value(g, "x_q"));
  g_assert_cmpint(uin(u, 0)->dq_node, ==, nid(g, "x_dq"));
  g_assert_cmpint(uin(u, 0)->role, ==, QH_ROLE_ACTIVATION);
  g_assert_cmpint(uin(u, 0)->qparams.dtype, ==, QH_DTYPE_UINT8);
  g_assert_cmpint(uin(u, 0)->qparams.ch_axis, ==, -1);
  g_assert_cmpint(uin(u, 0)->qparams.zero_point[0], ==, 128);
  g_assert_cmpfloat(uin(u, 0)->qparams.scale[0], ==, 0.1f);
  /* weight: int8 per-axis on axis 0 */
  const QhQParams *wq = &uin(u, 1)->qparams;
  g_assert_cmpint(uin(u, 1)->role, ==, QH_ROLE_WEIGHT);
  g_assert_cmpint(uin(u, 1)->value, ==, qh_graph_find_value(g, "conv_w_q"));
  g_assert_cmpint(wq->dtype, ==, QH_DTYPE_INT8);
  g_assert_cmpint(wq->qscheme, ==, QH_QSCHEME_PER_CHANNEL_AFFINE);
  g_assert_cmpint(wq->ch_axis, ==, 0);
  g_assert_cmpuint(wq->count, ==, 2);
  g_assert_cmpfloat(wq->scale[1], ==, 0.25f);
  g_assert_cmpint(wq->quant_min, ==, -128);
  /* float bias */
  g_assert_cmpint(uin(u, 2)->role, ==, QH_ROLE_BIAS);
  g_assert_false(uin(u, 2)->quantized);
  g_assert_cmpint(uin(u, 2)->dq_node, ==, -1);
  g_assert_cmpint(uin(u, 2)->value, ==, qh_graph_find_value(g, "conv_b"));
  /* output */
  g_assert_false(u->float_output);
  g_assert_cmpint(u->q_node, ==, nid(g, "r_q"));
  g_assert_cmpint(u->output, ==, qh_graph_find_value(g, "r_q"));
  g_assert_cmpfloat(u->output_qparams.scale[0], ==, 0.05f);

  /* the ABI view points into the unit */
  QhNodeUnit nu;
  qh_qdq_unit_to_abi(u, &nu);
  g_assert_cmpuint(nu.struct_size, ==, sizeof(QhNodeUnit));
  g_assert_cmpstr(nu.pattern_id, ==, "conv_relu");
  g_assert_cmpuint(nu.n_nodes, ==, 2);
  g_assert_cmpuint(nu.nodes[1], ==, (uint32_t)nid(g, "relu"));
  g_assert_cmpuint(nu.n_inputs, ==, 3);
  g_assert_cmpuint(nu.inputs[1], ==, (uint32_t)qh_graph_find_value(g, "conv_w_q"));
  g_assert_cmpint(nu.input_roles[2], ==, QH_ROLE_BIAS);
  g_assert_true(nu.input_qparams[1] == &uin(u, 1)->qparams);
  g_assert_null(nu.input_qparams[2]);
  g_assert_cmpuint(nu.n_outputs, ==, 1);
  g_assert_cmpuint(nu.outputs[0], ==, (uint32_t)u->output);
  g_assert_cmpint(nu.output_qparams[0]->zero_point[0], ==, 0);
  g_ptr_array_unref(units);
  qh_graph_free(g);
}

/* x -> Q/DQ -> Conv -> Add(s, conv) -> Relu -> Q/DQ, s = Q/DQ(skip input) */
static QhGraph *conv_add_relu_graph(void) {
  QhGraph *g = qh_graph_new();
  int x = qdq(g, "x", input(g, "x"), 0.1f, 128);
  int s = qdq(g, "s", input(g, "s"), 0.2f, 100);
  int c = val(g, "c"), a = val(g, "a"), r = val(g, "r");
  conv_node(g, "conv", x, c);
  node(g, "add", "Add", 2, (int[]){s, c}, a); /* the chain enters through slot 1 */
  node(g, "relu", "Relu", 1, &a, r);
  output(g, qdq(g, "r", r, 0.05f, 0));
  return g;
}

static void test_conv_add_relu(void) {
  QhGraph *g = conv_add_relu_graph();
  const QhLoweringPattern *p[] = {&conv_add_relu, &conv_relu, &conv, &add_relu, &add, &relu};
  GPtrArray *units = match(g, p, G_N_ELEMENTS(p));
  g_assert_cmpuint(units->len, ==, 1);
  const QhQdqUnit *u = unit(units, 0);
  g_assert_cmpstr(u->pattern->id, ==, "conv_add_relu");
  g_assert_cmpint(u->nodes[1], ==, nid(g, "add"));
  g_assert_cmpuint(u->inputs->len, ==, 4);
  g_assert_cmpint(uin(u, 3)->node, ==, nid(g, "add"));
  g_assert_cmpint(uin(u, 3)->slot, ==, 0);
  g_assert_cmpint(uin(u, 3)->value, ==, qh_graph_find_value(g, "s_q"));
  g_assert_cmpint(uin(u, 3)->role, ==, QH_ROLE_ACTIVATION);
  g_assert_cmpint(uin(u, 3)->qparams.zero_point[0], ==, 100);
  g_ptr_array_unref(units);

  /* Without the extra-input bit the three-op pattern does not match: conv alone
   * (float output, it feeds the Add) and add + relu take its place. */
  static const char *const ops[] = {"Conv", "Add", "Relu"};
  QhLoweringPattern nomask = conv_add_relu;
  nomask.ops = ops;
  nomask.extra_inputs_mask = 0;
  const QhLoweringPattern *p2[] = {&nomask, &conv, &add_relu};
  units = match(g, p2, 3);
  g_assert_cmpuint(units->len, ==, 1); /* add_relu needs a DQ'd conv output: no match */
  g_assert_cmpstr(unit(units, 0)->pattern->id, ==, "conv");
  g_assert_true(unit(units, 0)->float_output);
  g_assert_cmpint(unit(units, 0)->q_node, ==, -1);
  g_assert_cmpint(unit(units, 0)->output, ==, qh_graph_find_value(g, "c"));
  g_ptr_array_unref(units);
  qh_graph_free(g);
}

/* Add of two DQ'd activations, one DQ shared with a second Add */
static void test_add_shared_dq(void) {
  QhGraph *g = qh_graph_new();
  int a = qdq(g, "a", input(g, "a"), 0.1f, 1), b = qdq(g, "b", input(g, "b"), 0.3f, 2);
  int o1 = val(g, "o1"), o2 = val(g, "o2");
  node(g, "add1", "Add", 2, (int[]){a, b}, o1);
  node(g, "add2", "Add", 2, (int[]){b, b}, o2);
  output(g, qdq(g, "o1", o1, 0.2f, 3));
  output(g, qdq(g, "o2", o2, 0.4f, 4));
  const QhLoweringPattern *p[] = {&add};
  GPtrArray *units = match(g, p, 1);
  g_assert_cmpuint(units->len, ==, 2);
  g_assert_cmpint(unit(units, 0)->nodes[0], ==, nid(g, "add1"));
  g_assert_cmpint(unit(units, 1)->nodes[0], ==, nid(g, "add2"));
  g_assert_cmpint(uin(unit(units, 0), 1)->dq_node, ==, nid(g, "b_dq"));
  g_assert_cmpint(uin(unit(units, 1), 0)->dq_node, ==, nid(g, "b_dq"));
  g_assert_cmpint(uin(unit(units, 1), 1)->dq_node, ==, nid(g, "b_dq"));
  g_assert_cmpint(uin(unit(units, 0), 1)->role, ==, QH_ROLE_ACTIVATION);
  g_assert_cmpfloat(unit(units, 1)->output_qparams.scale[0], ==, 0.4f);
  g_ptr_array_unref(units);
  qh_graph_free(g);
}

/* A per-axis weight on axis 1 with a negative axis attribute, int32 bias through DQ */
static void test_per_axis_negative(void) {
  QhGraph *g = qh_graph_new();
  int x = qdq(g, "x", input(g, "x"), 0.1f, 128);
  int8_t w[6] = {1, 2, 3, 4, 5, 6};
  float sc[3] = {0.1f, 0.2f, 0.3f};
  int8_t zp[3] = {-1, 0, 1};
  int wq = init(g, "w_q", QH_DTYPE_S8, 2, (int64_t[]){2, 3}, w);
  int ws = init(g, "w_s", QH_DTYPE_F32, 1, (int64_t[]){3}, sc);
  int wz = init(g, "w_z", QH_DTYPE_S8, 1, (int64_t[]){3}, zp);
  int wd = val(g, "w");
  qh_node_set_attr_int(qh_graph_node(g, node(g, "w_dq", "DequantizeLinear", 3,
                                             (int[]){wq, ws, wz}, wd)), "axis", -1);
  int32_t bi[3] = {5, -5, 7};
  float bs = 0.01f;
  int bq = init(g, "b_q", QH_DTYPE_S32, 1, (int64_t[]){3}, bi);
  int bsv = scalar_f(g, "b_s", bs), bd = val(g, "b");
  node(g, "b_dq", "DequantizeLinear", 2, (int[]){bq, bsv}, bd);
  int y = val(g, "y");
  node(g, "gemm", "Gemm", 3, (int[]){x, wd, bd}, y);
  output(g, qdq(g, "y", y, 0.5f, 10));
  const QhLoweringPattern *p[] = {&gemm_relu, &gemm};
  GPtrArray *units = match(g, p, 2);
  g_assert_cmpuint(units->len, ==, 1);
  const QhQdqUnit *u = unit(units, 0);
  g_assert_cmpstr(u->pattern->id, ==, "gemm");
  g_assert_cmpint(uin(u, 1)->qparams.ch_axis, ==, 1);
  g_assert_cmpuint(uin(u, 1)->qparams.count, ==, 3);
  g_assert_cmpint(uin(u, 1)->qparams.zero_point[0], ==, -1);
  g_assert_cmpint(uin(u, 1)->qparams.zero_point[2], ==, 1);
  g_assert_cmpfloat(uin(u, 1)->qparams.scale[2], ==, 0.3f);
  /* bias without zero point: int32 from the integer input, zero point 0 */
  g_assert_true(uin(u, 2)->quantized);
  g_assert_cmpint(uin(u, 2)->role, ==, QH_ROLE_BIAS);
  g_assert_cmpint(uin(u, 2)->qparams.dtype, ==, QH_DTYPE_INT32);
  g_assert_cmpint(uin(u, 2)->qparams.zero_point[0], ==, 0);
  g_assert_cmpint(uin(u, 2)->qparams.ch_axis, ==, -1);
  g_ptr_array_unref(units);
  qh_graph_free(g);
}

/* conv's output read by relu and by a second op: conv + relu must not match */
static void test_two_consumers(void) {
  QhGraph *g = qh_graph_new();
  int x = qdq(g, "x", input(g, "x"), 0.1f, 128);
  int c = val(g, "c"), r = val(g, "r"), m = val(g, "m");
  conv_node(g, "conv", x, c);
  node(g, "relu", "Relu", 1, &c, r);
  node(g, "neg", "Neg", 1, &c, m);
  output(g, qdq(g, "r", r, 0.05f, 0));
  output(g, m);
  const QhLoweringPattern *p[] = {&conv_relu, &conv};
  GPtrArray *units = match(g, p, 2);
  g_assert_cmpuint(units->len, ==, 1);
  g_assert_cmpstr(unit(units, 0)->pattern->id, ==, "conv");
  g_assert_cmpint(unit(units, 0)->n_nodes, ==, 1);
  g_assert_true(unit(units, 0)->float_output);
  g_ptr_array_unref(units);
  qh_graph_free(g);
}

/* Relu's output is a graph output with no Q: a float-output unit */
static void test_float_output(void) {
  QhGraph *g = qh_graph_new();
  int x = qdq(g, "x", input(g, "x"), 0.1f, 128);
  int c = val(g, "c"), r = val(g, "r");
  conv_node(g, "conv", x, c);
  node(g, "relu", "Relu", 1, &c, r);
  output(g, r);
  const QhLoweringPattern *p[] = {&conv_relu};
  GPtrArray *units = match(g, p, 1);
  g_assert_cmpuint(units->len, ==, 1);
  const QhQdqUnit *u = unit(units, 0);
  g_assert_true(u->float_output);
  g_assert_cmpint(u->output, ==, r);
  QhNodeUnit nu;
  qh_qdq_unit_to_abi(u, &nu);
  g_assert_null(nu.output_qparams[0]);
  g_assert_cmpuint(nu.outputs[0], ==, (uint32_t)r);
  g_ptr_array_unref(units);

  /* An input that is a computed float value (no DQ) is not a QDQ unit. */
  QhGraph *h = qh_graph_new();
  int hx = input(h, "x"), hy = val(h, "y");
  node(h, "relu", "Relu", 1, &hx, hy);
  output(h, qdq(h, "y", hy, 0.1f, 0));
  const QhLoweringPattern *pr[] = {&relu};
  units = match(h, pr, 1);
  g_assert_cmpuint(units->len, ==, 0);
  g_ptr_array_unref(units);
  qh_graph_free(h);
  qh_graph_free(g);
}

/* The first pattern that matches a node wins */
static void test_priority(void) {
  QhGraph *g = conv_relu_graph();
  const QhLoweringPattern *p[] = {&conv, &conv_relu, &relu};
  GPtrArray *units = match(g, p, 3);
  g_assert_cmpuint(units->len, ==, 1); /* relu's input is conv's float output: no DQ */
  g_assert_cmpstr(unit(units, 0)->pattern->id, ==, "conv");
  g_assert_cmpuint(unit(units, 0)->pattern_index, ==, 0);
  g_assert_true(unit(units, 0)->float_output);
  g_ptr_array_unref(units);
  const QhLoweringPattern *p2[] = {&relu, &conv_relu, &conv};
  units = match(g, p2, 3);
  g_assert_cmpuint(units->len, ==, 1); /* conv comes first in topological order */
  g_assert_cmpstr(unit(units, 0)->pattern->id, ==, "conv_relu");
  g_assert_cmpuint(unit(units, 0)->pattern_index, ==, 1);
  g_ptr_array_unref(units);
  qh_graph_free(g);
}

static void test_bad_scale(void) {
  QhGraph *g = conv_relu_graph();
  QhValue *s = qh_graph_value(g, qh_graph_find_value(g, "x_scale"));
  ((float *)s->initializer->data)[0] = 0.0f;
  const QhLoweringPattern *p[] = {&conv_relu};
  GError *error = NULL;
  g_assert_null(qh_qdq_match_units(g, p, 1, &error));
  g_assert_error(error, QH_ERROR, QH_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "x_dq"));
  g_error_free(error);
  qh_graph_free(g);
}

/* ---- driver: the units of a model as JSON ---- */

static const char *vname(const QhGraph *g, int v) { return v >= 0 ? qh_graph_value(g, v)->name : ""; }

static int dump(const char *path) {
  GError *error = NULL;
  QhGraph *g = qh_onnx_load(path, &error);
  if (!g) {
    fprintf(stderr, "%s\n", error->message);
    return 1;
  }
  const QhLoweringPattern *p[] = {&conv_add_relu, &conv_relu, &conv, &gemm_relu, &gemm,
                                  &add_relu, &add, &relu, &maxpool, &globalaveragepool,
                                  &flatten, &reshape};
  /* as lowering does: no-op Casts dropped, Constant subgraphs frozen */
  QhPlan *prepared = qh_lower_prepare(g, NULL, &error);
  GPtrArray *units = prepared ? qh_qdq_match_units(g, p, G_N_ELEMENTS(p), &error) : NULL;
  qh_plan_free(prepared);
  if (!units) {
    fprintf(stderr, "%s\n", error->message);
    qh_graph_free(g);
    return 1;
  }
  printf("[");
  for (guint i = 0; i < units->len; i++) {
    const QhQdqUnit *u = unit(units, i);
    printf("%s\n {\"pattern\": \"%s\", \"nodes\": [", i ? "," : "", u->pattern->id);
    for (int k = 0; k < u->n_nodes; k++)
      printf("%s\"%s\"", k ? ", " : "", qh_graph_node(g, u->nodes[k])->name);
    printf("], \"inputs\": [");
    for (guint k = 0; k < u->inputs->len; k++) {
      const QhQdqUnitInput *in = uin(u, k);
      printf("%s{\"value\": \"%s\", \"dq\": \"%s\", \"role\": %d, \"dtype\": %d, \"axis\": %d, "
             "\"count\": %zu}",
             k ? ", " : "", vname(g, in->value),
             in->dq_node >= 0 ? qh_graph_node(g, in->dq_node)->name : "", in->role,
             in->quantized ? in->qparams.dtype : 0, in->quantized ? in->qparams.ch_axis : -1,
             in->quantized ? in->qparams.count : (size_t)0);
    }
    printf("], \"output\": \"%s\", \"q\": \"%s\", \"float_output\": %s}", vname(g, u->output),
           u->q_node >= 0 ? qh_graph_node(g, u->q_node)->name : "",
           u->float_output ? "true" : "false");
  }
  printf("\n]\n");
  g_ptr_array_unref(units);
  qh_graph_free(g);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--dump") == 0)
    return dump(argv[2]);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/qdq-units/conv-relu", test_conv_relu);
  g_test_add_func("/qdq-units/conv-add-relu", test_conv_add_relu);
  g_test_add_func("/qdq-units/through-shared-qdq", test_through_shared_qdq);
  g_test_add_func("/qdq-units/add-shared-dq", test_add_shared_dq);
  g_test_add_func("/qdq-units/per-axis-negative", test_per_axis_negative);
  g_test_add_func("/qdq-units/two-consumers", test_two_consumers);
  g_test_add_func("/qdq-units/float-output", test_float_output);
  g_test_add_func("/qdq-units/priority", test_priority);
  g_test_add_func("/qdq-units/bad-scale", test_bad_scale);
  return g_test_run();
}
