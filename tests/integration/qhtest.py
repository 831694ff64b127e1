"""Shared plumbing for the CLI integration tests: command-line parsing of the test
scripts, running qhost under a memory bound, and small ONNX/.npy builders.

Each test script is a table of named cases. CMake asks a script for its case names
(--list) and registers one ctest entry per case (--case NAME), so a failure names its
case; run without --case, a script runs every case and reports each.
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import traceback

MEMORY_LIMIT = 1 << 30  # bytes of address space qhost may use in the plain build
ASAN_OPTIONS = ("max_allocation_size_mb=1024:allocator_may_return_null=1:detect_leaks=1"
                ":abort_on_error=0")

ASAN_REFUSAL = re.compile(r"^==\d+==WARNING: AddressSanitizer failed to allocate 0x[0-9a-f]+ bytes$")


def qhost_sees_vnni():
    """Whether qhost's plugins see VNNI here: the CPU flag (AVX-512 VNNI or AVX-VNNI), not
    hidden by QHOST_CPU_DISABLE. Without it the x86 plugin's reduce_range=auto declines
    conv/linear units whose full-range uint8 activations could saturate oneDNN's int16
    pair sums, so tests accept that decline where they would otherwise require the unit."""
    hidden = os.environ.get("QHOST_CPU_DISABLE", "")
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read().split()
    except OSError:
        return False
    return any(f in flags and f.replace("_", "") not in hidden for f in ("avx512_vnni", "avx_vnni"))


class Runner:
    """Runs qhost with a bounded address space and the options of this build."""

    def __init__(self, qhost, asan):
        self.qhost = qhost
        self.asan = asan

    def _limit(self):
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    def run(self, *args, timeout=60):
        env = dict(os.environ)
        if self.asan:
            env["ASAN_OPTIONS"] = ASAN_OPTIONS
            env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
            preexec = None
        else:
            preexec = self._limit
        proc = subprocess.run([self.qhost] + [str(a) for a in args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              preexec_fn=preexec, timeout=timeout)
        err = proc.stderr.decode("utf-8", "replace")
        if self.asan:
            # with allocator_may_return_null, ASan notes each refused allocation
            # before returning NULL; the refusal is the bound working, not a bug
            err = "".join(ln for ln in err.splitlines(keepends=True)
                          if not ASAN_REFUSAL.match(ln))
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), err


def check_no_crash(rc, err):
    assert rc >= 0, f"qhost died from signal {-rc}; stderr:\n{err}"
    for marker in ("AddressSanitizer", "runtime error", "LeakSanitizer", "Segmentation",
                   "GLib-CRITICAL", "GLib-ERROR", "assertion"):
        assert marker not in err, f"stderr contains {marker!r}:\n{err}"


class Skip(Exception):
    """Raised by a case that cannot run on this machine (an ISA it lacks, a plugin not
    built): the case prints SKIP with the reason and, when every case run skipped, the
    script exits 77 (ctest's SKIP_RETURN_CODE) instead of passing."""


def main(cases, description):
    """Entry point shared by the scripts: cases maps a name to f(runner, tmpdir)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--qhost", help="path of the qhost binary")
    ap.add_argument("--asan", action="store_true",
                    help="the binary is sanitized: bound memory with ASAN_OPTIONS, not rlimit")
    ap.add_argument("--case", action="append", help="run only this case (repeatable)")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    opts = ap.parse_args()
    if opts.list:
        print(";".join(cases))
        return 0
    if not opts.qhost:
        ap.error("--qhost is required")
    runner = Runner(os.path.abspath(opts.qhost), opts.asan)
    names = opts.case or list(cases)
    failed, skipped = [], []
    for name in names:
        if name not in cases:
            print(f"unknown case {name}", file=sys.stderr)
            return 2
        tmp = tempfile.mkdtemp(prefix=f"qhost-{name}-")
        try:
            cases[name](runner, tmp)
            print(f"PASS {name}")
        except Skip as why:
            skipped.append(name)
            print(f"SKIP {name}: {why}")
        except Exception:  # every failure is reported with its case name
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", file=sys.stderr)
        finally:
            if not opts.keep:
                subprocess.run(["rm", "-rf", tmp])
    if failed:
        print(f"{len(failed)} of {len(names)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 77 if skipped and len(skipped) == len(names) else 0


# ---- builders -------------------------------------------------------------------

def onnx_modules():
    """onnx is imported lazily so that --list works without it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    return onnx, TensorProto, helper, numpy_helper


def make_model(nodes, inputs, outputs, initializers=(), opset=13, name="g", value_info=()):
    """A ModelProto from helper-made parts; inputs/outputs are (name, shape) pairs of
    float32 tensors or ValueInfoProtos."""
    onnx, TensorProto, helper, numpy_helper = onnx_modules()

    def vi(x):
        if isinstance(x, tuple):
            return helper.make_tensor_value_info(x[0], TensorProto.FLOAT, x[1])
        return x

    def init(x):
        if isinstance(x, tuple):
            return numpy_helper.from_array(x[1], x[0])
        return x

    graph = helper.make_graph(list(nodes), name, [vi(x) for x in inputs],
                              [vi(x) for x in outputs],
                              initializer=[init(x) for x in initializers],
                              value_info=list(value_info))
    model = helper.make_model(graph, producer_name="qhost-tests",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def raw_tensor(name, dims, raw):
    """A float TensorProto whose raw_data need not match its dims (helper.make_tensor
    refuses such lies)."""
    _, TensorProto, _, _ = onnx_modules()
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, raw_data=raw)
    t.dims.extend(dims)
    return t


def save_model(model, path):
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def relu_model(shape=(2, 3), in_name="x", out_name="y"):
    _, _, helper, _ = onnx_modules()
    return make_model([helper.make_node("Relu", [in_name], [out_name], name="relu")],
                      [(in_name, list(shape))], [(out_name, list(shape))])


def write_npy_raw(path, header_dict_text, data=b"", version=(1, 0), magic=b"\x93NUMPY",
                  header_len=None):
    """A .npy file byte by byte, so tests can lie in any field."""
    text = header_dict_text.encode("latin1")
    hl_size = 2 if version[0] == 1 else 4
    pad = (64 - (len(magic) + 2 + hl_size + len(text) + 1) % 64) % 64
    text = text + b" " * pad + b"\n"
    if header_len is None:
        header_len = len(text)
    with open(path, "wb") as f:
        f.write(magic + bytes(version))
        f.write(header_len.to_bytes(hl_size, "little"))
        f.write(text)
        f.write(data)
    return path
