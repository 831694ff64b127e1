/* Loading ONNX models into the graph IR. The bytes are untrusted: nesting is bounded
 * by a wire pre-scan before protobuf-c unpacks them, every tensor's byte or element
 * count must match its shape before anything is allocated, external data must stay
 * inside the model's directory, and the opsets must be ones whose semantics qhost
 * implements. Every error names the file first. */
/* realpath() is XSI. */
#define _XOPEN_SOURCE 700

#include "io/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/onnx-private.h"
#include "onnx/onnx.pb-c.h"

#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "raw_data is little-endian; loading on a big-endian host needs byte swapping"
#endif

/* protobuf's own hard limit on a serialized message. */
#define MAX_MODEL_BYTES (G_GUINT64_CONSTANT(2) << 30)

/* Names of TensorProto.DataType codes, for messages about unsupported types. */
static const char *onnx_type_name(int code) {
  static const char *const names[] = {
      "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
      "string", "bool", "float16", "double", "uint32", "uint64", "complex64", "complex128",
      "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4",
      "int4", "float4e2m1"};
  return (code >= 0 && code < (int)G_N_ELEMENTS(names)) ? names[code] : "unknown";
}

static gboolean is_default_domain(const char *d) {
  return d == NULL || *d == '\0' || strcmp(d, "ai.onnx") == 0;
}

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* ---- tensors ---------------------------------------------------------------------- */

static gboolean shape_from_dims(const int64_t *dims, size_t n_dims, QhShape *shape,
                                const char *what, GError **error) {
  if (n_dims > QH_MAX_RANK) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s has rank %zu; qhost supports at most %d",
                what, n_dims, QH_MAX_RANK);
    return FALSE;
  }
  shape->rank = (int)n_dims;
  for (size_t i = 0; i < n_dims; i++) {
    if (dims[i] < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s has negative dimension %" G_GINT64_FORMAT,
                  what, dims[i]);
      return FALSE;
    }
    shape->dims[i] = dims[i];
  }
  return TRUE;
}

/* Location checks: a relative path without "..", resolving to a regular file inside
 * base_dir even after symlinks. Returns the real path. */
static char *resolve_external(const char *base_dir, const char *location, const char *what,
                              GError **error) {
  if (*location == '\0') {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s has an empty external data location", what);
    return NULL;
  }
  if (g_path_is_absolute(location) || location[0] == '\\' || location[0] == '~') {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: external data location '%s' is an absolute path; it must be relative to the "
                "model's directory",
                what, location);
    return NULL;
  }
  char **parts = g_regex_split_simple("[/\\\\]", location, 0, 0);
  gboolean dotdot = FALSE;
  for (int i = 0; parts[i] != NULL; i++)
    dotdot |= strcmp(parts[i], "..") == 0;
  g_strfreev(parts);
  if (dotdot) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: external data location '%s' contains '..'; it must stay inside the model's "
                "directory",
                what, location);
    return NULL;
  }
  char *joined = g_build_filename(base_dir, location, NULL);
  char *real_base = realpath(base_dir, NULL);
  char *real = real_base ? realpath(joined, NULL) : NULL;
  int saved = errno;
  g_free(joined);
  if (real == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: external data '%s': %s", what, location,
                g_strerror(saved));
    free(real_base);
    return NULL;
  }
  size_t nb = strlen(real_base);
  gboolean inside = strncmp(real, real_base, nb) == 0 &&
                    (real[nb] == '/' || (nb == 1 && real_base[0] == '/'));
  free(real_base);
  if (!inside) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: external data location '%s' resolves outside the model's directory", what,
                location);
    free(real);
    return NULL;
  }
  char *out = g_strdup(real);
  free(real);
  return out;
}

static gboolean parse_u64(const char *s, guint64 *out) {
  return s != NULL && g_ascii_string_to_unsigned(s, 10, 0, G_MAXINT64, out, NULL);
}

