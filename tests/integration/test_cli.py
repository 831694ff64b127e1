#!/usr/bin/env python3
"""The qhost command line as a contract: usage errors, `inspect` (text and JSON),
`run` with .npy and .npz data (checked against numpy), symbolic and implicit batch
dimensions, --labels, --threads, and `bench --json`. Models are built on the fly
with onnx's helper API in a temporary directory.
"""

import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qhtest  # noqa: E402
from qhtest import check_no_crash, make_model, onnx_modules, relu_model, save_model  # noqa: E402


def ok(runner, *args):
    rc, out, err = runner.run(*args)
    check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}; stderr:\n{err}"
    return out, err


def usage_error(runner, *args):
    rc, out, err = runner.run(*args)
    check_no_crash(rc, err)
    assert rc == 2, f"qhost {' '.join(map(str, args))}: exit {rc}, expected 2; stderr:\n{err}"
    assert err.strip(), f"qhost {' '.join(map(str, args))}: usage error without a message"


def find_all(obj, pred):
    """Every sub-object of a JSON document for which pred holds."""
    found = []
    stack = [obj]
    while stack:
        o = stack.pop()
        if pred(o):
            found.append(o)
        if isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return found


def names_of(entries):
    return [e.get("name") for e in entries if isinstance(e, dict)]


# ---- models ---------------------------------------------------------------------

CONV_W = np.random.default_rng(7).standard_normal((4, 3, 3, 3)).astype(np.float32)
CONV_B = np.array([0.5, -0.25, 0.0, 1.0], np.float32)


def conv_model(tmp):
    """x[1,3,8,8] -> Conv(4 filters 3x3, pad 1) -> Relu -> y[1,4,8,8]."""
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1",
                                     kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["c"], ["y"], name="relu1")],
                   [("x", [1, 3, 8, 8])], [("y", [1, 4, 8, 8])],
                   [("w", CONV_W), ("b", CONV_B)])
    return save_model(m, os.path.join(tmp, "conv.onnx"))


def conv_ref(x):
    n, c, h, w = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, 4, h, w))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + w], CONV_W[:, :, i, j])
    return np.maximum(y + CONV_B[None, :, None, None], 0)


DENSE_W = np.random.default_rng(8).standard_normal((3, 5)).astype(np.float32)
DENSE_B = np.linspace(-1, 1, 5).astype(np.float32)


def dense_model(tmp, batch):
    """x[batch,3] -> MatMul w[3,5] -> Add b -> y[batch,5]; batch may be a name."""
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                    helper.make_node("Add", ["h", "b"], ["y"], name="bias")],
                   [("x", [batch, 3])], [("y", [batch, 5])],
                   [("w", DENSE_W), ("b", DENSE_B)])
    return save_model(m, os.path.join(tmp, f"dense_{batch}.onnx"))


def dense_ref(x):
    return x.astype(np.float64) @ DENSE_W + DENSE_B


def close(got, want, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == np.float32, f"{what}: dtype {got.dtype}"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=what)


# ---- cases ----------------------------------------------------------------------

def case_help_version(runner, tmp):
    out, _ = ok(runner, "--help")
    for cmd in ("inspect", "run", "bench"):
        assert cmd in out, f"--help does not mention {cmd}:\n{out}"
    out, _ = ok(runner, "--version")
    assert re.search(r"qhost \d+\.\d+\.\d+", out), f"--version printed {out!r}"


def case_usage_errors(runner, tmp):
    model = save_model(relu_model(), os.path.join(tmp, "m.onnx"))
    x = os.path.join(tmp, "x.npy")
    np.save(x, np.ones((2, 3), np.float32))
    usage_error(runner)
    usage_error(runner, "frobnicate")
    usage_error(runner, "inspect", model, "--no-such-option")
    usage_error(runner, "run", "--bogus", model, "--input", x, "-o", os.path.join(tmp, "y.npy"))
    usage_error(runner, "inspect")
    usage_error(runner, "run", "--input", x, "-o", os.path.join(tmp, "y.npy"))
    usage_error(runner, "run", model, "-o", os.path.join(tmp, "y.npy"))
    usage_error(runner, "run", model, "--input", x, "-o")
    usage_error(runner, "bench", model, "--runs")
    assert not os.path.exists(os.path.join(tmp, "y.npy"))


