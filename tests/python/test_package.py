#!/usr/bin/env python3
"""The Python package (python/qhost) on the build tree's libqhost (QHOST_LIBRARY, set by
CMake): the digits example end to end against the runner (quantize from a calibration
file and from arrays gives the runner's QDQ file byte for byte and its report; a
Session's outputs equal `qhost run`'s; sharded calibration, inspect, bench, deploy and
the plugin listing agree with the runner), zero copies in for a C-contiguous array and
one copy for a strided one, every error raising qhost.Error with the library's line
and code and leaving no output file, two sessions on two threads, and
qhost.torch.quantize on a small module. In sanitizer builds the script re-runs itself
with the ASan runtime preloaded, since python3 itself is not instrumented."""

import json
import os
import subprocess
import sys
import threading

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import qhtest  # noqa: E402

MODEL = os.path.join(ROOT, "examples", "digits_cnn.onnx")
CALIB = os.path.join(ROOT, "examples", "digits_calib.npy")
TEST = os.path.join(ROOT, "examples", "digits_test.npy")
LABELS = os.path.join(ROOT, "examples", "digits_labels.npy")


def preload_asan():
    """Sanitized libqhost inside an uninstrumented python3: the ASan runtime must be the
    first library loaded, so re-exec with it preloaded (leak checks off: Python's own
    allocations at exit are not qhost's; the runner subprocesses keep theirs)."""
    runtime = os.environ.get("QH_ASAN_RUNTIME")
    if "--asan" not in sys.argv or not runtime or os.environ.get("LD_PRELOAD") == runtime:
        return
    env = dict(os.environ, LD_PRELOAD=runtime,
               ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def import_qhost():
    """The package from the source tree; the library from QHOST_LIBRARY."""
    if not os.environ.get("QHOST_LIBRARY"):
        raise AssertionError("QHOST_LIBRARY is not set (ctest sets it to the built libqhost)")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import qhost
    return qhost


def clean_env():
    """The environment for child programs other than the sanitized runner."""
    env = dict(os.environ)
    for key in ("LD_PRELOAD", "ASAN_OPTIONS"):
        env.pop(key, None)
    return env


def ok(runner, *args):
    rc, out, err = runner.run(*args, timeout=300)
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))} failed ({rc}):\n{err}"
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read()


def tree(top):
    """{relative path: bytes} of every file under top."""
    found = {}
    for where, _, names in os.walk(top):
        for name in names:
            path = os.path.join(where, name)
            found[os.path.relpath(path, top)] = read(path)
    return found


def raises(fn, code, *needles):
    """fn() raises qhost.Error with `code` and a one-line message holding every needle."""
    qhost = import_qhost()
    try:
        fn()
    except qhost.Error as e:
        assert e.code == code, f"code {e.code!r}, want {code!r}: {e}"
        msg = str(e)
        assert msg and "\n" not in msg, f"want one line, got {msg!r}"
        for needle in needles:
            assert needle in msg, f"want {needle!r} in {msg!r}"
        return msg
    raise AssertionError(f"no qhost.Error (want {code!r})")


def cli_quantize(runner, tmp, *extra, backend="x86", name="cli.qdq.onnx"):
    out, report = os.path.join(tmp, name), os.path.join(tmp, name + ".json")
    ok(runner, "quantize", "--backend", backend, "--calib", CALIB, "-o", out, MODEL,
       "--report", report, *extra)
    with open(report) as f:
        return out, json.load(f)


# ---- the digits example end to end ------------------------------------------------

def case_quantize_calib_path(runner, tmp):
    qhost = import_qhost()
    out = os.path.join(tmp, "py.qdq.onnx")
    report_path = os.path.join(tmp, "py.json")
    report = qhost.quantize(MODEL, calib=CALIB, backend="x86", output=out, report=report_path)
    with open(report_path) as f:
        assert json.load(f) == report, "report= wrote another report than the one returned"
    cli_out, cli_report = cli_quantize(runner, tmp)
    assert read(out) == read(cli_out), "the package's QDQ file differs from the runner's"
    assert report == cli_report, "the package's report differs from the runner's --report"
    assert report["schema_version"] == 1 and report["backend"] == "x86"
    assert report["calibration_samples"] == 256, report["calibration_samples"]
    quantized = [n for n in report["nodes"] if n.get("quantized")]
    assert quantized, "no node quantized"
    assert all("sqnr_db" in t or "sqnr" in json.dumps(t) for t in report["tensors"]), \
        "a tensor without SQNR"
    print(f"report: {len(report['nodes'])} nodes, {len(quantized)} quantized,"
          f" {len(report['tensors'])} tensors; QDQ file and report identical to the runner's")


