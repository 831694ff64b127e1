/* The declarative annotator: for every pattern match (pattern-match.c) it takes the
 * resolved qconfig of the match's root node, picks the first dtype config of the
 * pattern the qconfig satisfies (PyTorch 1.13's
 * _is_pattern_dtype_config_and_qconfig_supported_by_backend and
 * _qconfig_satisfies_dtype_config_constraints, plus upstream's exact scale / zero point
 * for fixed-qparams ops), and writes PT2E specs: activation inputs observed unless
 * their producer's output already is (implicit sharing), constant weights with the
 * weight observer on the output-channel axis, float bias, the output observed, shared
 * with the input, fixed, or left alone per observation type. Every node gets a report
 * entry. docs/backend-config.md describes the mapping and the deviations. */
#include <math.h>
#include <string.h>

#include "quant/backend-annotate-private.h"

/* ---- dtype configs against a qconfig ---- */

static const char *dtype_text(int32_t dtype) {
  const char *name = NULL;
  int64_t lo, hi;
  if (qh_quant_dtype_range(dtype, &lo, &hi, &name))
    return name;
  return qh_dtype_name((QhDType)dtype);
}

/* Observers PyTorch gives no quant_min/quant_max or no eps attribute. */
static gboolean observer_has_range(const QhObserverConfig *cfg) {
  return strcmp(cfg->name, "PlaceholderObserver") != 0 && strcmp(cfg->name, "ReuseInputObserver") != 0;
}
static gboolean observer_has_eps(const QhObserverConfig *cfg) {
  return observer_has_range(cfg) && strcmp(cfg->name, "FixedQParamsObserver") != 0;
}

/* _qconfig_satisfies_dtype_config_constraints for one observer; NULL when satisfied. */
static char *constraint_violation(const QhObserverConfig *cfg, const QhDTypeConstraint *k,
                                  const char *what) {
  /* 1.13 checks the range only when the backend gives both bounds. */
  uint32_t both = QH_CONSTRAINT_QUANT_MIN_LOWER_BOUND | QH_CONSTRAINT_QUANT_MAX_UPPER_BOUND;
  if ((k->flags & both) == both) {
    if (!observer_has_range(cfg))
      return g_strdup_printf("%s: %s has no quant_min/quant_max for quant_min_lower_bound %d / "
                             "quant_max_upper_bound %d", what, cfg->name, k->quant_min_lower_bound,
                             k->quant_max_upper_bound);
    int32_t qmin, qmax;
    qh_observer_config_range(cfg, &qmin, &qmax);
    if (qmin < k->quant_min_lower_bound || qmax > k->quant_max_upper_bound)
      return g_strdup_printf("%s quant range [%d, %d] is outside the backend's [%d, %d] "
                             "(quant_min_lower_bound / quant_max_upper_bound)", what, qmin, qmax,
                             k->quant_min_lower_bound, k->quant_max_upper_bound);
  }
  if (k->flags & QH_CONSTRAINT_SCALE_MIN_LOWER_BOUND) {
    if (!observer_has_eps(cfg))
      return g_strdup_printf("%s: %s has no eps for scale_min_lower_bound %.9g", what, cfg->name,
                             (double)k->scale_min_lower_bound);
    float eps = cfg->has_eps ? cfg->eps : 0x1p-23f;
    if (eps < k->scale_min_lower_bound)
      return g_strdup_printf("%s eps %.9g is below scale_min_lower_bound %.9g", what, (double)eps,
                             (double)k->scale_min_lower_bound);
  }
  uint32_t exact = QH_CONSTRAINT_SCALE_EXACT | QH_CONSTRAINT_ZERO_POINT_EXACT;
  if ((k->flags & exact) == exact) {
    if (strcmp(cfg->name, "FixedQParamsObserver") != 0)
      return g_strdup_printf("%s: a fixed-qparams op needs FixedQParamsObserver(scale=%.9g, "
                             "zero_point=%d), the qconfig has %s", what, (double)k->scale_exact,
                             k->zero_point_exact, cfg->name);
    QhQuantSpec spec;
    QhOption *storage = NULL;
    qh_qconfig_to_spec(cfg, &spec, &storage);
    char *msg = NULL;
    if (spec.scale != k->scale_exact || spec.zero_point != k->zero_point_exact)
      msg = g_strdup_printf("%s fixed qparams (scale %.9g, zero_point %d) differ from the "
                            "backend's scale_exact %.9g / zero_point_exact %d", what,
                            (double)spec.scale, spec.zero_point, (double)k->scale_exact,
                            k->zero_point_exact);
    g_free(storage);
    if (msg)
      return msg;
  }
  return NULL;
}

