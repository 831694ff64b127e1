#!/usr/bin/python3
"""Power-of-two QDQ models of the kind example_vitis produces, built with onnx.

build(qhost, tmp) makes a float model of every op the DPU kernels cover (conv with bias,
relu, maxpool, depthwise conv with stride 2 and an int32 bias, leaky relu 26/256, average
pooling followed by the DPU's 9*7/64 factor, grouped dilated conv, concat, add, mul,
global average pooling, flatten, gemm), runs it once with `qhost run` to find every
tensor's largest magnitude, and writes the QDQ form: int8, zero point 0, per tensor,
scale 2^-pos with pos = floor(log2(127 / max|x|)) (the overflow-free position), int8
weights and int8 biases with their own position (one int32 bias at ipos + wpos).
With all_outputs every
quantized activation is a graph output too. Returns (qdq_path, input_path).

trained(qhost, tmp, name, ...) quantizes a torchvision net trained on digits
(tests/models/trained_digits.py) for example_vitis and measures its lowered run and the
host's against ONNX Runtime on the same QDQ file, and top-1 accuracy.
"""
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))  # when run by hand
import qhtest  # noqa: E402

BATCH = 16


def _pos(maxabs, cap=12):
    return min(cap, int(math.floor(math.log2(127.0 / max(maxabs, 1e-6)))))


def _float_graph(rng):
    """(nodes, initializers, outputs to quantize after) of the float model."""
    _, _, helper, _ = qhtest.onnx_modules()
    w = {}

    def conv_w(name, co, ci, k):
        w[name] = (rng.standard_normal((co, ci, k, k)) / math.sqrt(ci * k * k)).astype(np.float32)
        w[name + "_b"] = (0.1 * rng.standard_normal(co)).astype(np.float32)

    conv_w("c1", 8, 3, 3)
    conv_w("dw", 8, 1, 3)
    conv_w("gc", 8, 4, 3)
    w["fc"] = (rng.standard_normal((5, 16)) / 4).astype(np.float32)
    w["fc_b"] = (0.1 * rng.standard_normal(5)).astype(np.float32)
    w["dpu_factor"] = np.array(9 * 7 / 64, np.float32)
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "c1", "c1_b"], ["c1_out"], pads=[1, 1, 1, 1], name="conv1"),
        n("Relu", ["c1_out"], ["r1"], name="relu1"),
        n("MaxPool", ["r1"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], name="maxpool"),
        n("Conv", ["mp", "dw", "dw_b"], ["dw_out"], group=8, pads=[1, 1, 1, 1], strides=[2, 2],
          name="dwconv"),
        n("LeakyRelu", ["dw_out"], ["lr"], alpha=26 / 256, name="leaky"),
        n("AveragePool", ["lr"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="avgpool"),
        n("Mul", ["ap", "dpu_factor"], ["apf"], name="avgpool_factor"),
        n("Conv", ["mp", "gc", "gc_b"], ["gc_out"], group=2, pads=[2, 2, 2, 2], strides=[2, 2],
          dilations=[2, 2], name="gconv"),
        n("Concat", ["apf", "gc_out"], ["cat"], axis=1, name="concat"),
        n("Add", ["cat", "cat2"], ["sum"], name="add"),
        n("Mul", ["sum", "cat"], ["prod"], name="mul"),
        n("GlobalAveragePool", ["prod"], ["gap"], name="gap"),
        n("Flatten", ["gap"], ["flat"], name="flatten"),
        n("Gemm", ["flat", "fc", "fc_b"], ["y"], transB=1, name="fc"),
    ]
    # cat2: the concat again through a relu, so the add has two different inputs
    nodes.insert(9, n("Relu", ["cat"], ["cat2"], name="relu2"))
    fused_into_next = {"c1_out", "dw_out", "ap"}  # conv+relu, conv+leaky, avgpool+factor
    return nodes, w, fused_into_next


