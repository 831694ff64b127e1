#!/usr/bin/python3
"""Static quantization of the transformer and recurrent exports (issue 18, part 2).

  check_transformers.py --qhost PATH --workdir DIR [--models a,b] [--backends x86,fbgemm,qnnpack]
                        [--full] [--no-run]

For each model (the small parity exports of tests/parity/export_models.py by default; with
--full torchvision's vit_b_16, convnext_tiny and swin_t at 1x3x224x224 and a BERT-base-sized
nn.TransformerEncoder, 12 layers, hidden 768, sequence 128) and each backend:
  quantize   `qhost quantize --backend B --calib C --report R.json` exits 0 and writes the file
  float ops  no Q/DQ inside a LayerNorm or GELU: the scopes are found from the PyTorch model's
             nn.LayerNorm / nn.GELU / torchvision LayerNorm2d modules and the exporter's node
             names ("/enc/layers.0/norm1/...", "/features/features.1/features.1.0/block/..."; a
             scope no node belongs to fails), independently of qhost's structural matcher; no
             QuantizeLinear reads a value made and read inside a scope, and a scope node reads a
             DequantizeLinear only where the float model reads a tensor from outside the scope
             (its affine weights and scalars stay float constants)
  masks      every calibration sample of a text model holds padding, so its attention mask
             holds -inf; qhost's observers refuse Inf/NaN naming the value, so quantize
             succeeding is the check that no -inf reaches an observer
  report     every node of the float model that the QDQ file keeps float has a report entry with
             a reason; LayerNorm / GELU scope nodes cite LayerNorm / GELU (opset 13-16 forms)
  x86 run    `qhost run --backend x86` on the QDQ file exits 0 with finite outputs whose SQNR
             against the float model, over 8 held-out probe inputs, is within 1 dB of the host
             reference path's on the same file (x86 backend only; the units the plugin declines run on the host, listed
             with their reasons by `qhost bench --json`)
Plus one planted case: a graph whose Log(0) = -inf feeds a quantized Relu must fail quantize
with one line naming the value. Exit 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import warnings
import zlib

import numpy as np
import onnx
import onnx.helper as oh
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import export_models  # noqa: E402  (tests/parity/export_models.py)

SMALL = ("text_encoder", "text_encoder17", "transformer", "convnext_block", "convnext_block17", "swin_block",
         "lstm", "gru")
FULL = ("vit_b_16", "convnext_tiny", "swin_t", "bert_base")
CALIB_SAMPLES = 4
# Held-out inputs for the x86-vs-host comparison: BERT's head has two outputs, and an SQNR
# over one sample's two numbers swings by 10 dB when a calibration scale moves by an ulp.
PROBE_SAMPLES = 8


class BertBase(nn.Module):
    """A BERT-base-sized encoder: token embedding, 12 nn.TransformerEncoderLayers (768, 12
    heads, 3072, GELU), padding mask from the tokens, a linear head on the first token."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 768)
        layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 12)
        self.head = nn.Linear(768, 2)

    def forward(self, tokens):
        h = self.enc(self.emb(tokens), src_key_padding_mask=tokens == 0)
        return self.head(h[:, 0])


def build(name):
    """(model, example input, opset)."""
    if name in SMALL:
        torch.manual_seed(zlib.crc32(name.encode()))  # as export_models.export seeds
        model, x = export_models.build(name)
        return model, x, export_models.OPSETS.get(name, 17 if name.endswith("17") else export_models.OPSET)
    torch.manual_seed(0)
    if name == "bert_base":
        return BertBase().eval(), export_models.tokens(1, 128), 14
    import torchvision
    model = getattr(torchvision.models, name)(weights=None).eval()
    if name == "vit_b_16":
        # torchvision zero-initialises vit's head: its output would be the zero bias whatever
        # the encoder computes, and every comparison of outputs would pass vacuously.
        with torch.no_grad():
            model.heads.head.weight.normal_(0.0, 0.02)
    return model, torch.randn(1, 3, 224, 224), 13


