/* example_npu's partition engine: compile turns a claimed partition into a small
 * program (Conv, Relu and Add over float buffers it owns) and run executes it on the
 * partition's integer inputs. What a real NPU does in silicon is modelled the plain
 * way: every tensor inside is float, and where the QDQ graph quantizes a value
 * between two claimed ops the engine rounds it onto the same grid (round half to
 * even, clamp), so the result follows the host's reference within one step of the
 * output grid. The layout inside is the engine's business (here NCHW floats); the host
 * only sees the integer tensors at the boundary, in the declared io_layout (example_npu
 * declares NCHW; the engine also reads and writes NHWC boundaries, for a plugin that
 * declares QH_LAYOUT_NHWC). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "npu.h"

enum { OP_CONV, OP_RELU, OP_ADD };

typedef struct {
  uint32_t value;  /* the graph value this buffer holds (an integer value: its float twin) */
  int rank;
  int64_t dims[QH_MAX_RANK];
  size_t numel;
  float *data;
  int rounds;      /* quantized at this point in the QDQ graph: round onto its grid */
  float scale;
  int32_t zero_point, qmin, qmax, dtype;
} Buffer;

typedef struct {
  int kind;
  int in[3];       /* buffer indices; -1 absent */
  int out;
  int64_t strides[2], pads[4], dilations[2], group;
} Step;

typedef struct {
  Buffer *bufs;
  size_t n_bufs;
  Step *steps;
  size_t n_steps;
  size_t n_inputs, n_outputs;
  int *input_buf, *output_buf;
  int io_nhwc;     /* the host hands 4-D boundary tensors channels-last */
} Program;

static void program_free(Program *p) {
  if (p == NULL)
    return;
  for (size_t i = 0; i < p->n_bufs; i++)
    free(p->bufs[i].data);
  free(p->bufs);
  free(p->steps);
  free(p->input_buf);
  free(p->output_buf);
  free(p);
}

void npu_destroy(void *compiled) { program_free(compiled); }

static int find_buffer(const Program *p, uint32_t value) {
  for (size_t i = 0; i < p->n_bufs; i++)
    if (p->bufs[i].value == value)
      return (int)i;
  return -1;
}

static int add_buffer(Program *p, uint32_t value, const QhTensorView *t, const QhQParams *q) {
  Buffer *b = &p->bufs[p->n_bufs];
  memset(b, 0, sizeof *b);
  b->value = value;
  b->rank = t->rank;
  b->numel = 1;
  for (int d = 0; d < t->rank; d++) {
    b->dims[d] = t->dims[d];
    b->numel *= (size_t)t->dims[d];
  }
  if (t->layout == QH_LAYOUT_NHWC) { /* inside, every tensor is NCHW */
    b->dims[1] = t->dims[3];
    b->dims[2] = t->dims[1];
    b->dims[3] = t->dims[2];
  }
  b->data = calloc(b->numel ? b->numel : 1, sizeof(float));
  if (b->data == NULL)
    return -1;
  if (q && q->count == 1) {
    b->rounds = 1;
    b->scale = q->scale[0];
    b->zero_point = q->zero_point[0];
    b->qmin = q->quant_min;
    b->qmax = q->quant_max;
    b->dtype = q->dtype;
  }
  return (int)p->n_bufs++;
}

static double element(int32_t dtype, const void *data, size_t i) {
  switch (dtype) {
  case QH_DTYPE_UINT8: return ((const uint8_t *)data)[i];
  case QH_DTYPE_INT8: return ((const int8_t *)data)[i];
  case QH_DTYPE_INT32: return ((const int32_t *)data)[i];
  default: return ((const float *)data)[i];
  }
}

