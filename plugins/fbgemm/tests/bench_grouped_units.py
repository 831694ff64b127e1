#!/usr/bin/python3
"""Same-run speed of the fbgemm plugin's grouped convolution units against the x86
plugin's (oneDNN) on one QDQ file: alternating rounds of `qhost bench --backend fbgemm`
and `qhost bench --backend x86` (--json, --no-fp32), the per-unit times (the host's
per-unit timing, schema_version 1) of every unit fbgemm runs on
fbgemm_group_conv2d_nhwc_qu8_qs8w, summed per round; prints the medians over the rounds,
their ratio, the sum of each unit's median over the rounds and that ratio, the per-shape ratios (units grouped by their weight's shape), the load
average before and after, and the CPU model.

  bench_grouped_units.py --qhost PATH MODEL.qdq.onnx [--input X.npy] [--rounds 3]
                         [--runs 10] [--threads 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

GROUP_KERNEL = "fbgemm_group_conv2d_nhwc_qu8_qs8w"


def bench(args, backend):
    cmd = [args.qhost, "bench", "--backend", backend, args.model, "--json", "--no-fp32", "--runs",
           str(args.runs), "--warmup", "2", "--threads", str(args.threads)]
    if args.input:
        cmd += ["--input", args.input]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {u["name"]: u for u in json.loads(out)["coverage"]["units"]}


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qhost", required=True)
    ap.add_argument("model")
    ap.add_argument("--input")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    load0 = os.getloadavg()
    totals = {"fbgemm": [], "x86": []}
    per_unit = {"fbgemm": {}, "x86": {}}
    names, kernels_x86 = None, set()
    for _ in range(args.rounds):
        for backend in ("fbgemm", "x86"):
            units = bench(args, backend)
            if names is None and backend == "fbgemm":
                names = [n for n, u in units.items() if u.get("kernel") == GROUP_KERNEL]
                if not names:
                    print("no unit runs on " + GROUP_KERNEL, file=sys.stderr)
                    return 1
            missing = [n for n in names if n not in units]
            if missing:
                print(f"{backend}: units missing: {missing[:3]}", file=sys.stderr)
                return 1
            if backend == "x86":
                kernels_x86.update(units[n].get("kernel") for n in names)
            totals[backend].append(sum(units[n]["time_ms"] for n in names))
            for n in names:
                per_unit[backend].setdefault(n, []).append(units[n]["time_ms"])
    load1 = os.getloadavg()
    fb, x86 = statistics.median(totals["fbgemm"]), statistics.median(totals["x86"])
    print(f"model: {os.path.basename(args.model)}; CPU: {cpu_model()}; threads {args.threads}; "
          f"{args.rounds} alternating rounds of {args.runs} runs; load average {load0[0]:.1f} -> {load1[0]:.1f}")
    print(f"{len(names)} grouped units; x86 runs them on: {', '.join(sorted(k or '?' for k in kernels_x86))}")
    print(f"per round, fbgemm ms: {', '.join(f'{t:.3f}' for t in totals['fbgemm'])}; "
          f"x86 ms: {', '.join(f'{t:.3f}' for t in totals['x86'])}")
    print(f"median of the round sums: fbgemm {fb:.3f} ms, x86 {x86:.3f} ms, fbgemm/x86 {fb / x86:.2f}")
    sf = sum(statistics.median(v) for v in per_unit["fbgemm"].values())
    sx = sum(statistics.median(v) for v in per_unit["x86"].values())
    print(f"sum of the units' medians over the rounds (robust to one slow round): fbgemm {sf:.3f} ms, "
          f"x86 {sx:.3f} ms, fbgemm/x86 {sf / sx:.2f}")
    macs = {}
    for n in names:
        med_f = statistics.median(per_unit["fbgemm"][n])
        med_x = statistics.median(per_unit["x86"][n])
        key = per_unit_key(n)
        macs.setdefault(key, [0.0, 0.0, 0])
        macs[key][0] += med_f
        macs[key][1] += med_x
        macs[key][2] += 1
    print("by stage (units' median times summed):")
    for key, (f, x, cnt) in macs.items():
        print(f"  {key:40s} {cnt:2d} units  fbgemm {f:8.3f} ms  x86 {x:8.3f} ms  fbgemm/x86 {f / x:5.2f}")
    return 0


def per_unit_key(name):
    """A stage name from the unit's (torchvision export's) name: resnext's layerN,
    regnet's blockN; else the whole name."""
    for part in name.split("/"):
        if part.startswith("layer") or (part.startswith("block") and "-" not in part):
            return part
    return name


if __name__ == "__main__":
    sys.exit(main())
