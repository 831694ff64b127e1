/* QConfig mappings: the backend's default mapping turned into host observer configs,
 * layered with --config files, and resolved per node. Resolution builds the chain of
 * entries that apply to a node, strongest first (node_name exact, node_name globs in
 * order, object_type entries, global); the first entry decides, and parts it leaves
 * out come from the next entries down the chain. Composed qconfigs are cached per
 * chain so that the pointers handed out stay valid as long as the mapping's entries
 * do. The view hook at the end answers a plugin's qconfig_for_node. */
#include "quant/qconfig-private.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec/op.h"
#include "hostapi/annotation.h"

#define MAX_DEFAULT_ENTRIES 4096
#define MAX_KEY_BYTES 4096
#define MAX_OBSERVER_ARGS 64
#define MAX_OBSERVER_NAME 256

struct QhQConfigMapping {
  QhQConfigItem *global;   /* NULL: no global entry */
  GPtrArray *object_types; /* QhQConfigItem*, strongest first */
  GPtrArray *node_names;   /* QhQConfigItem*, strongest first */
  char **known_observers;  /* plugin observer names (NULL-terminated) */
  GMutex lock;             /* guards resolved */
  GHashTable *resolved;    /* chain key -> QhQConfig* */
  GHashTable *spec_args;   /* QhObserverConfig* -> QhOption[] handed to plugins */
};

/* ---- Items ---- */

static char *describe(int32_t match, const char *key) {
  if (match == QH_QCONFIG_MATCH_GLOBAL)
    return g_strdup("global");
  return g_strdup_printf("%s '%s'", match == QH_QCONFIG_MATCH_OBJECT_TYPE ? "object_type" : "node_name",
                         key);
}

QhQConfigItem *qh_qconfig_item_new(int32_t match, const char *key, int32_t source) {
  QhQConfigItem *item = g_new0(QhQConfigItem, 1);
  item->match = match;
  item->key = g_strdup(key);
  item->is_glob = match == QH_QCONFIG_MATCH_NODE_NAME && key != NULL && strpbrk(key, "*?") != NULL;
  item->source = source;
  item->origin = describe(match, key);
  return item;
}

QhQConfigItem *qh_qconfig_item_copy(const QhQConfigItem *item) {
  QhQConfigItem *c = g_new0(QhQConfigItem, 1);
  *c = *item;
  c->key = g_strdup(item->key);
  c->origin = g_strdup(item->origin);
  c->act = item->act ? qh_observer_config_copy(item->act) : NULL;
  c->weight = item->weight ? qh_observer_config_copy(item->weight) : NULL;
  return c;
}

void qh_qconfig_item_free(QhQConfigItem *item) {
  if (item == NULL)
    return;
  g_free(item->key);
  g_free(item->origin);
  if (item->act)
    qh_observer_config_free(item->act);
  if (item->weight)
    qh_observer_config_free(item->weight);
  g_free(item);
}

void qh_qconfig_item_inherit(QhQConfigItem *item, const QhQConfigItem *below) {
  if (item->is_none || below == NULL || below->is_none)
    return;
  if (item->act_part == QH_QCONFIG_PART_ABSENT && below->act_part != QH_QCONFIG_PART_ABSENT) {
    item->act_part = below->act_part;
    item->act = below->act ? qh_observer_config_copy(below->act) : NULL;
  }
  if (item->weight_part == QH_QCONFIG_PART_ABSENT && below->weight_part != QH_QCONFIG_PART_ABSENT) {
    item->weight_part = below->weight_part;
    item->weight = below->weight ? qh_observer_config_copy(below->weight) : NULL;
  }
}

/* ---- Mappings ---- */

static void resolved_free(gpointer p) {
  QhQConfig *qc = p;
  g_free(qc->origin);
  g_free(qc);
}

static QhQConfigMapping *mapping_alloc(const char *const *known_observers) {
  QhQConfigMapping *m = g_new0(QhQConfigMapping, 1);
  m->object_types = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qconfig_item_free);
  m->node_names = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qconfig_item_free);
  m->known_observers = g_strdupv((char **)known_observers);
  if (m->known_observers == NULL)
    m->known_observers = g_new0(char *, 1);
  g_mutex_init(&m->lock);
  m->resolved = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, resolved_free);
  m->spec_args = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
  return m;
}

