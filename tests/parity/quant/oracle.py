#!/usr/bin/python3
"""PyTorch 1.13's FX post-training quantization of one parity case, as plain numbers.

  /usr/bin/python3 tests/parity/quant/oracle.py --model M --backend fbgemm|qnnpack|x86
      --variant default|minmax --workdir DIR [--self-test]

For one (model, backend, variant) the oracle runs prepare_fx with the backend's
1.13 BackendConfig and qconfig mapping, one forward per calibration sample in file
order (calib[i:i+1]), then convert_to_reference_fx, and writes DIR/M.B.V/:
  oracle.json  per quantized activation, keyed by its ONNX tensor name: dtype, scale,
               zero point, the FX node it comes from (and "aliases": other names the
               same value may carry once BatchNorm is folded); per quantized weight,
               keyed by its ONNX initializer name: dtype, per-axis or not, the ONNX axis,
               scales, zero points, whether it is stored transposed in ONNX (a Linear
               on a 4-D input exports as MatMul with W^T) and whether BatchNorm was
               folded into it
  oracle.npz   "int/NAME": the integer weights (torch.int_repr) in the ONNX layout;
               "bias/NAME": the reference module's float bias (folded, where BN was)
  ref.npy      the reference model's output on each probe sample, stacked
  float.npy    the float model's output on the probe
  qconfig.json the --config file that means the same mapping to qhost (minmax only)
Backend x86 is get_x86_backend_config() (Debian's 1.13 ships backend_config/x86.py,
not exported from the package: identical to fbgemm's patterns and dtype configs) with
get_default_qconfig_mapping("onednn") and the onednn quantized engine, as qhost's x86
plugin defines it (docs/backend-config.md); ConvTranspose gets the per-tensor weights
qhost uses (1.13's prepare_fx rejects onednn's per-channel ConvTranspose qconfig).
Variants: "default" is the backend's default qconfig mapping (HistogramObserver
activations); "minmax" is that mapping with its global qconfig replaced by
MINMAX_QCONFIG[backend] in every entry that used it (docs/design.md, QCONFIG.json).

Activations are named by value: the FX node feeding each quantize_per_tensor is
evaluated in the calibrated (observed) model on the first probe sample and matched
against every tensor of the float ONNX file evaluated by onnx_eval.py on the same
input; exactly one tensor of the same shape must agree (rel. 1e-4).

ATEN_CPU_CAPABILITY=avx2 is set before torch is imported: HistogramObserver's
search depends on torch.sum's summation order (docs/numerics.md §6.6).
"""
import os
import sys

if "torch" in sys.modules and os.environ.get("ATEN_CPU_CAPABILITY") != "avx2":
    raise RuntimeError("oracle.py must be imported before torch (ATEN_CPU_CAPABILITY=avx2)")
os.environ["ATEN_CPU_CAPABILITY"] = "avx2"

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402
import torch  # noqa: E402
import torch.fx  # noqa: E402
from torch.ao.quantization import QConfig, get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization import observer as obs  # noqa: E402
from torch.ao.quantization.backend_config import (get_fbgemm_backend_config,  # noqa: E402
                                                  get_qnnpack_backend_config)
from torch.ao.quantization.backend_config.x86 import get_x86_backend_config  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402
import onnx_eval  # noqa: E402

BACKENDS = ("fbgemm", "qnnpack", "x86")
VARIANTS = ("default", "minmax")
BACKEND_CONFIGS = {"fbgemm": get_fbgemm_backend_config, "qnnpack": get_qnnpack_backend_config,
                   "x86": get_x86_backend_config}
# get_default_qconfig_mapping's name for each backend, and the quantized engine set
# while the case runs (None: left as it is; Debian's 1.13 has no fbgemm engine).
QCONFIG_MAPPING_NAMES = {"fbgemm": "fbgemm", "qnnpack": "qnnpack", "x86": "onednn"}
ENGINES = {"fbgemm": None, "qnnpack": "qnnpack", "x86": "onednn"}

