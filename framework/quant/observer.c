/* Observer configs, the registry of host observers (names, arguments, dtypes and
 * qschemes each accepts, exactly where PyTorch 1.13's constructors draw the line), the
 * public functions that dispatch to an observer's class, and the versioned framing of
 * saved observer state ("QHOBS", format version, observer name, config fingerprint,
 * shape, then the class's own state). The families live in quant/observers/. */
#include "quant/observer.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "hostapi/annotation.h"
#include "quant/observers/host-observers.h"

#define SAVE_MAGIC "QHOBS"
#define SAVE_MAGIC_LEN 5
#define SAVE_FORMAT_VERSION 1u

/* ---- The registry ---- */

/* DT_16: quint16 and qint16, which PyTorch 1.13 lacks; their qparams follow the 8-bit
 * formulas on the 16-bit range (docs/qconfig.md, "16-bit activations"). DT_4: quint4 and
 * qint4 (weights), the same formulas on [0, 15] and [-8, 7]. */
enum { DT_U8 = 1, DT_S8 = 2, DT_S32 = 4, DT_FLOAT = 8, DT_16 = 16, DT_4 = 32 };
enum { QS_TENSOR = 1, QS_CHANNEL = 2, QS_ANY = 4 };

typedef struct {
  const char *name;
  unsigned dtypes;
  unsigned qschemes;
  gboolean takes_range; /* dtype range, reduce_range, quant_min/max, eps as PyTorch's base */
  const QhObsArgSpec *args;
  int n_args;
  QhObsCreateFn create;
  QhObsLoadFn load;
  gboolean merge_is_exact;
} HostObserver;

static const QhObsArgSpec moving_args[] = {
    {"averaging_constant", FALSE, FALSE, 0.01, 0.0, 1.0, "weight of each new batch's min/max"},
};
static const QhObsArgSpec histogram_args[] = {
    {"bins", TRUE, FALSE, 2048, 1, 1 << 20, "histogram bins"},
    {"upsample_rate", TRUE, FALSE, 128, 1, 1 << 16, "upsampling when histograms are combined"},
};
static const QhObsArgSpec fixed_args[] = {
    {"scale", FALSE, TRUE, 0, 0x1p-126, 0x1.fffffep+127, "the fixed scale"},
    {"zero_point", TRUE, TRUE, 0, INT32_MIN, INT32_MAX, "the fixed zero point"},
};
static const QhObsArgSpec percentile_args[] = {
    {"percentile", FALSE, FALSE, 99.999, 0.0, 100.0, "percent of values kept inside the range"},
    {"num_bins", TRUE, FALSE, 2048, 1, 1 << 20, "histogram bins of the first batch"},
};
static const QhObsArgSpec entropy_args[] = {
    {"num_bins", TRUE, FALSE, 128, 2, 1 << 16, "histogram bins of the first batch"},
    {"num_quantized_bins", TRUE, FALSE, 128, 1, 1 << 16, "bins of the quantized distribution"},
};
static const QhObsArgSpec mse_args[] = {
    {"num_bins", TRUE, FALSE, 2048, 1, 1 << 20, "histogram bins of the first batch"},
    {"num_steps", TRUE, FALSE, 100, 1, 100000, "candidate ranges: max * k / num_steps"},
};

