#!/usr/bin/python3
"""Every transformer/recurrent family of issue 18 at every opset 13-17, end to end.

  check_opsets.py --qhost PATH --workdir DIR [--ort-dir tests/ort] [--models a,b]
                  [--opsets 13,14,15,16,17] [--jobs 2] [--require-ort]

Small members of each family, exported by PyTorch 1.13's torch.onnx.export at each opset:
  convnext     torchvision ConvNeXt from its constructor (2 stages of 1 block, 16/32 channels,
               layer scales drawn away from 1e-6 so the blocks count), 1x3x32x32
  vit          torchvision VisionTransformer (32x32 image, patch 8, 2 layers, hidden 32),
               its zero-initialised head drawn at random (else every output is the bias)
  swin         torchvision SwinTransformer (patch 4, embed 16, depths 2+2, window 4: a
               shifted window in stage 1), 1x3x32x32
  swin_v2      the same with torchvision's V2 block and patch merging (cosine attention, the
               log-spaced continuous position bias MLP), its qkv biases removed: torchvision
               0.14 zeroes the key bias in forward (Tensor.zero_), which PyTorch 1.13's
               exporter cannot export at any opset
  text_encoder token embedding, nn.TransformerEncoder (2 layers), padding mask from the tokens
  text_prenorm the other spelling users meet: norm_first=True, GELU, sequence-first
               (batch_first=False), a float additive src_mask (-inf above a band) beside the
               boolean padding mask
  transformer  nn.Transformer (2+2 layers), source padding masks and a causal target mask:
               nn.Transformer.generate_square_subsequent_mask (torch.triu -> Trilu) from
               opset 14; at opset 13, where 1.13 cannot export triu, the same mask spelled
               with arange comparisons
  bert         a BERT-style encoder: token, position and segment embeddings, LayerNorm,
               nn.TransformerEncoder with GELU (2 layers, hidden 32), padding mask, pooler
               (Linear + Tanh), head
  lstm, lstm_bi, gru
               token embedding, a 2-layer nn.LSTM / the same bidirectional / a bidirectional
               nn.GRU, a linear head on the last step
Text inputs are int64 tokens [2, 12] whose last 3 are padding (0), in every sample.

Steps, per (model, opset):
  export     torch.onnx.export succeeds (opset_version, constant folding)
  inspect    `qhost inspect --json` exits 0, every node supported, shape inference complete
  float      `qhost run` on the float file against ONNX Runtime (tests/ort/ort_run.js) on the
             example input: max |qhost - ORT| / max |ORT| <= 1e-4
  x86, fbgemm, qnnpack
             `qhost quantize --backend B --calib` (4 samples) exits 0 and writes a file that
             `qhost inspect` calls quantized; no Q/DQ inside a LayerNorm or GELU and every
             float node named with a reason in --report (check_transformers.py's checks,
             scopes from the PyTorch modules' names: the opset 13-16 decompositions and
             opset 17's LayerNormalization alike)
  dynamic    `qhost quantize --dynamic` exits 0 and writes a file with DynamicQuantizeLinear
             and MatMulInteger
  run-s, run-d
             `qhost run --backend x86` on the static x86 file / the dynamic file over 8
             held-out probe samples, and again under QHOST_CPU_DISABLE=avx512vnni,avxvnni:
             finite outputs whose SQNR against the float model is within 1 dB of the host
             reference path's on the same file; `qhost bench
             --backend x86 --json` runs it with at least one unit on the plugin (its share
             of the MACs is printed)
One line per (model, opset): PASS/FAIL/XFAIL and the first failure's text. EXPECTED_FAIL
lists the failures whose fix lies in a file this check's owner may not change, with the
reason; an expected failure that passes is reported (XPASS) and fails the run, so the list
stays true. Exit 0 when everything else passed, 1 otherwise, 77 when ONNX Runtime is missing
and --require-ort is not given (the float step is then skipped).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
import zlib

import numpy as np
import onnx
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import export_models  # noqa: E402  (tests/parity/export_models.py)
from check_transformers import check_report, check_scopes, module_scopes  # noqa: E402

MODELS = ("convnext", "vit", "swin", "swin_v2", "text_encoder", "text_prenorm", "transformer", "bert", "lstm",
          "lstm_bi", "gru")
OPSETS = (13, 14, 15, 16, 17)
STEPS = ("export", "inspect", "float", "x86", "fbgemm", "qnnpack", "dynamic", "run-s", "run-d")
CALIB_SAMPLES = 4
PROBE_SAMPLES = 8
FLOAT_TOL = 1e-4
SQNR_SLACK_DB = 1.0
# The x86 runs again without VNNI, where u8 x s8 pair sums can saturate in vpmaddubsw
# (issue 18, part 4): the attention MatMuls must take an exact path or decline.
NO_VNNI = {"QHOST_CPU_DISABLE": "avx512vnni,avxvnni"}

# (model, opset or None for all, step) -> why it fails and where the fix lies.
EXPECTED_FAIL = {}


class Bert(nn.Module):
    """BERT's shape at a small size: embeddings summed and normalised, a GELU encoder with
    the padding mask, a pooler on the first token."""

    def __init__(self, vocab=200, d=32, layers=2, heads=4, ff=64, max_len=16):
        super().__init__()
        self.tok, self.pos, self.seg = nn.Embedding(vocab, d), nn.Embedding(max_len, d), nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.pool, self.head = nn.Linear(d, d), nn.Linear(d, 3)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1]).unsqueeze(0)
        h = self.norm(self.tok(tokens) + self.pos(pos) + self.seg(torch.zeros_like(tokens)))
        h = self.enc(h, src_key_padding_mask=tokens == 0)
        return self.head(torch.tanh(self.pool(h[:, 0])))


class TextPreNorm(nn.Module):
    """Pre-norm GELU encoder, sequence-first, with a banded float mask and the padding mask."""

    def __init__(self, d=32, band=4):
        super().__init__()
        self.band = band
        self.emb = nn.Embedding(200, d)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, activation="gelu", norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(d))
        self.head = nn.Linear(d, 5)

    def forward(self, tokens):
        n = tokens.shape[1]
        i = torch.arange(n)
        band = torch.zeros(n, n).masked_fill((i.unsqueeze(0) - i.unsqueeze(1)).abs() > self.band, float("-inf"))
        h = self.enc(self.emb(tokens).transpose(0, 1), mask=band, src_key_padding_mask=tokens == 0)
        return self.head(h[0])


class Seq2Seq(export_models.Seq2Seq):
    """export_models' masked nn.Transformer with the causal mask as users write it."""

    def __init__(self, opset):
        super().__init__()
        self.opset = opset

    def forward(self, tokens):
        src, tgt = tokens, tokens[:, :8]
        pad = tokens == 0
        n = tgt.shape[1]
        if self.opset >= 14:
            causal = nn.Transformer.generate_square_subsequent_mask(n)
        else:
            i = torch.arange(n)
            causal = torch.zeros(n, n).masked_fill(i.unsqueeze(0) > i.unsqueeze(1), float("-inf"))
        h = self.tf(self.emb(src), self.emb(tgt), tgt_mask=causal, src_key_padding_mask=pad,
                    memory_key_padding_mask=pad)
        return self.head(h)


