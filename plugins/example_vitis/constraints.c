/* refine: the DPU compiler's rules on positions, enforced after calibration the way
 * vai_q_onnx's refine.py does, each change made through host->qparams_set with a
 * reason the quantize report prints per tensor. pos is the p of scale = 2^-p.
 *  - form: every quantized edge is int8, zero point 0, a power-of-two scale (a scale
 *    from elsewhere gets the position below its own, i.e. the next power of two up,
 *    which can only widen the range);
 *  - concat: inputs and output take the smallest position (one shared scale, since
 *    the DPU concatenates bytes);
 *  - pooling: input and output take the smaller position (max/avg pool do not shift);
 *  - add: shift_read = max(ipos) - min(ipos) <= 15 (the larger ipos is lowered) and
 *    shift_write = min(ipos) - opos in [-15, 15] (opos moves);
 *  - mul: shift_write = ipos0 + ipos1 - opos in [0, 32] (opos moves; Quark's rule);
 *  - hard-sigmoid: ipos in [0, 15], opos >= 7, 14 + ipos - opos >= 0;
 *  - conv / gemm / matmul: shift_cut = wpos + ipos - opos in [0, 16] (wpos moves), then
 *    shift_bias = wpos + ipos - bpos in [min(0, shift_cut - 16), 16] (bpos moves; the
 *    lower bound is vai_q's min(0, -(24 - (8 + shift_cut)))).
 * Alignments feed each other (a pool after a concat), so they repeat until nothing
 * changes; shift_cut and shift_bias move only weight and bias positions, which nothing
 * else reads, so they run once at the end. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vitis-graph.h"
#include "vitis.h"

#define MAX_ROUNDS 16

typedef struct {
  const QhHostApi *h;
  QhGraphView *g;
  int changes;
} Ref;

static QhEdgeRef in_e(uint32_t n, uint32_t s) { return (QhEdgeRef){n, s, QH_EDGE_INPUT, 0}; }
static QhEdgeRef out_e(uint32_t n, uint32_t s) { return (QhEdgeRef){n, s, QH_EDGE_OUTPUT, 0}; }

/* The position of a quantized edge; 0 when the edge is not quantized. */
static int get_pos(Ref *r, const QhEdgeRef *e, int *pos) {
  QhQParams q = {QH_STRUCT_HEADER(QhQParams)};
  QhStatus *st = r->h->qparams_get(r->g, e, &q);
  r->h->status_free(st);
  return !st && q.count == 1 && q.scale && vitis_scale_pos(q.scale[0], pos);
}

static QhStatus *set_pos(Ref *r, const QhEdgeRef *e, int pos, const char *reason) {
  float scale = ldexpf(1.0f, -pos);
  int32_t zp = 0;
  QhQParams q = {QH_STRUCT_HEADER(QhQParams), .dtype = QH_DTYPE_INT8, .qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC,
                 .quant_min = VITIS_QMIN, .quant_max = VITIS_QMAX, .ch_axis = -1, .count = 1, .capacity = 1,
                 .scale = &scale, .zero_point = &zp};
  r->changes++;
  return r->h->qparams_set(r->g, e, &q, reason);
}

static const char *name_of(Ref *r, uint32_t n) {
  const char *s = r->h->node_name(r->g, n);
  return s ? s : "?";
}

/* The edge holding the position of input `slot` of n: its own point, or the point of
 * the producer's output it reads. */
static int in_edge(Ref *r, uint32_t n, uint32_t slot, QhEdgeRef *e, int *pos) {
  *e = in_e(n, slot);
  if (get_pos(r, e, pos))
    return 1;
  uint32_t v = r->h->node_input(r->g, n, slot), p = v == QH_INVALID_ID ? QH_INVALID_ID : r->h->value_producer(r->g, v);
  for (uint32_t o = 0; p != QH_INVALID_ID && o < r->h->node_output_count(r->g, p); o++)
    if (r->h->node_output(r->g, p, o) == v) {
      *e = out_e(p, o);
      return get_pos(r, e, pos);
    }
  return 0;
}

/* The edge holding the output position of the unit starting at n. */
static int unit_out_edge(Ref *r, uint32_t n, QhEdgeRef *e, int *pos) {
  *e = out_e(n, 0);
  if (get_pos(r, e, pos))
    return 1;
  uint32_t last = vg_unit_last(r->h, r->g, n);
  *e = out_e(last, 0);
  return last != n && get_pos(r, e, pos);
}

