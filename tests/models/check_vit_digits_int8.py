#!/usr/bin/python3
"""int8 accuracy of a trained transformer: within 1 point of float (issue 18).

  check_vit_digits_int8.py --qhost PATH --plugin-dir DIR --trained-dir DIR --tmp DIR [--asan]

Takes trained_vit_digits.py's ViT-style encoder (trained once per build in the ctest
fixture cache DIR), quantizes it with `qhost quantize --backend x86` on its 64 calibration
images, and measures top-1 accuracy on every held-out digit (497 images) with
  float  `qhost run` on the float file (must agree with PyTorch's accuracy to 1 image)
  host   `qhost run` on the QDQ file (the host's reference int8 path)
  x86    `qhost run --backend x86` on the QDQ file (the plugin's oneDNN kernels)
Bars: float >= MIN_FLOAT % (the training worked, so the comparison means something), and
|int8 - float| <= 1 point for host and x86. Then the check is turned on itself: the QDQ
file with the head's int8 weight rows rolled by one class (every prediction moves to
another class) must fail the same bar on both paths; a check that passes it proves nothing.
Exit 0 when every bar holds, 1 otherwise.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import trained_vit_digits  # noqa: E402

MIN_FLOAT = 90.0
BAR_POINTS = 1.0
PLUGIN_DIR = [None]


ENV = dict(os.environ)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)
    if r.returncode != 0:
        lines = (r.stderr or "").strip().splitlines()
        raise RuntimeError(f"{' '.join(cmd[:3])}: exit {r.returncode}: {lines[-1] if lines else '(no message)'}")


def accuracy(qhost, model, test, labels, out, backend=None):
    """Top-1 accuracy (%) of `qhost run [--backend B] model` on the test images."""
    run([qhost, "run"] + (["--backend", backend, "--plugin-dir", PLUGIN_DIR[0]] if backend else []) +
        [model, "--input", test, "-o", out])
    y = np.load(out)
    if y.shape != (labels.shape[0], 10) or not np.all(np.isfinite(y)):
        raise RuntimeError(f"{out}: output shape {y.shape}, finite {bool(np.all(np.isfinite(y)))}")
    return 100.0 * float(np.mean(y.argmax(1) == labels))


def int8_problems(float_acc, accs):
    return [f"{who} int8 accuracy {a:.2f}% is {a - float_acc:+.2f} points from float {float_acc:.2f}% "
            f"(bar: within {BAR_POINTS})" for who, a in accs.items() if abs(a - float_acc) > BAR_POINTS]


def rolled_head(qdq, dst):
    """The QDQ file with the [10, D] int8 weight of the head rolled by one row."""
    m = onnx.load(qdq)
    heads = [t for t in m.graph.initializer if t.data_type == onnx.TensorProto.INT8 and list(t.dims)[:1] == [10]
             and len(t.dims) == 2]
    if len(heads) != 1:
        raise RuntimeError(f"{qdq}: expected one int8 [10, D] head weight, found {[t.name for t in heads]}")
    w = onnx.numpy_helper.to_array(heads[0])
    heads[0].CopyFrom(onnx.numpy_helper.from_array(np.roll(w, 1, axis=0), heads[0].name))
    onnx.save(m, dst)
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--trained-dir", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--plugin-dir", required=True, help="where libqhost-x86.so is")
    ap.add_argument("--asan", action="store_true", help="qhost is sanitized (sets ASAN_OPTIONS)")
    args = ap.parse_args()
    PLUGIN_DIR[0] = args.plugin_dir
    if args.asan:
        # As tests/parity/x86: libsanitizer misrecords the DTLS of libdnnl/libgomp loaded by
        # dlopen, and LSan's exit scan then crashes; not tracking DTLS avoids that.
        ENV.setdefault("ASAN_OPTIONS", "detect_leaks=1:intercept_tls_get_addr=0")
        ENV.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    os.makedirs(args.tmp, exist_ok=True)
    info = trained_vit_digits.build(args.trained_dir)
    labels = np.load(info["labels"])
    test = info["test"]
    qdq = os.path.join(args.tmp, "vit.x86.qdq.onnx")
    if os.path.exists(qdq):
        os.remove(qdq)
    run([args.qhost, "quantize", "--backend", "x86", "--plugin-dir", args.plugin_dir, "--calib", info["calib"],
         "-o", qdq, "--quiet", info["onnx"]])

    fails = []
    float_acc = accuracy(args.qhost, info["onnx"], test, labels, os.path.join(args.tmp, "float.npy"))
    one_image = 100.0 / labels.shape[0]
    print(f"float: qhost {float_acc:.2f}%, PyTorch {info['float_accuracy']:.2f}% on {labels.shape[0]} images")
    if abs(float_acc - info["float_accuracy"]) > one_image + 1e-9:
        fails.append(f"qhost float accuracy {float_acc:.2f}% vs PyTorch's {info['float_accuracy']:.2f}%")
    if float_acc < MIN_FLOAT:
        fails.append(f"float accuracy {float_acc:.2f}% < {MIN_FLOAT}%: the training did not work")
    accs = {who: accuracy(args.qhost, qdq, test, labels, os.path.join(args.tmp, f"{who}.npy"), backend)
            for who, backend in (("host", None), ("x86", "x86"))}
    print("int8: " + ", ".join(f"{who} {a:.2f}% ({a - float_acc:+.2f})" for who, a in accs.items()))
    fails += int8_problems(float_acc, accs)

    broken = rolled_head(qdq, os.path.join(args.tmp, "vit.rolled.qdq.onnx"))
    bad = {who: accuracy(args.qhost, broken, test, labels, os.path.join(args.tmp, f"rolled.{who}.npy"), backend)
           for who, backend in (("host", None), ("x86", "x86"))}
    print("self-check, head rows rolled: " + ", ".join(f"{who} {a:.2f}%" for who, a in bad.items()))
    caught = int8_problems(float_acc, bad)
    if len(caught) != len(bad):
        fails.append(f"the bar did not catch the rolled head: {bad}")

    for f in fails:
        print(f"FAIL: {f}")
    print("PASS" if not fails else "FAIL")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