def build(name, opset):
    """(model in eval mode, example input); seeded by the name only, so every opset exports
    the same weights."""
    torch.manual_seed(zlib.crc32(name.encode()))
    if name == "convnext":
        from torchvision.models.convnext import CNBlockConfig, ConvNeXt
        model = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10)
        with torch.no_grad():
            for p_name, p in model.named_parameters():
                if p_name.endswith("layer_scale"):
                    p.copy_(torch.rand(p.shape) * 0.5 + 0.25)
        return model.eval(), torch.randn(1, 3, 32, 32)
    if name == "vit":
        from torchvision.models.vision_transformer import VisionTransformer
        model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                  mlp_dim=64, num_classes=10)
        with torch.no_grad():
            model.heads.head.weight.normal_(0.0, 0.1)
        return model.eval(), torch.randn(1, 3, 32, 32)
    if name == "swin":
        from torchvision.models.swin_transformer import SwinTransformer
        model = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2],
                                window_size=[4, 4], num_classes=10)
        return model.eval(), torch.randn(1, 3, 32, 32)
    if name == "swin_v2":
        from torchvision.models.swin_transformer import PatchMergingV2, SwinTransformer, SwinTransformerBlockV2
        model = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 2],
                                window_size=[4, 4], num_classes=10, block=SwinTransformerBlockV2,
                                downsample_layer=PatchMergingV2)
        for block in model.modules():
            if isinstance(block, SwinTransformerBlockV2):
                block.attn.qkv.bias = None
        return model.eval(), torch.randn(1, 3, 32, 32)
    if name == "text_prenorm":
        return TextPreNorm().eval(), export_models.tokens(2, 12)
    if name == "text_encoder":
        return export_models.TextEncoder().eval(), export_models.tokens(2, 12)
    if name == "transformer":
        return Seq2Seq(opset).eval(), export_models.tokens(2, 12)
    if name == "bert":
        return Bert().eval(), export_models.tokens(2, 12)
    if name in ("lstm", "lstm_bi", "gru"):
        return export_models.Recurrent(name).eval(), export_models.tokens(2, 10)
    raise ValueError(f"unknown model {name}")


