#!/usr/bin/python3
"""A lowered session whose symbolic batch changes between runs, with a partition that
cannot take one of the batches (PLUGIN_GUIDE.md, "When a symbolic dimension changes at
run time"): the Python package's qhost.Session over the npu_patterns test plugin on the
residual block with batch "N", the block claimed as one partition whose reshape refuses
a batch above 1 (reshape_max_batch=1) and whose outputs carry a planted one-step shift
(bug=zero_point), so each run shows whether the partition ran:
  - batch 3: the partition gives its nodes back; the run succeeds within one step of the
    host's session (the Conv pattern and the host's reference run the block);
  - batch 1 in the same session: the partition runs again (its outputs one step up);
  - batch 3 again: back on the host path, the same output as the first batch-3 run.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)
import qhtest  # noqa: E402

PLUGIN_DIR = os.environ.get("QH_LOWER_PLUGIN_DIR", "")


def reexec_under_asan():
    """An uninstrumented python3 must preload the ASan runtime to load a sanitized libqhost."""
    runtime = os.environ.get("QH_ASAN_RUNTIME")
    if "--asan" not in sys.argv or not runtime or os.environ.get("LD_PRELOAD") == runtime:
        return
    env = dict(os.environ, LD_PRELOAD=runtime, ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def case_batch_changes(r, tmp):
    import onnx
    import partition_models
    import qhost
    proto, step = partition_models.residual_block(batch="N")
    model = os.path.join(tmp, "residual_n.qdq.onnx")
    onnx.save(proto, model)
    x3 = np.random.default_rng(5).normal(0, 1, (3, 4, 8, 8)).astype(np.float32)
    options = ["claims=block:conv1,relu1,conv2,add,relu2", "reshape_max_batch=1", "bug=zero_point"]
    with qhost.Session(model) as host, \
            qhost.Session(model, "npu_patterns", backend_options=options, plugin_dir=PLUGIN_DIR) as low:
        def steps(x):
            return np.abs(low.run(x)["y"] - host.run(x)["y"]) / step
        first3, d1, again3 = steps(x3), steps(x3[:1]), steps(x3)
    assert first3.shape == (3, 4, 8, 8) and d1.shape == (1, 4, 8, 8)
    assert first3.max() <= 1.0 + 1e-6 and (first3 < 1e-6).mean() > 0.9, first3.max()
    # the partition ran at batch 1: its planted shift puts (nearly) every element one step up
    assert (np.abs(d1 - 1.0) < 1e-4).mean() > 0.9, np.unique(np.round(d1, 3))
    assert np.array_equal(first3, again3)


CASES = {"batch_changes": case_batch_changes}

if __name__ == "__main__":
    reexec_under_asan()
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
