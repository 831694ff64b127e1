/* The graph IR: values (tensors flowing between nodes, graph inputs, initializers)
 * and nodes (ONNX operators with attributes), both addressed by stable integer ids.
 *
 * Ids never change once given: removing a node marks it removed instead of
 * compacting, so annotations, observers and lowering plans keyed by id stay valid
 * across rewrites. Every node and value has an `annotation` slot reserved for the
 * quantization and lowering stages (the graph never reads or frees it).
 *
 * Ownership: the graph owns its nodes, values, attributes and initializer tensors;
 * pointers returned by accessors are borrowed and stay valid until the graph is
 * freed (adding nodes or values may move the arrays of ids but never the objects).
 * Strings passed in are copied. Threading: a graph is not synchronised; readers may
 * share it, mutation needs exclusive access. Errors: GError with QH_ERROR codes;
 * messages name the node ("node 'conv1' (Conv): ...") or the value. */
#ifndef QH_CORE_GRAPH_H
#define QH_CORE_GRAPH_H

#include <glib.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/tensor.h"

G_BEGIN_DECLS

typedef enum {
  QH_ATTR_FLOAT = 1,
  QH_ATTR_INT = 2,
  QH_ATTR_STRING = 3,
  QH_ATTR_TENSOR = 4,
  QH_ATTR_FLOATS = 6,
  QH_ATTR_INTS = 7,
  QH_ATTR_STRINGS = 8,
} QhAttrType; /* codes are ONNX's AttributeProto.AttributeType */

typedef struct {
  char *name;
  QhAttrType type;
  float f;          /* QH_ATTR_FLOAT */
  int64_t i;        /* QH_ATTR_INT */
  char *s;          /* QH_ATTR_STRING: NUL-terminated copy */
  QhTensor *t;      /* QH_ATTR_TENSOR: owned */
  int64_t n;        /* element count of floats/ints/strings */
  float *floats;    /* QH_ATTR_FLOATS */
  int64_t *ints;    /* QH_ATTR_INTS */
  char **strings;   /* QH_ATTR_STRINGS */
} QhAttr;

typedef struct {
  int id;
  char *name;
  QhDType dtype;       /* QH_DTYPE_UNDEFINED until known (loaded or inferred) */
  QhShape shape;       /* rank -1 until known; dims may be -1 for symbolic dims */
  char **dim_params;   /* NULL, or shape.rank names (NULL entries for numeric dims) */
  QhTensor *initializer; /* constant data, owned; NULL for computed values */
  int producer;        /* node id, or -1 for graph inputs and initializers */
  gboolean is_input;   /* a graph input the caller feeds */
  gboolean is_output;  /* a graph output */
  void *annotation;    /* reserved for quant/lowering; never touched by the graph */
} QhValue;

typedef struct {
  int id;
  char *name;          /* may be "" in ONNX; the loader names unnamed nodes "op_type_ID" */
  char *op_type;
  char *domain;        /* "" for the default ONNX domain */
  int n_inputs;
  int *inputs;         /* value ids; -1 for an omitted optional input */
  int n_outputs;
  int *outputs;        /* value ids; -1 for an omitted optional output */
  int n_attrs;
  QhAttr *attrs;
  gboolean is_removed;
  void *annotation;    /* reserved for quant/lowering */
} QhNode;

typedef struct {
  char *domain;
  int64_t version;
} QhOpsetImport;

typedef struct {
  char *key;
  char *value;
} QhMetadataEntry;

/* metadata_props written by qhost quantize: this prefix + an integer value's name ->
 * "qmin,qmax", for a quantized tensor whose range is narrower than its dtype's
 * (reduce_range, custom ranges), which ONNX's QuantizeLinear cannot express. */
#define QH_QUANT_RANGE_KEY_PREFIX "qhost.quant_range:"

typedef struct {
  char *name;
  char *doc_string;
  char *producer_name;
  char *producer_version;
  char *model_domain;
  int64_t ir_version;
  int64_t model_version;
  GPtrArray *nodes;      /* QhNode*, index == id */
  GPtrArray *values;     /* QhValue*, index == id */
  GHashTable *value_ids; /* name -> GINT_TO_POINTER(id + 1) */
  GArray *inputs;        /* int value ids of graph inputs (no initializers), in order */
  GArray *outputs;       /* int value ids of graph outputs, in order */
  GArray *opsets;        /* QhOpsetImport */
  GArray *metadata;      /* QhMetadataEntry (ModelProto.metadata_props) */
} QhGraph;

QhGraph *qh_graph_new(void);
void qh_graph_free(QhGraph *graph);

