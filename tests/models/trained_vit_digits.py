#!/usr/bin/python3
"""A small ViT-style transformer trained on digits, for the int8 accuracy bar of issue 18.

  trained_vit_digits.py --workdir DIR

Random-weight transformers say little about int8 accuracy: their outputs have no structure
to keep. This trains, offline and seeded (torch.set_num_threads(1): two threads spin against
each other on a loaded machine; deterministic algorithms), a ViT-style classifier on sklearn's 8x8 digits with trained_digits.py's split
(the first N_TRAIN images train, the tail is held out) and its one-pixel shift augmentation:
  tokens    Conv2d(1, 32, (1, 8), stride (1, 8)): one token per image row (8), plus a learned
            position embedding
  encoder   nn.TransformerEncoder, 2 layers of nn.TransformerEncoderLayer(32, 4 heads,
            feed-forward 64, GELU, batch_first), no dropout
  head      LayerNorm, mean over the 8 tokens, Linear(32, 10)
The pixels are normalised with the train split's mean and std. Input [1, 1, 8, 8].
(16 patches of 2x2 trained the same way reach 93.6% float and lose 1.8 points in int8;
the rows model reaches 95.6% and keeps it: check_vit_digits_int8.py has the figures.)

It writes, under DIR/<hash of this file>/vit/:
  vit.onnx      the float model, eval mode, opset 13, batch 1 ("input" -> "output")
  calib.npy     CALIB training images [CALIB, 1, 8, 8] float32
  test.npy      every held-out image [N, 1, 8, 8] float32, labels.npy their labels (int64)
  meta.json     PyTorch's float accuracy on them, seconds spent training
The hash keys the cache (tests/models/CMakeLists.txt runs this as a ctest fixture); a lock
file serialises concurrent callers. Other scripts import build().
"""
import argparse
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import trained_digits  # noqa: E402  (the data split and the shift augmentation)

SEED = 20261127
EPOCHS = 60
LR = 5e-3
BATCH = 64
CALIB = 64
DIM, HEADS, FF, LAYERS = 32, 4, 64, 2
PATCH = (1, 8)
DROPOUT = 0.0
WEIGHT_DECAY = 1e-2


def _hash_of_this_file():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


SCRIPT_HASH = _hash_of_this_file()


def make_model(dropout=DROPOUT):
    import torch
    import torch.nn as nn

    class DigitsViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(1, DIM, PATCH, stride=PATCH)
            tokens = (8 // PATCH[0]) * (8 // PATCH[1])
            self.pos = nn.Parameter(torch.randn(1, tokens, DIM) * 0.02)
            layer = nn.TransformerEncoderLayer(DIM, HEADS, FF, dropout=dropout, activation="gelu",
                                               batch_first=True)
            self.enc = nn.TransformerEncoder(layer, LAYERS)
            self.norm = nn.LayerNorm(DIM)
            self.head = nn.Linear(DIM, 10)

        def forward(self, x):
            tokens = self.patch(x).flatten(2).transpose(1, 2) + self.pos
            return self.head(self.norm(self.enc(tokens)).mean(dim=1))

    return DigitsViT()


def accuracy(model, x, y):
    import torch
    with torch.no_grad():
        pred = model(torch.as_tensor(x)).argmax(1).numpy()
    return 100.0 * float(np.mean(pred == y))


def train(out_dir):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    t0 = time.perf_counter()
    xtr, ytr, xte, yte = trained_digits.load_data()
    mean, std = float(xtr.mean()), float(xtr.std())
    xtr, xte = (xtr - mean) / std, (xte - mean) / std
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    n = xtr.shape[0]
    steps = EPOCHS * ((n + BATCH - 1) // BATCH)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=steps, pct_start=0.2)
    gen = torch.Generator().manual_seed(SEED)
    x8, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    # shift8 pads with zeros: shift in the [0, 1] pixel domain, then normalise.
    raw = x8 * std + mean
    for epoch in range(EPOCHS):
        model.train()
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for i in range(0, n, BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            xb = (trained_digits.shift8(raw[idx], gen) - mean) / std
            loss = F.cross_entropy(model(xb), yt[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss) * idx.numel()
        if (epoch + 1) % 10 == 0:
            print(f"vit epoch {epoch + 1}: train loss {total / n:.4f} ({time.perf_counter() - t0:.1f} s)", flush=True)
    model.eval()
    acc = accuracy(model, xte, yte)
    train_s = time.perf_counter() - t0

    tmp = out_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    calib_idx = np.sort(np.random.RandomState(SEED).choice(n, CALIB, replace=False))
    np.save(os.path.join(tmp, "calib.npy"), xtr[calib_idx].astype(np.float32))
    np.save(os.path.join(tmp, "test.npy"), xte.astype(np.float32))
    np.save(os.path.join(tmp, "labels.npy"), yte)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        torch.onnx.export(model, torch.from_numpy(xte[:1]), os.path.join(tmp, "vit.onnx"), opset_version=13,
                          input_names=["input"], output_names=["output"], do_constant_folding=True)
    meta = {"model": "vit", "float_accuracy": acc, "heldout_images": int(len(yte)),
            "train_seconds": round(train_s, 1), "epochs": EPOCHS, "mean": mean, "std": std}
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    os.rename(tmp, out_dir)
    print(f"vit: float accuracy {acc:.2f}% on {len(yte)} held-out images; trained in {train_s:.1f} s", flush=True)


def build(workdir):
    """Trains (or reuses) the model; returns meta.json's fields and the file paths
    (onnx, calib, test, labels)."""
    root = os.path.join(workdir, SCRIPT_HASH)
    os.makedirs(root, exist_ok=True)
    out_dir = os.path.join(root, "vit")
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(out_dir, "meta.json")):
            train(out_dir)
    with open(os.path.join(out_dir, "meta.json")) as f:
        info = json.load(f)
    info.update({k: os.path.join(out_dir, v) for k, v in (
        ("onnx", "vit.onnx"), ("calib", "calib.npy"), ("test", "test.npy"), ("labels", "labels.npy"))})
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    info = build(args.workdir)
    print(f"vit: {info['onnx']}: float accuracy {info['float_accuracy']:.2f}% ({info['heldout_images']} "
          f"held-out); trained in {info['train_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