def samples(x, n, seed):
    """n inputs like x (samples first): tokens with padding in each, so the mask path is
    exercised, or normal values."""
    gen = torch.Generator().manual_seed(seed)
    if x.dtype == torch.int64:
        out = torch.randint(1, int(x.max()) + 1, (n,) + tuple(x.shape), generator=gen)
        out[:, 0, -3:] = 0
        return out
    return torch.randn((n,) + tuple(x.shape), generator=gen)


def probe_path(workdir, name):
    """NAME.probe.npy, written by export: PROBE_SAMPLES held-out inputs, samples first."""
    return os.path.join(workdir, f"{name}.probe.npy")


def export(workdir, name):
    """Writes NAME.onnx, NAME.calib.npy (samples first), NAME.input.npy (the first
    calibration sample) and NAME.probe.npy; returns the first three paths and the ONNX
    node-name prefixes of the LayerNorm and GELU modules."""
    onnx_path = os.path.join(workdir, f"{name}.onnx")
    model, x, opset = build(name)
    if not os.path.exists(onnx_path):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore")
            torch.onnx.export(model, x, onnx_path, opset_version=opset, input_names=["input"],
                              output_names=["output"], do_constant_folding=True)
    calib = samples(x, CALIB_SAMPLES, 1)
    np.save(probe_path(workdir, name), samples(x, PROBE_SAMPLES, 2).numpy())
    calib_path = os.path.join(workdir, f"{name}.calib.npy")
    input_path = os.path.join(workdir, f"{name}.input.npy")
    np.save(calib_path, calib.numpy())
    np.save(input_path, calib[0].numpy())
    return onnx_path, calib_path, input_path, module_scopes(model)


def module_scopes(model):
    """The dotted paths of the model's LayerNorm / GELU modules ("enc.layers.0.norm1")."""
    scopes = {"LayerNorm": [], "GELU": []}
    for path, mod in model.named_modules():
        kind = type(mod).__name__
        key = "LayerNorm" if kind in ("LayerNorm", "LayerNorm2d") else "GELU" if kind == "GELU" else None
        if key and path:
            scopes[key].append(path)
    return scopes


def exporter_prefixes(float_model):
    """Module path -> the node-name prefix PyTorch 1.13's exporter gives that module's nodes.
    The exporter names one scope per module it calls, a numbered child after its container
    ("/features/features.1/features.1.0/block/block.2/ReduceMean" for features.1.0.block.2,
    "/enc/layers.0/norm1/Pow" for enc.layers.0.norm1: a ModuleList is never called), so
    the module path is rebuilt segment by segment: a segment that repeats the path's tail
    and adds one component extends it."""
    prefixes = {}
    for n in float_model.graph.node:
        segments = n.name.split("/")[1:-1]
        path = []
        for k, seg in enumerate(segments):
            parts = seg.split(".")
            tail = parts[:-1]
            if tail and path[len(path) - len(tail):] == tail:
                path.append(parts[-1])
            else:
                path.extend(parts)
            prefixes.setdefault(".".join(path), "/" + "/".join(segments[:k + 1]) + "/")
    return prefixes


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, (r.stderr or "").strip()


def is_scalar_or_const(value, producers, inits):
    p = producers.get(value)
    return value in inits or (p is not None and p.op_type == "Constant")