static QhTensor *read_external(const Onnx__TensorProto *tp, QhDType dtype, const QhShape *shape,
                               size_t nbytes, const char *base_dir, const char *what,
                               GError **error) {
  const char *location = NULL;
  guint64 offset = 0, length = 0;
  gboolean has_length = FALSE;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const char *k = str_or_empty(tp->external_data[i]->key);
    const char *v = tp->external_data[i]->value;
    gboolean ok = TRUE;
    if (strcmp(k, "location") == 0)
      location = str_or_empty(v);
    else if (strcmp(k, "offset") == 0)
      ok = parse_u64(v, &offset);
    else if (strcmp(k, "length") == 0)
      ok = has_length = parse_u64(v, &length);
    if (!ok) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s has an invalid external data %s '%s'",
                  what, k, str_or_empty(v));
      return NULL;
    }
  }
  if (location == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s uses external data without a location",
                what);
    return NULL;
  }
  if (base_dir == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "%s: external data '%s' needs the model's directory, and none was given", what,
                location);
    return NULL;
  }
  char *real = resolve_external(base_dir, location, what, error);
  if (real == NULL)
    return NULL;
  QhTensor *t = NULL;
  int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: external data '%s': %s", what, location,
                g_strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: external data '%s' is not a regular file",
                what, location);
    goto out;
  }
  if (!has_length)
    length = offset <= (guint64)st.st_size ? (guint64)st.st_size - offset : 0;
  if (offset > (guint64)st.st_size || length > (guint64)st.st_size - offset) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: external data '%s' offset %" G_GUINT64_FORMAT " + length %" G_GUINT64_FORMAT
                " runs past the end of the file (%" G_GINT64_FORMAT " bytes)",
                what, location, offset, length, (gint64)st.st_size);
    goto out;
  }
  if (length != nbytes) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: external data '%s' holds %" G_GUINT64_FORMAT " bytes but the shape needs %zu",
                what, location, length, nbytes);
    goto out;
  }
  t = qh_tensor_new(dtype, shape, error);
  if (t == NULL)
    goto out;
  size_t done = 0;
  while (done < nbytes) {
    ssize_t r = pread(fd, (char *)t->data + done, nbytes - done, (off_t)(offset + done));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: reading external data '%s': %s", what,
                  location, r < 0 ? g_strerror(errno) : "unexpected end of file");
      g_clear_pointer(&t, qh_tensor_free);
      goto out;
    }
    done += (size_t)r;
  }
out:
  if (fd >= 0)
    close(fd);
  g_free(real);
  return t;
}

/* A TensorProto as a QhTensor. `what` names it in messages ("initializer 'w'"). */
static QhTensor *tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir,
                                   const char *what, GError **error) {
  int code = tp->has_data_type ? tp->data_type : 0;
  if (!qh_dtype_is_supported(code)) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s has unsupported type %s", what,
                onnx_type_name(code));
    return NULL;
  }
  if (tp->segment != NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s is segmented, which is not supported",
                what);
    return NULL;
  }
  QhDType dtype = (QhDType)code;
  QhShape shape;
  int64_t numel;
  if (!shape_from_dims(tp->dims, tp->n_dims, &shape, what, error))
    return NULL;
  if (!qh_shape_numel(&shape, &numel, error)) {
    g_prefix_error(error, "%s: ", what);
    return NULL;
  }
  size_t esize = qh_dtype_size(dtype);
  size_t nbytes = (size_t)numel * esize; /* numel <= 2^34: no overflow */

  if (qh_dtype_is_4bit(dtype)) { /* packed two per byte, low nibble first */
    size_t packed = ((size_t)numel + 1) / 2;
    if (!tp->has_raw_data || tp->raw_data.len != packed ||
        (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)) {
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                  "%s (%s): qhost reads 4-bit tensors from raw_data of %zu packed bytes only (it has %zu)",
                  what, qh_dtype_name(dtype), packed, tp->has_raw_data ? tp->raw_data.len : 0);
      return NULL;
    }
    QhTensor *t = qh_tensor_new(dtype, &shape, error);
    if (t != NULL && numel > 0)
      qh_int4_unpack(tp->raw_data.data, (size_t)numel, dtype, t->data);
    return t;
  }
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return read_external(tp, dtype, &shape, nbytes, base_dir, what, error);

  if (tp->has_raw_data) {
    if (tp->raw_data.len != nbytes) {
      char *s = qh_shape_to_string(&shape);
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s has %zu bytes of raw data but its shape %s of %s needs %zu", what,
                  tp->raw_data.len, s, qh_dtype_name(dtype), nbytes);
      g_free(s);
      return NULL;
    }
    QhTensor *t = qh_tensor_new(dtype, &shape, error);
    if (t != NULL && nbytes > 0)
      memcpy(t->data, tp->raw_data.data, nbytes);
    return t;
  }

  /* Typed fields: int32_data carries every type of 32 bits or fewer except float. */
  size_t count;
  const char *field;
  switch (dtype) {
  case QH_DTYPE_F32: count = tp->n_float_data; field = "float_data"; break;
  case QH_DTYPE_S64: count = tp->n_int64_data; field = "int64_data"; break;
  default: count = tp->n_int32_data; field = "int32_data"; break;
  }
  if (count != (size_t)numel) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s has %zu values in %s but its shape needs %" G_GINT64_FORMAT, what, count, field,
                numel);
    return NULL;
  }
  QhTensor *t = qh_tensor_new(dtype, &shape, error);
  if (t == NULL)
    return NULL;
  for (int64_t i = 0; i < numel; i++) {
    switch (dtype) {
    case QH_DTYPE_F32: ((float *)t->data)[i] = tp->float_data[i]; break;
    case QH_DTYPE_S64: ((int64_t *)t->data)[i] = tp->int64_data[i]; break;
    case QH_DTYPE_S32: ((int32_t *)t->data)[i] = tp->int32_data[i]; break;
    case QH_DTYPE_U8: ((guint8 *)t->data)[i] = (guint8)tp->int32_data[i]; break;
    case QH_DTYPE_S8: ((gint8 *)t->data)[i] = (gint8)tp->int32_data[i]; break;
    case QH_DTYPE_U16: ((guint16 *)t->data)[i] = (guint16)tp->int32_data[i]; break;
    case QH_DTYPE_S16: ((gint16 *)t->data)[i] = (gint16)tp->int32_data[i]; break;
    case QH_DTYPE_BOOL: ((guint8 *)t->data)[i] = tp->int32_data[i] != 0; break;
    case QH_DTYPE_F16: ((guint16 *)t->data)[i] = (guint16)tp->int32_data[i]; break;
    default: break;
    }
  }
  return t;
}

