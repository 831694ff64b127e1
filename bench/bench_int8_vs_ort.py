#!/usr/bin/python3
"""Time qhost on int8 (QDQ) models against ONNX Runtime on the same QDQ files.

  bench_int8_vs_ort.py --qhost PATH [--ort-dir tests/ort] [--models resnet18,mobilenet_v2]
                       [--threads 1,2] [--quant-backend x86] [--backend x86|none]
                       [--peak PATH] [--calib-samples 8] [--rounds 5] [--warmup 3]
                       [--runs 10] [--qhost-arg ARG ...] [--workdir DIR] [--json]
                       [--simulate-avx2]

Prints the CPU and its relevant ISA flags, exports each float model once (with
tests/parity/export_models.py: torchvision, random seeded weights, 1x3x224x224),
quantizes it with `qhost quantize --backend QUANT_BACKEND` on a few seeded random
calibration samples into MODEL.QUANT_BACKEND.qdq.onnx (both cached in --workdir), then
for every model and thread count alternates --rounds rounds of
  (a) `qhost bench --json --backend BACKEND` on the QDQ file (no --backend with
      `--backend none`: the host's reference path), plus every --qhost-arg (e.g.
      `--qhost-arg=--plugin-dir=DIR`),
  (b) tests/ort/ort_bench.js (ONNX Runtime, all optimisations) on the same QDQ file,
  (c) `qhost bench --json` on the float model (without the --qhost-arg arguments),
all at the same thread count on the same input, so drift on a shared machine hits
the three alike. Each round reports its median over --runs timed runs; the table
shows the median of the round medians [lowest-highest round median] and the ratios
qhost QDQ / ORT QDQ and qhost QDQ / qhost fp32. When qhost's JSON has them, the
fields "path", "fp32", "int8_over_fp32" and "coverage" (plugin time and MAC shares)
are shown too; their absence is not an error.

Issue 7's figures (bench_x86 section of the code): qhost-peak (--peak, default next to
--qhost) runs before and after the measurements (the higher of the two counts) for
the one-thread int8 and fp32 peaks; every coverage unit gets GOPS = 2*MACs/time
(median of its per-round times) and its share of the peak (T threads: of T times the
one-thread peak); `qhost inspect --json` of the QDQ file gives each Conv's weight
shape, so units are grouped into classes (conv3x3, conv3x3-dw, conv1x1, ...); the
issue's bars are printed as PASS/MISS lines (information only: the exit code does
not depend on them). The load average before and after is recorded.
--simulate-avx2 measures, on a CPU with AVX-512 VNNI, what qhost does on an AVX2-only
CPU: every qhost process and qhost-peak get
QHOST_CPU_DISABLE=avx512vnni,avxvnni,avx512f,avx512bw,avx512vl (oneDNN capped to AVX2,
reduce_range=auto on, so the QDQ file MODEL.QUANT_BACKEND.avx2sim.qdq.onnx is quantized
to [0, 127]), the fp32 side OPENBLAS_CORETYPE=Haswell, and the peak is the
vpmaddubsw+vpmaddwd ymm loop. The AVX2 bars on the kernels' share of that
peak apply; ONNX Runtime still uses this CPU's VNNI, so its ratios are printed but its
bars are n/a.
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
# What --simulate-avx2 hides from qhost: an AVX2-only EPYC has none of these.
AVX2_ONLY_DISABLE = "avx512vnni,avxvnni,avx512f,avx512bw,avx512vl"


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
    sim = ".avx2sim" if args.simulate_avx2 else ""
    qdq = os.path.join(workdir, f"{model}.{args.quant_backend}{sim}.qdq.onnx")
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
    for key in ("plugin_time_share", "plugin_mac_share", "host_qdq_ms", "layout_transposes",
                "qdq_between_kernels"):
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


# ---- issue 7's figures: machine peaks, GOPS per unit and per class, bars ----

def run_peak(path, say):
    """qhost-peak's JSON, or None (said) when it is missing or fails."""
    if not os.path.exists(path):
        say(f"SKIP peak: {path} not found (build target qhost_peak); % of peak is n/a")
        return None
    r = subprocess.run([path], capture_output=True, text=True)
    try:
        return json.loads(r.stdout) if r.returncode == 0 else None
    except json.JSONDecodeError:
        say(f"SKIP peak: bad JSON from {path}")
        return None


