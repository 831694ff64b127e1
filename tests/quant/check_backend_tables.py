#!/usr/bin/python3
"""Cross-check the fbgemm, qnnpack and x86 BackendConfig tables (plugins/common,
plugins/{fbgemm,qnnpack,x86}/backend-config.c) against PyTorch 1.13's own
get_fbgemm_backend_config() / get_qnnpack_backend_config() / get_x86_backend_config()
(backend_config/x86.py, shipped by Debian's 1.13 but not exported from the package) and
get_default_qconfig_mapping(backend), "onednn"'s for x86 (with its one documented
difference: per-tensor ConvTranspose weights, see expected_mapping).

Every PyTorch pattern is mapped to the ONNX op sequence it exports to, or listed as
unsupported with the reason (docs/backend-config.md has the same table). For each ONNX
pattern the C table must have the same observation type, the same
num-tensor-args rule, and the same dtype configs in the same order (dtypes, is_dynamic,
quant_min_lower_bound, quant_max_upper_bound, scale_min_lower_bound); fixed-qparams ops
additionally carry upstream's exact scale / zero point, which must equal 1.13's
FixedQParamsObserver for the op. The default qconfig mapping must agree entry by entry,
including which entries share the global qconfig's observers. Exit 77 without torch."""
import argparse
import json
import subprocess
import sys

try:
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization import QConfig, default_weight_observer
    from torch.ao.quantization.backend_config import (get_fbgemm_backend_config,
                                                      get_qnnpack_backend_config)
    from torch.ao.quantization.backend_config.x86 import get_x86_backend_config
    from torch.ao.quantization.qconfig_mapping import _FIXED_QPARAMS_OP_TO_OBSERVER
except Exception as e:  # pragma: no cover - depends on the machine
    print(f"skip: torch not importable ({e})")
    sys.exit(77)

# PyTorch name (module, functional or method) -> ONNX op sequence.
ONNX = {}
for n in ("1d", "2d", "3d"):
    ONNX.update({
        f"Conv{n}": ["Conv"], f"conv{n}": ["Conv"], f"ConvReLU{n}": ["Conv", "Relu"],
        f"ConvBn{n}": ["Conv", "BatchNormalization"],
        f"ConvBnReLU{n}": ["Conv", "BatchNormalization", "Relu"],
        f"ConvTranspose{n}": ["ConvTranspose"], f"conv_transpose{n}": ["ConvTranspose"],
        f"BatchNorm{n}": ["BatchNormalization"],
        f"BNReLU{n}": ["BatchNormalization", "Relu"], f"AdaptiveAvgPool{n}": ["GlobalAveragePool"],
        f"adaptive_avg_pool{n}": ["GlobalAveragePool"], f"AvgPool{n}": ["AveragePool"],
        f"avg_pool{n}": ["AveragePool"], f"MaxPool{n}": ["MaxPool"], f"max_pool{n}": ["MaxPool"],
    })