def case_quantize_calib_array(runner, tmp):
    qhost = import_qhost()
    cli_out, cli_report = cli_quantize(runner, tmp)
    calib = np.load(CALIB)
    for tag, given in (("array", calib), ("dict", {"input": calib})):
        out = os.path.join(tmp, f"{tag}.qdq.onnx")
        report = qhost.quantize(MODEL, calib=given, backend="x86", output=out)
        assert read(out) == read(cli_out), f"calib as {tag}: QDQ file differs from the runner's"
        assert report["calibration_samples"] == 256
        assert report["tensors"] == cli_report["tensors"], f"calib as {tag}: tensors differ"
    # a qconfig as a dict and as a file give the same file
    minmax = {"global": {"activation": {"observer": "MinMaxObserver", "dtype": "quint8",
                                        "quant_min": 0, "quant_max": 127}}}
    config_path = os.path.join(tmp, "minmax.json")
    with open(config_path, "w") as f:
        json.dump(minmax, f)
    a, b = os.path.join(tmp, "cfg_dict.onnx"), os.path.join(tmp, "cfg_file.onnx")
    qhost.quantize(MODEL, calib=calib, backend="x86", config=minmax, output=a)
    qhost.quantize(MODEL, calib=CALIB, backend="x86", config=config_path, output=b)
    assert read(a) == read(b), "config as dict and as file differ"
    assert read(a) != read(cli_out), "the MinMax config changed nothing"


def case_quantize_dynamic(runner, tmp):
    qhost = import_qhost()
    for per_channel in (False, True):
        out = os.path.join(tmp, f"py_dyn{int(per_channel)}.onnx")
        report = qhost.quantize_dynamic(MODEL, output=out, backend="qnnpack", per_channel=per_channel)
        cli_out = os.path.join(tmp, f"cli_dyn{int(per_channel)}.onnx")
        ok(runner, "quantize", "--dynamic", "--backend", "qnnpack", MODEL, "-o", cli_out,
           *(["--dynamic-per-channel"] if per_channel else []))
        assert read(out) == read(cli_out), "the package's dynamic file differs from the runner's"
        assert report["mode"] == "dynamic" and report["activation_range"] == [0, 255], report
        dyn = [n for n in report["nodes"] if n["quantized"]]
        assert dyn and all(len(n["weight_scale"]) >= (2 if per_channel else 1) for n in dyn), report
    out = os.path.join(tmp, "dyn_bad.onnx")
    raises(lambda: qhost.quantize_dynamic(MODEL, output=out, backend="example_vitis"),
           qhost.StatusCode.UNSUPPORTED, "example_vitis")
    assert not os.path.exists(out)
    print("quantize_dynamic: files identical to the runner's --dynamic, per tensor and per channel")


def case_session_vs_run(runner, tmp):
    qhost = import_qhost()
    qdq, _ = cli_quantize(runner, tmp)
    x = np.load(TEST)
    for backend, model in ((None, MODEL), ("x86", qdq)):
        cli_y = os.path.join(tmp, f"cli_{backend}.npy")
        args = ["run", model, "--input", TEST, "-o", cli_y]
        ok(runner, *args + (["--backend", backend] if backend else []))
        with qhost.Session(model, backend=backend) as session:
            y = session.run({"input": x})
            assert list(y) == ["logits"], list(y)
            want = np.load(cli_y)
            got = y["logits"]
            assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
            assert np.array_equal(got, want), \
                f"backend {backend}: Session differs from qhost run by {np.abs(got - want).max()}"
            # again on the same session; then a bare array (single-input model) of other
            # rows, which plans the model again (float GEMMs round by batch size, so it
            # is compared with the runner on the same 5 rows)
            assert np.array_equal(session.run({"input": x})["logits"], want), "a second run differs"
            five = os.path.join(tmp, "five.npy")
            np.save(five, x[:5])
            ok(runner, *["run", model, "--input", five, "-o", cli_y] +
               (["--backend", backend] if backend else []))
            assert np.array_equal(session.run(x[:5])["logits"], np.load(cli_y)), "5 rows differ"
        acc = (got.argmax(1) == np.load(LABELS)).mean()
        print(f"backend {backend or 'host'}: outputs identical to qhost run, accuracy {acc:.2%}")
    assert session.inputs[0].name == "input" and session.inputs[0].shape == (None, 1, 8, 8)
    assert session.outputs[0].dtype == np.float32


