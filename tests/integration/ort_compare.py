#!/usr/bin/python3
"""ONNX Runtime against `qhost run` on one QDQ model: issue 6's compatibility bar.

Both run the model on the same input (ORT through tests/ort/ort_run.js with all graph
optimisations, so it fuses Q/DQ into its integer kernels); each graph output is
compared in units of its output quantization step: the scale of the DequantizeLinear
that writes the output (qhost's convert names it "V_dequantize", fed by the
QuantizeLinear "V_quantize" of "V_prequant"; another producer's chain may hold a Cast
between the two). A float output, one no DequantizeLinear writes, is compared with a
step of FLOAT_STEP times its largest magnitude. The bar: >= 99% of the elements of
every output within one step.

  ort_compare.py --qhost PATH MODEL.onnx X.npy [--workdir DIR] [--qhost-arg ARG ...]
                 [--ort-dir DIR] [--min-within 0.99]

--qhost-arg is appended to the `qhost run` command line; repeat it, with "=" since the
values start with a dash: `--qhost-arg=--backend --qhost-arg=x86`. Exit 0 pass, 1 fail,
77 when onnxruntime-node is missing.
Test scripts import compare() and ort_missing() instead.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ORT_DIR = os.environ.get("QH_ORT_DIR", os.path.join(ROOT, "tests", "ort"))
FLOAT_STEP = 1e-5
# Both sides sit on the float32 grid of (q - zp) * scale; the slack covers float32
# rounding of those products, far below the next step.
SLACK = 1e-3


def ort_missing(ort_dir=ORT_DIR):
    """Why ONNX Runtime cannot run here, or None when it can."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not os.path.isdir(os.path.join(ort_dir, "node_modules", "onnxruntime-node")):
        return f"onnxruntime-node is not installed in {ort_dir}/node_modules"
    return None


def require_ort(ort_dir=ORT_DIR):
    """Fail (AssertionError) when ONNX Runtime cannot run here: a test whose oracle is
    missing must not pass on its other checks. `sh tools/deps.sh --tests` installs it."""
    why = ort_missing(ort_dir)
    assert why is None, f"ONNX Runtime, this test's oracle, is missing: {why} (sh tools/deps.sh --tests)"


def _constants(graph):
    from onnx import numpy_helper
    vals = {}
    for t in graph.initializer:
        try:
            vals[t.name] = numpy_helper.to_array(t)
        except KeyError:  # a type Debian's onnx 1.12 cannot map (int4, uint4): never an output scale
            pass
    for n in graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    vals[n.output[0]] = numpy_helper.to_array(a.t)
        elif n.op_type == "Identity" and n.input[0] in vals:
            vals[n.output[0]] = vals[n.input[0]]
    return vals


def output_steps(model_path):
    """{output name: (step array broadcastable to the output, or None for float, how)}."""
    import onnx
    m = onnx.load(model_path)
    vals = _constants(m.graph)
    producer = {o: n for n in m.graph.node for o in n.output}
    steps = {}
    for out in m.graph.output:
        n = producer.get(out.name)
        if n is None or n.op_type != "DequantizeLinear" or n.input[1] not in vals:
            steps[out.name] = (None, f"float (step {FLOAT_STEP:g} x max |y|)")
            continue
        scale = vals[n.input[1]].astype(np.float64)
        how = f"scale of {n.name or n.output[0]}"
        if scale.size > 1:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            rank = len(out.type.tensor_type.shape.dim)
            axis = axis + rank if axis < 0 else axis
            scale = scale.reshape([-1 if d == axis else 1 for d in range(rank)])
            how += f" (per-axis {axis})"
        steps[out.name] = (scale, how)
    return steps


def _run_qhost(qhost, args):
    if hasattr(qhost, "run"):  # qhtest.Runner: the memory bound and ASan options
        rc, _, err = qhost.run(*args, timeout=300)
    else:
        p = subprocess.run([qhost] + [str(a) for a in args], capture_output=True, text=True,
                           timeout=300)
        rc, err = p.returncode, p.stderr
    if rc != 0:
        raise RuntimeError(f"qhost run {args[1]}: exit {rc}: {err.strip()[-600:]}")


def compare(qhost, model, x_path, workdir, tag="cmp", qhost_args=(), ort_dir=ORT_DIR,
            ort_model=None):
    """Runs both; returns one dict per graph output: name, step (how it was found),
    elements, within (fraction within one step) and max_steps. ort_model, when given,
    is the file ORT runs instead (another form of the same graph, same outputs).
    Raises RuntimeError when either side fails to run its model."""
    steps = output_steps(model)
    names = list(steps)
    multi = len(names) > 1
    qh_path = os.path.join(workdir, f"{tag}_qhost." + ("npz" if multi else "npy"))
    _run_qhost(qhost, ["run", model, "--input", x_path, "-o", qh_path] + list(qhost_args))
    ort_path = os.path.join(workdir, f"{tag}_ort.npy")
    ort_model = ort_model or model
    p = subprocess.run(["node", os.path.join(ort_dir, "ort_run.js"), ort_model, x_path, ort_path],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"ONNX Runtime cannot run {ort_model}: {p.stderr.strip()[-600:]}")
    qh = np.load(qh_path)
    results = []
    for k, name in enumerate(names):
        a = (qh[name] if multi else qh).astype(np.float64)
        b = np.load(ort_path if k == 0 else ort_path[:-4] + f".{name}.npy").astype(np.float64)
        if a.shape != b.shape:
            raise RuntimeError(f"{model}: output {name}: qhost shape {a.shape}, ORT {b.shape}")
        step, how = steps[name]
        if step is None:
            step = FLOAT_STEP * max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
        d = np.abs(a - b) / step
        d[~np.isfinite(a) | ~np.isfinite(b)] = np.inf
        results.append({"name": name, "step": how, "elements": int(d.size),
                        "within": float(np.mean(d <= 1.0 + SLACK)) if d.size else 1.0,
                        "max_steps": float(np.max(d)) if d.size else 0.0})
    return results


def describe(tag, results):
    return "; ".join(f"{tag}: ORT vs qhost, output {r['name']} ({r['step']}): "
                     f"{100 * r['within']:.2f}% of {r['elements']} within 1 step, "
                     f"max {r['max_steps']:.3g} steps" for r in results)


def check(qhost, model, x_path, workdir, tag="cmp", qhost_args=(), ort_dir=ORT_DIR,
          min_within=0.99, ort_model=None):
    """compare(), printed; returns the failure messages (empty when it passes)."""
    try:
        results = compare(qhost, model, x_path, workdir, tag, qhost_args, ort_dir, ort_model)
    except RuntimeError as e:
        return [str(e)]
    print(describe(tag, results))
    return [f"{tag}: output {r['name']}: only {100 * r['within']:.2f}% within one step of ORT "
            f"(max {r['max_steps']:.3g} steps)" for r in results if r["within"] < min_within]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("--workdir")
    ap.add_argument("--qhost-arg", action="append", default=[])
    ap.add_argument("--ort-dir", default=ORT_DIR)
    ap.add_argument("--min-within", type=float, default=0.99)
    a = ap.parse_args()
    why = ort_missing(a.ort_dir)
    if why:
        print(f"SKIP: {why}")
        return 77
    workdir = a.workdir or tempfile.mkdtemp(prefix="ort_compare")
    os.makedirs(workdir, exist_ok=True)
    fails = check(a.qhost, a.model, a.input, workdir, os.path.basename(a.model)[:-5],
                  a.qhost_arg, a.ort_dir, a.min_within)
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
