#!/usr/bin/python3
"""`qhost plugin-check` on ABI 1.2 partitions: a plugin declaring QhPartitionOps gets its
partitions lowered (its lowering patterns hidden) on a residual block (conv -> relu ->
conv -> relu -> conv -> add with the skip edge -> relu) and a chain of convs and relus,
each compared with the host's reference by the kernels' rules (within one output step,
different only at ties); it conforms only when a partition ran. Its per-kernel checks
see its patterns alone (partitions hidden), so they run the pattern's kernel.

- example_npu (partitions only), npu_patterns (partitions and a Conv pattern) and
  npu_nhwc (an NHWC boundary) conform, each partition graph a PASS naming the partition;
  npu_patterns' Conv pattern runs on the built-in Conv graphs although a partition would
  claim those Convs first in a normal lowering;
- bug=zero_point plants partition outputs one step off: both graphs FAIL naming an
  element away from a tie; the plugin does not conform (exit 1);
- bug=reshape: a partition's reshape fails on the shapes compile accepted: FAIL per
  graph with the plugin's message;
- decline_compile=true: no partition ever runs: FAIL "partitions" with the plugin's
  reason, SKIP per graph;
- a refused claim (claims=p:conv0,conv2, not connected and reading float values) FAILs
  each graph with the host's refusal message;
- npu_quant (the same with a BackendConfig) gets its partition graphs quantized by its
  own flow, and its Conv pattern's kernel runs on its generated graph.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import qhtest  # noqa: E402

LOWER_PLUGINS = os.environ.get("QH_LOWER_PLUGIN_DIR", "")
BUILD_PLUGINS = os.environ.get("QH_BUILD_PLUGIN_DIR", "")
LINE = re.compile(r"^  (PASS|FAIL|SKIP)  ([^:]+): (.*)$")
GRAPHS = {"residual_block": "Conv+Relu+Conv+Relu+Conv+Add+Relu", "chain": "Conv+Relu+Conv+Relu+Conv"}
PASS_DETAIL = ("partition 'npu0' ({ops}, kernel npu_subgraph): 3 runs (packed weights reused, one on 2 threads) "
               "within one step of the host's reference (worst ")


def check(r, plugin, *opts, expect_rc):
    args = [a for o in opts for a in ("--backend-opt", o)]
    rc, out, err = r.run("plugin-check", plugin, *args, timeout=300)
    qhtest.check_no_crash(rc, err)
    assert rc == expect_rc, f"exit {rc}, want {expect_rc}\n{out}\n{err}"
    return {(m.group(1), m.group(2)): m.group(3) for m in map(LINE.match, out.splitlines()) if m}, out


def lower_plugin(name):
    return os.path.join(LOWER_PLUGINS, f"libqhost-{name}.so")


def assert_conforms(res, out, layout):
    for graph, ops in GRAPHS.items():
        detail = res.get(("PASS", f"lowering on partition graph {graph}"))
        assert detail and detail.startswith(PASS_DETAIL.format(ops=ops)), out
    assert res.get(("PASS", "partitions")) == \
        f"'npu_subgraph' ({layout} boundary): 6 partition runs on 2 of 2 graphs", out
    assert out.splitlines()[-1].startswith("conforms: yes ("), out


def case_example_npu(r, tmp):
    plugin = os.path.join(BUILD_PLUGINS, "libqhost-example_npu.so")
    if not os.path.exists(plugin):
        raise qhtest.Skip("example_npu is not built")
    res, out = check(r, plugin, expect_rc=0)
    assert_conforms(res, out, "NCHW")
    assert not [k for k in res if k[1].startswith("lowering pattern")], out


def case_npu_patterns(r, tmp):
    res, out = check(r, lower_plugin("npu_patterns"), expect_rc=0)
    assert_conforms(res, out, "NCHW")
    # the pattern's own kernel ran on the built-in Conv graphs: the partitions were hidden
    assert res.get(("PASS", "lowering pattern conv")) == \
        "6 kernel runs; claimed conv (unit 'conv'), conv_qdq_clip (unit 'conv')", out
    assert res[("PASS", "lowering on conv")].startswith(
        "unit 'conv' (Conv, pattern conv, kernel npu_conv_unit): 3 runs"), out


def case_npu_nhwc(r, tmp):
    res, out = check(r, lower_plugin("npu_nhwc"), expect_rc=0)
    assert_conforms(res, out, "NHWC")


def case_bug_zero_point(r, tmp):
    res, out = check(r, lower_plugin("npu_patterns"), "bug=zero_point", expect_rc=1)
    for graph, ops in GRAPHS.items():
        detail = res.get(("FAIL", f"lowering on partition graph {graph}"))
        assert detail and detail.startswith(f"partition 'npu0' ({ops}, kernel npu_subgraph): first run: output "), out
        assert "steps from a tie: an honest kernel differs from the host only at ties" in detail, out
    assert out.splitlines()[-1].startswith("conforms: no ("), out


def case_never_runs(r, tmp):
    res, out = check(r, lower_plugin("npu_patterns"), "decline_compile=true", expect_rc=1)
    why = "no partition claimed: partition: compile declined on request (decline_compile)"
    for graph in GRAPHS:
        assert res.get(("SKIP", f"lowering on partition graph {graph}")) == why, out
    detail = res.get(("FAIL", "partitions"))
    assert detail and detail.startswith(
        "'npu_subgraph': no partition completed a run on the 2 partition graphs (a plugin that declares "
        "partitions conforms only when one runs): residual_block: " + why), out
    # the Conv pattern still runs: only the partitions failed
    assert ("PASS", "lowering pattern conv") in res, out
    # listed with the patterns that never ran, above the verdict
    assert out.splitlines()[-2] == "lowering patterns whose kernel never ran: partitions 'npu_subgraph'", out


def case_bug_reshape(r, tmp):
    """A compiled partition whose reshape fails on the shapes compile accepted: each graph
    FAILs with the plugin's message (in a run, the nodes would go back to the host)."""
    res, out = check(r, lower_plugin("npu_patterns"), "bug=reshape", expect_rc=1)
    for graph in GRAPHS:
        assert res.get(("FAIL", f"lowering on partition graph {graph}")) == (
            "a compiled partition's reshape refused its planned shapes: partition: cannot run these shapes: "
            "plugin 'npu_patterns': partition 'npu0': reshape: planted reshape failure (bug=reshape)"), out


