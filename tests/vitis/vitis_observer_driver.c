/* Drives example_vitis's DpuPosObserver (observer.c, numerics.c compiled in) for
 * test_vitis.py, which checks the positions against its own numpy search. A stand-in
 * host table supplies the three host functions the observer calls.
 *
 *   vitis_observer_driver ROLE CANDIDATES FILE.f32 [FILE.f32 ...]
 *
 * ROLE: activation|input|weight|bias. For each raw float32 file it prints
 * "search POS" (or "search none" for a tensor without a non-zero value), then
 * "modal POS" of one state that observed them all. It also checks, printing FAIL and
 * exiting 1 otherwise, that the state split in two shards and merged, and the state
 * saved and loaded, give the same position, and that load refuses foreign, truncated,
 * newer and other-role bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vitis.h"

struct QhStatus {
  int32_t code;
};
struct QhBuffer {
  unsigned char *data;
  size_t len;
};

static QhStatus *status_new(int32_t code, const char *message) {
  (void)message;
  QhStatus *s = malloc(sizeof *s);
  if (!s)
    abort();
  s->code = code;
  return s;
}

static void status_free(QhStatus *s) { free(s); }

static QhStatus *buffer_append(QhBuffer *b, const void *data, size_t size) {
  unsigned char *p = realloc(b->data, b->len + size);
  if (!p)
    abort();
  memcpy(p + b->len, data, size);
  b->data = p;
  b->len += size;
  return NULL;
}

static QhHostApi host;

static float *read_f32(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  float *x = malloc(size > 0 ? (size_t)size : 1);
  *n = (size_t)size / sizeof(float);
  if (!x || fread(x, sizeof(float), *n, f) != *n) {
    fclose(f);
    free(x);
    return NULL;
  }
  fclose(f);
  return x;
}

static int pos_of(void *state) {
  float scale = 0;
  int32_t zp = 1, pos = 0;
  QhQParams q = {QH_STRUCT_HEADER(QhQParams), .capacity = 1, .scale = &scale, .zero_point = &zp};
  QhStatus *st = vitis_observer.compute_qparams(state, &host, &q);
  if (st || q.count != 1 || zp != 0 || q.dtype != QH_DTYPE_INT8 || !vitis_scale_pos(scale, &pos)) {
    printf("FAIL compute_qparams\n");
    exit(1);
  }
  return pos;
}

static void *make(const QhQuantSpec *spec, VitisInstance *inst) {
  void *s = NULL;
  if (vitis_observer.create(inst, &host, spec, 0, NULL, &s)) {
    printf("FAIL create\n");
    exit(1);
  }
  return s;
}

static void observe(void *s, float *x, size_t n) {
  QhTensorView v = {QH_STRUCT_HEADER(QhTensorView), .dtype = QH_DTYPE_FLOAT, .rank = 1,
                    .dims = {(int64_t)n}, .data = x, .nbytes = n * sizeof(float)};
  if (vitis_observer.observe(s, &host, &v)) {
    printf("FAIL observe\n");
    exit(1);
  }
}

static int load_refused(VitisInstance *inst, const QhQuantSpec *spec, const unsigned char *d, size_t n) {
  void *s = NULL;
  QhStatus *st = vitis_observer.load(inst, &host, spec, 0, NULL, d, n, &s);
  int refused = st && st->code == QH_ERR_INVALID_ARGUMENT && !s;
  status_free(st);
  vitis_observer.destroy(s);
  return refused;
}

int main(int argc, char **argv) {
  host.abi_version = QH_ABI_VERSION;
  host.struct_size = sizeof host;
  host.status_new = status_new;
  host.status_free = status_free;
  host.buffer_append = buffer_append;
  if (argc < 4)
    return 2;
  QhOption role = {"role", argv[1]};
  QhQuantSpec spec = {QH_STRUCT_HEADER(QhQuantSpec), .kind = QH_SPEC_QUANTIZE, .dtype = QH_DTYPE_INT8,
                      .qscheme = QH_QSCHEME_PER_TENSOR_SYMMETRIC, .ch_axis = -1,
                      .observer = VITIS_OBSERVER_NAME, .observer_args = &role, .n_observer_args = 1};
  VitisInstance inst = {.candidates = atoi(argv[2])};
  int n_files = argc - 3, half = n_files / 2;
  void *all = make(&spec, &inst), *a = make(&spec, &inst), *b = make(&spec, &inst);
  VitisRole r = strcmp(argv[1], "input") == 0 ? VITIS_ROLE_INPUT
                : strcmp(argv[1], "weight") == 0 ? VITIS_ROLE_WEIGHT
                : strcmp(argv[1], "bias") == 0 ? VITIS_ROLE_BIAS : VITIS_ROLE_ACTIVATION;
  for (int i = 0; i < n_files; i++) {
    size_t n;
    float *x = read_f32(argv[3 + i], &n);
    if (!x) {
      printf("FAIL read %s\n", argv[3 + i]);
      return 1;
    }
    int pos;
    if (vitis_search_pos(x, n, r, inst.candidates, &pos))
      printf("search %d\n", pos);
    else
      printf("search none\n");
    observe(all, x, n);
    observe(i < half ? a : b, x, n);
    free(x);
  }
  int modal = pos_of(all);
  printf("modal %d\n", modal);
  if (vitis_observer.merge(a, &host, b) || pos_of(a) != modal) {
    printf("FAIL merge of two shards differs from one pass\n");
    return 1;
  }
  QhBuffer buf = {0};
  if (vitis_observer.save(all, &host, &buf)) {
    printf("FAIL save\n");
    return 1;
  }
  void *loaded = NULL;
  if (vitis_observer.load(&inst, &host, &spec, 0, NULL, buf.data, buf.len, &loaded) || pos_of(loaded) != modal) {
    printf("FAIL load of saved state\n");
    return 1;
  }
  unsigned char *bad = malloc(buf.len);
  memcpy(bad, buf.data, buf.len);
  bad[0] ^= 1; /* foreign magic */
  int ok = load_refused(&inst, &spec, bad, buf.len);
  memcpy(bad, buf.data, buf.len);
  bad[8] = 2; /* a newer version */
  ok = ok && load_refused(&inst, &spec, bad, buf.len);
  ok = ok && load_refused(&inst, &spec, buf.data, buf.len - 1); /* truncated */
  QhOption other = {"role", strcmp(argv[1], "bias") == 0 ? "weight" : "bias"};
  QhQuantSpec other_spec = spec;
  other_spec.observer_args = &other;
  ok = ok && load_refused(&inst, &other_spec, buf.data, buf.len);
  if (!ok) {
    printf("FAIL load accepted bytes it did not write\n");
    return 1;
  }
  printf("ok %zu bytes saved\n", buf.len);
  free(bad);
  free(buf.data);
  vitis_observer.destroy(all);
  vitis_observer.destroy(a);
  vitis_observer.destroy(b);
  vitis_observer.destroy(loaded);
  return 0;
}
