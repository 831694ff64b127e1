#!/usr/bin/python3
"""The x86 plugin's int8 MatMul between two activations (attention's Q x K^T and
attention x V, plugins/x86/act-matmul.c) against the host's QDQ reference run: hand-built
QDQ units (batched 2-D to 4-D, zero points 0, 128 and others, softmax's fixed (1/256, 0)
qparams), with VNNI (oneDNN's u8 x s8 matmul plus the exact zero-point correction) and with
VNNI hidden (QHOST_CPU_DISABLE=avx512vnni,avxvnni: the exact fp32 path); a unit whose
products the fp32 path cannot hold exactly is declined without VNNI with its reason; and a
small attention block quantized for x86 runs both of its activation MatMuls on the plugin.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_x86_lowering as tl  # noqa: E402  (u8op_unit, ok, BACKEND)

qhtest = tl.qhtest
KERNEL = "onednn_matmul_qu8_qu8"
HIDE_VNNI = "avx512vnni,avxvnni"

# name -> u8op_unit spec: operand shapes, (scale, zero point) per operand, output qparams
UNITS = {
    "qk_4d": dict(op="MatMul", shapes=[[1, 4, 16, 8], [1, 4, 8, 16]], **{"in": [(0.05, 128), (0.04, 120)]},
                  out=(0.2, 130)),
    "av_softmax_4d": dict(op="MatMul", shapes=[[2, 3, 12, 12], [2, 3, 12, 8]], **{"in": [(1 / 256, 0), (0.03, 128)]},
                          out=(0.02, 125)),
    "bmm_3d_odd": dict(op="MatMul", shapes=[[5, 7, 13], [5, 13, 9]], **{"in": [(0.02, 3), (0.05, 250)]},
                       out=(4.0, 128)),
    "plain_2d_zero_zp": dict(op="MatMul", shapes=[[6, 20], [20, 11]], **{"in": [(0.03, 0), (0.02, 0)]},
                             out=(3.0, 0)),
}


def vnni_on_cpu():
    saved = os.environ.pop("QHOST_CPU_DISABLE", None)
    try:
        return qhtest.qhost_sees_vnni()
    finally:
        if saved is not None:
            os.environ["QHOST_CPU_DISABLE"] = saved


def run_hidden(r, hidden, *args):
    if hidden:
        os.environ["QHOST_CPU_DISABLE"] = hidden
    try:
        return tl.ok(r, *args)
    finally:
        os.environ.pop("QHOST_CPU_DISABLE", None)


def units_of(r, model, hidden=""):
    return json.loads(run_hidden(r, hidden, "inspect", model, "--json", *tl.BACKEND))["coverage"]["units"]


def case_units(r, tmp):
    """Each unit on the plugin, with and without VNNI, within one output step of the
    host's QDQ run (which rounds the float product), identical on >= 99%."""
    modes = ("", HIDE_VNNI) if vnni_on_cpu() else (HIDE_VNNI,)
    for i, (name, spec) in enumerate(UNITS.items()):
        model, npz, so = tl.u8op_unit(os.path.join(tmp, f"{name}.qdq.onnx"), spec, 500 + i)
        host = os.path.join(tmp, f"{name}.host.npy")
        tl.ok(r, "run", model, "--input", npz, "-o", host)
        a = np.load(host).astype(np.float64)
        assert len(np.unique(a)) > 5, f"{name}: degenerate test output"
        for hidden in modes:
            units = units_of(r, model, hidden)
            assert [u.get("kernel") for u in units] == [KERNEL], units
            low = os.path.join(tmp, f"{name}.x86.npy")
            run_hidden(r, hidden, "run", model, "--input", npz, "-o", low, *tl.BACKEND, "--threads", "2")
            b = np.load(low).astype(np.float64)
            assert a.shape == b.shape, (a.shape, b.shape)
            steps = np.rint(np.abs(a - b) / so)
            same = np.mean(steps == 0)
            print(f"{name} (VNNI {'hidden' if hidden else 'on'}): {100 * same:.2f}% identical over "
                  f"{steps.size}, max {steps.max():.0f} step(s)")
            assert steps.max() <= 1, f"{name}: {steps.max()} steps from the host's"
            assert same >= 0.99, f"{name}: only {100 * same:.2f}% identical"