ONNX.update({
    "Linear": ["Gemm"], "linear": ["Gemm"], "LinearReLU": ["Gemm", "Relu"],
    "LinearBn1d": ["Gemm", "BatchNormalization"],
    "ReLU": ["Relu"], "relu": ["Relu"], "relu_": ["Relu"],
    "add": ["Add"], "mul": ["Mul"], "matmul": ["MatMul"], "cat": ["Concat"],
    "LeakyReLU": ["LeakyRelu"], "leaky_relu": ["LeakyRelu"], "Hardswish": ["HardSwish"],
    "hardswish": ["HardSwish"], "Dropout": ["Dropout"], "dropout": ["Dropout"],
    "Hardsigmoid": ["HardSigmoid"], "hardsigmoid": ["HardSigmoid"], "hardsigmoid_": ["HardSigmoid"],
    "Sigmoid": ["Sigmoid"], "sigmoid": ["Sigmoid"], "sigmoid_": ["Sigmoid"],
    "Softmax": ["Softmax"], "Tanh": ["Tanh"], "tanh": ["Tanh"], "tanh_": ["Tanh"],
    "Hardtanh": ["Clip"], "hardtanh": ["Clip"], "hardtanh_": ["Clip"], "ReLU6": ["Clip"],
    "relu6": ["Clip"], "clamp": ["Clip"], "Identity": ["Identity"], "interpolate": ["Resize"],
    "flatten": ["Flatten"], "mean": ["ReduceMean"], "transpose": ["Transpose"],
    "permute": ["Transpose"], "squeeze": ["Squeeze"], "squeeze_": ["Squeeze"],
    "unsqueeze": ["Unsqueeze"], "unsqueeze_": ["Unsqueeze"], "reshape": ["Reshape"],
    "view": ["Reshape"], "shape": ["Shape"], "size": ["Shape"],
})
UNSUPPORTED = {
    "ELU": "no qhost kernel (Elu)", "elu": "no qhost kernel (Elu)",
    "InstanceNorm1d": "no qhost kernel", "InstanceNorm2d": "no qhost kernel",
    "InstanceNorm3d": "no qhost kernel", "instance_norm": "no qhost kernel",
    "group_norm": "no qhost kernel", "PReLU": "no qhost kernel",
    "repeat": "no qhost kernel (Tile)", "repeat_interleave": "no ONNX op",
    "stack": "no ONNX op", "floordiv": "integer op", "contiguous": "no ONNX op",
    "detach": "no ONNX op", "detach_": "no ONNX op", "resize_": "no ONNX op",
    "GRUCell": "dynamic only", "LSTMCell": "dynamic only", "RNNCell": "dynamic only",
    "LSTM": "dynamic only", "Embedding": "weight-only", "EmbeddingBag": "weight-only",
}
# Patterns qhost adds for ONNX's spelling of F.linear on N-d inputs.
ONNX_ONLY = {("MatMul", "Add"): ("Gemm",), ("MatMul", "Add", "Relu"): ("Gemm", "Relu")}
DTYPES = {torch.quint8: 2, torch.qint8: 3, torch.float: 1, torch.float16: 10}
QSCHEMES = {torch.per_tensor_affine: 0, torch.per_channel_affine: 1,
            torch.per_tensor_symmetric: 2, torch.per_channel_symmetric: 3}
DIFF, SHARE, NOT_OBSERVED = 0, 1, 2

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def name_of(x):
    return getattr(x, "__name__", str(x))


def forward(pattern):
    """1.13's reversed tuple format -> forward list of PyTorch names."""
    if isinstance(pattern, tuple):
        last, *rest = pattern
        return [n for p in reversed(rest) for n in forward(p)] + forward(last)
    return [name_of(pattern)]


def constraint(dwc):
    if dwc is None or dwc.dtype is None:
        return None
    out = {"dtype": DTYPES.get(dwc.dtype, str(dwc.dtype))}
    for k in ("quant_min_lower_bound", "quant_max_upper_bound", "scale_min_lower_bound"):
        if getattr(dwc, k) is not None:
            out[k] = getattr(dwc, k)
    return out


def torch_dtype_config(dc):
    bias = None if dc.bias_dtype is None else {"dtype": DTYPES.get(dc.bias_dtype)}
    return {"is_dynamic": bool(dc.is_dynamic),
            "input": constraint(dc.input_dtype_with_constraints),
            "output": constraint(dc.output_dtype_with_constraints),
            "weight": constraint(dc.weight_dtype_with_constraints), "bias": bias}


def strip_fixed(c, fixed):
    """Remove upstream's fixed-qparams additions, checking them against 1.13's observer."""
    if not isinstance(c, dict) or "scale_exact" not in c:
        return c
    c = dict(c)
    want = (fixed.scale, fixed.zero_point, fixed.quant_min, fixed.quant_max)
    got = (c.pop("scale_exact"), c.pop("zero_point_exact"), c.pop("quant_min_lower_bound"),
           c.pop("quant_max_upper_bound"))
    if tuple(float(x) for x in got) != tuple(float(x) for x in want):
        fail(f"fixed qparams {got} != FixedQParamsObserver {want}")
    return c


