#!/usr/bin/python3
"""Check that `qhost run` reproduces PyTorch (and ONNX Runtime) on one model.

  check_parity.py --qhost PATH --model NAME --workdir DIR
                  [--ort-dir tests/ort] [--threads N] [--require-ort] [--tol 1e-4]

Exports MODEL with export_models.py into DIR, runs qhost on the exported input
and compares with PyTorch's output; when node and onnxruntime-node are present
it also runs tests/ort/ort_run.js on the same file and compares qhost with ORT.
The measure is rel = max|a - b| / max|b| (b the reference), which must be <= tol.
Without ORT the ORT comparison is skipped with a message, unless --require-ort.
Exit 0 pass, 1 fail, 2 usage.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import export_models  # noqa: E402


def rel_error(a, b):
    """max|a-b| / max|b|; falls back to the absolute error for an all-zero b."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shape {a.shape} differs from reference shape {b.shape}")
    if not np.all(np.isfinite(a)):
        return float("inf")
    if a.size == 0:
        return 0.0
    diff = float(np.max(np.abs(a - b)))
    scale = float(np.max(np.abs(b)))
    return diff / scale if scale > 0 else diff


def compare(what, model, got_path, ref_path, tol):
    """Prints one summary line; returns True on pass."""
    try:
        rel = rel_error(np.load(got_path), np.load(ref_path))
    except (ValueError, OSError) as e:
        print(f"FAIL {what:<16} model={model} {e}")
        return False
    ok = rel <= tol
    print(f"{'PASS' if ok else 'FAIL'} {what:<16} model={model} rel={rel:.3e} (tol {tol:.0e})")
    return ok


def run(cmd, what):
    """Runs a command; returns True on exit 0, else prints its stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL {what}: exit {r.returncode}: {' '.join(cmd)}")
        sys.stdout.write(r.stderr if r.stderr.endswith("\n") or not r.stderr else r.stderr + "\n")
        return False
    return True


def ort_available(ort_dir):
    """Returns (node path or None, reason it is missing or None)."""
    node = shutil.which("node")
    if node is None:
        return None, "node not found"
    if not os.path.isdir(os.path.join(ort_dir, "node_modules", "onnxruntime-node")):
        return None, "onnxruntime-node not installed"
    return node, None


def main():
    ap = argparse.ArgumentParser(description="qhost vs PyTorch/ONNX Runtime parity on one model")
    ap.add_argument("--qhost", required=True, help="path of the qhost binary")
    ap.add_argument("--model", required=True, choices=export_models.MODELS)
    ap.add_argument("--workdir", required=True, help="directory for exported files and outputs")
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--require-ort", action="store_true", help="missing ORT is a failure")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    if args.threads < 1:
        ap.error("--threads must be positive")

    os.makedirs(args.workdir, exist_ok=True)
    import torch
    torch.set_num_threads(1)
    onnx_path = export_models.export(args.workdir, args.model)
    base = os.path.join(args.workdir, args.model)
    x_path, torch_path = base + ".input.npy", base + ".torch.npy"
    qhost_path, ort_path = base + ".qhost.npy", base + ".ort.npy"
    for p in (qhost_path, ort_path):
        if os.path.exists(p):
            os.remove(p)

    ok = True
    qhost_ok = run([args.qhost, "run", onnx_path, "--input", x_path, "-o", qhost_path,
                    "--threads", str(args.threads)], "qhost run")
    if qhost_ok:
        ok &= compare("qhost vs torch", args.model, qhost_path, torch_path, args.tol)
    else:
        ok = False

    node, missing = ort_available(args.ort_dir)
    if node is None:
        if args.require_ort:
            print(f"FAIL ORT required: {missing}")
            ok = False
        else:
            print(f"SKIP ORT: {missing}")
    elif run([node, os.path.join(args.ort_dir, "ort_run.js"), onnx_path, x_path, ort_path,
              "--threads", str(args.threads)], "ort_run.js"):
        # ORT against torch checks the reference itself: a failure here means
        # the export, not qhost, is suspect.
        ok &= compare("ort vs torch", args.model, ort_path, torch_path, args.tol)
        if qhost_ok:
            ok &= compare("qhost vs ort", args.model, qhost_path, ort_path, args.tol)
    else:
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
