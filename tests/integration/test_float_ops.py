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
             np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.int32): TensorProto.INT32,
             np.dtype(np.uint8): TensorProto.UINT8}
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
    if a.size == 0:
        print(f"{tag}: both empty, shape {a.shape}")
    elif a.dtype == np.float32:
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
    # a scalar exponent takes the flat loop (x * x for 2), a vector one the broadcast walk
    for op, b in (("Pow", np.array(2.0, np.float32)), ("Pow", np.array([1, 2, 3, 0], np.int64)),
                  ("Pow", np.array(3.0, np.float32)), ("Pow", np.array([[2]], np.int64))):
        m = model([helper.make_node(op, ["x", "b"], ["y"])], ("x", x), "y", [("b", b)])
        agree(r, tmp, m, x, f"pow_{b.dtype}_{b.size}_{b.ravel()[0]}")
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



def outputs_of(r, tmp, node, x, inits, outs, tag, opset=13, out_dtypes=None):
    """Compare each output of a multi-output node through an Identity."""
    helper = qhtest.onnx_modules()[2]
    for i, out in enumerate(outs):
        ident = helper.make_node("Identity", [out], ["out"])
        dt = out_dtypes[i] if out_dtypes else np.float32
        agree(r, tmp, model([node, ident], ("x", x), "out", inits, opset=opset, out_dtype=dt), x,
              f"{tag}_{out}")