def check_patterns(backend, bc, dump):
    ours = {tuple(p["ops"]): p for p in dump["patterns"]}
    groups, unsupported = {}, 0
    for pattern, cfg in bc.configs.items():
        names = forward(pattern)
        if any(n in UNSUPPORTED for n in names):
            unsupported += 1
            continue
        missing = [n for n in names if n not in ONNX]
        if missing:
            fail(f"{backend}: no ONNX mapping for PyTorch pattern {names}")
            continue
        seq = tuple(op for n in names for op in ONNX[n])
        groups.setdefault(seq, []).append((names, cfg))
    print(f"{backend}: {len(bc.configs)} PyTorch patterns: {sum(map(len, groups.values()))} map to "
          f"{len(groups)} ONNX patterns, {unsupported} unsupported; C table has {len(ours)}")
    expected = set(groups) | set(ONNX_ONLY)
    if set(ours) != expected:
        fail(f"{backend}: C patterns differ: extra {sorted(set(ours) - expected)}, "
             f"missing {sorted(expected - set(ours))}")
    for seq, members in groups.items():
        p = ours.get(seq)
        if p is None:
            continue
        fixed = _FIXED_QPARAMS_OP_TO_OBSERVER.get(members[0][1].pattern)
        fixed = fixed() if fixed is not None else None
        for names, cfg in members:
            obs = cfg.observation_type.value
            by_args = cfg._num_tensor_args_to_observation_type
            want_obs = NOT_OBSERVED if seq == ("Shape",) else obs  # upstream tensor-info op
            if p["observation_type"] != want_obs:
                fail(f"{backend} {seq}: observation {p['observation_type']} != {want_obs} ({names})")
            if by_args:
                want = [by_args[i].value for i in range(3)]
                if p["by_tensor_args"] != want:
                    fail(f"{backend} {seq}: by_tensor_args {p['by_tensor_args']} != {want}")
            elif p["by_tensor_args"] is not None:
                fail(f"{backend} {seq}: by_tensor_args set, PyTorch has none ({names})")
            want_dcs = [torch_dtype_config(dc) for dc in cfg.dtype_configs]
            got_dcs = []
            for dc in p["dtype_configs"]:
                got_dcs.append({k: (strip_fixed(dc[k], fixed) if fixed else dc[k])
                                for k in ("is_dynamic", "input", "output", "weight", "bias")})
            if got_dcs != want_dcs:
                fail(f"{backend} {seq}: dtype configs\n  C:       {got_dcs}\n  PyTorch: {want_dcs}")
            if fixed is None and any("scale_exact" in json.dumps(dc) for dc in p["dtype_configs"]):
                fail(f"{backend} {seq}: exact qparams on a non-fixed op")
        fold = len(seq) > 1 and seq[1] == "BatchNormalization" and seq[0] in ("Conv", "ConvTranspose", "Gemm")
        if (p["fuser"] == 1) != fold:
            fail(f"{backend} {seq}: fuser {p['fuser']} but BN folding is {fold}")
    for seq, like in ONNX_ONLY.items():
        if seq in ours and like in ours and ours[seq]["dtype_configs"] != ours[like]["dtype_configs"]:
            fail(f"{backend} {seq}: dtype configs differ from {like}")