static char *tensor_violation(const QhObserverConfig *cfg, const QhDTypeConstraint *k,
                              const char *what) {
  if (cfg == NULL)
    return g_strdup_printf("%s: the qconfig has no observer for it, the dtype config wants %s", what,
                           dtype_text(k->dtype));
  if (cfg->dtype != k->dtype)
    return g_strdup_printf("%s dtype is %s, the dtype config wants %s", what, dtype_text(cfg->dtype),
                           dtype_text(k->dtype));
  return constraint_violation(cfg, k, what);
}

char *qh_dtype_config_violation(const QhDTypeConfig *dc, const QhQConfig *qc, gboolean has_weight) {
  if (dc->flags & QH_DTYPE_CONFIG_IS_DYNAMIC)
    return g_strdup("is_dynamic: dynamic quantization is not supported");
  char *v = NULL;
  if (dc->input && (v = tensor_violation(qc->activation, dc->input, "input activation")))
    return v;
  if (dc->weight && has_weight) {
    /* No weight part: PyTorch's default_weight_observer, as the specs use. */
    QhObserverConfig *dflt = NULL;
    if (qc->weight == NULL) {
      dflt = qh_observer_config_new("MinMaxObserver");
      dflt->dtype = QH_DTYPE_INT8;
      dflt->qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC;
    }
    v = tensor_violation(qc->weight ? qc->weight : dflt, dc->weight, "weight");
    qh_observer_config_free(dflt);
    if (v)
      return v;
  }
  /* The qconfigs of static int8 quantization always give float bias; a 1.2 config may
   * ask for an int32 bias derived from the input and weight scales instead. */
  if (dc->bias && has_weight && dc->bias->dtype != QH_DTYPE_FLOAT && !qh_dtype_config_derives_bias(dc))
    return g_strdup_printf("bias dtype is float, the dtype config wants %s", dtype_text(dc->bias->dtype));
  if (dc->output && (v = tensor_violation(qc->activation, dc->output, "output activation")))
    return v;
  return NULL;
}

gboolean qh_dtype_config_derives_bias(const QhDTypeConfig *dc) {
  return QH_HAS_FIELD(dc, QhDTypeConfig, bias_derivation) &&
         dc->bias_derivation == QH_BIAS_INT32_INPUT_TIMES_WEIGHT;
}

/* QH_BIAS_INT32_INPUT_TIMES_WEIGHT: scale = input scale x weight scale per weight channel,
 * zero point 0 (sources: the activation input, then the weight). */
static QhStatus *derive_bias(void *user_data, const QhHostApi *host, const QhQParams *const *src,
                             size_t n, QhQParams *out) {
  (void)user_data;
  if (n != 2 || src[0]->count != 1)
    return host->status_new(QH_ERR_INVALID_ARGUMENT,
                            "an int32 bias derives from one per-tensor input scale and the weight's");
  if (src[1]->count > out->capacity)
    return host->status_new(QH_ERR_INVALID_ARGUMENT, "the weight has more channels than the bias");
  for (size_t i = 0; i < src[1]->count; i++) {
    out->scale[i] = src[0]->scale[0] * src[1]->scale[i];
    out->zero_point[i] = 0;
  }
  out->count = src[1]->count;
  return NULL;
}

