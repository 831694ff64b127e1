#!/usr/bin/python3
"""The fbgemm plugin's lowering driven through the CLI: a small float model with every
convolution and linear form the plugin claims (3x3 with Relu, strided with asymmetric
pads, dilated, 5x5 on odd channel counts, 1x1 read in place and 1x1 strided, Gemm with
transB 1 and 0, MatMul) quantized by `qhost quantize`, run with `--backend fbgemm` on
every kernel path this CPU has (QHOST_CPU_DISABLE hides the faster ones): the paths give
identical bytes, every Conv/Gemm/MatMul unit is claimed, and the output stays within 3
steps of the host's QDQ run (a chain compounds one-step near-tie differences). With
fbgemm's reduce_range activations and with qnnpack's full-range ones (AVX2 then takes its
exact variant). The chain runs with the default output clamp, `dtype` (saturating at 255
as the host does), and is also held identical to the run that names it. The clamp is
checked on one Conv unit with outputs driven past the recorded 127: by default (and with
`--backend-opt output_clamp=dtype`) the kernel gives the host's output, above 127; with
`output_clamp=range` the host's output capped at 127.
Depthwise convolutions (3x3 and 5x5, strided, dilated, asymmetric pads, odd channel
counts, with and without Relu) are claimed and held to the same bars on both files; a 7x7
depthwise and a Gemm with alpha != 1 are declined with their reasons, and 1 and 2 threads
agree. Grouped convolutions and depthwise ones with a channel multiplier (each of the
grouped kernel's paths: direct for few channels per group, GEMM per group for many, the
widened depthwise for multipliers; with Relu, Clip, strides, dilation, asymmetric pads)
are claimed by `fbgemm_group_conv2d_nhwc_qu8_qs8w` and held to the same bars.
The uint8 units (u8ops): hand-built QDQ units of Add and Mul (+Relu; same shapes, and per
channel either way round), MaxPool (also ceil_mode), AveragePool (pads, ceil_mode,
count_include_pad, pads as wide as the window), GlobalAveragePool, Flatten and Reshape to
2-D (a 1x1 view and an NHWC transpose each), Concat (channels, height, rank 2; inputs on
and off the output's grid), the fixed-qparams Sigmoid, Tanh and HardSigmoid and HardSwish
(opset 14) are claimed and byte-identical with the host's
reference run of the same unit on every kernel path and with 2 threads; MaxPool off its
input's grid or with dilations, a broadcasting Add or Mul other than per channel, Flatten
on axis 2 and Reshape to 3-D are declined.
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

PLUGIN_DIR = os.environ.get("QH_FBGEMM_PLUGIN_DIR", "")
BACKEND = ["--backend", "fbgemm", "--plugin-dir", PLUGIN_DIR]
WEIGHTED = ("Conv", "Gemm", "MatMul")


def paths_here():
    """(path, QHOST_CPU_DISABLE) for every fbgemm kernel path this CPU has."""
    flags = open("/proc/cpuinfo").read().split()
    out = []
    if all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512_vnni")):
        out.append(("avx512vnni", ""))
    if "avx2" in flags and "avx_vnni" in flags:
        out.append(("avxvnni", "avx512vnni"))
    if "avx2" in flags:
        out.append(("avx2", "avx512vnni,avxvnni"))
    out.append(("packed_c", "avx512vnni,avxvnni,avx2"))
    return out


def ok(r, *args, mask=None, timeout=300):
    old = os.environ.pop("QHOST_CPU_DISABLE", None)
    if mask:
        os.environ["QHOST_CPU_DISABLE"] = mask
    try:
        rc, out, err = r.run(*args, timeout=timeout)
    finally:
        os.environ.pop("QHOST_CPU_DISABLE", None)
        if old is not None:
            os.environ["QHOST_CPU_DISABLE"] = old
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}\n{err}"
    return out


def node(op, ins, out, **attrs):
    _, _, helper, _ = qhtest.onnx_modules()
    return helper.make_node(op, ins, [out], name=out, **attrs)


def conv(name, x, cin, cout, k, rng, group=1, stride=1, pads=None, dil=1):
    w = rng.standard_normal((cout, cin // group, k, k)) * (1.5 / np.sqrt(cin // group * k * k))
    b = rng.standard_normal(cout) * 0.1
    pads = pads if pads is not None else [(k // 2) * dil] * 4
    n = node("Conv", [x, f"{name}_w", f"{name}_b"], name, group=group, strides=[stride, stride], pads=pads,
             dilations=[dil, dil], kernel_shape=[k, k])
    return n, [(f"{name}_w", w.astype(np.float32)), (f"{name}_b", b.astype(np.float32))]


def forms_model(path, rng, declines=False):
    """The claimed forms in one chain; with declines, a depthwise and a grouped conv
    (both claimed) and a Gemm with alpha = 0.5 (declined) in it too."""
    nodes, inits = [], []

    def add(part):
        nodes.append(part[0])
        inits.extend(part[1])

    add(conv("c1", "x", 5, 19, 3, rng))
    nodes.append(node("Relu", ["c1"], "r1"))
    add(conv("c2", "r1", 19, 24, 3, rng, stride=2, pads=[0, 1, 1, 0]))
    add(conv("c3", "c2", 24, 24, 3, rng, dil=2))
    nodes.append(node("Relu", ["c3"], "r3"))
    last = "r3"
    if declines:
        add(conv("dw", last, 24, 24, 3, rng, group=24))
        add(conv("gc", "dw", 24, 24, 1, rng, group=4))
        last = "gc"
    add(conv("c4", last, 24, 33, 1, rng))                                  # 1x1, read in place
    add(conv("c5", "c4", 33, 17, 5, rng, pads=[2, 1, 0, 2]))
    add(conv("c6", "c5", 17, 16, 1, rng, stride=2, pads=[0, 0, 0, 0]))     # 1x1 strided
    nodes.append(node("Flatten", ["c6"], "f"))
    inits.append(("g1_w", (rng.standard_normal((40, 16 * 2 * 3)) * 0.2).astype(np.float32)))
    inits.append(("g1_b", (rng.standard_normal(40) * 0.1).astype(np.float32)))
    nodes.append(node("Gemm", ["f", "g1_w", "g1_b"], "g1", transB=1))
    nodes.append(node("Relu", ["g1"], "gr"))
    inits.append(("g2_w", (rng.standard_normal((40, 30)) * 0.2).astype(np.float32)))
    inits.append(("g2_b", (rng.standard_normal(30) * 0.1).astype(np.float32)))
    nodes.append(node("Gemm", ["gr", "g2_w", "g2_b"], "g2", transB=0, **({"alpha": 0.5} if declines else {})))
    inits.append(("m_w", (rng.standard_normal((30, 10)) * 0.3).astype(np.float32)))
    nodes.append(node("MatMul", ["g2", "m_w"], "y"))
    model = qhtest.make_model(nodes, [("x", [1, 5, 13, 12])], [("y", [1, 10])], inits)
    return qhtest.save_model(model, path)


def quantized(r, tmp, backend, seed, declines=False):
    rng = np.random.default_rng(seed)
    fmodel = forms_model(os.path.join(tmp, "forms.onnx"), rng, declines)
    calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
    np.save(calib, rng.uniform(-1, 1, (24, 5, 13, 12)).astype(np.float32))
    # a little past the calibrated range, so outputs reach their clamps
    np.save(x, rng.uniform(-1.3, 1.3, (12, 5, 13, 12)).astype(np.float32))
    model = os.path.join(tmp, f"forms.{backend}.qdq.onnx")
    ok(r, "quantize", fmodel, "--backend", backend, "--calib", calib, "-o", model, "--quiet")
    return model, x


def units(r, model):
    return json.loads(ok(r, "inspect", model, "--json", *BACKEND))["coverage"]["units"]


DTYPE_CLAMP = ["--backend-opt", "output_clamp=dtype"]
RANGE_CLAMP = ["--backend-opt", "output_clamp=range"]


def check_paths(r, model, x, tmp, tag, *extra):
    """Every path's output identical; within 3 steps of the host's QDQ run; returns it."""
    host = os.path.join(tmp, f"{tag}.host.npy")
    ok(r, "run", model, "--input", x, "-o", host)
    outs = {}
    for isa, mask in paths_here():
        p = os.path.join(tmp, f"{tag}.{isa}.npy")
        ok(r, "run", model, "--input", x, "-o", p, *BACKEND, *extra, mask=mask)
        outs[isa] = np.load(p)
    first = next(iter(outs))
    for isa, o in outs.items():
        assert np.array_equal(o, outs[first]), f"{tag}: the {isa} path differs from the {first} path"
    (step, _), = ort_compare.output_steps(model).values()
    steps = np.abs(np.load(host).astype(np.float64) - outs[first]) / np.asarray(step, np.float64)
    same = float(np.mean(steps < 0.5))
    print(f"{tag}: paths {'+'.join(outs)} identical; vs host QDQ: {100 * same:.2f}% identical, "
          f"max {steps.max():.3g} steps over {steps.size} elements")
    assert steps.max() <= 3 + 1e-3, f"{tag}: {steps.max():.3g} steps from the host's"
    assert same >= 0.6, f"{tag}: only {100 * same:.2f}% identical"
    return outs[first]


def forms_case(backend, seed):
    def case(r, tmp):
        model, x = quantized(r, tmp, backend, seed)
        us = units(r, model)
        host = [(u.get("name"), u.get("reason")) for u in us
                if u.get("kernel") == "host:reference" and any(op in u.get("ops", "") for op in WEIGHTED)]
        claimed = [u for u in us if u.get("kernel", "").startswith("fbgemm_")]
        weighted = [u for u in claimed if any(op in u.get("ops", "") for op in WEIGHTED)]
        print(f"{backend}: {len(claimed)} units on fbgemm; weighted units on the host: {host}")
        assert not host, host
        assert len(weighted) == 9, [u.get("name") for u in weighted]   # 6 convs, 2 Gemm, 1 MatMul
        assert any(u.get("kernel") == "fbgemm_flatten_nhwc_qu8" for u in claimed), claimed
        got = check_paths(r, model, x, tmp, backend)   # the default clamp
        named = os.path.join(tmp, f"{backend}.dtype.npy")
        ok(r, "run", model, "--input", x, "-o", named, *BACKEND, *DTYPE_CLAMP)
        assert np.array_equal(np.load(named), got), "the default differs from output_clamp=dtype"
    return case


def case_declines(r, tmp):
    model, x = quantized(r, tmp, "fbgemm", 5, declines=True)
    reasons = {u.get("name"): u.get("reason") or "" for u in units(r, model)
               if u.get("kernel") == "host:reference"}
    print("declined:", reasons)
    assert not any(unit and ("dw" in unit or "gc" in unit) for unit in reasons), \
        "the depthwise 3x3 or the grouped 1x1 is declined"
    for name, text in (("g2", "alpha or beta other than 1"),):
        hit = [why for unit, why in reasons.items() if unit and name in unit]
        assert hit and text in hit[0], f"{name}: {hit} (want '{text}')"
    check_paths(r, model, x, tmp, "declines")  # the rest still runs, on every path


def depthwise_model(path, rng):
    """Depthwise units the plugin claims (d1..d5; d3 and p1 with a fused Clip), one it
    declines (d7: 7x7), then a channel multiplier of 2 (dm, the grouped kernel's)."""
    nodes, inits = [], []

    def add(part):
        nodes.append(part[0])
        inits.extend(part[1])

    add(conv("c1", "x", 6, 24, 3, rng))
    nodes.append(node("Relu", ["c1"], "r1"))
    add(conv("d1", "r1", 24, 24, 3, rng, group=24))                                   # 15x14
    nodes.append(node("Relu", ["d1"], "rd1"))
    add(conv("d2", "rd1", 24, 24, 3, rng, group=24, stride=2, pads=[0, 1, 1, 0]))     # 7x7
    add(conv("d3", "d2", 24, 24, 5, rng, group=24))                                   # 7x7
    # Clip (ReLU6's form, bounds as inputs) fused into a depthwise and a pointwise unit;
    # the narrow bounds make both clamps bite
    inits += [("clip_lo", np.array(0.0, np.float32)), ("clip_hi", np.array(0.5, np.float32)),
              ("clip_lo2", np.array(-0.25, np.float32))]
    nodes.append(node("Clip", ["d3", "clip_lo", "clip_hi"], "cd3"))
    add(conv("p1", "cd3", 24, 19, 1, rng))
    nodes.append(node("Clip", ["p1", "clip_lo2", "clip_hi"], "cp1"))
    add(conv("d4", "cp1", 19, 19, 3, rng, group=19, dil=2))                           # 7x7, 19 channels
    nodes.append(node("Relu", ["d4"], "rd4"))
    add(conv("d5", "rd4", 19, 19, 5, rng, group=19, stride=2, pads=[2, 1, 2, 1]))     # 4x3
    add(conv("d7", "d5", 19, 19, 7, rng, group=19))                                   # declined: 7x7
    add(conv("dm", "d7", 19, 38, 3, rng, group=19))                                   # multiplier 2: grouped
    nodes.append(node("Flatten", ["dm"], "f"))
    inits.append(("g_w", (rng.standard_normal((10, 38 * 4 * 3)) * 0.05).astype(np.float32)))
    inits.append(("g_b", (rng.standard_normal(10) * 0.1).astype(np.float32)))
    nodes.append(node("Gemm", ["f", "g_w", "g_b"], "y", transB=1))
    model = qhtest.make_model(nodes, [("x", [1, 6, 15, 14])], [("y", [1, 10])], inits)
    return qhtest.save_model(model, path)


def depthwise_case(backend, seed):
    def case(r, tmp):
        rng = np.random.default_rng(seed)
        fmodel = depthwise_model(os.path.join(tmp, "dw.onnx"), rng)
        calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
        np.save(calib, rng.uniform(-1, 1, (24, 6, 15, 14)).astype(np.float32))
        np.save(x, rng.uniform(-1.3, 1.3, (12, 6, 15, 14)).astype(np.float32))
        model = os.path.join(tmp, f"dw.{backend}.qdq.onnx")
        ok(r, "quantize", fmodel, "--backend", backend, "--calib", calib, "-o", model, "--quiet")
        us = units(r, model)
        by_name = {}
        for u in us:
            for name in ("d1", "d2", "d3", "d4", "d5", "d7", "dm"):
                if name in (u.get("name") or ""):
                    by_name[name] = u
        print(f"{backend}: " + ", ".join(f"{n}: {u.get('kernel')} {u.get('reason') or ''}".strip()
                                         for n, u in sorted(by_name.items())))
        for name in ("d1", "d2", "d3", "d4", "d5"):
            assert by_name.get(name, {}).get("kernel", "").startswith("fbgemm_"), (name, by_name.get(name))
        assert by_name.get("dm", {}).get("kernel") == GROUP_KERNEL, by_name.get("dm")
        clipped = [u for u in us if "Clip" in (u.get("ops") or "")]
        print(f"{backend}: units with a Clip: " + ", ".join(f"{u.get('name')} [{u.get('ops')}] {u.get('kernel')}"
                                                           for u in clipped))
        assert len(clipped) == 2 and all(u.get("kernel", "").startswith("fbgemm_") and "Conv" in u.get("ops", "")
                                         for u in clipped), clipped
        for name, text in (("d7", "depthwise kernels other than 3x3 and 5x5 are not claimed yet"),):
            u = by_name.get(name, {})
            assert u.get("kernel") == "host:reference" and text in (u.get("reason") or ""), (name, u)
        check_paths(r, model, x, tmp, f"depthwise_{backend}")
    return case


GROUP_KERNEL = "fbgemm_group_conv2d_nhwc_qu8_qs8w"


def grouped_model(path, rng):
    """Grouped units on each of the grouped kernel's paths (conv-grouped.h's fb_group_pick):
    g1 3x3 with 8 channels per group + Relu and g2 3x3 stride 2, asymmetric pads, 6 in and 8
    out per group (direct); g3 1x1 with 16 per group + Clip (direct); g4 3x3 dilated with 32
    per group (GEMM per group); m2 3x3 with a channel multiplier of 2 (widened depthwise);
    m7 7x7 with a multiplier of 3 on 5 groups (direct, one input channel per group)."""
    nodes, inits = [], []

    def add(part):
        nodes.append(part[0])
        inits.extend(part[1])

    add(conv("c1", "x", 5, 24, 3, rng))
    add(conv("g1", "c1", 24, 24, 3, rng, group=3))                                    # 13x12
    nodes.append(node("Relu", ["g1"], "rg1"))
    add(conv("g2", "rg1", 24, 32, 3, rng, group=4, stride=2, pads=[0, 1, 1, 0]))      # 6x6
    inits += [("clip_lo", np.array(0.0, np.float32)), ("clip_hi", np.array(0.6, np.float32))]
    add(conv("g3", "g2", 32, 64, 1, rng, group=2))
    nodes.append(node("Clip", ["g3", "clip_lo", "clip_hi"], "cg3"))
    add(conv("g4", "cg3", 64, 64, 3, rng, group=2, dil=2))
    add(conv("m2", "g4", 64, 128, 3, rng, group=64))
    add(conv("p1", "m2", 128, 5, 1, rng))
    add(conv("m7", "p1", 5, 15, 7, rng, group=5))
    nodes.append(node("Flatten", ["m7"], "f"))
    inits.append(("g_w", (rng.standard_normal((10, 15 * 6 * 6)) * 0.05).astype(np.float32)))
    inits.append(("g_b", (rng.standard_normal(10) * 0.1).astype(np.float32)))
    nodes.append(node("Gemm", ["f", "g_w", "g_b"], "y", transB=1))
    model = qhtest.make_model(nodes, [("x", [1, 5, 13, 12])], [("y", [1, 10])], inits)
    return qhtest.save_model(model, path)


def grouped_case(backend, seed):
    def case(r, tmp):
        rng = np.random.default_rng(seed)
        fmodel = grouped_model(os.path.join(tmp, "grouped.onnx"), rng)
        calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
        np.save(calib, rng.uniform(-1, 1, (24, 5, 13, 12)).astype(np.float32))
        np.save(x, rng.uniform(-1.3, 1.3, (12, 5, 13, 12)).astype(np.float32))
        model = os.path.join(tmp, f"grouped.{backend}.qdq.onnx")
        ok(r, "quantize", fmodel, "--backend", backend, "--calib", calib, "-o", model, "--quiet")
        us = units(r, model)
        host = [(u.get("name"), u.get("reason")) for u in us
                if u.get("kernel") == "host:reference" and any(op in u.get("ops", "") for op in WEIGHTED)]
        print(f"{backend}: weighted units on the host: {host}")
        assert not host, host
        grouped = {n: u for u in us for n in ("g1", "g2", "g3", "g4", "m2", "m7") if n in (u.get("name") or "")}
        print(f"{backend}: " + ", ".join(f"{n}: [{u.get('ops')}] {u.get('kernel')}" for n, u in sorted(grouped.items())))
        assert sorted(grouped) == ["g1", "g2", "g3", "g4", "m2", "m7"], sorted(grouped)
        assert all(u.get("kernel") == GROUP_KERNEL for u in grouped.values()), grouped
        assert "Relu" in grouped["g1"].get("ops", "") and "Clip" in grouped["g3"].get("ops", ""), grouped
        check_paths(r, model, x, tmp, f"grouped_{backend}")
        outs = []
        for t in (1, 2):
            p = os.path.join(tmp, f"grouped.t{t}.npy")
            ok(r, "run", model, "--input", x, "-o", p, "--threads", str(t), *BACKEND)
            outs.append(np.load(p))
        assert np.array_equal(outs[0], outs[1]), "1 and 2 threads differ"
    return case


def case_threads_agree(r, tmp):
    model, x = quantized(r, tmp, "fbgemm", 9)
    outs = []
    for t in (1, 2):
        p = os.path.join(tmp, f"t{t}.npy")
        ok(r, "run", model, "--input", x, "-o", p, "--threads", str(t), *BACKEND)
        outs.append(np.load(p))
    assert np.array_equal(outs[0], outs[1]), "1 and 2 threads differ"


def case_clamp(r, tmp):
    """One Conv unit of fbgemm's file (output range [0, 127] recorded), inputs past the
    calibrated range: by default and with output_clamp=dtype the kernel gives the host's
    output itself (saturating at 255, within one step); with output_clamp=range the host's
    output capped at 127."""
    rng = np.random.default_rng(13)
    n, inits = conv("c", "x", 6, 11, 3, rng)
    fmodel = qhtest.save_model(qhtest.make_model([n], [("x", [1, 6, 7, 7])], [("c", [1, 11, 7, 7])], inits),
                               os.path.join(tmp, "conv.onnx"))
    calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
    np.save(calib, rng.uniform(-1, 1, (16, 6, 7, 7)).astype(np.float32))
    np.save(x, rng.uniform(-1, 1, (8, 6, 7, 7)).astype(np.float32) * 3.0)
    model = os.path.join(tmp, "conv.fbgemm.qdq.onnx")
    ok(r, "quantize", fmodel, "--backend", "fbgemm", "--calib", calib, "-o", model, "--quiet")
    onnx, _, _, nh = qhtest.onnx_modules()
    m = onnx.load(model)
    ranges = {p.key: p.value for p in m.metadata_props}
    conv_out = next(nd for nd in m.graph.node if nd.op_type == "Conv").output[0]
    out_q = next(nd for nd in m.graph.node if nd.op_type == "QuantizeLinear" and nd.input[0] == conv_out)
    assert ranges.get("qhost.quant_range:" + out_q.output[0]) == "0,127", ranges
    inits = {t.name: nh.to_array(t) for t in m.graph.initializer}
    s, z = float(inits[out_q.input[1]]), int(inits[out_q.input[2]])
    host, dflt, low, wide = (os.path.join(tmp, f) for f in ("host.npy", "default.npy", "low.npy", "wide.npy"))
    ok(r, "run", model, "--input", x, "-o", host)
    ok(r, "run", model, "--input", x, "-o", dflt, *BACKEND)
    ok(r, "run", model, "--input", x, "-o", low, *BACKEND, *RANGE_CLAMP)
    ok(r, "run", model, "--input", x, "-o", wide, *BACKEND, *DTYPE_CLAMP)
    q = lambda p: np.rint(np.load(p) / s) + z  # noqa: E731
    h, d, lo, wd = q(host), q(dflt), q(low), q(wide)
    print(f"clamp: host max {h.max():.0f} ({100 * np.mean(h > 127):.1f}% above 127), default max {d.max():.0f}, "
          f"range max {lo.max():.0f}, dtype max {wd.max():.0f}")
    assert np.mean(h > 127) > 0.01, "the inputs do not reach past the recorded range"
    assert np.array_equal(d, wd), "the default differs from output_clamp=dtype"
    assert np.abs(wd - h).max() <= 1 and wd.max() > 127, "output_clamp=dtype (the default)"
    assert lo.max() <= 127 and np.abs(lo - np.minimum(h, 127)).max() <= 1, "output_clamp=range"


def u8op_unit(path, spec, seed):
    """One hand-built QDQ unit: Q -> DQ of each input with its qparams, the op (and Relu),
    Q -> DQ of the output. Returns (model, inputs npz, output scale)."""
    onnx, TP, helper, nh = qhtest.onnx_modules()
    rng = np.random.default_rng(seed)
    names, feeds, nodes, inits, ginputs = [], {}, [], [], []
    for i, (s, z) in enumerate(spec["in"]):
        x, shape = f"x{i}", spec["shapes"][i]
        centre = rng.integers(0, 256, [1, shape[1]] + [1] * (len(shape) - 2))
        q = np.clip(centre + rng.integers(-60, 61, shape), 0, 255).astype(np.float32)
        feeds[x] = ((q - z) * np.float32(s)).astype(np.float32)
        ginputs.append(helper.make_tensor_value_info(x, TP.FLOAT, shape))
        inits += [nh.from_array(np.array(s, np.float32), f"s{i}"), nh.from_array(np.array(z, np.uint8), f"z{i}")]
        nodes += [helper.make_node("QuantizeLinear", [x, f"s{i}", f"z{i}"], [f"{x}q"]),
                  helper.make_node("DequantizeLinear", [f"{x}q", f"s{i}", f"z{i}"], [f"{x}d"])]
        names.append(f"{x}d")
    if "reshape" in spec:  # Reshape's target shape, an int64 constant
        inits.append(nh.from_array(np.array(spec["reshape"], np.int64), "shape"))
        names.append("shape")
    nodes.append(helper.make_node(spec["op"], names, ["o"], **spec.get("attrs", {})))
    last = "o"
    if spec.get("relu"):
        nodes.append(helper.make_node("Relu", ["o"], ["p"]))
        last = "p"
    so, zo = spec["out"]
    inits += [nh.from_array(np.array(so, np.float32), "so"), nh.from_array(np.array(zo, np.uint8), "zo")]
    nodes += [helper.make_node("QuantizeLinear", [last, "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    graph = helper.make_graph(nodes, "unit", ginputs, [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", spec.get("opset", 13))])
    model.ir_version = 8
    qhtest.save_model(model, path)
    np.savez(path + ".in.npz", **feeds)
    return path, path + ".in.npz", float(so)


POOL = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
U8_CLAIMED = {
    "add": dict(op="Add", shapes=[[2, 19, 9, 7]] * 2, out=(0.07, 120), **{"in": [(0.05, 128), (0.03, 100)]}),
    "add_relu": dict(op="Add", relu=True, shapes=[[2, 19, 9, 7]] * 2, out=(0.04, 3),
                     **{"in": [(0.05, 128), (0.03, 100)]}),
    # scales whose sums land on half steps: ties must round to even as the host does
    "add_ties": dict(op="Add", shapes=[[1, 24, 6, 6]] * 2, out=(0.5, 128), **{"in": [(0.25, 128), (0.25, 120)]}),
    "add_channel": dict(op="Add", shapes=[[2, 24, 5, 7], [1, 24, 1, 1]], out=(0.06, 110),
                        **{"in": [(0.04, 120), (0.02, 90)]}),
    "add_channel_swapped_relu": dict(op="Add", relu=True, shapes=[[2, 24, 1, 1], [2, 24, 5, 7]], out=(0.05, 20),
                                     **{"in": [(0.02, 90), (0.04, 120)]}),
    "maxpool": dict(op="MaxPool", attrs=POOL, shapes=[[2, 19, 11, 10]], out=(0.05, 128), **{"in": [(0.05, 128)]}),
    "maxpool_2x2_pads": dict(op="MaxPool", attrs=dict(kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 0]),
                             shapes=[[1, 33, 7, 8]], out=(0.03, 7), **{"in": [(0.03, 7)]}),
    "maxpool_ceil": dict(op="MaxPool", attrs=dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
                         shapes=[[1, 17, 8, 10]], out=(0.05, 128), **{"in": [(0.05, 128)]}),
    "mul": dict(op="Mul", shapes=[[2, 19, 9, 7]] * 2, out=(0.09, 100), **{"in": [(0.05, 128), (0.03, 100)]}),
    "mul_relu": dict(op="Mul", relu=True, shapes=[[1, 21, 6, 5]] * 2, out=(0.04, 9),
                     **{"in": [(0.05, 128), (0.03, 100)]}),
    # squeeze-excitation: x * gate[c], the gate on the fixed Sigmoid grid
    "mul_channel": dict(op="Mul", shapes=[[2, 24, 5, 7], [2, 24, 1, 1]], out=(0.03, 120),
                        **{"in": [(0.04, 120), (1.0 / 256, 0)]}),
    "mul_channel_swapped": dict(op="Mul", shapes=[[1, 24, 1, 1], [1, 24, 5, 7]], out=(0.03, 120),
                                **{"in": [(1.0 / 256, 0), (0.04, 120)]}),
    "avgpool": dict(op="AveragePool", attrs=POOL, shapes=[[2, 19, 11, 10]], out=(0.04, 120),
                    **{"in": [(0.05, 128)]}),
    "avgpool_include_pad_ceil": dict(op="AveragePool", attrs=dict(POOL, count_include_pad=1, ceil_mode=1),
                                     shapes=[[1, 33, 8, 9]], out=(0.05, 128), **{"in": [(0.05, 128)]}),
    "avgpool_wide_pads": dict(op="AveragePool", attrs=dict(kernel_shape=[2, 2], strides=[2, 2], pads=[2, 0, 1, 2]),
                              shapes=[[1, 8, 6, 6]], out=(0.03, 7), **{"in": [(0.03, 7)]}),
    "sigmoid": dict(op="Sigmoid", shapes=[[2, 19, 9, 7]], out=(1.0 / 256, 0), **{"in": [(0.06, 128)]}),
    "tanh": dict(op="Tanh", shapes=[[2, 19, 9, 7]], out=(2.0 / 256, 128), **{"in": [(0.03, 128)]}),
    "hardsigmoid": dict(op="HardSigmoid", attrs=dict(alpha=1.0 / 6, beta=0.5), shapes=[[1, 40, 4, 3]],
                        out=(1.0 / 256, 0), **{"in": [(0.06, 128)]}),
    "hardswish": dict(op="HardSwish", opset=14, shapes=[[2, 19, 9, 7]], out=(0.04, 20), **{"in": [(0.05, 128)]}),
    # Concat (plugins/common/u8-concat.c, x86's too) along channels (NHWC's last axis),
    # height (a negative axis) and a rank-2 tensor; inputs on the output's grid and off it
    "concat_channels": dict(op="Concat", attrs=dict(axis=1), shapes=[[2, 16, 9, 9], [2, 5, 9, 9], [2, 8, 9, 9]],
                            out=(0.04, 3), **{"in": [(0.04, 3), (0.02, 130), (0.04, 3)]}),
    "concat_height_neg_axis": dict(op="Concat", attrs=dict(axis=-2), shapes=[[1, 6, 4, 5], [1, 6, 7, 5]],
                                   out=(0.06, 128), **{"in": [(0.05, 10), (0.03, 250)]}),
    "concat_rank2": dict(op="Concat", attrs=dict(axis=1), shapes=[[3, 20], [3, 7]], out=(0.05, 10),
                         **{"in": [(0.05, 10), (0.05, 10)]}),
    "gap": dict(op="GlobalAveragePool", shapes=[[2, 19, 7, 7]], out=(0.02, 110), **{"in": [(0.05, 128)]}),
    "flatten_view": dict(op="Flatten", shapes=[[3, 40, 1, 1]], out=(0.05, 128), **{"in": [(0.05, 128)]}),
    "flatten_transpose": dict(op="Flatten", shapes=[[2, 5, 3, 2]], out=(0.05, 128), **{"in": [(0.05, 128)]}),
    "reshape_view": dict(op="Reshape", reshape=[3, -1], shapes=[[3, 40, 1, 1]], out=(0.05, 128),
                         **{"in": [(0.05, 128)]}),
    "reshape_transpose": dict(op="Reshape", reshape=[0, 30], shapes=[[2, 5, 3, 2]], out=(0.05, 128),
                              **{"in": [(0.05, 128)]}),
}
U8_DECLINED = {
    "differ from its input's": dict(op="MaxPool", attrs=POOL, shapes=[[1, 8, 6, 6]], out=(0.04, 3),
                                    **{"in": [(0.05, 3)]}),
    "dilated": dict(op="MaxPool", attrs=dict(POOL, dilations=[2, 2]), shapes=[[1, 8, 9, 9]], out=(0.05, 3),
                    **{"in": [(0.05, 3)]}),
    "Mul inputs differ other than per channel": dict(op="Mul", shapes=[[1, 8, 4, 4], [1, 1, 4, 4]], out=(0.04, 3),
                                       **{"in": [(0.04, 3), (0.02, 3)]}),
    "other than per channel": dict(op="Add", shapes=[[1, 8, 4, 4], [1, 8, 4, 1]], out=(0.04, 3),
                                   **{"in": [(0.04, 3), (0.02, 3)]}),
    "only Reshape to 2-D": dict(op="Reshape", reshape=[1, 8, 16], shapes=[[1, 8, 4, 4]], out=(0.05, 3),
                                **{"in": [(0.05, 3)]}),
    "axis other than 1": dict(op="Flatten", attrs=dict(axis=2), shapes=[[1, 8, 4, 4]], out=(0.05, 3),
                              **{"in": [(0.05, 3)]}),
}