def case_inspect_text(runner, tmp):
    model = conv_model(tmp)
    out, _ = ok(runner, "inspect", model)
    for frag in ("Conv", "Relu", "conv1", "6912", "112"):
        assert frag in out, f"inspect output lacks {frag!r}:\n{out}"
    assert re.search(r"1\D+3\D+8\D+8", out), f"input shape missing:\n{out}"


def case_inspect_json(runner, tmp):
    model = conv_model(tmp)
    out, _ = ok(runner, "inspect", model, "--json")
    doc = json.loads(out)
    assert doc.get("schema_version") == 1, f"schema_version: {doc.get('schema_version')}"
    assert names_of(doc["inputs"]) == ["x"], doc["inputs"]
    assert names_of(doc["outputs"]) == ["y"], doc["outputs"]
    assert doc["inputs"][0]["shape"] == [1, 3, 8, 8], doc["inputs"][0]
    assert doc["outputs"][0]["shape"] == [1, 4, 8, 8], doc["outputs"][0]
    nodes = doc["nodes"]
    ops = [n.get("op_type", n.get("op")) for n in nodes]
    assert ops == ["Conv", "Relu"], ops
    assert names_of(nodes) == ["conv1", "relu1"], names_of(nodes)
    assert doc["parameters"] == 4 * 3 * 3 * 3 + 4, doc["parameters"]
    assert doc["parameter_bytes"] == 4 * doc["parameters"], doc["parameter_bytes"]
    assert doc["macs"] == 4 * 8 * 8 * 3 * 3 * 3, doc["macs"]
    assert [n["macs"] for n in nodes] == [doc["macs"], 0], nodes
    assert nodes[0]["inputs"] == ["x", "w", "b"], nodes[0]
    assert doc["quantized"] is False and doc["unsupported_ops"] == [], doc


def case_inspect_qdq(runner, tmp):
    _, TensorProto, helper, numpy_helper = onnx_modules()
    m = make_model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant"),
                    helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dequant")],
                   [("x", [1, 4])], [("y", [1, 4])],
                   [("s", np.array(0.0625, np.float32)), ("z", np.array(3, np.uint8))])
    model = save_model(m, os.path.join(tmp, "qdq.onnx"))
    out, _ = ok(runner, "inspect", model)
    assert "0.0625" in out and "3" in out, f"qparams missing from text:\n{out}"
    out, _ = ok(runner, "inspect", model, "--json")
    doc = json.loads(out)
    assert doc.get("schema_version") == 1
    assert doc["quantized"] is True, doc
    with_scale = find_all(doc, lambda o: isinstance(o, dict) and "scale" in o
                          and "zero_point" in o)
    assert len(with_scale) == 2, f"expected qparams on both nodes: {out}"
    for q in with_scale:
        assert q["scale"] == [0.0625] and q["zero_point"] == [3], q
        assert q["dtype"] == "uint8", q
    # and the model runs: quantize-dequantize as numpy does it
    x = np.array([[-1.0, 0.03125, 0.1, 20.0]], np.float32)
    xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xp, x)
    ok(runner, "run", model, "--input", xp, "-o", yp)
    want = (np.clip(np.round(x / np.float32(0.0625)) + 3, 0, 255) - 3) * np.float32(0.0625)
    np.testing.assert_array_equal(np.load(yp), want.astype(np.float32))


def case_inspect_per_channel(runner, tmp):
    """A QDQ Conv whose int8 weight is dequantized per output channel."""
    _, TensorProto, helper, _ = onnx_modules()
    scales = np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
    wq = np.random.default_rng(11).integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    m = make_model([helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"],
                                     name="dq_w", axis=0),
                    helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])],
                   [("x", [1, 3, 8, 8])], [("y", [1, 4, 8, 8])],
                   [("wq", wq), ("ws", scales), ("wz", np.zeros(4, np.int8))])
    model = save_model(m, os.path.join(tmp, "pc.onnx"))
    doc = json.loads(ok(runner, "inspect", model, "--json")[0])
    q = next(n for n in doc["nodes"] if n["name"] == "dq_w")["qparams"]
    assert q["axis"] == 0 and q["dtype"] == "int8", q
    assert q["scale"] == scales.tolist() and q["zero_point"] == [0, 0, 0, 0], q
    assert doc["parameters"] == wq.size + 8, doc["parameters"]


def case_run_npy(runner, tmp):
    model = conv_model(tmp)
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xp, x)
    ok(runner, "run", model, "--input", xp, "-o", yp)
    close(np.load(yp), conv_ref(x), "conv output")


