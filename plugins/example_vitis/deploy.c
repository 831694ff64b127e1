/* example_vitis's deploy step: the vendor package a DPU compiler would take. From the
 * QDQ graph it writes, through the host's artefact functions (the host makes the
 * directory appear whole or not at all):
 *   deploy_model.onnx the deploy model (artifact_write_model, QH_MODEL_STRIP_QDQ): the
 *                     float graph with every Q/DQ pair removed and the weights and
 *                     biases replaced by their dequantized values, i.e. clipped to
 *                     the quantized range and rounded, as MQBench's Vitis deploy writes
 *   clip_ranges.json  {"vitis": {tensor: {"scale", "position", "role", "dtype"}}} for
 *                     every quantized activation, weight and bias: the shape of
 *                     MQBench's Vitis clip-range file, plus the position the DPU uses
 *   weights/N.bin     each quantized constant's integers (int8 weights, int8/int32
 *                     biases: already inside the quantized range), row-major, with
 *                     dims and file listed in clip_ranges.json
 *   manifest.json     plugin and version, ABI version, the SHA-256 of the source QDQ
 *                     file (artifact_source_digest; null when the host has no file),
 *                     a hash of the source graph, opset, and the file list
 * The two host functions arrived in ABI 1.1, which this plugin requires (its entry
 * point refuses an older host); the QH_HAS_FIELD checks show how a plugin that also
 * runs in 1.0 hosts would do without them.
 * Any tensor the DPU cannot take (a scale that is not a power of two, a nonzero zero
 * point, per-channel parameters) fails the deploy with its name. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering.h"

typedef struct {
  char *data;
  size_t len, cap;
  int oom;
} Text;

static void put(Text *t, const char *s, size_t n) {
  if (t->oom)
    return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *d = realloc(t->data, cap);
    if (!d) {
      t->oom = 1;
      return;
    }
    t->data = d, t->cap = cap;
  }
  memcpy(t->data + t->len, s, n);
  t->len += n;
  t->data[t->len] = '\0';
}

static void puts_(Text *t, const char *s) { put(t, s, strlen(s)); }

static void putf(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(Text *t, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  put(t, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* A JSON string (names are UTF-8 from the host; quote and control characters escaped). */
static void put_json_string(Text *t, const char *s) {
  puts_(t, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      putf(t, "\\%c", c);
    else if (c < 0x20)
      putf(t, "\\u%04x", c);
    else
      put(t, (const char *)&c, 1);
  }
  puts_(t, "\"");
}

/* FNV-1a, 64 bits: a fingerprint of the graph the package was made from. */
static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

typedef struct {
  const QhHostApi *host;
  const QhGraphView *g;
  Text ranges, files;
  QhArtifact *artifact;
  int n_entries, n_files;
} Deploy;

/* The scalar at value v as a double (float scale or int8/int32 zero point). */
static QhStatus *scalar(Deploy *d, uint32_t node, uint32_t v, double *out) {
  const void *data;
  size_t n = 0;
  int32_t dt = d->host->value_dtype(d->g, v);
  QhStatus *st = d->host->value_data(d->g, v, &data, &n);
  if (st) {
    d->host->status_free(st);
    return d->host->status_new_for_node(d->g, node, QH_ERR_UNSUPPORTED,
                                        "the scale and zero point must be constants");
  }
  if ((dt == QH_DTYPE_FLOAT || dt == QH_DTYPE_INT32) && n == 4)
    *out = dt == QH_DTYPE_FLOAT ? *(const float *)data : *(const int32_t *)data;
  else if (dt == QH_DTYPE_INT8 && n == 1)
    *out = *(const int8_t *)data;
  else if (dt == QH_DTYPE_UINT8 && n == 1)
    *out = *(const uint8_t *)data;
  else
    return d->host->status_new_for_node(d->g, node, QH_ERR_UNSUPPORTED,
                                        "per-channel quantization: the DPU has one position per tensor");
  return NULL;
}

