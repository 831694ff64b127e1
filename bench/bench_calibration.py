#!/usr/bin/python3
"""Calibration throughput: samples per second of `qhost calibrate` with MinMax and
with Histogram observers, against running the same float model on the same samples
without observers (`qhost run`), all measured in one invocation.

  bench_calibration.py --qhost PATH [--models digits,resnet18] [--samples 64]
                       [--backend fbgemm] [--workdir DIR]

Every command runs twice, on 1 sample and on N samples; the difference divided by
N - 1 is the per-sample cost with process start-up, model loading and the plugin
scan removed. Prints the CPU, then per model: float run ms/sample, MinMax and
Histogram calibration ms/sample, samples per second, and the Histogram overhead per
sample over the float run. Exit 0 when every measurement ran.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
import export_models  # noqa: E402
from bench_fp32_vs_ort import cpu_info  # noqa: E402

MINMAX = {"global": {"activation": {"observer": "MinMaxObserver", "dtype": "quint8",
                                    "quant_min": 0, "quant_max": 127},
                     "weight": {"observer": "PerChannelMinMaxObserver", "dtype": "qint8",
                                "qscheme": "per_channel_symmetric"}}}


def timed(cmd, repeats=3):
    best = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip().splitlines()[-1:]}")
        best = dt if best is None else min(best, dt)
    return best


def per_sample(make_cmd, one, many, n):
    return (timed(make_cmd(many)) - timed(make_cmd(one))) / (n - 1) * 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--models", default="digits,resnet18")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--backend", default="fbgemm")
    ap.add_argument("--workdir")
    args = ap.parse_args()
    if args.samples < 2:
        ap.error("--samples must be at least 2")
    cpu = cpu_info()
    print(f"CPU: {cpu['model']} ({cpu['cores']} logical cores)")
    tmp = tempfile.TemporaryDirectory(prefix="qhost-calib-bench-") if args.workdir is None else None
    work = args.workdir or tmp.name
    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "minmax.json")
    with open(cfg, "w") as f:
        json.dump(MINMAX, f)
    print(f"{'model':<12} {'float run':>10} {'MinMax':>10} {'Histogram':>10} {'MinMax/s':>9} "
          f"{'Hist/s':>8} {'Hist overhead':>14}   (ms per sample; 1 thread)")
    for m in [x for x in args.models.split(",") if x]:
        onnx = export_models.export(work, m)
        x = np.load(os.path.join(work, m + ".input.npy"))[:1]
        rng = np.random.default_rng(0)
        data = (x + 0.1 * rng.standard_normal((args.samples,) + x.shape[1:])).astype(np.float32)
        one, many = os.path.join(work, m + ".calib1.npy"), os.path.join(work, m + ".calibN.npy")
        np.save(one, data[:1])
        np.save(many, data)
        out = os.path.join(work, "out")
        run = per_sample(lambda c: [args.qhost, "run", onnx, "--input", c, "-o", out + ".npy"], one, many,
                         args.samples)
        calib = lambda extra: (lambda c: [args.qhost, "calibrate", "--backend", args.backend, "--calib", c,
                                          "-o", out + ".stats", onnx] + extra)
        mm = per_sample(calib(["--config", cfg]), one, many, args.samples)
        hist = per_sample(calib([]), one, many, args.samples)
        print(f"{m:<12} {run:>10.2f} {mm:>10.2f} {hist:>10.2f} {1000 / mm:>9.1f} {1000 / hist:>8.1f} "
              f"{hist - run:>+11.2f} ms ({hist / run:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
