/* The fbgemm plugin's kernels against their scalar twins, bit for bit, without the host:
 * random convolutions and linear layers (odd channel counts, padding, strides,
 * dilations, 1x1 and 3x3, M = 1 rows, zero points from 0 to the range's top, output
 * ranges [0, 255] and [0, 127], fused Relu) and multipliers that land on exact halves, so
 * a path that rounds ties away from zero or mishandles a zero point differs; then as many
 * random depthwise convolutions (1 to 70 channels, so every vector tail, kernels 1x1 to
 * 5x5, strides, dilations, asymmetric padding, inputs past the image on every side)
 * against the depthwise twin, the input allocated to its last byte (nothing may be read
 * past it; the sanitizer build sees it). Each path runs in turn, on one worker, on a
 * 3-worker pool that runs its tasks in reverse, and on two real threads (AMX's tile
 * configuration is per thread). A path this CPU lacks is reported and
 * skipped; with --isa naming such a path the test exits 77 (CTest's skip) with the
 * reason.
 * usage: test_kernels [--isa NAME] [--cases N] [--seed S] */
#include <stdio.h>

#include "test-helpers.h"

static int gathered_cases;
/* Cases the vector paths read in place one output row at a time (gemm.c's strided 1x1:
 * unpadded, a stride above 1, output rows of 16 pixels or more), likewise reported. */
static int strided_cases;
/* Strided 1x1 cases of any row length, which AVX-512 VNNI reads in place through row
 * pointers (gemm.c's strided_rows), likewise. */
static int strided_rows_cases;
/* Cases AVX-512 VNNI runs on its tap path (a kernel larger than 1x1, channels a multiple
 * of 4, output rows of 16 pixels or more), likewise. */
static int tap_cases;
/* Cases whose reduction the AVX-512 VNNI kernel takes in chunks (kernels.h, FB_VNNI_KC:
 * more than 2 * FB_VNNI_KC groups of 4 bytes over more than 6 rows), likewise. */
static int chunked_cases;
/* Depthwise cases of the AVX-512 VNNI 3x3 path's shapes (dw-avx512vnni-3x3.c): a full
 * block of 64 channels and a tail, rows wider than one chunk of 64 input columns, and
 * stride 2 with dilation 1 over several output rows. */
static int dw3_block_cases, dw3_chunk_cases, dw3_stride2_cases;
/* Convolutions packed in kernel rows (fb_pack_kernel_rows, for every path), and those
 * of them AVX-512 VNNI reads a kernel row at a time from its padded copy (undilated
 * along x), likewise. */
static int kernel_rows_cases, kernel_row_path_cases;
/* Packs whose every bias is an integer within the bounds of the short epilogue
 * (kernels.h, int_bias: the AVX-512 kernel folds the bias into its accumulators),
 * likewise. */
static int int_bias_packs;
/* Of those, the ones whose outputs span the whole byte range (lo 0, hi 255) on two panels
 * or more: the AVX-512 kernel leaves the byte clamps to its saturating packs there. */
static int int_bias_full_range_packs;
/* 3x3 with full blocks: the epilogue's byte upper clamp (p->byte_hi) or the float one (a
 * multiplier large enough that a value may pass 2^31); stride 2 without the row buffer */
static int dw3_byte_hi_cases, dw3_float_hi_cases, dw3_stream_cases;
/* 3x3 with full blocks whose biases are integers the accumulators start at (p->int_bias3,
 * the epilogue without the int32 conversion), of them at stride 2 without the row buffer,
 * and those whose biases are close to the bound FB_DW3_INT_BIAS_MAX (the magic number's
 * exact range) */
static int dw3_int_bias_cases, dw3_int_bias_stream_cases, dw3_big_bias_cases;
/* 3x3 whose tail block starts with a piece of 32 channels over rows of 2 columns or more
 * (built two columns at a time), and of them those with exactly 32 channels */
static int dw3_pair32_cases, dw3_ic32_cases;
/* ... with a tail of exactly 32 channels at stride 2 without the row buffer (stream_s2_piece32),
 * and those wide enough for a pair of pixels whose columns are all inside the image. */