def build(qhost, tmp, seed=0, int32_bias="dw_b", all_outputs=False):
    onnx, TensorProto, helper, numpy_helper = qhtest.onnx_modules()
    rng = np.random.default_rng(seed)
    nodes, w, fused = _float_graph(rng)
    x = rng.standard_normal((BATCH, 3, 20, 20)).astype(np.float32)
    x_path = os.path.join(tmp, "x.npy")
    np.save(x_path, x)
    # every tensor as an output of the float model, to measure its range with qhost
    tensors = [o for nd in nodes for o in nd.output]
    fmodel = qhtest.make_model(nodes, [("x", [BATCH, 3, 20, 20])], [(t, None) for t in tensors],
                               [(k, v) for k, v in w.items()])
    fpath = qhtest.save_model(fmodel, os.path.join(tmp, "float_all.onnx"))
    rc, _, err = qhost.run("run", fpath, "--input", x_path, "-o", os.path.join(tmp, "f.npz"))
    assert rc == 0, err
    vals = dict(np.load(os.path.join(tmp, "f.npz")))
    vals["x"] = x
    pos = {t: _pos(float(np.max(np.abs(v)))) for t, v in vals.items()}
    # the DPU's alignments (Vitis AI's DPU rules, as example_vitis applies them):
    # pooling input and output at one position, concat inputs and output at the
    # coarsest of them
    pos["mp"] = pos["r1"] = min(pos["mp"], pos["r1"])
    pos["gap"] = pos["flat"] = pos["prod"] = min(pos["gap"], pos["prod"], pos["flat"])
    pos["cat"] = pos["apf"] = pos["gc_out"] = min(pos["cat"], pos["apf"], pos["gc_out"])

    inits, qnodes = [], []

    def qdq(t):
        """Q -> DQ after float tensor t; returns the DQ output name."""
        s = f"{t}_s"
        inits.extend([numpy_helper.from_array(np.array(2.0 ** -pos[t], np.float32), s),
                      numpy_helper.from_array(np.array(0, np.int8), f"{t}_z")])
        qnodes.append(helper.make_node("QuantizeLinear", [t, s, f"{t}_z"], [f"{t}_q"],
                                       name=f"{t}_quantize"))
        qnodes.append(helper.make_node("DequantizeLinear", [f"{t}_q", s, f"{t}_z"], [f"{t}_dq"],
                                       name=f"{t}_dequantize"))
        return f"{t}_dq"

    def const_dq(name, data, p, dtype):
        lo, hi = (-128, 127) if dtype == np.int8 else (-2**31, 2**31 - 1)
        q = np.clip(np.floor(data * 2.0 ** p + 0.5), lo, hi).astype(dtype)
        inits.extend([numpy_helper.from_array(q, f"{name}_int"),
                      numpy_helper.from_array(np.array(2.0 ** -p, np.float32), f"{name}_s"),
                      numpy_helper.from_array(np.array(0, dtype), f"{name}_z")])
        qnodes.append(helper.make_node("DequantizeLinear", [f"{name}_int", f"{name}_s", f"{name}_z"],
                                       [f"{name}_dq"], name=f"{name}_dequantize"))
        return f"{name}_dq"

    rename = {"x": qdq("x")}
    for nd in nodes:
        ins = list(nd.input)
        for i, t in enumerate(ins):
            if t in rename:
                ins[i] = rename[t]
            elif t in w and nd.op_type in ("Conv", "Gemm"):
                wname = nd.input[1]
                ipos, wpos = pos[nd.input[0]], _pos(float(np.max(np.abs(w[wname]))))
                if i == 1:
                    ins[i] = const_dq(t, w[t], wpos, np.int8)
                elif t == int32_bias:
                    ins[i] = const_dq(t, w[t], ipos + wpos, np.int32)
                else:
                    ins[i] = const_dq(t, w[t], _pos(float(np.max(np.abs(w[t])))), np.int8)
            elif t in w:
                inits.append(numpy_helper.from_array(w[t], t))  # the DPU factor stays float
        new = helper.make_node(nd.op_type, ins, list(nd.output), name=nd.name)
        new.attribute.extend(nd.attribute)
        qnodes.append(new)
        out = nd.output[0]
        if out not in fused:
            rename[out] = qdq(out)
    outs = [v for k, v in rename.items() if k != "x"] if all_outputs else ["y_dq"]
    graph = helper.make_graph(qnodes, "vitis_pow2", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [BATCH, 3, 20, 20])], [helper.make_tensor_value_info(
            o, TensorProto.FLOAT, None) for o in outs], initializer=inits)
    model = helper.make_model(graph, producer_name="qhost-tests",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = qhtest.save_model(model, os.path.join(tmp, "vitis_pow2.qdq.onnx"))
    return path, x_path


# ---- trained torchvision networks (tests/models/trained_digits.py) ---------------

def _dynamic_batch(src, dst):
    """The file with a symbolic batch on its input and output, so ONNX Runtime takes every
    test image at once (the exported file, and so the QDQ one, has batch 1)."""
    onnx = qhtest.onnx_modules()[0]
    m = onnx.load(src)
    for v in list(m.graph.input) + list(m.graph.output):
        dims = v.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "N"
    del m.graph.value_info[:]
    onnx.save(m, dst)
    return dst


def trained(qhost, tmp, name, trained_dir, backend):
    """Quantizes trained_digits' `name` with `qhost quantize --backend example_vitis` and
    measures it. `backend` is the --backend/--plugin-dir argument list. Returns a dict:
    qdq and test (paths), dpu_violations (check_dpu_qdq.py's lines), float / host / lowered / ort accuracy (%),
    host_vs_ort and lowered_vs_ort (ort_compare results of the single output)."""
    import ort_compare
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "vitis"))
    import check_dpu_qdq
    import trained_digits
    info = trained_digits.build(name, trained_dir)
    qdq = os.path.join(tmp, f"{name}.qdq.onnx")
    rc, _, err = qhost.run("quantize", *backend, "--calib", info["calib"], "-o", qdq, info["onnx"], timeout=600)
    assert rc == 0, err
    res = {"model": name, "qdq": qdq, "test": info["test"], "dpu_violations": check_dpu_qdq.check(qdq),
           "float": info["float_accuracy_test"]}
    labels = np.load(info["labels"])
    dyn = _dynamic_batch(qdq, os.path.join(tmp, f"{name}.qdq.dyn.onnx"))
    res["host_vs_ort"] = ort_compare.compare(qhost, dyn, info["test"], tmp, f"{name}_host")[0]
    res["lowered_vs_ort"] = ort_compare.compare(qhost, dyn, info["test"], tmp, f"{name}_lowered", backend)[0]
    for who, f in (("host", "host_qhost"), ("lowered", "lowered_qhost"), ("ort", "host_ort")):
        y = np.load(os.path.join(tmp, f"{name}_{f}.npy"))
        res[who] = 100.0 * float(np.mean(y.argmax(1) == labels))
    return res


