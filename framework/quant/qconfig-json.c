/* Reading a --config file into a QhQConfigLayer. json-glib builds the tree, but it
 * is lenient where users need strictness (it accepts comments, single quotes, hex
 * numbers and trailing text, clamps huge integers, keeps the last of duplicate keys
 * silently, and recurses without a depth bound), so a strict RFC 8259 scan runs
 * first: it bounds nesting, rejects what JSON does not allow, and finds duplicate
 * keys and out-of-range numbers with their key path. Then every key and type is
 * checked against the format of docs/qconfig.md; any error is one line naming the
 * file and the key path. */
#include "quant/qconfig-private.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "exec/op.h"

#define MAX_DEPTH 32
#define MAX_FILE_SIZE (16u << 20)

/* ---- Key paths: global.activation.bins, node_name['/l4/x*'].weight ---- */

static void path_push(GString *p, const char *key) {
  gboolean plain = key[0] != '\0';
  for (const char *c = key; *c != '\0'; c++)
    if (!g_ascii_isalnum(*c) && *c != '_')
      plain = FALSE;
  if (plain)
    g_string_append_printf(p, "%s%s", p->len > 0 ? "." : "", key);
  else
    g_string_append_printf(p, "['%s']", key);
}

static char *path_join(const char *base, const char *key) {
  GString *p = g_string_new(base);
  path_push(p, key);
  return g_string_free(p, FALSE);
}

/* ---- The strict scan ---- */

typedef struct {
  const char *text;
  size_t len, pos;
  GString *path;
  char *dup;       /* key path of the first duplicate key */
  char *error;     /* a syntax or range error, with err_pos and err_path */
  size_t err_pos;
  char *err_path;
} Scan;

static gboolean scan_fail(Scan *s, const char *msg) {
  if (s->error == NULL) {
    s->error = g_strdup(msg);
    s->err_pos = s->pos;
    s->err_path = g_strdup(s->path->str);
  }
  return FALSE;
}

static void skip_ws(Scan *s) {
  while (s->pos < s->len && strchr(" \t\r\n", s->text[s->pos]) != NULL && s->text[s->pos] != '\0')
    s->pos++;
}

static int hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int d = g_ascii_xdigit_value(p[i]);
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

/* A string at s->pos ('"'); its decoded text goes to out when out is not NULL. */
static gboolean scan_string(Scan *s, GString *out) {
  s->pos++;
  while (s->pos < s->len) {
    unsigned char c = (unsigned char)s->text[s->pos];
    if (c == '"') {
      s->pos++;
      return TRUE;
    }
    if (c < 0x20)
      return scan_fail(s, "control character inside a string (write it as an escape)");
    if (c != '\\') {
      if (out)
        g_string_append_c(out, (char)c);
      s->pos++;
      continue;
    }
    if (s->pos + 1 >= s->len)
      break;
    char e = s->text[s->pos + 1];
    const char *simple = strchr("\"\\/bfnrt", e);
    if (simple != NULL && e != '\0') {
      static const char decoded[] = "\"\\/\b\f\n\r\t";
      if (out)
        g_string_append_c(out, decoded[simple - "\"\\/bfnrt"]);
      s->pos += 2;
      continue;
    }
    if (e != 'u' || s->pos + 6 > s->len || hex4(s->text + s->pos + 2) < 0)
      return scan_fail(s, "invalid escape in a string");
    gunichar u = (gunichar)hex4(s->text + s->pos + 2);
    if (u >= 0xDC00 && u <= 0xDFFF)
      return scan_fail(s, "unpaired surrogate escape in a string");
    if (u == 0)
      return scan_fail(s, "\\u0000 is not allowed in a string");
    if (u >= 0xD800 && u <= 0xDBFF) {
      size_t next = s->pos + 6;
      int lo = next + 6 <= s->len && s->text[next] == '\\' && s->text[next + 1] == 'u'
                   ? hex4(s->text + next + 2)
                   : -1;
      if (lo < 0xDC00 || lo > 0xDFFF)
        return scan_fail(s, "unpaired surrogate escape in a string");
      u = 0x10000 + ((u - 0xD800) << 10) + ((gunichar)lo - 0xDC00);
      s->pos += 6;
    }
    s->pos += 6;
    if (out)
      g_string_append_unichar(out, u);
  }
  return scan_fail(s, "unterminated string");
}

