#!/usr/bin/python3
"""Time `qhost quantize --dynamic` files against ONNX Runtime on the same files.

  bench_dynamic.py --qhost PATH [--ort-dir tests/ort] [--layers 2] [--hidden 256]
                   [--seq 128] [--threads 1] [--rounds 3] [--runs 10] [--workdir DIR]
                   [--x86-plugin-dir DIR]

Builds an encoder from nn.Linear (tests/parity/dynamic/check_dynamic.py's Encoder, stacked
--layers deep, 4 heads, feed-forward 4x hidden, random seeded weights), exports it at
opset 13, quantizes it with `qhost quantize --dynamic`, then alternates --rounds rounds of
  (a) `qhost bench --json` on the dynamic file (the host's reference kernels),
  (b) tests/ort/ort_bench.js on the dynamic file (ONNX Runtime, all optimisations),
  (c) `qhost bench --json` on the float file, (d) ONNX Runtime on the float file,
and with --x86-plugin-dir (a) again with `--backend x86` (x86's dynamic_linear units,
docs/dynamic.md), at the same thread count on the same input, and prints the median of the round medians
and the ratios qhost dynamic / ORT dynamic and qhost dynamic / qhost fp32. Information
only: no bar is checked.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity", "dynamic"))
from check_dynamic import Encoder  # noqa: E402


class Stack(nn.Module):
    def __init__(self, layers, hidden):
        super().__init__()
        self.layers = nn.ModuleList(Encoder(hidden, 4, 4 * hidden) for _ in range(layers))
        for layer in self.layers:  # the head of each layer maps back to the hidden size
            layer.head = nn.Linear(hidden, hidden)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--ort-dir", default=os.path.join(os.path.dirname(__file__), "..", "tests", "ort"))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--workdir", default="/tmp/qhost-bench-dynamic")
    ap.add_argument("--x86-plugin-dir", default=None, help="also time the dynamic file with --backend x86")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)
    model = Stack(args.layers, args.hidden).eval()
    x = torch.randn(1, args.seq, args.hidden)
    fpath = os.path.join(args.workdir, "encoder.onnx")
    dpath = os.path.join(args.workdir, "encoder.dyn.onnx")
    xpath = os.path.join(args.workdir, "x.npy")
    torch.onnx.export(model, (x,), fpath, opset_version=13, input_names=["x"], output_names=["y"])
    np.save(xpath, x.numpy())
    subprocess.run([args.qhost, "quantize", "--dynamic", fpath, "-o", dpath], check=True,
                   stdout=subprocess.DEVNULL)
    t = str(args.threads)
    cmds = {
        "qhost dynamic": [args.qhost, "bench", dpath, "--input", xpath, "--threads", t, "--json",
                          "--runs", str(args.runs), "--no-fp32"],
        "ORT dynamic": ["node", os.path.join(args.ort_dir, "ort_bench.js"), dpath, xpath, "--threads", t,
                        "--runs", str(args.runs)],
        "qhost fp32": [args.qhost, "bench", fpath, "--input", xpath, "--threads", t, "--json",
                       "--runs", str(args.runs)],
        "ORT fp32": ["node", os.path.join(args.ort_dir, "ort_bench.js"), fpath, xpath, "--threads", t,
                     "--runs", str(args.runs)],
    }
    if args.x86_plugin_dir:
        cmds["qhost dynamic x86"] = cmds["qhost dynamic"] + ["--backend", "x86", "--plugin-dir", args.x86_plugin_dir]
    medians = {k: [] for k in cmds}
    for _ in range(args.rounds):
        for k, cmd in cmds.items():
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            medians[k].append(json.loads(r.stdout)["median_ms"])
    load = os.getloadavg()[0]
    print(f"CPU: {cpu_name()}; {os.cpu_count()} logical cores; load average {load:.1f}")
    print(f"encoder: {args.layers} layers, hidden {args.hidden}, sequence {args.seq}, threads {args.threads}, "
          f"{args.rounds} rounds x {args.runs} runs")
    med = {k: statistics.median(v) for k, v in medians.items()}
    for k, v in medians.items():
        print(f"  {k:18s} {med[k]:8.2f} ms  [{min(v):.2f}-{max(v):.2f}]")
    print(f"  qhost dynamic / ORT dynamic = {med['qhost dynamic'] / med['ORT dynamic']:.2f}; "
          f"qhost dynamic / qhost fp32 = {med['qhost dynamic'] / med['qhost fp32']:.2f}; "
          f"ORT dynamic / ORT fp32 = {med['ORT dynamic'] / med['ORT fp32']:.2f}")
    if "qhost dynamic x86" in med:
        print(f"  qhost dynamic x86 / ORT dynamic = {med['qhost dynamic x86'] / med['ORT dynamic']:.2f}; "
              f"qhost dynamic x86 / qhost fp32 = {med['qhost dynamic x86'] / med['qhost fp32']:.2f}")


if __name__ == "__main__":
    main()