def case_zero_copy_and_strided(runner, tmp):
    qhost = import_qhost()
    from qhost import _arrays
    x = np.load(TEST)
    fresh = _arrays.InputTensor(x, "input", "x")
    assert fresh.array is x and fresh.tensor.data == x.ctypes.data, "a C-contiguous array was copied"
    wide = np.zeros(x.shape[:3] + (16,), np.float32)
    wide[..., ::2] = x
    strided = wide[..., ::2]
    assert not strided.flags.c_contiguous
    copied = _arrays.InputTensor(strided, "input", "x")
    assert copied.array is not strided and copied.array.flags.c_contiguous
    assert copied.tensor.data != strided.ctypes.data
    fortran = np.asfortranarray(x)
    raw = np.zeros(x.nbytes + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(x.shape)
    unaligned[...] = x
    assert not unaligned.flags.aligned and unaligned.flags.c_contiguous
    moved = _arrays.InputTensor(unaligned, "input", "x")
    assert moved.array is not unaligned and moved.array.flags.aligned, "an unaligned array was not copied"
    with qhost.Session(MODEL) as session:
        want = session.run({"input": x})["logits"]
        for tag, given in (("strided", strided), ("fortran", fortran), ("unaligned", unaligned)):
            got = session.run({"input": given})["logits"]
            assert np.array_equal(got, want), f"{tag} input gives other outputs"
        # outputs are views of the library's buffer, kept alive by the array
        out = session.run({"input": x})
        logits = out.pop("logits")
        del out
        assert logits.base is not None and np.array_equal(logits, want)
    assert strided.base is wide and np.array_equal(wide[..., ::2], x), "the caller's array changed"


# ---- errors -----------------------------------------------------------------------

def case_error_missing_file(runner, tmp):
    qhost = import_qhost()
    missing = os.path.join(tmp, "nope.onnx")
    out = os.path.join(tmp, "out.onnx")
    raises(lambda: qhost.quantize(missing, calib=CALIB, output=out), qhost.StatusCode.IO, "nope.onnx")
    raises(lambda: qhost.quantize(MODEL, calib=os.path.join(tmp, "no_calib.npy"), output=out),
           qhost.StatusCode.IO, "no_calib.npy")
    raises(lambda: qhost.Session(missing), qhost.StatusCode.IO, "nope.onnx")
    raises(lambda: qhost.inspect(missing), qhost.StatusCode.IO, "nope.onnx")
    assert not os.path.exists(out), "a failed quantize left its output"
    assert sorted(os.listdir(tmp)) == [], f"files left behind: {os.listdir(tmp)}"


def case_error_bad_config(runner, tmp):
    qhost = import_qhost()
    out = os.path.join(tmp, "out.onnx")
    msg = raises(lambda: qhost.quantize(MODEL, calib=CALIB, output=out,
                                        config={"global": {"activation": {"observer": "NoSuchObserver"}}}),
                 qhost.StatusCode.INVALID, "NoSuchObserver")
    print("bad observer:", msg)
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write("{not json")
    raises(lambda: qhost.quantize(MODEL, calib=CALIB, output=out, config=bad),
           qhost.StatusCode.PARSE, "bad.json")
    raises(lambda: qhost.quantize(MODEL, calib=CALIB, output=out, config=42),
           qhost.StatusCode.INVALID_ARGUMENT, "config")
    raises(lambda: qhost.quantize(MODEL, calib=np.load(CALIB).astype(np.float64), output=out),
           qhost.StatusCode.MISMATCH, "calib", "<f8")
    raises(lambda: qhost.calibrate(MODEL, CALIB, output=out, shard=(3, 2)),
           qhost.StatusCode.INVALID_ARGUMENT)
    assert not os.path.exists(out), "a failed quantize left its output"


def case_error_dtype(runner, tmp):
    qhost = import_qhost()
    x = np.load(TEST)
    with qhost.Session(MODEL) as session:
        raises(lambda: session.run({"input": x.astype(np.float64)}), qhost.StatusCode.MISMATCH,
               "'input'", "float32")
        raises(lambda: session.run({"input": x.astype(np.int64)}), qhost.StatusCode.MISMATCH,
               "'input'", "float32")
        raises(lambda: session.run({"input": x.astype(">f4")}), qhost.StatusCode.MISMATCH, "'input'")
        raises(lambda: session.run({"input": x.tolist()}), qhost.StatusCode.INVALID_ARGUMENT,
               "numpy.ndarray")
        raises(lambda: session.run({"image": x}), qhost.StatusCode.MISMATCH, "'image'")
        raises(lambda: session.run({}), qhost.StatusCode.MISMATCH, "'input'")
        raises(lambda: session.run({"input": x[:, :, :4]}), qhost.StatusCode.MISMATCH, "input")
        # the C API's own dtype check, past the package's
        from qhost import _arrays, _native
        t = _arrays.InputTensor(x.astype(np.int32), "input", "x")
        out = _native.Handle()
        raises(lambda: qhost._status.check(_native.lib.qhost_session_run(
            session._handle, _arrays.tensor_array([t]), 1, __import__("ctypes").byref(out))),
            qhost.StatusCode.MISMATCH, "int32", "float32")


def case_error_backend(runner, tmp):
    qhost = import_qhost()
    out = os.path.join(tmp, "out.onnx")
    msg = raises(lambda: qhost.quantize(MODEL, calib=CALIB, backend="no_such_backend", output=out),
                 qhost.StatusCode.INVALID, "no_such_backend")
    print("unknown backend:", msg)
    raises(lambda: qhost.Session(MODEL, backend="no_such_backend"), qhost.StatusCode.INVALID,
           "no_such_backend")
    raises(lambda: qhost.quantize(MODEL, calib=CALIB, output=out, backend_options={"nonsense": 1}),
           qhost.StatusCode.INVALID, "nonsense")
    assert not os.path.exists(out)


def case_error_closed(runner, tmp):
    qhost = import_qhost()
    x = np.load(TEST)[:3]
    session = qhost.Session(MODEL)
    session.run({"input": x})
    session.close()
    raises(lambda: session.run({"input": x}), qhost.StatusCode.CLOSED)
    session.close()  # twice is harmless
    with qhost.Session(MODEL) as s2:
        pass
    raises(lambda: s2.run(x), qhost.StatusCode.CLOSED)


def case_import_error(runner, tmp):
    """A libqhost that cannot be loaded: the ImportError names every path tried."""
    def try_import(**env):
        full = dict(clean_env(), PYTHONPATH=os.path.join(ROOT, "python"), **env)
        full = {k: v for k, v in full.items() if v is not None}
        proc = subprocess.run([sys.executable, "-c", "import qhost"], env=full, cwd=tmp,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=60)
        return proc.returncode, proc.stderr

    missing = os.path.join(tmp, "nowhere", "libqhost.so.0")
    rc, err = try_import(QHOST_LIBRARY=missing)
    assert rc != 0 and "ImportError" in err and missing in err and "QHOST_LIBRARY" in err, err
    # without the override: the source tree has no _libpath.py, so only the loader's search
    rc, err = try_import(QHOST_LIBRARY=None, LD_LIBRARY_PATH=os.path.join(tmp, "empty"))
    if rc == 0:
        print("libqhost.so.0 is on the loader's path here: the loader case is not checked")
    else:
        assert "libqhost.so.0" in err and "dynamic loader" in err, err
    print(err.strip().splitlines()[-4:])


# ---- the other flows --------------------------------------------------------------

def case_calibrate_shards(runner, tmp):
    qhost = import_qhost()
    stats = []
    for i in range(2):
        path = os.path.join(tmp, f"shard{i}.stats")
        got = qhost.calibrate(MODEL, CALIB, backend="x86", shard=(i, 2), output=path)
        assert got["samples"] == 128 and got["points"] > 0, got
        stats.append(path)
    merged = os.path.join(tmp, "merged.onnx")
    report = qhost.quantize(MODEL, stats=stats, backend="x86", output=merged)
    cli_stats = []
    for i in range(2):
        path = os.path.join(tmp, f"cli{i}.stats")
        ok(runner, "calibrate", "--backend", "x86", "--calib", CALIB, "--shard", f"{i}/2",
           "-o", path, MODEL)
        assert read(path) == read(stats[i]), f"shard {i}: statistics differ from the runner's"
        cli_stats += ["--stats", path]
    cli_merged = os.path.join(tmp, "cli_merged.onnx")
    ok(runner, "quantize", "--backend", "x86", *cli_stats, "-o", cli_merged, MODEL)
    assert read(merged) == read(cli_merged), "merged QDQ file differs from the runner's"
    assert report["backend"] == "x86"


def case_inspect_bench_plugins(runner, tmp):
    qhost = import_qhost()
    info = qhost.inspect(MODEL)
    assert info == json.loads(ok(runner, "inspect", MODEL, "--json")), "inspect differs"
    assert qhost.inspect(MODEL, format="text") == ok(runner, "inspect", MODEL)
    names = [p["name"] for p in qhost.plugins()]
    for want in ("x86", "fbgemm", "qnnpack"):
        assert want in names, names
    assert names == [p["name"] for p in json.loads(ok(runner, "plugins", "--json"))["plugins"]]
    broken = os.path.join(tmp, "plugins")
    os.mkdir(broken)
    with open(os.path.join(broken, "libqhost-broken.so"), "w") as f:
        f.write("not a shared object")
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [p["name"] for p in qhost.plugins(plugin_dir=broken)] == names
    problems = [str(w.message) for w in caught if issubclass(w.category, qhost.PluginWarning)]
    assert len(problems) == 1 and "libqhost-broken.so" in problems[0], problems
    check = qhost.plugin_check("x86")
    assert check["conforms"] is True, check
    raises(lambda: qhost.plugin_check("no_such_plugin"), qhost.StatusCode.INVALID,
           "no_such_plugin")
    qdq, _ = cli_quantize(runner, tmp)
    timing = qhost.bench(qdq, backend="x86", warmup=1, runs=3)
    assert timing["schema_version"] == 1, timing
    print("bench keys:", sorted(timing))
    raises(lambda: qhost.bench(qdq, runs=0), qhost.StatusCode.INVALID_ARGUMENT, "runs")


def case_deploy(runner, tmp):
    qhost = import_qhost()
    qdq = os.path.join(tmp, "vitis.qdq.onnx")
    qhost.quantize(MODEL, calib=CALIB, backend="example_vitis", output=qdq)
    out = os.path.join(tmp, "pkg")
    got = qhost.deploy(qdq, out, backend="example_vitis")
    assert got["backend"] == "example_vitis" and got["bytes"] > 0, got
    cli_out = os.path.join(tmp, "cli_pkg")
    ok(runner, "deploy", "--backend", "example_vitis", qdq, "-o", cli_out)
    files = tree(out)
    assert files and files == tree(cli_out), "the package's deploy package differs from the runner's"
    raises(lambda: qhost.deploy(qdq, out, backend="example_vitis"), qhost.StatusCode.IO, "pkg")
    qhost.deploy(qdq, out, backend="example_vitis", force=True)


def case_two_threads(runner, tmp):
    qhost = import_qhost()
    qdq, _ = cli_quantize(runner, tmp)
    x = np.load(TEST)
    sessions = [qhost.Session(qdq, backend="x86"), qhost.Session(MODEL)]
    want = [s.run({"input": x})["logits"] for s in sessions]
    results, errors = [None, None], []

    def work(i):
        try:
            for _ in range(5):
                results[i] = sessions[i].run({"input": x})["logits"]
                assert np.array_equal(results[i], want[i])
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # one session (the x86 one) shared by two threads: the runs take turns
    threads = [threading.Thread(target=work, args=(0,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ---- qhost.torch ------------------------------------------------------------------

def case_torch_quantize(runner, tmp):
    qhost = import_qhost()
    import torch

    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))
    calib = torch.rand(32, 3, 12, 12)
    out = os.path.join(tmp, "small.qdq.onnx")
    session = qhost.torch.quantize(module, torch.rand(1, 3, 12, 12), calib, backend="x86",
                                   output=out)
    assert os.path.exists(out) and session.path == out
    assert session.report["calibration_samples"] == 32, session.report["calibration_samples"]
    assert any(n.get("quantized") for n in session.report["nodes"]), "nothing quantized"
    x = torch.rand(16, 3, 12, 12)
    y = session.run({"input": x.numpy()})["output"]
    with torch.no_grad():
        ref = module(x).numpy()
    assert y.shape == ref.shape, (y.shape, ref.shape)
    sqnr = 10 * np.log10((ref ** 2).sum() / ((y - ref) ** 2).sum())
    print(f"int8 vs float module: SQNR {sqnr:.1f} dB")
    assert sqnr > 20, f"SQNR {sqnr:.1f} dB against the float module"
    # without output, the QDQ file lives in a temporary directory for the session's life
    s2 = qhost.torch.quantize(module, torch.rand(1, 3, 12, 12), calib.numpy(), backend="x86")
    assert np.array_equal(s2.run(x.numpy())["output"], y), "same module, other outputs"
    kept = s2._keep.name
    assert os.path.isdir(kept)
    del s2
    import gc
    gc.collect()
    assert not os.path.exists(kept), "the temporary QDQ file outlived its session"
    raises(lambda: qhost.torch.quantize(module, torch.rand(1, 3, 12, 12), [calib, calib]),
           qhost.StatusCode.MISMATCH, "calib")
    # python/README.md's PyTorch example, as written
    with open(os.path.join(ROOT, "python", "README.md")) as f:
        text = f.read().split("From PyTorch", 1)[1]
    import re
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    scope = {}
    exec(example, scope)
    assert scope["y"].shape == (4, 10) and scope["y"].dtype == np.float32, scope["y"].shape


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    preload_asan()
    sys.exit(qhtest.main(CASES, __doc__.splitlines()[0]))
