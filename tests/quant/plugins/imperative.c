/* A test backend that quantizes the PT2E way, through the imperative annotate: it reads
 * the user's qconfig per node (so --config exclusions reach it), puts its own observer
 * (Pow2MinMax: min/max with the scale rounded up to a power of two) on activations,
 * per-channel symmetric int8 on weights, an int32 bias derived from the input and
 * weight scales, shares Relu's output with its input, and refines qparams after
 * calibration so that every activation scale is a power of two (reporting each change),
 * and supplies its own fake-quant (weights round half away from zero) for the report.
 * Built only for tests (tests/quant); it includes only the SDK. */
#include <math.h>
#include <qhost/qhost-plugin.h>
#include <stdlib.h>
#include <string.h>

/* ---- the observer ---- */

typedef struct {
  float min, max;
  int seen;
} Pow2;

static QhStatus *p2_create(void *instance, const QhHostApi *host, const QhQuantSpec *spec, int32_t rank,
                           const int64_t *dims, void **out) {
  (void)instance, (void)rank, (void)dims;
  if (spec->dtype != QH_DTYPE_UINT8)
    return host->status_new(QH_ERR_UNSUPPORTED, "Pow2MinMax produces uint8 only");
  Pow2 *s = calloc(1, sizeof *s);
  if (s == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  *out = s;
  return NULL;
}

static QhStatus *p2_observe(void *state, const QhHostApi *host, const QhTensorView *t) {
  (void)host;
  Pow2 *s = state;
  const float *x = t->data;
  for (size_t i = 0; i < t->nbytes / sizeof(float); i++) {
    if (!s->seen || x[i] < s->min)
      s->min = x[i];
    if (!s->seen || x[i] > s->max)
      s->max = x[i];
    s->seen = 1;
  }
  return NULL;
}

static float pow2_at_least(float v) { return exp2f(ceilf(log2f(v))); }

static QhStatus *p2_compute(void *state, const QhHostApi *host, QhQParams *q) {
  (void)host;
  const Pow2 *s = state;
  float lo = fminf(s->min, 0), hi = fmaxf(s->max, 0);
  float scale = (hi - lo) / 255.0f;
  scale = scale > 0 ? pow2_at_least(scale) : 1.0f;
  q->dtype = QH_DTYPE_UINT8;
  q->qscheme = QH_QSCHEME_PER_TENSOR_AFFINE;
  q->quant_min = 0;
  q->quant_max = 255;
  q->ch_axis = -1;
  q->count = 1;
  q->scale[0] = scale;
  long zp = lrintf(-lo / scale);
  q->zero_point[0] = (int32_t)(zp < 0 ? 0 : zp > 255 ? 255 : zp);
  return NULL;
}

static QhStatus *p2_merge(void *state, const QhHostApi *host, const void *other) {
  (void)host;
  Pow2 *s = state;
  const Pow2 *o = other;
  if (o->seen) {
    if (!s->seen || o->min < s->min)
      s->min = o->min;
    if (!s->seen || o->max > s->max)
      s->max = o->max;
    s->seen = 1;
  }
  return NULL;
}

static QhStatus *p2_save(const void *state, const QhHostApi *host, QhBuffer *out) {
  static const char magic[4] = {'P', '2', 'M', '1'};
  QhStatus *st = host->buffer_append(out, magic, 4);
  return st ? st : host->buffer_append(out, state, sizeof(Pow2));
}

static QhStatus *p2_load(void *instance, const QhHostApi *host, const QhQuantSpec *spec, int32_t rank,
                         const int64_t *dims, const void *data, size_t size, void **out) {
  (void)instance, (void)spec, (void)rank, (void)dims;
  if (size != 4 + sizeof(Pow2) || memcmp(data, "P2M1", 4) != 0)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "not a Pow2MinMax state");
  Pow2 *s = malloc(sizeof *s);
  if (s == NULL)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  memcpy(s, (const char *)data + 4, sizeof *s);
  *out = s;
  return NULL;
}

