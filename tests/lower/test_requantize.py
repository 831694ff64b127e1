#!/usr/bin/python3
"""Requantize units (ABI 1.2, QH_PATTERN_OP_REQUANTIZE) lowered on the requant_npu test
plugin (tests/lower/plugins/requant_npu.c), an NPU whose Add takes both inputs on one
grid.

Cases: `qhost quantize` with requant_npu gives a float Add of two tensors of different
ranges requantize steps (its post_convert) and both they and the Add run on its
kernels; a step between two of its kernels leaves no host Q/DQ between them; a graph
whose Add reads two tensors quantized on different grids meets the
NPU's rule with a requantize (DequantizeLinear -> QuantizeLinear onto the other input's
grid) before the Add; the requantize is lowered on the plugin's kernel and so is the
Add (bench's coverage lists both, no host Q/DQ between them), and the output is
bit-exact with the host's reference path, for uint8, int8, int8 -> uint8 and
per-channel source and target grids; a requantize the kernel cannot run (per-channel grids on two
axes) stays on the host with the plugin's reason in the coverage table; a plugin
without the pattern (scalar_int8) leaves the step to the host as before; a planted
rounding bug (bug=truncate) makes the lowered output differ and plugin-check fail;
plugin-check runs the requantize pattern on its generated graphs and the plugin
conforms.
"""
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import qhtest  # noqa: E402

PLUGIN_DIR = os.environ.get("QH_LOWER_PLUGIN_DIR", "")
BACKEND = ["--backend", "requant_npu", "--plugin-dir", PLUGIN_DIR]
SHAPE = (2, 4, 6, 6)
NP_DTYPE = {"uint8": np.uint8, "int8": np.int8}


def ok(r, *args, timeout=300):
    rc, out, err = r.run(*args, timeout=timeout)
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}\n{err}"
    return out


def grid(dtype, scale, lo=-2.4):
    """A zero point of dtype putting lo at the bottom of the range."""
    qmin = 0 if dtype == "uint8" else -128
    return np.float32(scale), NP_DTYPE[dtype](qmin + int(round(-lo / scale)))


def add_model(tmp, src="uint8", dst="uint8", src_axis=None, dst_axis=None, name="add"):
    """x1 -> Q(a) -> DQ(a) -> Q(b) -> DQ(b) -> Add <- DQ(b) <- Q(b) <- x2, Add -> Q(o) -> DQ -> y:
    x1's grid a (per channel along src_axis when given) is requantized onto x2's grid b
    (per channel along dst_axis when given), the one grid the NPU's Add takes."""
    onnx, TensorProto, helper, numpy_helper = qhtest.onnx_modules()
    inits, nodes = [], []

    def qparams(prefix, dtype, scale, axis):
        s, z = grid(dtype, scale)
        if axis is not None:  # one grid per channel, scales 1, 1.25, 1.5, ... times scale
            n = SHAPE[axis]
            s = np.array([scale * (1 + 0.25 * c) for c in range(n)], np.float32)
            z = np.array([grid(dtype, float(sc))[1] for sc in s], NP_DTYPE[dtype])
        inits.append(numpy_helper.from_array(np.asarray(s), prefix + "_s"))
        inits.append(numpy_helper.from_array(np.asarray(z), prefix + "_z"))
        return [prefix + "_s", prefix + "_z"], ({"axis": axis} if axis is not None else {})

    def qdq(op, x, y, prefix, attrs):
        nodes.append(helper.make_node(op, [x, *prefix], [y], name=y, **attrs))

    a, a_attr = qparams("a", src, 0.0213, src_axis)
    b, b_attr = qparams("b", dst, 0.0297, dst_axis)
    o, o_attr = qparams("o", dst, 0.0411, None)
    qdq("QuantizeLinear", "x1", "x1_q", a, a_attr)
    qdq("DequantizeLinear", "x1_q", "x1_f", a, a_attr)
    qdq("QuantizeLinear", "x1_f", "x1_requantized", b, b_attr)  # the requantize step
    qdq("DequantizeLinear", "x1_requantized", "x1_rf", b, b_attr)
    qdq("QuantizeLinear", "x2", "x2_q", b, b_attr)
    qdq("DequantizeLinear", "x2_q", "x2_f", b, b_attr)
    nodes.append(helper.make_node("Add", ["x1_rf", "x2_f"], ["s"], name="add"))
    qdq("QuantizeLinear", "s", "s_q", o, o_attr)
    qdq("DequantizeLinear", "s_q", "y", o, o_attr)
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(SHAPE)) for n in ("x1", "x2")]
    model = qhtest.make_model(nodes, info, [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))],
                              inits)
    path = os.path.join(tmp, f"{name}.onnx")
    qhtest.save_model(model, path)
    rng = np.random.default_rng(22)
    xs = os.path.join(tmp, "x.npz")
    # wider than the grids: both ends saturate too
    np.savez(xs, **{n: rng.uniform(-2.6, 3.2, size=SHAPE).astype(np.float32) for n in ("x1", "x2")})
    return path, ["--input", xs]


