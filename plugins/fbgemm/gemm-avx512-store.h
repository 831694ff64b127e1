/* The AVX-512 output rule for 64 consecutive channels at once, shared by the fbgemm
 * plugin's AVX-512 VNNI GEMM (gemm-avx512vnni.c) and depthwise (dw-avx512vnni.c) kernels:
 * kernels.h's requantization of four int32 vectors (the column offsets or zero-point sums
 * already in them), narrowed with saturating packs and written with one masked 64-byte
 * store. Include only from files built with AVX-512 F/BW flags. Pure function of its
 * arguments; no errors. */
#ifndef QH_FBGEMM_GEMM_AVX512_STORE_H
#define QH_FBGEMM_GEMM_AVX512_STORE_H

#include <immintrin.h>
#include <stdint.h>

/* The output rule for 64 consecutive channels (a GEMM row of 4 panels, or 4 channel
 * blocks of a depthwise pixel), narrowed with saturating packs instead of one vpmovdb
 * and one store per 16 channels. Only the upper bound is
 * applied in float: below it, vcvtps2dq gives at most hi, or a negative number
 * (0x80000000 for a value past int32, which adding zo <= 255 cannot wrap), which the
 * saturating packs turn into 0 and the byte maximum with lo into lo. Bounds are
 * integers, so clamping after the rounding equals clamping before it (kernels.h), and
 * the bytes are the twin's. The packs interleave 128-bit lanes (lane i holds dwords
 * 4i..4i+3 of each of the 4 vectors), which one vpermd puts back in channel order. */
static inline __attribute__((always_inline)) void fb_store64_avx512(const __m512i acc[4], const float *bias,
                                                              const float *mult, __m512 hi, __m512i zo16,
                                                              __m512i lo8, __m512i perm, uint8_t *dst,
                                                              __mmask64 mask) {
  __m512i q[4];
  _Pragma("GCC unroll 4")
  for (int v = 0; v < 4; v++) {
    __m512 f = _mm512_cvtepi32_ps(acc[v]);
    f = _mm512_mul_ps(_mm512_add_ps(f, _mm512_load_ps(bias + 16 * v)), _mm512_load_ps(mult + 16 * v));
    q[v] = _mm512_cvtps_epi32(_mm512_min_ps(f, hi));
  }
  __m512i w01 = _mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), zo16);
  __m512i w23 = _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), zo16);
  __m512i u8 = _mm512_max_epu8(_mm512_packus_epi16(w01, w23), lo8);
  _mm512_mask_storeu_epi8(dst, mask, _mm512_permutexvar_epi32(perm, u8));
}

/* The short epilogue (kernels.h, FbPacked's int_bias) for nv <= 4 vectors of 16 channels:
 * the bias is already in the accumulators and the products stay far inside int32, so
 * per vector only the conversion, the multiply and the rounding, then the same packs as
 * fb_store64_avx512 and both clamp bounds on the bytes (exact: the bounds are integers in
 * [0, 255] and every saturation on the way lies outside them). With nv < 4 the missing
 * vectors repeat present ones; the mask drops their bytes. hi8: the upper bound plus zo,
 * as a byte. clamp 0 (only where lo8 is 0 and hi8 255, the whole byte range: every
 * output without a fused Relu or a reduced range) leaves out the byte clamps, which the
 * saturating packs then do alone: a value past int16 saturates on the side it lies, so
 * the bytes are clamp(q + zo, 0, 255) either way (two of about 18 operations per 64
 * outputs, which is what a 1x1 convolution with K = 64 spends on 64 vpdpbusd). */
static inline __attribute__((always_inline)) void fb_store_int_avx512(const __m512i *acc, const int nv,
                                                                      const float *mult, __m512i zo16,
                                                                      __m512i lo8, __m512i hi8, __m512i perm,
                                                                      uint8_t *dst, __mmask64 mask,
                                                                      const int clamp) {
  __m512i q[4];
  _Pragma("GCC unroll 4")
  for (int v = 0; v < nv; v++)
    q[v] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[v]), _mm512_load_ps(mult + 16 * v)));
  __m512i w01 = _mm512_adds_epi16(_mm512_packs_epi32(q[0], nv > 1 ? q[1] : q[0]), zo16);
  __m512i w23 = nv > 2 ? _mm512_adds_epi16(_mm512_packs_epi32(q[2], nv > 3 ? q[3] : q[2]), zo16) : w01;
  __m512i u8 = _mm512_packus_epi16(w01, w23);
  if (clamp)
    u8 = _mm512_min_epu8(_mm512_max_epu8(u8, lo8), hi8);
  _mm512_mask_storeu_epi8(dst, mask, _mm512_permutexvar_epi32(perm, u8));
}

/* The constants fb_store64_avx512 takes, from the clamp bounds relative to zo (kernels.h's
 * lo and hi) and zo. */
static inline __attribute__((always_inline)) void fb_store64_consts(float lo, float hi, int32_t zo, __m512 *hiv,
                                                                    __m512i *zo16, __m512i *lo8, __m512i *perm) {
  *hiv = _mm512_set1_ps(hi);
  *zo16 = _mm512_set1_epi16((short)zo);
  *lo8 = _mm512_set1_epi8((char)(uint8_t)((int32_t)lo + zo)); /* in [0, 255] */
  *perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

#endif
