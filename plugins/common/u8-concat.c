/* uint8 Concat for the lowering plugins (u8-concat.h): accept (a lone Concat of uint8
 * per-tensor activations with an axis), create (one requantization table per input onto
 * the output's grid, built with the host's dequantize f32((q - z) * s) and QuantizeLinear,
 * flagged as the identity where it is one), reshape (ONNX's axis mapped to the physical
 * axis of a channels-last rank-4 buffer; every other dim equal) and the copy, one outer
 * index at a time: each input's slab, requantized, one after the other. Moved here from
 * the x86 plugin so that fbgemm runs the same code. */
#include <stdlib.h>
#include <string.h>

#include "u8-concat.h"
#include "u8-kernels.h"
#include "unit-query.h"

#define MAX_INPUTS 256
#define TASK_BYTES 65536 /* output bytes per parallel task, at least one outer index */

struct QhU8Concat {
  size_t n_in;
  int64_t raw_axis;    /* as the node gives it */
  int64_t axis;        /* ONNX axis, normalised once the rank is known */
  uint8_t (*lut)[256]; /* per input */
  int *identity;       /* per input: lut is the identity */
  /* set by reshape */
  int reshaped;
  int32_t rank;
  int64_t (*dims)[QH_MAX_RANK]; /* per input, physical order */
  size_t outer;                 /* product of the dims before the physical axis */
  size_t *inner;                /* per input: bytes per outer index */
  size_t out_inner, out_bytes;
};

/* ONNX's axis over NCHW to the axis of a channels-last rank-4 buffer [n, h, w, c]. */
static int64_t physical_axis(int64_t axis, int32_t rank, int32_t layout) {
  static const int64_t nhwc[4] = {0, 3, 1, 2};
  return rank == 4 && layout == QH_LAYOUT_NHWC ? nhwc[axis] : axis;
}

static const char *analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u, int64_t *axis) {
  if (!uq_op_is(host, g, u->nodes[0], "Concat") || u->n_nodes != 1)
    return "only a lone Concat";
  if (u->n_inputs < 1 || u->n_inputs > MAX_INPUTS)
    return "Concat needs 1 to 256 inputs";
  for (size_t i = 0; i < u->n_inputs; i++) {
    if (u->input_roles[i] != QH_ROLE_ACTIVATION || (host->value_flags(g, u->inputs[i]) & QH_VALUE_CONSTANT))
      return "constant inputs are not supported";
    const char *p = uq_act_problem(u->input_qparams[i], 0);
    if (p)
      return p;
  }
  const char *p = uq_act_problem(u->output_qparams[0], 1);
  if (p)
    return p;
  *axis = uq_attr_int(host, g, u->nodes[0], "axis", INT64_MIN);
  if (*axis == INT64_MIN)
    return "Concat without an axis";
  return NULL;
}

QhStatus *qh_u8_concat_accept(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes < 1 || !u->nodes ||
      (u->n_inputs > 0 && (!u->inputs || !u->input_roles || !u->input_qparams)) || u->n_outputs != 1 ||
      !u->outputs || !u->output_qparams)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "malformed node unit");
  int64_t axis;
  const char *p = analyze(host, g, u, &axis);
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

void qh_u8_concat_destroy(QhU8Concat *k) {
  if (!k)
    return;
  free(k->lut);
  free(k->identity);
  free(k->dims);
  free(k->inner);
  free(k);
}

QhStatus *qh_u8_concat_create(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                              QhU8Concat **out) {
  QhStatus *st = qh_u8_concat_accept(host, g, u);
  if (st)
    return st;
  if (!out)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  QhU8Concat *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  analyze(host, g, u, &k->raw_axis);
  k->n_in = u->n_inputs;
  k->lut = calloc(k->n_in, sizeof *k->lut);
  k->identity = calloc(k->n_in, sizeof *k->identity);
  k->dims = calloc(k->n_in, sizeof *k->dims);
  k->inner = calloc(k->n_in, sizeof *k->inner);
  if (!k->lut || !k->identity || !k->dims || !k->inner) {
    qh_u8_concat_destroy(k);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  }
  const float so = u->output_qparams[0]->scale[0];
  const int32_t zo = u->output_qparams[0]->zero_point[0];
  const float lo = (float)(0 - zo), hi = (float)(255 - zo);
  for (size_t i = 0; i < k->n_in; i++) {
    const float s = u->input_qparams[i]->scale[0];
    const int32_t z = u->input_qparams[i]->zero_point[0];
    k->identity[i] = 1;
    for (int q = 0; q < 256; q++) {
      k->lut[i][q] = qh_u8_quant((float)(q - z) * s, so, lo, hi, zo);
      k->identity[i] &= k->lut[i][q] == q;
    }
  }
  *out = k;
  return NULL;
}

