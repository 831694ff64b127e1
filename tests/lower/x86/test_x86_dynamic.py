#!/usr/bin/python3
"""The x86 plugin's unit for ONNX Runtime's dynamic format (plugins/x86/dynamic-linear.c):
files written by `qhost quantize --dynamic` (a Gemm MLP; an encoder layer of nn.Linear on
3-D inputs; weights per tensor and per channel; Linears without bias) run with
`--backend x86`: every MatMulInteger -> Cast -> Mul, with its bias Add where the Linear has
one (the four-op pattern dynamic_linear_bias), is on the plugin and the output is
bit-identical to the host's reference path (DynamicQuantizeLinear, MatMulInteger, Cast, Mul,
Add as ONNX defines them); with VNNI hidden (QHOST_CPU_DISABLE=avx512vnni,avxvnni) a unit whose weights could
saturate vpmaddubsw's int16 pair sums is declined with that reason and runs on the host.
Where qhost sees AMX-INT8 the kernel runs its own tdpbusd GEMM with the epilogue per tile
(plugins/x86/dynamic-gemm-amx.c), else with AVX-512 VNNI its own vpdpbusd one
(dynamic-gemm-avx512vnni.c); every comparison runs with AMX hidden (QHOST_CPU_DISABLE=amxint8:
the VNNI GEMM) and with both hidden (amxint8,avx512vnni), where the kernel writes oneDNN's
int32 result into the float output and converts it in place: cases with accumulators beyond 2^24 (where the conversion to float
rounds), shapes with tails in every dimension (rows not a multiple of 32, K not of 64,
columns not of 16 or 32) and BERT's feed-forward shape check both paths, and weights that
cannot saturate, which stay on the plugin with VNNI (and AMX) hidden, the vpmaddubsw path.
With VNNI hidden but AMX visible, weights that would saturate vpmaddubsw stay on the plugin:
the AMX GEMM needs no VNNI (its epilogue is AVX-512F).
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
KERNEL = "x86_dynamic_linear_qu8_qs8w"
HIDE_VNNI = "avx512vnni,avxvnni,amxint8"  # AMX's tdpbusd is exact: hide it too
HIDE_AMX = "amxint8"  # the AVX-512 VNNI GEMM
HIDE_OWN = "amxint8,avx512vnni"  # oneDNN and the in-place epilogue
PATHS = (None, HIDE_AMX, HIDE_OWN)
HIDE_VNNI_ONLY = "avx512vnni,avxvnni"  # AMX's tdpbusd with AVX-512F, no VNNI


def sees_amx():
    """Whether qhost sees AMX-INT8 and AVX-512F/BW/VL here (the AMX GEMM's needs): the
    kernel's flags (it lists AMX only where it enables the tile state), none hidden by
    QHOST_CPU_DISABLE."""
    hidden = os.environ.get("QHOST_CPU_DISABLE", "").replace(" ", "").split(",")
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read().split()
    except OSError:
        return False
    need = ("amx_tile", "amx_int8", "avx512f", "avx512bw", "avx512vl")
    return all(f in flags for f in need) and not {"amxint8", "avx512f", "avx512bw", "avx512vl"} & set(hidden)


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
        for hidden in PATHS:
            for threads in ("1", "2"):
                run_hidden(r, hidden, "run", dyn, "--input", x, "-o", low, *tl.BACKEND, "--threads", threads)
                b = np.load(low)
                print(f"  threads {threads}, hidden {hidden}: max |x86 - host| = {np.abs(a - b).max():.3g}")
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


def export_linear(tmp, name, k, n, weight, x):
    """One nn.Linear(k, n) with the given weight, exported as `name`, and its input file."""
    import torch
    import torch.nn as nn
    model = nn.Linear(k, n)
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(weight))
    path = os.path.join(tmp, f"{name}.onnx")
    torch.onnx.export(model.eval(), torch.from_numpy(x), path, opset_version=13, input_names=["x"],
                      output_names=["y"])
    xs = os.path.join(tmp, f"{name}.x.npy")
    np.save(xs, x)
    return path, xs


def quantize_and_compare(r, tmp, name, fpath, x, hidden, per_channel):
    """The single unit on the plugin (with `hidden` CPU features hidden) and its output
    bit-identical to the host's reference path at 1 and 2 threads; returns the dynamic file."""
    dyn = os.path.join(tmp, f"{name}.dyn.onnx")
    tl.ok(r, "quantize", "--dynamic", fpath, "-o", dyn, "--quiet", *(["--dynamic-per-channel"] if per_channel else []))
    host, low = os.path.join(tmp, "host.npy"), os.path.join(tmp, "x86.npy")
    tl.ok(r, "run", dyn, "--input", x, "-o", host)
    a = np.load(host)
    units = json.loads(run_hidden(r, hidden, "inspect", dyn, "--json", *tl.BACKEND))["coverage"]["units"]
    mine = [u for u in units if u["ops"].startswith("MatMulInteger")]
    assert [u.get("kernel") for u in mine] == [KERNEL], mine
    for hide in ([hidden] if hidden else PATHS):
        for threads in ("1", "2"):
            run_hidden(r, hide, "run", dyn, "--input", x, "-o", low, *tl.BACKEND, "--threads", threads)
            b = np.load(low)
            print(f"  {name}, hidden {hide}, threads {threads}: max |x86 - host| = {np.abs(a - b).max():.3g}")
            assert np.array_equal(a, b), "not bit-identical to the host's reference path"
    return dyn


def case_large_accumulators(r, tmp):
    """Positive weights and inputs over K = 2048: MatMulInteger's int32 results pass 2^24, so
    the int32 -> float conversion rounds (the host's Cast and the kernel's in-place
    vcvtdq2ps must round alike); 300 columns, not a multiple of 16 (the epilogue's tail)."""
    if not tl.VNNI:
        raise qhtest.Skip("no VNNI on this CPU: these weights saturate vpmaddubsw and are declined")
    import onnx
    from onnx import numpy_helper
    rng = np.random.default_rng(5)
    w = rng.uniform(0.2, 1.0, (300, 2048)).astype(np.float32) / 50
    x = rng.uniform(0.5, 3.0, (2, 5, 2048)).astype(np.float32)
    fpath, xs = export_linear(tmp, "large_acc", 2048, 300, w, x)
    dyn = quantize_and_compare(r, tmp, "large_acc", fpath, xs, None, False)
    wq = [numpy_helper.to_array(t) for t in onnx.load(dyn).graph.initializer if t.data_type == onnx.TensorProto.INT8
          and len(t.dims) == 2]
    assert len(wq) == 1, [t.name for t in onnx.load(dyn).graph.initializer]
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    xq = np.clip(np.rint(x / ((hi - lo) / 255)), 0, 255).astype(np.int64)  # zero point 0: no negatives
    acc = xq.reshape(-1, 2048) @ wq[0].astype(np.int64)
    print(f"  largest accumulator {acc.max()} (2^24 = {2 ** 24})")
    assert acc.max() > 2 ** 24, acc.max()


def case_vnni_hidden_on_plugin(r, tmp):
    """With VNNI hidden, weights whose two largest |w| in each column add up to at most 128
    (one dominant weight per output, the rest within 1/127 of it per channel) stay on the
    plugin's vpmaddubsw path, bit-identical to the host's."""
    rng = np.random.default_rng(6)
    k, n = 600, 300
    w = rng.uniform(-0.0035, 0.0035, (n, k)).astype(np.float32)
    w[np.arange(n), rng.integers(0, k, n)] = rng.choice([-1.0, 1.0], n)
    x = rng.normal(0, 2, (3, 7, k)).astype(np.float32)
    fpath, xs = export_linear(tmp, "dominant", k, n, w, x)
    quantize_and_compare(r, tmp, "dominant", fpath, xs, HIDE_VNNI, True)


def case_tails(r, tmp):
    """Tails in every dimension: 69 rows (two 32-row blocks and 5), K = 100 (one 64-byte
    chunk and 36), 37 columns (two panels and 5, one panel pair and a single panel); at 2
    threads the three panels are too few for the team, so the rows are split as well."""
    if not tl.VNNI:
        raise qhtest.Skip("no VNNI on this CPU: these weights saturate vpmaddubsw and are declined")
    rng = np.random.default_rng(7)
    w = rng.normal(0, 0.3, (37, 100)).astype(np.float32)
    x = rng.normal(0, 2, (3, 23, 100)).astype(np.float32)
    fpath, xs = export_linear(tmp, "tails", 100, 37, w, x)
    quantize_and_compare(r, tmp, "tails", fpath, xs, None, True)


def case_bert_feed_forward(r, tmp):
    """BERT-base's first feed-forward Linear (768 -> 3072 on 128 tokens): 96 panel pairs in
    groups per thread, the next pair's weights prefetched while a pair runs."""
    if not tl.VNNI:
        raise qhtest.Skip("no VNNI on this CPU: these weights saturate vpmaddubsw and are declined")
    rng = np.random.default_rng(8)
    w = rng.normal(0, 0.05, (3072, 768)).astype(np.float32)
    x = rng.normal(0, 1, (1, 128, 768)).astype(np.float32)
    fpath, xs = export_linear(tmp, "ffn", 768, 3072, w, x)
    quantize_and_compare(r, tmp, "ffn", fpath, xs, None, False)


def case_amx_without_vnni(r, tmp):
    """VNNI hidden, AMX visible: weights that saturate vpmaddubsw's pair sums (declined when
    AMX is hidden too) stay on the plugin's AMX GEMM, bit-identical to the host's at 1 and
    2 threads; the tails shape (69 rows, K = 100, 37 columns)."""
    if not sees_amx():
        raise qhtest.Skip("qhost sees no AMX-INT8 with AVX-512F/BW/VL here")
    rng = np.random.default_rng(7)
    w = rng.normal(0, 0.3, (37, 100)).astype(np.float32)
    x = rng.normal(0, 2, (3, 23, 100)).astype(np.float32)
    fpath, xs = export_linear(tmp, "amx_no_vnni", 100, 37, w, x)
    dyn = quantize_and_compare(r, tmp, "amx_no_vnni", fpath, xs, HIDE_VNNI_ONLY, False)
    units = json.loads(run_hidden(r, HIDE_VNNI, "inspect", dyn, "--json", *tl.BACKEND))["coverage"]["units"]
    mmi = [u for u in units if u["ops"].startswith("MatMulInteger")]
    print(f"  AMX hidden too: {[(u.get('kernel'), u.get('reason')) for u in mmi]}")
    assert [u.get("kernel") for u in mmi] == ["host:reference"] and "saturate" in (mmi[0].get("reason") or ""), mmi


CASES = {"mlp": case_mlp, "encoder": case_encoder, "encoder_per_channel": case_encoder_per_channel,
         "no_bias": case_no_bias, "sse2_epilogue": case_sse2_epilogue,
         "large_accumulators": case_large_accumulators, "vnni_hidden_on_plugin": case_vnni_hidden_on_plugin,
         "tails": case_tails, "bert_feed_forward": case_bert_feed_forward,
         "amx_without_vnni": case_amx_without_vnni}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
