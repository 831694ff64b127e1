#!/usr/bin/python3
"""Float vs int8 accuracy of the bundled digits example, quantized by qhost.

  digits_accuracy.py --qhost PATH --workdir DIR [--backend fbgemm|qnnpack ...]
                     [--max-loss 1.0] [--no-torch]

Quantizes examples/digits_cnn.onnx with `qhost quantize --backend B --calib
examples/digits_calib.npy` for each backend (both by default), runs the float and
every int8 model on examples/digits_test.npy with `qhost run --labels` and prints
the accuracies next to that of PyTorch 1.13's FX reference model quantized from the
same calibration set with the same backend's default mapping. qhost's quantization is
PyTorch's bit for bit, so its int8 accuracy must equal the reference model's (the
loss against float, --max-loss, is integration/quantize's bar and is printed here;
--no-torch skips the oracle and then holds that bar only). Exit 1 when an int8 model's
accuracy differs from PyTorch's, loses more than --max-loss points, or a command fails.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402  (first: it sets ATEN_CPU_CAPABILITY before torch loads)

import argparse  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
EXAMPLES = os.path.join(ROOT, "examples")
MODEL = os.path.join(EXAMPLES, "digits_cnn.onnx")
CALIB = os.path.join(EXAMPLES, "digits_calib.npy")
TEST = os.path.join(EXAMPLES, "digits_test.npy")
LABELS = os.path.join(EXAMPLES, "digits_labels.npy")
ACCURACY = re.compile(r"^accuracy: ([0-9.]+)% \((\d+)/(\d+)\)$", re.M)


def qhost_accuracy(qhost, model, out):
    """Percent correct from `qhost run --labels`; raises with qhost's message."""
    r = subprocess.run([qhost, "run", model, "--input", TEST, "--labels", LABELS, "-o", out],
                       capture_output=True, text=True)
    m = ACCURACY.search(r.stdout)
    if r.returncode != 0 or m is None:
        raise RuntimeError(f"qhost run {model}: exit {r.returncode}: {r.stderr.strip()}")
    return 100.0 * int(m.group(2)) / int(m.group(3))


def torch_accuracy(backend):
    """Accuracy of PyTorch's FX reference model (default mapping, same calibration)."""
    import torch
    from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx
    sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
    import export_models
    torch.set_num_threads(1)
    if backend == "qnnpack":
        torch.backends.quantized.engine = "qnnpack"
    model = export_models.load_digits_model(MODEL)
    calib = torch.from_numpy(np.load(CALIB))
    mapping, _ = oracle.qconfig_mapping(backend, "default")
    bc = oracle.BACKEND_CONFIGS[backend]()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.filterwarnings("ignore")
        prepared = prepare_fx(model, mapping, (calib[0:1],), backend_config=bc)
        for i in range(calib.shape[0]):
            prepared(calib[i:i + 1])
        ref = convert_to_reference_fx(prepared, backend_config=bc)
        logits = ref(torch.from_numpy(np.load(TEST)))
    return 100.0 * float(np.mean(logits.argmax(1).numpy() == np.load(LABELS)))


def main():
    ap = argparse.ArgumentParser(description="digits example: float vs int8 accuracy")
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--backend", action="append", choices=oracle.BACKENDS)
    ap.add_argument("--max-loss", type=float, default=1.0, help="percentage points")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    ok = True
    float_acc = qhost_accuracy(args.qhost, MODEL, os.path.join(args.workdir, "digits.float.npy"))
    print(f"{'model':<16}{'accuracy':>10}{'loss (pp)':>11}{'PyTorch FX':>12}  result")
    print(f"{'float':<16}{float_acc:>9.2f}%{'':>11}{'':>12}")
    for backend in args.backend or oracle.BACKENDS:
        out = os.path.join(args.workdir, f"digits.{backend}.onnx")
        if os.path.exists(out):
            os.remove(out)
        torch_val = None if args.no_torch else torch_accuracy(backend)
        torch_acc = "-" if torch_val is None else f"{torch_val:.2f}%"
        cmd = [args.qhost, "quantize", "--backend", backend, "--calib", CALIB, "-o", out, MODEL]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            err = r.stderr.strip().splitlines()
            print(f"{'int8 ' + backend:<16}{'-':>10}{'-':>11}{torch_acc:>12}  FAIL: qhost quantize "
                  f"exit {r.returncode}: {err[-1] if err else ''}")
            ok = False
            continue
        try:
            acc = qhost_accuracy(args.qhost, out, os.path.join(args.workdir, f"digits.{backend}.npy"))
        except RuntimeError as e:
            print(f"{'int8 ' + backend:<16}{'-':>10}{'-':>11}{torch_acc:>12}  FAIL: {e}")
            ok = False
            continue
        loss = float_acc - acc
        why = []
        if loss > args.max_loss + 1e-9:
            why.append(f"loses more than {args.max_loss} pp")
        if torch_val is not None and abs(acc - torch_val) > 1e-9:
            why.append("differs from PyTorch's reference model")
        ok &= not why
        print(f"{'int8 ' + backend:<16}{acc:>9.2f}%{loss:>11.2f}{torch_acc:>12}  "
              f"{'FAIL: ' + '; '.join(why) if why else 'PASS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
