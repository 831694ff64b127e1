#!/usr/bin/python3
"""Two qhost builds on the same models, in interleaved rounds: the ratio of a change.

  bench_ab.py --qhost NEW/qhost --baseline-qhost OLD/qhost [--threads 1] [--rounds 5]
              [--runs 5] [--warmup 1] [--backend x86] MODEL.onnx[=INPUT.npy] ...

Per model, each round runs `qhost bench --json` of both builds (the order alternating
from round to round), and also a single-run bench of each, so that the CPU time per run
(user + system of the child, from `--runs` runs less one) leaves model loading out; prints
the median of the round medians (wall) and of the CPU times per run, and new / baseline for
both, with the CPU and the load average before and after. On a loaded machine the wall
times mostly measure the wait for a core; the CPU-time ratio is the steadier figure. With
--backend (each build's plugins from the `plugins` directory beside its qhost) the time per
op kind of the coverage tables (median of the rounds) is printed too (a fused host group's time is
under its head node's op). Information only: exit 0 unless a run fails.
"""
import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def child_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench(args, qhost, model, inp, runs):
    cmd = [qhost, "bench", model, "--threads", str(args.threads), "--json", "--runs", str(runs),
           "--warmup", str(args.warmup)]
    if inp:
        cmd += ["--input", inp]
    if args.backend:
        cmd += ["--backend", args.backend, "--no-fp32", "--plugin-dir",
                os.path.join(os.path.dirname(qhost), "plugins")]
    t = child_cpu_s()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return json.loads(r.stdout), child_cpu_s() - t


def by_kind(j):
    out = collections.defaultdict(float)
    for u in j.get("coverage", {}).get("units", []):
        out[u["ops"]] += u.get("time_ms") or 0.0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--baseline-qhost", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--backend", default=None)
    ap.add_argument("models", nargs="+", help="MODEL.onnx or MODEL.onnx=INPUT.npy")
    args = ap.parse_args()
    if args.runs < 2:
        sys.exit("--runs must be at least 2")
    builds = {"new": os.path.abspath(args.qhost), "baseline": os.path.abspath(args.baseline_qhost)}
    load0 = os.getloadavg()
    print(f"CPU: {cpu_name()}; {os.cpu_count()} logical cores; threads {args.threads}; "
          f"{args.rounds} rounds x {args.runs} runs (warm-up {args.warmup})")
    for spec in args.models:
        model, _, inp = spec.partition("=")
        wall = {k: [] for k in builds}
        cpu = {k: [] for k in builds}
        kinds = {k: collections.defaultdict(list) for k in builds}
        for r in range(args.rounds):
            for name in (("new", "baseline") if r % 2 == 0 else ("baseline", "new")):
                j, t_many = bench(args, builds[name], model, inp, args.runs)
                _, t_one = bench(args, builds[name], model, inp, 1)
                wall[name].append(j["median_ms"])
                cpu[name].append(1000 * (t_many - t_one) / (args.runs - 1))
                for kind, ms in by_kind(j).items():
                    kinds[name][kind].append(ms)
        w = {k: statistics.median(v) for k, v in wall.items()}
        c = {k: statistics.median(v) for k, v in cpu.items()}
        print(f"{os.path.basename(model)}: wall new {w['new']:.2f} ms, baseline {w['baseline']:.2f} ms, "
              f"new / baseline {w['new'] / w['baseline']:.3f}; CPU per run new {c['new']:.2f} ms, baseline "
              f"{c['baseline']:.2f} ms, new / baseline {c['new'] / c['baseline']:.3f}")
        if args.backend:
            for name in builds:
                med = sorted(((k, statistics.median(v)) for k, v in kinds[name].items()), key=lambda kv: -kv[1])
                print(f"   {name} (ms per op kind, median of the rounds): " +
                      "; ".join(f"{k} {v:.2f}" for k, v in med[:12]))
    load1 = os.getloadavg()
    print(f"load average before {load0[0]:.1f} / {load0[1]:.1f} / {load0[2]:.1f}, after {load1[0]:.1f} / "
          f"{load1[1]:.1f} / {load1[2]:.1f}")


if __name__ == "__main__":
    main()
