/* Reference kernels of ONNX's recurrent ops LSTM and GRU (float32, layout 0: X is
 * [seq, batch, input]) as PyTorch's exporter writes them for nn.LSTM and nn.GRU:
 * forward, reverse or bidirectional, default activations (Sigmoid, Tanh, Tanh), with
 * optional bias, initial states, per-batch sequence_lens, LSTM peepholes, clip and
 * GRU's linear_before_reset. Each time step is written as the ONNX formulas read,
 * one gate row at a time; a batch entry past its sequence length gets zeros in Y and
 * keeps its last state, as ONNX Runtime does. Other activations, layout 1 and
 * input_forget are refused by name. These loops are the naive twin of rnn-fast.c, the
 * path runs take. */
#include <math.h>
#include <string.h>

#include "exec/kernels/rnn-private.h"

static gboolean read_attrs(const QhNode *node, Rnn *r, GError **error) {
  r->kind = strcmp(node->op_type, "LSTM") == 0 ? RNN_LSTM : RNN_GRU;
  r->gates = r->kind == RNN_LSTM ? 4 : 3;
  const char *dir = NULL;
  int64_t layout = 0, hidden = 0, lbr = 0, input_forget = 0;
  const QhAttr *acts = qh_node_attr(node, "activations");
  if (!qh_node_attr_get_string(node, "direction", "forward", &dir, error) ||
      !qh_node_attr_get_int(node, "layout", 0, &layout, error) ||
      !qh_node_attr_get_int(node, "hidden_size", 0, &hidden, error) ||
      !qh_node_attr_get_int(node, "linear_before_reset", 0, &lbr, error) ||
      !qh_node_attr_get_int(node, "input_forget", 0, &input_forget, error))
    return FALSE;
  if (acts != NULL)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED,
                          "the activations attribute is not supported (the default ones are)");
  if (qh_node_attr(node, "clip") != NULL) {
    float c = 0.0f;
    if (!qh_node_attr_get_float(node, "clip", 0.0f, &c, error))
      return FALSE;
    if (!(c > 0.0f))
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "clip must be positive");
    r->clip = c;
  } else {
    r->clip = 0.0f;
  }
  if (layout != 0)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "layout=%" G_GINT64_FORMAT " is not supported",
                          layout);
  if (input_forget != 0)
    return qh_kernel_fail(error, node, QH_ERROR_UNSUPPORTED, "input_forget=1 is not supported");
  if (strcmp(dir, "forward") == 0 || strcmp(dir, "reverse") == 0) {
    r->dirs = 1;
    r->reverse = dir[0] == 'r';
  } else if (strcmp(dir, "bidirectional") == 0) {
    r->dirs = 2;
    r->reverse = FALSE;
  } else {
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "unknown direction '%s'", dir);
  }
  if (hidden <= 0)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "hidden_size must be positive");
  r->hidden = hidden;
  r->lbr = lbr != 0;
  return TRUE;
}

/* Input i must be absent or float32 of exactly these dims. */
static gboolean check_input(const QhNode *node, const QhTensor *const *inputs, int n_inputs, int i,
                            const char *what, int rank, const int64_t *dims, GError **error) {
  if (i >= n_inputs || inputs[i] == NULL)
    return TRUE;
  const QhTensor *t = inputs[i];
  gboolean ok = t->dtype == QH_DTYPE_F32 && t->shape.rank == rank;
  for (int d = 0; ok && d < rank; d++)
    ok = t->shape.dims[d] == dims[d];
  if (!ok) {
    QhShape want = qh_shape_make(rank, dims);
    char *ws = qh_shape_to_string(&want), *hs = qh_shape_to_string(&t->shape);
    qh_kernel_fail(error, node, QH_ERROR_INVALID,
                   "%s must be float32 of shape %s (from X and hidden_size), not %s %s", what, ws,
                   qh_dtype_name(t->dtype), hs);
    g_free(ws);
    g_free(hs);
    return FALSE;
  }
  return TRUE;
}