static gboolean scan_number(Scan *s) {
  size_t start = s->pos;
  gboolean is_int = TRUE;
  const char *t = s->text;
  if (t[s->pos] == '-')
    s->pos++;
  if (s->pos < s->len && t[s->pos] == '0')
    s->pos++;
  else if (s->pos < s->len && t[s->pos] >= '1' && t[s->pos] <= '9')
    while (s->pos < s->len && g_ascii_isdigit(t[s->pos]))
      s->pos++;
  else
    return scan_fail(s, "invalid number");
  if (s->pos < s->len && t[s->pos] == '.') {
    is_int = FALSE;
    s->pos++;
    if (s->pos >= s->len || !g_ascii_isdigit(t[s->pos]))
      return scan_fail(s, "invalid number: a digit must follow '.'");
    while (s->pos < s->len && g_ascii_isdigit(t[s->pos]))
      s->pos++;
  }
  if (s->pos < s->len && (t[s->pos] == 'e' || t[s->pos] == 'E')) {
    is_int = FALSE;
    s->pos++;
    if (s->pos < s->len && (t[s->pos] == '+' || t[s->pos] == '-'))
      s->pos++;
    if (s->pos >= s->len || !g_ascii_isdigit(t[s->pos]))
      return scan_fail(s, "invalid number: a digit must follow the exponent");
    while (s->pos < s->len && g_ascii_isdigit(t[s->pos]))
      s->pos++;
  }
  char *lit = g_strndup(t + start, s->pos - start);
  gboolean ok;
  if (is_int) {
    gint64 v;
    ok = g_ascii_string_to_signed(lit, 10, G_MININT64, G_MAXINT64, &v, NULL);
  } else {
    ok = isfinite(g_ascii_strtod(lit, NULL));
  }
  if (!ok) {
    char *msg = g_strdup_printf("number %s is out of range", lit);
    s->pos = start;
    scan_fail(s, msg);
    g_free(msg);
  }
  g_free(lit);
  return ok;
}

static gboolean scan_value(Scan *s, int depth);

static gboolean scan_object(Scan *s, int depth) {
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  gboolean ok = FALSE;
  s->pos++;
  skip_ws(s);
  if (s->pos < s->len && s->text[s->pos] == '}') {
    s->pos++;
    ok = TRUE;
    goto out;
  }
  for (;;) {
    if (s->pos >= s->len || s->text[s->pos] != '"') {
      scan_fail(s, "expected a key (a double-quoted string)");
      goto out;
    }
    GString *key = g_string_new(NULL);
    if (!scan_string(s, key)) {
      g_string_free(key, TRUE);
      goto out;
    }
    size_t mark = s->path->len;
    path_push(s->path, key->str);
    if (g_hash_table_contains(seen, key->str)) {
      if (s->dup == NULL)
        s->dup = g_strdup(s->path->str);
      g_string_free(key, TRUE);
    } else {
      g_hash_table_add(seen, g_string_free(key, FALSE));
    }
    skip_ws(s);
    if (s->pos >= s->len || s->text[s->pos] != ':') {
      scan_fail(s, "expected ':' after a key");
      goto out;
    }
    s->pos++;
    if (!scan_value(s, depth + 1))
      goto out;
    g_string_truncate(s->path, mark);
    skip_ws(s);
    if (s->pos < s->len && s->text[s->pos] == ',') {
      s->pos++;
      skip_ws(s);
      continue;
    }
    if (s->pos < s->len && s->text[s->pos] == '}') {
      s->pos++;
      ok = TRUE;
      goto out;
    }
    scan_fail(s, "expected ',' or '}' in an object");
    goto out;
  }
out:
  g_hash_table_unref(seen);
  return ok;
}

static gboolean scan_array(Scan *s, int depth) {
  s->pos++;
  skip_ws(s);
  if (s->pos < s->len && s->text[s->pos] == ']') {
    s->pos++;
    return TRUE;
  }
  for (guint i = 0;; i++) {
    size_t mark = s->path->len;
    g_string_append_printf(s->path, "[%u]", i);
    if (!scan_value(s, depth + 1))
      return FALSE;
    g_string_truncate(s->path, mark);
    skip_ws(s);
    if (s->pos < s->len && s->text[s->pos] == ',') {
      s->pos++;
      continue;
    }
    if (s->pos < s->len && s->text[s->pos] == ']') {
      s->pos++;
      return TRUE;
    }
    return scan_fail(s, "expected ',' or ']' in an array");
  }
}

