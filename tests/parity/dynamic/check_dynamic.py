#!/usr/bin/env python3
"""`qhost quantize --dynamic` against PyTorch 1.13's quantize_dynamic on the qnnpack engine
(activations uint8 [0,255] per call, weights int8 symmetric) and against ONNX Runtime on
the written file, for a small MLP (Gemm) and a small encoder built from nn.Linear
(MatMul + Add on 3-D activations, attention MatMuls between activations left float).

Checked, per model and per weight scheme (per tensor, per channel):
  - every Linear's int8 weight values equal PyTorch's int_repr() and its scales equal
    PyTorch's q_scale()/q_per_channel_scales() as float32 bits;
  - qhost's host run of the file is close to PyTorch's quantized module: max |diff| <=
    TOL_TORCH x max |PyTorch output| (the activation qparams of DynamicQuantizeLinear's
    formula and PyTorch's ChooseQuantizationParams could differ at rounding ties; the
    float model is further from PyTorch's quantized one than that, so the bar bites);
  - ONNX Runtime runs the file and agrees with qhost within TOL_ORT relative;
  - every attention MatMul (no constant weight) is left float, with a reason; an LSTM
    classifier's LSTM too, its Linear head quantized (ONNX Runtime agrees on the file);
  - `qhost run --backend x86` and `qhost bench` run the file (host path), `qhost inspect`
    says it is dynamically quantized;
  - bad input: a model without a Linear is refused naming the cause, with no output
    file; --dynamic with --calib is a usage error (exit 2).
Usage: check_dynamic.py --qhost QHOST --workdir DIR --ort-dir tests/ort
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

TOL_TORCH = 1e-5  # measured: 0 (per tensor), 1.4e-7 (per channel)
TOL_ORT = 1e-5


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 24)
        self.fc3 = nn.Linear(24, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Encoder(nn.Module):
    """One post-norm encoder layer as nn.TransformerEncoderLayer computes it, from nn.Linear."""

    def __init__(self, d=32, heads=2, ff=64):
        super().__init__()
        self.heads, self.d = heads, d
        self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.head = nn.Linear(d, 5)

    def split(self, t):
        b, s, _ = t.shape
        return t.reshape(b, s, self.heads, self.d // self.heads).transpose(1, 2)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        att = F.softmax(torch.matmul(q, k.transpose(-1, -2)) / (self.d // self.heads) ** 0.5, dim=-1)
        ctx = torch.matmul(att, v).transpose(1, 2).reshape(b, s, self.d)
        x = self.norm1(x + self.out(ctx))
        x = self.norm2(x + self.ff2(F.gelu(self.ff1(x))))
        return self.head(x)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def torch_dynamic(model, per_channel):
    torch.backends.quantized.engine = "qnnpack"
    if per_channel:
        spec = {nn.Linear: torch.quantization.per_channel_dynamic_qconfig}
        return torch.quantization.quantize_dynamic(model, spec, dtype=torch.qint8)
    return torch.quantization.quantize_dynamic(model, dtype=torch.qint8)  # 1.13's defaults


def weight_names(float_onnx, model):
    """module name -> (initializer name, transposed?) found by value."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(float_onnx).graph.initializer}
    found = {}
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.Linear):
            continue
        w = mod.weight.detach().numpy()
        for iname, a in inits.items():
            if a.shape == w.shape and np.array_equal(a, w):
                found[name] = (iname, False)
            elif a.shape == w.T.shape and np.array_equal(a, w.T):
                found[name] = (iname, True)
        if name not in found:
            fail(f"no initializer holds {name}.weight")
    return found