static const QhObserverOps pow2_observer = {
    QH_STRUCT_HEADER(QhObserverOps), .name = "Pow2MinMax",
    .description = "min/max with the scale rounded up to a power of two",
    .flags = QH_OBSERVER_MERGE_IS_EXACT, .create = p2_create, .observe = p2_observe,
    .compute_qparams = p2_compute, .merge = p2_merge, .save = p2_save, .load = p2_load, .destroy = free};
static const QhObserverOps *const observers[] = {&pow2_observer};

/* ---- annotate ---- */

static QhStatus *derive_bias(void *user_data, const QhHostApi *host, const QhQParams *const *src, size_t n,
                             QhQParams *out) {
  (void)user_data;
  if (n != 2 || src[0]->count != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "bias derives from one input and one weight");
  size_t channels = src[1]->count;
  if (channels > out->capacity)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "more weight channels than bias capacity");
  for (size_t c = 0; c < channels; c++) {
    out->scale[c] = src[0]->scale[0] * src[1]->scale[c];
    out->zero_point[c] = 0;
  }
  out->count = channels;
  return NULL;
}

static const QhQuantSpec act_spec = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                     .dtype = QH_DTYPE_UINT8, .qscheme = QH_QSCHEME_PER_TENSOR_AFFINE,
                                     .ch_axis = -1, .observer = "Pow2MinMax"};
static const QhQuantSpec weight_spec = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE,
                                        .dtype = QH_DTYPE_INT8, .qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC,
                                        .quant_min = -127, .quant_max = 127, .ch_axis = 0,
                                        .flags = QH_SPEC_HAS_RANGE, .observer = "PerChannelMinMaxObserver"};

/* The user's activation observer when --config names one for this node, else ours. */
static QhStatus *activation_for(const QhHostApi *host, QhGraphView *g, uint32_t node, QhQuantSpec *spec,
                                int *excluded) {
  QhQuantSpec user = {QH_STRUCT_HEADER(QhQuantSpec)};
  int32_t source = 0;
  *spec = act_spec;
  *excluded = 0;
  QhStatus *st = host->qconfig_for_node(g, node, QH_ROLE_ACTIVATION, &user, &source);
  if (st) {
    int32_t code = host->status_code(st);
    host->status_free(st);
    return code == QH_ERR_NOT_FOUND ? NULL : host->status_new(code, "qconfig_for_node failed");
  }
  if (source == QH_QCONFIG_EXCLUDED)
    *excluded = 1;
  else if (source == QH_QCONFIG_USER && user.kind == QH_SPEC_QUANTIZE && user.observer &&
           user.dtype == QH_DTYPE_UINT8)
    spec->observer = user.observer; /* borrowed until annotate returns; the host copies it */
  return NULL;
}

static QhStatus *annotate_conv(const QhHostApi *host, QhGraphView *g, uint32_t n) {
  QhQuantSpec act;
  int excluded;
  QhStatus *st = activation_for(host, g, n, &act, &excluded);
  if (st || excluded)
    return st;
  if ((st = host->annotation_set_input_spec(g, n, 0, &act)) || (st = host->annotation_set_input_spec(g, n, 1, &weight_spec)))
    return st;
  if (host->node_input_count(g, n) > 2 && host->node_input(g, n, 2) != QH_INVALID_ID) {
    QhEdgeRef from[2] = {{n, 0, QH_EDGE_INPUT, 0}, {n, 1, QH_EDGE_INPUT, 0}};
    QhQuantSpec bias = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_DERIVED, .dtype = QH_DTYPE_INT32,
                        .qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC, .ch_axis = 0, .derived_from = from,
                        .n_derived_from = 2, .derive = derive_bias};
    if ((st = host->annotation_set_input_spec(g, n, 2, &bias)))
      return st;
  }
  /* a Relu right after takes the output; the conv's own output stays unobserved */
  uint32_t out = host->node_output(g, n, 0);
  if (host->value_consumer_count(g, out) == 1) {
    uint32_t next, slot;
    if ((st = host->value_consumer(g, out, 0, &next, &slot)))
      return st;
    if (strcmp(host->node_op_type(g, next), "Relu") == 0)
      return host->annotation_set_node_flags(g, n, QH_ANNOTATION_ANNOTATED);
  }
  if ((st = host->annotation_set_output_spec(g, n, 0, &act)))
    return st;
  return host->annotation_set_node_flags(g, n, QH_ANNOTATION_ANNOTATED);
}