/* ---- writing specs ---- */

typedef struct {
  const QhBackendConfig *bc;
  QhGraph *graph;
  QhGraphFacts facts;
  QhAnnotationSet *set;
  QhQuantReport *report;
  QhFloatRegions regions;
} Ctx;

static QhEdgeRef edge(int node, int slot, int kind) {
  return (QhEdgeRef){(uint32_t)node, (uint32_t)slot, kind, 0};
}

static gboolean put(Ctx *c, QhEdgeRef e, const QhQuantSpec *spec, GError **error) {
  if (qh_annotation_set_spec(c->set, c->graph, &e, spec, error))
    return TRUE;
  char *where = qh_annotation_describe_edge(c->graph, &e);
  qh_error_prefix(error, where);
  g_free(where);
  return FALSE;
}

static QhQuantSpec shared_with(QhEdgeRef target) {
  return (QhQuantSpec){QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_SHARED, .ch_axis = -1,
                       .shared_with = target};
}

/* The dtype of the quantization group the value of (node, slot) already belongs to, or
 * QH_DTYPE_UNDEFINED when its producer's output is not annotated. */
static int32_t producer_dtype(const Ctx *c, int v) {
  int prod = qh_graph_value(c->graph, v)->producer;
  if (prod < 0)
    return QH_DTYPE_UNDEFINED;
  const QhNode *pn = qh_graph_node(c->graph, prod);
  for (int s = 0; s < pn->n_outputs; s++)
    if (pn->outputs[s] == v) {
      QhEdgeRef out = edge(prod, s, QH_EDGE_OUTPUT), root;
      const QhQuantSpec *spec = NULL;
      if (qh_annotation_set_resolve(c->set, c->graph, &out, &root, &spec) &&
          spec->kind != QH_SPEC_FLOAT)
        return spec->dtype;
    }
  return QH_DTYPE_UNDEFINED;
}

/* The output-channel axis of a weight (PyTorch's ch_axis for per-channel weights). */
static int weight_channel_axis(const Ctx *c, const QhNode *root, int slot) {
  if (qh_pattern_op_matches("ConvTranspose", root))
    return 1;
  if (qh_pattern_op_matches("Gemm", root)) {
    int64_t trans_b = 0;
    qh_node_attr_get_int(root, "transB", 0, &trans_b, NULL);
    return trans_b ? 0 : 1;
  }
  if (qh_pattern_op_matches("MatMul", root)) {
    int rank = qh_graph_value(c->graph, root->inputs[slot])->shape.rank;
    return rank >= 2 ? rank - 1 : 0;
  }
  return 0;
}

/* PyTorch's default_weight_observer, for qconfigs without a weight part. */
static const QhQuantSpec default_weight_spec = {
    QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE, .dtype = QH_DTYPE_INT8,
    .qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC, .ch_axis = -1, .observer = "MinMaxObserver"};

typedef struct {
  int node, slot, value;
} ActInput;

/* The activation inputs of a match that come from outside it, in pattern order. */
static GArray *activation_inputs(const Ctx *c, const QhPatternMatch *m, gboolean by_tensor_args) {
  const QhBackendPatternConfig *p = m->pattern;
  GArray *acts = g_array_new(FALSE, FALSE, sizeof(ActInput));
  const QhNode *root = qh_graph_node(c->graph, m->nodes[p->root_index]);
  for (int i = 0; i < m->n; i++) {
    const QhNode *n = qh_graph_node(c->graph, m->nodes[i]);
    if (i > 0 && n != root && !(p->extra_inputs_mask & (1u << i)))
      continue;
    for (int s = 0; s < n->n_inputs; s++) {
      int v = n->inputs[s];
      if (v < 0 || (i > 0 && s == m->chain_slot[i]) || !qh_graph_facts_is_float(&c->facts, v))
        continue;
      int32_t role = n == root ? qh_pattern_input_role(p, root, s) : QH_ROLE_ACTIVATION;
      gboolean is_const = qh_graph_facts_is_const(&c->facts, v);
      /* A weight slot fed by a computed tensor (MatMul of two activations) is an activation. */
      if (role == QH_ROLE_WEIGHT && !is_const)
        role = QH_ROLE_ACTIVATION;
      if (role != QH_ROLE_ACTIVATION || (is_const && (by_tensor_args || i > 0)))
        continue;
      ActInput a = {n->id, s, v};
      g_array_append_val(acts, a);
    }
  }
  return acts;
}