#define ARGS(a) a, (int)G_N_ELEMENTS(a)
static const HostObserver host_observers[] = {
    {"MinMaxObserver", DT_U8 | DT_S8 | DT_16 | DT_4 | DT_S32, QS_TENSOR, TRUE, NULL, 0, qh_obs_minmax_new,
     qh_obs_minmax_load, TRUE},
    {"MovingAverageMinMaxObserver", DT_U8 | DT_S8 | DT_16 | DT_4 | DT_S32, QS_TENSOR, TRUE, ARGS(moving_args),
     qh_obs_moving_minmax_new, qh_obs_minmax_load, FALSE},
    {"PerChannelMinMaxObserver", DT_U8 | DT_S8 | DT_16 | DT_4 | DT_S32, QS_CHANNEL, TRUE, NULL, 0,
     qh_obs_per_channel_new, qh_obs_minmax_load, TRUE},
    {"MovingAveragePerChannelMinMaxObserver", DT_U8 | DT_S8 | DT_16 | DT_4 | DT_S32, QS_CHANNEL, TRUE,
     ARGS(moving_args), qh_obs_moving_per_channel_new, qh_obs_minmax_load, FALSE},
    {"HistogramObserver", DT_U8 | DT_S8 | DT_16 | DT_S32, QS_TENSOR, TRUE, ARGS(histogram_args),
     qh_obs_histogram_new, qh_obs_histogram_load, FALSE},
    {"FixedQParamsObserver", DT_U8 | DT_S8 | DT_S32, QS_TENSOR, FALSE, ARGS(fixed_args),
     qh_obs_fixed_new, qh_obs_stateless_load, TRUE},
    {"PlaceholderObserver", DT_U8 | DT_S8 | DT_16 | DT_4 | DT_S32 | DT_FLOAT, QS_ANY, FALSE, NULL, 0,
     qh_obs_placeholder_new, qh_obs_stateless_load, TRUE},
    {"PercentileObserver", DT_U8 | DT_S8 | DT_S32, QS_TENSOR, TRUE, ARGS(percentile_args),
     qh_obs_percentile_new, qh_obs_orthist_load, FALSE},
    {"EntropyObserver", DT_U8 | DT_S8 | DT_S32, QS_TENSOR, TRUE, ARGS(entropy_args),
     qh_obs_entropy_new, qh_obs_orthist_load, FALSE},
    {"MSEObserver", DT_U8 | DT_S8 | DT_S32, QS_TENSOR, TRUE, ARGS(mse_args), qh_obs_mse_new,
     qh_obs_orthist_load, FALSE},
};

static const char *const host_names[] = {
    "MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver", "HistogramObserver", "FixedQParamsObserver",
    "PlaceholderObserver", "PercentileObserver", "EntropyObserver", "MSEObserver", NULL};

G_STATIC_ASSERT(G_N_ELEMENTS(host_names) == G_N_ELEMENTS(host_observers) + 1);

static const HostObserver *find_host(const char *name) {
  if (name == NULL)
    return NULL;
  for (size_t i = 0; i < G_N_ELEMENTS(host_observers); i++)
    if (strcmp(host_observers[i].name, name) == 0)
      return &host_observers[i];
  return NULL;
}

gboolean qh_observer_is_host(const char *name) { return find_host(name) != NULL; }

const char *const *qh_observer_host_names(void) { return host_names; }

/* ---- Configs ---- */

QhObserverConfig *qh_observer_config_new(const char *name) {
  QhObserverConfig *cfg = g_new0(QhObserverConfig, 1);
  cfg->name = g_strdup(name);
  cfg->dtype = QH_DTYPE_UINT8;
  cfg->qscheme = QH_QSCHEME_PER_TENSOR_AFFINE;
  if (name && strstr(name, "PerChannel"))
    cfg->qscheme = QH_QSCHEME_PER_CHANNEL_AFFINE;
  if (name && strcmp(name, "PlaceholderObserver") == 0)
    cfg->dtype = QH_DTYPE_FLOAT;
  cfg->eps = 0x1p-23f;
  cfg->args = g_ptr_array_new();
  return cfg;
}

static void arg_free(gpointer p) {
  QhObserverArg *a = p;
  g_free(a->key);
  g_free(a->value);
  g_free(a);
}

QhObserverConfig *qh_observer_config_copy(const QhObserverConfig *cfg) {
  if (cfg == NULL)
    return NULL;
  QhObserverConfig *c = g_new0(QhObserverConfig, 1);
  *c = *cfg;
  c->name = g_strdup(cfg->name);
  c->args = g_ptr_array_new();
  for (guint i = 0; cfg->args && i < cfg->args->len; i++) {
    const QhObserverArg *a = g_ptr_array_index(cfg->args, i);
    qh_observer_config_add_arg(c, a->key, a->value);
  }
  return c;
}

void qh_observer_config_free(QhObserverConfig *cfg) {
  if (cfg == NULL)
    return;
  if (cfg->args) {
    for (guint i = 0; i < cfg->args->len; i++)
      arg_free(g_ptr_array_index(cfg->args, i));
    g_ptr_array_unref(cfg->args);
  }
  g_free(cfg->name);
  g_free(cfg);
}

