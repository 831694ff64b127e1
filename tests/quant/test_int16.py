#!/usr/bin/python3
"""16-bit activations and 4-bit weights end to end (issue 22): the "16x8" scheme, int16
activations with int8 weights, and int4/uint4 per-channel weights, through `qhost quantize` with the act16 test backend (tests/quant/plugins/
act16.c), the host's reference path (`qhost run`) and ONNX Runtime.

Cases: the digits example quantized 16x8 and 8x8 (quint8 activations) with the same
observers: the 16x8 file imports opset 21 and holds int16 zero points and int8 weights,
the 8x8 one stays at the model's opset 13; qhost and ONNX Runtime agree on the 16x8
model within one output step; the output SQNR against the float model on the 497 test
images is printed for both and the 16x8 one must be higher. A model with opset-13
ReduceMean (axes attribute) and Split is written at opset 21 with the axes as an input
and Split's num_outputs, and both runners agree on it. --opset 17 with int16 activations
and --opset 12 each fail with one line naming the cause, and leave no file; --opset 21
with 8-bit activations writes an opset-21 file ONNX Runtime runs. The digits example with
int4 (and uint4) per-channel symmetric weights: INT4/UINT4 initializers packed two per
byte, low nibble first, whose nibbles equal the weights quantized here with numpy from the
float model and the file's scales; qhost and ONNX Runtime agree on the outputs; --opset 17
fails naming the 4-bit DequantizeLinear.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import ort_compare  # noqa: E402
import qhtest  # noqa: E402

PLUGIN_DIR = os.environ.get("QH_QUANT_PLUGIN_DIR", "")
DIGITS = os.path.join(ROOT, "examples", "digits_cnn.onnx")
CALIB = os.path.join(ROOT, "examples", "digits_calib.npy")
TEST = os.path.join(ROOT, "examples", "digits_test.npy")
BACKEND = ["--backend", "act16", "--plugin-dir", PLUGIN_DIR]
WEIGHT = {"observer": "PerChannelMinMaxObserver", "dtype": "qint8", "qscheme": "per_channel_symmetric"}
CONFIGS = {
    "16x8": {"global": {"activation": {"observer": "MinMaxObserver", "dtype": "qint16",
                                       "qscheme": "per_tensor_symmetric"}, "weight": WEIGHT}},
    "8x8": {"global": {"activation": {"observer": "MinMaxObserver", "dtype": "quint8"}, "weight": WEIGHT}},
    "8x4": {"global": {"activation": {"observer": "MinMaxObserver", "dtype": "quint8"},
                       "weight": dict(WEIGHT, dtype="qint4")}},
    "8xu4": {"global": {"activation": {"observer": "MinMaxObserver", "dtype": "quint8"},
                        "weight": dict(WEIGHT, dtype="quint4")}},
}


def ok(r, *args):
    rc, out, err = r.run(*args, timeout=300)
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}\n{err}"
    return out


def quantize(r, tmp, scheme, model=DIGITS, calib=CALIB, *extra):
    cfg = os.path.join(tmp, f"{scheme}.json")
    with open(cfg, "w") as f:
        json.dump(CONFIGS[scheme], f)
    out = os.path.join(tmp, f"{scheme}.qdq.onnx")
    ok(r, "quantize", model, *BACKEND, "--calib", calib, "--config", cfg, "-o", out, "--quiet",
       "--report", os.path.join(tmp, f"{scheme}.report.json"), *extra)
    return out


def load(path):
    import onnx
    return onnx.load(path)


def opset_of(m):
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def integer_types(m):
    """{dtype name of each QuantizeLinear zero point and DequantizeLinear input initializer}."""
    import onnx
    inits = {t.name: t for t in m.graph.initializer}
    kinds = set()
    for n in m.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            for name in n.input[2:3] + (n.input[0:1] if n.op_type == "DequantizeLinear" else []):
                if name in inits:
                    kinds.add(onnx.TensorProto.DataType.Name(inits[name].data_type))
    return kinds


def sqnr_db(ref, y):
    noise = np.sum((ref.astype(np.float64) - y) ** 2)
    return float("inf") if noise == 0 else 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / noise)


def case_digits_16x8(r, tmp):
    ort_compare.require_ort()
    files = {s: quantize(r, tmp, s) for s in ("16x8", "8x8")}
    m16, m8 = load(files["16x8"]), load(files["8x8"])
    assert opset_of(m16) == 21, opset_of(m16)
    assert opset_of(m8) == 13, opset_of(m8)
    assert {"INT16", "INT8"} <= integer_types(m16), integer_types(m16)
    assert "UINT8" not in integer_types(m16), integer_types(m16)
    assert "INT16" not in integer_types(m8), integer_types(m8)
    with open(os.path.join(tmp, "16x8.report.json")) as f:
        tensors = json.load(f)["tensors"]
    acts = [t for t in tensors if t["kind"] == "activation"]
    assert acts and all((t["dtype"], t["quant_min"], t["quant_max"]) == ("int16", -32768, 32767)
                        for t in acts), acts
    assert all(t["dtype"] == "int8" for t in tensors if t["kind"] == "weight"), tensors
    float_out = os.path.join(tmp, "float.npy")
    ok(r, "run", DIGITS, "--input", TEST, "-o", float_out)
    ref = np.load(float_out)
    sqnr = {}
    for s, path in files.items():
        y = os.path.join(tmp, f"{s}.npy")
        print(ok(r, "run", path, "--input", TEST, "-o", y, "--labels",
                 os.path.join(ROOT, "examples", "digits_labels.npy")).strip().splitlines()[-1], f"({s})")
        sqnr[s] = sqnr_db(ref, np.load(y))
    print(f"output SQNR against float on {ref.shape[0]} test images: 16x8 {sqnr['16x8']:.1f} dB, "
          f"8x8 {sqnr['8x8']:.1f} dB")
    assert sqnr["16x8"] > sqnr["8x8"], sqnr
    fails = ort_compare.check(r, files["16x8"], TEST, tmp, "16x8")
    assert not fails, fails


def reduce_split_model(path):
    """Conv -> Split (no split input) -> Add -> ReduceMean(axes=[2, 3]) -> Flatten -> Gemm,
    opset 13: the two ops whose form changed at opset 18."""
    _, TensorProto, helper, _ = qhtest.onnx_modules()
    rng = np.random.default_rng(22)
    w = rng.normal(0, 0.3, (8, 1, 3, 3)).astype(np.float32)
    fw = rng.normal(0, 0.3, (3, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Split", ["c"], ["s0", "s1"], name="split", axis=1),
        helper.make_node("Add", ["s0", "s1"], ["a"], name="add"),
        helper.make_node("ReduceMean", ["a"], ["m"], name="mean", axes=[2, 3], keepdims=1),
        helper.make_node("Flatten", ["m"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1),
    ]
    model = qhtest.make_model(nodes, [("x", [1, 1, 8, 8])], [("y", [1, 3])],
                              initializers=[("w", w), ("fw", fw)])
    qhtest.save_model(model, path)
    return path


def case_reduce_split_to_21(r, tmp):
    ort_compare.require_ort()
    model = reduce_split_model(os.path.join(tmp, "rs.onnx"))
    calib = os.path.join(tmp, "calib.npy")
    np.save(calib, np.random.default_rng(5).random((16, 1, 8, 8), dtype=np.float32))
    out = quantize(r, tmp, "16x8", model, calib)
    m = load(out)
    assert opset_of(m) == 21, opset_of(m)
    nodes = {n.name: n for n in m.graph.node}
    mean, split = nodes["mean"], nodes["split"]
    assert len(mean.input) == 2 and not any(a.name == "axes" for a in mean.attribute), mean
    axes = next(t for t in m.graph.initializer if t.name == mean.input[1])
    from onnx import numpy_helper
    assert list(numpy_helper.to_array(axes)) == [2, 3], axes
    assert any(a.name == "num_outputs" and a.i == 2 for a in split.attribute), split
    x = os.path.join(tmp, "x.npy")
    np.save(x, np.random.default_rng(6).random((1, 1, 8, 8), dtype=np.float32))
    fails = ort_compare.check(r, out, x, tmp, "reduce_split")
    assert not fails, fails


def unpack_4bit(raw, n, signed):
    """ONNX's 4-bit layout: two per byte, low nibble first."""
    b = np.frombuffer(raw, dtype=np.uint8)
    v = np.empty(2 * b.size, dtype=np.int16)
    v[0::2], v[1::2] = b & 0xF, b >> 4
    v = v[:n]
    return np.where(v >= 8, v - 16, v) if signed else v


