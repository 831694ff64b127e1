#!/usr/bin/python3
"""The float models of the quantization parity suite, their data and their ONNX export.

  /usr/bin/python3 tests/parity/quant/models.py OUTDIR [MODEL ...]

For each MODEL writes OUTDIR/MODEL.onnx (opset 13, static batch 1),
OUTDIR/MODEL.calib.npy (CALIB_SAMPLES seeded samples along axis 0, one forward
pass each) and OUTDIR/MODEL.probe.npy (PROBE_SAMPLES other seeded samples).
Everything is seeded per model (crc32 of the name), so files do not depend on
which models are built or in which order.

Models (issue 5, "How it is checked"):
  tutorial       PyTorch's BackendConfig tutorial model: Linear on the last axis of a
                 4-D input (MatMul + Add in ONNX), Conv2d, BatchNorm2d (kept as a
                 BatchNormalization node), ReLU, Sigmoid
  tutorial_nobn  the same without BatchNorm
  cnn            conv-bn-relu, maxpool, two branches concatenated, conv-bn plus a
                 residual add, relu, global average pooling, flatten, linear
  act            linear, then sigmoid, tanh, hardsigmoid of it combined by mul and add,
                 linear, softmax
  mlp            linear-relu, two linear branches concatenated, linear
  encoder        a hand-built FX-traceable transformer encoder (2 layers, hidden 64,
                 4 heads, sequence 16): nn.Linear q/k/v, torch.matmul between
                 activations, a scalar scale, nn.Softmax, nn.LayerNorm, nn.GELU, residual
                 adds, a linear head; input [1, 16, 64]. What 1.13's FX does to it is
                 what qhost must do to an nn.TransformerEncoder export (docs/models.md)

BatchNorm is exported with training=TrainingMode.PRESERVE on an eval-mode model:
the same inference semantics, but the exporter's eval-mode pass that folds it into
the conv is skipped, so BatchNormalization stays a node (asserted). Constant
folding stays on, so Conv/Gemm weights keep their module names ("conv1.weight");
a Linear on a 4-D tensor becomes MatMul with a pre-transposed initializer the
exporter names itself.
"""
import os
import sys
import warnings
import zlib

import numpy as np
import onnx
import torch
import torch.nn as nn

OPSET = 13
CALIB_SAMPLES = 24
PROBE_SAMPLES = 8


class Tutorial(nn.Module):
    """The model of PyTorch's BackendConfig tutorial (prototype/backend_config_tutorial)."""

    def __init__(self, use_bn):
        super().__init__()
        self.linear = nn.Linear(10, 3)
        self.conv = nn.Conv2d(3, 3, 3)
        self.bn = nn.BatchNorm2d(3)
        self.relu = nn.ReLU()
        self.sigmoid = nn.Sigmoid()
        self.use_bn = use_bn

    def forward(self, x):
        x = self.linear(x)
        x = self.conv(x)
        if self.use_bn:
            x = self.bn(x)
        x = self.relu(x)
        x = self.sigmoid(x)
        return x


class SmallCNN(nn.Module):
    """Residual add, maxpool, concat and global average pooling."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv_a = nn.Conv2d(8, 8, 1)
        self.relu_a = nn.ReLU()
        self.conv_b = nn.Conv2d(8, 8, 3, padding=1)
        self.relu_b = nn.ReLU()
        self.conv3 = nn.Conv2d(16, 8, 1)
        self.bn3 = nn.BatchNorm2d(8)
        self.relu3 = nn.ReLU()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        s = self.pool(self.relu1(self.bn1(self.conv1(x))))
        a = self.relu_a(self.conv_a(s))
        b = self.relu_b(self.conv_b(s))
        y = self.bn3(self.conv3(torch.cat([a, b], dim=1)))
        y = self.relu3(y + s)
        y = torch.flatten(self.gap(y), 1)
        return self.fc(y)


class Activations(nn.Module):
    """The fixed-qparams ops (sigmoid, tanh, hardsigmoid, softmax) and tensor add/mul."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.sigmoid = nn.Sigmoid()
        self.tanh = nn.Tanh()
        self.hardsigmoid = nn.Hardsigmoid()
        self.fc2 = nn.Linear(32, 10)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        h = self.fc1(x)
        y = self.sigmoid(h) * self.tanh(h) + self.hardsigmoid(h)
        return self.softmax(self.fc2(y))