void qh_observer_config_add_arg(QhObserverConfig *cfg, const char *key, const char *value) {
  QhObserverArg *a = g_new0(QhObserverArg, 1);
  a->key = g_strdup(key);
  a->value = g_strdup(value);
  if (cfg->args == NULL)
    cfg->args = g_ptr_array_new();
  g_ptr_array_add(cfg->args, a);
}

const char *qh_observer_config_arg(const QhObserverConfig *cfg, const char *key) {
  for (guint i = 0; cfg->args && i < cfg->args->len; i++) {
    const QhObserverArg *a = g_ptr_array_index(cfg->args, i);
    if (a->key && key && strcmp(a->key, key) == 0)
      return a->value;
  }
  return NULL;
}

static int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

void qh_observer_config_range(const QhObserverConfig *cfg, int32_t *out_qmin, int32_t *out_qmax) {
  int64_t lo, hi;
  if (cfg->has_range) {
    lo = cfg->quant_min;
    hi = cfg->quant_max;
    if (cfg->reduce_range) {
      lo = floor_div2(lo);
      hi = floor_div2(hi);
    }
  } else if (cfg->dtype == QH_DTYPE_INT8) {
    lo = cfg->reduce_range ? -64 : -128;
    hi = cfg->reduce_range ? 63 : 127;
  } else if (cfg->dtype == QH_DTYPE_UINT8) {
    lo = 0;
    hi = cfg->reduce_range ? 127 : 255;
  } else if (cfg->dtype == QH_DTYPE_INT16) {
    lo = cfg->reduce_range ? -16384 : -32768;
    hi = cfg->reduce_range ? 16383 : 32767;
  } else if (cfg->dtype == QH_DTYPE_UINT16) {
    lo = 0;
    hi = cfg->reduce_range ? 32767 : 65535;
  } else if (cfg->dtype == QH_DTYPE_INT4) {
    lo = cfg->reduce_range ? -4 : -8;
    hi = cfg->reduce_range ? 3 : 7;
  } else if (cfg->dtype == QH_DTYPE_UINT4) {
    lo = 0;
    hi = cfg->reduce_range ? 7 : 15;
  } else if (cfg->dtype == QH_DTYPE_INT32) {
    lo = INT32_MIN;
    hi = INT32_MAX;
  } else {
    lo = hi = 0;
  }
  *out_qmin = (int32_t)lo;
  *out_qmax = (int32_t)hi;
}

static const char *dtype_word(int32_t dtype) {
  switch (dtype) {
  case QH_DTYPE_UINT8:
    return "quint8";
  case QH_DTYPE_INT8:
    return "qint8";
  case QH_DTYPE_UINT16:
    return "quint16";
  case QH_DTYPE_INT16:
    return "qint16";
  case QH_DTYPE_UINT4:
    return "quint4";
  case QH_DTYPE_INT4:
    return "qint4";
  case QH_DTYPE_INT32:
    return "qint32";
  case QH_DTYPE_FLOAT:
    return "float32";
  case QH_DTYPE_FLOAT16:
    return "float16";
  default:
    return "an unknown dtype";
  }
}

static const char *qscheme_word(int32_t q) {
  switch (q) {
  case QH_QSCHEME_PER_TENSOR_AFFINE:
    return "per_tensor_affine";
  case QH_QSCHEME_PER_TENSOR_SYMMETRIC:
    return "per_tensor_symmetric";
  case QH_QSCHEME_PER_CHANNEL_AFFINE:
    return "per_channel_affine";
  case QH_QSCHEME_PER_CHANNEL_SYMMETRIC:
    return "per_channel_symmetric";
  case QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS:
    return "per_channel_affine_float_qparams";
  default:
    return "an unknown qscheme";
  }
}

static gboolean is_symmetric(int32_t q) {
  return q == QH_QSCHEME_PER_TENSOR_SYMMETRIC || q == QH_QSCHEME_PER_CHANNEL_SYMMETRIC;
}

