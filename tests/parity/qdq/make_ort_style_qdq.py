"""Writes a small conv net as a QDQ ONNX model the way ONNX Runtime's quantization
tool (quantize_static, QuantFormat.QDQ) writes it, without needing ONNX Runtime's
Python package: uint8 asymmetric activations from min/max calibration, int8
symmetric per-channel weights (DequantizeLinear with axis 0), int32 biases through a
per-channel DequantizeLinear with scale sx * sw[c] and zero point 0, and ORT's names
(T_QuantizeLinear -> T_QuantizeLinear_Output -> T_DequantizeLinear ->
T_DequantizeLinear_Output, W_quantized / W_scale / W_zero_point, B_quantized ...).

Net: x[1,3,8,8] -> Conv(3->4) -> Relu -> Conv(4->4) -> Add(relu1) -> Relu
-> GlobalAveragePool -> Flatten -> Gemm(4->5) -> logits.
ORT drops a Relu whose input is read only by it (its range becomes the producer's
quantization range); --keep-relu keeps the Relus unquantized after their producer
instead, which is what the matcher's conv + relu patterns see.

Also writes EXPECTED.json: the units a matcher with conv_relu, conv, gemm, add_relu,
add, globalaveragepool and flatten patterns must find, in topological order.

  make_ort_style_qdq.py OUT.onnx INPUT.npy EXPECTED.json [--keep-relu] [--seed N]
"""
import argparse
import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + oh, j:j + ow]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b[None, :, None, None]