def samples(x, n, seed):
    """n inputs like x, samples first: tokens with padding in each, or normal values."""
    gen = torch.Generator().manual_seed(seed)
    if x.dtype == torch.int64:
        out = torch.randint(1, 200, (n,) + tuple(x.shape), generator=gen)
        out[:, :, -3:] = 0
        return out
    return torch.randn((n,) + tuple(x.shape), generator=gen)


def export(workdir, name, opset):
    """Writes NAME.OPSET.onnx and its data files; returns the paths or raises with the
    exporter's message."""
    base = os.path.join(workdir, f"{name}.{opset}")
    paths = {k: f"{base}.{k}" for k in ("onnx", "input.npy", "calib.npy", "probe.npy")}
    model, x = build(name, opset)
    paths["scopes"] = module_scopes(model)
    if not os.path.exists(paths["onnx"]):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore")
            torch.onnx.export(model, x, paths["onnx"] + ".part", opset_version=opset, input_names=["input"],
                              output_names=["output"], do_constant_folding=True)
        os.replace(paths["onnx"] + ".part", paths["onnx"])
    got = onnx.load(paths["onnx"]).opset_import
    if not any(o.domain in ("", "ai.onnx") and o.version == opset for o in got):
        raise RuntimeError(f"the file declares opset {[o.version for o in got]}, not {opset}")
    np.save(paths["input.npy"], x.numpy())
    np.save(paths["calib.npy"], samples(x, CALIB_SAMPLES, 1).numpy())
    np.save(paths["probe.npy"], samples(x, PROBE_SAMPLES, 2).numpy())
    return paths


def run(cmd, timeout=600, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=None if env is None else {**os.environ, **env})
    return r.returncode, (r.stderr or "").strip(), r.stdout


def last_line(text):
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def sqnr_db(x, ref):
    noise = float(np.sum((x - ref) ** 2))
    return float("inf") if noise == 0 else 10.0 * np.log10(float(np.sum(ref ** 2)) / noise)