static int dw3_stream32_cases, dw3_stream32_inside_cases;
/* ... whose tail ends in a piece of up to 16 channels over rows of 4 output pixels or more
 * (piece16's four pixels per epilogue), and of them those with integral biases in the
 * accumulators. */
static int dw3_piece16_cases, dw3_piece16_int_cases;

/* One random case; returns 0 when every path agrees with the twin. */
static int run_case(int idx, const FbIsa *isas, size_t n_isas) {
  FbConv c = {0};
  int linear = rnd() % 4 == 0;
  int x_max = rnd() % 2 ? 255 : 127; /* the input's range: AVX2 switches to its exact variant above 127 */
  if (linear) {
    c.n = rnd() % 3 == 0 ? 1 : rnd_in(1, 70);
    c.ih = c.iw = c.kh = c.kw = c.sh = c.sw = c.dh = c.dw = 1;
    c.ic = rnd_in(1, 300);
  } else {
    c.n = rnd_in(1, 2);
    c.kh = rnd() % 3 == 0 ? 1 : rnd_in(1, 5);
    c.kw = rnd() % 3 == 0 ? c.kh : rnd_in(1, 5);
    c.sh = rnd_in(1, 3), c.sw = rnd_in(1, 3);
    c.dh = rnd() % 3 == 0 ? rnd_in(2, 3) : 1, c.dw = rnd() % 3 == 0 ? rnd_in(2, 3) : 1;
    if (rnd() % 3 == 0)
      c.sh = c.sw = c.dh = c.dw = 1;
    c.ih = rnd_in(1, 13), c.iw = rnd_in(1, 13);
    c.ic = rnd() % 2 ? rnd_in(1, 9) : rnd_in(10, 140);
  }
  if (rnd() % 5 == 0) { /* reductions at and just under AMX's 64-byte tiles: read in place */
    c.ic = 64 * rnd_in(1, 3) - (rnd() % 2 ? 0 : rnd_in(1, 3));
    if (!linear && rnd() % 2) /* and AMX's gathered stride-1 path where ic % 64 == 0 */
      c.sh = c.sw = c.dh = c.dw = 1;
  }
  c.oc = rnd() % 2 ? rnd_in(1, 20) : rnd_in(21, 150);
  /* every eighth convolution has output rows long enough (16 pixels or more) for the
   * paths that read their input in place a row at a time: half of them strided 1x1
   * (gemm.c's strided_direct), half larger kernels on channels a multiple of 4 (its tap
   * path, on AVX-512 VNNI) */
  int long_rows = !linear && rnd() % 8 == 0, strided1x1 = long_rows && rnd() % 2;
  if (long_rows) {
    c.ih = rnd_in(1, 5), c.iw = rnd_in(31, 60);
    if (strided1x1) {
      c.kh = c.kw = c.dh = c.dw = 1;
      c.sh = rnd_in(1, 3), c.sw = rnd_in(2, 3);
    } else {
      c.ic = 4 * rnd_in(1, 40);
      c.sw = rnd_in(1, 2), c.dw = rnd() % 3 == 0 ? 2 : 1;
    }
  }
  int64_t pb = 0, pr = 0;
  if (!linear && !strided1x1 && rnd() % 3) {
    c.pt = rnd_in(0, c.kh), c.pl = rnd_in(0, c.kw), pb = rnd_in(0, c.kh), pr = rnd_in(0, c.kw);
  }
  int64_t eh = c.ih + c.pt + pb - ((c.kh - 1) * c.dh + 1), ew = c.iw + c.pl + pr - ((c.kw - 1) * c.dw + 1);
  if (eh < 0 || ew < 0) { /* too small for the kernel: shrink it to 1x1 */
    c.kh = c.kw = 1, eh = c.ih + c.pt + pb - 1, ew = c.iw + c.pl + pr - 1;
  }
  c.oh = eh / c.sh + 1, c.ow = ew / c.sw + 1;
  if (c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1 && c.ic % 64 == 0 && c.kh * c.kw > 1)
    gathered_cases++;
  if (c.kh == 1 && c.kw == 1 && c.pt == 0 && c.pl == 0 && c.sh * c.sw > 1 && c.ow >= 16)
    strided_cases++;
  if (c.kh * c.kw > 1 && c.ic % 4 == 0 && c.ow >= 16)
    tap_cases++;
  if (c.kh == 1 && c.kw == 1 && c.pt == 0 && c.pl == 0 && c.sh * c.sw > 1 && c.ow < 16)
    strided_rows_cases++;
  int64_t k = c.kh * c.kw * c.ic, xn = c.n * c.ih * c.iw * c.ic, yn = c.n * c.oh * c.ow * c.oc;
  if (k > 2 * 4 * FB_VNNI_KC && c.n * c.oh * c.ow > 6)
    chunked_cases++;

  uint8_t *x = malloc((size_t)xn + 64); /* the host's 64 bytes of slack */
  int8_t *w = malloc((size_t)(c.oc * k));
  float *bias = malloc((size_t)c.oc * sizeof *bias), *mult = malloc((size_t)c.oc * sizeof *mult);
  uint8_t *ref = malloc((size_t)yn + 1), *out = malloc((size_t)yn + 1);
  FbRequant rq = {.zx = (int32_t)rnd_in(0, x_max), .bias = bias, .mult = mult};
  if (rnd() % 4 == 0)
    rq.zx = rnd() % 2 ? 0 : x_max;
  for (int64_t i = 0; i < xn + 64; i++)
    x[i] = (uint8_t)(i < xn ? rnd_in(0, x_max) : 255); /* the slack holds 255s: must not matter */
  int wide = rnd() % 2;
  for (int64_t i = 0; i < c.oc * k; i++)
    w[i] = (int8_t)(wide ? rnd_in(-128, 127) : rnd_in(-10, 10));
  int out_max = rnd() % 2 ? 255 : 127, relu = rnd() % 2;
  rq.zo = (int32_t)rnd_in(0, out_max);
  rq.lo = relu ? rq.zo : 0, rq.hi = out_max;
  /* Multipliers that spread the accumulators over the output range, and every fourth
   * case a power of two with an integral bias: many exact .5 ties. */
  int ties = rnd() % 4 == 0;
  float spread = 1.0f / (float)((wide ? 128 : 10) * (x_max / 2 + 1)) / (float)(k < 4 ? 1 : k / 4);
  for (int64_t o = 0; o < c.oc; o++) {
    if (ties) {
      mult[o] = rnd() % 2 ? 0.5f : 0.25f;
      bias[o] = (float)rnd_in(-50, 50);
    } else {
      mult[o] = spread * (float)rnd_in(1, 2000) / 100.0f;
      bias[o] = rnd() % 4 == 0 ? 0.0f : (float)rnd_in(-100000, 100000) / 100.0f;
    }
  }
  fb_conv_ref(&c, x, w, &rq, ref);
  /* half of the larger kernels in fb_pack_kernel_rows's layout, most of them on channels
   * not a multiple of 4 (the first layers it is for) */
  int kernel_rows = !linear && c.kh * c.kw > 1 && (c.ic % 4 != 0 || rnd() % 4 == 0) && rnd() % 2;
  kernel_rows_cases += kernel_rows;
  kernel_row_path_cases += kernel_rows && c.dw == 1;

  int bad = 0;
  FbPacked pk;
  for (size_t t = 0; t < n_isas && !bad; t++) {
    if ((kernel_rows ? fb_pack_kernel_rows(isas[t], &pk, w, c.oc, c.kh, c.kw * c.ic, &rq)
                     : fb_pack_for(isas[t], &pk, w, c.oc, k, &rq)) != 0) {
      fprintf(stderr, "out of memory\n");
      exit(1);
    }
    int_bias_packs += pk.int_bias;
    int_bias_full_range_packs += pk.int_bias && rq.lo == 0 && rq.hi == 255 && pk.npanel > 1;
    for (int threads = 0; threads < 3 && !bad; threads++) {
      FbPool pool = {.run = threads == 1 ? reverse_pool : two_thread_pool, .n_workers = threads == 1 ? 3 : 2};
      size_t wsn = fb_conv_workspace(&c, &pk, threads ? pool.n_workers : 1);
      uint8_t *ws = malloc(wsn + 64);
      memset(out, 0xA5, (size_t)yn + 1);
      fb_conv_packed(isas[t], &c, &pk, x, out, ws, threads ? &pool : NULL);
      for (int64_t i = 0; i < yn; i++)
        if (out[i] != ref[i]) {
          fprintf(stderr,
                  "case %d %s%s: n=%lld ih=%lld iw=%lld ic=%lld oc=%lld k=%lldx%lld s=%lld,%lld "
                  "d=%lld,%lld p=%lld,%lld,%lld,%lld zx=%d zo=%d lo=%d hi=%d%s: y[%lld] = %d, twin %d\n",
                  idx, fb_isa_name(isas[t]), threads == 1 ? " (3 workers)" : threads ? " (2 threads)" : "",
                  (long long)c.n, (long long)c.ih,
                  (long long)c.iw, (long long)c.ic, (long long)c.oc, (long long)c.kh, (long long)c.kw,
                  (long long)c.sh, (long long)c.sw, (long long)c.dh, (long long)c.dw, (long long)c.pt,
                  (long long)c.pl, (long long)pb, (long long)pr, rq.zx, rq.zo, rq.lo, rq.hi,
                  ties ? " ties" : "", (long long)i, out[i], ref[i]);
          bad = 1;
          break;
        }
      if (!bad && out[yn] != 0xA5) {
        fprintf(stderr, "case %d %s: wrote past the output\n", idx, fb_isa_name(isas[t]));
        bad = 1;
      }
      free(ws);
    }
    fb_pack_free(&pk);
  }
  free(x), free(w), free(bias), free(mult), free(ref), free(out);
  return bad;
}