static gboolean infer(const QhNode *node, const QhTensor *const *inputs, int n_inputs, QhTensor *outputs,
                      int n_outputs, GError **error) {
  Rnn r;
  if (!read_attrs(node, &r, error))
    return FALSE;
  for (int i = 0; i < 3; i++)
    if (!qh_kernel_check_dtype(node, inputs, n_inputs, i, error, QH_DTYPE_F32, 0))
      return FALSE;
  const QhShape *x = &inputs[0]->shape;
  if (x->rank != 3)
    return qh_kernel_fail(error, node, QH_ERROR_INVALID, "X must be 3-D [seq, batch, input]");
  r.seq = x->dims[0], r.batch = x->dims[1], r.input = x->dims[2];
  int64_t g = r.gates * r.hidden;
  int64_t w[3] = {r.dirs, g, r.input}, rr[3] = {r.dirs, g, r.hidden}, b[2] = {r.dirs, 2 * g};
  int64_t st[3] = {r.dirs, r.batch, r.hidden}, p[2] = {r.dirs, 3 * r.hidden};
  if (!check_input(node, inputs, n_inputs, 1, "W", 3, w, error) ||
      !check_input(node, inputs, n_inputs, 2, "R", 3, rr, error) ||
      !check_input(node, inputs, n_inputs, 3, "B", 2, b, error) ||
      !check_input(node, inputs, n_inputs, 5, "initial_h", 3, st, error) ||
      (r.kind == RNN_LSTM && (!check_input(node, inputs, n_inputs, 6, "initial_c", 3, st, error) ||
                              !check_input(node, inputs, n_inputs, 7, "P", 2, p, error))))
    return FALSE;
  if (n_inputs > 4 && inputs[4] != NULL) {
    const QhTensor *sl = inputs[4];
    if ((sl->dtype != QH_DTYPE_S32 && sl->dtype != QH_DTYPE_S64) || sl->shape.rank != 1 ||
        sl->shape.dims[0] != r.batch)
      return qh_kernel_fail(error, node, QH_ERROR_INVALID, "sequence_lens must be int32 [batch]");
  }
  int64_t ydims[4] = {r.seq, r.dirs, r.batch, r.hidden};
  for (int o = 0; o < n_outputs; o++) {
    outputs[o].dtype = QH_DTYPE_F32;
    outputs[o].shape = o == 0 ? qh_shape_make(4, ydims) : qh_shape_make(3, st);
    outputs[o].data = NULL;
  }
  return TRUE;
}

static inline float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

static inline float clipped(const Rnn *r, float v) {
  if (r->clip > 0.0f)
    v = v < -r->clip ? -r->clip : v > r->clip ? r->clip : v;
  return v;
}

/* out[j] = sum_k m[j*k_len + k] * v[k] for j < rows. */
static void matvec(const float *m, const float *v, int64_t rows, int64_t k_len, float *out) {
  for (int64_t j = 0; j < rows; j++) {
    float s = 0.0f;
    const float *row = m + j * k_len;
    for (int64_t k = 0; k < k_len; k++)
      s += row[k] * v[k];
    out[j] = s;
  }
}

/* One direction d over every batch entry; writes Y's slice and the final states. */
static void run_direction(const Rnn *r, int d, gboolean reverse, const QhTensor *const *in, int n_in,
                          QhTensor *const *out, int n_out, float *work) {
  const int64_t H = r->hidden, G = r->gates * H, I = r->input, B = r->batch, T = r->seq;
  const float *X = in[0]->data, *W = qh_f32(in[1]) + d * G * I, *R = qh_f32(in[2]) + d * G * H;
  const float *Wb = n_in > 3 && in[3] ? qh_f32(in[3]) + d * 2 * G : NULL, *Rb = Wb ? Wb + G : NULL;
  const QhTensor *lens = n_in > 4 ? in[4] : NULL;
  const float *h0 = n_in > 5 && in[5] ? qh_f32(in[5]) + d * B * H : NULL;
  const float *c0 = r->kind == RNN_LSTM && n_in > 6 && in[6] ? qh_f32(in[6]) + d * B * H : NULL;
  const float *P = r->kind == RNN_LSTM && n_in > 7 && in[7] ? qh_f32(in[7]) + d * 3 * H : NULL;
  float *Y = n_out > 0 && out[0] ? qh_f32(out[0]) : NULL;
  float *h = work, *c = work + H, *xw = c + H, *hr = xw + G, *tmp = hr + G;
  for (int64_t b = 0; b < B; b++) {
    int64_t len = T;
    if (lens)
      len = lens->dtype == QH_DTYPE_S64 ? ((const int64_t *)lens->data)[b] : ((const int32_t *)lens->data)[b];
    len = len < 0 ? 0 : len > T ? T : len;
    for (int64_t k = 0; k < H; k++) {
      h[k] = h0 ? h0[b * H + k] : 0.0f;
      c[k] = c0 ? c0[b * H + k] : 0.0f;
    }
    for (int64_t s = 0; s < T; s++) {
      int64_t t = reverse ? T - 1 - s : s;
      float *y = Y ? Y + ((t * r->dirs + d) * B + b) * H : NULL;
      if (reverse ? t >= len : s >= len) {
        if (y)
          memset(y, 0, sizeof(float) * (size_t)H);
        continue;
      }
      matvec(W, X + (t * B + b) * I, G, I, xw);
      matvec(R, h, G, H, hr);
      for (int64_t j = 0; j < G; j++) {
        xw[j] += Wb ? Wb[j] : 0.0f;
        hr[j] += Rb ? Rb[j] : 0.0f;
      }
      if (r->kind == RNN_LSTM) {
        for (int64_t k = 0; k < H; k++) {
          float gi = xw[k] + hr[k], go = xw[H + k] + hr[H + k];
          float gf = xw[2 * H + k] + hr[2 * H + k], gc = xw[3 * H + k] + hr[3 * H + k];
          if (P) {
            gi += P[k] * c[k];
            gf += P[2 * H + k] * c[k];
          }
          float i_ = sigmoid(clipped(r, gi)), f_ = sigmoid(clipped(r, gf)), c_ = tanhf(clipped(r, gc));
          c[k] = f_ * c[k] + i_ * c_;
          if (P)
            go += P[H + k] * c[k];
          float o_ = sigmoid(clipped(r, go));
          tmp[k] = o_ * tanhf(c[k]);
        }
      } else {
        for (int64_t k = 0; k < H; k++) {
          float z = sigmoid(clipped(r, xw[k] + hr[k]));
          float rg = sigmoid(clipped(r, xw[H + k] + hr[H + k]));
          tmp[k] = z; /* kept for the update below */
          xw[k] = rg; /* r_t, needed by the candidate */
        }
        if (!r->lbr) {
          /* h~ = g(Xt Wh + (r (.) H) Rh + Rbh + Wbh): recompute (r (.) H) Rh */
          float *rh = hr; /* the z and r parts of hr are no longer needed */
          for (int64_t k = 0; k < H; k++)
            rh[k] = xw[k] * h[k];
          matvec(R + 2 * H * H, rh, H, H, rh + H);
          for (int64_t k = 0; k < H; k++)
            rh[2 * H + k] = rh[H + k] + (Rb ? Rb[2 * H + k] : 0.0f);
        }
        for (int64_t k = 0; k < H; k++) {
          float cand = r->lbr ? xw[2 * H + k] + xw[k] * hr[2 * H + k] : xw[2 * H + k] + hr[2 * H + k];
          float hh = tanhf(clipped(r, cand));
          float z = tmp[k];
          tmp[k] = (1.0f - z) * hh + z * h[k];
        }
      }
      memcpy(h, tmp, sizeof(float) * (size_t)H);
      if (y)
        memcpy(y, h, sizeof(float) * (size_t)H);
    }
    if (n_out > 1 && out[1])
      memcpy(qh_f32(out[1]) + (d * B + b) * H, h, sizeof(float) * (size_t)H);
    if (r->kind == RNN_LSTM && n_out > 2 && out[2])
      memcpy(qh_f32(out[2]) + (d * B + b) * H, c, sizeof(float) * (size_t)H);
  }
}

