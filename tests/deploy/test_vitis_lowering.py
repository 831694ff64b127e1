#!/usr/bin/python3
"""example_vitis's kernels through `qhost run --backend example_vitis` on a power-of-two
QDQ model (vitis_models.py) against ONNX Runtime on the same file.

Cases: every node unit of the model is claimed by the plugin (inspect --backend);
the lowered run agrees with ORT within one output step on >= 99% of the elements of
every quantized activation taken together (each activation is a graph output), and
the first units (before any rounding difference can accumulate) agree on >= 99% each;
units the kernels cannot do are declined with the reason (a scale that is not a power
of two, a nonzero zero point).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import qhtest  # noqa: E402
import ort_compare  # noqa: E402
import vitis_models  # noqa: E402

PLUGIN_DIR = os.environ.get("QH_VITIS_PLUGIN_DIR", "")
BACKEND = ["--backend", "example_vitis", "--plugin-dir", PLUGIN_DIR]


def case_claims_every_unit(r, tmp):
    model, _ = vitis_models.build(r, tmp)
    rc, out, err = r.run("inspect", model, *BACKEND)
    assert rc == 0, err
    assert "coverage: 12 of 12 node units on the plugin's int8 kernels" in out, out
    for op in ("Conv+Relu", "Conv+LeakyRelu", "AveragePool+Mul", "Concat", "GlobalAveragePool",
               "Gemm", "Flatten", "MaxPool", "Mul", "Add"):
        assert op in out, f"{op} missing from the coverage table:\n{out}"


def case_agrees_with_ort(r, tmp):
    why = ort_compare.ort_missing()
    if why:
        print(f"SKIP: {why}")
        sys.exit(77)
    total = within = 0
    for seed in range(2):
        model, x = vitis_models.build(r, tmp, seed=seed, all_outputs=True)
        results = ort_compare.compare(r, model, x, tmp, f"s{seed}", BACKEND)
        print(ort_compare.describe(f"seed {seed}", results))
        for res in results:
            total += res["elements"]
            within += res["within"] * res["elements"]
            # before the first eltwise op, a unit's inputs are still identical to ORT's
            if res["name"] in ("r1_dq", "mp_dq", "lr_dq", "apf_dq", "gc_out_dq", "cat_dq"):
                assert res["within"] >= 0.99 and res["max_steps"] <= 1.001, res
    print(f"all activations: {100 * within / total:.3f}% of {total} within one step")
    assert within / total >= 0.99


def _declined(r, tmp, mutate, reason):
    model, _ = vitis_models.build(r, tmp)
    onnx, _, _, numpy_helper = qhtest.onnx_modules()
    import numpy as np
    m = onnx.load(model)
    for i, t in enumerate(m.graph.initializer):
        if t.name in mutate:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(
                np.array(mutate[t.name], numpy_helper.to_array(t).dtype), t.name))
    path = qhtest.save_model(m, os.path.join(tmp, "declined.onnx"))
    rc, out, err = r.run("inspect", path, *BACKEND)
    assert rc == 0, err
    assert reason in out, f"expected '{reason}' in:\n{out}"


def case_declines_non_pow2_scale(r, tmp):
    _declined(r, tmp, {"mp_s": 0.03}, "not a power of two")


def case_declines_nonzero_zero_point(r, tmp):
    _declined(r, tmp, {"sum_z": 3}, "has zero point 3; the DPU needs 0")


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__.split("\n")[0]))