/* A pool that runs every task in order as worker 0: legal (worker < n_workers), and the
 * case where the 3x3 depthwise path's other home ranges are only ever claimed by steals. */
static void worker0_pool(void *runner, size_t n, FbTaskFn task, void *user) {
  (void)runner;
  for (size_t i = 0; i < n; i++)
    task(user, i, 0);
}

/* One random depthwise case; returns 0 when every path agrees with fb_dw_ref. */
static int run_dw_case(int idx, const FbIsa *isas, size_t n_isas) {
  FbConv c = {0};
  int x_max = rnd() % 2 ? 255 : 127;
  c.n = rnd_in(1, 2);
  c.ic = c.oc = rnd() % 2 ? rnd_in(1, 20) : rnd_in(21, 70);
  if (rnd() % 5 == 0) /* and past 64, where the AVX-512 3x3 kernel takes 64 channels at a time */
    c.ic = c.oc = rnd_in(64, 200);
  else if (rnd() % 8 == 0) /* 32: pairs of pixels are one 64-byte load (dw-avx512vnni-3x3.c, load_pair32); */
    c.ic = c.oc = rnd() % 2 ? 32 : 96; /* 32 and 96: a tail of exactly 32 (stream_s2_piece32 at stride 2) */
  c.kh = rnd() % 2 ? 3 : rnd_in(1, 5);
  c.kw = rnd() % 2 ? c.kh : rnd_in(1, 5);
  c.sh = rnd_in(1, 3), c.sw = rnd() % 2 ? c.sh : rnd_in(1, 3);
  c.dh = rnd() % 3 == 0 ? rnd_in(2, 3) : 1, c.dw = rnd() % 3 == 0 ? rnd_in(2, 3) : 1;
  if (c.kh == 3 && c.kw == 3 && (c.ic >= 64 || c.ic == 32) && rnd() % 2 == 0) /* mobilenet's stride-2 layers: */
    c.sh = c.sw = 2, c.dh = c.dw = 1; /* the 3x3 path's streamed full blocks and 32-channel tails, on every seed */
  c.ih = rnd_in(1, 12), c.iw = rnd() % 6 == 0 ? rnd_in(13, 140) : rnd_in(1, 12); /* wide: past a 3x3 chunk */
  int64_t pb = 0, pr = 0;
  if (rnd() % 4) {
    c.pt = rnd_in(0, c.kh), c.pl = rnd_in(0, c.kw), pb = rnd_in(0, c.kh), pr = rnd_in(0, c.kw);
  }
  int64_t eh = c.ih + c.pt + pb - ((c.kh - 1) * c.dh + 1), ew = c.iw + c.pl + pr - ((c.kw - 1) * c.dw + 1);
  if (eh < 0 || ew < 0) {
    c.kh = c.kw = 1, eh = c.ih + c.pt + pb - 1, ew = c.iw + c.pl + pr - 1;
  }
  c.oh = eh / c.sh + 1, c.ow = ew / c.sw + 1;
  if (c.kh == 3 && c.kw == 3) {
    dw3_block_cases += c.ic > 64 && c.ic % 64 != 0;
    dw3_chunk_cases += c.ow * c.sw > 64;
    dw3_stride2_cases += c.sh == 2 && c.dh == 1 && c.oh > 1;
    dw3_pair32_cases += c.ic % 64 >= 32 && c.iw > 1;
    dw3_ic32_cases += c.ic == 32 && c.iw > 1;
    dw3_stream32_cases += c.sw == 2 && c.dw == 1 && !(c.sh == 1 && c.dh == 1) && c.ic % 64 == 32;
    dw3_stream32_inside_cases += c.sw == 2 && c.dw == 1 && !(c.sh == 1 && c.dh == 1) && c.ic % 64 == 32 && c.iw >= 6;
  }
  if (c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1 && c.ic % 64 == 0 && c.kh * c.kw > 1)
    gathered_cases++;
  int64_t taps = c.kh * c.kw, xn = c.n * c.ih * c.iw * c.ic, yn = c.n * c.oh * c.ow * c.oc;
  uint8_t *x = malloc((size_t)xn); /* no slack: the depthwise paths read nothing past the input */
  int8_t *w = malloc((size_t)(c.oc * taps));
  float *bias = malloc((size_t)c.oc * sizeof *bias), *mult = malloc((size_t)c.oc * sizeof *mult);
  uint8_t *ref = malloc((size_t)yn + 1), *out = malloc((size_t)yn + 1);
  FbRequant rq = {.zx = (int32_t)rnd_in(0, x_max), .bias = bias, .mult = mult};
  if (rnd() % 4 == 0)
    rq.zx = rnd() % 2 ? 0 : x_max;
  for (int64_t i = 0; i < xn; i++)
    x[i] = (uint8_t)rnd_in(0, x_max);
  int wide = rnd() % 2;
  for (int64_t i = 0; i < c.oc * taps; i++)
    w[i] = (int8_t)(wide ? rnd_in(-128, 127) : rnd_in(-10, 10));
  int out_max = rnd() % 2 ? 255 : 127, relu = rnd() % 2;
  rq.zo = (int32_t)rnd_in(0, out_max);
  rq.lo = relu ? rq.zo : 0, rq.hi = out_max;
  /* integral: every bias an integer (int32 QDQ biases), as the 3x3 path's int_bias3 needs */
  int ties = rnd() % 4 == 0, big = !ties && rnd() % 3 == 0, integral = rnd() % 3 == 0;
  float spread = 1.0f / (float)((wide ? 128 : 10) * (x_max / 2 + 1)) / (float)(taps < 4 ? 1 : taps / 4);
  for (int64_t o = 0; o < c.oc; o++) {
    if (ties) {
      mult[o] = rnd() % 2 ? 0.5f : 0.25f;
      bias[o] = (float)rnd_in(-50, 50);
    } else if (big) { /* integral, within FB_DW3_INT_BIAS_MAX - 9 * 255 * 128 or (rarely) just past it */
      mult[o] = (float)rnd_in(1, 4000) / 4194304.0f;
      bias[o] = (float)((rnd() % 2 ? 1 : -1) * rnd_in(3600000, 3900560));
    } else {
      mult[o] = spread * (float)rnd_in(1, 2000) / 100.0f;
      bias[o] = rnd() % 4 == 0 ? 0.0f : (float)rnd_in(-10000, 10000) / (integral ? 1.0f : 100.0f);
    }
  }
  if (!big && rnd() % 3 == 0) /* values past 2^31 in float (the epilogue's float upper clamp), in the first block */
    mult[rnd_in(0, (c.oc < 64 ? c.oc : 64) - 1)] = rnd() % 2 ? 1e6f : 1e4f;
  fb_dw_ref(&c, x, w, &rq, ref);
  FbDwPacked pk;
  if (fb_dw_pack(&pk, w, c.oc, c.kh, c.kw, &rq) != 0) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  if (c.kh == 3 && c.kw == 3 && c.ic >= 64) {
    dw3_byte_hi_cases += pk.byte_hi && !pk.int_bias3; /* the int_bias3 ones are counted below */
    dw3_float_hi_cases += !pk.byte_hi;
    dw3_stream_cases += c.sw == 2 && c.dw == 1 && !(c.sh == 1 && c.dh == 1);
    dw3_int_bias_cases += pk.int_bias3;
    dw3_int_bias_stream_cases += pk.int_bias3 && c.sw == 2 && c.dw == 1 && !(c.sh == 1 && c.dh == 1);
    dw3_big_bias_cases += pk.int_bias3 && big;
  }
  if (c.kh == 3 && c.kw == 3) {
    int64_t rem = c.ic % 64;
    int piece16 = ((rem >= 1 && rem <= 16) || (rem >= 33 && rem <= 48)) && c.ow >= 4;
    dw3_piece16_cases += piece16;
    dw3_piece16_int_cases += piece16 && pk.int_bias3;
  }
  int bad = 0;
  for (size_t t = 0; t < n_isas && !bad; t++)
    for (int threads = 0; threads < 4 && !bad; threads++) {
      /* 1: three workers' tasks in reverse on this thread (the 3x3 path's last worker
       * claims every other home range from its back); 2: two real threads claiming at
       * once; 3: every task on worker 0, whose claims alone must cover the others' ranges */
      FbPool pool = {.run = threads == 2 ? two_thread_pool : threads == 3 ? worker0_pool : reverse_pool,
                     .n_workers = threads == 2 ? 2 : 3};
      memset(out, 0xA5, (size_t)yn + 1);
      size_t wsn = fb_dw_workspace(isas[t], &c, &pk, threads ? pool.n_workers : 1);
      void *ws = wsn ? aligned_alloc(64, wsn) : NULL;
      if (wsn && !ws) {
        fprintf(stderr, "out of memory\n");
        exit(1);
      }
      fb_dw_run(isas[t], &c, &pk, x, out, ws, threads ? &pool : NULL);
      free(ws);
      for (int64_t i = 0; i < yn; i++)
        if (out[i] != ref[i]) {
          fprintf(stderr,
                  "depthwise case %d %s%s: n=%lld ih=%lld iw=%lld c=%lld k=%lldx%lld s=%lld,%lld d=%lld,%lld "
                  "p=%lld,%lld,%lld,%lld zx=%d zo=%d lo=%d hi=%d%s: y[%lld] = %d, twin %d\n",
                  idx, fb_isa_name(isas[t]),
                  threads == 3   ? " (3 tasks on worker 0)"
                  : threads == 2 ? " (2 threads)"
                  : threads      ? " (3 workers)"
                                 : "",
                  (long long)c.n, (long long)c.ih,
                  (long long)c.iw, (long long)c.oc, (long long)c.kh, (long long)c.kw, (long long)c.sh,
                  (long long)c.sw, (long long)c.dh, (long long)c.dw, (long long)c.pt, (long long)c.pl,
                  (long long)pb, (long long)pr, rq.zx, rq.zo, rq.lo, rq.hi, ties ? " ties" : "", (long long)i,
                  out[i], ref[i]);
          bad = 1;
          break;
        }
      if (!bad && out[yn] != 0xA5) {
        fprintf(stderr, "depthwise case %d %s: wrote past the output\n", idx, fb_isa_name(isas[t]));
        bad = 1;
      }
    }
  fb_dw_pack_free(&pk);
  free(x), free(w), free(bias), free(mult), free(ref), free(out);
  return bad;
}