def best_peak(peaks):
    """A peak is a maximum: the higher of the runs, per field."""
    got = [p for p in peaks if p]
    if not got:
        return None
    out = dict(max(got, key=lambda p: p.get("int8_gops", 0)))
    out["fp32_gflops"] = max(p.get("fp32_gflops", 0) for p in got)
    amx = [p.get("amx_int8_gops") for p in got if p.get("amx_int8_gops")]
    out["amx_int8_gops"] = max(amx) if amx else None
    if out.get("fp32_gflops"):
        out["int8_over_fp32"] = out["int8_gops"] / out["fp32_gflops"]
    return out


def conv_classes(qhost, qdq, say):
    """Node name -> class (conv3x3, conv3x3-dw, conv1x1, conv7x7, gemm, ...) from the
    weight shape [Cout, Cin/group, kh, kw] that `qhost inspect --json` gives for the
    output of each Conv's weight DequantizeLinear."""
    r = subprocess.run([qhost, "inspect", "--json", qdq], capture_output=True, text=True)
    try:
        d = json.loads(r.stdout)
    except json.JSONDecodeError:
        say(f"SKIP conv classes: `qhost inspect --json {qdq}` failed")
        return {}
    shape = {o["name"]: o.get("shape") for n in d.get("nodes", []) for o in n.get("outputs", [])}
    out = {}
    for n in d.get("nodes", []):
        op = n.get("op_type", "")
        if op != "Conv":
            out[n["name"]] = op.lower()
            continue
        ins = n.get("inputs", [])
        w = shape.get(ins[1]) if len(ins) > 1 else None
        x = shape.get(ins[0]) if ins else None
        if not w or len(w) != 4:
            out[n["name"]] = "conv?"
            continue
        cls = f"conv{w[2]}x{w[3]}"
        groups = x[1] // w[1] if x and len(x) == 4 and w[1] else 1
        if groups > 1:
            cls += "-dw" if groups == x[1] else f"-g{groups}"
        out[n["name"]] = cls
    return out


def unit_medians(rounds):
    """The coverage units of the last round, each with the median of its per-round times."""
    got = [r for r in rounds if r and isinstance(r.get("coverage"), dict)
           and isinstance(r["coverage"].get("units"), list)]
    if not got:
        return []
    times = {}
    for r in got:
        for u in r["coverage"]["units"]:
            if isinstance(u, dict) and isinstance(u.get("time_ms"), (int, float)):
                times.setdefault(u.get("name"), []).append(u["time_ms"])
    out = []
    for u in got[-1]["coverage"]["units"]:
        if not isinstance(u, dict):
            continue
        t = times.get(u.get("name"))
        out.append({"name": u.get("name"), "ops": u.get("ops"), "kernel": u.get("kernel"),
                    "macs": u.get("macs") or 0, "time_ms": statistics.median(t) if t else None})
    return out


def time_split(rounds):
    """Medians over rounds of where a run's node time goes: plugin kernels, host units,
    host Q/DQ and the rest, which is the layout transposes (qhost's JSON gives their
    count, not their time: total = plugin time / plugin_time_share)."""
    parts = {"total_ms": [], "plugin_ms": [], "host_units_ms": [], "host_qdq_ms": [], "layout_ms": []}
    for r in rounds:
        c = r.get("coverage") if r else None
        if not isinstance(c, dict) or not isinstance(c.get("units"), list) or not c.get("plugin_time_share"):
            continue
        units = [u for u in c["units"] if isinstance(u, dict) and isinstance(u.get("time_ms"), (int, float))]
        plugin = sum(u["time_ms"] for u in units if u.get("kernel") != "host:reference")
        host = sum(u["time_ms"] for u in units if u.get("kernel") == "host:reference")
        total = plugin / c["plugin_time_share"]
        qdq = c.get("host_qdq_ms") or 0.0
        for k, v in (("total_ms", total), ("plugin_ms", plugin), ("host_units_ms", host),
                     ("host_qdq_ms", qdq), ("layout_ms", max(0.0, total - plugin - host - qdq))):
            parts[k].append(v)
    return {k: statistics.median(v) if v else None for k, v in parts.items()}


def gops_of(macs, ms):
    return 2.0 * macs / (ms * 1e6) if macs and ms else None


def aggregate(units, key, peak_gops):
    groups = {}
    for u in units:
        g = groups.setdefault(key(u), {"units": 0, "macs": 0, "time_ms": 0.0})
        g["units"] += 1
        g["macs"] += u["macs"]
        g["time_ms"] += u["time_ms"] or 0.0
    for g in groups.values():
        g["gops"] = gops_of(g["macs"], g["time_ms"])
        g["pct_peak"] = g["gops"] / peak_gops if g["gops"] and peak_gops else None
    return groups