static gboolean run_naive(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs,
                          int n_inputs, QhTensor *const *outputs, int n_outputs, GError **error) {
  Rnn r;
  if (!read_attrs(node, &r, error))
    return FALSE;
  r.seq = inputs[0]->shape.dims[0], r.batch = inputs[0]->shape.dims[1], r.input = inputs[0]->shape.dims[2];
  int64_t G = r.gates * r.hidden;
  /* h, c, the input and recurrent gate rows, and one hidden row of temporaries */
  float *work = qh_exec_scratch(ctx, sizeof(float) * (size_t)(3 * r.hidden + 2 * G));
  if (work == NULL)
    return qh_kernel_fail(error, node, QH_ERROR_LIMIT, "out of memory for the recurrent state");
  for (int d = 0; d < r.dirs; d++)
    run_direction(&r, d, r.reverse || d == 1, inputs, n_inputs, outputs, n_outputs, work);
  return TRUE;
}

static gboolean run(QhExecContext *ctx, const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                    QhTensor *const *outputs, int n_outputs, GError **error) {
  Rnn r;
  if (!read_attrs(node, &r, error))
    return FALSE;
  r.seq = inputs[0]->shape.dims[0], r.batch = inputs[0]->shape.dims[1], r.input = inputs[0]->shape.dims[2];
  return qh_rnn_run_fast(ctx, node, &r, inputs, n_inputs, outputs, n_outputs, error);
}

/* The input and recurrent products of every time step (W: [dirs, gates*hidden, input],
 * R: [dirs, gates*hidden, hidden]), so bench reports an RNN's work like a MatMul's; the
 * gate activations and GRU's reset product are element-wise and not counted. */
static int64_t macs(const QhNode *node, const QhTensor *const *inputs, int n_inputs,
                    const QhTensor *outputs, int n_outputs) {
  (void)node, (void)outputs, (void)n_outputs;
  if (n_inputs < 3 || inputs[0] == NULL || inputs[1] == NULL || inputs[2] == NULL ||
      inputs[0]->shape.rank != 3 || inputs[1]->shape.rank != 3 || inputs[2]->shape.rank != 3)
    return 0;
  const QhShape *x = &inputs[0]->shape, *w = &inputs[1]->shape, *r = &inputs[2]->shape;
  return x->dims[0] * x->dims[1] * w->dims[0] * w->dims[1] * (w->dims[2] + r->dims[2]);
}

const QhOpDef qh_ops_rnn[] = {
    {"LSTM", 3, 8, 0, 3, infer, run, run_naive, macs},
    {"GRU", 3, 6, 0, 2, infer, run, run_naive, macs},
    {NULL},
};
