#!/usr/bin/python3
"""Observer parity: qhost's host observers against PyTorch 1.13's, bit for bit.

Generates random calibration batches and observer configs, runs PyTorch's observers
(torch.ao.quantization.observer) on them, runs the same cases through qhost's C
observers (the unit-test binary test_observers in oracle mode:
`test_observers --oracle IN.json OUT.json`), and compares every scale as float32 bits
and every zero point exactly. Also compares qhost's torch.sum order (docs/numerics.md
§6.6) with torch.sum, and the ONNX Runtime-style Percentile/Entropy observers with a
numpy transcription of ONNX Runtime's HistogramCollector. Their bar (ORT_MIN_IDENTICAL):
55 of the 60 cases identical and none more than 1 % off. The other 5 are symmetric
Percentile cases whose |x| histogram grew past its first range and whose threshold lies
in the grown part: ONNX Runtime extends the edges by the width of its first two float32
edges (e0[1] - e0[0], off by up to an ulp of the edge), and that error adds up over every
added bin (1e-5 relative after a few thousand bins); qhost computes each edge from the
exact width (framework/quant/observers/orthist.c).

Usage: /usr/bin/python3 tests/parity/observers/check_observers.py --driver build/tests/test_observers
Exit status 0 when every PyTorch family is bit-exact on all of its cases and the ONNX
Runtime-style cases meet their bar.
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

# The histogram search depends on torch.sum's order, which depends on the CPU path.
os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.ao.quantization import observer as tob  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

DTYPES = {"quint8": torch.quint8, "qint8": torch.qint8, "qint32": torch.qint32}
QSCHEMES = {
    "per_tensor_affine": torch.per_tensor_affine,
    "per_tensor_symmetric": torch.per_tensor_symmetric,
    "per_channel_affine": torch.per_channel_affine,
    "per_channel_symmetric": torch.per_channel_symmetric,
}


def b64(a):
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode()


def f32bits(v):
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def data(rng, shape, kind=None, s=None):
    kind = kind or rng.choice(
        ["normal", "positive", "negative", "uniform", "tiny", "constant", "cauchy", "relu", "wide"])
    n = int(np.prod(shape))
    if s is None:
        s = float(rng.choice([0.01, 0.3, 1.0, 3.7, 20.0, 150.0]))
    if kind == "normal":
        x = rng.normal(rng.normal() * s, s, n)
    elif kind == "positive":
        x = np.abs(rng.normal(0, s, n)) + rng.uniform(0, s)
    elif kind == "negative":
        x = -np.abs(rng.normal(0, s, n)) - rng.uniform(0, s)
    elif kind == "uniform":
        a = rng.uniform(-s, s)
        x = rng.uniform(a, a + rng.uniform(0.001, 2) * s, n)
    elif kind == "tiny":
        x = rng.normal(0, 1e-9, n)
    elif kind == "constant":
        x = np.full(n, float(rng.choice([0.0, 1.0, -2.5, s])))
    elif kind == "cauchy":
        x = np.clip(rng.standard_cauchy(n) * s, -1e4, 1e4)
    elif kind == "relu":
        x = np.maximum(rng.normal(0, s, n), 0)
    else:
        x = rng.normal(0, s, n) * rng.choice([1, 3, 10])
    return x.astype(np.float32).reshape(shape)


RANGES = [None, None, None, (0, 127), (-127, 127), (0, 255), (-128, 127), (0, 15), (-8, 7)]


def base_config(rng, name, per_channel):
    dtype = str(rng.choice(["quint8", "qint8", "quint8", "qint8", "qint32"]
                           if "Histogram" not in name else ["quint8", "qint8"] * 6 + ["qint32"]))
    if per_channel:
        qscheme = str(rng.choice(["per_channel_affine", "per_channel_symmetric"]))
    else:
        qscheme = str(rng.choice(["per_tensor_affine", "per_tensor_symmetric"]))
    c = {"observer": name, "dtype": dtype, "qscheme": qscheme,
         "reduce_range": bool(rng.random() < 0.3)}
    r = RANGES[rng.integers(len(RANGES))]
    if r is not None and dtype != "qint32":
        if dtype == "quint8" and r[0] < 0:
            r = (0, r[1] if r[1] > 0 else 127)
        if dtype == "qint8" and r[1] > 127:
            r = (-128, 127)  # qhost refuses ranges outside the dtype (see DEVIATIONS)
        c["quant_min"], c["quant_max"] = int(r[0]), int(r[1])
    if "Histogram" in name and dtype == "quint8" and "symmetric" in qscheme:
        c["reduce_range"] = False  # qhost refuses it as MinMax does (see DEVIATIONS)
    if rng.random() < 0.3:
        c["eps"] = 2.0 ** -12
    return c


# Configs PyTorch 1.13 accepts and qhost deliberately refuses (docs/observers.md).
DEVIATIONS = [
    {"observer": "MinMaxObserver", "dtype": "qint8", "qscheme": "per_tensor_affine",
     "reduce_range": False, "quant_min": 0, "quant_max": 255},
    {"observer": "PerChannelMinMaxObserver", "dtype": "qint8", "qscheme": "per_channel_symmetric",
     "reduce_range": False, "quant_min": -200, "quant_max": 50},
    {"observer": "HistogramObserver", "dtype": "quint8", "qscheme": "per_tensor_symmetric",
     "reduce_range": True},
]


def torch_observer(c):
    kw = {"dtype": DTYPES[c["dtype"]], "qscheme": QSCHEMES[c["qscheme"]],
          "reduce_range": c["reduce_range"]}
    if "quant_min" in c:
        kw["quant_min"], kw["quant_max"] = c["quant_min"], c["quant_max"]
    if "eps" in c:
        kw["eps"] = c["eps"]
    cls = getattr(tob, c["observer"])
    args = c.get("args", {})
    if "averaging_constant" in args:
        kw["averaging_constant"] = float(args["averaging_constant"])
    if "bins" in args:
        kw["bins"] = int(args["bins"])
    if "upsample_rate" in args:
        kw["upsample_rate"] = int(args["upsample_rate"])
    if "PerChannel" in c["observer"]:
        kw["ch_axis"] = c.get("ch_axis", 0)
    return cls(**kw)


def run_torch(c, batches):
    """(scales as float32 bits, zero points) or None when PyTorch refuses or fails."""
    try:
        if c["observer"] == "FixedQParamsObserver":
            o = tob.FixedQParamsObserver(float(c["args"]["scale"]), int(c["args"]["zero_point"]),
                                         dtype=DTYPES[c["dtype"]])
        else:
            o = torch_observer(c)
        for b in batches:
            o(torch.from_numpy(b))
        s, z = o.calculate_qparams()
    except (AssertionError, NotImplementedError, RuntimeError, OverflowError):
        return None
    s = s.reshape(-1).to(torch.float32).numpy()
    z = z.reshape(-1).to(torch.int64).numpy()
    return [int(v) for v in s.view(np.uint32)], [int(v) for v in z]


def minmax_cases(rng, name, count):
    per_channel = "PerChannel" in name
    out = []
    for _ in range(count):
        c = base_config(rng, name, per_channel)
        if "MovingAverage" in name:
            c["args"] = {"averaging_constant": repr(float(rng.choice(
                [0.01, 0.5, 0.1, 0.3, 0.9, rng.uniform(0, 1)])))}
        if per_channel:
            rank = int(rng.integers(2, 5))  # PyTorch cannot flatten a rank-1 tensor here
            shape = [int(rng.integers(1, 6)) for _ in range(rank)]
            axis = int(rng.integers(-rank, rank))
            c["ch_axis"] = axis
        else:
            shape = [int(rng.integers(1, 40))]
        batches = []
        for _ in range(int(rng.integers(1, 4))):
            if not per_channel:
                shape = [int(rng.integers(1, 40))]
            x = data(rng, shape)
            if per_channel and rng.random() < 0.3:
                x[..., 0] = 0  # some all-zero slices
            batches.append(x)
        out.append((c, batches))
    return out


def histogram_cases(rng, count):
    out = []
    for i in range(count):
        c = base_config(rng, "HistogramObserver", False)
        if rng.random() < 0.3:
            c["args"] = {"bins": str(int(rng.choice([64, 256, 1000, 2048]))),
                         "upsample_rate": str(int(rng.choice([16, 128])))}
        # One scale per case: PyTorch's combine allocates bins * downsample_rate floats,
        # and a range that grows 10^6-fold between batches would take gigabytes.
        scale = float(rng.choice([0.3, 1.0, 2.5, 3.7, 20.0]))
        batches = []
        for _ in range(int(rng.integers(1, 5))):
            n = int(rng.integers(1, 3000))
            kind = str(rng.choice(["normal", "positive", "negative", "uniform", "cauchy", "relu",
                                   "wide"]))
            if i % 7 == 0 and rng.random() < 0.5:
                kind = "constant"
            elif i % 5 == 0:
                kind = "wide"  # ranges over several integers: the int() bug bites
            x = data(rng, [n], kind, scale * float(rng.uniform(0.5, 2.0)))
            if kind == "cauchy":
                x = np.clip(x, -50 * scale, 50 * scale)
            batches.append(x)
        out.append((c, batches))
    return out


def histogram_growth_cases(rng, count):
    """Many batches whose range keeps growing, with heavy tails, as the deep activations
    of resnet18 see them: every batch goes through the upsample/downsample combine
    (_adjust_min_max, _combine_histograms), the histogram fills with interpolated
    fractions, and the search walks a long, sparse tail."""
    out = []
    for _ in range(count):
        dtype = str(rng.choice(["quint8", "qint8"]))
        c = {"observer": "HistogramObserver", "dtype": dtype,
             "qscheme": str(rng.choice(["per_tensor_affine", "per_tensor_symmetric"])),
             "reduce_range": False}
        if rng.random() < 0.25:
            c["args"] = {"bins": str(int(rng.choice([256, 1000]))),
                         "upsample_rate": str(int(rng.choice([16, 128])))}
        scale = float(rng.choice([0.3, 1.0, 2.7, 6.0]))
        n = int(rng.choice([1024, 2048, 4096]))
        batches = []
        for k in range(int(rng.integers(6, 17))):
            g = scale * (1.0 + 0.08 * k * float(rng.random()))
            kind = str(rng.choice(["relu_t", "t", "laplace"]))
            if kind == "relu_t":
                x = np.maximum(rng.standard_t(3, n) * g, 0)
            elif kind == "t":
                x = rng.standard_t(3, n) * g + 0.2 * g * rng.normal()
            else:
                x = rng.laplace(0, g, n)
            batches.append(np.clip(x, -40 * scale, 40 * scale).astype(np.float32))
        out.append((c, batches))
    return out


def histogram_tie_cases():
    """Batches that put _adjust_min_max's start index on an exact half (k + 0.5 fine
    cells below the old minimum), where torch.round rounds half to even. The old state
    is followed in float32 as PyTorch computes it (fine cell, downsample rate, relaxed
    maximum); the first batch is a relu-like [0, 1], so the minima stay small and the
    halves exactly representable for a few widenings (the case ends when one is not)."""
    f = np.float32
    out = []
    for half, bins, up in [(2.5, 2048, 128), (3.5, 2048, 128), (0.5, 2048, 128), (6.5, 256, 16),
                           (1.5, 512, 16), (0.5, 8, 2), (1.5, 16, 2), (2.5, 32, 4), (0.5, 64, 4)]:
        for dtype, qscheme in [("quint8", "per_tensor_affine"), ("qint8", "per_tensor_symmetric")]:
            c = {"observer": "HistogramObserver", "dtype": dtype, "qscheme": qscheme,
                 "reduce_range": False, "args": {"bins": str(bins), "upsample_rate": str(up)}}
            x = np.linspace(0.0, 1.0, 997)
            batches = [np.concatenate([x, x * x]).astype(np.float32)]
            lo, hi = f(0.0), f(1.0)
            for k in range(6):
                cell = f(f(hi - lo) / f(bins * up))
                v = f(lo - f(f(half) * cell))
                for _ in range(8):  # a few float32 steps either way
                    if f(f(lo - v) / cell) == f(half):
                        break
                    v = np.nextafter(v, f(np.inf) if f(f(lo - v) / cell) > f(half) else f(-np.inf))
                if f(f(lo - v) / cell) != f(half):
                    break
                b = np.maximum(np.sin(np.linspace(0.0, 3.0 * (k + 1), 600)), 0) * 0.9
                batches.append(np.concatenate([b, [v]]).astype(np.float32))
                width = f(f(bins) * cell)
                rate = np.ceil(f(f(hi - v) / width))
                hi = f(hi + f(f(f(rate) * width) - f(hi - v)))
                lo = v
            if len(batches) < 3:
                raise RuntimeError(f"tie case {half}/{bins}/{up}: fewer than two exact halves")
            out.append((c, batches))
    return out


def fixed_cases(rng, count):
    out = []
    for _ in range(count):
        dtype = str(rng.choice(["quint8", "qint8"]))
        lo, hi = (0, 255) if dtype == "quint8" else (-128, 127)
        scale = float(rng.choice([1 / 256, 2 / 256, rng.uniform(1e-4, 1)]))
        zp = int(rng.integers(0, 256)) if dtype == "quint8" else int(rng.integers(-128, 128))
        c = {"observer": "FixedQParamsObserver", "dtype": dtype, "qscheme": "per_tensor_affine",
             "quant_min": lo, "quant_max": hi, "args": {"scale": repr(scale), "zero_point": str(zp)}}
        out.append((c, [data(rng, [10])]))
    return out


# ---- ONNX Runtime's HistogramCollector, transcribed (reference for Percentile/Entropy) ----

def ort_collect(state, x, method, symmetric, num_bins):
    x = x.flatten()
    if method == "percentile" and symmetric:
        mn, mx = np.min(x), np.max(x)
        a = np.abs(x)
        if state is None:
            h, e = np.histogram(a, bins=num_bins)
            return [h, e.astype(a.dtype), mn, mx]
        h0, e0, omn, omx = state
        amax = np.max(a)
        if amax > e0[-1]:
            w = e0[1] - e0[0]
            e0 = np.hstack((e0, np.arange(e0[-1] + w, amax + w, w)))
        h, e = np.histogram(a, bins=e0)
        e = e.astype(a.dtype)
        h[: len(h0)] += h0
        return [h, e, min(omn, mn), max(omx, mx)]
    mn, mx = np.min(x), np.max(x)
    th = max(abs(mn), abs(mx))
    if state is None:
        h, e = np.histogram(x, num_bins, range=(-th, th))
        return [h, e, mn, mx, th]
    h0, e0, omn, omx, oth = state
    if th <= oth:
        h, _ = np.histogram(x, len(h0), range=(-oth, oth))
        return [h + h0, e0, min(omn, mn), max(omx, mx), oth]
    if oth == 0:
        h, e = np.histogram(x, len(h0), range=(-th, th))
        h += h0
    else:
        stride = 2 * oth / len(h0)
        half = int((th - oth) // stride + 1)
        nb = len(h0) + 2 * half
        th = half * stride + oth
        h, e = np.histogram(x, nb, range=(-th, th))
        h[half: nb - half] += h0
    return [h, e, min(omn, mn), max(omx, mx), th]


def ort_percentile(state, pct, symmetric):
    h, e = state[0], state[1]
    cdf = np.cumsum(h / h.sum())
    if symmetric:
        i = np.searchsorted(cdf, pct / 100.0)
        lo, hi = -e[i], e[i]
    else:
        cut = (100.0 - pct) / 200.0
        lo, hi = e[np.searchsorted(cdf, cut)], e[np.searchsorted(cdf, 1.0 - cut)]
    return max(lo, state[2]), min(hi, state[3])


def ort_entropy(state, nq):
    from scipy.stats import entropy

    def smooth(p, eps=0.0001):
        z = (p == 0).astype(np.float32)
        nz = (p != 0).astype(np.float32)
        nzero = z.sum()
        nnon = p.size - nzero
        if not nnon:
            return None
        eps1 = eps * float(nzero) / float(nnon)
        if not eps1 < 1.0:
            return None
        out = p.astype(np.float32)
        out += eps * z + (-eps1) * nz
        return None if (out <= 0).sum() else out

    h, e = state[0], state[1]
    nb = h.size
    zero = nb // 2
    half = nq // 2
    kl = np.zeros(zero - half + 1)
    th = [(0, 0)] * kl.size
    for i in range(half, zero + 1):
        s = zero - i
        t = zero + i + 1 if zero + i + 1 <= nb else nb
        th[i - half] = (float(e[s]), float(e[t]))
        sl = h[s:t].copy()
        p = sl.copy()
        p[0] += h[:s].sum()
        p[-1] += h[t:].sum()
        nzs = (p != 0).astype(np.int64)
        qb = np.zeros(nq, dtype=np.int64)
        m = sl.size // nq
        for k in range(nq):
            qb[k] = sl[k * m:(k + 1) * m].sum()
        qb[-1] += sl[nq * m:].sum()
        q = np.zeros(p.size, dtype=np.int64)
        for k in range(nq):
            norm = nzs[k * m:(k + 1) * m].sum()
            if norm != 0:
                q[k * m:(k + 1) * m] = float(qb[k]) / float(norm)
        p, q = smooth(p), smooth(q)
        kl[i - half] = entropy(p, q) if (p is not None and q is not None) else float("inf")
    lo, hi = th[int(np.argmin(kl))]
    return max(lo, state[2]), min(hi, state[3])


# Of the 60 ONNX Runtime-style cases (seed 1234), those qhost gives bit for bit; the
# others must stay within 1 % (see the top of this file for why 5 differ).
ORT_MIN_IDENTICAL = 55


def ort_cases(rng, count):
    out = []
    for i in range(count):
        method = "percentile" if i % 2 == 0 else "entropy"
        sym = bool(rng.random() < 0.5)
        c = {"observer": "PercentileObserver" if method == "percentile" else "EntropyObserver",
             "dtype": "qint8" if sym else "quint8",
             "qscheme": "per_tensor_symmetric" if sym else "per_tensor_affine",
             "reduce_range": False}
        if method == "percentile":
            pct = float(rng.choice([99.0, 99.9, 99.99, 99.999]))
            c["args"] = {"percentile": repr(pct), "num_bins": "2048"}
        else:
            c["args"] = {"num_bins": str(int(rng.choice([128, 256, 512]))),
                         "num_quantized_bins": "128"}
        # one scale per case: a range that grows k-fold multiplies the bins by k
        scale = float(rng.choice([0.3, 1.0, 3.7]))
        batches = [data(rng, [int(rng.integers(200, 3000))],
                        str(rng.choice(["normal", "relu", "uniform"])),
                        scale * float(rng.uniform(0.7, 1.5)))
                   for _ in range(int(rng.integers(1, 4)))]
        state = None
        nb = int(c["args"]["num_bins"])
        for b in batches:
            state = ort_collect(state, b, method, sym, nb)
        lo, hi = ort_percentile(state, pct, sym) if method == "percentile" else ort_entropy(state, 128)
        ref = tob.MinMaxObserver(dtype=DTYPES[c["dtype"]], qscheme=QSCHEMES[c["qscheme"]])
        s, z = ref._calculate_qparams(torch.tensor(np.float32(lo)), torch.tensor(np.float32(hi)))
        out.append((c, batches, float(s[0]), int(z[0])))
    return out


def torch_sum_cases(rng, count):
    sizes = [1, 3, 7, 8, 9, 31, 33, 64, 100, 127, 1000, 2048, 2049, 4096, 5000, 33000]
    out = []
    for i in range(count):
        n = sizes[i % len(sizes)] if i < 2 * len(sizes) else int(rng.integers(1, 70000))
        x = (rng.normal(0, 1, n) * rng.choice([1, 1e3, 1e-3])).astype(np.float32)
        if rng.random() < 0.5:
            x = np.abs(np.round(x * 10)).astype(np.float32)  # counts, like a histogram
        out.append(x)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", required=True, help="the test_observers binary")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--cases", type=int, default=240, help="random cases per family")
    ap.add_argument("--growth-cases", type=int, default=48,
                    help="random cases of the growing heavy-tailed histogram family")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)

    families = {}
    for name in ["MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
                 "MovingAveragePerChannelMinMaxObserver"]:
        families[name] = minmax_cases(rng, name, a.cases)
    families["HistogramObserver"] = histogram_cases(rng, a.cases)
    families["HistogramObserver (growing, heavy tails)"] = (
        histogram_growth_cases(np.random.default_rng(a.seed + 1), a.growth_cases)
        + histogram_tie_cases())
    families["FixedQParamsObserver"] = fixed_cases(rng, a.cases)
    t0 = time.time()
    ort = ort_cases(rng, max(20, a.cases // 4))
    print(f"ONNX Runtime transcription: {time.time() - t0:.1f} s", file=sys.stderr)
    sums = torch_sum_cases(rng, a.cases)

    cases, index = [], []
    for fam, items in families.items():
        for c, batches in items:
            cc = dict(c)
            cc["batches"] = [{"shape": list(b.shape), "data": b64(b)} for b in batches]
            cases.append(cc)
            index.append((fam, c, batches))
    dev_batches = [data(rng, [3, 5], "normal")]
    for c in DEVIATIONS:
        cc = dict(c)
        cc["batches"] = [{"shape": list(b.shape), "data": b64(b)} for b in dev_batches]
        cases.append(cc)
    for c, batches, _, _ in ort:
        cc = dict(c)
        cc["batches"] = [{"shape": list(b.shape), "data": b64(b)} for b in batches]
        cases.append(cc)

    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(inp, "w") as f:
            json.dump({"cases": cases, "sums": [b64(x) for x in sums]}, f)
        t0 = time.time()
        subprocess.run([a.driver, "--oracle", inp, outp], check=True)
        print(f"qhost: {len(cases)} cases in {time.time() - t0:.1f} s", file=sys.stderr)
        with open(outp) as f:
            got = json.load(f)

    table = {}
    failures = []
    for k, (fam, c, batches) in enumerate(index):
        want = run_torch(c, batches)
        res = got["results"][k]
        row = table.setdefault(fam, {"cases": 0, "exact": 0, "both_refused": 0, "mismatch": 0})
        row["cases"] += 1
        if want is None and "error" in res:
            row["both_refused"] += 1
        elif want is not None and "error" not in res and want == (res["scale"], res["zero_point"]):
            row["exact"] += 1
        else:
            row["mismatch"] += 1
            if len(failures) < 10:
                failures.append((fam, c, want, res))

    dev = {"cases": 0, "exact": 0, "both_refused": 0, "mismatch": 0}
    for k, c in enumerate(DEVIATIONS):
        res = got["results"][len(index) + k]
        dev["cases"] += 1
        # PyTorch accepts these; qhost must refuse each with a message naming the observer
        if run_torch(c, dev_batches) is not None and res.get("error", "").startswith(c["observer"]):
            dev["exact"] += 1
        else:
            dev["mismatch"] += 1
            failures.append(("deviation", c, None, res))
    table["documented deviations (qhost refuses)"] = dev

    ort_row = {"cases": 0, "exact": 0, "within_1pct": 0, "far": 0}
    near = []
    base = len(index) + len(DEVIATIONS)
    for k, (c, batches, s, z) in enumerate(ort):
        res = got["results"][base + k]
        ort_row["cases"] += 1
        if "error" in res:
            ort_row["far"] += 1
            continue
        gs = float(np.array(res["scale"], dtype=np.uint32).view(np.float32)[0])
        if f32bits(gs) == f32bits(s) and res["zero_point"][0] == z:
            ort_row["exact"] += 1
        elif abs(gs / s - 1) <= 0.01:
            ort_row["within_1pct"] += 1
            near.append((c, s, gs))
        else:
            ort_row["far"] += 1

    sum_exact = 0
    for x, bits in zip(sums, got["sums"]):
        want = torch.sum(torch.from_numpy(x)).item()
        sum_exact += f32bits(want) == bits
        if f32bits(want) != bits and len(failures) < 10:
            failures.append(("torch.sum", {"n": x.size, "dtype": str(x.dtype)}, want, bits))
    table["torch.sum order (§6.6)"] = {"cases": len(sums), "exact": sum_exact, "both_refused": 0,
                                      "mismatch": len(sums) - sum_exact}

    print(f"{'family':42} {'cases':>6} {'bit-exact':>10} {'both refuse':>12} {'mismatch':>9}")
    for fam, r in table.items():
        print(f"{fam:42} {r['cases']:6} {r['exact']:10} {r['both_refused']:12} {r['mismatch']:9}")
    print(f"\nONNX Runtime-style (numpy transcription): {ort_row['cases']} cases, "
          f"{ort_row['exact']} identical, {ort_row['within_1pct']} within 1 %, {ort_row['far']} further")
    for c, s, gs in near:
        print(f"  within 1 %: {c['observer']} {c['args']} {c['qscheme']}: transcription {s!r}, qhost {gs!r}")
    for fam, c, want, res in failures:
        print(f"MISMATCH {fam}: config {c} torch {want} qhost {res}")
    bad = sum(r["mismatch"] for r in table.values())
    if ort_row["exact"] < ORT_MIN_IDENTICAL or ort_row["far"]:
        print(f"MISMATCH ONNX Runtime-style: {ort_row['exact']} identical (bar {ORT_MIN_IDENTICAL}), "
              f"{ort_row['far']} more than 1 % off (bar 0)")
        bad += 1
    print(f"\n{sum(r['exact'] + r['both_refused'] for r in table.values())} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
