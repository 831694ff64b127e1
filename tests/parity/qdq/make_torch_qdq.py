#!/usr/bin/python3
"""Writes a QDQ model produced by PyTorch 1.13, not by qhost: a small CNN quantized with
the FX flow (prepare_fx with the fbgemm default qconfig mapping, calibration on seeded
random data, convert_fx) and exported with torch.onnx.export at opset 13.

Net: x[N,3,8,8] -> Conv(3->8)+ReLU -> Conv(8->8) -> Add(relu out) -> MaxPool(2)
-> Flatten -> Linear(128->10) -> y.

PyTorch 1.13's exporter writes each quantized op as DequantizeLinear -> float op ->
QuantizeLinear, with quirks of its own: a Cast (to uint8, a no-op) between every
QuantizeLinear and the DequantizeLinear reading it, weights and scales as Constant
nodes instead of initializers, the int32 bias's zero point computed at run time by
ConstantOfShape -> Cast, and the input's qparams through Identity nodes.
convert_to_reference_fx, which would give QDQ directly, does not export at all (the
reference modules keep a torch.qscheme in their state dict and tracing calls .detach()
on it: AttributeError 'torch.qscheme' object has no attribute 'detach').

Writes RAW.onnx (the exporter's file, untouched), NORM.onnx (the same graph with the
no-op Casts bypassed and every constant subgraph folded into initializers, the form
ONNX Runtime's own optimiser reaches before it fuses), X.npy (the probe batch),
TORCH.npy (PyTorch's own quantized run on it, for information) and EXPECTED.json (the
units the matcher must find in NORM.onnx and the output scale).

  make_torch_qdq.py RAW.onnx NORM.onnx X.npy TORCH.npy EXPECTED.json [--seed N] [--samples N]
"""
import argparse
import json
import os
import warnings

os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

OPSET = 13


def build(seed):
    import torch
    import torch.nn as nn
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.relu = nn.ReLU()
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(8 * 4 * 4, 10)

        def forward(self, x):
            y = self.relu(self.c1(x))
            z = self.c2(y) + y
            return self.fc(torch.flatten(self.pool(z), 1))

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    # Debian's build has no fbgemm engine (qnnpack, onednn); the qconfig is fbgemm's,
    # the engine only matters for TORCH.npy, which is information
    model = Net().eval()
    example = (torch.randn(1, 3, 8, 8),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_fx(model, get_default_qconfig_mapping("fbgemm"), example_inputs=example)
        with torch.no_grad():
            for _ in range(16):
                prepared(torch.randn(8, 3, 8, 8))
        return convert_fx(prepared), example


def export(qmodel, example, path):
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(qmodel, example, path, opset_version=OPSET, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})


def normalize(model):
    """Bypasses Casts to the type their input already has and folds Constant, Identity,
    ConstantOfShape and Cast of constants into initializers; nothing else changes."""
    g = model.graph
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in list(g.value_info) + list(g.input) + list(g.output)}
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:  # QuantizeLinear's output type is its zero point's
        if n.op_type == "QuantizeLinear" and len(n.input) > 2:
            types.setdefault(n.output[0], None)
    alias, keep = {}, []
    for n in g.node:
        ins = [alias.get(i, i) for i in n.input]
        del n.input[:]
        n.input.extend(ins)
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Constant":
            consts[n.output[0]] = numpy_helper.to_array(attrs["value"])
            continue
        if n.op_type == "Identity" and ins[0] in consts:
            consts[n.output[0]] = consts[ins[0]]
            continue
        if n.op_type == "ConstantOfShape" and ins[0] in consts:
            v = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
            consts[n.output[0]] = np.full(tuple(consts[ins[0]]), v.reshape(-1)[0], v.dtype)
            continue
        if n.op_type == "Cast":
            to = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[attrs["to"]]
            if ins[0] in consts:
                consts[n.output[0]] = consts[ins[0]].astype(to)
                continue
            src = next((m for m in g.node if ins[0] in m.output), None)
            if src is not None and src.op_type == "QuantizeLinear" and len(src.input) > 2 \
                    and src.input[2] in consts and consts[src.input[2]].dtype == to:
                alias[n.output[0]] = ins[0]
                continue
        keep.append(n)
    used = {i for n in keep for i in n.input} | {o.name for o in g.output}
    del g.node[:]
    g.node.extend(keep)
    del g.initializer[:]
    g.initializer.extend(numpy_helper.from_array(np.asarray(v), k)
                         for k, v in consts.items() if k in used)
    del g.value_info[:]
    onnx.checker.check_model(model)
    return model


def expected_units(model):
    """Matcher units in topological order: each Conv with the Relu alone reading it,
    every other Conv, Gemm, Add, MaxPool and Flatten alone."""
    g = model.graph
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    units, taken = [], set()
    for n in g.node:
        if n.name in taken or n.op_type not in ("Conv", "Gemm", "Add", "MaxPool", "Flatten", "Relu"):
            continue
        nodes, pattern = [n.name], n.op_type.lower()
        r = readers.get(n.output[0], [])
        if n.op_type == "Conv" and len(r) == 1 and r[0].op_type == "Relu":
            nodes.append(r[0].name)
            taken.add(r[0].name)
            pattern = "conv_relu"
        units.append({"pattern": pattern, "nodes": nodes})
    return units


def main():
    ap = argparse.ArgumentParser()
    for name in ("raw", "norm", "input", "torch_out", "expected"):
        ap.add_argument(name)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--samples", type=int, default=32)
    a = ap.parse_args()
    import torch
    qmodel, example = build(a.seed)
    export(qmodel, example, a.raw)
    x = torch.from_numpy(np.random.default_rng(a.seed + 1)
                         .normal(0, 1, (a.samples, 3, 8, 8)).astype(np.float32))
    with torch.no_grad():
        y = qmodel(x)
    np.save(a.input, x.numpy())
    np.save(a.torch_out, y.numpy())
    norm = normalize(onnx.load(a.raw))
    onnx.save(norm, a.norm)
    with open(a.expected, "w") as f:
        json.dump({"units": expected_units(norm), "output_scale": float(qmodel.fc.scale),
                   "opset": OPSET, "torch": torch.__version__,
                   "engine": torch.backends.quantized.engine}, f, indent=1)


if __name__ == "__main__":
    main()
