#!/usr/bin/python3
"""The qnnpack backend's lowered int8 outputs against PyTorch 1.13's own qnnpack engine
(issue 20, "How it is checked").

  check_qnnpack_numerics.py --qhost PATH --plugin-dir DIR --workdir DIR
                            [--model M ...] [--trained-dir DIR] [--asan]

For each model (the quantization suite's tutorial, cnn and mlp, the bundled digits CNN of
examples/, and resnet18 / mobilenet_v2 trained on digits at 1x3x32x32 by
tests/models/trained_digits.py, cached in --trained-dir) qhost quantizes the float ONNX
file with `qhost quantize --backend qnnpack` and runs the QDQ file with `qhost run
--backend qnnpack` (XNNPACK's operators). PyTorch quantizes the float model with
prepare_fx (get_qnnpack_backend_config(), get_default_qconfig_mapping('qnnpack'), one
forward per calibration sample in file order) and gives two oracles on the same inputs:
  ref      convert_to_reference_fx's reference model (float ops between Q/DQ)
  engine   convert_fx's quantized model on torch.backends.quantized.engine = 'qnnpack', its
           ReLU6 given a contiguous tensor (ContiguousReLU6: the engine scrambles a
           channels-last one, which its convolutions return)
Both are built twice: independently calibrated (printed: HistogramObserver's scales move
with fp32 noise, and the exporter folds BatchNorm in another fp32 order than PyTorch's
fuser, docs/observers.md), and as the same quantized model as the QDQ file (PyTorch given
its activation qparams and the float ONNX file's folded weights, as
tests/parity/quant/same_model.py does for x86), so that only the kernels differ. The bars,
on the same quantized model:
  - every model but the trained ones: 100% of the output elements within one output step
    (PyTorch's final scale) of the engine (the issue's parity bar); the digits CNN is
    shallow and its conv and linear units are bit-identical to the engine, so it is also
    held to >= 99% identical;
  - resnet18_digits and mobilenet_v2_digits, the same-model bar of
    check_x86_numerics.py as the issue words it: within one step of the engine on >= 99%
    of elements, and of the reference model on no less than the oracles' own agreement
    minus qhost's distance from the engine minus 0.5 point (capped at 99%; no floor:
    PyTorch's qnnpack engine is at 86% of its own reference model on mobilenet_v2);
  - top-1 accuracy on the labelled test images (digits and the trained models) equal to
    the engine's;
  - every unit on the plugin (XNNPACK's operators or its own kernels), as `qhost bench
    --json` reports it, but the KNOWN_DECLINES.
The independently calibrated comparisons are held to a floor (INDEPENDENT_FLOOR) only, but
where PyTorch's observers cannot all be named in the ONNX file (the tutorial) the bars hold
on them. A model whose ONNX file keeps its BatchNormalization keeps PyTorch's own folded
weights.
Prints one row per model. Exit 0 when all pass, 1 otherwise.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PARITY = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(PARITY, "quant"))
import oracle  # noqa: E402  (first: it sets ATEN_CPU_CAPABILITY before torch loads)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402
import torch  # noqa: E402
from torch.ao.quantization.backend_config import get_qnnpack_backend_config  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx  # noqa: E402

import resnet18_scales  # noqa: E402
import same_model  # noqa: E402

sys.path.insert(0, os.path.join(PARITY, "x86"))
import check_x86_numerics as x86num  # noqa: E402  (model building, qhost calls, step counting)

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(PARITY)), "examples")
TRAINED = x86num.TRAINED
MODELS = ("tutorial", "cnn", "mlp", "digits") + TRAINED
ENGINE_BAR = 1.0          # parity models: all within one step of the engine
SHALLOW_IDENTICAL = {"digits": 0.99}
SAME_MODEL_ENGINE_BAR = 0.99
SAME_MODEL_SLACK, AGREEMENT = 0.005, 0.99
INDEPENDENT_FLOOR = 0.80
# Units the plugin is known not to take, with the reason's text (as check_x86_numerics.py):
# the tutorial's Linear on a 4-D input exports as MatMul + Add (bias); the MatMul's own
# output is float, and the Add of a float tensor and a constant is no QDQ unit at all.
KNOWN_DECLINES = {("tutorial", "/linear/MatMul"): "float output is not supported",
                  ("tutorial", "/linear/Add"): "no lowering pattern matches"}


def build_model(name, args):
    """(float model, calib, test, keeps BN in ONNX, (labels, info) or None, ONNX source or None)."""
    if name == "digits":
        import export_models
        src = os.path.join(EXAMPLES, "digits_cnn.onnx")
        calib, test = (torch.from_numpy(np.load(os.path.join(EXAMPLES, f))) for f in
                       ("digits_calib.npy", "digits_test.npy"))
        labels = np.load(os.path.join(EXAMPLES, "digits_labels.npy"))
        return export_models.load_digits_model(src), calib, test, False, (labels, None), src
    model, calib, test, keep_bn, labels = x86num.build_model(name, args)
    return model, calib, test, keep_bn, labels, None


@contextlib.contextmanager
def qnnpack_observers():
    """resnet18_scales.torch_scales names PyTorch's observers after the ONNX tensors with
    the x86 BackendConfig and mapping; for a qnnpack model the observer set must be
    qnnpack's, so those two names point at qnnpack's while it runs."""
    bc, mapping = resnet18_scales.get_x86_backend_config, oracle.qconfig_mapping
    resnet18_scales.get_x86_backend_config = get_qnnpack_backend_config
    oracle.qconfig_mapping = lambda backend, variant: mapping("qnnpack", variant)
    try:
        yield
    finally:
        resnet18_scales.get_x86_backend_config, oracle.qconfig_mapping = bc, mapping


class ContiguousReLU6(torch.nn.Module):
    """PyTorch 1.13's qnnpack engine clamps a channels-last quantized tensor (what its
    convolutions return) as if it were contiguous: torch.nn.ReLU6 then returns the bytes
    scrambled (max error 6.0 on a 1x4x3x3 tensor; a contiguous one is exact). mobilenet_v2
    runs every Conv -> ReLU6 so, and the engine's top-1 on the trained model falls to chance.
    The oracle therefore hands the engine's ReLU6 a contiguous tensor: its own clamp, on
    the layout it handles."""

    def forward(self, x):
        return torch.nn.functional.relu6(x.contiguous())


def without_relu6_layout_bug(quant):
    for name, mod in list(quant.named_modules()):
        if isinstance(mod, torch.nn.ReLU6):
            parent, _, leaf = name.rpartition(".")
            setattr(quant.get_submodule(parent) if parent else quant, leaf, ContiguousReLU6())
    return quant


def pytorch_side(model, calib, test, forced=None):
    """(reference outputs, qnnpack engine outputs, output step) of PyTorch's qnnpack flow;
    forced = (plan, qhost qparams, folded ONNX weights) makes it the QDQ file's model."""
    torch.set_num_threads(1)
    torch.backends.quantized.engine = "qnnpack"
    bc = get_qnnpack_backend_config()
    mapping, _ = oracle.qconfig_mapping("qnnpack", "default")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        prepared = prepare_fx(copy.deepcopy(model), mapping, (calib[0:1],), backend_config=bc)
        with torch.no_grad():
            for i in range(calib.shape[0]):
                prepared(calib[i:i + 1])
        if forced:
            plan, qh, folded = forced
            for name, target in plan["observer_of"].items():
                if name in qh:
                    s, z = qh[name]
                    prepared.get_submodule(target).calculate_qparams = (
                        lambda s=s, z=z: (torch.tensor([s]), torch.tensor([z], dtype=torch.int32)))
            swap_weights(prepared, folded)
        with torch.no_grad():
            ref = convert_to_reference_fx(copy.deepcopy(prepared), backend_config=bc)
            quant = without_relu6_layout_bug(convert_fx(copy.deepcopy(prepared), backend_config=bc))
            r = torch.cat([ref(test[i:i + 1]) for i in range(test.shape[0])]).numpy()
            q = torch.cat([quant(test[i:i + 1]) for i in range(test.shape[0])]).numpy()
    return r, q, x86num.output_qparams(ref)[0]