def check_4bit_weights(path, signed):
    """Every 4-bit weight initializer decodes to the float weight quantized here (ATen's
    rounding: rint(w * (1 / scale)) + zp in float32, clamped); returns how many."""
    from onnx import numpy_helper
    m, f = load(path), load(DIGITS)
    floats = {t.name: numpy_helper.to_array(t) for t in f.graph.initializer}
    inits = {t.name: t for t in m.graph.initializer}
    want_type = 22 if signed else 21  # TensorProto INT4 / UINT4 (Debian's onnx 1.12 lacks the names)
    lo, hi = (-8, 7) if signed else (0, 15)
    checked = 0
    for n in m.graph.node:
        if n.op_type != "DequantizeLinear" or n.output[0] not in floats:
            continue
        q = inits[n.input[0]]
        assert q.data_type == want_type, (n.name, q.data_type)
        w = floats[n.output[0]].astype(np.float32)
        assert len(q.raw_data) == (w.size + 1) // 2, (n.name, len(q.raw_data), w.size)
        got = unpack_4bit(q.raw_data, w.size, signed).reshape(w.shape)
        scale = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
        zp_t = inits[n.input[2]]
        assert zp_t.data_type == want_type, (n.name, zp_t.data_type)
        zp = unpack_4bit(zp_t.raw_data, scale.size, signed)
        assert np.all(zp == (0 if signed else 8)), (n.name, zp)
        bshape = [-1] + [1] * (w.ndim - 1)
        inv = (np.float32(1) / scale).reshape(bshape)
        want = np.clip(np.rint(w * inv) + zp.reshape(bshape).astype(np.float32), lo, hi)
        assert np.array_equal(got, want), (n.name, np.argwhere(got != want)[:5])
        checked += 1
    return checked