void qh_qconfig_mapping_free(QhQConfigMapping *mapping) {
  if (mapping == NULL)
    return;
  qh_qconfig_item_free(mapping->global);
  g_ptr_array_unref(mapping->object_types);
  g_ptr_array_unref(mapping->node_names);
  g_strfreev(mapping->known_observers);
  g_hash_table_unref(mapping->resolved);
  g_mutex_clear(&mapping->lock);
  g_hash_table_unref(mapping->spec_args);
  g_free(mapping);
}

static gboolean valid_string(const char *s, size_t max) {
  if (s == NULL)
    return FALSE;
  size_t len = strnlen(s, max + 1);
  return len > 0 && len <= max && g_utf8_validate(s, (gssize)len, NULL);
}

/* PyTorch's default_weight_observer: what a NULL weight in a backend entry means. */
static QhObserverConfig *default_weight_observer(void) {
  QhObserverConfig *cfg = qh_observer_config_new("MinMaxObserver");
  cfg->dtype = QH_DTYPE_INT8;
  cfg->qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC;
  return cfg;
}

static gboolean spec_fail(GError **error, const char *what, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
static gboolean spec_fail(GError **error, const char *what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s.%s", what, msg);
  g_free(msg);
  return FALSE;
}

static gboolean spec_args(const QhQuantSpec *s, QhObserverConfig *cfg, const char *what,
                          GError **error) {
  if (s->n_observer_args > MAX_OBSERVER_ARGS)
    return spec_fail(error, what, "n_observer_args: %zu is above %d", s->n_observer_args,
                     MAX_OBSERVER_ARGS);
  if (s->n_observer_args > 0 && s->observer_args == NULL)
    return spec_fail(error, what, "observer_args: NULL with n_observer_args %zu",
                     s->n_observer_args);
  for (size_t i = 0; i < s->n_observer_args; i++) {
    const QhOption *o = &s->observer_args[i];
    if (!valid_string(o->key, MAX_OBSERVER_NAME) || o->value == NULL ||
        !g_utf8_validate(o->value, -1, NULL))
      return spec_fail(error, what,
                       "observer_args[%zu]: needs a non-empty UTF-8 key and a UTF-8 value", i);
    if (qh_observer_config_arg(cfg, o->key) != NULL)
      return spec_fail(error, what, "observer_args[%zu]: '%s' is given twice", i, o->key);
    qh_observer_config_add_arg(cfg, o->key, o->value);
  }
  return TRUE;
}

/* ---- Checks shared with --config files ---- */

static gboolean is_known_plugin(const char *const *known, const char *name) {
  for (size_t i = 0; known != NULL && known[i] != NULL; i++)
    if (strcmp(known[i], name) == 0)
      return TRUE;
  return FALSE;
}

gboolean qh_qconfig_check_observer(const QhObserverConfig *cfg, const char *const *known_observers,
                                   const char *what, GError **error) {
  gboolean reuse = strcmp(cfg->name, QH_QCONFIG_REUSE_INPUT) == 0;
  gboolean host = qh_observer_is_host(cfg->name);
  if (!host && !reuse && !is_known_plugin(known_observers, cfg->name)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s.observer: unknown observer '%s' (neither a host observer nor one a plugin "
                "registers)", what, cfg->name);
    return FALSE;
  }
  const char *dtype_name = NULL;
  int64_t lo = 0, hi = 0;
  gboolean quantized = qh_quant_dtype_range(cfg->dtype, &lo, &hi, &dtype_name);
  if (cfg->dtype == QH_DTYPE_FLOAT ? strcmp(cfg->name, "PlaceholderObserver") != 0
                                   : !quantized) {
    if (cfg->dtype == QH_DTYPE_FLOAT)
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s.dtype: %s cannot produce float32 (only PlaceholderObserver keeps float)",
                  what, cfg->name);
    else
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s.dtype: %d is not quint8 (%d), qint8 (%d), quint16 (%d), qint16 (%d), "
                  "quint4 (%d), qint4 (%d) or qint32 (%d)", what, cfg->dtype, QH_DTYPE_UINT8,
                  QH_DTYPE_INT8, QH_DTYPE_UINT16, QH_DTYPE_INT16, QH_DTYPE_UINT4, QH_DTYPE_INT4,
                  QH_DTYPE_INT32);
    return FALSE;
  }
  if (cfg->qscheme < QH_QSCHEME_PER_TENSOR_AFFINE ||
      cfg->qscheme > QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s.qscheme: %d is not a qscheme", what,
                cfg->qscheme);
    return FALSE;
  }
  if (cfg->has_range && quantized) {
    const char *bad = cfg->quant_min < lo || cfg->quant_min > hi   ? "quant_min"
                      : cfg->quant_max < lo || cfg->quant_max > hi ? "quant_max"
                                                                   : NULL;
    if (bad != NULL) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s.%s: %d is outside %s [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]", what, bad,
                  strcmp(bad, "quant_min") == 0 ? cfg->quant_min : cfg->quant_max, dtype_name, lo,
                  hi);
      return FALSE;
    }
    if (cfg->quant_min > cfg->quant_max) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s.quant_min: %d is above quant_max %d",
                  what, cfg->quant_min, cfg->quant_max);
      return FALSE;
    }
  }
  if (cfg->has_eps && !(cfg->eps > 0.0f && isfinite(cfg->eps))) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s.eps: %g must be positive and finite", what,
                (double)cfg->eps);
    return FALSE;
  }
  if (host && !qh_observer_config_check(cfg, error)) {
    qh_error_prefix(error, what);
    return FALSE;
  }
  return TRUE;
}

