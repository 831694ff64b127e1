#!/usr/bin/python3
"""The qnnpack plugin's lowering driven through the CLI: one float model per unit type the
plugin claims (Conv 3x3 with Relu, strided with asymmetric pads, dilated, without bias,
1x1, depthwise, depthwise with Relu, grouped, Conv + Clip (ReLU6 and narrower bounds, through
the shared Q/DQ pair); Gemm with transB 1 (+Relu) and 0; MatMul),
quantized by `qhost quantize --backend qnnpack` and run with `--backend qnnpack`: the unit
must be on its XNNPACK operator, and its output within one output step of the host's QDQ
reference run of the same unit, the share of bit-identical outputs printed (only near-tie
elements may differ: the kernels add the bias rounded to int32 as PyTorch's qnnpack engine
does, the host adds it in float). Per-channel weights (fbgemm's file) and a requantization
scale XNNPACK refuses (an output scale edited down) are declined with their reasons and run
on the host; 1 and 2 threads give identical bytes. Hand-built Conv (plain, strided and
dilated, 5x5, depthwise, depthwise with a multiplier, grouped 1x1, with and without Relu)
and Linear units are bit-identical to PyTorch 1.13's qnnpack engine running the same
integers (skipped where torch or its qnnpack engine is missing). Add (+Relu), MaxPool,
AveragePool, GlobalAveragePool, Sigmoid, Tanh and LeakyRelu units are within one step of
the host's run (MaxPool identical); a MaxPool whose output is on another grid, a padded
AveragePool that does not count its padding and a Sigmoid off its fixed output qparams
are declined. Concat along the channels runs on XNNPACK's strided copies,
identical to the host's run, and is declined when an input is on another grid. Mul (also
per channel), Relu and Clip run on XNNPACK too, HardSwish, Flatten and Reshape on the
plugin's own kernels, identical to the host's run but for Mul (within one step). The
bundled digits CNN runs entirely on the plugin, close to the host's run and as accurate.
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

PLUGIN_DIR = os.environ.get("QH_QNNPACK_PLUGIN_DIR", "")
BACKEND = ["--backend", "qnnpack", "--plugin-dir", PLUGIN_DIR]
CONV_K, FC_K = "xnn_convolution2d_nhwc_qu8", "xnn_fully_connected_nc_qu8"


def ok(r, *args, timeout=300):
    rc, out, err = r.run(*args, timeout=timeout)
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}\n{err}"
    return out


def node(op, ins, out, **attrs):
    _, _, helper, _ = qhtest.onnx_modules()
    return helper.make_node(op, ins, [out], name=out, **attrs)


def conv_unit(cin, cout, k, group=1, stride=1, pads=None, dil=1, bias=True, relu=False, hw=(9, 8), clip=None):
    def build(rng):
        w = rng.standard_normal((cout, cin // group, k, k)) * (1.5 / np.sqrt(cin // group * k * k))
        inits = [("w", w.astype(np.float32))]
        ins = ["x", "w"]
        if bias:
            inits.append(("b", (rng.standard_normal(cout) * 0.3).astype(np.float32)))
            ins.append("b")
        p = pads if pads is not None else [(k // 2) * dil] * 4
        out = "c" if relu or clip else "y"
        nodes = [node("Conv", ins, out, group=group, strides=[stride, stride], pads=p, dilations=[dil, dil],
                      kernel_shape=[k, k])]
        if relu:
            nodes.append(node("Relu", ["c"], "y"))
        if clip:  # ReLU6 as PyTorch exports it: Clip with constant min and max inputs
            inits += [("cmin", np.array(clip[0], np.float32)), ("cmax", np.array(clip[1], np.float32))]
            nodes.append(node("Clip", ["c", "cmin", "cmax"], "y"))
        oh = (hw[0] + p[0] + p[2] - dil * (k - 1) - 1) // stride + 1
        ow = (hw[1] + p[1] + p[3] - dil * (k - 1) - 1) // stride + 1
        return nodes, inits, [1, cin, *hw], [1, cout, oh, ow]
    return build, CONV_K


def linear_unit(op, k, n, trans_b=1, relu=False):
    def build(rng):
        w = rng.standard_normal((n, k) if op == "Gemm" and trans_b else (k, n)) * (1.5 / np.sqrt(k))
        inits = [("w", w.astype(np.float32))]
        out = "g" if relu else "y"
        if op == "Gemm":
            inits.append(("b", (rng.standard_normal(n) * 0.3).astype(np.float32)))
            nodes = [node("Gemm", ["x", "w", "b"], out, transB=trans_b)]
        else:
            nodes = [node("MatMul", ["x", "w"], out)]
        if relu:
            nodes.append(node("Relu", ["g"], "y"))
        return nodes, inits, [1, k], [1, n]
    return build, FC_K


UNITS = {
    "conv3x3_relu": conv_unit(5, 19, 3, relu=True),
    "conv_strided_pads": conv_unit(8, 12, 3, stride=2, pads=[0, 1, 1, 0]),
    "conv_dilated": conv_unit(6, 10, 3, dil=2),
    "conv_no_bias": conv_unit(7, 9, 3, bias=False),
    "conv1x1": conv_unit(16, 24, 1),
    "depthwise": conv_unit(16, 16, 3, group=16),
    "depthwise_relu_strided": conv_unit(24, 24, 3, group=24, stride=2, relu=True),
    "depthwise_mult2": conv_unit(8, 16, 3, group=8),
    "grouped": conv_unit(16, 12, 3, group=4),
    "conv_clip": conv_unit(8, 16, 3, clip=(-0.3, 0.7)),
    "depthwise_relu6": conv_unit(16, 16, 3, group=16, clip=(0.0, 6.0)),
    "gemm_relu": linear_unit("Gemm", 40, 30, relu=True),
    "gemm_transb0": linear_unit("Gemm", 33, 17, trans_b=0),
    "matmul": linear_unit("MatMul", 24, 10),
}


def quantized(r, tmp, name, build, backend="qnnpack", seed=0):
    rng = np.random.default_rng(seed)
    nodes, inits, xshape, yshape = build(rng)
    fmodel = qhtest.save_model(qhtest.make_model(nodes, [("x", xshape)], [("y", yshape)], inits),
                               os.path.join(tmp, f"{name}.onnx"))
    calib, x = os.path.join(tmp, f"{name}.calib.npy"), os.path.join(tmp, f"{name}.x.npy")
    np.save(calib, rng.uniform(-1, 1, (16, *xshape[1:])).astype(np.float32))
    # a little past the calibrated range, so outputs reach their clamps
    np.save(x, rng.uniform(-1.2, 1.2, (6, *xshape[1:])).astype(np.float32))
    model = os.path.join(tmp, f"{name}.{backend}.qdq.onnx")
    ok(r, "quantize", fmodel, "--backend", backend, "--calib", calib, "-o", model, "--quiet")
    return model, x


def units(r, model, *extra):
    return json.loads(ok(r, "inspect", model, "--json", *BACKEND, *extra))["coverage"]["units"]


def compare(r, model, x, tmp, tag, *extra):
    """Steps between the host's QDQ run and the qnnpack run: (share identical, max steps)."""
    host, low = os.path.join(tmp, f"{tag}.host.npy"), os.path.join(tmp, f"{tag}.qnnpack.npy")
    ok(r, "run", model, "--input", x, "-o", host)
    ok(r, "run", model, "--input", x, "-o", low, *BACKEND, *extra)
    (step, _), = ort_compare.output_steps(model).values()
    steps = np.abs(np.load(host).astype(np.float64) - np.load(low)) / np.asarray(step, np.float64)
    same = float(np.mean(steps < 0.5))
    print(f"{tag}: qnnpack vs host QDQ: {100 * same:.2f}% identical, max {steps.max():.3g} steps "
          f"over {steps.size} elements")
    return same, float(steps.max())