static const char *role_of(Deploy *d, uint32_t dq, int32_t dtype) {
  if (dtype == QH_DTYPE_INT32)
    return "bias";
  uint32_t out = d->host->node_output(d->g, dq, 0), node, slot;
  if (d->host->value_consumer_count(d->g, out) < 1)
    return "constant";
  QhStatus *st = d->host->value_consumer(d->g, out, 0, &node, &slot);
  if (st) {
    d->host->status_free(st);
    return "constant";
  }
  const char *op = d->host->node_op_type(d->g, node);
  int weighted = op && (!strcmp(op, "Conv") || !strcmp(op, "Gemm") || !strcmp(op, "MatMul"));
  return weighted && slot == 1 ? "weight" : weighted && slot == 2 ? "bias" : "constant";
}

/* One Q or DQ node: its entry in clip_ranges.json, and the integers of a constant. */
static QhStatus *entry(Deploy *d, uint32_t node, int is_dq) {
  const QhHostApi *h = d->host;
  uint32_t x = h->node_input(d->g, node, 0), s = h->node_input(d->g, node, 1),
           z = h->node_input(d->g, node, 2);
  int constant = is_dq && (h->value_flags(d->g, x) & QH_VALUE_CONSTANT);
  if (is_dq && !constant)
    return NULL; /* an activation: its QuantizeLinear has the entry */
  double scale = 0, zp = 0;
  int pos;
  QhStatus *st = scalar(d, node, s, &scale);
  if (!st && z != QH_INVALID_ID)
    st = scalar(d, node, z, &zp);
  if (st)
    return st;
  int32_t dtype = constant ? h->value_dtype(d->g, x) : h->value_dtype(d->g, h->node_output(d->g, node, 0));
  if (z != QH_INVALID_ID)
    dtype = h->value_dtype(d->g, z);
  if (zp != 0 || !vitis_kernel_pos(scale, &pos) || (dtype != QH_DTYPE_INT8 && dtype != QH_DTYPE_INT32))
    return qh_status_newf(h, QH_ERR_UNSUPPORTED,
                          "tensor '%s': scale %g, zero point %g: the DPU needs int8, zero point 0 "
                          "and a power-of-two scale", h->value_name(d->g, x), scale, zp);
  /* Keyed by the deploy model's names: an activation keeps the name its QuantizeLinear
   * reads; a constant becomes the float initializer its DequantizeLinear wrote. */
  const char *name = h->value_name(d->g, constant ? h->node_output(d->g, node, 0) : x),
             *role = constant ? role_of(d, node, dtype) : "activation";
  puts_(&d->ranges, d->n_entries++ ? ",\n    " : "\n    ");
  put_json_string(&d->ranges, name);
  putf(&d->ranges, ": {\"scale\": %.9g, \"position\": %d, \"role\": \"%s\", \"dtype\": \"%s\"", scale,
       pos, role, dtype == QH_DTYPE_INT8 ? "int8" : "int32");
  if (constant) {
    const void *data;
    size_t n;
    int64_t dims[QH_MAX_RANK];
    int32_t rank = -1;
    if ((st = h->value_data(d->g, x, &data, &n)) || (st = h->value_shape(d->g, x, dims, QH_MAX_RANK, &rank)))
      return st;
    char file[64];
    snprintf(file, sizeof file, "weights/%d.bin", d->n_files++);
    if ((st = h->artifact_write(d->artifact, file, data, n)))
      return st;
    putf(&d->ranges, ", \"file\": \"%s\", \"dims\": [", file);
    for (int32_t i = 0; i < rank; i++)
      putf(&d->ranges, "%s%lld", i ? ", " : "", (long long)dims[i]);
    puts_(&d->ranges, "]");
    putf(&d->files, ", \"%s\"", file);
  }
  puts_(&d->ranges, "}");
  return NULL;
}

