#!/usr/bin/env python3
"""Hostile inputs to `qhost run` / `qhost inspect`: broken, lying and malicious model
and data files. Every case must fail cleanly: exit status exactly 1, one line on
stderr naming the offending file and the cause, no crash or sanitizer report, no
file left at the -o path, all within a bounded address space. One case (weights.bin
beside the model) is the legitimate twin of the external-data attacks and must
succeed with the right output.
"""

import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qhtest  # noqa: E402
import wire  # noqa: E402
from qhtest import check_no_crash, make_model, onnx_modules, raw_tensor, relu_model, save_model, write_npy_raw  # noqa: E402,E501


def expect_failure(runner, args, names, cause, out=None, command="run"):
    """Run qhost and check the clean-failure contract. names: basenames of which
    the error line must contain at least one; cause: regex (case-insensitive)."""
    rc, _, err = runner.run(command, *args)
    check_no_crash(rc, err)
    lines = err.splitlines()
    assert rc == 1, f"exit status {rc}, expected 1; stderr:\n{err}"
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{err}"
    line = lines[0]
    assert line.startswith("qhost: "), f"line does not start with 'qhost: ': {line}"
    assert any(os.path.basename(n) in line for n in names), \
        f"line names none of {[os.path.basename(n) for n in names]}: {line}"
    assert re.search(cause, line, re.IGNORECASE), f"cause /{cause}/ not in: {line}"
    if out is not None:
        assert not os.path.exists(out), f"output {out} was left behind"
        leftovers = [f for f in os.listdir(os.path.dirname(out))
                     if f.startswith(os.path.basename(out))]
        assert not leftovers, f"temporary outputs left behind: {leftovers}"
    print(f"  stderr: {line}")


def x_npy(tmp, shape=(2, 3), name="x.npy"):
    path = os.path.join(tmp, name)
    np.save(path, np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 2.0)
    return path


def run_bad_model(runner, tmp, model_bytes, cause, shape=(2, 3)):
    model = os.path.join(tmp, "model.onnx")
    with open(model, "wb") as f:
        f.write(model_bytes)
    out = os.path.join(tmp, "y.npy")
    expect_failure(runner, [model, "--input", x_npy(tmp, shape), "-o", out], [model], cause, out)


def valid_model_bytes():
    return relu_model().SerializeToString()


# ---- model files ----------------------------------------------------------------

def case_onnx_truncated(runner, tmp):
    _, TensorProto, helper, _ = onnx_modules()
    w = np.linspace(-1, 1, 3 * 3).astype(np.float32).reshape(3, 3)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                   [("x", [2, 3])], [("y", [2, 3])], [("w", w)])
    b = m.SerializeToString()[: len(m.SerializeToString()) * 2 // 3]
    onnx, _, _, _ = onnx_modules()
    from google.protobuf.message import DecodeError
    try:  # the cut must fall inside a field, or the file is merely a smaller model
        onnx.ModelProto().ParseFromString(b)
        parses = True
    except DecodeError:
        parses = False
    assert not parses, "the truncated model still parses"
    run_bad_model(runner, tmp, b, r"truncat|protobuf|not a valid|malformed|parse")


def case_onnx_random(runner, tmp):
    rng = np.random.default_rng(1234)
    run_bad_model(runner, tmp, rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
                  r"protobuf|not a valid|malformed|parse|invalid")


def case_onnx_empty(runner, tmp):
    run_bad_model(runner, tmp, b"", r"empty")


def case_model_missing(runner, tmp):
    model = os.path.join(tmp, "no-such-model.onnx")
    out = os.path.join(tmp, "y.npy")
    expect_failure(runner, [model, "--input", x_npy(tmp), "-o", out], [model],
                   r"no such file|cannot open|does not exist|not found", out)


def case_dangling_input(runner, tmp):
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")],
                   [("x", [2, 3])], [("y", [2, 3])])
    run_bad_model(runner, tmp, m.SerializeToString(), r"ghost")


def case_cycle(runner, tmp):
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Add", ["x", "b"], ["a"], name="first"),
                    helper.make_node("Relu", ["a"], ["b"], name="second"),
                    helper.make_node("Relu", ["a"], ["y"], name="third")],
                   [("x", [2, 3])], [("y", [2, 3])])
    run_bad_model(runner, tmp, m.SerializeToString(), r"cycle")