def act_qparams(lo, hi):
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = np.float32((hi - lo) / 255.0) if hi > lo else np.float32(1.0)
    zp = int(np.clip(round(-lo / float(scale)), 0, 255))
    return scale, np.uint8(zp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("input")
    ap.add_argument("expected")
    ap.add_argument("--keep-relu", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    w1 = rng.normal(0, 0.4, (4, 3, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 4).astype(np.float32)
    w2 = rng.normal(0, 0.3, (4, 4, 3, 3)).astype(np.float32)
    b2 = rng.normal(0, 0.1, 4).astype(np.float32)
    wf = rng.normal(0, 0.5, (5, 4)).astype(np.float32)
    bf = rng.normal(0, 0.1, 5).astype(np.float32)
    calib = rng.normal(0, 1, (16, 3, 8, 8)).astype(np.float32)

    # Float forward over the calibration set for the activation ranges.
    c1 = conv2d(calib, w1, b1, 1)
    r1 = np.maximum(c1, 0)
    c2 = conv2d(r1, w2, b2, 1)
    s = c2 + r1
    r2 = np.maximum(s, 0)
    gap = r2.mean(axis=(2, 3), keepdims=True)
    fl = gap.reshape(gap.shape[0], -1)
    lg = fl @ wf.T + bf
    ranges = {"input": calib, "r1": r1, "c1": c1, "c2": c2, "s": s, "r2": r2, "gap": gap,
              "fl": fl, "logits": lg}
    qp = {k: act_qparams(v.min(), v.max()) for k, v in ranges.items()}
    # ORT without --keep-relu: the Relu goes, its range quantizes the producer.
    if not a.keep_relu:
        qp["c1"], qp["s"] = qp["r1"], qp["r2"]

    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def qdq(t):
        """QuantizeLinear/DequantizeLinear pair on activation t; returns the DQ output."""
        key = t.split("_")[0] if t != "input" else "input"
        scale, zp = qp[key]
        init(f"{t}_scale", np.array(scale, np.float32))
        init(f"{t}_zero_point", np.array(zp, np.uint8))
        nodes.append(helper.make_node("QuantizeLinear", [t, f"{t}_scale", f"{t}_zero_point"],
                                      [f"{t}_QuantizeLinear_Output"], f"{t}_QuantizeLinear"))
        nodes.append(helper.make_node("DequantizeLinear",
                                      [f"{t}_QuantizeLinear_Output", f"{t}_scale", f"{t}_zero_point"],
                                      [f"{t}_DequantizeLinear_Output"], f"{t}_DequantizeLinear"))
        return f"{t}_DequantizeLinear_Output"

    def weight(name, w, axis=0):
        red = tuple(i for i in range(w.ndim) if i != axis)
        amax = np.abs(w).max(axis=red)
        sw = (np.maximum(amax, 1e-8) / 127.0).astype(np.float32)
        shape = [1] * w.ndim
        shape[axis] = -1
        wq = np.clip(np.rint(w / sw.reshape(shape)), -127, 127).astype(np.int8)
        init(f"{name}_quantized", wq)
        init(f"{name}_scale", sw)
        init(f"{name}_zero_point", np.zeros(sw.shape, np.int8))
        nodes.append(helper.make_node("DequantizeLinear",
                                      [f"{name}_quantized", f"{name}_scale", f"{name}_zero_point"],
                                      [f"{name}_DequantizeLinear_Output"], f"{name}_DequantizeLinear",
                                      axis=axis))
        return f"{name}_DequantizeLinear_Output", sw

    def bias(name, b, sx, sw):
        sb = (np.float32(sx) * sw).astype(np.float32)
        bq = np.rint(b / sb).astype(np.int32)
        init(f"{name}_quantized", bq)
        init(f"{name}_quantized_scale", sb)
        init(f"{name}_quantized_zero_point", np.zeros(sb.shape, np.int32))
        nodes.append(helper.make_node(
            "DequantizeLinear",
            [f"{name}_quantized", f"{name}_quantized_scale", f"{name}_quantized_zero_point"],
            [f"{name}_quantized_DequantizeLinear_Output"], f"{name}_quantized_DequantizeLinear",
            axis=0))
        return f"{name}_quantized_DequantizeLinear_Output"

    expected = []

    def unit(pattern, ops, n_inputs, out_q):
        expected.append({"pattern": pattern, "nodes": ops, "n_inputs": n_inputs,
                         "q": out_q})

    x = qdq("input")
    w1n, sw1 = weight("conv1.weight", w1)
    b1n = bias("conv1.bias", b1, qp["input"][0], sw1)
    nodes.append(helper.make_node("Conv", [x, w1n, b1n], ["c1"], "Conv1", pads=[1, 1, 1, 1]))
    if a.keep_relu:
        nodes.append(helper.make_node("Relu", ["c1"], ["r1"], "Relu1"))
        r1q = qdq("r1")
        unit("conv_relu", ["Conv1", "Relu1"], 3, "r1_QuantizeLinear")
        sx2 = qp["r1"][0]
    else:
        r1q = qdq("c1")
        unit("conv", ["Conv1"], 3, "c1_QuantizeLinear")
        sx2 = qp["c1"][0]
    w2n, sw2 = weight("conv2.weight", w2)
    b2n = bias("conv2.bias", b2, sx2, sw2)
    nodes.append(helper.make_node("Conv", [r1q, w2n, b2n], ["c2"], "Conv2", pads=[1, 1, 1, 1]))
    unit("conv", ["Conv2"], 3, "c2_QuantizeLinear")
    c2q = qdq("c2")
    nodes.append(helper.make_node("Add", [c2q, r1q], ["s"], "Add"))
    if a.keep_relu:
        nodes.append(helper.make_node("Relu", ["s"], ["r2"], "Relu2"))
        r2q = qdq("r2")
        unit("add_relu", ["Add", "Relu2"], 2, "r2_QuantizeLinear")
    else:
        r2q = qdq("s")
        unit("add", ["Add"], 2, "s_QuantizeLinear")
    nodes.append(helper.make_node("GlobalAveragePool", [r2q], ["gap"], "GlobalAveragePool"))
    unit("globalaveragepool", ["GlobalAveragePool"], 1, "gap_QuantizeLinear")
    gq = qdq("gap")
    nodes.append(helper.make_node("Flatten", [gq], ["fl"], "Flatten"))
    unit("flatten", ["Flatten"], 1, "fl_QuantizeLinear")
    fq = qdq("fl")
    wfn, swf = weight("fc.weight", wf)
    bfn = bias("fc.bias", bf, qp["fl"][0], swf)
    nodes.append(helper.make_node("Gemm", [fq, wfn, bfn], ["logits_QuantizeLinear_Input"], "Gemm",
                                  transB=1))
    unit("gemm", ["Gemm"], 3, "logits_QuantizeLinear")
    # The graph output keeps its name: ORT renames the producer's output instead.
    scale, zp = qp["logits"]
    init("logits_scale", np.array(scale, np.float32))
    init("logits_zero_point", np.array(zp, np.uint8))
    nodes.append(helper.make_node("QuantizeLinear",
                                  ["logits_QuantizeLinear_Input", "logits_scale", "logits_zero_point"],
                                  ["logits_QuantizeLinear_Output"], "logits_QuantizeLinear"))
    nodes.append(helper.make_node("DequantizeLinear",
                                  ["logits_QuantizeLinear_Output", "logits_scale", "logits_zero_point"],
                                  ["logits"], "logits_DequantizeLinear"))

    graph = helper.make_graph(
        nodes, "ort_style_qdq",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="onnx.quantization")
    model.ir_version = 7
    onnx.checker.check_model(model)
    onnx.save(model, a.out)
    np.save(a.input, rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32))
    with open(a.expected, "w") as f:
        json.dump({"units": expected, "output_scale": float(scale)}, f, indent=1)


if __name__ == "__main__":
    main()