/* A backend's QhQuantSpec (plugin memory, untrusted) as an observer config. */
static QhObserverConfig *spec_to_config(const QhQuantSpec *spec, const char *const *known,
                                        const char *what, GError **error) {
  QhQuantSpec s;
  if (QH_ABI_VERSION_MAJOR(spec->abi_version) != QH_ABI_MAJOR ||
      spec->struct_size < QH_QUANT_SPEC_SIZE_1_0 || spec->struct_size > sizeof(QhQuantSpec)) {
    spec_fail(error, what, "abi_version 0x%x / struct_size %u: not an ABI %d QhQuantSpec",
              spec->abi_version, spec->struct_size, QH_ABI_MAJOR);
    return NULL;
  }
  memset(&s, 0, sizeof s);
  memcpy(&s, spec, spec->struct_size);
  QhObserverConfig *cfg = NULL;
  const uint32_t range_flags = QH_SPEC_HAS_RANGE;
  switch (s.kind) {
  case QH_SPEC_QUANTIZE:
    if (s.flags & QH_SPEC_IS_DYNAMIC) {
      g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                  "%s.flags: dynamic quantization is not supported", what);
      return NULL;
    }
    if (s.flags & ~(QH_SPEC_HAS_RANGE | QH_SPEC_REDUCE_RANGE | QH_SPEC_HAS_EPS)) {
      spec_fail(error, what, "flags: 0x%x has unknown bits", s.flags);
      return NULL;
    }
    if (s.observer != NULL && !valid_string(s.observer, MAX_OBSERVER_NAME)) {
      spec_fail(error, what, "observer: not a UTF-8 name of at most %d bytes", MAX_OBSERVER_NAME);
      return NULL;
    }
    cfg = qh_observer_config_new(s.observer ? s.observer : qh_quant_default_observer(s.qscheme));
    cfg->reduce_range = (s.flags & QH_SPEC_REDUCE_RANGE) != 0;
    cfg->has_eps = (s.flags & QH_SPEC_HAS_EPS) != 0;
    if (cfg->has_eps)
      cfg->eps = s.eps;
    cfg->qscheme = s.qscheme;
    if (qh_quant_qscheme_is_per_channel(s.qscheme))
      cfg->ch_axis = s.ch_axis;
    if (!spec_args(&s, cfg, what, error)) {
      qh_observer_config_free(cfg);
      return NULL;
    }
    break;
  case QH_SPEC_FIXED:
    if (s.flags & ~range_flags) {
      spec_fail(error, what, "flags: 0x%x: a fixed-qparams spec takes only QH_SPEC_HAS_RANGE",
                s.flags);
      return NULL;
    }
    if (!(s.scale > 0.0f && isfinite(s.scale))) {
      spec_fail(error, what, "scale: %g must be positive and finite", (double)s.scale);
      return NULL;
    }
    cfg = qh_observer_config_new("FixedQParamsObserver");
    cfg->qscheme = QH_QSCHEME_PER_TENSOR_AFFINE;
    char buf[32];
    g_snprintf(buf, sizeof buf, "%.9g", (double)s.scale); /* 9 digits: a float32 exactly */
    qh_observer_config_add_arg(cfg, "scale", buf);
    g_snprintf(buf, sizeof buf, "%d", s.zero_point);
    qh_observer_config_add_arg(cfg, "zero_point", buf);
    break;
  case QH_SPEC_SHARED:
    if (s.shared_with.node != QH_INVALID_ID) {
      spec_fail(error, what, "shared_with.node: a qconfig entry cannot name an edge "
                             "(QH_INVALID_ID means reuse the input's qparams)");
      return NULL;
    }
    cfg = qh_observer_config_new(QH_QCONFIG_REUSE_INPUT);
    cfg->qscheme = QH_QSCHEME_PER_TENSOR_AFFINE;
    if (s.dtype == QH_DTYPE_UNDEFINED)
      s.dtype = QH_DTYPE_UINT8;
    break;
  default:
    spec_fail(error, what, "kind: %d cannot describe an observer (QUANTIZE, FIXED or SHARED)",
              s.kind);
    return NULL;
  }
  cfg->dtype = s.dtype;
  if (s.kind != QH_SPEC_SHARED && (s.flags & QH_SPEC_HAS_RANGE)) {
    cfg->has_range = TRUE;
    cfg->quant_min = s.quant_min;
    cfg->quant_max = s.quant_max;
  }
  if (!qh_qconfig_check_observer(cfg, known, what, error)) {
    qh_observer_config_free(cfg);
    return NULL;
  }
  return cfg;
}