# The MinMax global qconfig of the "minmax" variant, in QCONFIG.json form: the
# backend default's activation settings with MinMaxObserver instead of
# HistogramObserver, and the default weight observer spelled out.
MINMAX_QCONFIG = {
    "fbgemm": {
        "activation": {"observer": "MinMaxObserver", "dtype": "quint8",
                       "qscheme": "per_tensor_affine", "reduce_range": True},
        "weight": {"observer": "PerChannelMinMaxObserver", "dtype": "qint8",
                   "qscheme": "per_channel_symmetric", "ch_axis": 0, "reduce_range": False},
    },
    "qnnpack": {
        "activation": {"observer": "MinMaxObserver", "dtype": "quint8",
                       "qscheme": "per_tensor_affine", "reduce_range": False},
        "weight": {"observer": "MinMaxObserver", "dtype": "qint8",
                   "qscheme": "per_tensor_symmetric", "reduce_range": False},
    },
    "x86": {
        "activation": {"observer": "MinMaxObserver", "dtype": "quint8",
                       "qscheme": "per_tensor_affine", "reduce_range": False},
        "weight": {"observer": "PerChannelMinMaxObserver", "dtype": "qint8",
                   "qscheme": "per_channel_symmetric", "ch_axis": 0, "reduce_range": False},
    },
}

DTYPES = {"quint8": torch.quint8, "qint8": torch.qint8}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
QSCHEMES = {"per_tensor_affine": torch.per_tensor_affine,
            "per_tensor_symmetric": torch.per_tensor_symmetric,
            "per_channel_affine": torch.per_channel_affine,
            "per_channel_symmetric": torch.per_channel_symmetric}


def cpu_capability():
    """The kernel capability ATen dispatches to ("AVX2" is required): from
    torch.backends.cpu.get_cpu_capability() where it exists (not in 1.13), else from
    the "CPU capability usage" line of torch.__config__.show()."""
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if get is not None:
        return str(get()).upper()
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip().upper()
    return "unknown"


def observer_from_json(spec):
    """QCONFIG.json observer entry -> PyTorch observer constructor."""
    spec = dict(spec)
    cls = getattr(obs, spec.pop("observer"))
    if "dtype" in spec:
        spec["dtype"] = DTYPES[spec["dtype"]]
    if "qscheme" in spec:
        spec["qscheme"] = QSCHEMES[spec["qscheme"]]
    return cls.with_args(**spec)


def qconfig_mapping(backend, variant):
    """Returns (QConfigMapping, QCONFIG.json dict or None)."""
    mapping = get_default_qconfig_mapping(QCONFIG_MAPPING_NAMES[backend])
    if backend == "x86":
        # qhost's x86 default: onednn's mapping with per-tensor ConvTranspose weights
        # (PyTorch 2.x's x86 mapping; 1.13 refuses per-channel ConvTranspose).
        g = mapping.global_qconfig
        transpose = QConfig(activation=g.activation, weight=obs.default_weight_observer)
        for key in list(mapping.object_type_qconfigs):
            if getattr(key, "__name__", str(key)).lower().replace("_", "").startswith("convtranspose"):
                mapping.set_object_type(key, transpose)
    if variant == "default":
        return mapping, None
    spec = MINMAX_QCONFIG[backend]
    new = QConfig(activation=observer_from_json(spec["activation"]),
                  weight=observer_from_json(spec["weight"]))
    old = mapping.global_qconfig
    mapping.set_global(new)
    replaced = 0
    for key, qc in list(mapping.object_type_qconfigs.items()):
        if qc is old:
            mapping.set_object_type(key, new)
            replaced += 1
    if replaced == 0:
        raise RuntimeError("the default mapping has no entry sharing its global qconfig")
    return mapping, {"global": spec}


class Recorder(torch.fx.Interpreter):
    """Runs a GraphModule and keeps every node's value."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        out = super().run_node(n)
        self.values[n.name] = out
        return out


def attr_value(gm, arg):
    """A quantize_per_tensor argument: a get_attr node or a Python number."""
    if isinstance(arg, torch.fx.Node):
        if arg.op != "get_attr":
            raise RuntimeError(f"qparam from {arg.op} node {arg.name}")
        obj = gm
        for part in arg.target.split("."):
            obj = getattr(obj, part)
        return obj
    return arg


def quantized_activations(ref):
    """{fx node name: (scale, zero point, dtype name)} of the reference graph."""
    acts = {}
    for n in ref.graph.nodes:
        if n.op == "call_function" and n.target == torch.quantize_per_channel:
            raise RuntimeError(f"per-channel activation quantization at {n.name}")
        if not (n.op == "call_function" and n.target == torch.quantize_per_tensor):
            continue
        src, scale, zp, dtype = n.args[:4]
        entry = (float(attr_value(ref, scale)), int(attr_value(ref, zp)), DTYPE_NAMES[dtype])
        if src.name in acts and acts[src.name] != entry:
            raise RuntimeError(f"FX node {src.name} quantized twice: {acts[src.name]} and {entry}")
        acts[src.name] = entry
    return acts


def match_tensor(value, onnx_values, fx_name, exclude):
    """The one ONNX tensor (not an initializer) that holds value."""
    v = value.detach().numpy()
    tol = 1e-4 * max(float(np.max(np.abs(v))), 1e-3)
    hits = [k for k, a in onnx_values.items()
            if k not in exclude and a.shape == v.shape and a.dtype == v.dtype
            and float(np.max(np.abs(a - v))) <= tol]
    if len(hits) != 1:
        raise RuntimeError(f"FX node {fx_name}: {len(hits)} ONNX tensors match its value: {hits}")
    return hits[0]


def bn_aliases(graph, name):
    """If name is a BatchNormalization output fed by a Conv/Gemm, the conv's output:
    a backend that folds BN may keep either name for the folded conv's output."""
    producers = {o: n for n in graph.node for o in n.output}
    bn = producers.get(name)
    if bn is None or bn.op_type != "BatchNormalization":
        return []
    conv = producers.get(bn.input[0])
    return [bn.input[0]] if conv is not None and conv.op_type in ("Conv", "Gemm") else []


