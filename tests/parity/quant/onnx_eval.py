"""A small ONNX interpreter on torch.nn.functional, for the oracle's own use.

The installed onnx (1.12) has no reference evaluator, and the oracle must not lean
on qhost, so this evaluates the few ops the parity models use, keeping every
intermediate tensor: the oracle matches PyTorch FX values against them to name
tensors, and evaluates its own QDQ file (make_qdq.py) to check that the numbers it
extracted reproduce PyTorch's reference model. QuantizeLinear uses PyTorch's
quantize_per_tensor (multiply by the reciprocal of the scale), so a QDQ file built
from PyTorch's qparams reproduces PyTorch bit for bit; an op outside the list is an
error, never a guess.
"""
import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F


def attrs_of(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _conv(x, w, b, a):
    pads = list(a.get("pads", [0] * 4))
    if pads[:2] != pads[2:]:
        raise ValueError(f"asymmetric pads {pads}")
    return F.conv2d(x, w, b, stride=tuple(a.get("strides", [1, 1])), padding=tuple(pads[:2]),
                    dilation=tuple(a.get("dilations", [1, 1])), groups=a.get("group", 1))


def _maxpool(x, a):
    pads = list(a.get("pads", [0] * 4))
    if pads[:2] != pads[2:]:
        raise ValueError(f"asymmetric pads {pads}")
    return F.max_pool2d(x, tuple(a["kernel_shape"]), stride=tuple(a.get("strides", a["kernel_shape"])),
                        padding=tuple(pads[:2]), ceil_mode=bool(a.get("ceil_mode", 0)))


def _gemm(x, w, b, a):
    if a.get("transA", 0):
        x = x.t()
    if a.get("transB", 0):
        w = w.t()
    y = float(a.get("alpha", 1.0)) * (x @ w)
    if b is not None:
        y = y + float(a.get("beta", 1.0)) * b
    return y


def _channel_view(t, x, axis):
    """Reshape a 1-D per-channel parameter to broadcast along axis of x."""
    if t.dim() == 0:
        return t
    shape = [1] * x.dim()
    shape[axis % x.dim()] = t.numel()
    return t.reshape(shape)


def _quantize(x, scale, zp):
    if scale.numel() != 1:
        raise ValueError("per-axis QuantizeLinear is not used by the parity models")
    dtype = torch.quint8 if zp.dtype == torch.uint8 else torch.qint8
    q = torch.quantize_per_tensor(x, float(scale.reshape(())), int(zp.reshape(())), dtype)
    return q.int_repr()


def _dequantize(q, scale, zp, a):
    axis = a.get("axis", 1)
    s = _channel_view(scale.float(), q, axis)
    z = _channel_view(zp.to(torch.int32), q, axis)
    return (q.to(torch.int32) - z).to(torch.float32) * s


def _bn(x, scale, bias, mean, var, a):
    return F.batch_norm(x, mean, var, scale, bias, training=False, eps=float(a.get("epsilon", 1e-5)))


def _softmax(x, a):
    return torch.softmax(x, dim=a.get("axis", -1))


def _hardsigmoid(x, a):
    alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    return torch.clamp(alpha * x + beta, 0.0, 1.0)


def _clip(i, a):
    """Clip-11+ takes its bounds as optional inputs, Clip-6 as attributes."""
    lo = i[1] if len(i) > 1 and i[1] is not None else a.get("min")
    hi = i[2] if len(i) > 2 and i[2] is not None else a.get("max")
    x = i[0]
    if lo is not None:
        x = torch.maximum(x, torch.as_tensor(lo, dtype=x.dtype))
    if hi is not None:
        x = torch.minimum(x, torch.as_tensor(hi, dtype=x.dtype))
    return x


def _flatten(x, a):
    axis = a.get("axis", 1) % x.dim() if x.dim() else 0
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


OPS = {
    "Conv": lambda i, a: _conv(i[0], i[1], i[2] if len(i) > 2 else None, a),
    "BatchNormalization": lambda i, a: _bn(*i[:5], a),
    "Relu": lambda i, a: torch.relu(i[0]),
    "Clip": _clip,
    "MaxPool": lambda i, a: _maxpool(i[0], a),
    "Concat": lambda i, a: torch.cat(i, dim=a["axis"]),
    "Add": lambda i, a: i[0] + i[1],
    "Sub": lambda i, a: i[0] - i[1],
    "Mul": lambda i, a: i[0] * i[1],
    "Div": lambda i, a: i[0] / i[1],
    "MatMul": lambda i, a: torch.matmul(i[0], i[1]),
    "Gemm": lambda i, a: _gemm(i[0], i[1], i[2] if len(i) > 2 else None, a),
    "GlobalAveragePool": lambda i, a: i[0].mean(dim=tuple(range(2, i[0].dim())), keepdim=True),
    "Flatten": lambda i, a: _flatten(i[0], a),
    "Reshape": lambda i, a: i[0].reshape([int(d) for d in i[1].tolist()]),
    "Sigmoid": lambda i, a: torch.sigmoid(i[0]),
    "Tanh": lambda i, a: torch.tanh(i[0]),
    "HardSigmoid": lambda i, a: _hardsigmoid(i[0], a),
    "Softmax": lambda i, a: _softmax(i[0], a),
    "Identity": lambda i, a: i[0],
    "Transpose": lambda i, a: i[0].permute(*a["perm"]),
    "ReduceMean": lambda i, a: i[0].mean(dim=tuple(a["axes"]), keepdim=bool(a.get("keepdims", 1))),
    "Pow": lambda i, a: torch.pow(i[0], i[1]),
    "Sqrt": lambda i, a: torch.sqrt(i[0]),
    "Erf": lambda i, a: torch.erf(i[0]),
    "Constant": lambda i, a: torch.from_numpy(onnx.numpy_helper.to_array(a["value"]).copy()),
    "QuantizeLinear": lambda i, a: _quantize(*i[:3]),
    "DequantizeLinear": lambda i, a: _dequantize(i[0], i[1], i[2], a),
}


def evaluate(model, feeds):
    """Runs an onnx.ModelProto (or a path) on {input name: numpy array}; returns
    {tensor name: numpy array} for every graph input, initializer and node output."""
    if isinstance(model, str):
        model = onnx.load(model)
    env = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
           for t in model.graph.initializer}
    for name, value in feeds.items():
        env[name] = torch.from_numpy(np.ascontiguousarray(value))
    with torch.no_grad():
        for node in model.graph.node:
            if node.op_type not in OPS:
                raise ValueError(f"onnx_eval: op {node.op_type} (node {node.name}) is not supported")
            ins = [env[n] if n else None for n in node.input]
            out = OPS[node.op_type](ins, attrs_of(node))
            if len(node.output) != 1:
                raise ValueError(f"onnx_eval: node {node.name} has {len(node.output)} outputs")
            env[node.output[0]] = out
    return {k: v.numpy() for k, v in env.items()}
