#!/usr/bin/python3
"""Issue 18's speed bars on the BERT-base-sized encoder, all figures from one run.

  bench_bert.py --qhost PATH [--plugin-dir DIR] [--ort-dir tests/ort] [--threads 1]
                [--rounds 3] [--runs 5] [--warmup 1] [--workdir DIR] [--only static|dynamic]
                [--cpu-time] [--baseline-qhost PATH [--baseline-plugin-dir DIR]]

Builds tests/parity/quant/check_transformers.py's BertBase (token embedding, 12
nn.TransformerEncoderLayers of hidden 768, 12 heads, feed-forward 3072, GELU, padding
mask; sequence 128; random seeded weights), exported at opset 14 as that check does, and
quantizes it twice: static for x86 (`qhost quantize --backend x86`, its 4 calibration
samples) and dynamic (`qhost quantize --dynamic`). Then alternates --rounds rounds of
  qhost x86 static int8   `qhost bench --backend x86` on the QDQ file
  ORT static int8         tests/ort/ort_bench.js on the same QDQ file (all optimisations)
  qhost fp32              `qhost bench` on the float file
  qhost x86 dynamic       `qhost bench --backend x86` on the dynamic file
  ORT dynamic             ONNX Runtime on the same dynamic file
  ORT fp32                ONNX Runtime on the float file (for reference)
at the same thread count on the same input, and prints the median of the round medians,
the CPU (and whether qhost sees VNNI), the load average before and after, the ratios, and
whether each bar holds: static int8 <= ORT static, qhost fp32 / static int8 >= 1.7 (on a
VNNI CPU), dynamic int8 <= ORT dynamic. `--only dynamic` runs the two dynamic paths and
ORT fp32 (`--only static` the rest), for a quicker look at one bar. `--cpu-time` also
prints each path's CPU time per run (user + system of the child, all its threads), from
a run of warmup + runs minus one of a single run, so that loading the model cancels out:
on a loaded machine, where wall times mostly measure the wait for a core, the ratios of
CPU times are the steadier figure (cache contention still inflates both).
`--baseline-qhost` adds another build's qhost (and its x86 plugin) on the same files in the
same rounds, `baseline x86 static` / `baseline x86 dynamic` / `baseline fp32`, to measure a
change. Information only: the exit status is 0 whether
or not the bars hold; the coverage of both int8 runs (time per op kind) is printed too.
"""
import argparse
import collections
import json
import os
import platform
import resource
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity", "quant"))


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def sees_vnni():
    flags = open("/proc/cpuinfo").read().split()
    hidden = os.environ.get("QHOST_CPU_DISABLE", "")
    return any(f in flags and f.replace("_", "") not in hidden for f in ("avx512_vnni", "avx_vnni"))


def time_split(bench_json):
    """ms per op kind of a `qhost bench --json` coverage table, largest first."""
    by = collections.defaultdict(float)
    for u in bench_json.get("coverage", {}).get("units", []):
        kind = u["ops"] if u.get("kernel") == "host:reference" else f"{u['ops']} ({u['kernel']})"
        by[kind] += u.get("time_ms") or 0.0
    return sorted(by.items(), key=lambda kv: -kv[1])


