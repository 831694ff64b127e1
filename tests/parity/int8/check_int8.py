#!/usr/bin/python3
"""Int8 kernel parity: qhost's host reference int8 kernels against PyTorch 1.13.

Builds random quantized linear, conv2d (groups, depthwise, strides, pads, dilations,
fused relu) and add cases, runs them on PyTorch's quantized engines and through
qhost's reference kernels (the unit-test binary in oracle mode:
`test_int8_reference --oracle IN.json OUT.json`), and compares element by element:

  engine 'qnnpack' (quint8 activations, per-tensor and per-channel qint8 weights)
      against QH_REQUANT_QNNPACK: must be bit-exact;
  engine 'onednn' against QH_REQUANT_ONEDNN: ±1 allowed (docs/numerics.md §7: oneDNN's
      JIT rounds near-ties in its own order), counted;
  the reference model (dequantize, float op, + bias, quantize) against
      QH_REQUANT_REFERENCE: ±1 allowed (PyTorch's float GEMM sums in another order),
      counted;
  quantized add / add_relu on both engines: bit-exact except ±1 where y/so is within
      1e-4 of a half step (QNNPACK's add requantizes in fixed point; seen about once in
      4·10^5 elements), counted; a ±1 anywhere else fails.

Without AVX-512 VNNI PyTorch's onednn engine saturates u8 x s8 pair sums in int16
(tests/parity/torch_isa.py); there its linear and conv cases draw activations from
[0, 127], where no pair can saturate, and the output says so.

Prints, per comparison, cases, elements, exact and off-by-one counts. Exit status 0
when no element differs by more than one, the qnnpack linear/conv comparisons are
exact, add's off-by-ones are all at near-ties, and the off-by-one fraction of every
±1 comparison stays below 1e-3.

Usage: /usr/bin/python3 tests/parity/int8/check_int8.py --driver build/tests/test_int8_reference
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_isa  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
OFF_BY_ONE_LIMIT = 1e-3


def bits(v):
    return int(np.array(v, dtype=np.float32).view(np.uint32))


def f32(v):
    return float(np.float32(v))


def qspec(dtype, scale, zp):
    return {"dtype": dtype, "scale_bits": bits(scale), "zero_point": int(zp)}


def out_qparams(rng, y):
    """Output scale / zero point from the float result's range, jittered, so that the
    requantization multiplier stays in the range real models use (below 1)."""
    lo, hi = min(float(y.min()), 0.0), max(float(y.max()), 0.0)
    so = f32(max(hi - lo, 1e-3) / 255.0 * rng.uniform(0.6, 1.2))
    zo = int(np.clip(round(-lo / so), 0, 250))  # QNNPACK refuses an empty relu range
    return so, zo


def weights(rng, c_out, shape, per_channel):
    wq = rng.integers(-127, 128, size=(c_out,) + shape, dtype=np.int64)
    if per_channel:
        sw = [f32(s) for s in rng.uniform(0.001, 0.02, size=c_out)]
        w = torch._make_per_channel_quantized_tensor(
            torch.tensor(wq, dtype=torch.int8), torch.tensor(sw, dtype=torch.float64),
            torch.zeros(c_out, dtype=torch.int64), 0)
    else:
        sw = [f32(rng.uniform(0.001, 0.02))]
        w = torch._make_per_tensor_quantized_tensor(torch.tensor(wq, dtype=torch.int8), sw[0], 0)
    return wq, sw, w


def activations(rng, shape, xmax=255):
    xq = rng.integers(0, xmax + 1, size=shape, dtype=np.int64)
    sx, zx = f32(rng.uniform(0.005, 0.05)), int(rng.integers(0, 256))
    x = torch._make_per_tensor_quantized_tensor(torch.tensor(xq, dtype=torch.uint8), sx, zx)
    return xq, sx, zx, x


def common(xq, sx, zx, wq, sw, per_channel, bias, so, zo, relu):
    return {"x": qspec("u8", sx, zx), "xq": xq.ravel().tolist(), "wq": wq.ravel().tolist(),
            "w_scale_bits": [bits(s) for s in sw], "w_zero_points": [0] * len(sw),
            "per_channel": per_channel,
            "bias_bits": None if bias is None else [bits(b) for b in bias.tolist()],
            "y": qspec("u8", so, zo), "relu": relu}


def linear_case(rng, xmax=255):
    m, n, k = int(rng.integers(1, 17)), int(rng.integers(1, 33)), int(rng.integers(1, 301))
    per_channel, relu = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
    xq, sx, zx, x = activations(rng, (m, k), xmax)
    wq, sw, w = weights(rng, n, (k,), per_channel)
    bias = None if rng.integers(0, 4) == 0 else torch.tensor(
        rng.normal(0, 0.5, size=n).astype(np.float32))
    yf = F.linear(x.dequantize(), w.dequantize(), bias)
    so, zo = out_qparams(rng, yf)
    c = common(xq, sx, zx, wq, sw, per_channel, bias, so, zo, relu)
    c.update(op="linear", m=m, n=n, k=k)

    def run_engine():
        packed = torch.ops.quantized.linear_prepack(w, bias)
        fn = torch.ops.quantized.linear_relu if relu else torch.ops.quantized.linear
        return fn(x, packed, so, zo).int_repr()

    def run_reference():
        y = F.linear(x.dequantize(), w.dequantize(), bias)
        return torch.quantize_per_tensor(torch.relu(y) if relu else y, so, zo,
                                         torch.quint8).int_repr()
    return c, run_engine, run_reference


def conv_case(rng, xmax=255):
    kind = int(rng.integers(0, 3))  # 0 plain, 1 grouped, 2 depthwise
    groups = 1 if kind == 0 else int(rng.integers(2, 5))
    c_in = groups * (int(rng.integers(1, 4)) if kind != 2 else 1)
    c_out = groups * int(rng.integers(1, 4))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    stride = [int(rng.integers(1, 3)), int(rng.integers(1, 3))]
    pad = [int(rng.integers(0, 2)), int(rng.integers(0, 2))]
    dil = [int(rng.integers(1, 3)), int(rng.integers(1, 3))]
    nb = int(rng.integers(1, 3))
    h = int(rng.integers(dil[0] * (kh - 1) + 1, 11))
    wd = int(rng.integers(dil[1] * (kw - 1) + 1, 11))
    per_channel, relu = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
    xq, sx, zx, x = activations(rng, (nb, c_in, h, wd), xmax)
    wq, sw, w = weights(rng, c_out, (c_in // groups, kh, kw), per_channel)
    bias = None if rng.integers(0, 4) == 0 else torch.tensor(
        rng.normal(0, 0.5, size=c_out).astype(np.float32))
    yf = F.conv2d(x.dequantize(), w.dequantize(), bias, stride, pad, dil, groups)
    so, zo = out_qparams(rng, yf)
    c = common(xq, sx, zx, wq, sw, per_channel, bias, so, zo, relu)
    c.update(op="conv2d", geometry=[nb, c_in, h, wd, c_out, kh, kw, groups, stride[0], stride[1],
                                    pad[0], pad[1], pad[0], pad[1], dil[0], dil[1]])

    def run_engine():
        packed = torch.ops.quantized.conv2d_prepack(w, bias, stride, pad, dil, groups)
        fn = torch.ops.quantized.conv2d_relu if relu else torch.ops.quantized.conv2d
        return fn(x, packed, so, zo).int_repr()

    def run_reference():
        y = F.conv2d(x.dequantize(), w.dequantize(), bias, stride, pad, dil, groups)
        return torch.quantize_per_tensor(torch.relu(y) if relu else y, so, zo,
                                         torch.quint8).int_repr()
    return c, run_engine, run_reference


def add_case(rng):
    n = int(rng.integers(1, 2000))
    relu = bool(rng.integers(0, 2))
    aq, sa, za, a = activations(rng, (n,))
    bq, sb, zb, b = activations(rng, (n,))
    yf = a.dequantize() + b.dequantize()
    so, zo = out_qparams(rng, yf)
    c = {"op": "add", "x": qspec("u8", sa, za), "b": qspec("u8", sb, zb),
         "xq": aq.tolist(), "bq": bq.tolist(), "y": qspec("u8", so, zo), "relu": relu}

    # Where y/so lies within 1e-4 of a half step (numpy, spec §7 formula): QNNPACK's
    # fixed-point add rounds such near-ties its own way.
    fa = (aq - za).astype(np.float32) * np.float32(sa)
    fb = (bq - zb).astype(np.float32) * np.float32(sb)
    y = (fa + fb).astype(np.float32)
    if relu:
        y = np.maximum(y, np.float32(0))
    v = (y * (np.float32(1) / np.float32(so))).astype(np.float32).astype(np.float64)
    c["near_tie"] = np.abs(np.abs(v - np.floor(v)) - 0.5) < 1e-4

    def run_engine():
        fn = torch.ops.quantized.add_relu if relu else torch.ops.quantized.add
        return fn(a, b, so, zo).int_repr()
    return c, run_engine, None


def run_driver(driver, cases):
    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(inp, "w") as f:
            json.dump({"cases": cases}, f)
        subprocess.run([driver, "--oracle", inp, outp], check=True)
        with open(outp) as f:
            return json.load(f)["results"]


class Tally:
    def __init__(self, name, exact_required):
        self.name, self.exact_required = name, exact_required
        self.cases = self.elements = self.exact = self.off1 = self.worse = self.errors = 0

    def add(self, ours, theirs, near_tie=None):
        """near_tie: elements where a ±1 is allowed; elsewhere it counts as worse."""
        self.cases += 1
        if isinstance(ours, dict):
            self.errors += 1
            print(f"  {self.name}: driver error: {ours['error']}")
            return
        ours = np.array(ours, dtype=np.int64)
        theirs = theirs.numpy().astype(np.int64).ravel()
        if ours.shape != theirs.shape:
            self.errors += 1
            print(f"  {self.name}: shape {ours.shape} vs {theirs.shape}")
            return
        d = np.abs(ours - theirs)
        self.elements += d.size
        self.exact += int((d == 0).sum())
        self.off1 += int((d == 1).sum())
        self.worse += int((d > 1).sum())
        if near_tie is not None:
            self.worse += int(((d == 1) & ~near_tie).sum())

    def ok(self):
        if self.errors or self.worse or self.cases == 0:
            return False
        if self.exact_required:
            return self.off1 == 0
        return self.off1 <= OFF_BY_ONE_LIMIT * self.elements

    def report(self):
        status = "ok" if self.ok() else "FAIL"
        print(f"{self.name:28s} cases {self.cases:4d}  elements {self.elements:8d}  exact "
              f"{self.exact:8d}  off-by-one {self.off1:5d}  worse {self.worse}  "
              f"errors {self.errors}  {status}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", required=True, help="test_int8_reference executable")
    ap.add_argument("--cases", type=int, default=200, help="cases per op and engine")
    ap.add_argument("--seed", type=int, default=20261122)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    tallies, jobs = [], []  # (tally, case, expected)
    onednn_xmax = 255 if torch_isa.onednn_has_vnni() else 127
    if onednn_xmax < 255:
        print("PyTorch's onednn engine has no AVX-512 VNNI here (it would saturate u8 x s8 pair "
              "sums): its linear and conv cases draw activations from [0, 127]")
    for engine, rule in (("qnnpack", "qnnpack"), ("onednn", "onednn")):
        torch.backends.quantized.engine = engine
        xmax = onednn_xmax if engine == "onednn" else 255
        t_eng = {op: Tally(f"{op} {engine}", engine == "qnnpack") for op in ("linear", "conv2d")}
        t_ref = {op: Tally(f"{op} reference", False) for op in ("linear", "conv2d")}
        t_add = Tally(f"add {engine}", False)
        for op, make in (("linear", linear_case), ("conv2d", conv_case)):
            for _ in range(args.cases):
                c, run_engine, run_reference = make(rng, xmax)
                jobs.append((t_eng[op], dict(c, rule=rule), run_engine()))
                jobs.append((t_ref[op], dict(c, rule="reference"), run_reference()))
        for _ in range(args.cases):
            c, run_engine, _ = add_case(rng)
            jobs.append((t_add, c, run_engine()))
        tallies += list(t_eng.values()) + list(t_ref.values()) + [t_add]

    results = run_driver(args.driver, [{k: v for k, v in c.items() if k != "near_tie"}
                                       for _, c, _ in jobs])
    if len(results) != len(jobs):
        print(f"driver returned {len(results)} results for {len(jobs)} cases")
        return 1
    for (tally, c, expected), ours in zip(jobs, results):
        tally.add(ours, expected, c.get("near_tie"))
    merged = {}
    for t in tallies:  # the two reference tallies per op come from both engine passes
        if t.name in merged:
            m = merged[t.name]
            for f in ("cases", "elements", "exact", "off1", "worse", "errors"):
                setattr(m, f, getattr(m, f) + getattr(t, f))
        else:
            merged[t.name] = t
    for t in merged.values():
        t.report()
    return 0 if all(t.ok() for t in merged.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
