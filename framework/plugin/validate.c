/* Everything a plugin's descriptor declares is checked here once, at load, before any
 * of it is used: versions and struct sizes, strings (present, UTF-8, bounded), the
 * required callbacks of each group, option declarations, observers, the declarative
 * BackendConfig tables and the lowering patterns. What passes is copied into a
 * QhPluginInfo, so nothing the host keeps points into the plugin's memory. The list
 * of supplied groups comes from which pointers are set, never from a claim. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plugin/validate-private.h"

/* Field paths ("backend_config.patterns[3].dtype_configs[0].weight") are built in fixed
 * buffers; a cut-off path only shortens an error message. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define MAX_OPTIONS 256
#define MAX_OBSERVERS 64
#define MAX_PATTERNS 4096
#define MAX_QCONFIG_ENTRIES 4096
#define MAX_DTYPE_CONFIGS 64
#define MAX_ROLES 64

typedef struct {
  const char *path;
  GError **error;
  gboolean failed;
} Ctx;

static gboolean fail(Ctx *c, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean fail(Ctx *c, const char *fmt, ...) {
  if (c->failed)
    return FALSE;
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(c->error, QH_ERROR, QH_ERROR_INVALID, "%s: %s", c->path, msg);
  g_free(msg);
  c->failed = TRUE;
  return FALSE;
}

gboolean qh_plugin_name_is_valid(const char *name) {
  if (name == NULL || !g_ascii_islower(name[0]))
    return FALSE;
  size_t n = strnlen(name, 33);
  if (n > 32)
    return FALSE;
  for (size_t i = 1; i < n; i++)
    if (!g_ascii_islower(name[i]) && !g_ascii_isdigit(name[i]) && name[i] != '_')
      return FALSE;
  return TRUE;
}

/* A string field: non-NULL, valid UTF-8, at most max bytes, no control characters. */
static gboolean check_text(Ctx *c, const char *field, const char *s, size_t min, size_t max) {
  if (s == NULL)
    return fail(c, "descriptor: %s is NULL", field);
  size_t n = strnlen(s, max + 1);
  if (n > max)
    return fail(c, "descriptor: %s is longer than %zu bytes", field, max);
  if (!g_utf8_validate(s, (gssize)n, NULL))
    return fail(c, "descriptor: %s is not valid UTF-8", field);
  if (n < min)
    return fail(c, "descriptor: %s is empty", field);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20)
      return fail(c, "descriptor: %s contains a control character", field);
  return TRUE;
}

/* Header of a versioned struct the plugin wrote: same major, minor not newer than the
 * host's, size between the 1.0 size and the host's size. In ABI 1.0 both sizes are
 * sizeof; the 1.0 sizes stay fixed when later minors grow a struct. */
static gboolean check_header(Ctx *c, const char *what, const void *p, size_t size_1_0,
                             size_t host_size) {
  if (p == NULL)
    return fail(c, "descriptor: %s is NULL", what);
  const uint32_t *hdr = p;
  uint32_t v = hdr[0], size = hdr[1];
  if (QH_ABI_VERSION_MAJOR(v) != QH_ABI_MAJOR || QH_ABI_VERSION_MINOR(v) > QH_ABI_MINOR)
    return fail(c, "descriptor: %s: abi_version %u.%u is not compatible with the host's %d.%d",
                what, QH_ABI_VERSION_MAJOR(v), QH_ABI_VERSION_MINOR(v), QH_ABI_MAJOR, QH_ABI_MINOR);
  if (size < size_1_0 || size > host_size)
    return fail(c, "descriptor: %s: corrupt struct_size %u (want %zu to %zu)", what, size,
                size_1_0, host_size);
  return TRUE;
}
#define CHECK_HEADER(c, what, p, type) check_header(c, what, p, sizeof(type), sizeof(type))

static gboolean need_fn(Ctx *c, const char *what, const void *fn, const char *name) {
  if (fn == NULL)
    return fail(c, "descriptor: %s: required callback '%s' is NULL", what, name);
  return TRUE;
}
#define NEED(c, what, grp, member) need_fn(c, what, (const void *)(size_t)(grp)->member, #member)

static gboolean dtype_known(int32_t dt) {
  switch (dt) {
  case QH_DTYPE_FLOAT: case QH_DTYPE_UINT8: case QH_DTYPE_INT8: case QH_DTYPE_UINT16:
  case QH_DTYPE_INT16: case QH_DTYPE_INT32: case QH_DTYPE_FLOAT16: case QH_DTYPE_UINT4:
  case QH_DTYPE_INT4:
    return TRUE;
  default:
    return FALSE;
  }
}

static gboolean dtype_range(int32_t dt, int64_t *lo, int64_t *hi) {
  switch (dt) {
  case QH_DTYPE_UINT8: *lo = 0; *hi = 255; return TRUE;
  case QH_DTYPE_INT8: *lo = -128; *hi = 127; return TRUE;
  case QH_DTYPE_UINT16: *lo = 0; *hi = 65535; return TRUE;
  case QH_DTYPE_INT16: *lo = -32768; *hi = 32767; return TRUE;
  case QH_DTYPE_UINT4: *lo = 0; *hi = 15; return TRUE;
  case QH_DTYPE_INT4: *lo = -8; *hi = 7; return TRUE;
  case QH_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return TRUE;
  default: return FALSE;
  }
}