def run_both(r, tmp, model, inputs, *opts):
    host, low = os.path.join(tmp, "host.npy"), os.path.join(tmp, "low.npy")
    ok(r, "run", model, *inputs, "-o", host)
    ok(r, "run", model, *inputs, "-o", low, *BACKEND, *opts)
    return np.load(host), np.load(low)


def coverage(r, model, inputs, *opts, backend=BACKEND):
    out = ok(r, "bench", model, "--json", "--runs", "2", "--warmup", "0", *inputs, *backend, *opts)
    return json.loads(out)["coverage"]


def lowered_case(src, dst, src_axis=None, dst_axis=None, add_kernel="npu_add_one_grid"):
    def case(r, tmp):
        model, inputs = add_model(tmp, src, dst, src_axis, dst_axis)
        cov = coverage(r, model, inputs)
        units = {u["name"]: u for u in cov["units"]}
        print({n: (u["ops"], u["kernel"]) for n, u in units.items()},
              f"host Q/DQ {cov['host_qdq_nodes']}, between kernels {cov['qdq_between_kernels']}")
        req = units["x1_requantized"]
        assert req["ops"] == "Requantize" and req["kernel"] == "npu_requantize_8bit", req
        assert units["add"]["kernel"] == add_kernel, units["add"]
        if add_kernel == "npu_add_one_grid":
            assert cov["plugin_units"] == 2 and len(cov["units"]) == 2, cov
            # left on the host: the two input QuantizeLinears and the output DequantizeLinear;
            # the requantize's DequantizeLinear went with it
            assert cov["host_qdq_nodes"] == 3 and cov["qdq_between_kernels"] == 0, cov
        host, low = run_both(r, tmp, model, inputs)
        same = np.mean(host == low)
        print(f"lowered vs host reference: {100 * same:.2f}% bit-identical over {host.size} elements")
        assert np.array_equal(host, low), f"max difference {np.abs(host - low).max()}"
    return case