/* A weight or bias: its integer (or float) bytes, dequantized once. */
static QhStatus *add_constant(Program *p, const QhHostApi *host, const QhGraphView *g, uint32_t value,
                              const QhTensorView *t, const QhQParams *q, int *out) {
  const void *data = NULL;
  size_t nbytes = 0;
  QhStatus *st = host->value_data(g, value, &data, &nbytes);
  if (st)
    return st;
  int b = add_buffer(p, value, t, NULL);
  if (b < 0)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for a constant");
  Buffer *buf = &p->bufs[b];
  int32_t dtype = q ? q->dtype : QH_DTYPE_FLOAT;
  size_t inner = 1;
  if (q && q->count > 1)
    for (int d = q->ch_axis + 1; d < buf->rank; d++)
      inner *= (size_t)buf->dims[d];
  for (size_t i = 0; i < buf->numel; i++) {
    double v = element(dtype, data, i);
    if (q) {
      size_t c = q->count > 1 ? (i / inner) % q->count : 0;
      v = (v - q->zero_point[c]) * q->scale[c];
    }
    buf->data[i] = (float)v;
  }
  *out = b;
  return NULL;
}

static void read_ints(const QhHostApi *host, const QhGraphView *g, uint32_t node, const char *name, int64_t *out,
                      size_t n, int64_t dflt) {
  const int64_t *v = NULL;
  size_t count = 0;
  for (size_t i = 0; i < n; i++)
    out[i] = dflt;
  if (host->node_attr_type(g, node, name) != QH_ATTR_INTS)
    return;
  QhStatus *st = host->node_attr_ints(g, node, name, &v, &count);
  if (st) {
    host->status_free(st);
    return;
  }
  for (size_t i = 0; i < n && i < count; i++)
    out[i] = v[i];
}

static QhStatus *compile_step(Program *p, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  uint32_t node = u->nodes[0];
  const char *op = host->node_op_type(g, node);
  Step *s = &p->steps[p->n_steps];
  memset(s, 0, sizeof *s);
  s->in[0] = s->in[1] = s->in[2] = -1;
  if (strcmp(op, "Conv") == 0)
    s->kind = OP_CONV;
  else if (strcmp(op, "Relu") == 0)
    s->kind = OP_RELU;
  else if (strcmp(op, "Add") == 0)
    s->kind = OP_ADD;
  else
    return qh_status_newf(host, QH_ERR_UNSUPPORTED, "the NPU has no %s (node '%s')", op, host->node_name(g, node));
  if (u->n_outputs != 1 || u->output_tensors[0].rank < 0)
    return qh_status_newf(host, QH_ERR_UNSUPPORTED, "node '%s': one output of known shape needed",
                          host->node_name(g, node));
  for (size_t i = 0; i < u->n_inputs && i < 3; i++) {
    uint32_t v = u->inputs[i];
    if (v == QH_INVALID_ID)
      continue;
    if (host->value_flags(g, v) & QH_VALUE_CONSTANT) {
      QhStatus *st = add_constant(p, host, g, v, &u->input_tensors[i], u->input_qparams[i], &s->in[i]);
      if (st)
        return st;
    } else if ((s->in[i] = find_buffer(p, v)) < 0) {
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "node '%s': input %zu is produced outside the partition",
                            host->node_name(g, node), i);
    }
  }
  if (s->in[0] < 0 || (s->kind != OP_RELU && s->in[1] < 0))
    return qh_status_newf(host, QH_ERR_UNSUPPORTED, "node '%s': missing input", host->node_name(g, node));
  if (s->kind == OP_ADD && p->bufs[s->in[0]].numel != p->bufs[s->in[1]].numel)
    return qh_status_newf(host, QH_ERR_UNSUPPORTED, "node '%s': the NPU adds equal shapes only",
                          host->node_name(g, node));
  if (s->kind == OP_CONV) {
    if (p->bufs[s->in[0]].rank != 4 || p->bufs[s->in[1]].rank != 4)
      return qh_status_newf(host, QH_ERR_UNSUPPORTED, "node '%s': only 2-D convolutions", host->node_name(g, node));
    int64_t group = 1;
    if (host->node_attr_type(g, node, "group") == QH_ATTR_INT) {
      QhStatus *st = host->node_attr_int(g, node, "group", &group);
      if (st)
        return st;
    }
    s->group = group;
    read_ints(host, g, node, "strides", s->strides, 2, 1);
    read_ints(host, g, node, "pads", s->pads, 4, 0);
    read_ints(host, g, node, "dilations", s->dilations, 2, 1);
  }
  s->out = add_buffer(p, u->outputs[0], &u->output_tensors[0], u->output_qparams[0]);
  if (s->out < 0)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for a tensor");
  p->n_steps++;
  return NULL;
}