/* ---- options ---- */

gboolean qh_plugin_option_value_ok(const QhPluginOptionInfo *opt, const char *value, char **reason) {
  char *end = NULL;
  switch (opt->type) {
  case QH_OPTION_BOOL: {
    static const char *const ok[] = {"true", "false", "1", "0", "yes", "no"};
    for (gsize i = 0; i < G_N_ELEMENTS(ok); i++)
      if (g_ascii_strcasecmp(value, ok[i]) == 0)
        return TRUE;
    *reason = g_strdup("want true or false");
    return FALSE;
  }
  case QH_OPTION_INT: {
    errno = 0;
    gint64 v = g_ascii_strtoll(value, &end, 10);
    if (*value == '\0' || *end != '\0' || errno == ERANGE) {
      *reason = g_strdup("want an integer");
      return FALSE;
    }
    if (opt->min <= opt->max && (v < opt->min || v > opt->max)) {
      *reason = g_strdup_printf("want an integer in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                                opt->min, opt->max);
      return FALSE;
    }
    return TRUE;
  }
  case QH_OPTION_FLOAT: {
    double v = g_ascii_strtod(value, &end);
    if (*value == '\0' || *end != '\0' || !isfinite(v)) {
      *reason = g_strdup("want a finite number");
      return FALSE;
    }
    return TRUE;
  }
  case QH_OPTION_STRING:
    if (!g_utf8_validate(value, -1, NULL)) {
      *reason = g_strdup("not valid UTF-8");
      return FALSE;
    }
    return TRUE;
  case QH_OPTION_ENUM: {
    char **choices = g_strsplit(opt->choices ? opt->choices : "", "|", -1);
    gboolean found = FALSE;
    for (char **p = choices; *p; p++)
      if (strcmp(*p, value) == 0)
        found = TRUE;
    g_strfreev(choices);
    if (!found)
      *reason = g_strdup_printf("want one of %s", opt->choices ? opt->choices : "(none)");
    return found;
  }
  default:
    *reason = g_strdup("unknown option type");
    return FALSE;
  }
}

static gboolean check_options(Ctx *c, const QhPluginDesc *d, QhPluginInfo *info) {
  if (!QH_HAS_FIELD(d, QhPluginDesc, n_options) || d->n_options == 0)
    return TRUE;
  if (d->n_options > MAX_OPTIONS)
    return fail(c, "descriptor: n_options %zu exceeds %d", d->n_options, MAX_OPTIONS);
  if (d->options == NULL)
    return fail(c, "descriptor: n_options is %zu but options is NULL", d->n_options);
  for (size_t i = 0; i < d->n_options; i++) {
    char what[64];
    snprintf(what, sizeof what, "options[%zu]", i);
    const QhOptionDecl *o = d->options[i];
    if (!CHECK_HEADER(c, what, o, QhOptionDecl))
      return FALSE;
    if (!qh_plugin_name_is_valid(o->name))
      return fail(c, "descriptor: %s: invalid name%s%s%s (want [a-z][a-z0-9_], at most 32 characters)",
                  what, o->name ? " '" : "", o->name && g_utf8_validate(o->name, -1, NULL) ? o->name : "",
                  o->name ? "'" : "");
    for (guint j = 0; j < info->options->len; j++)
      if (strcmp(((QhPluginOptionInfo *)info->options->pdata[j])->name, o->name) == 0)
        return fail(c, "descriptor: option '%s' is declared twice", o->name);
    if (o->type < QH_OPTION_BOOL || o->type > QH_OPTION_ENUM)
      return fail(c, "descriptor: option '%s': unknown type %d", o->name, o->type);
    if (o->flags != 0)
      return fail(c, "descriptor: option '%s': unknown flags 0x%x", o->name, o->flags);
    char field[96];
    snprintf(field, sizeof field, "option '%s' help", o->name);
    if (!check_text(c, field, o->help, 1, 256))
      return FALSE;
    snprintf(field, sizeof field, "option '%s' default_value", o->name);
    if (!check_text(c, field, o->default_value, 0, 1024))
      return FALSE;
    if (o->type == QH_OPTION_ENUM) {
      snprintf(field, sizeof field, "option '%s' choices", o->name);
      if (!check_text(c, field, o->choices, 1, 1024))
        return FALSE;
    }
    QhPluginOptionInfo *oi = g_new0(QhPluginOptionInfo, 1);
    oi->name = g_strdup(o->name);
    oi->type = o->type;
    oi->default_value = g_strdup(o->default_value);
    oi->help = g_strdup(o->help);
    oi->choices = o->type == QH_OPTION_ENUM ? g_strdup(o->choices) : NULL;
    oi->min = o->min;
    oi->max = o->max;
    g_ptr_array_add(info->options, oi);
    char *reason = NULL;
    if (!qh_plugin_option_value_ok(oi, oi->default_value, &reason)) {
      fail(c, "descriptor: option '%s': default '%s' is invalid (%s)", o->name, o->default_value,
           reason);
      g_free(reason);
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- BackendConfig tables ---- */

static gboolean check_constraint(Ctx *c, const char *what, const QhDTypeConstraint *k) {
  if (k == NULL)
    return TRUE;
  if (!CHECK_HEADER(c, what, k, QhDTypeConstraint))
    return FALSE;
  if (!dtype_known(k->dtype))
    return fail(c, "descriptor: %s: unknown dtype %d", what, k->dtype);
  if (k->flags & ~0x3fu)
    return fail(c, "descriptor: %s: unknown flags 0x%x", what, k->flags);
  int64_t lo, hi;
  if (dtype_range(k->dtype, &lo, &hi)) {
    if ((k->flags & QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND) &&
        (k->quant_min_lower_bound < lo || k->quant_min_lower_bound > hi))
      return fail(c, "descriptor: %s: quant_min_lower_bound %d is outside the dtype's range", what,
                  k->quant_min_lower_bound);
    if ((k->flags & QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND) &&
        (k->quant_max_upper_bound < lo || k->quant_max_upper_bound > hi))
      return fail(c, "descriptor: %s: quant_max_upper_bound %d is outside the dtype's range", what,
                  k->quant_max_upper_bound);
  }
  if ((k->flags & QH_CONSTRAINT_SCALE_MIN_LOWER_BOUND) &&
      !(isfinite(k->scale_min_lower_bound) && k->scale_min_lower_bound > 0))
    return fail(c, "descriptor: %s: scale_min_lower_bound must be > 0 and finite", what);
  if ((k->flags & QH_CONSTRAINT_SCALE_EXACT) && !(isnormal(k->scale_exact) && k->scale_exact > 0))
    return fail(c, "descriptor: %s: scale_exact must be > 0 and finite", what);
  return TRUE;
}

static gboolean check_dtype_config(Ctx *c, const char *what, const QhDTypeConfig *dc) {
  /* bias_derivation was appended in 1.2: older configs end at bias */
  if (!check_header(c, what, dc, offsetof(QhDTypeConfig, bias) + sizeof(dc->bias), sizeof(QhDTypeConfig)))
    return FALSE;
  if (QH_HAS_FIELD(dc, QhDTypeConfig, bias_derivation) && dc->bias_derivation != QH_BIAS_FROM_CONSTRAINT) {
    if (dc->bias_derivation != QH_BIAS_INT32_INPUT_TIMES_WEIGHT)
      return fail(c, "descriptor: %s: unknown bias_derivation %d", what, dc->bias_derivation);
    if (dc->weight == NULL || dc->bias == NULL || dc->bias->dtype != QH_DTYPE_INT32)
      return fail(c, "descriptor: %s: bias_derivation QH_BIAS_INT32_INPUT_TIMES_WEIGHT needs a weight "
                  "and a bias constraint of dtype QH_DTYPE_INT32", what);
  }
  if (dc->name && !g_utf8_validate(dc->name, -1, NULL))
    return fail(c, "descriptor: %s: name is not valid UTF-8", what);
  if (dc->flags & ~QH_DTYPE_CONFIG_IS_DYNAMIC)
    return fail(c, "descriptor: %s: unknown flags 0x%x", what, dc->flags);
  const QhDTypeConstraint *parts[4] = {dc->input, dc->output, dc->weight, dc->bias};
  static const char *const names[4] = {"input", "output", "weight", "bias"};
  for (int i = 0; i < 4; i++) {
    char sub[160];
    snprintf(sub, sizeof sub, "%s.%s", what, names[i]);
    if (!check_constraint(c, sub, parts[i]))
      return FALSE;
  }
  return TRUE;
}

static gboolean check_op_name(Ctx *c, const char *what, const char *op) {
  if (op == NULL || *op == '\0' || strnlen(op, 129) > 128 || !g_utf8_validate(op, -1, NULL))
    return fail(c, "descriptor: %s: op names must be non-empty UTF-8 of at most 128 bytes", what);
  return TRUE;
}

static gboolean check_roles(Ctx *c, const char *what, const int32_t *roles, size_t n) {
  if (n > MAX_ROLES)
    return fail(c, "descriptor: %s: n_input_roles %zu exceeds %d", what, n, MAX_ROLES);
  if (n > 0 && roles == NULL)
    return fail(c, "descriptor: %s: n_input_roles is %zu but input_roles is NULL", what, n);
  for (size_t i = 0; i < n; i++)
    if (roles[i] < QH_ROLE_ACTIVATION || roles[i] > QH_ROLE_NOT_OBSERVED)
      return fail(c, "descriptor: %s: input_roles[%zu] is unknown (%d)", what, i, roles[i]);
  return TRUE;
}

static char *pattern_key(const char *const *ops, size_t n) {
  GString *s = g_string_new(NULL);
  for (size_t i = 0; i < n; i++)
    g_string_append_printf(s, "%s%s", i ? " -> " : "", ops[i]);
  return g_string_free(s, FALSE);
}

static gboolean check_pattern(Ctx *c, size_t index, const QhBackendPatternConfig *p, GHashTable *seen) {
  char what[64];
  snprintf(what, sizeof what, "backend_config.patterns[%zu]", index);
  /* shared_inputs_mask was appended in 1.2: older patterns end at fused_name */
  if (!check_header(c, what, p, offsetof(QhBackendPatternConfig, fused_name) + sizeof(p->fused_name),
                    sizeof(QhBackendPatternConfig)))
    return FALSE;
  if (p->n_ops < 1 || p->n_ops > QH_PATTERN_MAX_OPS || p->ops == NULL)
    return fail(c, "descriptor: %s: n_ops must be 1 to %d", what, QH_PATTERN_MAX_OPS);
  for (size_t i = 0; i < p->n_ops; i++)
    if (!check_op_name(c, what, p->ops[i]))
      return FALSE;
  if (p->root_index >= p->n_ops)
    return fail(c, "descriptor: %s: root_index %u is not below n_ops %zu", what, p->root_index, p->n_ops);
  if (p->extra_inputs_mask >> p->n_ops)
    return fail(c, "descriptor: %s: extra_inputs_mask 0x%x names ops past the pattern", what,
                p->extra_inputs_mask);
  if (!check_roles(c, what, p->input_roles, p->n_input_roles))
    return FALSE;
  if (p->observation_type < 0 || p->observation_type > QH_OBS_INPUT_OUTPUT_NOT_OBSERVED)
    return fail(c, "descriptor: %s: unknown observation_type %d", what, p->observation_type);
  if (p->flags & ~QH_PATTERN_OBS_BY_TENSOR_ARGS)
    return fail(c, "descriptor: %s: unknown flags 0x%x", what, p->flags);
  if (p->flags & QH_PATTERN_OBS_BY_TENSOR_ARGS)
    for (int i = 0; i < 3; i++)
      if (p->observation_type_by_tensor_args[i] < 0 ||
          p->observation_type_by_tensor_args[i] > QH_OBS_INPUT_OUTPUT_NOT_OBSERVED)
        return fail(c, "descriptor: %s: unknown observation_type_by_tensor_args[%d]", what, i);
  if (p->n_dtype_configs > MAX_DTYPE_CONFIGS || (p->n_dtype_configs > 0 && p->dtype_configs == NULL))
    return fail(c, "descriptor: %s: bad dtype_configs (n %zu)", what, p->n_dtype_configs);
  for (size_t i = 0; i < p->n_dtype_configs; i++) {
    char sub[96];
    snprintf(sub, sizeof sub, "%s.dtype_configs[%zu]", what, i);
    if (!check_dtype_config(c, sub, p->dtype_configs[i]))
      return FALSE;
  }
  if (p->fuser != QH_FUSER_NONE && p->fuser != QH_FUSER_FOLD_BATCHNORM)
    return fail(c, "descriptor: %s: unknown fuser %d", what, p->fuser);
  if (p->fused_name && !g_utf8_validate(p->fused_name, -1, NULL))
    return fail(c, "descriptor: %s: fused_name is not valid UTF-8", what);
  char *key = pattern_key(p->ops, p->n_ops);
  if (g_hash_table_contains(seen, key)) {
    fail(c, "descriptor: %s: pattern %s is declared twice", what, key);
    g_free(key);
    return FALSE;
  }
  g_hash_table_add(seen, key);
  return TRUE;
}

static gboolean check_qconfig_spec(Ctx *c, const char *what, const QhQuantSpec *s) {
  if (s == NULL)
    return TRUE;
  if (!CHECK_HEADER(c, what, s, QhQuantSpec))
    return FALSE;
  if (s->kind < QH_SPEC_QUANTIZE || s->kind > QH_SPEC_FLOAT)
    return fail(c, "descriptor: %s: unknown kind %d", what, s->kind);
  if (s->kind != QH_SPEC_SHARED && s->kind != QH_SPEC_FLOAT && !dtype_known(s->dtype))
    return fail(c, "descriptor: %s: unknown dtype %d", what, s->dtype);
  if (s->qscheme < QH_QSCHEME_PER_TENSOR_AFFINE || s->qscheme > QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS)
    return fail(c, "descriptor: %s: unknown qscheme %d", what, s->qscheme);
  int64_t lo, hi;
  if ((s->flags & QH_SPEC_HAS_RANGE) && dtype_range(s->dtype, &lo, &hi) &&
      (s->quant_min > s->quant_max || s->quant_min < lo || s->quant_max > hi))
    return fail(c, "descriptor: %s: quant range [%d, %d] is not inside the dtype's [%" G_GINT64_FORMAT
                ", %" G_GINT64_FORMAT "]", what, s->quant_min, s->quant_max, lo, hi);
  if (s->kind == QH_SPEC_FIXED && !(isnormal(s->scale) && s->scale > 0))
    return fail(c, "descriptor: %s: fixed scale must be > 0 and finite", what);
  if (s->observer && (!g_utf8_validate(s->observer, -1, NULL) || *s->observer == '\0'))
    return fail(c, "descriptor: %s: observer name is not valid", what);
  if (s->n_observer_args > 64 || (s->n_observer_args > 0 && s->observer_args == NULL))
    return fail(c, "descriptor: %s: bad observer_args (n %zu)", what, s->n_observer_args);
  for (size_t i = 0; i < s->n_observer_args; i++)
    if (!s->observer_args[i].key || !s->observer_args[i].value ||
        !g_utf8_validate(s->observer_args[i].key, -1, NULL) ||
        !g_utf8_validate(s->observer_args[i].value, -1, NULL))
      return fail(c, "descriptor: %s: observer_args[%zu] is not a UTF-8 key/value pair", what, i);
  return TRUE;
}

static gboolean check_backend_config(Ctx *c, const QhBackendConfig *bc, QhPluginInfo *info) {
  if (!CHECK_HEADER(c, "backend_config", bc, QhBackendConfig))
    return FALSE;
  if (!check_text(c, "backend_config.name", bc->name, 1, 64))
    return FALSE;
  if (bc->flags != 0)
    return fail(c, "descriptor: backend_config: unknown flags 0x%x", bc->flags);
  if (bc->n_patterns > MAX_PATTERNS || (bc->n_patterns > 0 && bc->patterns == NULL))
    return fail(c, "descriptor: backend_config: bad patterns (n %zu)", bc->n_patterns);
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  gboolean ok = TRUE;
  for (size_t i = 0; ok && i < bc->n_patterns; i++)
    ok = check_pattern(c, i, bc->patterns[i], seen);
  g_hash_table_remove_all(seen);
  if (ok && (bc->n_default_qconfig > MAX_QCONFIG_ENTRIES ||
             (bc->n_default_qconfig > 0 && bc->default_qconfig == NULL)))
    ok = fail(c, "descriptor: backend_config: bad default_qconfig (n %zu)", bc->n_default_qconfig);
  for (size_t i = 0; ok && i < bc->n_default_qconfig; i++) {
    char what[64];
    snprintf(what, sizeof what, "backend_config.default_qconfig[%zu]", i);
    const QhQConfigEntry *e = bc->default_qconfig[i];
    if (!(ok = CHECK_HEADER(c, what, e, QhQConfigEntry)))
      break;
    if (e->match < QH_QCONFIG_MATCH_GLOBAL || e->match > QH_QCONFIG_MATCH_NODE_NAME)
      ok = fail(c, "descriptor: %s: unknown match %d", what, e->match);
    else if (e->flags & ~QH_QCONFIG_ENTRY_NONE)
      ok = fail(c, "descriptor: %s: unknown flags 0x%x", what, e->flags);
    else if (e->match != QH_QCONFIG_MATCH_GLOBAL &&
             (e->key == NULL || *e->key == '\0' || !g_utf8_validate(e->key, -1, NULL)))
      ok = fail(c, "descriptor: %s: key must be non-empty UTF-8", what);
    if (!ok)
      break;
    char *key = g_strdup_printf("%d:%s", e->match, e->match == QH_QCONFIG_MATCH_GLOBAL ? "" : e->key);
    if (g_hash_table_contains(seen, key)) {
      ok = fail(c, "descriptor: %s: entry for '%s' is declared twice", what,
                e->match == QH_QCONFIG_MATCH_GLOBAL ? "global" : e->key);
      g_free(key);
      break;
    }
    g_hash_table_add(seen, key);
    char sub[96];
    snprintf(sub, sizeof sub, "%s.activation", what);
    ok = check_qconfig_spec(c, sub, e->activation);
    snprintf(sub, sizeof sub, "%s.weight", what);
    ok = ok && check_qconfig_spec(c, sub, e->weight);
  }
  g_hash_table_unref(seen);
  if (ok)
    info->backend_config = g_strdup_printf("%s: %zu patterns, %zu default qconfig entries", bc->name,
                                           bc->n_patterns, bc->n_default_qconfig);
  return ok;
}

/* ---- observers, lowering ---- */

static const char *const pytorch_observers[] = {
    "MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver", "HistogramObserver", "FixedQParamsObserver",
    "PlaceholderObserver", "ReuseInputObserver", "NoopObserver", "RecordingObserver"};

static gboolean observer_name_ok(const char *name) {
  if (name == NULL || !g_ascii_isalpha(name[0]) || strnlen(name, 65) > 64)
    return FALSE;
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum(*p) && *p != '_')
      return FALSE;
  return TRUE;
}

static gboolean check_observers(Ctx *c, const QhPluginDesc *d, QhPluginInfo *info) {
  if (d->n_observers > MAX_OBSERVERS || d->observers == NULL)
    return fail(c, "descriptor: observers: bad array (n_observers %zu)", d->n_observers);
  for (size_t i = 0; i < d->n_observers; i++) {
    char what[96];
    snprintf(what, sizeof what, "observers[%zu]", i);
    const QhObserverOps *o = d->observers[i];
    if (!CHECK_HEADER(c, what, o, QhObserverOps))
      return FALSE;
    if (!observer_name_ok(o->name))
      return fail(c, "descriptor: %s: invalid name (want [A-Za-z][A-Za-z0-9_]*, at most 64 characters)", what);
    snprintf(what, sizeof what, "observers[%zu] '%s'", i, o->name);
    for (gsize k = 0; k < G_N_ELEMENTS(pytorch_observers); k++)
      if (strcmp(o->name, pytorch_observers[k]) == 0)
        return fail(c, "descriptor: %s: the name is PyTorch's; pick another", what);
    for (guint k = 0; k < info->observers->len; k++)
      if (strcmp(info->observers->pdata[k], o->name) == 0)
        return fail(c, "descriptor: %s: declared twice", what);
    char field[128];
    snprintf(field, sizeof field, "%s description", what);
    if (!check_text(c, field, o->description, 1, 256))
      return FALSE;
    if (o->flags & ~(QH_OBSERVER_PER_CHANNEL | QH_OBSERVER_MERGE_IS_EXACT))
      return fail(c, "descriptor: %s: unknown flags 0x%x", what, o->flags);
    if (!NEED(c, what, o, create) || !NEED(c, what, o, observe) || !NEED(c, what, o, compute_qparams) ||
        !NEED(c, what, o, destroy))
      return FALSE;
    if ((o->save == NULL) != (o->load == NULL))
      return fail(c, "descriptor: %s: save and load must both be set or both be NULL", what);
    g_ptr_array_add(info->observers, g_strdup(o->name));
  }
  return TRUE;
}

static gboolean layout_known(int32_t l) { return l >= QH_LAYOUT_ANY && l <= QH_LAYOUT_OPAQUE; }

static gboolean check_kernel(Ctx *c, const char *what, const QhKernelOps *k) {
  if (!CHECK_HEADER(c, what, k, QhKernelOps))
    return FALSE;
  char field[160];
  snprintf(field, sizeof field, "%s.id", what);
  if (!check_text(c, field, k->id, 1, 64))
    return FALSE;
  if (!layout_known(k->input_layout) || !layout_known(k->output_layout))
    return fail(c, "descriptor: %s: unknown layout", what);
  if (k->flags & ~QH_KERNEL_INPLACE_OK)
    return fail(c, "descriptor: %s: unknown flags 0x%x", what, k->flags);
  if (!NEED(c, what, k, create) || !NEED(c, what, k, reshape) || !NEED(c, what, k, run) ||
      !NEED(c, what, k, destroy))
    return FALSE;
  if (k->input_layout == QH_LAYOUT_OPAQUE || k->output_layout == QH_LAYOUT_OPAQUE)
    if (!NEED(c, what, k, reorder_to_nchw) || !NEED(c, what, k, reorder_from_nchw))
      return FALSE;
  return TRUE;
}

static gboolean check_lowering(Ctx *c, const QhLoweringOps *l, QhPluginInfo *info) {
  if (!CHECK_HEADER(c, "lowering", l, QhLoweringOps))
    return FALSE;
  if (l->n_patterns < 1 || l->n_patterns > MAX_PATTERNS || l->patterns == NULL)
    return fail(c, "descriptor: lowering: needs 1 to %d patterns (n_patterns %zu)", MAX_PATTERNS,
                l->n_patterns);
  GHashTable *ids = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean ok = TRUE;
  for (size_t i = 0; ok && i < l->n_patterns; i++) {
    char what[128];
    snprintf(what, sizeof what, "lowering.patterns[%zu]", i);
    const QhLoweringPattern *p = l->patterns[i];
    if (!(ok = CHECK_HEADER(c, what, p, QhLoweringPattern)))
      break;
    if (!(ok = check_text(c, what, p->id, 1, 64)))
      break;
    snprintf(what, sizeof what, "lowering.patterns[%zu] '%s'", i, p->id);
    if (g_hash_table_contains(ids, p->id)) {
      ok = fail(c, "descriptor: %s: id declared twice", what);
      break;
    }
    g_hash_table_add(ids, (gpointer)p->id);
    /* Four-op lowering patterns exist since ABI 1.2. */
    int max_ops = QH_ABI_VERSION_MINOR(p->abi_version) >= 2 ? QH_LOWERING_PATTERN_MAX_OPS : QH_PATTERN_MAX_OPS;
    if (p->n_ops < 1 || p->n_ops > (size_t)max_ops || p->ops == NULL) {
      ok = fail(c, "descriptor: %s: n_ops must be 1 to %d", what, max_ops);
      break;
    }
    for (size_t k = 0; ok && k < p->n_ops; k++)
      ok = check_op_name(c, what, p->ops[k]);
    if (ok && (p->extra_inputs_mask >> p->n_ops))
      ok = fail(c, "descriptor: %s: extra_inputs_mask names ops past the pattern", what);
    /* QH_PATTERN_THROUGH_SHARED_QDQ exists since ABI 1.1 (a 1.0 pattern knows no flags),
     * QH_PATTERN_FLOAT_EXTRA_INPUTS since 1.2. */
    uint32_t minor = QH_ABI_VERSION_MINOR(p->abi_version);
    uint32_t known = (minor >= 1 ? QH_PATTERN_THROUGH_SHARED_QDQ : 0u) | (minor >= 2 ? QH_PATTERN_FLOAT_EXTRA_INPUTS : 0u);
    if (ok && (p->flags & ~known))
      ok = fail(c, "descriptor: %s: unknown flags 0x%x", what, p->flags & ~known);
    if (ok && (p->flags & QH_PATTERN_THROUGH_SHARED_QDQ) && p->n_ops < 2)
      ok = fail(c, "descriptor: %s: QH_PATTERN_THROUGH_SHARED_QDQ needs two or more ops", what);
    /* The requantize pseudo-op (ABI 1.2) matches a DequantizeLinear -> QuantizeLinear step
     * only as a pattern of its own: anywhere else it would silently never match. */
    for (size_t k = 0; ok && k < p->n_ops; k++)
      if (strcmp(p->ops[k], QH_PATTERN_OP_REQUANTIZE) == 0 &&
          (minor < 2 || p->n_ops != 1 || p->flags != 0 || p->extra_inputs_mask != 0))
        ok = fail(c, "descriptor: %s: %s must be the pattern's only op, without flags or extra inputs, "
                  "in a pattern built against ABI 1.2 or later", what, QH_PATTERN_OP_REQUANTIZE);
    ok = ok && check_roles(c, what, p->input_roles, p->n_input_roles);
    char kwhat[160];
    snprintf(kwhat, sizeof kwhat, "%s: kernel", what);
    ok = ok && check_kernel(c, kwhat, p->kernel);
    if (ok)
      g_ptr_array_add(info->kernels, g_strdup_printf("%s -> %s", p->id, p->kernel->id));
  }
  g_hash_table_unref(ids);
  return ok;
}

/* ---- the descriptor ---- */

#define GROUP(d, member) (QH_HAS_FIELD(d, QhPluginDesc, member) ? (d)->member : NULL)

static gboolean check_groups(Ctx *c, const QhPluginDesc *d, QhPluginInfo *info) {
  const QhTransformOps *t = GROUP(d, transform);
  if (t) {
    if (!CHECK_HEADER(c, "transform", t, QhTransformOps) ||
        !NEED(c, "transform", t, transform_for_annotation))
      return FALSE;
    g_ptr_array_add(info->supplies, g_strdup("transform_for_annotation"));
  }
  const QhBackendConfig *bc = GROUP(d, backend_config);
  if (bc) {
    if (!check_backend_config(c, bc, info))
      return FALSE;
    g_ptr_array_add(info->supplies, g_strdup("backend_config"));
  }
  const QhAnnotateOps *a = GROUP(d, annotate);
  if (a) {
    if (!CHECK_HEADER(c, "annotate", a, QhAnnotateOps) || !NEED(c, "annotate", a, annotate))
      return FALSE;
    g_ptr_array_add(info->supplies, g_strdup("annotate"));
  }
  if (QH_HAS_FIELD(d, QhPluginDesc, n_observers) && (d->n_observers > 0 || d->observers != NULL)) {
    if (!check_observers(c, d, info))
      return FALSE;
    if (d->n_observers > 0)
      g_ptr_array_add(info->supplies, g_strdup("observers"));
  }
  const QhRefineOps *r = GROUP(d, refine);
  if (r) {
    if (!CHECK_HEADER(c, "refine", r, QhRefineOps) || !NEED(c, "refine", r, refine))
      return FALSE;
    g_ptr_array_add(info->supplies, g_strdup("refine"));
  }
  const QhReferenceNumericsOps *rn = GROUP(d, reference_numerics);
  if (rn) {
    if (!CHECK_HEADER(c, "reference_numerics", rn, QhReferenceNumericsOps) ||
        !check_text(c, "reference_numerics.description", rn->description, 1, 256) ||
        !NEED(c, "reference_numerics", rn, fake_quantize))
      return FALSE;
    g_ptr_array_add(info->supplies, g_strdup("reference_numerics"));
  }
  const QhLoweringOps *l = GROUP(d, lowering);
  if (l) {
    if (!check_lowering(c, l, info))
      return FALSE;
    g_ptr_array_add(info->supplies, g_strdup("lowering"));
  }
  const QhDeployOps *dp = GROUP(d, deploy);
  if (dp) {
    if (!CHECK_HEADER(c, "deploy", dp, QhDeployOps) ||
        !check_text(c, "deploy.description", dp->description, 1, 256) || !NEED(c, "deploy", dp, deploy))
      return FALSE;
    g_ptr_array_add(info->supplies, g_strdup("deploy"));
  }
  const QhPassOps *ps = GROUP(d, passes);
  if (ps) {
    if (!CHECK_HEADER(c, "passes", ps, QhPassOps))
      return FALSE;
    if (ps->post_calibration == NULL && ps->post_convert == NULL)
      return fail(c, "descriptor: passes: neither post_calibration nor post_convert is set");
    if (ps->post_calibration)
      g_ptr_array_add(info->supplies, g_strdup("post_calibration"));
    if (ps->post_convert)
      g_ptr_array_add(info->supplies, g_strdup("post_convert"));
  }
  const QhPartitionOps *pt = GROUP(d, partitions);
  if (pt) {
    if (!CHECK_HEADER(c, "partitions", pt, QhPartitionOps) ||
        !check_text(c, "partitions.id", pt->id, 1, 64))
      return FALSE;
    if (pt->io_layout != QH_LAYOUT_ANY && pt->io_layout != QH_LAYOUT_NCHW && pt->io_layout != QH_LAYOUT_NHWC)
      return fail(c, "descriptor: partitions: io_layout must be QH_LAYOUT_ANY, NCHW or NHWC "
                     "(opaque layouts belong inside the partition)");
    if (pt->flags != 0)
      return fail(c, "descriptor: partitions: unknown flags 0x%x", pt->flags);
    if (!NEED(c, "partitions", pt, claim) || !NEED(c, "partitions", pt, compile) ||
        !NEED(c, "partitions", pt, reshape) || !NEED(c, "partitions", pt, run) ||
        !NEED(c, "partitions", pt, destroy))
      return FALSE;
    g_ptr_array_add(info->supplies, g_strdup("partitions"));
  }
  return TRUE;
}

/* The largest struct_size a plugin of each 1.x minor may declare. */
static size_t desc_size_for_minor(uint32_t minor) {
  /* 1.1 grew only the host table; 1.2 appended `passes` and `partitions`. A plugin of the host's own
   * minor may have every member. */
  if (minor >= 2 || minor == QH_ABI_MINOR)
    return sizeof(QhPluginDesc);
  return offsetof(QhPluginDesc, passes);
}

QhPluginInfo *qh_plugin_validate_desc(const QhPluginDesc *d, const char *path,
                                      const char *expected_name, GError **error) {
  Ctx c = {path, error, FALSE};
  if (d == NULL) {
    fail(&c, "the entry point returned success but no descriptor");
    return NULL;
  }
  uint32_t major = QH_ABI_VERSION_MAJOR(d->abi_version), minor = QH_ABI_VERSION_MINOR(d->abi_version);
  if (major != QH_ABI_MAJOR || minor > QH_ABI_MINOR) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s: built for qhost ABI %u.%u, this host provides %d.%d",
                path, major, minor, QH_ABI_MAJOR, QH_ABI_MINOR);
    return NULL;
  }
  if (d->struct_size < QH_PLUGIN_DESC_MIN_SIZE || d->struct_size > desc_size_for_minor(minor)) {
    fail(&c, "corrupt descriptor: struct_size %u is outside [%zu, %zu] for ABI %u.%u", d->struct_size,
         (size_t)QH_PLUGIN_DESC_MIN_SIZE, desc_size_for_minor(minor), major, minor);
    return NULL;
  }
  if (d->name == NULL) {
    fail(&c, "descriptor: name is NULL");
    return NULL;
  }
  if (!g_utf8_validate(d->name, (gssize)strnlen(d->name, 256), NULL)) {
    fail(&c, "descriptor: name is not valid UTF-8");
    return NULL;
  }
  if (!qh_plugin_name_is_valid(d->name)) {
    char *shown = g_strndup(d->name, 64);
    fail(&c, "descriptor: invalid name '%s' (want [a-z][a-z0-9_], at most 32 characters)", shown);
    g_free(shown);
    return NULL;
  }
  if (expected_name && strcmp(d->name, expected_name) != 0) {
    fail(&c, "descriptor name '%s' does not match the file name (want libqhost-%s.so)", d->name,
         d->name);
    return NULL;
  }
  if (!check_text(&c, "version", d->version, 1, 64) ||
      !check_text(&c, "description", d->description, 1, 256))
    return NULL;
  if (d->flags != 0) {
    fail(&c, "descriptor: unknown flags 0x%x", d->flags);
    return NULL;
  }
  QhPluginInfo *info = qh_plugin_info_new();
  info->path = g_strdup(path);
  info->name = g_strdup(d->name);
  info->version = g_strdup(d->version);
  info->description = g_strdup(d->description);
  info->abi_version = d->abi_version;
  info->struct_size = d->struct_size;
  gboolean ok = check_options(&c, d, info);
  if (ok && QH_HAS_FIELD(d, QhPluginDesc, instance_destroy) &&
      (d->instance_create == NULL) != (d->instance_destroy == NULL))
    ok = fail(&c, "descriptor: instance_create and instance_destroy must both be set or both be NULL");
  ok = ok && check_groups(&c, d, info);
  if (!ok) {
    qh_plugin_info_free(info);
    return NULL;
  }
  return info;
}