/* ---- value types ------------------------------------------------------------------ */

static void value_set_dim_params(QhValue *v, char **params) {
  if (v->dim_params) {
    for (int i = 0; i < v->shape.rank; i++)
      g_free(v->dim_params[i]);
    g_free(v->dim_params);
  }
  v->dim_params = params;
}

/* Applies a ValueInfoProto's tensor type to v. strict: an unsupported element type or
 * shape is an error (graph inputs and outputs); otherwise it is ignored. */
static gboolean apply_type(QhValue *v, const Onnx__ValueInfoProto *vi, const char *what,
                           gboolean strict, GError **error) {
  const Onnx__TypeProto *type = vi->type;
  if (type == NULL)
    return TRUE;
  if (type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    if (!strict)
      return TRUE;
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "%s is not a tensor (sequence, map, optional and sparse types are not supported)",
                what);
    return FALSE;
  }
  const Onnx__TypeProto__Tensor *tt = type->tensor_type;
  int code = tt->has_elem_type ? tt->elem_type : 0;
  if (code != 0 && !qh_dtype_is_supported(code)) {
    if (!strict)
      return TRUE;
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s has unsupported type %s", what,
                onnx_type_name(code));
    return FALSE;
  }
  QhShape shape = {.rank = -1};
  char **params = NULL;
  if (tt->shape != NULL) {
    if (tt->shape->n_dim > QH_MAX_RANK) {
      if (!strict)
        return TRUE;
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s has rank %zu; qhost supports at most %d",
                  what, tt->shape->n_dim, QH_MAX_RANK);
      return FALSE;
    }
    shape.rank = (int)tt->shape->n_dim;
    for (int i = 0; i < shape.rank; i++) {
      const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
      shape.dims[i] = -1;
      if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
        shape.dims[i] = d->dim_value;
      } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                 d->dim_param != NULL && *d->dim_param != '\0') {
        if (params == NULL)
          params = g_new0(char *, shape.rank + 1);
        params[i] = g_strdup(d->dim_param);
      }
    }
  }
  if (code != 0)
    v->dtype = (QhDType)code;
  value_set_dim_params(v, NULL);
  v->shape = shape;
  v->dim_params = params;
  return TRUE;
}

/* ---- nodes and attributes --------------------------------------------------------- */

/* A NUL-terminated copy; an empty field may have no data pointer at all. */
static char *bytes_to_str(const ProtobufCBinaryData *b) {
  return b->len > 0 ? g_strndup((const char *)b->data, b->len) : g_strdup("");
}

