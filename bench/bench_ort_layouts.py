#!/usr/bin/python3
"""One zoo model in ONNX Runtime's QDQ layouts and as a shared-bias export: qhost x86 and
ONNX Runtime on each file.

  bench_ort_layouts.py --qhost PATH [--model resnet50] [--threads 1,2] [--runs 10]
                       [--warmup 2] [--rounds 3] [--workdir DIR] [--calib-samples 8] [--json]

From bench_zoo.py's export of the model and qhost's x86 QDQ file of it (both cached in
--workdir) the script writes:
  qhost       qhost's own file: int8 weights behind DequantizeLinear, float biases (the
              form of PyTorch's reference model);
  ort_int8w   the same qparams in ONNX Runtime's layout (quantize_static's default): every
              Conv and Gemm bias an int32 at sx * sw behind DequantizeLinear;
  ort_floatw  ort_int8w with every weight a float initializer behind QuantizeLinear ->
              DequantizeLinear (ONNX Runtime's AddQDQPairToWeight form);
and, for the shared-bias claim, two float twins of the model whose Conv biases are all zero:
  distinct    one zero initializer per Conv;
  shared      one zero tensor per channel count, read through Identity nodes (what
              PyTorch's exporter makes of identical initializers);
each quantized by qhost for x86 on the same calibration data. The script checks that the
twins' QDQ files have the same nodes by op type (no Identity, no QuantizeLinear on a bias)
and the same int8 weights, and fails when they differ.

Per file and thread count: units and MACs on x86's kernels, qhost x86 and ONNX Runtime
latency (median of --rounds alternating round medians, each --runs runs), their ratio.
Exit 0 when every file ran and the twins agree, 1 otherwise, 2 usage.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
from bench_fp32_vs_ort import cpu_info, int_list, run_json  # noqa: E402
from bench_int8_vs_ort import ensure_qdq_model  # noqa: E402
from bench_zoo import MODELS, boundary_transposes, coverage_of, export  # noqa: E402


def producers(graph):
    return {o: n for n in graph.node for o in n.output}


def ort_layout(src, dst, float_weights):
    """qhost's QDQ file src rewritten into ONNX Runtime's layout at dst; the number of
    biases and weights rewritten."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.load(src)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    prod = producers(g)

    def arr(name):
        return numpy_helper.to_array(inits[name])

    def add(name, a):
        t = numpy_helper.from_array(np.asarray(a), name)
        g.initializer.append(t)
        inits[name] = t
        return name

    biases = weights = 0
    for n in list(g.node):
        if n.op_type not in ("Conv", "Gemm") or len(n.input) < 3 or not n.input[2]:
            continue
        xdq, wdq = prod.get(n.input[0]), prod.get(n.input[1])
        if not xdq or not wdq or xdq.op_type != "DequantizeLinear" or wdq.op_type != "DequantizeLinear":
            continue
        sx = float(arr(xdq.input[1]))
        sw = arr(wdq.input[1]).astype(np.float32).reshape(-1)
        if n.input[2] in inits:
            b = arr(n.input[2]).astype(np.float32)
            bs = (np.float32(sx) * sw).astype(np.float32)
            bs = np.broadcast_to(bs, b.shape).copy() if bs.size == 1 else bs
            base = n.name or n.output[0]
            bq = add(f"{base}/bias_q", np.round(b / bs).astype(np.int32))
            g.node.append(helper.make_node("DequantizeLinear", [bq, add(f"{base}/bias_s", bs),
                                                                add(f"{base}/bias_z", np.zeros(bs.shape, np.int32))],
                                           [f"{base}/bias_dq"], name=f"{base}/bias_DQ", axis=0))
            n.input[2] = f"{base}/bias_dq"
            biases += 1
        if float_weights and wdq.input[0] in inits:
            wq = arr(wdq.input[0])
            zw = arr(wdq.input[2]) if len(wdq.input) > 2 and wdq.input[2] else np.zeros_like(sw, wq.dtype)
            axis = next((a.i for a in wdq.attribute if a.name == "axis"), 1)
            shape = [1] * wq.ndim
            if sw.size > 1:
                shape[axis] = sw.size
            wf = ((wq.astype(np.float32) - zw.astype(np.float32).reshape(shape)) * sw.reshape(shape)).astype(np.float32)
            base = n.name or n.output[0]
            wname = add(f"{base}/weight_f", wf)
            q = helper.make_node("QuantizeLinear", [wname, wdq.input[1]] + list(wdq.input[2:3]),
                                 [f"{base}/weight_q"], name=f"{base}/weight_Q", axis=axis)
            g.node.append(q)
            wdq.input[0] = f"{base}/weight_q"
            weights += 1
    # initializers nothing reads any more (the int8 weights of the float form, the float biases)
    used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    m.graph.CopyFrom(sorted_graph(g))
    onnx.checker.check_model(m)
    onnx.save(m, dst)
    return biases, weights


