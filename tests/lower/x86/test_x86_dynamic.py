#!/usr/bin/python3
"""The x86 plugin's unit for ONNX Runtime's dynamic format (plugins/x86/dynamic-linear.c):
files written by `qhost quantize --dynamic` (a Gemm MLP; an encoder layer of nn.Linear on
3-D inputs; weights per tensor and per channel; Linears without bias) run with
`--backend x86`: every MatMulInteger -> Cast -> Mul, with its bias Add where the Linear has
one (the four-op pattern dynamic_linear_bias), is on the plugin and the output is
bit-identical to the host's reference path (DynamicQuantizeLinear, MatMulInteger, Cast, Mul,
Add as ONNX defines them); with VNNI hidden (QHOST_CPU_DISABLE=avx512vnni,avxvnni) a unit whose weights could
saturate vpmaddubsw's int16 pair sums is declined with that reason and runs on the host.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "parity", "dynamic"))
import test_x86_lowering as tl  # noqa: E402  (ok, BACKEND)

qhtest = tl.qhtest
KERNEL = "onednn_dynamic_linear_qu8_qs8w"
HIDE_VNNI = "avx512vnni,avxvnni"


def export(tmp, name):
    import torch
    import torch.nn as nn
    from check_dynamic import Encoder  # noqa: E402  (tests/parity/dynamic)
    torch.manual_seed(0)
    if name == "mlp":  # Gemm with transB=1 and a bias, 2-D input
        model, x = nn.Sequential(nn.Linear(24, 40), nn.ReLU(), nn.Linear(40, 16), nn.ReLU(),
                                 nn.Linear(16, 5)), torch.randn(6, 24)
    elif name == "no_bias":  # MatMul without Add: the three-op unit; a biased one between
        model, x = nn.Sequential(nn.Linear(24, 40, bias=False), nn.ReLU(), nn.Linear(40, 16),
                                 nn.ReLU(), nn.Linear(16, 5, bias=False)), torch.randn(2, 7, 24)
    else:  # MatMul on 3-D inputs then Add(bias); attention's two MatMuls stay float
        model, x = Encoder(32, 2, 64), torch.randn(2, 9, 32)
    path = os.path.join(tmp, f"{name}.onnx")
    torch.onnx.export(model.eval(), x, path, opset_version=13, input_names=["x"], output_names=["y"])
    xs = os.path.join(tmp, f"{name}.x.npy")
    np.save(xs, (torch.randn(*x.shape) * 2).numpy())
    return path, xs


def run_hidden(r, hidden, *args):
    if hidden:
        os.environ["QHOST_CPU_DISABLE"] = hidden
    try:
        return tl.ok(r, *args)
    finally:
        os.environ.pop("QHOST_CPU_DISABLE", None)


def check(r, tmp, name, per_channel, want_ops):
    """want_ops: the op chains of the MatMulInteger units, in graph order."""
    fpath, x = export(tmp, name)
    dyn = os.path.join(tmp, f"{name}.dyn.onnx")
    tl.ok(r, "quantize", "--dynamic", fpath, "-o", dyn, "--quiet", *(["--dynamic-per-channel"] if per_channel else []))
    host, low = os.path.join(tmp, "host.npy"), os.path.join(tmp, "x86.npy")
    tl.ok(r, "run", dyn, "--input", x, "-o", host)
    a = np.load(host)
    assert np.all(np.isfinite(a)) and len(np.unique(a)) > 5, a
    vnni = tl.VNNI
    if vnni:
        units = json.loads(tl.ok(r, "inspect", dyn, "--json", *tl.BACKEND))["coverage"]["units"]
        mine = [u for u in units if u["ops"].startswith("MatMulInteger")]
        print(f"{name}: {len(mine)} MatMulInteger units on {[u.get('kernel') for u in mine][:1]}: "
              f"{[u['ops'] for u in mine]}")
        assert [u["ops"] for u in mine] == want_ops, units
        assert all(u.get("kernel") == KERNEL for u in mine), units
        for threads in ("1", "2"):
            tl.ok(r, "run", dyn, "--input", x, "-o", low, *tl.BACKEND, "--threads", threads)
            b = np.load(low)
            print(f"  threads {threads}: max |x86 - host| = {np.abs(a - b).max():.3g}")
            assert np.array_equal(a, b), "not bit-identical to the host's reference path"
    units = json.loads(run_hidden(r, HIDE_VNNI, "inspect", dyn, "--json", *tl.BACKEND))["coverage"]["units"]
    mmi = [u for u in units if u["ops"].startswith("MatMulInteger")]
    declined = [u for u in mmi if u.get("kernel") == "host:reference"]
    print(f"  VNNI hidden: {len(declined)} of {len(mmi)} declined: {sorted({u.get('reason') for u in declined})}")
    # random weights put two large |w| in a column of every layer: units decline, with the reason
    assert declined and all("saturate" in (u.get("reason") or "") for u in declined), mmi
    assert all(u.get("kernel") in ("host:reference", KERNEL) for u in mmi), mmi
    run_hidden(r, HIDE_VNNI, "run", dyn, "--input", x, "-o", low, *tl.BACKEND)
    assert np.array_equal(a, np.load(low))
    if not vnni:
        raise qhtest.Skip("no VNNI on this CPU: only the decline was checked")


BIAS = "MatMulInteger+Cast+Mul+Add"  # dynamic_linear_bias: the bias added in the kernel
NO_BIAS = "MatMulInteger+Cast+Mul"


def case_mlp(r, tmp):
    check(r, tmp, "mlp", False, [BIAS] * 3)


def case_encoder(r, tmp):
    # Q, K, V, the out-projection, the feed-forward pair and the head, all with bias
    check(r, tmp, "encoder", False, [BIAS] * 7)


def case_encoder_per_channel(r, tmp):
    check(r, tmp, "encoder", True, [BIAS] * 7)


def case_no_bias(r, tmp):
    check(r, tmp, "no_bias", True, [NO_BIAS, BIAS, NO_BIAS])


def case_sse2_epilogue(r, tmp):
    """The kernel's epilogue at SSE2 width: AVX-512F hidden from qhost (VNNI is not)."""
    os.environ["QHOST_CPU_DISABLE"] = "avx512f"
    try:
        check(r, tmp, "no_bias", False, [NO_BIAS, BIAS, NO_BIAS])
    finally:
        os.environ.pop("QHOST_CPU_DISABLE", None)


CASES = {"mlp": case_mlp, "encoder": case_encoder, "encoder_per_channel": case_encoder_per_channel,
         "no_bias": case_no_bias, "sse2_epilogue": case_sse2_epilogue}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