static int count_tensor_args(const Ctx *c, const QhBackendPatternConfig *p, const QhNode *root) {
  int n = 0;
  for (int s = 0; s < root->n_inputs; s++)
    if (root->inputs[s] >= 0 && !qh_graph_facts_is_const(&c->facts, root->inputs[s]) &&
        qh_pattern_input_role(p, root, s) != QH_ROLE_NOT_OBSERVED)
      n++;
  return n > 2 ? 2 : n;
}

static void report_match(Ctx *c, const QhPatternMatch *m, gboolean quantized, const char *text,
                         const char *reason) {
  for (int i = 0; i < m->n; i++)
    qh_quant_report_node(c->report, qh_graph_node(c->graph, m->nodes[i]), quantized,
                         quantized ? text : NULL, reason ? "%s" : NULL, reason);
}

/* Write the specs of one accepted match. */
/* The int32 bias specs of a config with QH_BIAS_INT32_INPUT_TIMES_WEIGHT: each constant
 * float bias slot of the root derives from the root's first activation input (the root
 * of its sharing group) and the weight. */
static gboolean write_bias_specs(Ctx *c, const QhNode *root, const QhBackendPatternConfig *p,
                                 const GArray *acts, GError **error) {
  QhEdgeRef act = {QH_INVALID_ID, 0, QH_EDGE_INPUT, 0}, weight = act;
  for (guint k = 0; k < acts->len && act.node == QH_INVALID_ID; k++) {
    const ActInput *a = &g_array_index(acts, ActInput, k);
    QhEdgeRef e = edge(a->node, a->slot, QH_EDGE_INPUT), r;
    const QhQuantSpec *spec = NULL;
    if (a->node == root->id && qh_annotation_set_resolve(c->set, c->graph, &e, &r, &spec))
      act = r;
  }
  for (int s = 0; s < root->n_inputs && weight.node == QH_INVALID_ID; s++)
    if (root->inputs[s] >= 0 && qh_pattern_input_role(p, root, s) == QH_ROLE_WEIGHT &&
        qh_graph_facts_is_const(&c->facts, root->inputs[s]))
      weight = edge(root->id, s, QH_EDGE_INPUT);
  if (act.node == QH_INVALID_ID || weight.node == QH_INVALID_ID)
    return TRUE; /* nothing to derive from: the bias stays float */
  QhEdgeRef from[2] = {act, weight};
  for (int s = 0; s < root->n_inputs; s++) {
    int v = root->inputs[s];
    if (v < 0 || qh_pattern_input_role(p, root, s) != QH_ROLE_BIAS || !qh_graph_facts_is_const(&c->facts, v) ||
        !qh_graph_facts_is_float(&c->facts, v))
      continue;
    QhQuantSpec b = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_DERIVED, .dtype = QH_DTYPE_INT32,
                     .qscheme = QH_QSCHEME_PER_CHANNEL_SYMMETRIC, .ch_axis = 0, .derived_from = from,
                     .n_derived_from = 2, .derive = derive_bias};
    if (!put(c, edge(root->id, s, QH_EDGE_INPUT), &b, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean write_specs(Ctx *c, const QhPatternMatch *m, int32_t obs, const QhQConfig *qc,
                            const QhDTypeConfig *dc, gboolean by_tensor_args, char **out_reason,
                            GError **error) {
  const QhBackendPatternConfig *p = m->pattern;
  const QhNode *root = qh_graph_node(c->graph, m->nodes[p->root_index]);
  const QhNode *last = qh_graph_node(c->graph, m->nodes[m->n - 1]);
  QhQuantSpec act;
  QhOption *act_storage = NULL;
  qh_qconfig_to_spec(qc->activation, &act, &act_storage);
  gboolean reuse_input = act.kind == QH_SPEC_SHARED;
  GArray *acts = activation_inputs(c, m, by_tensor_args);
  gboolean ok = TRUE;
  QhEdgeRef first = {QH_INVALID_ID, 0, QH_EDGE_INPUT, 0};
  QhEdgeRef group = first; /* the first input of the shared_inputs_mask group (ABI 1.2) */
  uint32_t shared_mask = QH_HAS_FIELD(p, QhBackendPatternConfig, shared_inputs_mask) ? p->shared_inputs_mask : 0;
  for (guint k = 0; ok && k < acts->len; k++) {
    const ActInput *a = &g_array_index(acts, ActInput, k);
    QhEdgeRef e = edge(a->node, a->slot, QH_EDGE_INPUT);
    int32_t have = producer_dtype(c, a->value);
    /* A masked input (a Softmax over scores + mask) may hold -inf: never observed. */
    if (c->regions.mask[a->value] || c->regions.tainted[a->value])
      continue;
    gboolean in_group = a->node == root->id && a->slot < 32 && (shared_mask & (1u << a->slot));
    if (in_group && group.node != QH_INVALID_ID && !reuse_input) {
      QhQuantSpec s = shared_with(group);
      ok = put(c, e, &s, error);
    } else if (k > 0 && obs == QH_OBS_OUTPUT_SHARE_OBSERVER_WITH_INPUT) {
      QhQuantSpec s = shared_with(first);
      ok = put(c, e, &s, error);
    } else if (reuse_input) {
      if (have == QH_DTYPE_UNDEFINED) {
        *out_reason = g_strdup_printf("the qconfig (%s) reuses the input's observer "
                                      "(ReuseInputObserver) but input %d is not quantized",
                                      qc->origin ? qc->origin : "?", a->slot);
        break;
      }
    } else if (have != act.dtype) {
      /* Otherwise the edge is the producer's output, observed already (PT2E shares them). */
      ok = put(c, e, &act, error);
    }
    if (k == 0)
      first = e;
    if (in_group && group.node == QH_INVALID_ID)
      group = e;
  }
  for (int s = 0; ok && !*out_reason && s < root->n_inputs; s++) {
    int v = root->inputs[s];
    /* Weights are quantized into initializers: a Constant node's output stays float. */
    if (v < 0 || qh_pattern_input_role(p, root, s) != QH_ROLE_WEIGHT ||
        qh_graph_value(c->graph, v)->initializer == NULL || !qh_graph_facts_is_float(&c->facts, v))
      continue;
    QhQuantSpec w = default_weight_spec;
    QhOption *w_storage = NULL;
    if (qc->weight)
      qh_qconfig_to_spec(qc->weight, &w, &w_storage);
    if (qh_quant_qscheme_is_per_channel(w.qscheme))
      w.ch_axis = weight_channel_axis(c, root, s);
    ok = put(c, edge(root->id, s, QH_EDGE_INPUT), &w, error);
    g_free(w_storage);
  }
  if (ok && !*out_reason && qh_dtype_config_derives_bias(dc))
    ok = write_bias_specs(c, root, p, acts, error);
  int out_v = qh_node_output(last, 0);
  if (ok && !*out_reason && out_v >= 0 && qh_graph_facts_is_float(&c->facts, out_v)) {
    QhEdgeRef out = edge(last->id, 0, QH_EDGE_OUTPUT);
    if ((obs == QH_OBS_OUTPUT_SHARE_OBSERVER_WITH_INPUT || reuse_input) &&
        first.node != QH_INVALID_ID) {
      QhQuantSpec s = shared_with(first);
      ok = put(c, out, &s, error);
    } else if (!reuse_input) {
      ok = put(c, out, &act, error);
    }
  }
  if (*out_reason || !ok) {
    /* Leave nothing half-written for this match. */
    for (int i = 0; i < m->n; i++) {
      const QhNode *n = qh_graph_node(c->graph, m->nodes[i]);
      for (int s = 0; s < n->n_inputs; s++) {
        QhEdgeRef e = edge(n->id, s, QH_EDGE_INPUT);
        qh_annotation_set_remove(c->set, &e);
      }
      for (int s = 0; s < n->n_outputs; s++) {
        QhEdgeRef e = edge(n->id, s, QH_EDGE_OUTPUT);
        qh_annotation_set_remove(c->set, &e);
      }
    }
  }
  g_array_unref(acts);
  g_free(act_storage);
  return ok;
}

static gboolean has_float_tensor(const Ctx *c, const QhPatternMatch *m) {
  for (int i = 0; i < m->n; i++) {
    const QhNode *n = qh_graph_node(c->graph, m->nodes[i]);
    for (int s = 0; s < n->n_inputs; s++)
      if (n->inputs[s] >= 0 && !qh_graph_facts_is_const(&c->facts, n->inputs[s]) &&
          qh_graph_facts_is_float(&c->facts, n->inputs[s]))
        return TRUE;
    for (int s = 0; s < n->n_outputs; s++)
      if (qh_graph_facts_is_float(&c->facts, n->outputs[s]))
        return TRUE;
  }
  return FALSE;
}

static gboolean annotate_match(Ctx *c, const QhPatternMatch *m, QhQConfigLookupFn lookup,
                               gpointer user_data, GError **error) {
  const QhBackendPatternConfig *p = m->pattern;
  const QhNode *root = qh_graph_node(c->graph, m->nodes[p->root_index]);
  char *text = qh_pattern_text(p);
  char *reason = NULL;
  gboolean ok = TRUE;
  int32_t obs = p->observation_type;
  gboolean by_args = (p->flags & QH_PATTERN_OBS_BY_TENSOR_ARGS) != 0;
  if (by_args)
    obs = p->observation_type_by_tensor_args[count_tensor_args(c, p, root)];
  const QhQConfig *qc = lookup(user_data, c->graph, root);
  if (!has_float_tensor(c, m)) {
    reason = g_strdup("integer tensors (shape computation) are never observed");
  } else if (obs == QH_OBS_INPUT_OUTPUT_NOT_OBSERVED) {
    reason = g_strdup_printf("pattern %s is not observed (input_output_not_observed)", text);
  } else if (qc == NULL) {
    reason = g_strdup_printf("no qconfig applies to %s (no global and no entry for it)", root->name);
  } else if (qc->is_none || qc->activation == NULL) {
    reason = g_strdup_printf("excluded by %s", qc->origin ? qc->origin : "the qconfig");
  } else if (p->n_dtype_configs == 0) {
    reason = g_strdup_printf("pattern %s declares no dtype config in backend '%s'", text, c->bc->name);
  } else {
    gboolean has_weight = FALSE;
    for (int s = 0; s < root->n_inputs; s++)
      if (root->inputs[s] >= 0 && qh_pattern_input_role(p, root, s) == QH_ROLE_WEIGHT &&
          qh_graph_facts_is_const(&c->facts, root->inputs[s]))
        has_weight = TRUE;
    GString *why = g_string_new(NULL);
    const QhDTypeConfig *chosen = NULL;
    for (size_t i = 0; i < p->n_dtype_configs && !chosen; i++) {
      char *v = qh_dtype_config_violation(p->dtype_configs[i], qc, has_weight);
      if (v == NULL) {
        chosen = p->dtype_configs[i];
        break;
      }
      if (p->dtype_configs[i]->name)
        g_string_append_printf(why, "%s'%s': %s", why->len ? "; " : "", p->dtype_configs[i]->name, v);
      else
        g_string_append_printf(why, "%sdtype_configs[%zu]: %s", why->len ? "; " : "", i, v);
      g_free(v);
    }
    if (chosen == NULL)
      reason = g_strdup_printf("the qconfig (%s) violates every dtype config of %s: %s",
                               qc->origin ? qc->origin : "?", text, why->str);
    g_string_free(why, TRUE);
    if (chosen)
      ok = write_specs(c, m, obs, qc, chosen, by_args, &reason, error);
  }
  if (ok)
    report_match(c, m, reason == NULL, text, reason);
  g_free(reason);
  g_free(text);
  return ok;
}

static gboolean node_has_float(const Ctx *c, const QhNode *n) {
  for (int s = 0; s < n->n_outputs; s++)
    if (qh_graph_facts_is_float(&c->facts, n->outputs[s]))
      return TRUE;
  return n->n_outputs == 0;
}

gboolean qh_backend_annotate_with(const QhBackendConfig *bc, QhGraph *graph,
                                  QhQConfigLookupFn lookup, gpointer user_data,
                                  QhAnnotationSet *set, QhQuantReport *report, GError **error) {
  g_return_val_if_fail(graph && lookup && set && report, FALSE);
  GArray *order = NULL;
  if (!qh_graph_topo_order(graph, &order, error))
    return FALSE;
  Ctx c = {bc, graph, {0}, set, report, {0}};
  qh_graph_facts_init(&c.facts, graph);
  qh_float_regions_find(&c.regions, &c.facts, order);
  gboolean *excluded = g_new0(gboolean, c.regions.n_nodes > 0 ? c.regions.n_nodes : 1);
  for (int i = 0; i < c.regions.n_nodes; i++)
    excluded[i] = c.regions.reason[i] != NULL;
  int *node_match = NULL;
  GArray *matches = qh_pattern_match_all(bc, &c.facts, order, excluded, &node_match);
  g_free(excluded);
  gboolean ok = TRUE;
  for (guint k = 0; ok && k < matches->len; k++)
    ok = annotate_match(&c, &g_array_index(matches, QhPatternMatch, k), lookup, user_data, error);
  for (guint k = 0; ok && k < order->len; k++) {
    int id = g_array_index(order, int, k);
    if (node_match[id] >= 0)
      continue;
    const QhNode *n = qh_graph_node(graph, id);
    if (c.regions.reason[id])
      qh_quant_report_node(report, n, FALSE, NULL, "%s", c.regions.reason[id]);
    else if (!node_has_float(&c, n))
      qh_quant_report_node(report, n, FALSE, NULL, "integer tensors (shape computation) are never observed");
    else
      qh_quant_report_node(report, n, FALSE, NULL, "no pattern for %s in backend '%s'", n->op_type,
                           bc && bc->name ? bc->name : "(none)");
  }
  g_free(node_match);
  g_array_unref(matches);
  g_array_unref(order);
  qh_float_regions_clear(&c.regions);
  qh_graph_facts_clear(&c.facts);
  return ok;
}

static const QhQConfig *mapping_lookup(gpointer user_data, const QhGraph *graph, const QhNode *node) {
  return qh_qconfig_resolve(user_data, graph, node);
}

gboolean qh_backend_annotate(const QhBackendConfig *bc, QhGraph *graph,
                             const QhQConfigMapping *mapping, QhAnnotationSet *set,
                             QhQuantReport *report, GError **error) {
  return qh_backend_annotate_with(bc, graph, mapping_lookup, (gpointer)mapping, set, report, error);
}