static int infer_attr_type(const Onnx__AttributeProto *a) {
  int found = 0, n = 0;
#define SEEN(cond, t) if (cond) { found = (t); n++; }
  SEEN(a->has_f, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
  SEEN(a->has_i, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
  SEEN(a->has_s, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
  SEEN(a->t, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)
  SEEN(a->g, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)
  SEEN(a->sparse_tensor, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR)
  SEEN(a->tp, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO)
  SEEN(a->n_floats, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
  SEEN(a->n_ints, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
  SEEN(a->n_strings, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS)
  SEEN(a->n_tensors, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS)
  SEEN(a->n_graphs, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS)
  SEEN(a->n_sparse_tensors, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS)
  SEEN(a->n_type_protos, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS)
#undef SEEN
  return n == 1 ? found : -1;
}

static gboolean load_attr(QhNode *node, const Onnx__AttributeProto *a, const char *base_dir,
                          GError **error) {
  char *who = qh_node_describe(node);
  gboolean ok = FALSE;
  const char *name = a->name;
  if (name == NULL || *name == '\0') {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s has an attribute without a name", who);
    goto out;
  }
  int type = a->has_type ? (int)a->type : 0;
  if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED && (type = infer_attr_type(a)) < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: attribute '%s' has no type and its value does not say which it is", who, name);
    goto out;
  }
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    qh_node_set_attr_float(node, name, a->f);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    qh_node_set_attr_int(node, name, a->i);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
    char *s = bytes_to_str(&a->s);
    qh_node_set_attr_string(node, name, s);
    g_free(s);
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    if (a->t == NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: tensor attribute '%s' has no tensor", who,
                  name);
      goto out;
    }
    char *what = g_strdup_printf("%s: attribute '%s'", who, name);
    QhTensor *t = tensor_from_proto(a->t, base_dir, what, error);
    g_free(what);
    if (t == NULL)
      goto out;
    qh_node_set_attr_tensor(node, name, t);
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    qh_node_set_attr_floats(node, name, (int64_t)a->n_floats, a->floats);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    qh_node_set_attr_ints(node, name, (int64_t)a->n_ints, a->ints);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
    char **v = g_new0(char *, a->n_strings + 1);
    for (size_t i = 0; i < a->n_strings; i++)
      v[i] = bytes_to_str(&a->strings[i]);
    qh_node_set_attr_strings(node, name, (int64_t)a->n_strings, (const char *const *)v);
    g_strfreev(v);
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "%s: attribute '%s' holds a subgraph; subgraph attributes are not supported", who,
                name);
    goto out;
  default:
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "%s: attribute '%s' is %s, which is not supported", who, name,
                type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS ? "a list of tensors"
                : type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR ||
                        type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS
                    ? "a sparse tensor"
                : type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO ||
                        type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS
                    ? "a type proto"
                    : "of an unknown attribute type");
    goto out;
  }
  ok = TRUE;
out:
  g_free(who);
  return ok;
}

/* Value ids for a node's names; "" is an omitted optional slot (-1). */
static int *value_ids(QhGraph *g, char **names, size_t n, GError **error) {
  int *ids = g_new(int, n + 1);
  for (size_t i = 0; i < n; i++) {
    ids[i] = -1;
    if (names[i] != NULL && *names[i] != '\0') {
      QhValue *v = qh_graph_ensure_value(g, names[i], error);
      if (v == NULL) {
        g_free(ids);
        return NULL;
      }
      ids[i] = v->id;
    }
  }
  return ids;
}

static gboolean load_node(QhGraph *g, const Onnx__NodeProto *np, size_t index,
                          const char *base_dir, GError **error) {
  const char *op = np->op_type;
  if (op == NULL || *op == '\0') {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "node %zu ('%s') has no op_type", index,
                str_or_empty(np->name));
    return FALSE;
  }
  char *name = (np->name && *np->name) ? g_strdup(np->name) : g_strdup_printf("%s_%zu", op, index);
  int *in = value_ids(g, np->input, np->n_input, error);
  int *out = in ? value_ids(g, np->output, np->n_output, error) : NULL;
  QhNode *node = out ? qh_graph_add_node(g, name, op, np->domain, (int)np->n_input, in,
                                         (int)np->n_output, out, error)
                     : NULL;
  g_free(in);
  g_free(out);
  g_free(name);
  if (node == NULL)
    return FALSE;
  for (size_t i = 0; i < np->n_attribute; i++)
    if (!load_attr(node, np->attribute[i], base_dir, error))
      return FALSE;
  return TRUE;
}

/* ---- the model -------------------------------------------------------------------- */