def case_quantize_inserts_requantize(r, tmp):
    """The whole flow: a float Add of two tensors of different ranges quantized with
    requant_npu, whose post_convert puts both inputs on one grid covering both ranges."""
    onnx, TensorProto, helper, numpy_helper = qhtest.onnx_modules()
    dims = ["N", *SHAPE[1:]]  # calibration rows along a symbolic batch
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in ("x1", "x2")]
    model = qhtest.make_model([helper.make_node("Add", ["x1", "x2"], ["y"], name="add")], info,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    path, qdq = os.path.join(tmp, "add_float.onnx"), os.path.join(tmp, "add.qdq.onnx")
    qhtest.save_model(model, path)
    rng = np.random.default_rng(7)
    data = {"x1": rng.uniform(-1, 1, size=(8, *SHAPE[1:])), "x2": rng.uniform(-0.25, 3, size=(8, *SHAPE[1:]))}
    calib, x = os.path.join(tmp, "calib.npz"), os.path.join(tmp, "x.npz")
    np.savez(calib, **{k: v.astype(np.float32) for k, v in data.items()})
    np.savez(x, **{k: v[:SHAPE[0]].astype(np.float32) for k, v in data.items()})
    ok(r, "quantize", path, "--calib", calib, "-o", qdq, "--quiet", *BACKEND)
    cov = coverage(r, qdq, ["--input", x])
    rows = [(u["name"], u["ops"], u["kernel"]) for u in cov["units"]]
    print(rows, f"host Q/DQ {cov['host_qdq_nodes']}, between kernels {cov['qdq_between_kernels']}")
    assert rows == [("add/requantize_0", "Requantize", "npu_requantize_8bit"),
                    ("add/requantize_1", "Requantize", "npu_requantize_8bit"),
                    ("add", "Add", "npu_add_one_grid")], rows
    assert cov["qdq_between_kernels"] == 0, cov
    host, low = run_both(r, tmp, qdq, ["--input", x])
    print(f"lowered vs host reference: {100 * np.mean(host == low):.2f}% bit-identical over {host.size} elements")
    assert np.array_equal(host, low)


def case_between_kernels(r, tmp):
    """Add -> Q(o1) -> DQ -> Q(b) -> DQ -> Add: the step between two of the plugin's kernels
    is lowered too, so int8 flows from kernel to kernel with no host Q/DQ between them."""
    onnx, TensorProto, helper, numpy_helper = qhtest.onnx_modules()
    inits, nodes = [], []

    def qparams(prefix, scale):
        s, z = grid("uint8", scale)
        inits.append(numpy_helper.from_array(np.asarray(s), prefix + "_s"))
        inits.append(numpy_helper.from_array(np.asarray(z), prefix + "_z"))
        return [prefix + "_s", prefix + "_z"]

    def qdq(x, y, g):
        nodes.append(helper.make_node("QuantizeLinear", [x, *g], [y + "_q"], name=y + "_q"))
        nodes.append(helper.make_node("DequantizeLinear", [y + "_q", *g], [y], name=y + "_dq"))

    a, o1, b, o2 = qparams("a", 0.0213), qparams("o1", 0.0389), qparams("b", 0.0297), qparams("o2", 0.0411)
    qdq("x1", "x1_f", a)
    qdq("x2", "x2_f", a)
    nodes.append(helper.make_node("Add", ["x1_f", "x2_f"], ["s1"], name="add1"))
    qdq("s1", "s1_f", o1)
    qdq("s1_f", "s1_rf", b)  # the requantize step: node 's1_rf_q'
    qdq("x3", "x3_f", b)
    nodes.append(helper.make_node("Add", ["s1_rf", "x3_f"], ["s2"], name="add2"))
    qdq("s2", "y", o2)
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(SHAPE)) for n in ("x1", "x2", "x3")]
    model = qhtest.make_model(nodes, info, [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))],
                              inits)
    path, x = os.path.join(tmp, "chain.onnx"), os.path.join(tmp, "chain.npz")
    qhtest.save_model(model, path)
    rng = np.random.default_rng(3)
    np.savez(x, **{n: rng.uniform(-1.2, 1.5, size=SHAPE).astype(np.float32) for n in ("x1", "x2", "x3")})
    cov = coverage(r, path, ["--input", x])
    rows = [(u["name"], u["ops"], u["kernel"]) for u in cov["units"]]
    print(rows, f"host Q/DQ {cov['host_qdq_nodes']}, between kernels {cov['qdq_between_kernels']}")
    assert rows == [("add1", "Add", "npu_add_one_grid"), ("s1_rf_q", "Requantize", "npu_requantize_8bit"),
                    ("add2", "Add", "npu_add_one_grid")], rows
    assert cov["host_qdq_nodes"] == 4 and cov["qdq_between_kernels"] == 0, cov  # 3 input Qs, the output DQ
    host, low = run_both(r, tmp, path, ["--input", x])
    assert np.array_equal(host, low), f"max difference {np.abs(host - low).max()}"