def weight_modules(ref):
    """[(module path as in the float model, reference module)] of quantized weights."""
    from torch.ao.nn.intrinsic import _FusedModule
    out = []
    mods = dict(ref.named_modules())
    for name, mod in mods.items():
        if not hasattr(mod, "get_quantized_weight"):
            continue
        parent, _, leaf = name.rpartition(".")
        base = parent if leaf == "0" and isinstance(mods.get(parent), _FusedModule) else name
        out.append((base, mod))
    return out


def locate_weight(base, float_state, graph, inits):
    """ONNX initializer name for module base's weight, and whether it is stored
    transposed; the module's own name first, then a MatMul operand equal to W^T."""
    key = f"{base}.weight"
    if key in inits:
        return key, False
    w = float_state[key].numpy()
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in inits:
            if np.array_equal(inits[node.input[1]], w.T):
                return node.input[1], True
    raise RuntimeError(f"no ONNX initializer holds {key}")


def run_case(model_name, backend, variant, workdir):
    """Writes the oracle files of one case into workdir/case; returns that directory."""
    torch.set_num_threads(1)
    case_dir = os.path.join(workdir, f"{model_name}.{backend}.{variant}")
    os.makedirs(case_dir, exist_ok=True)
    onnx_path, calib_path, probe_path = models.write(workdir, model_name)
    calib = torch.from_numpy(np.load(calib_path))
    probe = torch.from_numpy(np.load(probe_path))
    float_model = models.build(model_name)[0]
    float_state = {k: v.clone() for k, v in float_model.state_dict().items()}

    if ENGINES[backend] is not None:
        torch.backends.quantized.engine = ENGINES[backend]
    mapping, config_json = qconfig_mapping(backend, variant)
    bc = BACKEND_CONFIGS[backend]()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        prepared = prepare_fx(copy.deepcopy(float_model), mapping, (calib[0:1],), backend_config=bc)
        with torch.no_grad():
            for i in range(calib.shape[0]):
                prepared(calib[i:i + 1])
            recorder = Recorder(copy.deepcopy(prepared))
            recorder.run(probe[0:1])
            ref = convert_to_reference_fx(prepared, backend_config=bc)
            ref_out = torch.cat([ref(probe[i:i + 1]) for i in range(probe.shape[0])])
            float_out = torch.cat([float_model(probe[i:i + 1]) for i in range(probe.shape[0])])

    onnx_model = onnx.load(onnx_path)
    graph = onnx_model.graph
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    onnx_values = onnx_eval.evaluate(onnx_model, {"input": probe[0:1].numpy()})
    activations = {}
    for fx_name, (scale, zp, dtype) in quantized_activations(ref).items():
        name = match_tensor(recorder.values[fx_name], onnx_values, fx_name, inits)
        if name in activations:
            raise RuntimeError(f"ONNX tensor {name} matched by FX nodes "
                               f"{activations[name]['fx_node']} and {fx_name}")
        activations[name] = {"fx_node": fx_name, "dtype": dtype, "scale": scale, "zero_point": zp,
                             "aliases": bn_aliases(graph, name)}

    weights, arrays = {}, {}
    for base, mod in weight_modules(ref):
        name, transposed = locate_weight(base, float_state, graph, inits)
        q = mod.get_quantized_weight()
        per_channel = mod.weight_qscheme in (torch.per_channel_affine, torch.per_channel_symmetric)
        scales = mod.weight_scale.reshape(-1).tolist()
        zps = [int(z) for z in mod.weight_zero_point.reshape(-1).tolist()]
        ints = q.int_repr().numpy()
        axis = int(mod.weight_axis) if per_channel else None
        if transposed:
            ints = ints.T
            axis = None if axis is None else 1 - axis
        folded = not np.array_equal(mod.weight.detach().numpy(), float_state[f"{base}.weight"].numpy())
        weights[name] = {"module": base, "dtype": DTYPE_NAMES[q.dtype], "per_channel": per_channel,
                         "axis": axis, "scales": scales, "zero_points": zps,
                         "transposed": transposed, "folded_bn": bool(folded)}
        arrays[f"int/{name}"] = ints
        if mod.bias is not None:
            arrays[f"bias/{name}"] = mod.bias.detach().numpy().astype(np.float32)

    out_name = graph.output[0].name
    if out_name not in activations:
        raise RuntimeError(f"the model output {out_name} is not quantized by PyTorch")
    result = {
        "model": model_name, "backend": backend, "variant": variant,
        "torch_version": torch.__version__, "cpu_capability": cpu_capability(),
        "onnx": os.path.abspath(onnx_path), "calib": os.path.abspath(calib_path),
        "probe": os.path.abspath(probe_path), "output": out_name,
        "activations": activations, "weights": weights,
    }
    with open(os.path.join(case_dir, "oracle.json"), "w") as f:
        json.dump(result, f, indent=1)
    np.savez(os.path.join(case_dir, "oracle.npz"), **arrays)
    np.save(os.path.join(case_dir, "ref.npy"), ref_out.numpy().astype(np.float32))
    np.save(os.path.join(case_dir, "float.npy"), float_out.numpy().astype(np.float32))
    qconfig_path = os.path.join(case_dir, "qconfig.json")
    if config_json is not None:
        with open(qconfig_path, "w") as f:
            json.dump(config_json, f, indent=1)
    elif os.path.exists(qconfig_path):
        os.remove(qconfig_path)
    return case_dir