def case_initializer_huge(runner, tmp):
    _, TensorProto, helper, _ = onnx_modules()
    w = raw_tensor("w", [1 << 40], b"\0" * 16)
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="adder")],
                   [("x", [2, 3])], [("y", [2, 3])], [w])
    run_bad_model(runner, tmp, m.SerializeToString(),
                  r"element|limit|too large|bytes|size|match")


def case_initializer_overflow(runner, tmp):
    _, TensorProto, helper, _ = onnx_modules()
    # 2^32 * 2^32 * 16 wraps to 0 in 64 bits, which the empty data would then match
    w = raw_tensor("w", [1 << 32, 1 << 32, 16], b"")
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="adder")],
                   [("x", [2, 3])], [("y", [2, 3])], [w])
    run_bad_model(runner, tmp, m.SerializeToString(), r"overflow|element|limit|too large|size")


def case_input_dims_overflow(runner, tmp):
    # No data can fit this input, so `run` fails on the fit; `inspect` describes such
    # a model (exit 0) and reports that shape inference failed.
    dims = [1 << 32, 1 << 32, 16]
    model = save_model(relu_model(dims), os.path.join(tmp, "model.onnx"))
    out = os.path.join(tmp, "y.npy")
    expect_failure(runner, [model, "--input", x_npy(tmp), "-o", out], [model],
                   r"does not fit|overflow|element|limit", out)
    rc, text, err = runner.run("inspect", model)
    check_no_crash(rc, err)
    assert rc == 0 and re.search(r"unknown|fail|limit", text), (rc, text, err)


def computed_shape_case(runner, tmp, op, consts, cause=r"overflow|element|limit|too large"):
    """x -> op(x, constants...): the planner computes an absurd output shape."""
    _, _, helper, _ = onnx_modules()
    names = [n for n, _ in consts]
    m = make_model([helper.make_node(op, ["x"] + names, ["y"], name="grow")],
                   [("x", [2, 3])], [("y", [1])], consts)
    run_bad_model(runner, tmp, m.SerializeToString(), cause)


def case_reshape_overflow(runner, tmp):
    # 2^32 * 2^32 * 16 wraps to 0 in 64 bits, and -1 would then be 6 / 0
    computed_shape_case(runner, tmp, "Reshape",
                        [("target", np.array([1 << 32, 1 << 32, 16, -1], np.int64))],
                        r"element|overflow|limit|divide")


def case_pad_huge(runner, tmp):
    computed_shape_case(runner, tmp, "Pad",
                        [("pads", np.array([0, 0, 1 << 40, 1 << 40], np.int64))],
                        r"overflow|element|limit|too large|pads")


def case_resize_huge(runner, tmp):
    computed_shape_case(runner, tmp, "Resize",
                        [("roi", np.array([], np.float32)),
                         ("scales", np.array([1e6, 1e6], np.float32))])


def external_model(tmp, location, offset=None, length=None):
    """y = x + w, w = 6 floats stored externally at `location`."""
    _, TensorProto, helper, _ = onnx_modules()
    w = raw_tensor("w", [2, 3], b"")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = w.external_data.add()
            e.key, e.value = k, str(v)
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="adder")],
                   [("x", [2, 3])], [("y", [2, 3])], [w])
    sub = os.path.join(tmp, "a", "b")
    os.makedirs(sub, exist_ok=True)
    return save_model(m, os.path.join(sub, "model.onnx"))


def expect_external_refused(runner, tmp, location, cause):
    model = external_model(tmp, location)
    out = os.path.join(tmp, "y.npy")
    expect_failure(runner, [model, "--input", x_npy(tmp), "-o", out], [model], cause, out)


def case_external_etc_passwd(runner, tmp):
    expect_external_refused(runner, tmp, "/etc/passwd", r"external|absolute|outside")


def case_external_dotdot(runner, tmp):
    with open(os.path.join(tmp, "x"), "wb") as f:  # tmp/a/b/../../x exists: refused anyway
        f.write(np.ones(6, np.float32).tobytes())
    expect_external_refused(runner, tmp, "../../x", r"external|\.\.|outside")


def case_external_absolute(runner, tmp):
    os.makedirs(os.path.join(tmp, "a", "b"), exist_ok=True)
    target = os.path.join(tmp, "a", "b", "weights.bin")  # inside the model's folder
    with open(target, "wb") as f:
        f.write(np.ones(6, np.float32).tobytes())
    expect_external_refused(runner, tmp, target, r"external|absolute")