static gboolean scan_value(Scan *s, int depth) {
  if (depth > MAX_DEPTH) {
    g_string_truncate(s->path, 0); /* the path would be the 32 levels */
    return scan_fail(s, "nested deeper than 32 levels");
  }
  skip_ws(s);
  if (s->pos >= s->len)
    return scan_fail(s, "unexpected end of file: expected a value");
  char c = s->text[s->pos];
  if (c == '{')
    return scan_object(s, depth);
  if (c == '[')
    return scan_array(s, depth);
  if (c == '"')
    return scan_string(s, NULL);
  if (c == '-' || g_ascii_isdigit(c))
    return scan_number(s);
  static const char *const literals[] = {"true", "false", "null"};
  for (size_t i = 0; i < G_N_ELEMENTS(literals); i++) {
    size_t n = strlen(literals[i]);
    if (s->len - s->pos >= n && strncmp(s->text + s->pos, literals[i], n) == 0 &&
        (s->pos + n == s->len || !g_ascii_isalnum(s->text[s->pos + n]))) {
      s->pos += n;
      return TRUE;
    }
  }
  return scan_fail(s, "expected a value (object, array, string, number, true, false or null)");
}

/* Strict JSON or an error "PATH:LINE:COL: ..." / "PATH: KEYPATH: key given twice". */
static gboolean scan_strict(const char *path, const char *text, size_t len, GError **error) {
  Scan s = {text, len, 0, g_string_new(NULL), NULL, NULL, 0, NULL};
  gboolean ok = scan_value(&s, 1);
  if (ok) {
    skip_ws(&s);
    if (s.pos < len)
      ok = scan_fail(&s, "unexpected text after the top-level value");
  }
  if (!ok) {
    int line = 1, col = 1;
    for (size_t i = 0; i < s.err_pos && i < len; i++) {
      if (text[i] == '\n')
        line++, col = 1;
      else
        col++;
    }
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s:%d:%d: %s%s%s", path, line, col,
                s.err_path, *s.err_path ? ": " : "", s.error);
  } else if (s.dup != NULL) {
    ok = FALSE;
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s: key given twice", path, s.dup);
  }
  g_string_free(s.path, TRUE);
  g_free(s.dup);
  g_free(s.error);
  g_free(s.err_path);
  return ok;
}

/* ---- The format ---- */

typedef struct {
  const char *file;
  const char *const *known;
  GError **error;
} Ctx;

