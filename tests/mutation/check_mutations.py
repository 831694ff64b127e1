#!/usr/bin/python3
"""Planted bugs: every mutation below must fail at least one of the tests that reach its
code, or the suite tests less than it says.

Copies the repository's tracked files to a scratch directory, builds them once, then for
each mutation: applies it (the original text must occur exactly once), rebuilds (only
what the change touches), runs the tests named for it with ctest, records which failed,
and restores the file. Exit 0 when every mutation was caught; 1 otherwise, naming the
ones that were not. A mutation whose original text is gone (the code moved) is a failure
too: the list must follow the code.

  check_mutations.py --workdir DIR [--cmake cmake] [--ctest ctest] [--only NAME ...]

Slow (one full build and several test runs): ctest label `heavy`.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# name -> (file, original text, mutated text, ctest -R regex of the tests that reach it)
MUTATIONS = {
    # the host's QuantizeLinear rounds half away from zero instead of half to even
    "host_quantize_rounding": (
        "framework/exec/kernels/qdq.c",
        "  return (v + ROUND_MAGIC) - ROUND_MAGIC;\n",
        "  return roundf(v);\n",
        r"^unit/test_qdq_kernels$|^unit/test_quantize$|^parity/int8$"),
    # the x86 plugin's conv/linear output zero point is one off
    "x86_output_zero_point": (
        "plugins/x86/onednn-kernels.c",
        "    k->zo = k->in.yq->zero_point[0];\n",
        "    k->zo = k->in.yq->zero_point[0] + 1;\n",
        r"^lower/x86/units$|^lower/plugin_check/x86$|^parity/x86/(tutorial|cnn|mlp)$"),
    # the observers' default eps is 2^-24 instead of PyTorch's float32 epsilon 2^-23
    "minmax_eps": (
        "framework/quant/observers/common.c",
        "  *eps = obs->config->has_eps ? obs->config->eps : 0x1p-23f;\n",
        "  *eps = obs->config->has_eps ? obs->config->eps : 0x1p-24f;\n",
        r"^unit/test_observers$|^parity/observers$"),
    # the fbgemm plugin's AVX2 epilogue rounds ties half away from zero (adds +-0.5, then
    # truncates) instead of half to even: only exact .5 ties differ, which the kernel test's
    # tie cases and the cross-path comparisons of the lowering and parity tests must see
    "fbgemm_avx2_tie_rounding": (
        "plugins/fbgemm/gemm-avx2.c",
        "      __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), zo);\n",
        "      __m256i q = _mm256_add_epi32(_mm256_cvttps_epi32(_mm256_add_ps(f, _mm256_or_ps(\n"
        "          _mm256_set1_ps(0.5f), _mm256_and_ps(f, _mm256_set1_ps(-0.0f))))), zo);\n",
        r"^fbgemm/kernels/avx2$|^lower/fbgemm/|^lower/plugin_check/fbgemm$|^parity/fbgemm/"),
    # the fbgemm plugin's portable depthwise code (the packed_c path, and the AVX2 path's
    # last channels short of 8) caps the input zero point at 127, as if every file were
    # reduce_range: wrong only where zx > 127 (full-range activations)
    "fbgemm_dw_zero_point": (
        "plugins/fbgemm/dw.c",
        "          acc[j] += ((int32_t)xp[j] - p->zx) * wp[j];\n",
        "          acc[j] += ((int32_t)xp[j] - (p->zx > 127 ? 127 : p->zx)) * wp[j];\n",
        r"^fbgemm/kernels/(packed_c|avx2)$|^lower/fbgemm/|^lower/plugin_check/fbgemm$"),
    # the x86 activation MatMul's int8 path shifts the right operand's zero point by 127
    # instead of 128: its row-sum correction is off wherever the left operand's rows differ
    "x86_act_matmul_shift": (
        "plugins/x86/act-matmul.c",
        "    int32_t zb = k->zb - 128; /* zb' */\n",
        "    int32_t zb = k->zb - 127; /* zb' */\n",
        r"^lower/x86/act_matmul/"),
    # its exact fp32 path (no VNNI) subtracts the right operand's zero point from the left
    "x86_act_matmul_fp32_zero_point": (
        "plugins/x86/act-matmul.c",
        "      af[i] = (float)((int32_t)a[i] - k->za);\n",
        "      af[i] = (float)((int32_t)a[i] - k->zb);\n",
        r"^lower/x86/act_matmul/"),
    # the x86 dynamic linear's zero-point correction uses x_zero_point + 1
    # the AVX-512 LayerNorm of the fused host group adds epsilon twice
    "fused_layernorm_avx512_eps": (
        "framework/exec/kernels/fused-host.c",
        "_mm512_set1_ps(sqrtf(var + j->eps));\n",
        "_mm512_set1_ps(sqrtf(var + 2.0f * j->eps));\n",
        r"^unit/test_fused_host$"),
    # the AVX-512 Softmax sums the masked-off lanes of a row's last vector too
    "softmax_avx512_tail_sum": (
        "framework/exec/kernels/softmax-simd.c",
        "    s0 = _mm512_mask_add_ps(s0, k, s0, e);\n",
        "    s0 = _mm512_add_ps(s0, e);\n",
        r"^unit/test_kernels_pointwise$|^unit/test_fused_host$"),
    "x86_dynamic_linear_zero_point": (
        "plugins/x86/dynamic-linear.c",
        "    k->zc[c] = (int32_t)(zx * (uint32_t)k->colsum[c]);\n",
        "    k->zc[c] = (int32_t)((zx + 1) * (uint32_t)k->colsum[c]);\n",
        r"^lower/x86/dynamic/"),
}


def run(cmd, cwd=None, log=None):
    """Run cmd; its output goes to log (appended). Returns the exit status."""
    with open(log, "a") if log else open(os.devnull, "w") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode


def copy_tree(dst):
    # tracked files and new ones not yet added (ignored ones, e.g. build trees, left out)
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = os.path.join(ROOT, rel)
        if not os.path.isfile(src):
            continue  # deleted in the work tree
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dst, rel))
    # ONNX Runtime, the oracle of some tests, is installed, not tracked
    modules = os.path.join(ROOT, "tests", "ort", "node_modules")
    if os.path.isdir(modules):
        os.symlink(modules, os.path.join(dst, "tests", "ort", "node_modules"))


def failed_tests(build, regex, ctest, log):
    """The names of the tests matching regex that failed (ctest's LastTestsFailed.log)."""
    failed_log = os.path.join(build, "Testing", "Temporary", "LastTestsFailed.log")
    if os.path.exists(failed_log):
        os.remove(failed_log)
    listed = subprocess.run([ctest, "--test-dir", build, "-N", "-R", regex], capture_output=True, text=True)
    n = sum(1 for ln in listed.stdout.splitlines() if re.match(r"\s*Test\s+#", ln))  # not "Test project"
    run([ctest, "--test-dir", build, "-R", regex, "-j2", "--output-on-failure"], log=log)
    if not os.path.exists(failed_log):
        return n, []
    return n, [ln.split(":", 1)[1].strip() for ln in open(failed_log) if ":" in ln]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", action="append", choices=sorted(MUTATIONS), help="run only this mutation")
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    src, build = os.path.join(args.workdir, "src"), os.path.join(args.workdir, "build")
    log = os.path.join(args.workdir, "mutations.log")
    os.makedirs(src)
    copy_tree(src)
    t0 = time.time()
    if run([args.cmake, "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DBUILD_TESTING=ON",
            f"-DQH_PYTHON={args.python}"], log=log) or run([args.cmake, "--build", build, "-j2"], log=log):
        print(f"FAIL: the unmutated copy does not build (see {log})")
        return 1
    print(f"copy built in {time.time() - t0:.0f} s")
    missed = []
    for name in args.only or MUTATIONS:
        rel, before, after, regex = MUTATIONS[name]
        path = os.path.join(src, rel)
        text = open(path, encoding="utf-8").read()
        if text.count(before) != 1:
            print(f"FAIL {name}: the original text occurs {text.count(before)} times in {rel}; "
                  "update the mutation")
            missed.append(name)
            continue
        open(path, "w", encoding="utf-8").write(text.replace(before, after))
        try:
            if run([args.cmake, "--build", build, "-j2"], log=log):
                print(f"FAIL {name}: the mutated copy does not build (see {log})")
                missed.append(name)
                continue
            n, failed = failed_tests(build, regex, args.ctest, log)
        finally:
            open(path, "w", encoding="utf-8").write(text)
        if n == 0:
            print(f"FAIL {name}: no test matches {regex}")
            missed.append(name)
        elif failed:
            print(f"caught {name}: {len(failed)} of {n} tests failed ({', '.join(failed)})")
        else:
            print(f"FAIL {name}: all {n} tests that reach {rel} passed with the bug planted")
            missed.append(name)
    print(f"{'FAIL' if missed else 'PASS'}: {len(args.only or MUTATIONS) - len(missed)} of "
          f"{len(args.only or MUTATIONS)} planted bugs caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