def case_external_legit(runner, tmp):
    w = (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5)
    model = external_model(tmp, "weights.bin", offset=8, length=24)
    with open(os.path.join(tmp, "a", "b", "weights.bin"), "wb") as f:
        f.write(b"\xff" * 8 + w.tobytes() + b"\xee" * 8)
    x = x_npy(tmp)
    out = os.path.join(tmp, "y.npy")
    rc, _, err = runner.run("run", model, "--input", x, "-o", out)
    check_no_crash(rc, err)
    assert rc == 0, f"exit status {rc}; stderr:\n{err}"
    y = np.load(out)
    np.testing.assert_array_equal(y, np.load(x) + w)


def case_nesting_100k(runner, tmp):
    run_bad_model(runner, tmp, wire.nested_if_model(100000), r"nest|deep|depth")


def case_unsupported_op(runner, tmp):
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Celu", ["x"], ["y"], name="mystery", alpha=2.0)],
                   [("x", [2, 3])], [("y", [2, 3])])
    run_bad_model(runner, tmp, m.SerializeToString(), r"mystery.*Celu|Celu.*mystery")


def case_custom_domain_op(runner, tmp):
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("FancyOp", ["x"], ["y"], name="fancy",
                                     domain="com.example")],
                   [("x", [2, 3])], [("y", [2, 3])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    run_bad_model(runner, tmp, m.SerializeToString(), r"fancy.*FancyOp|FancyOp.*fancy")


def case_omitted_output(runner, tmp):
    # found by fuzz_onnx: a node whose required output is omitted ("") reached its
    # kernel with a NULL output tensor (a constant one even in `inspect`)
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Constant", [], [""], name="lost", value_ints=[3, 2]),
                    helper.make_node("Relu", ["x"], ["y"], name="relu")],
                   [("x", [2, 3])], [("y", [2, 3])])
    run_bad_model(runner, tmp, m.SerializeToString(), r"lost.*output|output.*lost")
    rc, _, err = runner.run("inspect", os.path.join(tmp, "model.onnx"))
    check_no_crash(rc, err)


def case_zero_size_huge_dims(runner, tmp):
    # found by fuzz_onnx: a tensor of shape [2^34, 0] has no elements, so every
    # bound passes, yet a kernel looping over its outer dimensions spins 2^34 times
    # per node; a file of a few hundred bytes must not keep qhost busy for minutes
    _, _, helper, _ = onnx_modules()
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    prev = "c"
    for i in range(4):
        nodes.append(helper.make_node("Concat", [prev, "c"], [f"z{i}"], name=f"cat{i}", axis=1))
        prev = f"z{i}"
    m = make_model(nodes, [("x", [2, 3])], [("y", [2, 3]), (prev, [1 << 34, 0])],
                   [raw_tensor("c", [1 << 34, 0], b"")])
    model = save_model(m, os.path.join(tmp, "model.onnx"))
    out = os.path.join(tmp, "y.npz")
    rc, _, err = runner.run("run", model, "--input", x_npy(tmp), "-o", out, timeout=15)
    check_no_crash(rc, err)
    if rc == 0:
        with np.load(out) as z:
            assert z[prev].shape == (1 << 34, 0), z[prev].shape
    else:
        assert rc == 1 and len(err.splitlines()) == 1, (rc, err)


def case_fold_amplification(runner, tmp):
    # found by fuzz_onnx: gathering from an empty axis of a [2^31, 0] constant asks
    # for a [2^31, 1] result (8 GiB) at plan time, from a file of ~150 bytes; under the
    # memory bound that must be a clean error; shape inference now refuses the index
    # into the empty axis before anything is allocated
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Gather", ["c", "idx"], ["g"], name="gather", axis=1),
                    helper.make_node("Relu", ["x"], ["y"], name="relu")],
                   [("x", [2, 3])], [("y", [2, 3]), ("g", [1 << 31, 1])],
                   [raw_tensor("c", [1 << 31, 0], b""), ("idx", np.array([-1], np.int64))])
    out = os.path.join(tmp, "y.npz")
    model = save_model(m, os.path.join(tmp, "model.onnx"))
    expect_failure(runner, [model, "--input", x_npy(tmp), "-o", out], [model],
                   r"memory|range|index|limit|empty", out)


