#!/usr/bin/python3
"""The qnnpack backend (XNNPACK's operators) against PyTorch 1.13's own qnnpack engine, one
invocation, one machine, with ONNX Runtime and `--backend x86` on the same QDQ file:

  /usr/bin/python3 bench/bench_qnnpack_vs_torch.py --qhost build/qhost
      [--models digits,resnet18,mobilenet_v2] [--threads 1,2] [--rounds 3] [--runs 10]
      [--warmup 3] [--workdir DIR] [--ort-dir tests/ort] [--no-spin-on] [--json]

Each model is quantized once with `qhost quantize --backend qnnpack` (digits: the bundled
CNN of examples/ on examples/digits_calib.npy, timed on examples/digits_test.npy, 497
images in one batch; resnet18 and mobilenet_v2: torchvision's, exported by
tests/parity/export_models.py at 1x3x224x224, calibrated on 8 seeded random samples, as
bench/bench_int8_vs_ort.py does; cached in --workdir). PyTorch builds the same
architecture (the weights do not change the time), quantizes it with prepare_fx /
convert_fx, qnnpack's qconfig mapping and BackendConfig on the same calibration samples, and
runs the same input with torch.backends.quantized.engine = 'qnnpack' in a child process
with OMP_WAIT_POLICY=PASSIVE (its default spin is far slower on a busy machine) and
torch.set_num_threads(threads).

For every model and thread count, --rounds rounds alternate, each timing --runs runs after
--warmup untimed ones:
  qnnpack   `qhost bench --backend qnnpack --no-fp32` (the plugin's default, spin=off), with
            build/libqhost-xnn-run-timer.so preloaded: every xnn_run_operator call is timed,
            so the share of the run spent outside XNNPACK's operators (the adapter, setup
            calls, the host) is 1 - (median per-run time inside them) / (median run time);
            the plugin's own part of it is its units' time in the coverage (the host times
            each kernel run) less the time inside XNNPACK
  spin_on   the same with --backend-opt spin=on (2 or more threads only; --no-spin-on skips)
  torch     PyTorch's qnnpack engine as above
  ort       tests/ort/ort_bench.js (ONNX Runtime) on the same QDQ file
  x86       `qhost bench --backend x86 --no-fp32` on the same QDQ file (skipped when the x86
            plugin is missing)
The table shows the median of the round medians [lowest-highest], PyTorch / qhost (the
issue's speed-up, bar 3x; also by the lowest single runs, which a loaded machine disturbs
least), qhost / ORT and qhost / x86, and the share outside XNNPACK.
Information only: the exit code is 0 when every measurement ran, 1 otherwise.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EX = os.path.join(ROOT, "examples")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
from bench_fp32_vs_ort import cpu_info, int_list, run_json  # noqa: E402

SIDES = ("qnnpack", "spin_on", "torch", "ort", "x86")

TORCH_CHILD = r"""
import json, sys, time, statistics
import numpy as np, torch
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_qnnpack_backend_config
from torch.ao.quantization.quantize_fx import prepare_fx, convert_fx
model_name, calib_path, x_path, threads, warmup, runs, examples = sys.argv[1:8]
torch.backends.quantized.engine = "qnnpack"
torch.set_num_threads(int(threads))
torch.manual_seed(0)
if model_name == "digits":
    sys.path.insert(0, examples)
    from make_digits_model import DigitsCNN
    m = DigitsCNN().eval()
else:
    import torchvision
    m = getattr(torchvision.models, model_name)(weights=None).eval()
calib = np.load(calib_path)
x = torch.tensor(np.load(x_path))
# qhost takes the calibration file's first axis as samples: one forward per sample
samples = [torch.tensor(calib)] if model_name == "digits" else [torch.tensor(c) for c in calib]
p = prepare_fx(m, get_default_qconfig_mapping("qnnpack"), (samples[0],), backend_config=get_qnnpack_backend_config())
with torch.no_grad():
    for s in samples:
        p(s)
    q = convert_fx(p)
    for _ in range(int(warmup)):
        q(x)
    ts = []
    for _ in range(int(runs)):
        t = time.perf_counter()
        q(x)
        ts.append((time.perf_counter() - t) * 1e3)