static QhQConfigItem *entry_to_item(const QhQConfigEntry *e, const char *const *known,
                                    const char *what, GError **error) {
  QhQConfigItem *item = qh_qconfig_item_new(e->match, e->key, QH_QCONFIG_BACKEND_DEFAULT);
  if (e->flags & QH_QCONFIG_ENTRY_NONE) {
    item->is_none = TRUE;
    return item;
  }
  char *sub = NULL;
  if (e->activation == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s.activation: NULL (only a QH_QCONFIG_ENTRY_NONE entry has no activation)", what);
    goto bad;
  }
  sub = g_strdup_printf("%s.activation", what);
  item->act = spec_to_config(e->activation, known, sub, error);
  g_free(sub);
  if (item->act == NULL)
    goto bad;
  item->act_part = QH_QCONFIG_PART_GIVEN;
  sub = g_strdup_printf("%s.weight", what);
  item->weight = e->weight ? spec_to_config(e->weight, known, sub, error) : default_weight_observer();
  g_free(sub);
  if (item->weight == NULL)
    goto bad;
  item->weight_part = QH_QCONFIG_PART_GIVEN;
  return item;
bad:
  qh_qconfig_item_free(item);
  return NULL;
}

/* Check the header, kind, flags and key of entry i; *out_what names it for messages. */
static gboolean check_entry(const QhBackendConfig *bc, size_t i, const char *bname,
                            char **out_what, GError **error) {
  const QhQConfigEntry *e = bc->default_qconfig[i];
  *out_what = NULL;
  if (e == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "backend '%s': default_qconfig[%zu] is NULL",
                bname, i);
    return FALSE;
  }
  if (QH_ABI_VERSION_MAJOR(e->abi_version) != QH_ABI_MAJOR ||
      e->struct_size < sizeof(QhQConfigEntry)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "backend '%s': default_qconfig[%zu]: abi_version 0x%x / struct_size %u: not an "
                "ABI %d QhQConfigEntry", bname, i, e->abi_version, e->struct_size, QH_ABI_MAJOR);
    return FALSE;
  }
  const char *problem = NULL;
  if (e->match < QH_QCONFIG_MATCH_GLOBAL || e->match > QH_QCONFIG_MATCH_NODE_NAME)
    problem = "match is not a QH_QCONFIG_MATCH_* value";
  else if (e->flags & ~QH_QCONFIG_ENTRY_NONE)
    problem = "flags has unknown bits";
  else if (e->match == QH_QCONFIG_MATCH_GLOBAL && e->key != NULL)
    problem = "key must be NULL for the global entry";
  else if (e->match != QH_QCONFIG_MATCH_GLOBAL && !valid_string(e->key, MAX_KEY_BYTES))
    problem = "key is not a non-empty UTF-8 string";
  if (problem != NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "backend '%s': default_qconfig[%zu]: %s",
                bname, i, problem);
    return FALSE;
  }
  char *desc = describe(e->match, e->key);
  *out_what = g_strdup_printf("backend '%s': default_qconfig[%zu] (%s)", bname, i, desc);
  g_free(desc);
  return TRUE;
}

