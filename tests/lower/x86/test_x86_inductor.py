#!/usr/bin/python3
"""The x86 plugin's quantizer options through `qhost quantize`: quantizer=inductor
(X86InductorQuantizer's PT2E recipe) checked edge by edge on small graphs against the
recipe (which node inputs and outputs get a Q/DQ pair, which share qparams, weight
dtype/range/axis with scales recomputed here), and the reduce_range default on a CPU
without VNNI (QHOST_CPU_DISABLE) for both quantizers, against the report's tensors.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import qhtest  # noqa: E402

qhtest.ASAN_OPTIONS += ":intercept_tls_get_addr=0"  # see test_x86_lowering.py
PLUGIN_DIR = os.environ.get("QH_X86_PLUGIN_DIR", "")
BACKEND = ["--backend", "x86", "--plugin-dir", PLUGIN_DIR]
NO_VNNI = "avx512vnni,avxvnni"


def ok(r, *args, timeout=300):
    rc, out, err = r.run(*args, timeout=timeout)
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}\n{err}"
    return out, err


def node(op, ins, out, **attrs):
    _, _, helper, _ = qhtest.onnx_modules()
    return helper.make_node(op, ins, [out], name=out, **attrs)


def conv(name, x, cin, cout, rng, k=3):
    w = (rng.standard_normal((cout, cin, k, k)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    return node("Conv", [x, f"{name}_w", f"{name}_b"], name, pads=[k // 2] * 4), \
        [(f"{name}_w", w), (f"{name}_b", b)]


class Quantized:
    """A QDQ model seen from the float graph's nodes: for each input slot, the
    (scale, zero_point, dtype, axis) of the DequantizeLinear feeding it, or None."""

    def __init__(self, path, report):
        onnx, _, _, numpy_helper = qhtest.onnx_modules()
        g = onnx.load(path).graph
        self.inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.producer = {o: n for n in g.node for o in n.output}
        self.consumers = {}
        for n in g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.nodes = {n.name: n for n in g.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear")}
        self.outputs = [o.name for o in g.output]
        with open(report) as f:
            self.report = json.load(f)

    def edge(self, name, slot):
        v = self.nodes[name].input[slot]
        dq = self.producer.get(v)
        if dq is None or dq.op_type != "DequantizeLinear":
            return None
        src = dq.input[0]
        q = self.inits.get(src)
        if q is None:  # an activation: the int8 value comes from a QuantizeLinear
            q = np.zeros(0, np.uint8 if self.inits[dq.input[2]].dtype == np.uint8 else np.int8)
        scale = self.inits[dq.input[1]]
        zp = self.inits[dq.input[2]]
        axis = next((a.i for a in dq.attribute if a.name == "axis"), 1) if scale.ndim else None
        return {"scale": scale, "zp": zp, "dtype": zp.dtype, "axis": axis, "q": q}

    def output_quantized(self, name):
        v = self.nodes[name].output[0]
        return any(c.op_type == "QuantizeLinear" for c in self.consumers.get(v, [])) or \
            (v + "_prequant") in self.consumers


def quantize(r, tmp, model, calib, *opts, env=None, tag="q"):
    out, rep = os.path.join(tmp, f"{tag}.onnx"), os.path.join(tmp, f"{tag}.json")
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        _, err = ok(r, "quantize", model, *BACKEND, "--calib", calib, "-o", out, "--report", rep, "-v",
                    *[a for o in opts for a in ("--backend-opt", o)])
    finally:
        os.environ.clear()
        os.environ.update(old)
    return Quantized(out, rep), err


def same(a, b):
    return a is not None and b is not None and np.array_equal(a["scale"], b["scale"]) and \
        np.array_equal(a["zp"], b["zp"])


def act(e, qmax=255):
    assert e is not None, "activation edge not quantized"
    assert e["dtype"] == np.uint8 and e["scale"].ndim == 0, e


def weight(e, w, axis):
    """Per-channel symmetric int8 [-128, 127] with eps 2^-12: scale = max|w| / 127.5."""
    assert e is not None and e["dtype"] == np.int8 and e["axis"] == axis, e
    amax = np.max(np.abs(w), axis=tuple(i for i in range(w.ndim) if i != axis)).astype(np.float64)
    want = np.maximum(amax / 127.5, 2.0 ** -12)
    np.testing.assert_allclose(e["scale"].astype(np.float64), want, rtol=1e-6)
    assert not np.any(e["zp"])
    q = e["q"]
    assert q.min() >= -128 and q.max() <= 127 and (q.min() == -128 or q.max() == 127), (q.min(), q.max())


def residual_model(tmp, rng):
    """conv+relu -> maxpool -> conv+add(+relu) -> global pool -> flatten -> gemm."""
    n1, i1 = conv("c1", "x", 4, 8, rng)
    n2, i2 = conv("c2", "p1", 8, 8, rng)
    gw = (rng.standard_normal((5, 8)) * 0.3).astype(np.float32)
    nodes = [n1, node("Relu", ["c1"], "r1"), node("MaxPool", ["r1"], "p1", kernel_shape=[2, 2], strides=[2, 2]),
             n2, node("Add", ["c2", "p1"], "a2"), node("Relu", ["a2"], "r2"),
             node("GlobalAveragePool", ["r2"], "gap"), node("Flatten", ["gap"], "f"),
             node("Gemm", ["f", "g_w", "g_b"], "y", transB=1)]
    inits = i1 + i2 + [("g_w", gw), ("g_b", np.zeros(5, np.float32))]
    m = qhtest.make_model(nodes, [("x", [1, 4, 8, 8])], [("y", [1, 5])], inits)
    calib = os.path.join(tmp, "x.npy")
    np.save(calib, rng.standard_normal((4, 1, 4, 8, 8)).astype(np.float32))
    return qhtest.save_model(m, os.path.join(tmp, "res.onnx")), calib, dict(inits)


def case_residual(r, tmp):
    model, calib, w = residual_model(tmp, np.random.default_rng(1))
    q, _ = quantize(r, tmp, model, calib, "quantizer=inductor")
    # conv_unary: inputs quantized, bias float, no output spec: Relu reads the float conv
    act(q.edge("c1", 0))
    weight(q.edge("c1", 1), w["c1_w"], 0)
    assert q.edge("c1", 2) is None and q.edge("r1", 0) is None
    # max_pool2d after a quantized pattern: input quantized, output shares it, and the
    # next conv's input joins that observer (implicit sharing)
    act(q.edge("p1", 0))
    assert same(q.edge("c2", 0), q.edge("p1", 0))
    # conv_add_relu: the conv output into Add stays float; the extra input is quantized
    assert q.edge("a2", 0) is None and q.edge("r2", 0) is None
    assert same(q.edge("a2", 1), q.edge("p1", 0))
    weight(q.edge("c2", 1), w["c2_w"], 0)
    # adaptive pool and flatten (its user is linear) propagate; linear has no output spec
    act(q.edge("gap", 0))
    assert same(q.edge("f", 0), q.edge("gap", 0)) and same(q.edge("y", 0), q.edge("gap", 0))
    weight(q.edge("y", 1), w["g_w"], 0)
    assert q.edge("y", 2) is None and not q.output_quantized("y")
    # FX quantizes the fused op outputs (the contrast the recipe makes)
    fx, _ = quantize(r, tmp, model, calib, tag="fx")
    assert fx.output_quantized("y"), "fx: the Gemm output should be quantized"
    assert fx.edge("r1", 0) is None and fx.output_quantized("r1"), "fx: conv_relu's output is quantized"


def case_cat(r, tmp):
    """cat of two quantized patterns shares its inputs; cat / pool / add over graph inputs
    and a standalone Relu are not quantized; a MatMul linear with Tanh has axis-1 weights."""
    rng = np.random.default_rng(2)
    n1, i1 = conv("c1", "x", 3, 4, rng)
    n2, i2 = conv("c2", "x", 3, 4, rng)
    n3, i3 = conv("c3", "cat", 8, 4, rng)
    mw = (rng.standard_normal((4, 6)) * 0.4).astype(np.float32)
    nodes = [n1, node("Relu", ["c1"], "r1"), n2, node("Concat", ["r1", "c2"], "cat", axis=1), n3,
             node("Concat", ["r1", "x"], "cat2", axis=1), node("MaxPool", ["x"], "px", kernel_shape=[1, 1]),
             node("Add", ["px", "x"], "ax"), node("Relu", ["ax"], "rx"),
             node("Transpose", ["c3"], "t", perm=[0, 2, 3, 1]), node("MatMul", ["t", "m_w"], "mm"),
             node("Tanh", ["mm"], "y")]
    inits = i1 + i2 + i3 + [("m_w", mw)]
    m = qhtest.make_model(nodes, [("x", [1, 3, 6, 6])],
                          [("y", [1, 6, 6, 6]), ("cat2", [1, 7, 6, 6]), ("rx", [1, 3, 6, 6])], inits)
    model = qhtest.save_model(m, os.path.join(tmp, "cat.onnx"))
    calib = os.path.join(tmp, "x.npy")
    np.save(calib, rng.standard_normal((3, 1, 3, 6, 6)).astype(np.float32))
    q, _ = quantize(r, tmp, model, calib, "quantizer=inductor")
    act(q.edge("cat", 0))
    assert same(q.edge("cat", 1), q.edge("cat", 0)), "cat inputs share the first input's observer"
    assert same(q.edge("c3", 0), q.edge("cat", 0)), "cat's output shares its input"
    assert q.edge("c1", 0) is not None and q.edge("c2", 0) is not None
    for n, slots in (("cat2", (0, 1)), ("px", (0,)), ("ax", (0, 1)), ("rx", (0,)), ("t", (0,))):
        for s in slots:
            assert q.edge(n, s) is None, f"{n} input {s} should stay float"
    assert q.edge("mm", 0) is not None and q.edge("y", 0) is None
    weight(q.edge("mm", 1), mw, 1)
    # the report's node table follows the recipe, not the FX pass that ran before it
    # (FX quantizes the pool, add and relu over the graph input)
    fx, _ = quantize(r, tmp, model, calib, tag="fx")
    table = {n["name"]: n for n in q.report["nodes"]}
    fx_table = {n["name"]: n for n in fx.report["nodes"]}
    for n in ("px", "ax", "rx"):
        assert fx_table[n]["quantized"], fx_table[n]
        assert not table[n]["quantized"] and "annotate" in table[n]["reason"], table[n]
    for n in ("c1", "r1", "cat", "c3", "mm"):
        assert table[n]["quantized"], table[n]


def case_no_vnni(r, tmp):
    """Without VNNI, both quantizers default to reduce_range activations ([0, 127]) and
    say so; reduce_range=off keeps [0, 255]; the weights are untouched."""
    model, calib, _ = residual_model(tmp, np.random.default_rng(3))

    def ranges(q):
        acts = [t for t in q.report["tensors"] if t["dtype"] == "uint8"]
        assert acts
        return {(t["quant_min"], t["quant_max"]) for t in acts}, \
            {(t["quant_min"], t["quant_max"]) for t in q.report["tensors"] if t["dtype"] == "int8"}

    env = {"QHOST_CPU_DISABLE": NO_VNNI}
    for quantizer, wrange in (("fx", {(-128, 127)}), ("inductor", {(-128, 127)})):
        q, err = quantize(r, tmp, model, calib, f"quantizer={quantizer}", env=env, tag=quantizer)
        a, wr = ranges(q)
        assert a == {(0, 127)}, (quantizer, a)
        assert wr == wrange, (quantizer, wr)
        assert "[0, 127]" in err and "reduce_range" in err, err
        # and the choice is on record in the quantize report's notes
        assert any("reduce_range" in n and "[0, 127]" in n for n in q.report["notes"]), q.report["notes"]
        q, _ = quantize(r, tmp, model, calib, f"quantizer={quantizer}", "reduce_range=off", env=env,
                        tag=quantizer + "off")
        assert ranges(q)[0] == {(0, 255)}
        q, _ = quantize(r, tmp, model, calib, f"quantizer={quantizer}", "reduce_range=on", tag=quantizer + "on")
        assert ranges(q)[0] == {(0, 127)}
    # fx without reduce_range is the plain BackendConfig: the same ranges as PyTorch's onednn
    q, _ = quantize(r, tmp, model, calib, "reduce_range=off", tag="plain")
    assert ranges(q)[0] == {(0, 255)}


def case_bad_option(r, tmp):
    model, calib, _ = residual_model(tmp, np.random.default_rng(4))
    rc, _, err = r.run("quantize", model, *BACKEND, "--calib", calib, "-o", os.path.join(tmp, "o.onnx"),
                       "--backend-opt", "quantizer=pt2e")
    qhtest.check_no_crash(rc, err)
    assert rc != 0 and "fx" in err and "inductor" in err, err


CASES = {
    "inductor_residual": case_residual,
    "inductor_cat": case_cat,
    "reduce_range_no_vnni": case_no_vnni,
    "quantizer_option": case_bad_option,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
