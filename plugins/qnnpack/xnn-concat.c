/* The qnnpack plugin's Concat: XNNPACK (2022) has no concatenate operator, but along the
 * innermost stored axis (the channels of NHWC tensors; the last axis of the others, such as
 * an MLP's [N, C] features) a concatenation is one strided copy per input, which
 * xnn_create_copy_nc_x8 does (input i's Ci bytes per row into the output's rows of
 * sum(Ci), at its offset). A copy moves bytes without requantizing, so it equals
 * the host's DequantizeLinear -> Concat -> QuantizeLinear only when every input shares the
 * output's scale and zero point; any other Concat is declined with that reason, as is one
 * along another axis. The copy operators depend on the channel counts, which intermediate
 * shapes often leave unknown until reshape: they are created there, and recreated only
 * when the counts change (there are no weights to pack). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qnnpack.h"

#define CAT_MAX 64 /* densenet121 concatenates up to 25 */

typedef struct {
  const QnInstance *inst;
  size_t n_in;
  xnn_operator_t op[CAT_MAX];
  int64_t ch[CAT_MAX], total; /* the channel counts the operators were made for */
  int64_t axis; /* as the node says (negative: from the end) */
  int reshaped, rank;
  int64_t dims[QH_MAX_RANK]; /* the output's */
  size_t rows, out_bytes;    /* rows: the product of every dimension but the concatenated one */
} Concat;

static const char *analyze(const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  if (!u || u->struct_size < sizeof(QhNodeUnit) || u->n_nodes != 1 || !u->nodes || u->n_inputs < 1 || !u->inputs ||
      !u->input_roles || !u->input_qparams || u->n_outputs != 1 || !u->outputs || !u->output_qparams)
    return "malformed node unit";
  uint32_t node = u->nodes[0];
  if (!uq_op_is(host, g, node, "Concat"))
    return "concat pattern on an op other than Concat";
  if (u->n_inputs > CAT_MAX)
    return "Concat of more than 64 inputs is not supported";
  const char *p = uq_act_problem(u->output_qparams[0], 1);
  if (p)
    return p;
  const QhQParams *y = u->output_qparams[0];
  for (size_t i = 0; i < u->n_inputs; i++) {
    if (u->input_roles[i] != QH_ROLE_ACTIVATION || (host->value_flags(g, u->inputs[i]) & QH_VALUE_CONSTANT))
      return "constant inputs are not supported";
    if ((p = uq_act_problem(u->input_qparams[i], 0)))
      return p;
    const QhQParams *q = u->input_qparams[i];
    if (q->scale[0] != y->scale[0] || q->zero_point[0] != y->zero_point[0])
      return "Concat of inputs on another grid than its output: XNNPACK has no concatenate operator, and its "
             "copy (xnn_copy_nc_x8) does not requantize";
  }
  int64_t axis = uq_attr_int(host, g, node, "axis", 0);
  int64_t d[QH_MAX_RANK];
  int32_t rank = uq_known_shape(host, g, u->inputs[0], d);
  /* rank 4 runs channels-last (axis 1 is stored innermost); other ranks as they are */
  if (rank == 4 ? axis != 1 && axis != -3 : rank >= 0 ? axis != rank - 1 && axis != -1 : axis != 1 && axis != -1)
    return "Concat along an axis other than the channels (4-D) or the last one is not supported";
  return NULL;
}

QhStatus *qn_accept_concat(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u) {
  const QnInstance *inst = instance;
  if (!inst)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "accept: no instance");
  const char *p = analyze(host, g, u);
  if (!p && inst->xnn_init != xnn_status_success)
    p = "XNNPACK did not initialize on this CPU";
  return p ? host->status_new(QH_ERR_UNSUPPORTED, p) : NULL;
}

static void drop_ops(Concat *k) {
  for (size_t i = 0; i < CAT_MAX; i++)
    if (k->op[i]) {
      xnn_delete_operator(k->op[i]);
      k->op[i] = NULL;
    }
  k->total = 0;
}

static void destroy(void *kernel) {
  Concat *k = kernel;
  if (!k)
    return;
  drop_ops(k);
  free(k);
}

static QhStatus *create(void *instance, const QhHostApi *host, const QhGraphView *g, const QhNodeUnit *u,
                        void **out) {
  if (!out || !instance)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "create: bad arguments");
  QhStatus *st = qn_accept_concat(instance, host, g, u);
  if (st)
    return st;
  Concat *k = calloc(1, sizeof *k);
  if (!k)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  k->inst = instance;
  k->n_in = u->n_inputs;
  k->axis = uq_attr_int(host, g, u->nodes[0], "axis", 0);
  *out = k;
  return NULL;
}

