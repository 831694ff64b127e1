/* The small QDQ graphs plugin-check lowers are built here value by value: graph inputs,
 * constants, op nodes and QuantizeLinear -> DequantizeLinear pairs, and the output
 * whose quantization step the comparison is made in (check-lowering.c,
 * check-graphs-pow2.c). */
#include <string.h>

#include "conformance/check-private.h"

typedef QhCheckBuilder Builder;

int qh_check_builder_constant(Builder *b, const char *name, QhDType dt, int rank, const int64_t *dims,
                              const void *data) {
  QhShape s = qh_shape_make(rank, dims);
  QhTensor *t = qh_tensor_new(dt, &s, NULL);
  memcpy(t->data, data, t->nbytes);
  QhValue *v = qh_graph_add_value(b->g, name, NULL);
  qh_value_set_initializer(v, t);
  return v->id;
}

int qh_check_builder_value(Builder *b, const char *name) { return qh_graph_add_value(b->g, name, NULL)->id; }

QhNode *qh_check_builder_node(Builder *b, const char *name, const char *op, int n_in, const int *in,
                              int out) {
  return qh_graph_add_node(b->g, name, op, "", n_in, in, 1, &out, NULL);
}

int qh_check_builder_input(Builder *b, const char *name, int rank, const int64_t *dims) {
  QhValue *v = qh_graph_add_value(b->g, name, NULL);
  v->dtype = QH_DTYPE_F32;
  v->shape = qh_shape_make(rank, dims);
  v->is_input = TRUE;
  g_array_append_val(b->g->inputs, v->id);
  return v->id;
}

void qh_check_builder_output(Builder *b, int pre, int out, float scale, int is_signed, int zero_point) {
  qh_graph_value(b->g, out)->is_output = TRUE;
  g_array_append_val(b->g->outputs, out);
  b->pre_quant = pre;
  b->out_scale = scale;
  b->out_signed = is_signed;
  b->out_zero_point = zero_point;
}

/* A QuantizeLinear then DequantizeLinear of v (scale, zp); returns the DQ
 * output. */
int qh_check_builder_qdq(Builder *b, const char *base, int v, float scale, int is_signed, int zero_point) {
  char *n[4] = {g_strdup_printf("%s_scale", base), g_strdup_printf("%s_zero_point", base),
                g_strdup_printf("%s_quantized", base), g_strdup_printf("%s_dequantized", base)};
  int8_t zs = (int8_t)zero_point;
  uint8_t zu = (uint8_t)zero_point;
  int s = qh_check_builder_constant(b, n[0], QH_DTYPE_F32, 0, NULL, &scale);
  int zv = is_signed ? qh_check_builder_constant(b, n[1], QH_DTYPE_S8, 0, NULL, &zs)
                     : qh_check_builder_constant(b, n[1], QH_DTYPE_U8, 0, NULL, &zu);
  int q = qh_check_builder_value(b, n[2]), d = qh_check_builder_value(b, n[3]);
  qh_check_builder_node(b, n[2], "QuantizeLinear", 3, (int[]){v, s, zv}, q);
  qh_check_builder_node(b, n[3], "DequantizeLinear", 3, (int[]){q, s, zv}, d);
  for (int i = 0; i < 4; i++)
    g_free(n[i]);
  return d;
}

/* A DequantizeLinear of random int8 weights [dims], symmetric (zero point 0), per
 * channel on axis when per_axis >= 0 (scales written to scales[channels]). */
int qh_check_builder_weight(Builder *b, const char *base, int rank, const int64_t *dims, int per_axis,
                            float *scales) {
  int64_t numel = 1, count = per_axis >= 0 ? dims[per_axis] : 1;
  for (int i = 0; i < rank; i++)
    numel *= dims[i];
  int8_t *w = g_new(int8_t, numel), *z = g_new0(int8_t, count);
  for (int64_t i = 0; i < numel; i++)
    w[i] = (int8_t)g_rand_int_range(b->rng, -127, 128);
  for (int64_t c = 0; c < count; c++)
    scales[c] = (float)g_rand_double_range(b->rng, 0.004, 0.012);
  char *n[4] = {g_strdup_printf("%s_quantized", base), g_strdup_printf("%s_scale", base),
                g_strdup_printf("%s_zero_point", base), g_strdup_printf("%s_dequantized", base)};
  int q = qh_check_builder_constant(b, n[0], QH_DTYPE_S8, rank, dims, w);
  int s = qh_check_builder_constant(b, n[1], QH_DTYPE_F32, per_axis >= 0, &count, scales);
  int zv = qh_check_builder_constant(b, n[2], QH_DTYPE_S8, per_axis >= 0, &count, z);
  int d = qh_check_builder_value(b, n[3]);
  QhNode *node = qh_check_builder_node(b, n[3], "DequantizeLinear", 3, (int[]){q, s, zv}, d);
  if (per_axis >= 0)
    qh_node_set_attr_int(node, "axis", per_axis);
  for (int i = 0; i < 4; i++)
    g_free(n[i]);
  g_free(w);
  g_free(z);
  return d;
}

/* An int32 bias [n] dequantized with scale x_scale * w_scale[c] (zero point 0), as
 * quantizers write it. */
int qh_check_builder_bias(Builder *b, const char *base, int64_t n, float x_scale, const float *w_scales,
                          gboolean per_channel) {
  int32_t *q = g_new(int32_t, n), *z = g_new0(int32_t, n);
  float *s = g_new(float, n);
  for (int64_t c = 0; c < n; c++) {
    s[c] = x_scale * w_scales[per_channel ? c : 0];
    q[c] = g_rand_int_range(b->rng, -3000, 3000);
  }
  char *nm[4] = {g_strdup_printf("%s_quantized", base), g_strdup_printf("%s_scale", base),
                 g_strdup_printf("%s_zero_point", base), g_strdup_printf("%s_dequantized", base)};
  int64_t one = per_channel ? n : 1;
  int qv = qh_check_builder_constant(b, nm[0], QH_DTYPE_S32, 1, &n, q);
  int sv = qh_check_builder_constant(b, nm[1], QH_DTYPE_F32, per_channel, &one, s);
  int zv = qh_check_builder_constant(b, nm[2], QH_DTYPE_S32, per_channel, &one, z);
  int d = qh_check_builder_value(b, nm[3]);
  QhNode *node = qh_check_builder_node(b, nm[3], "DequantizeLinear", 3, (int[]){qv, sv, zv}, d);
  if (per_channel)
    qh_node_set_attr_int(node, "axis", 0);
  for (int i = 0; i < 4; i++)
    g_free(nm[i]);
  g_free(q);
  g_free(z);
  g_free(s);
  return d;
}