/* The depthwise twin on a hand-checked case: padding taps add nothing, a tie rounds to
 * even. One channel, 1x2 input, 1x3 kernel, left pad 1. */
static int dw_twin_sanity(void) {
  FbConv c = {.n = 1, .ih = 1, .iw = 2, .ic = 1, .oc = 1, .kh = 1, .kw = 3, .sh = 1, .sw = 1, .dh = 1,
              .dw = 1, .pt = 0, .pl = 1, .oh = 1, .ow = 2};
  const uint8_t x[2] = {13, 14};
  const int8_t w[3] = {1, 2, 3};
  float bias = 0.0f, mult = 0.5f;
  FbRequant rq = {.zx = 10, .zo = 100, .lo = 0, .hi = 255, .bias = &bias, .mult = &mult};
  uint8_t y[2];
  fb_dw_ref(&c, x, w, &rq, y);
  if (y[0] != 109 || y[1] != 106) {
    fprintf(stderr, "depthwise twin: got %d %d, want 109 106\n", y[0], y[1]);
    return 1;
  }
  return 0;
}

/* The twin itself on a hand-checked case: a tie rounds to even, padding reads zx. */
static int twin_sanity(void) {
  FbConv c = {.n = 1, .ih = 1, .iw = 2, .ic = 1, .oc = 1, .kh = 1, .kw = 3, .sh = 1, .sw = 1, .dh = 1,
              .dw = 1, .pt = 0, .pl = 1, .oh = 1, .ow = 2};
  const uint8_t x[2 + 64] = {13, 14};
  const int8_t w[3] = {1, 2, 3};
  float bias = 0.0f, mult = 0.5f;
  FbRequant rq = {.zx = 10, .zo = 100, .lo = 0, .hi = 255, .bias = &bias, .mult = &mult};
  uint8_t y[2];
  fb_conv_ref(&c, x, w, &rq, y);
  /* y0 = (pad*1 + 3*2 + 4*3) = 18 -> 9 -> 109; y1 = 3*1 + 4*2 + pad = 11 -> 5.5 -> 6 -> 106 */
  if (y[0] != 109 || y[1] != 106) {
    fprintf(stderr, "twin: got %d %d, want 109 106\n", y[0], y[1]);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int cases = 400;
  const char *only = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--isa") == 0)
      only = argv[i + 1];
    else if (strcmp(argv[i], "--cases") == 0)
      cases = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--seed") == 0)
      rng_state = strtoull(argv[i + 1], NULL, 0) | 1;
    else {
      fprintf(stderr, "usage: %s [--isa NAME] [--cases N] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  if (twin_sanity() || dw_twin_sanity())
    return 1;
  const FbIsa all[] = {FB_ISA_PACKED_C, FB_ISA_AVX2, FB_ISA_AVXVNNI, FB_ISA_AVX512VNNI, FB_ISA_AMX};
  FbIsa isas[5];
  size_t n = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    if (only && strcmp(only, fb_isa_name(all[i])) != 0)
      continue;
    if (!isa_available(all[i])) {
      printf("SKIP %s: this CPU lacks it (or QHOST_CPU_DISABLE hides it)\n", fb_isa_name(all[i]));
      if (only)
        return 77;
      continue;
    }
    isas[n++] = all[i];
  }
  if (n == 0) {
    fprintf(stderr, "unknown --isa %s\n", only ? only : "");
    return 2;
  }
  int failed = 0, dw_failed = 0;
  for (int i = 0; i < cases; i++)
    failed += run_case(i, isas, n);
  for (int i = 0; i < cases; i++)
    dw_failed += run_dw_case(i, isas, n);
  for (size_t i = 0; i < n; i++)
    printf("%s: %d random cases %s, %d depthwise %s\n", fb_isa_name(isas[i]), cases,
           failed ? "checked" : "bit-exact with the twin", cases, dw_failed ? "checked" : "bit-exact with theirs");
  printf("%d of the %d cases have the shape of AMX's gathered stride-1 path\n", gathered_cases, cases);
  if (gathered_cases == 0 && cases >= 100) {
    fprintf(stderr, "no case reached AMX's gathered path\n");
    return 1;
  }
  printf("%d of the %d cases are strided 1x1 convolutions read in place\n", strided_cases, cases);
  if (strided_cases == 0 && cases >= 100) {
    fprintf(stderr, "no case reached the strided 1x1 path\n");
    return 1;
  }
  printf("%d of the %d cases are strided 1x1 convolutions with rows under 16 pixels\n", strided_rows_cases, cases);
  if (strided_rows_cases == 0 && cases >= 100) {
    fprintf(stderr, "no case reached the strided 1x1 path's short rows\n");
    return 1;
  }
  printf("%d of the %d cases have the shape of AVX-512 VNNI's tap path\n", tap_cases, cases);
  if (tap_cases == 0 && cases >= 100) {
    fprintf(stderr, "no case reached the tap path\n");
    return 1;
  }
  printf("%d of the %d cases have a reduction AVX-512 VNNI takes in chunks\n", chunked_cases, cases);
  if (chunked_cases == 0 && cases >= 100) {
    fprintf(stderr, "no case reached the chunked reduction\n");
    return 1;
  }
  printf("%d of the depthwise cases are 3x3 with full blocks of 64 channels and a tail, %d 3x3 with rows of more "
         "than one chunk of 64 input columns, %d 3x3 at stride 2 over several rows\n",
         dw3_block_cases, dw3_chunk_cases, dw3_stride2_cases);
  printf("%d of the depthwise cases are 3x3 with a tail piece of 32 built two columns at a time, %d of them with 32 "
         "channels\n",
         dw3_pair32_cases, dw3_ic32_cases);
  if ((dw3_block_cases == 0 || dw3_chunk_cases == 0 || dw3_stride2_cases == 0 || dw3_pair32_cases == 0 ||
       dw3_ic32_cases == 0) &&
      cases >= 100) {
    fprintf(stderr, "no depthwise case reached the 3x3 path's blocks and tail or its chunks\n");
    return 1;
  }
  printf("%d of the %d cases packed in kernel rows, %d of them on AVX-512 VNNI's kernel-row path\n",
         kernel_rows_cases, cases, kernel_row_path_cases);
  if (kernel_row_path_cases == 0 && cases >= 100) {
    fprintf(stderr, "no case reached the kernel-row path\n");
    return 1;
  }
  printf("%d packs take the short epilogue (integral biases, kernels.h's int_bias), %d of them with outputs over "
         "the whole byte range\n",
         int_bias_packs, int_bias_full_range_packs);
  if ((int_bias_packs == 0 || int_bias_full_range_packs == 0) && cases >= 100) {
    fprintf(stderr, "no pack took the short epilogue, or none with outputs over the whole byte range\n");
    return 1;
  }
  printf("%d of the depthwise cases are 3x3 with full blocks and the byte upper clamp (float biases), %d with the "
         "float one, %d at "
         "stride 2 without the row buffer\n",
         dw3_byte_hi_cases, dw3_float_hi_cases, dw3_stream_cases);
  if ((dw3_byte_hi_cases == 0 || dw3_float_hi_cases == 0 || dw3_stream_cases == 0) && cases >= 100) {
    fprintf(stderr, "no depthwise case reached one of the 3x3 epilogues or the stride-2 path without buffer\n");
    return 1;
  }
  printf("%d of the depthwise cases are 3x3 with full blocks and integral biases in the accumulators, %d of them at "
         "stride 2 without the row buffer, %d with biases near the bound\n",
         dw3_int_bias_cases, dw3_int_bias_stream_cases, dw3_big_bias_cases);
  printf("%d of the depthwise cases are 3x3 with a tail of 32 channels at stride 2 without the row buffer, %d of them "
         "6 or more columns wide\n",
         dw3_stream32_cases, dw3_stream32_inside_cases);
  printf("%d of the depthwise cases are 3x3 with a last piece of up to 16 channels over 4 pixels or more, %d of them "
         "with integral biases in the accumulators\n",
         dw3_piece16_cases, dw3_piece16_int_cases);
  if ((dw3_piece16_cases == 0 || dw3_piece16_int_cases == 0) && cases >= 100) {
    fprintf(stderr, "no depthwise case reached the four-pixel epilogue of the last 16 channels\n");
    return 1;
  }
  if ((dw3_stream32_cases == 0 || dw3_stream32_inside_cases == 0) && cases >= 100) {
    fprintf(stderr, "no depthwise case reached the stride-2 path of 32-channel tails (or its pixels inside)\n");
    return 1;
  }
  if ((dw3_int_bias_cases == 0 || dw3_int_bias_stream_cases == 0 || dw3_big_bias_cases == 0) && cases >= 100) {
    fprintf(stderr, "no depthwise case reached the integral-bias epilogue (or its stride-2 or large-bias cases)\n");
    return 1;
  }
  if (failed)
    fprintf(stderr, "%d of %d cases differ from the scalar twin\n", failed, cases);
  if (dw_failed)
    fprintf(stderr, "%d of %d depthwise cases differ from the depthwise twin\n", dw_failed, cases);
  return failed || dw_failed ? 1 : 0;
}