def check_scopes(float_model, qdq, scopes, report):
    """Violations of 'no Q/DQ inside LayerNorm/GELU' and of the report's reasons."""
    bad = []
    fp = {o: n for n in float_model.graph.node for o in n.output}
    finits = {t.name for t in float_model.graph.initializer}
    qp = {o: n for n in qdq.graph.node for o in n.output}
    qnodes = {n.name: n for n in qdq.graph.node}
    q_inputs = {n.input[0] for n in qdq.graph.node if n.op_type == "QuantizeLinear"}
    reasons = {e["name"]: e for e in report["nodes"]}
    where = exporter_prefixes(float_model)
    for kind, paths in scopes.items():
        for path in paths:
            prefix = where.get(path)
            # torchvision's LayerNorm2d permutes to channels-last around F.layer_norm: 1.13's
            # FX traces into it and quantizes the permutes as shared-qparams ops, observing
            # the layer_norm's output as their input (prepare_fx, checked): the Transposes
            # are not part of the normalization.
            members = [n for n in float_model.graph.node
                       if prefix and n.name.startswith(prefix) and n.op_type not in ("Constant", "Transpose")]
            if not members:
                bad.append(f"{kind} {path}: no node of the export belongs to it (the check would be vacuous)")
                continue
            names = {n.name for n in members}
            inside = {o for n in members for o in n.output}
            read_inside = {i for n in members for i in n.input}
            for v in inside & read_inside:
                if v in q_inputs:
                    bad.append(f"{kind} {prefix}: value {v} is quantized inside the {kind}")
            for n in members:
                qn = qnodes.get(n.name)
                if qn is None:
                    continue
                for slot, (fv, qv) in enumerate(zip(n.input, qn.input)):
                    dq = qp.get(qv)
                    if dq is None or dq.op_type != "DequantizeLinear":
                        continue
                    src = fp.get(fv)
                    if (src is not None and src.name in names) or is_scalar_or_const(fv, fp, finits):
                        bad.append(f"{kind} {prefix}: {n.name} input {slot} ({fv}) reads a DequantizeLinear")
                entry = reasons.get(n.name)
                if entry is None:
                    bad.append(f"{kind} {prefix}: node {n.name} has no report entry")
                elif entry["quantized"]:
                    bad.append(f"{kind} {prefix}: node {n.name} reported quantized")
                elif n.op_type not in ("LayerNormalization",) and kind.lower() not in (entry.get("reason") or "").lower():
                    bad.append(f"{kind} {prefix}: node {n.name}'s reason does not name the {kind}: {entry.get('reason')}")
    return bad


def check_report(float_model, qdq, report):
    """Every float-model node that stays float in the QDQ file has a reason."""
    bad = []
    entries = {e["name"]: e for e in report["nodes"]}
    qnames = {n.name for n in qdq.graph.node}
    for n in float_model.graph.node:
        if n.name not in qnames:
            continue  # folded into an initializer (reported as a note)
        e = entries.get(n.name)
        if e is None:
            bad.append(f"node {n.name} ({n.op_type}) has no report entry")
        elif not e["quantized"] and not e.get("reason"):
            bad.append(f"node {n.name} ({n.op_type}) reported float without a reason")
    return bad


def sqnr_db(x, ref):
    noise = float(np.sum((x - ref) ** 2))
    return float("inf") if noise == 0 else 10.0 * np.log10(float(np.sum(ref ** 2)) / noise)


def check_x86_run(args, onnx_path, qdq_path, input_path, case_dir):
    """The x86 run against the host reference path on the same QDQ file, over the held-out
    probe samples (input_path, samples first): both against the float model's outputs, the
    x86 SQNR within 1 dB of the host's (rounding ties decided differently by the fused
    kernels move single steps, which deep models carry on)."""
    outs = {}
    for key, cmd in (("x86", [args.qhost, "run", "--backend", "x86", qdq_path]),
                     ("host", [args.qhost, "run", qdq_path]), ("float", [args.qhost, "run", onnx_path])):
        path = os.path.join(case_dir, f"out.{key}.npy")
        rc, err = run(cmd + ["--input", input_path, "-o", path])
        if rc != 0:
            return [f"qhost run ({key}): exit {rc}: {err.splitlines()[-1] if err else ''}"], None
        outs[key] = np.load(path).astype(np.float64)
    if not np.all(np.isfinite(outs["x86"])):
        return ["qhost run --backend x86: non-finite output"], None
    got, host = sqnr_db(outs["x86"], outs["float"]), sqnr_db(outs["host"], outs["float"])
    if not got >= host - 1.0:
        return [f"x86 run: SQNR {got:.2f} dB against float, the host path {host:.2f} dB (bar: within 1 dB)"], None
    return [], (got, host)