def swap_weights(prepared, folded):
    """The float ONNX file's folded weights (and biases) into PyTorch's conv and linear
    modules, matched by value (same_model.forced's rule). A model whose ONNX file keeps
    its BatchNormalization (the suite's tutorial and cnn) has no folded weights to take:
    qhost folds them as PyTorch's fuser does, so PyTorch's own are kept."""
    if not folded:
        return
    for name, mod in prepared.named_modules():
        if not isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
            continue
        w = mod.weight.detach().numpy()
        tol = 1e-6 * max(1.0, float(np.abs(w).max()))
        hit = [k for k, a in folded.items() if a.shape == w.shape and np.allclose(a, w, atol=tol)]
        if len(hit) != 1:
            raise RuntimeError(f"{name}: {len(hit)} ONNX weights match")
        with torch.no_grad():
            mod.weight.copy_(torch.from_numpy(folded[hit[0]]))
            if mod.bias is not None:
                b = mod.bias.detach().numpy()
                bh = [k for k, a in folded.items() if a.shape == b.shape and np.allclose(a, b, atol=1e-5)]
                if len(bh) == 1:
                    mod.bias.copy_(torch.from_numpy(folded[bh[0]]))


def same_model_side(model, calib, test, onnx_path, qdq):
    model = same_model.without_inplace(copy.deepcopy(model))
    with warnings.catch_warnings(), qnnpack_observers():
        warnings.filterwarnings("ignore")
        _, plan = same_model.plan_for(model, onnx_path, calib)
    qh, _ = same_model.qhost_qparams(qdq)
    graph = onnx.load(onnx_path).graph
    keeps_bn = any(n.op_type == "BatchNormalization" for n in graph.node)
    folded = None if keeps_bn else {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    return pytorch_side(model, calib, test, (plan, qh, folded))


def run_case(args, name):
    row = {"model": name, "fail": []}
    d = os.path.join(args.workdir, name)
    os.makedirs(d, exist_ok=True)
    model, calib, test, keep_bn, labels, src = build_model(name, args)
    onnx_path = src or os.path.join(d, f"{name}.onnx")
    if not src:
        if name in TRAINED:  # BN folded by the exporter
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore")
                torch.onnx.export(model, calib[0:1], onnx_path, opset_version=x86num.models.OPSET,
                                  input_names=["input"], output_names=["output"])
        else:
            x86num.models.export_onnx(model, calib[0:1], onnx_path, keep_bn)
    calib_path, test_path = os.path.join(d, "calib.npy"), os.path.join(d, "test.npy")
    np.save(calib_path, calib.numpy().astype(np.float32))
    np.save(test_path, test.numpy().astype(np.float32))
    qdq = os.path.join(d, f"{name}.qnnpack.qdq.onnx")
    x86num.qhost(args, "quantize", "--backend", "qnnpack", "--calib", calib_path, "-o", qdq, onnx_path)
    y_path = os.path.join(d, "qnnpack.out.npy")
    x86num.qhost(args, "run", qdq, "--backend", "qnnpack", "--input", test_path, "-o", y_path)
    got = np.load(y_path)

    ref_i, eng_i, step_i = pytorch_side(model, calib, test)
    try:
        ref_s, eng_s, step = same_model_side(model, calib, test, onnx_path, qdq)
        row["basis"] = "same"
    except (StopIteration, RuntimeError) as e:
        # the tutorial's observers cannot all be named in its ONNX file: held on PyTorch's
        # own calibration instead (one unit deep, it agrees there anyway)
        if name in TRAINED:
            raise
        ref_s, eng_s, step = ref_i, eng_i, step_i
        row["basis"] = f"indep. ({type(e).__name__}: {e})" if str(e) else f"indep. ({type(e).__name__})"
    if got.shape != eng_s.shape:
        row["fail"].append(f"output shape {list(got.shape)} vs PyTorch {list(eng_s.shape)}")
        return row
    row["step"] = step
    row["ind_eng"], row["ind_eng_max"], _ = x86num.steps_between(got, eng_i, step_i)
    row["ind_ref"], row["ind_ref_max"], _ = x86num.steps_between(got, ref_i, step_i)
    row["eng"], row["eng_max"], s_eng = x86num.steps_between(got, eng_s, step)
    row["ref"], row["ref_max"], s_ref = x86num.steps_between(got, ref_s, step)
    row["pt"], row["pt_max"], _ = x86num.steps_between(eng_s, ref_s, step)
    row["identical"] = float(np.mean(s_eng < 0.5))
    for key, who in (("ind_eng", "the engine"), ("ind_ref", "the reference model")):
        if row[key] < INDEPENDENT_FLOOR:
            row["fail"].append(f"independently calibrated: {100 * row[key]:.2f}% within one step of {who} "
                               f"(floor {100 * INDEPENDENT_FLOOR:.0f}%)")
    if name in TRAINED:
        # the issue's bar: 99%, or the oracles' own agreement less 0.5 point (and less
        # qhost's distance from the engine, which it emulates). No floor beneath it, as
        # check_x86_numerics.py has: on mobilenet_v2 PyTorch's qnnpack engine is itself only
        # at 86% of its reference model (docs/qnnpack.md, "Numerics")
        want = {"eng": SAME_MODEL_ENGINE_BAR,
                "ref": min(AGREEMENT, row["pt"] - (1 - row["eng"]) - SAME_MODEL_SLACK)}
    else:
        want = {"eng": ENGINE_BAR}
    for key, s, who in (("eng", s_eng, "PyTorch's qnnpack engine"), ("ref", s_ref, "PyTorch's reference model")):
        if key in want and row[key] < want[key]:
            row["fail"].append(f"same quantized model: {100 * row[key]:.2f}% of {s.size} elements within one step "
                               f"({step:.6g}) of {who} (bar {100 * want[key]:.2f}%), max {row[key + '_max']:.3g} "
                               f"steps (worst {x86num.worst_elements(s)})")
    if row["identical"] < SHALLOW_IDENTICAL.get(name, 0.0):
        row["fail"].append(f"{100 * row['identical']:.2f}% identical to the engine (bar "
                           f"{100 * SHALLOW_IDENTICAL[name]:.0f}%: its conv and linear units are bit-identical)")
    if labels is not None:
        y = labels[0]
        top1 = lambda out: 100.0 * float(np.mean(np.argmax(out, axis=1) == y))  # noqa: E731
        row["acc"] = (top1(got), top1(eng_s), top1(ref_s), top1(eng_i))
        if row["acc"][0] != row["acc"][1]:
            row["fail"].append(f"top-1 {row['acc'][0]:.2f}% differs from the engine's {row['acc'][1]:.2f}% "
                               "on the same quantized model")
    bench = json.loads(x86num.qhost(args, "bench", qdq, "--backend", "qnnpack", "--json", "--runs", "1",
                                    "--warmup", "0", "--no-fp32"))
    cov = x86num.find_key(bench, "plugin_mac_share")
    host = [(u["name"], u.get("reason") or "") for u in cov.get("units", []) if u.get("kernel") == "host:reference"]
    row["share"], row["units"], row["host_units"] = cov["plugin_mac_share"], len(cov.get("units", [])), host
    unexpected = [f"{n} ({why})" for n, why in host if KNOWN_DECLINES.get((name, n), "\0") not in why]
    if unexpected:
        row["fail"].append(f"units on the host: {'; '.join(unexpected)}")
    return row


def print_rows(rows):
    head = (f"{'model':<21}{'step':>10}{'vs engine':>11}{'max':>6}{'identical':>11}{'vs ref':>9}{'max':>6}"
            f"{'pt:eng~ref':>12}{'indep. eng':>12}{'indep. ref':>12}{'units':>7}  result")
    print(head)
    print("-" * len(head))
    for r in rows:
        if "eng" not in r:
            print(f"{r['model']:<21}  FAIL")
            continue
        print(f"{r['model']:<21}{r['step']:>10.4g}{100 * r['eng']:>10.2f}%{r['eng_max']:>6.2g}"
              f"{100 * r['identical']:>10.2f}%{100 * r['ref']:>8.2f}%{r['ref_max']:>6.2g}{100 * r['pt']:>11.2f}%"
              f"{100 * r['ind_eng']:>11.2f}%{100 * r['ind_ref']:>11.2f}%"
              f"{r.get('units', 0) - len(r.get('host_units', [])):>4}/{r.get('units', 0):<3}"
              f"{'PASS' if not r['fail'] else 'FAIL'}")
    print("(vs engine / identical / vs ref / pt: the same quantized model; indep.: PyTorch calibrated on its own)")
    for r in rows:
        if r.get("basis", "same") != "same":
            print(f"{r['model']}: no same-quantized-model run, the bars hold on PyTorch's own calibration: "
                  f"{r['basis']}")
        if "acc" in r:
            print(f"{r['model']}: top-1 on the test images: qhost qnnpack {r['acc'][0]:.2f}%, PyTorch's qnnpack "
                  f"engine {r['acc'][1]:.2f}% (reference model {r['acc'][2]:.2f}%; engine calibrated on its own "
                  f"{r['acc'][3]:.2f}%)")
        for n, why in r.get("host_units", []):
            if (r["model"], n) in KNOWN_DECLINES:
                print(f"{r['model']}: declined (known) {n}: {why}")
        for f in r["fail"]:
            print(f"FAIL {r['model']}: {f}")


def main():
    ap = argparse.ArgumentParser(description="qnnpack lowered outputs vs PyTorch's qnnpack engine")
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--trained-dir", help="trained_digits.py's cache (default: WORKDIR/trained)")
    ap.add_argument("--asan", action="store_true", help="qhost is sanitized (sets ASAN_OPTIONS)")
    ap.add_argument("--model", action="append", choices=MODELS)
    args = ap.parse_args()
    args.trained_dir = args.trained_dir or os.path.join(args.workdir, "trained")
    if "qnnpack" not in torch.backends.quantized.supported_engines:
        print("SKIP: this PyTorch has no qnnpack engine")
        return 77
    rows = []
    for name in args.model or MODELS:
        try:
            rows.append(run_case(args, name))
        except Exception as e:  # noqa: BLE001 - one failing case is one row
            rows.append({"model": name, "fail": [f"{type(e).__name__}: {e}"]})
    print_rows(rows)
    return 0 if all(not r["fail"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
