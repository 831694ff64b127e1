#!/usr/bin/python3
"""Make qhost's bundled example model: a small residual CNN for sklearn's 8x8 digits.

The model is the default model the tests and the README use, so it must be
reproducible offline: the data ships with sklearn, the weights come from a
seeded single-threaded training run, and the exported files are committed.

Outputs (next to this script unless --outdir is given):
  digits_cnn.onnx      float model, opset 13, input "input" [N,1,8,8], output "logits" [N,10]
  digits_calib.npy     256 training images [256,1,8,8] float32, a calibration set
  digits_test.npy      the held-out images [N_test,1,8,8] float32
  digits_labels.npy    their labels, int64 [N_test]

Usage: /usr/bin/python3 examples/make_digits_model.py [--outdir DIR] [--epochs N]
"""
import argparse
import os
import random
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

SEED = 20240601
N_TRAIN = 1300
N_CALIB = 256


class DigitsCNN(nn.Module):
    """conv-relu-conv-relu-conv, add the skip, relu, maxpool, linear.

    The residual Add is deliberate: it is the op whose quantization needs
    shared or re-quantized scales, so the example exercises that path.
    No BatchNorm, so the float model is exactly what the ONNX file holds.
    """

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.conv3 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        skip = F.relu(self.conv1(x))
        y = F.relu(self.conv2(skip))
        y = self.conv3(y)
        y = F.relu(y + skip)
        y = F.max_pool2d(y, 2)
        y = torch.flatten(y, 1)
        return self.fc(y)


def make_deterministic(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def load_data():
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]


def accuracy(model, x, y):
    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(dim=1).numpy()
    return float((pred == y).mean())


def random_shift(x, gen):
    """Shift each image by up to one pixel (zero fill).

    The held-out tail of load_digits comes from other writers than the head;
    without this small augmentation the model overfits to about 94%.
    """
    padded = F.pad(x, (1, 1, 1, 1))
    d = torch.randint(0, 3, (x.shape[0], 2), generator=gen)
    out = torch.empty_like(x)
    for k in range(x.shape[0]):
        out[k] = padded[k, :, d[k, 0]:d[k, 0] + 8, d[k, 1]:d[k, 1] + 8]
    return out


def train(model, x, y, epochs, batch=64, lr=3e-3):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    gen = torch.Generator().manual_seed(SEED)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for i in range(0, len(xt), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = F.cross_entropy(model(random_shift(xt[idx], gen)), yt[idx])
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        sched.step()
        print(f"epoch {epoch + 1}: train loss {total / len(xt):.4f}")
    model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outdir", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--epochs", type=int, default=20)
    args = ap.parse_args()

    make_deterministic(SEED)
    xtr, ytr, xte, yte = load_data()
    model = DigitsCNN()
    train(model, xtr, ytr, args.epochs)
    acc = accuracy(model, xte, yte)
    print(f"torch float test accuracy: {acc * 100:.2f}% ({len(yte)} test images)")
    if acc < 0.95:
        print("error: test accuracy below 95%", file=sys.stderr)
        return 1

    os.makedirs(args.outdir, exist_ok=True)
    onnx_path = os.path.join(args.outdir, "digits_cnn.onnx")
    torch.onnx.export(model, torch.from_numpy(xte[:1]), onnx_path,
                      opset_version=13, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    calib_idx = np.random.RandomState(SEED).choice(N_TRAIN, N_CALIB, replace=False)
    calib_idx.sort()
    np.save(os.path.join(args.outdir, "digits_calib.npy"), np.ascontiguousarray(xtr[calib_idx]))
    np.save(os.path.join(args.outdir, "digits_test.npy"), np.ascontiguousarray(xte))
    np.save(os.path.join(args.outdir, "digits_labels.npy"), yte)
    print(f"wrote {onnx_path} and digits_{{calib,test,labels}}.npy in {args.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