def case_elementwise_more(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    x = f32(2, 3, 4)
    for op, xi in (("Log", np.abs(x) + 0.1), ("Abs", x), ("Reciprocal", x + np.sign(x))):
        agree(r, tmp, model([helper.make_node(op, ["x"], ["y"])], ("x", xi), "y"), xi, op.lower())
    xi = RNG.integers(-50, 50, (3, 4)).astype(np.int64)
    agree(r, tmp, model([helper.make_node("Abs", ["x"], ["y"])], ("x", xi), "y", out_dtype=np.int64), xi,
          "abs_int64")
    # variadic Min/Max with three-way broadcasting, one input, and int64
    for op in ("Min", "Max"):
        m = model([helper.make_node(op, ["x", "a", "b"], ["y"])], ("x", x), "y",
                  [("a", f32(3, 1)), ("b", f32(4))])
        agree(r, tmp, m, x, f"{op.lower()}_three")
        agree(r, tmp, model([helper.make_node(op, ["x"], ["y"])], ("x", x), "y"), x, f"{op.lower()}_one")
        m = model([helper.make_node(op, ["x", "a"], ["y"])], ("x", xi), "y",
                  [("a", np.array([[3], [-7], [0]], np.int64))], out_dtype=np.int64)
        agree(r, tmp, m, xi, f"{op.lower()}_int64")
    cond = RNG.random((3, 1, 4)) < 0.5
    m = model([helper.make_node("And", ["x", "b"], ["y"])], ("x", cond), "y",
              [("b", RNG.random((2, 1)) < 0.5)], out_dtype=np.bool_)
    agree(r, tmp, m, cond, "and_broadcast")
    xe = np.zeros((0, 4), np.float32)
    m = model([helper.make_node("Max", ["x", "a"], ["y"])], ("x", xe), "y", [("a", f32(4))])
    agree(r, tmp, m, xe, "max_empty")


def case_reduce(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    x = f32(2, 3, 4, 5)
    for op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"):
        for axes, keep in (([1, -1], 1), ([0], 0), (None, 0), ([-2], 1)):
            tag = f"{op.lower()}_{'all' if axes is None else '_'.join(map(str, axes))}_k{keep}"
            if op == "ReduceSum":  # axes as input from opset 13
                ins, inits = ["x"], []
                if axes is not None:
                    ins, inits = ["x", "ax"], [("ax", np.array(axes, np.int64))]
                node = helper.make_node(op, ins, ["y"], keepdims=keep)
            else:
                inits = []
                node = helper.make_node(op, ["x"], ["y"], keepdims=keep, **({} if axes is None else {"axes": axes}))
            agree(r, tmp, model([node], ("x", x), "y", inits), x, tag)
    # axes as an input came to the others at opset 18, whose form the kernels implement
    for op in ("ReduceMax", "ReduceMean", "ReduceL2"):
        m = model([helper.make_node(op, ["x", "ax"], ["y"], keepdims=0, name="rm")], ("x", x), "y",
                  [("ax", np.array([2, -1], np.int64))], opset=18)
        agree(r, tmp, m, x, f"{op.lower()}_opset18")
    # Split-18's num_outputs on a length that does not divide: ceil-sized parts, a smaller last
    for last in (0, 1, 2):
        outs = ["a", "b", "c"]
        outs[last] = "y"
        m = model([helper.make_node("Split", ["x"], outs, axis=3, num_outputs=3)], ("x", x), "y", opset=18)
        agree(r, tmp, m, x, f"split_opset18_part{last}")
    # ReduceMax changed again at opset 20 (bool types only), which the loader reads since
    # issue 22; Pad changed at opset 23, which it refuses naming it
    m = model([helper.make_node("ReduceMax", ["x", "ax"], ["y"], keepdims=0, name="rm")], ("x", x), "y",
              [("ax", np.array([2], np.int64))], opset=20)
    agree(r, tmp, m, x, "reducemax_opset20")
    m = model([helper.make_node("Pad", ["x", "pads"], ["y"], name="p")], ("x", x), "y",
              [("pads", np.zeros(2 * x.ndim, np.int64))], opset=23)
    refused(r, tmp, m, x, "pad_opset23", "node 'p' (Pad): Pad changed in opset 23")
    xi = RNG.integers(-9, 9, (3, 4)).astype(np.int64)
    for op in ("ReduceSum", "ReduceMax"):
        ins, inits = (["x", "ax"], [("ax", np.array([1], np.int64))]) if op == "ReduceSum" else (["x"], [])
        attrs = {} if op == "ReduceSum" else {"axes": [1]}
        m = model([helper.make_node(op, ins, ["y"], **attrs)], ("x", xi), "y", inits, out_dtype=np.int64)
        agree(r, tmp, m, xi, f"{op.lower()}_int64")
    # an empty reduced axis: the sum of nothing is 0
    xe = np.zeros((3, 0), np.float32)
    m = model([helper.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0)], ("x", xe), "y",
              [("ax", np.array([1], np.int64))])
    agree(r, tmp, m, xe, "reducesum_empty")
    for axis, keep, last in ((1, 1, 0), (-1, 0, 0), (0, 0, 1)):
        xa = np.round(f32(3, 4, 5) * 2) / 2  # ties, for select_last_index
        node = helper.make_node("ArgMax", ["x"], ["y"], axis=axis, keepdims=keep, select_last_index=last)
        agree(r, tmp, model([node], ("x", xa), "y", out_dtype=np.int64), xa, f"argmax_{axis}_k{keep}_l{last}")


def case_tile_split(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    x = f32(2, 3, 4)
    for reps in ([1, 2, 3], [3, 1, 1], [2, 0, 1]):
        m = model([helper.make_node("Tile", ["x", "r"], ["y"])], ("x", x), "y", [("r", np.array(reps, np.int64))])
        agree(r, tmp, m, x, "tile_" + "_".join(map(str, reps)))
    # split as input (opset 13), equal parts, a zero-length part, a negative axis
    node = helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=-1)
    outputs_of(r, tmp, node, x, [("s", np.array([1, 0, 3], np.int64))], ["a", "b", "c"], "split_input")
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1)
    outputs_of(r, tmp, node, x, [], ["a", "c"], "split_equal")


def case_instancenorm(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    for shape in ((2, 3, 5, 4), (2, 3, 7)):
        x = f32(*shape, scale=3.0) + 1.0
        node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)
        m = model([node], ("x", x), "y", [("s", f32(3)), ("b", f32(3))])
        agree(r, tmp, m, x, f"instancenorm_rank{len(shape)}")


EINSUM_FORMS = [
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)]),   # attention scores
    ("bhqk,bhkd->bhqd", [(2, 3, 5, 6), (2, 3, 6, 4)]),   # attention context
    ("bij,jk->bik", [(2, 3, 4), (4, 5)]),                # batched projection
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 5)]),      # ellipsis, broadcast
    ("ij,kj", [(3, 4), (5, 4)]),                         # implicit output (ik)
    ("i,j->ij", [(3,), (4,)]),                           # outer product
    ("ii->i", [(4, 4)]),                                 # diagonal
    ("ij->ji", [(3, 4)]),                                # transpose
    ("bij->b", [(2, 3, 4)]),                             # sum
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),      # bilinear, three operands
    ("ij,jk->ik", [(0, 4), (4, 5)]),                     # empty
]