QhQConfigMapping *qh_qconfig_mapping_new(const QhBackendConfig *bc,
                                         const char *const *known_observers, GError **error) {
  QhQConfigMapping *m = mapping_alloc(known_observers);
  if (bc == NULL || bc->n_default_qconfig == 0)
    return m;
  const char *bname = valid_string(bc->name, 256) ? bc->name : "?";
  if (bc->default_qconfig == NULL || bc->n_default_qconfig > MAX_DEFAULT_ENTRIES) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "backend '%s': default_qconfig is NULL or has more than %d entries (%zu)", bname,
                MAX_DEFAULT_ENTRIES, bc->n_default_qconfig);
    goto bad;
  }
  const QhQConfigEntry *global = NULL;
  GPtrArray *aliases = g_ptr_array_new();
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  gboolean ok = TRUE;
  for (size_t i = 0; ok && i < bc->n_default_qconfig; i++) {
    char *what = NULL;
    ok = check_entry(bc, i, bname, &what, error);
    const QhQConfigEntry *e = ok ? bc->default_qconfig[i] : NULL;
    if (ok) {
      char *dup_key = g_strdup_printf("%d:%s", e->match, e->key ? e->key : "");
      if (g_hash_table_contains(seen, dup_key)) {
        g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: a second entry for the same key",
                    what);
        g_free(dup_key);
        ok = FALSE;
      } else {
        g_hash_table_add(seen, dup_key);
      }
    }
    QhQConfigItem *item = ok ? entry_to_item(e, (const char *const *)m->known_observers, what,
                                             error)
                             : NULL;
    ok = item != NULL;
    g_free(what);
    if (!ok)
      break;
    if (e->match == QH_QCONFIG_MATCH_GLOBAL) {
      m->global = item, global = e;
    } else if (e->match == QH_QCONFIG_MATCH_NODE_NAME) {
      g_ptr_array_add(m->node_names, item);
    } else {
      item->is_alias = qh_op_find("", e->key) == NULL && qh_qconfig_alias_is_known(e->key);
      g_ptr_array_add(item->is_alias ? aliases : m->object_types, item);
    }
  }
  g_hash_table_unref(seen);
  for (guint i = aliases->len; i > 0; i--) /* aliases are the more specific keys */
    g_ptr_array_insert(m->object_types, 0, aliases->pdata[i - 1]);
  g_ptr_array_unref(aliases);
  if (!ok)
    goto bad;
  /* PyTorch's default mapping points Conv, Linear, ReLU, ... at the global QConfig
   * object itself; the same spec pointers are how a backend says so. */
  if (global != NULL && !(global->flags & QH_QCONFIG_ENTRY_NONE)) {
    GPtrArray *lists[] = {m->object_types, m->node_names};
    for (size_t l = 0; l < G_N_ELEMENTS(lists); l++)
      for (guint j = 0; j < lists[l]->len; j++) {
        QhQConfigItem *item = lists[l]->pdata[j];
        for (size_t i = 0; i < bc->n_default_qconfig; i++) {
          const QhQConfigEntry *e = bc->default_qconfig[i];
          if (e->match == item->match && g_strcmp0(e->key, item->key) == 0 &&
              !(e->flags & QH_QCONFIG_ENTRY_NONE) && e->activation == global->activation &&
              e->weight == global->weight)
            item->uses_global = TRUE;
        }
      }
  }
  return m;
bad:
  qh_qconfig_mapping_free(m);
  return NULL;
}

/* ---- Layering a file ---- */

