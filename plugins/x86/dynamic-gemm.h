/* The x86 dynamic Linear unit's own u8 x s8 GEMMs: the weights packed once at kernel
 * creation into tdpbusd's B layout (which is also vpdpbusd's: one 64-byte vector per
 * reduction group of 16 columns), A packed per run, the float epilogue of MatMulInteger ->
 * Cast -> Mul (-> Add) applied to each output tile while it is in L1 or in registers.
 * dynamic-gemm-amx.c where the host reports QH_CPU_AMXINT8, dynamic-gemm-avx512vnni.c where
 * it reports AVX-512 VNNI only; dynamic-linear.c chooses at kernel creation. Both take the
 * packings of dynamic-gemm-pack.c (plain C). */
#ifndef QH_X86_DYNAMIC_GEMM_H
#define QH_X86_DYNAMIC_GEMM_H

#include <stddef.h>
#include <stdint.h>

#define DYN_NR 16 /* output columns per packed panel (one tile's int32 columns) */
#define DYN_KB 64 /* reduction bytes per B tile; kp is k rounded up to it */

/* W [k, n] int8 (row-major, as MatMulInteger's B) in panels of DYN_NR columns: panel p's
 * reduction byte kk of column c at b[p * kp * DYN_NR + (kk / 4) * 64 + c * 4 + kk % 4],
 * zero past k and past n. */
typedef struct {
  int64_t k, n, kp, panels;
  int8_t *b; /* owned, 64-byte aligned; free with dyn_unpack_w */
} DynPacked;

/* The epilogue of one output element (r, c): f32(acc - zc[c]) (int32, wrapping) * scale[c or
 * 0], then + bias[c] when bias is not NULL, each step rounded to float as the host's Cast,
 * Mul and Add round (no fused multiply-add). Arrays of n (scale: n or 1); borrowed. */
typedef struct {
  const int32_t *zc;
  const float *scale;
  int per_column;
  const float *bias;
} DynEpilogue;

/* Packs w (borrowed, k * n bytes) into *out. Returns 0, or -1 when out of memory (*out then
 * holds nothing to free). Any thread. */
int dyn_pack_w(const int8_t *w, int64_t k, int64_t n, DynPacked *out);

/* Frees what dyn_pack_w allocated; safe on a zeroed or already unpacked DynPacked. */
void dyn_unpack_w(DynPacked *pk);

#define DYN_MB 32 /* rows per packed block of A (two row tiles) */

/* A's packed size for m rows: whole DYN_MB-row blocks of kp bytes per row. */
static inline size_t dyn_a_bytes(int64_t m, int64_t kp) {
  return (size_t)((m + DYN_MB - 1) / DYN_MB * DYN_MB) * (size_t)kp;
}

/* Packs row blocks [rb0, rb1) of x (m rows of k uint8, ldx apart; borrowed) into out
 * (dyn_a_bytes(m, kp) bytes for all blocks): block rb's chunk q (64 reduction bytes)
 * is 32 rows of 64 bytes at out + (rb * kp / 64 + q) * 2048, zero past k and past m.
 * Disjoint block ranges may be packed concurrently. */
void dyn_pack_a(const uint8_t *x, size_t ldx, int64_t m, int64_t k, int64_t kp, int64_t rb0, int64_t rb1,
                uint8_t *out);

/* y[r, c] for rows [0, m) and the columns of panels [p0, p1): ap is A packed by
 * dyn_pack_a from its row block 0 on (row r of this call is packed row r), y rows ldy
 * floats apart. Loads its own tile configuration and releases the tiles before it
 * returns, so any thread (a worker of a parallel_for) may call it; concurrent calls on
 * disjoint outputs are safe. The caller has checked QH_CPU_AMXINT8 (the tile data
 * permission included). No errors. */
void dyn_amx_block(const uint8_t *ap, int64_t m, const DynPacked *pk, int64_t p0, int64_t p1, const DynEpilogue *e,
                   float *y, size_t ldy);

/* The same contract without tiles, on AVX-512 VNNI (dynamic-gemm-avx512vnni.c): the same
 * packed weights and packed A, the same bytes out. The caller has checked AVX-512F/BW/VL
 * and AVX-512 VNNI. Any thread; concurrent calls on disjoint outputs are safe. */
void dyn_vnni_block(const uint8_t *ap, int64_t m, const DynPacked *pk, int64_t p0, int64_t p1, const DynEpilogue *e,
                    float *y, size_t ldy);

/* The slow twin (dynamic-gemm-ref.c): the same y by plain int32 loops on the unpacked
 * weights (w [k, n]) and A's rows (m rows of k bytes, lda apart). Any thread; no errors. */
void dyn_gemm_ref(const uint8_t *a, size_t lda, int64_t m, const int8_t *w, int64_t k, int64_t n,
                  const DynEpilogue *e, float *y, size_t ldy);

#endif
