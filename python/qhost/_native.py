"""Finding libqhost and declaring the functions of its plain-C API (qhost.h) for ctypes.

The library is looked for in this order, and the first that loads is used:
QHOST_LIBRARY (an explicit path; when set, nothing else is tried), the path CMake's
install wrote into qhost/_libpath.py, and the dynamic loader's own search for the
soname (LD_LIBRARY_PATH, ld.so.cache). When none loads, the ImportError lists every
path tried with the reason each failed.

ctypes.CDLL releases the GIL around every call, so a long quantize or a session run
lets other Python threads go on.
"""

import ctypes
import os

# The major version of qhost.h this package is written against; a library with another
# major is refused, one with a higher minor is fine (the API is append-only).
API_MAJOR = 1
SONAME = "libqhost.so.0"

try:
    from ._libpath import LIBRARY as INSTALLED_LIBRARY
except ImportError:  # a source checkout: only QHOST_LIBRARY and the loader's search
    INSTALLED_LIBRARY = None


def _candidates():
    override = os.environ.get("QHOST_LIBRARY")
    if override:
        return [(override, "QHOST_LIBRARY")]
    found = []
    if INSTALLED_LIBRARY:
        found.append((INSTALLED_LIBRARY, "written at install in qhost/_libpath.py"))
    found.append((SONAME, "the dynamic loader's search: LD_LIBRARY_PATH, ld.so.cache"))
    return found


def _load():
    # libgomp (linked by libqhost for oneDNN) reads its environment once, when it is
    # loaded: a short spin keeps idle OpenMP workers from holding the cores between
    # parallel regions (framework/cli/main.c measures it). A user's setting wins, and
    # a process that loaded libgomp before (PyTorch imported first) keeps its own.
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "1000"
    tried = []
    for path, origin in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as why:
            tried.append(f"  {path} ({origin}): {why}")
    raise ImportError("qhost: libqhost could not be loaded; tried:\n" + "\n".join(tried) +
                      "\nInstall qhost (cmake --install) and this package from"
                      " PREFIX/share/qhost/python, or set QHOST_LIBRARY to libqhost's path.")


lib, LIBRARY_PATH = _load()

# ---- types of qhost.h -------------------------------------------------------------

MAX_RANK = 8
Status = ctypes.c_void_p   # QhostStatus *: NULL on success
Handle = ctypes.c_void_p   # every opaque object


class Tensor(ctypes.Structure):
    """QhostTensor (frozen layout)."""
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p),
                ("nbytes", ctypes.c_size_t)]


class TensorInfo(ctypes.Structure):
    """QhostTensorInfo (frozen layout)."""
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.c_int64 * MAX_RANK)]


P = ctypes.POINTER
c_char_p, c_int, c_size_t, c_int64, c_uint64 = (ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t,
                                                ctypes.c_int64, ctypes.c_uint64)
OutHandle = P(Handle)
OutString = P(ctypes.c_void_p)  # char **: kept as an address so it can be freed

_PROTOTYPES = {
    "qhost_api_version": (c_int, []),
    "qhost_version_string": (c_char_p, []),
    "qhost_status_code": (c_int, [Status]),
    "qhost_status_message": (c_char_p, [Status]),
    "qhost_status_free": (None, [Status]),
    "qhost_string_free": (None, [ctypes.c_void_p]),
    "qhost_set_log_level": (Status, [c_int]),
    "qhost_dtype_size": (c_size_t, [ctypes.c_int32]),
    "qhost_values_count": (c_size_t, [Handle]),
    "qhost_values_get": (Status, [Handle, c_size_t, P(Tensor)]),
    "qhost_values_free": (None, [Handle]),
    "qhost_options_new": (Status, [OutHandle]),
    "qhost_options_free": (None, [Handle]),
    "qhost_options_set_backend": (Status, [Handle, c_char_p]),
    "qhost_options_add_plugin_path": (Status, [Handle, c_char_p]),
    "qhost_options_set_plugin_dir": (Status, [Handle, c_char_p]),
    "qhost_options_add_backend_option": (Status, [Handle, c_char_p]),
    "qhost_options_set_threads": (Status, [Handle, c_int]),
    "qhost_options_set_progress": (Status, [Handle, c_int]),
    "qhost_options_set_calibration_file": (Status, [Handle, c_char_p]),
    "qhost_options_set_calibration_tensors": (Status, [Handle, P(Tensor), c_size_t]),
    "qhost_options_set_qconfig_file": (Status, [Handle, c_char_p]),
    "qhost_options_set_qconfig_json": (Status, [Handle, c_char_p]),
    "qhost_options_set_probe_file": (Status, [Handle, c_char_p]),
    "qhost_options_set_report_file": (Status, [Handle, c_char_p]),
    "qhost_options_set_shard": (Status, [Handle, c_int, c_int]),
    "qhost_options_add_stats_file": (Status, [Handle, c_char_p]),
    "qhost_options_set_bench_runs": (Status, [Handle, c_int, c_int]),
    "qhost_options_set_bench_fp32": (Status, [Handle, c_int]),
    "qhost_options_set_input_file": (Status, [Handle, c_char_p]),
    "qhost_options_set_dynamic": (Status, [Handle, c_int]),
    "qhost_options_set_dynamic_per_channel": (Status, [Handle, c_int]),
    "qhost_model_load": (Status, [c_char_p, OutHandle]),
    "qhost_model_free": (None, [Handle]),
    "qhost_model_input_count": (Status, [Handle, P(c_size_t)]),
    "qhost_model_output_count": (Status, [Handle, P(c_size_t)]),
    "qhost_model_input_info": (Status, [Handle, c_size_t, P(TensorInfo)]),
    "qhost_model_output_info": (Status, [Handle, c_size_t, P(TensorInfo)]),
    "qhost_model_inspect": (Status, [Handle, Handle, c_int, OutString]),
    "qhost_quantize": (Status, [c_char_p, Handle, c_char_p, OutString, OutString]),
    "qhost_calibrate": (Status, [c_char_p, Handle, c_char_p, P(c_int64), P(c_int64)]),
    "qhost_session_new": (Status, [Handle, Handle, OutHandle]),
    "qhost_session_run": (Status, [Handle, P(Tensor), c_size_t, OutHandle]),
    "qhost_session_close": (Status, [Handle]),
    "qhost_session_free": (None, [Handle]),
    "qhost_bench": (Status, [c_char_p, Handle, c_int, OutString]),
    "qhost_deploy": (Status, [c_char_p, Handle, c_char_p, c_int, P(c_uint64), OutString]),
    "qhost_plugins_list": (Status, [Handle, c_int, OutString, OutString]),
    "qhost_plugin_check": (Status, [c_char_p, Handle, c_int, OutString, P(c_int)]),
}

for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise ImportError(f"qhost: {LIBRARY_PATH} has no {_name} (a libqhost older than this"
                          " package?)") from None
    _fn.restype = _restype
    _fn.argtypes = _argtypes

FORMAT_TEXT, FORMAT_JSON = 0, 1

_major = lib.qhost_api_version() // 1000
if _major != API_MAJOR:
    raise ImportError(f"qhost: {LIBRARY_PATH} implements API {lib.qhost_api_version()}; this package"
                      f" needs major version {API_MAJOR}")