def case_decline_no_vnni(r, tmp):
    """Without VNNI, softmax (1/256, 0) x V with zero point 0 over K = 300: the partial
    sums can reach 300 * 255 * 255 > 2^24, beyond the exact fp32 path: declined with the
    reason, run on the host (same output as the host's run); with VNNI the int8 path takes it."""
    spec = dict(op="MatMul", shapes=[[1, 2, 4, 300], [1, 2, 300, 8]], **{"in": [(1 / 256, 0), (0.03, 0)]},
                out=(0.05, 128))
    model, npz, so = tl.u8op_unit(os.path.join(tmp, "long.qdq.onnx"), spec, 600)
    units = units_of(r, model, HIDE_VNNI)
    print(f"no VNNI: {[(u.get('kernel'), u.get('reason')) for u in units]}")
    assert len(units) == 1 and units[0].get("kernel") == "host:reference", units
    assert "2^24" in units[0].get("reason", "") and "saturate" in units[0]["reason"], units
    host, low = os.path.join(tmp, "h.npy"), os.path.join(tmp, "l.npy")
    tl.ok(r, "run", model, "--input", npz, "-o", host)
    run_hidden(r, HIDE_VNNI, "run", model, "--input", npz, "-o", low, *tl.BACKEND)
    assert np.array_equal(np.load(host), np.load(low))
    # K = 256 with the same ranges fits (256 * 255 * 255 < 2^24): taken
    spec["shapes"] = [[1, 2, 4, 256], [1, 2, 256, 8]]
    model, npz, so = tl.u8op_unit(os.path.join(tmp, "fits.qdq.onnx"), spec, 601)
    assert [u.get("kernel") for u in units_of(r, model, HIDE_VNNI)] == [KERNEL]
    if vnni_on_cpu():
        assert [u.get("kernel") for u in units_of(r, model)] == [KERNEL]


def attention(tmp):
    import torch
    torch.manual_seed(0)

    class Attention(torch.nn.Module):
        """One head of scaled dot-product attention, FX-traceable (torch.matmul, softmax)."""

        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(32, 32) for _ in range(3))
            self.o = torch.nn.Linear(32, 32)

        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            a = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * (32 ** -0.5), dim=-1)
            return self.o(torch.matmul(a, v))

    path = os.path.join(tmp, "attn.onnx")
    m = Attention().eval()
    torch.onnx.export(m, torch.randn(2, 24, 32), path, opset_version=13, input_names=["x"], output_names=["y"])
    return path


def case_attention_block(r, tmp):
    """An attention block quantized for x86: Q x K^T and attention x V run on the plugin
    (with and without VNNI), the output within 2 steps of the host's QDQ run."""
    rng = np.random.default_rng(7)
    fmodel = attention(tmp)
    calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
    np.save(calib, rng.standard_normal((4, 2, 24, 32)).astype(np.float32))
    np.save(x, rng.standard_normal((2, 24, 32)).astype(np.float32))
    model = os.path.join(tmp, "attn.x86.qdq.onnx")
    tl.ok(r, "quantize", fmodel, *tl.BACKEND, "--backend-opt", "reduce_range=off", "--calib", calib, "-o", model,
          "--quiet")
    host = os.path.join(tmp, "h.npy")
    tl.ok(r, "run", model, "--input", x, "-o", host)
    import ort_compare
    (step, _), = ort_compare.output_steps(model).values()
    for hidden in ("", HIDE_VNNI) if vnni_on_cpu() else (HIDE_VNNI,):
        units = units_of(r, model, hidden)
        mm = [u for u in units if u["ops"] == "MatMul" and u.get("kernel") == KERNEL]
        print(f"VNNI {'hidden' if hidden else 'on'}: " +
              "; ".join(f"{u['name']}: {u.get('kernel')} {u.get('reason') or ''}" for u in units))
        assert len(mm) == 2, units
        low = os.path.join(tmp, "l.npy")
        # reduce_range=auto: without VNNI the Linears whose pair sums could saturate stay on the host
        run_hidden(r, hidden, "run", model, "--input", x, "-o", low, *tl.BACKEND)
        steps = np.abs(np.load(host).astype(np.float64) - np.load(low)) / np.float64(step)
        print(f"  x86 vs host QDQ run: max {steps.max():.3g} steps")
        assert steps.max() <= 2 + 1e-3, steps.max()


CASES = {
    "units": case_units,
    "decline_no_vnni": case_decline_no_vnni,
    "attention_block": case_attention_block,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