class Case:
    """One (model, opset): runs the steps after export, records each one's outcome."""

    def __init__(self, args, name, opset, paths):
        self.args, self.name, self.opset, self.paths = args, name, opset, paths
        self.dir = os.path.join(args.workdir, f"{name}.{opset}.d")
        self.result = {}  # step -> (ok, text)
        self.notes = []

    def step(self, step, fn):
        try:
            why = fn()
        except Exception as e:  # a crash of the check itself is a failure of the step, with its text
            why = f"{type(e).__name__}: {e}"
        self.result[step] = (why is None, why)
        return why is None

    def qhost(self, *argv, env=None):
        return run([self.args.qhost, *argv], env=env)

    def inspect_json(self, path):
        rc, err, out = self.qhost("inspect", "--json", path)
        if rc != 0:
            raise RuntimeError(f"qhost inspect {os.path.basename(path)}: exit {rc}: {last_line(err)}")
        return json.loads(out)

    def inspect(self):
        info = self.inspect_json(self.paths["onnx"])
        if info["unsupported_ops"]:
            return f"qhost inspect: unsupported ops {info['unsupported_ops']}"
        if info["shape_inference_error"]:
            return f"qhost inspect: shape inference: {info['shape_inference_error']}"
        unknown = [o["name"] for n in info["nodes"] for o in n["outputs"] if o["shape"] is None]
        return f"qhost inspect: no shape for {unknown[:3]}" if unknown else None

    def float_vs_ort(self):
        if self.args.node is None:
            return None
        ours, theirs = os.path.join(self.dir, "float.qhost.npy"), os.path.join(self.dir, "float.ort.npy")
        rc, err, _ = self.qhost("run", self.paths["onnx"], "--input", self.paths["input.npy"], "-o", ours)
        if rc != 0:
            return f"qhost run: exit {rc}: {last_line(err)}"
        rc, err, _ = run([self.args.node, os.path.join(self.args.ort_dir, "ort_run.js"), self.paths["onnx"],
                          self.paths["input.npy"], theirs])
        if rc != 0:
            return f"ort_run.js: exit {rc}: {last_line(err)}"
        a, b = np.load(ours).astype(np.float64), np.load(theirs).astype(np.float64)
        if a.shape != b.shape:
            return f"float: qhost output shape {a.shape}, ORT {b.shape}"
        rel = float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-30)
        self.notes.append(f"float rel {rel:.1e}")
        return None if rel <= FLOAT_TOL else f"float: max |qhost - ORT| / max |ORT| = {rel:.2e} > {FLOAT_TOL:g}"

    def quantize(self, backend):
        out = os.path.join(self.dir, f"{backend}.onnx")
        report_path = os.path.join(self.dir, f"{backend}.report.json")
        for p in (out, report_path):
            if os.path.exists(p):
                os.remove(p)
        if backend == "dynamic":
            argv = ["quantize", "--dynamic", "-o", out, self.paths["onnx"]]
        else:
            argv = ["quantize", "--backend", backend, "--calib", self.paths["calib.npy"], "-o", out,
                    "--report", report_path, self.paths["onnx"]]
        rc, err, _ = self.qhost(*argv)
        if rc != 0 or not os.path.exists(out):
            return f"qhost quantize {'--dynamic' if backend == 'dynamic' else '--backend ' + backend}: " \
                   f"exit {rc}: {last_line(err)}"
        info = self.inspect_json(out)
        if backend == "dynamic":
            if not (info["n_dynamic_quantize_linear"] and info["n_matmul_integer"]):
                return f"quantize --dynamic: {info['n_dynamic_quantize_linear']} DynamicQuantizeLinear, " \
                       f"{info['n_matmul_integer']} MatMulInteger in the file"
            return None
        if not info["quantized"] or not info["n_quantize_linear"]:
            return f"quantize --backend {backend}: inspect calls the file not quantized"
        with open(report_path) as f:
            report = json.load(f)
        float_model, qdq = onnx.load(self.paths["onnx"]), onnx.load(out)
        bad = check_scopes(float_model, qdq, self.paths["scopes"], report) + check_report(float_model, qdq, report)
        return f"quantize --backend {backend}: {bad[0]} ({len(bad)} in all)" if bad else None

    def float_probe(self):
        path = os.path.join(self.dir, "probe.float.npy")
        if not os.path.exists(path):
            rc, err, _ = self.qhost("run", self.paths["onnx"], "--input", self.paths["probe.npy"], "-o", path)
            if rc != 0:
                raise RuntimeError(f"qhost run (float, probe): exit {rc}: {last_line(err)}")
        return np.load(path).astype(np.float64)

    def x86_run(self, kind, qfile):
        """The x86 plugin's run of qfile against the host path's, both against float."""
        if not os.path.exists(qfile):
            return "no quantized file (its quantize step failed)"
        ref = self.float_probe()
        outs = {}
        for key, extra, env in (("x86", ["--backend", "x86"], None), ("host", [], None),
                                ("x86 without VNNI", ["--backend", "x86"], NO_VNNI)):
            path = os.path.join(self.dir, f"probe.{kind}.{key.replace(' ', '_')}.npy")
            rc, err, _ = self.qhost("run", *extra, qfile, "--input", self.paths["probe.npy"], "-o", path, env=env)
            if rc != 0:
                return f"qhost run {' '.join(extra) or '(host)'} ({kind}{', without VNNI' if env else ''}): " \
                       f"exit {rc}: {last_line(err)}"
            outs[key] = np.load(path).astype(np.float64)
        host = sqnr_db(outs["host"], ref)
        for key in ("x86", "x86 without VNNI"):
            if not np.all(np.isfinite(outs[key])):
                return f"qhost run --backend {key} ({kind}): non-finite output"
            got = sqnr_db(outs[key], ref)
            if not got >= host - SQNR_SLACK_DB:
                return f"run --backend {key} ({kind}): SQNR {got:.2f} dB against float, the host path " \
                       f"{host:.2f} dB (bar: within {SQNR_SLACK_DB:g} dB)"
        got = sqnr_db(outs["x86"], ref)
        rc, err, out = self.qhost("bench", "--backend", "x86", "--runs", "1", "--warmup", "0", "--no-fp32",
                                  "--json", qfile)
        if rc != 0:
            return f"qhost bench --backend x86 ({kind}): exit {rc}: {last_line(err)}"
        cov = json.loads(out)["coverage"]
        self.notes.append(f"{kind} x86 {got:.1f} (no VNNI {sqnr_db(outs['x86 without VNNI'], ref):.1f})/host "
                          f"{host:.1f} dB, {cov['plugin_units']} plugin units "
                          f"{100 * cov['plugin_mac_share']:.0f}% MACs")
        if cov["plugin_units"] < 1:
            return f"bench --backend x86 ({kind}): no unit runs on the plugin"
        return None

    def run_all(self):
        os.makedirs(self.dir, exist_ok=True)
        self.step("inspect", self.inspect)
        self.step("float", self.float_vs_ort)
        for backend in ("x86", "fbgemm", "qnnpack", "dynamic"):
            self.step(backend, lambda b=backend: self.quantize(b))
        self.step("run-s", lambda: self.x86_run("static", os.path.join(self.dir, "x86.onnx")))
        self.step("run-d", lambda: self.x86_run("dynamic", os.path.join(self.dir, "dynamic.onnx")))
        return self