def case_opset_11(runner, tmp):
    m = relu_model()
    m.opset_import[0].version = 11
    run_bad_model(runner, tmp, m.SerializeToString(), r"opset.*11|11.*opset")


# ---- data files -----------------------------------------------------------------

def run_bad_input(runner, tmp, data_path, cause, names=None, model=None):
    model = model or save_model(relu_model(), os.path.join(tmp, "model.onnx"))
    out = os.path.join(tmp, "y.npy")
    expect_failure(runner, [model, "--input", data_path, "-o", out], names or [data_path],
                   cause, out)


HDR = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"


def case_npy_bad_magic(runner, tmp):
    p = write_npy_raw(os.path.join(tmp, "x.npy"), HDR % ("<f4", "False", "(2, 3)"),
                      bytes(24), magic=b"\x93NUMPZ")
    run_bad_input(runner, tmp, p, r"magic|not a(n)? (\.)?npy|npy")


def case_npy_bad_header(runner, tmp):
    p = write_npy_raw(os.path.join(tmp, "x.npy"), "{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (2, 3", bytes(24))
    run_bad_input(runner, tmp, p, r"header")


def case_npy_header_oversized(runner, tmp):
    p = write_npy_raw(os.path.join(tmp, "x.npy"), HDR % ("<f4", "False", "(2, 3)"),
                      bytes(24), version=(2, 0), header_len=0x7FFFFFF0)
    run_bad_input(runner, tmp, p, r"header")


def case_npy_header_past_eof(runner, tmp):
    p = write_npy_raw(os.path.join(tmp, "x.npy"), HDR % ("<f4", "False", "(2, 3)"),
                      bytes(24), header_len=60000)
    run_bad_input(runner, tmp, p, r"header|truncat|end of file|short")


def case_npy_truncated_data(runner, tmp):
    p = write_npy_raw(os.path.join(tmp, "x.npy"), HDR % ("<f4", "False", "(2, 3)"), bytes(20))
    run_bad_input(runner, tmp, p, r"truncat|data|bytes|size|length|short")


def case_npy_huge_shape(runner, tmp):
    p = write_npy_raw(os.path.join(tmp, "x.npy"), HDR % ("<f4", "False", "(1099511627776,)"),
                      bytes(64))
    run_bad_input(runner, tmp, p, r"element|limit|too large|size|bytes")


def case_npy_overflow_shape(runner, tmp):
    # 2^32 * 2^32 * 16 wraps to 0 in 64 bits, which the empty data would then match
    p = write_npy_raw(os.path.join(tmp, "x.npy"),
                      HDR % ("<f4", "False", "(4294967296, 4294967296, 16)"), b"")
    run_bad_input(runner, tmp, p, r"overflow|element|limit|too large|size")


def npy_dtype_case(runner, tmp, descr, cause, fortran="False"):
    p = write_npy_raw(os.path.join(tmp, "x.npy"), HDR % (descr, fortran, "(2, 3)"), bytes(96))
    run_bad_input(runner, tmp, p, cause)


def case_npy_complex(runner, tmp):
    npy_dtype_case(runner, tmp, "<c8", r"c8|complex|dtype")


def case_npy_unicode(runner, tmp):
    npy_dtype_case(runner, tmp, "<U4", r"U4|unicode|dtype")


def case_npy_object(runner, tmp):
    npy_dtype_case(runner, tmp, "|O", r"object|pickle|\|O|dtype")


def case_npy_fortran(runner, tmp):
    npy_dtype_case(runner, tmp, "<f4", r"fortran", fortran="True")


def case_npy_float64(runner, tmp):
    p = os.path.join(tmp, "x.npy")
    np.save(p, np.ones((2, 3), np.float64))
    run_bad_input(runner, tmp, p, r"float64|f8|double|dtype")


def case_input_shape_mismatch(runner, tmp):
    p = os.path.join(tmp, "x.npy")
    np.save(p, np.ones((2, 5), np.float32))
    model = save_model(relu_model((2, 3)), os.path.join(tmp, "model.onnx"))
    run_bad_input(runner, tmp, p, r"shape|\[2, 3\]|\(2, 3\)", names=[p, model], model=model)


def two_input_model(tmp):
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Add", ["alpha", "beta"], ["y"], name="adder")],
                   [("alpha", [2, 3]), ("beta", [2, 3])], [("y", [2, 3])])
    return save_model(m, os.path.join(tmp, "model.onnx"))