static QhStatus *reshape(void *kernel, const QhHostApi *host, const QhTensorView *inputs, size_t n_inputs,
                         QhTensorView *outputs, size_t n_outputs, size_t *out_workspace) {
  Concat *k = kernel;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != k->n_in || !outputs || n_outputs != 1 || !out_workspace ||
      outputs[0].struct_size < sizeof(QhTensorView))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "reshape: bad arguments");
  k->reshaped = 0;
  const QhTensorView *x0 = &inputs[0];
  int32_t r = x0->rank;
  int64_t total = 0, ch[CAT_MAX];
  /* the concatenated axis must be the innermost stored one */
  int innermost = r == 4 ? x0->layout == QH_LAYOUT_NHWC && (k->axis == 1 || k->axis == -3)
                         : r >= 1 && (k->axis == r - 1 || k->axis == -1);
  if (!innermost)
    return host->status_new(QH_ERR_INVALID_ARGUMENT,
                            "reshape: Concat must be along the channels of NHWC tensors or the last axis");
  for (size_t i = 0; i < n_inputs; i++) {
    const QhTensorView *x = &inputs[i];
    int same = qn_u8_view_ok(x) && x->rank == r && x->layout == x0->layout && x->dims[r - 1] >= 1;
    for (int32_t j = 0; same && j + 1 < r; j++)
      same = x->dims[j] == x0->dims[j];
    if (!same)
      return host->status_new(QH_ERR_INVALID_ARGUMENT,
                              "reshape: Concat inputs must be uint8 of one rank and layout, differing only in "
                              "the concatenated axis");
    ch[i] = x->dims[r - 1];
    total += ch[i];
  }
  int same = total == k->total;
  for (size_t i = 0; same && i < n_inputs; i++)
    same = ch[i] == k->ch[i] && k->op[i];
  if (!same) {
    drop_ops(k);
    for (size_t i = 0; i < n_inputs; i++) {
      enum xnn_status s =
          xnn_create_copy_nc_x8((size_t)ch[i], (size_t)ch[i], (size_t)total, k->inst->xnn_flags, &k->op[i]);
      if (s != xnn_status_success) {
        k->op[i] = NULL;
        drop_ops(k);
        return host->status_new(s == xnn_status_out_of_memory ? QH_ERR_OUT_OF_MEMORY : QH_ERR_INTERNAL,
                                "XNNPACK: copy operator create failed");
      }
      k->ch[i] = ch[i];
    }
    k->total = total;
  }
  QhTensorView *y = &outputs[0];
  y->dtype = QH_DTYPE_UINT8;
  y->rank = r;
  y->layout = x0->layout;
  memcpy(y->dims, x0->dims, sizeof y->dims);
  y->dims[r - 1] = total;
  k->rank = r;
  memcpy(k->dims, y->dims, sizeof k->dims);
  k->rows = total ? qn_numel(y) / (size_t)total : 0;
  k->out_bytes = qn_numel(y);
  k->reshaped = 1;
  *out_workspace = 0;
  return NULL;
}

static QhStatus *run(void *kernel, const QhHostApi *host, const QhRunContext *ctx, const QhTensorView *inputs,
                     size_t n_inputs, QhTensorView *outputs, size_t n_outputs, void *workspace,
                     size_t workspace_bytes) {
  Concat *k = kernel;
  (void)ctx, (void)workspace, (void)workspace_bytes;
  if (!host)
    return NULL;
  if (!k || !inputs || n_inputs != k->n_in || !outputs || n_outputs != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: bad arguments");
  if (!k->reshaped)
    return host->status_new(QH_ERR_INVALID_STATE, "run before reshape");
  QhTensorView *y = &outputs[0];
  size_t pixels = k->rows;
  for (size_t i = 0; i < n_inputs; i++) {
    const QhTensorView *x = &inputs[i];
    if (!qn_u8_view_ok(x) || x->rank != k->rank || x->dims[k->rank - 1] != k->ch[i] ||
        x->nbytes != pixels * (size_t)k->ch[i] || (x->nbytes && !x->data))
      return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: input differs from reshape's");
  }
  if (!qn_u8_view_ok(y) || y->nbytes != k->out_bytes || (k->out_bytes && !y->data))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "run: output buffer differs from reshape's");
  if (k->out_bytes == 0)
    return NULL;
  size_t offset = 0;
  for (size_t i = 0; i < n_inputs; i++) {
    /* setup every run: the buffers may have moved */
    enum xnn_status s = xnn_setup_copy_nc_x8(k->op[i], pixels, inputs[i].data, (uint8_t *)y->data + offset,
                                             k->inst->pool);
    if (s == xnn_status_success)
      s = xnn_run_operator(k->op[i], k->inst->pool);
    if (s != xnn_status_success) {
      char msg[96];
      snprintf(msg, sizeof msg, "XNNPACK: copy setup or run failed (status %d)", (int)s);
      return host->status_new(QH_ERR_INTERNAL, msg);
    }
    offset += (size_t)k->ch[i];
  }
  return NULL;
}

const QhKernelOps qn_concat_kernel = {
    QH_STRUCT_HEADER(QhKernelOps), .id = "xnn_copy_nc_x8_concat", .input_layout = QH_LAYOUT_NHWC,
    .output_layout = QH_LAYOUT_NHWC, .create = create, .reshape = reshape, .run = run, .destroy = destroy};
