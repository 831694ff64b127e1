#!/usr/bin/python3
"""Partitions are lowered before per-unit patterns: the npu_patterns test plugin
(tests/lower/plugins/npu_patterns.c) has example_npu's partitions and a one-op Conv
pattern. On the residual-block model (partition_models.py):
  - partition_first: with the block claimed, its Convs are in the partition and the
    pattern is tried only on the stem's Conv;
  - patterns_elsewhere: with only the stem claimed, the pattern takes conv2 and leaves
    conv1 (float output into Relu) to the host with the pattern's reason;
  - compile_declined: a compile declining with QH_ERR_UNSUPPORTED gives the nodes
    back: the pattern takes them, the host rows say why the partition declined.
  - nhwc_boundary: a plugin declaring io_layout NHWC gets channels-last buffers
    through one Transpose each way;
  - shape_change_host_path: a partition whose reshape refuses a run's batch (the model's
    batch is symbolic) gives its nodes back for those shapes; the run succeeds.
Each lowered run agrees with the host's QDQ reference within one output step.
"""
import json
import os
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, HERE)
import qhtest  # noqa: E402
import partition_models  # noqa: E402

PLUGIN_DIR = os.environ.get("QH_LOWER_PLUGIN_DIR", "")
BACKEND = ["--backend", "npu_patterns", "--plugin-dir", PLUGIN_DIR]
# the Conv pattern's accept, for a Conv whose output goes on float into a Relu
DECLINED = "conv: a quantized Conv output expected (this one goes on float)"


def ok(r, *args):
    rc, out, err = r.run(*args, timeout=120)
    qhtest.check_no_crash(rc, err)
    assert rc == 0, f"qhost {' '.join(map(str, args))}: exit {rc}\n{err}"
    return out


def lowered(r, tmp, *opts, backend=BACKEND):
    """Rows of bench's coverage and the run's largest distance to the reference, in steps."""
    model_proto, step = partition_models.residual_block()
    model = os.path.join(tmp, "residual.qdq.onnx")
    onnx.save(model_proto, model)
    x = os.path.join(tmp, "x.npy")
    np.save(x, np.random.default_rng(2).normal(0, 1, (1, 4, 8, 8)).astype(np.float32))
    ok(r, "run", model, "--input", x, "-o", os.path.join(tmp, "ref.npy"))
    opt = [a for o in opts for a in ("--backend-opt", o)]
    ok(r, "run", model, "--input", x, "-o", os.path.join(tmp, "y.npy"), *backend, *opt)
    dist = np.abs(np.load(os.path.join(tmp, "y.npy")) - np.load(os.path.join(tmp, "ref.npy"))).max() / step
    assert dist <= 1.0 + 1e-6, f"{dist:.2f} steps from the host's reference"
    report = json.loads(ok(r, "bench", model, *backend, *opt, "--runs", "2", "--json"))
    rows = {u["name"]: u for u in report["coverage"]["units"]}
    rows["_text"] = ok(r, "bench", model, *backend, *opt, "--runs", "2")
    return rows


def case_partition_first(r, tmp):
    rows = lowered(r, tmp, "claims=block:conv1,relu1,conv2,add,relu2")
    assert rows["conv1"].get("partition") == "block" and rows["conv1"]["ops"] == "Conv+Relu+Conv+Add+Relu", rows
    # the pattern was tried outside the partition (conv0 writes a float value into relu0)
    assert rows["conv0"]["kernel"] == "host:reference" and DECLINED in rows["conv0"]["reason"], rows
    # conv2, which the pattern takes when no partition holds it (patterns_elsewhere), is
    # inside the partition's row, not a unit of its own
    assert "conv2" not in rows, rows


def case_patterns_elsewhere(r, tmp):
    rows = lowered(r, tmp, "claims=stem:conv0,relu0")
    assert rows["conv0"].get("partition") == "stem", rows
    assert rows["conv2"]["kernel"] == "npu_conv_unit", rows
    assert rows["conv1"]["kernel"] == "host:reference" and DECLINED in rows["conv1"]["reason"], rows


def case_compile_declined(r, tmp):
    rows = lowered(r, tmp, "claims=block:conv1,relu1,conv2,add,relu2", "decline_compile=true")
    assert not any(u.get("partition") for k, u in rows.items() if k != "_text"), rows
    assert rows["conv2"]["kernel"] == "npu_conv_unit", rows
    assert rows["add"]["kernel"] == "host:reference", rows
    assert "partition: compile declined on request" in rows["add"]["reason"], rows


def case_nhwc_boundary(r, tmp):
    """A partition declaring QH_LAYOUT_NHWC gets channels-last host buffers: one
    Transpose in, one out, and the same numbers."""
    rows = lowered(r, tmp, "claims=block:conv1,relu1,conv2,add,relu2",
                   backend=["--backend", "npu_nhwc", "--plugin-dir", PLUGIN_DIR])
    assert rows["conv1"].get("partition") == "block", rows
    assert "layout transposes: 2 nodes" in rows["_text"], rows["_text"]


def case_shape_change_host_path(r, tmp):
    """A partition whose reshape refuses the shapes of a run (reshape_max_batch=1 at batch 3
    of a model whose batch is symbolic) gives its nodes back for runs of those shapes, as
    a kernel's unit does: the run succeeds within one step of the host's (the pattern takes
    the Conv it can, the host the rest), bench names the partition's reason; at batch 1 the
    partition runs again."""
    model_proto, step = partition_models.residual_block(batch="N")
    model = os.path.join(tmp, "residual_n.qdq.onnx")
    onnx.save(model_proto, model)
    opts = ["--backend-opt", "claims=block:conv1,relu1,conv2,add,relu2", "--backend-opt", "reshape_max_batch=1"]
    x3 = os.path.join(tmp, "x3.npy")
    np.save(x3, np.random.default_rng(3).normal(0, 1, (3, 4, 8, 8)).astype(np.float32))
    ok(r, "run", model, "--input", x3, "-o", os.path.join(tmp, "host3.npy"))
    ok(r, "run", model, "--input", x3, "-o", os.path.join(tmp, "low3.npy"), *BACKEND, *opts)
    host, low = np.load(os.path.join(tmp, "host3.npy")), np.load(os.path.join(tmp, "low3.npy"))
    assert host.shape == (3, 4, 8, 8) and np.abs(low - host).max() / step <= 1.0 + 1e-6
    units = json.loads(ok(r, "bench", model, "--json", "--runs", "1", "--input", x3, *BACKEND, *opts))
    rows = {u["name"]: u for u in units["coverage"]["units"]}
    assert not any(u.get("partition") for u in rows.values()), rows
    want = ("partition: cannot run these shapes: plugin 'npu_patterns': partition 'block': reshape: "
            "batch 3 is above reshape_max_batch=1")
    assert want in rows["add"]["reason"], rows
    assert rows["conv2"]["kernel"] == "npu_conv_unit", rows  # the nodes went back to the pattern
    x1 = os.path.join(tmp, "x1.npy")
    np.save(x1, np.load(x3)[:1])
    units = json.loads(ok(r, "bench", model, "--json", "--runs", "1", "--input", x1, *BACKEND, *opts))
    rows = {u["name"]: u for u in units["coverage"]["units"]}
    assert rows["conv1"].get("partition") == "block", rows


CASES = {
    "shape_change_host_path": case_shape_change_host_path,
    "nhwc_boundary": case_nhwc_boundary,
    "partition_first": case_partition_first,
    "patterns_elsewhere": case_patterns_elsewhere,
    "compile_declined": case_compile_declined,
}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