/* Rule "form": any quantized edge not in the DPU's format is put into it. */
static QhStatus *normalize(Ref *r, uint32_t n) {
  for (int kind = QH_EDGE_INPUT; kind <= QH_EDGE_OUTPUT; kind++) {
    uint32_t count = kind == QH_EDGE_INPUT ? r->h->node_input_count(r->g, n) : r->h->node_output_count(r->g, n);
    for (uint32_t s = 0; s < count; s++) {
      QhEdgeRef e = {n, s, kind, 0};
      QhQParams q = {QH_STRUCT_HEADER(QhQParams)};
      QhStatus *st = r->h->qparams_get(r->g, &e, &q);
      int pos;
      if (st) {
        r->h->status_free(st);
        continue;
      }
      if (q.count != 1 || !q.scale || !q.zero_point || !(q.scale[0] > 0))
        return qh_status_newf(r->h, QH_ERR_UNSUPPORTED, "node '%s': %zu qparams on one edge; the DPU quantizes per tensor",
                              name_of(r, n), q.count);
      if (vitis_scale_pos(q.scale[0], &pos) && q.zero_point[0] == 0 && q.dtype == QH_DTYPE_INT8 &&
          q.quant_min == VITIS_QMIN && q.quant_max == VITIS_QMAX)
        continue;
      pos = (int)floor(-log2(q.scale[0]));
      char why[160];
      snprintf(why, sizeof why, "dpu form: node '%s': scale %.9g zero point %d is not int8 2^-pos, pos %d",
               name_of(r, n), (double)q.scale[0], q.zero_point[0], pos);
      if ((st = set_pos(r, &e, pos, why)))
        return st;
    }
  }
  return NULL;
}

static QhStatus *align_concat(Ref *r, uint32_t n) {
  uint32_t k = r->h->node_input_count(r->g, n);
  QhEdgeRef oe, e;
  int opos, m, p;
  if (!unit_out_edge(r, n, &oe, &opos))
    return NULL;
  m = opos;
  for (uint32_t s = 0; s < k; s++)
    if (in_edge(r, n, s, &e, &p) && p < m)
      m = p;
  char why[200];
  snprintf(why, sizeof why, "dpu concat: node '%s': inputs and output aligned to the smallest pos %d", name_of(r, n), m);
  QhStatus *st = NULL;
  if (opos != m)
    st = set_pos(r, &oe, m, why);
  for (uint32_t s = 0; s < k && !st; s++)
    if (in_edge(r, n, s, &e, &p) && p != m)
      st = set_pos(r, &e, m, why);
  return st;
}

static QhStatus *align_pool(Ref *r, uint32_t n) {
  QhEdgeRef ie, oe;
  int ipos, opos;
  if (!in_edge(r, n, 0, &ie, &ipos) || !unit_out_edge(r, n, &oe, &opos) || ipos == opos)
    return NULL;
  char why[200];
  snprintf(why, sizeof why, "dpu pool: node '%s': input pos %d and output pos %d aligned to %d", name_of(r, n), ipos,
           opos, ipos < opos ? ipos : opos);
  return ipos < opos ? set_pos(r, &oe, ipos, why) : set_pos(r, &ie, opos, why);
}

static QhStatus *shift_add(Ref *r, uint32_t n) {
  QhEdgeRef e[2], oe;
  int p[2], opos;
  if (!in_edge(r, n, 0, &e[0], &p[0]) || !in_edge(r, n, 1, &e[1], &p[1]) || !unit_out_edge(r, n, &oe, &opos))
    return NULL;
  char why[200];
  int hi = p[0] > p[1] ? 0 : 1, lo = 1 - hi;
  if (p[hi] - p[lo] > 15) {
    snprintf(why, sizeof why, "dpu add shift_read: node '%s': %d - %d > 15, input pos %d -> %d", name_of(r, n), p[hi],
             p[lo], p[hi], p[lo] + 15);
    return set_pos(r, &e[hi], p[lo] + 15, why);
  }
  int sw = p[lo] - opos, want = sw < -15 ? -15 : sw > 15 ? 15 : sw;
  if (want == sw)
    return NULL;
  snprintf(why, sizeof why, "dpu add shift_write: node '%s': %d - %d = %d outside [-15, 15], output pos -> %d",
           name_of(r, n), p[lo], opos, sw, p[lo] - want);
  return set_pos(r, &oe, p[lo] - want, why);
}

static QhStatus *shift_mul(Ref *r, uint32_t n) {
  QhEdgeRef e, oe;
  int p0, p1, opos;
  if (!in_edge(r, n, 0, &e, &p0) || !in_edge(r, n, 1, &e, &p1) || !unit_out_edge(r, n, &oe, &opos))
    return NULL;
  int sw = p0 + p1 - opos, want = sw < 0 ? 0 : sw > 32 ? 32 : sw;
  if (want == sw)
    return NULL;
  char why[200];
  snprintf(why, sizeof why, "dpu mul shift_write: node '%s': %d + %d - %d = %d outside [0, 32], output pos -> %d",
           name_of(r, n), p0, p1, opos, sw, p0 + p1 - want);
  return set_pos(r, &oe, p0 + p1 - want, why);
}