def check_weights(tag, qfile, float_onnx, model, qmodel):
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(qfile).graph.initializer}
    mods = dict(qmodel.named_modules())
    for name, (iname, _) in weight_names(float_onnx, model).items():
        qw = mods[name].weight()
        ours = inits.get(iname + "_quantized")
        if ours is None:
            fail(f"{tag}: {iname}_quantized missing for {name}")
        if ours.dtype != np.int8 or not np.array_equal(ours, qw.int_repr().numpy().T):
            fail(f"{tag}: {name}: int8 weights differ from PyTorch's in "
                 f"{int(np.sum(ours != qw.int_repr().numpy().T))} places")
        if qw.qscheme() in (torch.per_channel_symmetric, torch.per_channel_affine):
            ref = qw.q_per_channel_scales().numpy().astype(np.float32)
        else:
            ref = np.array([qw.q_scale()], dtype=np.float32)
        scale = inits[iname + "_scale"].astype(np.float32).reshape(-1)
        if scale.shape != ref.shape or not np.array_equal(scale.view(np.uint32), ref.view(np.uint32)):
            fail(f"{tag}: {name}: scales {scale[:4]} != PyTorch's {ref[:4]}")
    return len(mods)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ort-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)
    cases = [("mlp", Mlp(), torch.randn(8, 16) * 2.0), ("encoder", Encoder(), torch.randn(1, 12, 32))]
    for tag, model, x in cases:
        model.eval()
        fpath = os.path.join(args.workdir, f"{tag}.onnx")
        torch.onnx.export(model, (x,), fpath, opset_version=13, input_names=["x"], output_names=["y"])
        xpath = os.path.join(args.workdir, f"{tag}_x.npy")
        np.save(xpath, x.numpy())
        for per_channel in (False, True):
            name = f"{tag}_{'pc' if per_channel else 'pt'}"
            qpath = os.path.join(args.workdir, f"{name}.dyn.onnx")
            rpath = os.path.join(args.workdir, f"{name}.json")
            cmd = [args.qhost, "quantize", "--dynamic", fpath, "-o", qpath, "--report", rpath]
            if per_channel:
                cmd.append("--dynamic-per-channel")
            r = run(cmd)
            if r.returncode != 0:
                fail(f"{name}: {' '.join(cmd)}: {r.stderr.strip()}")
            report = json.load(open(rpath))
            floats = [n for n in report["nodes"] if not n["quantized"]]
            if tag == "encoder" and (len(floats) != 2 or any("not a constant" not in n["reason"] for n in floats)):
                fail(f"{name}: the two attention MatMuls must stay float with a reason: {floats}")
            ops = {n.op_type for n in onnx.load(qpath).graph.node}
            if not {"DynamicQuantizeLinear", "MatMulInteger"} <= ops:
                fail(f"{name}: written ops {sorted(ops)}")
            qmodel = torch_dynamic(model, per_channel)
            check_weights(name, qpath, fpath, model, qmodel)
            ypath = os.path.join(args.workdir, f"{name}_y.npy")
            r = run([args.qhost, "run", qpath, "--input", xpath, "-o", ypath])
            if r.returncode != 0:
                fail(f"{name}: qhost run: {r.stderr.strip()}")
            ours = np.load(ypath)
            with torch.no_grad():
                ref = qmodel(x).numpy()
            rel = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))
            with torch.no_grad():
                rel_float = float(np.max(np.abs(model(x).numpy() - ref)) / np.max(np.abs(ref)))
            if rel_float <= 10 * TOL_TORCH:
                fail(f"{name}: the float model is within {rel_float:.3g} of PyTorch's quantized one: no test")
            opath = os.path.join(args.workdir, f"{name}_ort.npy")
            r = run(["node", os.path.join(args.ort_dir, "ort_run.js"), qpath, xpath, opath])
            if r.returncode != 0:
                fail(f"{name}: ONNX Runtime: {r.stderr.strip()}")
            ort = np.load(opath)
            rel_ort = float(np.max(np.abs(ours - ort)) / np.max(np.abs(ort)))
            print(f"{name}: {len(report['nodes']) - len(floats)} Linears dynamic, weights and scales equal "
                  f"PyTorch's; max|qhost - torch| / max|torch| = {rel:.3g} (bar {TOL_TORCH}); "
                  f"max|qhost - ORT| / max|ORT| = {rel_ort:.3g} (bar {TOL_ORT})")
            if rel > TOL_TORCH:
                fail(f"{name}: qhost vs PyTorch {rel:.3g} > {TOL_TORCH}")
            if rel_ort > TOL_ORT:
                fail(f"{name}: qhost vs ONNX Runtime {rel_ort:.3g} > {TOL_ORT}")
    hosts(args)
    recurrent(args)
    bad_inputs(args)
    print("ok")


def hosts(args):
    qpath = os.path.join(args.workdir, "encoder_pt.dyn.onnx")
    xpath = os.path.join(args.workdir, "encoder_x.npy")
    ypath = os.path.join(args.workdir, "encoder_pt_x86.npy")
    r = run([args.qhost, "run", qpath, "--input", xpath, "-o", ypath, "--backend", "x86"])
    if r.returncode != 0:
        fail(f"run --backend x86: {r.stderr.strip()}")
    if not np.array_equal(np.load(ypath), np.load(os.path.join(args.workdir, "encoder_pt_y.npy"))):
        fail("run --backend x86 differs from the host run")
    r = run([args.qhost, "inspect", qpath])
    if r.returncode != 0 or "quantized: dynamic (5 DynamicQuantizeLinear, 7 MatMulInteger)" not in r.stdout:
        fail(f"inspect: {r.stdout[-300:]} {r.stderr.strip()}")
    r = run([args.qhost, "bench", qpath, "--runs", "3", "--warmup", "1"])
    if r.returncode != 0 or "ms" not in r.stdout:
        fail(f"bench: {r.stderr.strip()}")
    print("run --backend x86 and bench: ok")