static void remove_key(GPtrArray *list, const char *key, QhQConfigItem **out_old) {
  for (guint i = 0; i < list->len; i++) {
    QhQConfigItem *it = list->pdata[i];
    if (strcmp(it->key, key) == 0) {
      *out_old = g_ptr_array_steal_index(list, i);
      return;
    }
  }
}

static GPtrArray *copy_list(GPtrArray *list) {
  GPtrArray *c = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qconfig_item_free);
  for (guint i = 0; i < list->len; i++)
    g_ptr_array_add(c, qh_qconfig_item_copy(list->pdata[i]));
  return c;
}

/* The file's entries go in front (they win); an entry replacing one of the same key
 * keeps the parts it leaves out from it. object_type aliases go before op types. */
static GPtrArray *layer_list(GPtrArray *old, GPtrArray *file, gboolean aliases_first) {
  GPtrArray *front = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qconfig_item_free);
  for (int pass = aliases_first ? 0 : 1; pass < 2; pass++)
    for (guint i = 0; i < file->len; i++) {
      const QhQConfigItem *f = file->pdata[i];
      if (aliases_first && f->is_alias != (pass == 0))
        continue;
      QhQConfigItem *item = qh_qconfig_item_copy(f), *replaced = NULL;
      remove_key(old, item->key, &replaced);
      qh_qconfig_item_inherit(item, replaced);
      qh_qconfig_item_free(replaced);
      g_ptr_array_add(front, item);
    }
  for (guint i = 0; i < old->len; i++)
    g_ptr_array_add(front, old->pdata[i]);
  g_ptr_array_set_free_func(old, NULL);
  g_ptr_array_unref(old);
  return front;
}

static void drop_uses_global(GPtrArray *list) {
  for (guint i = list->len; i > 0; i--)
    if (((QhQConfigItem *)list->pdata[i - 1])->uses_global)
      g_ptr_array_remove_index(list, i - 1);
}

gboolean qh_qconfig_mapping_load_file(QhQConfigMapping *mapping, const char *path, GError **error) {
  return qh_qconfig_mapping_load_data(mapping, path, NULL, error);
}

gboolean qh_qconfig_mapping_load_data(QhQConfigMapping *mapping, const char *path, const char *data,
                                      GError **error) {
  g_return_val_if_fail(mapping != NULL && path != NULL, FALSE);
  QhQConfigLayer *layer =
      qh_qconfig_layer_load(path, data, (const char *const *)mapping->known_observers, error);
  if (layer == NULL)
    return FALSE;
  QhQConfigItem *global = NULL;
  GPtrArray *ot, *nn;
  if (layer->base_none) {
    ot = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qconfig_item_free);
    nn = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qconfig_item_free);
  } else {
    global = mapping->global ? qh_qconfig_item_copy(mapping->global) : NULL;
    ot = copy_list(mapping->object_types);
    nn = copy_list(mapping->node_names);
  }
  if (layer->global != NULL) {
    QhQConfigItem *g = qh_qconfig_item_copy(layer->global);
    qh_qconfig_item_inherit(g, global);
    if (!g->is_none && g->act_part != QH_QCONFIG_PART_GIVEN) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s: global: gives no \"activation\" and there is no global qconfig beneath "
                  "it to take one from", path);
      qh_qconfig_item_free(g);
      qh_qconfig_item_free(global);
      g_ptr_array_unref(ot);
      g_ptr_array_unref(nn);
      qh_qconfig_layer_free(layer);
      return FALSE;
    }
    qh_qconfig_item_free(global);
    global = g;
    drop_uses_global(ot);
    drop_uses_global(nn);
  }
  ot = layer_list(ot, layer->object_types, TRUE);
  nn = layer_list(nn, layer->node_names, FALSE);
  qh_qconfig_layer_free(layer);

  g_mutex_lock(&mapping->lock);
  qh_qconfig_item_free(mapping->global);
  g_ptr_array_unref(mapping->object_types);
  g_ptr_array_unref(mapping->node_names);
  mapping->global = global;
  mapping->object_types = ot;
  mapping->node_names = nn;
  g_hash_table_remove_all(mapping->resolved);
  g_hash_table_remove_all(mapping->spec_args);
  g_mutex_unlock(&mapping->lock);
  return TRUE;
}

/* ---- Resolution ---- */

