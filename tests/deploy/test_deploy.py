#!/usr/bin/python3
"""`qhost deploy --backend NAME MODEL.qdq.onnx -o DIR`, with example_vitis's package.

Cases: the package holds manifest.json (plugin, versions, graph hash, opset, files) and
clip_ranges.json with every quantized tensor's scale and position (= -log2 scale),
and each weights/*.bin equals the model's integers; a backend without a deploy step,
an existing DIR (without --force), a missing model and a model the DPU cannot take
(scale not a power of two) each give one error line, exit 1, and leave nothing in
the output's parent directory; --force replaces an existing DIR.
"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import qhtest  # noqa: E402
import vitis_models  # noqa: E402

PLUGIN_DIR = os.environ.get("QH_VITIS_PLUGIN_DIR", "")


def deploy(r, model, out, backend="example_vitis", *extra):
    return r.run("deploy", "--backend", backend, "--plugin-dir", PLUGIN_DIR, model, "-o", out, *extra)


def fails_cleanly(r, tmp, args, expect):
    before = set(os.listdir(tmp))
    rc, out, err = deploy(r, *args)
    qhtest.check_no_crash(rc, err)
    assert rc == 1, f"exit {rc}\n{out}{err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], err
    assert set(os.listdir(tmp)) == before, f"left behind: {set(os.listdir(tmp)) - before}"


def case_vitis_package(r, tmp):
    import numpy as np
    onnx, _, _, numpy_helper = qhtest.onnx_modules()
    model, _ = vitis_models.build(r, tmp)
    out = os.path.join(tmp, "pkg")
    rc, _, err = deploy(r, model, out)
    assert rc == 0, err
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    assert manifest["plugin"] == "example_vitis" and manifest["abi_version"] == "1.0", manifest
    assert manifest["opset"] == 13 and len(manifest["source_graph_fnv1a64"]) == 16, manifest
    ranges = json.load(open(os.path.join(out, "clip_ranges.json")))["vitis"]
    m = onnx.load(model)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    quantized = {n.input[0] for n in m.graph.node if n.op_type == "QuantizeLinear"}
    quantized |= {n.input[0] for n in m.graph.node if n.op_type == "DequantizeLinear"
                  and n.input[0] in inits}
    assert set(ranges) == quantized, set(ranges) ^ quantized
    for name, e in ranges.items():
        assert e["scale"] == 2.0 ** -e["position"], (name, e)
        if "file" in e:
            want = inits[name]
            got = np.fromfile(os.path.join(out, e["file"]), dtype=want.dtype).reshape(e["dims"])
            assert np.array_equal(got, want), name
            assert e["role"] in ("weight", "bias"), (name, e)
    assert ranges["dw_b_int"]["dtype"] == "int32" and ranges["c1_int"]["role"] == "weight"
    assert sorted(manifest["files"]) == sorted(
        ["clip_ranges.json"] + [e["file"] for e in ranges.values() if "file" in e])
    assert math.isclose(ranges["x"]["scale"], 2.0 ** -ranges["x"]["position"])


def case_existing_dir_and_force(r, tmp):
    model, _ = vitis_models.build(r, tmp)
    out = os.path.join(tmp, "pkg")
    os.mkdir(out)
    open(os.path.join(out, "old"), "w").close()
    fails_cleanly(r, tmp, (model, out), "already exists (use --force to replace it)")
    assert os.listdir(out) == ["old"]
    rc, _, err = deploy(r, model, out, "example_vitis", "--force")
    assert rc == 0, err
    assert "old" not in os.listdir(out) and "manifest.json" in os.listdir(out)
    assert sorted(os.listdir(tmp)) == sorted(set(os.listdir(tmp))), os.listdir(tmp)


def case_backend_without_deploy(r, tmp):
    model, _ = vitis_models.build(r, tmp)
    fails_cleanly(r, tmp, (model, os.path.join(tmp, "pkg"), "fbgemm"),
                  "plugin 'fbgemm' has no deploy step")


def case_missing_model(r, tmp):
    fails_cleanly(r, tmp, (os.path.join(tmp, "nope.onnx"), os.path.join(tmp, "pkg")), "nope.onnx")


def case_model_the_dpu_cannot_take(r, tmp):
    import numpy as np
    onnx, _, _, numpy_helper = qhtest.onnx_modules()
    model, _ = vitis_models.build(r, tmp)
    m = onnx.load(model)
    for t in m.graph.initializer:
        if t.name == "mp_s":
            t.CopyFrom(numpy_helper.from_array(np.array(0.03, np.float32), "mp_s"))
    bad = qhtest.save_model(m, os.path.join(tmp, "bad.onnx"))
    fails_cleanly(r, tmp, (bad, os.path.join(tmp, "pkg")), "tensor 'mp': scale 0.03")


def case_usage(r, tmp):
    rc, _, err = r.run("deploy", os.path.join(tmp, "m.onnx"), "-o", os.path.join(tmp, "d"))
    assert rc == 2 and "missing --backend" in err, err


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
