#!/usr/bin/python3
"""Time qhost on int8 (QDQ) models against ONNX Runtime on the same QDQ files.

  bench_int8_vs_ort.py --qhost PATH [--ort-dir tests/ort] [--models resnet18,mobilenet_v2]
                       [--threads 1,2] [--quant-backend fbgemm] [--calib-samples 8]
                       [--rounds 5] [--warmup 3] [--runs 10] [--qhost-arg ARG ...]
                       [--workdir DIR] [--json]

Prints the CPU and its relevant ISA flags, exports each float model once (with
tests/parity/export_models.py: torchvision, random seeded weights, 1x3x224x224),
quantizes it with `qhost quantize --backend QUANT_BACKEND` on a few seeded random
calibration samples into MODEL.QUANT_BACKEND.qdq.onnx (both cached in --workdir), then
for every model and thread count alternates --rounds rounds of
  (a) `qhost bench --json` on the QDQ file (plus every --qhost-arg, e.g.
      `--qhost-arg=--backend --qhost-arg=scalar_int8 --qhost-arg=--plugin-dir=DIR`),
  (b) tests/ort/ort_bench.js (ONNX Runtime, all optimisations) on the same QDQ file,
  (c) `qhost bench --json` on the float model (without the --qhost-arg arguments),
all at the same thread count on the same input, so drift on a shared machine hits
the three alike. Each round reports its median over --runs timed runs; the table
shows the median of the round medians [lowest-highest round median] and the ratios
qhost QDQ / ORT QDQ and qhost QDQ / qhost fp32. When qhost's JSON has them, the
fields "path", "fp32", "int8_over_fp32" and "coverage" (plugin time and MAC shares)
are shown too; their absence is not an error.
With --json everything goes to stdout as one JSON object.
Exit 0 when every measurement ran, 1 otherwise, 2 usage.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
import export_models  # noqa: E402
from bench_fp32_vs_ort import cpu_info, int_list, run_json  # noqa: E402

SIDES = ("qhost_qdq", "ort_qdq", "qhost_fp32")


def ensure_float_model(workdir, model, say):
    onnx_path = os.path.join(workdir, model + ".onnx")
    x_path = os.path.join(workdir, model + ".input.npy")
    if os.path.exists(onnx_path) and os.path.exists(x_path):
        say(f"using cached {onnx_path}")
        return onnx_path, x_path
    t0 = time.perf_counter()
    export_models.export(workdir, model)
    say(f"exported {model} in {time.perf_counter() - t0:.1f} s")
    return onnx_path, x_path


def calibration_file(workdir, model, x_path, samples, seed):
    """Seeded random rows shaped like the model's input, samples along the first
    axis: the same file for every invocation with the same seed and count."""
    import numpy as np
    path = os.path.join(workdir, f"{model}.calib{samples}.s{seed}.npy")
    if not os.path.exists(path):
        shape = np.load(x_path).shape
        rng = np.random.default_rng(seed)
        np.save(path, rng.standard_normal((samples,) + tuple(shape)).astype(np.float32))
    return path


def ensure_qdq_model(args, workdir, model, onnx_path, x_path, say):
    """Returns (qdq path, quantize report or None, error text or None)."""
    qdq = os.path.join(workdir, f"{model}.{args.quant_backend}.qdq.onnx")
    report = qdq + ".report.json"
    if os.path.exists(qdq) and os.path.exists(report) and \
            os.path.getmtime(qdq) >= os.path.getmtime(onnx_path):
        say(f"using cached {qdq}")
    else:
        calib = calibration_file(workdir, model, x_path, args.calib_samples, args.seed)
        t0 = time.perf_counter()
        r = subprocess.run([args.qhost, "quantize", "--backend", args.quant_backend, "--calib", calib,
                            "-o", qdq, "--report", report, "--quiet", onnx_path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines()
            return None, None, f"exit {r.returncode}: {lines[-1] if lines else '(no message)'}"
        say(f"quantized {model} ({args.quant_backend}, {args.calib_samples} calibration samples) "
            f"in {time.perf_counter() - t0:.1f} s")
    try:
        with open(report) as f:
            rep = json.load(f)
    except (OSError, json.JSONDecodeError):
        rep = None
    return qdq, rep, None


def summarize(rounds):
    """Median of the round medians and their spread; None when no round ran."""
    meds = [r["median_ms"] for r in rounds if r is not None]
    if not meds:
        return None
    return {"median_ms": statistics.median(meds), "lo_ms": min(meds), "hi_ms": max(meds),
            "rounds": len(meds)}


def optional_fields(rounds):
    """The fields the int8 `qhost bench --json` adds, when present: path, the
    in-invocation fp32 median and ratio (median over rounds), coverage shares."""
    got = [r for r in rounds if r is not None]
    if not got:
        return {}
    out = {}
    paths = sorted({r["path"] for r in got if isinstance(r.get("path"), str)})
    if paths:
        out["path"] = paths[0] if len(paths) == 1 else ",".join(paths)

    def med(values):
        values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return statistics.median(values) if values else None
    fp32 = med(r["fp32"].get("median_ms") for r in got if isinstance(r.get("fp32"), dict))
    if fp32 is not None:
        out["fp32_median_ms"] = fp32
    ratio = med(r.get("int8_over_fp32") for r in got)
    if ratio is not None:
        out["int8_over_fp32"] = ratio
    cov = [r["coverage"] for r in got if isinstance(r.get("coverage"), dict)]
    for key in ("plugin_time_share", "plugin_mac_share"):
        v = med(c.get(key) for c in cov)
        if v is not None:
            out[key] = v
    if cov and isinstance(cov[-1].get("units"), list):
        kernels = {}
        for u in cov[-1]["units"]:
            if isinstance(u, dict):
                k = str(u.get("kernel", "?"))
                kernels[k] = kernels.get(k, 0) + 1
        out["units_by_kernel"] = kernels
        out["coverage_units"] = cov[-1]["units"]
    return out


def ratio(a, b):
    return a["median_ms"] / b["median_ms"] if a and b and b["median_ms"] > 0 else None


def fmt_ms(s):
    return "n/a" if s is None else f"{s['median_ms']:.2f} [{s['lo_ms']:.2f}-{s['hi_ms']:.2f}]"


def fmt_num(v, spec=".2f"):
    return "n/a" if v is None else format(v, spec)


def print_table(results, args, blas):
    print(f"\nmedian of {args.rounds} round medians [lowest-highest], each round "
          f"{args.runs} runs after {args.warmup} warm-up; rounds alternate qhost QDQ, ORT QDQ, qhost fp32")
    extra = [k for k in ("path", "int8_over_fp32", "plugin_time_share", "plugin_mac_share")
             if any(k in r["qhost_fields"] for r in results)]
    heads = {"path": f"{'path':<22}", "int8_over_fp32": f"{'in-run int8/fp32':>17}",
             "plugin_time_share": f"{'plugin time':>12}", "plugin_mac_share": f"{'plugin MACs':>12}"}
    head = (f"{'model':<14}{'threads':>7}  {'qhost QDQ ms':<22}{'ORT QDQ ms':<22}{'qhost/ORT':>9}  "
            f"{'qhost fp32 ms':<22}{'QDQ/fp32':>8}") + "".join("  " + heads[k] for k in extra)
    head = head.rstrip()
    print(head)
    print("-" * len(head))
    for r in results:
        f = r["qhost_fields"]
        line = (f"{r['model']:<14}{r['threads']:>7}  {fmt_ms(r['qhost_qdq']):<22}{fmt_ms(r['ort_qdq']):<22}"
                f"{fmt_num(r['qdq_over_ort']):>9}  {fmt_ms(r['qhost_fp32']):<22}"
                f"{fmt_num(r['qdq_over_fp32']):>8}")
        for k in extra:
            if k == "path":
                line += f"  {f.get('path', 'n/a'):<22}".rstrip() if k == extra[-1] else \
                    f"  {f.get('path', 'n/a'):<22}"
            elif k == "int8_over_fp32":
                line += f"  {fmt_num(f.get(k)):>17}"
            else:
                v = f.get(k)
                line += f"  {'n/a' if v is None else f'{100 * v:.1f}%':>12}"
        print(line)
    for r in results:
        kernels = r["qhost_fields"].get("units_by_kernel")
        if kernels:
            print(f"coverage {r['model']} threads={r['threads']}: " +
                  ", ".join(f"{n} units {k}" for k, n in sorted(kernels.items())))
    if not any(r["qhost_fields"] for r in results):
        print("(qhost's JSON has no path/fp32/int8_over_fp32/coverage fields yet)")
    line = "qhost GEMM: " + (", ".join(sorted(blas)) or "n/a")
    if "OPENBLAS_CORETYPE" not in line:
        line += f"; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
    print(line)


def main():
    ap = argparse.ArgumentParser(description="qhost int8 (QDQ) vs ONNX Runtime latency")
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--quant-backend", default="fbgemm",
                    help="backend for `qhost quantize` (default fbgemm)")
    ap.add_argument("--calib-samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0, help="seed of the calibration data")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10, help="timed runs per round and side")
    ap.add_argument("--qhost-arg", action="append", default=[], metavar="ARG",
                    help="extra argument for `qhost bench` on the QDQ model (repeatable)")
    ap.add_argument("--workdir", help="keep the models here and reuse them (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    bad = [m for m in models if m not in export_models.MODELS]
    if bad or not models:
        ap.error(f"unknown model(s) {bad}; choose from {', '.join(export_models.MODELS)}")
    if args.runs < 1 or args.warmup < 0 or args.rounds < 1 or args.calib_samples < 1:
        ap.error("--runs, --rounds and --calib-samples must be positive and --warmup non-negative")
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print

    cpu = cpu_info()
    say(f"CPU: {cpu['model']} ({cpu['cores']} logical cores)")
    say("ISA: " + " ".join(f"{f}={'yes' if v else 'no'}" for f, v in cpu["flags"].items()))

    node = shutil.which("node")
    ort_js = os.path.join(args.ort_dir, "ort_bench.js")
    have_ort = node is not None and os.path.isdir(
        os.path.join(args.ort_dir, "node_modules", "onnxruntime-node"))
    if not have_ort:
        say("SKIP ORT: node or onnxruntime-node not installed; ORT columns are n/a")

    tmp = None
    workdir = args.workdir
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="qhost-bench-int8-")
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)
    import torch
    torch.set_num_threads(1)

    failed = False
    prepared = {}
    for m in models:
        onnx_path, x_path = ensure_float_model(workdir, m, say)
        qdq, rep, err = ensure_qdq_model(args, workdir, m, onnx_path, x_path, say)
        if err:
            say(f"FAIL qhost quantize {m}: {err}")
            failed = True
            continue
        prepared[m] = (onnx_path, x_path, qdq, rep)

    results = []
    for m, (onnx_path, x_path, qdq, rep) in prepared.items():
        for t in args.threads:
            common = ["--threads", str(t), "--warmup", str(args.warmup), "--runs", str(args.runs)]
            cmds = {
                "qhost_qdq": [args.qhost, "bench", qdq, "--input", x_path] + common + ["--json"] +
                             args.qhost_arg,
                "ort_qdq": [node, ort_js, qdq, x_path] + common if have_ort else None,
                "qhost_fp32": [args.qhost, "bench", onnx_path, "--input", x_path] + common + ["--json"],
            }
            rounds = {s: [] for s in SIDES}
            for i in range(args.rounds):
                for side in SIDES:
                    if cmds[side] is None:
                        rounds[side].append(None)
                        continue
                    out, err = run_json(cmds[side])
                    if err:
                        say(f"FAIL {side} {m} threads={t} round {i + 1}: {err}")
                        failed = True
                    rounds[side].append(out)
            s = {side: summarize(rounds[side]) for side in SIDES}
            results.append({
                "model": m, "threads": t, "qdq_file": os.path.basename(qdq),
                **s,
                "qdq_over_ort": ratio(s["qhost_qdq"], s["ort_qdq"]),
                "qdq_over_fp32": ratio(s["qhost_qdq"], s["qhost_fp32"]),
                "qhost_fields": optional_fields(rounds["qhost_qdq"]),
                "round_medians_ms": {side: [r["median_ms"] if r else None for r in rounds[side]]
                                     for side in SIDES},
                "blas": sorted({r.get("blas") for side in ("qhost_qdq", "qhost_fp32")
                                for r in rounds[side] if r and r.get("blas")}),
            })
            say(f"measured {m} threads={t}")

    blas = {b for r in results for b in r["blas"]}
    if args.json:
        json.dump({"schema_version": 1, "cpu": cpu, "quant_backend": args.quant_backend,
                   "calib_samples": args.calib_samples, "seed": args.seed, "rounds": args.rounds,
                   "warmup": args.warmup, "runs": args.runs, "qhost_args": args.qhost_arg,
                   "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                   "results": results, "ok": not failed}, sys.stdout, indent=1)
        print()
    else:
        if args.qhost_arg:
            print("qhost QDQ runs with: " + " ".join(args.qhost_arg))
        print_table(results, args, blas)
    if tmp is not None:
        tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