static gboolean parse_arg(const QhObserverConfig *cfg, const QhObsArgSpec *spec, const char *text,
                          double *out, GError **error) {
  const char *n = cfg->name;
  if (text == NULL || *text == '\0' || g_ascii_isspace(text[0])) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s: empty value", n, spec->key);
    return FALSE;
  }
  char *end = NULL;
  double v;
  if (spec->is_int) {
    errno = 0;
    gint64 iv = g_ascii_strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s: '%s' is not an integer", n,
                  spec->key, text);
      return FALSE;
    }
    v = (double)iv;
  } else {
    v = g_ascii_strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s: '%s' is not a finite number", n,
                  spec->key, text);
      return FALSE;
    }
  }
  if (!(v >= spec->min && v <= spec->max)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: %s must be in [%.17g, %.17g], got %s", n,
                spec->key, spec->min, spec->max, text);
    return FALSE;
  }
  *out = v;
  return TRUE;
}

/* Parse every argument of cfg against the observer's table into out (defaults for the
 * ones not given). */
static gboolean parse_args(const QhObserverConfig *cfg, const HostObserver *h, double *out,
                           GError **error) {
  for (int i = 0; i < h->n_args; i++)
    out[i] = h->args[i].def;
  gboolean seen[8] = {FALSE};
  for (guint i = 0; cfg->args && i < cfg->args->len; i++) {
    const QhObserverArg *a = g_ptr_array_index(cfg->args, i);
    int k = -1;
    for (int j = 0; a && a->key && j < h->n_args; j++)
      if (strcmp(h->args[j].key, a->key) == 0)
        k = j;
    if (k < 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: unknown argument '%s'", h->name,
                  a && a->key ? a->key : "(null)");
      return FALSE;
    }
    if (seen[k]) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: argument '%s' given twice", h->name,
                  a->key);
      return FALSE;
    }
    seen[k] = TRUE;
    if (!parse_arg(cfg, &h->args[k], a->value, &out[k], error))
      return FALSE;
  }
  for (int j = 0; j < h->n_args; j++)
    if (h->args[j].required && !seen[j]) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: argument '%s' is required", h->name,
                  h->args[j].key);
      return FALSE;
    }
  return TRUE;
}

static void dtype_limits(int32_t dtype, int64_t *lo, int64_t *hi) {
  if (dtype == QH_DTYPE_UINT8) {
    *lo = 0;
    *hi = 255;
  } else if (dtype == QH_DTYPE_INT8) {
    *lo = -128;
    *hi = 127;
  } else if (dtype == QH_DTYPE_UINT16) {
    *lo = 0;
    *hi = 65535;
  } else if (dtype == QH_DTYPE_INT16) {
    *lo = -32768;
    *hi = 32767;
  } else if (dtype == QH_DTYPE_UINT4) {
    *lo = 0;
    *hi = 15;
  } else if (dtype == QH_DTYPE_INT4) {
    *lo = -8;
    *hi = 7;
  } else {
    *lo = INT32_MIN;
    *hi = INT32_MAX;
  }
}

