/* DpuPosObserver: the position search of Vitis AI and MQBench (MinMaxFloorObserver +
 * PoTModeObserver), registered through the ABI's observers group.
 *
 * For one tensor: the overflow-free position comes first, pos0 = floor(log2(1/step))
 * with step = max(-min/128.5, max/127.5) (vai_q_pytorch's cpu_diff_S), so that no value
 * rounds outside [-128, 127]. The next candidates pos0+1, pos0+2, ... use finer scales
 * that clip the largest values but round the rest more finely; the one with the least
 * squared error of the fake-quantized tensor (rounded as the DPU rounds that role)
 * wins, the earlier one on a tie. Network inputs try only pos0 (MQBench).
 * Across calibration batches each observed tensor casts one vote and the most
 * frequent position wins (vai_q_pytorch's "modal" statistic; ties go to the smaller,
 * coarser position, which never overflows where the other one might). Votes add up,
 * so merging shards is exact, and the state (the vote table) saves compactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vitis.h"

/* The saved state starts with this magic and a version, so load can refuse bytes it
 * did not write; every later field is a little-endian uint32 (layout above obs_save). */
static const unsigned char STATE_MAGIC[8] = {'Q', 'H', 'V', 'I', 'T', 'I', 'S', 0};
#define STATE_VERSION 1u
#define NO_VOTE_POS 7 /* no non-zero value ever seen: any position is exact; 2^-7 is
                       * the scale of a [-1, 1) tensor, a neutral choice */

typedef struct {
  VitisRole role;
  int candidates;
  uint64_t votes[VITIS_POS_SPAN];
} PosState;

static int clamp_pos(double p) {
  return p < VITIS_POS_MIN ? VITIS_POS_MIN : p > VITIS_POS_MAX ? VITIS_POS_MAX : (int)p;
}

static double sq_error(const float *x, size_t n, int pos, VitisRounding mode) {
  double e = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i]))
      continue;
    double d = (double)x[i] - vitis_fake_quant(x[i], pos, mode);
    e += d * d;
  }
  return e;
}

int vitis_search_pos(const float *x, size_t n, VitisRole role, int candidates, int *pos) {
  double lo = 0, hi = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) /* NaN and inf carry no range information */
      continue;
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  double step = fmax(-lo / (-VITIS_QMIN + 0.5), hi / (VITIS_QMAX + 0.5));
  if (!(step > 0))
    return 0;
  int pos0 = clamp_pos(floor(log2(1.0 / step)));
  int tries = role == VITIS_ROLE_INPUT ? 1 : candidates;
  VitisRounding mode = vitis_role_rounding(role);
  int best = pos0;
  double best_err = INFINITY;
  for (int k = 0; k < tries && pos0 + k <= VITIS_POS_MAX; k++) {
    double e = sq_error(x, n, pos0 + k, mode);
    if (e < best_err) {
      best_err = e;
      best = pos0 + k;
    }
  }
  *pos = best;
  return 1;
}

static int parse_role(const QhQuantSpec *spec, VitisRole *role) {
  *role = VITIS_ROLE_ACTIVATION;
  for (size_t i = 0; i < spec->n_observer_args; i++) {
    const QhOption *o = &spec->observer_args[i];
    if (!o->key || strcmp(o->key, "role") != 0)
      continue;
    const char *v = o->value ? o->value : "";
    if (strcmp(v, "activation") == 0)
      *role = VITIS_ROLE_ACTIVATION;
    else if (strcmp(v, "input") == 0)
      *role = VITIS_ROLE_INPUT;
    else if (strcmp(v, "weight") == 0)
      *role = VITIS_ROLE_WEIGHT;
    else if (strcmp(v, "bias") == 0)
      *role = VITIS_ROLE_BIAS;
    else
      return 0;
  }
  return 1;
}

/* The DPU's quantized type is fixed; a spec asking for anything else is a user's
 * --config the annotator should already have refused. */
