#!/usr/bin/python3
"""What the host does for the x86 plugin around its kernels, on small models made here
by torch.onnx.export (PyTorch 1.13, fixed seeds) and onnx.helper: two ShuffleNetV2 blocks run
all on the plugin (channel shuffle and chunk Slices included); a squeeze-excitation
block runs all on the plugin (the per-channel Mul and the HardSigmoid table), while a
spatial-attention Mul the plugin claims but its kernel cannot broadcast runs on the host
with the kernel's reason (the run succeeds and matches the host's QDQ run); a bias the exporter shares
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
            self.sp = torch.nn.Conv2d(8, 1, 1)

        def forward(self, x):
            x = torch.relu(self.c1(x))
            w = torch.nn.functional.adaptive_avg_pool2d(x, 1)
            w = torch.nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(w))))
            x = self.c2(x * w)
            # spatial attention: [1,8,H,W] x [1,1,H,W], a broadcast the kernel refuses
            return x * torch.sigmoid(self.sp(x))

    return torch_export(SE(), (1, 3, 16, 16), os.path.join(tmp, "se.onnx"))


def case_se_mul_refused(r, tmp):
    """The squeeze-excitation Mul ([1,C,H,W] x [1,C,1,1]) and its HardSigmoid run on
    x86's kernels; the spatial-attention Mul ([1,C,H,W] x [1,1,H,W]) is accepted by x86's
    mul pattern but its kernel's reshape takes only the per-channel broadcast: that unit
    runs on the host with the kernel's reason; inspect shows the same decisions;
    everything else (the Sigmoid too) on x86."""
    rng = np.random.default_rng(0)
    fmodel = se_block(tmp)
    calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
    np.save(calib, rng.standard_normal((4, 1, 3, 16, 16)).astype(np.float32))
    np.save(x, rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    model = os.path.join(tmp, "se.x86.qdq.onnx")
    ok(r, "quantize", fmodel, *BACKEND, "--calib", calib, "-o", model, "--quiet")
    compare_host(r, model, x, tmp)
    cov, units = bench_units(r, model, x)
    for name in sorted(units):
        print(f"{name}: {units[name]['kernel']} ({units[name].get('reason')})")
    assert units["/Mul"]["kernel"] == "x86_mul_nhwc_qu8", units["/Mul"]
    assert units["/HardSigmoid"]["kernel"] == "x86_hardsigmoid_lut_qu8", units["/HardSigmoid"]
    assert units["/Sigmoid"]["kernel"] == "x86_sigmoid_lut_qu8", units["/Sigmoid"]
    mul = units["/Mul_1"]
    assert mul["kernel"] == "host:reference", mul
    assert "kernel 'x86_mul_nhwc_qu8' cannot run this unit" in mul["reason"], mul
    assert "differ in shape" in mul["reason"] and "other than per channel" in mul["reason"], mul
    convs = [u for u in cov["units"] if u["ops"].startswith("Conv")]
    assert len(convs) == 5 and all(u["kernel"].startswith("onednn_") for u in convs), convs
    assert all(u["kernel"] != "host:reference" for n, u in units.items() if n != "/Mul_1"), units
    assert cov["plugin_mac_share"] > 0.999, cov
    inspected = {u["name"]: u for u in json.loads(ok(r, "inspect", model, "--json", *BACKEND))["coverage"]["units"]}
    assert inspected["/Mul_1"]["kernel"] == "host:reference", inspected["/Mul_1"]
    assert inspected["/Mul_1"]["reason"] == mul["reason"], (inspected["/Mul_1"], mul)
    assert inspected["/Mul"]["kernel"] == "x86_mul_nhwc_qu8", inspected["/Mul"]


def ort_float_weight_model(path, rng, float_weights):
    """x -> Q/DQ -> Conv(+Relu) -> Q/DQ -> Conv -> Q/DQ -> y in ONNX Runtime's QDQ layout:
    per-channel int8 weights and int32 biases (scale sx * sw) behind DequantizeLinear;
    with float_weights the weight is a float initializer behind QuantizeLinear ->
    DequantizeLinear (onnxruntime.quantization's AddQDQPairToWeight), else the int8
    initializer that QuantizeLinear computes."""
    onnx, TensorProto, helper, numpy_helper = qhtest.onnx_modules()
    nodes, inits = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def qdq(x, scale, zp, name):
        const(f"{name}_s", np.float32(scale))
        const(f"{name}_z", np.uint8(zp))
        nodes.append(helper.make_node("QuantizeLinear", [x, f"{name}_s", f"{name}_z"], [f"{name}_q"], name=f"{name}_Q"))
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [f"{name}_dq"],
                                      name=f"{name}_DQ"))
        return f"{name}_dq"

    def conv(x, sx, cin, cout, name):
        w = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(cin * 9)).astype(np.float32)
        sw = (np.abs(w).reshape(cout, -1).max(axis=1) / 127).astype(np.float32)
        wq = np.clip(np.round(w / sw[:, None, None, None]), -127, 127).astype(np.int8)
        const(f"{name}_ws", sw)
        const(f"{name}_wz", np.zeros(cout, np.int8))
        if float_weights:
            const(f"{name}_w", w)
            nodes.append(helper.make_node("QuantizeLinear", [f"{name}_w", f"{name}_ws", f"{name}_wz"], [f"{name}_wq"],
                                          name=f"{name}_wQ", axis=0))
        else:
            const(f"{name}_wq", wq)
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_wq", f"{name}_ws", f"{name}_wz"], [f"{name}_wd"],
                                      name=f"{name}_wDQ", axis=0))
        bs = (np.float32(sx) * sw).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        const(f"{name}_bq", np.round(b / bs).astype(np.int32))
        const(f"{name}_bs", bs)
        const(f"{name}_bz", np.zeros(cout, np.int32))
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_bq", f"{name}_bs", f"{name}_bz"], [f"{name}_bd"],
                                      name=f"{name}_bDQ", axis=0))
        nodes.append(helper.make_node("Conv", [x, f"{name}_wd", f"{name}_bd"], [f"{name}_y"], name=name,
                                      pads=[1, 1, 1, 1], kernel_shape=[3, 3]))
        return f"{name}_y"

    h = qdq("x", 0.02, 128, "in")
    h = conv(h, 0.02, 4, 8, "conv1")
    nodes.append(helper.make_node("Relu", [h], ["relu1"], name="relu1"))
    h = qdq("relu1", 0.01, 0, "a1")
    h = conv(h, 0.01, 8, 8, "conv2")
    nodes.append(helper.make_node("QuantizeLinear", [h, const("out_s", np.float32(0.02)), const("out_z", np.uint8(128))],
                                  ["out_q"], name="out_Q"))
    nodes.append(helper.make_node("DequantizeLinear", ["out_q", "out_s", "out_z"], ["y"], name="out_DQ"))
    graph = helper.make_graph(nodes, "ort_qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    qhtest.save_model(model, path)
    return path


def case_ort_float_weights(r, tmp):
    """Float weights behind QuantizeLinear -> DequantizeLinear are folded at lowering:
    both convs on oneDNN, every MAC in int8, and the same output as the int8-weight twin."""
    x = os.path.join(tmp, "x.npy")
    np.save(x, np.random.default_rng(5).uniform(-2, 2, (1, 4, 10, 10)).astype(np.float32))
    outs = []
    for fw in (True, False):
        model = ort_float_weight_model(os.path.join(tmp, f"ort_{fw}.onnx"), np.random.default_rng(4), fw)
        cov, units = bench_units(r, model, x)
        for name in ("conv1", "conv2"):
            print(f"float_weights={fw}: {name} on {units[name]['kernel']} ({units[name].get('reason')})")
            assert units[name]["kernel"] == "onednn_conv2d_nhwc_qu8_qs8w", units[name]
        assert cov["plugin_mac_share"] > 0.999, cov
        compare_host(r, model, x, tmp)
        out = os.path.join(tmp, f"y_{fw}.npy")
        ok(r, "run", model, "--input", x, "-o", out, *BACKEND)
        outs.append(np.load(out))
    assert np.array_equal(outs[0], outs[1]), "float-weight and int8-weight layouts differ"


def shared_bias_models(tmp):
    """Three convs with zero biases: PyTorch's exporter keeps one initializer and feeds
    the other two convs through Identity nodes. The twin has the same numbers as three
    distinct initializers and no Identity."""
    import torch
    onnx, _, _, numpy_helper = qhtest.onnx_modules()
    torch.manual_seed(1)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
            self.c3 = torch.nn.Conv2d(8, 8, 3, padding=1)
            with torch.no_grad():
                for c in (self.c1, self.c2, self.c3):
                    c.bias.zero_()

        def forward(self, x):
            return self.c3(torch.relu(self.c2(torch.relu(self.c1(x)))))

    shared = torch_export(Net(), (1, 3, 8, 8), os.path.join(tmp, "shared.onnx"))
    m = onnx.load(shared)
    assert [n.op_type for n in m.graph.node].count("Identity") == 2, "the exporter no longer shares the biases"
    inits = {i.name: i for i in m.graph.initializer}
    keep = []
    for n in m.graph.node:
        if n.op_type == "Identity":
            m.graph.initializer.append(numpy_helper.from_array(numpy_helper.to_array(inits[n.input[0]]).copy(),
                                                               n.output[0]))
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    distinct = os.path.join(tmp, "distinct.onnx")
    onnx.save(m, distinct)
    return shared, distinct


def qdq_form(path):
    """Nodes (op, inputs, outputs) as a sorted list, and initializers by name."""
    onnx, _, _, numpy_helper = qhtest.onnx_modules()
    m = onnx.load(path)
    nodes = sorted((n.op_type, tuple(n.input), tuple(n.output)) for n in m.graph.node)
    return nodes, {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}


def case_shared_bias(r, tmp):
    """A bias shared through Identity gets the QDQ form of the distinct-bias twin on
    every backend (float biases named as the convs read them, or the plugin's own
    per-conv integer bias), never an observed uint8 tensor; no Identity is left; x86
    runs all three convs on oneDNN and both files give the same output."""
    shared, distinct = shared_bias_models(tmp)
    rng = np.random.default_rng(2)
    calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
    np.save(calib, rng.standard_normal((4, 1, 3, 8, 8)).astype(np.float32))
    np.save(x, rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    backends = [b for b in ("x86", "fbgemm", "qnnpack", "example_vitis")
                if os.path.exists(os.path.join(PLUGIN_DIR, f"libqhost-{b}.so"))]
    assert "x86" in backends and "fbgemm" in backends, backends
    for b in backends:
        forms, tables = [], []
        for tag, fmodel in (("shared", shared), ("distinct", distinct)):
            model = os.path.join(tmp, f"{tag}.{b}.qdq.onnx")
            text = ok(r, "quantize", fmodel, "--backend", b, "--plugin-dir", PLUGIN_DIR, "--calib", calib,
                      "-o", model)
            observed = [ln for ln in text.splitlines() if "bias" in ln and ("uint8" in ln or "Histogram" in ln)]
            assert not observed, f"{b} {tag}: a bias observed as an activation: {observed}"
            # the report's table of tensors (the first line names the files, notes differ)
            tables.append([ln for ln in text.splitlines()[1:] if not ln.startswith("note:")])
            forms.append(qdq_form(model))
        assert tables[0] == tables[1], f"{b}: reports differ\n" + "\n".join(tables[0] + ["--"] + tables[1])
        (nodes_s, inits_s), (nodes_d, inits_d) = forms
        print(f"{b}: {len(nodes_s)} nodes; biases {[(k, str(v.dtype)) for k, v in inits_s.items() if 'bias' in k]}")
        assert not any(n[0] == "Identity" for n in nodes_s), f"{b}: Identity left in the QDQ file"
        assert nodes_s == nodes_d, f"{b}: QDQ graphs differ\n{nodes_s}\n{nodes_d}"
        assert sorted(inits_s) == sorted(inits_d), f"{b}: initializers differ: {sorted(inits_s)} vs {sorted(inits_d)}"
        for k in inits_s:
            assert inits_s[k].dtype == inits_d[k].dtype and np.array_equal(inits_s[k], inits_d[k]), f"{b}: {k} differs"
    outs = []
    for tag in ("shared", "distinct"):
        model = os.path.join(tmp, f"{tag}.x86.qdq.onnx")
        cov, units = bench_units(r, model, x)
        convs = [u for u in cov["units"] if u["ops"].startswith("Conv")]
        assert len(convs) == 3 and all(u["kernel"].startswith("onednn_") for u in convs), convs
        out = os.path.join(tmp, f"{tag}.y.npy")
        ok(r, "run", model, "--input", x, "-o", out, *BACKEND)
        outs.append(np.load(out))
    assert np.array_equal(outs[0], outs[1])


def bn_residual_block(tmp):
    """conv -> relu -> BatchNorm -> relu (a standalone BN, as densenet has) -> conv, and a
    residual Add (+Relu) of the two branches, as resnet has."""
    import torch
    torch.manual_seed(3)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
            with torch.no_grad():
                self.bn.running_mean.uniform_(-0.2, 0.2)
                self.bn.running_var.uniform_(0.5, 2.0)
                self.bn.weight.uniform_(0.5, 1.5)
                self.bn.bias.uniform_(-0.1, 0.1)

        def forward(self, x):
            a = torch.relu(self.c1(x))
            b = self.c2(torch.relu(self.bn(a)))
            return torch.relu(a + b)

    return torch_export(Net(), (1, 3, 8, 8), os.path.join(tmp, "bn_res.onnx"))


def qdq_units(path):
    """node name -> whether the QDQ file quantizes it: every computed input comes from a
    DequantizeLinear (or from the op before it in a chain whose values nothing else
    reads) and its output reaches a QuantizeLinear through such a chain."""
    onnx = qhtest.onnx_modules()[0]
    g = onnx.load(path).graph
    consts = {i.name for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    outputs = {o.name for o in g.output}

    def only_reader(v):
        rs = readers.get(v, [])
        return rs[0] if len(rs) == 1 and v not in outputs else None

    def inputs_ok(n, depth=0):
        for v in n.input:
            if not v or v in consts:
                continue
            p = producer.get(v)
            if p is None:
                return False
            if p.op_type == "DequantizeLinear":
                continue
            if p.op_type == "QuantizeLinear" or depth > 3 or only_reader(v) is not n or not inputs_ok(p, depth + 1):
                return False
        return True

    def output_ok(n, depth=0):
        m = only_reader(n.output[0])
        if m is None or depth > 3:
            return False
        return m.op_type == "QuantizeLinear" or (m.op_type != "DequantizeLinear" and output_ok(m, depth + 1))

    return {n.name: inputs_ok(n) and output_ok(n) for n in g.node
            if n.op_type not in ("QuantizeLinear", "DequantizeLinear")}


def case_report_labels(r, tmp):
    """quantize --backend x86 labels each node as the QDQ file holds it: digits' residual
    Add and a standalone BatchNormalization (+Relu) sit between DequantizeLinear and
    QuantizeLinear, and the report says they are quantized (the FX pass's pattern), not
    "left float by plugin 'x86'"; the Add runs on x86's uint8 kernel in bench."""
    rng = np.random.default_rng(6)
    calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
    np.save(calib, rng.standard_normal((4, 1, 3, 8, 8)).astype(np.float32))
    np.save(x, rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    digits_x = os.path.join(tmp, "digits_x.npy")
    np.save(digits_x, np.load(DIGITS_CALIB)[:1])
    for fmodel, cal, inp, must in ((DIGITS, DIGITS_CALIB, digits_x, ["/Add"]),
                                   (bn_residual_block(tmp), calib, x, ["/bn/BatchNormalization", "/Add"])):
        model, report = os.path.join(tmp, "q.onnx"), os.path.join(tmp, "report.json")
        text = ok(r, "quantize", fmodel, *BACKEND, "--calib", cal, "-o", model, "--report", report)
        assert "left float by plugin" not in text, text
        with open(report) as f:
            nodes = {n["name"]: n for n in json.load(f)["nodes"]}
        held = qdq_units(model)
        for name, n in nodes.items():
            assert n["quantized"] == held[name], f"report {n}, but the QDQ file has it {'in' if held[name] else 'outside'} a Q/DQ unit"
        cov, units = bench_units(r, model, inp)
        for name in must:
            print(f"{os.path.basename(fmodel)} {name}: report {nodes[name]}, bench {units[name]['kernel']}")
            assert nodes[name]["quantized"], nodes[name]
        # the residual Add runs on x86's uint8 kernel (a standalone BN is still the host's)
        assert units["/Add"]["kernel"] == "x86_add_nhwc_qu8", units["/Add"]


def case_shufflenet_block(r, tmp):
    """Two of torchvision's ShuffleNetV2 blocks (the stride-2 one and a stride-1 one, whose
    torch.chunk exports as two channel Slices), small: every unit on x86, the channel
    shuffle (Reshape -> Transpose -> Reshape) as one unit, no layout transpose but the
    graph input's and output's, and the host's QDQ run's outputs."""
    import torch
    from torchvision.models.shufflenetv2 import InvertedResidual
    torch.manual_seed(0)
    net = torch.nn.Sequential(InvertedResidual(8, 16, 2), InvertedResidual(16, 16, 1))
    net.train()
    with torch.no_grad():  # BatchNorm statistics of the random weights
        for _ in range(4):
            net(torch.randn(4, 8, 12, 12))
    fmodel = torch_export(net, (1, 8, 12, 12), os.path.join(tmp, "shuffle.onnx"))
    rng = np.random.default_rng(3)
    calib, x = os.path.join(tmp, "calib.npy"), os.path.join(tmp, "x.npy")
    np.save(calib, rng.standard_normal((4, 1, 8, 12, 12)).astype(np.float32))
    np.save(x, rng.standard_normal((1, 8, 12, 12)).astype(np.float32))
    model = os.path.join(tmp, "shuffle.x86.qdq.onnx")
    ok(r, "quantize", fmodel, *BACKEND, "--calib", calib, "-o", model, "--quiet")
    compare_host(r, model, x, tmp)
    cov, units = bench_units(r, model, x)
    kernels = sorted(u["kernel"] for u in cov["units"])
    print(f"{len(kernels)} units: {kernels}")
    assert all(k.startswith(("onednn_", "x86_")) for k in kernels), cov["units"]
    assert kernels.count("x86_channel_shuffle_nhwc_qu8") == 2, kernels
    assert kernels.count("x86_slice_channels_nhwc_qu8") == 2, kernels
    # the graph's NCHW input into the first conv and the last unit's NHWC output back: none between
    assert cov["layout_transposes"] == 2 and cov["qdq_between_kernels"] == 0, cov


CASES = {
    "se_mul_refused": case_se_mul_refused,
    "shufflenet_block": case_shufflenet_block,
    "ort_float_weights": case_ort_float_weights,
    "shared_bias": case_shared_bias,
    "report_labels": case_report_labels,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