QhStatus *npu_compile(void *instance, const QhHostApi *host, const QhGraphView *graph,
                      const QhPartition *part, void **out_compiled) {
  (void)instance;
  Program *p = calloc(1, sizeof *p);
  size_t max_bufs = part->n_inputs + 4 * part->n_nodes;
  if (p == NULL || !(p->bufs = calloc(max_bufs, sizeof *p->bufs)) ||
      !(p->steps = calloc(part->n_nodes + 1, sizeof *p->steps)) ||
      !(p->input_buf = calloc(part->n_inputs + 1, sizeof(int))) ||
      !(p->output_buf = calloc(part->n_outputs + 1, sizeof(int)))) {
    program_free(p);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the program");
  }
  p->n_inputs = part->n_inputs;
  for (size_t i = 0; i < part->n_inputs; i++)
    p->io_nhwc |= part->input_tensors[i].layout == QH_LAYOUT_NHWC;
  for (size_t i = 0; i < part->n_outputs; i++)
    p->io_nhwc |= part->output_tensors[i].layout == QH_LAYOUT_NHWC;
  p->n_outputs = part->n_outputs;
  QhStatus *st = NULL;
  for (size_t i = 0; i < part->n_inputs && !st; i++) {
    const QhTensorView *t = &part->input_tensors[i];
    if (t->rank < 0 || !t->qparams || t->qparams->count != 1)
      st = qh_status_newf(host, QH_ERR_UNSUPPORTED, "input %zu: a per-tensor quantized input of known shape needed", i);
    else if ((p->input_buf[i] = add_buffer(p, part->inputs[i], t, NULL)) < 0)
      st = host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for an input");
  }
  for (size_t k = 0; k < part->n_nodes && !st; k++)
    st = compile_step(p, host, graph, part->units[k]);
  for (size_t i = 0; i < part->n_outputs && !st; i++) {
    p->output_buf[i] = find_buffer(p, part->outputs[i]);
    if (p->output_buf[i] < 0 || !p->bufs[p->output_buf[i]].rounds ||
        (p->bufs[p->output_buf[i]].dtype != QH_DTYPE_UINT8 && p->bufs[p->output_buf[i]].dtype != QH_DTYPE_INT8))
      st = qh_status_newf(host, QH_ERR_UNSUPPORTED, "output %zu is not a per-tensor uint8 or int8 value", i);
  }
  if (st) {
    program_free(p);
    return st;
  }
  *out_compiled = p;
  return NULL;
}

/* A buffer's dimensions in the boundary layout. */
static void io_dims(const Program *p, const Buffer *b, int64_t *dims) {
  memcpy(dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
  if (p->io_nhwc && b->rank == 4) {
    dims[1] = b->dims[2];
    dims[2] = b->dims[3];
    dims[3] = b->dims[1];
  }
}

/* Element e of an NCHW buffer: its index in the boundary layout. */
static size_t io_index(const Program *p, const Buffer *b, size_t e) {
  if (!p->io_nhwc || b->rank != 4)
    return e;
  size_t c = (size_t)b->dims[1], hw = (size_t)(b->dims[2] * b->dims[3]);
  size_t n = e / (c * hw), ch = e / hw % c, pix = e % hw;
  return (n * hw + pix) * c + ch;
}

QhStatus *npu_reshape(void *compiled, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                      QhTensorView *outputs, size_t n_outputs, size_t *out_workspace_bytes) {
  Program *p = compiled;
  if (n_inputs != p->n_inputs || n_outputs != p->n_outputs)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "input or output count differs from the compiled partition");
  for (size_t i = 0; i < n_inputs; i++) {
    const Buffer *b = &p->bufs[p->input_buf[i]];
    int64_t want[QH_MAX_RANK];
    io_dims(p, b, want);
    int same = inputs[i].rank == b->rank;
    for (int d = 0; same && d < b->rank; d++)
      same = inputs[i].dims[d] == want[d];
    if (!same)
      return qh_status_newf(host, QH_ERR_UNSUPPORTED, "input %zu: the program was compiled for other shapes", i);
  }
  for (size_t i = 0; i < n_outputs; i++) {
    const Buffer *b = &p->bufs[p->output_buf[i]];
    outputs[i].dtype = b->dtype;
    outputs[i].layout = b->rank == 4 ? (p->io_nhwc ? QH_LAYOUT_NHWC : QH_LAYOUT_NCHW) : QH_LAYOUT_ANY;
    outputs[i].rank = b->rank;
    io_dims(p, b, outputs[i].dims);
  }
  *out_workspace_bytes = 0;
  return NULL;
}