def x86_figures(results, unit_class, peak, vnni, simulated=False):
    """Per model and thread count: units with GOPS and % of peak, the same by class and
    by kernel, time shares, the int8/fp32 speed-ups; then the issue's bars."""
    peak1 = peak.get("int8_gops") if peak else None
    rows, bars = [], []
    for r in results:
        t = r["threads"]
        peak_t = peak1 * t if peak1 else None
        classes = unit_class.get(r["model"], {})
        units = []
        for u in r["unit_times_ms"]:
            cls = classes.get(u["name"]) or str(u.get("ops") or "?").split("+")[0].lower()
            if not str(u.get("ops") or "").startswith(("Conv", "Gemm", "MatMul")) and not u["macs"]:
                cls = str(u.get("ops") or "?").lower()
            g = gops_of(u["macs"], u["time_ms"])
            units.append(dict(u, cls=cls, gops=g, pct_peak=g / peak_t if g and peak_t else None))
        f = r["qhost_fields"]
        total = sum(u["time_ms"] or 0.0 for u in units)
        host_units = sum(u["time_ms"] or 0.0 for u in units if u["kernel"] == "host:reference")
        speedup = (r["qhost_fp32"]["median_ms"] / r["qhost_qdq"]["median_ms"]
                   if r["qhost_fp32"] and r["qhost_qdq"] else None)
        rows.append({
            "model": r["model"], "threads": t, "units": units,
            "by_class": aggregate([u for u in units if u["macs"]], lambda u: u["cls"], peak_t),
            "by_kernel": aggregate(units, lambda u: u["kernel"], peak_t),
            "unit_time_ms": total, "host_unit_time_ms": host_units, "time_split_ms": r["time_split_ms"],
            "plugin_time_share": f.get("plugin_time_share"), "plugin_mac_share": f.get("plugin_mac_share"),
            "host_qdq_ms": median_field(r, "host_qdq_ms"),
            "layout_transposes": median_field(r, "layout_transposes"),
            "qdq_between_kernels": median_field(r, "qdq_between_kernels"),
            "int8_speedup_alternating": speedup,
            "peak_int8_over_fp32": peak.get("int8_over_fp32") if peak else None,
            "qdq_over_ort": r["qdq_over_ort"]})
    for row in rows:
        m, t = row["model"], row["threads"]
        if m in ("resnet18", "mobilenet_v2") and row["qdq_over_ort"] is not None:
            lim = (0.9 if m == "resnet18" else 1.0) if vnni else 1.1
            b = bar(f"qhost/ORT latency {m} {t} thread(s)", row["qdq_over_ort"], "<=", lim)
            if simulated:
                b["result"] = "n/a"
                b["bar"] += " [simulated AVX2: ORT used VNNI]"
            bars.append(b)
        if m == "resnet18" and t == 1:
            c = row["by_class"].get("conv3x3")
            bars.append(bar("resnet18 3x3 convs, share of the one-thread int8 peak (1 thread)",
                            c["pct_peak"] if c else None, ">=", 0.85 if vnni else 0.75, pct=True))
        if vnni:
            bars.append(bar(f"int8 speed-up over qhost fp32 {m} {t} thread(s)",
                            row["int8_speedup_alternating"], ">=", 3.0))
        if t == min(x["threads"] for x in rows if x["model"] == m):
            bars.append(bar(f"MACs in oneDNN kernels {m}", row["plugin_mac_share"], ">=", 0.99, pct=True))
    return {"vnni": vnni, "simulated_avx2": simulated, "rows": rows, "bars": bars}


def median_field(r, key):
    return r["qhost_fields"].get(key)


def bar(what, value, op, limit, pct=False):
    ok = value is not None and (value <= limit if op == "<=" else value >= limit)
    return {"bar": what, "value": value, "op": op, "limit": limit, "pct": pct,
            "result": "n/a" if value is None else ("PASS" if ok else "MISS")}


