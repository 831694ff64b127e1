"""qhost.Session: a model opened on the host's kernels or a backend's, run on NumPy
arrays (qhost_session_new / qhost_session_run)."""

import ctypes
import os
import threading

import numpy as np

from ._arrays import InputTensor, dtype_name, dtype_of_code, tensor_array, values_to_dict
from ._native import Handle, TensorInfo, lib
from ._options import Options
from ._status import Error, StatusCode, check, encode_path


class TensorSpec:
    """A model input or output as declared: name, numpy dtype (None for a dtype this
    package does not know), shape (a tuple with None for a symbolic dimension, or None
    when the model declares no shape)."""

    def __init__(self, info):
        self.name = info.name.decode("utf-8")
        self.dtype_code = info.dtype
        self.dtype = dtype_of_code(info.dtype)
        self.shape = None if info.rank < 0 else tuple(
            None if d < 0 else d for d in info.dims[:info.rank])

    def __repr__(self):
        return f"TensorSpec({self.name!r}, {dtype_name(self.dtype_code)}, {self.shape})"


def model_specs(model):
    """([inputs], [outputs]) TensorSpecs of a loaded QhostModel."""
    specs = []
    for count_fn, info_fn in ((lib.qhost_model_input_count, lib.qhost_model_input_info),
                              (lib.qhost_model_output_count, lib.qhost_model_output_info)):
        n = ctypes.c_size_t()
        check(count_fn(model, ctypes.byref(n)))
        found = []
        for i in range(n.value):
            info = TensorInfo()
            check(info_fn(model, i, ctypes.byref(info)))
            found.append(TensorSpec(info))
        specs.append(found)
    return specs[0], specs[1]


class LoadedModel:
    """A QhostModel for the length of a with-block."""

    def __init__(self, path):
        self.handle = Handle()
        check(lib.qhost_model_load(encode_path(path), ctypes.byref(self.handle)))

    def __enter__(self):
        return self.handle

    def __exit__(self, *exc):
        lib.qhost_model_free(self.handle)


class Session:
    """Session(model, backend=None, threads=1, backend_options=None, plugin_path=None,
    plugin_dir=None) opens the ONNX file `model` to run: on the host's reference kernels
    when backend is None, else with the QDQ units the backend claims on its int8 kernels.

    run({name: array}) -> {output name: array}. A Session may be used from several
    threads; its runs take turns (a lock), and the GIL is released while one runs, so
    Sessions on different threads run at once. close() frees the model and the plugin
    at once; a run after it raises qhost.Error (code CLOSED). It is also a context
    manager that closes on exit.
    """

    report = None  # qhost.torch.quantize's sessions carry their quantize report here

    def __init__(self, model, backend=None, *, threads=None, backend_options=None,
                 plugin_path=None, plugin_dir=None):
        self._handle = None
        self._lock = threading.Lock()
        self.path = os.fspath(model)
        self.backend = backend
        with LoadedModel(model) as loaded:
            self.inputs, self.outputs = model_specs(loaded)
            with Options() as options:
                options.plugins(backend, backend_options, plugin_path, plugin_dir, threads)
                handle = Handle()
                check(lib.qhost_session_new(loaded, options.handle, ctypes.byref(handle)))
                self._handle = handle

    def run(self, inputs):
        """Run on `inputs`: {input name: array} with every model input, or one array for a
        single-input model. An array of the declared dtype that is C-contiguous, aligned
        and in native byte order is read in place; a non-contiguous or unaligned one is
        copied once; another dtype raises qhost.Error (MISMATCH). Data with one more
        leading axis than the model's batch-1 input runs sample by sample and the outputs
        are stacked. Returns {output name: array} in the model's output order."""
        if isinstance(inputs, dict):
            given = inputs
        elif len(self.inputs) == 1:
            given = {self.inputs[0].name: inputs}
        else:
            raise Error(f"{self.path}: the model has {len(self.inputs)} inputs; pass"
                        " {name: array}", StatusCode.INVALID_ARGUMENT)
        declared = {spec.name: spec for spec in self.inputs}
        unknown = [name for name in given if name not in declared]
        if unknown:
            raise Error(f"{self.path}: no input named '{unknown[0]}' (inputs:"
                        f" {', '.join(declared)})", StatusCode.MISMATCH)
        tensors = []
        for spec in self.inputs:
            if spec.name not in given:
                raise Error(f"{self.path}: no array given for input '{spec.name}'",
                            StatusCode.MISMATCH)
            array = given[spec.name]
            what = f"{self.path}: input '{spec.name}'"
            if isinstance(array, np.ndarray) and spec.dtype is not None and array.dtype != spec.dtype:
                raise Error(f"{what} is {array.dtype.str}; the model declares {spec.dtype.name}"
                            f" (qhost converts no dtype: pass .astype(numpy.{spec.dtype.name}))",
                            StatusCode.MISMATCH)
            tensors.append(InputTensor(array, spec.name, what))
        with self._lock:
            if self._handle is None:
                raise Error(f"{self.path}: the session was freed", StatusCode.CLOSED)
            out = Handle()
            check(lib.qhost_session_run(self._handle, tensor_array(tensors), len(tensors),
                                        ctypes.byref(out)))
        return values_to_dict(out, [spec.name for spec in self.outputs])

    def close(self):
        """Free the model and the plugin now; later runs raise qhost.Error (CLOSED).
        Closing twice is harmless."""
        with self._lock:
            if self._handle is not None:
                status = lib.qhost_session_close(self._handle)
                try:
                    check(status)
                except Error as e:
                    if e.code != StatusCode.CLOSED:
                        raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None and lib is not None:
            lib.qhost_session_free(handle)
            self._handle = None

    def __repr__(self):
        where = self.backend or "host"
        return f"qhost.Session({self.path!r}, backend={where!r})"