def weights_4bit(scheme, signed):
    def case(r, tmp):
        ort_compare.require_ort()
        out = quantize(r, tmp, scheme)
        assert opset_of(load(out)) == 21
        n = check_4bit_weights(out, signed)
        assert n == 4, f"{n} 4-bit weights (conv1-3, fc)"
        float_out, y = os.path.join(tmp, "float.npy"), os.path.join(tmp, "y.npy")
        ok(r, "run", DIGITS, "--input", TEST, "-o", float_out)
        ok(r, "run", out, "--input", TEST, "-o", y)
        print(f"{scheme}: {n} weights packed and exact; output SQNR against float "
              f"{sqnr_db(np.load(float_out), np.load(y)):.1f} dB")
        fails = ort_compare.check(r, out, TEST, tmp, scheme)
        assert not fails, fails
    return case


def refused_opset(opset, *parts, scheme="16x8"):
    def case(r, tmp):
        cfg = os.path.join(tmp, "c.json")
        with open(cfg, "w") as f:
            json.dump(CONFIGS[scheme], f)
        out = os.path.join(tmp, "d.qdq.onnx")
        rc, _, err = r.run("quantize", DIGITS, *BACKEND, "--calib", CALIB, "--config", cfg, "-o", out,
                           "--quiet", "--opset", str(opset), timeout=300)
        qhtest.check_no_crash(rc, err)
        assert rc != 0, (rc, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        print(lines[0])
        for part in parts:
            assert part in lines[0], f"{part!r} not in {lines[0]!r}"
        assert not os.path.exists(out), "an output file was written"
    return case


def case_opset_21_for_8bit(r, tmp):
    ort_compare.require_ort()
    out = quantize(r, tmp, "8x8", DIGITS, CALIB, "--opset", "21")
    assert opset_of(load(out)) == 21
    fails = ort_compare.check(r, out, TEST, tmp, "8x8_at_21")
    assert not fails, fails


CASES = {
    "digits_16x8": case_digits_16x8,
    "reduce_split_to_21": case_reduce_split_to_21,
    "opset_17_too_old": refused_opset(17, "digits_cnn.onnx", "opset 17 cannot hold",
                                      "int16", "16-bit QuantizeLinear and DequantizeLinear need opset 21"),
    "opset_12_refused": refused_opset(12, "opset 12", "qhost writes opsets 13 to 21"),
    "opset_21_for_8bit": case_opset_21_for_8bit,
    "weights_int4": weights_4bit("8x4", True),
    "weights_uint4": weights_4bit("8xu4", False),
    "opset_17_too_old_for_int4": refused_opset(17, "opset 17 cannot hold DequantizeLinear", "on int4",
                                               "4-bit QuantizeLinear and DequantizeLinear need opset 21",
                                               scheme="8x4"),
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