def expected(name, opset, step):
    return EXPECTED_FAIL.get((name, opset, step)) or EXPECTED_FAIL.get((name, None, step))


def verdict(case):
    """(PASS|FAIL|XFAIL, first text, per-step marks)."""
    marks, first_fail, first_xfail = [], None, None
    for step in STEPS:
        if step not in case.result:
            marks.append("-")
            continue
        ok, why = case.result[step]
        xf = expected(case.name, case.opset, step)
        if ok and xf:
            marks.append("XPASS")
            first_fail = first_fail or f"{step}: passes but is listed in EXPECTED_FAIL ({xf})"
        elif ok:
            marks.append("ok")
        elif xf:
            marks.append("xfail")
            first_xfail = first_xfail or f"{step}: {why} [expected: {xf}]"
        else:
            marks.append("FAIL")
            first_fail = first_fail or f"{step}: {why}"
    if first_fail:
        return "FAIL", first_fail, marks
    return ("XFAIL", first_xfail, marks) if first_xfail else ("PASS", "", marks)


def find_node(ort_dir):
    node = shutil.which("node")
    if node and os.path.isdir(os.path.join(ort_dir, "node_modules", "onnxruntime-node")):
        return node
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ort-dir", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "ort"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--opsets", default=",".join(map(str, OPSETS)))
    ap.add_argument("--jobs", type=int, default=2, help="(model, opset) cases run at once")
    ap.add_argument("--require-ort", action="store_true", help="fail, not skip, without ONNX Runtime")
    args = ap.parse_args()
    models = args.models.split(",")
    opsets = [int(o) for o in args.opsets.split(",")]
    unknown = [m for m in models if m not in MODELS] + [o for o in opsets if o not in OPSETS]
    if unknown:
        print(f"check_opsets: unknown model or opset {unknown}", file=sys.stderr)
        return 2
    args.node = find_node(args.ort_dir)
    if args.node is None:
        msg = f"check_opsets: node or onnxruntime-node missing under {args.ort_dir}"
        if args.require_ort:
            print(msg, file=sys.stderr)
            return 1
        print(msg + ": the float step is skipped", file=sys.stderr)
    torch.set_num_threads(1)
    os.makedirs(args.workdir, exist_ok=True)
    t0 = time.perf_counter()
    cases = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = []
        for name in models:
            for opset in opsets:
                try:
                    paths = export(args.workdir, name, opset)
                except Exception as e:  # the exporter's refusal is this step's result
                    case = Case(args, name, opset, None)
                    case.result["export"] = (False, f"torch.onnx.export: {str(e).splitlines()[0]}")
                    cases.append(case)
                    continue
                case = Case(args, name, opset, paths)
                case.result["export"] = (True, None)
                cases.append(case)
                futures.append(pool.submit(case.run_all))
        for f in futures:
            f.result()
    print(f"{'model':<13}{'opset':>5}  " + " ".join(f"{s:>7}" for s in STEPS) + "  result")
    failures = 0
    for case in cases:
        result, text, marks = verdict(case)
        failures += result == "FAIL"
        print(f"{case.name:<13}{case.opset:>5}  " + " ".join(f"{m:>7}" for m in marks) + f"  {result}"
              + (f"  ({', '.join(case.notes)})" if case.notes else ""))
        if text:
            print(f"    {text}")
    print(f"{len(cases)} cases, {failures} failed, {time.perf_counter() - t0:.0f} s, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if failures:
        return 1
    return 77 if args.node is None else 0


if __name__ == "__main__":
    sys.exit(main())