QhStatus *qh_u8_concat_reshape(QhU8Concat *k, const QhHostApi *host, const QhTensorView *inputs,
                               size_t n_inputs, QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != k->n_in || !outputs || n_outputs != 1 || !out_workspace ||
      outputs[0].struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  k->reshaped = 0;
  const QhTensorView *x0 = &inputs[0];
  for (size_t i = 0; i < n_inputs; i++)
    if (!uq_u8_view_ok(&inputs[i]) || inputs[i].rank != x0->rank || inputs[i].layout != x0->layout)
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: Concat inputs must be uint8 tensors of one rank and layout");
  int32_t rank = x0->rank;
  int64_t axis = k->raw_axis < 0 ? k->raw_axis + rank : k->raw_axis;
  if (rank < 1 || axis < 0 || axis >= rank)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Concat axis out of range");
  int64_t pa = physical_axis(axis, rank, x0->layout);
  QhTensorView *y = &outputs[0];
  y->dtype = QH_DTYPE_UINT8;
  y->rank = rank;
  y->layout = x0->layout;
  memcpy(y->dims, x0->dims, sizeof y->dims);
  y->dims[pa] = 0;
  k->outer = 1;
  for (int64_t d = 0; d < pa; d++)
    k->outer *= (size_t)x0->dims[d];
  k->out_inner = 0;
  for (size_t i = 0; i < n_inputs; i++) {
    for (int32_t d = 0; d < rank; d++)
      if (d != pa && inputs[i].dims[d] != x0->dims[d])
        return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: Concat inputs differ off the axis");
    memcpy(k->dims[i], inputs[i].dims, sizeof k->dims[i]);
    y->dims[pa] += inputs[i].dims[pa];
    size_t inner = 1;
    for (int32_t d = (int32_t)pa; d < rank; d++)
      inner *= (size_t)inputs[i].dims[d];
    k->inner[i] = inner;
    k->out_inner += inner;
  }
  k->rank = rank;
  k->axis = axis;
  k->out_bytes = uq_numel(y);
  k->reshaped = 1;
  *out_workspace = 0;
  return NULL;
}

QhStatus *qh_u8_concat_prepare(const QhU8Concat *k, const QhHostApi *host, const QhTensorView *inputs,
                               size_t n_inputs, QhTensorView *outputs, size_t n_outputs, QhU8ConcatJob *job,
                               size_t *tasks) {
  if (!k || !inputs || !outputs || n_outputs != 1 || n_inputs != k->n_in || !job || !tasks)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  *tasks = 0;
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  for (size_t i = 0; i < n_inputs; i++) {
    const QhTensorView *x = &inputs[i];
    if (!uq_u8_view_ok(x) || x->rank != k->rank ||
        memcmp(x->dims, k->dims[i], (size_t)x->rank * sizeof *x->dims) != 0 ||
        x->nbytes != k->outer * k->inner[i] || (x->nbytes && !x->data))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  }
  QhTensorView *y = &outputs[0];
  if (!uq_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  *job = (QhU8ConcatJob){k, inputs, y->data, TASK_BYTES / k->out_inner + 1};
  *tasks = (k->outer + job->per_task - 1) / job->per_task;
  return NULL;
}

/* One outer index: each input's slab, requantized, one after the other. */
static void concat_one(const QhU8ConcatJob *j, size_t o) {
  const QhU8Concat *k = j->k;
  uint8_t *restrict y = j->y + o * k->out_inner;
  for (size_t i = 0; i < k->n_in; i++) {
    const size_t n = k->inner[i];
    const uint8_t *restrict x = (const uint8_t *)j->inputs[i].data + o * n;
    if (k->identity[i]) {
      memcpy(y, x, n);
    } else {
      const uint8_t *restrict lut = k->lut[i];
      for (size_t e = 0; e < n; e++)
        y[e] = lut[x[e]];
    }
    y += n;
  }
}

void qh_u8_concat_task(void *user, size_t index, uint32_t worker) {
  (void)worker;
  const QhU8ConcatJob *j = user;
  size_t o0 = index * j->per_task, o1 = o0 + j->per_task < j->k->outer ? o0 + j->per_task : j->k->outer;
  for (size_t o = o0; o < o1; o++)
    concat_one(j, o);
}