def recurrent(args):
    """An LSTM classifier: the LSTM stays float, named in the report with the reason; its
    Linear head is quantized; ONNX Runtime agrees with qhost on the file."""
    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 16, batch_first=True)
            self.head = nn.Linear(16, 4)

        def forward(self, x):
            return self.head(self.lstm(x)[0][:, -1])

    torch.manual_seed(1)
    x = torch.randn(1, 5, 8)
    fpath, xpath = os.path.join(args.workdir, "lstm.onnx"), os.path.join(args.workdir, "lstm_x.npy")
    torch.onnx.export(Tagger().eval(), (x,), fpath, opset_version=13, input_names=["x"], output_names=["y"])
    np.save(xpath, x.numpy())
    qpath, rpath = os.path.join(args.workdir, "lstm.dyn.onnx"), os.path.join(args.workdir, "lstm.json")
    r = run([args.qhost, "quantize", "--dynamic", fpath, "-o", qpath, "--report", rpath])
    if r.returncode != 0:
        fail(f"lstm: {r.stderr.strip()}")
    nodes = json.load(open(rpath))["nodes"]
    lstm = [n for n in nodes if n["op"] == "LSTM"]
    if len(lstm) != 1 or lstm[0]["quantized"] or "per time step" not in lstm[0].get("reason", ""):
        fail(f"lstm: the LSTM must be reported float with its reason: {nodes}")
    if not any(n["quantized"] and n["op"] in ("Gemm", "MatMul") for n in nodes):
        fail(f"lstm: the Linear head was not quantized: {nodes}")
    ours, ort = os.path.join(args.workdir, "lstm_y.npy"), os.path.join(args.workdir, "lstm_ort.npy")
    r = run([args.qhost, "run", qpath, "--input", xpath, "-o", ours])
    r2 = run(["node", os.path.join(args.ort_dir, "ort_run.js"), qpath, xpath, ort])
    if r.returncode != 0 or r2.returncode != 0:
        fail(f"lstm: run: {r.stderr.strip()} {r2.stderr.strip()}")
    a, b = np.load(ours), np.load(ort)
    rel = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
    if rel > TOL_ORT:
        fail(f"lstm: qhost vs ONNX Runtime {rel:.3g}")
    print(f"lstm: LSTM float with its reason, head dynamic; max|qhost - ORT| / max|ORT| = {rel:.3g}")


def bad_inputs(args):
    class NoLinear(nn.Module):
        def forward(self, a, b):
            return torch.matmul(a, b).relu()

    fpath = os.path.join(args.workdir, "no_linear.onnx")
    torch.onnx.export(NoLinear(), (torch.randn(2, 3), torch.randn(3, 4)), fpath, opset_version=13)
    out = os.path.join(args.workdir, "no_linear.dyn.onnx")
    if os.path.exists(out):
        os.unlink(out)
    r = run([args.qhost, "quantize", "--dynamic", fpath, "-o", out])
    lines = r.stderr.strip().splitlines()
    if (r.returncode != 1 or len(lines) != 1 or fpath not in lines[0] or "constant" not in lines[0]
            or os.path.exists(out)):
        fail(f"no Linear: exit {r.returncode}, stderr {r.stderr!r}")
    print("no Linear:", lines[0])
    mlp = os.path.join(args.workdir, "mlp.onnx")
    r = run([args.qhost, "quantize", "--dynamic", mlp, "-o", out, "--calib", os.path.join(args.workdir, "mlp_x.npy")])
    if r.returncode != 2 or "--dynamic takes no --calib" not in r.stderr or os.path.exists(out):
        fail(f"--dynamic --calib: exit {r.returncode}, stderr {r.stderr!r}")
    r = run([args.qhost, "quantize", "--dynamic", mlp, "-o", out, "--backend", "example_vitis"])
    if r.returncode != 1 or "example_vitis" not in r.stderr or os.path.exists(out):
        fail(f"--dynamic --backend example_vitis: exit {r.returncode}, stderr {r.stderr!r}")
    print("bad inputs: ok")


if __name__ == "__main__":
    main()