static gboolean check_opsets(QhGraph *g, const Onnx__ModelProto *m, GError **error) {
  int64_t opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    int64_t version = o->has_version ? o->version : 0;
    qh_graph_set_opset(g, str_or_empty(o->domain), version);
    if (is_default_domain(o->domain))
      opset = version;
  }
  if (opset < 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "the model imports no default-domain (ai.onnx) opset");
    return FALSE;
  }
  if (opset < QH_ONNX_MIN_OPSET) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "opset %" G_GINT64_FORMAT " is not supported; qhost reads opsets %d to %d", opset,
                QH_ONNX_MIN_OPSET, QH_ONNX_MAX_OPSET);
    return FALSE;
  }
  if (opset > QH_ONNX_NEWEST_KNOWN_OPSET) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "opset %" G_GINT64_FORMAT " is unknown to qhost; it reads opsets %d to %d, and up "
                "to %d for ops unchanged since %d",
                opset, QH_ONNX_MIN_OPSET, QH_ONNX_MAX_OPSET, QH_ONNX_NEWEST_KNOWN_OPSET,
                QH_ONNX_MAX_OPSET);
    return FALSE;
  }
  if (opset <= QH_ONNX_MAX_OPSET || m->graph == NULL)
    return TRUE;
  for (size_t i = 0; i < m->graph->n_node; i++) {
    const Onnx__NodeProto *np = m->graph->node[i];
    if (!is_default_domain(np->domain))
      continue;
    const char *op = str_or_empty(np->op_type);
    int change = qh_onnx_op_first_unimplemented_change(op, opset);
    if (change == 0)
      continue;
    char *name = (np->name && *np->name) ? g_strdup(np->name) : g_strdup_printf("%s_%zu", op, i);
    if (change > 0)
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                  "node '%s' (%s): %s changed in opset %d and the model imports opset %" G_GINT64_FORMAT
                  "; qhost implements %s as of opsets %d to %d",
                  name, op, op, change, opset, op, QH_ONNX_MIN_OPSET, change - 1);
    else
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                  "node '%s' (%s): the model imports opset %" G_GINT64_FORMAT
                  " and %s is not known to be unchanged since opset %d",
                  name, op, opset, op, QH_ONNX_MAX_OPSET);
    g_free(name);
    return FALSE;
  }
  return TRUE;
}

static gboolean load_graph(QhGraph *g, const Onnx__GraphProto *gp, const char *base_dir,
                           GError **error) {
  g->name = g_strdup(gp->name);
  if (gp->n_sparse_initializer > 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "sparse initializers are not supported");
    return FALSE;
  }
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *tp = gp->initializer[i];
    if (tp->name == NULL || *tp->name == '\0') {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "initializer %zu has no name", i);
      return FALSE;
    }
    char *what = g_strdup_printf("initializer '%s'", tp->name);
    QhTensor *t = tensor_from_proto(tp, base_dir, what, error);
    g_free(what);
    QhValue *v = t ? qh_graph_add_value(g, tp->name, error) : NULL;
    if (v == NULL) {
      qh_tensor_free(t);
      return FALSE;
    }
    qh_value_set_initializer(v, t);
  }
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const char *name = str_or_empty(vi->name);
    int id = qh_graph_find_value(g, name);
    if (id >= 0 && qh_graph_value(g, id)->initializer != NULL)
      continue; /* old exporters list initializers as inputs too */
    char *what = g_strdup_printf("graph input '%s'", name);
    QhValue *v = *name ? qh_graph_add_value(g, name, error) : NULL;
    if (*name == '\0')
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "graph input %zu has no name", i);
    gboolean ok = v != NULL && apply_type(v, vi, what, TRUE, error);
    g_free(what);
    if (!ok)
      return FALSE;
    v->is_input = TRUE;
    g_array_append_val(g->inputs, v->id);
  }
  for (size_t i = 0; i < gp->n_node; i++) {
    if (!load_node(g, gp->node[i], i, base_dir, error))
      return FALSE;
  }
  for (size_t i = 0; i < gp->n_output; i++) {
    const Onnx__ValueInfoProto *vi = gp->output[i];
    const char *name = str_or_empty(vi->name);
    int id = qh_graph_find_value(g, name);
    QhValue *v = id >= 0 ? qh_graph_value(g, id) : NULL;
    if (v == NULL || (v->producer < 0 && !v->is_input && v->initializer == NULL)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "graph output '%s' is not produced by any node, initializer or graph input", name);
      return FALSE;
    }
    if (v->is_output) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "graph output '%s' is listed twice", name);
      return FALSE;
    }
    char *what = g_strdup_printf("graph output '%s'", name);
    gboolean ok = v->initializer != NULL || apply_type(v, vi, what, TRUE, error);
    g_free(what);
    if (!ok)
      return FALSE;
    v->is_output = TRUE;
    g_array_append_val(g->outputs, v->id);
  }
  for (size_t i = 0; i < gp->n_value_info; i++) {
    const Onnx__ValueInfoProto *vi = gp->value_info[i];
    int id = qh_graph_find_value(g, str_or_empty(vi->name));
    QhValue *v = id >= 0 ? qh_graph_value(g, id) : NULL;
    if (v != NULL && v->producer >= 0 && !v->is_output)
      apply_type(v, vi, NULL, FALSE, NULL);
  }
  GArray *order = NULL;
  if (!qh_graph_topo_order(g, &order, error))
    return FALSE;
  g_array_unref(order);
  return TRUE;
}