static QhStatus *annotate(void *instance, const QhHostApi *host, QhGraphView *g) {
  (void)instance;
  for (uint32_t n = 0; n < host->graph_node_count(g); n++) {
    if (!host->node_is_live(g, n))
      continue;
    const char *op = host->node_op_type(g, n);
    QhStatus *st = NULL;
    if (strcmp(op, "Conv") == 0 || strcmp(op, "Gemm") == 0) {
      st = annotate_conv(host, g, n);
    } else if (strcmp(op, "Relu") == 0 || strcmp(op, "Add") == 0) {
      QhQuantSpec act;
      int excluded;
      st = activation_for(host, g, n, &act, &excluded);
      if (st == NULL && !excluded)
        st = host->annotation_set_output_spec(g, n, 0, &act);
    }
    if (st)
      return st;
  }
  return NULL;
}

static const QhAnnotateOps annotate_ops = {QH_STRUCT_HEADER(QhAnnotateOps), annotate, NULL};

/* ---- refine: every uint8 activation scale a power of two ---- */

static QhStatus *refine(void *instance, const QhHostApi *host, QhGraphView *g) {
  (void)instance;
  for (uint32_t n = 0; n < host->graph_node_count(g); n++) {
    if (!host->node_is_live(g, n))
      continue;
    for (uint32_t o = 0; o < host->node_output_count(g, n); o++) {
      QhEdgeRef e = {n, o, QH_EDGE_OUTPUT, 0};
      QhQParams q = {QH_STRUCT_HEADER(QhQParams)};
      QhStatus *st = host->qparams_get(g, &e, &q);
      if (st) {
        host->status_free(st); /* not quantized */
        continue;
      }
      if (q.dtype != QH_DTYPE_UINT8 || q.count != 1)
        continue;
      float p2 = pow2_at_least(q.scale[0]);
      if (p2 == q.scale[0])
        continue;
      float scale = p2;
      int32_t zp = q.zero_point[0];
      QhQParams nq = q;
      nq.scale = &scale;
      nq.zero_point = &zp;
      if ((st = host->qparams_set(g, &e, &nq, "this backend shifts by powers of two")))
        return st;
    }
  }
  return NULL;
}

static const QhRefineOps refine_ops = {QH_STRUCT_HEADER(QhRefineOps), refine};

/* ---- reference numerics: weights round half away from zero, as many DSPs do ---- */

static QhStatus *fake_quantize(void *instance, const QhHostApi *host, int32_t role, const QhQParams *q,
                               const QhTensorView *in, QhTensorView *out) {
  (void)instance, (void)role;
  if (in->nbytes != out->nbytes)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "input and output sizes differ");
  const float *x = in->data;
  float *y = out->data;
  size_t n = in->nbytes / sizeof(float), inner = 1;
  for (int32_t d = q->ch_axis + 1; q->count > 1 && d < in->rank; d++)
    inner *= (size_t)in->dims[d];
  for (size_t i = 0; i < n; i++) {
    size_t c = q->count > 1 ? (i / inner) % q->count : 0;
    float v = roundf(x[i] / q->scale[c]) + (float)q->zero_point[c];
    v = fminf(fmaxf(v, (float)q->quant_min), (float)q->quant_max);
    y[i] = (v - (float)q->zero_point[c]) * q->scale[c];
  }
  return NULL;
}

static const QhReferenceNumericsOps numerics = {QH_STRUCT_HEADER(QhReferenceNumericsOps),
                                                "weights round half away from zero", fake_quantize};

static const QhPluginDesc desc = {
    QH_STRUCT_HEADER(QhPluginDesc), .name = "imperative", .version = "1.0",
    .description = "test backend: imperative annotate, its own observer, derived int32 bias, refine",
    .annotate = &annotate_ops, .observers = observers, .n_observers = 1, .refine = &refine_ops,
    .reference_numerics = &numerics};

QH_PLUGIN_EXPORT QhStatus *qhost_plugin_init(const QhHostApi *host, const QhPluginDesc **out_desc) {
  QhStatus *st = qh_plugin_check_host(host);
  if (st)
    return st;
  *out_desc = &desc;
  return NULL;
}