static gboolean fail(Ctx *c, const char *keypath, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean fail(Ctx *c, const char *keypath, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(c->error, QH_ERROR, QH_ERROR_INVALID, "%s: %s: %s", c->file, keypath, msg);
  g_free(msg);
  return FALSE;
}

static const char *json_kind(JsonNode *n) {
  if (JSON_NODE_HOLDS_NULL(n))
    return "null";
  if (JSON_NODE_HOLDS_OBJECT(n))
    return "an object";
  if (JSON_NODE_HOLDS_ARRAY(n))
    return "an array";
  GType t = json_node_get_value_type(n);
  if (t == G_TYPE_STRING)
    return "a string";
  if (t == G_TYPE_BOOLEAN)
    return "a boolean";
  return t == G_TYPE_INT64 ? "an integer" : "a number";
}

static gboolean is_type(JsonNode *n, GType t) {
  return JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == t;
}

static const struct {
  const char *name;
  int32_t code;
} dtypes[] = {{"quint8", QH_DTYPE_UINT8},
              {"qint8", QH_DTYPE_INT8},
              {"quint16", QH_DTYPE_UINT16}, /* PyTorch 1.13 has none: docs/qconfig.md */
              {"qint16", QH_DTYPE_INT16},
              {"quint4", QH_DTYPE_UINT4}, /* weights; docs/qconfig.md */
              {"qint4", QH_DTYPE_INT4},
              {"qint32", QH_DTYPE_INT32},
              {"float32", QH_DTYPE_FLOAT}},
  qschemes[] = {{"per_tensor_affine", QH_QSCHEME_PER_TENSOR_AFFINE},
                {"per_channel_affine", QH_QSCHEME_PER_CHANNEL_AFFINE},
                {"per_tensor_symmetric", QH_QSCHEME_PER_TENSOR_SYMMETRIC},
                {"per_channel_symmetric", QH_QSCHEME_PER_CHANNEL_SYMMETRIC},
                {"per_channel_affine_float_qparams", QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS}};

static gboolean is_known_plugin(const char *const *known, const char *name) {
  for (size_t i = 0; known != NULL && known[i] != NULL; i++)
    if (strcmp(known[i], name) == 0)
      return TRUE;
  return FALSE;
}

/* Shortest text that reads back as the same double. */
static char *format_double(double v) {
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (int prec = 1; prec <= 17; prec++) {
    char fmt[8];
    g_snprintf(fmt, sizeof fmt, "%%.%dg", prec);
    g_ascii_formatd(buf, sizeof buf, fmt, v);
    if (g_ascii_strtod(buf, NULL) == v)
      break;
  }
  return g_strdup(buf);
}

/* An int32 from an integer node, or an error naming keypath. */
static gboolean get_int32(Ctx *c, JsonNode *n, const char *keypath, int32_t *out) {
  if (!is_type(n, G_TYPE_INT64))
    return fail(c, keypath, "must be an integer, not %s", json_kind(n));
  gint64 v = json_node_get_int(n);
  if (v < G_MININT32 || v > G_MAXINT32)
    return fail(c, keypath, "%" G_GINT64_FORMAT " is outside the 32-bit integer range", v);
  *out = (int32_t)v;
  return TRUE;
}

static gboolean lookup_name(Ctx *c, JsonNode *n, const char *keypath, gboolean dtype,
                            int32_t *out) {
  if (!is_type(n, G_TYPE_STRING))
    return fail(c, keypath, "must be a string, not %s", json_kind(n));
  const char *v = json_node_get_string(n);
  size_t count = dtype ? G_N_ELEMENTS(dtypes) : G_N_ELEMENTS(qschemes);
  GString *names = g_string_new(NULL);
  for (size_t i = 0; i < count; i++) {
    const char *name = dtype ? dtypes[i].name : qschemes[i].name;
    if (strcmp(name, v) == 0) {
      *out = dtype ? dtypes[i].code : qschemes[i].code;
      g_string_free(names, TRUE);
      return TRUE;
    }
    g_string_append_printf(names, "%s%s", i ? ", " : "", name);
  }
  fail(c, keypath, "unknown %s '%s' (one of %s)", dtype ? "dtype" : "qscheme", v, names->str);
  g_string_free(names, TRUE);
  return FALSE;
}

static gboolean is_per_channel_observer(const char *name) {
  return strcmp(name, "PerChannelMinMaxObserver") == 0 ||
         strcmp(name, "MovingAveragePerChannelMinMaxObserver") == 0;
}

/* An observer spec: {"observer": ..., "dtype": ..., ..., "bins": 2048}. */
static QhObserverConfig *parse_observer(Ctx *c, JsonNode *node, const char *path) {
  if (!JSON_NODE_HOLDS_OBJECT(node)) {
    fail(c, path, "must be an object (an observer spec), not %s", json_kind(node));
    return NULL;
  }
  JsonObject *obj = json_node_get_object(node);
  JsonNode *observer = json_object_get_member(obj, "observer");
  const char *name = NULL;
  if (observer != NULL) {
    char *kp = path_join(path, "observer");
    gboolean ok = is_type(observer, G_TYPE_STRING);
    if (!ok) {
      fail(c, kp, "must be a string, not %s", json_kind(observer));
    } else {
      name = json_node_get_string(observer);
      if (!qh_observer_is_host(name) && !is_known_plugin(c->known, name) &&
          strcmp(name, QH_QCONFIG_REUSE_INPUT) != 0)
        ok = fail(c, kp,
                  "unknown observer '%s' (neither a host observer nor one a plugin registers)",
                  name);
    }
    g_free(kp);
    if (!ok)
      return NULL;
  }
  gboolean host = name == NULL || qh_observer_is_host(name);
  gboolean reuse = name != NULL && strcmp(name, QH_QCONFIG_REUSE_INPUT) == 0;
  int32_t dtype = -1, qscheme = -1;
  gboolean has_min = FALSE, has_max = FALSE;
  QhObserverConfig tmp = {0};
  GPtrArray *args = g_ptr_array_new_with_free_func(g_free); /* key, value pairs */
  JsonObjectIter it;
  const char *key;
  JsonNode *v;
  gboolean ok = TRUE;
  json_object_iter_init_ordered(&it, obj);
  while (ok && json_object_iter_next_ordered(&it, &key, &v)) {
    char *kp = path_join(path, key);
    if (reuse && strcmp(key, "observer") != 0)
      ok = fail(c, kp, "ReuseInputObserver takes no arguments");
    else if (strcmp(key, "observer") == 0)
      ;
    else if (strcmp(key, "dtype") == 0)
      ok = lookup_name(c, v, kp, TRUE, &dtype);
    else if (strcmp(key, "qscheme") == 0)
      ok = lookup_name(c, v, kp, FALSE, &qscheme);
    else if (strcmp(key, "quant_min") == 0)
      ok = has_min = get_int32(c, v, kp, &tmp.quant_min);
    else if (strcmp(key, "quant_max") == 0)
      ok = has_max = get_int32(c, v, kp, &tmp.quant_max);
    else if (strcmp(key, "reduce_range") == 0) {
      if (!(ok = is_type(v, G_TYPE_BOOLEAN)))
        fail(c, kp, "must be true or false, not %s", json_kind(v));
      else
        tmp.reduce_range = json_node_get_boolean(v);
    } else if (strcmp(key, "eps") == 0) {
      if (!is_type(v, G_TYPE_INT64) && !is_type(v, G_TYPE_DOUBLE))
        ok = fail(c, kp, "must be a number, not %s", json_kind(v));
      else if (!((float)json_node_get_double(v) > 0.0f) ||
               !isfinite((float)json_node_get_double(v)))
        ok = fail(c, kp, "%g must be a positive float32 number", json_node_get_double(v));
      else
        tmp.has_eps = TRUE, tmp.eps = (float)json_node_get_double(v);
    } else if (strcmp(key, "ch_axis") == 0) {
      int32_t axis = 0;
      ok = get_int32(c, v, kp, &axis);
      tmp.ch_axis = axis;
    } else if (!JSON_NODE_HOLDS_VALUE(v) ||
               (host && json_node_get_value_type(v) == G_TYPE_STRING)) {
      ok = fail(c, kp, "must be %s, not %s",
                host ? "a number or a boolean (a host observer argument)"
                     : "a number, a string or a boolean",
                json_kind(v));
    } else {
      GType t = json_node_get_value_type(v);
      g_ptr_array_add(args, g_strdup(key));
      if (t == G_TYPE_INT64)
        g_ptr_array_add(args, g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(v)));
      else if (t == G_TYPE_DOUBLE)
        g_ptr_array_add(args, format_double(json_node_get_double(v)));
      else if (t == G_TYPE_BOOLEAN)
        g_ptr_array_add(args, g_strdup(json_node_get_boolean(v) ? "true" : "false"));
      else
        g_ptr_array_add(args, g_strdup(json_node_get_string(v)));
    }
    g_free(kp);
  }
  if (ok && has_min != has_max) {
    char *kp = path_join(path, has_min ? "quant_max" : "quant_min");
    ok = fail(c, kp, "missing: a custom range needs both quant_min and quant_max");
    g_free(kp);
  }
  QhObserverConfig *cfg = NULL;
  if (ok) {
    if (qscheme < 0)
      qscheme = name != NULL && is_per_channel_observer(name) ? QH_QSCHEME_PER_CHANNEL_AFFINE
                                                              : QH_QSCHEME_PER_TENSOR_AFFINE;
    if (name == NULL)
      name = qh_quant_default_observer(qscheme);
    if (dtype < 0)
      dtype = strcmp(name, "PlaceholderObserver") == 0 ? QH_DTYPE_FLOAT : QH_DTYPE_UINT8;
    cfg = qh_observer_config_new(name);
    cfg->dtype = dtype;
    cfg->qscheme = qscheme;
    cfg->has_range = has_min && has_max;
    cfg->quant_min = cfg->has_range ? tmp.quant_min : 0;
    cfg->quant_max = cfg->has_range ? tmp.quant_max : 0;
    cfg->reduce_range = tmp.reduce_range;
    cfg->has_eps = tmp.has_eps;
    if (tmp.has_eps)
      cfg->eps = tmp.eps;
    cfg->ch_axis = tmp.ch_axis;
    for (guint i = 0; i + 1 < args->len; i += 2)
      qh_observer_config_add_arg(cfg, args->pdata[i], args->pdata[i + 1]);
    GError *err = NULL;
    if (!qh_qconfig_check_observer(cfg, c->known, path, &err)) {
      g_set_error(c->error, err->domain, err->code, "%s: %s", c->file, err->message);
      g_error_free(err);
      qh_observer_config_free(cfg);
      cfg = NULL;
    }
  }
  g_ptr_array_unref(args);
  return cfg;
}