static QhStatus *check_spec(const QhHostApi *host, const QhQuantSpec *spec, VitisRole *role) {
  if (!spec || (spec->n_observer_args && !spec->observer_args))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": no spec");
  if (spec->dtype != QH_DTYPE_INT8 || (spec->qscheme != QH_QSCHEME_PER_TENSOR_SYMMETRIC &&
                                       spec->qscheme != QH_QSCHEME_PER_TENSOR_AFFINE) ||
      (spec->flags & QH_SPEC_REDUCE_RANGE))
    return host->status_new(QH_ERR_UNSUPPORTED, VITIS_OBSERVER_NAME
                            ": only int8 per-tensor without reduce_range (power-of-two scale, zero point 0)");
  if ((spec->flags & QH_SPEC_HAS_RANGE) && (spec->quant_min != VITIS_QMIN || spec->quant_max != VITIS_QMAX))
    return host->status_new(QH_ERR_UNSUPPORTED, VITIS_OBSERVER_NAME ": only the full int8 range [-128, 127]");
  if (!parse_role(spec, role))
    return host->status_new(QH_ERR_INVALID_ARGUMENT,
                            VITIS_OBSERVER_NAME ": role must be activation, input, weight or bias");
  return NULL;
}

static QhStatus *obs_create(void *instance, const QhHostApi *host, const QhQuantSpec *spec, int32_t rank,
                            const int64_t *dims, void **out_state) {
  (void)rank;
  (void)dims;
  VitisRole role = VITIS_ROLE_ACTIVATION;
  QhStatus *st = check_spec(host, spec, &role);
  if (st)
    return st;
  if (!out_state)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": out_state is NULL");
  PosState *s = calloc(1, sizeof *s);
  if (!s)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "out of memory");
  const VitisInstance *inst = instance;
  s->role = role;
  s->candidates = inst ? inst->candidates : 5;
  *out_state = s;
  return NULL;
}

static QhStatus *obs_observe(void *state, const QhHostApi *host, const QhTensorView *t) {
  PosState *s = state;
  if (!s || !t || t->dtype != QH_DTYPE_FLOAT || (t->nbytes && !t->data) || t->nbytes % sizeof(float))
    return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": observe wants a float tensor");
  int pos;
  if (vitis_search_pos(t->data, t->nbytes / sizeof(float), s->role, s->candidates, &pos))
    s->votes[pos - VITIS_POS_MIN]++;
  return NULL;
}

/* The modal position; NO_VOTE_POS without votes. */
static int modal_pos(const PosState *s) {
  int best = -1;
  for (int i = 0; i < VITIS_POS_SPAN; i++)
    if (s->votes[i] && (best < 0 || s->votes[i] > s->votes[best]))
      best = i;
  return best < 0 ? NO_VOTE_POS : best + VITIS_POS_MIN;
}

static QhStatus *obs_compute(void *state, const QhHostApi *host, QhQParams *out) {
  const PosState *s = state;
  if (!s || !out || out->capacity < 1 || !out->scale || !out->zero_point)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": compute_qparams: bad arguments");
  out->dtype = QH_DTYPE_INT8;
  out->qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC;
  out->quant_min = VITIS_QMIN;
  out->quant_max = VITIS_QMAX;
  out->ch_axis = -1;
  out->count = 1;
  out->scale[0] = ldexpf(1.0f, -modal_pos(s));
  out->zero_point[0] = 0;
  return NULL;
}

static QhStatus *obs_merge(void *state, const QhHostApi *host, const void *other) {
  PosState *s = state;
  const PosState *o = other;
  if (!s || !o || s->role != o->role)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": merge of states of another role");
  for (int i = 0; i < VITIS_POS_SPAN; i++) {
    if (s->votes[i] > UINT64_MAX - o->votes[i])
      return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": merge: vote count overflows");
    s->votes[i] += o->votes[i];
  }
  return NULL;
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* magic(8) version role candidates n_entries, then n_entries x (pos+bias, count_lo,
 * count_hi): only the positions that got votes. */
