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
  text_encoder  token embedding, nn.TransformerEncoder (2 layers, padding mask from
                the tokens, Equal/Where/Expand), a linear head; int64 tokens
  lstm, gru     token embedding, a 2-layer nn.LSTM / a bidirectional nn.GRU, a linear
                head on the last step; int64 tokens
  lstm_bi       the same over a 2-layer bidirectional nn.LSTM
  transformer   an encoder-decoder nn.Transformer (2 + 2 layers): source padding mask
                from the tokens (for the encoder and the decoder's memory attention),
                a causal target mask from torch.triu (Trilu), the target the tokens'
                first 8; opset 14
  ops_mix       one small model calling the torch functions whose exports need the
                newer host kernels (GroupNorm and InstanceNorm1d -> InstanceNormalization,
                split, einsum, topk, gather -> GatherElements, cumsum, argmax, norm ->
                ReduceL2, max/amin/prod/sum over a dim, triu/tril -> Trilu, repeat -> Tile,
                maximum/minimum, log, reciprocal, abs, &), outputs concatenated; opset 14
  convnext_block a ConvNeXt block: 7x7 depthwise conv, LayerNorm, Linear, GELU (Erf),
                Linear, residual
  swin_block    torchvision's SwinTransformerBlock with a shifted window (the mask
                built with Range/ScatterND, a training-mode Dropout of ratio 0)
A name ending in "17" (text_encoder17, convnext_block17) is exported at opset 17,
where nn.LayerNorm becomes one LayerNormalization node; transformer at opset 14 (the
first with Trilu); the others at opset 13.
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
OPSETS = {"transformer": 14, "ops_mix": 14}


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


class TextEncoder(nn.Module):
    """A BERT-style classifier: padding tokens (0) masked out of attention."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(200, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(32, 5)

    def forward(self, tokens):
        h = self.enc(self.emb(tokens), src_key_padding_mask=tokens == 0)
        return self.head(h[:, 0])


class Recurrent(nn.Module):
    """A text classifier over an nn.LSTM or nn.GRU, the last step's state."""

    def __init__(self, kind):
        super().__init__()
        self.emb = nn.Embedding(200, 16)
        if kind == "lstm":
            self.rnn = nn.LSTM(16, 24, num_layers=2, batch_first=True)
        elif kind == "lstm_bi":
            self.rnn = nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
        else:
            self.rnn = nn.GRU(16, 24, batch_first=True, bidirectional=True)
        self.head = nn.Linear(24 if kind == "lstm" else 48, 5)

    def forward(self, tokens):
        y, _ = self.rnn(self.emb(tokens))
        return self.head(y[:, -1])


class Seq2Seq(nn.Module):
    """A masked encoder-decoder: source padding masked in the encoder and in the
    decoder's attention to memory, the target causal."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(200, 32)
        self.tf = nn.Transformer(32, 4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64,
                                 dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, 7)

    def forward(self, tokens):
        src, tgt = tokens, tokens[:, :8]
        pad = tokens == 0
        n = tgt.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        causal = torch.zeros(n, n).masked_fill(causal, float("-inf"))
        h = self.tf(self.emb(src), self.emb(tgt), tgt_mask=causal, src_key_padding_mask=pad,
                    memory_key_padding_mask=pad)
        return self.head(h)


class OpsMix(nn.Module):
    """The torch functions behind the newer float ops, on x of shape [2, 4, 6]."""

    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm1d(4, affine=True)
        self.w = nn.Parameter(torch.randn(6, 5))

    def forward(self, x):
        a = self.gn(x.unsqueeze(-1)).squeeze(-1)
        b = self.inorm(x)
        q, k = torch.split(a, [1, 3], dim=1)
        c = torch.einsum("bij,jk->bik", b, self.w)
        s = torch.einsum("bci,bdi->bcd", a, b)
        v, i = torch.topk(c, 3, dim=-1)
        g = torch.gather(c, 2, i)
        cs = torch.cumsum(x, dim=-1)
        am = torch.argmax(x, dim=-1, keepdim=True).float()
        n = torch.norm(x, p=2, dim=-1, keepdim=True)
        mx, _ = torch.max(x, dim=1, keepdim=True)
        t = torch.triu(s, diagonal=1) + torch.tril(s)
        r = k.repeat(1, 2, 1)
        mm = torch.maximum(torch.minimum(x, cs), -x.abs())
        lg = torch.log(x.abs() + 1) * torch.reciprocal(x.abs() + 2)
        ands = ((x > 0) & (cs > 0)).float()
        p = x.prod(dim=-1, keepdim=True) + x.sum(dim=-1, keepdim=True) + x.amin(dim=-1, keepdim=True)
        parts = (v, g, cs, am, n, mx, t, r, mm, lg, ands, p, q)
        return torch.cat([t.flatten(1) for t in parts], 1)


class ConvNeXtBlock(nn.Module):
    """torchvision's CNBlock at a small size (LayerNorm on channels-last, GELU)."""

    def __init__(self, c=16):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.fc1 = nn.Linear(c, 4 * c)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * c, c)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(self.act(self.fc1(self.norm(y)))).permute(0, 3, 1, 2)
        return x + y


