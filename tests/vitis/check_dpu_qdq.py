#!/usr/bin/python3
"""Checks a QDQ ONNX file against example_vitis's DPU rules, reading only the file.

  check_dpu_qdq.py MODEL.qdq.onnx     exit 0 when every rule holds, 1 with one line per
                                      violation

Rules (pos is p in scale = 2^-p; a unit's output pos is the QuantizeLinear after it,
after its fused Relu/LeakyRelu/Clip, or after an average pool's factor Mul):
  form        every QuantizeLinear/DequantizeLinear: scalar power-of-two scale, zero
              point 0 of type int8
  fused       no QuantizeLinear between a Conv/Gemm/MatMul (or Add) and a Relu it feeds
  shift_cut   Conv/Gemm/MatMul: wpos + ipos - opos in [0, 16]
  shift_bias  wpos + ipos - bpos in [min(0, shift_cut - 16), 16]
  concat      every input pos and the output pos equal
  pool        MaxPool/AveragePool/GlobalAveragePool: input pos == output pos
  add         max(ipos) - min(ipos) <= 15 and min(ipos) - opos in [-15, 15]
  mul         ipos0 + ipos1 - opos in [0, 32]
  leaky_relu  alpha * 256 is an integer
  hard_sigmoid alpha 2731/16384, beta 3 * 2731/16384; ipos in [0, 15], opos >= 7,
              14 + ipos - opos >= 0
  avgpool     a quantized average pool is followed by a Mul by the DPU's factor
              (none when the factor is 1)
"""
import math
import sys

import numpy as np

FUSABLE = ("Relu", "LeakyRelu", "Clip")


def avgpool_factor(kh, kw):
    """The DPU's rescale (vai_q_onnx simulate_dpu), computed independently of C."""
    table = {(3, 3): 9 * 7 / 64, (5, 5): 25 * 10 / 256, (6, 6): 36 * 7 / 256,
             (7, 7): 49 * 21 / 1024, (14, 14): 196 * 21 / 4096}
    if (kh, kw) in table:
        return table[(kh, kw)]
    rec = kh * kw
    best, best_diff = 1.0, math.inf
    for n in range(7 + math.ceil(math.log2(rec))):
        k = float(np.rint(2 ** n / rec))
        d = abs(k / 2 ** n - 1 / rec)
        if d < best_diff:
            best, best_diff = k / 2 ** n * rec, d
    return best


def pos_of_scale(s):
    m, e = math.frexp(float(s))
    return 1 - e if m == 0.5 else None


class Model:
    def __init__(self, path):
        import onnx
        from onnx import numpy_helper
        self.m = onnx.load(path)
        # the window of a GlobalAveragePool needs its input's shape: infer them all
        g = onnx.shape_inference.infer_shapes(self.m).graph
        self.inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.nodes = list(g.node)
        self.producer = {o: n for n in g.node for o in n.output}
        self.consumers = {}
        for n in g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
        self.shapes = {}
        for vi in list(g.value_info) + list(g.input) + list(g.output):
            self.shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]

    def attr(self, n, name, default=None):
        from onnx import helper
        for a in n.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def in_pos(self, n, i):
        """pos of input i of n when a DequantizeLinear feeds it, else None."""
        if i >= len(n.input) or not n.input[i]:
            return None
        p = self.producer.get(n.input[i])
        if p is None or p.op_type != "DequantizeLinear":
            return None
        return pos_of_scale(self.inits[p.input[1]])

    def sole_user(self, v):
        users = self.consumers.get(v, [])
        return users[0] if len(users) == 1 else None

    def q_pos(self, v):
        u = self.sole_user(v)
        qs = [c for c in self.consumers.get(v, []) if c.op_type == "QuantizeLinear"]
        if len(qs) == 1 and (u is None or u is qs[0]):
            return pos_of_scale(self.inits[qs[0].input[1]])
        return None

    def unit_out(self, n):
        """(pos, last node) of the unit starting at n."""
        p = self.q_pos(n.output[0])
        if p is not None:
            return p, n
        u = self.sole_user(n.output[0])
        if u is not None and (u.op_type in FUSABLE or (u.op_type == "Mul" and "Pool" in n.op_type)):
            return self.q_pos(u.output[0]), u
        return None, n