def case_npz_missing_input(runner, tmp):
    p = os.path.join(tmp, "x.npz")
    np.savez(p, alpha=np.ones((2, 3), np.float32), gamma=np.ones((2, 3), np.float32))
    model = two_input_model(tmp)
    run_bad_input(runner, tmp, p, r"beta", names=[p, model], model=model)


def case_npz_not_zip(runner, tmp):
    p = os.path.join(tmp, "x.npz")
    with open(p, "wb") as f:
        f.write(b"this is not a zip archive, just some text pretending to be one\n" * 4)
    run_bad_input(runner, tmp, p, r"zip|archive|npz", model=two_input_model(tmp))


def case_input_dtype_mismatch(runner, tmp):
    p = os.path.join(tmp, "x.npy")
    np.save(p, np.ones((2, 3), np.int32))
    model = save_model(relu_model((2, 3)), os.path.join(tmp, "model.onnx"))
    run_bad_input(runner, tmp, p, r"int32|dtype|float32", names=[p, model], model=model)


def case_labels_mismatch(runner, tmp):
    model = save_model(relu_model(("N", 3)), os.path.join(tmp, "model.onnx"))
    labels = os.path.join(tmp, "labels.npy")
    np.save(labels, np.zeros(5, np.int64))  # 2 rows of data, 5 labels
    out = os.path.join(tmp, "y.npy")
    expect_failure(runner, [model, "--input", x_npy(tmp), "-o", out, "--labels", labels],
                   [labels], r"label|rows|samples|count|shape", out)


def case_model_is_directory(runner, tmp):
    model = os.path.join(tmp, "model.onnx")
    os.mkdir(model)
    out = os.path.join(tmp, "y.npy")
    expect_failure(runner, [model, "--input", x_npy(tmp), "-o", out], [model],
                   r"regular file|directory|cannot", out)


def case_output_dir_missing(runner, tmp):
    model = save_model(relu_model(), os.path.join(tmp, "model.onnx"))
    out = os.path.join(tmp, "no-such-dir", "y.npy")
    expect_failure(runner, [model, "--input", x_npy(tmp), "-o", out], [out],
                   r"no such file|directory|cannot|exist")
    assert not os.path.exists(os.path.dirname(out)), "the output directory was created"


def constant_of_shape_case(runner, tmp, shape, cause, value=None):
    """x -> Relu -> y, plus ConstantOfShape(shape) as a second output: a few bytes of
    model asking for a huge (or malformed) constant."""
    _, _, helper, _ = onnx_modules()
    attrs = {} if value is None else {"value": value}
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu"),
                    helper.make_node("ConstantOfShape", ["shape"], ["big"], name="fill", **attrs)],
                   [("x", [2, 3])], [("y", [2, 3]), ("big", [1])],
                   [("shape", np.array(shape, np.int64))])
    model = save_model(m, os.path.join(tmp, "model.onnx"))
    out = os.path.join(tmp, "y.npz")
    expect_failure(runner, [model, "--input", x_npy(tmp), "-o", out], [model], cause, out)


def case_constant_of_shape_over_limit(runner, tmp):
    # 2^60 elements: refused by shape inference before anything is allocated
    constant_of_shape_case(runner, tmp, [1 << 20, 1 << 20, 1 << 20], r"fill.*(limit|element)")


def case_constant_of_shape_huge(runner, tmp):
    # 2^33 float32 (32 GiB) is within the element limit but past the fold cap, so it
    # is allocated at run time, where the memory bound makes it a clean error
    constant_of_shape_case(runner, tmp, [1 << 33], r"memory|limit|allocat")


def case_constant_of_shape_bad_value(runner, tmp):
    _, _, _, numpy_helper = onnx_modules()
    constant_of_shape_case(runner, tmp, [2, 2], r"fill.*one element",
                           value=numpy_helper.from_array(np.array([1, 2], np.float32), "v"))


def case_cast_to_string(runner, tmp):
    _, _, helper, _ = onnx_modules()
    m = make_model([helper.make_node("Cast", ["x"], ["y"], name="tostr", to=8)],
                   [("x", [2, 3])], [("y", [2, 3])])
    run_bad_model(runner, tmp, m.SerializeToString(), r"tostr.*(type 8|not supported)")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    sys.exit(qhtest.main(CASES, __doc__))