def case_u8ops(r, tmp):
    """Each claimed uint8 unit byte-identical with the host's run of it, on every path."""
    for i, (name, spec) in enumerate(U8_CLAIMED.items()):
        model, npz, so = u8op_unit(os.path.join(tmp, f"{name}.qdq.onnx"), spec, 400 + i)
        host = os.path.join(tmp, f"{name}.host.npy")
        ok(r, "run", model, "--input", npz, "-o", host)
        kernels = [u.get("kernel", "") for u in units(r, model)]
        assert kernels and all(k.startswith("fbgemm_") for k in kernels), (name, kernels)
        a = np.load(host).astype(np.float64)
        assert len(np.unique(a)) > 3, f"{name}: degenerate test output"
        for isa, mask in paths_here():
            for threads in ("1", "2"):
                low = os.path.join(tmp, f"{name}.{isa}.{threads}.npy")
                ok(r, "run", model, "--input", npz, "-o", low, *BACKEND, "--threads", threads, mask=mask)
                b = np.load(low).astype(np.float64)
                assert a.shape == b.shape, (name, a.shape, b.shape)
                steps = np.rint(np.abs(a - b) / so)
                assert steps.max() == 0, f"{name} ({isa}, {threads} threads): {steps.max()} steps from the host's"
        print(f"{name}: {kernels}, identical with the host over {a.size} elements on "
              f"{'+'.join(p for p, _ in paths_here())}, 1 and 2 threads")
    for i, (reason, spec) in enumerate(U8_DECLINED.items()):
        model, npz, _ = u8op_unit(os.path.join(tmp, f"decline{i}.qdq.onnx"), spec, 500 + i)
        us = units(r, model)
        print(f"declined: {[u.get('reason') for u in us]}")
        assert all(u.get("kernel") == "host:reference" and reason in (u.get("reason") or "") for u in us), us
        ok(r, "run", model, "--input", npz, "-o", os.path.join(tmp, f"decline{i}.npy"), *BACKEND)


CASES = {
    "clamp": case_clamp,
    "u8ops": case_u8ops,
    "forms_fbgemm": forms_case("fbgemm", 1),
    "forms_qnnpack": forms_case("qnnpack", 3),   # full-range [0, 255] activations
    "declines": case_declines,
    "depthwise_fbgemm": depthwise_case("fbgemm", 21),
    "depthwise_qnnpack": depthwise_case("qnnpack", 23),   # full-range [0, 255] activations
    "grouped_fbgemm": grouped_case("fbgemm", 31),
    "grouped_qnnpack": grouped_case("qnnpack", 33),       # full-range [0, 255] activations
    "threads_agree": case_threads_agree,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