class MLPConcat(nn.Module):
    """Linear layers with a concat of two branches."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.relu1 = nn.ReLU()
        self.fc2a = nn.Linear(64, 32)
        self.relu2a = nn.ReLU()
        self.fc2b = nn.Linear(64, 24)
        self.fc3 = nn.Linear(56, 10)

    def forward(self, x):
        h = self.relu1(self.fc1(x))
        y = torch.cat([self.relu2a(self.fc2a(h)), self.fc2b(h)], dim=1)
        return self.fc3(y)


class EncoderLayer(nn.Module):
    """One post-norm encoder layer spelled with FX-traceable modules and functions (an
    nn.TransformerEncoderLayer is a leaf to 1.13's FX and would stay float)."""

    def __init__(self, d=64, heads=4, ff=128, seq=16):
        super().__init__()
        self.d, self.heads, self.seq, self.dh = d, heads, seq, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.softmax = nn.Softmax(dim=-1)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.act, self.fc2 = nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d)

    def forward(self, x):
        s, h, dh = self.seq, self.heads, self.dh
        q = self.q(x).reshape(1, s, h, dh).permute(0, 2, 1, 3)
        kt = self.k(x).reshape(1, s, h, dh).permute(0, 2, 3, 1)
        v = self.v(x).reshape(1, s, h, dh).permute(0, 2, 1, 3)
        att = self.softmax(torch.matmul(q, kt) * (dh ** -0.5))
        ctx = torch.matmul(att, v).permute(0, 2, 1, 3).reshape(1, s, self.d)
        x = self.norm1(x + self.o(ctx))
        return self.norm2(x + self.fc2(self.act(self.fc1(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(EncoderLayer(), EncoderLayer())
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.layers(x))


# name -> (constructor, input shape without the batch axis, keeps BatchNormalization)
MODELS = {
    "tutorial": (lambda: Tutorial(use_bn=True), (3, 10, 10), True),
    "tutorial_nobn": (lambda: Tutorial(use_bn=False), (3, 10, 10), False),
    "cnn": (SmallCNN, (3, 16, 16), True),
    "act": (Activations, (16,), False),
    "mlp": (MLPConcat, (32,), False),
    "encoder": (Encoder, (16, 64), False),
}


def seed_of(name):
    return zlib.crc32(name.encode())


def perturb_ln(model):
    """LayerNorm parameters away from ones and zeros (which the exporter would
    deduplicate into Identity nodes)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(torch.rand(m.weight.shape) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape) * 0.1)


def perturb_bn(model):
    """Non-trivial BatchNorm statistics and affine parameters: folding that mishandles
    any of the four tensors is caught, and no two BN tensors are equal (the exporter
    deduplicates equal initializers into Identity nodes)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c) * 0.1)
                m.running_var.copy_(torch.rand(c) + 0.5)
                m.weight.copy_(torch.rand(c) + 0.5)
                m.bias.copy_(torch.randn(c) * 0.1)


def build(name):
    """Returns (float model in eval mode, calib [N, ...], probe [P, ...]) as float32
    tensors; deterministic for a given name."""
    ctor, shape, _ = MODELS[name]
    torch.manual_seed(seed_of(name))
    model = ctor()
    perturb_bn(model)
    perturb_ln(model)
    model.eval()
    gen = torch.Generator().manual_seed(seed_of(name) + 1)
    if name.startswith("tutorial"):
        # The tutorial's example input is torch.rand; keep its [0, 1) distribution.
        calib = torch.rand(CALIB_SAMPLES, *shape, generator=gen)
        probe = torch.rand(PROBE_SAMPLES, *shape, generator=gen)
    else:
        calib = torch.randn(CALIB_SAMPLES, *shape, generator=gen)
        probe = torch.randn(PROBE_SAMPLES, *shape, generator=gen)
    return model, calib, probe


def export_onnx(model, example, path, keep_bn):
    mode = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        # The exporter warns about constant folding in training-amenable mode; the
        # model is in eval mode, so its parameters are final.
        warnings.filterwarnings("ignore")
        torch.onnx.export(model, example, path, opset_version=OPSET, input_names=["input"],
                          output_names=["output"], training=mode, do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    ops = [n.op_type for n in m.graph.node]
    has_bn = "BatchNormalization" in ops
    if has_bn != keep_bn:
        raise RuntimeError(f"{path}: BatchNormalization {'missing' if keep_bn else 'present'}: {ops}")
    if "Identity" in ops:
        raise RuntimeError(f"{path}: the exporter deduplicated initializers into Identity: {ops}")
    inits = {t.name for t in m.graph.initializer}
    for mod_name, mod in model.named_modules():
        if isinstance(mod, nn.Conv2d) and f"{mod_name}.weight" not in inits:
            raise RuntimeError(f"{path}: initializer {mod_name}.weight missing")
    model_in_eval = not model.training
    assert model_in_eval, "export changed the model's mode"


def write(outdir, name):
    """Writes MODEL.onnx, MODEL.calib.npy and MODEL.probe.npy; returns their paths."""
    os.makedirs(outdir, exist_ok=True)
    model, calib, probe = build(name)
    base = os.path.join(outdir, name)
    export_onnx(model, calib[0:1], base + ".onnx", MODELS[name][2])
    np.save(base + ".calib.npy", calib.numpy().astype(np.float32))
    np.save(base + ".probe.npy", probe.numpy().astype(np.float32))
    return base + ".onnx", base + ".calib.npy", base + ".probe.npy"


def main(argv):
    if not argv or any(m not in MODELS for m in argv[1:]):
        print(f"usage: models.py OUTDIR [MODEL ...]  (models: {', '.join(MODELS)})", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    for name in argv[1:] or list(MODELS):
        onnx_path = write(argv[0], name)[0]
        ops = [n.op_type for n in onnx.load(onnx_path).graph.node]
        print(f"{name}: {onnx_path} ({' '.join(ops)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
