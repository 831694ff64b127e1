#!/usr/bin/env python3
"""`qhost plugin-check` against the faulty plugin (tests/abi/plugins/faulty.c), which
supplies every callback group and misbehaves on request through
QHOST_TEST_FAULT=<point>[:<mode>]:

- without a fault it conforms (exit 0);
- an error status from any callback is a FAIL line that names the callback and
  carries the plugin's message (exit 1), the other groups still run, and the sanitized
  build reports no leak;
- bad data from an observer (count over capacity, scale zero, negative or NaN, zero
  point out of range, a state that does not survive save/load, a load that takes
  truncated bytes) is a FAIL line naming the callback and the field.
- a bad node id on the imperative annotate path, reached only on the nodes the plugin's
  BackendConfig quantized (annotate:bad_node), fails the annotate checks: the built-in
  graphs are annotated by the declarative annotator first, as quantize does;
- what the plugin logs from a callback during `qhost calibrate` and `qhost quantize`
  names the plugin (log_names_plugin).

The checks of transform_for_annotation, annotate, refine and deploy run the plugin on
the host's built-in graphs (possibly several, each giving its own report line).
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abitest import Skip, check_lines, check_no_crash, main  # noqa: E402

OBS = "observer FaultyMinMax"

# Fault points in faulty.c's order: the plugin's message is "injected fault N".
POINTS = ("entry", "instance_create", "transform_for_annotation", "annotate", "create", "observe",
          "compute_qparams", "merge", "save", "load", "refine", "fake_quantize", "deploy")

# The exact report line for each point whose check exists today (name, detail); the
# others must produce some FAIL line naming the callback and carrying the message.
EXACT = {
    "instance_create": ("instance", "plugin 'faulty': instance_create: {msg}"),
    "create": (OBS, "create: {msg}"),
    "observe": (OBS, "observe: {msg}"),
    "compute_qparams": (OBS, "compute_qparams: {msg}"),
    "merge": (OBS + " merge", "{msg}"),
    "save": (OBS + " save/load", "save: {msg}"),
    "load": (OBS + " save/load", "load of its own 16 saved bytes: {msg}"),
    "fake_quantize": ("reference_numerics", "fake_quantize: {msg}"),
}

# faulty.c's point after "deploy": its Relu kernel's run (kernel_run:off: two steps off).
KERNEL_RUN = len(POINTS) + 1
LOWERED_RELU = "lowering on relu"
GENERATED_RELU = "lowering on generated relu"

SUPPLIES = ("transform_for_annotation, backend_config, annotate, observers, refine, "
            "reference_numerics, lowering, deploy")


def check_faulty(env, fault=None, expect_rc=1):
    run_env = {"QHOST_TEST_FAULT": fault} if fault else None
    return env.plugin_check(env.plugin("faulty"), env=run_env, expect_rc=expect_rc)


def case_conforming(env):
    rc, lines, out, _ = check_faulty(env, expect_rc=0)
    passed = dict(check_lines(lines, "PASS"))
    assert passed.get("descriptor") == f"faulty 1.0.0, ABI 1.2, struct_size 160; supplies {SUPPLIES}", out
    assert passed.get("backend_config") == \
        "faulty: 1 patterns, 1 default qconfig entries; tables validated at load", out
    assert passed.get(OBS, "").startswith("uint8 affine spec: 3 tensors observed, scale "), out
    assert passed.get(OBS + " save/load") == \
        "16 bytes, same qparams after load; a truncated state is refused", out
    assert passed.get(OBS + " merge") == "two shards merged give the one-pass qparams", out
    assert "reference_numerics" in passed and "instance" in passed, out
    # the graph-based groups ran (on each built-in graph) and passed
    for group in ("transform_for_annotation", "annotate", "refine", "deploy"):
        assert [n for n in passed if n == group or n.startswith(group + " on ")], \
            f"no PASS for {group}:\n{out}"
    # deploy wrote faulty.c's README: 21 bytes
    assert "21 bytes written" in passed["deploy"], out
    # its Relu kernel claims the built-in Relu graph and matches the host's reference
    assert re.match(r"unit 'op' \(Relu, pattern relu, kernel relu_any_qu8\): 3 runs .* within one step "
                    r"of the host's reference \(worst 0\.00 steps of 0\.016\)$",
                    passed.get(LOWERED_RELU, "")), out
    # and the Relu graph plugin-check generated from its pattern, quantized by its own
    # BackendConfig and observers
    assert re.match(r"unit 'relu_2' \(Relu, pattern relu, kernel relu_any_qu8\): 3 runs .* within one step "
                    r"of the host's reference \(worst 0\.00 steps of \S+\)$",
                    passed.get(GENERATED_RELU, "")), out
    assert passed.get("lowering pattern relu") == \
        "6 kernel runs; claimed generated relu (unit 'relu_2'), relu (unit 'op')", out
    assert not check_lines(lines, "FAIL"), out
    assert lines[-1].startswith("conforms: yes"), out


def fault_case(point):
    number = POINTS.index(point) + 1
    msg = f"injected fault {number}"

    def run(env):
        rc, lines, out, _ = check_faulty(env, point)
        failed = check_lines(lines, "FAIL")
        assert lines[-1].startswith("conforms: no"), out
        if point == "entry":
            path = env.plugin("faulty")
            assert ("scan", f"{path}: initialisation failed: {msg}") in failed, out
            return
        if point in EXACT:
            name, detail = EXACT[point]
            assert (name, detail.format(msg=msg)) in failed, \
                f"want 'FAIL  {name}: {detail.format(msg=msg)}'\n{out}"
        # whatever the wording: one FAIL line names the callback and carries the message
        hits = [f for f in failed if point in f"{f[0]}: {f[1]}"
                and re.search(re.escape(msg) + r"(?!\d)", f[1])]
        assert hits, f"want a FAIL naming {point} with '{msg}'\n{out}"
        # and no collateral failure (the check may run the callback more than once)
        assert all(re.search(re.escape(msg) + r"(?!\d)", f[1]) for f in failed), out
        # one failing callback does not stop the others
        if point not in ("instance_create", "fake_quantize"):
            assert "reference_numerics" in dict(check_lines(lines, "PASS")), out
    return run


def bad_data_case(fault, name, detail):
    def run(env):
        rc, lines, out, _ = check_faulty(env, fault)
        failed = check_lines(lines, "FAIL")
        if isinstance(detail, str):
            assert (name, detail) in failed, f"want 'FAIL  {name}: {detail}'\n{out}"
        else:
            assert [f for f in failed if f[0] == name and detail.match(f[1])], \
                f"want 'FAIL  {name}: {detail.pattern}'\n{out}"
        assert len(failed) == 1, f"one fault, one FAIL:\n{out}"
        assert lines[-1].startswith("conforms: no"), out
    return run


def case_lowering_run_error(env):
    """An error from a kernel's run is a FAIL for each graph that names plugin, kernel
    and node and carries the message; the pattern claimed its graphs but its kernel
    never completed a run: a FAIL too, named above the verdict."""
    rc, lines, out, _ = check_faulty(env, "kernel_run")
    failed = check_lines(lines, "FAIL")
    want = [(GENERATED_RELU, "unit 'relu_2' (Relu, pattern relu, kernel relu_any_qu8): first run: plugin "
             f"'faulty': kernel 'relu_any_qu8' (node 'relu_2'): run: injected fault {KERNEL_RUN}"),
            (LOWERED_RELU, "unit 'op' (Relu, pattern relu, kernel relu_any_qu8): first run: plugin 'faulty': "
             f"kernel 'relu_any_qu8' (node 'op'): run: injected fault {KERNEL_RUN}"),
            ("lowering pattern relu",
             "its kernel never ran: it claimed generated relu (unit 'relu_2'), relu (unit 'op')")]
    assert failed == want, out
    assert lines[-2] == "lowering patterns whose kernel never ran: relu", out


def case_lowering_wrong_numbers(env):
    """A kernel two steps off is a FAIL naming the unit, the kernel and the worst
    element with both values (in steps of the output scale)."""
    rc, lines, out, _ = check_faulty(env, "kernel_run:off")
    failed = check_lines(lines, "FAIL")
    # its kernel ran (wrongly): the pattern is not among the never-run ones
    assert len(failed) == 2 and failed[0][0] == GENERATED_RELU and failed[1][0] == LOWERED_RELU, out
    assert re.match(r"unit 'relu_2' \(Relu, pattern relu, kernel relu_any_qu8\): first run: output '\S+' element "
                    r"\d+ is \S+, the host's \S+: 2(\.0+)? steps of \S+ from the host's reference$", failed[0][1]), out
    m = re.match(r"unit 'op' \(Relu, pattern relu, kernel relu_any_qu8\): first run: output 'y_dequantized' "
                 r"element (\d+) is (\S+), the host's (\S+): (\S+) steps of 0\.016 from the host's reference$",
                 failed[1][1])
    assert m, out
    lowered, host, steps = float(m.group(2)), float(m.group(3)), float(m.group(4))
    assert abs(steps - 2) < 1e-3 and abs((lowered - host) / 0.016 - 2) < 1e-2, out
    assert lines[-1].startswith("conforms: no"), out


def case_json_report(env):
    rc, out, err = env.run("plugin-check", "--json", env.plugin("faulty"),
                           env={"QHOST_TEST_FAULT": "observe"})
    assert rc == 1, err
    report = json.loads(out)
    assert report["schema_version"] == 1 and report["conforms"] is False, out
    assert report["plugin"]["name"] == "faulty", out
    fails = [c for c in report["checks"] if c["verdict"] == "FAIL"]
    assert fails == [{"name": OBS, "verdict": "FAIL", "detail": "observe: injected fault 6"}], fails


def case_log_names_plugin(env):
    """What a plugin logs from a callback names the plugin ("plugin faulty: ..."), in
    every flow: the gateway tags each call. `qhost calibrate` has no report to collect
    the lines, so its observer calls show whether the tag is set (they read "plugin ?"
    before the gateway)."""
    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "examples")
    model = os.path.join(examples, "digits_cnn.onnx")
    calib = os.path.join(examples, "digits_calib.npy")
    flows = [("calibrate", p, os.path.join(env.tmp, "out.stats")) for p in ("create", "observe", "save")]
    flows += [("quantize", p, os.path.join(env.tmp, "out.onnx"))
              for p in ("transform_for_annotation", "annotate", "compute_qparams", "refine")]
    for command, point, output in flows:
        rc, out, err = env.run(command, "--plugin-dir", env.plugin_dir("faulty"), "--backend", "faulty",
                               "--calib", calib, "-o", output, model, env={"QHOST_TEST_FAULT": f"{point}:log"})
        check_no_crash(rc, err)
        assert rc == 0, f"{command}, {point}: exit {rc}\n{err}"
        assert f"plugin faulty: {point} called" in err, \
            f"{command}, {point}: no line naming the plugin:\n{err[-2000:]}"
        assert "plugin ?" not in err, f"{command}, {point}: a line without the plugin:\n{err[-2000:]}"


def case_annotate_bad_node(env):
    """faulty's annotate adjusts what its BackendConfig quantized (the Relu) and names a
    node id past the graph's end: each built-in graph with a Relu gets a FAIL naming
    annotate and the bad id; refine, which needs an annotation, says why it skipped."""
    rc, lines, out, _ = check_faulty(env, "annotate:bad_node")
    failed = dict(check_lines(lines, "FAIL"))
    for graph in ("conv_bn_relu", "gemm_relu_add"):
        detail = failed.get(f"annotate on {graph}", "")
        assert detail.startswith("annotate: ") and re.search(r"node\b.*\b\d+", detail), \
            f"want 'FAIL  annotate on {graph}: annotate: ... node ...'\n{out}"
    assert sorted(failed) == ["annotate on conv_bn_relu", "annotate on gemm_relu_add"], out
    skipped = dict(check_lines(lines, "SKIP"))
    assert skipped.get("refine", "").startswith("annotation failed first on conv_bn_relu: annotate: "), out
    assert lines[-1].startswith("conforms: no"), out


def case_leak_is_reported(env):
    """The leak check the fault cases rely on is awake: a lost block is reported."""
    if not env.asan:
        raise Skip("leaks are checked in the sanitized build only")
    rc, out, err = env.run("plugin-check", env.plugin("faulty"), env={"QHOST_TEST_FAULT": "observe:leak"})
    assert rc != 0 and "LeakSanitizer" in err and "faulty" in err, f"exit {rc}\n{err}"


CASES = {"conforming": case_conforming}
CASES.update({f"fault_{p}": fault_case(p) for p in POINTS})
CASES.update({
    "qparams_count": bad_data_case("compute_qparams:count", OBS, "compute_qparams: count 2, capacity 1"),
    "qparams_scale_zero": bad_data_case("compute_qparams:scale_zero", OBS,
                                        "compute_qparams: scale[0] = 0 is not > 0 and finite"),
    "qparams_scale_negative": bad_data_case("compute_qparams:scale_negative", OBS,
                                            "compute_qparams: scale[0] = -0.5 is not > 0 and finite"),
    "qparams_scale_nan": bad_data_case("compute_qparams:scale_nan", OBS,
                                       "compute_qparams: scale[0] = nan is not > 0 and finite"),
    "qparams_zero_point": bad_data_case("compute_qparams:zero_point", OBS,
                                        "compute_qparams: zero_point[0] = 256 is outside [0, 255]"),
    "save_load_roundtrip": bad_data_case(
        "load:drift", OBS + " save/load",
        re.compile(r"qparams after save/load differ: scale \S+ zp -?\d+, before \S+ zp -?\d+$")),
    "load_truncated": bad_data_case("load:lenient", OBS + " save/load",
                                    "load accepted a truncated state (8 of 16 bytes)"),
    "annotate_bad_node": case_annotate_bad_node,
    "lowering_run_error": case_lowering_run_error,
    "lowering_wrong_numbers": case_lowering_wrong_numbers,
    "json_report": case_json_report,
    "log_names_plugin": case_log_names_plugin,
    "leak_is_reported": case_leak_is_reported,
})

if __name__ == "__main__":
    sys.exit(main(CASES, __doc__))