static gboolean object_type_matches(const QhQConfigItem *it, const QhGraph *graph,
                                    const QhNode *node) {
  if (it->is_alias)
    return qh_qconfig_alias_matches(it->key, graph, node);
  return node->op_type != NULL && strcmp(it->key, node->op_type) == 0;
}

static GPtrArray *chain_for(const QhQConfigMapping *m, const QhGraph *graph, const QhNode *node) {
  GPtrArray *chain = g_ptr_array_new();
  const QhQConfigItem *exact = NULL;
  if (node->name != NULL) {
    for (guint i = 0; i < m->node_names->len && exact == NULL; i++) {
      const QhQConfigItem *it = m->node_names->pdata[i];
      if (strcmp(it->key, node->name) == 0)
        exact = it;
    }
    if (exact != NULL)
      g_ptr_array_add(chain, (gpointer)exact);
    for (guint i = 0; i < m->node_names->len; i++) {
      const QhQConfigItem *it = m->node_names->pdata[i];
      if (it != exact && it->is_glob && g_pattern_match_simple(it->key, node->name))
        g_ptr_array_add(chain, (gpointer)it);
    }
  }
  for (guint i = 0; i < m->object_types->len; i++) {
    const QhQConfigItem *it = m->object_types->pdata[i];
    if (object_type_matches(it, graph, node))
      g_ptr_array_add(chain, (gpointer)it);
  }
  if (m->global != NULL)
    g_ptr_array_add(chain, m->global);
  return chain;
}

/* The qconfig of a chain: the first entry decides; the parts it leaves out come from
 * the entries below that give them (a null entry below gives nothing). */
static QhQConfig *compose(GPtrArray *chain, guint *out_used) {
  const QhQConfigItem *first = chain->pdata[0], *act_from = NULL, *weight_from = NULL;
  QhQConfig *qc = g_new0(QhQConfig, 1);
  qc->source = first->source;
  *out_used = 1;
  if (first->is_none) {
    qc->is_none = TRUE;
    qc->origin = g_strdup(first->origin);
    return qc;
  }
  for (guint i = 0; i < chain->len && (act_from == NULL || weight_from == NULL); i++) {
    const QhQConfigItem *it = chain->pdata[i];
    *out_used = i + 1;
    if (it->is_none)
      continue;
    if (act_from == NULL && it->act_part == QH_QCONFIG_PART_GIVEN)
      qc->activation = it->act, act_from = it;
    if (weight_from == NULL && it->weight_part != QH_QCONFIG_PART_ABSENT)
      qc->weight = it->weight, weight_from = it;
  }
  GString *origin = g_string_new(first->origin);
  if (act_from == NULL) {
    qc->is_none = TRUE, qc->weight = NULL;
    g_string_append(origin, " (gives no activation and nothing beneath it does: left float)");
  } else {
    if (act_from != first)
      g_string_append_printf(origin, ", activation from %s", act_from->origin);
    if (weight_from != NULL && weight_from != first)
      g_string_append_printf(origin, ", weight from %s", weight_from->origin);
  }
  qc->origin = g_string_free(origin, FALSE);
  return qc;
}

const QhQConfig *qh_qconfig_resolve(const QhQConfigMapping *mapping, const QhGraph *graph,
                                    const QhNode *node) {
  if (mapping == NULL || node == NULL)
    return NULL;
  QhQConfigMapping *m = (QhQConfigMapping *)mapping; /* the cache only */
  g_mutex_lock(&m->lock);
  GPtrArray *chain = chain_for(m, graph, node);
  const QhQConfig *result = NULL;
  if (chain->len > 0) {
    guint used = 0;
    QhQConfig *qc = compose(chain, &used);
    GString *key = g_string_new(NULL);
    for (guint i = 0; i < used; i++)
      g_string_append_printf(key, "%p;", chain->pdata[i]);
    result = g_hash_table_lookup(m->resolved, key->str);
    if (result == NULL) {
      g_hash_table_insert(m->resolved, g_string_free(key, FALSE), qc);
      result = qc;
    } else {
      g_string_free(key, TRUE);
      resolved_free(qc);
    }
  }
  g_ptr_array_unref(chain);
  g_mutex_unlock(&m->lock);
  return result;
}

/* ---- For plugins ---- */

