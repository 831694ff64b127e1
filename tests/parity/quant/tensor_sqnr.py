#!/usr/bin/python3
"""Per-tensor SQNR along a QDQ model, for finding where int8 loses its accuracy.

Runs the float model and its QDQ twin in ONNX Runtime (tests/ort/ort_run.js, all graph
optimisations, 1 thread) on the same input with every
float tensor of the chosen ops exposed as an output, and prints, in graph order, the
SQNR (dB) of what the QDQ model's consumers see (the DequantizeLinear output where the
tensor is quantized, else the tensor itself) against the float model's tensor of the
same name. A diagnostic, not a test: it asserts nothing.

  tensor_sqnr.py FLOAT.onnx QDQ.onnx INPUT.npy [--ops Softmax,MatMul,...] [--grep TEXT]
      [--token K] [--workdir DIR] [--node NODE]

--token K adds two columns for tensors of rank 3 (batch, tokens, features): the SQNR of
token K alone and of the other tokens (vit_b_16's class token is token 0).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

ORT_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ort", "ort_run.js")


def sqnr(ref, got):
    noise = float(((ref.astype(np.float64) - got) ** 2).sum())
    power = float((ref.astype(np.float64) ** 2).sum())
    return float("inf") if noise == 0 else 10 * np.log10(power / noise) if power > 0 else float("-inf")


def expose(model, names):
    """The model with its first output kept and names[k] added as output o<k> (an Identity:
    ort_run.js names its files after the outputs)."""
    keep = model.graph.output[0]
    del model.graph.output[1:]
    for k, n in enumerate(names):
        model.graph.node.append(onnx.helper.make_node("Identity", [n], [f"o{k}"]))
        model.graph.output.append(onnx.ValueInfoProto(name=f"o{k}"))
    return model, keep.name


def run(model, x_path, names, node, workdir, tag):
    model, first = expose(model, names)
    path = os.path.join(workdir, f"{tag}.onnx")
    onnx.save(model, path)
    out = os.path.join(workdir, f"{tag}.npy")
    subprocess.run([node, ORT_RUN, path, x_path, out], check=True)
    return {n: np.load(os.path.join(workdir, f"{tag}.o{k}.npy")) for k, n in enumerate(names)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("float_model")
    ap.add_argument("qdq_model")
    ap.add_argument("input")
    ap.add_argument("--ops", default="Softmax,MatMul,Gemm,Add,Erf,Conv")
    ap.add_argument("--grep", default="")
    ap.add_argument("--token", type=int)
    ap.add_argument("--workdir")
    ap.add_argument("--node", default="node")
    a = ap.parse_args()
    workdir = a.workdir or tempfile.mkdtemp(prefix="tensor_sqnr")
    os.makedirs(workdir, exist_ok=True)
    ops = set(a.ops.split(","))
    f = onnx.load(a.float_model)
    q = onnx.load(a.qdq_model)
    f_out = {o for n in f.graph.node if n.op_type in ops for o in n.output}
    q_all = {o for n in q.graph.node for o in n.output}
    order = [o for n in q.graph.node if n.op_type in ops for o in n.output
             if o in f_out and a.grep in o]
    final = [o.name for o in f.graph.output]
    seen = {o: (o + "_dequantized" if o + "_dequantized" in q_all else o) for o in order + final}
    fr = run(f, a.input, order + final, a.node, workdir, "float")
    qr = run(q, a.input, sorted(set(seen.values())), a.node, workdir, "qdq")
    for o in order + final:
        tag = "q" if seen[o] != o else " "
        ref, got = fr[o], qr[seen[o]]
        split = ""
        if a.token is not None and ref.ndim == 3 and ref.shape[1] > max(a.token, 1):
            k = a.token
            rest = np.delete(np.arange(ref.shape[1]), k)
            split = f"  token {k} {sqnr(ref[:, k], got[:, k]):7.2f} dB, others {sqnr(ref[:, rest], got[:, rest]):7.2f} dB"
        print(f"{sqnr(ref, got):7.2f} dB {tag} {o}{split}")


if __name__ == "__main__":
    sys.exit(main())
