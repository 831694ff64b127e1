/* Observer statistics files: one calibration shard's observer states, so that shards
 * run as separate processes can be merged (docs/design.md, "Beyond one machine"). The file
 * is versioned and names the model (a hash of the model file), the backend, and every
 * quantization point (root edge, value name, observer), so states are never merged
 * into the wrong point. Writes are atomic.
 *
 * Format (little-endian): "QHSTATS\0", u32 version (1), u32 number of points, then
 * length-prefixed UTF-8 strings model hash, backend name, and per point: u32 point
 * index, u32 root node, u32 root slot, u32 root kind, string value name, string
 * observer name, u64 samples seen, u64 state length, state bytes. */
#ifndef QH_QUANT_STATS_H
#define QH_QUANT_STATS_H

#include <glib.h>

#include "quant/points.h"

G_BEGIN_DECLS

/* What identifies a statistics file's origin. */
typedef struct {
  char *model_hash; /* SHA-256 of the model file, hex */
  char *backend;
} QhStatsOrigin;

/* Write every observer point's state. */
gboolean qh_stats_save(const char *path, const QhStatsOrigin *origin, const QhQuantPoints *points,
                       int64_t samples, GError **error);

/* Load the states in path into the points: the first file replaces each observer's
 * state (first = TRUE), later ones are merged in. load_fn makes an observer from a
 * saved state for a point. *out_samples gets the file's sample count. */
typedef QhObserver *(*QhStatsLoadFn)(gpointer user_data, const QhQuantPoint *point, const guint8 *data,
                                     gsize size, GError **error);
gboolean qh_stats_load(const char *path, const QhStatsOrigin *origin, QhQuantPoints *points, gboolean first,
                       QhStatsLoadFn load_fn, gpointer load_data, int64_t *out_samples, GError **error);

G_END_DECLS

#endif
