#!/usr/bin/python3
"""QDQ models for the partition tests, written by hand with onnx.helper so the scales
and the graph's shape are fixed: a stem (conv0 -> relu0) and a residual block
(conv1 -> relu1 -> conv2 -> add with the skip edge from relu0 -> relu2), uint8
activations, int8 per-channel weights and int32 biases at s_in * s_w. The skip edge
reads relu0's quantized value through its own DequantizeLinear.

    python3 partition_models.py OUT_DIR   writes residual.qdq.onnx and x.npy
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

C, H, W = 4, 8, 8


def residual_block(seed=0, batch=1):
    """The model and its output step; batch may be a name (a symbolic batch dimension)."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def q(x, y, scale, zp):
        s = const(f"{y}_scale", np.array(scale, np.float32))
        z = const(f"{y}_zp", np.array(zp, np.uint8))
        nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [y], name=f"{y}_q"))

    def dq(x, y, scale, zp):
        s = const(f"{y}_scale", np.array(scale, np.float32))
        z = const(f"{y}_zp", np.array(zp, np.uint8))
        nodes.append(helper.make_node("DequantizeLinear", [x, s, z], [y], name=f"{y}_dq"))

    def conv(name, x, x_scale, y):
        w = rng.normal(0, 0.3, (C, C, 3, 3)).astype(np.float32)
        w_scale = (np.abs(w).reshape(C, -1).max(axis=1) / 127).astype(np.float32)
        wq = np.clip(np.round(w / w_scale[:, None, None, None]), -127, 127).astype(np.int8)
        b = rng.normal(0, 0.1, C).astype(np.float32)
        b_scale = (x_scale * w_scale).astype(np.float32)
        bq = np.round(b / b_scale).astype(np.int32)
        const(f"{name}_wq", wq)
        const(f"{name}_ws", w_scale)
        const(f"{name}_wz", np.zeros(C, np.int8))
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_wq", f"{name}_ws", f"{name}_wz"],
                                      [f"{name}_w"], name=f"{name}_w_dq", axis=0))
        const(f"{name}_bq", bq)
        const(f"{name}_bs", b_scale)
        const(f"{name}_bz", np.zeros(C, np.int32))
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_bq", f"{name}_bs", f"{name}_bz"],
                                      [f"{name}_b"], name=f"{name}_b_dq", axis=0))
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [y], name=name,
                                      pads=[1, 1, 1, 1], kernel_shape=[3, 3]))

    s_in, s0, s1, s2, s3 = 0.03, 0.02, 0.025, 0.04, 0.03
    q("x", "x_q", s_in, 128)
    dq("x_q", "x_dq", s_in, 128)
    conv("conv0", "x_dq", s_in, "conv0_y")
    nodes.append(helper.make_node("Relu", ["conv0_y"], ["relu0_y"], name="relu0"))
    q("relu0_y", "relu0_q", s0, 0)
    dq("relu0_q", "relu0_dq", s0, 0)
    dq("relu0_q", "skip_dq", s0, 0)
    conv("conv1", "relu0_dq", s0, "conv1_y")
    nodes.append(helper.make_node("Relu", ["conv1_y"], ["relu1_y"], name="relu1"))
    q("relu1_y", "relu1_q", s1, 0)
    dq("relu1_q", "relu1_dq", s1, 0)
    conv("conv2", "relu1_dq", s1, "conv2_y")
    q("conv2_y", "conv2_q", s2, 128)
    dq("conv2_q", "conv2_dq", s2, 128)
    nodes.append(helper.make_node("Add", ["conv2_dq", "skip_dq"], ["add_y"], name="add"))
    nodes.append(helper.make_node("Relu", ["add_y"], ["relu2_y"], name="relu2"))
    q("relu2_y", "y_q", s3, 0)
    dq("y_q", "y", s3, 0)
    graph = helper.make_graph(nodes, "residual_block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, C, H, W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, C, H, W])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="qhost-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, s3


def main():
    out = sys.argv[1]
    model, _ = residual_block()
    onnx.save(model, os.path.join(out, "residual.qdq.onnx"))
    x = np.random.default_rng(1).normal(0, 1, (2, 1, C, H, W)).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x[0])


if __name__ == "__main__":
    main()
