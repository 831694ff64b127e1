#!/usr/bin/python3
"""Whole-partition offload (ABI 1.2 QhPartitionOps) with example_npu built from the
installed SDK only, as a vendor builds it.

Installs the qhost build tree into a fresh (then moved) prefix, copies the installed
examples/example_npu to a scratch directory, builds it with find_package(QHost)
against that prefix (warnings as errors), then with the installed runner:
  - the residual block (conv1 -> relu1 -> conv2 -> add with the skip edge from relu0
    -> relu2) claimed as one partition runs as one kernel (inspect and bench show the
    partition, 1 node on the plugin for 5 ops) and agrees with the host's QDQ reference
    within one output step; so does the automatic claim (the whole graph), and on the
    digits example quantized by qhost (x86) the automatic claim is one 7-op partition
    (stem and residual block) within one step of the host's logits;
  - each refused claim (overlapping, non-convex, disconnected, reading a float value,
    writing a float value, a Q node) fails the run with one line naming plugin,
    partition and node, exit 1, no output file, no crash.
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "sdk"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, HERE)
from installed_sdk import Failure, cmake_build, find_built, install_prefix, run, vendor_env  # noqa: E402
import qhtest  # noqa: E402
import partition_models  # noqa: E402

import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402

BLOCK = "block:conv1,relu1,conv2,add,relu2"
REFUSED = {
    "overlap": ("a:conv1,relu1;b:relu1,conv2",
                "plugin 'example_npu': partition 1 ('b'): node 'relu1': overlaps partition 0 ('a'), "
                "which claimed this node already; the claim is refused"),
    "non_convex": ("p:conv0,relu0,add,relu2",
                   "plugin 'example_npu': partition 0 ('p'): node 'add': not convex: a path leaves the "
                   "partition through node 'conv1' and re-enters it here; the claim is refused"),
    "disconnected": ("p:conv0,relu0,conv2",
                     "plugin 'example_npu': partition 0 ('p'): node 'conv2': not connected to node 'conv0' "
                     "through the partition's own edges; the claim is refused"),
    "float_input": ("p:relu1,conv2,add,relu2",
                    "plugin 'example_npu': partition 0 ('p'): node 'relu1': reads float value 'conv1_y' "
                    "from outside the partition (no DequantizeLinear): a partition holds quantized units only"),
    "float_output": ("p:conv1",
                     "plugin 'example_npu': partition 0 ('p'): node 'conv1': writes float value 'conv1_y' "
                     "that node 'relu1' reads outside the partition (no QuantizeLinear)"),
    "qdq_node": ("p:relu0_q_q",
                 "plugin 'example_npu': partition 0 ('p'): node 'relu0_q_q': this QuantizeLinear node was "
                 "not offered"),
}


def qdq_output_scales(path):
    """The scale of the DequantizeLinear writing each graph output."""
    m = onnx.load(path)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    outs = {o.name for o in m.graph.output}
    return {n.output[0]: float(inits[n.input[1]]) for n in m.graph.node
            if n.op_type == "DequantizeLinear" and n.output[0] in outs}


def build_plugin(args, scratch, env):
    prefix = install_prefix(args, scratch)
    src = os.path.join(scratch, "example_npu")
    shutil.copytree(os.path.join(prefix, args.datadir, "qhost", "examples", "example_npu"), src)
    build = os.path.join(scratch, "build")
    cmake_build(args, prefix, src, build, env)
    return os.path.join(prefix, args.bindir, "qhost"), os.path.dirname(find_built(build, "libqhost-example_npu.so"))


def ok(r, *a):
    rc, out, err = r.run(*a, timeout=120)
    qhtest.check_no_crash(rc, err)
    if rc != 0:
        raise Failure(f"qhost {' '.join(map(str, a))}: exit {rc}\n{err}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True, help="the qhost build tree to install")
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--libdir", default="lib")
    ap.add_argument("--datadir", default="share")
    ap.add_argument("--bindir", default="bin")
    ap.add_argument("--docdir", default="share/doc/qhost")
    args = ap.parse_args()
    env = vendor_env()
    with tempfile.TemporaryDirectory(prefix="qhost-partition-") as scratch:
        try:
            qhost, pdir = build_plugin(args, scratch, env)
            top_cache = open(os.path.join(args.build_dir, "CMakeCache.txt"), encoding="utf-8").read()
            r = qhtest.Runner(qhost, re.search(r"^QHOST_SANITIZE:BOOL=(ON|1|TRUE)$", top_cache, re.M) is not None)
            model_proto, out_step = partition_models.residual_block()
            model = os.path.join(scratch, "residual.qdq.onnx")
            onnx.save(model_proto, model)
            x = os.path.join(scratch, "x.npy")
            np.save(x, np.random.default_rng(1).normal(0, 1, (1, 4, 8, 8)).astype(np.float32))
            ref = os.path.join(scratch, "ref.npy")
            ok(r, "run", model, "--input", x, "-o", ref)
            reference = np.load(ref)
            backend = ["--backend", "example_npu", "--plugin-dir", pdir]
            for name, claims, n_kernels in (("block", BLOCK, 1), ("automatic", "", 1)):
                opt = ["--backend-opt", f"claims={claims}"] if claims else []
                y = os.path.join(scratch, f"{name}.npy")
                ok(r, "run", model, "--input", x, "-o", y, *backend, *opt)
                got = np.load(y)
                steps = np.abs(got - reference) / out_step
                if steps.max() > 1.0 + 1e-6:
                    raise Failure(f"{name}: {int((steps > 1.0 + 1e-6).sum())} outputs differ from the host's "
                                  f"reference by more than one step (max {steps.max():.2f})")
                print(f"{name}: max difference {steps.max():.2f} steps, "
                      f"{int((got != reference).sum())} of {got.size} outputs differ")
                report = json.loads(ok(r, "bench", model, *backend, *opt, "--runs", "3", "--json"))
                units = report["coverage"]["units"] if "coverage" in report else report["units"]
                parts = [u for u in units if u.get("partition")]
                if len(parts) != n_kernels or parts[0]["kernel"] != "npu_subgraph":
                    raise Failure(f"{name}: bench coverage shows partitions {parts}")
                if name == "block" and (parts[0]["partition"] != "block" or
                                        parts[0]["ops"] != "Conv+Relu+Conv+Add+Relu"):
                    raise Failure(f"block: coverage row {parts[0]}")
            # the digits example quantized by the installed qhost (x86's BackendConfig): its
            # residual block and stem are one automatic partition
            digits = os.path.join(scratch, "digits.qdq.onnx")
            ok(r, "quantize", os.path.join(ROOT, "examples", "digits_cnn.onnx"), "--backend", "x86",
               "--calib", os.path.join(ROOT, "examples", "digits_calib.npy"), "-o", digits, "--quiet")
            dx = os.path.join(scratch, "digits_x.npy")
            np.save(dx, np.load(os.path.join(ROOT, "examples", "digits_test.npy"))[:64])
            ok(r, "run", digits, "--input", dx, "-o", os.path.join(scratch, "digits_ref.npy"))
            ok(r, "run", digits, "--input", dx, "-o", os.path.join(scratch, "digits_npu.npy"), *backend)
            text = ok(r, "inspect", digits, *backend)
            if "(partition 'npu0', 7 ops)" not in text:
                raise Failure(f"digits: the automatic claim is not one 7-op partition:\n{text}")
            step = min(v for k, v in qdq_output_scales(digits).items())
            got, want = np.load(os.path.join(scratch, "digits_npu.npy")), np.load(os.path.join(scratch, "digits_ref.npy"))
            far = np.abs(got - want) / step
            if far.max() > 1.0 + 1e-6:
                raise Failure(f"digits: {int((far > 1 + 1e-6).sum())} logits more than one step from the host's")
            print(f"digits: max difference {far.max():.2f} steps, {int((got != want).sum())} of {got.size} differ")
            text = ok(r, "inspect", model, *backend, "--backend-opt", f"claims={BLOCK}")
            if "(partition 'block', 5 ops)" not in text:
                raise Failure(f"inspect does not show the partition:\n{text}")
            for name, (claims, message) in REFUSED.items():
                y = os.path.join(scratch, f"refused-{name}.npy")
                rc, out, err = r.run("run", model, "--input", x, "-o", y, *backend,
                                     "--backend-opt", f"claims={claims}", timeout=120)
                qhtest.check_no_crash(rc, err)
                lines = [ln for ln in err.splitlines() if ln.strip()]
                if rc != 1 or len(lines) != 1 or message not in lines[0] or os.path.exists(y):
                    raise Failure(f"refused {name}: exit {rc}, stderr {err!r}, output written: {os.path.exists(y)}")
                print(f"refused {name}: {lines[0]}")
        except Failure as e:
            print(f"FAIL: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
