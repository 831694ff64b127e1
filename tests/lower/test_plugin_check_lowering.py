#!/usr/bin/env python3
"""`qhost plugin-check` on the lowering group: the scalar_int8 test plugin's kernels
(tests/lower/plugins/scalar_int8.c) run on the host's built-in QDQ graphs, and every
plugin that can quantize also on graphs generated from its own declared patterns
(quantized by `qhost quantize`'s flow with its own BackendConfig, annotate and
observers), each compared with the host's reference path; every declared pattern needs
a kernel run.

- without options scalar_int8 conforms: each graph one of its seven patterns claims
  (Conv, Conv+Relu, Gemm, Gemm+Relu, MatMul, Add, Add+Relu; the Conv of Conv -> Q/DQ ->
  Clip) gets a PASS within one output step, each pattern a line with its kernel-run
  count and what it claimed, and graphs nobody claims (Relu, pools, Concat, Sigmoid,
  Conv -> Add) no line; it has no BackendConfig or annotate, so no generated graphs;
- --backend-opt fail=create|reshape|run makes every claimed graph FAIL with the
  plugin's message naming kernel and node, and every pattern FAIL (its kernel never
  completed a run); fail_node limits that to one unit and its patterns;
- --backend-opt bug=zero_point|floor|truncate plants a kernel that is one step off away
  from ties, in a plugin that declares no reference_numerics: every claimed graph must
  FAIL, naming an element whose value before rounding is more than 2^-10 of a step from
  a tie;
- decline=PATTERN: that pattern's kernel never runs, a FAIL with the plugin's reason,
  named again above the verdict; the plugin does not conform;
- shared_scale_npu (the same kernels as an NPU whose Add takes both inputs on one grid,
  with a BackendConfig saying so) declines the built-in Add graphs but runs its Add
  kernels on its generated graphs and conforms; with decline=* every pattern FAILs;
- a plugin without a lowering group (the BackendConfig tutorial's my_backend) gets no
  lowering line;
- qnnpack runs every pattern (its Conv patterns on the generated graphs, whose weights
  its own qconfig quantizes per tensor; the built-in per-channel Conv graphs are
  declined); fbgemm on every kernel path the CPU has (QHOST_CPU_DISABLE); x86 including
  the patterns its default config never produces (Conv -> Add on the built-in graph,
  x * sigmoid(x), Pad and Slice on generated variants);
- example_vitis (symmetric int8, power-of-two scales, from its own annotate) declines the
  uint8 graphs, runs each pattern on its generated graph within one step (differences
  only exactly at ties) and, since the reference computes those graphs exactly, bit for
  bit what its own fake_quantize gives; and the int8 power-of-two built-in graphs only
  for the two patterns with the DPU's AveragePool factor.
"""

import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
import qhtest  # noqa: E402


class Skip(Exception):
    """A case that cannot run here: exit 77 (ctest's SKIP_RETURN_CODE) with the reason."""