static gboolean check_with_args(const QhObserverConfig *cfg, const HostObserver **out_h,
                                double *args, GError **error) {
  if (cfg == NULL || cfg->name == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "observer config without a name");
    return FALSE;
  }
  const HostObserver *h = find_host(cfg->name);
  if (h == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "unknown observer '%s'", cfg->name);
    return FALSE;
  }
  const char *n = h->name;
  unsigned dt = cfg->dtype == QH_DTYPE_UINT8   ? DT_U8
                : cfg->dtype == QH_DTYPE_INT8  ? DT_S8
                : cfg->dtype == QH_DTYPE_INT32 ? DT_S32
                : (cfg->dtype == QH_DTYPE_UINT16 || cfg->dtype == QH_DTYPE_INT16) ? DT_16
                : (cfg->dtype == QH_DTYPE_UINT4 || cfg->dtype == QH_DTYPE_INT4)   ? DT_4
                : (cfg->dtype == QH_DTYPE_FLOAT || cfg->dtype == QH_DTYPE_FLOAT16) ? DT_FLOAT
                                                                                   : 0;
  if ((h->dtypes & dt) == 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: dtype %s is not one this observer can produce (%s)", n,
                dtype_word(cfg->dtype),
                (h->dtypes & DT_FLOAT) ? "quint8, qint8, quint16, qint16, quint4, qint4, qint32, float32, float16"
                : (h->dtypes & DT_4)   ? "quint8, qint8, quint16, qint16, quint4, qint4, qint32"
                : (h->dtypes & DT_16)  ? "quint8, qint8, quint16, qint16, qint32"
                                       : "quint8, qint8, qint32");
    return FALSE;
  }
  int32_t q = cfg->qscheme;
  gboolean per_tensor = q == QH_QSCHEME_PER_TENSOR_AFFINE || q == QH_QSCHEME_PER_TENSOR_SYMMETRIC;
  gboolean per_channel = q == QH_QSCHEME_PER_CHANNEL_AFFINE || q == QH_QSCHEME_PER_CHANNEL_SYMMETRIC;
  if (q == QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS && h->qschemes != QS_ANY) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "%s: qscheme per_channel_affine_float_qparams (embeddings, float zero points) is "
                "not supported",
                n);
    return FALSE;
  }
  if (!per_tensor && !per_channel && q != QH_QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: unknown qscheme %d", n, (int)q);
    return FALSE;
  }
  if ((h->qschemes == QS_TENSOR && !per_tensor) || (h->qschemes == QS_CHANNEL && !per_channel)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: qscheme %s is not supported (only %s)", n,
                qscheme_word(q),
                h->qschemes == QS_TENSOR ? "per_tensor_affine, per_tensor_symmetric"
                                         : "per_channel_affine, per_channel_symmetric");
    return FALSE;
  }
  if (per_channel && (cfg->ch_axis < -QH_MAX_RANK || cfg->ch_axis >= QH_MAX_RANK)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: ch_axis %d is out of range", n,
                cfg->ch_axis);
    return FALSE;
  }
  gboolean range_used = h->takes_range || strcmp(n, "FixedQParamsObserver") == 0;
  if (!h->takes_range && cfg->reduce_range) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: reduce_range is not an argument of it",
                n);
    return FALSE;
  }
  if (!h->takes_range && cfg->has_eps) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: eps is not an argument of it", n);
    return FALSE;
  }
  if (range_used && cfg->has_range) {
    int64_t lo, hi;
    dtype_limits(cfg->dtype, &lo, &hi);
    if (!(cfg->quant_min <= 0 && 0 <= cfg->quant_max)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s: quant_min %d .. quant_max %d must include 0", n, cfg->quant_min,
                  cfg->quant_max);
      return FALSE;
    }
    if (!(cfg->quant_min < cfg->quant_max)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: quant_min %d must be < quant_max %d",
                  n, cfg->quant_min, cfg->quant_max);
      return FALSE;
    }
    if (cfg->quant_min < lo || cfg->quant_max > hi) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s: quant_min %d .. quant_max %d is outside %s [%" G_GINT64_FORMAT
                  ", %" G_GINT64_FORMAT "]",
                  n, cfg->quant_min, cfg->quant_max, dtype_word(cfg->dtype), lo, hi);
      return FALSE;
    }
    if (cfg->dtype == QH_DTYPE_INT32 && (int64_t)cfg->quant_max - cfg->quant_min + 1 > (INT64_C(1) << 31)) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s: quant_min %d .. quant_max %d spans more than 2^31 values", n,
                  cfg->quant_min, cfg->quant_max);
      return FALSE;
    }
  }
  if (h->takes_range && is_symmetric(q) && cfg->reduce_range && cfg->dtype == QH_DTYPE_UINT8) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: reduce_range with a symmetric qscheme is not supported for quint8", n);
    return FALSE;
  }
  if (cfg->has_eps && !(isfinite(cfg->eps) && cfg->eps > 0.0f)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: eps must be a finite number > 0, got %g",
                n, (double)cfg->eps);
    return FALSE;
  }
  if (!parse_args(cfg, h, args, error))
    return FALSE;
  if (strcmp(n, "EntropyObserver") == 0 && args[1] > args[0]) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                "%s: num_quantized_bins %.0f must be <= num_bins %.0f", n, args[1], args[0]);
    return FALSE;
  }
  if (strcmp(n, "FixedQParamsObserver") == 0) {
    int32_t lo, hi;
    qh_observer_config_range(cfg, &lo, &hi);
    if (args[1] < lo || args[1] > hi) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s: zero_point %.0f is outside the quant range [%d, %d]", n, args[1], lo, hi);
      return FALSE;
    }
  }
  if (out_h)
    *out_h = h;
  return TRUE;
}

