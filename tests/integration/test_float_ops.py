#!/usr/bin/python3
"""The host's kernels for the ops transformer and recurrent exports add, op by op,
against ONNX Runtime on hand-built graphs (onnx.helper), including the attribute
forms PyTorch's exporter does not write: LSTM with peepholes, clip, initial states,
per-batch sequence_lens and the reverse direction; GRU with linear_before_reset 0 and
1; Mod with fmod 0 and 1 and negative operands; Where and Expand with three-way
broadcasting; Equal/Less/Greater on int64; Range with a negative step; ScatterND with
each reduction and a negative index; LayerNormalization on an inner axis with its Mean
and InvStdDev outputs. The bar: max |qhost - ORT| <= 1e-4 * max |ORT| (exact
for integer and bool outputs). Bad attributes and data give one error line naming the
node: an LSTM with an activations attribute, an integer Mod by zero, a
LayerNormalization whose Scale does not match; a model with several ops qhost lacks
names all of them.
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_compare  # noqa: E402
import qhtest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORT_RUN = os.path.join(ROOT, "tests", "ort", "ort_run.js")
RNG = np.random.default_rng(20261126)


def model(nodes, x, out, inits=(), opset=13, out_dtype=np.float32):
    """A model whose one graph input is x (name, array) and whose one output is the value
    named out, of out_dtype (its shape left to inference)."""
    onnx, TensorProto, helper, numpy_helper = qhtest.onnx_modules()
    types = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
             np.dtype(np.bool_): TensorProto.BOOL}
    name, arr = x
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(name, types[arr.dtype], list(arr.shape))],
        [helper.make_tensor_value_info(out, types[np.dtype(out_dtype)], None)],
        [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def both(r, tmp, m, x, tag):
    """(qhost's output, ORT's) on the model's first output."""
    onnx = qhtest.onnx_modules()[0]
    path, xp = os.path.join(tmp, f"{tag}.onnx"), os.path.join(tmp, f"{tag}.x.npy")
    onnx.save(m, path)
    np.save(xp, x)
    qh, ort = os.path.join(tmp, f"{tag}.qh.npy"), os.path.join(tmp, f"{tag}.ort.npy")
    rc, _, err = r.run("run", path, "--input", xp, "-o", qh)
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"{tag}: qhost run failed: {err}"
    p = subprocess.run(["node", ORT_RUN, path, xp, ort], capture_output=True, text=True)
    assert p.returncode == 0, f"{tag}: ONNX Runtime failed: {p.stderr}"
    return np.load(qh), np.load(ort)


