#!/usr/bin/python3
"""resnet18 activation scales: `qhost quantize --backend x86` against PyTorch 1.13.

  /usr/bin/python3 tests/parity/quant/resnet18_scales.py --qhost build/qhost --workdir DIR
      [--samples 4] [--size 64] [--dump-batches] [--rtol 1e-6] [--strict]

The small models of models.py never grow a HistogramObserver's range over many
batches with heavy tails; torchvision's resnet18 (random weights, BatchNorm
statistics re-estimated as in tests/parity/export_models.py, same seed) does in its
deep stages. The model is exported at 1x3xSIZExSIZE, SAMPLES seeded normal
calibration samples are written, PyTorch runs prepare_fx with the x86 BackendConfig
and onednn's default qconfig mapping (oracle.qconfig_mapping: HistogramObserver
quint8 [0, 255], reduce_range off) one sample per forward, and `qhost quantize
--backend x86 --backend-opt reduce_range=off` quantizes the same file. FX nodes are
named by value against the float ONNX file (oracle.match_tensor). Two comparisons:
  against PyTorch FX   qhost's scales vs the FX model's. Not a bar (only with
                       --strict): qhost's fp32 convolutions differ from PyTorch's by a
                       few 1e-6 relative, and HistogramObserver is discontinuous in its
                       input (the start index of its combine is a round() that can sit
                       near a half, and the search stops at the first norm that rises),
                       so PyTorch's own scales move by up to ~1.6e-2 when its
                       activations are perturbed by 1e-6 relative.
  replayed             PyTorch's HistogramObservers fed qhost's own fp32 activations
                       (`qhost run` with every observed tensor as an extra output), in
                       PyTorch's call order, shared observers (MaxPool, AvgPool,
                       Flatten) included: the bar, every scale within --rtol.
--dump-batches also writes DIR/resnet18.batches.npz: for each activation, the tensors
that reached PyTorch's FX observer, in order ("ONNX NAME/k"), for observer-level study.
Exit 0 when every replayed scale is within --rtol and both sides quantize the same
activations, 1 otherwise.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import oracle  # noqa: E402  (sets ATEN_CPU_CAPABILITY before torch is imported)

import argparse  # noqa: E402
import copy  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402
import torch  # noqa: E402
from torch.ao.quantization import observer as tob  # noqa: E402
from torch.ao.quantization.backend_config.x86 import get_x86_backend_config  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx  # noqa: E402

import export_models  # noqa: E402
import onnx_eval  # noqa: E402


def build(workdir, samples, size):
    """Exports the model and writes the calibration file; returns (model, onnx, calib)."""
    seed = zlib.crc32(b"resnet18")  # export_models.export's seed for this model
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    model, _ = export_models.build("resnet18")
    x = torch.randn(1, 3, size, size)
    onnx_path = os.path.join(workdir, f"resnet18.{size}.onnx")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        torch.onnx.export(model, x, onnx_path, opset_version=export_models.OPSET,
                          input_names=["input"], output_names=["output"],
                          training=torch.onnx.TrainingMode.EVAL, do_constant_folding=True)
    gen = torch.Generator().manual_seed(seed + 1)
    calib = torch.randn(samples, 3, size, size, generator=gen)
    calib_path = os.path.join(workdir, f"resnet18.{size}.calib{samples}.npy")
    np.save(calib_path, calib.numpy().astype(np.float32))
    return model, onnx_path, calib_path, calib


def torch_scales(model, onnx_path, calib, dump, match=None):
    """{ONNX tensor name: (scale, zero point, fx node)} and, with dump, the batches.
    match(value, onnx values, fx name, exclude) names an FX value in the ONNX file
    (default oracle.match_tensor)."""
    match = match or oracle.match_tensor
    torch.backends.quantized.engine = "onednn"
    mapping, _ = oracle.qconfig_mapping("x86", "default")
    bc = get_x86_backend_config()
    seen = {}
    orig_forward = tob.HistogramObserver.forward

    def recording_forward(self, x):
        if dump:
            seen.setdefault(id(self), []).append(x.detach().clone().numpy())
        return orig_forward(self, x)

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        prepared = prepare_fx(copy.deepcopy(model), mapping, (calib[0:1],), backend_config=bc)
        tob.HistogramObserver.forward = recording_forward
        try:
            with torch.no_grad():
                for i in range(calib.shape[0]):
                    prepared(calib[i:i + 1])
        finally:
            tob.HistogramObserver.forward = orig_forward
        with torch.no_grad():
            recorder = oracle.Recorder(copy.deepcopy(prepared))
            recorder.run(calib[0:1])
        # Ops that share their input's qparams (MaxPool, AvgPool, Flatten) get the same
        # observer object under a second name: key observers by object, not by name.
        observers, calls, key = {}, [], {}
        for n in prepared.graph.nodes:
            if n.op != "call_module":
                continue
            mod = prepared.get_submodule(n.target)
            if isinstance(mod, tob.HistogramObserver):
                observers[n.args[0].name] = mod
                calls.append((key.setdefault(id(mod), n.target), n.args[0].name))
        ref = convert_to_reference_fx(prepared, backend_config=bc)
    onnx_model = onnx.load(onnx_path)
    inits = {t.name for t in onnx_model.graph.initializer}
    values = onnx_eval.evaluate(onnx_model, {"input": calib[0:1].numpy()})
    out, batches = {}, {}
    for fx_name, (scale, zp, _) in oracle.quantized_activations(ref).items():
        name = match(recorder.values[fx_name], values, fx_name, inits)
        out[name] = (scale, zp, fx_name)
        ob = observers.get(fx_name)
        if dump and ob is not None:
            for k, b in enumerate(seen.get(id(ob), [])):
                batches[f"{name}/{k}"] = b
    # Every observer call of one forward, as (observer, ONNX tensor it sees), and the
    # observer behind each quantized activation: what replay() needs.
    plan = {"calls": [(t, match(recorder.values[x], values, x, inits))
                      for t, x in calls],
            "observer_of": {name: next(t for t, x in calls if x == fx)
                            for name, (_, _, fx) in out.items()}}
    return out, batches, plan


def replay(qhost, workdir, onnx_path, calib, plan):
    """PyTorch's observers fed qhost's own fp32 activations (`qhost run` with every
    observed tensor as an extra output), in PyTorch's call order: {ONNX name: scale}.
    This isolates the observers from the float differences of the two executors."""
    model = onnx.load(onnx_path)
    outputs = {o.name for o in model.graph.output}
    needed = sorted({name for _, name in plan["calls"]} - {"input"})
    for name in needed:
        if name not in outputs:
            model.graph.output.append(onnx.helper.make_tensor_value_info(
                name, onnx.TensorProto.FLOAT, None))
    tapped = os.path.join(workdir, "resnet18.tapped.onnx")
    onnx.save(model, tapped)
    mapping, _ = oracle.qconfig_mapping("x86", "default")
    make = mapping.global_qconfig.activation
    obs = {t: make() for t, _ in plan["calls"]}
    for i in range(calib.shape[0]):
        x_path = os.path.join(workdir, f"replay.x{i}.npy")
        y_path = os.path.join(workdir, f"replay.y{i}.npz")
        np.save(x_path, calib[i:i + 1].numpy())
        cmd = [qhost, "run", "-i", x_path, "-o", y_path, tapped]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
        with np.load(y_path) as y:
            vals = {k: y[k] for k in y.files}
        vals["input"] = calib[i:i + 1].numpy()
        for t, name in plan["calls"]:
            obs[t](torch.from_numpy(vals[name]))
    return {name: float(obs[t].calculate_qparams()[0]) for name, t in plan["observer_of"].items()}


def compare(want, got, rtol, label):
    """Prints the activations over rtol; returns (worst rel err, count over)."""
    worst, bad = 0.0, 0
    for name, scale in sorted(want.items()):
        if name not in got:
            print(f"MISSING {name}: not quantized by qhost")
            bad += 1
            continue
        err = abs(got[name] - scale) / scale
        worst = max(worst, err)
        if err > rtol:
            bad += 1
            print(f"{label} MISMATCH {name}: qhost {got[name]!r} torch {scale!r} rel {err:.3e}")
    return worst, bad


def qhost_scales(qhost, onnx_path, calib_path, out_path):
    cmd = [qhost, "quantize", "--backend", "x86", "--backend-opt", "reduce_range=off",
           "--calib", calib_path, "-o", out_path, "--quiet", onnx_path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(out_path).graph.initializer}
    return {k[:-len("_scale")]: float(v.reshape(())) for k, v in inits.items()
            if k.endswith("_scale") and v.size == 1
            and f"{k[:-len('_scale')]}_quantized" not in inits}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rtol", type=float, default=1e-6)
    ap.add_argument("--dump-batches", action="store_true")
    ap.add_argument("--strict", action="store_true",
                    help="fail on the comparison with PyTorch FX too (see the module doc)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.workdir, exist_ok=True)
    t0 = time.time()
    model, onnx_path, calib_path, calib = build(a.workdir, a.samples, a.size)
    want, batches, plan = torch_scales(model, onnx_path, calib, a.dump_batches)
    if a.dump_batches:
        np.savez(os.path.join(a.workdir, "resnet18.batches.npz"), **batches)
    got = qhost_scales(a.qhost, onnx_path, calib_path,
                       os.path.join(a.workdir, f"resnet18.{a.size}.x86.qdq.onnx"))
    worst, bad_fx = compare({k: v[0] for k, v in want.items()}, got, a.rtol, "[torch FX]")
    bad = 0
    extra = sorted(set(got) - set(want))
    for name in extra:
        print(f"EXTRA {name}: quantized by qhost only")
    bad += len(extra)
    print(f"resnet18 1x3x{a.size}x{a.size}, {a.samples} calibration samples, {len(want)} "
          f"activations: against PyTorch FX, max rel scale err {worst:.3e} "
          f"({bad_fx} over {a.rtol:g})")
    replayed = replay(a.qhost, a.workdir, onnx_path, calib, plan)
    worst_r, bad_r = compare(replayed, got, a.rtol, "[torch on qhost's activations]")
    print(f"against PyTorch's observers fed qhost's own fp32 activations: max rel scale err "
          f"{worst_r:.3e} ({bad_r} over {a.rtol:g}); {time.time() - t0:.1f} s")
    bad += bad_r + (bad_fx if a.strict else 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