print(json.dumps({"schema_version": 1, "median_ms": statistics.median(ts), "min_ms": min(ts), "max_ms": max(ts)}))
"""


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def prepare(a, workdir, model):
    """(QDQ path, input path, calibration path) for model, quantized with --backend qnnpack."""
    if model == "digits":
        onnx_path, x, calib = (os.path.join(EX, "digits_cnn.onnx"), os.path.join(EX, "digits_test.npy"),
                               os.path.join(EX, "digits_calib.npy"))
    else:
        import numpy as np
        import export_models
        onnx_path, x = os.path.join(workdir, f"{model}.onnx"), os.path.join(workdir, f"{model}.input.npy")
        if not (os.path.exists(onnx_path) and os.path.exists(x)):
            export_models.export(workdir, model)
        calib = os.path.join(workdir, f"{model}.calib8.s0.npy")
        if not os.path.exists(calib):
            rng = np.random.default_rng(0)
            np.save(calib, rng.standard_normal((8,) + np.load(x).shape).astype(np.float32))
    qdq = os.path.join(workdir, f"{model}.qnnpack.qdq.onnx")
    if not os.path.exists(qdq):
        subprocess.run([a.qhost, "quantize", onnx_path, "--backend", "qnnpack", "--calib", calib, "-o", qdq,
                        "--quiet"], check=True)
        say(f"quantized {model} for qnnpack")
    return qdq, x, calib


def qhost_side(a, qdq, x, threads, backend, extra=(), timer=None):
    cmd = [a.qhost, "bench", qdq, "--input", x, "--backend", backend, "--no-fp32", "--json", "--threads",
           str(threads), "--runs", str(a.runs), "--warmup", str(a.warmup), *extra]
    if not timer:
        return run_json(cmd)
    times = os.path.join(a.tmp, "xnn-run-times.txt")
    env = dict(os.environ, LD_PRELOAD=timer, QH_XNN_RUN_TIMES=times)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return None, f"exit {r.returncode}: {lines[-1] if lines else '(no message)'}"
    out = json.loads(r.stdout)
    calls = [int(v) for v in open(times).read().split()]
    n_runs = a.warmup + a.runs
    if not calls or len(calls) % n_runs:
        return None, f"{len(calls)} xnn_run_operator calls for {n_runs} runs"
    k = len(calls) // n_runs
    inside = [sum(calls[len(calls) - (i + 1) * k:len(calls) - i * k]) / 1e6 for i in range(a.runs)]
    out["xnn_ms"] = statistics.median(inside)
    out["outside_share"] = 1.0 - out["xnn_ms"] / out["median_ms"]
    # the plugin's own share: its units' time (the host times each kernel's run, setup
    # calls and checks included; the coverage gives the mean over the timed runs) less the
    # mean time inside XNNPACK's operators over the same runs
    units = (out.get("coverage") or {}).get("units", [])
    plugin_ms = sum(u.get("time_ms", 0.0) for u in units if u.get("kernel", "").startswith(("xnn_", "qn_")))
    out["adapter_share"] = (plugin_ms - statistics.mean(inside)) / out["median_ms"]
    out["xnn_calls_per_run"] = k
    return out, None


def torch_side(a, model, calib, x, threads):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    r = subprocess.run([sys.executable, "-c", TORCH_CHILD, model, calib, x, str(threads), str(a.warmup),
                        str(a.runs), EX], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        return None, f"torch exit {r.returncode}: {lines[-1] if lines else '(no message)'}"
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def ort_side(a, qdq, x, threads):
    return run_json(["node", os.path.join(a.ort_dir, "ort_bench.js"), qdq, x, "--threads", str(threads),
                     "--warmup", str(a.warmup), "--runs", str(a.runs)])


def summary(rounds):
    got = [r for r in rounds if r]
    if not got:
        return None
    meds = [r["median_ms"] for r in got]
    out = {"median_ms": statistics.median(meds), "lo_ms": min(meds), "hi_ms": max(meds),
           "min_ms": min(r["min_ms"] for r in got)}
    if "outside_share" in got[0]:
        out["outside_share"] = statistics.median(r["outside_share"] for r in got)
        out["adapter_share"] = statistics.median(r["adapter_share"] for r in got)
        out["xnn_calls_per_run"] = got[0]["xnn_calls_per_run"]
        cov = got[0].get("coverage") or {}
        out["plugin_units"] = cov.get("plugin_units")
        out["plugin_mac_share"] = cov.get("plugin_mac_share")
        # the host's Q/DQ of the model's input and output: part of every int8 run
        out["host_qdq_ms"] = statistics.median((r.get("coverage") or {}).get("host_qdq_ms", 0.0) for r in got)
    return out


def fmt(s):
    return "n/a" if not s else f"{s['median_ms']:.2f} [{s['lo_ms']:.2f}-{s['hi_ms']:.2f}]"


def ratio(num, den, key="median_ms"):
    return "n/a" if not num or not den else f"{num[key] / den[key]:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--models", default="digits,resnet18,mobilenet_v2")
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--workdir", help="keep the exported and quantized models here (default: a temp dir)")
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--no-spin-on", action="store_true", help="skip the spin=on runs")
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    a = ap.parse_args()
    models = [m for m in a.models.split(",") if m]
    bad = [m for m in models if m not in ("digits", "resnet18", "mobilenet_v2")]
    if bad or not models or a.rounds < 1 or a.runs < 1 or a.warmup < 0:
        ap.error(f"models from digits, resnet18, mobilenet_v2 (got {bad or models}); rounds, runs >= 1")
    build = os.path.dirname(os.path.abspath(a.qhost))
    timer = os.path.join(build, "libqhost-xnn-run-timer.so")
    if not os.path.exists(timer):
        ap.error(f"{timer} is missing (built with the qnnpack plugin)")
    has_x86 = os.path.exists(os.path.join(build, "plugins", "libqhost-x86.so"))
    cpu = cpu_info()
    load0 = os.getloadavg()[0]
    results, failed = [], False
    with tempfile.TemporaryDirectory(prefix="qhost-bench-qnnpack-") as tmp:
        a.tmp = tmp
        workdir = a.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        for model in models:
            qdq, x, calib = prepare(a, workdir, model)
            for t in a.threads:
                rounds = {s: [] for s in SIDES}
                for rnd in range(a.rounds):
                    runs = {"qnnpack": lambda: qhost_side(a, qdq, x, t, "qnnpack", timer=timer),
                            "torch": lambda: torch_side(a, model, calib, x, t),
                            "ort": lambda: ort_side(a, qdq, x, t)}
                    if t > 1 and not a.no_spin_on:
                        runs["spin_on"] = lambda: qhost_side(a, qdq, x, t, "qnnpack", ("--backend-opt", "spin=on"))
                    if has_x86:
                        runs["x86"] = lambda: qhost_side(a, qdq, x, t, "x86")
                    for side, fn in runs.items():
                        out, err = fn()
                        if err:
                            failed = True
                            say(f"{model}, {t} thread(s), round {rnd + 1}, {side}: {err}")
                        rounds[side].append(out)
                    say(f"{model}, {t} thread(s): round {rnd + 1}/{a.rounds} done")
                results.append({"model": model, "threads": t, **{s: summary(rounds[s]) for s in SIDES}})
    load1 = os.getloadavg()[0]
    if a.json:
        print(json.dumps({"cpu": cpu, "load_average": [load0, load1], "rounds": a.rounds, "runs": a.runs,
                          "warmup": a.warmup, "results": results}, indent=1))
        return 1 if failed else 0
    print(f"CPU: {cpu['model']}, {cpu['cores']} cores; load average {load0:.2f} before, {load1:.2f} after; "
          f"{a.rounds} rounds of {a.runs} runs (median of round medians [lowest-highest], ms)")
    print("| model | threads | qhost qnnpack | outside XNNPACK | PyTorch qnnpack | PyTorch/qhost | (minima) | ORT "
          "| qhost/ORT | qhost x86 | qhost/x86 | qnnpack spin=on |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        q = r["qnnpack"]
        outside = "n/a" if not q else f"{100 * q['outside_share']:.1f}%"
        print(f"| {r['model']} | {r['threads']} | {fmt(q)} | {outside} | {fmt(r['torch'])} | "
              f"**{ratio(r['torch'], q)}** | {ratio(r['torch'], q, 'min_ms')} | {fmt(r['ort'])} | {ratio(q, r['ort'])} | {fmt(r['x86'])} | "
              f"{ratio(q, r['x86'])} | {fmt(r['spin_on'])} |")
    for r in results:
        q = r["qnnpack"]
        if q:
            print(f"{r['model']}, {r['threads']} thread(s): {q['plugin_units']} units on the plugin, "
                  f"{100 * (q['plugin_mac_share'] or 0):.1f}% of MACs, {q['xnn_calls_per_run']} xnn_run_operator "
                  f"calls per run; the host's Q/DQ of the input and output {q['host_qdq_ms']:.2f} ms "
                  f"({100 * q['host_qdq_ms'] / q['median_ms']:.1f}% of the run); the plugin's units outside "
                  f"xnn_run_operator {100 * q['adapter_share']:.1f}% of the run")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
