#!/usr/bin/python3
"""A reproducible zoo of torchvision CNNs and transformers: qhost int8 and fp32 against ONNX Runtime.

  bench_zoo.py --qhost PATH [--family cnn|transformers] [--models resnet50,...] [--threads 1,2]
               [--runs 10] [--warmup 2] [--rounds 3] [--workdir DIR] [--size 224]
               [--calib-samples 8] [--seed 0] [--backends x86,fbgemm,qnnpack]
               [--coverage-only] [--fp32-only] [--check-coverage] [--json]

--family cnn (the default) is the torchvision CNN zoo described below. --family transformers
is issue 18's zoo: torchvision's convnext_tiny, vit_b_16 and swin_t (1x3x224x224, opset 13),
a BERT-base-sized nn.TransformerEncoder (12 x 768, 12 heads, GELU, sequence 128, padding mask,
opset 14) and the parity suite's text_encoder (nn.TransformerEncoder with a padding mask),
transformer (nn.Transformer, causal and padding masks), lstm and gru classifiers. Models and
calibration data (4 samples, padding in every text sample) come from
tests/parity/quant/check_transformers.py's export(), which builds them with
tests/parity/export_models.py. Each is quantized for every --backends backend (ok or the
error, nodes quantized/float from the report); the x86 QDQ file is then run by `qhost run
--backend x86` and by ONNX Runtime, and their outputs compared (int8 agreement: max |qhost -
ORT| / max |ORT| and the SQNR of qhost's output against ORT's); parity and latency as below.
--size, --calib-samples and --seed apply to the CNN family only.

Prints the CPU and its ISA flags, then for every model:
  1. exports it with PyTorch (this interpreter; 1.13 on these machines): torchvision,
     weights=None with a per-model seed (crc32 of the name), BatchNorm statistics
     re-estimated on 16 random batches in train mode (tests/parity/export_models.py's
     reestimate_bn), then eval; inception_v3 with aux_logits=False; input 1x3xSIZExSIZE
     (seeded), opset 13, the exporter's default EVAL mode (Conv+BatchNorm folded).
     Cached in --workdir as MODEL[_SIZE].onnx and .input.npy;
  2. quantizes it with `qhost quantize --backend x86 --calib` on --calib-samples seeded
     random samples (bench/bench_int8_vs_ort.py's helpers) into MODEL[_SIZE].x86.qdq.onnx;
  3. per thread count: float parity, the max over the output of |qhost - ORT| divided
     by max |ORT| (`qhost run` and tests/ort/ort_run.js on the float model); coverage
     from `qhost bench --backend x86 --json` on the QDQ file (units on the plugin's
     kernels, conv/linear units left on the host, MAC share on the plugin, layout
     transposes between units: qhost's count less one per 4-D graph input or output); and, unless --coverage-only, --rounds alternating rounds of
       qhost x86 int8 (QDQ file, --no-fp32), ONNX Runtime on the same QDQ file,
       qhost fp32 (float file), ONNX Runtime fp32 (float file),
     each round the median of --runs timed runs after --warmup; the table shows the
     median of the round medians and the ratios int8/ORT int8, int8/qhost fp32,
     qhost fp32/ORT fp32, with the geometric mean of int8/ORT int8 per thread count.
--fp32-only times only qhost fp32 and ONNX Runtime fp32 (the coverage comes from one
untimed x86 run). --check-coverage fails a model whose plugin MAC share is below 99%, that leaves a
conv/linear unit on the host, or that has a layout transpose between plugin units.
Exit 0 when every model ran (and passed --check-coverage), 1 otherwise, 2 usage.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity", "quant"))
from bench_fp32_vs_ort import cpu_info, int_list, run_json  # noqa: E402
from bench_int8_vs_ort import ensure_qdq_model  # noqa: E402

TRANSFORMERS = ("convnext_tiny", "vit_b_16", "swin_t", "bert_base", "text_encoder", "transformer", "lstm", "gru")
BACKENDS = ("x86", "fbgemm", "qnnpack")
MODELS = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "shufflenet_v2_x1_0", "squeezenet1_1",
          "densenet121", "googlenet", "regnet_x_400mf", "inception_v3", "mnasnet1_0")
SIDES = ("qhost_int8", "ort_int8", "qhost_fp32", "ort_fp32")
BN_BATCHES = 16
BN_BATCH_SIZE = 2
OPSET = 13


def stem(model, size):
    return model if size == 224 else f"{model}_{size}"


def export(workdir, model, size, say):
    """MODEL[_SIZE].onnx and .input.npy in workdir (cached)."""
    s = stem(model, size)
    onnx_path = os.path.join(workdir, s + ".onnx")
    x_path = os.path.join(workdir, s + ".input.npy")
    if os.path.exists(onnx_path) and os.path.exists(x_path):
        say(f"using cached {onnx_path}")
        return onnx_path, x_path
    import warnings
    import numpy as np
    import torch
    import torchvision
    from export_models import reestimate_bn
    t0 = time.perf_counter()
    seed = zlib.crc32(model.encode())
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    kwargs = {"weights": None}
    if model == "inception_v3":
        kwargs.update(aux_logits=False, init_weights=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = getattr(torchvision.models, model)(**kwargs)
        reestimate_bn(net, (BN_BATCH_SIZE, 3, size, size), batches=BN_BATCHES)
        x = torch.randn(1, 3, size, size)
        tmp = onnx_path + ".tmp"
        torch.onnx.export(net, x, tmp, opset_version=OPSET, input_names=["input"],
                          output_names=["output"], do_constant_folding=True)
    np.save(x_path, x.numpy().astype(np.float32))
    os.replace(tmp, onnx_path)
    say(f"exported {s} in {time.perf_counter() - t0:.1f} s")
    return onnx_path, x_path


def run_ok(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return f"exit {r.returncode}: {lines[-1] if lines else '(no message)'}"
    return None


def stale(out, *sources):
    """Whether a cached output is missing or older than a file it was computed from."""
    return not os.path.exists(out) or any(os.path.getmtime(out) < os.path.getmtime(s) for s in sources)


def parity(qhost, node, ort_dir, onnx_path, x_path, threads, workdir):
    """(max |qhost - ORT| / max |ORT|, error text)."""
    import numpy as np
    base = os.path.join(workdir, os.path.basename(onnx_path)[:-5])
    q_out, o_out = f"{base}.qhost.t{threads}.npy", f"{base}.ort.npy"
    err = run_ok([qhost, "run", onnx_path, "--input", x_path, "-o", q_out, "--threads", str(threads)])
    if err:
        return None, f"qhost run: {err}"
    if node is None:
        return None, None
    if stale(o_out, onnx_path, x_path):
        err = run_ok([node, os.path.join(ort_dir, "ort_run.js"), onnx_path, x_path, o_out])
        if err:
            return None, f"ORT run: {err}"
    a, b = np.load(q_out).astype(np.float64), np.load(o_out).astype(np.float64)
    if a.shape != b.shape:
        return None, f"output shapes differ: qhost {a.shape}, ORT {b.shape}"
    scale = float(np.max(np.abs(b))) or 1.0
    return float(np.max(np.abs(a - b))) / scale, None


def boundary_transposes(path):
    """Layout transposes a plugin running NHWC needs at the graph's edges: one per 4-D
    graph input and output (qhost's layout_transposes count includes them)."""
    import onnx
    g = onnx.load(path, load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    ranks = [len(v.type.tensor_type.shape.dim) for v in list(g.input) + list(g.output)
             if v.name not in inits]
    return sum(1 for r in ranks if r == 4)


def coverage_of(out, boundary):
    """The plugin's figures from one `qhost bench --backend x86 --json` result."""
    c = out.get("coverage") if out else None
    if not isinstance(c, dict):
        return None
    units = [u for u in c.get("units", []) if isinstance(u, dict)]
    host = [u for u in units if u.get("kernel") == "host:reference"]
    heavy_host = [u for u in host if str(u.get("ops", "")).split("+")[0] in ("Conv", "Gemm", "MatMul")]
    host_ops = {}
    for u in host:
        op = str(u.get("ops", "?"))
        host_ops[op] = host_ops.get(op, 0) + 1
    return {"units": len(units), "plugin_units": len(units) - len(host),
            "host_conv_linear_units": len(heavy_host),
            "plugin_mac_share": c.get("plugin_mac_share"),
            "plugin_time_share": c.get("plugin_time_share"),
            "layout_transposes": c.get("layout_transposes"),
            "boundary_transposes": boundary,
            "inner_transposes": max(0, (c.get("layout_transposes") or 0) - boundary),
            "host_units_by_ops": host_ops}


def summarize(rounds):
    meds = [r["median_ms"] for r in rounds if r is not None]
    if not meds:
        return None
    return {"median_ms": statistics.median(meds), "lo_ms": min(meds), "hi_ms": max(meds), "rounds": len(meds)}


def ratio(a, b):
    return a["median_ms"] / b["median_ms"] if a and b and b["median_ms"] > 0 else None


def geomean(vals):
    vals = [v for v in vals if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def f2(v, spec=".2f"):
    return "n/a" if v is None else format(v, spec)


def ms(s):
    return "n/a" if s is None else f"{s['median_ms']:.2f}"


def coverage_problems(cov):
    if cov is None:
        return ["no coverage in qhost's JSON"]
    out = []
    if (cov["plugin_mac_share"] or 0) < 0.99:
        out.append(f"MACs on plugin {100 * (cov['plugin_mac_share'] or 0):.1f}% < 99%")
    if cov["host_conv_linear_units"]:
        out.append(f"{cov['host_conv_linear_units']} conv/linear unit(s) on the host")
    if cov["inner_transposes"]:
        out.append(f"{cov['inner_transposes']} layout transpose(s) between units")
    return out


def print_table(results, args):
    print("\nparity: max |qhost fp32 - ORT fp32| / max |ORT fp32| on the model's input. "
          "units: on the plugin's kernels / all (conv+linear units on the host). "
          "T: layout transposes between units (not counting the "
          "graph input's NCHW->NHWC).")
    if not args.coverage_only:
        print(f"latency: median of {args.rounds} round medians, each {args.runs} runs after {args.warmup} "
              f"warm-up; rounds alternate qhost int8, ORT int8, qhost fp32, ORT fp32")
    head = (f"{'model':<20}{'thr':>3}  {'parity':>8}  {'units':>11}  {'MACs':>6}  {'T':>3}")
    if not args.coverage_only:
        head += (f"  {'int8 ms':>8}  {'ORT i8':>8}  {'i8/ORT':>6}  {'i8/fp32':>7}  {'fp32 ms':>8}  "
                 f"{'ORT fp32':>8}  {'fp32/ORT':>8}")
    print(head)
    print("-" * len(head))
    for r in results:
        c = r["coverage"]
        units = "n/a" if c is None else f"{c['plugin_units']}/{c['units']} ({c['host_conv_linear_units']})"
        mac = "n/a" if c is None or c["plugin_mac_share"] is None else f"{100 * c['plugin_mac_share']:.1f}%"
        tr = "n/a" if c is None else str(c["inner_transposes"])
        line = f"{r['model']:<20}{r['threads']:>3}  {f2(r['parity'], '.1e'):>8}  {units:>11}  {mac:>6}  {tr:>3}"
        if not args.coverage_only:
            line += (f"  {ms(r['qhost_int8']):>8}  {ms(r['ort_int8']):>8}  {f2(r['int8_over_ort']):>6}  "
                     f"{f2(r['int8_over_fp32']):>7}  {ms(r['qhost_fp32']):>8}  {ms(r['ort_fp32']):>8}  "
                     f"{f2(r['fp32_over_ort']):>8}")
        print(line)
    if not args.coverage_only:
        for t in args.threads:
            g = geomean([r["int8_over_ort"] for r in results if r["threads"] == t])
            g32 = geomean([r["fp32_over_ort"] for r in results if r["threads"] == t])
            print(f"geomean {t} thread(s): int8/ORT int8 {f2(g)}, qhost fp32/ORT fp32 {f2(g32)}")
    for r in results:
        c = r["coverage"]
        if c and c["host_units_by_ops"] and r["threads"] == results[0]["threads"]:
            print(f"host units {r['model']}: " + ", ".join(
                f"{n}x {op}" for op, n in sorted(c["host_units_by_ops"].items(), key=lambda kv: -kv[1])))


def export_transformer(workdir, model, say):
    """NAME.onnx (cached), NAME.calib.npy and NAME.input.npy in workdir, from
    check_transformers.export (the models of tests/parity/export_models.py and the full sizes)."""
    import check_transformers
    t0 = time.perf_counter()
    cached = os.path.exists(os.path.join(workdir, model + ".onnx"))
    onnx_path, calib_path, x_path, _scopes = check_transformers.export(workdir, model)
    say(f"{'using cached' if cached else 'exported'} {onnx_path} ({time.perf_counter() - t0:.1f} s)")
    return onnx_path, calib_path, x_path


def quantize_backend(qhost, workdir, model, backend, onnx_path, calib_path, say):
    """(QDQ path, {"ok", "quantized", "float", "error"}): `qhost quantize --backend B --calib C`,
    reusing a QDQ file newer than the float model."""
    qdq = os.path.join(workdir, f"{model}.{backend}.qdq.onnx")
    report = qdq + ".report.json"
    if not (os.path.exists(qdq) and os.path.exists(report) and
            os.path.getmtime(qdq) >= os.path.getmtime(onnx_path)):
        for p in (qdq, report):
            if os.path.exists(p):
                os.remove(p)
        t0 = time.perf_counter()
        err = run_ok([qhost, "quantize", "--backend", backend, "--calib", calib_path, "-o", qdq,
                      "--report", report, "--quiet", onnx_path])
        if err:
            return None, {"ok": False, "error": err}
        say(f"quantized {model} for {backend} in {time.perf_counter() - t0:.1f} s")
    try:
        with open(report) as f:
            nodes = json.load(f)["nodes"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return qdq, {"ok": False, "error": f"report {report}: {e}"}
    return qdq, {"ok": True, "quantized": sum(1 for e in nodes if e.get("quantized")),
                 "float": sum(1 for e in nodes if not e.get("quantized"))}


def int8_agreement(qhost, node, ort_dir, qdq, x_path, threads, workdir):
    """(max |qhost x86 - ORT| / max |ORT|, SQNR of qhost's output against ORT's in dB, error)
    on the same QDQ file."""
    import numpy as np
    base = os.path.join(workdir, os.path.basename(qdq)[:-5])
    q_out, o_out = f"{base}.qhost_x86.t{threads}.npy", f"{base}.ort.npy"
    err = run_ok([qhost, "run", "--backend", "x86", qdq, "--input", x_path, "-o", q_out, "--threads", str(threads)])
    if err:
        return None, None, f"qhost run --backend x86: {err}"
    a = np.load(q_out).astype(np.float64)
    if not np.all(np.isfinite(a)):
        return None, None, "qhost run --backend x86: non-finite output"
    if node is None:
        return None, None, None
    if stale(o_out, qdq, x_path):
        err = run_ok([node, os.path.join(ort_dir, "ort_run.js"), qdq, x_path, o_out])
        if err:
            return None, None, f"ORT run (int8): {err}"
    b = np.load(o_out).astype(np.float64)
    if a.shape != b.shape:
        return None, None, f"int8 output shapes differ: qhost {a.shape}, ORT {b.shape}"
    noise = float(np.sum((a - b) ** 2))
    sqnr = float("inf") if noise == 0 else 10.0 * math.log10(max(float(np.sum(b ** 2)), 1e-300) / noise)
    return float(np.max(np.abs(a - b))) / (float(np.max(np.abs(b))) or 1.0), sqnr, None


def measure(args, node, ort_js, m, onnx_path, x_path, qdq, t, workdir, errors):
    """One row: float parity, coverage and (unless --coverage-only) the four timed sides."""
    row = {"model": m, "threads": t, "onnx": os.path.basename(onnx_path),
           "qdq": os.path.basename(qdq) if qdq else None}
    par, err = parity(args.qhost, node, args.ort_dir, onnx_path, x_path, t, workdir)
    if err:
        errors.setdefault(m, []).append(f"parity threads={t}: {err}")
    row["parity"] = par
    common = ["--threads", str(t), "--warmup", str(args.warmup), "--runs", str(args.runs)]
    one_x86 = [args.qhost, "bench", qdq, "--input", x_path, "--no-fp32", "--backend", "x86",
               "--threads", str(t), "--warmup", "0", "--runs", "1", "--json"] if qdq else None
    cmds = {
        "qhost_int8": [args.qhost, "bench", qdq, "--input", x_path, "--no-fp32", "--backend", "x86"] +
                      common + ["--json"] if qdq else None,
        "ort_int8": [node, ort_js, qdq, x_path] + common if node and qdq else None,
        "qhost_fp32": [args.qhost, "bench", onnx_path, "--input", x_path] + common + ["--json"],
        "ort_fp32": [node, ort_js, onnx_path, x_path] + common if node else None,
    }
    if args.fp32_only:
        cmds["qhost_int8"] = cmds["ort_int8"] = None
    if args.coverage_only:
        cmds = {"qhost_int8": one_x86}
    rounds = {side: [] for side in SIDES}
    for i in range(1 if args.coverage_only else args.rounds):
        for side, cmd in cmds.items():
            if cmd is None:
                continue
            out, err = run_json(cmd)
            if err:
                errors.setdefault(m, []).append(f"{side} threads={t} round {i + 1}: {err}")
            rounds[side].append(out)
    coverage_run = None
    if args.fp32_only and one_x86:
        coverage_run, err = run_json(one_x86)
        if err:
            errors.setdefault(m, []).append(f"coverage threads={t}: {err}")
    elif not args.fp32_only:
        coverage_run = next((r for r in reversed(rounds["qhost_int8"]) if r), None)
    row["coverage"] = coverage_of(coverage_run, boundary_transposes(qdq)) if qdq else None
    for side in SIDES:
        row[side] = summarize(rounds[side])
    row["int8_over_ort"] = ratio(row["qhost_int8"], row["ort_int8"])
    row["int8_over_fp32"] = ratio(row["qhost_int8"], row["qhost_fp32"])
    row["fp32_over_ort"] = ratio(row["qhost_fp32"], row["ort_fp32"])
    if args.check_coverage:
        probs = coverage_problems(row["coverage"])
        if probs:
            errors.setdefault(m, []).append(f"coverage threads={t}: " + "; ".join(probs))
    return row


def print_transformer_table(results, args, errors):
    print("\nparity: max |qhost fp32 - ORT fp32| / max |ORT fp32|. quantize: per backend, ok or FAIL "
          "(the error below). nodes: quantized/float in the x86 report. i8~ORT: max |qhost x86 int8 - "
          "ORT int8| / max |ORT int8| on the same QDQ file, and the SQNR (dB) of qhost's output against "
          "ORT's. MACs: share of the int8 MACs on the x86 plugin's kernels.")
    if not args.coverage_only:
        print(f"latency: median of {args.rounds} round medians, each {args.runs} runs after {args.warmup} "
              f"warm-up; rounds alternate qhost int8, ORT int8, qhost fp32, ORT fp32")
    qcol = "/".join(b[:3] for b in args.backends)
    head = (f"{'model':<14}{'thr':>3}  {'parity':>8}  {qcol:>11}  {'nodes q/f':>10}  {'i8~ORT':>8}  "
            f"{'SQNR':>5}  {'MACs':>6}")
    if not args.coverage_only:
        head += (f"  {'int8 ms':>8}  {'ORT i8':>8}  {'i8/ORT':>6}  {'i8/fp32':>7}  {'fp32 ms':>8}  "
                 f"{'ORT fp32':>8}  {'fp32/ORT':>8}")
    print(head)
    print("-" * len(head))
    for r in results:
        q = r["quantize"]
        ok = "/".join("ok" if q[b]["ok"] else "FAIL" for b in args.backends)
        x = q.get("x86", {})
        nodes = f"{x['quantized']}/{x['float']}" if x.get("ok") else "n/a"
        c = r["coverage"]
        mac = "n/a" if c is None or c["plugin_mac_share"] is None else f"{100 * c['plugin_mac_share']:.1f}%"
        sq = r.get("int8_sqnr_vs_ort")
        sq = "exact" if r.get("int8_exact") else "n/a" if sq is None else f"{sq:.1f}"
        line = (f"{r['model']:<14}{r['threads']:>3}  {f2(r['parity'], '.1e'):>8}  {ok:>11}  {nodes:>10}  "
                f"{f2(r.get('int8_vs_ort'), '.1e'):>8}  {sq:>5}  {mac:>6}")
        if not args.coverage_only:
            line += (f"  {ms(r['qhost_int8']):>8}  {ms(r['ort_int8']):>8}  {f2(r['int8_over_ort']):>6}  "
                     f"{f2(r['int8_over_fp32']):>7}  {ms(r['qhost_fp32']):>8}  {ms(r['ort_fp32']):>8}  "
                     f"{f2(r['fp32_over_ort']):>8}")
        print(line)
    if not args.coverage_only:
        for t in args.threads:
            g = geomean([r["int8_over_ort"] for r in results if r["threads"] == t])
            g32 = geomean([r["fp32_over_ort"] for r in results if r["threads"] == t])
            print(f"geomean {t} thread(s): int8/ORT int8 {f2(g)}, qhost fp32/ORT fp32 {f2(g32)}")
    for m, errs in errors.items():
        for e in errs:
            print(f"FAILED {m}: {e}")


def main():
    ap = argparse.ArgumentParser(description="torchvision CNN and transformer zoo: qhost int8/fp32 vs ONNX Runtime")
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--family", choices=("cnn", "transformers"), default="cnn")
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--models", help="comma-separated; default: the whole family")
    ap.add_argument("--backends", default=",".join(BACKENDS),
                    help="transformers: the backends to quantize for (x86 is the one timed)")
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--calib-samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0, help="seed of the calibration data")
    ap.add_argument("--workdir", help="keep the exports here and reuse them (default: a temp dir)")
    ap.add_argument("--coverage-only", action="store_true", help="parity and coverage, no timing")
    ap.add_argument("--fp32-only", action="store_true",
                    help="time only qhost fp32 and ORT fp32 (parity and coverage as usual)")
    ap.add_argument("--check-coverage", action="store_true",
                    help="fail unless >= 99%% MACs and every conv/linear on the plugin, no layout transposes")
    ap.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    args = ap.parse_args()
    family = TRANSFORMERS if args.family == "transformers" else MODELS
    models = [m for m in (args.models or ",".join(family)).split(",") if m]
    bad = [m for m in models if m not in family]
    if bad or not models:
        ap.error(f"unknown model(s) {bad}; choose from {', '.join(family)}")
    args.backends = [b for b in args.backends.split(",") if b]
    if not args.backends or any(b not in BACKENDS for b in args.backends) or "x86" not in args.backends:
        ap.error(f"--backends: a comma-separated subset of {', '.join(BACKENDS)} that includes x86")
    if args.runs < 1 or args.warmup < 0 or args.rounds < 1 or args.calib_samples < 1 or args.size < 32:
        ap.error("--runs, --rounds, --calib-samples must be positive, --warmup non-negative, --size >= 32")
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else \
        (lambda *a: print(*a, flush=True))

    cpu = cpu_info()
    say(f"CPU: {cpu['model']} ({cpu['cores']} logical cores)")
    say("ISA: " + " ".join(f"{f}={'yes' if v else 'no'}" for f, v in cpu["flags"].items()))
    load_before = os.getloadavg()
    say(f"load average at start: {' '.join(f'{v:.2f}' for v in load_before)}")
    say(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")

    node = shutil.which("node")
    have_ort = node is not None and os.path.isdir(os.path.join(args.ort_dir, "node_modules", "onnxruntime-node"))
    if not have_ort:
        say("SKIP ORT: node or onnxruntime-node not installed; ORT columns are n/a")
        node = None
    ort_js = os.path.join(args.ort_dir, "ort_bench.js")

    tmp = None
    workdir = args.workdir
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="qhost-bench-zoo-")
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)
    import torch
    torch.set_num_threads(1)

    qargs = types.SimpleNamespace(qhost=args.qhost, quant_backend="x86", simulate_avx2=False,
                                  calib_samples=args.calib_samples, seed=args.seed)
    failed, results, errors = [], [], {}
    for m in models:
        quant = None
        try:
            if args.family == "transformers":
                onnx_path, calib_path, x_path = export_transformer(workdir, m, say)
            else:
                onnx_path, x_path = export(workdir, m, args.size, say)
        except Exception as e:  # noqa: BLE001 - any export failure is this model's failure
            errors.setdefault(m, []).append(f"export: {type(e).__name__}: {e}")
            failed.append(m)
            say(f"FAIL export {m}: {e}")
            continue
        if args.family == "transformers":
            quant, qdq = {}, None
            for b in args.backends:
                path, quant[b] = quantize_backend(args.qhost, workdir, m, b, onnx_path, calib_path, say)
                if not quant[b]["ok"]:
                    errors.setdefault(m, []).append(f"quantize {b}: {quant[b]['error']}")
                    say(f"FAIL qhost quantize {m} for {b}: {quant[b]['error']}")
                elif b == "x86":
                    qdq = path
        else:
            qdq, _rep, err = ensure_qdq_model(qargs, workdir, stem(m, args.size), onnx_path, x_path, say)
            if err:
                errors.setdefault(m, []).append(f"quantize: {err}")
                failed.append(m)
                say(f"FAIL qhost quantize {m}: {err}")
                continue
        for t in args.threads:
            row = measure(args, node, ort_js, m, onnx_path, x_path, qdq, t, workdir, errors)
            if quant is not None:
                row["quantize"] = quant
                row["int8_vs_ort"] = row["int8_sqnr_vs_ort"] = None
                if qdq:
                    rel, sqnr, err = int8_agreement(args.qhost, node, args.ort_dir, qdq, x_path, t, workdir)
                    if err:
                        errors.setdefault(m, []).append(f"int8 agreement threads={t}: {err}")
                    # identical outputs: no SQNR (JSON has no infinity), int8_exact instead
                    row["int8_exact"] = sqnr is not None and math.isinf(sqnr)
                    row["int8_vs_ort"], row["int8_sqnr_vs_ort"] = rel, None if row["int8_exact"] else sqnr
            results.append(row)
            say(f"measured {m} threads={t}")
        if m in errors and m not in failed:
            failed.append(m)
            for e in errors[m]:
                say(f"FAIL {m}: {e}")

    load_after = os.getloadavg()
    if args.json:
        json.dump({"schema_version": 1, "family": args.family, "cpu": cpu, "models": models,
                   "threads": args.threads, "backends": args.backends,
                   "size": args.size, "runs": args.runs, "warmup": args.warmup, "rounds": args.rounds,
                   "calib_samples": args.calib_samples, "seed": args.seed,
                   "bn_batches": BN_BATCHES, "bn_batch_size": BN_BATCH_SIZE, "opset": OPSET,
                   "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                   "load_average_before": load_before, "load_average_after": load_after,
                   "results": results, "errors": errors, "ok": not failed}, sys.stdout, indent=1)
        print()
    else:
        if args.family == "transformers":
            print_transformer_table(results, args, errors)
        else:
            print_table(results, args)
        print(f"load average (1/5/15 min): before {' '.join(f'{v:.2f}' for v in load_before)}, "
              f"after {' '.join(f'{v:.2f}' for v in load_after)}")
        print(f"failed: {', '.join(failed) if failed else 'none'}")
    if tmp is not None:
        tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