void qh_qconfig_to_spec(const QhObserverConfig *cfg, QhQuantSpec *out, QhOption **storage) {
  memset(out, 0, sizeof *out);
  out->abi_version = QH_ABI_VERSION;
  out->struct_size = sizeof *out;
  *storage = NULL;
  if (cfg == NULL)
    return;
  gboolean fixed = strcmp(cfg->name, "FixedQParamsObserver") == 0;
  gboolean reuse = strcmp(cfg->name, QH_QCONFIG_REUSE_INPUT) == 0;
  out->kind = fixed ? QH_SPEC_FIXED : reuse ? QH_SPEC_SHARED : QH_SPEC_QUANTIZE;
  out->dtype = cfg->dtype;
  out->qscheme = fixed || reuse ? QH_QSCHEME_PER_TENSOR_AFFINE : cfg->qscheme;
  gboolean per_channel = out->qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE ||
                         out->qscheme == QH_QSCHEME_PER_CHANNEL_SYMMETRIC ||
                         out->qscheme == QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS;
  out->ch_axis = per_channel ? cfg->ch_axis : -1;
  if (cfg->has_range) {
    out->flags |= QH_SPEC_HAS_RANGE;
    out->quant_min = cfg->quant_min;
    out->quant_max = cfg->quant_max;
  }
  if (cfg->reduce_range)
    out->flags |= QH_SPEC_REDUCE_RANGE;
  if (cfg->has_eps) {
    out->flags |= QH_SPEC_HAS_EPS;
    out->eps = cfg->eps;
  }
  out->observer = cfg->name;
  guint n = cfg->args != NULL ? cfg->args->len : 0;
  if (n > 0) {
    QhOption *opts = g_new0(QhOption, n);
    for (guint i = 0; i < n; i++) {
      const QhObserverArg *a = g_ptr_array_index(cfg->args, i);
      opts[i].key = a->key;
      opts[i].value = a->value;
    }
    out->observer_args = opts;
    out->n_observer_args = n;
    *storage = opts;
  }
  if (fixed) {
    const char *scale = qh_observer_config_arg(cfg, "scale");
    const char *zp = qh_observer_config_arg(cfg, "zero_point");
    out->scale = scale ? (float)g_ascii_strtod(scale, NULL) : 0.0f;
    out->zero_point = zp ? (int32_t)g_ascii_strtoll(zp, NULL, 10) : 0;
  }
  if (reuse)
    out->shared_with.node = QH_INVALID_ID;
}

gboolean qh_qconfig_view_hook(gpointer mapping, const QhGraph *graph, uint32_t node, int32_t role,
                              QhQuantSpec *out_spec, int32_t *out_source, GError **error) {
  QhQConfigMapping *m = mapping;
  if (m == NULL || graph == NULL || out_spec == NULL || out_source == NULL ||
      node >= (uint32_t)qh_graph_n_nodes(graph) || qh_graph_node(graph, (int)node)->is_removed ||
      (role != QH_ROLE_ACTIVATION && role != QH_ROLE_WEIGHT)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "qconfig hook: node %u / role %d is not a live node and a qconfig role", node, role);
    return FALSE;
  }
  *out_source = 0;
  const QhQConfig *qc = qh_qconfig_resolve(m, graph, qh_graph_node(graph, (int)node));
  if (qc == NULL)
    return TRUE;
  if (qc->is_none) {
    *out_source = QH_QCONFIG_EXCLUDED;
    return TRUE;
  }
  const QhObserverConfig *cfg = role == QH_ROLE_WEIGHT ? qc->weight : qc->activation;
  if (cfg == NULL)
    return TRUE;
  /* A plugin may ask several times within one callback and keep every answer until
   * it returns, so the argument arrays live as long as the configs they point into. */
  QhOption *args = NULL;
  qh_qconfig_to_spec(cfg, out_spec, &args);
  if (args != NULL) {
    g_mutex_lock(&m->lock);
    QhOption *kept = g_hash_table_lookup(m->spec_args, cfg);
    if (kept == NULL)
      g_hash_table_insert(m->spec_args, (gpointer)cfg, args);
    else
      g_free(args);
    out_spec->observer_args = kept != NULL ? kept : args;
    g_mutex_unlock(&m->lock);
  }
  *out_source = qc->source;
  return TRUE;
}