gboolean qh_observer_config_check(const QhObserverConfig *cfg, GError **error) {
  double args[8];
  return check_with_args(cfg, NULL, args, error);
}

/* FNV-1a over a canonical text of the config as the observer reads it. */
static uint64_t config_fingerprint(const QhObserverConfig *cfg, const HostObserver *h,
                                   const double *args) {
  int32_t lo, hi;
  qh_observer_config_range(cfg, &lo, &hi);
  float eps = cfg->has_eps ? cfg->eps : 0x1p-23f;
  uint32_t eps_bits;
  memcpy(&eps_bits, &eps, 4);
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "%s|%d|%d|%d|%d|%d|%d|%08x|%d", cfg->name, cfg->dtype, cfg->qscheme,
                         lo, hi, cfg->has_range ? 1 : 0, cfg->reduce_range ? 1 : 0, eps_bits,
                         cfg->ch_axis);
  for (int i = 0; i < h->n_args; i++)
    g_string_append_printf(s, "|%s=%a", h->args[i].key, args[i]);
  uint64_t f = UINT64_C(0xcbf29ce484222325);
  for (gsize i = 0; i < s->len; i++) {
    f ^= (guint8)s->str[i];
    f *= UINT64_C(0x100000001b3);
  }
  g_string_free(s, TRUE);
  return f;
}

/* ---- Observers ---- */

void qh_observer_init_base(QhObserver *obs, const QhObserverClass *klass,
                           const QhObserverConfig *cfg, int rank, const int64_t *dims) {
  obs->klass = klass;
  obs->config = qh_observer_config_copy(cfg);
  obs->rank = rank;
  for (int i = 0; i < rank && i < 8; i++)
    obs->dims[i] = dims[i];
}

void qh_observer_clear_base(QhObserver *obs) {
  qh_observer_config_free(obs->config);
  obs->config = NULL;
}

QhObserver *qh_observer_new(const QhObserverConfig *cfg, int rank, const int64_t *dims,
                            GError **error) {
  const HostObserver *h = NULL;
  double args[8];
  if (!check_with_args(cfg, &h, args, error))
    return NULL;
  if (rank < 0 || rank > QH_MAX_RANK || (rank > 0 && dims == NULL)) {
    g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: bad shape of rank %d", h->name, rank);
    return NULL;
  }
  for (int i = 0; i < rank; i++)
    if (dims[i] < -1) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID, "%s: bad dimension %" G_GINT64_FORMAT,
                  h->name, dims[i]);
      return NULL;
    }
  QhObsSetup setup = {.cfg = cfg, .args = args, .ch_axis = -1};
  qh_observer_config_range(cfg, &setup.qmin, &setup.qmax);
  setup.eps = cfg->has_eps ? cfg->eps : 0x1p-23f;
  if (h->qschemes == QS_CHANNEL) {
    int axis = cfg->ch_axis < 0 ? cfg->ch_axis + rank : cfg->ch_axis;
    if (axis < 0 || axis >= rank) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s: ch_axis %d does not fit a tensor of rank %d", h->name, cfg->ch_axis, rank);
      return NULL;
    }
    if (dims[axis] <= 0) {
      g_set_error(error, QH_ERROR, QH_ERROR_INVALID,
                  "%s: the channel dimension (axis %d) must be known and > 0", h->name, axis);
      return NULL;
    }
    setup.ch_axis = axis;
  }
  return h->create(&setup, rank, dims, error);
}

static gboolean check_shape(const QhObserver *obs, const QhTensor *x, GError **error) {
  const char *n = obs->config->name;
  if (x->dtype != QH_DTYPE_F32) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: expects float32 data, got %s", n,
                qh_dtype_name(x->dtype));
    return FALSE;
  }
  /* A per-tensor observer takes any shape: one shared observer sees every value of its
   * group (a MaxPool's input and output, a Concat's inputs). A per-channel one needs
   * the same channel count along ch_axis. */
  gboolean per_channel = qh_quant_qscheme_is_per_channel(obs->config->qscheme);
  int axis = obs->config->ch_axis < 0 ? obs->config->ch_axis + obs->rank : obs->config->ch_axis;
  gboolean ok = !per_channel ||
                (x->shape.rank == obs->rank && axis >= 0 && axis < obs->rank &&
                 (obs->dims[axis] < 0 || x->shape.dims[axis] == obs->dims[axis]));
  if (!ok) {
    QhShape want = qh_shape_make(obs->rank, obs->dims);
    char *a = qh_shape_to_string(&x->shape), *b = qh_shape_to_string(&want);
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: tensor of shape %s, observer made for %s",
                n, a, b);
    g_free(a);
    g_free(b);
    return FALSE;
  }
  return TRUE;
}

