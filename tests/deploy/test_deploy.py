#!/usr/bin/python3
"""`qhost deploy --backend NAME MODEL.qdq.onnx -o DIR`, with example_vitis's package.

Cases: the package holds manifest.json (plugin, versions, the SHA-256 of the model
file, graph hash, opset, files) and clip_ranges.json with every quantized tensor's
scale and position (= -log2 scale), and each weights/*.bin equals the model's
integers; its deploy_model.onnx (written by the host's artifact_write_model, ABI 1.1)
has no QuantizeLinear/DequantizeLinear, holds each weight and bias as the QDQ model's
integers dequantized, (q - zero point) * scale, exactly, and runs in ONNX Runtime
close to the QDQ model; a backend without a deploy step,
an existing DIR (without --force), a missing model and a model the DPU cannot take
(scale not a power of two) each give one error line, exit 1, and leave nothing in
the output's parent directory; --force replaces an existing DIR.
"""
import hashlib
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import ort_compare  # noqa: E402
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
    assert manifest["plugin"] == "example_vitis" and manifest["abi_version"] == "1.2", manifest
    assert manifest["opset"] == 13 and len(manifest["source_graph_fnv1a64"]) == 16, manifest
    with open(model, "rb") as f:
        assert manifest["source_sha256"] == hashlib.sha256(f.read()).hexdigest(), manifest
    ranges = json.load(open(os.path.join(out, "clip_ranges.json")))["vitis"]
    m = onnx.load(model)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    # activations by the tensor their QuantizeLinear reads, constants by the float tensor
    # their DequantizeLinear writes (the deploy model's names); the integers in the files
    int_of = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == "DequantizeLinear"
              and n.input[0] in inits}
    quantized = {n.input[0] for n in m.graph.node if n.op_type == "QuantizeLinear"} | set(int_of)
    assert set(ranges) == quantized, set(ranges) ^ quantized
    for name, e in ranges.items():
        assert e["scale"] == 2.0 ** -e["position"], (name, e)
        if "file" in e:
            want = inits[int_of[name]]
            got = np.fromfile(os.path.join(out, e["file"]), dtype=want.dtype).reshape(e["dims"])
            assert np.array_equal(got, want), name
            assert e["role"] in ("weight", "bias"), (name, e)
    assert ranges["dw_b_dq"]["dtype"] == "int32" and ranges["c1_dq"]["role"] == "weight"
    assert sorted(manifest["files"]) == sorted(
        ["deploy_model.onnx", "clip_ranges.json"] + [e["file"] for e in ranges.values() if "file" in e])
    assert sorted(os.listdir(out)) == sorted(["deploy_model.onnx", "clip_ranges.json", "manifest.json",
                                              "weights"]), os.listdir(out)
    assert math.isclose(ranges["x"]["scale"], 2.0 ** -ranges["x"]["position"])


def _dequantized_constants(m):
    """{DequantizeLinear output: its float values} for every DQ of a constant, computed
    as ONNX defines it: float32((q - zero point)) * float32 scale, per tensor."""
    import numpy as np
    _, _, _, numpy_helper = qhtest.onnx_modules()
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            q = inits[n.input[0]].astype(np.int64)
            zp = inits[n.input[2]].astype(np.int64) if len(n.input) > 2 else 0
            out[n.output[0]] = (q - zp).astype(np.float32) * inits[n.input[1]].astype(np.float32)
    return out


def case_deploy_model(r, tmp):
    import numpy as np
    onnx, _, _, numpy_helper = qhtest.onnx_modules()
    model, x = vitis_models.build(r, tmp)
    out = os.path.join(tmp, "pkg")
    rc, _, err = deploy(r, model, out)
    assert rc == 0, err
    path = os.path.join(out, "deploy_model.onnx")
    d = onnx.load(path)  # (no onnx.checker: the test model's output has no shape, as in the QDQ file)
    ops = [n.op_type for n in d.graph.node]
    assert not {"QuantizeLinear", "DequantizeLinear"} & set(ops), ops
    assert sorted(ops) == sorted(["Conv"] * 3 + ["Relu"] * 2 + ["MaxPool", "LeakyRelu", "AveragePool",
                                                                  "Mul", "Mul", "Concat", "Add",
                                                                  "GlobalAveragePool", "Flatten",
                                                                  "Gemm", "Identity"]), ops
    q = onnx.load(model)
    want = _dequantized_constants(q)
    got = {t.name: numpy_helper.to_array(t) for t in d.graph.initializer}
    # every weight and bias, dequantized; the DPU factor stays; nothing else is left
    assert set(got) == set(want) | {"dpu_factor"}, set(got) ^ (set(want) | {"dpu_factor"})
    for name, w in want.items():
        assert got[name].dtype == np.float32 and np.array_equal(got[name], w), name
    # the int32 bias is clipped to its grid: its values are multiples of its scale
    s = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}["dw_b_s"]
    assert np.array_equal(np.round(got["dw_b_dq"] / s) * s, got["dw_b_dq"])
    assert [o.name for o in d.graph.output] == ["y_dq"] and [i.name for i in d.graph.input] == ["x"]
    # clip_ranges.json speaks the deploy model's names (a compiler joins the two files)
    ranges = json.load(open(os.path.join(out, "clip_ranges.json")))["vitis"]
    names = set(got) | {o for n in d.graph.node for o in n.output} | {i.name for i in d.graph.input}
    assert set(ranges) <= names, sorted(set(ranges) - names)
    assert {k for k, e in ranges.items() if "file" in e} <= set(got), ranges
    ort_compare.require_ort()
    ys = {}
    for tag, m in (("qdq", model), ("deploy", path)):
        o = os.path.join(tmp, f"{tag}_ort.npy")
        p = subprocess.run(["node", os.path.join(ort_compare.ORT_DIR, "ort_run.js"), m, x, o],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"ONNX Runtime cannot run {m}: {p.stderr[-600:]}"
        ys[tag] = np.load(o).astype(np.float64)
    a, b = ys["deploy"], ys["qdq"]
    step = float(s_of(q, "y"))
    diff = np.abs(a - b)
    rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    print(f"deploy model vs QDQ model in ORT: max |diff| {diff.max() / step:.2f} output steps, "
          f"relative L2 {rel:.4f}")
    # the QDQ model also rounds every activation to its grid (positions chosen for the
    # overflow-free range, so coarse): measured 4.7% here; wrong weights give > 100%
    assert a.shape == b.shape and rel < 0.1 and diff.max() < 0.2 * np.abs(b).max(), (rel, diff.max())
    # and qhost itself runs the deploy model as ORT does (both float)
    y = os.path.join(tmp, "deploy_qhost.npy")
    rc, _, err = r.run("run", path, "--input", x, "-o", y)
    assert rc == 0, err
    c = np.load(y).astype(np.float64)
    assert np.allclose(c, a, rtol=1e-4, atol=1e-5 * np.abs(a).max()), np.abs(c - a).max()


def s_of(m, tensor):
    """The scale of the QDQ pair after `tensor` in model m."""
    _, _, _, numpy_helper = qhtest.onnx_modules()
    return numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == f"{tensor}_s"))


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