def case_run_npz_two_in_two_out(runner, tmp):
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Add", ["a", "b"], ["total"], name="add"),
                    helper.make_node("Mul", ["a", "b"], ["product"], name="mul")],
                   [("a", [2, 3]), ("b", [2, 3])], [("total", [2, 3]), ("product", [2, 3])])
    model = save_model(m, os.path.join(tmp, "two.onnx"))
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    xp, yp = os.path.join(tmp, "x.npz"), os.path.join(tmp, "y.npz")
    np.savez(xp, b=b, a=a)  # archive order differs from the model's input order
    ok(runner, "run", model, "--input", xp, "-o", yp)
    with np.load(yp) as z:
        assert sorted(z.files) == ["product", "total"], z.files
        close(z["total"], a + b, "total")
        close(z["product"], a * b, "product")


def case_run_npz_single_output(runner, tmp):
    model = dense_model(tmp, 2)
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npz")
    np.save(xp, x)
    ok(runner, "run", model, "--input", xp, "-o", yp)
    with np.load(yp) as z:
        assert z.files == ["y"], z.files
        close(z["y"], dense_ref(x), "y")


def case_run_symbolic_batch(runner, tmp):
    model = dense_model(tmp, "N")
    x = np.random.default_rng(4).standard_normal((7, 3)).astype(np.float32)
    xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xp, x)
    ok(runner, "run", model, "--input", xp, "-o", yp)
    close(np.load(yp), dense_ref(x), "symbolic batch")


def case_run_batch1_rows(runner, tmp):
    model = conv_model(tmp)  # input [1, 3, 8, 8]
    x = np.random.default_rng(5).standard_normal((3, 3, 8, 8)).astype(np.float32)
    xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xp, x)
    ok(runner, "run", model, "--input", xp, "-o", yp)
    close(np.load(yp), conv_ref(x), "stacked rows")


def case_run_labels(runner, tmp):
    model = dense_model(tmp, "N")
    x = np.random.default_rng(6).standard_normal((8, 3)).astype(np.float32)
    pred = dense_ref(x).argmax(axis=1)
    labels = pred.copy()
    labels[[1, 4, 6]] = (labels[[1, 4, 6]] + 1) % 5  # 5 of 8 right
    xp, yp, lp = (os.path.join(tmp, f) for f in ("x.npy", "y.npy", "l.npy"))
    np.save(xp, x)
    np.save(lp, labels.astype(np.int64))
    out, err = ok(runner, "run", model, "--input", xp, "-o", yp, "--labels", lp)
    lines = [ln for ln in (out + err).splitlines() if "accuracy" in ln.lower()]
    assert len(lines) == 1, f"expected one accuracy line:\n{out}{err}"
    assert re.search(r"62\.5|0\.625|5\s*/\s*8", lines[0]), lines[0]
    close(np.load(yp), dense_ref(x), "labelled run output")


def case_run_threads(runner, tmp):
    model = conv_model(tmp)
    x = np.random.default_rng(9).standard_normal((4, 3, 8, 8)).astype(np.float32)
    xp = os.path.join(tmp, "x.npy")
    np.save(xp, x)
    y1, y2 = os.path.join(tmp, "y1.npy"), os.path.join(tmp, "y2.npy")
    ok(runner, "run", model, "--input", xp, "-o", y1, "--threads", "1")
    ok(runner, "run", model, "--input", xp, "-o", y2, "--threads", "2")
    close(np.load(y1), conv_ref(x), "1 thread")
    np.testing.assert_array_equal(np.load(y1), np.load(y2))


def case_bench_json(runner, tmp):
    model = conv_model(tmp)
    out, _ = ok(runner, "bench", model, "--runs", "5", "--warmup", "1", "--json")
    doc = json.loads(out)
    assert doc["schema_version"] == 1, doc
    assert doc["runs"] == 5 and doc["warmup"] == 1 and doc["threads"] == 1, doc
    assert doc["model"] == model, doc
    for k in ("min_ms", "median_ms", "max_ms"):
        assert isinstance(doc[k], (int, float)) and doc[k] > 0, (k, doc)
    assert doc["min_ms"] <= doc["median_ms"] <= doc["max_ms"], doc
    x = os.path.join(tmp, "x.npy")
    np.save(x, np.ones((1, 3, 8, 8), np.float32))
    out, _ = ok(runner, "bench", model, "--input", x, "--runs", "2", "--warmup", "0",
                "--threads", "2", "--json")
    doc = json.loads(out)
    assert doc["runs"] == 2 and doc["warmup"] == 0 and doc["threads"] == 2, doc


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__))
