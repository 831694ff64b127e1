"""The settings of one call as a QhostOptions: every public function takes keyword
arguments and turns them into an options object here, freed when the call ends."""

import ctypes
import json
import os

import numpy as np

from ._arrays import InputTensor, tensor_array
from ._native import Handle, lib
from ._status import Error, StatusCode, check, encode_path


def is_path(value):
    return isinstance(value, (str, bytes, os.PathLike))


class Options:
    """A QhostOptions under construction; use as a context manager."""

    def __init__(self):
        self.handle = Handle()
        check(lib.qhost_options_new(ctypes.byref(self.handle)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        lib.qhost_options_free(self.handle)
        self.handle = None

    # ---- where plugins are and which one ----

    def plugins(self, backend=None, backend_options=None, plugin_path=None, plugin_dir=None,
                threads=None):
        if backend is not None:
            check(lib.qhost_options_set_backend(self.handle, encode_path(backend)))
        for key_value in _backend_options(backend_options):
            check(lib.qhost_options_add_backend_option(self.handle, key_value.encode()))
        for path in _paths(plugin_path):
            check(lib.qhost_options_add_plugin_path(self.handle, encode_path(path)))
        if plugin_dir is not None:
            check(lib.qhost_options_set_plugin_dir(self.handle, encode_path(plugin_dir)))
        if threads is not None:
            check(lib.qhost_options_set_threads(self.handle, _int(threads, "threads")))
        return self

    # ---- quantization ----

    def calibration(self, calib):
        """calib: a path (.npy, directory of .npy, .npz), an array (samples along the first
        axis) for a single-input model, or {input name: array}."""
        if calib is None:
            return self
        if is_path(calib):
            check(lib.qhost_options_set_calibration_file(self.handle, encode_path(calib)))
            return self
        if isinstance(calib, dict):
            items = [InputTensor(a, str(n), f"calib['{n}']") for n, a in calib.items()]
        else:
            items = [InputTensor(np.asarray(calib) if not isinstance(calib, np.ndarray) else calib,
                                 None, "calib")]
        # the library copies the arrays during this call
        check(lib.qhost_options_set_calibration_tensors(self.handle, tensor_array(items),
                                                        len(items)))
        return self

    def qconfig(self, config):
        """config: a path to a QConfigMapping JSON file, or the mapping as a dict."""
        if config is None:
            return self
        if is_path(config):
            check(lib.qhost_options_set_qconfig_file(self.handle, encode_path(config)))
        elif isinstance(config, dict):
            check(lib.qhost_options_set_qconfig_json(self.handle, json.dumps(config).encode()))
        else:
            raise Error(f"config: a path or a dict, not {type(config).__name__}",
                        StatusCode.INVALID_ARGUMENT)
        return self

    def files(self, probe=None, report=None, stats=None, input=None):
        if probe is not None:
            check(lib.qhost_options_set_probe_file(self.handle, encode_path(probe)))
        if report is not None:
            check(lib.qhost_options_set_report_file(self.handle, encode_path(report)))
        for path in _paths(stats):
            check(lib.qhost_options_add_stats_file(self.handle, encode_path(path)))
        if input is not None:
            check(lib.qhost_options_set_input_file(self.handle, encode_path(input)))
        return self

    def shard(self, shard):
        if shard is not None:
            try:
                index, count = shard
            except (TypeError, ValueError):
                raise Error(f"shard: an (index, count) pair, not {shard!r}",
                            StatusCode.INVALID_ARGUMENT) from None
            check(lib.qhost_options_set_shard(self.handle, _int(index, "shard index"),
                                              _int(count, "shard count")))
        return self

    def progress(self, on):
        check(lib.qhost_options_set_progress(self.handle, 1 if on else 0))
        return self

    def bench(self, warmup, runs, fp32):
        check(lib.qhost_options_set_bench_runs(self.handle, _int(warmup, "warmup"),
                                               _int(runs, "runs")))
        check(lib.qhost_options_set_bench_fp32(self.handle, 1 if fp32 else 0))
        return self


def _int(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise Error(f"{what}: an int, not {value!r}", StatusCode.INVALID_ARGUMENT)
    if not -2**31 <= value < 2**31:
        raise Error(f"{what}: {value} is out of range", StatusCode.INVALID_ARGUMENT)
    return int(value)


def _paths(value):
    if value is None:
        return []
    return [value] if is_path(value) else list(value)


def _backend_options(value):
    """backend_options: {key: value} or ["KEY=VALUE", ...], as "KEY=VALUE" strings (the
    plugin validates them against the keys it declares)."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [f"{k}={v}" for k, v in value.items()]
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value]
