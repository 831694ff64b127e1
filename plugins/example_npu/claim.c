/* example_npu's claim: which parts of the quantized graph the NPU takes. By default
 * every connected group of Conv, Relu and Add units (joined where one unit's output
 * value is another's input value: through a Q -> DQ pair the offered units name the
 * same integer value) becomes one partition. The "claims" option names the nodes
 * instead, so experiments (and the host's refusal tests) can claim anything. The
 * storage lives in the instance until the next claim: the host copies the claims
 * before it calls the plugin again. */
#define _POSIX_C_SOURCE 200809L /* strtok_r */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu.h"

void npu_claims_clear(NpuInstance *inst) {
  free(inst->claims);
  free(inst->claim_nodes);
  free(inst->claim_names);
  inst->claims = NULL;
  inst->claim_nodes = NULL;
  inst->claim_names = NULL;
  inst->n_claims = 0;
}

static int supported(const QhHostApi *host, const QhGraphView *g, uint32_t node) {
  const char *op = host->node_op_type(g, node), *dom = host->node_domain(g, node);
  if (dom && *dom && strcmp(dom, "ai.onnx") != 0)
    return 0;
  return strcmp(op, "Conv") == 0 || strcmp(op, "Relu") == 0 || strcmp(op, "Add") == 0;
}

static size_t find_root(size_t *parent, size_t x) {
  while (parent[x] != x)
    x = parent[x] = parent[parent[x]];
  return x;
}

/* Connected groups of supported units, each one claim "npuN". */
static QhStatus *claim_groups(NpuInstance *inst, const QhHostApi *host, const QhGraphView *g,
                              const QhNodeUnit *const *units, size_t n) {
  size_t *parent = malloc(sizeof *parent * (n + 1));
  size_t *group_of = malloc(sizeof *group_of * (n + 1));
  inst->claim_nodes = malloc(sizeof *inst->claim_nodes * (n + 1));
  inst->claims = calloc(n + 1, sizeof *inst->claims);
  inst->claim_names = calloc(n + 1, 16);
  if (!parent || !group_of || !inst->claim_nodes || !inst->claims || !inst->claim_names) {
    free(parent);
    free(group_of);
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the claims");
  }
  for (size_t i = 0; i < n; i++)
    parent[i] = i;
  for (size_t a = 0; a < n; a++) {
    if (!supported(host, g, units[a]->nodes[0]))
      continue;
    for (size_t b = 0; b < n; b++) {
      if (a == b || !supported(host, g, units[b]->nodes[0]))
        continue;
      for (size_t o = 0; o < units[a]->n_outputs; o++)
        for (size_t i = 0; i < units[b]->n_inputs; i++)
          if (units[a]->outputs[o] != QH_INVALID_ID && units[a]->outputs[o] == units[b]->inputs[i])
            parent[find_root(parent, b)] = find_root(parent, a);
    }
  }
  /* one claim per root, nodes listed group by group */
  size_t n_nodes = 0;
  for (size_t r = 0; r < n; r++) {
    if (!supported(host, g, units[r]->nodes[0]) || find_root(parent, r) != r)
      continue;
    QhPartitionClaim *c = &inst->claims[inst->n_claims];
    char *name = inst->claim_names + 16 * inst->n_claims;
    snprintf(name, 16, "npu%zu", inst->n_claims);
    *c = (QhPartitionClaim){QH_STRUCT_HEADER(QhPartitionClaim)};
    c->name = name;
    c->nodes = inst->claim_nodes + n_nodes;
    for (size_t u = 0; u < n; u++)
      if (supported(host, g, units[u]->nodes[0]) && find_root(parent, u) == r)
        inst->claim_nodes[n_nodes++] = units[u]->nodes[0];
    c->n_nodes = (size_t)(inst->claim_nodes + n_nodes - c->nodes);
    inst->n_claims++;
  }
  free(parent);
  free(group_of);
  return NULL;
}

/* "NAME:node,node;NAME:node": the nodes by name. */
static QhStatus *claim_listed(NpuInstance *inst, const QhHostApi *host, const QhGraphView *g) {
  size_t len = strlen(inst->claims_spec);
  inst->claim_names = malloc(len + 1);
  inst->claim_nodes = malloc(sizeof *inst->claim_nodes * (len + 1));
  inst->claims = calloc(len + 1, sizeof *inst->claims);
  if (!inst->claim_names || !inst->claim_nodes || !inst->claims)
    return host->status_new(QH_ERR_OUT_OF_MEMORY, "no memory for the claims");
  memcpy(inst->claim_names, inst->claims_spec, len + 1);
  size_t n_nodes = 0;
  char *save = NULL;
  for (char *part = strtok_r(inst->claim_names, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
    char *colon = strchr(part, ':');
    if (colon == NULL)
      return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "claims: '%s' is not NAME:node,node", part);
    *colon = '\0';
    QhPartitionClaim *c = &inst->claims[inst->n_claims++];
    *c = (QhPartitionClaim){QH_STRUCT_HEADER(QhPartitionClaim)};
    c->name = part;
    c->nodes = inst->claim_nodes + n_nodes;
    char *save2 = NULL;
    for (char *node = strtok_r(colon + 1, ",", &save2); node; node = strtok_r(NULL, ",", &save2)) {
      uint32_t id = host->node_find(g, node);
      if (id == QH_INVALID_ID)
        return qh_status_newf(host, QH_ERR_INVALID_ARGUMENT, "claims: the graph has no node '%s'", node);
      inst->claim_nodes[n_nodes++] = id;
    }
    c->n_nodes = (size_t)(inst->claim_nodes + n_nodes - c->nodes);
  }
  return NULL;
}

QhStatus *npu_claim(void *instance, const QhHostApi *host, const QhGraphView *graph,
                    const QhNodeUnit *const *units, size_t n_units, const QhPartitionClaim **out_claims,
                    size_t *out_n_claims) {
  NpuInstance *inst = instance;
  npu_claims_clear(inst);
  QhStatus *st = inst->claims_spec[0] ? claim_listed(inst, host, graph)
                                      : claim_groups(inst, host, graph, units, n_units);
  if (st) {
    npu_claims_clear(inst);
    return st;
  }
  *out_claims = inst->claims;
  *out_n_claims = inst->n_claims;
  return NULL;
}
