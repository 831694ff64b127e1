"""qhost.torch: quantize a torch.nn.Module with qhost and get a Session back.

The module is exported with the caller's own PyTorch (torch.onnx.export, opset 13, the
first axis of every input dynamic) to a temporary ONNX file, quantized by qhost for the
backend, and opened on it. PyTorch is imported here only.
"""

import os
import tempfile

import numpy as np
import torch

from ._flows import quantize as _quantize
from ._session import Session
from ._status import Error, StatusCode
from ._options import is_path

OPSET = 13


def _as_tuple(example_inputs):
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    return tuple(example_inputs)


def _as_numpy(value, what):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().contiguous().numpy()
    if isinstance(value, np.ndarray):
        return value
    raise Error(f"{what}: a torch.Tensor or numpy array, not {type(value).__name__}",
                StatusCode.INVALID_ARGUMENT)


def _calibration(calib, input_names):
    """calib as qhost.quantize takes it: a path stays a path; a tensor or array feeds a
    single-input module; a list or tuple gives one per input; a dict is keyed by name."""
    if is_path(calib):
        return calib
    if isinstance(calib, dict):
        return {name: _as_numpy(v, f"calib['{name}']") for name, v in calib.items()}
    if isinstance(calib, (list, tuple)):
        if len(calib) != len(input_names):
            raise Error(f"calib: {len(calib)} arrays for {len(input_names)} inputs",
                        StatusCode.MISMATCH)
        return {name: _as_numpy(v, f"calib[{i}]") for i, (name, v) in enumerate(zip(input_names, calib))}
    if len(input_names) != 1:
        raise Error(f"calib: one array for {len(input_names)} inputs; pass a list or a dict",
                    StatusCode.MISMATCH)
    return {input_names[0]: _as_numpy(calib, "calib")}


def export(module, example_inputs, path, input_names=None, output_names=None):
    """Export `module` in eval mode to the ONNX file `path` (opset 13, first axis of each
    input and output dynamic, named "batch"). Returns (input_names, output_names)."""
    inputs = _as_tuple(example_inputs)
    input_names = list(input_names or (["input"] if len(inputs) == 1 else
                                       [f"input{i}" for i in range(len(inputs))]))
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            outputs = module(*inputs)
        n_out = 1 if isinstance(outputs, torch.Tensor) else len(outputs)
        output_names = list(output_names or (["output"] if n_out == 1 else
                                             [f"output{i}" for i in range(n_out)]))
        dynamic = {name: {0: "batch"} for name in input_names + output_names}
        torch.onnx.export(module, inputs, path, opset_version=OPSET, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic,
                          do_constant_folding=True)
    finally:
        module.train(was_training)
    return input_names, output_names


def quantize(module, example_inputs, calib, *, backend="x86", config=None, output=None,
             input_names=None, output_names=None, threads=None, backend_options=None,
             plugin_path=None, plugin_dir=None):
    """Export `module` (called on `example_inputs`, a tensor or a tuple of them), quantize
    it for `backend` on `calib` (a tensor or array with samples along the first axis, one
    per input in a list, {input name: ...}, or a calibration file's path), and return a
    qhost.Session on the QDQ model with the backend's kernels. session.report holds the
    quantize report; session.path the QDQ file: `output` when given, else a file in a
    temporary directory removed with the session."""
    tmp = tempfile.TemporaryDirectory(prefix="qhost-torch-")
    try:
        float_path = os.path.join(tmp.name, "model.onnx")
        names, _ = export(module, example_inputs, float_path, input_names, output_names)
        qdq_path = output if output is not None else os.path.join(tmp.name, "model.qdq.onnx")
        report = _quantize(float_path, _calibration(calib, names), output=qdq_path,
                           backend=backend, config=config, threads=threads,
                           backend_options=backend_options, plugin_path=plugin_path,
                           plugin_dir=plugin_dir)
        session = Session(qdq_path, backend, threads=threads, backend_options=backend_options,
                          plugin_path=plugin_path, plugin_dir=plugin_dir)
    except BaseException:
        tmp.cleanup()
        raise
    session.report = report
    # the session may read its file again when input shapes change: keep it while it lives
    session._keep = tmp
    return session