def child_cpu_s():
    """User + system seconds of every child waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def once(cmd):
    """cmd with one run and no warm-up: what loading and a single run cost."""
    out, skip = [], False
    for i, a in enumerate(cmd):
        if skip:
            skip = False
            continue
        if a in ("--runs", "--warmup"):
            out += [a, "1" if a == "--runs" else "0"]
            skip = True
        else:
            out.append(a)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--plugin-dir", default=None, help="where libqhost-x86.so is (default: next to qhost)")
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--workdir", default="/tmp/qhost-bench-bert")
    ap.add_argument("--baseline-qhost", default=None, help="another build's qhost, run in the same rounds")
    ap.add_argument("--baseline-plugin-dir", default=None, help="its plugins (default: next to it)")
    ap.add_argument("--cpu-time", action="store_true", help="also CPU time per run (see above)")
    ap.add_argument("--only", choices=("static", "dynamic"), default=None,
                    help="run only the paths of one bar (dynamic: qhost and ORT dynamic, ORT fp32)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    qhost = os.path.abspath(args.qhost)
    plugin_dir = args.plugin_dir or os.path.join(os.path.dirname(qhost), "plugins")
    backend = ["--backend", "x86", "--plugin-dir", plugin_dir]
    import check_transformers  # noqa: E402  (tests/parity/quant)
    fpath, calib, xpath, _ = check_transformers.export(args.workdir, "bert_base")
    spath = os.path.join(args.workdir, "bert_base.x86.qdq.onnx")
    dpath = os.path.join(args.workdir, "bert_base.dyn.onnx")
    if not os.path.exists(spath):
        subprocess.run([qhost, "quantize", fpath, *backend, "--calib", calib, "-o", spath, "--quiet"], check=True)
    if not os.path.exists(dpath):
        subprocess.run([qhost, "quantize", "--dynamic", fpath, "-o", dpath, "--quiet"], check=True)
    t, runs, warm = str(args.threads), str(args.runs), str(args.warmup)
    qb = [qhost, "bench", "--input", xpath, "--threads", t, "--json", "--runs", runs, "--warmup", warm]
    ort = ["node", os.path.join(args.ort_dir, "ort_bench.js")]
    ort_tail = [xpath, "--threads", t, "--runs", runs, "--warmup", warm]
    cmds = {
        "qhost x86 static": qb[:2] + [spath] + qb[2:] + ["--no-fp32", *backend],
        "ORT static": ort + [spath] + ort_tail,
        "qhost fp32": qb[:2] + [fpath] + qb[2:],
        "qhost x86 dynamic": qb[:2] + [dpath] + qb[2:] + ["--no-fp32", *backend],
        "ORT dynamic": ort + [dpath] + ort_tail,
        "ORT fp32": ort + [fpath] + ort_tail,
    }
    if args.baseline_qhost:
        bq = os.path.abspath(args.baseline_qhost)
        bb = ["--backend", "x86", "--plugin-dir", args.baseline_plugin_dir or os.path.join(os.path.dirname(bq), "plugins")]
        cmds["baseline x86 static"] = [bq] + cmds["qhost x86 static"][1:-len(backend)] + bb
        cmds["baseline x86 dynamic"] = [bq] + cmds["qhost x86 dynamic"][1:-len(backend)] + bb
        cmds["baseline fp32"] = [bq] + cmds["qhost fp32"][1:]
    wanted = {"static": ("qhost x86 static", "ORT static", "qhost fp32", "ORT fp32"),
              "dynamic": ("qhost x86 dynamic", "ORT dynamic", "ORT fp32")}.get(args.only, tuple(cmds))
    wanted += tuple(k for k in cmds if k.startswith("baseline") and
                    ((args.only or "") in k or (k == "baseline fp32" and args.only != "dynamic")))
    cmds = {k: v for k, v in cmds.items() if k in wanted}
    load0 = os.getloadavg()
    medians = {k: [] for k in cmds}
    cpu = {k: [] for k in cmds}
    last = {}
    n_timed = args.warmup + args.runs - 1
    for _ in range(args.rounds):
        for k, cmd in cmds.items():
            t = child_cpu_s()
            r = subprocess.run(cmd, capture_output=True, text=True)
            t = child_cpu_s() - t
            if r.returncode != 0:
                sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
            last[k] = json.loads(r.stdout)
            medians[k].append(last[k]["median_ms"])
            if args.cpu_time and n_timed > 0:
                one = once(cmd)
                t1 = child_cpu_s()
                subprocess.run(one, capture_output=True, text=True, check=True)
                cpu[k].append(1000 * (t - (child_cpu_s() - t1)) / n_timed)
    load1 = os.getloadavg()
    vnni = sees_vnni()
    print(f"CPU: {cpu_name()}; {os.cpu_count()} logical cores; VNNI seen by qhost: {'yes' if vnni else 'no'}")
    print(f"load average before {load0[0]:.1f} / {load0[1]:.1f} / {load0[2]:.1f}, after {load1[0]:.1f} / "
          f"{load1[1]:.1f} / {load1[2]:.1f}")
    print(f"BERT-base encoder: 12 layers, hidden 768, sequence 128, threads {args.threads}, "
          f"{args.rounds} rounds x {args.runs} runs (warm-up {args.warmup})")
    med = {k: statistics.median(v) for k, v in medians.items()}
    for k, v in medians.items():
        print(f"  {k:18s} {med[k]:9.2f} ms  [{min(v):.2f}-{max(v):.2f}]")
    if any(cpu.values()):
        cmed = {k: statistics.median(v) for k, v in cpu.items() if v}
        print("CPU time per run (median of the rounds):")
        for k, v in cpu.items():
            print(f"  {k:18s} {cmed[k]:9.2f} ms  [{min(v):.2f}-{max(v):.2f}]")
        if "ORT dynamic" in cmed:
            print(f"  CPU: dynamic int8 / ORT dynamic = {cmed['qhost x86 dynamic'] / cmed['ORT dynamic']:.2f}")
        if "baseline x86 dynamic" in cmed:
            print(f"  CPU: dynamic int8 / baseline = {cmed['qhost x86 dynamic'] / cmed['baseline x86 dynamic']:.2f}")
        if "baseline fp32" in cmed:
            print(f"  CPU: qhost fp32 / baseline = {cmed['qhost fp32'] / cmed['baseline fp32']:.2f}")
        if "ORT static" in cmed:
            print(f"  CPU: static int8 / ORT static = {cmed['qhost x86 static'] / cmed['ORT static']:.2f}")
    if "ORT static" in med:
        s_ort = med["qhost x86 static"] / med["ORT static"]
        speedup = med["qhost fp32"] / med["qhost x86 static"]
        print(f"  static int8 / ORT static = {s_ort:.2f} (bar <= 1: {'met' if s_ort <= 1 else 'NOT met'})")
        bar = "met" if speedup >= 1.7 else "NOT met"
        print(f"  qhost fp32 / static int8 = {speedup:.2f} (bar >= 1.7 on a VNNI CPU: "
              f"{bar if vnni else 'no VNNI here, bar does not apply'})")
        print(f"  for reference: qhost fp32 / ORT fp32 = {med['qhost fp32'] / med['ORT fp32']:.2f}, "
              f"ORT fp32 / ORT static = {med['ORT fp32'] / med['ORT static']:.2f}")
    if "ORT dynamic" in med:
        d_ort = med["qhost x86 dynamic"] / med["ORT dynamic"]
        print(f"  dynamic int8 / ORT dynamic = {d_ort:.2f} (bar <= 1: {'met' if d_ort <= 1 else 'NOT met'})")
        print(f"  for reference: ORT fp32 / ORT dynamic = {med['ORT fp32'] / med['ORT dynamic']:.2f}")
    if "baseline x86 dynamic" in med:
        print(f"  dynamic int8 / baseline dynamic = {med['qhost x86 dynamic'] / med['baseline x86 dynamic']:.2f}")
    if "baseline x86 static" in med:
        print(f"  static int8 / baseline static = {med['qhost x86 static'] / med['baseline x86 static']:.2f}")
    if "baseline fp32" in med:
        print(f"  qhost fp32 / baseline fp32 = {med['qhost fp32'] / med['baseline fp32']:.2f}")
    for k in ("qhost x86 static", "qhost x86 dynamic", "baseline x86 dynamic"):
        if k not in last:
            continue
        cov = last[k].get("coverage", {})
        print(f"{k}: plugin MAC share {100 * cov.get('plugin_mac_share', 0):.1f}%, time share "
              f"{100 * cov.get('plugin_time_share', 0):.1f}% (last round's coverage, ms per op kind):")
        print("   " + "; ".join(f"{kind} {ms:.1f}" for kind, ms in time_split(last[k])[:12]))


if __name__ == "__main__":
    main()