def agree(r, tmp, m, x, tag):
    a, b = both(r, tmp, m, x, tag)
    assert a.shape == b.shape and a.dtype == b.dtype, f"{tag}: {a.shape} {a.dtype} vs ORT {b.shape} {b.dtype}"
    if a.dtype == np.float32:
        rel = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
        print(f"{tag}: max relative difference {rel:.3g} over {a.size} elements")
        assert rel <= 1e-4, f"{tag}: {rel:.3g} from ONNX Runtime"
    else:
        assert np.array_equal(a, b), f"{tag}: differs from ONNX Runtime:\n{a}\n{b}"
        print(f"{tag}: identical ({a.size} {a.dtype} elements)")


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def case_lstm_forms(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    T, B, I, H = 5, 3, 4, 6
    x = f32(T, B, I)
    for tag, direction, extra in (
            ("forward", "forward", {}),
            ("reverse_peephole_clip", "reverse", {"clip": 1.5}),
            ("bidirectional_states_lens", "bidirectional", {})):
        D = 2 if direction == "bidirectional" else 1
        inits = [("W", f32(D, 4 * H, I, scale=0.5)), ("R", f32(D, 4 * H, H, scale=0.5)),
                 ("B", f32(D, 8 * H, scale=0.3))]
        ins = ["x", "W", "R", "B"]
        if tag.startswith("bidirectional"):
            inits += [("lens", np.array([5, 2, 4], np.int32)), ("h0", f32(D, B, H)), ("c0", f32(D, B, H))]
            ins += ["lens", "h0", "c0"]
        if "peephole" in tag:
            inits += [("P", f32(D, 3 * H, scale=0.5))]
            ins += ["", "", "", "P"]
        node = helper.make_node("LSTM", ins, ["y", "yh", "yc"], hidden_size=H, direction=direction, **extra)
        for out in ("y", "yh", "yc"):
            ident = helper.make_node("Identity", [out], ["out"])
            agree(r, tmp, model([node, ident], ("x", x), "out", inits), x, f"lstm_{tag}_{out}")


def case_gru_forms(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    T, B, I, H = 6, 2, 5, 4
    x = f32(T, B, I)
    for lbr in (0, 1):
        for direction in ("forward", "reverse", "bidirectional"):
            D = 2 if direction == "bidirectional" else 1
            inits = [("W", f32(D, 3 * H, I, scale=0.5)), ("R", f32(D, 3 * H, H, scale=0.5)),
                     ("B", f32(D, 6 * H, scale=0.3)), ("lens", np.array([6, 3], np.int32)),
                     ("h0", f32(D, B, H))]
            node = helper.make_node("GRU", ["x", "W", "R", "B", "lens", "h0"], ["y", "yh"], hidden_size=H,
                                    direction=direction, linear_before_reset=lbr)
            for out in ("y", "yh"):
                ident = helper.make_node("Identity", [out], ["out"])
                agree(r, tmp, model([node, ident], ("x", x), "out", inits), x, f"gru_lbr{lbr}_{direction}_{out}")


def case_math(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    x = f32(2, 3, 4)
    unary = [("Sqrt", np.abs), ("Erf", None), ("Exp", None), ("Neg", None)]
    for op, prep in unary:
        xi = prep(x) if prep else x
        agree(r, tmp, model([helper.make_node(op, ["x"], ["y"])], ("x", xi), "y"), xi, op.lower())
    for op, b in (("Pow", np.array(2.0, np.float32)), ("Pow", np.array([1, 2, 3, 0], np.int64))):
        m = model([helper.make_node(op, ["x", "b"], ["y"])], ("x", x), "y", [("b", b)])
        agree(r, tmp, m, x, f"pow_{b.dtype}")
    m = model([helper.make_node("Mod", ["x", "b"], ["y"], fmod=1)], ("x", x), "y",
              [("b", np.array([0.7, -1.3, 2.0, 0.5], np.float32))])
    agree(r, tmp, m, x, "mod_fmod")
    xi = RNG.integers(-20, 20, (3, 4)).astype(np.int64)
    m = model([helper.make_node("Mod", ["x", "b"], ["y"])], ("x", xi), "y",
              [("b", np.array([3, -3, 7, -5], np.int64))], out_dtype=np.int64)
    agree(r, tmp, m, xi, "mod_int")
    for op in ("Equal", "Less", "Greater"):
        m = model([helper.make_node(op, ["x", "b"], ["y"])], ("x", xi), "y",
                  [("b", np.array([[0], [5], [-3]], np.int64))], out_dtype=np.bool_)
        agree(r, tmp, m, xi, op.lower())
    cond = RNG.random((3, 1, 4)) < 0.5
    m = model([helper.make_node("Where", ["x", "a", "b"], ["y"])], ("x", cond), "y",
              [("a", f32(2, 1)), ("b", f32(3, 1, 1))])
    agree(r, tmp, m, cond, "where_broadcast")
    m = model([helper.make_node("Not", ["x"], ["y"])], ("x", cond), "y", out_dtype=np.bool_)
    agree(r, tmp, m, cond, "not")
    xe = f32(3, 1)
    m = model([helper.make_node("Expand", ["x", "s"], ["y"])], ("x", xe), "y",
              [("s", np.array([2, 1, 4], np.int64))])
    agree(r, tmp, m, xe, "expand")


def case_index_build(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    x = f32(5)
    consts = [("s", np.array(2.0, np.float32)), ("l", np.array(7.0, np.float32)), ("d", np.array(1.0, np.float32))]
    m = model([helper.make_node("Range", ["s", "l", "d"], ["rg"]), helper.make_node("Add", ["x", "rg"], ["y"])],
              ("x", x), "y", consts)
    agree(r, tmp, m, x, "range_float")
    xi = np.arange(4, dtype=np.int64)
    consts = [("s", np.array(10, np.int64)), ("l", np.array(-2, np.int64)), ("d", np.array(-3, np.int64))]
    m = model([helper.make_node("Range", ["s", "l", "d"], ["rg"]), helper.make_node("Add", ["x", "rg"], ["y"])],
              ("x", xi), "y", consts, out_dtype=np.int64)
    agree(r, tmp, m, xi, "range_int_negative_delta")
    data = f32(4, 3)
    for red in ("none", "add", "mul"):
        attrs = {} if red == "none" else {"reduction": red}
        m = model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], **attrs)], ("x", data), "y",
                  [("i", np.array([[1], [-1]], np.int64)), ("u", f32(2, 3))], opset=16)
        agree(r, tmp, m, data, f"scatternd_{red}")