# built-in graph -> (unit, ops, pattern, kernel) that scalar_int8 claims
CLAIMED = {
    "conv_relu": ("conv", "Conv+Relu", "conv_relu", "conv2d_nhwc_qu8_qs8w"),
    "conv": ("conv", "Conv", "conv", "conv2d_nhwc_qu8_qs8w"),
    # Conv -> Q/DQ on the output's grid -> Clip: scalar_int8's patterns do not cross the
    # pair (no QH_PATTERN_THROUGH_SHARED_QDQ), so its conv pattern takes the Conv alone
    "conv_qdq_clip": ("conv", "Conv", "conv", "conv2d_nhwc_qu8_qs8w"),
    "gemm_relu": ("fc", "Gemm+Relu", "linear_relu", "linear_qu8_qs8w"),
    "gemm": ("fc", "Gemm", "linear", "linear_qu8_qs8w"),
    "matmul": ("matmul", "MatMul", "matmul", "linear_qu8_qs8w"),
    "add_relu": ("add", "Add+Relu", "add_relu", "add_qu8"),
    "add": ("add", "Add", "add", "add_qu8"),
}
UNCLAIMED = ("relu", "maxpool", "avgpool", "global_avgpool", "concat", "sigmoid", "conv_add", "conv_add_relu")
N_UINT8 = len(CLAIMED) + len(UNCLAIMED)
SCALAR_PATTERNS = ("linear_relu", "linear", "matmul", "conv_relu", "conv", "add_relu", "add")
NO_GENERATED = "no generated graphs (without a backend_config or annotate it cannot quantize one)"
# int8 power-of-two graph -> (unit, ops, example_vitis pattern, kernel suffix, exact, has ties)
VITIS = {
    "conv_relu": ("conv", "Conv+Relu", "conv_relu", "conv2d_nchw", True, True),
    "conv_leaky_relu": ("conv", "Conv+LeakyRelu", "conv_leaky_relu", "conv2d_nchw", True, True),
    "conv_clip": ("conv", "Conv+Clip", "conv_clip", "conv2d_nchw", True, True),
    "conv": ("conv", "Conv", "conv", "conv2d_nchw", True, True),
    "depthwise_conv": ("conv", "Conv", "conv", "conv2d_nchw", True, True),
    "depthwise_conv_relu": ("conv", "Conv+Relu", "conv_relu", "conv2d_nchw", True, False),
    "gemm_relu": ("fc", "Gemm+Relu", "gemm_relu", "linear", True, False),
    "gemm_clip": ("fc", "Gemm+Clip", "gemm_clip", "linear", True, False),
    "gemm": ("fc", "Gemm", "gemm", "linear", True, False),
    "matmul_relu": ("matmul", "MatMul+Relu", "matmul_relu", "linear", True, False),
    "matmul": ("matmul", "MatMul", "matmul", "linear", True, False),
    "add_relu": ("op", "Add+Relu", "add_relu", "eltwise", True, True),
    "add": ("op", "Add", "add", "eltwise", True, True),
    "mul": ("op", "Mul", "mul", "eltwise", True, False),
    "maxpool": ("op", "MaxPool", "maxpool", "pool_nchw", True, False),
    "avgpool": ("op", "AveragePool", "avgpool", "pool_nchw", True, True),
    "avgpool_dpu_factor": ("op", "AveragePool+Mul", "avgpool_dpu_factor", "pool_nchw", False, True),
    "global_avgpool": ("op", "GlobalAveragePool", "global_avgpool", "pool_nchw", True, False),
    "global_avgpool_dpu_factor": ("op", "GlobalAveragePool+Mul", "global_avgpool_dpu_factor", "pool_nchw",
                                  False, False),
    "concat": ("concat", "Concat", "concat", "concat", True, False),
    "relu": ("op", "Relu", "relu", "unary", True, True),
    "leaky_relu": ("op", "LeakyRelu", "leaky_relu", "unary", True, False),
    "flatten": ("op", "Flatten", "flatten", "unary", True, False),
}
# unit text, worst, step, share bit-identical (absent when all are), how far from a half
# step the others are, own numerics, family
PASS_DETAIL = re.compile(r"^(.*): 3 runs \(packed weights reused, one on 2 threads\) within one step of the "
                         r"host's reference \(worst (\S+) steps of ([^,)]+)(?:, (\S+)% of elements "
                         r"bit-identical, the others at ties \(within (\S+) of a half step\))?\)(.*?)"
                         r"(?:; (int8 power-of-two) family)?$")
LINE = re.compile(r"^  (PASS|FAIL|SKIP)  ([^:]+): (.*)$")