def case_declined_reason(r, tmp):
    model, inputs = add_model(tmp, "uint8", "uint8", src_axis=1, dst_axis=2)
    cov = coverage(r, model, inputs)
    req = next(u for u in cov["units"] if u["name"] == "x1_requantized")
    print(req)
    assert req["kernel"] == "host:reference", req
    assert "requantize: per-channel qparams on two different axes" in (req.get("reason") or ""), req
    host, low = run_both(r, tmp, model, inputs)
    assert np.array_equal(host, low)


def case_older_plugin_host_path(r, tmp):
    """scalar_int8 declares no requantize pattern: the step stays glue on the host."""
    model, inputs = add_model(tmp)
    scalar = ["--backend", "scalar_int8", "--plugin-dir", PLUGIN_DIR]
    cov = coverage(r, model, inputs, backend=scalar)
    print(cov["units"], cov["host_qdq_nodes"])
    assert [u["name"] for u in cov["units"]] == ["add"], cov["units"]
    assert cov["host_qdq_nodes"] == 5, cov  # 3 Q, 2 DQ: the requantize pair still runs on the host


def case_planted_truncation_caught(r, tmp):
    model, inputs = add_model(tmp)
    host, low = run_both(r, tmp, model, inputs, "--backend-opt", "bug=truncate")
    diff = np.mean(host != low)
    print(f"truncating kernel: {100 * diff:.1f}% of elements differ from the host's reference")
    assert diff > 0.05, "the comparison did not catch a truncating requantize"
    assert np.abs(host - low).max() > 0


def plugin_check(r, *opts):
    args = ["plugin-check", os.path.join(PLUGIN_DIR, "libqhost-requant_npu.so")]
    for o in opts:
        args += ["--backend-opt", o]
    rc, out, err = r.run(*args, timeout=300)
    qhtest.check_no_crash(rc, err)
    return rc, out, err


def case_plugin_check_conforms(r, tmp):
    rc, out, err = plugin_check(r)
    lines = [ln for ln in out.splitlines() if "requantize" in ln]
    print("\n".join(lines))
    assert rc == 0, f"exit {rc}\n{out}\n{err}"
    assert any(re.match(r"^  PASS  lowering on generated requantize \(uint8 -> uint8\): .*kernel npu_requantize_8bit\): "
                     r"3 runs .* within one step of the host's reference \(worst 0\.00 steps", ln) for ln in lines), out
    assert re.search(r"^  PASS  lowering pattern requantize: 3 kernel runs", out, re.M), out
    assert "conforms: yes" in out, out


def case_plugin_check_catches_truncation(r, tmp):
    rc, out, err = plugin_check(r, "bug=truncate")
    lines = [ln for ln in out.splitlines() if "requantize" in ln]
    print("\n".join(lines))
    assert rc != 0, out
    assert any(ln.startswith("  FAIL  lowering on generated requantize") for ln in lines), out
    assert "conforms: yes" not in out, out


CASES = {
    "lowered_uint8": lowered_case("uint8", "uint8"),
    "lowered_int8": lowered_case("int8", "int8"),
    "lowered_int8_to_uint8": lowered_case("int8", "uint8"),
    "lowered_per_channel_source": lowered_case("uint8", "uint8", src_axis=1),
    # onto a per-channel grid: the step is lowered, the NPU's Add declines that grid
    "lowered_per_channel_target": lowered_case("int8", "int8", dst_axis=1, add_kernel="host:reference"),
    "lowered_per_channel_both": lowered_case("uint8", "uint8", src_axis=1, dst_axis=1,
                                             add_kernel="host:reference"),
    "quantize_inserts_requantize": case_quantize_inserts_requantize,
    "between_kernels": case_between_kernels,
    "declined_reason": case_declined_reason,
    "older_plugin_host_path": case_older_plugin_host_path,
    "planted_truncation_caught": case_planted_truncation_caught,
    "plugin_check_conforms": case_plugin_check_conforms,
    "plugin_check_catches_truncation": case_plugin_check_catches_truncation,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
