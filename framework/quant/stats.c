/* Reading and writing observer statistics files (format in stats.h). Every length and
 * count read from a file is checked against what remains of the file before it is
 * used; a file for another model, backend or annotation is refused naming what
 * differs. */
#include <string.h>

#include "core/error.h"
#include "quant/stats.h"

#define STATS_MAGIC "QHSTATS"
#define STATS_VERSION 1u

static void put_u32(GByteArray *b, guint32 v) {
  guint32 le = GUINT32_TO_LE(v);
  g_byte_array_append(b, (const guint8 *)&le, 4);
}
static void put_u64(GByteArray *b, guint64 v) {
  guint64 le = GUINT64_TO_LE(v);
  g_byte_array_append(b, (const guint8 *)&le, 8);
}
static void put_str(GByteArray *b, const char *s) {
  put_u32(b, (guint32)strlen(s));
  g_byte_array_append(b, (const guint8 *)s, (guint)strlen(s));
}

/* Points with an observer: the ones a statistics file carries. */
static guint32 observed_points(const QhQuantPoints *points) {
  guint32 n = 0;
  for (guint i = 0; i < points->points->len; i++)
    n += ((const QhQuantPoint *)points->points->pdata[i])->observer != NULL;
  return n;
}

gboolean qh_stats_save(const char *path, const QhStatsOrigin *origin, const QhQuantPoints *points,
                       int64_t samples, GError **error) {
  GByteArray *b = g_byte_array_new();
  g_byte_array_append(b, (const guint8 *)STATS_MAGIC, 8);
  put_u32(b, STATS_VERSION);
  put_u32(b, observed_points(points));
  put_str(b, origin->model_hash);
  put_str(b, origin->backend);
  gboolean ok = TRUE;
  for (guint i = 0; i < points->points->len && ok; i++) {
    const QhQuantPoint *pt = points->points->pdata[i];
    if (pt->observer == NULL)
      continue;
    put_u32(b, (guint32)pt->index);
    put_u32(b, pt->root.node);
    put_u32(b, pt->root.slot);
    put_u32(b, (guint32)pt->root.kind);
    put_str(b, pt->name ? pt->name : "");
    put_str(b, qh_observer_config(pt->observer)->name);
    put_u64(b, (guint64)samples);
    GByteArray *state = g_byte_array_new();
    ok = qh_observer_save(pt->observer, state, error);
    if (ok) {
      put_u64(b, state->len);
      g_byte_array_append(b, state->data, state->len);
    } else {
      g_prefix_error(error, "%s: value '%s': ", path, pt->name ? pt->name : "?");
    }
    g_byte_array_unref(state);
  }
  if (ok) {
    /* g_file_set_contents writes a temporary file and renames it over path */
    GError *local = NULL;
    ok = g_file_set_contents(path, (const char *)b->data, (gssize)b->len, &local);
    if (!ok) {
      g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s", local->message);
      g_error_free(local);
    }
  }
  g_byte_array_unref(b);
  return ok;
}

typedef struct {
  const guint8 *p;
  gsize left;
  const char *path;
} Reader;

static gboolean take(Reader *r, gsize n, const guint8 **out, GError **error) {
  if (n > r->left) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: truncated statistics file", r->path);
    return FALSE;
  }
  *out = r->p;
  r->p += n;
  r->left -= n;
  return TRUE;
}
static gboolean get_u32(Reader *r, guint32 *v, GError **error) {
  const guint8 *p;
  if (!take(r, 4, &p, error))
    return FALSE;
  memcpy(v, p, 4);
  *v = GUINT32_FROM_LE(*v);
  return TRUE;
}
static gboolean get_u64(Reader *r, guint64 *v, GError **error) {
  const guint8 *p;
  if (!take(r, 8, &p, error))
    return FALSE;
  memcpy(v, p, 8);
  *v = GUINT64_FROM_LE(*v);
  return TRUE;
}
static gboolean get_str(Reader *r, char **out, GError **error) {
  guint32 n;
  const guint8 *p;
  if (!get_u32(r, &n, error) || !take(r, n, &p, error))
    return FALSE;
  if (!g_utf8_validate((const char *)p, n, NULL) || memchr(p, 0, n)) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: a name in the file is not valid UTF-8", r->path);
    return FALSE;
  }
  *out = g_strndup((const char *)p, n);
  return TRUE;
}