class Runner:
    def __init__(self, opts):
        self.qhost = opts.qhost
        self.plugin = os.path.join(opts.lower_plugins, "libqhost-scalar_int8.so")
        self.npu = os.path.join(opts.lower_plugins, "libqhost-shared_scale_npu.so")
        self.build_plugins = opts.build_plugins
        self.no_lowering = opts.no_lowering_plugin
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("QHOST_PLUGIN_PATH", "QHOST_TEST_FAULT")}
        if opts.asan:
            self.env["QHOST_PLUGIN_NO_DLCLOSE"] = "1"  # leak reports need the plugin's symbols

    def check(self, target, *args, expect_rc):
        proc = subprocess.run([self.qhost, "plugin-check", target, *args], env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        out, err = proc.stdout.decode(), proc.stderr.decode()
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error", "GLib-CRITICAL"):
            assert marker not in err, err
        assert proc.returncode == expect_rc, f"exit {proc.returncode}, want {expect_rc}\n{out}\n{err}"
        lines = out.splitlines()
        return {(m.group(1), m.group(2)): m.group(3) for m in map(LINE.match, lines) if m}, out

    def scalar(self, *opts, expect_rc):
        args = []
        for o in opts:
            args += ["--backend-opt", o]
        return self.check(self.plugin, *args, expect_rc=expect_rc)


def unit_text(graph):
    unit, ops, pattern, kernel = CLAIMED[graph]
    return f"unit '{unit}' ({ops}, pattern {pattern}, kernel {kernel})"


def lowering_lines(res):
    return {k: v for k, v in res.items() if k[1].startswith("lowering")}


def case_conforms(r):
    res, out = r.scalar(expect_rc=0)
    assert not [k for k in res if k[0] == "FAIL"], out
    for graph in CLAIMED:
        detail = res.get(("PASS", f"lowering on {graph}"))
        assert detail is not None, f"no PASS for {graph}\n{out}"
        m = PASS_DETAIL.match(detail)
        assert m and m.group(1) == unit_text(graph), detail
        assert float(m.group(2)) <= 1.0, detail
        # scalar_int8 is the host's int8 twin: bit for bit; no fake_quantize to hold it to
        assert m.group(2) == "0.00" and m.group(4) is None and m.group(6) == "" and m.group(7) is None, detail
    for graph in UNCLAIMED:
        assert not [k for k in res if k[1] == f"lowering on {graph}"], out
    assert not [k for k in res if k[1].startswith("lowering on int8_pow2 ")], out
    claims = {}
    for graph, (unit, _, pattern, _) in CLAIMED.items():
        claims.setdefault(pattern, []).append(f"{graph} (unit '{unit}')")
    for pattern, what in claims.items():
        # 3 runs of each graph, each running the unit's kernel once
        assert res.get(("PASS", f"lowering pattern {pattern}")) == \
            f"{3 * len(what)} kernel runs; claimed " + ", ".join(what), out
    assert res.get(("PASS", "lowering")) == (
        f"7 patterns validated at load; {NO_GENERATED}, {len(CLAIMED)} of {N_UINT8} uint8 and 0 of "
        f"{len(VITIS)} int8 power-of-two built-in graphs checked"), out
    assert out.splitlines()[-1] == f"conforms: yes ({len(CLAIMED) + 14} passed, 0 failed, 0 skipped)", out


def failure_case(phase, run_name=None):
    def run(r):
        res, out = r.scalar(f"fail={phase}", expect_rc=1)
        failed = {k[1]: v for k, v in res.items() if k[0] == "FAIL"}
        # every claimed graph fails, and no pattern's kernel ever completed a run
        assert sorted(failed) == sorted([f"lowering on {g}" for g in CLAIMED] +
                                        [f"lowering pattern {p}" for p in SCALAR_PATTERNS]), out
        for graph, (unit, _, _, kernel) in CLAIMED.items():
            where = f"{run_name}: " if run_name else ""
            assert failed[f"lowering on {graph}"] == (
                f"{unit_text(graph)}: {where}plugin 'scalar_int8': kernel '{kernel}' (node '{unit}'): "
                f"{phase}: injected failure in {phase}"), out
        for pattern in SCALAR_PATTERNS:
            # the patterns still claimed their graphs
            assert failed[f"lowering pattern {pattern}"].startswith("its kernel never ran: it claimed "), out
        assert out.splitlines()[-2] == "lowering patterns whose kernel never ran: " + ", ".join(SCALAR_PATTERNS), out
        assert ("PASS", "quiet callbacks") in res, out
    return run


def bug_case(bug):
    def run(r):
        res, out = r.scalar(f"bug={bug}", expect_rc=1)
        failed = {k[1]: v for k, v in res.items() if k[0] == "FAIL"}
        assert sorted(failed) == sorted(f"lowering on {g}" for g in CLAIMED), out
        for graph in CLAIMED:
            m = re.match(r"^(.*): first run: output '\S+' element \d+ is \S+, the host's \S+, where the value "
                         r"before rounding \(\S+, \S+ steps\) is (\S+) steps from a tie: an honest kernel "
                         r"differs from the host only at ties$", failed[f"lowering on {graph}"])
            assert m and m.group(1) == unit_text(graph), failed[f"lowering on {graph}"]
            assert float(m.group(2)) > 1 / 1024, failed[f"lowering on {graph}"]
        assert out.splitlines()[-1].startswith("conforms: no ("), out
    return run


def case_fail_one_node(r):
    res, out = r.scalar("fail=run", "fail_node=fc", expect_rc=1)
    failed = sorted(k[1] for k in res if k[0] == "FAIL")
    assert failed == ["lowering on gemm", "lowering on gemm_relu", "lowering pattern linear",
                      "lowering pattern linear_relu"], out
    for graph in ("conv_relu", "conv", "matmul", "add_relu", "add"):
        assert ("PASS", f"lowering on {graph}") in res, out


def case_decline(r):
    """A pattern whose accept declines every unit never runs its kernel: not conforming,
    and the report names it."""
    res, out = r.scalar("decline=conv_relu", expect_rc=1)
    assert res.get(("FAIL", "lowering pattern conv_relu")) == \
        "its kernel never ran: no generated or built-in graph it claimed; declined: declined by option " \
        "decline=conv_relu", out
    # Conv+Relu falls back to the host: nothing of the plugin's to check there
    assert not [k for k in res if k[1] == "lowering on conv_relu"], out
    assert [k[1] for k in res if k[0] == "FAIL"] == ["lowering pattern conv_relu"], out
    assert res.get(("PASS", "lowering")) == (
        f"7 patterns validated at load; {NO_GENERATED}, {len(CLAIMED) - 1} of {N_UINT8} uint8 and 0 of "
        f"{len(VITIS)} int8 power-of-two built-in graphs checked"), out
    assert out.splitlines()[-2:] == ["lowering patterns whose kernel never ran: conv_relu",
                                     "conforms: no (20 passed, 1 failed, 0 skipped)"], out


def case_json(r):
    proc = subprocess.run([r.qhost, "plugin-check", "--json", r.plugin, "--backend-opt", "fail=run"],
                          env=r.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["conforms"] is False, proc.stdout
    fails = [c["name"] for c in report["checks"] if c["verdict"] == "FAIL"]
    assert sorted(fails) == sorted([f"lowering on {g}" for g in CLAIMED] +
                                   [f"lowering pattern {p}" for p in SCALAR_PATTERNS]), fails
    assert report["patterns_never_ran"] == list(SCALAR_PATTERNS), report


def case_no_lowering(r):
    """A plugin without a lowering group gets no lowering line."""
    if not r.no_lowering or not os.path.exists(r.no_lowering):
        raise Skip("no plugin without a lowering group was given (--no-lowering-plugin)")
    res, out = r.check(r.no_lowering, expect_rc=0)
    assert not lowering_lines(res), out
    assert "lowering" not in out, out
    assert out.splitlines()[-1].startswith("conforms: yes ("), out


# built-in graph -> (unit, ops, pattern, kernel) that fbgemm claims
FBGEMM = {
    "conv_relu": ("conv", "Conv+Relu", "conv_relu", "fbgemm_conv2d_nhwc_qu8_qs8w"),
    "conv": ("conv", "Conv", "conv", "fbgemm_conv2d_nhwc_qu8_qs8w"),
    "conv_qdq_clip": ("conv", "Conv+Clip", "conv_clip", "fbgemm_conv2d_nhwc_qu8_qs8w"),  # through the Q/DQ
    "gemm_relu": ("fc", "Gemm+Relu", "linear_relu", "fbgemm_linear_qu8_qs8w"),
    "gemm": ("fc", "Gemm", "linear", "fbgemm_linear_qu8_qs8w"),
    "matmul": ("matmul", "MatMul", "matmul", "fbgemm_linear_qu8_qs8w"),
    "add_relu": ("add", "Add+Relu", "add_relu", "fbgemm_add_nhwc_qu8"),
    "add": ("add", "Add", "add", "fbgemm_add_nhwc_qu8"),
    "maxpool": ("op", "MaxPool", "maxpool", "fbgemm_maxpool2d_nhwc_qu8"),
    "global_avgpool": ("op", "GlobalAveragePool", "global_avgpool", "fbgemm_global_avgpool_nhwc_qu8"),
}


def case_fbgemm(r):
    """fbgemm's kernels within one step of the host on each path this CPU has."""
    env = dict(r.env)
    # "avx512vnni" alone leaves the AVX-VNNI (ymm) path where the CPU has it
    masks = ["", "avx512vnni", "avx512vnni,avxvnni", "avx512vnni,avxvnni,avx2"] if qhtest.qhost_sees_vnni() else \
        ["", "avx2"]
    try:
        for mask in masks:
            r.env = dict(env, QHOST_CPU_DISABLE=mask)
            res, out = r.check("fbgemm", "--plugin-dir", r.build_plugins, expect_rc=0)
            assert not [k for k in res if k[0] == "FAIL"], out
            for graph, (unit, ops, pattern, kernel) in FBGEMM.items():
                detail = res.get(("PASS", f"lowering on {graph}"))
                assert detail is not None, f"{mask}: no PASS for {graph}\n{out}"
                m = PASS_DETAIL.match(detail)
                assert m and m.group(1) == f"unit '{unit}' ({ops}, pattern {pattern}, kernel {kernel})", detail
                assert float(m.group(2)) <= 1.0, detail
            assert_generated_all(res, out)
            assert out.splitlines()[-1].startswith("conforms: yes ("), out
    finally:
        r.env = env


# built-in graph -> (unit, ops, pattern, kernel) that qnnpack claims
QNNPACK = {
    "gemm_relu": ("fc", "Gemm+Relu", "linear_relu", "xnn_fully_connected_nc_qu8"),
    "gemm": ("fc", "Gemm", "linear", "xnn_fully_connected_nc_qu8"),
    "matmul": ("matmul", "MatMul", "matmul", "xnn_fully_connected_nc_qu8"),
    "add_relu": ("add", "Add+Relu", "add_relu", "xnn_add_nd_qu8"),
    "add": ("add", "Add", "add", "xnn_add_nd_qu8"),
    "maxpool": ("op", "MaxPool", "maxpool", "xnn_max_pooling2d_nhwc_u8"),
    "avgpool": ("op", "AveragePool", "avgpool", "xnn_average_pooling2d_nhwc_qu8"),
    "global_avgpool": ("op", "GlobalAveragePool", "global_avgpool", "xnn_global_average_pooling_nwc_qu8"),
    "sigmoid": ("op", "Sigmoid", "sigmoid", "xnn_sigmoid_nc_qu8"),
    "relu": ("op", "Relu", "relu", "xnn_clamp_nc_u8"),
    # its per-channel Conv is declined; the Clip after it runs on XNNPACK's clamp
    "conv_qdq_clip": ("clip", "Clip", "clip", "xnn_clamp_nc_u8"),
}


def assert_generated_all(res, out):
    """Every declared pattern's kernel ran, and each generated graph that ran is a PASS."""
    assert not [k for k in res if k[0] == "FAIL"], out
    assert "never ran" not in out, out
    patterns = [k[1][len("lowering pattern "):] for k in res if k[1].startswith("lowering pattern ")]
    assert patterns, out
    for p in patterns:
        detail = res[("PASS", f"lowering pattern {p}")]
        assert re.match(r"^\d+ kernel runs?; claimed ", detail), detail
    generated = [k for k in res if k[1].startswith("lowering on generated ")]
    assert generated and all(k[0] == "PASS" for k in generated), out


def case_qnnpack(r):
    """qnnpack's XNNPACK kernels within one step of the host; per-channel convs declined."""
    res, out = r.check("qnnpack", "--plugin-dir", r.build_plugins, expect_rc=0)
    assert not [k for k in res if k[0] == "FAIL"], out
    for graph, (unit, ops, pattern, kernel) in QNNPACK.items():
        detail = res.get(("PASS", f"lowering on {graph}"))
        assert detail is not None, f"no PASS for {graph}\n{out}"
        m = PASS_DETAIL.match(detail)
        assert m and m.group(1) == f"unit '{unit}' ({ops}, pattern {pattern}, kernel {kernel})", detail
        assert float(m.group(2)) <= 1.0, detail
    for graph in ("conv_relu", "conv"):
        assert ("PASS", f"lowering on {graph}") not in res, out
    # the built-in Conv graphs' per-channel weights are declined; its own qconfig's
    # per-tensor weights (the generated graphs) run
    for pattern in ("conv_relu", "conv"):
        assert res.get(("PASS", f"lowering pattern {pattern}")) == \
            f"3 kernel runs; claimed generated {pattern} (unit 'conv_4')", out
    assert_generated_all(res, out)
    assert out.splitlines()[-1].startswith("conforms: yes ("), out


def case_x86(r):
    """The x86 plugin's conv_clip pattern crosses the Q/DQ pair of conv_qdq_clip
    (QH_PATTERN_THROUGH_SHARED_QDQ): one unit, within one step of the host."""
    if not os.path.exists(os.path.join(r.build_plugins, "libqhost-x86.so")):
        raise Skip("the x86 plugin is not built (oneDNN missing)")
    if not qhtest.qhost_sees_vnni():  # reduce_range=auto then declines these full-range uint8 units
        raise Skip("no VNNI here: x86's reduce_range=auto declines these full-range uint8 units")
    res, out = r.check("x86", "--plugin-dir", r.build_plugins, expect_rc=0)
    detail = res.get(("PASS", "lowering on conv_qdq_clip"))
    assert detail is not None, out
    m = PASS_DETAIL.match(detail)
    assert m and m.group(1) == "unit 'conv' (Conv+Clip, pattern conv_clip, kernel onednn_conv2d_nhwc_qu8_qs8w)", \
        detail
    assert float(m.group(2)) <= 1.0, detail
    assert "conv_qdq_clip (unit 'conv')" in res.get(("PASS", "lowering pattern conv_clip"), ""), out
    # the patterns its own quantizer=fx config never produces run on other graphs: Conv ->
    # Add (X86InductorQuantizer's form) on the built-in one, x * sigmoid(x) behind a Conv,
    # Pad and Slice between two Convs
    assert res.get(("PASS", "lowering pattern conv_add")) == "3 kernel runs; claimed conv_add (unit 'conv')", out
    for pattern, variant in (("act_mul", "x * act(x), x a Conv's output"), ("pad", "between two Convs"),
                             ("slice_channels", "between two Convs")):
        assert f"claimed generated {pattern} ({variant})" in res.get(("PASS", f"lowering pattern {pattern}"), ""), out
    assert_generated_all(res, out)
    assert out.splitlines()[-1].startswith("conforms: yes ("), out


OWN = ", and bit for bit what the plugin's own fake_quantize gives (activations round half up, "


def case_example_vitis(r):
    """example_vitis's kernels on graphs of its own patterns, quantized by its own annotate
    (symmetric int8, power-of-two scales); the int8 power-of-two built-in graphs only for
    the two patterns those graphs cannot give (its accept wants the DPU's factor)."""
    if not os.path.exists(os.path.join(r.build_plugins, "libqhost-example_vitis.so")):
        raise Skip("example_vitis is not built")
    res, out = r.check("example_vitis", "--plugin-dir", r.build_plugins, expect_rc=0)
    assert_generated_all(res, out)
    # it declines every uint8 graph (zero points, non-power-of-two scales)
    for graph in list(CLAIMED) + list(UNCLAIMED):
        assert not [k for k in res if k[1] == f"lowering on {graph}"], out
    from_pow2 = ("avgpool_dpu_factor", "global_avgpool_dpu_factor")
    patterns = {v[2] for v in VITIS.values()}
    for pattern in sorted(patterns - set(from_pow2)):
        detail = [v for k, v in res.items() if k[0] == "PASS" and
                  re.match(rf"^lowering on generated {pattern}( \(.*\))?$", k[1])]
        assert len(detail) == 1, f"{pattern}: {detail}\n{out}"
        m = PASS_DETAIL.match(detail[0])
        assert m, detail
        assert re.match(rf"^unit '\S+' \(\S+, pattern {pattern}, kernel dpu_\w+_qs8_shift\)$", m.group(1)), detail
        step = float(m.group(3))  # its own power-of-two output step
        assert step > 0 and (1 / step).is_integer() and (int(1 / step) & (int(1 / step) - 1)) == 0, detail
        # only ties may differ (it rounds half up, ONNX half to even), and on these grids a
        # difference sits exactly at a half step
        assert float(m.group(2)) <= 1.0 and (m.group(5) is None or float(m.group(5)) == 0.0), detail
        # power-of-two grids and ops the reference computes exactly: held bit for bit to its
        # own fake_quantize, so a tie rounded the wrong way fails
        assert m.group(6).startswith(OWN), detail
    pow2 = sorted(k[1] for k in res if k[1].startswith("lowering on int8_pow2 "))
    assert pow2 == [f"lowering on int8_pow2 {g}" for g in from_pow2], out
    for graph in from_pow2:
        unit, ops, pattern, kernel, exact, ties = VITIS[graph]
        m = PASS_DETAIL.match(res[("PASS", f"lowering on int8_pow2 {graph}")])
        assert m and m.group(1) == f"unit '{unit}' ({ops}, pattern {pattern}, kernel dpu_{kernel}_qs8_shift)", m
        assert m.group(7) == "int8 power-of-two" and (m.group(2) == "1.00") == ties, m.group(0)
        assert res[("PASS", f"lowering pattern {pattern}")] == \
            f"3 kernel runs; claimed int8_pow2 {graph} (unit '{unit}')", out
    assert res.get(("PASS", "lowering")) == (
        f"21 patterns validated at load; 19 generated graphs, 0 of {N_UINT8} uint8 and 2 of {len(VITIS)} int8 "
        "power-of-two built-in graphs checked"), out


def case_own_conventions(r):
    """shared_scale_npu's Add takes both inputs on one grid: it declines the built-in Add
    graphs (inputs on two scales) but its kernels run on graphs of its own patterns,
    quantized with its own BackendConfig (shared_inputs_mask)."""
    res, out = r.check(r.npu, expect_rc=0)
    assert_generated_all(res, out)
    for graph in ("add", "add_relu"):
        assert not [k for k in res if k[1] == f"lowering on {graph}"], out
    for pattern in ("add", "add_relu"):
        assert res.get(("PASS", f"lowering pattern {pattern}")) == \
            f"3 kernel runs; claimed generated {pattern} (unit 'add_3')", out
        m = PASS_DETAIL.match(res[("PASS", f"lowering on generated {pattern}")])
        assert m and m.group(2) == "0.00", out  # its kernels are the host's int8 twin
    assert res.get(("PASS", "lowering")) == (
        f"7 patterns validated at load; 7 generated graphs, 6 of {N_UINT8} uint8 and 0 of {len(VITIS)} int8 "
        "power-of-two built-in graphs checked"), out


def case_never_runs(r):
    """A plugin whose accept declines every unit of its own patterns is not conforming:
    every pattern FAILs naming its decline, and the report lists them."""
    res, out = r.check(r.npu, "--backend-opt", "decline=*", expect_rc=1)
    failed = sorted(k[1] for k in res if k[0] == "FAIL")
    assert failed == sorted(f"lowering pattern {p}" for p in SCALAR_PATTERNS), out
    for p in SCALAR_PATTERNS:
        assert res[("FAIL", f"lowering pattern {p}")] == (
            "its kernel never ran: no generated or built-in graph it claimed; declined: declined by option "
            "decline=*"), out
    assert out.splitlines()[-2:] == ["lowering patterns whose kernel never ran: " + ", ".join(SCALAR_PATTERNS),
                                     "conforms: no (8 passed, 7 failed, 0 skipped)"], out


CASES = {
    "conforms": case_conforms,
    "fail_create": failure_case("create"),
    "fail_reshape": failure_case("reshape"),
    "fail_run": failure_case("run", "first run"),
    "fail_one_node": case_fail_one_node,
    "bug_zero_point": bug_case("zero_point"),
    "bug_floor": bug_case("floor"),
    "bug_truncate": bug_case("truncate"),
    "decline": case_decline,
    "json": case_json,
    "fbgemm": case_fbgemm,
    "qnnpack": case_qnnpack,
    "no_lowering": case_no_lowering,
    "example_vitis": case_example_vitis,
    "x86": case_x86,
    "own_conventions": case_own_conventions,
    "never_runs": case_never_runs,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--qhost")
    ap.add_argument("--lower-plugins", help="the directory holding libqhost-scalar_int8.so")
    ap.add_argument("--build-plugins", help="the directory holding the built plugins")
    ap.add_argument("--no-lowering-plugin", help="a plugin without a lowering group (the BackendConfig "
                    "tutorial's my_backend)")
    ap.add_argument("--asan", action="store_true")
    ap.add_argument("--case", action="append", help="run only this case (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    opts = ap.parse_args()
    if opts.list:
        print(";".join(CASES))
        return 0
    if not (opts.qhost and opts.lower_plugins and opts.build_plugins):
        ap.error("--qhost, --lower-plugins and --build-plugins are required")
    r = Runner(opts)
    failed, skipped = [], []
    names = opts.case or list(CASES)
    for name in names:
        try:
            CASES[name](r)
            print(f"PASS {name}")
        except Skip as e:
            skipped.append(name)
            print(f"SKIP {name}: {e}")
        except Exception as e:  # report every case, then fail
            failed.append(name)
            print(f"FAIL {name}: {e}", file=sys.stderr)
    if failed:
        return 1
    return 77 if len(skipped) == len(names) else 0


if __name__ == "__main__":
    sys.exit(main())
