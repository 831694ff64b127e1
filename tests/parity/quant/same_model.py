"""PyTorch's quantized model made the same as a qhost QDQ file, to compare kernels alone.

On a deep trained net, PyTorch 1.13's FX flow and `qhost quantize` reach slightly
different quantized models from the same float model: HistogramObserver is
discontinuous in its input, so fp32 activations that differ by 1e-6 relative (two conv
implementations) move a few scales by up to 3%, and the ONNX exporter folds BatchNorm
in a different fp32 order than PyTorch's fuser, so a few integer weights differ by one
(docs/observers.md, "mobilenet_v2 on digits"). Comparing outputs then measures those
differences, compounded through depth, as much as the kernels.

forced() rebuilds PyTorch's quantized model with qhost's activation qparams and/or the
ONNX file's folded float weights put into the prepared model before convert, so that
PyTorch's reference model and its onednn engine run the *same quantized model* as the
QDQ file. FX activations are named in the ONNX file by value (resnet18_scales.
torch_scales with first_match). Used by trained_qparams.py (the diagnostic) and by
tests/parity/x86/check_x86_numerics.py (the x86 numerics bar).
"""
import copy

import numpy as np
import onnx
import onnx.numpy_helper
import torch
from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

import oracle
import resnet18_scales


def first_match(value, onnx_values, fx_name, exclude):
    """oracle.match_tensor, but the first of several hits: at 32x32 mobilenet_v2's last
    feature map is 1x1, so its ReLU6 and the global pool hold the same values (and share
    one observer in PyTorch, so either name is right)."""
    v = value.detach().numpy()
    tol = 1e-4 * max(float(np.max(np.abs(v))), 1e-3)
    hits = [k for k, a in onnx_values.items()
            if k not in exclude and a.shape == v.shape and a.dtype == v.dtype
            and float(np.max(np.abs(a - v))) <= tol]
    if not hits:
        raise RuntimeError(f"FX node {fx_name}: no ONNX tensor matches its value")
    return hits[0]


def qhost_qparams(path):
    """{activation tensor name: (scale, zero point)} of a qhost QDQ file, and its
    initializers as arrays."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    return {k[:-6]: (float(v.reshape(())), int(inits[k[:-6] + "_zero_point"].reshape(())))
            for k, v in inits.items()
            if k.endswith("_scale") and v.size == 1 and k[:-6] + "_quantized" not in inits}, inits


def without_inplace(model):
    """An in-place ReLU/ReLU6 overwrites the conv output the oracle's Recorder keeps, so
    the conv's quantize would be paired with the activation's tensor; values are unchanged."""
    for m in model.modules():
        if isinstance(m, (torch.nn.ReLU6, torch.nn.ReLU)):
            m.inplace = False
    return model


def plan_for(model, onnx_path, calib):
    """PyTorch's activation scales by ONNX name and the observer behind each (the `plan`
    forced() needs)."""
    want, _, plan = resnet18_scales.torch_scales(model, onnx_path, calib, False, match=first_match)
    return want, plan


def forced(model, calib, test, plan, qh, folded, acts, weights, mapping=None):
    """(reference outputs, onednn outputs, output step) of PyTorch's model with qhost's
    activation qparams (acts) and/or the ONNX file's folded weights (weights) put in
    before convert. qh: qhost_qparams()[0]; folded: the float ONNX file's initializers;
    mapping: the QConfigMapping (default: onednn's default)."""
    torch.backends.quantized.engine = "onednn"
    bc = oracle.BACKEND_CONFIGS["x86"]()
    if mapping is None:
        mapping, _ = oracle.qconfig_mapping("x86", "default")
    prepared = prepare_fx(copy.deepcopy(model), mapping, (calib[0:1],), backend_config=bc)
    with torch.no_grad():
        for i in range(calib.shape[0]):
            prepared(calib[i:i + 1])
    if acts:
        for name, target in plan["observer_of"].items():
            if name in qh:
                s, z = qh[name]
                prepared.get_submodule(target).calculate_qparams = (
                    lambda s=s, z=z: (torch.tensor([s]), torch.tensor([z], dtype=torch.int32)))
    if weights:  # fused conv+bn modules hold PyTorch's fold: swap in the exporter's
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
    with torch.no_grad():
        ref = convert_to_reference_fx(copy.deepcopy(prepared), backend_config=bc)
        quant = convert_fx(copy.deepcopy(prepared), backend_config=bc)
        r = torch.cat([ref(test[i:i + 1]) for i in range(test.shape[0])]).numpy()
        q = torch.cat([quant(test[i:i + 1]) for i in range(test.shape[0])]).numpy()
    last = next(n for n in ref.graph.nodes if n.op == "output").args[0]  # dequantize(quantize(y))
    step = oracle.quantized_activations(ref)[last.args[0].args[0].name][0]
    return r, q, step


def same_model_outputs(model, calib, test, onnx_path, qdq_path, mapping=None):
    """(reference outputs, onednn outputs, output step) of PyTorch running the QDQ file's
    quantized model: qhost's activation qparams and the float ONNX file's weights.
    mapping: the QConfigMapping the QDQ file was made with (forced())."""
    model = without_inplace(copy.deepcopy(model))
    _, plan = plan_for(model, onnx_path, calib)
    qh, _ = qhost_qparams(qdq_path)
    folded = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(onnx_path).graph.initializer}
    return forced(model, calib, test, plan, qh, folded, True, True, mapping)
