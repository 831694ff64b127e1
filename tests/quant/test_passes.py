#!/usr/bin/python3
"""The ABI 1.2 passes and plugin data, through `qhost quantize` and `qhost deploy` with the
passes test plugin (tests/quant/plugins/passes.c).

Cases: post_calibration snaps every activation scale to a power of two and prunes tiny
Gemm weights, each change in the report with the plugin's reason, and the QDQ file holds
the snapped scales; the metadata the plugin attached during quantize sits in the file's
metadata_props under qhost.passes.; deploy hands it back with the qparams read from the
model (checked against the file's own Q/DQ nodes); a bad scale (returned or dropped by
the plugin), a NaN weight and a post_convert that breaks a DequantizeLinear each fail
with one error line naming the plugin and the node, exit 1, and no output file.
"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import qhtest  # noqa: E402

PLUGIN_DIR = os.environ.get("QH_QUANT_PLUGIN_DIR", "")
DIGITS = os.path.join(ROOT, "examples", "digits_cnn.onnx")
CALIB = os.path.join(ROOT, "examples", "digits_calib.npy")
BACKEND = ["--backend", "passes", "--plugin-dir", PLUGIN_DIR]


def ok(r, *args):
    rc, out, err = r.run(*args, timeout=300)
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}\n{err}"
    return out


def quantize(r, tmp, *extra):
    out, report = os.path.join(tmp, "d.qdq.onnx"), os.path.join(tmp, "report.json")
    ok(r, "quantize", DIGITS, *BACKEND, "--calib", CALIB, "-o", out, "--report", report, "--quiet", *extra)
    with open(report) as f:
        return out, json.load(f)


def notes_of(report):
    text = json.dumps(report)
    return text


def qdq_scales(path):
    """{output value of a QuantizeLinear: (scale, zero point)} and the metadata, via onnx."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    qs = {}
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear":
            qs[n.input[0]] = (float(inits[n.input[1]]), int(inits[n.input[2]]))
    producers = {o: n.name for n in m.graph.node for o in n.output}
    return qs, producers, {p.key: p.value for p in m.metadata_props}


def case_pow2_snapping(r, tmp):
    out, report = quantize(r, tmp)
    text = notes_of(report)
    assert "post_calibration by plugin passes:" in text and "scale rounded up to a power of two" in text, text
    assert "weights below 1e-3 in magnitude pruned" in text, text
    qs, _, meta = qdq_scales(out)
    acts = {k: v for k, v in qs.items() if k not in ("input",)}
    for name, (scale, _) in acts.items():
        assert math.log2(scale) == round(math.log2(scale)), f"{name}: scale {scale} is not a power of two"
    assert int(meta["qhost.passes.snapped"]) >= 3, meta
    print(f"{len(acts)} activation scales, all powers of two; metadata {meta}")


def case_int32_bias_derived(r, tmp):
    """BackendConfig's bias_derivation (ABI 1.2): every bias is int32 with scale = input
    scale x weight scale, zero point 0, computed after post_calibration snapped the input
    scales; the file runs on the host path."""
    import onnx
    from onnx import numpy_helper
    import numpy as np
    out, _ = quantize(r, tmp)
    m = onnx.load(out)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}
    checked = 0
    for n in m.graph.node:
        if n.op_type not in ("Conv", "Gemm") or len(n.input) < 3:
            continue
        dq_b, dq_w, dq_x = (producer[n.input[i]] for i in (2, 1, 0))
        assert dq_b.op_type == "DequantizeLinear", n.name
        assert inits[dq_b.input[0]].dtype == np.int32, (n.name, inits[dq_b.input[0]].dtype)
        want = np.float32(inits[dq_x.input[1]]) * inits[dq_w.input[1]].astype(np.float32)
        got = inits[dq_b.input[1]]
        assert np.array_equal(np.broadcast_to(want, got.shape), got), (n.name, want, got)
        assert not np.any(inits[dq_b.input[2]]), n.name
        assert math.log2(float(inits[dq_x.input[1]])) % 1 == 0 or dq_x.input[1].startswith("input"), n.name
        checked += 1
    assert checked == 4, checked  # conv1..conv3 and fc
    ok(r, "run", out, "--input", CALIB, "-o", os.path.join(tmp, "y.npy"))
    print(f"{checked} int32 biases at input scale x weight scale")