static uint64_t graph_hash(const QhHostApi *h, const QhGraphView *g) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (uint32_t n = 0; n < h->graph_node_count(g); n++) {
    if (!h->node_is_live(g, n))
      continue;
    const char *op = h->node_op_type(g, n), *name = h->node_name(g, n);
    hash = fnv(hash, op, strlen(op) + 1);
    hash = fnv(hash, name ? name : "", name ? strlen(name) + 1 : 1);
    for (uint32_t i = 0; i < h->node_input_count(g, n); i++) {
      uint32_t v = h->node_input(g, n, i);
      const void *data;
      size_t bytes;
      if (v == QH_INVALID_ID || !(h->value_flags(g, v) & QH_VALUE_CONSTANT))
        continue;
      QhStatus *st = h->value_data(g, v, &data, &bytes);
      if (st)
        h->status_free(st);
      else
        hash = fnv(hash, data, bytes);
    }
  }
  return hash;
}

static QhStatus *deploy(void *instance, const QhHostApi *host, const QhGraphView *graph,
                        QhArtifact *artifact) {
  (void)instance;
  Deploy d = {host, graph, {0}, {0}, artifact, 0, 0};
  QhStatus *st = NULL;
  puts_(&d.ranges, "{\"vitis\": {");
  for (uint32_t n = 0; n < host->graph_node_count(graph) && !st; n++) {
    const char *op = host->node_is_live(graph, n) ? host->node_op_type(graph, n) : NULL;
    const char *domain = op ? host->node_domain(graph, n) : NULL;
    if (op && (!domain || !domain[0]) && (!strcmp(op, "QuantizeLinear") || !strcmp(op, "DequantizeLinear")))
      st = entry(&d, n, op[0] == 'D');
  }
  if (!st && d.n_entries == 0)
    st = host->status_new(QH_ERR_INVALID_ARGUMENT, "the model has no QuantizeLinear or "
                                                   "DequantizeLinear: deploy takes a QDQ model");
  puts_(&d.ranges, "\n  }\n}\n");
  if (!st && !d.ranges.oom)
    st = host->artifact_write(artifact, "clip_ranges.json", d.ranges.data, d.ranges.len);
  int has_model = QH_HAS_FIELD(host, QhHostApi, artifact_write_model);
  if (!st && has_model)
    st = host->artifact_write_model(artifact, "deploy_model.onnx", graph, QH_MODEL_STRIP_QDQ);
  if (!st) {
    const char *digest =
        QH_HAS_FIELD(host, QhHostApi, artifact_source_digest) ? host->artifact_source_digest(artifact) : NULL;
    Text m = {0};
    puts_(&m, "{\n  \"format\": \"example_vitis-package\",\n  \"format_version\": 1,\n");
    putf(&m, "  \"plugin\": \"example_vitis\",\n  \"plugin_version\": \"%s\",\n", EXAMPLE_VITIS_VERSION);
    putf(&m, "  \"abi_version\": \"%d.%d\",\n  \"host_version\": ", QH_ABI_MAJOR, QH_ABI_MINOR);
    put_json_string(&m, host->host_version());
    /* the file's digest names the model a user has; the graph hash also covers a graph
     * that never was a file (plugin-check's) */
    puts_(&m, ",\n  \"source_sha256\": ");
    if (digest)
      put_json_string(&m, digest);
    else
      puts_(&m, "null");
    putf(&m, ",\n  \"source_graph_fnv1a64\": \"%016llx\",\n  \"opset\": %lld,\n",
         (unsigned long long)graph_hash(host, graph), (long long)host->graph_opset(graph, ""));
    putf(&m, "  \"files\": [%s\"clip_ranges.json\"%s]\n}\n", has_model ? "\"deploy_model.onnx\", " : "",
         d.files.data ? d.files.data : "");
    st = m.oom ? NULL : host->artifact_write(artifact, "manifest.json", m.data, m.len);
    if (m.oom)
      st = host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
    free(m.data);
  }
  if (!st && (d.ranges.oom || d.files.oom))
    st = host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  free(d.ranges.data);
  free(d.files.data);
  return st;
}

const QhDeployOps example_vitis_deploy = {
    QH_STRUCT_HEADER(QhDeployOps),
    .description = "DPU package: deploy_model.onnx (Q/DQ removed), clip_ranges.json (positions and "
                   "scales), weights/*.bin, manifest.json",
    .deploy = deploy,
};