def planted_nonfinite(args, workdir):
    """Log(0) = -inf feeding a quantized Relu: quantize must fail naming the value."""
    graph = oh.make_graph([oh.make_node("Log", ["input"], ["logx"], name="log"),
                           oh.make_node("Relu", ["logx"], ["output"], name="relu")], "nonfinite",
                          [oh.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 4])],
                          [oh.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, 4])])
    path = os.path.join(workdir, "nonfinite.onnx")
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), path)
    calib = os.path.join(workdir, "nonfinite.calib.npy")
    np.save(calib, np.array([[[1, 2, 0, 3]]], dtype=np.float32))
    out = os.path.join(workdir, "nonfinite.qdq.onnx")
    rc, err = run([args.qhost, "quantize", "--backend", "x86", "--calib", calib, "-o", out, path])
    lines = err.splitlines()
    if rc == 0 or os.path.exists(out) or len(lines) != 1 or "'logx'" not in err or "-Inf" not in err:
        return [f"planted -inf: exit {rc}, output {'written' if os.path.exists(out) else 'absent'}, stderr {err!r}"]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--models")
    ap.add_argument("--backends", default="x86,fbgemm,qnnpack")
    ap.add_argument("--full", action="store_true", help="the full-size models (heavy)")
    ap.add_argument("--no-run", action="store_true", help="skip the x86 int8 runs")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.workdir, exist_ok=True)
    models = args.models.split(",") if args.models else list(FULL if args.full else SMALL)
    failures = 0
    print(f"{'model':<18}{'backend':<9}{'quantized':>10}{'float':>7}{'LN/GELU/mask float':>20}  result")
    for name in models:
        onnx_path, calib_path, _, scopes = export(args.workdir, name)
        float_model = onnx.load(onnx_path)
        for backend in args.backends.split(","):
            case_dir = os.path.join(args.workdir, f"{name}.{backend}")
            os.makedirs(case_dir, exist_ok=True)
            qdq_path = os.path.join(case_dir, "out.onnx")
            report_path = os.path.join(case_dir, "report.json")
            for p in (qdq_path, report_path):
                if os.path.exists(p):
                    os.remove(p)
            cmd = [args.qhost, "quantize", "--backend", backend, "--calib", calib_path, "-o", qdq_path,
                   "--report", report_path, onnx_path]
            rc, err = run(cmd)
            bad, x86_sqnr = [], ""
            if rc != 0 or not os.path.exists(qdq_path):
                bad.append(f"quantize exit {rc}: {err.splitlines()[-1] if err else ''}")
                counts = ("-", "-", "-")
            else:
                qdq = onnx.load(qdq_path)
                with open(report_path) as f:
                    report = json.load(f)
                bad += check_scopes(float_model, qdq, scopes, report)
                bad += check_report(float_model, qdq, report)
                nodes = report["nodes"]
                special = sum(1 for e in nodes if not e["quantized"] and any(
                    k in (e.get("reason") or "") for k in ("LayerNorm", "GELU", "mask", "LayerNormalization")))
                counts = (sum(e["quantized"] for e in nodes), sum(not e["quantized"] for e in nodes), special)
                if backend == "x86" and not args.no_run:
                    why, sq = check_x86_run(args, onnx_path, qdq_path, probe_path(args.workdir, name),
                                            case_dir)
                    bad += why
                    if sq:
                        x86_sqnr = f"  (x86 {sq[0]:.1f} dB, host {sq[1]:.1f} dB vs float)"
            failures += bool(bad)
            print(f"{name:<18}{backend:<9}{counts[0]:>10}{counts[1]:>7}{counts[2]:>20}  {'FAIL' if bad else 'PASS'}{x86_sqnr}")
            for b in bad[:8]:
                print(f"    {b}")
    bad = planted_nonfinite(args, args.workdir)
    failures += bool(bad)
    print(f"{'planted -inf':<27}{'':>37}  {'FAIL' if bad else 'PASS'}")
    for b in bad:
        print(f"    {b}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
