#!/usr/bin/env python3
"""Writes the seed corpus of the fuzzers (tests/fuzz/corpus/{onnx,npy}): small valid
models and arrays that reach deep into the parsers, and the hostile cases of the
integration tests. The files are committed; rerun this only to change the seeds
(inputs the fuzzers found are added by hand, named found-*, and are not touched).

Usage: /usr/bin/python3 tests/fuzz/make_corpus.py
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import wire  # noqa: E402

ONNX_DIR = os.path.join(HERE, "corpus", "onnx")
NPY_DIR = os.path.join(HERE, "corpus", "npy")


def model(nodes, inputs, outputs, inits=(), opset=13, extra_opsets=()):
    def vi(x):
        if isinstance(x, tuple):
            dtype = x[2] if len(x) > 2 else TensorProto.FLOAT
            return helper.make_tensor_value_info(x[0], dtype, x[1])
        return x

    g = helper.make_graph(nodes, "g", [vi(x) for x in inputs], [vi(x) for x in outputs],
                          initializer=[numpy_helper.from_array(a, n) if isinstance(a, np.ndarray)
                                       else a for n, a in inits])
    m = helper.make_model(g, producer_name="qhost-corpus",
                          opset_imports=[helper.make_opsetid("", opset)]
                          + [helper.make_opsetid(d, v) for d, v in extra_opsets])
    m.ir_version = 8
    return m.SerializeToString()


def raw_tensor(name, dims, raw):
    """A float TensorProto whose raw_data need not match its dims."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, raw_data=raw)
    t.dims.extend(dims)
    return t


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def onnx_seeds():
    s = {}
    s["relu"] = model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                      [("x", [2, 3])], [("y", [2, 3])])
    s["conv_relu"] = model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3],
                          pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1),
         helper.make_node("Relu", ["c"], ["y"], name="relu")],
        [("x", [1, 2, 5, 5])], [("y", [1, 3, 5, 5])],
        [("w", f32(3, 2, 3, 3)), ("b", f32(3, seed=1))])
    s["dense_symbolic"] = model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Add", ["h", "b"], ["y"])],
        [("x", ["N", 3])], [("y", ["N", 4])], [("w", f32(3, 4)), ("b", f32(4, seed=2))])
    s["gemm_softmax"] = model(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1, alpha=1.0, beta=1.0),
         helper.make_node("Softmax", ["h"], ["y"], axis=-1)],
        [("x", [2, 3])], [("y", [2, 4])], [("w", f32(4, 3)), ("b", f32(4, seed=3))])
    s["two_in_two_out"] = model(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["a", "b"], ["p"])],
        [("a", [2, 3]), ("b", [2, 3])], [("s", [2, 3]), ("p", [2, 3])])
    s["qdq"] = model(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
        [("x", [1, 4])], [("y", [1, 4])],
        [("s", np.array(0.0625, np.float32)), ("z", np.array(3, np.uint8))])
    s["constant_nodes"] = model(
        [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(f32(2, 3))),
         helper.make_node("Constant", [], ["k"], value_float=2.5),
         helper.make_node("Constant", [], ["shape"], value_ints=[3, 2]),
         helper.make_node("Add", ["x", "c"], ["t"]),
         helper.make_node("Mul", ["t", "k"], ["u"]),
         helper.make_node("Reshape", ["u", "shape"], ["y"])],
        [("x", [2, 3])], [("y", [3, 2])])
    s["shape_chain"] = model(  # the Shape->Gather->Concat->Reshape pattern of exporters
        [helper.make_node("Shape", ["x"], ["sh"]),
         helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
         helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
         helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
         helper.make_node("Reshape", ["x", "target"], ["flat"]),
         helper.make_node("ConstantOfShape", ["target_c"], ["ones"],
                          value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
         helper.make_node("Add", ["flat", "ones"], ["y"])],
        [("x", ["N", 2, 3])], [("y", ["N", 6])],
        [("zero", np.array(0, np.int64)), ("axes", np.array([0], np.int64)),
         ("minus1", np.array([-1], np.int64)), ("target_c", np.array([1, 6], np.int64))])
    s["pool_norm"] = model(
        [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["n"], epsilon=1e-5),
         helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("GlobalAveragePool", ["p"], ["gp"]),
         helper.make_node("Flatten", ["gp"], ["y"], axis=1)],
        [("x", [1, 2, 4, 4])], [("y", [1, 2])],
        [("g", f32(2)), ("b", f32(2, seed=1)), ("m", f32(2, seed=2)),
         ("v", np.abs(f32(2, seed=3)) + 0.5)])
    sub = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "sub", [],
                            [helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 3])])
    attrs = dict(f=1.5, i=7, s="text", t=numpy_helper.from_array(f32(2)), g=sub,
                 floats=[1.0, 2.0], ints=[1, -2, 3], strings=["a", "bc"],
                 tensors=[numpy_helper.from_array(f32(1))], graphs=[sub])
    s["every_attribute_type"] = model(
        [helper.make_node("AllAttrs", ["x"], ["y"], name="all", domain="com.example", **attrs)],
        [("x", [2, 3])], [("y", [2, 3])], extra_opsets=[("com.example", 1)])
    s["if_subgraph"] = model(
        [helper.make_node("If", ["cond"], ["y"], then_branch=sub, else_branch=sub)],
        [("cond", [], TensorProto.BOOL), ("x", [2, 3])], [("y", [2, 3])])
    s["int_types"] = model(
        [helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT32),
         helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT)],
        [("x", [4])], [("y", [4])],
        [("unused64", np.array([1, 2], np.int64)), ("unused8", np.array([1, -2], np.int8)),
         ("unusedb", np.array([True, False]))])
    w = raw_tensor("w", [2, 3], b"")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    e = w.external_data.add()
    e.key, e.value = "location", "weights.bin"
    s["external_data"] = model([helper.make_node("Add", ["x", "w"], ["y"])],
                               [("x", [2, 3])], [("y", [2, 3])], [("w", w)])
    # hostile twins of tests/integration/test_hostile.py
    s["hostile_truncated"] = s["conv_relu"][: len(s["conv_relu"]) * 2 // 3]
    s["hostile_empty"] = b""
    s["hostile_random"] = np.random.default_rng(1234).integers(0, 256, 512, np.uint8).tobytes()
    s["hostile_dangling"] = model([helper.make_node("Add", ["x", "ghost"], ["y"])],
                                  [("x", [2, 3])], [("y", [2, 3])])
    s["hostile_cycle"] = model([helper.make_node("Add", ["x", "b"], ["a"]),
                                helper.make_node("Relu", ["a"], ["b"]),
                                helper.make_node("Relu", ["a"], ["y"])],
                               [("x", [2, 3])], [("y", [2, 3])])
    huge = raw_tensor("w", [1 << 40], b"\0" * 16)
    s["hostile_huge_initializer"] = model([helper.make_node("Add", ["x", "w"], ["y"])],
                                          [("x", [2, 3])], [("y", [2, 3])], [("w", huge)])
    over = raw_tensor("w", [1 << 32, 1 << 32, 16], b"")
    s["hostile_overflow_initializer"] = model([helper.make_node("Add", ["x", "w"], ["y"])],
                                              [("x", [2, 3])], [("y", [2, 3])], [("w", over)])
    s["hostile_overflow_input"] = model([helper.make_node("Relu", ["x"], ["y"])],
                                        [("x", [1 << 32, 1 << 32, 16])],
                                        [("y", [1 << 32, 1 << 32, 16])])
    s["hostile_opset11"] = model([helper.make_node("Relu", ["x"], ["y"])],
                                 [("x", [2, 3])], [("y", [2, 3])], opset=11)
    s["hostile_einsum"] = model([helper.make_node("Einsum", ["x", "x"], ["y"], name="mystery",
                                                  equation="ij,ij->ij")],
                                [("x", [2, 3])], [("y", [2, 3])])
    s["hostile_nested_200"] = wire.nested_if_model(200)
    return s


HDR = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"


def npy_bytes(header, data, version=(1, 0), magic=b"\x93NUMPY", header_len=None):
    text = header.encode("latin1")
    hl_size = 2 if version[0] == 1 else 4
    pad = (64 - (len(magic) + 2 + hl_size + len(text) + 1) % 64) % 64
    text += b" " * pad + b"\n"
    n = len(text) if header_len is None else header_len
    return magic + bytes(version) + n.to_bytes(hl_size, "little") + text + data


def npy_seeds():
    s = {}
    arrays = {"f4": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3),
              "u1": np.arange(6, dtype=np.uint8).reshape(3, 2),
              "i1": np.arange(-3, 3, dtype=np.int8),
              "i4": np.arange(12, dtype=np.int32).reshape(2, 2, 3),
              "i8": np.array([-1, 0, 1 << 40], np.int64),
              "b1": np.array([True, False, True]),
              "scalar_f4": np.array(3.5, np.float32),
              "empty_f4": np.zeros((0, 3), np.float32),
              "rank8_f4": np.ones((1, 2, 1, 2, 1, 1, 2, 1), np.float32)}
    for name, a in arrays.items():
        from io import BytesIO
        buf = BytesIO()
        np.save(buf, a)
        s[f"v1_{name}"] = buf.getvalue()
    f4 = arrays["f4"].tobytes()
    s["v2_f4"] = npy_bytes(HDR % ("<f4", "False", "(2, 3)"), f4, version=(2, 0))
    s["v3_f4"] = npy_bytes(HDR % ("<f4", "False", "(2, 3)"), f4, version=(3, 0))
    s["byteorder_free_u1"] = npy_bytes(HDR % ("|u1", "False", "(4,)"), b"\1\2\3\4")
    s["big_endian_f4"] = npy_bytes(HDR % (">f4", "False", "(2, 3)"), f4)
    s["key_order"] = npy_bytes("{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", f4)
    s["hostile_bad_magic"] = npy_bytes(HDR % ("<f4", "False", "(2, 3)"), f4, magic=b"\x93NUMPZ")
    s["hostile_bad_header"] = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3",
                                        f4)
    s["hostile_header_oversized"] = npy_bytes(HDR % ("<f4", "False", "(2, 3)"), f4,
                                              version=(2, 0), header_len=0x7FFFFFF0)
    s["hostile_header_past_eof"] = npy_bytes(HDR % ("<f4", "False", "(2, 3)"), f4,
                                             header_len=60000)
    s["hostile_truncated_data"] = npy_bytes(HDR % ("<f4", "False", "(2, 3)"), f4[:20])
    s["hostile_huge_shape"] = npy_bytes(HDR % ("<f4", "False", "(1099511627776,)"), f4)
    # 2^32 * 2^32 * 16 wraps to 0 in 64 bits: a parser that multiplies blindly sees an
    # empty array, which the (absent) data then matches
    s["hostile_overflow_shape"] = npy_bytes(
        HDR % ("<f4", "False", "(4294967296, 4294967296, 16)"), b"")
    s["hostile_negative_dim"] = npy_bytes(HDR % ("<f4", "False", "(-1, 6)"), f4)
    for descr in ("<c8", "<U4", "|O", "<f8", "<f2"):
        s[f"hostile_dtype_{descr[1:]}"] = npy_bytes(HDR % (descr, "False", "(2, 3)"), bytes(96))
    s["hostile_dtype_structured"] = npy_bytes(
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", bytes(24))
    s["hostile_fortran"] = npy_bytes(HDR % ("<f4", "True", "(2, 3)"), f4)
    s["hostile_version_9"] = npy_bytes(HDR % ("<f4", "False", "(2, 3)"), f4, version=(9, 0))
    return s


def write(directory, seeds, ext):
    os.makedirs(directory, exist_ok=True)
    for f in os.listdir(directory):
        if not f.startswith("found-"):
            os.remove(os.path.join(directory, f))
    for name, data in seeds.items():
        with open(os.path.join(directory, f"{name}.{ext}"), "wb") as f:
            f.write(data)


if __name__ == "__main__":

    write(ONNX_DIR, onnx_seeds(), "onnx")
    write(NPY_DIR, npy_seeds(), "npy")
    total = sum(os.path.getsize(os.path.join(d, f)) for d in (ONNX_DIR, NPY_DIR)
                for f in os.listdir(d))
    print(f"corpus: {len(os.listdir(ONNX_DIR))} onnx, {len(os.listdir(NPY_DIR))} npy, "
          f"{total} bytes")