def observer_matches(spec, ctr, what):
    obs = ctr()
    cls = type(obs).__name__
    if cls == "ReuseInputObserver":
        ok = spec["kind"] == "shared"
    elif cls == "FixedQParamsObserver":
        ok = (spec["kind"] == "fixed" and spec["scale"] == float(obs.scale) and
              spec["zero_point"] == int(obs.zero_point) and spec.get("quant_min") == obs.quant_min and
              spec.get("quant_max") == obs.quant_max)
    else:
        ok = (spec["kind"] == "quantize" and spec["observer"] == cls and
              spec["dtype"] == DTYPES[obs.dtype] and spec["qscheme"] == QSCHEMES[obs.qscheme] and
              spec["reduce_range"] == bool(obs.reduce_range) and
              ("quant_min" not in spec or not obs.has_customized_qrange or
               (spec["quant_min"], spec["quant_max"]) == (obs.quant_min, obs.quant_max)))
        if "PerChannel" in cls:
            ok = ok and spec["ch_axis"] == obs.ch_axis
    if not ok:
        fail(f"{what}: C {spec} does not describe {cls} {obs.__dict__.get('dtype')}")


def expected_mapping(backend):
    """The default qconfig mapping each C table must equal. x86: onednn's, except that
    ConvTranspose takes a per-tensor MinMax weight, because 1.13's
    prepare_fx rejects onednn's per-channel qconfig for ConvTranspose and PyTorch 2.x's
    x86 mapping uses per-tensor there; the activation stays the global's object."""
    if backend != "x86":
        return get_default_qconfig_mapping(backend)
    qm = get_default_qconfig_mapping("onednn")
    transpose = QConfig(activation=qm.global_qconfig.activation, weight=default_weight_observer)
    for key in list(qm.object_type_qconfigs):
        if name_of(key).lower().replace("_", "").startswith("convtranspose"):
            qm.set_object_type(key, transpose)
    return qm


def check_qconfig(backend, dump):
    qm = expected_mapping(backend)
    entries = {e["key"]: e for e in dump["default_qconfig"] if e["match"] == 1}
    glob = [e for e in dump["default_qconfig"] if e["match"] == 0]
    if len(glob) != 1:
        fail(f"{backend}: {len(glob)} global entries")
        return
    g = qm.global_qconfig
    observer_matches(glob[0]["activation"], g.activation, f"{backend} global activation")
    observer_matches(glob[0]["weight"], g.weight, f"{backend} global weight")
    seen = set()
    for key, qc in qm.object_type_qconfigs.items():
        name = name_of(key)
        if name in ("LayerNorm", "layer_norm"):
            continue  # no LayerNormalization kernel; docs/backend-config.md
        onnx = ONNX.get(name)
        if onnx is None or len(onnx) != 1:
            fail(f"{backend}: qconfig key {name} has no ONNX op")
            continue
        op = onnx[0]
        e = entries.get(op)
        if op in seen:
            continue
        seen.add(op)
        if e is None:
            if qc is not g:
                fail(f"{backend}: no entry for {op} ({name}), PyTorch has a non-global qconfig")
            continue
        observer_matches(e["activation"], qc.activation, f"{backend} {op} activation")
        if e["weight"] is not None:
            observer_matches(e["weight"], qc.weight, f"{backend} {op} weight")
        if e["activation_is_global"] != (qc.activation is g.activation):
            fail(f"{backend} {op}: activation shared with global is {e['activation_is_global']}")
        if e["weight_is_global"] != (qc.weight is g.weight) and e["weight"] is not None:
            fail(f"{backend} {op}: weight shared with global is {e['weight_is_global']}")
    extra = set(entries) - seen
    if extra:
        fail(f"{backend}: C entries PyTorch does not have: {sorted(extra)}")
    print(f"{backend}: default qconfig: {len(entries)} object_type entries checked")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--plugin-dir", required=True)
    args = ap.parse_args()
    for backend, get in (("fbgemm", get_fbgemm_backend_config), ("qnnpack", get_qnnpack_backend_config),
                         ("x86", get_x86_backend_config)):
        out = subprocess.run([args.dump, f"{args.plugin_dir}/libqhost-{backend}.so"],
                             capture_output=True, text=True, check=True).stdout
        dump = json.loads(out)
        check_patterns(backend, get(), dump)
        check_qconfig(backend, dump)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("tables agree with PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
