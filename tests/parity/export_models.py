#!/usr/bin/python3
"""Export the parity-test models from PyTorch to ONNX with a reference output.

  /usr/bin/python3 tests/parity/export_models.py OUTDIR MODEL [MODEL ...]

For each MODEL writes OUTDIR/MODEL.onnx (opset 13), OUTDIR/MODEL.input.npy
(seeded input) and OUTDIR/MODEL.torch.npy (PyTorch's float output on it).
Everything is offline and seeded: torchvision models use weights=None.

Models:
  tutorial      Conv2d, BatchNorm2d (kept as a BatchNormalization node), ReLU,
                a Linear on a 4-D tensor (MatMul + Add), Sigmoid
  tutorial_nobn the same without BatchNorm
  mlp           Linear/ReLU stack on a 2-D input (Gemm)
  resnet18      torchvision, random weights, BatchNorm statistics re-estimated
  mobilenet_v2  torchvision, random weights, BatchNorm statistics re-estimated
  digits        the bundled example model examples/digits_cnn.onnx, copied;
                torch's output comes from its weights loaded into the
                PyTorch model of examples/make_digits_model.py
"""
import os
import shutil
import sys
import time
import warnings
import zlib

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "examples")
OPSET = 13


class Tutorial(nn.Module):
    """The shape of PyTorch's quantization-tutorial model, a bit bigger.

    The Linear acts on the last axis of a 4-D tensor, so the exporter emits
    MatMul + Add on 4-D operands instead of Gemm.
    """

    def __init__(self, with_bn=True):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8) if with_bn else nn.Identity()
        self.relu = nn.ReLU()
        self.fc = nn.Linear(8, 16)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        return self.sigmoid(self.fc(self.relu(self.bn(self.conv(x)))))


def mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def reestimate_bn(model, shape, batches=4):
    """Replace the initial BatchNorm statistics (mean 0, var 1) by ones measured
    on random data, so eval-mode activations stay in a normal range instead of
    growing through the residual stages."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(*shape))
    model.eval()


def perturb_bn(model):
    """Give BatchNorm non-trivial statistics and affine parameters, so a
    runtime that mishandles any of its four tensors is caught."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c) * 0.1)
                m.running_var.copy_(torch.rand(c) + 0.5)
                m.weight.copy_(torch.rand(c) + 0.5)
                m.bias.copy_(torch.randn(c) * 0.1)


def build(name):
    """Returns (model in eval mode, input tensor)."""
    if name in ("tutorial", "tutorial_nobn"):
        model = Tutorial(with_bn=(name == "tutorial"))
        perturb_bn(model)
        return model.eval(), torch.randn(2, 3, 8, 8)
    if name == "mlp":
        return mlp().eval(), torch.randn(2, 64)
    if name in ("resnet18", "mobilenet_v2"):
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
        reestimate_bn(model, (4, 3, 224, 224))
        return model, torch.randn(1, 3, 224, 224)
    raise ValueError(f"unknown model {name}")


def load_digits_model(path):
    """The PyTorch twin of the committed ONNX example, weights taken from it."""
    sys.path.insert(0, EXAMPLES)
    try:
        from make_digits_model import DigitsCNN
    finally:
        sys.path.pop(0)
    model = DigitsCNN()
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    state = model.state_dict()
    missing = [k for k in state if k not in inits]
    if missing:
        raise RuntimeError(f"{path}: initializers missing for {missing}")
    model.load_state_dict({k: torch.from_numpy(inits[k].copy()) for k in state})
    return model.eval()


def ops_of(path):
    return [n.op_type for n in onnx.load(path).graph.node]


def export(outdir, name):
    """Writes the three files for one model; returns the ONNX path."""
    seed = zlib.crc32(name.encode())  # per model, so results do not depend on order
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    onnx_path = os.path.join(outdir, f"{name}.onnx")
    if name == "digits":
        src = os.path.join(EXAMPLES, "digits_cnn.onnx")
        shutil.copyfile(src, onnx_path)
        model = load_digits_model(src)
        x = torch.from_numpy(np.load(os.path.join(EXAMPLES, "digits_test.npy"))[:2].copy())
    else:
        model, x = build(name)
        # The default (EVAL) export folds Conv+BatchNorm, as users get it.
        # For "tutorial", PRESERVE with an eval-mode model exports the same
        # inference semantics but skips the eval peephole pass that does the
        # folding, so the file keeps a BatchNormalization node.
        mode = torch.onnx.TrainingMode.PRESERVE if name == "tutorial" else \
            torch.onnx.TrainingMode.EVAL
        with warnings.catch_warnings():
            # The exporter warns about folding in training-amenable mode; the
            # model is in eval mode, so its parameters are final.
            warnings.filterwarnings("ignore", message=".*constant folding be turned off.*")
            torch.onnx.export(model, x, onnx_path, opset_version=OPSET,
                              input_names=["input"], output_names=["output"],
                              training=mode, do_constant_folding=True)
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(outdir, f"{name}.input.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(outdir, f"{name}.torch.npy"), y.numpy().astype(np.float32))

    onnx.checker.check_model(onnx.load(onnx_path))
    ops = ops_of(onnx_path)
    if name == "tutorial":
        assert "BatchNormalization" in ops, f"{onnx_path}: BatchNorm was folded away: {ops}"
    if name in ("tutorial", "tutorial_nobn"):
        assert "MatMul" in ops and "Gemm" not in ops, f"{onnx_path}: expected MatMul+Add: {ops}"
        assert "BatchNormalization" in ops or name == "tutorial_nobn"
    if name == "tutorial_nobn":
        assert "BatchNormalization" not in ops
    return onnx_path


MODELS = ("tutorial", "tutorial_nobn", "mlp", "resnet18", "mobilenet_v2", "digits")


def main(argv):
    if len(argv) < 2 or any(m not in MODELS for m in argv[1:]):
        print(f"usage: export_models.py OUTDIR MODEL [MODEL ...]  (models: {', '.join(MODELS)})",
              file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    os.makedirs(argv[0], exist_ok=True)
    for name in argv[1:]:
        t0 = time.perf_counter()
        path = export(argv[0], name)
        print(f"exported {name} -> {path} in {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