def case_layernorm(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    x = f32(2, 3, 4, 5, scale=3.0)
    inits = [("s", f32(4, 5)), ("b", f32(4, 5))]
    for out in ("y", "mean", "inv"):
        node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"], axis=2,
                                epsilon=1e-3)
        ident = helper.make_node("Identity", [out], ["out"])
        agree(r, tmp, model([node, ident], ("x", x), "out", inits, opset=17), x, f"layernorm_{out}")


def refused(r, tmp, m, x, tag, want):
    onnx = qhtest.onnx_modules()[0]
    path, xp = os.path.join(tmp, f"{tag}.onnx"), os.path.join(tmp, f"{tag}.x.npy")
    onnx.save(m, path)
    np.save(xp, x)
    out = os.path.join(tmp, f"{tag}.out.npy")
    rc, _, err = r.run("run", path, "--input", xp, "-o", out)
    qhtest.check_no_crash(rc, err)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1 and want in lines[0], f"{tag}: exit {rc}: {err}"
    assert not os.path.exists(out), f"{tag}: a partial output was left"
    print(f"{tag}: {lines[0]}")


def case_bad_input(r, tmp):
    helper = qhtest.onnx_modules()[2]
    x = f32(3, 2, 4)
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=2, name="lstm",
                            activations=["Relu", "Tanh", "Tanh"])
    m = model([node], ("x", x), "y", [("W", f32(1, 8, 4)), ("R", f32(1, 8, 2))])
    refused(r, tmp, m, x, "lstm_activations", "node 'lstm' (LSTM): the activations attribute is not supported")
    xi = np.array([[4, 5]], np.int64)
    m = model([helper.make_node("Mod", ["x", "b"], ["y"], name="mod")], ("x", xi), "y",
              [("b", np.array([1, 0], np.int64))], out_dtype=np.int64)
    refused(r, tmp, m, xi, "mod_zero", "node 'mod' (Mod): integer Mod by zero")
    m = model([helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln")], ("x", x), "y",
              [("s", f32(3))], opset=17)
    refused(r, tmp, m, x, "layernorm_scale", "node 'ln' (LayerNormalization): Scale must be float32")
    # every op qhost lacks is named in the one line, not only the first it meets
    m = model([helper.make_node("Celu", ["x"], ["a"], name="c1"), helper.make_node("Softsign", ["a"], ["b"]),
               helper.make_node("Celu", ["b"], ["c"]), helper.make_node("Mish", ["c"], ["y"])], ("x", x), "y")
    refused(r, tmp, m, x, "unsupported_all",
            "node 'c1' (Celu): operator Celu is not supported by qhost's reference kernels; nor are Softsign, Mish")


CASES = {
    "lstm_forms": case_lstm_forms,
    "gru_forms": case_gru_forms,
    "math": case_math,
    "index_build": case_index_build,
    "layernorm": case_layernorm,
    "bad_input": case_bad_input,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
