/* What the three files behind qconfig.h share: one mapping entry (an item), the
 * parsed form of a --config file (a layer) that qconfig-json.c produces and qconfig.c
 * layers over a mapping, and the PyTorch-name alias table of qconfig-alias.c. */
#ifndef QH_QUANT_QCONFIG_PRIVATE_H
#define QH_QUANT_QCONFIG_PRIVATE_H

#include "hostapi/annotation.h"
#include "quant/qconfig.h"

G_BEGIN_DECLS

/* The observer name of PyTorch's default_reuse_input_qconfig (a SHARED spec without
 * target); not a host observer: nothing is observed. */
#define QH_QCONFIG_REUSE_INPUT "ReuseInputObserver"

/* Whether an entry says something about one part (activation or weight). */
typedef enum {
  QH_QCONFIG_PART_ABSENT = 0, /* left out: taken from the entries beneath */
  QH_QCONFIG_PART_NULL,       /* "weight": null: no weight part */
  QH_QCONFIG_PART_GIVEN,
} QhQConfigPart;

/* One entry of a mapping: the global qconfig, or one object_type / node_name key. */
typedef struct {
  int32_t match;     /* QH_QCONFIG_MATCH_* */
  char *key;         /* NULL for the global entry */
  gboolean is_glob;  /* node_name key with '*' or '?' */
  gboolean is_alias; /* object_type key that is a PyTorch name, not an op type */
  int32_t source;    /* QH_QCONFIG_BACKEND_DEFAULT or QH_QCONFIG_USER */
  gboolean is_none;  /* mapped to null */
  QhQConfigPart act_part, weight_part;
  QhObserverConfig *act;    /* owned; set when act_part is GIVEN */
  QhObserverConfig *weight; /* owned; set when weight_part is GIVEN */
  gboolean uses_global; /* a backend entry sharing the global entry's spec objects */
  char *origin;         /* "global", "object_type 'Conv'", "node_name '/l4/x*'" */
} QhQConfigItem;

QhQConfigItem *qh_qconfig_item_new(int32_t match, const char *key, int32_t source);
QhQConfigItem *qh_qconfig_item_copy(const QhQConfigItem *item);
void qh_qconfig_item_free(QhQConfigItem *item);
/* Fill the parts item leaves out from below (an entry it replaces). */
void qh_qconfig_item_inherit(QhQConfigItem *item, const QhQConfigItem *below);

/* A --config file, checked and parsed; entries in file order. */
typedef struct {
  gboolean base_none;      /* "base": "none" */
  QhQConfigItem *global;   /* NULL when the file has no "global" */
  GPtrArray *object_types; /* QhQConfigItem* */
  GPtrArray *node_names;   /* QhQConfigItem* */
} QhQConfigLayer;

/* Read and check path (strict JSON, known keys and types, observer arguments checked
 * for host observers; known_observers, NULL-terminated or NULL, are a plugin's and
 * take any arguments). With data non-NULL, data is the JSON text and path only names
 * it in errors. */
QhQConfigLayer *qh_qconfig_layer_load(const char *path, const char *data,
                                      const char *const *known_observers, GError **error);
void qh_qconfig_layer_free(QhQConfigLayer *layer);

/* Check a config built from a file or a backend the same way: dtype, qscheme and range
 * named by field, then qh_observer_config_check for host observers. Messages start
 * with what ("global.activation"). */
gboolean qh_qconfig_check_observer(const QhObserverConfig *cfg, const char *const *known_observers,
                                   const char *what, GError **error);

/* ---- qconfig-alias.c: PyTorch names for object_type keys ---- */

/* TRUE when name is a PyTorch name of the alias table ("Linear", "Conv2d", "cat"). */
gboolean qh_qconfig_alias_is_known(const char *name);
/* TRUE when the PyTorch name `name` describes node (looking at its inputs in graph:
 * "Linear" is any Gemm and a MatMul with a constant 2-D weight and the Add of its
 * bias; "Conv2d" a Conv with a 4-D weight). */
gboolean qh_qconfig_alias_matches(const char *name, const QhGraph *graph, const QhNode *node);
/* TRUE when input `slot` of node is a constant with one element (a Python scalar in
 * PyTorch: not a tensor argument of add, mul, clamp, ...). */
gboolean qh_qconfig_input_is_scalar(const QhGraph *graph, const QhNode *node, int slot);

G_END_DECLS

#endif