def case_units(r, tmp):
    """Every unit type on its XNNPACK operator, within one step of the host's run."""
    bad = []
    for i, (name, (build, kernel)) in enumerate(UNITS.items()):
        model, x = quantized(r, tmp, name, build, seed=i)
        us = units(r, model)
        weighted = [u for u in us if any(op in u.get("ops", "") for op in ("Conv", "Gemm", "MatMul"))]
        assert len(weighted) == 1 and weighted[0].get("kernel") == kernel, f"{name}: {weighted}"
        same, worst = compare(r, model, x, tmp, name)
        if worst > 1 + 1e-3 or same < 0.95:
            bad.append(f"{name}: {100 * same:.2f}% identical, max {worst:.3g} steps")
    assert not bad, "; ".join(bad)


def case_per_channel_declined(r, tmp):
    """fbgemm's file has per-channel weights: declined with the reason, run on the host."""
    build, _ = UNITS["conv3x3_relu"]
    model, x = quantized(r, tmp, "pc", build, backend="fbgemm")
    us = units(r, model)
    conv = [u for u in us if "Conv" in u.get("ops", "")]
    print("per-channel:", [(u.get("kernel"), u.get("reason")) for u in conv])
    assert conv and all(u.get("kernel") == "host:reference" and "per-channel weights" in (u.get("reason") or "")
                        for u in conv), conv
    same, worst = compare(r, model, x, tmp, "per_channel")
    assert same == 1.0, "a declined unit must run the host's reference"