def load(case_dir):
    """(oracle.json dict, {npz key: array}, ref output, float output) of a case."""
    with open(os.path.join(case_dir, "oracle.json")) as f:
        info = json.load(f)
    with np.load(os.path.join(case_dir, "oracle.npz")) as z:
        arrays = {k: z[k] for k in z.files}
    return (info, arrays, np.load(os.path.join(case_dir, "ref.npy")),
            np.load(os.path.join(case_dir, "float.npy")))


def self_test(case_dir):
    """The extracted numbers, written as a QDQ file by make_qdq.py and evaluated with
    onnx_eval.py, must reproduce PyTorch's reference output on every probe sample.
    Returns (fraction of elements within 1 output step, max |diff| in steps)."""
    import make_qdq
    info, arrays, ref_out, _ = load(case_dir)
    qdq_path = os.path.join(case_dir, "oracle.qdq.onnx")
    make_qdq.write(info, arrays, qdq_path)
    probe = np.load(info["probe"])
    qdq = onnx.load(qdq_path)
    outs = np.concatenate([onnx_eval.evaluate(qdq, {"input": probe[i:i + 1]})[info["output"]]
                           for i in range(probe.shape[0])])
    step = info["activations"][info["output"]]["scale"]
    diff = np.abs(outs.astype(np.float64) - ref_out.astype(np.float64)) / step
    return float(np.mean(diff <= 1.0 + 1e-3)), float(np.max(diff))


def main():
    ap = argparse.ArgumentParser(description="PyTorch FX quantization oracle for one case")
    ap.add_argument("--model", required=True, choices=list(models.MODELS))
    ap.add_argument("--backend", required=True, choices=BACKENDS)
    ap.add_argument("--variant", required=True, choices=VARIANTS)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--self-test", action="store_true",
                    help="check that the extracted numbers reproduce the reference output")
    args = ap.parse_args()
    case_dir = run_case(args.model, args.backend, args.variant, args.workdir)
    info = load(case_dir)[0]
    print(f"{case_dir}: {len(info['activations'])} activations, {len(info['weights'])} weights, "
          f"cpu capability {info['cpu_capability']}")
    if args.self_test:
        agree, worst = self_test(case_dir)
        ok = agree >= 0.999
        print(f"{'PASS' if ok else 'FAIL'} oracle QDQ round trip: {100 * agree:.3f}% within 1 step, "
              f"max {worst:.3g} steps")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