static float round_to_grid(const Buffer *b, float x) {
  float q = nearbyintf(x / b->scale) + (float)b->zero_point; /* the default rounding mode: half to even */
  q = fminf(fmaxf(q, (float)b->qmin), (float)b->qmax);
  return q;
}

static void conv(const Step *s, const Buffer *x, const Buffer *w, const Buffer *bias, Buffer *y) {
  int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2], wd = x->dims[3];
  int64_t m = w->dims[0], cg = w->dims[1], kh = w->dims[2], kw = w->dims[3];
  int64_t oh = y->dims[2], ow = y->dims[3], mg = m / s->group;
  (void)c;
  for (int64_t b = 0; b < n; b++)
    for (int64_t o = 0; o < m; o++) {
      int64_t g = o / mg;
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          double acc = bias ? bias->data[o] : 0.0;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t a = 0; a < kh; a++) {
              int64_t r = i * s->strides[0] - s->pads[0] + a * s->dilations[0];
              if (r < 0 || r >= h)
                continue;
              for (int64_t e = 0; e < kw; e++) {
                int64_t q = j * s->strides[1] - s->pads[1] + e * s->dilations[1];
                if (q < 0 || q >= wd)
                  continue;
                acc += (double)x->data[((b * x->dims[1] + g * cg + ci) * h + r) * wd + q] *
                       w->data[((o * cg + ci) * kh + a) * kw + e];
              }
            }
          y->data[((b * m + o) * oh + i) * ow + j] = (float)acc;
        }
    }
}

QhStatus *npu_run(void *compiled, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                  size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                  size_t workspace_bytes) {
  Program *p = compiled;
  (void)ctx;
  (void)workspace;
  (void)workspace_bytes;
  if (n_inputs != p->n_inputs || n_outputs != p->n_outputs)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "input or output count differs from the compiled partition");
  for (size_t i = 0; i < n_inputs; i++) {
    Buffer *b = &p->bufs[p->input_buf[i]];
    const QhQParams *q = inputs[i].qparams;
    for (size_t e = 0; e < b->numel; e++)
      b->data[e] =
          (float)((element(inputs[i].dtype, inputs[i].data, io_index(p, b, e)) - q->zero_point[0]) * q->scale[0]);
  }
  for (size_t k = 0; k < p->n_steps; k++) {
    const Step *s = &p->steps[k];
    Buffer *y = &p->bufs[s->out];
    const Buffer *a = &p->bufs[s->in[0]];
    if (s->kind == OP_CONV)
      conv(s, a, &p->bufs[s->in[1]], s->in[2] >= 0 ? &p->bufs[s->in[2]] : NULL, y);
    else if (s->kind == OP_RELU)
      for (size_t e = 0; e < y->numel; e++)
        y->data[e] = a->data[e] > 0.0f ? a->data[e] : 0.0f;
    else
      for (size_t e = 0; e < y->numel; e++)
        y->data[e] = a->data[e] + p->bufs[s->in[1]].data[e];
    if (y->rounds) /* the QDQ graph's QuantizeLinear -> DequantizeLinear at this value */
      for (size_t e = 0; e < y->numel; e++)
        y->data[e] = (round_to_grid(y, y->data[e]) - (float)y->zero_point) * y->scale;
  }
  for (size_t i = 0; i < n_outputs; i++) {
    const Buffer *b = &p->bufs[p->output_buf[i]];
    for (size_t e = 0; e < b->numel; e++) {
      float q = round_to_grid(b, b->data[e]);
      size_t at = io_index(p, b, e);
      if (outputs[i].dtype == QH_DTYPE_UINT8)
        ((uint8_t *)outputs[i].data)[at] = (uint8_t)q;
      else
        ((int8_t *)outputs[i].data)[at] = (int8_t)q;
    }
  }
  return NULL;
}