def case_scale_declined(r, tmp):
    """An output scale edited down until input*weight/output >= 256: XNNPACK's create
    refuses it; accept declines it with the reason and the host runs the unit."""
    build, _ = UNITS["gemm_transb0"]
    model, x = quantized(r, tmp, "sc", build)
    onnx, _, _, nh = qhtest.onnx_modules()
    m = onnx.load(model)
    gemm_out = next(nd for nd in m.graph.node if nd.op_type == "Gemm").output[0]
    out_q = next(nd for nd in m.graph.node if nd.op_type == "QuantizeLinear" and nd.input[0] == gemm_out)
    for t in m.graph.initializer:
        if t.name == out_q.input[1]:
            t.CopyFrom(nh.from_array(np.array(nh.to_array(t) / 1e5, np.float32), t.name))
    edited = os.path.join(tmp, "sc.edited.qdq.onnx")
    onnx.save(m, edited)
    us = [u for u in units(r, edited) if "Gemm" in u.get("ops", "")]
    print("scale:", [(u.get("kernel"), u.get("reason")) for u in us])
    assert us and us[0].get("kernel") == "host:reference" and \
        "refuses the requantization scale" in (us[0].get("reason") or ""), us
    ok(r, "run", edited, "--input", x, "-o", os.path.join(tmp, "sc.npy"), *BACKEND)


def case_threads_agree(r, tmp):
    """1 thread, and 2 threads with the pool's workers sleeping between units (spin=off, the
    default) or spinning (spin=on), give identical bytes; a bad spin value is refused."""
    outs = []
    for name in ("conv3x3_relu", "depthwise", "gemm_relu"):
        build, _ = UNITS[name]
        model, x = quantized(r, tmp, name, build, seed=7)
        got = []
        for t, spin in ((1, "off"), (2, "off"), (2, "on")):
            p = os.path.join(tmp, f"{name}.t{t}.{spin}.npy")
            ok(r, "run", model, "--input", x, "-o", p, "--threads", str(t), "--backend-opt", f"spin={spin}", *BACKEND)
            got.append(np.load(p))
        assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2]), f"{name}: runs differ"
        outs.append(name)
    print("1 thread, 2 threads with spin off and on identical on", ", ".join(outs))
    rc, _, err = r.run("run", model, "--input", x, "-o", os.path.join(tmp, "bad.npy"), "--backend-opt", "spin=maybe",
                       *BACKEND)
    qhtest.check_no_crash(rc, err)
    assert rc != 0 and "spin" in err and not os.path.exists(os.path.join(tmp, "bad.npy")), err
    print("spin=maybe refused:", err.strip().splitlines()[-1])


# Hand-built QDQ units for the engine oracle: (kind, shape arguments, input zero point, relu).
# PyTorch's quantized Conv2d pads symmetrically, so these do.
ENGINE_UNITS = {
    "conv3x3_relu_zx128": ("conv", dict(cin=8, cout=16, k=3, pad=1), 128, True),
    "conv_s2_d2_zx3": ("conv", dict(cin=6, cout=10, k=3, stride=2, dil=2, pad=2), 3, False),
    "conv5x5_zx200": ("conv", dict(cin=4, cout=8, k=5, pad=2), 200, False),
    "depthwise_relu_zx77": ("conv", dict(cin=16, cout=16, k=3, group=16, pad=1), 77, True),
    "depthwise_mult2_s2": ("conv", dict(cin=8, cout=16, k=3, group=8, stride=2, pad=1), 128, False),
    "grouped_1x1_zx0": ("conv", dict(cin=16, cout=24, k=1, group=4, pad=0), 0, False),
    "linear_relu_zx128": ("linear", dict(k=40, n=24), 128, True),
    "linear_zx17": ("linear", dict(k=33, n=7), 17, False),
}