def print_x86(x86, peak, cpu, load_before, load_after):
    flags = " ".join(f for f, v in cpu["flags"].items() if v)
    print(f"\nCPU: {cpu['model']}, {cpu['cores']} logical cores; ISA: {flags}")
    print(f"load average (1/5/15 min): before {' '.join(f'{v:.2f}' for v in load_before)}, "
          f"after {' '.join(f'{v:.2f}' for v in load_after)}")
    if peak:
        print(f"one-thread peaks (qhost-peak, higher of the runs before and after): int8 "
              f"{peak['int8_gops']:.1f} GOPS ({peak.get('int8_path')}), fp32 {peak['fp32_gflops']:.1f} "
              f"GFLOPS ({peak.get('fp32_path')}), int8/fp32 {peak['int8_over_fp32']:.2f}")
        if peak.get("amx_int8_gops"):
            print(f"one-thread AMX-INT8 tile peak (tdpbusd, same qhost-peak runs): {peak['amx_int8_gops']:.1f} GOPS "
                  f"(shares below are of the int8 peak above)")
    else:
        print("one-thread peaks: n/a")
    for row in x86["rows"]:
        print(f"\n{row['model']}, {row['threads']} thread(s): int8/fp32 speed-up "
              f"{fmt_num(row['int8_speedup_alternating'])} (alternating rounds), machine int8/fp32 peak ratio "
              f"{fmt_num(row['peak_int8_over_fp32'])}")
        if not row["units"]:
            print("  (no coverage units in qhost's JSON: no --backend?)")
            continue
        share = row["plugin_time_share"]
        ts = row["time_split_ms"]
        if ts.get("total_ms"):
            print(f"  node time per run {ts['total_ms']:.2f} ms = oneDNN kernels {ts['plugin_ms']:.2f} "
                  f"({fmt_pct(ts['plugin_ms'] / ts['total_ms'])}) + host units {ts['host_units_ms']:.2f} + "
                  f"host Q/DQ {ts['host_qdq_ms']:.2f} + layout transposes {ts['layout_ms']:.2f} "
                  f"({fmt_pct(ts['layout_ms'] / ts['total_ms'])}, derived)")
        print(f"  unit time {row['unit_time_ms']:.2f} ms, of it host units {row['host_unit_time_ms']:.2f} ms; "
              f"plugin time share {fmt_pct(share)}, host {fmt_pct(1 - share if share is not None else None)}"
              f" (host Q/DQ {fmt_num(row['host_qdq_ms'])} ms); MACs on plugin {fmt_pct(row['plugin_mac_share'])}; "
              f"layout transposes {row['layout_transposes']}, Q/DQ between kernels {row['qdq_between_kernels']}")
        print(f"  {'class':<14}{'units':>6}{'MMAC':>9}{'ms':>9}{'GOPS':>8}{'% peak':>8}")
        for cls, g in sorted(row["by_class"].items(), key=lambda kv: -kv[1]["time_ms"]):
            print(f"  {cls:<14}{g['units']:>6}{g['macs'] / 1e6:>9.1f}{g['time_ms']:>9.3f}"
                  f"{fmt_num(g['gops'], '.1f'):>8}{fmt_pct(g['pct_peak']):>8}")
        slow = sorted((u for u in row["units"] if u["kernel"] == "host:reference" and u["time_ms"]),
                      key=lambda u: -u["time_ms"])[:4]
        if slow:
            print("  slowest host units: " + ", ".join(f"{u['name']} ({u['ops']}) {u['time_ms']:.3f} ms"
                                                       for u in slow))
        if row["threads"] == 1:
            print(f"  {'unit':<46}{'ops':<12}{'class':<11}{'MMAC':>8}{'ms':>8}{'GOPS':>8}{'% peak':>8}")
            for u in row["units"]:
                if u["macs"]:
                    print(f"  {u['name'][-46:]:<46}{str(u['ops'])[:11]:<12}{u['cls']:<11}"
                          f"{u['macs'] / 1e6:>8.1f}{fmt_num(u['time_ms'], '.3f'):>8}"
                          f"{fmt_num(u['gops'], '.1f'):>8}{fmt_pct(u['pct_peak']):>8}")
    kind = "VNNI" if x86["vnni"] else "AVX2 only"
    if x86.get("simulated_avx2"):
        kind = f"AVX2 only, simulated with QHOST_CPU_DISABLE={AVX2_ONLY_DISABLE}"
    print(f"\nbars ({kind}; information, the exit code does not depend on them):")
    for b in x86["bars"]:
        v = fmt_pct(b["value"]) if b["pct"] else fmt_num(b["value"])
        lim = f"{100 * b['limit']:.0f}%" if b["pct"] else f"{b['limit']}"
        print(f"  {b['result']:<5}{b['bar']}: {v} ({b['op']} {lim})")


def fmt_pct(v):
    return "n/a" if v is None else f"{100 * v:.1f}%"


