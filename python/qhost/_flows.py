"""The flows over files: quantize, calibrate (and merging shards), inspect, bench,
deploy, the plugin listing and plugin-check. Each is one call of qhost.h with an
options object built from keyword arguments; reports come back parsed from the
library's JSON."""

import ctypes
import json
import os
import warnings

from ._native import FORMAT_JSON, FORMAT_TEXT, lib
from ._options import Options
from ._session import LoadedModel
from ._status import Error, StatusCode, check, encode_path, take_string


def _format(fmt):
    if fmt == "json":
        return FORMAT_JSON
    if fmt == "text":
        return FORMAT_TEXT
    raise Error(f"format: 'json' or 'text', not {fmt!r}", StatusCode.INVALID_ARGUMENT)


def _report(text, fmt):
    return json.loads(text) if fmt == "json" else text


def quantize(model, calib=None, *, output, backend="x86", config=None, stats=None,
             report=None, probe=None, threads=None, backend_options=None, plugin_path=None,
             plugin_dir=None, progress=False):
    """Quantize the float ONNX file `model` for `backend` and write the QDQ model to
    `output`. Returns the report as a dict (what was quantized, what stayed float and
    why, every tensor's qparams and SQNR), as `qhost quantize --report` writes it.

    calib: a path (.npy with samples along the first axis, a directory of .npy files, an
    .npz keyed by input name), an array (single-input models), or {input name: array}.
    config: PyTorch's QConfigMapping as a dict or a JSON file's path. stats: statistics
    files of calibrate() to merge instead of calibrating (calib is then optional).
    report: also write the JSON report to this path. probe: the SQNR probe input file.
    """
    with Options() as options:
        options.plugins(backend, backend_options, plugin_path, plugin_dir, threads)
        options.calibration(calib).qconfig(config).files(probe=probe, report=report, stats=stats)
        options.progress(progress)
        report_json = ctypes.c_void_p()
        check(lib.qhost_quantize(encode_path(model), options.handle, encode_path(output),
                                 ctypes.byref(report_json), None))
        return json.loads(take_string(report_json))


def quantize_dynamic(model, *, output, backend=None, per_channel=False, report=None):
    """Quantize the float ONNX file `model` dynamically, as PyTorch 1.13's quantize_dynamic
    with its default qconfig, and write ONNX Runtime's dynamic format to `output`
    (`qhost quantize --dynamic`): every Gemm/MatMul with a constant weight becomes
    DynamicQuantizeLinear + MatMulInteger + the float rescale and bias. No calibration
    data. backend: None, "x86", "fbgemm" or "qnnpack" (the file computes what the qnnpack
    engine computes: activations uint8 [0,255] per call). per_channel: one weight scale per
    output channel. report: also write the JSON report to this path. Returns the report
    as a dict (every Gemm/MatMul: quantized, or the reason it stayed float)."""
    with Options() as options:
        options.plugins(backend)
        options.files(report=report)
        check(lib.qhost_options_set_dynamic(options.handle, 1))
        check(lib.qhost_options_set_dynamic_per_channel(options.handle, 1 if per_channel else 0))
        report_json = ctypes.c_void_p()
        check(lib.qhost_quantize(encode_path(model), options.handle, encode_path(output),
                                 ctypes.byref(report_json), None))
        return json.loads(take_string(report_json))


def calibrate(model, calib, *, output, backend="x86", shard=None, config=None, threads=None,
              backend_options=None, plugin_path=None, plugin_dir=None, progress=False):
    """Calibrate `model` on `calib` (as for quantize) and save the observers' statistics
    to `output`. shard=(index, count) calibrates only block `index` of `count` contiguous
    blocks of samples. quantize(model, stats=[files], output=...) merges the shards.
    Returns {"samples": samples seen, "points": quantization points saved}."""
    with Options() as options:
        options.plugins(backend, backend_options, plugin_path, plugin_dir, threads)
        options.calibration(calib).qconfig(config).shard(shard).progress(progress)
        samples, points = ctypes.c_int64(), ctypes.c_int64()
        check(lib.qhost_calibrate(encode_path(model), options.handle, encode_path(output),
                                  ctypes.byref(samples), ctypes.byref(points)))
        return {"samples": samples.value, "points": points.value}