def case_einsum(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    for i, (eq, shapes) in enumerate(EINSUM_FORMS):
        x = f32(*shapes[0])
        names = ["x"] + [f"w{k}" for k in range(1, len(shapes))]
        inits = [(n, f32(*s)) for n, s in zip(names[1:], shapes[1:])]
        m = model([helper.make_node("Einsum", names, ["y"], equation=eq)], ("x", x), "y", inits, opset=12 + 1)
        agree(r, tmp, m, x, f"einsum_{i}_{eq.replace(',', '_').replace('->', '_to_').replace('...', 'E')}")


def case_index_elements(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    x = f32(3, 4, 5)
    for axis in (0, -1, 1):
        d = x.shape[axis]
        idx = RNG.integers(-d, d, (2, 3, 4)).astype(np.int64)
        m = model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)], ("x", x), "y", [("i", idx)])
        agree(r, tmp, m, x, f"gatherelements_axis{axis}")
    for axis in (1, -1):  # Gather on an inner axis with negative indices (relative positions, heads)
        idx = np.array([[0, -1], [2, 1]], np.int64)
        m = model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)], ("x", x), "y", [("i", idx)])
        agree(r, tmp, m, x, f"gather_axis{axis}")
    for upper in (0, 1):
        for k in (None, 2, -1):
            ins, inits = (["x"], []) if k is None else (["x", "k"], [("k", np.array(k, np.int64))])
            m = model([helper.make_node("Trilu", ins, ["y"], upper=upper)], ("x", x), "y", inits, opset=14)
            agree(r, tmp, m, x, f"trilu_u{upper}_k{k}")
    xi = RNG.integers(-5, 5, (3, 4)).astype(np.int64)
    for ex, rev in ((0, 0), (1, 0), (0, 1), (1, 1)):
        m = model([helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=ex, reverse=rev)], ("x", x), "y",
                  [("a", np.array(-2, np.int64))], opset=14)
        agree(r, tmp, m, x, f"cumsum_ex{ex}_rev{rev}")
        m = model([helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=ex, reverse=rev)], ("x", xi), "y",
                  [("a", np.array([1], np.int64))], opset=14, out_dtype=np.int64)
        agree(r, tmp, m, xi, f"cumsum_int64_ex{ex}_rev{rev}")
    xt = np.round(f32(3, 6, 4) * 2) / 2  # ties: equal values come out in index order
    for axis, largest, k in ((1, 1, 3), (-1, 0, 2), (1, 1, 0)):
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
        outputs_of(r, tmp, node, xt, [("k", np.array([k], np.int64))], ["v", "i"], f"topk_{axis}_{largest}_{k}",
                   out_dtypes=[np.float32, np.int64])


def case_dynamic_quant(r, tmp):
    ort_compare.require_ort()
    helper = qhtest.onnx_modules()[2]
    x = f32(2, 5, 8, scale=2.0) + 0.5
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])
    outputs_of(r, tmp, node, x, [], ["q", "s", "z"], "dql", out_dtypes=[np.uint8, np.float32, np.uint8])
    xp = np.abs(x)  # all positive: zero point 0
    outputs_of(r, tmp, node, xp, [], ["q", "z"], "dql_positive", out_dtypes=[np.uint8, np.uint8])
    # ONNX Runtime's dynamic MatMul: DQL -> MatMulInteger -> Cast -> Mul by both scales
    forms = ((np.int8, None), (np.uint8, np.array(131, np.uint8)),
             (np.int8, RNG.integers(-3, 3, 6).astype(np.int8)))  # b_zero_point per column
    for wdt, wzp in forms:
        lo, hi = (-128, 128) if wdt == np.int8 else (0, 256)
        w = RNG.integers(lo, hi, (8, 6)).astype(wdt)
        ins = ["q", "w", "z"] + (["wz"] if wzp is not None else [])
        inits = [("w", w)] + ([("wz", wzp)] if wzp is not None else [])
        nodes = [node, helper.make_node("MatMulInteger", ins, ["y"])]
        tag = f"matmulinteger_{np.dtype(wdt).name}_{'none' if wzp is None else wzp.size}"
        agree(r, tmp, model(nodes, ("x", x), "y", inits, out_dtype=np.int32), x, tag)


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