gboolean qh_observer_observe(QhObserver *obs, const QhTensor *x, GError **error) {
  g_return_val_if_fail(obs != NULL && x != NULL, FALSE);
  if (!check_shape(obs, x, error))
    return FALSE;
  int64_t numel;
  if (!qh_shape_numel(&x->shape, &numel, error))
    return FALSE;
  if (numel == 0)
    return TRUE; /* PyTorch ignores empty batches */
  if (x->data == NULL || x->nbytes < (size_t)numel * sizeof(float)) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH, "%s: tensor without its data",
                obs->config->name);
    return FALSE;
  }
  if (!qh_observer_is_host(obs->klass->name)) {
    float mn, mx;
    if (!qh_obs_scan(obs, x->data, (size_t)numel, &mn, &mx, error))
      return FALSE;
  }
  return obs->klass->observe(obs, x, error);
}

QhQuantParams *qh_observer_compute(QhObserver *obs, GError **error) {
  g_return_val_if_fail(obs != NULL, NULL);
  return obs->klass->compute(obs, error);
}

static gboolean same_observer(const QhObserver *a, const QhObserver *b, const char *what,
                              GError **error) {
  const char *n = a->config->name;
  gboolean ok = a->klass == b->klass && strcmp(a->config->name, b->config->name) == 0 &&
                a->rank == b->rank;
  for (int i = 0; ok && i < a->rank; i++)
    ok = a->dims[i] == b->dims[i];
  const HostObserver *h = find_host(n);
  if (ok && h) {
    double aa[8], ba[8];
    ok = parse_args(a->config, h, aa, NULL) && parse_args(b->config, h, ba, NULL) &&
         config_fingerprint(a->config, h, aa) == config_fingerprint(b->config, h, ba);
  }
  if (!ok)
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                "%s: cannot %s an observer of another config or shape", n, what);
  return ok;
}

gboolean qh_observer_merge(QhObserver *obs, const QhObserver *other, GError **error) {
  g_return_val_if_fail(obs != NULL && other != NULL, FALSE);
  if (!same_observer(obs, other, "merge", error))
    return FALSE;
  if (obs->klass->merge == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s: observer state cannot be merged",
                obs->config->name);
    return FALSE;
  }
  return obs->klass->merge(obs, other, error);
}

gboolean qh_observer_merge_is_exact(const QhObserver *obs) { return obs->klass->merge_is_exact; }

const QhObserverConfig *qh_observer_config(const QhObserver *obs) { return obs->config; }

void qh_observer_free(QhObserver *obs) {
  if (obs != NULL)
    obs->klass->free(obs);
}

/* ---- Saved state ---- */

gboolean qh_observer_save(const QhObserver *obs, GByteArray *out, GError **error) {
  const char *n = obs->config->name;
  const HostObserver *h = find_host(n);
  if (h == NULL && obs->klass->save != NULL)
    return obs->klass->save(obs, out, error); /* a plugin observer: its own versioned format */
  if (obs->klass->save == NULL || h == NULL) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED, "%s: observer state cannot be saved", n);
    return FALSE;
  }
  double args[8];
  if (!parse_args(obs->config, h, args, error))
    return FALSE;
  guint start = out->len;
  g_byte_array_append(out, (const guint8 *)SAVE_MAGIC, SAVE_MAGIC_LEN);
  qh_obs_put_u32(out, SAVE_FORMAT_VERSION);
  qh_obs_put_u32(out, (uint32_t)strlen(n));
  g_byte_array_append(out, (const guint8 *)n, (guint)strlen(n));
  qh_obs_put_u64(out, config_fingerprint(obs->config, h, args));
  qh_obs_put_u32(out, (uint32_t)obs->rank);
  for (int i = 0; i < obs->rank; i++)
    qh_obs_put_u64(out, (uint64_t)obs->dims[i]);
  guint len_at = out->len;
  qh_obs_put_u64(out, 0);
  guint body = out->len;
  if (!obs->klass->save(obs, out, error)) {
    g_byte_array_set_size(out, start);
    return FALSE;
  }
  uint64_t blen = out->len - body;
  for (int i = 0; i < 8; i++)
    out->data[len_at + i] = (guint8)(blen >> (8 * i));
  return TRUE;
}

