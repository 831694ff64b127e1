/* The oneDNN set-up every x86 kernel repeats, written once: a primitive with its memories
 * (X86Prim, onednn.h), the weights reordered once into the primitive's preferred format,
 * src / weights / dst memories whose buffers are bound at run, one execution on the
 * instance's stream, and the release. The kernels (onednn-kernels.c, act-matmul.c,
 * dynamic-linear.c) keep only what differs: their descriptors, attributes and epilogues. */
#include "onednn.h"

/* Reorders the user's weights (data laid out as *user) into a new memory of the
 * primitive's preferred weights format. */
static dnnl_status_t reorder_weights(const X86Instance *inst, const_dnnl_primitive_desc_t pd,
                                     const dnnl_memory_desc_t *user, void *data, dnnl_memory_t *out) {
  dnnl_engine_t eng = inst->engine;
  const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  dnnl_memory_t from = NULL;
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t r = NULL;
  dnnl_status_t s = dnnl_memory_create(&from, user, eng, data);
  if (s == dnnl_success)
    s = dnnl_memory_create(out, want, eng, DNNL_MEMORY_ALLOCATE);
  if (s == dnnl_success)
    s = dnnl_reorder_primitive_desc_create(&rpd, user, eng, want, eng, NULL);
  if (s == dnnl_success)
    s = dnnl_primitive_create(&r, rpd);
  if (s == dnnl_success) {
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, *out}};
    s = dnnl_primitive_execute(r, inst->stream, 2, args);
    if (s == dnnl_success)
      s = dnnl_stream_wait(inst->stream);
  }
  if (r)
    dnnl_primitive_destroy(r);
  if (rpd)
    dnnl_primitive_desc_destroy(rpd);
  if (from)
    dnnl_memory_destroy(from);
  return s;
}

QhStatus *x86_prim_create(const X86Instance *inst, const QhHostApi *host, const_dnnl_primitive_desc_t pd,
                          const dnnl_memory_desc_t *wei_user, void *wei_data, X86Prim *p) {
  dnnl_engine_t eng = inst->engine;
  const dnnl_memory_desc_t *src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *wei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  QhStatus *st = NULL;
  if (wei_user)
    st = x86_dnnl_status(host, reorder_weights(inst, pd, wei_user, wei_data, &p->wei), "weight reorder");
  else
    st = x86_dnnl_status(host, dnnl_memory_create(&p->wei, wei, eng, DNNL_MEMORY_NONE), "memory_create(weights)");
  if (!st)
    st = x86_dnnl_status(host, dnnl_primitive_create(&p->prim, pd), "primitive_create");
  if (!st)
    st = x86_dnnl_status(host, dnnl_memory_create(&p->src, src, eng, DNNL_MEMORY_NONE), "memory_create(src)");
  if (!st)
    st = x86_dnnl_status(host, dnnl_memory_create(&p->dst, dst, eng, DNNL_MEMORY_NONE), "memory_create(dst)");
  if (st)
    x86_prim_release(p);
  return st;
}

dnnl_status_t x86_prim_execute(const X86Instance *inst, X86Prim *p, const void *src, void *wei, void *dst) {
  dnnl_exec_arg_t args[6];
  int n = 0;
  args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, p->src};
  args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, p->wei};
  args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DST, p->dst};
  if (p->bia)
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->bia};
  if (p->zp_src)
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, p->zp_src};
  if (p->zp_dst)
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, p->zp_dst};
  dnnl_status_t s = dnnl_memory_set_data_handle(p->src, (void *)src);
  if (s == dnnl_success && wei)
    s = dnnl_memory_set_data_handle(p->wei, wei);
  if (s == dnnl_success)
    s = dnnl_memory_set_data_handle(p->dst, dst);
  if (s == dnnl_success)
    s = dnnl_primitive_execute(p->prim, inst->stream, n, args);
  if (s == dnnl_success)
    s = dnnl_stream_wait(inst->stream);
  return s;
}

void x86_prim_release(X86Prim *p) {
  if (p->prim)
    dnnl_primitive_destroy(p->prim);
  dnnl_memory_t *m[] = {&p->src, &p->wei, &p->bia, &p->dst, &p->zp_src, &p->zp_dst};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    if (*m[i])
      dnnl_memory_destroy(*m[i]), *m[i] = NULL;
  p->prim = NULL;
}