static QhStatus *hard_sigmoid(Ref *r, uint32_t n) {
  QhEdgeRef ie, oe;
  int ipos, opos;
  if (!in_edge(r, n, 0, &ie, &ipos) || !unit_out_edge(r, n, &oe, &opos))
    return NULL;
  int ni = ipos < 0 ? 0 : ipos > 15 ? 15 : ipos, no = opos < 7 ? 7 : opos;
  if (14 + ni - no < 0)
    no = 14 + ni;
  char why[200];
  snprintf(why, sizeof why, "dpu hard-sigmoid: node '%s': ipos %d -> %d, opos %d -> %d (ipos in [0, 15], opos >= 7, "
           "14 + ipos - opos >= 0)", name_of(r, n), ipos, ni, opos, no);
  QhStatus *st = ni != ipos ? set_pos(r, &ie, ni, why) : NULL;
  return st ? st : no != opos ? set_pos(r, &oe, no, why) : NULL;
}

static QhStatus *shift_cut_bias(Ref *r, uint32_t n) {
  QhEdgeRef ie, we, be, oe;
  int ipos, wpos, bpos, opos;
  if (!in_edge(r, n, 0, &ie, &ipos) || !unit_out_edge(r, n, &oe, &opos))
    return NULL;
  we = in_e(n, 1);
  if (!get_pos(r, &we, &wpos))
    return NULL;
  char why[240];
  int sc = wpos + ipos - opos, want = sc < 0 ? 0 : sc > 16 ? 16 : sc;
  if (want != sc) {
    snprintf(why, sizeof why, "dpu shift_cut: node '%s': wpos + ipos - opos = %d + %d - %d = %d outside [0, 16], "
             "wpos -> %d", name_of(r, n), wpos, ipos, opos, sc, want + opos - ipos);
    QhStatus *st = set_pos(r, &we, want + opos - ipos, why);
    if (st)
      return st;
    wpos = want + opos - ipos;
    sc = want;
  }
  be = in_e(n, 2);
  if (r->h->node_input_count(r->g, n) < 3 || !get_pos(r, &be, &bpos))
    return NULL;
  int lo = sc - 16 < 0 ? sc - 16 : 0, sb = wpos + ipos - bpos, sbw = sb < lo ? lo : sb > 16 ? 16 : sb;
  if (sbw == sb)
    return NULL;
  snprintf(why, sizeof why, "dpu shift_bias: node '%s': wpos + ipos - bpos = %d + %d - %d = %d outside [%d, 16], "
           "bpos -> %d", name_of(r, n), wpos, ipos, bpos, sb, lo, wpos + ipos - sbw);
  return set_pos(r, &be, wpos + ipos - sbw, why);
}

static QhStatus *refine(void *instance, const QhHostApi *h, QhGraphView *g) {
  (void)instance;
  if (!h || !g)
    return h ? h->status_new(QH_ERR_INVALID_ARGUMENT, "refine: bad arguments") : NULL;
  Ref r = {.h = h, .g = g};
  uint32_t n_nodes = h->graph_node_count(g);
  QhStatus *st = NULL;
  for (uint32_t n = 0; n < n_nodes && !st; n++)
    if (h->node_is_live(g, n))
      st = normalize(&r, n);
  int rounds = 0, before;
  do {
    before = r.changes;
    for (uint32_t n = 0; n < n_nodes && !st; n++) {
      if (vg_is_op(h, g, n, "Concat"))
        st = align_concat(&r, n);
      else if (vg_is_op(h, g, n, "MaxPool") || vg_is_avgpool(h, g, n))
        st = align_pool(&r, n);
      else if (vg_is_op(h, g, n, "Add"))
        st = shift_add(&r, n);
      else if (vg_is_op(h, g, n, "Mul"))
        st = shift_mul(&r, n);
      else if (vg_is_op(h, g, n, "HardSigmoid"))
        st = hard_sigmoid(&r, n);
    }
  } while (!st && r.changes != before && ++rounds < MAX_ROUNDS);
  if (!st && r.changes != before)
    h->report(QH_LOG_WARNING, "dpu: position alignments did not settle; some DPU rules may not hold");
  for (uint32_t n = 0; n < n_nodes && !st; n++)
    if (vg_weighted(h, g, n))
      st = shift_cut_bias(&r, n);
  if (!st) {
    char line[120];
    snprintf(line, sizeof line, "dpu: refine made %d position change(s) for the DPU's rules", r.changes);
    h->report(QH_LOG_INFO, line);
  }
  return st;
}

const QhRefineOps vitis_refine = {QH_STRUCT_HEADER(QhRefineOps), .refine = refine};