/* One entry: null, or {"activation": {...}, "weight": {...} or null}. */
static QhQConfigItem *parse_entry(Ctx *c, JsonNode *node, int32_t match, const char *key,
                                  const char *path) {
  QhQConfigItem *item = qh_qconfig_item_new(match, key, QH_QCONFIG_USER);
  if (JSON_NODE_HOLDS_NULL(node)) {
    item->is_none = TRUE;
    return item;
  }
  if (!JSON_NODE_HOLDS_OBJECT(node)) {
    fail(c, path, "must be null or a qconfig object ({\"activation\": ..., \"weight\": ...}), "
                  "not %s",
         json_kind(node));
    goto bad;
  }
  JsonObjectIter it;
  const char *k;
  JsonNode *v;
  json_object_iter_init_ordered(&it, json_node_get_object(node));
  while (json_object_iter_next_ordered(&it, &k, &v)) {
    char *kp = path_join(path, k);
    gboolean is_act = strcmp(k, "activation") == 0;
    gboolean ok = TRUE;
    if (!is_act && strcmp(k, "weight") != 0)
      ok = fail(c, kp, "unknown key (a qconfig has \"activation\" and \"weight\")");
    else if (JSON_NODE_HOLDS_NULL(v) && is_act)
      ok = fail(c, kp, "cannot be null (map the whole entry to null to leave nodes float)");
    else if (JSON_NODE_HOLDS_NULL(v))
      item->weight_part = QH_QCONFIG_PART_NULL;
    else {
      QhObserverConfig *cfg = parse_observer(c, v, kp);
      ok = cfg != NULL;
      if (ok && is_act)
        item->act = cfg, item->act_part = QH_QCONFIG_PART_GIVEN;
      else if (ok)
        item->weight = cfg, item->weight_part = QH_QCONFIG_PART_GIVEN;
    }
    g_free(kp);
    if (!ok)
      goto bad;
  }
  if (item->act_part == QH_QCONFIG_PART_ABSENT && item->weight_part == QH_QCONFIG_PART_ABSENT) {
    fail(c, path, "an empty qconfig: give \"activation\" and/or \"weight\", or null");
    goto bad;
  }
  return item;
bad:
  qh_qconfig_item_free(item);
  return NULL;
}