def engine_unit(path, kind, a, zx, relu, seed):
    """One QDQ unit by hand (uint8 input on its grid, int8 per-tensor symmetric weights,
    float bias, output qparams from the float result's range) and the same unit as PyTorch
    1.13's quantized module on the qnnpack engine: (model, input npy, so, zo, engine bytes)."""
    import torch
    import torch.nn.quantized as nnq
    import torch.nn.intrinsic.quantized as nniq
    _, TP, helper, nh = qhtest.onnx_modules()
    rng = np.random.default_rng(seed)
    sx = np.float32(0.02)
    if kind == "conv":
        g = a.get("group", 1)
        xshape = [2, a["cin"], 11, 10]
        wf = rng.standard_normal((a["cout"], a["cin"] // g, a["k"], a["k"])) / np.sqrt(a["cin"] // g * a["k"] ** 2)
        nc = a["cout"]
    else:
        xshape = [5, a["k"]]
        wf = rng.standard_normal((a["n"], a["k"])) / np.sqrt(a["k"])
        nc = a["n"]
    sw = np.float32(np.abs(wf).max() / 127.0)
    wq = np.clip(np.rint(wf / sw), -127, 127).astype(np.int8)
    bf = (rng.standard_normal(nc) * 0.3).astype(np.float32)
    xq = rng.integers(0, 256, xshape)
    xf = ((xq - zx) * sx).astype(np.float32)
    qx = torch.quantize_per_tensor(torch.tensor(xf), float(sx), zx, torch.quint8)
    assert np.array_equal(qx.int_repr().numpy(), xq), "input off its grid"
    qw = torch._make_per_tensor_quantized_tensor(torch.tensor(wq), float(sw), 0)
    if kind == "conv":
        st, dil, pad = a.get("stride", 1), a.get("dil", 1), a["pad"]
        mod = (nniq.ConvReLU2d if relu else nnq.Conv2d)(a["cin"], a["cout"], a["k"], stride=st, padding=pad,
                                                          dilation=dil, groups=g)
        yf = torch.nn.functional.conv2d(torch.tensor(xf), torch.tensor(wq * sw), torch.tensor(bf), st, pad, dil, g)
        op = helper.make_node("Conv", ["xd", "wd", "b"], ["c"], group=g, strides=[st, st], pads=[pad] * 4,
                              dilations=[dil, dil], kernel_shape=[a["k"]] * 2)
    else:
        mod = (nniq.LinearReLU if relu else nnq.Linear)(a["k"], a["n"])
        yf = torch.nn.functional.linear(torch.tensor(xf), torch.tensor(wq * sw), torch.tensor(bf))
        op = helper.make_node("Gemm", ["xd", "wd", "b"], ["c"], transB=1)
    y = (torch.relu(yf) if relu else yf).numpy()
    lo, hi = min(float(y.min()), 0.0), max(float(y.max()), 0.0)
    so = np.float32((hi - lo) / 255.0 * 0.8)   # a little narrow: some outputs saturate
    zo = int(np.clip(np.rint(-lo / so), 0, 255))
    mod.set_weight_bias(qw, torch.tensor(bf))
    mod.scale, mod.zero_point = float(so), zo
    engine = mod(qx).int_repr().numpy()
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]), op]
    last = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        last = "r"
    nodes += [helper.make_node("QuantizeLinear", [last, "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    inits = [nh.from_array(np.array(sx, np.float32), "sx"), nh.from_array(np.array(zx, np.uint8), "zx"),
             nh.from_array(wq, "wq"), nh.from_array(np.array(sw, np.float32), "sw"),
             nh.from_array(np.array(0, np.int8), "zw"), nh.from_array(bf, "b"),
             nh.from_array(np.array(so, np.float32), "so"), nh.from_array(np.array(zo, np.uint8), "zo")]
    graph = helper.make_graph(nodes, "unit", [helper.make_tensor_value_info("x", TP.FLOAT, xshape)],
                              [helper.make_tensor_value_info("y", TP.FLOAT, list(y.shape))], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    qhtest.save_model(model, path)
    np.save(path + ".x.npy", xf)
    return path, path + ".x.npy", float(so), zo, engine


def case_engine(r, tmp):
    """Conv and Linear units bit-identical to PyTorch 1.13's qnnpack engine (both round the
    bias to int32 at sx*sw and requantize in fp32 half to even); the host's QDQ run, which
    adds the bias in float, is printed next to it."""
    try:
        import torch
    except ImportError:
        raise qhtest.Skip("no PyTorch here")
    if "qnnpack" not in torch.backends.quantized.supported_engines:
        raise qhtest.Skip("this PyTorch has no qnnpack engine")
    torch.backends.quantized.engine = "qnnpack"
    bad = []
    for i, (name, (kind, a, zx, relu)) in enumerate(ENGINE_UNITS.items()):
        model, x, so, zo, engine = engine_unit(os.path.join(tmp, f"{name}.qdq.onnx"), kind, a, zx, relu, 40 + i)
        us = [u for u in units(r, model) if u.get("kernel", "").startswith("xnn_")]
        assert len(us) == 1, f"{name}: not on XNNPACK: {units(r, model)}"
        got = {}
        for tag, extra in (("qnnpack", BACKEND), ("host", [])):
            p = os.path.join(tmp, f"{name}.{tag}.npy")
            ok(r, "run", model, "--input", x, "-o", p, *extra)
            got[tag] = np.rint(np.load(p).astype(np.float64) / so) + zo
        ours = np.abs(got["qnnpack"] - engine)
        host = np.abs(got["host"] - engine)
        print(f"{name}: vs PyTorch's qnnpack engine: {100 * np.mean(ours == 0):.2f}% identical (max {ours.max():.0f}); "
              f"host QDQ run: {100 * np.mean(host == 0):.2f}% (max {host.max():.0f}); {engine.size} elements")
        if ours.max() != 0:
            bad.append(name)
    assert not bad, f"not bit-identical to the engine: {bad}"


FIXED = {"Sigmoid": (np.float32(1 / 256), 0), "Tanh": (np.float32(1 / 128), 128)}  # PyTorch's fixed qparams


def u8op_unit(path, op, seed, relu=False, shared=True):
    """A hand-built QDQ unit of Add or Mul (two inputs on different grids; MulBcast: the
    second [N, C, 1, 1]), MaxPool (3x3, stride 2, pads 1), Relu, Clip, Flatten or Reshape (all
    with the output on the input's grid unless shared is False), GlobalAveragePool, Sigmoid or
    Tanh (PyTorch's fixed output qparams unless shared is False), LeakyRelu (alpha 0.1),
    HardSwish or HardSigmoid (alpha 1/6, beta 0.5),
    with uint8 inputs on their grids: (model, inputs npz, output scale)."""
    _, TP, helper, nh = qhtest.onnx_modules()
    rng = np.random.default_rng(seed)
    shape = [2, 12, 9, 10]
    binary = op in ("Add", "Mul", "MulBcast")
    ins = [("x", np.float32(0.03), 120)] + ([("r", np.float32(0.05), 90)] if binary else [])
    nodes, inits, feeds, vals = [], [], {}, []
    for name, sc, zp in ins:
        # MulBcast: a squeeze-excitation scale, one value per image and channel
        q = rng.integers(0, 256, [2, 12, 1, 1] if op == "MulBcast" and name == "r" else shape)
        feeds[name] = ((q - zp) * sc).astype(np.float32)
        vals.append(feeds[name])
        inits += [nh.from_array(np.array(sc, np.float32), f"s{name}"), nh.from_array(np.array(zp, np.uint8), f"z{name}")]
        nodes += [helper.make_node("QuantizeLinear", [name, f"s{name}", f"z{name}"], [f"{name}q"]),
                  helper.make_node("DequantizeLinear", [f"{name}q", f"s{name}", f"z{name}"], [f"{name}d"])]
    if binary:
        nodes.append(helper.make_node(op[:3], ["xd", "rd"], ["a"]))
        y = vals[0] + vals[1] if op == "Add" else vals[0] * vals[1]
        yshape = shape
    elif op in ("Relu", "Clip"):
        if op == "Clip":
            inits += [nh.from_array(np.array(-0.6, np.float32), "cmin"), nh.from_array(np.array(1.1, np.float32), "cmax")]
        nodes.append(helper.make_node(op, ["xd"] + (["cmin", "cmax"] if op == "Clip" else []), ["a"]))
        y = np.clip(vals[0], -0.6, 1.1) if op == "Clip" else np.maximum(vals[0], 0)
        yshape = shape
    elif op == "Flatten":
        nodes.append(helper.make_node("Flatten", ["xd"], ["a"], axis=1))
        y, yshape = vals[0].reshape(2, -1), [2, 12 * 9 * 10]
    elif op == "Reshape":  # to 3-D, a 0 and a -1 in the shape
        inits.append(nh.from_array(np.array([0, 12, -1], np.int64), "shape"))
        nodes.append(helper.make_node("Reshape", ["xd", "shape"], ["a"]))
        y, yshape = vals[0].reshape(2, 12, -1), [2, 12, 90]
    elif op == "MaxPool":
        nodes.append(helper.make_node("MaxPool", ["xd"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
        y = vals[0]
        yshape = [2, 12, 5, 5]
    elif op == "MaxPoolCeil":  # unpadded, ceil_mode: the last column's windows hang past the input
        nodes.append(helper.make_node("MaxPool", ["xd"], ["a"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
        y = vals[0]
        yshape = [2, 12, 4, 5]
    elif op.startswith("AveragePool"):
        # "AveragePool": 3x3 stride 2 unpadded; "AveragePoolPadInc" / "AveragePoolPadExc": pads 1
        # with count_include_pad 1 / 0
        pad = 0 if op == "AveragePool" else 1
        nodes.append(helper.make_node("AveragePool", ["xd"], ["a"], kernel_shape=[3, 3], strides=[2, 2],
                                      pads=[pad] * 4, count_include_pad=int(op == "AveragePoolPadInc")))
        y = vals[0]
        yshape = [2, 12, 4 + pad, 4 + pad]
    elif op == "GlobalAveragePool":
        nodes.append(helper.make_node("GlobalAveragePool", ["xd"], ["a"]))
        y = vals[0].mean(axis=(2, 3), keepdims=True)
        yshape = [2, 12, 1, 1]
    elif op == "ReduceMean":  # over H and W, keepdims=0 (mnasnet's head)
        nodes.append(helper.make_node("ReduceMean", ["xd"], ["a"], axes=[2, 3], keepdims=0))
        y = vals[0].mean(axis=(2, 3))
        yshape = [2, 12]
    else:
        # HardSigmoid as PyTorch exports torch.nn.Hardsigmoid
        attrs = {"LeakyRelu": {"alpha": 0.1}, "HardSigmoid": {"alpha": 1 / 6, "beta": 0.5}}.get(op, {})
        nodes.append(helper.make_node(op, ["xd"], ["a"], **attrs))
        v = vals[0].astype(np.float64)
        y = {"Sigmoid": lambda: 1 / (1 + np.exp(-v)), "Tanh": lambda: np.tanh(v),
             "LeakyRelu": lambda: np.where(v < 0, 0.1 * v, v),
             "HardSwish": lambda: v * np.clip(v + 3, 0, 6) / 6,
             "HardSigmoid": lambda: np.clip(v / 6 + 0.5, 0, 1)}[op]().astype(np.float32)
        yshape = shape
    last = "a"
    if relu:
        nodes.append(helper.make_node("Relu", ["a"], ["p"]))
        y, last = np.maximum(y, 0), "p"
    if op in ("MaxPool", "MaxPoolCeil", "Relu", "Clip", "Flatten", "Reshape") and shared:
        so, zo = ins[0][1], ins[0][2]
    elif op in FIXED and shared:
        so, zo = FIXED[op]
    else:
        lo, hi = min(float(y.min()), 0.0), max(float(y.max()), 0.0)
        so = np.float32((hi - lo) / 255.0 * 0.9)
        zo = int(np.clip(np.rint(-lo / so), 0, 255))
    inits += [nh.from_array(np.array(so, np.float32), "so"), nh.from_array(np.array(zo, np.uint8), "zo")]
    nodes += [helper.make_node("QuantizeLinear", [last, "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    graph = helper.make_graph(nodes, "unit", [helper.make_tensor_value_info(n, TP.FLOAT, list(feeds[n].shape))
                                              for n, _, _ in ins],
                              [helper.make_tensor_value_info("y", TP.FLOAT, yshape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    qhtest.save_model(model, path)
    np.savez(path + ".in.npz", **feeds)
    return path, path + ".in.npz", float(so)


U8OPS = {  # name -> (op, relu, kernel, want bit-identical)
    "add": ("Add", False, "xnn_add_nd_qu8", False),
    "add_relu": ("Add", True, "xnn_add_nd_qu8", False),
    "maxpool": ("MaxPool", False, "xnn_max_pooling2d_nhwc_u8", True),
    "maxpool_ceil": ("MaxPoolCeil", False, "xnn_max_pooling2d_nhwc_u8", True),
    "global_avgpool": ("GlobalAveragePool", False, "xnn_global_average_pooling_nwc_qu8", False),
    "reducemean": ("ReduceMean", False, "xnn_global_average_pooling_nwc_qu8", False),
    "avgpool": ("AveragePool", False, "xnn_average_pooling2d_nhwc_qu8", False),
    "avgpool_pads_counted": ("AveragePoolPadInc", False, "xnn_average_pooling2d_nhwc_qu8", False),
    "sigmoid": ("Sigmoid", False, "xnn_sigmoid_nc_qu8", False),
    "tanh": ("Tanh", False, "xnn_tanh_nc_qu8", False),
    "leaky_relu": ("LeakyRelu", False, "xnn_leaky_relu_nc_qu8", False),
    "mul": ("Mul", False, "xnn_multiply_nd_qu8", False),
    "mul_relu": ("Mul", True, "xnn_multiply_nd_qu8", False),
    "mul_per_channel": ("MulBcast", False, "xnn_multiply_nd_qu8", False),
    "relu": ("Relu", False, "xnn_clamp_nc_u8", True),
    "clip": ("Clip", False, "xnn_clamp_nc_u8", True),
    # the plugin's own kernels: a table of the host's formula, and byte moves
    "hardswish": ("HardSwish", False, "qn_hardswish_lut_u8", True),
    "hardsigmoid": ("HardSigmoid", False, "qn_hardsigmoid_lut_u8", True),
    "flatten": ("Flatten", False, "qn_flatten_u8", True),
    "reshape": ("Reshape", False, "qn_reshape_u8", True),
}


def case_u8ops(r, tmp):
    """Add, Mul (+Relu; Mul also per channel), MaxPool (also with ceil_mode), AveragePool (unpadded; padded with
    count_include_pad=1), GlobalAveragePool, ReduceMean over H and W, Sigmoid, Tanh, LeakyRelu, Relu and Clip units on
    XNNPACK, HardSwish, HardSigmoid, Flatten (of an NHWC map: a transpose) and Reshape on the
    plugin's own kernels, within one step of the host's run (MaxPool, Relu, Clip, HardSwish,
    HardSigmoid, Flatten and Reshape identical); MaxPool and Flatten onto another grid, a padded AveragePool with
    count_include_pad=0 and Sigmoid with other than its fixed output qparams declined."""
    bad = []
    for i, (name, (op, relu, kernel, exact)) in enumerate(U8OPS.items()):
        model, x, so = u8op_unit(os.path.join(tmp, f"{name}.qdq.onnx"), op, 60 + i, relu)
        us = units(r, model)
        assert len(us) == 1 and us[0].get("kernel") == kernel, f"{name}: {us}"
        host, low = os.path.join(tmp, f"{name}.host.npy"), os.path.join(tmp, f"{name}.qnnpack.npy")
        ok(r, "run", model, "--input", x, "-o", host)
        ok(r, "run", model, "--input", x, "-o", low, *BACKEND)
        steps = np.abs(np.load(host).astype(np.float64) - np.load(low)) / so
        same = float(np.mean(steps < 0.5))
        print(f"{name}: qnnpack vs host QDQ: {100 * same:.2f}% identical, max {steps.max():.3g} steps "
              f"over {steps.size} elements")
        if steps.max() > 1 + 1e-3 or same < (1.0 if exact else 0.95):
            bad.append(name)
    assert not bad, f"beyond the bar: {bad}"
    model, x, _ = u8op_unit(os.path.join(tmp, "maxpool_regrid.qdq.onnx"), "MaxPool", 70, shared=False)
    us = units(r, model)
    print("maxpool onto another grid:", [(u.get("kernel"), u.get("reason")) for u in us])
    assert us and us[0].get("kernel") == "host:reference" and "does not requantize" in (us[0].get("reason") or ""), us
    model, x, _ = u8op_unit(os.path.join(tmp, "flatten_regrid.qdq.onnx"), "Flatten", 73, shared=False)
    us = units(r, model)
    print("flatten onto another grid:", [(u.get("kernel"), u.get("reason")) for u in us])
    assert us and us[0].get("kernel") == "host:reference" and "does not requantize" in (us[0].get("reason") or ""), us
    model, x, _ = u8op_unit(os.path.join(tmp, "avgpool_exc.qdq.onnx"), "AveragePoolPadExc", 72)
    us = units(r, model)
    print("padded AveragePool, count_include_pad=0:", [(u.get("kernel"), u.get("reason")) for u in us])
    assert us and us[0].get("kernel") == "host:reference" and "counts the padding" in (us[0].get("reason") or ""), us
    model, x, _ = u8op_unit(os.path.join(tmp, "sigmoid_free.qdq.onnx"), "Sigmoid", 71, shared=False)
    us = units(r, model)
    print("sigmoid with its own output qparams:", [(u.get("kernel"), u.get("reason")) for u in us])
    assert us and us[0].get("kernel") == "host:reference" and "qu8 sigmoid refuses" in (us[0].get("reason") or ""), us


DIGITS = os.path.join(ROOT, "examples", "digits_cnn.onnx")


def case_digits(r, tmp):
    """The bundled digits CNN quantized for qnnpack: every unit on the plugin (XNNPACK's
    operators; Flatten on the plugin's own byte move), no Q/DQ between its kernels, the final output within two steps of the host's run (a chain
    compounds one-step near-tie differences) on >= 95% identical, the same top-1 accuracy
    within half a point, and 1 and 2 threads identical."""
    ex = os.path.join(ROOT, "examples")
    model = os.path.join(tmp, "digits.qnnpack.qdq.onnx")
    ok(r, "quantize", DIGITS, "--backend", "qnnpack", "--calib", os.path.join(ex, "digits_calib.npy"), "-o", model,
       "--quiet")
    us = units(r, model)
    host_run = sorted(u.get("ops", "") for u in us if not u.get("kernel", "").startswith(("xnn_", "qn_")))
    assert not host_run, f"units off the plugin: {host_run}"
    x, labels = os.path.join(ex, "digits_test.npy"), np.load(os.path.join(ex, "digits_labels.npy"))
    outs = {}
    for tag, extra in (("host", []), ("t1", BACKEND + ["--threads", "1"]), ("t2", BACKEND + ["--threads", "2"])):
        p = os.path.join(tmp, f"{tag}.npy")
        ok(r, "run", model, "--input", x, "-o", p, *extra)
        outs[tag] = np.load(p)
    assert np.array_equal(outs["t1"], outs["t2"]), "1 and 2 threads differ"
    (step, _), = ort_compare.output_steps(model).values()
    steps = np.abs(outs["host"].astype(np.float64) - outs["t1"]) / np.asarray(step, np.float64)
    same = float(np.mean(steps < 0.5))
    acc = {t: float(np.mean(outs[t].argmax(axis=1) == labels)) for t in ("host", "t1")}
    print(f"digits: qnnpack vs host QDQ: {100 * same:.2f}% identical, max {steps.max():.3g} steps over "
          f"{steps.size} elements; top-1 {100 * acc['t1']:.2f}% (host {100 * acc['host']:.2f}%)")
    assert steps.max() <= 2 + 1e-3 and same >= 0.95, "digits beyond the bar"
    assert abs(acc["t1"] - acc["host"]) <= 0.005, "accuracy differs from the host's"


def concat_unit(path, seed, shared=True, flat=False):
    """A hand-built QDQ Concat of three uint8 inputs (5, 3 and 8 channels) along the channels
    of [2, C, 6, 7] maps (flat: of [2, C] rows, an MLP's features), every input on the
    output's grid unless shared is False: (model, inputs npz)."""
    _, TP, helper, nh = qhtest.onnx_modules()
    rng = np.random.default_rng(seed)
    sc, zp = np.float32(0.04), 100
    nodes, inits, feeds, names = [], [], {}, []
    for i, c in enumerate((5, 3, 8)):
        si = sc if shared or i != 1 else np.float32(0.05)
        name = f"x{i}"
        feeds[name] = ((rng.integers(0, 256, [2, c] if flat else [2, c, 6, 7]) - zp) * si).astype(np.float32)
        inits += [nh.from_array(np.array(si, np.float32), f"s{i}"), nh.from_array(np.array(zp, np.uint8), f"z{i}")]
        nodes += [helper.make_node("QuantizeLinear", [name, f"s{i}", f"z{i}"], [f"{name}q"]),
                  helper.make_node("DequantizeLinear", [f"{name}q", f"s{i}", f"z{i}"], [f"{name}d"])]
        names.append(f"{name}d")
    nodes.append(helper.make_node("Concat", names, ["c"], axis=1))
    inits += [nh.from_array(np.array(sc, np.float32), "so"), nh.from_array(np.array(zp, np.uint8), "zo")]
    nodes += [helper.make_node("QuantizeLinear", ["c", "so", "zo"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["y"])]
    graph = helper.make_graph(nodes, "unit", [helper.make_tensor_value_info(n, TP.FLOAT, list(v.shape))
                                              for n, v in feeds.items()],
                              [helper.make_tensor_value_info("y", TP.FLOAT, [2, 16] if flat else [2, 16, 6, 7])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    qhtest.save_model(model, path)
    np.savez(path + ".in.npz", **feeds)
    return path, path + ".in.npz"


def case_concat(r, tmp):
    """Concat along the channels (and of 2-D rows along their last axis) on XNNPACK's strided
    copies, identical to the host's run; with an input on another grid, declined with the
    reason."""
    for tag, flat in (("concat", False), ("concat_2d", True)):
        model, x = concat_unit(os.path.join(tmp, f"{tag}.qdq.onnx"), 80, flat=flat)
        us = units(r, model)
        assert len(us) == 1 and us[0].get("kernel") == "xnn_copy_nc_x8_concat", us
        host, low = os.path.join(tmp, f"{tag}.host.npy"), os.path.join(tmp, f"{tag}.qnnpack.npy")
        ok(r, "run", model, "--input", x, "-o", host)
        for t in ("1", "2"):
            ok(r, "run", model, "--input", x, "-o", low, "--threads", t, *BACKEND)
            assert np.array_equal(np.load(host), np.load(low)), f"{tag} differs from the host's run ({t} threads)"
        print(f"{tag}: identical to the host's run with 1 and 2 threads")
    model, x = concat_unit(os.path.join(tmp, "concat_regrid.qdq.onnx"), 81, shared=False)
    us = units(r, model)
    print("concat with an input on another grid:", [(u.get("kernel"), u.get("reason")) for u in us])
    assert us and us[0].get("kernel") == "host:reference" and "does not requantize" in (us[0].get("reason") or ""), us


CASES = {
    "concat": case_concat,
    "digits": case_digits,
    "u8ops": case_u8ops,
    "engine": case_engine,
    "units": case_units,
    "per_channel_declined": case_per_channel_declined,
    "scale_declined": case_scale_declined,
    "threads_agree": case_threads_agree,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