def case_hostile(r, tmp):
    """The issue's hostile inputs for the new ops: one error line each, in the 1 GiB the
    runner allows, no output file."""
    helper = qhtest.onnx_modules()[2]
    x = f32(4)
    consts = [("s", np.array(0, np.int64)), ("l", np.array(1 << 40, np.int64)), ("d", np.array(1, np.int64))]
    xi = np.zeros(4, np.int64)
    m = model([helper.make_node("Range", ["s", "l", "d"], ["rg"], name="range"),
               helper.make_node("Add", ["x", "rg"], ["y"])], ("x", xi), "y", consts, out_dtype=np.int64)
    refused(r, tmp, m, xi, "range_2_40", "node 'range' (Range): output 'rg': shape's element count exceeds the limit")
    m = model([helper.make_node("Expand", ["x", "s"], ["y"], name="expand")], ("x", x), "y",
              [("s", np.array([1 << 20, 1 << 20, 4], np.int64))])
    refused(r, tmp, m, x, "expand_huge", "node 'expand' (Expand): output 'y': shape's element count exceeds the limit")
    m = model([helper.make_node("Tile", ["x", "r"], ["y"], name="tile")], ("x", x), "y",
              [("r", np.array([1 << 62], np.int64))])
    refused(r, tmp, m, x, "tile_huge", "node 'tile' (Tile): dimension 0 would be 4 x")
    xm = f32(3, 4)
    m = model([helper.make_node("Einsum", ["x", "w"], ["y"], equation="ij,jk->i k!", name="es")], ("x", xm), "y",
              [("w", f32(4, 2))])
    refused(r, tmp, m, xm, "einsum_unparsable", "node 'es' (Einsum): equation 'ij,jk->ik!' does not parse")
    xs = f32(5, 2, 4)  # LSTM weights that disagree: W says hidden 3, R hidden 2
    m = model([helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=3, name="lstm")], ("x", xs), "y",
              [("W", f32(1, 12, 4)), ("R", f32(1, 8, 2))])
    refused(r, tmp, m, xs, "lstm_inconsistent", "node 'lstm' (LSTM): R must be float32 of shape [1, 12, 3]")
    m = model([helper.make_node("GRU", ["x", "W", "R"], ["y"], hidden_size=2, name="gru")], ("x", xs), "y",
              [("W", f32(1, 6, 5)), ("R", f32(1, 6, 2))])
    refused(r, tmp, m, xs, "gru_input_size", "node 'gru' (GRU): W must be float32 of shape [1, 6, 4]")
    m = model([helper.make_node("Split", ["x", "s"], ["a", "b"], name="split"),
               helper.make_node("Add", ["a", "b"], ["y"])], ("x", x), "y", [("s", np.array([3, 3], np.int64))])
    refused(r, tmp, m, x, "split_sum", "node 'split' (Split): split sums to 6, not the axis length 4")
    m = model([helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge")], ("x", x), "y",
              [("i", np.array([0, 4], np.int64))])
    refused(r, tmp, m, x, "gatherelements_range", "node 'ge' (GatherElements): index 4 is out of range [-4, 4)")
    m = model([helper.make_node("TopK", ["x", "k"], ["y", "i"], name="topk")], ("x", x), "y",
              [("k", np.array([5], np.int64))])
    refused(r, tmp, m, x, "topk_k", "node 'topk' (TopK): K = 5 is outside [0, 4]")


CASES = {
    "lstm_forms": case_lstm_forms,
    "gru_forms": case_gru_forms,
    "math": case_math,
    "index_build": case_index_build,
    "layernorm": case_layernorm,
    "elementwise_more": case_elementwise_more,
    "reduce": case_reduce,
    "tile_split": case_tile_split,
    "instancenorm": case_instancenorm,
    "einsum": case_einsum,
    "index_elements": case_index_elements,
    "dynamic_quant": case_dynamic_quant,
    "bad_input": case_bad_input,
    "hostile": case_hostile,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