def check(path):
    m = Model(path)
    bad = []
    for n in m.nodes:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            s = m.inits.get(n.input[1])
            z = m.inits.get(n.input[2]) if len(n.input) > 2 else None
            if s is None or s.size != 1 or pos_of_scale(s.reshape(-1)[0]) is None:
                bad.append(f"form: {n.name}: scale {s} is not a scalar power of two")
            if z is None or z.dtype != np.int8 or z.size != 1 or int(z.reshape(-1)[0]) != 0:
                bad.append(f"form: {n.name}: zero point {z!r} is not int8 0")
    for n in m.nodes:
        op = n.op_type
        if op in ("Conv", "Gemm", "MatMul"):
            i, w = m.in_pos(n, 0), m.in_pos(n, 1)
            o, _ = m.unit_out(n)
            if None in (i, w, o):
                continue
            sc = w + i - o
            if not 0 <= sc <= 16:
                bad.append(f"shift_cut: {n.name}: {w} + {i} - {o} = {sc} outside [0, 16]")
            b = m.in_pos(n, 2)
            if b is not None:
                sb, lo = w + i - b, min(0, sc - 16)
                if not lo <= sb <= 16:
                    bad.append(f"shift_bias: {n.name}: {w} + {i} - {b} = {sb} outside [{lo}, 16]")
        if op in ("Conv", "Gemm", "MatMul", "Add"):
            for q in m.consumers.get(n.output[0], []):
                if q.op_type == "QuantizeLinear":
                    for dq in m.consumers.get(q.output[0], []):
                        for r in m.consumers.get(dq.output[0], []):
                            if r.op_type in FUSABLE:
                                bad.append(f"fused: {n.name}: a Q/DQ pair before {r.op_type} {r.name}")
        if op == "Concat":
            ps = [m.in_pos(n, k) for k in range(len(n.input))] + [m.unit_out(n)[0]]
            if None not in ps and len(set(ps)) != 1:
                bad.append(f"concat: {n.name}: positions {ps} differ")
        if op in ("MaxPool", "AveragePool", "GlobalAveragePool"):
            i, (o, last) = m.in_pos(n, 0), m.unit_out(n)
            if i is not None and o is not None and i != o:
                bad.append(f"pool: {n.name}: input pos {i} != output pos {o}")
            if op != "MaxPool" and i is not None and o is not None:
                if op == "AveragePool":
                    kh, kw = m.attr(n, "kernel_shape")
                else:
                    kh, kw = (m.shapes.get(n.input[0]) or [0, 0, 0, 0])[2:4]
                want = avgpool_factor(kh, kw) if kh and kw else None
                got = 1.0
                if last.op_type == "Mul":
                    got = float(m.inits[last.input[1]].reshape(-1)[0])
                if want is not None and abs(got - want) > 1e-7:
                    bad.append(f"avgpool: {n.name}: {kh}x{kw} factor {got} (want {want})")
        if op == "Add":
            i0, i1 = m.in_pos(n, 0), m.in_pos(n, 1)
            o, _ = m.unit_out(n)
            if None not in (i0, i1, o):
                if max(i0, i1) - min(i0, i1) > 15:
                    bad.append(f"add: {n.name}: shift_read {max(i0, i1)} - {min(i0, i1)} > 15")
                if not -15 <= min(i0, i1) - o <= 15:
                    bad.append(f"add: {n.name}: shift_write {min(i0, i1)} - {o} outside [-15, 15]")
        if op == "Mul":
            i0, i1 = m.in_pos(n, 0), m.in_pos(n, 1)
            o, _ = m.unit_out(n)
            if None not in (i0, i1, o) and not 0 <= i0 + i1 - o <= 32:
                bad.append(f"mul: {n.name}: shift_write {i0} + {i1} - {o} outside [0, 32]")
        if op == "LeakyRelu":
            a = m.attr(n, "alpha", 0.01)
            if a * 256 != round(a * 256):
                bad.append(f"leaky_relu: {n.name}: alpha {a} is not k/256")
        if op == "HardSigmoid":
            i, (o, _) = m.in_pos(n, 0), m.unit_out(n)
            if i is not None and o is not None:
                a, b = m.attr(n, "alpha"), m.attr(n, "beta")
                if not (np.float32(a) == np.float32(2731 / 16384) and np.float32(b) == np.float32(3 * 2731 / 16384)):
                    bad.append(f"hard_sigmoid: {n.name}: alpha {a}, beta {b} are not the DPU's")
                if not (0 <= i <= 15 and o >= 7 and 14 + i - o >= 0):
                    bad.append(f"hard_sigmoid: {n.name}: ipos {i}, opos {o}")
    return bad


def main():
    bad = check(sys.argv[1])
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