#define HEADER_BYTES (8 + 4 * 4)
#define ENTRY_BYTES 12

static QhStatus *obs_save(const void *state, const QhHostApi *host, QhBuffer *out) {
  const PosState *s = state;
  if (!s || !out)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": save: bad arguments");
  unsigned char buf[HEADER_BYTES + VITIS_POS_SPAN * ENTRY_BYTES];
  uint32_t n = 0;
  for (int i = 0; i < VITIS_POS_SPAN; i++) {
    if (!s->votes[i])
      continue;
    unsigned char *e = buf + HEADER_BYTES + n++ * ENTRY_BYTES;
    put_u32(e, (uint32_t)i);
    put_u32(e + 4, (uint32_t)s->votes[i]);
    put_u32(e + 8, (uint32_t)(s->votes[i] >> 32));
  }
  memcpy(buf, STATE_MAGIC, 8);
  put_u32(buf + 8, STATE_VERSION);
  put_u32(buf + 12, (uint32_t)s->role);
  put_u32(buf + 16, (uint32_t)s->candidates);
  put_u32(buf + 20, n);
  return host->buffer_append(out, buf, HEADER_BYTES + n * ENTRY_BYTES);
}

static QhStatus *obs_load(void *instance, const QhHostApi *host, const QhQuantSpec *spec, int32_t rank,
                          const int64_t *dims, const void *data, size_t size, void **out_state) {
  const unsigned char *p = data;
  if (!p || size < HEADER_BYTES || memcmp(p, STATE_MAGIC, 8) != 0)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": load: not a " VITIS_OBSERVER_NAME " state");
  if (get_u32(p + 8) != STATE_VERSION)
    return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": load: state version %u, this plugin reads %u",
                          get_u32(p + 8), STATE_VERSION);
  uint32_t n = get_u32(p + 20);
  if (n > VITIS_POS_SPAN || size != HEADER_BYTES + (size_t)n * ENTRY_BYTES)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": load: truncated or oversized state");
  void *fresh = NULL;
  QhStatus *st = obs_create(instance, host, spec, rank, dims, &fresh);
  if (st)
    return st;
  PosState *s = fresh;
  if (get_u32(p + 12) != (uint32_t)s->role || get_u32(p + 16) != (uint32_t)s->candidates) {
    free(s);
    return host->status_new(QH_ERR_INVALID_ARGUMENT,
                            VITIS_OBSERVER_NAME ": load: the state was saved for another role or candidate count");
  }
  for (uint32_t k = 0; k < n; k++) {
    const unsigned char *e = p + HEADER_BYTES + k * ENTRY_BYTES;
    uint32_t i = get_u32(e);
    uint64_t c = (uint64_t)get_u32(e + 4) | (uint64_t)get_u32(e + 8) << 32;
    if (i >= VITIS_POS_SPAN || c == 0 || s->votes[i]) {
      free(s);
      return host->status_new(QH_ERR_INVALID_ARGUMENT, VITIS_OBSERVER_NAME ": load: corrupt vote table");
    }
    s->votes[i] = c;
  }
  *out_state = s;
  return NULL;
}

static void obs_destroy(void *state) { free(state); }

const QhObserverOps vitis_observer = {
    QH_STRUCT_HEADER(QhObserverOps),
    .name = VITIS_OBSERVER_NAME,
    .description = "power-of-two position search (least squared error of pos0..pos0+n-1), modal across batches",
    .flags = QH_OBSERVER_MERGE_IS_EXACT,
    .create = obs_create,
    .observe = obs_observe,
    .compute_qparams = obs_compute,
    .merge = obs_merge,
    .save = obs_save,
    .load = obs_load,
    .destroy = obs_destroy,
};
