"""The QDQ unit matcher on graphs written by producers other than its unit tests.

  --producer qhost: `qhost quantize --backend fbgemm` on examples/digits_cnn.onnx;
      every Conv/Gemm of the float model forms one unit with the Relu that alone reads
      its output (or alone when none does), with a uint8 activation and an int8
      per-channel (axis 0) weight of one scale per output channel; and ONNX Runtime
      runs that file within one output step of `qhost run` (ort_compare; fails when
      onnxruntime-node is missing).
  --producer ort [--keep-relu]: make_ort_style_qdq.py's ONNX Runtime-style model;
      `qhost run` matches ONNX Runtime within one output step on >= 99% of elements,
      and the matcher finds exactly the units the generator expects.
The units come from `test_qdq_units --dump`. Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import ort_compare  # noqa: E402


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p.stdout


def dump(driver, model):
    return json.loads(run([driver, "--dump", model]))


def check_qhost(a, fails):
    model = os.path.join(ROOT, "examples", "digits_cnn.onnx")
    out = os.path.join(a.workdir, "digits_fbgemm.onnx")
    run([a.qhost, "quantize", "--backend", "fbgemm", "--calib",
         os.path.join(ROOT, "examples", "digits_calib.npy"), "-o", out, model])
    g = onnx.load(model).graph
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    inits = {t.name: t for t in g.initializer}
    want = {}
    for n in g.node:
        if n.op_type not in ("Conv", "Gemm"):
            continue
        cs = consumers.get(n.output[0], [])
        nodes = [n.name] + ([cs[0].name] if len(cs) == 1 and cs[0].op_type == "Relu" else [])
        want[n.name] = (nodes, inits[n.input[1]].dims[0])
    units = {u["nodes"][0]: u for u in dump(a.driver, out)}
    for name, (nodes, channels) in want.items():
        u = units.get(name)
        if u is None:
            fails.append(f"{name}: in no unit")
            continue
        if u["nodes"] != nodes:
            fails.append(f"{name}: unit {u['nodes']}, want {nodes}")
        act, w = u["inputs"][0], u["inputs"][1]
        if act["dtype"] != 2 or act["axis"] != -1 or not act["dq"]:
            fails.append(f"{name}: activation input {act}")
        if w["dtype"] != 3 or w["axis"] != 0 or w["count"] != channels or w["role"] != 1:
            fails.append(f"{name}: weight input {w}, want int8 axis 0 x{channels}")
        if u["float_output"] or not u["q"]:
            fails.append(f"{name}: output not quantized")
    print(f"digits fbgemm: {len(want)} Conv/Gemm units checked")
    why = ort_compare.ort_missing(a.ort_dir)
    if why:
        fails.append(f"digits fbgemm: ONNX Runtime, this check's oracle, is missing: {why}")
        return
    x = os.path.join(a.workdir, "digits_x.npy")
    np.save(x, np.load(os.path.join(ROOT, "examples", "digits_test.npy"))[:64])
    fails += ort_compare.check(a.qhost, out, x, a.workdir, "digits fbgemm", ort_dir=a.ort_dir)


def check_ort(a, fails):
    tag = "keep_relu" if a.keep_relu else "ort"
    model = os.path.join(a.workdir, f"{tag}.onnx")
    x = os.path.join(a.workdir, f"{tag}_x.npy")
    exp_path = os.path.join(a.workdir, f"{tag}_expected.json")
    run([sys.executable, os.path.join(HERE, "make_ort_style_qdq.py"), model, x, exp_path]
        + (["--keep-relu"] if a.keep_relu else []))
    exp = json.load(open(exp_path))
    got_q = os.path.join(a.workdir, f"{tag}_qhost.npy")
    got_o = os.path.join(a.workdir, f"{tag}_ort.npy")
    run([a.qhost, "run", model, "--input", x, "-o", got_q] + a.qhost_arg)
    run(["node", os.path.join(a.ort_dir, "ort_run.js"), model, x, got_o])
    q, o = np.load(got_q), np.load(got_o)
    if q.shape != o.shape:
        fails.append(f"output shape {q.shape} vs ORT {o.shape}")
    else:
        steps = np.abs(q.astype(np.float64) - o) / exp["output_scale"]
        ok = float(np.mean(steps <= 1.0 + 1e-3))
        print(f"{tag}: qhost vs ORT: max {steps.max():.3f} steps, {ok * 100:.1f}% within 1")
        if ok < 0.99:
            fails.append(f"only {ok * 100:.1f}% of outputs within one step of ORT")
    units = dump(a.driver, model)
    got = [{"pattern": u["pattern"], "nodes": u["nodes"], "n_inputs": len(u["inputs"]),
            "q": u["q"]} for u in units]
    if got != exp["units"]:
        fails.append(f"units {json.dumps(got)}\n  want {json.dumps(exp['units'])}")
    for u in units:
        for i in u["inputs"]:
            if i["role"] == 2 and (i["dtype"] != 6 or i["axis"] != 0 or not i["dq"]):
                fails.append(f"{u['nodes']}: bias {i}, want int32 per-axis through DQ")
            if i["role"] == 1 and (i["dtype"] != 3 or i["axis"] != 0):
                fails.append(f"{u['nodes']}: weight {i}, want int8 per-axis")
    print(f"{tag}: {len(units)} units")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--driver", required=True, help="the test_qdq_units binary")
    ap.add_argument("--producer", choices=["qhost", "ort"], required=True)
    ap.add_argument("--keep-relu", action="store_true")
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--qhost-arg", action="append", default=[],
                    help="appended to `qhost run` of the ORT-style model "
                         "(repeat: --qhost-arg=--backend --qhost-arg=NAME)")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    fails = []
    if a.producer == "qhost":
        check_qhost(a, fails)
    else:
        why = ort_compare.ort_missing(a.ort_dir)
        if why:
            print(f"FAIL: ONNX Runtime, this check's oracle, is missing: {why} (sh tools/deps.sh --tests)")
            sys.exit(1)
        check_ort(a, fails)
    for f in fails:
        print("FAIL:", f)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