def main():
    ap = argparse.ArgumentParser(description="qhost int8 (QDQ) vs ONNX Runtime latency")
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--quant-backend", default="x86",
                    help="backend for `qhost quantize` (default x86)")
    ap.add_argument("--backend", default="x86",
                    help="`qhost bench --backend` for the QDQ model (default x86; none = host reference)")
    ap.add_argument("--peak", help="qhost-peak binary (default: next to --qhost)")
    ap.add_argument("--calib-samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0, help="seed of the calibration data")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10, help="timed runs per round and side")
    ap.add_argument("--qhost-arg", action="append", default=[], metavar="ARG",
                    help="extra argument for `qhost bench` on the QDQ model (repeatable)")
    ap.add_argument("--workdir", help="keep the models here and reuse them (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    ap.add_argument("--simulate-avx2", action="store_true",
                    help="hide AVX-512 and VNNI from qhost and qhost-peak (see the top of this file)")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    bad = [m for m in models if m not in export_models.MODELS]
    if bad or not models:
        ap.error(f"unknown model(s) {bad}; choose from {', '.join(export_models.MODELS)}")
    if args.runs < 1 or args.warmup < 0 or args.rounds < 1 or args.calib_samples < 1:
        ap.error("--runs, --rounds and --calib-samples must be positive and --warmup non-negative")
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    if args.simulate_avx2:
        if os.environ.get("QHOST_CPU_DISABLE"):
            ap.error("--simulate-avx2 sets QHOST_CPU_DISABLE itself; unset it")
        # Inherited by every qhost process and qhost-peak; ONNX Runtime ignores both.
        os.environ["QHOST_CPU_DISABLE"] = AVX2_ONLY_DISABLE
        os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
        say(f"simulating an AVX2-only CPU: QHOST_CPU_DISABLE={AVX2_ONLY_DISABLE} "
            f"OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} (ONNX Runtime is not affected)")

    cpu = cpu_info()
    say(f"CPU: {cpu['model']} ({cpu['cores']} logical cores)")
    say("ISA: " + " ".join(f"{f}={'yes' if v else 'no'}" for f, v in cpu["flags"].items()))
    say(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")

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

    backend_args = [] if args.backend in ("", "none") else ["--backend", args.backend]
    peak_path = args.peak or os.path.join(os.path.dirname(os.path.abspath(args.qhost)), "qhost-peak")
    load_before = os.getloadavg()
    peaks = [run_peak(peak_path, say)]
    unit_class = {m: conv_classes(args.qhost, prepared[m][2], say) for m in prepared}
    results = []
    for m, (onnx_path, x_path, qdq, rep) in prepared.items():
        for t in args.threads:
            common = ["--threads", str(t), "--warmup", str(args.warmup), "--runs", str(args.runs)]
            cmds = {
                # --no-fp32: timed back to back like ORT (the fp32 side is its own process)
                "qhost_qdq": [args.qhost, "bench", qdq, "--input", x_path, "--no-fp32"] + common + ["--json"] +
                             backend_args + args.qhost_arg,
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
                "unit_times_ms": unit_medians(rounds["qhost_qdq"]),
                "time_split_ms": time_split(rounds["qhost_qdq"]),
                "round_medians_ms": {side: [r["median_ms"] if r else None for r in rounds[side]]
                                     for side in SIDES},
                "blas": sorted({r.get("blas") for side in ("qhost_qdq", "qhost_fp32")
                                for r in rounds[side] if r and r.get("blas")}),
            })
            say(f"measured {m} threads={t}")

    peaks.append(run_peak(peak_path, say))
    load_after = os.getloadavg()
    peak = best_peak(peaks)
    vnni = bool(peak["vnni"]) if peak and "vnni" in peak else \
        bool(cpu["flags"].get("avx512_vnni") or cpu["flags"].get("avx_vnni"))
    x86 = x86_figures(results, unit_class, peak, vnni, args.simulate_avx2)
    blas = {b for r in results for b in r["blas"]}
    if args.json:
        json.dump({"schema_version": 1, "cpu": cpu, "quant_backend": args.quant_backend,
                   "calib_samples": args.calib_samples, "seed": args.seed, "rounds": args.rounds,
                   "warmup": args.warmup, "runs": args.runs, "qhost_args": args.qhost_arg,
                   "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                   "qhost_cpu_disable": os.environ.get("QHOST_CPU_DISABLE"),
                   "backend": args.backend, "load_average_before": load_before,
                   "load_average_after": load_after, "peak_runs": peaks, "peak": peak,
                   "results": results, "x86": x86, "ok": not failed}, sys.stdout, indent=1)
        print()
    else:
        print("qhost QDQ runs with: " + " ".join(backend_args + args.qhost_arg or ["(host reference)"]))
        print_table(results, args, blas)
        print_x86(x86, peak, cpu, load_before, load_after)
    if tmp is not None:
        tmp.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