def sorted_graph(g):
    """g with its nodes in an order where every node follows its inputs' producers."""
    import onnx
    known = {i.name for i in g.input} | {t.name for t in g.initializer} | {""}
    left, order = list(g.node), []
    while left:
        ready = [n for n in left if all(i in known for i in n.input)]
        if not ready:
            raise ValueError("the rewritten graph has a cycle or an unknown input")
        for n in ready:
            order.append(n)
            known.update(n.output)
        left = [n for n in left if n not in ready]
    out = onnx.GraphProto()
    out.CopyFrom(g)
    del out.node[:]
    out.node.extend(order)
    return out


def zero_bias_twins(src, distinct, shared):
    """Two float twins of src with every Conv bias zero: distinct initializers, and one per
    channel count read through Identity nodes. The number of Conv biases."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    convs = 0
    for path, share in ((distinct, False), (shared, True)):
        m = onnx.load(src)
        g = m.graph
        inits = {t.name: t for t in g.initializer}
        zeros, convs = {}, 0
        for n in g.node:
            if n.op_type != "Conv" or len(n.input) < 3 or n.input[2] not in inits:
                continue
            c = int(np.prod(inits[n.input[2]].dims))
            if share:
                if c not in zeros:
                    zeros[c] = f"shared_zero_{c}"
                    g.initializer.append(numpy_helper.from_array(np.zeros(c, np.float32), zeros[c]))
                ident = f"{n.name or n.output[0]}/bias_identity"
                g.node.append(helper.make_node("Identity", [zeros[c]], [ident], name=ident))
                n.input[2] = ident
            else:
                name = f"{n.name or n.output[0]}/zero_bias"
                g.initializer.append(numpy_helper.from_array(np.zeros(c, np.float32), name))
                n.input[2] = name
            convs += 1
        used = {i for n in g.node for i in n.input}
        keep = [t for t in g.initializer if t.name in used]
        del g.initializer[:]
        g.initializer.extend(keep)
        m.graph.CopyFrom(sorted_graph(g))
        onnx.checker.check_model(m)
        onnx.save(m, path)
    return convs


def qdq_signature(path):
    """(op types with counts, the int8 weights of every conv in node order) of a QDQ file."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    g = onnx.load(path).graph
    inits = {t.name: t for t in g.initializer}
    prod = producers(g)
    ops = {}
    for n in g.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    weights = []
    for n in g.node:
        if n.op_type == "Conv":
            d = prod.get(n.input[1])
            name = d.input[0] if d is not None and d.op_type == "DequantizeLinear" else n.input[1]
            weights.append(numpy_helper.to_array(inits[name]) if name in inits else np.array([]))
    return ops, weights


def twins_agree(distinct_qdq, shared_qdq):
    """None when the twins' QDQ files match, else why not."""
    import numpy as np
    (ops_a, w_a), (ops_b, w_b) = qdq_signature(distinct_qdq), qdq_signature(shared_qdq)
    if ops_a != ops_b:
        return f"op counts differ: distinct {ops_a}, shared {ops_b}"
    if len(w_a) != len(w_b) or any(a.dtype != b.dtype or not np.array_equal(a, b) for a, b in zip(w_a, w_b)):
        return "the quantized conv weights differ"
    return None


