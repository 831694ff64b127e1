"""qhost from Python: quantize ONNX models with qhost's backend plugins and run them on
NumPy arrays, through libqhost's plain-C API (qhost.h) over ctypes.

    import qhost
    report = qhost.quantize("model.onnx", calib="calib.npy", backend="x86", output="model.qdq.onnx")
    outputs = qhost.Session("model.qdq.onnx", backend="x86").run({"input": x})

Every failure raises qhost.Error with the library's one-line message and a StatusCode.
qhost.torch.quantize does the same for a torch.nn.Module (imported on use: torch is not
needed otherwise). python/README.md in qhost's sources documents it all.
"""

from ._native import LIBRARY_PATH, lib as _lib
from ._status import Error, StatusCode, check as _check
from ._session import Session, TensorSpec
from ._flows import (PluginWarning, bench, calibrate, deploy, inspect, plugin_check, plugins,
                     quantize, quantize_dynamic)

__all__ = ["Error", "StatusCode", "Session", "TensorSpec", "PluginWarning", "quantize",
           "quantize_dynamic",
           "calibrate", "inspect", "bench", "deploy", "plugins", "plugin_check",
           "set_log_level", "api_version", "library_version", "LIBRARY_PATH"]

__version__ = "0.1.0"

_LOG_LEVELS = {"error": 0, "warning": 1, "info": 2, "debug": 3}


def set_log_level(level):
    """Which of the library's messages reach stderr: "error", "warning" (the default),
    "info" or "debug". Process-wide."""
    if level not in _LOG_LEVELS:
        raise Error(f"log level: one of {', '.join(_LOG_LEVELS)}, not {level!r}",
                    StatusCode.INVALID_ARGUMENT)
    _check(_lib.qhost_set_log_level(_LOG_LEVELS[level]))


def api_version():
    """The C API version the loaded libqhost implements (MAJOR * 1000 + MINOR)."""
    return _lib.qhost_api_version()


def library_version():
    """The release of the loaded libqhost, e.g. "0.1.0"."""
    return _lib.qhost_version_string().decode()


def __getattr__(name):
    # qhost.torch is imported on first use, so `import qhost` never needs PyTorch
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'qhost' has no attribute {name!r}")
