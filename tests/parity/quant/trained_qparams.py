#!/usr/bin/python3
"""Why a trained net's int8 outputs leave PyTorch's: qparams, weights, or execution.

  /usr/bin/python3 tests/parity/quant/trained_qparams.py --qhost build/qhost
      --trained-dir DIR --workdir DIR [--model mobilenet_v2] [--plugin-dir build/plugins]

The net (tests/models/trained_digits.py, trained into --trained-dir) is exported as
check_x86_numerics.py does, `qhost quantize --backend x86 --backend-opt reduce_range=off`
quantizes it, and PyTorch 1.13 prepares it with the x86 BackendConfig. It prints:
  1. every activation whose scale differs (qhost vs PyTorch FX), paired by value, with the
     scale PyTorch's observers give when fed qhost's own fp32 activations (replay: equal
     means the difference is fp32 noise, not semantics), and the points one side lacks;
  2. the share of test outputs within one output step of `qhost run` (host reference)
     for PyTorch's reference model as is, with qhost's activation qparams, with the ONNX
     file's folded weights, and with both (100% there means qhost's quantization
     semantics are PyTorch's and the rest is perturbation); with --plugin-dir, the same
     for `qhost run --backend x86` and PyTorch's onednn engine with both forced.
A diagnostic (docs/observers.md, "mobilenet_v2 on digits"), not a test: exit 0 unless a
step fails to run.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "models"))
import oracle  # noqa: E402,F401  (sets ATEN_CPU_CAPABILITY before torch is imported)

import argparse  # noqa: E402
import subprocess  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402
import torch  # noqa: E402

import models  # noqa: E402
import resnet18_scales  # noqa: E402
from same_model import forced, plan_for, qhost_qparams, without_inplace  # noqa: E402
import trained_digits  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")


def within_one(a, b, step):
    return float(np.mean(np.abs(a.astype(np.float64) - b) / step <= 1.0 + 1e-3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--trained-dir", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", default="mobilenet_v2", choices=("mobilenet_v2", "resnet18"))
    ap.add_argument("--plugin-dir", help="also compare `qhost run --backend x86`")
    a = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    os.makedirs(a.workdir, exist_ok=True)
    info = trained_digits.build(a.model, a.trained_dir)
    model = without_inplace(trained_digits.load_model(info))
    calib = torch.from_numpy(np.load(info["calib"]))
    test = torch.from_numpy(np.load(info["test"]))
    onnx_path = os.path.join(a.workdir, f"{a.model}.onnx")
    calib_path, test_path = (os.path.join(a.workdir, f) for f in ("calib.npy", "test.npy"))
    torch.onnx.export(model, calib[0:1], onnx_path, opset_version=models.OPSET,
                      input_names=["input"], output_names=["output"])
    np.save(calib_path, calib.numpy())
    np.save(test_path, test.numpy())
    qdq = os.path.join(a.workdir, f"{a.model}.qdq.onnx")
    run([a.qhost, "quantize", "--backend", "x86", "--backend-opt", "reduce_range=off",
         "--calib", calib_path, "-o", qdq, "--quiet", onnx_path])
    qh, _ = qhost_qparams(qdq)

    want, plan = plan_for(model, onnx_path, calib)
    replayed = resnet18_scales.replay(a.qhost, a.workdir, onnx_path, calib, plan)
    print("1. activation scales that differ (qhost vs PyTorch FX; replay = PyTorch's observers "
          "on qhost's fp32 activations)")
    for name, (scale, zp, fx) in want.items():
        if name not in qh:
            print(f"  PyTorch only: {name} (FX {fx}) scale {scale:.6g} zp {zp}")
            continue
        s, z = qh[name]
        if abs(s - scale) > 1e-6 * scale:
            rep = replayed.get(name, float("nan"))
            print(f"  {name} (FX {fx}): qhost {s:.6g} zp {z}, PyTorch {scale:.6g} zp {zp} "
                  f"(rel {abs(s - scale) / scale:.2e}); replay {rep:.6g} (rel {abs(s - rep) / rep:.2e})")
    print("  (FX classifier_0 is the eval-mode Dropout: its own observer in PyTorch, no node "
          "in the ONNX file, so it pairs with the tensor before it)")

    host_out = os.path.join(a.workdir, "host.out.npy")
    run([a.qhost, "run", qdq, "-i", test_path, "-o", host_out])
    host = np.load(host_out)
    x86 = None
    if a.plugin_dir:
        x86_out = os.path.join(a.workdir, "x86.out.npy")
        run([a.qhost, "run", qdq, "--backend", "x86", "--plugin-dir", a.plugin_dir,
             "-i", test_path, "-o", x86_out])
        x86 = np.load(x86_out)
    folded = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(onnx_path).graph.initializer}
    print(f"2. share of {host.size} test outputs within one output step")
    for acts, weights, label in ((False, False, "nothing forced"), (True, False, "qhost's activation qparams"),
                                 (False, True, "the ONNX file's folded weights"), (True, True, "both")):
        r, q, step = forced(model, calib, test, plan, qh, folded, acts, weights)
        line = (f"  PyTorch with {label}: ref~qhost host {100 * within_one(host, r, step):.2f}%, "
                f"onednn~ref {100 * within_one(q, r, step):.2f}%")
        if x86 is not None:
            line += (f", qhost x86~ref {100 * within_one(x86, r, step):.2f}%, "
                     f"qhost x86~onednn {100 * within_one(x86, q, step):.2f}%")
        print(line)
    if x86 is not None:
        print(f"  qhost x86~qhost host {100 * within_one(x86, host, step):.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