QhObserver *qh_observer_load(const QhObserverConfig *cfg, int rank, const int64_t *dims,
                             const guint8 *data, gsize size, GError **error) {
  const HostObserver *h = NULL;
  double args[8];
  if (!check_with_args(cfg, &h, args, error))
    return NULL;
  const char *n = h->name;
  if (data == NULL || size < SAVE_MAGIC_LEN || memcmp(data, SAVE_MAGIC, SAVE_MAGIC_LEN) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE, "%s: not saved observer state (no QHOBS magic)",
                n);
    return NULL;
  }
  QhObsReader r = {data + SAVE_MAGIC_LEN, size - SAVE_MAGIC_LEN, FALSE};
  uint32_t version = qh_obs_get_u32(&r);
  if (!r.bad && version != SAVE_FORMAT_VERSION) {
    g_set_error(error, QH_ERROR, QH_ERROR_UNSUPPORTED,
                "%s: saved state has format version %u, this qhost reads %u", n, version,
                SAVE_FORMAT_VERSION);
    return NULL;
  }
  uint32_t name_len = qh_obs_get_u32(&r);
  if (r.bad || name_len > r.left || name_len != strlen(n) || memcmp(r.p, n, name_len) != 0) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                "%s: saved state is truncated or belongs to another observer", n);
    return NULL;
  }
  r.p += name_len;
  r.left -= name_len;
  uint64_t fp = qh_obs_get_u64(&r);
  if (!r.bad && fp != config_fingerprint(cfg, h, args)) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                "%s: saved state was made with another config (fingerprint differs)", n);
    return NULL;
  }
  uint32_t srank = qh_obs_get_u32(&r);
  gboolean shape_ok = !r.bad && srank == (uint32_t)rank;
  for (int i = 0; shape_ok && i < rank; i++)
    shape_ok = (int64_t)qh_obs_get_u64(&r) == dims[i] && !r.bad;
  if (!shape_ok) {
    g_set_error(error, QH_ERROR, QH_ERROR_MISMATCH,
                "%s: saved state is truncated or was made for another shape", n);
    return NULL;
  }
  uint64_t blen = qh_obs_get_u64(&r);
  if (r.bad || blen != r.left) {
    g_set_error(error, QH_ERROR, QH_ERROR_PARSE,
                "%s: saved state is truncated or has trailing bytes", n);
    return NULL;
  }
  QhObserver *obs = qh_observer_new(cfg, rank, dims, error);
  if (obs == NULL)
    return NULL;
  if (!h->load(obs, r.p, (gsize)blen, error)) {
    qh_observer_free(obs);
    return NULL;
  }
  return obs;
}

/* ---- Quant params ---- */

QhQuantParams *qh_quant_params_new(int n) {
  QhQuantParams *q = g_new0(QhQuantParams, 1);
  q->n = n;
  q->ch_axis = -1;
  q->scale = g_new0(float, n > 0 ? n : 1);
  q->zero_point = g_new0(int32_t, n > 0 ? n : 1);
  return q;
}

QhQuantParams *qh_quant_params_copy(const QhQuantParams *q) {
  if (q == NULL)
    return NULL;
  QhQuantParams *c = qh_quant_params_new(q->n);
  float *s = c->scale;
  int32_t *z = c->zero_point;
  *c = *q;
  c->scale = s;
  c->zero_point = z;
  memcpy(s, q->scale, sizeof(float) * (size_t)q->n);
  memcpy(z, q->zero_point, sizeof(int32_t) * (size_t)q->n);
  return c;
}

void qh_quant_params_free(QhQuantParams *q) {
  if (q == NULL)
    return;
  g_free(q->scale);
  g_free(q->zero_point);
  g_free(q);
}
