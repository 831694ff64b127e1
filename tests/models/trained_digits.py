#!/usr/bin/python3
"""Trained torchvision networks for the numerics bars: resnet18 and mobilenet_v2 on digits.

  trained_digits.py --workdir DIR [--model resnet18|mobilenet_v2 ...]

Random-weight deep networks are a poor test of "within one output step of the oracle":
their activations have no structure, so one-step tie differences compound through the
depth. This trains torchvision's resnet18(num_classes=10) and mobilenet_v2(num_classes=10)
(BatchNorm, residual Adds, ReLU6 kept) on sklearn's 8x8 digits, offline: the images are
upsampled bilinearly to 32x32, the channel replicated to 3 and normalised with the train
split's mean and std. The split is examples/make_digits_model.py's (the first N_TRAIN
images train, the tail tests). Seeded, deterministic, torch.set_num_threads(2).

For each model it writes, under DIR/<hash of this file>/<model>/:
  <model>.onnx   the float model, eval mode, opset 13, batch 1 ("input" -> "output";
                 the exporter folds BatchNorm into the convs)
  <model>.pt     its state_dict, so PyTorch's quantization can start from the same model
  calib.npy      CALIB training images [CALIB, 3, 32, 32] float32
  test.npy       the first TEST held-out images, labels.npy their labels (int64)
  meta.json      float test accuracy (on every held-out image and on test.npy), seconds
The hash keys the cache: a second call with the same script reuses the files; a lock
file serialises concurrent callers (ctest -j2). Other scripts import build().
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

SEED = 20240601
N_TRAIN = 1300  # examples/make_digits_model.py's split
SIZE = 32
CALIB = 64
TEST = 200
# Adam with a one-cycle schedule; mobilenet_v2 needs a higher peak reached sooner.
MODELS = {"resnet18": {"epochs": 6, "lr": 2e-3, "warmup": 0.3},
          "mobilenet_v2": {"epochs": 8, "lr": 1e-2, "warmup": 0.15}}
BATCH = 64


def _hash_of_this_file():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


# Read once, at import: the code that trains is the code that was imported, even if the
# file changes while a caller runs.
SCRIPT_HASH = _hash_of_this_file()


def load_data():
    """(x_train, y_train, x_test, y_test): [N, 1, 8, 8] in [0, 1] and int64 labels."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]


def to_input(x8, mean, std):
    """[N, 1, 8, 8] -> [N, 3, SIZE, SIZE], normalised."""
    import torch
    import torch.nn.functional as F
    t = torch.as_tensor(x8)
    up = F.interpolate(t, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    return ((up - mean) / std).repeat(1, 3, 1, 1).contiguous()


def shift8(x8, gen):
    """Each 8x8 image moved by up to one pixel (zero fill): the held-out writers differ
    from the training ones, and without it the nets overfit (make_digits_model.py)."""
    import torch
    import torch.nn.functional as F
    padded = F.pad(x8, (1, 1, 1, 1))
    d = torch.randint(0, 3, (x8.shape[0], 2), generator=gen)
    out = torch.empty_like(x8)
    for k in range(x8.shape[0]):
        out[k] = padded[k, :, d[k, 0]:d[k, 0] + 8, d[k, 1]:d[k, 1] + 8]
    return out


def make_model(name):
    import torchvision
    return getattr(torchvision.models, name)(weights=None, num_classes=10)


def accuracy(model, x, y):
    import torch
    with torch.no_grad():
        pred = torch.cat([model(x[i:i + 100]) for i in range(0, x.shape[0], 100)]).argmax(1).numpy()
    return 100.0 * float(np.mean(pred == y))


def train(name, out_dir):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    t0 = time.perf_counter()
    xtr, ytr, xte, yte = load_data()
    up = F.interpolate(torch.from_numpy(xtr), size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    mean, std = float(up.mean()), float(up.std())
    model = make_model(name)
    cfg = MODELS[name]
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    steps = cfg["epochs"] * ((N_TRAIN + BATCH - 1) // BATCH)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg["lr"], total_steps=steps,
                                                pct_start=cfg["warmup"])
    gen = torch.Generator().manual_seed(SEED)
    x8, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    for epoch in range(cfg["epochs"]):
        model.train()
        perm = torch.randperm(N_TRAIN, generator=gen)
        total = 0.0
        for i in range(0, N_TRAIN, BATCH):
            idx = perm[i:i + BATCH]
            if idx.numel() < 2:  # BatchNorm needs two samples
                continue
            opt.zero_grad()
            loss = F.cross_entropy(model(to_input(shift8(x8[idx], gen), mean, std)), yt[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss) * idx.numel()
        print(f"{name} epoch {epoch + 1}: train loss {total / N_TRAIN:.4f} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    model.eval()
    xall = to_input(xte, mean, std)
    acc_all = accuracy(model, xall, yte)
    acc_test = accuracy(model, xall[:TEST], yte[:TEST])
    train_s = time.perf_counter() - t0

    tmp = out_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    calib_idx = np.sort(np.random.RandomState(SEED).choice(N_TRAIN, CALIB, replace=False))
    np.save(os.path.join(tmp, "calib.npy"), to_input(xtr[calib_idx], mean, std).numpy().astype(np.float32))
    np.save(os.path.join(tmp, "test.npy"), xall[:TEST].numpy().astype(np.float32))
    np.save(os.path.join(tmp, "labels.npy"), yte[:TEST])
    torch.save(model.state_dict(), os.path.join(tmp, f"{name}.pt"))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        torch.onnx.export(model, xall[:1], os.path.join(tmp, f"{name}.onnx"), opset_version=13,
                          input_names=["input"], output_names=["output"])
    meta = {"model": name, "float_accuracy_all": acc_all, "float_accuracy_test": acc_test,
            "test_images": TEST, "heldout_images": int(len(yte)), "train_seconds": round(train_s, 1),
            "epochs": cfg["epochs"], "mean": mean, "std": std}
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    os.rename(tmp, out_dir)
    print(f"{name}: float accuracy {acc_all:.2f}% on {len(yte)} held-out images, {acc_test:.2f}% on "
          f"test.npy ({TEST}); trained in {train_s:.1f} s", flush=True)


def build(name, workdir):
    """Trains (or reuses) model `name`; returns a dict of its file paths (onnx, state,
    calib, test, labels) and meta.json's fields."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name}; choose from {', '.join(MODELS)}")
    root = os.path.join(workdir, SCRIPT_HASH)
    os.makedirs(root, exist_ok=True)
    out_dir = os.path.join(root, name)
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(out_dir, "meta.json")):
            train(name, out_dir)
    with open(os.path.join(out_dir, "meta.json")) as f:
        info = json.load(f)
    info.update({k: os.path.join(out_dir, v) for k, v in (
        ("onnx", f"{name}.onnx"), ("state", f"{name}.pt"), ("calib", "calib.npy"),
        ("test", "test.npy"), ("labels", "labels.npy"))})
    return info


def load_model(info):
    """The eval-mode float torch model of build()'s result."""
    import torch
    model = make_model(info["model"])
    model.load_state_dict(torch.load(info["state"]))
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", action="append", choices=list(MODELS))
    args = ap.parse_args()
    for name in args.model or MODELS:
        info = build(name, args.workdir)
        print(f"{name}: {info['onnx']}: float accuracy {info['float_accuracy_all']:.2f}% "
              f"({info['heldout_images']} held-out), {info['float_accuracy_test']:.2f}% on test.npy; "
              f"trained in {info['train_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