gboolean qh_stats_load(const char *path, const QhStatsOrigin *origin, QhQuantPoints *points, gboolean first,
                       QhStatsLoadFn load_fn, gpointer load_data, int64_t *out_samples, GError **error) {
  char *contents = NULL;
  gsize len = 0;
  GError *local = NULL;
  if (!g_file_get_contents(path, &contents, &len, &local)) {
    g_set_error(error, QH_ERROR, QH_ERROR_IO, "%s", local->message);
    g_error_free(local);
    return FALSE;
  }
  Reader r = {(const guint8 *)contents, len, path};
  const guint8 *magic;
  guint32 version = 0, n = 0;
  char *model = NULL, *backend = NULL;
  gboolean ok = take(&r, 8, &magic, error);
  if (ok && memcmp(magic, STATS_MAGIC, 8) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: not a qhost statistics file", path);
    ok = FALSE;
  }
  ok = ok && get_u32(&r, &version, error);
  if (ok && version != STATS_VERSION) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s: statistics format version %u (this qhost reads %u)",
                path, version, STATS_VERSION);
    ok = FALSE;
  }
  ok = ok && get_u32(&r, &n, error) && get_str(&r, &model, error) && get_str(&r, &backend, error);
  if (ok && strcmp(model, origin->model_hash) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: statistics of another model file", path);
    ok = FALSE;
  }
  if (ok && strcmp(backend, origin->backend) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: statistics made for backend '%s', not '%s'", path,
                backend, origin->backend);
    ok = FALSE;
  }
  guint32 expected = observed_points(points);
  if (ok && n != expected) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                "%s: %u observed points, the annotation has %u (another --config or backend options?)", path, n,
                expected);
    ok = FALSE;
  }
  int64_t samples = 0;
  for (guint32 k = 0; ok && k < n; k++) {
    guint32 index, node, slot, kind;
    guint64 seen, size;
    char *value = NULL, *observer = NULL;
    const guint8 *state;
    ok = get_u32(&r, &index, error) && get_u32(&r, &node, error) && get_u32(&r, &slot, error) &&
         get_u32(&r, &kind, error) && get_str(&r, &value, error) && get_str(&r, &observer, error) &&
         get_u64(&r, &seen, error) && get_u64(&r, &size, error) && take(&r, size, &state, error);
    QhQuantPoint *pt = ok && index < points->points->len ? points->points->pdata[index] : NULL;
    if (ok && (pt == NULL || pt->observer == NULL || pt->root.node != node || pt->root.slot != slot ||
               (guint32)pt->root.kind != kind || g_strcmp0(pt->name, value) != 0 ||
               strcmp(qh_observer_config(pt->observer)->name, observer) != 0)) {
      g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                  "%s: point %u ('%s', %s) does not match this model's annotation", path, index, value, observer);
      ok = FALSE;
    }
    if (ok) {
      samples = (int64_t)seen;
      QhObserver *loaded = load_fn(load_data, pt, state, (gsize)size, error);
      if (loaded == NULL) {
        g_prefix_error(error, "%s: value '%s': ", path, value);
        ok = FALSE;
      } else if (first) {
        qh_observer_free(pt->observer);
        pt->observer = loaded;
      } else {
        ok = qh_observer_merge(pt->observer, loaded, error);
        if (!ok)
          g_prefix_error(error, "%s: value '%s': ", path, value);
        qh_observer_free(loaded);
      }
    }
    g_free(value);
    g_free(observer);
  }
  if (ok && r.left != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: %" G_GSIZE_FORMAT " trailing bytes", path, r.left);
    ok = FALSE;
  }
  if (ok)
    *out_samples = samples;
  g_free(model);
  g_free(backend);
  g_free(contents);
  return ok;
}