def main():
    ap = argparse.ArgumentParser(description="ONNX Runtime's QDQ layouts and a shared-bias export: qhost x86 vs ORT")
    ap.add_argument("--qhost", required=True)
    ap.add_argument("--ort-dir", default=os.path.join(ROOT, "tests", "ort"))
    ap.add_argument("--model", default="resnet50", choices=MODELS)
    ap.add_argument("--threads", type=int_list, default=[1, 2])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calib-samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", required=True, help="exports and files are made and kept here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.runs < 1 or args.rounds < 1 or args.warmup < 0 or args.calib_samples < 1:
        ap.error("--runs, --rounds, --calib-samples must be positive, --warmup non-negative")
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    node = shutil.which("node")
    ort_js = os.path.join(args.ort_dir, "ort_bench.js")
    if node is None or not os.path.isdir(os.path.join(args.ort_dir, "node_modules", "onnxruntime-node")):
        say("ONNX Runtime (node, onnxruntime-node in tests/ort) is required: sh tools/deps.sh --tests")
        return 2
    cpu = cpu_info()
    say(f"CPU: {cpu['model']} ({cpu['cores']} logical cores); "
        + " ".join(f"{f}={'yes' if v else 'no'}" for f, v in cpu["flags"].items()))
    load_before = os.getloadavg()
    os.makedirs(args.workdir, exist_ok=True)
    wd, m = args.workdir, args.model
    qargs = types.SimpleNamespace(qhost=args.qhost, quant_backend="x86", simulate_avx2=False,
                                  calib_samples=args.calib_samples, seed=args.seed)
    onnx_path, x_path = export(wd, m, 224, say)
    qdq, _rep, err = ensure_qdq_model(qargs, wd, m, onnx_path, x_path, say)
    if err:
        say(f"FAIL quantize {m}: {err}")
        return 1
    files = {"qhost": qdq}
    for name, fw in (("ort_int8w", False), ("ort_floatw", True)):
        files[name] = os.path.join(wd, f"{m}.x86.{name}.qdq.onnx")
        nb, nw = ort_layout(qdq, files[name], fw)
        say(f"{name}: {nb} biases as int32 behind DequantizeLinear, {nw} weights as float behind Q -> DQ")
    problems = []
    twins = {}
    for name in ("distinct", "shared"):
        twins[name] = os.path.join(wd, f"{m}_zb_{name}.onnx")
    n = zero_bias_twins(onnx_path, twins["distinct"], twins["shared"])
    say(f"zero-bias twins: {n} convs")
    for name, path in twins.items():
        stem = os.path.basename(path)[:-5]
        q, _r, err = ensure_qdq_model(qargs, wd, stem, path, x_path, say)
        if err:
            problems.append(f"quantize {name} twin: {err}")
            continue
        files[f"zero_bias_{name}"] = q
    if len(twins) == 2 and "zero_bias_distinct" in files and "zero_bias_shared" in files:
        why = twins_agree(files["zero_bias_distinct"], files["zero_bias_shared"])
        say(f"shared-bias twin against the distinct one: {'same QDQ form' if why is None else why}")
        if why:
            problems.append(f"twins: {why}")
    rows = []
    for t in args.threads:
        for name, path in files.items():
            common = ["--threads", str(t), "--warmup", str(args.warmup), "--runs", str(args.runs)]
            cmds = {"qhost": [args.qhost, "bench", path, "--input", x_path, "--no-fp32", "--backend", "x86"]
                    + common + ["--json"], "ort": [node, ort_js, path, x_path] + common}
            rounds = {k: [] for k in cmds}
            for i in range(args.rounds):
                for side, cmd in cmds.items():
                    out, err = run_json(cmd)
                    if err:
                        problems.append(f"{name} {side} threads={t}: {err}")
                    else:
                        rounds[side].append(out)
            med = {k: statistics.median(r["median_ms"] for r in v) if v else None for k, v in rounds.items()}
            cov = coverage_of(rounds["qhost"][-1] if rounds["qhost"] else None, boundary_transposes(path))
            rows.append({"file": name, "threads": t, "qhost_ms": med["qhost"], "ort_ms": med["ort"],
                         "ratio": med["qhost"] / med["ort"] if med["qhost"] and med["ort"] else None,
                         "coverage": cov})
            say(f"measured {name} threads={t}")
    load_after = os.getloadavg()
    if args.json:
        json.dump({"cpu": cpu, "model": m, "rows": rows, "problems": problems, "load_before": load_before,
                   "load_after": load_after}, sys.stdout, indent=1)
        print()
    else:
        print(f"\n{m}: qhost x86 and ONNX Runtime on the same file, median of {args.rounds} round medians "
              f"of {args.runs} runs")
        print(f"{'file':<20}{'thr':>4}{'units':>10}{'MACs':>8}{'qhost ms':>10}{'ORT ms':>9}{'qhost/ORT':>11}")
        for r in rows:
            c = r["coverage"] or {}
            units = f"{c.get('plugin_units', '?')}/{c.get('units', '?')}"
            mac = f"{100 * c['plugin_mac_share']:.1f}%" if c.get("plugin_mac_share") is not None else "n/a"
            fmt = (lambda v: "n/a" if v is None else f"{v:.2f}")
            print(f"{r['file']:<20}{r['threads']:>4}{units:>10}{mac:>8}{fmt(r['qhost_ms']):>10}"
                  f"{fmt(r['ort_ms']):>9}{fmt(r['ratio']):>11}")
        print(f"load average (1/5/15 min): before {' '.join(f'{v:.2f}' for v in load_before)}, "
              f"after {' '.join(f'{v:.2f}' for v in load_after)}")
        print("problems: " + ("; ".join(problems) if problems else "none"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