static gboolean parse_section(Ctx *c, JsonNode *node, int32_t match, const char *name,
                              GPtrArray *out) {
  if (!JSON_NODE_HOLDS_OBJECT(node))
    return fail(c, name, "must be an object keyed by %s, not %s",
                match == QH_QCONFIG_MATCH_OBJECT_TYPE ? "op type" : "node name", json_kind(node));
  JsonObjectIter it;
  const char *k;
  JsonNode *v;
  json_object_iter_init_ordered(&it, json_node_get_object(node));
  while (json_object_iter_next_ordered(&it, &k, &v)) {
    char *kp = path_join(name, k);
    gboolean ok = TRUE;
    if (*k == '\0')
      ok = fail(c, kp, "empty key");
    else if (match == QH_QCONFIG_MATCH_OBJECT_TYPE && qh_op_find("", k) == NULL &&
             !qh_qconfig_alias_is_known(k))
      ok = fail(c, kp, "'%s' is neither an ONNX op type qhost runs nor a PyTorch name of the "
                       "alias table (docs/qconfig.md)",
                k);
    if (ok) {
      QhQConfigItem *item = parse_entry(c, v, match, k, kp);
      ok = item != NULL;
      if (ok) {
        item->is_alias = match == QH_QCONFIG_MATCH_OBJECT_TYPE && qh_op_find("", k) == NULL;
        g_ptr_array_add(out, item);
      }
    }
    g_free(kp);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

void qh_qconfig_layer_free(QhQConfigLayer *layer) {
  if (layer == NULL)
    return;
  qh_qconfig_item_free(layer->global);
  g_ptr_array_unref(layer->object_types);
  g_ptr_array_unref(layer->node_names);
  g_free(layer);
}

static gboolean parse_layer(Ctx *c, JsonNode *root, QhQConfigLayer *layer) {
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(c->error, QH_ERROR, QH_ERROR_INVALID,
                "%s: the top level must be a JSON object (a qconfig mapping), not %s", c->file,
                root ? json_kind(root) : "nothing");
    return FALSE;
  }
  JsonObjectIter it;
  const char *k;
  JsonNode *v;
  json_object_iter_init_ordered(&it, json_node_get_object(root));
  while (json_object_iter_next_ordered(&it, &k, &v)) {
    gboolean ok = TRUE;
    if (strcmp(k, "base") == 0) {
      const char *b = is_type(v, G_TYPE_STRING) ? json_node_get_string(v) : NULL;
      if (b != NULL && strcmp(b, "none") == 0)
        layer->base_none = TRUE;
      else if (b == NULL || strcmp(b, "default") != 0)
        ok = fail(c, "base", "must be \"default\" or \"none\"");
    } else if (strcmp(k, "global") == 0) {
      layer->global = parse_entry(c, v, QH_QCONFIG_MATCH_GLOBAL, NULL, "global");
      ok = layer->global != NULL;
    } else if (strcmp(k, "object_type") == 0) {
      ok = parse_section(c, v, QH_QCONFIG_MATCH_OBJECT_TYPE, "object_type", layer->object_types);
    } else if (strcmp(k, "node_name") == 0) {
      ok = parse_section(c, v, QH_QCONFIG_MATCH_NODE_NAME, "node_name", layer->node_names);
    } else {
      char *kp = path_join("", k);
      ok = fail(c, kp, "unknown key (the top level has base, global, object_type, node_name)");
      g_free(kp);
    }
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

QhQConfigLayer *qh_qconfig_layer_load(const char *path, const char *data,
                                      const char *const *known_observers, GError **error) {
  g_return_val_if_fail(path != NULL, NULL);
  char *text = NULL;
  gsize len = 0;
  GError *err = NULL;
  if (data != NULL) {
    text = g_strdup(data);
    len = strlen(data);
  } else if (!g_file_get_contents(path, &text, &len, &err)) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s", err->message);
    g_error_free(err);
    return NULL;
  }
  QhQConfigLayer *layer = NULL;
  const char *body = text;
  if (len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0)
    body += 3, len -= 3;
  if (len > MAX_FILE_SIZE) {
    g_set_error(error, QH_ERROR, QH_ERROR_LIMIT, "%s: %zu bytes is above the %u-byte limit of a "
                "qconfig file", path, (size_t)len, MAX_FILE_SIZE);
    goto out;
  }
  if (!g_utf8_validate(body, (gssize)len, NULL)) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: not UTF-8 text", path);
    goto out;
  }
  if (!scan_strict(path, body, len, error))
    goto out;
  JsonParser *parser = json_parser_new();
  if (!json_parser_load_from_data(parser, body, (gssize)len, &err)) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: %s", path, err->message);
    g_error_free(err);
    g_object_unref(parser);
    goto out;
  }
  layer = g_new0(QhQConfigLayer, 1);
  layer->object_types = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qconfig_item_free);
  layer->node_names = g_ptr_array_new_with_free_func((GDestroyNotify)qh_qconfig_item_free);
  Ctx c = {path, known_observers, error};
  if (!parse_layer(&c, json_parser_get_root(parser), layer)) {
    qh_qconfig_layer_free(layer);
    layer = NULL;
  }
  g_object_unref(parser);
out:
  g_free(text);
  return layer;
}
