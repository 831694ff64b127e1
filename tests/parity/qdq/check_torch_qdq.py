#!/usr/bin/python3
"""A QDQ model written by another producer, PyTorch 1.13 (make_torch_qdq.py: FX flow,
convert_fx, torch.onnx.export at opset 13), run by qhost and by ONNX Runtime.

  --form norm (default): the exporter's graph with its no-op Casts bypassed and its
      constant subgraphs folded (qhost's reference kernels have no Cast or
      ConstantOfShape). `qhost run` on it is within one output step of ONNX Runtime
      on the exporter's untouched file, and on the folded one, on >= 99% of elements;
      the QDQ unit matcher (`test_qdq_units --dump`) finds exactly the units the
      generator expects: conv_relu, conv, add, maxpool, flatten, gemm, each with
      uint8 per-tensor activations, int8 per-channel (axis 0) weights and int32
      per-channel biases through DequantizeLinear, and a quantized output.
  --form raw: the exporter's file as it is, the same checks. qhost runs every operator
      of it today, so an operator it refuses is a regression and fails the check.
PyTorch's own quantized run is compared too, for information only (another engine).
--qhost-arg=ARG (repeatable; "=" since ARG starts with a dash) is appended to every
`qhost run` command line, for `--qhost-arg=--backend --qhost-arg=NAME --qhost-arg=--plugin-dir
--qhost-arg=DIR`. Exit 0 pass, 1 fail (ONNX Runtime, the oracle, missing included).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import ort_compare  # noqa: E402

UNSUPPORTED = "is not supported by qhost's reference kernels"


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    return p.stdout


def check_units(driver, model, exp, fails):
    import onnx
    from onnx import numpy_helper
    units = json.loads(run([driver, "--dump", model]))
    got = [{"pattern": u["pattern"], "nodes": u["nodes"]} for u in units]
    print(f"units in {os.path.basename(model)}: "
          + ", ".join(f"{u['pattern']}({'+'.join(u['nodes'])})" for u in got))
    if got != exp["units"]:
        fails.append(f"units {json.dumps(got)}\n  want {json.dumps(exp['units'])}")
    g = onnx.load(model).graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    nodes = {n.name: n for n in g.node}
    for u in units:
        first = nodes[u["nodes"][0]]
        for k, i in enumerate(u["inputs"]):
            if i["role"] == 0 and (i["dtype"] != 2 or i["axis"] != -1 or not i["dq"]):
                fails.append(f"{u['nodes']}: activation {k} {i}, want uint8 per-tensor through DQ")
            if i["role"] == 1:
                channels = consts[i["value"]].shape[0] if i["value"] in consts else None
                if i["dtype"] != 3 or i["axis"] != 0 or i["count"] != channels or not i["dq"]:
                    fails.append(f"{u['nodes']}: weight {i}, want int8 axis 0 x{channels}")
            if i["role"] == 2 and (i["dtype"] != 6 or i["axis"] != 0 or not i["dq"]):
                fails.append(f"{u['nodes']}: bias {i}, want int32 per-axis through DQ")
        if first.op_type in ("Conv", "Gemm") and len(u["inputs"]) != 3:
            fails.append(f"{u['nodes']}: {len(u['inputs'])} inputs, want activation, weight, bias")
        if u["float_output"] or not u["q"]:
            fails.append(f"{u['nodes']}: output not quantized")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--driver", required=True, help="the test_qdq_units binary")
    ap.add_argument("--form", choices=["norm", "raw"], default="norm")
    ap.add_argument("--ort-dir", default=ort_compare.ORT_DIR)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--qhost-arg", action="append", default=[],
                    help="appended to `qhost run` (repeat: --qhost-arg=--backend --qhost-arg=x86)")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    w = lambda name: os.path.join(a.workdir, name)  # noqa: E731
    run([sys.executable, os.path.join(HERE, "make_torch_qdq.py"), w("torch_raw.onnx"),
         w("torch_norm.onnx"), w("torch_x.npy"), w("torch_ref.npy"), w("torch_expected.json")])
    exp = json.load(open(w("torch_expected.json")))
    model = w(f"torch_{a.form}.onnx")
    fails = []

    qh = w(f"torch_{a.form}_qhost.npy")
    p = subprocess.run([a.qhost, "run", model, "--input", w("torch_x.npy"), "-o", qh] + a.qhost_arg,
                       capture_output=True, text=True)
    if p.returncode != 0 and UNSUPPORTED in p.stderr:
        print(f"FAIL: qhost no longer runs an operator of PyTorch {exp['torch']}'s export: "
              f"{p.stderr.strip().splitlines()[-1]}")
        return 1
    if p.returncode != 0:
        print(f"FAIL: qhost run {model}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
        return 1
    steps = np.abs(np.load(qh).astype(np.float64) - np.load(w("torch_ref.npy"))) / exp["output_scale"]
    print(f"qhost vs PyTorch {exp['torch']} ({exp['engine']} engine, information): "
          f"{100 * np.mean(steps <= 1.001):.2f}% of {steps.size} within 1 step, "
          f"max {steps.max():.3g} steps")
    check_units(a.driver, model, exp, fails)

    why = ort_compare.ort_missing(a.ort_dir)
    if why:
        fails.append(f"ONNX Runtime, this check's oracle, is missing: {why} (sh tools/deps.sh --tests)")
        for f in fails:
            print("FAIL:", f)
        return 1
    fails += ort_compare.check(a.qhost, model, w("torch_x.npy"), a.workdir, f"{a.form} vs ORT on raw",
                               a.qhost_arg, a.ort_dir, ort_model=w("torch_raw.onnx"))
    if a.form == "norm":
        fails += ort_compare.check(a.qhost, model, w("torch_x.npy"), a.workdir,
                                   "norm vs ORT on norm", a.qhost_arg, a.ort_dir)
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
