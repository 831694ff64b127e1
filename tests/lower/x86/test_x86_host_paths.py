#!/usr/bin/python3
"""What the host does for the x86 plugin around its kernels, on small models made here
by torch.onnx.export (PyTorch 1.13, fixed seeds) and onnx.helper: a squeeze-excitation
Mul the plugin claims but its kernel cannot broadcast runs on the host with the kernel's
reason (the run succeeds and matches the host's QDQ run); a bias the exporter shares
through Identity nodes is quantized like a distinct bias (same QDQ form as the twin
with distinct biases, no Identity left, x86 takes the convs); ONNX Runtime's QDQ layout
with float weights behind QuantizeLinear -> DequantizeLinear runs its convs on the
plugin; and quantize's report labels match what `bench --backend x86` runs.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import qhtest  # noqa: E402
import ort_compare  # noqa: E402

# as test_x86_lowering.py: libdnnl's dynamic TLS confuses LSan's exit scan under GCC 12
qhtest.ASAN_OPTIONS += ":intercept_tls_get_addr=0"
PLUGIN_DIR = os.environ.get("QH_X86_PLUGIN_DIR", "")
BACKEND = ["--backend", "x86", "--plugin-dir", PLUGIN_DIR]
DIGITS = os.path.join(ROOT, "examples", "digits_cnn.onnx")
DIGITS_CALIB = os.path.join(ROOT, "examples", "digits_calib.npy")


def ok(r, *args, timeout=300):
    rc, out, err = r.run(*args, timeout=timeout)
    try:
        qhtest.check_no_crash(rc, err)
    except AssertionError as e:
        raise AssertionError(f"qhost {' '.join(map(str, args))}: {e}") from None
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}\n{err}"
    return out


def torch_export(module, shape, path):
    import torch
    module.eval()
    torch.onnx.export(module, torch.randn(*shape), path, opset_version=13, input_names=["x"],
                      output_names=["y"])
    return path


def compare_host(r, model, x, tmp, max_steps=1):
    """x86's run against the host's QDQ reference run, in output steps."""
    host, low = os.path.join(tmp, "host.npy"), os.path.join(tmp, "x86.npy")
    ok(r, "run", model, "--input", x, "-o", host)
    ok(r, "run", model, "--input", x, "-o", low, *BACKEND)
    (step, _), = ort_compare.output_steps(model).values()
    steps = np.abs(np.load(host).astype(np.float64) - np.load(low)) / np.asarray(step, np.float64)
    print(f"x86 vs host QDQ run: max {steps.max():.3g} steps")
    assert steps.max() <= max_steps + 1e-3, steps.max()


def bench_units(r, model, x):
    cov = json.loads(ok(r, "bench", model, "--json", "--runs", "1", "--warmup", "1", "--input", x,
                        *BACKEND))["coverage"]
    return cov, {u["name"]: u for u in cov["units"]}


def se_block(tmp):
    import torch
    torch.manual_seed(0)

    class SE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.fc1 = torch.nn.Conv2d(8, 4, 1)
            self.fc2 = torch.nn.Conv2d(4, 8, 1)
            self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x):
            x = torch.relu(self.c1(x))
            w = torch.nn.functional.adaptive_avg_pool2d(x, 1)
            w = torch.nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(w))))
            return self.c2(x * w)

    return torch_export(SE(), (1, 3, 16, 16), os.path.join(tmp, "se.onnx"))


def case_se_mul_refused(r, tmp):
    """The squeeze-excitation Mul ([1,C,H,W] x [1,C,1,1]) is accepted by x86's mul
    pattern but its kernel's reshape wants equal shapes: the unit runs on the host
    with that reason; inspect shows the same decision; everything else on x86."""
    rng = np.random.default_rng(0)
    fmodel = se_block(tmp)
    calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
    np.save(calib, rng.standard_normal((4, 1, 3, 16, 16)).astype(np.float32))
    np.save(x, rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    model = os.path.join(tmp, "se.x86.qdq.onnx")
    ok(r, "quantize", fmodel, *BACKEND, "--calib", calib, "-o", model, "--quiet")
    compare_host(r, model, x, tmp)
    cov, units = bench_units(r, model, x)
    mul = units["/Mul"]
    print(f"/Mul: {mul['kernel']} ({mul.get('reason')})")
    assert mul["kernel"] == "host:reference", mul
    assert "kernel 'x86_mul_nhwc_qu8' cannot run this unit" in mul["reason"], mul
    assert "differ in shape" in mul["reason"], mul
    convs = [u for u in cov["units"] if u["ops"].startswith("Conv")]
    assert len(convs) == 4 and all(u["kernel"].startswith("onednn_") for u in convs), convs
    assert cov["plugin_mac_share"] > 0.999, cov
    inspected = {u["name"]: u for u in json.loads(ok(r, "inspect", model, "--json", *BACKEND))["coverage"]["units"]}
    assert inspected["/Mul"]["kernel"] == "host:reference", inspected["/Mul"]
    assert inspected["/Mul"]["reason"] == mul["reason"], (inspected["/Mul"], mul)


CASES = {
    "se_mul_refused": case_se_mul_refused,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
