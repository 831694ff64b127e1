#!/usr/bin/python3
"""The qnnpack backend (XNNPACK's operators) against PyTorch 1.13's own qnnpack engine on the
bundled digits CNN, one invocation, one machine:

  /usr/bin/python3 bench/bench_qnnpack_vs_torch.py --qhost build/qhost [--threads 1,2] [--runs 50]

qhost quantizes examples/digits_cnn.onnx with `--backend qnnpack` and times it with
`qhost bench --backend qnnpack --no-fp32` on examples/digits_test.npy (497 images in one
batch). PyTorch builds the same architecture (examples/make_digits_model.py's DigitsCNN;
the weights do not change the time), quantizes it with prepare_fx / convert_fx and
qnnpack's qconfig and BackendConfig (calibrated on examples/digits_calib.npy), and times
the same batch with torch.backends.quantized.engine = 'qnnpack', in a child process with
OMP_WAIT_POLICY=PASSIVE (its default spin is far slower on a busy machine) and
torch.set_num_threads(threads). Each side: 3 warm-up runs, then --runs timed ones; the
median, the minimum and the ratio are printed. Information only: it never fails.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")

TORCH_CHILD = r"""
import sys, time, statistics
sys.path.insert(0, sys.argv[1])
import numpy as np, torch
from make_digits_model import DigitsCNN
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_qnnpack_backend_config
from torch.ao.quantization.quantize_fx import prepare_fx, convert_fx
torch.backends.quantized.engine = "qnnpack"
torch.set_num_threads(int(sys.argv[2]))
torch.manual_seed(0)
m = DigitsCNN().eval()
calib = torch.tensor(np.load(sys.argv[1] + "/digits_calib.npy"))
x = torch.tensor(np.load(sys.argv[1] + "/digits_test.npy"))
p = prepare_fx(m, get_default_qconfig_mapping("qnnpack"), (calib[:1],), backend_config=get_qnnpack_backend_config())
with torch.no_grad():
    p(calib)
    q = convert_fx(p)
    for _ in range(3):
        q(x)
    ts = []
    for _ in range(int(sys.argv[3])):
        t = time.perf_counter()
        q(x)
        ts.append((time.perf_counter() - t) * 1e3)
print(statistics.median(ts), min(ts))
"""


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=50)
    a = ap.parse_args()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="qhost-bench-qnnpack-") as tmp:
        model = os.path.join(tmp, "digits.qnnpack.qdq.onnx")
        subprocess.run([a.qhost, "quantize", os.path.join(EX, "digits_cnn.onnx"), "--backend", "qnnpack", "--calib",
                        os.path.join(EX, "digits_calib.npy"), "-o", model, "--quiet"], check=True)
        for t in a.threads.split(","):
            out = subprocess.run([a.qhost, "bench", model, "--input", os.path.join(EX, "digits_test.npy"),
                                  "--backend", "qnnpack", "--no-fp32", "--json", "--threads", t, "--runs",
                                  str(a.runs)], check=True, capture_output=True).stdout
            b = json.loads(out)
            env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
            tm = subprocess.run([sys.executable, "-c", TORCH_CHILD, EX, t, str(a.runs)], env=env, check=True,
                                capture_output=True, text=True).stdout.split()
            tmed, tmin = float(tm[0]), float(tm[1])
            print(f"digits, {t} thread(s): qhost --backend qnnpack median {b['median_ms']:.3f} ms "
                  f"[min {b['min_ms']:.3f}]; PyTorch qnnpack engine median {tmed:.3f} ms [min {tmin:.3f}]; "
                  f"PyTorch / qhost {tmed / b['median_ms']:.2f}x (medians), {tmin / b['min_ms']:.2f}x (minima)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