static inline int qh_graph_n_nodes(const QhGraph *g) { return (int)g->nodes->len; }
static inline int qh_graph_n_values(const QhGraph *g) { return (int)g->values->len; }
static inline QhNode *qh_graph_node(const QhGraph *g, int id) { return g_ptr_array_index(g->nodes, id); }
static inline QhValue *qh_graph_value(const QhGraph *g, int id) { return g_ptr_array_index(g->values, id); }

/* The value of metadata entry key, or NULL (borrowed). */
const char *qh_graph_metadata(const QhGraph *graph, const char *key);

/* Id of the value with this name, or -1. */
int qh_graph_find_value(const QhGraph *graph, const char *name);

/* Add a value; names are unique (QH_ERROR_INVALID on a duplicate). dtype and shape
 * start unknown. Returns the new value (borrowed). */
QhValue *qh_graph_add_value(QhGraph *graph, const char *name, GError **error);

/* Give a value a new name (unique: QH_ERROR_INVALID when taken). */
gboolean qh_graph_rename_value(QhGraph *graph, int value_id, const char *name, GError **error);

/* The value with this name, created when it does not exist yet. */
QhValue *qh_graph_ensure_value(QhGraph *graph, const char *name, GError **error);

/* Set a value's constant data (takes ownership of tensor) and its dtype/shape from it. */
void qh_value_set_initializer(QhValue *value, QhTensor *tensor);

/* Add a node reading and writing the given value ids (-1 for omitted optional
 * slots). Fails with QH_ERROR_INVALID when an output already has a producer or is an
 * initializer or graph input, or an id is out of range. Returns the node (borrowed). */
QhNode *qh_graph_add_node(QhGraph *graph, const char *name, const char *op_type,
                          const char *domain, int n_inputs, const int *inputs, int n_outputs,
                          const int *outputs, GError **error);

/* Mark a node removed: its outputs lose their producer. The id stays taken. */
void qh_graph_remove_node(QhGraph *graph, int node_id);

/* Attribute setters copy their arguments and replace an attribute of the same name. */
void qh_node_set_attr_int(QhNode *node, const char *name, int64_t v);
void qh_node_set_attr_float(QhNode *node, const char *name, float v);
void qh_node_set_attr_string(QhNode *node, const char *name, const char *v);
void qh_node_set_attr_ints(QhNode *node, const char *name, int64_t n, const int64_t *v);
void qh_node_set_attr_floats(QhNode *node, const char *name, int64_t n, const float *v);
void qh_node_set_attr_strings(QhNode *node, const char *name, int64_t n, const char *const *v);
/* Takes ownership of tensor. */
void qh_node_set_attr_tensor(QhNode *node, const char *name, QhTensor *tensor);

/* The attribute with this name, or NULL (borrowed). */
const QhAttr *qh_node_attr(const QhNode *node, const char *name);

/* Typed getters: return dflt when the attribute is absent. A present attribute of
 * the wrong type is an error (QH_ERROR_INVALID naming node and attribute); these
 * variants take an error so kernels can report it. */
gboolean qh_node_attr_get_int(const QhNode *node, const char *name, int64_t dflt,
                              int64_t *out, GError **error);
gboolean qh_node_attr_get_float(const QhNode *node, const char *name, float dflt, float *out,
                                GError **error);
/* *out is borrowed (or dflt). */
gboolean qh_node_attr_get_string(const QhNode *node, const char *name, const char *dflt,
                                 const char **out, GError **error);
/* *out_v is borrowed; when absent, *out_n = -1 and *out_v = NULL. */
gboolean qh_node_attr_get_ints(const QhNode *node, const char *name, int64_t *out_n,
                               const int64_t **out_v, GError **error);
gboolean qh_node_attr_get_floats(const QhNode *node, const char *name, int64_t *out_n,
                                 const float **out_v, GError **error);

/* Value ids of node input/output slot i, or -1 when the slot is absent or omitted. */
int qh_node_input(const QhNode *node, int i);
int qh_node_output(const QhNode *node, int i);

/* Opset version imported for domain ("" or "ai.onnx" for the default), or -1. */
int64_t qh_graph_opset(const QhGraph *graph, const char *domain);

/* Set (replace or add) the opset import of a domain. */
void qh_graph_set_opset(QhGraph *graph, const char *domain, int64_t version);

/* Live nodes in an order where every producer precedes its consumers (stable:
 * among ready nodes, the earlier id first). Fails with QH_ERROR_INVALID naming the
 * node when an input has no producer and is neither a graph input nor an
 * initializer, or when the graph has a cycle. *out_order is a new GArray of int
 * node ids the caller frees with g_array_unref. */
gboolean qh_graph_topo_order(const QhGraph *graph, GArray **out_order, GError **error);

/* "node 'NAME' (OP)" for messages; the caller g_free()s it. */
char *qh_node_describe(const QhNode *node);

/* Number of live nodes. */
int qh_graph_count_live_nodes(const QhGraph *graph);

G_END_DECLS

#endif