def inspect(model, *, backend=None, format="json", backend_options=None, plugin_path=None,
            plugin_dir=None):
    """What `qhost inspect` tells of `model`: a dict (format="json": inputs, outputs,
    nodes with shapes, parameters, MACs, opsets, qparams; with a backend, the units it
    claims) or the text `qhost inspect` prints (format="text")."""
    fmt = _format(format)
    with LoadedModel(model) as loaded, Options() as options:
        options.plugins(backend, backend_options, plugin_path, plugin_dir)
        text = ctypes.c_void_p()
        check(lib.qhost_model_inspect(loaded, options.handle, fmt, ctypes.byref(text)))
        return _report(take_string(text), format)


def bench(model, *, backend=None, input=None, threads=None, warmup=3, runs=20, fp32=True,
          format="json", backend_options=None, plugin_path=None, plugin_dir=None,
          progress=False):
    """Time `model` as `qhost bench` does: `runs` timed runs after `warmup` untimed ones,
    on `input` (a .npy/.npz file; default: seeded random data at the declared shapes),
    with the fp32 twin of a QDQ model timed in the same run when fp32. Returns the JSON
    report as a dict (median/min/max ms, the fp32 twin, with a backend its coverage), or
    the text with format="text"."""
    fmt = _format(format)
    with Options() as options:
        options.plugins(backend, backend_options, plugin_path, plugin_dir, threads)
        options.bench(warmup, runs, fp32).files(input=input).progress(progress)
        text = ctypes.c_void_p()
        check(lib.qhost_bench(encode_path(model), options.handle, fmt, ctypes.byref(text)))
        return _report(take_string(text), format)


def deploy(model, directory, *, backend, force=False, backend_options=None, plugin_path=None,
           plugin_dir=None):
    """Write `backend`'s deploy package for the QDQ model `model` into `directory`, whole
    or not at all (an existing directory is refused unless force, which replaces it once
    the new package is complete). Returns {"backend", "bytes", "directory"}."""
    with Options() as options:
        options.plugins(backend, backend_options, plugin_path, plugin_dir)
        written, name = ctypes.c_uint64(), ctypes.c_void_p()
        check(lib.qhost_deploy(encode_path(model), options.handle, encode_path(directory),
                               1 if force else 0, ctypes.byref(written), ctypes.byref(name)))
        return {"backend": take_string(name), "bytes": written.value,
                "directory": os.fspath(directory)}


def plugins(*, plugin_path=None, plugin_dir=None):
    """Every plugin the search finds, as a list of dicts (`qhost plugins --json`'s
    "plugins"). Broken plugin files and shadowed duplicates are reported as Python
    warnings (qhost.PluginWarning), one per problem."""
    with Options() as options:
        options.plugins(plugin_path=plugin_path, plugin_dir=plugin_dir)
        text, problems = ctypes.c_void_p(), ctypes.c_void_p()
        check(lib.qhost_plugins_list(options.handle, FORMAT_JSON, ctypes.byref(text),
                                     ctypes.byref(problems)))
        listing = json.loads(take_string(text))
        for line in (take_string(problems) or "").splitlines():
            if line.strip():
                warnings.warn(line, PluginWarning, stacklevel=2)
        return listing["plugins"]


def plugin_check(name, *, backend_options=None, plugin_path=None, plugin_dir=None,
                 format="json"):
    """Load plugin `name` (a name or a path), validate it, run each callback group on
    built-in inputs and report: a dict (format="json") or text. The dict's "conforms"
    is True when no check failed. Raises qhost.Error only when the plugin is not found."""
    fmt = _format(format)
    with Options() as options:
        options.plugins(backend_options=backend_options, plugin_path=plugin_path,
                        plugin_dir=plugin_dir)
        text, conforms = ctypes.c_void_p(), ctypes.c_int()
        check(lib.qhost_plugin_check(encode_path(name), options.handle, fmt, ctypes.byref(text),
                                     ctypes.byref(conforms)))
        report = _report(take_string(text), format)
        if isinstance(report, dict):
            report["conforms"] = bool(conforms.value)
        return report


class PluginWarning(UserWarning):
    """A problem found while listing plugins: a broken file, a shadowed duplicate."""
