"""Write the oracle's numbers as a QDQ ONNX file in the exact form `qhost quantize`
promises (the contract in README.md), for the suite's self-test.

The file is what a perfect `qhost quantize` would write: BatchNormalization folded
into the producing Conv/Gemm (PyTorch's folded bias; the conv output takes the BN
output's name), each quantized weight W as W_quantized / W_scale / W_zero_point and a
DequantizeLinear "W_dequantize" whose output is W, each quantized activation V as
QuantizeLinear "V_quantize" -> V_quantized -> DequantizeLinear "V_dequantize" ->
V_dequantized read by V's consumers (a graph output V is written as V_prequant and
the DequantizeLinear produces V). Running the comparison of check_quant.py on it
must pass; evaluating it must reproduce PyTorch's reference model.
"""
import numpy as np
import onnx
import onnx.numpy_helper
from onnx import helper

INT_TYPES = {"quint8": np.uint8, "qint8": np.int8}


def _init(name, array):
    return onnx.numpy_helper.from_array(np.asarray(array), name)


def _fold_bn(graph, info, arrays, inits):
    """Removes every BatchNormalization node, moving PyTorch's folded bias into the
    producing conv and renaming the conv's output to the BN output."""
    producers = {o: n for n in graph.node for o in n.output}
    keep = []
    for node in graph.node:
        if node.op_type != "BatchNormalization":
            keep.append(node)
            continue
        conv = producers[node.input[0]]
        w = conv.input[1]
        if not info["weights"].get(w, {}).get("folded_bn"):
            raise RuntimeError(f"BatchNormalization {node.name}: PyTorch did not fold it into {w}")
        bias = arrays[f"bias/{w}"]
        if len(conv.input) > 2 and conv.input[2]:
            inits[conv.input[2]] = _init(conv.input[2], bias)
        else:
            name = f"{conv.name}_folded_bias"
            inits[name] = _init(name, bias)
            while len(conv.input) < 3:
                conv.input.append("")
            conv.input[2] = name
        conv.output[0] = node.output[0]
        for unused in node.input[1:]:
            inits.pop(unused, None)
    del graph.node[:]
    graph.node.extend(keep)


def _weight_nodes(info, arrays, inits):
    nodes = []
    for w, spec in info["weights"].items():
        ints = arrays[f"int/{w}"].astype(INT_TYPES[spec["dtype"]])
        scales = np.asarray(spec["scales"], dtype=np.float32)
        zps = np.asarray(spec["zero_points"]).astype(INT_TYPES[spec["dtype"]])
        if not spec["per_channel"]:
            scales, zps = scales.reshape(()), zps.reshape(())
        inits.pop(w)
        for name, value in ((f"{w}_quantized", ints), (f"{w}_scale", scales),
                            (f"{w}_zero_point", zps)):
            inits[name] = _init(name, value)
        kw = {"axis": spec["axis"]} if spec["per_channel"] else {}
        nodes.append(helper.make_node("DequantizeLinear", [f"{w}_quantized", f"{w}_scale",
                                                           f"{w}_zero_point"], [w],
                                      name=f"{w}_dequantize", **kw))
    return nodes


def _qdq(v, src, dst, spec, inits):
    inits[f"{v}_scale"] = _init(f"{v}_scale", np.float32(spec["scale"]))
    inits[f"{v}_zero_point"] = _init(f"{v}_zero_point",
                                     np.array(spec["zero_point"]).astype(INT_TYPES[spec["dtype"]]))
    return [helper.make_node("QuantizeLinear", [src, f"{v}_scale", f"{v}_zero_point"],
                             [f"{v}_quantized"], name=f"{v}_quantize"),
            helper.make_node("DequantizeLinear", [f"{v}_quantized", f"{v}_scale",
                                                  f"{v}_zero_point"], [dst], name=f"{v}_dequantize")]