def describe_trained(res):
    h, lo = res["host_vs_ort"], res["lowered_vs_ort"]
    return (f"{res['model']} (trained on digits): ONNX Runtime vs qhost run {100 * h['within']:.2f}% within "
            f"1 step (max {h['max_steps']:.3g}), vs qhost run --backend example_vitis "
            f"{100 * lo['within']:.2f}% (max {lo['max_steps']:.3g}) of {lo['elements']} elements; "
            f"top-1: float {res['float']:.2f}%, int8 host {res['host']:.2f}%, lowered {res['lowered']:.2f}%, "
            f"ORT {res['ort']:.2f}%; DPU rule violations: {len(res['dpu_violations'])}")


def main():
    """By hand: vitis_models.py --qhost Q --plugin-dir D --trained-dir T [MODEL ...] prints
    trained()'s figures for each trained model (both by default)."""
    import argparse
    import tempfile
    ap = argparse.ArgumentParser(description="example_vitis on the nets trained on digits")
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--trained-dir", required=True)
    ap.add_argument("model", nargs="*", default=["resnet18", "mobilenet_v2"])
    a = ap.parse_args()
    runner = qhtest.Runner(a.qhost, False)
    for name in a.model:
        res = trained(runner, tempfile.mkdtemp(prefix=f"vitis-{name}-"), name, a.trained_dir,
                      ["--backend", "example_vitis", "--plugin-dir", a.plugin_dir])
        print(describe_trained(res))
        for line in res["dpu_violations"]:
            print(f"  DPU rule: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
