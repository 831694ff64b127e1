#!/usr/bin/python3
"""Time qhost's fp32 executor against ONNX Runtime on the same models and inputs.

  bench_fp32_vs_ort.py --qhost PATH [--ort-dir tests/ort] [--models resnet18,mobilenet_v2]
                       [--threads 1,2] [--warmup 3] [--runs 20] [--workdir DIR] [--json]

Prints the CPU and its relevant ISA flags, exports each model once (with
tests/parity/export_models.py), then for every model and thread count runs
`qhost bench --json` and tests/ort/ort_bench.js on the same file and input and
prints median [min-max] milliseconds for both and the ratio qhost/ORT (below 1
means qhost is faster). Both sides time only the inference call, after warm-up.
With --json the same figures go to stdout as one JSON object.
Exit 0 when every measurement ran, 1 otherwise, 2 usage.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
import export_models  # noqa: E402

ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")


def cpu_info():
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model in ("", platform.machine()):
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {"model": model, "cores": os.cpu_count(),
            "flags": {f: f in flags for f in ISA_FLAGS}}


def run_json(cmd):
    """Runs a bench command; returns (parsed JSON, None) or (None, error text)."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return None, f"exit {r.returncode}: {lines[-1] if lines else '(no message)'}"
    try:
        out = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        return None, f"bad JSON from {cmd[0]}: {e}"
    if out.get("schema_version") != 1 or "median_ms" not in out:
        return None, f"unexpected JSON from {cmd[0]}: {r.stdout.strip()[:200]}"
    return out, None


def fmt(m):
    if m is None:
        return "n/a"
    return f"{m['median_ms']:.2f} [{m['min_ms']:.2f}-{m['max_ms']:.2f}]"


def int_list(text):
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text}")
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"need positive integers: {text}")
    return vals


def main():
    ap = argparse.ArgumentParser(description="qhost fp32 vs ONNX Runtime latency")
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--workdir", help="keep the exported models here (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    bad = [m for m in models if m not in export_models.MODELS]
    if bad or not models:
        ap.error(f"unknown model(s) {bad}; choose from {', '.join(export_models.MODELS)}")
    if args.runs < 1 or args.warmup < 0:
        ap.error("--runs must be positive and --warmup non-negative")
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
        tmp = tempfile.TemporaryDirectory(prefix="qhost-bench-")
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)
    import torch
    torch.set_num_threads(1)
    for m in models:
        t0 = time.perf_counter()
        export_models.export(workdir, m)
        say(f"exported {m} in {time.perf_counter() - t0:.1f} s")

    results, failed = [], False
    for m in models:
        onnx_path = os.path.join(workdir, m + ".onnx")
        x_path = os.path.join(workdir, m + ".input.npy")
        for t in args.threads:
            common = ["--threads", str(t), "--warmup", str(args.warmup), "--runs", str(args.runs)]
            q, qerr = run_json([args.qhost, "bench", onnx_path, "--input", x_path] + common +
                               ["--json"])
            o, oerr = (run_json([node, ort_js, onnx_path, x_path] + common) if have_ort
                       else (None, "ORT not installed"))
            for who, err in (("qhost", qerr), ("ORT", oerr if have_ort else None)):
                if err:
                    say(f"FAIL {who} bench {m} threads={t}: {err}")
                    failed = True
            ratio = q["median_ms"] / o["median_ms"] if q and o and o["median_ms"] > 0 else None
            results.append({"model": m, "threads": t, "qhost": q, "ort": o, "ratio": ratio})

    if args.json:
        json.dump({"schema_version": 1, "cpu": cpu, "warmup": args.warmup, "runs": args.runs,
                   "results": results}, sys.stdout, indent=1)
        print()
    else:
        print(f"\nmedian [min-max] ms over {args.runs} runs after {args.warmup} warm-up")
        head = f"{'model':<14}{'threads':>8}  {'qhost':<26}{'ORT':<26}{'qhost/ORT':>9}"
        print(head)
        print("-" * len(head))
        for r in results:
            ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "n/a"
            print(f"{r['model']:<14}{r['threads']:>8}  {fmt(r['qhost']):<26}{fmt(r['ort']):<26}"
                  f"{ratio:>9}")
        blas = {r["qhost"].get("blas") for r in results if r["qhost"]}
        print("qhost fp32 GEMM: " + ", ".join(sorted(b for b in blas if b)))
    if tmp is not None:
        tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