def build(info, arrays):
    """Returns the QDQ onnx.ModelProto."""
    model = onnx.load(info["onnx"])
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    _fold_bn(graph, info, arrays, inits)
    acts = info["activations"]
    outputs = {o.name for o in graph.output}
    # Consumers of a quantized non-output value read its dequantized twin.
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in acts and name not in outputs:
                node.input[i] = f"{name}_dequantized"
    nodes = _weight_nodes(info, arrays, inits)
    for inp in graph.input:
        if inp.name in acts:
            nodes += _qdq(inp.name, inp.name, f"{inp.name}_dequantized", acts[inp.name], inits)
    for node in graph.node:
        nodes.append(node)
        for k, v in enumerate(list(node.output)):
            if v not in acts:
                continue
            if v in outputs:
                node.output[k] = f"{v}_prequant"
                nodes += _qdq(v, f"{v}_prequant", v, acts[v], inits)
            else:
                nodes += _qdq(v, v, f"{v}_dequantized", acts[v], inits)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(inits.values())
    onnx.checker.check_model(model)
    return model


def write(info, arrays, path):
    onnx.save(build(info, arrays), path)


def mutate(model, info):
    """Plants four faults a broken quantizer could make into a QDQ model from build():
    one activation scale off by 2e-6 relative, one activation zero point off by one,
    one integer weight off by one, and one activation left unquantized. Returns the
    violation texts check_quant.py must report for them (the suite's proof that its
    comparisons can fail)."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    names = [n for n in info["activations"] if n != info["output"]]
    if len(names) < 3:
        raise RuntimeError("mutate needs three quantized non-output activations")
    expected = []

    def replace(name, value):
        inits[name].CopyFrom(onnx.numpy_helper.from_array(np.asarray(value), name))

    a, b, c = names[0], names[1], names[-1]
    replace(f"{a}_scale", np.float32(info["activations"][a]["scale"] * (1 + 2e-6)))
    expected.append(f"activation {a}: scale")
    zp = onnx.numpy_helper.to_array(inits[f"{b}_zero_point"])
    replace(f"{b}_zero_point", (zp - 1 if int(zp) > np.iinfo(zp.dtype).min else zp + 1).astype(zp.dtype))
    expected.append(f"activation {b}: ")
    w = next(iter(info["weights"]))
    q = onnx.numpy_helper.to_array(inits[f"{w}_quantized"]).copy()
    flat = q.reshape(-1)
    flat[0] = flat[0] - 1 if flat[0] > np.iinfo(q.dtype).min else flat[0] + 1
    replace(f"{w}_quantized", q)
    expected.append(f"weight {w}: 1/{q.size} integer weights differ")
    # Unquantize c: its consumers read c again; its Q/DQ pair and qparams go.
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == f"{c}_dequantized":
                node.input[i] = c
    keep = [n for n in graph.node if n.name not in (f"{c}_quantize", f"{c}_dequantize")]
    del graph.node[:]
    graph.node.extend(keep)
    for suffix in ("_scale", "_zero_point"):
        graph.initializer.remove(inits[c + suffix])
    expected.append(f"activation {c} ({info['activations'][c]['fx_node']}): not quantized by qhost")
    # Quantize a tensor PyTorch leaves float (e.g. a conv output before its fused relu).
    outputs = {o.name for o in graph.output}
    extra = next((o for n in graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear")
                  for o in n.output
                  if o not in info["activations"] and o not in outputs and o != c
                  and not o.endswith("_prequant")), None)
    if extra is not None:
        nodes = list(graph.node)
        for node in nodes:
            for i, name in enumerate(node.input):
                if name == extra:
                    node.input[i] = f"{extra}_dequantized"
        at = next(i for i, n in enumerate(nodes) if extra in n.output) + 1
        qdq = _qdq(extra, extra, f"{extra}_dequantized",
                   {"scale": 0.01, "zero_point": 0, "dtype": "quint8"}, {})
        for suffix in ("_scale", "_zero_point"):
            graph.initializer.append(_init(extra + suffix, np.float32(0.01) if suffix == "_scale"
                                           else np.uint8(0)))
        del graph.node[:]
        graph.node.extend(nodes[:at] + qdq + nodes[at:])
        expected.append(f"activation {extra}: quantized by qhost, not by PyTorch")
    onnx.checker.check_model(model)
    return expected