def case_refused_claim(r, tmp):
    res, out = check(r, lower_plugin("npu_patterns"), "claims=p:conv0,conv2", expect_rc=1)
    for graph in GRAPHS:
        detail = res.get(("FAIL", f"lowering on partition graph {graph}"))
        assert detail and detail.startswith("plugin 'npu_patterns': partition 0 ('p'): node 'conv0': ") and \
            detail.endswith("the claim is refused"), out
    assert res.get(("FAIL", "partitions")).endswith("residual_block: failed; chain: failed"), out


def case_quantizing_plugin(r, tmp):
    """npu_quant can quantize (a BackendConfig): its partition graphs are quantized by its
    own flow (MinMax qparams, not the hand-built steps 0.15 and 0.2), and its Conv pattern
    runs on its generated graph with the partitions hidden; a planted bug still fails."""
    plugin = lower_plugin("npu_quant")
    res, out = check(r, plugin, expect_rc=0)
    assert_conforms(res, out, "NCHW")
    for graph, hand_step in (("residual_block", "0.15"), ("chain", "0.2")):
        step = re.search(r"worst \S+ steps of (\S+?)\)", res[("PASS", f"lowering on partition graph {graph}")])
        assert step and step.group(1) != hand_step, out
    assert res[("PASS", "lowering on generated conv")].startswith(
        "unit 'conv_4' (Conv, pattern conv, kernel npu_conv_unit): 3 runs"), out
    res, out = check(r, plugin, "bug=zero_point", expect_rc=1)
    assert [k for k in res if k[0] == "FAIL"] == [("FAIL", f"lowering on partition graph {g}") for g in GRAPHS], out


CASES = {
    "quantizing_plugin": case_quantizing_plugin,
    "example_npu": case_example_npu,
    "npu_patterns": case_npu_patterns,
    "npu_nhwc": case_npu_nhwc,
    "bug_zero_point": case_bug_zero_point,
    "never_runs": case_never_runs,
    "refused_claim": case_refused_claim,
    "bug_reshape": case_bug_reshape,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