static void size_error(GError **error, guint64 len, const char *path) {
  g_set_error(error, QH_ERROR, QH_ERROR_LIMIT,
              "%s%sthe model is %" G_GUINT64_FORMAT " bytes; ONNX files are limited to 2 GiB "
              "(larger weights belong in external data)",
              path ? path : "", path ? ": " : "", len);
}

static QhGraph *load_model(const guint8 *data, gsize len, const char *base_dir, GError **error) {
  if (len == 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "not a valid ONNX model (the file is empty)");
    return NULL;
  }
  if ((guint64)len > MAX_MODEL_BYTES) {
    size_error(error, (guint64)len, NULL);
    return NULL;
  }
  if (!qh_onnx_wire_check(data, len, &onnx__model_proto__descriptor, QH_ONNX_MAX_NESTING, error))
    return NULL;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
  if (m == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "not a valid ONNX model (protobuf parse failed on %zu bytes)", (size_t)len);
    return NULL;
  }
  QhGraph *g = qh_graph_new();
  gboolean ok = FALSE;
  if (m->graph == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "not a valid ONNX model (it has no graph)");
    goto out;
  }
  if (!check_opsets(g, m, error))
    goto out;
  g->ir_version = m->has_ir_version ? m->ir_version : 0;
  g->model_version = m->has_model_version ? m->model_version : 0;
  g->producer_name = g_strdup(m->producer_name);
  g->producer_version = g_strdup(m->producer_version);
  g->model_domain = g_strdup(m->domain);
  g->doc_string = g_strdup(m->doc_string);
  for (size_t i = 0; i < m->n_metadata_props; i++) {
    QhMetadataEntry e = {g_strdup(str_or_empty(m->metadata_props[i]->key)),
                         g_strdup(str_or_empty(m->metadata_props[i]->value))};
    g_array_append_val(g->metadata, e);
  }
  ok = load_graph(g, m->graph, base_dir, error);
out:
  onnx__model_proto__free_unpacked(m, NULL);
  if (!ok)
    g_clear_pointer(&g, qh_graph_free);
  return g;
}

QhGraph *qh_onnx_load_from_memory(const guint8 *data, gsize len, const char *name,
                                  const char *base_dir, GError **error) {
  QhGraph *g = load_model(data, len, base_dir, error);
  if (g == NULL)
    qh_error_prefix(error, name ? name : "<memory>");
  return g;
}

QhGraph *qh_onnx_load(const char *path, GError **error) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int saved = errno;
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot open: %s", path, g_strerror(saved));
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: not a regular file", path);
    close(fd);
    return NULL;
  }
  if (st.st_size == 0 || (guint64)st.st_size > MAX_MODEL_BYTES) {
    close(fd); /* refused by size alone: never map it */
    if (st.st_size == 0)
      g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: not a valid ONNX model (the file is empty)",
                  path);
    else
      size_error(error, (guint64)st.st_size, path);
    return NULL;
  }
  GError *local = NULL;
  GMappedFile *map = g_mapped_file_new_from_fd(fd, FALSE, &local);
  close(fd);
  if (map == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s: cannot map: %s", path, local->message);
    g_error_free(local);
    return NULL;
  }
  char *dir = g_path_get_dirname(path);
  QhGraph *g = qh_onnx_load_from_memory((const guint8 *)g_mapped_file_get_contents(map),
                                        g_mapped_file_get_length(map), path, dir, error);
  g_free(dir);
  g_mapped_file_unref(map);
  return g;
}