def tokens(batch, length):
    """Random tokens, the last few of each row padding (0)."""
    t = torch.randint(1, 200, (batch, length))
    t[0, length - 3:] = 0
    return t


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
    if name.startswith("text_encoder"):
        return TextEncoder().eval(), tokens(2, 12)
    if name in ("lstm", "gru", "lstm_bi"):
        return Recurrent(name).eval(), tokens(2, 10)
    if name == "transformer":
        return Seq2Seq().eval(), tokens(2, 12)
    if name == "ops_mix":
        return OpsMix().eval(), torch.randn(2, 4, 6)
    if name.startswith("convnext_block"):
        return ConvNeXtBlock().eval(), torch.randn(2, 16, 8, 8)
    if name == "swin_block":
        from torchvision.models.swin_transformer import SwinTransformerBlock
        block = SwinTransformerBlock(16, 2, window_size=[4, 4], shift_size=[2, 2])
        return block.eval(), torch.randn(1, 8, 8, 16)
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
            torch.onnx.export(model, x, onnx_path, opset_version=OPSETS.get(name, 17 if name.endswith("17") else OPSET),
                              input_names=["input"], output_names=["output"],
                              training=mode, do_constant_folding=True)
    with torch.no_grad():
        y = model(x)
    x_np = x.numpy()
    np.save(os.path.join(outdir, f"{name}.input.npy"),
            x_np if x_np.dtype == np.int64 else x_np.astype(np.float32))
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
    if name.endswith("17"):
        assert "LayerNormalization" in ops, f"{onnx_path}: expected LayerNormalization: {ops}"
    if name == "text_encoder":
        assert {"Equal", "Where", "Pow", "Sqrt"} <= set(ops), f"{onnx_path}: {sorted(set(ops))}"
    if name in ("lstm", "gru", "lstm_bi"):
        assert name.split("_")[0].upper() in ops, f"{onnx_path}: {sorted(set(ops))}"
    if name == "transformer":
        assert {"Trilu", "Where"} <= set(ops), f"{onnx_path}: {sorted(set(ops))}"
    if name == "ops_mix":
        want = {"InstanceNormalization", "Split", "Einsum", "TopK", "GatherElements", "CumSum", "ArgMax",
                "ReduceL2", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "Trilu", "Tile", "Max", "Min",
                "Log", "Reciprocal", "Abs", "And"}
        assert want <= set(ops), f"{onnx_path}: lacks {sorted(want - set(ops))}"
    if name == "swin_block":
        assert {"Range", "ScatterND"} <= set(ops), f"{onnx_path}: {sorted(set(ops))}"
    return onnx_path


MODELS = ("tutorial", "tutorial_nobn", "mlp", "resnet18", "mobilenet_v2", "digits", "text_encoder",
          "text_encoder17", "lstm", "gru", "lstm_bi", "transformer", "ops_mix", "convnext_block",
          "convnext_block17", "swin_block")


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