def case_add_inputs_share_scale(r, tmp):
    """BackendConfig's shared_inputs_mask (ABI 1.2): the Add's two inputs, from two
    producers, reach it through DequantizeLinears with one scale and zero point (the
    group takes in both producers' outputs, as PT2E's sharing does); the file runs."""
    import onnx
    from onnx import numpy_helper
    out, report = quantize(r, tmp)
    m = onnx.load(out)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}
    add, = [n for n in m.graph.node if n.op_type == "Add"]
    dqs = [producer[i] for i in add.input]
    assert all(d.op_type == "DequantizeLinear" for d in dqs), [d.op_type for d in dqs]
    grids = [(float(inits[d.input[1]]), int(inits[d.input[2]])) for d in dqs]
    assert grids[0] == grids[1], grids
    ok(r, "run", out, "--input", CALIB, "-o", os.path.join(tmp, "y.npy"))
    print(f"Add inputs on one grid: scale {grids[0][0]}, zero point {grids[0][1]}")


def case_metadata_to_deploy(r, tmp):
    out, _ = quantize(r, tmp)
    qs, producers, meta = qdq_scales(out)
    for key in ("snapped", "qdq_nodes", "gemm_out_scale"):
        assert f"qhost.passes.{key}" in meta, meta
    d = os.path.join(tmp, "pkg")
    ok(r, "deploy", *BACKEND, out, "-o", d)
    with open(os.path.join(d, "plugin_data.txt")) as f:
        lines = f.read().splitlines()
    for key in ("snapped", "qdq_nodes", "gemm_out_scale"):
        assert f"{key}={meta['qhost.passes.' + key]}" in lines, (key, lines)
    outputs = [l.split() for l in lines if l.startswith("output ")]
    assert outputs, lines
    # every line equals the file's own QuantizeLinear on that node's output
    by_node = {producers[v]: q for v, q in qs.items() if v in producers}
    for _, node, scale, zp in outputs:
        want = by_node[node]
        assert abs(float(scale) - want[0]) <= 1e-9 * want[0] and int(zp) == want[1], (node, scale, zp, want)
    print(f"deploy read {len(outputs)} output qparams and 3 metadata entries")


def case_plugin_check(r, tmp):
    """plugin-check over the passes plugin: its deploy takes the built-in graphs, which
    carry no plugin data (metadata_get says QH_ERR_NOT_FOUND and the plugin goes on)."""
    out = ok(r, "plugin-check", "passes", "--plugin-dir", PLUGIN_DIR)
    assert "supplies backend_config, deploy, post_calibration, post_convert" in out, out
    assert "conforms: yes" in out, out


def refused(mode, *parts):
    def case(r, tmp):
        out = os.path.join(tmp, "d.qdq.onnx")
        rc, _, err = r.run("quantize", DIGITS, *BACKEND, "--calib", CALIB, "-o", out, "--quiet",
                           "--backend-opt", f"mode={mode}", timeout=300)
        qhtest.check_no_crash(rc, err)
        assert rc == 1, (rc, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        print(lines[0])
        for part in ("plugin 'passes'",) + parts:
            assert part in lines[0], f"{part!r} not in {lines[0]!r}"
        assert not os.path.exists(out), "an output file was written"
    return case


CASES = {
    "pow2_snapping": case_pow2_snapping,
    "plugin_check": case_plugin_check,
    "metadata_to_deploy": case_metadata_to_deploy,
    "int32_bias_derived": case_int32_bias_derived,
    "add_inputs_share_scale": case_add_inputs_share_scale,
    "bad_scale": refused("bad_scale", "post_calibration", "node '", "scale"),
    "bad_scale_swallowed": refused("swallow", "post_calibration", "refused", "node '", "scale"),
    "bad_weight": refused("bad_weight", "post_calibration", "node '/fc/Gemm'", "not finite"),
    "broken_qdq": refused("break_qdq", "post_convert", "DequantizeLinear", "scale must be positive"),
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
